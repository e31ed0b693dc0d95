"""Fixed schemas of the fact tables, so that a rule's predicate meets the same columns and
types on every capture — even an empty one. Documented in ``docs/facts.md``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import polars as pl

if TYPE_CHECKING:
    from polars._typing import PolarsDataType  # a dtype class (pl.String) or instance

EVIDENCE_ENTRY = pl.Struct(
    {
        "source": pl.String,
        "frame": pl.Int64,
        "line": pl.Int64,
        "ts": pl.Float64,
        "what": pl.String,
    }
)
"""One piece of evidence: the file, its frame or log line, the timestamp, and what it shows
(``facts.model.evidence``)."""
EVIDENCE = pl.List(EVIDENCE_ENTRY)
"""A row's evidence, in reading order: a list column from the facts to the findings (the
``events`` table builds it with polars expressions, the other tables from their rows)."""

# ECS-style flow columns (network.community_id, source.*, destination.*), on every table a
# rule can report from, so findings carry them.
_FLOW = {
    "community_id": pl.String,
    "client_ip": pl.String,
    "client_port": pl.Int64,
    "server_ip": pl.String,
    "server_port": pl.Int64,
}

_STREAM_COMMON = {
    "session_id": pl.String,
    "session_inferred": pl.Boolean,
    "stream": pl.String,
    "stream_label": pl.String,
    "opened_by": pl.String,
    "id_scheme": pl.String,
    "counter_scope": pl.String,
    **_FLOW,
}

TABLE_SCHEMAS: dict[str, dict[str, PolarsDataType]] = {
    "sessions": {
        "session_id": pl.String,
        "session_inferred": pl.Boolean,
        "session_source": pl.String,
        "protocol_version": pl.String,
        "id_scheme": pl.String,
        "counter_scope": pl.String,
        "streams": pl.Int64,
        "resumes": pl.Int64,
        "data_events": pl.Int64,
        "silent_live_gaps": pl.Int64,
        "resumable_streams": pl.Int64,
        "unjudged_streams": pl.Int64,
        "unjudged": pl.String,
        "stream": pl.String,
        "stream_label": pl.String,
        "opened_by": pl.String,
        "first": pl.String,
        "last": pl.String,
        "count": pl.Int64,
        "ts": pl.Float64,
        "evidence": EVIDENCE,
        **_FLOW,
    },
    "streams": {
        **_STREAM_COMMON,
        "response_stream": pl.String,
        "response_label": pl.String,
        "kind": pl.String,
        "method": pl.String,
        "target": pl.String,
        "status": pl.Int64,
        "head_captured": pl.Boolean,
        "last_event_id": pl.String,
        "resumes_stream": pl.String,
        "connection": pl.Int64,
        "community_id": pl.String,
        "request_frame": pl.Int64,
        "response_frame": pl.Int64,
        "source": pl.String,
        "first_ts": pl.Float64,
        "last_ts": pl.Float64,
        "events": pl.Int64,
        "data_events": pl.Int64,
        "first_id": pl.String,
        "last_id": pl.String,
        "complete": pl.Boolean,
        "end_reason": pl.String,
        "missing_spans": pl.Int64,
        "missing_bytes": pl.Int64,
        "not_judged": pl.String,
        "no_store": pl.Boolean,
        "trailing_bytes": pl.Int64,
        "id_outliers": pl.Int64,
        "first_outlier": pl.String,
        "evidence": EVIDENCE,
    },
    "events": {
        "session_id": pl.String,
        "stream": pl.String,
        "response_stream": pl.String,
        "position": pl.Int64,
        "id": pl.String,
        "id_field": pl.String,
        "event": pl.String,
        "kind": pl.String,
        "data_bytes": pl.Int64,
        "rpc_method": pl.String,
        "rpc_id": pl.String,
        "source": pl.String,
        "frame_first": pl.Int64,
        "frame_last": pl.Int64,
        "ts_first": pl.Float64,
        "ts_last": pl.Float64,
        "offset_start": pl.Int64,
        "offset_end": pl.Int64,
        "id_order": pl.String,
        "previous_id": pl.String,
        "session_inferred": pl.Boolean,
        "stream_label": pl.String,
        "opened_by": pl.String,
        "response_label": pl.String,
        "id_scheme": pl.String,
        "counter_scope": pl.String,
        "evidence": EVIDENCE,
        **_FLOW,
    },
    "resumes": {
        **_STREAM_COMMON,
        "response_stream": pl.String,
        "response_label": pl.String,
        "last_event_id": pl.String,
        "successor": pl.String,
        "resumes_stream": pl.String,
        "status": pl.Int64,
        "is_event_stream": pl.Boolean,
        "data_events": pl.Int64,
        "first_event_id": pl.String,
        "successor_dropped": pl.Boolean,
        "dropped_by": pl.String,
        "gap_signal": pl.String,
        "first": pl.String,
        "last": pl.String,
        "count": pl.Int64,
        "evidence_complete": pl.Boolean,
        "missing_bytes": pl.Int64,
        "incomplete": pl.String,
        "verdict_if_faulty": pl.String,
        "protocol_version": pl.String,
        "replay_start": pl.String,
        "replayed_duplicates": pl.Int64,
        "later_events_known": pl.Boolean,
        "successor_delivered_later": pl.Boolean,
        "empty_replay": pl.Boolean,
        "empty_how": pl.String,
        "crossed_streams": pl.Int64,
        "crossed_sessions": pl.Int64,
        "crossed_first": pl.String,
        "crossed_session": pl.String,
        "bd_last_written": pl.String,
        "continues_after_bd": pl.Boolean,
        "cursor_attempt": pl.Int64,
        "resume_storm": pl.Boolean,
        "cursorless_get_after": pl.Boolean,
        "reissued": pl.Boolean,
        "client_adjusted": pl.Boolean,
        "last_seen_id": pl.String,
        "adjusted_first": pl.String,
        "adjusted_count": pl.Int64,
        "request_frame": pl.Int64,
        "ts": pl.Float64,
        "evidence": EVIDENCE,
    },
    "gaps": {
        "gap_id": pl.Int64,
        **_STREAM_COMMON,
        "response_stream": pl.String,
        "response_label": pl.String,
        "location": pl.String,
        "detected_by": pl.String,
        "first": pl.String,
        "last": pl.String,
        "count": pl.Int64,
        "before_id": pl.String,
        "after_id": pl.String,
        "last_event_id": pl.String,
        "status": pl.Int64,
        "signal": pl.String,
        "signal_late": pl.Boolean,
        "evidence_complete": pl.Boolean,
        "missing_spans": pl.Int64,
        "missing_bytes": pl.Int64,
        "incomplete": pl.String,
        "cause": pl.String,
        "client_reissued": pl.Boolean,
        "reissue_possible": pl.Boolean,
        "client_continued": pl.Boolean,
        "verdict": pl.String,
        "ts": pl.Float64,
        "ts_after": pl.Float64,
        "evidence": EVIDENCE,
    },
    "signals": {
        "session_id": pl.String,
        "stream": pl.String,
        "response_stream": pl.String,
        "kind": pl.String,
        "first": pl.String,
        "last": pl.String,
        "valid": pl.Boolean,
        "position": pl.Int64,
        "source": pl.String,
        "frame": pl.Int64,
        "ts": pl.Float64,
    },
    "requests": {
        "session_id": pl.String,
        "connection": pl.Int64,
        "exchange": pl.Int64,
        "rpc_method": pl.String,
        "rpc_id": pl.String,
        "source": pl.String,
        "frame": pl.Int64,
        "ts": pl.Float64,
        "status": pl.Int64,
        "response_complete": pl.Boolean,
    },
    "disagreements": {
        **_STREAM_COMMON,
        "response_stream": pl.String,
        "event_id": pl.String,
        "kind": pl.String,  # log-only | capture-only
        "evidence_complete": pl.Boolean,
        "ts": pl.Float64,
        "evidence": EVIDENCE,
    },
}


def frame(table: str, rows: list[dict[str, Any]] | dict[str, list[Any]]) -> pl.DataFrame:
    """Rows (a list of dicts, missing keys become null) or columns (a dict of equally long
    lists) as a DataFrame with the table's fixed schema. Built column by column: polars
    reads a list of dicts row by row, and a list of evidence lists entry by entry (seconds
    for a partition's 100,000 sessions), where :func:`evidence_column` needs one group_by."""
    return rows_frame(TABLE_SCHEMAS[table], rows)


def rows_frame(
    schema: Mapping[str, PolarsDataType], rows: list[dict[str, Any]] | dict[str, list[Any]]
) -> pl.DataFrame:
    """:func:`frame` with the columns of ``schema``."""
    if isinstance(rows, list):
        if not rows:  # a table without rows: its schema only (a small scan has several)
            return pl.DataFrame(schema=schema)
        rows = {name: [r.get(name) for r in rows] for name in schema}
    columns = [
        evidence_column(rows[name]).alias(name)
        if dtype == EVIDENCE
        else pl.Series(name, rows[name], dtype=dtype)
        for name, dtype in schema.items()
    ]
    return pl.DataFrame(columns)


_ENTRY_FIELDS = ("source", "frame", "line", "ts", "what")


def evidence_column(lists: Sequence[Sequence[Mapping[str, object]] | None]) -> pl.Series:
    """A column of evidence lists (:data:`EVIDENCE`, entries as ``facts.model.evidence``
    makes them; ``None`` for a null row): the entries as flat columns beside their row
    number, grouped back into one list per row."""
    if not any(lists):  # no entry: the empty lists and nulls as they are
        return _with_nulls(pl.repeat([], len(lists), dtype=EVIDENCE, eager=True), lists)
    rows: list[int] = []
    flat: dict[str, list[Any]] = {name: [] for name in _ENTRY_FIELDS}
    for n, entries in enumerate(lists):
        if not entries:
            continue
        for entry in entries:
            rows.append(n)
            for name, values in flat.items():
                values.append(entry.get(name))
    inner = EVIDENCE_ENTRY.to_schema()
    grouped = (
        pl.DataFrame({"row": rows, **flat}, schema={"row": pl.Int64, **inner})
        .group_by("row", maintain_order=True)
        .agg(pl.struct(*inner).alias("evidence"))
    )
    column = (
        pl.DataFrame({"row": pl.int_range(len(lists), dtype=pl.Int64, eager=True)})
        .join(grouped, on="row", how="left", maintain_order="left")
        .get_column("evidence")
    )
    return _with_nulls(column.fill_null(pl.lit([], dtype=EVIDENCE)), lists)


def _with_nulls(column: pl.Series, lists: Sequence[object | None]) -> pl.Series:
    """``column`` (as long as ``lists``) null where ``lists`` holds ``None``. Never
    ``pl.Series(lists, dtype=EVIDENCE)``: polars builds a list-of-struct column from Python
    one row at a time (7 s for 200,000 empty lists; a log partition's streams)."""
    if any(entries is None for entries in lists):
        null = pl.Series([entries is None for entries in lists], dtype=pl.Boolean)
        column = pl.select(pl.when(null).then(None).otherwise(column)).to_series()
    return column.alias("evidence")
