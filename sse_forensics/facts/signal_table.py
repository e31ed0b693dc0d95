"""The ``signals`` fact table (docs/facts.md, ``signals``): the gap signals the events
carried, ``410`` answers to resumes and streams offered with ``Cache-Control: no-store``,
per stream in time order.

It is a query over the events (:func:`signals_plan`): a scan that keeps no table hands it
to the rules as it is, so the rows exist only as far as a rule that reads the table
filters them (issue 16: a stream of a million signal events held a row each, ~230 MB, and
a copy of every event column of each while the table was built, for a table no packaged
rule reads). A scan that keeps its tables collects it (:func:`signals_table`)."""

from __future__ import annotations

from typing import Any

import polars as pl

from sse_forensics.facts.columns import EventColumns
from sse_forensics.facts.model import StreamRecord
from sse_forensics.facts.tables import TABLE_SCHEMAS
from sse_forensics.reassembly.http_events import header

# What a signal row reads of its event, and which events are signal rows: a signal event
# whose payload was looked at (``sig_valid`` set, true or false).
_READ = (
    "conn_id", "ex_index", "kind", "event", "sig_first", "sig_last", "sig_valid",
    "position", "first_src", "first_num", "first_ts",
)  # fmt: skip
_SIGNAL = (pl.col("kind") == "signal") & pl.col("sig_valid").is_not_null()
# The table's columns, and the two its rows are put in order by (dropped at the end):
# the stream's ``rank`` and ``order`` (0: a carried signal, 1: a 410, 2: no-store).
_SCHEMA = pl.Schema({**TABLE_SCHEMAS["signals"], "rank": pl.Int64, "order": pl.Int64})


def signals_plan(
    streams: list[StreamRecord], cols: EventColumns, frame: pl.DataFrame
) -> pl.LazyFrame:
    """The ``signals`` table as one query: the signal events of ``cols`` (each part of the
    events filtered on its few columns) with their stream's columns from ``frame``
    (:func:`.columns.stream_frame`), and a row per ``410`` and ``no-store`` stream of
    ``streams``, sorted by stream rank, then carried signals by position before the
    stream's 410 and no-store rows."""
    streams_of = frame.lazy().select(
        "conn_id", "ex_index", "rank", "session_id", "stream", "response_stream"
    )
    carried = [
        lazy.select(_READ)
        .filter(_SIGNAL)
        .join(streams_of, on=["conn_id", "ex_index"], how="left")
        .select(
            "session_id",
            "stream",
            "response_stream",
            pl.col("event").alias("kind"),
            pl.col("sig_first").alias("first"),
            pl.col("sig_last").alias("last"),
            pl.col("sig_valid").alias("valid"),
            "position",
            pl.col("first_src").alias("source"),
            pl.col("first_num").alias("frame"),
            pl.col("first_ts").alias("ts"),
            "rank",
            pl.lit(0, pl.Int64).alias("order"),
        )
        .cast(_SCHEMA)
        for _rows, lazy in cols.lazies()
    ]
    added = pl.DataFrame(_stream_rows(streams), schema=_SCHEMA, orient="row").lazy()
    return (
        pl.concat([*carried, added])
        .sort(["rank", "order", "position"], nulls_last=True)
        .select(list(TABLE_SCHEMAS["signals"]))
    )


def signals_table(plan: pl.LazyFrame) -> pl.DataFrame:
    """The ``signals`` table held (a scan that keeps its tables, the timeline's)."""
    return plan.collect()


def _stream_rows(streams: list[StreamRecord]) -> list[dict[str, Any]]:
    """The rows about a stream rather than one of its events: a resume answered ``410``
    (``first``: its ``Last-Event-ID``) and an event stream offered with ``no-store``."""
    extra: list[dict[str, Any]] = []
    for n, s in enumerate(streams):
        base = {
            "session_id": s.session.session_id,
            "stream": s.logical.key,
            "response_stream": s.key,
            "first": None,
            "last": None,
            "valid": True,
            "position": None,
            "rank": n,
        }
        resp = s.response_origin
        where = {
            "source": resp.source if resp else None,
            "frame": resp.number if resp else None,
            "ts": resp.ts if resp else None,
        }
        if s.kind == "resume" and s.status == 410:
            extra.append({**base, **where, "kind": "410", "first": s.last_event_id, "order": 1})
        cache_control = (header(s.exchange.response_headers, "cache-control") or "").lower()
        if s.exchange.is_event_stream and "no-store" in cache_control:
            extra.append({**base, **where, "kind": "no-store", "order": 2})
    return extra
