"""The fast path over one indexed capture: evidence rows for every TCP connection, equal to
what :func:`~sse_forensics.reassembly.capture.reassemble` with
:class:`~sse_forensics.evidence.from_capture.CaptureEvidence` as its sink gives.

1. The index's TCP rows are grouped by 4-tuple (:mod:`.tcp`); a group the tracker would read
   as one clean connection is a *candidate*: it is decided at its SYN, its first row.
2. Every other group runs through the exact path (:class:`.exact.ExactDriver`), which
   numbers its connections among all of them (candidates are numbered by their first row).
3. Candidates of this shard are framed in bulk: payloads joined once per direction, HTTP
   messages framed over the joined bytes (:mod:`.http`), every event-stream body parsed in one
   columnar pass (:mod:`.sse`), each event's first and last byte mapped to its frame with
   ``searchsorted``; rows are built as columns. A candidate refused on the way (content
   coding, an interim response, bytes the SSE parser would report, …) runs through the exact
   path after all, under the id it already has. A candidate whose client opens with TLS is
   decrypted first and framed from its plaintext (:mod:`.tls`: every record must decrypt);
   one that speaks HTTP/2 (h2c, or h2 inside TLS) is read by :mod:`.h2`, its DATA payloads
   parsed as event-stream bodies with the HTTP/1.1 ones.
4. Errors are merged in ``reassemble``'s order from sort keys (see :mod:`.exact`).
"""

from __future__ import annotations

import time
from array import array
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import polars as pl

from sse_forensics.errors import ReadError
from sse_forensics.evidence.from_capture import CaptureEvidence, _exchange_row, connection_row
from sse_forensics.evidence.sessions import attribute_connection, explicit_session, inferred_session
from sse_forensics.evidence.tables import (
    ConnectionColumns,
    EventColumns,
    ExchangeColumns,
)
from sse_forensics.facts.config import AnalysisConfig
from sse_forensics.ingest.inputs import merged_frames
from sse_forensics.ingest.keylog import read_keylogs
from sse_forensics.ingest.linklayer import decode_tcp
from sse_forensics.ingest.packet_index import PacketIndex
from sse_forensics.ingest.pcap import CaptureStats
from sse_forensics.provenance import Origin
from sse_forensics.reassembly.capture import Reassembly, _capture_loss, foreign_protocol
from sse_forensics.reassembly.exchange import ColumnarBody, Exchange
from sse_forensics.reassembly.fast import h2 as fh2
from sse_forensics.reassembly.fast import http as fhttp
from sse_forensics.reassembly.fast import tls as ftls
from sse_forensics.reassembly.fast.exact import END, ErrorKey, ExactDriver
from sse_forensics.reassembly.fast.flow_shard import FlowShard
from sse_forensics.reassembly.fast.rows import classify_events
from sse_forensics.reassembly.fast.sse import BodySource, parse_bodies
from sse_forensics.reassembly.fast.tcp import (
    R_INCONSISTENT,
    FlowGroups,
    GroupCheck,
    build_connection,
    classify_groups,
    group_flows,
    skipped,
)
from sse_forensics.reassembly.flows import Connection, ConnectionLedger
from sse_forensics.reassembly.http_events import RequestHead, ResponseHead, header
from sse_forensics.reassembly.loss import CaptureLoss
from sse_forensics.reassembly.tls import TLSKeys

RowSink = Callable[[pl.DataFrame, pl.DataFrame, pl.DataFrame], None]
"""Receives evidence rows in batches: (connections, exchanges, events), the tables of
:mod:`sse_forensics.evidence.tables` (``EvidenceStore.add`` is one)."""

R_FOREIGN = "http: TLS or HTTP/2 (read by the exact path)"
BATCH_BYTES = 8 << 20
"""Payload bytes of the candidates framed together (bounds the joined copies)."""
EVENT_SLICE = 1 << 17
"""Events classified and turned into evidence rows at once: a batch of one long stream
holds its parsed events, not every column of every one of them (issue 16)."""


@dataclass(slots=True)
class FastReassembly:
    """What :func:`reassemble_fast` reports beside the rows: ``Reassembly``'s counters,
    connections (this shard's), errors, loss; and how many connections took the fast path
    (``fast``) or fell back, per reason (``fallbacks``)."""

    connections: list[Connection]
    errors: list[ReadError]
    frames: int
    tcp_segments: int
    capture_stats: dict[str, CaptureStats]
    loss: CaptureLoss
    shard: tuple[int, int] = (0, 1)
    # Every connection of this shard counted (``connections`` keeps only some, see
    # ConnectionLedger), and their loss without the files' drop counters.
    connection_count: int = 0
    max_connection_id: int = 0
    connection_loss: CaptureLoss = field(default_factory=CaptureLoss)
    fast: int = 0
    fallbacks: Counter[str] = field(default_factory=Counter)
    sources: list[str] = field(default_factory=list)
    # For combine(): driver errors with their sort keys, and the index's own errors.
    keyed_errors: list[tuple[ErrorKey, ReadError]] = field(default_factory=list, repr=False)
    index_errors: list[ReadError] = field(default_factory=list, repr=False)
    keylog_errors: list[ReadError] = field(default_factory=list, repr=False)  # --tls-keylog
    timings: dict[str, float] = field(default_factory=dict, repr=False)  # seconds per stage

    def reassembly(self) -> Reassembly:
        """As a :class:`Reassembly` (``exchanges`` empty: they went to the sink)."""
        return Reassembly(
            connections=self.connections,
            errors=self.errors,
            frames=self.frames,
            tcp_segments=self.tcp_segments,
            capture_stats=self.capture_stats,
            loss=self.loss,
            connection_count=self.connection_count,
            max_connection_id=self.max_connection_id,
        )


