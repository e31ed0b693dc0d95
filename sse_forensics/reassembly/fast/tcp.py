"""TCP layer of the fast path: the capture's TCP rows grouped by 4-tuple, and for each group
the vectorized proof that :class:`~sse_forensics.reassembly.flows.ConnectionTracker` would
see one clean connection in it.

A group is a *candidate* when, read as the tracker and its
:class:`~sse_forensics.reassembly.tcp.TCPStreamReassembler` read it, it holds exactly one
connection whose two byte streams never miss a byte, so that each stream is the new bytes
of its segments in capture order:

- the first segment is the client's SYN (no ACK), the second the server's SYN+ACK, and no
  other segment carries SYN (one connection: no port reuse);
- sequence numbers are unwrapped per direction, each from the previous segment's; no
  segment up to its sender's FIN starts beyond the bytes delivered so far (no hole, no
  reordering). Retransmissions and overlaps are fine: the first copy of a byte wins, as in
  the reassembler; bytes after a FIN carry nothing;
- no payload on a SYN or an RST, none cut by the snap length;
- a retransmission or overlap carries the same bytes as the first copy
  (:meth:`GroupCheck.overlaps` lists them; the batch compares them, and a group whose
  copies differ takes the exact path, which reports the inconsistent retransmission);
- no ACK, up to the end of the connection, acknowledges bytes of the other direction that
  the capture did not hold before it (the reassembler would report them ``acked-unseen``);
- the connection ends at the later of the first FINs of both sides, or at an RST before
  that, which must lie within ``RST_WINDOW`` of its sender's bytes (else the tracker
  ignores it). Later segments only count (packets, last frame) and reach the analyzer.

Such a connection's TCP expert analysis records only its FIN/RST and keep-alive notes,
window scale and stalls (all computed vectorized; the stalls by :func:`_stalls`), unless a
zero window or a full window shows up; :func:`classify_groups` finds those vectorized, and
the connection's state is then computed by the exact :class:`TCPAnalyzer` over its segments
(the bytes stay on the fast path).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import numpy as np

from sse_forensics.ingest.packet_index import PacketIndex, narrowest
from sse_forensics.ingest.packets import TCP_ACK, TCP_FIN, TCP_RST, TCP_SYN
from sse_forensics.provenance import Origin
from sse_forensics.reassembly.flows import Connection, community_id
from sse_forensics.reassembly.loss import DirectionLoss
from sse_forensics.reassembly.seq import SEQ_HALF, seq_add, seq_diff
from sse_forensics.reassembly.stream import Direction
from sse_forensics.reassembly.tcp import RST_WINDOW
from sse_forensics.reassembly.tcp_analysis import (
    STALL_SECONDS,
    NoteKind,
    Stall,
    TCPAnalyzer,
    TCPNote,
    TCPState,
)

_CONTROL = TCP_SYN | TCP_ACK | TCP_RST | TCP_FIN
_FIN_RST: tuple[tuple[NoteKind, int], ...] = (("fin", TCP_FIN), ("rst", TCP_RST))

# Fallback reasons of the TCP layer, in the order they are checked.
R_HANDSHAKE = "tcp: no clean handshake first"
R_SYN = "tcp: another SYN (retransmission or port reuse)"
R_RST = "tcp: RST with payload, or one the tracker ignores"
R_SNAPLEN = "tcp: payload cut by the snap length"
R_SEQUENCE = "tcp: retransmission, overlap, hole or reordering"
R_ACKED_UNSEEN = "tcp: ACK of bytes the capture lacks"
R_INCONSISTENT = "tcp: retransmission that differs from the first copy"


@dataclass(slots=True)
class FlowGroups:
    """The TCP rows of a capture grouped by 4-tuple (either direction), groups in order of
    their first row (the order of ``ConnectionTracker``'s flow table), rows ascending."""

    rows: np.ndarray  # all TCP rows, grouped (int32; int64 past 2**31 frames)
    starts: np.ndarray  # int64 [G + 1]: group g is rows[starts[g]:starts[g + 1]]
    first_row: np.ndarray  # int64 [G]

    def __len__(self) -> int:
        return len(self.first_row)

    def group_rows(self, g: int) -> np.ndarray:
        return self.rows[self.starts[g] : self.starts[g + 1]]


GROUP_ROWS = 1 << 18
"""Frames whose flow keys are computed at once (read at call time): the grouping's
temporaries (some ten values per TCP row) are held for one chunk, not for the capture
(issue 9: over the whole capture they were the peak of a 5 GB capture's scan)."""


def group_flows(index: PacketIndex) -> FlowGroups:
    """The TCP rows of ``index`` grouped by 4-tuple, in two passes over chunks of
    :data:`GROUP_ROWS` frames: the first finds each flow key, its first row and its row
    count; the second places each chunk's rows after those of earlier chunks in their
    group's span (rows ascending in a group, groups in order of their first row)."""
    chunk = max(1, GROUP_ROWS)
    n_frames = len(index.is_tcp)
    endpoints = _endpoints(index, chunk)
    keys, firsts, counts = [], [], []
    for lo in range(0, n_frames, chunk):
        rows, key = _flow_keys(index, lo, min(n_frames, lo + chunk), endpoints)
        if len(key):
            unique, first, count = np.unique(key, return_index=True, return_counts=True)
            keys.append(unique)
            firsts.append(rows[first])
            counts.append(count)
    if not keys:
        empty = np.zeros(0, dtype=np.int64)
        return FlowGroups(empty, np.zeros(1, dtype=np.int64), empty)
    all_keys = np.concatenate(keys)
    flow_keys, at, where = np.unique(all_keys, return_index=True, return_inverse=True)
    first_row = np.concatenate(firsts)[at]  # chunks in row order: the first chunk's first
    per_flow = np.bincount(where.reshape(-1), np.concatenate(counts), len(flow_keys))
    del keys, firsts, counts, all_keys, at, where
    order = np.argsort(first_row, kind="stable")
    rank = np.empty(len(order), dtype=np.int64)
    rank[order] = np.arange(len(order))
    starts = np.zeros(len(order) + 1, dtype=np.int64)
    np.cumsum(per_flow[order].astype(np.int64), out=starts[1:])
    fill = starts[:-1].copy()  # the next free place in each group's span
    # Row numbers as int32 below 2**31 frames (issue 9: held for the whole reassembly).
    grouped = np.empty(int(starts[-1]), dtype=np.int32 if n_frames < 1 << 31 else np.int64)
    for lo in range(0, n_frames, chunk):
        rows, key = _flow_keys(index, lo, min(n_frames, lo + chunk), endpoints)
        if not len(key):
            continue
        group = rank[np.searchsorted(flow_keys, key)]
        by_group = np.argsort(group, kind="stable")
        group = group[by_group]
        head = np.flatnonzero(np.r_[True, group[1:] != group[:-1]])
        size = np.diff(np.r_[head, len(group)])
        place = fill[group] + np.arange(len(group)) - np.repeat(head, size)
        grouped[place] = rows[by_group]
        fill[group[head]] += size
    return FlowGroups(grouped, starts, first_row[order])


def _flow_keys(
    index: PacketIndex, lo: int, hi: int, endpoints: np.ndarray | None
) -> tuple[np.ndarray, np.ndarray]:
    """The TCP rows of frames ``lo:hi`` and their flow keys (int64): equal keys, one
    4-tuple in either direction. Without ``endpoints`` an address index below 2**15 and a
    port make an endpoint below 2**31, and the pair one int64; else the pair is the two
    endpoints' places in ``endpoints``."""
    rows = lo + np.flatnonzero(index.is_tcp[lo:hi])
    a = (index.src[rows].astype(np.int64) << 16) | index.sport[rows].astype(np.int64)
    b = (index.dst[rows].astype(np.int64) << 16) | index.dport[rows].astype(np.int64)
    low = np.minimum(a, b)
    high = np.maximum(a, b, out=a)
    if endpoints is None:
        low <<= 31
        low |= high
        return rows, low
    low = np.searchsorted(endpoints, low)
    low *= len(endpoints)
    low += np.searchsorted(endpoints, high)
    return rows, low


def _endpoints(index: PacketIndex, chunk: int) -> np.ndarray | None:
    """Every endpoint (address index << 16 | port) of a TCP row, sorted and once each; None
    when every address index is below 2**15 (the pair then fits one int64; rows without
    TCP hold -1 there)."""
    if not len(index.src) or max(int(index.src.max()), int(index.dst.max())) < 1 << 15:
        return None
    parts = []
    for lo in range(0, len(index.is_tcp), chunk):
        rows = lo + np.flatnonzero(index.is_tcp[lo : lo + chunk])
        for addr, port in ((index.src, index.sport), (index.dst, index.dport)):
            parts.append(np.unique((addr[rows].astype(np.int64) << 16) | port[rows]))
    ends = np.unique(np.concatenate(parts)) if parts else np.zeros(0, dtype=np.int64)
    return ends


def _group_cummax(values: np.ndarray, g: np.ndarray) -> np.ndarray:
    """Running maximum of ``values`` (each >= -1 and < 2**41) restarting at each group."""
    out = np.empty_like(values)
    span = 1 << 20  # groups per pass: g * 2**42 stays below 2**62
    lo = 0
    n = len(values)
    while lo < n:
        g0 = int(g[lo])
        hi = int(np.searchsorted(g, g0 + span))
        shift = (g[lo:hi] - g0) << 42
        out[lo:hi] = np.maximum.accumulate(values[lo:hi] + 1 + shift) - shift - 1
        lo = hi
    return out


@dataclass(slots=True)
class GroupCheck:
    """Per group: the fallback reason (``None``: candidate) and what the fast path needs."""

    reason: list[str | None]
    candidate: np.ndarray  # bool [G]
    exact_tcp: np.ndarray  # bool [G]: TCP expert analysis needs the exact analyzer
    server: np.ndarray  # bool per grouped row: sent by the server
    # Per grouped row, each in the smallest integer dtype its values need (issue 9: held
    # for the whole reassembly; widen before arithmetic):
    fresh: np.ndarray  # bytes it adds to its stream (first copy); the payload bytes
    # before them (already seen) are the rest of its payload (:func:`skipped`)
    final: np.ndarray  # int64 [G]: grouped index of the row that finalises it, or -1
    first_rst: np.ndarray  # int64 [G]: grouped index of the first RST, or len(rows)
    shift: np.ndarray  # int8 [G, 2]: window scale of client, server
    # The rows whose payload repeats bytes already delivered (a retransmission or overlap
    # the reassembler compares with the first copy), held for those rows only (issue 9: a
    # clean capture has next to none, and per row these were 6 bytes): their positions in
    # the per-row arrays (int64, ascending), how many bytes repeat, where they start in
    # the payload and in the stream (narrowest dtypes).
    overlap_row: np.ndarray
    overlap_len: np.ndarray
    overlap_skip: np.ndarray
    overlap_at: np.ndarray
    # int64 [G + 1]: the per-row arrays hold the rows of candidates only (issue 16: a flood's
    # groups need none), group g's at row_start[g]:row_start[g + 1] (empty unless candidate).
    row_start: np.ndarray
    # The stalls of candidates without ``exact_tcp`` (:func:`_stalls`), one per stall in
    # group order, then in the order the analyzer records them: the group (int64,
    # ascending); its sender (bool: the server); positions in the group (int64) of its start
    # (the sender's last payload row), of the row that judged it (the group's length: the
    # end of the capture) and of its end (-1: none); whether that end retransmits.
    stall_group: np.ndarray
    stall_server: np.ndarray
    stall_start: np.ndarray
    stall_judged: np.ndarray
    stall_end: np.ndarray
    stall_retransmission: np.ndarray
    # The keep-alives of candidates without ``exact_tcp``: group (int64, ascending) and
    # position in the group (int64, ascending in a group).
    alive_group: np.ndarray
    alive_at: np.ndarray

    def span(self, g: int) -> tuple[int, int]:
        """Where candidate ``g``'s rows are in the per-row arrays (in group order)."""
        return int(self.row_start[g]), int(self.row_start[g + 1])

    def stalls(self, g: int) -> range:
        """The stalls (indexes into ``stall_*``) of group ``g``."""
        return _between(self.stall_group, g, g + 1)

    def keep_alives(self, g: int) -> np.ndarray:
        """The positions of group ``g``'s keep-alives in the group."""
        at = _between(self.alive_group, g, g + 1)
        return self.alive_at[at.start : at.stop]

    def overlaps(self, lo: int, hi: int) -> range:
        """The overlaps (indexes into ``overlap_*``) of the rows in ``[lo, hi)`` (one
        group's :meth:`span`)."""
        return _between(self.overlap_row, lo, hi)


def _between(at: np.ndarray, lo: int, hi: int) -> range:
    """The indexes of ``at`` (ascending integers) whose value lies in ``[lo, hi)``."""
    return range(int(np.searchsorted(at, lo)), int(np.searchsorted(at, hi)))


def skipped(index: PacketIndex, rows: np.ndarray, fresh: np.ndarray) -> np.ndarray:
    """Payload bytes of ``rows`` before their ``fresh`` ones (already seen), int64."""
    out: np.ndarray = index.payload_len[rows].astype(np.int64) - fresh
    return out


_PER_ROW = ("server", "fresh")
_NARROWED = ("fresh", "overlap_len", "overlap_skip", "overlap_at")
_OVERLAPS = ("overlap_row", "overlap_len", "overlap_skip", "overlap_at")


CLASSIFY_ROWS = 1 << 18
"""Grouped rows classified at once (whole groups): the classification's temporaries (some
thirty values per row) are held for one slice of groups, not for the whole capture
(issue 16: a flood of a million SYNs cost 480 MB there)."""


def classify_groups(index: PacketIndex, groups: FlowGroups, capture_end: float) -> GroupCheck:
    """Every group's :class:`GroupCheck`, computed over slices of whole groups of about
    :data:`CLASSIFY_ROWS` rows (each group's check depends on its own rows only)."""
    n = len(groups.rows)
    if n <= CLASSIFY_ROWS:
        return _candidates_only(_classify(index, groups, capture_end), groups)
    parts: list[tuple[int, GroupCheck]] = []
    g0 = 0
    while g0 < len(groups):
        lo = int(groups.starts[g0])
        g1 = max(g0 + 1, int(np.searchsorted(groups.starts, lo + CLASSIFY_ROWS, side="right")) - 1)
        g1 = min(g1, len(groups))
        hi = int(groups.starts[g1])
        part = FlowGroups(
            groups.rows[lo:hi], groups.starts[g0 : g1 + 1] - lo, groups.first_row[g0:g1]
        )
        parts.append((lo, _candidates_only(_classify(index, part, capture_end), part)))
        g0 = g1
    return _join_checks(parts, n)


def _candidates_only(check: GroupCheck, groups: FlowGroups) -> GroupCheck:
    """``check`` with its per-row arrays cut to the rows of candidates, each in the
    narrowest dtype that holds its values."""
    for name in _NARROWED:
        setattr(check, name, narrowest(getattr(check, name)))
    if bool(check.candidate.all()):
        return check
    counts = np.diff(groups.starts)
    keep = np.repeat(check.candidate, counts)
    kept = keep[check.overlap_row]
    moved = np.cumsum(keep) - 1  # a kept row's position among the kept ones
    check.overlap_row = moved[check.overlap_row[kept]]
    for name in _OVERLAPS[1:]:
        setattr(check, name, getattr(check, name)[kept])
    del moved
    for name in _PER_ROW:
        setattr(check, name, getattr(check, name)[keep])
    check.row_start = np.zeros(len(counts) + 1, dtype=np.int64)
    np.cumsum(np.where(check.candidate, counts, 0), out=check.row_start[1:])
    return check


def _join_checks(parts: list[tuple[int, GroupCheck]], n: int) -> GroupCheck:
    """The checks of consecutive slices of groups (each with its first grouped row) as one;
    grouped indexes shifted, "none" values (-1, a slice's row count) made the whole's."""

    def cat(name: str) -> np.ndarray:
        """Column ``name`` of all slices, each slice's let go once copied (issue 9: the
        per-row columns are not held twice at once)."""
        out = np.concatenate([getattr(c, name) for _lo, c in parts])
        for _lo, c in parts:
            setattr(c, name, out[:0])
        return out

    final = np.concatenate([np.where(c.final >= 0, c.final + lo, -1) for lo, c in parts])
    ends = [lo for lo, _c in parts[1:]] + [n]
    first_rst = np.concatenate(  # a slice's "none" is its own row count
        [
            np.where(c.first_rst < end - lo, c.first_rst + lo, n)
            for (lo, c), end in zip(parts, ends, strict=True)
        ]
    )
    row_start = [np.zeros(1, dtype=np.int64)]
    overlap_row = []
    stall_group = []
    alive_group = []
    at = g0 = 0
    for _lo, c in parts:
        row_start.append(c.row_start[1:] + at)
        overlap_row.append(c.overlap_row + at)
        stall_group.append(c.stall_group + g0)
        alive_group.append(c.alive_group + g0)
        at += int(c.row_start[-1])
        g0 += len(c.candidate)
    return GroupCheck(
        [why for _lo, c in parts for why in c.reason],
        cat("candidate"),
        cat("exact_tcp"),
        cat("server"),
        cat("fresh"),
        final,
        first_rst,
        np.concatenate([c.shift for _lo, c in parts]).reshape(-1, 2),
        np.concatenate(overlap_row),
        cat("overlap_len"),
        cat("overlap_skip"),
        cat("overlap_at"),
        np.concatenate(row_start),
        np.concatenate(stall_group),
        cat("stall_server"),
        cat("stall_start"),
        cat("stall_judged"),
        cat("stall_end"),
        cat("stall_retransmission"),
        np.concatenate(alive_group),
        cat("alive_at"),
    )


def _classify(index: PacketIndex, groups: FlowGroups, capture_end: float) -> GroupCheck:
    rows = groups.rows
    starts = groups.starts
    n_groups = len(groups)
    n = len(rows)
    counts = np.diff(starts)
    g = np.repeat(np.arange(n_groups, dtype=np.int64), counts)
    gs = starts[:-1]
    gstart = np.repeat(gs, counts)
    flags = index.flags[rows].astype(np.int64)
    seq = index.seq[rows].astype(np.int64)
    ack = index.ack[rows].astype(np.int64)
    plen = index.payload_len[rows].astype(np.int64)
    tail = index.tail[rows].astype(np.int64)
    window = index.window[rows].astype(np.int64)
    ts = index.ts[rows]
    src = index.src[rows].astype(np.int64)
    sport = index.sport[rows].astype(np.int64)
    server = (src != src[gstart]) | (sport != sport[gstart])
    client = ~server
    syn = (flags & TCP_SYN) != 0
    fin = (flags & TCP_FIN) != 0
    rst = (flags & TCP_RST) != 0
    has_ack = (flags & TCP_ACK) != 0

    def any_per_group(mask: np.ndarray) -> np.ndarray:
        return np.bincount(g[mask], minlength=n_groups) > 0

    reason: list[str | None] = [None] * n_groups
    bad = np.zeros(n_groups, dtype=bool)

    def mark(mask_groups: np.ndarray, why: str) -> None:
        for gi in np.flatnonzero(mask_groups & ~bad).tolist():
            reason[gi] = why
        bad[mask_groups] = True

    two = counts >= 2
    second = np.where(two, gs + 1, gs)
    handshake = (
        two
        & ((flags[gs] & _CONTROL) == TCP_SYN)
        & ((flags[second] & _CONTROL) == (TCP_SYN | TCP_ACK))
        & server[second]
    )
    mark(~handshake, R_HANDSHAKE)
    mark(np.bincount(g[syn], minlength=n_groups) != 2, R_SYN)
    mark(any_per_group(rst & (plen > 0)), R_RST)
    mark(any_per_group(tail != 0), R_SNAPLEN)
    mark(any_per_group(syn & (plen > 0)), R_SEQUENCE)

    # Sequence numbers unwrapped per direction (offsets from ISN + 1), each from the one
    # before it in that direction; RSTs stay out of the chain (they are judged apart).
    base_c = seq_add(seq[gs], 1)
    base_s = seq_add(seq[second], 1)
    base_own = np.where(server, base_s[g], base_c[g])
    base_peer = np.where(server, base_c[g], base_s[g])
    idx = np.arange(n, dtype=np.int64)
    off = np.zeros(n, dtype=np.int64)
    for side_mask in (client, server):
        pos = idx[side_mask & ~rst]
        if not len(pos):
            continue
        lane_first = np.ones(len(pos), dtype=bool)
        lane_first[1:] = g[pos[1:]] != g[pos[:-1]]
        step = np.zeros(len(pos), dtype=np.int64)
        step[1:] = seq_diff(seq[pos[1:]], seq[pos[:-1]])
        step[lane_first] = 0
        total = np.cumsum(step)
        lane_start = np.maximum.accumulate(np.where(lane_first, np.arange(len(pos)), 0))
        off[pos] = total - total[lane_start] - 1

    # First FIN of each side, first RST.
    first = np.full((n_groups, 3), n, dtype=np.int64)  # first FIN client, server; first RST
    for col, mask in ((0, fin & client), (1, fin & server), (2, rst)):
        pos = idx[mask]
        if len(pos):
            head = np.ones(len(pos), dtype=bool)
            head[1:] = g[pos[1:]] != g[pos[:-1]]
            first[g[pos[head]], col] = pos[head]
    own_fin = np.where(server, first[g, 1], first[g, 0])
    peer_fin = np.where(server, first[g, 0], first[g, 1])

    # Bytes delivered in each direction after each row: segments up to the sender's FIN
    # (later ones carry nothing new), first copy of each byte wins.
    reach = np.where(~rst & (idx <= own_fin), np.maximum(off + plen, 0), 0)
    delivered = np.zeros((2, n), dtype=np.int64)  # [side, row]: after the rows up to it
    for side, side_mask in ((0, client), (1, server)):
        delivered[side] = _group_cummax(np.where(side_mask, reach, 0), g)
    before = np.zeros((2, n), dtype=np.int64)  # ... after the rows before it
    before[:, 1:] = delivered[:, :-1]
    before[:, gs] = 0
    side_of = server.astype(np.int64)
    got_own = before[side_of, idx]
    got_peer = before[1 - side_of, idx]

    # Finalisation: at the later of the two first FINs (the connection is finished and, no
    # byte being missing, settled there), or at an RST before it. An RST must be one the
    # tracker believes (RST_WINDOW of the bytes its sender sent), or it would be ignored.
    fin_final = np.where((first[:, :2] < n).all(axis=1), first[:, :2].max(axis=1), n)
    first_rst = first[:, 2]
    by_rst = first_rst <= fin_final  # (equal: FIN and RST on one segment, judged as an RST)
    at = np.minimum(first_rst, n - 1)
    delta = seq_diff(seq[at], base_own[at] + got_own[at])
    mark(by_rst & (np.abs(delta) > RST_WINDOW), R_RST)
    final_at = np.minimum(fin_final, first_rst)
    final = np.where(final_at < n, final_at, -1)
    read = ~rst & ((final[g] < 0) | (idx <= final[g]))  # rows the reassembler reads

    live = ~syn & ~rst
    mark(any_per_group(live & (np.abs(off - got_own) >= SEQ_HALF >> 1)), R_SEQUENCE)
    carries = live & read & (idx <= own_fin) & ((plen > 0) | fin)
    hole = carries & (off > got_own)
    hole |= live & read & fin & (idx == own_fin) & (off + plen < got_own)
    mark(any_per_group(hole), R_SEQUENCE)
    unseen = has_ack & read & (idx <= peer_fin) & (seq_diff(ack, base_peer + got_peer) > 0)
    mark(any_per_group(unseen), R_ACKED_UNSEEN)
    fresh = np.where(carries & ~hole, np.maximum(off + plen - got_own, 0), 0)
    fresh = np.minimum(fresh, plen)
    # Retransmitted or overlapping bytes, compared with the first copy like the reassembler
    # does (before it drops them): payload of a row it reads that starts below the bytes
    # delivered so far.
    ov_lo = np.maximum(off, 0)
    ov_hi = np.minimum(off + plen, got_own)
    repeats = live & read & (plen > 0) & (ov_hi > ov_lo)
    overlap_row = np.flatnonzero(repeats)
    overlap_len = (ov_hi - ov_lo)[overlap_row]
    overlap_skip = (ov_lo - off)[overlap_row]
    overlap_at = ov_lo[overlap_row]
    del ov_lo, ov_hi, repeats

    # Window scale (RFC 7323 §2.2: only when both SYNs offered it).
    ws_c = index.wscale[rows[gs]].astype(np.int64)
    ws_s = index.wscale[rows[second]].astype(np.int64)
    scaled = (ws_c >= 0) & (ws_s >= 0)
    shift = np.stack([np.where(scaled, ws_c, 0), np.where(scaled, ws_s, 0)], axis=1)

    # Would the expert analysis record more than FIN/RST and keep-alive notes and stalls? A
    # zero window or a full window: then its exact analyzer runs on the connection.
    zero = has_ack & ~rst & (window == 0) & ~syn & ~fin
    exact_tcp = any_per_group(zero)
    # Keep-alives: at most one byte at the sender's next sequence number minus one.
    sent = np.where(rst, -1, off + plen + fin)
    sent[syn] = 0
    nxt = np.zeros((2, n), dtype=np.int64)
    for side, side_mask in ((0, client), (1, server)):
        nxt[side] = _group_cummax(np.where(side_mask, sent, -1), g)
    nxt_before = np.full(n, -(1 << 40), dtype=np.int64)
    nxt_before[1:] = nxt[side_of[1:], idx[1:] - 1]
    nxt_before[gs] = -(1 << 40)
    keep_alive = ~syn & ~fin & ~rst & (plen <= 1) & (off == nxt_before - 1)
    data = (plen > 0) & ~syn & ~rst
    for side_mask, peer_mask, peer_col in ((client, server, 1), (server, client, 0)):
        # The peer's last ACK-bearing segment before each row: its ack and window (an RST's
        # say nothing).
        marks = np.where(peer_mask & has_ack & ~rst, idx, -1)
        last = np.maximum.accumulate(marks)
        prev = np.empty(n, dtype=np.int64)
        if n:
            prev[0] = -1
            prev[1:] = last[:-1]
        known = prev >= gstart
        j = np.where(known, prev, 0)
        win = np.where(syn[j], window[j], window[j] << shift[g, peer_col])
        end = seq_add(seq, plen + fin)
        # The segment reaches the right edge of the window the peer last advertised.
        full = data & side_mask & known & (win != 0) & (seq_diff(ack[j] + win, end) <= 0)
        exact_tcp |= any_per_group(full)
    # Stalls: computed here for the groups the exact analyzer does not take.
    stalls = _stalls(
        _StallInput(ts, g, starts, server, data, has_ack & ~rst, seq, ack, nxt, final),
        (base_c, base_s),
        capture_end,
    )
    keep = (~exact_tcp & ~bad)[stalls[0]]
    s_group, s_server, s_start, s_judged, s_end, s_resent = (c[keep] for c in stalls)
    # Keep-alives (without a zero window no segment is a zero-window probe instead).
    alive = np.flatnonzero(keep_alive & (~exact_tcp & ~bad)[g])

    return GroupCheck(
        reason,
        ~bad,
        exact_tcp,
        server,
        fresh,
        final,
        first_rst,
        shift.astype(np.int8),  # at most 14 (RFC 7323 §2.3); the check is kept per group
        overlap_row,
        overlap_len,
        overlap_skip,
        overlap_at,
        starts,
        s_group,
        s_server,
        s_start,
        s_judged,
        s_end,
        s_resent,
        g[alive],
        alive - gstart[alive],
    )


@dataclass(frozen=True, slots=True)
class _StallInput:
    """The per-row columns of a slice of groups :func:`_stalls` reads."""

    ts: np.ndarray  # float64 [n]
    g: np.ndarray  # int64 [n]: the row's group
    starts: np.ndarray  # int64 [G + 1]
    server: np.ndarray  # bool [n]: sent by the server
    data: np.ndarray  # bool [n]: payload, no SYN, no RST (what sets a side's last_data)
    acks: np.ndarray  # bool [n]: ACK and no RST (what sets a side's ack)
    seq: np.ndarray  # int64 [n]
    ack: np.ndarray  # int64 [n]
    nxt: np.ndarray  # int64 [2, n]: each side's next-sequence offset after the row (-1: none)
    final: np.ndarray  # int64 [G]: grouped index of the finalising row, or -1


def _stalls(
    cols: _StallInput, base: tuple[np.ndarray, np.ndarray], capture_end: float
) -> tuple[np.ndarray, ...]:
    """The stalls :class:`TCPAnalyzer` records in each group that has no zero or full
    window (its stalls are then all ``unacknowledged``), as :class:`GroupCheck`'s
    ``stall_*`` columns; ``base``: each side's sequence number of offset 0 per group.

    The analyzer judges a side's silence once: at the first segment (either side's, any
    timestamp order) whose ts lies :data:`STALL_SECONDS` after the side's last payload
    segment, before that segment changes the state, or at the end of the capture when no
    segment did and the connection was never finalised (the close at the finalising
    segment judges nothing that segment did not). It records a stall when the side's next
    sequence number is after the peer's last ack (RFC 9293 §3.4); the stall ends at the
    side's next payload segment, a retransmission when that starts before the side's next
    sequence number. Two stalls judged at one segment: its sender's first."""
    ts, g, starts = cols.ts, cols.g, cols.starts
    n = len(ts)
    idx = np.arange(n, dtype=np.int64)
    gend = starts[1:] - 1
    open_at_end = np.flatnonzero((gend >= starts[:-1]) & (cols.final < 0))
    parts: list[tuple[np.ndarray, ...]] = []
    for side, side_mask in ((0, ~cols.server), (1, cols.server)):
        mine = cols.data & side_mask
        last = np.maximum.accumulate(np.where(mine, idx, -1))  # last payload row, up to each
        since = np.full(n, -1, dtype=np.int64)  # ... before each row
        since[1:] = last[:-1]
        valid = since >= starts[g]
        at = np.where(valid, since, 0)
        silent = valid & (ts - ts[at] >= STALL_SECONDS)
        seen = np.cumsum(silent)  # a silence is judged at its first silent row only
        judged = np.flatnonzero(silent & (seen - seen[at] == 1))
        # At the end of the capture: silences no row judged, long enough at its end.
        tail = last[gend[open_at_end]]
        ended = open_at_end[tail >= starts[open_at_end]]
        tail = last[gend[ended]]
        quiet = (seen[gend[ended]] == seen[tail]) & (capture_end - ts[tail] >= STALL_SECONDS)
        ended, tail = ended[quiet], tail[quiet]
        start = np.concatenate([since[judged], tail])
        del last, since, valid, at, silent, seen  # per-row temporaries (a slice's peak)
        group = g[start]
        judged_at = np.concatenate([judged, starts[ended + 1]])  # the group's end: its length
        # Of two stalls judged at one row, its sender's first; at the end, the client's.
        order = np.concatenate([cols.server[judged] != bool(side), np.full(len(ended), side == 1)])
        # The state before the judging row (after the group's last row at the end).
        before = np.concatenate([judged - 1, gend[ended]])
        peer_ack = np.maximum.accumulate(np.where(~side_mask & cols.acks, idx, -1))[before]
        sent = seq_add(base[side][group], cols.nxt[side, before])
        unacked = (peer_ack >= starts[group]) & (
            seq_diff(sent, cols.ack[np.maximum(peer_ack, 0)]) > 0
        )
        # Its end: the side's next payload row in the group, resending bytes if it starts
        # before the side's next sequence number.
        upcoming = np.minimum.accumulate(np.where(mine, idx, n)[::-1])[::-1]
        end = np.append(upcoming, n)[start + 1]
        end = np.where(end <= gend[group], end, -1)
        sent = seq_add(base[side][group], cols.nxt[side, np.maximum(end - 1, 0)])
        resent = (end >= 0) & (seq_diff(sent, cols.seq[np.maximum(end, 0)]) > 0)
        server = np.full(len(start), side == 1)
        columns = (group, server, start, judged_at, end, resent, order)
        parts.append(tuple(column[unacked] for column in columns))
    group, server, start, judged_at, end, resent, order = (
        np.concatenate([part[k] for part in parts]) for k in range(7)
    )
    sort = np.lexsort((order, judged_at, group))
    first = starts[group]
    return (
        group[sort],
        server[sort],
        (start - first)[sort],
        (judged_at - first)[sort],
        np.where(end >= 0, end - first, -1)[sort],
        resent[sort],
    )


def _origin(index: PacketIndex, row: int) -> Origin:
    return Origin(index.sources[int(index.file[row])], int(index.frame[row]), float(index.ts[row]))


def build_connection(
    index: PacketIndex,
    groups: FlowGroups,
    check: GroupCheck,
    gi: int,
    conn_id: int,
    capture_end: float,
) -> tuple[Connection, Connection]:
    """The :class:`Connection` the tracker would build for candidate group ``gi``: as it is
    at the end of the capture, and as it was when finalised (what the sink pickles; the
    segments after it, such as the last ACK, still count in the first)."""
    lo, hi = int(groups.starts[gi]), int(groups.starts[gi + 1])
    rows = groups.rows[lo:hi]
    clo, chi = check.span(gi)
    server = check.server[clo:chi]
    first_row = int(rows[0])
    addresses = index.addresses
    client = (addresses[int(index.src[first_row])], int(index.sport[first_row]))
    server_ep = (addresses[int(index.dst[first_row])], int(index.dport[first_row]))
    first = _origin(index, first_row)
    conn = Connection(
        id=conn_id,
        client=client,
        server=server_ep,
        community_id=community_id(client, server_ep),
        first=first,
        last=_origin(index, int(rows[-1])),
        handshake_seen=True,
        mid_stream=False,
    )
    conn.packets = len(rows)
    final = int(check.final[gi]) - lo if check.final[gi] >= 0 else -1
    flags = index.flags[rows]
    # The tracker records each side's first FIN up to the end of the connection; the
    # analyzer notes each side's first FIN and RST in every segment, and keep-alives.
    notes: list[TCPNote] = []
    note_at: list[int] = []
    noted: set[tuple[str, bool]] = set()
    alive = check.keep_alives(gi)
    marked = np.flatnonzero((flags & (TCP_FIN | TCP_RST)) != 0)
    for p in (np.union1d(marked, alive) if len(alive) else marked).tolist():
        side = bool(server[p])
        direction: Direction = "server" if side else "client"
        if not flags[p] & (TCP_FIN | TCP_RST):  # (keep-alives carry neither)
            notes.append(TCPNote("keep-alive", direction, _origin(index, int(rows[p]))))
            note_at.append(p)
            continue
        for kind, bit in _FIN_RST:
            if flags[p] & bit and (kind, side) not in noted:
                noted.add((kind, side))
                notes.append(TCPNote(kind, direction, _origin(index, int(rows[p]))))
                note_at.append(p)
                if kind == "fin" and (final < 0 or p <= final):
                    conn.fin[direction] = notes[-1].origin
    rst_p = int(check.first_rst[gi]) - lo
    if rst_p < len(rows):
        conn.rst = _origin(index, int(rows[rst_p]))
        conn.rst_by = "server" if server[rst_p] else "client"
    fresh = check.fresh[clo:chi]
    conn.loss = {
        "client": DirectionLoss(bytes_seen=int(fresh[~server].sum())),
        "server": DirectionLoss(bytes_seen=int(fresh[server].sum())),
    }
    if check.exact_tcp[gi]:
        conn.tcp, at_final = _exact_tcp_state(index, rows, server, final, capture_end)
    else:
        shift_c, shift_s = (int(x) for x in check.shift[gi])
        state = TCPState(window_scale={"client": shift_c, "server": shift_s})
        state.tcp_notes = notes
        state.stalls, final_stalls = _stall_records(index, rows, check, gi, final)
        conn.tcp = state
        at_final = TCPState(
            window_scale=dict(state.window_scale),
            tcp_notes=[n for n, p in zip(notes, note_at, strict=True) if final < 0 or p <= final],
            stalls=final_stalls,
        )
    if final < 0 or final == len(rows) - 1:
        return conn, conn
    snapshot = copy.copy(conn)
    snapshot.packets = final + 1
    snapshot.last = _origin(index, int(rows[final]))
    snapshot.tcp = at_final
    if rst_p > final:
        snapshot.rst = snapshot.rst_by = None
    return conn, snapshot


def _stall_records(
    index: PacketIndex, rows: np.ndarray, check: GroupCheck, gi: int, final: int
) -> tuple[list[Stall], list[Stall]]:
    """Group ``gi``'s stalls (:func:`_stalls`) at the end, and as they were when the
    connection was finalised at position ``final`` (-1: never): the ones judged by then,
    ended if their end came by then."""
    at_end: list[Stall] = []
    at_final: list[Stall] = []
    for k in check.stalls(gi):
        sender: Direction = "server" if check.stall_server[k] else "client"
        start = _origin(index, int(rows[int(check.stall_start[k])]))
        end_p = int(check.stall_end[k])
        end = _origin(index, int(rows[end_p])) if end_p >= 0 else None
        resent = bool(check.stall_retransmission[k])
        at_end.append(Stall(sender, "unacknowledged", start, end, resent))
        if final >= 0 and int(check.stall_judged[k]) <= final:
            ended = 0 <= end_p <= final
            at_final.append(
                Stall(sender, "unacknowledged", start, end if ended else None, resent and ended)
            )
    return at_end, at_end if final < 0 else at_final


def _exact_tcp_state(
    index: PacketIndex, rows: np.ndarray, server: np.ndarray, final: int, capture_end: float
) -> tuple[TCPState, TCPState]:
    """The analyzer's state at the end, and as it was when the connection was finalised."""
    analyzer = TCPAnalyzer()
    at_final = None
    for p, row in enumerate(rows.tolist()):
        seg = index.segment(row)
        assert seg is not None, "a connection's row that is no TCP segment"
        analyzer.segment("server" if server[p] else "client", seg)
        if p == final:
            analyzer.close(seg.origin.ts)
            at_final = copy.deepcopy(analyzer.state)
    if at_final is None:
        analyzer.close(capture_end)
        return analyzer.state, analyzer.state
    return analyzer.state, at_final
