"""The sessions of a partition (PROFILE.md, "Sessions and streams"): each exchange names its
session at ingest (:mod:`sse_forensics.evidence.sessions`); here they become one
:class:`~.model.SessionRecord` each, with the protocol era the session negotiated — from
the exchanges table with polars, whatever the number of exchanges."""

from __future__ import annotations

import polars as pl

from sse_forensics.facts.model import ExchangeRecord, SessionRecord

ExchangeKey = tuple[int, int]


def session_table(
    exchanges: pl.DataFrame, dropped: set[ExchangeKey]
) -> tuple[dict[str, SessionRecord], dict[str, float]]:
    """(session id → record, session id → start of its latest POST).

    A session is described by its first exchange in (connection, index) order; its era by
    the first exchange that showed one (an ``initialize`` answer or request, or the
    ``MCP-Protocol-Version`` header). ``dropped``: log exchanges a capture already holds."""
    ordered = exchanges.sort("conn_id", "index")
    first = ordered.group_by("session", maintain_order=True).agg(
        pl.col("session_inferred").first(),
        pl.col("session_how").first(),
        pl.col("protocol_version").filter(pl.col("protocol_version").fill_null("") != "").first(),
    )
    sessions = {
        s: SessionRecord(s, inferred, how, version)
        for s, inferred, how, version in first.iter_rows()
    }
    posts = ordered.filter(pl.col("req_method").str.to_uppercase() == "POST")
    if dropped:
        gone = pl.DataFrame(
            list(dropped), schema={"conn_id": pl.Int64, "index": pl.Int64}, orient="row"
        )
        posts = posts.join(gone, on=["conn_id", "index"], how="anti")
    latest = dict(posts.group_by("session").agg(pl.col("req_ts").max()).iter_rows())
    return sessions, latest


def by_exchange(
    records: list[ExchangeRecord], sessions: dict[str, SessionRecord]
) -> dict[ExchangeKey, SessionRecord]:
    return {(ex.connection_id, ex.index): sessions[ex.session] for ex in records}
