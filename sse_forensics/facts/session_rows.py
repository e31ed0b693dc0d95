"""The ``sessions`` fact table (docs/facts.md): one row per session of the partition, built
as columns. A partition's sessions mostly have no stream (an access log's sessions that
only POSTed): their rows are the session's own columns and zeros, joined in polars. Python
looks at streams (one pass, each stream once) and at the sessions with a silent live gap
only."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import orjson
import polars as pl

from sse_forensics.facts.causes import REPLAY_HANDOFF
from sse_forensics.facts.columns import Key, StreamCounts
from sse_forensics.facts.gaps import GapRecord
from sse_forensics.facts.index import StreamIndex
from sse_forensics.facts.model import Evidence, SessionRecord, StreamRecord, evidence
from sse_forensics.facts.streams import opened_by
from sse_forensics.facts.tables import EVIDENCE, TABLE_SCHEMAS, evidence_column
from sse_forensics.facts.unjudged import unjudged_entries
from sse_forensics.reassembly.http_events import header

FLOW = ("community_id", "client_ip", "client_port", "server_ip", "server_port")
_FLOW_SCHEMA = {name: TABLE_SCHEMAS["sessions"][name] for name in FLOW}


def flow_values(s: StreamRecord | None) -> tuple[Any, ...]:
    """ECS-style flow columns (``FLOW``) of the connection a row is about."""
    conn = s.connection if s is not None else None
    if conn is None:
        return (None, None, None, None, None)
    return (conn.community_id, conn.client[0], conn.client[1], conn.server[0], conn.server[1])


def offers_resumption(s: StreamRecord) -> bool:
    """An event stream whose head the inputs show, offered without ``Cache-Control:
    no-store`` (docs/profile.md, "Gap signalling": the client may resume it)."""
    ex = s.exchange
    return (
        ex.is_event_stream
        and ex.response is not None
        and ex.response.head_captured
        and "no-store" not in (header(ex.response_headers, "cache-control") or "").lower()
    )


def unsignalled_live(g: GapRecord) -> bool:
    """A live jump nothing signalled or recovered that eviction may explain: not capture
    loss, not a replay handoff (the server held the events: ``facts.causes``)."""
    return (
        g.location == "live"
        and g.detected_by == "id-jump"
        and not g.signalled
        and g.reissue is None
        and not g.reissue_possible
        and g.complete
        and g.cause != REPLAY_HANDOFF
    )


def sessions_table(
    base: pl.DataFrame,
    records: dict[str, SessionRecord],
    streams: list[StreamRecord],
    gaps_by_session: dict[str, list[GapRecord]],
    counts: dict[Key, StreamCounts],
    index: StreamIndex,
) -> pl.DataFrame:
    """``base``: the sessions' own columns (``sessions.BASE_SCHEMA``), one row each, in
    table order; ``records``: the sessions judged one by one (their ``id_scheme`` and
    ``counter_scope`` are decided); ``streams`` in time order; ``counts``: events per
    stream."""
    schemes = pl.DataFrame(
        {
            "session_id": list(records),
            "id_scheme": [r.id_scheme for r in records.values()],
            "counter_scope": [r.counter_scope for r in records.values()],
        },
        schema={"session_id": pl.String, "id_scheme": pl.String, "counter_scope": pl.String},
    )
    empty = StreamCounts()
    flows = [flow_values(s) for s in streams]
    per_stream = pl.DataFrame(
        {
            "session_id": [s.session.session_id for s in streams],
            "event_stream": [s.exchange.is_event_stream for s in streams],
            "resume": [s.kind == "resume" for s in streams],
            "data": [
                counts.get((s.exchange.connection_id, s.exchange.index), empty).data
                for s in streams
            ],
            "offering": [offers_resumption(s) for s in streams],
            **{name: [f[n] for f in flows] for n, name in enumerate(FLOW)},
        },
        schema={
            "session_id": pl.String,
            "event_stream": pl.Boolean,
            "resume": pl.Boolean,
            "data": pl.Int64,
            "offering": pl.Boolean,
            **_FLOW_SCHEMA,
        },
    )
    # Each session's first stream (time order) gives the row's flow unless a silent gap does.
    stats = per_stream.group_by("session_id", maintain_order=True).agg(
        pl.col("event_stream").sum().cast(pl.Int64).alias("streams"),
        pl.col("resume").sum().cast(pl.Int64).alias("resumes"),
        pl.col("data").sum().alias("data_events"),
        pl.col("offering").sum().cast(pl.Int64).alias("resumable_streams"),
        *(pl.col(name).first().alias(f"first_{name}") for name in FLOW),
    )
    out = base
    for other in (schemes, stats, _unjudged(streams), _silent(gaps_by_session, index)):
        out = out.join(other, on="session_id", how="left", maintain_order="left", nulls_equal=True)
    zero = pl.lit(0, pl.Int64)
    silent = pl.col("silent_live_gaps").is_not_null()
    return out.select(
        "session_id",
        "session_inferred",
        "session_source",
        "protocol_version",
        pl.col("id_scheme").fill_null("opaque"),
        pl.col("counter_scope").fill_null("unknown"),
        *(
            pl.col(name).fill_null(zero)
            for name in ("streams", "resumes", "data_events", "silent_live_gaps")
        ),
        pl.col("resumable_streams").fill_null(zero),
        pl.col("unjudged_streams").fill_null(zero),
        "unjudged",
        "stream",
        "stream_label",
        "opened_by",
        "first",
        "last",
        "count",
        "ts",
        pl.col("evidence").fill_null(pl.lit([], dtype=EVIDENCE)),
        *(
            pl.when(silent)
            .then(pl.col(f"silent_{name}"))
            .otherwise(pl.col(f"first_{name}"))
            .alias(name)
            for name in FLOW
        ),
    ).select(pl.col(name).cast(dtype) for name, dtype in TABLE_SCHEMAS["sessions"].items())


def _unjudged(streams: list[StreamRecord]) -> pl.DataFrame:
    """``unjudged_streams`` and ``unjudged`` (JSON) of each session with a stream that
    could not be judged: its event streams' continuity first, then its resumes' replays,
    each in time order."""
    judged: dict[str, list[dict[str, Any]]] = defaultdict(list)
    linked: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for s in streams:
        whole, replay = unjudged_entries(s)
        if whole is not None:
            judged[s.session.session_id].append(whole)
        if replay is not None:
            linked[s.session.session_id].append(replay)
    ids = list(dict.fromkeys([*judged, *linked]))
    entries = [judged.get(i, []) + linked.get(i, []) for i in ids]
    return pl.DataFrame(
        {
            "session_id": ids,
            "unjudged_streams": [len(e) for e in entries],
            "unjudged": [orjson.dumps(e).decode() for e in entries],
        },
        schema={"session_id": pl.String, "unjudged_streams": pl.Int64, "unjudged": pl.String},
    )


# The sessions table's columns about its first silent live gap (facts/tables.py).
_SILENT_COLUMNS = (
    *("session_id", "silent_live_gaps", "stream", "stream_label", "opened_by"),
    *("first", "last", "count", "ts"),
)
_SILENT_SCHEMA = {
    **{name: TABLE_SCHEMAS["sessions"][name] for name in _SILENT_COLUMNS},
    **{f"silent_{name}": dtype for name, dtype in _FLOW_SCHEMA.items()},
}


def _silent(gaps_by_session: dict[str, list[GapRecord]], index: StreamIndex) -> pl.DataFrame:
    """The sessions with a silent live gap: how many (one gap seen on both legs of a proxy,
    same stream and range, is one), the first of them and its evidence, with up to three
    streams the session offered for resumption."""
    rows: list[tuple[Any, ...]] = []
    cited: list[list[Evidence]] = []
    for session_id, gaps in gaps_by_session.items():
        silent: list[GapRecord] = []
        seen: set[tuple[str | None, ...]] = set()
        for g in gaps:
            key = (opened_by(g.stream) or g.stream.logical.key, g.first, g.last)
            if unsignalled_live(g) and key not in seen:
                seen.add(key)
                silent.append(g)
        if not silent:
            continue
        g = silent[0]
        ev = g.evidence()
        offering = [s for s in index.of_session(session_id) if offers_resumption(s)]
        for s in offering[:3]:
            what = f"{s.label}: stream offered without Cache-Control: no-store"
            ev.append(evidence(s.response_origin, what))
        before = g.before.origin if g.before is not None else None
        rows.append(
            (
                session_id,
                len(silent),
                g.stream.logical.key,
                g.stream.logical.label,
                opened_by(g.stream),
                g.first,
                g.last,
                g.count,
                before.ts if before is not None else None,
                *flow_values(g.stream),
            )
        )
        cited.append(ev)
    frame = pl.DataFrame(rows, schema=_SILENT_SCHEMA, orient="row")
    return frame.with_columns(evidence_column(cited))
