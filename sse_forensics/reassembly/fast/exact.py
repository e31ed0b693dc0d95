"""The exact path, run on a subset of the capture's TCP flows.

:class:`ExactDriver` is :func:`~sse_forensics.reassembly.capture.reassemble`'s loop (the same
:class:`ConnectionTracker`, :class:`_ConnectionAnalyzer` and finalisation order) fed only the
segments of the 4-tuples the fast path does not take, straight from the packet index. Flows
are independent in the tracker, so each connection comes out as in a full run; only what
depends on the other flows is supplied from outside:

- connection ids (order of decision over *all* flows): ``assign_id(row, conn)`` is asked as
  soon as the tracker decides a connection;
- error order: every error is returned with a sort key — the row whose processing reported
  it, or, at the end of the capture, the flow-table position of its flow (the order in which
  ``ConnectionTracker.close`` releases flows) — so errors of several drivers and of the
  packet index merge into the order ``reassemble`` reports them in.

With ``spill``, a connection's event streams are handed on as rows while they are read
(in windows of :data:`~sse_forensics.reassembly.capture.SPILL_EVENTS` events), so a long
stream the fast path could not take does not hold an object per event.

With ``own`` (sharding), HTTP/SSE analysis runs only for the connections it accepts; the
others are still tracked (their ids count) but produce nothing.

The flow table is bounded by the ``flows`` cap; finalised connections go to ``ledger``
(counted, kept as objects only as :class:`~sse_forensics.reassembly.flows.ConnectionLedger`
says), so a capture of a million connections does not hold a million objects.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable

import numpy as np

from sse_forensics.errors import ReadError
from sse_forensics.ingest.packet_index import PacketIndex
from sse_forensics.limits import DEFAULT_LIMITS, CapHit, Limits
from sse_forensics.reassembly.capture import (
    ConnectionSink,
    EventSpill,
    _ConnectionAnalyzer,
    flows_capped,
)
from sse_forensics.reassembly.flows import Connection, ConnectionLedger, ConnectionTracker
from sse_forensics.reassembly.stream import Direction, Inconsistency, MissingSpan, StreamData
from sse_forensics.reassembly.stream_table import StreamTable, streams_capped
from sse_forensics.reassembly.tls import TLSKeys

ERRORS_PER_KIND = 100
"""Input problems of one kind (the same text but for its numbers) listed per driver; the
rest are counted in one line (issue 16: a flood of broken connections must not cost one
object, and one output line, per connection)."""
_NUMBERS = re.compile(r"\d+")
FEED_SLICE = 1 << 16
"""Rows turned into Python ints at once (a list of a million of them costs 36 MB)."""

ErrorKey = tuple[float, int, int, int]
"""(row, phase, flow position, sequence): ``row`` is ``inf`` for the end of the capture,
where phase 0 is the release of held bytes and phase 1 the finalisation of connections."""

END = math.inf


def flow_key(a: tuple[str, int], b: tuple[str, int]) -> tuple[tuple[str, int], tuple[str, int]]:
    return (a, b) if a <= b else (b, a)


class ExactDriver:
    """``reassemble``'s loop over the rows of some flows (see the module docstring)."""

    def __init__(
        self,
        index: PacketIndex,
        assign_id: Callable[[float, Connection], int],
        flow_position: Callable[[Connection], int],
        sink: ConnectionSink,
        own: Callable[[int], bool] = lambda _id: True,
        tls_keys: TLSKeys | None = None,
        limits: Limits = DEFAULT_LIMITS,
        ledger: ConnectionLedger | None = None,
        report_caps: bool = True,
        spill: EventSpill | None = None,
    ) -> None:
        self.index = index
        self.spill = spill  # a long stream's events go on as rows as they are read
        self.tls_keys = tls_keys
        self.limits = limits
        self.assign_id = assign_id
        self.flow_position = flow_position
        self.sink = sink
        self.own = own
        self.tracker = ConnectionTracker(max_flows=limits.flows, keep=False)
        # Streams of this driver's own connections (a shard parses only those).
        self.streams = StreamTable(limits.streams)
        self.ledger = ledger if ledger is not None else ConnectionLedger()
        self.analyzers: dict[int, _ConnectionAnalyzer] = {}
        self.errors: list[ReadError] = []
        self.keyed: list[tuple[ErrorKey, ReadError]] = []
        self.decided = 0  # connections decided
        self._kinds: dict[str, int] = {}  # errors seen per kind
        self._first_unlisted: dict[str, ReadError] = {}
        self.report_caps = report_caps  # False: another shard reports the flows cap
        self._seq = 0

    # -- reassemble's route/finalise -------------------------------------------------------

    def _route(
        self, pieces: list[tuple[Connection, Direction, StreamData | MissingSpan | Inconsistency]]
    ) -> None:
        errors = self.errors
        analyzers = self.analyzers
        own = self.own
        for conn, direction, piece in pieces:
            if not own(conn.id):
                continue
            analyzer = analyzers.get(conn.id)
            if analyzer is None:
                analyzer = analyzers[conn.id] = _ConnectionAnalyzer(
                    conn, errors, self.tls_keys, self.limits, self.streams, self.spill
                )
            analyzer.data(direction, piece)

    def _finalise(self, conn: Connection) -> None:
        if not self.own(conn.id):
            return
        analyzer = self.analyzers.pop(conn.id, None)
        exchanges = []
        if analyzer is not None:
            analyzer.finalise()
            exchanges = list(analyzer.exchanges.values())
            self.sink(conn, exchanges)
        self.ledger.add(conn, http=bool(exchanges))

    def _new_connections(self, row: float) -> None:
        for conn in self.tracker.take_decided():
            conn.id = self.assign_id(row, conn)
            self.decided += 1

    def _keep_errors(self, row: float, phase: int, position: int) -> None:
        errors = self.errors
        if errors:
            for err in errors:
                if self._listed(err):
                    self.keyed.append(((row, phase, position, self._seq), err))
                    self._seq += 1
            errors.clear()

    def _listed(self, err: ReadError) -> bool:
        """Whether ``err`` is listed: the first :data:`ERRORS_PER_KIND` of a kind (its text
        with the numbers taken out) are; later ones are only counted (:meth:`_unlisted`)."""
        if isinstance(err, CapHit):
            return True  # folded per cap and file later, with their count
        kind = _NUMBERS.sub("#", err.what)
        seen = self._kinds.get(kind, 0)
        self._kinds[kind] = seen + 1
        if seen < ERRORS_PER_KIND:
            return True
        if seen == ERRORS_PER_KIND:
            self._first_unlisted[kind] = err
        return False

    def _unlisted(self) -> list[ReadError]:
        """One line per kind of error that had more than :data:`ERRORS_PER_KIND`."""
        out = []
        for kind, err in self._first_unlisted.items():
            more = self._kinds[kind] - ERRORS_PER_KIND
            out.append(
                ReadError(
                    err.source,
                    f"{more} more input problem(s) like this one, not listed: {err.what}",
                    frame=err.frame,
                    ts=err.ts,
                )
            )
        return out

    # -- driving ---------------------------------------------------------------------------

    def feed_rows(self, rows: np.ndarray) -> None:
        """Feed these TCP rows (ascending) of the index."""
        tracker = self.tracker
        feed = tracker.feed
        segment = self.index.segment
        for lo in range(0, len(rows), FEED_SLICE):
            for row in rows[lo : lo + FEED_SLICE].tolist():
                seg = segment(row)
                assert seg is not None, "rows fed are TCP rows"
                pieces = feed(seg)
                if tracker.count > self.decided:
                    self._new_connections(row)
                if pieces:
                    self._route(pieces)
                for conn in tracker.take_finished():
                    self._finalise(conn)
                if self.errors:
                    self._keep_errors(row, 0, 0)

    def close(self, end_ts: float | None) -> None:
        """End of the capture (its last frame at ``end_ts``)."""
        tracker = self.tracker
        pieces = tracker.close(end_ts)
        self._new_connections(END)
        for piece in pieces:
            self._route([piece])
            if self.errors:
                self._keep_errors(END, 0, self.flow_position(piece[0]))
        for conn in tracker.take_finished():
            self._finalise(conn)
            if self.errors:
                self._keep_errors(END, 1, self.flow_position(conn))
        if tracker.evicted and self.report_caps:
            self.errors.append(flows_capped(tracker, self.limits))
            self._keep_errors(END, 2, 0)
        if self.streams.evicted:
            self.errors.append(streams_capped(self.streams, self.limits))
            self._keep_errors(END, 2, 1)
        for err in self._unlisted():
            self.keyed.append(((END, 3, 0, self._seq), err))
            self._seq += 1
