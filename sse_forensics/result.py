"""What a scan hands to the renderers: :class:`ScanResult` and its counters, and the
progress callback's type. Kept apart from :mod:`sse_forensics.pipeline` so that ``report/``
depends on what it shows, not on every layer that produced it (CONTRIBUTING.md, "Layout"):
the types of the records it carries are imported for type checking only."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from sse_forensics.engine.finding import Finding
from sse_forensics.errors import ReadError
from sse_forensics.limits import CapHit, Limits, cap_hits

if TYPE_CHECKING:
    import polars as pl

    from sse_forensics.coverage import Coverage, UnjudgedTotals
    from sse_forensics.facts.build import Facts
    from sse_forensics.reassembly.flows import Connection
    from sse_forensics.reassembly.loss import CaptureLoss

# The ``sessions`` columns a scan's renderers read (the JSON document's session summaries,
# what could not be judged, ``--session``), all a scan keeps without ``keep_tables``: the
# rest of the fact table (the flow, the first silent gap, its evidence) is in the findings.
# For the 1.28M sessions of the --big log set, ~75 of ~140 bytes a row (issue 9).
SESSION_SUMMARY = [
    "session_id",
    "session_inferred",
    "session_source",
    "protocol_version",
    "id_scheme",
    "counter_scope",
    "streams",
    "resumes",
    "data_events",
]
SCAN_SESSION_COLUMNS = [*SESSION_SUMMARY, "unjudged"]
# Of them, the strings of a few values (a scheme, a scope, where the ID came from, the
# protocol version): held as categories, ~4 bytes a row instead of a 16-byte string view
# (issue 10: the client holds one row per session at the end, 2.56M on the 2.45 GB log set).
SCAN_SESSION_CATEGORIES = ["session_source", "protocol_version", "id_scheme", "counter_scope"]

ScanProgress = Callable[[str, int, int], None]
"""``progress(stage, done, total)``: stage ``"read"`` counts capture bytes (estimated from the
frames read), ``"logs"`` log bytes, then ``"facts"`` and ``"rules"`` report 0 of 1 when they
start."""


@dataclass(slots=True)
class ScanStats:
    """How much a scan read and reassembled."""

    frames: int = 0
    tcp_segments: int = 0
    connections: int = 0
    tcp_connections: int = 0  # of them, from captures (the rest: log pseudo-connections)
    http_exchanges: int = 0
    streams: int = 0
    events: int = 0
    resumes: int = 0
    partitions: int = 0
    # Rows of the sessions table, counted by the partitions: a scan whose output lists only
    # counts keeps the rows it lists, not one a session (:func:`.pipeline.analyze_partition`).
    sessions: int = 0


@dataclass(slots=True)
class ScanResult:
    """What one scan found. ``tables``: the fact tables of every partition, concatenated
    (``keep_tables``); else ``sessions`` only, its :data:`SCAN_SESSION_COLUMNS`. ``facts``:
    the records behind them, for the per-session views (``keep_records``: one partition)."""

    paths: list[str]  # as the user gave them
    inputs: list[str]  # the capture and log files they expanded to
    stats: ScanStats
    loss: CaptureLoss
    log_stats: dict[str, object]
    errors: list[ReadError]
    connections: list[Connection]  # the capture's TCP connections
    tables: dict[str, pl.DataFrame]
    findings: list[Finding] = field(default_factory=list)
    rule_errors: list[str] = field(default_factory=list)
    not_judged: list[dict[str, object]] = field(default_factory=list)
    facts: Facts | None = None
    ignored: list[str] = field(default_factory=list)  # documents in a scanned directory
    limits: Limits = field(default_factory=Limits)  # the caps this scan ran under
    # A scan told how many could-not-judge items its output lists keeps those and their
    # totals only (sse_forensics.coverage.keep_listed); None: every item, in ``sessions``.
    unjudged: UnjudgedTotals | None = None
    # What could not be judged (sse_forensics.coverage.coverage), found at its first ask.
    coverage: Coverage | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def caps(self) -> list[CapHit]:
        """The caps that fired (each also an input problem in ``errors``)."""
        return cap_hits(self.errors)