# -- errors ------------------------------------------------------------------------------------


def tls_keys_for(
    config: AnalysisConfig, stats: dict[str, CaptureStats]
) -> tuple[TLSKeys, list[ReadError]]:
    """The scan's TLS secrets: the key logs of ``config`` and the captures' Decryption
    Secrets Blocks; with what in the key logs could not be read."""
    if not config.tls_keylog:
        return TLSKeys(stats=stats), []
    keylog, errors = read_keylogs(config.tls_keylog)
    return TLSKeys(keylog, stats, given=True), errors


def index_error_keys(sources: list[str], is_tcp: np.ndarray) -> list[tuple[ErrorKey, ReadError]]:
    """Where each of the index's errors falls among the rows: replays the readers (only
    needed when connection errors must be interleaved with reading errors)."""
    out: list[tuple[ErrorKey, ReadError]] = []
    count = 0
    for item in merged_frames(sources):
        if isinstance(item, ReadError):
            out.append(((count - 0.5, 0, 0, len(out)), item))
            continue
        if count < len(is_tcp) and not is_tcp[count]:
            seg = decode_tcp(item)
            if isinstance(seg, ReadError):
                out.append(((float(count), 0, 0, len(out)), seg))
        count += 1
    return out


def _merge_errors(
    sources: list[str],
    is_tcp: np.ndarray | None,
    index_errors: list[ReadError],
    keyed: list[tuple[ErrorKey, ReadError]],
) -> list[ReadError]:
    keyed = sorted(keyed, key=lambda p: p[0])
    if not keyed:
        return list(index_errors)
    if not index_errors:
        return [err for _key, err in keyed]
    if is_tcp is None:
        from sse_forensics.ingest.packet_index import index_captures

        with index_captures(sources) as idx:
            is_tcp = idx.is_tcp.copy()
    placed = index_error_keys(sources, is_tcp)
    if [err for _k, err in placed] != list(index_errors):  # pragma: no cover - a reader bug
        placed = [((-1.0, 0, 0, i), err) for i, err in enumerate(index_errors)]
    return [err for _key, err in sorted(placed + keyed, key=lambda p: p[0])]


class _Clock:
    """Seconds spent per stage (``FastReassembly.timings``)."""

    def __init__(self) -> None:
        self.times: dict[str, float] = {}
        self._last = time.perf_counter()

    def lap(self, stage: str) -> None:
        now = time.perf_counter()
        self.times[stage] = self.times.get(stage, 0.0) + now - self._last
        self._last = now


# -- the sink side -----------------------------------------------------------------------------


class _Forward:
    """An ``EvidenceStore`` look-alike for :class:`CaptureEvidence`: batches go to ``sink``."""

    def __init__(self, sink: RowSink) -> None:
        self.sink = sink

    def add(self, connections: pl.DataFrame, exchanges: pl.DataFrame, events: pl.DataFrame) -> None:
        self.sink(connections, exchanges, events)


# -- the entry point ---------------------------------------------------------------------------


@dataclass(slots=True)
class _Context:
    """What the fast path shares across batches of candidates."""

    index: PacketIndex
    groups: FlowGroups
    check: GroupCheck
    config: AnalysisConfig
    capture_end: float
    sink: RowSink
    clock: _Clock
    ledger: ConnectionLedger = field(default_factory=ConnectionLedger)
    late: list[tuple[int, int, str]] = field(default_factory=list)  # (group, id, reason)
    fast: int = 0
    tls_keys: TLSKeys | None = None  # TLS candidates take the decrypted route (.tls)


