"""TCP reassembly for one direction of a connection (sans-I/O: segments in, pieces out).

Sequence numbers (RFC 9293 §3.4) are unwrapped into 64-bit offsets from the first byte
of the direction: ISN+1 when the SYN was seen, otherwise the first sequence number seen
(a mid-stream pickup, flagged by :attr:`TCPStreamReassembler.mid_stream` and announced
by a ``mid-stream`` span of unknown length at offset 0). Bytes of a mid-stream pickup
that arrive later but sit before that first sequence number are dropped.

Policy, as in Zeek: the first copy of a byte wins; retransmitted or overlapping bytes are
dropped; out-of-order data is held until the hole before it fills. A retransmission or
overlap whose bytes differ from the first copy still held (out of order, or delivered and
not yet acknowledged by the peer: the last :data:`RECENT_BYTES`) is reported as an
:class:`Inconsistency` — the receiver may have kept the other copy. A hole that can no
longer fill becomes a :class:`MissingSpan` — ``acked-unseen`` when the peer acknowledged
bytes the capture never saw, ``hole`` when the buffer limit or the end of the capture is
reached, ``snaplen`` for payload cut by the capture's snap length.
"""

from __future__ import annotations

from bisect import insort
from collections import deque

from sse_forensics.provenance import Origin
from sse_forensics.reassembly.seq import seq_add, seq_diff
from sse_forensics.reassembly.stream import (
    INCONSISTENT_SHOWN,
    Direction,
    Inconsistency,
    MissingReason,
    MissingSpan,
    StreamData,
)

RST_WINDOW = 1 << 20
"""How far from the bytes seen an RST's sequence number may lie and still be believed.
RFC 9293 §3.10.7.4 (and RFC 5961 §3.2): a receiver ignores a reset outside its receive
window, so the connection goes on; the window is not always known, hence a fixed bound
(a forged or stray RST with a random sequence number falls inside it once in 2048)."""

RECENT_BYTES = 256 << 10
RECENT_PIECES = 1024
"""Delivered bytes kept to compare retransmissions with, until the peer acknowledges them:
at most this many bytes in this many pieces per direction (a receiver drops a
retransmission of bytes it acknowledged, so only unacknowledged bytes can differ between
what the capture and the receiver kept). Older bytes are not compared."""

Piece = StreamData | MissingSpan | Inconsistency
# A held out-of-order range: (offset, end, payload or None for snap-length-missing, origin).
_Held = tuple[int, int, bytes | None, Origin]


def _held_offset(item: _Held) -> int:
    return item[0]


def _differ(a: bytes, b: bytes) -> tuple[int, int] | None:
    """First and last index at which ``a`` and ``b`` (of one length) differ, or None."""
    if a == b:
        return None
    n = len(a)
    first = next(i for i in range(n) if a[i] != b[i])
    last = next(i for i in range(n - 1, -1, -1) if a[i] != b[i])
    return first, last


