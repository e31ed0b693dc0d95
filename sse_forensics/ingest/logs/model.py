"""The normalised log tables: fixed polars schemas, like the fact tables
(``sse_forensics/facts/tables.py``), so the fact layer meets the same columns and types
whatever the log format — even when a log is empty. Documented in ``docs/logs.md``.

IDs (event IDs, ``Last-Event-ID``, session IDs) are strings as they appear on the wire; an
event log's JSON numbers become their decimal text. Times are float epoch seconds, UTC.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import polars as pl

from sse_forensics.errors import ReadError
from sse_forensics.provenance import EPOCH_MAX

LogKind = Literal["access-text", "access-json", "event-log"]


def valid_epoch(ts: pl.Expr) -> pl.Expr:
    """``ts`` (epoch seconds) where it is an instant from 1970 to the year 9999, else null:
    the line is then reported with an unreadable ts (issue 16: a time the tool cannot print
    costs that line, never the scan)."""
    return pl.when(ts.is_between(0.0, EPOCH_MAX)).then(ts)


ACCESS_SCHEMA: dict[str, pl.DataType] = {
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
the socket, it was dropped before being written, or it is a signal (PROFILE.md, "Gap
signalling")."""

EVENTS_SCHEMA: dict[str, pl.DataType] = {
    "source": pl.String,
    "line": pl.Int64,
    "ts": pl.Float64,
    "session": pl.String,  # a null session is filled from other records of the same stream
    "stream": pl.String,
    "event_id": pl.String,
    "kind": pl.String,  # one of EVENT_KINDS (other values are kept as written)
    "control_type": pl.String,  # event.type: stream-gap | resume-gap | backpressure-disconnect
    "first": pl.String,  # event.first (stream-gap)
    "last": pl.String,  # event.last (stream-gap)
    "requested": pl.String,  # event.requested (resume-gap)
    "oldest_retained": pl.String,  # event.oldest_retained (resume-gap)
    "last_written_id": pl.String,  # event.last_written_id (backpressure-disconnect)
    "reason": pl.String,  # why an event was evicted
    "where": pl.String,  # where it was evicted (buffer, replay store, ...)
    "request": pl.String,  # the HTTP exchange that carried the event
    "last_event_id": pl.String,  # Last-Event-ID of that request, when it was a resume
    "extra": pl.String,  # JSON object text of the record's other fields, or None
}
"""One row per record of a server event log (canonical schema in ``docs/logs.md``)."""


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
        }


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