def reassemble_fast(
    index: PacketIndex,
    sink: RowSink,
    config: AnalysisConfig | None = None,
    *,
    shard: tuple[int, int] = (0, 1),
    flows: FlowShard | None = None,
) -> FastReassembly:
    """Evidence rows of every TCP connection of ``index`` whose id ``% shard[1] ==
    shard[0]``, to ``sink``; see the module docstring. Rows, connections, errors, counters and
    loss equal the exact path's (a sharded run: its part of them; :func:`combine` joins the
    parts of all shards into the unsharded result). With ``flows``, ``index`` holds the
    rows of some flows only, all its connections are the shard's, numbered as ``flows``
    says (:mod:`.flow_shard`)."""
    config = config or AnalysisConfig()
    part, parts = shard
    if not 0 <= part < parts:
        raise ValueError(f"shard {shard}: want 0 <= k < n")

    def own(conn_id: int) -> bool:
        return flows is not None or conn_id % parts == part

    clock = _Clock()
    tls_keys, keylog_errors = tls_keys_for(config, index.stats)
    capture_end = float(index.ts[-1]) if len(index) else None
    if flows is not None:
        capture_end = flows.capture_end
    groups = group_flows(index)
    check = classify_groups(index, groups, capture_end if capture_end is not None else 0.0)
    cand = np.flatnonzero(check.candidate)
    cand_first = groups.first_row[cand]
    evidence = CaptureEvidence(_Forward(sink), config)
    fallbacks: Counter[str] = Counter()
    clock.lap("tcp")

    # Flow-table position (first row of the 4-tuple) of a connection, for errors at the end:
    # the group of the row of its first frame (rows of one file are in frame order).
    file_rows: dict[int, tuple[np.ndarray, np.ndarray]] = {}  # file: its rows, their frames
    source_no = {path: k for k, path in enumerate(index.sources)}
    row_groups: list[np.ndarray] = []  # the group of each TCP row, made when first asked

    def group_of(row: int) -> int:
        """The group of TCP row ``row`` (a table of one int32 per frame, made only for a
        connection of the exact path: issue 9, a capture of candidates needs none)."""
        if not row_groups:
            table = np.zeros(len(index), dtype=np.int32 if len(groups) < 1 << 31 else np.int64)
            table[groups.rows] = np.repeat(np.arange(len(groups)), np.diff(groups.starts))
            row_groups.append(table)
        return int(row_groups[0][row])

    def flow_position(conn: Connection) -> int:
        f = source_no[conn.first.source]
        known = file_rows.get(f)
        if known is None:
            rows = np.flatnonzero(index.file == f)
            known = file_rows[f] = (rows, index.frame[rows])
        rows, frames = known
        # The number as the frames' dtype: a Python int would make numpy cast all the
        # frames per call (issue 16: a flood's end looked up 100,000 connections this way).
        at = int(np.searchsorted(frames, frames.dtype.type(conn.first.number)))
        return int(groups.first_row[group_of(int(rows[at]))])

    # 2. The exact path for the groups that are not candidates. (Rows of decision kept as
    # 8-byte doubles: a flood decides a connection per SYN.)
    main_decided = array("d")

    def main_id(row: float, conn: Connection) -> int:
        # An int row: a float would make numpy cast all of cand_first per call.
        before = len(cand_first) if row == END else int(np.searchsorted(cand_first, int(row)))
        main_decided.append(row)
        conn_id = before + len(main_decided)
        if flows is not None and flows.exact_ids is not None:
            conn_id = int(flows.exact_ids[len(main_decided) - 1])
        if own(conn_id):
            if row == END:
                g = int(np.searchsorted(groups.first_row, flow_position(conn)))
            else:
                g = group_of(int(row))
            fallbacks[check.reason[g] or "?"] += 1
        return conn_id

    ledger = ConnectionLedger()
    position = flow_position if flows is None else lambda c: int(flows.at(flow_position(c)))
    main = ExactDriver(
        index,
        main_id,
        position,
        evidence,
        own,
        tls_keys,
        config.limits,
        ledger=ledger,
        report_caps=part == 0,
        spill=evidence.spill,
    )
    if not bool(check.candidate.all()):
        # The rows of every other group, ascending (masked, not gathered group by group:
        # a flood has a group per SYN).
        other_rows = np.repeat(~check.candidate, np.diff(groups.starts))
        main.feed_rows(np.sort(groups.rows[other_rows]))
        del other_rows
    main.close(capture_end)
    clock.lap("exact")

    # 3. Candidates: ids, then this shard's through the fast path, in batches.
    decided_rows = np.array(main_decided, dtype=np.float64)
    cand_ids = 1 + np.arange(len(cand)) + np.searchsorted(decided_rows, cand_first)
    if flows is not None and flows.cand_ids is not None:
        cand_ids = flows.cand_ids
    ctx = _Context(
        index,
        groups,
        check,
        config,
        capture_end if capture_end is not None else 0.0,
        sink,
        clock,
        ledger=ledger,
        tls_keys=tls_keys,
    )
    mine = np.flatnonzero(cand_ids % parts == part) if flows is None else np.arange(len(cand))
    sizes = _payload_sizes(index, groups)
    batch: list[tuple[int, int]] = []
    batch_bytes = 0
    for i in mine.tolist():
        g = int(cand[i])
        batch.append((g, int(cand_ids[i])))
        batch_bytes += int(sizes[g])
        if batch_bytes >= BATCH_BYTES:
            _Batch(ctx, batch).run()
            index.release()  # the batch's payload pages are done with
            batch, batch_bytes = [], 0
    if batch:
        _Batch(ctx, batch).run()

    # Refused candidates: the exact path, under their ids.
    keyed = list(main.keyed)
    if ctx.late:
        ids_by_row = {int(groups.first_row[g]): cid for g, cid, _why in ctx.late}
        driver = ExactDriver(
            index,
            lambda row, _conn: ids_by_row[int(row)],
            position,
            evidence,
            tls_keys=tls_keys,
            limits=config.limits,
            ledger=ledger,
            spill=evidence.spill,
        )
        late_rows = [groups.group_rows(g) for g, _c, _w in ctx.late]
        driver.feed_rows(np.sort(np.concatenate(late_rows)))
        driver.close(capture_end)
        keyed.extend(driver.keyed)
        for _g, _cid, why in ctx.late:
            fallbacks[why] += 1
    evidence.flush()
    clock.lap("exact")

    connections = sorted(ledger.kept, key=lambda c: c.id)
    stats = dict(index.stats)
    index_errors = list(index.errors) if part == 0 else []
    frames, tcp_segments = len(index), index.tcp_segments
    if flows is not None:  # keys in the whole capture's rows; its counts
        keyed = [((flows.at(k[0]), k[1], k[2], k[3]), err) for k, err in keyed]
        frames, tcp_segments = flows.frames, flows.tcp_segments
    keylog_errors = keylog_errors if part == 0 else []
    errors = keylog_errors + _merge_errors(list(index.sources), index.is_tcp, index_errors, keyed)
    clock.lap("errors")
    return FastReassembly(
        connections=connections,
        errors=errors,
        frames=frames,
        tcp_segments=tcp_segments,
        capture_stats=stats,
        loss=_capture_loss([], stats if part == 0 else {}, counted=ledger.loss),
        shard=shard,
        connection_count=ledger.count,
        max_connection_id=ledger.max_id,
        connection_loss=ledger.loss,
        fast=ctx.fast,
        fallbacks=fallbacks,
        sources=list(index.sources),
        keyed_errors=keyed,
        index_errors=index_errors,
        keylog_errors=keylog_errors,
        timings=clock.times,
    )


