"""The sessions of a partition (docs/profile.md, "Sessions and streams"): each exchange names its
session at ingest (:mod:`sse_forensics.evidence.sessions`); here they become one
:class:`~.model.SessionRecord` each, with the protocol era the session negotiated — from
the exchanges table with polars, whatever the number of exchanges."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import polars as pl

from sse_forensics.facts.model import ExchangeRecord, SessionRecord
from sse_forensics.ingest.logs.files import rotation_key

ExchangeKey = tuple[int, int]


@dataclass(frozen=True, slots=True)
class PostTime:
    """When a POST of a session began and its response ended; ``line`` is where an access
    log wrote it ((rotation order of the file, line): lines are written as responses end),
    None for a captured POST."""

    start: float | None
    end: float | None
    line: tuple[Any, ...] | None  # (rotation_key of the file, line number)


@dataclass(slots=True)
class SessionTable:
    """A partition's sessions, one row each in first-seen order: ``session_id,
    session_inferred, session_source, protocol_version`` (:data:`BASE_SCHEMA`). A
    :class:`~.model.SessionRecord` is made only for a session asked for (those of the
    exchanges judged one by one), never one per session of the partition."""

    frame: pl.DataFrame

    def records(self, ids: Iterable[str]) -> dict[str, SessionRecord]:
        """Records of the sessions ``ids`` names, in table order."""
        wanted = pl.Series("session_id", list(set(ids)), dtype=pl.String)
        mine = self.frame.filter(pl.col("session_id").is_in(wanted.implode(), nulls_equal=True))
        return {
            s: SessionRecord(s, inferred, how, version)
            for s, inferred, how, version in mine.iter_rows()
        }


BASE_SCHEMA = {
    "session_id": pl.String,
    "session_inferred": pl.Boolean,
    "session_source": pl.String,
    "protocol_version": pl.String,
}


def session_table(
    exchanges: pl.DataFrame, dropped: set[ExchangeKey]
) -> tuple[SessionTable, dict[str, list[PostTime]]]:
    """(the sessions, session id → its POSTs).

    A session is described by its first exchange in (connection, index) order; its era by
    the first exchange that showed one (an ``initialize`` answer or request, or the
    ``MCP-Protocol-Version`` header). ``dropped``: log exchanges a capture already holds.
    POSTs are listed for the sessions with a stream or a resume only: the judgements ask
    about a stream's session (``requests.RequestIndex.post_after``)."""
    # Only the columns read here are sorted (a partition's exchanges hold ~45).
    ordered = exchanges.select(_SESSION_COLUMNS).sort("conn_id", "index")
    first = ordered.group_by("session", maintain_order=True).agg(
        pl.col("session_inferred").first(),
        pl.col("session_how").first(),
        pl.col("protocol_version").filter(pl.col("protocol_version").fill_null("") != "").first(),
    )
    sessions = SessionTable(first.rename(dict(zip(first.columns, BASE_SCHEMA, strict=True))))
    streamed = ordered.filter(
        pl.col("event_stream") | pl.col("last_event_id").is_not_null()
    ).select("session")
    posts = ordered.filter(pl.col("req_method").str.to_uppercase() == "POST").join(
        streamed.unique(), on="session", how="semi", nulls_equal=True
    )
    if dropped:
        gone = pl.DataFrame(
            list(dropped), schema={"conn_id": pl.Int64, "index": pl.Int64}, orient="row"
        )
        posts = posts.join(gone, on=["conn_id", "index"], how="anti")
    times: dict[str, list[PostTime]] = {}
    columns = ["session", "req_ts", "body_ts", "req_src", "req_num", "req_kind"]
    rotation: dict[str, tuple[str, int, str]] = {}  # a log file's key, once per file
    for session, start, end, src, num, kind in posts.select(columns).iter_rows():
        line = None
        if kind == "line" and src is not None:
            key = rotation.get(src)
            if key is None:
                key = rotation[src] = rotation_key(src)
            line = (key, num)
        times.setdefault(session, []).append(PostTime(start, end, line))
    return sessions, times


_SESSION_COLUMNS = [
    "conn_id", "index", "session", "session_inferred", "session_how", "protocol_version",
    "req_method", "req_ts", "body_ts", "req_src", "req_num", "req_kind", "event_stream",
    "last_event_id",
]  # fmt: skip


def by_exchange(
    records: list[ExchangeRecord], sessions: dict[str, SessionRecord]
) -> dict[ExchangeKey, SessionRecord]:
    return {(ex.connection_id, ex.index): sessions[ex.session] for ex in records}