class TCPStreamReassembler:
    """Turns one direction's segments into in-order :class:`StreamData` and
    :class:`MissingSpan` pieces, each citing the frame its bytes came from."""

    __slots__ = (
        "_base",
        "_buffered",
        "_end",
        "_end_origin",
        "_held",
        "_last_origin",
        "_recent",
        "_recent_bytes",
        "closed",
        "delivered",
        "direction",
        "max_buffered",
        "mid_stream",
        "syn_seen",
    )

    def __init__(self, direction: Direction, max_buffered: int = 8 << 20) -> None:
        self.direction: Direction = direction
        self.max_buffered = max_buffered
        self.syn_seen = False
        self.mid_stream = False  # picked up without the SYN: offset 0 is not the stream start
        self.closed = False  # RST seen from this side: later segments are ignored
        self.delivered = 0  # every byte below this offset was emitted (as data or missing)
        self._base: int | None = None  # absolute (unwrapped) sequence number of offset 0
        self._held: list[_Held] = []
        self._buffered = 0
        self._end: int | None = None  # offset of the FIN: no data at or after it
        self._end_origin: Origin | None = None
        self._last_origin: Origin | None = None
        # Delivered, unacknowledged data: (offset, payload, origin), oldest first.
        # (a deque costs ~600 bytes: made on the first delivered byte, not per SYN)
        self._recent: deque[tuple[int, bytes, Origin]] | None = None
        self._recent_bytes = 0

    @property
    def started(self) -> bool:
        return self._base is not None

    @property
    def isn(self) -> int | None:
        """The initial sequence number of this direction, if its SYN was seen."""
        return seq_add(self._base, -1) if self.syn_seen and self._base is not None else None

    @property
    def buffered(self) -> int:
        """Bytes held out of order, waiting for a hole to fill."""
        return self._buffered

    @property
    def fin_delivered(self) -> bool:
        """A FIN was seen and every byte before it delivered (as data or missing)."""
        return self._end is not None and self.delivered >= self._end and not self._held

    def rst_acceptable(self, seq: int) -> bool:
        """Whether an RST with ``seq`` can be one the peer accepted: its sequence number
        lies within :data:`RST_WINDOW` of the bytes this direction sent."""
        if self._base is None:
            return True  # nothing to check it against
        offset = self._offset(seq)
        highest = max(self.delivered, self._held[-1][1] if self._held else 0)
        return self.delivered - RST_WINDOW <= offset <= highest + RST_WINDOW

    def _offset(self, seq: int) -> int:
        """Unwrap a 32-bit ``seq`` to the offset nearest the next expected byte."""
        base = self._base
        assert base is not None
        ref = base + self.delivered
        return ref + seq_diff(seq, ref) - base

    def segment(
        self,
        seq: int,
        payload: bytes,
        origin: Origin,
        *,
        syn: bool = False,
        fin: bool = False,
        rst: bool = False,
        missing_tail: int = 0,
    ) -> list[Piece]:
        """One segment sent in this direction. Returns the pieces it makes deliverable."""
        if self.closed:
            return []
        if self._base is None:
            if syn:
                self.syn_seen = True
                self._base = seq + 1  # RFC 9293 §3.4: the SYN occupies the ISN
            elif payload or fin or missing_tail:
                self.mid_stream = True
                self._base = seq
                # What came before the capture started is unknown, even in length.
                span = MissingSpan(self.direction, 0, None, "mid-stream", None, origin)
                rest = self.segment(seq, payload, origin, fin=fin, missing_tail=missing_tail)
                return [span, *rest]
            else:
                # A bare ACK cannot anchor a mid-stream pickup: a keep-alive probe
                # (RFC 9293 §3.8.4) carries SND.NXT-1, so the peer's ACK would then
                # look like one unseen byte.
                self.closed = rst
                return []
        start = self._offset(seq)
        if syn:
            start += 1
        if rst:
            # RFC 9293 §3.5.3: an RST carries no stream data; nothing after it counts.
            self.closed = True
            return []
        length = len(payload)
        end = start + length + missing_tail
        if fin and self._end is None:
            self._end = end
            self._end_origin = origin
        if end == start:
            return []
        if self._end is not None and end > self._end:
            # Data past the FIN is not part of the stream.
            if start >= self._end:
                return []
            cut = end - self._end
            if cut > missing_tail:
                payload = payload[: length - (cut - missing_tail)]
                missing_tail = 0
            else:
                missing_tail -= cut
            length = len(payload)
            end = self._end
        delivered = self.delivered
        out: list[Piece] = []
        if start < delivered and payload and self._recent:
            self._compare_recent(start, payload, origin, out)
        if end <= delivered:
            return out  # retransmission of bytes already delivered
        if start < delivered:  # partial overlap: only the new bytes
            skip = delivered - start
            if skip >= length:
                missing_tail -= skip - length
                payload = b""
            else:
                payload = payload[skip:]
            start = delivered
        if start == delivered and not self._held:
            # Fast path: in order, nothing held.
            self._emit(out, start, payload, missing_tail, origin)
            return out
        self._hold(start, payload, missing_tail, origin, out)
        self._drain(out)
        if self._buffered > self.max_buffered:
            self._give_up(out, "hole")
        return out

    def acknowledged(self, ack: int, origin: Origin) -> list[Piece]:
        """The peer acknowledged everything below ``ack``: holes under it will never be
        retransmitted, so they are reported (``acked-unseen``) and held data after them
        is released."""
        if self._base is None or self.closed:
            return []
        limit = self._offset(ack)
        if self._end is not None and limit > self._end:
            limit = self._end  # the ACK of a FIN counts the FIN itself
        recent = self._recent
        while recent and recent[0][0] + len(recent[0][1]) <= limit:
            self._recent_bytes -= len(recent.popleft()[1])
        if limit <= self.delivered:
            return []
        out: list[Piece] = []
        self._give_up(out, "acked-unseen", limit, origin)
        return out

    def close(self) -> list[Piece]:
        """End of capture: release held data; every remaining hole is a ``hole`` span."""
        out: list[Piece] = []
        if self._base is None:
            return out
        self._give_up(out, "hole", every_hole=True)
        if self._end is not None and self.delivered < self._end:
            # The FIN was seen but not all bytes before it.
            out.append(self._missing(self._end - self.delivered, "hole", self._end_origin))
            self.delivered = self._end
        self.closed = True
        self._recent = None
        self._recent_bytes = 0
        return out

    # -- internals ------------------------------------------------------------------------

    def _missing(self, length: int, reason: MissingReason, before: Origin | None) -> MissingSpan:
        return MissingSpan(
            self.direction,
            self.delivered,
            length,
            reason,
            self._last_origin,
            before,
        )

    def _emit(
        self, out: list[Piece], start: int, payload: bytes, missing_tail: int, origin: Origin
    ) -> None:
        if payload:
            out.append(StreamData(start, payload, origin))
            recent = self._recent
            if recent is None:
                recent = self._recent = deque()
            recent.append((start, payload, origin))
            self._recent_bytes += len(payload)
            while len(recent) > 1 and (
                self._recent_bytes > RECENT_BYTES or len(recent) > RECENT_PIECES
            ):
                self._recent_bytes -= len(recent.popleft()[1])
            start += len(payload)
            self.delivered = start
            self._last_origin = origin
        if missing_tail > 0:
            # The frame itself bounds the bytes its snap length cut off.
            out.append(MissingSpan(self.direction, start, missing_tail, "snaplen", origin, origin))
            self.delivered = start + missing_tail
            self._last_origin = origin

    def _compare_recent(self, start: int, payload: bytes, origin: Origin, out: list[Piece]) -> None:
        """``payload`` at ``start`` overlaps delivered bytes: report them if they differ
        from the first copy (as far as it is still kept)."""
        end = min(start + len(payload), self.delivered)
        found: list[tuple[int, int, bytes, Origin]] = []  # (first, last, kept bytes, frame)
        for off, data, kept_origin in self._recent or ():
            lo, hi = max(start, off), min(end, off + len(data))
            if lo >= hi:
                if off >= end:
                    break
                continue
            diff = _differ(data[lo - off : hi - off], payload[lo - start : hi - start])
            if diff is not None:
                at = lo + diff[0]
                found.append(
                    (at, lo + diff[1], data[at - off : at - off + INCONSISTENT_SHOWN], kept_origin)
                )
        if found:
            self._inconsistent(found, start, payload, origin, out)

    def _inconsistent(
        self,
        found: list[tuple[int, int, bytes, Origin]],
        start: int,
        payload: bytes,
        origin: Origin,
        out: list[Piece],
    ) -> None:
        first, _last, kept, kept_origin = found[0]
        last = found[-1][1]
        shown = payload[first - start : first - start + INCONSISTENT_SHOWN]
        out.append(
            Inconsistency(self.direction, first, last - first + 1, kept_origin, origin, kept, shown)
        )

    def _hold(
        self, start: int, payload: bytes, missing_tail: int, origin: Origin, out: list[Piece]
    ) -> None:
        """Keep the parts of [start, end) not already held (first copy wins); report held
        bytes the new copy contradicts."""
        pieces: list[_Held] = []
        if payload:
            pieces.append((start, start + len(payload), payload, origin))
        if missing_tail > 0:
            tail = start + len(payload)
            pieces.append((tail, tail + missing_tail, None, origin))
        found: list[tuple[int, int, bytes, Origin]] = []
        for held_start, held_end, held_data, held_origin in self._held:
            if not pieces:
                break
            if held_data is not None and payload:
                lo = max(start, held_start)
                hi = min(start + len(payload), held_end)
                if lo < hi:
                    diff = _differ(
                        held_data[lo - held_start : hi - held_start],
                        payload[lo - start : hi - start],
                    )
                    if diff is not None:
                        at = lo + diff[0]
                        kept = held_data[at - held_start : at - held_start + INCONSISTENT_SHOWN]
                        found.append((at, lo + diff[1], kept, held_origin))
            remaining: list[_Held] = []
            for s, e, d, o in pieces:
                if e <= held_start or s >= held_end:
                    remaining.append((s, e, d, o))
                    continue
                if s < held_start:
                    remaining.append((s, held_start, d[: held_start - s] if d else None, o))
                if e > held_end:
                    remaining.append((held_end, e, d[held_end - s :] if d else None, o))
            pieces = remaining
        for piece in pieces:
            insort(self._held, piece, key=_held_offset)
            self._buffered += piece[1] - piece[0]
        if found:
            self._inconsistent(found, start, payload, origin, out)

    def _drain(self, out: list[Piece]) -> None:
        """Emit held ranges that now start at or before the delivered offset."""
        held = self._held
        while held and held[0][0] <= self.delivered:
            start, end, data, origin = held.pop(0)
            self._buffered -= end - start
            if end <= self.delivered:
                continue
            skip = self.delivered - start
            if data is None:
                self._emit(out, self.delivered, b"", end - self.delivered, origin)
            else:
                self._emit(out, self.delivered, data[skip:] if skip else data, 0, origin)

    def _give_up(
        self,
        out: list[Piece],
        reason: MissingReason,
        limit: int | None = None,
        limit_origin: Origin | None = None,
        *,
        every_hole: bool = False,
    ) -> None:
        """Declare holes missing and release the data after them: up to ``limit`` (an
        ACK), every hole (end of capture), or else until back under ``max_buffered``."""
        while True:
            self._drain(out)
            held = self._held
            if limit is not None:
                if self.delivered >= limit:
                    return
                hole_end = min(held[0][0], limit) if held else limit
                before = held[0][3] if held and held[0][0] <= limit else limit_origin
            else:
                if not held or not (every_hole or self._buffered > self.max_buffered):
                    return
                hole_end, before = held[0][0], held[0][3]
            out.append(self._missing(hole_end - self.delivered, reason, before))
            self.delivered = hole_end