def combine(parts: list[FastReassembly]) -> FastReassembly:
    """The results of every shard of one capture, as one unsharded result."""
    if not parts:
        raise ValueError("no parts")
    first = next((p for p in parts if p.shard[0] == 0), parts[0])
    connections = sorted((c for p in parts for c in p.connections), key=lambda c: c.id)
    keyed = [k for p in parts for k in p.keyed_errors]
    errors = first.keylog_errors + _merge_errors(first.sources, None, first.index_errors, keyed)
    fallbacks: Counter[str] = Counter()
    timings: dict[str, float] = {}
    connection_loss = CaptureLoss()
    for p in parts:
        connection_loss.merge(p.connection_loss)
        fallbacks.update(p.fallbacks)
        for stage, seconds in p.timings.items():
            timings[stage] = timings.get(stage, 0.0) + seconds
    return FastReassembly(
        connections=connections,
        errors=errors,
        frames=first.frames,
        tcp_segments=first.tcp_segments,
        capture_stats=first.capture_stats,
        loss=_capture_loss([], first.capture_stats, counted=connection_loss),
        shard=(0, 1),
        connection_count=sum(p.connection_count for p in parts),
        max_connection_id=max(p.max_connection_id for p in parts),
        connection_loss=connection_loss,
        fast=sum(p.fast for p in parts),
        fallbacks=fallbacks,
        sources=first.sources,
        keyed_errors=keyed,
        index_errors=first.index_errors,
        keylog_errors=first.keylog_errors,
        timings=timings,
    )


SIZE_ROWS = 1 << 20
"""Grouped rows whose payload lengths :func:`_payload_sizes` widens at once."""


def _payload_sizes(index: PacketIndex, groups: FlowGroups) -> np.ndarray:
    """Payload bytes per group (int64), summed a slice of :data:`SIZE_ROWS` grouped rows at
    a time (issue 9: widened whole, the lengths cost 8 bytes a packet at once)."""
    sizes = np.zeros(len(groups), dtype=np.int64)
    starts = groups.starts
    for lo in range(0, len(groups.rows), SIZE_ROWS):
        hi = min(len(groups.rows), lo + SIZE_ROWS)
        part = index.payload_len[groups.rows[lo:hi]].astype(np.int64)
        g0 = int(np.searchsorted(starts, lo, side="right")) - 1  # the group holding row lo
        g1 = int(np.searchsorted(starts, hi, side="left"))  # groups starting before hi
        sizes[g0:g1] += np.add.reduceat(part, np.maximum(starts[g0:g1], lo) - lo)
    return sizes


# -- the fast path proper --------------------------------------------------------------------


@dataclass(slots=True)
class _Conn:
    """One candidate being framed."""

    group: int
    conn_id: int
    c_lo: int
    c_hi: int
    s_lo: int
    s_hi: int
    requests: list[fhttp.Message] = field(default_factory=list)
    responses: list[fhttp.Message] = field(default_factory=list)
    reason: str | None = None
    decrypted: ftls.Decrypted | None = None  # a TLS connection on the decrypted route
    h2: fh2.H2Streams | None = None  # an HTTP/2 connection (h2c, or h2 decrypted)
    conn: Connection | None = None  # as at the end of the capture
    final: Connection | None = None  # as when finalised (what the sink pickles)


def _join(
    index: PacketIndex, rows: np.ndarray, skip: np.ndarray, lengths: np.ndarray
) -> tuple[bytes, np.ndarray]:
    """The new bytes of ``rows`` (``lengths`` of them after ``skip`` payload bytes each)
    concatenated, and where each row's start in the result."""
    offsets = index.payload_offsets(rows) + skip
    starts = np.zeros(len(rows), dtype=np.int64)
    if len(rows):
        np.cumsum(lengths[:-1], out=starts[1:])
    data = index.gather(rows, offsets, lengths)
    return data, starts


