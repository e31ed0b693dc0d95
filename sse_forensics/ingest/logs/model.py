"""The normalised log tables: fixed polars schemas, like the fact tables
(``sse_forensics/facts/tables.py``), so the fact layer meets the same columns and types
whatever the log format — even when a log is empty. Documented in ``docs/logs.md``.

IDs (event IDs, ``Last-Event-ID``, session IDs) are strings as they appear on the wire; an
event log's JSON numbers become their decimal text. Times are float epoch seconds, UTC.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

import polars as pl

from sse_forensics.errors import ReadError
from sse_forensics.provenance import EPOCH_MAX

if TYPE_CHECKING:
    from polars._typing import PolarsDataType  # a dtype class (pl.String) or instance

LogKind = Literal["access-text", "access-json", "event-log"]


def valid_epoch(ts: pl.Expr) -> pl.Expr:
    """``ts`` (epoch seconds) where it is an instant from 1970 to the year 9999, else null:
    the line is then reported with an unreadable ts (issue 16: a time the tool cannot print
    costs that line, never the scan)."""
    return pl.when(ts.is_between(0.0, EPOCH_MAX)).then(ts)


def own_strings(df: pl.DataFrame) -> pl.DataFrame:
    """``df`` with its string columns copied into buffers of their own. A polars string
    column cut from a larger one (a filter, a ``group_by`` first, a sort) shares the
    larger one's data buffers and keeps all of them alive: a small table kept for the
    whole scan (a stream's session, a client's first line) would otherwise hold every
    batch it was taken from (issue 9: peak RSS flat in the input size). Concatenating an
    empty string writes each value anew (nulls stay null)."""
    strings = [c for c, t in df.schema.items() if t == pl.String]
    if not strings or not df.height:
        return df
    return df.with_columns(pl.concat_str([pl.col(c), pl.lit("")]).alias(c) for c in strings)


ACCESS_SCHEMA: dict[str, PolarsDataType] = {
    "source": pl.String,  # the file the line came from
    "line": pl.Int64,  # 1-based line number in that file (after decompression)
    "ts": pl.Float64,
    "client_ip": pl.String,
    "method": pl.String,
    "target": pl.String,
    "protocol": pl.String,
    "status": pl.Int64,
    "bytes_sent": pl.Int64,
    "request_time": pl.Float64,  # seconds; None when the format does not log it
    "start": pl.Float64,  # when the request began (epoch s), None when the log cannot tell
    "last_event_id": pl.String,  # request header Last-Event-ID (None when absent or "-")
    "session_id": pl.String,  # request header Mcp-Session-Id
    "sent_session_id": pl.String,  # response header Mcp-Session-Id (set on initialize)
    "content_type": pl.String,  # response Content-Type, when logged
    "user_agent": pl.String,
    "extra": pl.String,  # JSON object text of every other captured field, or None
}
"""One row per request line of an access log."""

EVENT_KINDS = ("emitted", "written", "evicted", "control")
"""``kind`` of a server event-log record: the producer created the event, it was handed to
the socket, it was dropped before being written, or it is a signal (docs/profile.md, "Gap
signalling")."""

SIGNAL_TYPES = ("stream-gap", "resume-gap", "backpressure-disconnect")
"""The gap signals (docs/profile.md, "Gap signalling"; ``facts.signals``), as an event log
names them."""
RESUME_REFUSED = "resume-refused"
INITIALIZE = "initialize"
KEEPALIVE = "keepalive"
CLOSE = "close"
CONTROL_TYPES = (*SIGNAL_TYPES, RESUME_REFUSED, INITIALIZE, KEEPALIVE, CLOSE)
"""The ``control`` record types an event log's records are used for (docs/logs.md): the
signals; the decision to answer a resume ``410 Gone``; ``initialize`` with the negotiated
``protocol_version``; a keep-alive comment written; a server-initiated close. A record of
any other type is kept and counted, and changes nothing."""
CONTROL_ALIASES = {
    "410": RESUME_REFUSED,
    "gone": RESUME_REFUSED,
    "resume-410": RESUME_REFUSED,
    "refused": RESUME_REFUSED,
    "initialized": INITIALIZE,
    "session-initialized": INITIALIZE,
    "ping": KEEPALIVE,
    "keep-alive": KEEPALIVE,
    "comment": KEEPALIVE,
    "heartbeat": KEEPALIVE,
    "stream-close": CLOSE,
    "server-close": CLOSE,
    "closed": CLOSE,
}
"""Other spellings seen in server logs (compared lower-case, ``_`` read as ``-``)."""


def canonical_control_type(name: str) -> str:
    """One ``control_type`` value in the canonical vocabulary (as :func:`control_type`)."""
    spelled = name.strip().lower().replace("_", "-")
    return CONTROL_ALIASES.get(spelled, spelled)


def control_type() -> pl.Expr:
    """``control_type`` in the canonical vocabulary (:data:`CONTROL_TYPES`), or as written
    (lower-case) when it is none of them."""
    spelled = pl.col("control_type").str.strip_chars().str.to_lowercase().str.replace_all("_", "-")
    return spelled.replace(CONTROL_ALIASES)


EVENTS_SCHEMA: dict[str, PolarsDataType] = {
    "source": pl.String,
    "line": pl.Int64,
    "ts": pl.Float64,
    "session": pl.String,  # a null session is filled from other records of the same stream
    "stream": pl.String,
    "event_id": pl.String,
    "kind": pl.String,  # one of EVENT_KINDS (other values are kept as written)
    "control_type": pl.String,  # event.type: a CONTROL_TYPES name (or an alias), or the
    # name of the SSE event a `written` record wrote (a signal's name makes it that signal)
    "first": pl.String,  # event.first (stream-gap)
    "last": pl.String,  # event.last (stream-gap)
    "requested": pl.String,  # event.requested (resume-gap)
    "oldest_retained": pl.String,  # event.oldest_retained (resume-gap)
    "last_written_id": pl.String,  # event.last_written_id (backpressure-disconnect)
    "data": pl.String,  # event.data: the SSE data written ("" for a priming event), JSON text
    "protocol_version": pl.String,  # event.protocol_version (initialize)
    "reason": pl.String,  # why an event was evicted
    "where": pl.String,  # where it was evicted (buffer, replay store, ...)
    "request": pl.String,  # the HTTP exchange that carried the event
    "last_event_id": pl.String,  # Last-Event-ID of that request, when it was a resume
    "extra": pl.String,  # JSON object text of the record's other fields, or None
}
"""One row per record of a server event log (canonical schema in ``docs/logs.md``)."""


def with_start(rows: pl.DataFrame, time_is_start: bool) -> pl.DataFrame:
    """``rows`` (access table) with ``start`` filled where the log tells it: the logged
    time itself when the format logs the request's start (Apache ``%t``), else the time
    the line was logged less ``request_time`` (nginx ``$time_local``/``$msec`` are when
    the response ended: a long stream's line comes after the lines of later requests)."""
    if not rows.height:
        return rows
    derived = pl.col("ts") if time_is_start else pl.col("ts") - pl.col("request_time")
    return rows.with_columns(pl.coalesce(pl.col("start"), derived).alias("start"))


def empty_access() -> pl.DataFrame:
    return pl.DataFrame(schema=ACCESS_SCHEMA)


def empty_events() -> pl.DataFrame:
    return pl.DataFrame(schema=EVENTS_SCHEMA)


@dataclass(slots=True)
class FileStats:
    """What reading one file found: its detected kind and format, how many lines it has,
    how many became rows and how many could not be read."""

    source: str
    kind: LogKind
    format: str
    bytes: int = 0  # decompressed bytes read
    lines: int = 0  # non-blank lines
    rows: int = 0
    unreadable: int = 0
    truncated: bool = False
    control_types: dict[str, int] = field(default_factory=dict)  # control records per type

    def count_controls(self, rows: pl.DataFrame) -> None:
        """Count the ``control`` records of an event-log batch by type, as written."""
        if "control_type" not in rows.columns or not rows.height:
            return
        counts = (
            rows.lazy()
            .filter(pl.col("kind") == "control")
            .group_by(pl.col("control_type").fill_null(""))
            .len()
            .collect()
        )
        for name, n in counts.iter_rows():
            self.control_types[name] = self.control_types.get(name, 0) + n

    def as_dict(self) -> dict[str, object]:
        return {
            "source": self.source,
            "kind": self.kind,
            "format": self.format,
            "bytes": self.bytes,
            "lines": self.lines,
            "rows": self.rows,
            "unreadable": self.unreadable,
            "truncated": self.truncated,
            **(
                {"control_types": dict(sorted(self.control_types.items()))}
                if self.kind == "event-log"
                else {}
            ),
        }


def control_type_totals(files: list[FileStats]) -> tuple[dict[str, int], dict[str, int]]:
    """(control records per type over ``files``, those of a type no rule uses): what a
    scan lists in its JSON document (``logs.control_types``, ``logs.ignored_control_types``)."""
    total: dict[str, int] = {}
    for stats in files:
        for name, n in stats.control_types.items():
            total[name] = total.get(name, 0) + n
    ignored = {k: n for k, n in total.items() if canonical_control_type(k) not in CONTROL_TYPES}
    return dict(sorted(total.items())), dict(sorted(ignored.items()))


@dataclass(slots=True)
class LogSet:
    """Everything read from a set of log files.

    ``access`` and ``events`` follow :data:`ACCESS_SCHEMA` and :data:`EVENTS_SCHEMA`;
    ``errors`` holds at most a sample of unreadable lines per file (every one is counted in
    ``stats``); ``stats`` has ``files`` (one :meth:`FileStats.as_dict` per file, in reading
    order) and totals.
    """

    access: pl.DataFrame = field(default_factory=empty_access)
    events: pl.DataFrame = field(default_factory=empty_events)
    errors: list[ReadError] = field(default_factory=list)
    stats: dict[str, object] = field(default_factory=dict)