class _Batch:
    """Candidates framed together: their payloads joined per direction, their event-stream
    bodies parsed in one pass, their rows sent as one batch."""

    def __init__(self, ctx: _Context, members: list[tuple[int, int]]) -> None:
        self.ctx = ctx
        index, groups, check = ctx.index, ctx.groups, ctx.check
        parts: dict[bool, list[tuple[np.ndarray, np.ndarray, np.ndarray]]] = {
            False: [],
            True: [],
        }
        self.conns: list[_Conn] = []
        c_at = s_at = 0
        for g, conn_id in members:
            lo, hi = int(groups.starts[g]), int(groups.starts[g + 1])
            rows = groups.rows[lo:hi]
            clo, chi = check.span(g)
            server = check.server[clo:chi]
            fresh = check.fresh[clo:chi]
            skip = skipped(index, rows, fresh)
            lens = []
            for side in (False, True):
                has = (fresh > 0) & (server == side)
                parts[side].append((rows[has], skip[has], fresh[has]))
                lens.append(int(fresh[has].sum()))
            self.conns.append(_Conn(g, conn_id, c_at, c_at + lens[0], s_at, s_at + lens[1]))
            c_at += lens[0]
            s_at += lens[1]
        empty = np.zeros(0, dtype=np.int64)

        def cat(side: bool, k: int) -> np.ndarray:
            return np.concatenate([p[k] for p in parts[side]]) if parts[side] else empty

        self.c_rows, self.s_rows = cat(False, 0), cat(True, 0)
        self.c_fresh = cat(False, 2)
        self.c_buf, self.c_start = _join(index, self.c_rows, cat(False, 1), self.c_fresh)
        self.s_buf, self.s_start = _join(index, self.s_rows, cat(True, 1), cat(True, 2))
        # Rows at which bytes reach HTTP, where they differ from the rows cited (decrypted).
        self.c_deliver: np.ndarray | None = None
        self.s_deliver: np.ndarray | None = None
        ctx.clock.lap("join")
        if ctx.tls_keys is not None:
            self._decrypt(ctx.tls_keys)
            ctx.clock.lap("tls")

    def _decrypt(self, keys: TLSKeys) -> None:
        """TLS candidates: their plaintext in place of their ciphertext (:mod:`.tls`)."""
        client = ftls.Side(self.c_buf, self.c_start, self.c_rows, self.c_rows)
        server = ftls.Side(self.s_buf, self.s_start, self.s_rows, self.s_rows)
        ranges = [(c.c_lo, c.c_hi, c.s_lo, c.s_hi) for c in self.conns]
        client, server, ranges, results = ftls.splice(keys, client, server, ranges)
        if not results:
            return
        self.c_buf, self.c_start, self.c_rows = client.buf, client.start, client.rows
        self.s_buf, self.s_start, self.s_rows = server.buf, server.start, server.rows
        self.c_deliver, self.s_deliver = client.deliver, server.deliver
        self.c_fresh = np.diff(self.c_start, append=len(self.c_buf))
        for c, (c_lo, c_hi, s_lo, s_hi) in zip(self.conns, ranges, strict=True):
            c.c_lo, c.c_hi, c.s_lo, c.s_hi = c_lo, c_hi, s_lo, s_hi
        for i, got in results.items():
            if isinstance(got, str):
                self.conns[i].reason = got
            else:
                self.conns[i].decrypted = got

    # -- positions to frames ---------------------------------------------------------------

    def _rows(self, server: bool, pos: list[int] | np.ndarray) -> np.ndarray:
        starts, rows = (self.s_start, self.s_rows) if server else (self.c_start, self.c_rows)
        out: np.ndarray = rows[_seg(starts, pos)]
        return out

    def _origins(self, server: bool, pos: list[int]) -> list[Origin]:
        return _origins(self.ctx.index, self._rows(server, pos)) if pos else []

    # -- stages ----------------------------------------------------------------------------

    def run(self) -> None:
        ctx = self.ctx
        self.check_overlaps()
        self.frame_http()
        ctx.clock.lap("http")
        self.parse_sse()
        ctx.clock.lap("sse")
        kept = [c for c in self.conns if not c.reason]
        ctx.late.extend((c.group, c.conn_id, c.reason) for c in self.conns if c.reason)
        if not kept:
            return
        for c in kept:
            c.conn, c.final = build_connection(
                ctx.index, ctx.groups, ctx.check, c.group, c.conn_id, ctx.capture_end
            )
            for conn in (c.conn, c.final):
                if c.decrypted is not None:
                    conn.tls = c.decrypted.info
                if c.h2 is not None:
                    conn.application = "h2"
            ctx.ledger.add(c.conn, http=bool(c.requests or c.responses or c.h2 is not None))
        ctx.fast += len(kept)
        ctx.clock.lap("connections")
        self.send(kept)

    def check_overlaps(self) -> None:
        """Retransmitted or overlapping bytes must equal the first copy (already in the
        joined stream): a candidate whose copies differ takes the exact path, which reports
        the inconsistent retransmission (issue 16)."""
        ctx = self.ctx
        index, groups, check = ctx.index, ctx.groups, ctx.check
        views = None
        try:
            for c in self.conns:
                clo, chi = check.span(c.group)
                at = check.overlaps(clo, chi)
                if not len(at):
                    continue
                if views is None:
                    views = [memoryview(b) for b in index.buffers]
                lo = int(groups.starts[c.group])
                for k in at:
                    p = int(check.overlap_row[k])
                    row = int(groups.rows[lo + p - clo])
                    server = bool(check.server[p])
                    buf, base = (self.s_buf, c.s_lo) if server else (self.c_buf, c.c_lo)
                    n = int(check.overlap_len[k])
                    pos = index.payload_start(row) + int(check.overlap_skip[k])
                    stream_at = base + int(check.overlap_at[k])
                    if views[int(index.file[row])][pos : pos + n] != buf[stream_at : stream_at + n]:
                        c.reason = R_INCONSISTENT
                        break
        finally:
            for v in views or ():
                v.release()

    def read_h2(self) -> None:
        """HTTP/2 connections (h2c with prior knowledge, h2 decrypted): :mod:`.h2`."""
        client = ftls.Side(self.c_buf, self.c_start, self.c_rows, self.c_rows)
        server = ftls.Side(self.s_buf, self.s_start, self.s_rows, self.s_rows)
        c_deliver = self.c_rows if self.c_deliver is None else self.c_deliver
        s_deliver = self.s_rows if self.s_deliver is None else self.s_deliver
        for c in self.conns:
            if c.reason:
                continue
            if c.decrypted is not None:
                if c.decrypted.application != "h2":
                    continue
            elif ftls.sniff(client, c.c_lo, c.c_hi) != "HTTP/2":
                continue
            got = fh2.read_h2(
                c.conn_id,
                client,
                (c.c_lo, c.c_hi),
                server,
                (c.s_lo, c.s_hi),
                c_deliver,
                s_deliver,
            )
            if isinstance(got, str):
                c.reason = got
            else:
                c.h2 = got

    def frame_http(self) -> None:
        self.read_h2()
        chunk_index = fhttp.ChunkIndex(self.s_buf) if self.s_buf else None
        c_buf, s_buf = self.c_buf, self.s_buf
        for c in self.conns:
            if c.reason or c.h2 is not None:
                continue
            try:
                if c.c_hi > c.c_lo:
                    first_len = int(self.c_fresh[int(np.searchsorted(self.c_start, c.c_lo))])
                    if foreign_protocol(c_buf[c.c_lo : c.c_lo + first_len]) is not None:
                        raise fhttp.Fallback(R_FOREIGN)
                c.requests = fhttp.parse_requests(c_buf, c.c_lo, c.c_hi)
                c.responses = fhttp.parse_responses(s_buf, c.s_lo, c.s_hi, c.requests, chunk_index)
            except fhttp.Fallback as exc:
                c.reason = exc.reason
        # Each response's request was parsed before it: its head ended in an earlier frame.
        ok = [c for c in self.conns if not c.reason]
        c_pos = [m.head_end - 1 for c in ok for m in c.requests[: len(c.responses)]]
        s_pos = [m.head_end - 1 for c in ok for m in c.responses]
        if not s_pos:
            return
        before = self._rows(False, c_pos) < self._rows(True, s_pos)
        if self.c_deliver is not None and self.s_deliver is not None:
            # Decrypted: the exact path's parser sees a head when its record is complete.
            c_at, s_at = _seg(self.c_start, c_pos), _seg(self.s_start, s_pos)
            before &= self.c_deliver[c_at] < self.s_deliver[s_at]
        at = 0
        for c in ok:
            k = len(c.responses)
            if not bool(before[at : at + k].all()):
                c.reason = fhttp.R_ORPHAN
            at += k

    def parse_sse(self) -> None:
        """Every event-stream body of the batch, parsed in one pass."""
        owners: list[tuple[_Conn, int]] = []
        starts, sizes, nbytes = [], [], []
        for c in self.conns:
            if c.reason:
                continue
            bodies = (
                c.h2.event_bodies()
                if c.h2 is not None
                else [
                    (k, msg.body)
                    for k, msg in enumerate(c.responses)
                    if msg.body is not None and fhttp.framing(msg.headers).event_stream
                ]
            )
            for k, body in bodies:
                owners.append((c, k))
                body_starts, body_sizes = body.arrays()
                starts.append(body_starts)
                sizes.append(body_sizes)
                nbytes.append(body.nbytes)
        lens = np.array(nbytes, dtype=np.int64)
        empty = np.zeros(0, dtype=np.int64)
        source = BodySource(
            self.s_buf,
            np.concatenate(starts) if starts else empty,
            np.concatenate(sizes) if sizes else empty,
            lens,
        )
        parsed = parse_bodies(source, self.ctx.config.limits.event_bytes)
        for b, why in parsed.refused.items():
            c = owners[b][0]
            c.reason = c.reason or why
        self.owners = owners
        self.parsed = parsed
        self.body_start = source.body_start
        self.ch_v, self.ch_s = source.offsets, source.starts

    def send(self, kept: list[_Conn]) -> None:
        """Rows of the kept connections to the sink."""
        ctx = self.ctx
        config = ctx.config
        owners, parsed = self.owners, self.parsed
        body_of = {(id(c), k): b for b, (c, k) in enumerate(owners)}

        # Bodies kept, and what their events say about sessions and versions (read once,
        # by parse_bodies): the events themselves come piece by piece below.
        keep_body = np.array([not c.reason for c, _k in owners], dtype=bool)
        endpoint_data = {b: d for b, d in parsed.endpoints.items() if keep_body[b]}
        # Data that may name the protocol version, in order: a superset of what
        # ``exchange_protocol_version`` takes one from (it reads them in turn and skips the
        # others, as it does every event's data on the exact path).
        versions = {b: d for b, d in parsed.versions.items() if keep_body[b]}
        ctx.clock.lap("events")

        # Exchanges: the exact row builder, on Exchange objects whose events stand in only
        # as far as it reads them.
        req_origin = iter(self._origins(False, [m.pos for c in kept for m in c.requests]))
        resp_pos, end_pos, last_pos = [], [], []
        for c in kept:
            for m in c.responses:
                resp_pos.append(m.pos)
                if m.end_pos >= 0:
                    end_pos.append(m.end_pos)
                if m.body is not None and m.body.last >= 0:
                    last_pos.append(m.body.last)
        resp_origin = iter(self._origins(True, resp_pos))
        end_origin = iter(self._origins(True, end_pos))
        body_origin = iter(self._origins(True, last_pos))
        conn_buf = ConnectionColumns.buffer()
        ex_buf = ExchangeColumns.buffer()
        body_session: dict[int, str] = {}
        body_ex: dict[int, tuple[int, int]] = {}
        for c in kept:
            conn = c.final
            assert conn is not None
            if c.h2 is not None:
                exchanges = self._h2_exchanges(c, conn, body_of, versions)
            else:
                exchanges = self._exchanges(
                    c, conn, body_of, versions, req_origin, resp_origin, end_origin, body_origin
                )
            if not exchanges:
                continue
            explicit = []
            for ex in exchanges:
                value = header(ex.request_headers, config.session_header) or header(
                    ex.response_headers, config.session_header
                )
                b = body_of.get((id(c), ex.index))
                endpoint = endpoint_data.get(b, []) if b is not None else []
                target = ex.request.target if ex.request is not None else None
                explicit.append(explicit_session(value, target, endpoint, config))
            keys = attribute_connection(
                explicit, inferred_session(conn.client[0], conn.server[0], conn.server[1])
            )
            connection_row(conn, conn_buf)
            for ex, key in zip(exchanges, keys, strict=True):
                _exchange_row(ex, key.session, key.how, key.inferred, config, ex_buf)
                b = body_of.get((id(c), ex.index))
                if b is not None:
                    body_session[b] = key.session
                    body_ex[b] = (conn.id, ex.index)
        ctx.clock.lap("exchanges")
        conn_frame, ex_frame = ConnectionColumns.frame(conn_buf), ExchangeColumns.frame(ex_buf)
        del conn_buf, ex_buf
        sent = False
        for piece in parsed.pieces():
            body = piece["body"].to_numpy()
            if len(body) and not bool(keep_body.all()):
                mask = keep_body[body]
                piece = piece.filter(pl.Series(mask))
                body = body[mask]
            for lo in range(0, piece.height, EVENT_SLICE):
                part = piece.slice(lo, EVENT_SLICE)
                hi = lo + part.height
                first_row, last_row = self._event_rows(part, body[lo:hi])
                classes, _ = classify_events(part)
                ev_frame = _event_frame(
                    ctx.index,
                    part,
                    classes,
                    body[lo:hi],
                    len(owners),
                    body_session,
                    body_ex,
                    first_row,
                    last_row,
                )
                del classes
                ctx.clock.lap("event-rows")
                ctx.sink(conn_frame, ex_frame, ev_frame)
                conn_frame, ex_frame, sent = conn_frame.clear(), ex_frame.clear(), True
                ctx.clock.lap("sink")
        if not sent:
            ctx.sink(conn_frame, ex_frame, EventColumns.frame())

    def _event_rows(self, events: pl.DataFrame, body: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The rows (frames) holding each event's first and last byte."""
        if not events.height:
            empty = np.zeros(0, dtype=np.int64)
            return empty, empty
        base = self.body_start[body]
        ch_v, ch_s = self.ch_v, self.ch_s

        def rows_at(offsets: np.ndarray) -> np.ndarray:
            v = base + offsets
            k = np.searchsorted(ch_v, v, side="right") - 1
            return self._rows(True, ch_s[k] + (v - ch_v[k]))

        return rows_at(events["start"].to_numpy()), rows_at(events["end"].to_numpy() - 1)

    def _h2_exchanges(
        self,
        c: _Conn,
        conn: Connection,
        body_of: dict[tuple[int, int], int],
        versions: dict[int, list[str]],
    ) -> list[Exchange]:
        """An HTTP/2 connection's exchanges (:func:`.h2.finish`), events as in ``_exchanges``."""
        assert c.h2 is not None
        exchanges = fh2.finish(
            c.h2, conn, lambda server, pos: self._origins(server, [pos])[0], self.s_buf
        )
        parsed = self.parsed
        for ex in exchanges:
            b = body_of.get((id(c), ex.index))
            if b is not None:
                ex.columnar = ColumnarBody(versions.get(b, []), int(parsed.comments[b]))
                ex.trailing = parsed.trailing[b]
        return exchanges

    def _exchanges(
        self,
        c: _Conn,
        conn: Connection,
        body_of: dict[tuple[int, int], int],
        versions: dict[int, list[str]],
        req_origin: Any,
        resp_origin: Any,
        end_origin: Any,
        body_origin: Any,
    ) -> list[Exchange]:
        """The connection's exchanges as ``_ConnectionAnalyzer`` leaves them at
        finalisation (``conn``: the connection as it was then)."""
        parsed = self.parsed
        out: list[Exchange] = []
        server_fin = conn.fin.get("server")
        if server_fin is not None:
            end_reason, conn_end = "fin", server_fin
        elif conn.rst is not None:
            end_reason, conn_end = "rst", conn.rst
        else:
            end_reason, conn_end = "capture-end", conn.last
        for k, req in enumerate(c.requests):
            ex = Exchange(connection_id=conn.id, index=k)
            method, target, version = req.line
            ex.request = RequestHead(k, method, target, version, req.headers, next(req_origin))
            if req.body is not None:
                ex.request_body = bytearray(fhttp.kept_body(self.c_buf, req.body))
            ex.request_complete = req.complete
            if k < len(c.responses):
                resp = c.responses[k]
                rversion, status, reason = resp.line
                ex.response = ResponseHead(
                    k, int(status), reason, rversion, resp.headers, next(resp_origin)
                )
                if resp.complete:
                    ex.response_complete = True
                    ex.response_end_reason = "complete"
                    ex.response_end = next(end_origin)
                else:
                    ex.response_end_reason = end_reason
                    ex.response_end = conn_end
                body = resp.body
                if body is not None and body.last >= 0:
                    ex.last_body_origin = next(body_origin)
                    ex.body_bytes = body.nbytes
                    b = body_of.get((id(c), k))
                    if b is None:
                        ex.response_body = bytearray(fhttp.kept_body(self.s_buf, body))
                    else:
                        ex.columnar = ColumnarBody(versions.get(b, []), int(parsed.comments[b]))
                        ex.trailing = parsed.trailing[b]
            out.append(ex)
        return out


def _seg(starts: np.ndarray, pos: list[int] | np.ndarray) -> np.ndarray:
    """Index of the segment holding each byte position."""
    return np.searchsorted(starts, np.asarray(pos, dtype=np.int64), side="right") - 1


def _origins(index: PacketIndex, rows: np.ndarray) -> list[Origin]:
    sources = index.sources
    files = index.file[rows].tolist()
    frames = index.frame[rows].tolist()
    stamps = index.ts[rows].tolist()
    return [Origin(sources[f], n, t) for f, n, t in zip(files, frames, stamps, strict=True)]


def _event_frame(
    index: PacketIndex,
    events: pl.DataFrame,
    classes: dict[str, pl.Series],
    body: np.ndarray,
    n_bodies: int,
    body_session: dict[int, str],
    body_ex: dict[int, tuple[int, int]],
    first_row: np.ndarray,
    last_row: np.ndarray,
) -> pl.DataFrame:
    """The events table's rows (``EventColumns``) of ``events`` (``body``: each one's body)."""
    if not events.height:
        return EventColumns.frame()
    conn_of = np.zeros(n_bodies, dtype=np.int64)
    ex_of = np.zeros(n_bodies, dtype=np.int64)
    session_of: list[str | None] = [None] * n_bodies
    for b, (cid, k) in body_ex.items():
        conn_of[b], ex_of[b] = cid, k
        session_of[b] = body_session[b]
    schema = EventColumns.schema()
    sources = pl.Series(index.sources, dtype=pl.String)
    frame_kind = pl.repeat("frame", events.height, dtype=pl.String, eager=True)

    def origin_cols(prefix: str, rows: np.ndarray) -> dict[str, Any]:
        return {
            f"{prefix}_src": sources.gather(index.file[rows].astype(np.int64)),
            f"{prefix}_num": pl.Series(index.frame[rows], dtype=pl.Int64),
            f"{prefix}_ts": pl.Series(index.ts[rows], dtype=pl.Float64),
            f"{prefix}_kind": frame_kind,
        }

    cols: dict[str, Any] = {
        "conn_id": pl.Series(conn_of[body], dtype=pl.Int64),
        "ex_index": pl.Series(ex_of[body], dtype=pl.Int64),
        "session": pl.Series(session_of, dtype=pl.String).gather(body),
        "position": events["position"].cast(pl.Int64),
        "id": events["id"],
        "id_field": events["id_field"],
        "event": events["event"],
        "data": events["data"],
        "retry": events["retry"],
        "start": events["start"],
        "end": events["end"],
        "dispatched": events["dispatched"],
        **{name: column.cast(schema[name]) for name, column in classes.items()},
        **origin_cols("first", first_row),
        **origin_cols("last", last_row),
    }
    missing = set(schema) - set(cols)
    if missing:
        raise ValueError(f"fast path: event columns {sorted(missing)} not built")
    return pl.DataFrame({n: cols[n] for n in schema}, schema=schema)


__all__ = ["FastReassembly", "RowSink", "combine", "reassemble_fast"]
