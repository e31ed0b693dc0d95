"""Which frame each byte came from: origin marks, and a receive buffer that keeps them.

Every parser that holds bytes across frames — the TLS record layer, HTTP/2 frames, the
HTTP/1.1 readers, the SSE parser — tracks where each run of them came from the same way:
a list of *marks* ``(offset, origin)``, ascending, each naming the frame of the bytes from
its offset to the next mark's (the last one's run goes to the end of the bytes held). The
functions here are the one implementation of that bookkeeping; :class:`ReceiveBuffer` is
the buffer of the layers that re-frame a byte stream (TLS records, HTTP/2 frames): they
take whole units out of it and hand on the bytes of each unit as *pieces*,
``(bytes, Origin)`` runs each from one frame, so a finding can cite every frame that
carried what it judges.
"""

from __future__ import annotations

from typing import TypeVar

from sse_forensics.provenance import Origin

Piece = tuple[bytes, Origin]
Pieces = list[Piece]

OriginT = TypeVar("OriginT", Origin, Origin | None)  # None: bytes no frame carried (a hole)
Marks = list[tuple[int, OriginT]]
"""``(offset, origin from there on)``, ascending offsets."""


def origin_at(marks: Marks[OriginT], index: int) -> OriginT | None:
    """The origin of byte ``index``: that of the last mark at or before it (``None`` before
    the first mark)."""
    found = None
    for at, origin in marks:
        if at > index:
            break
        found = origin
    return found


def runs(marks: Marks[OriginT], start: int, end: int) -> list[tuple[int, int, OriginT]]:
    """Bytes ``start`` to ``end`` split by the frame they came from: ``(lo, hi, origin)``,
    in order, none empty (bytes before the first mark belong to no run)."""
    out: list[tuple[int, int, OriginT]] = []
    last = len(marks) - 1
    for k, (at, origin) in enumerate(marks):
        hi = min(end, marks[k + 1][0] if k < last else end)
        lo = max(start, at)
        if lo < hi:
            out.append((lo, hi, origin))
    return out


def origins_in(marks: Marks[Origin | None], start: int, end: int) -> tuple[Origin, ...]:
    """The distinct frames that carried bytes ``start`` to ``end``, in order (:func:`runs`
    without the spans: a hole's ``None`` is left out)."""
    found: dict[Origin, None] = {}
    last = len(marks) - 1
    for k, (at, origin) in enumerate(marks):
        if at >= end:
            break
        if origin is not None and min(end, marks[k + 1][0] if k < last else end) > max(start, at):
            found[origin] = None
    return tuple(found)


def marks_from(marks: Marks[OriginT], pos: int, size: int) -> Marks[OriginT]:
    """The marks of bytes ``pos`` to ``size`` once the bytes before ``pos`` are dropped
    (offsets shifted down by ``pos``; a run wholly before it is gone)."""
    kept: Marks[OriginT] = []
    last = len(marks) - 1
    for k, (at, origin) in enumerate(marks):
        end = marks[k + 1][0] if k < last else size
        if end > pos and end > at:  # the run goes on past the cut: it stays, shifted
            kept.append((max(at - pos, 0), origin))
    return kept


class ReceiveBuffer:
    """Bytes in arrival order, with the origin of each run of them."""

    __slots__ = ("data", "marks")

    def __init__(self) -> None:
        self.data = bytearray()
        self.marks: list[tuple[int, Origin]] = []  # (index in data, origin from there on)

    def __len__(self) -> int:
        return len(self.data)

    def append(self, data: bytes, origin: Origin) -> None:
        if not data:
            return
        if not self.marks or self.marks[-1][1] != origin:
            self.marks.append((len(self.data), origin))
        self.data += data

    def origin_at(self, index: int) -> Origin | None:
        return origin_at(self.marks, index)

    def take(self, n: int) -> Pieces:
        """Remove the first ``n`` bytes and return them as pieces."""
        data, marks = self.data, self.marks
        size = len(data)
        n = min(n, size)
        out = [(bytes(data[lo:hi]), origin) for lo, hi, origin in runs(marks, 0, n)]
        del data[:n]
        self.marks = marks_from(marks, n, size)
        return out

    def take_spans(self, n: int) -> list[tuple[int, Origin]]:
        """Remove the first ``n`` bytes and return how many came from each frame, in order
        (:meth:`take` without copying the bytes: for a caller that has read them)."""
        data, marks = self.data, self.marks
        size = len(data)
        n = min(n, size)
        out = [(hi - lo, origin) for lo, hi, origin in runs(marks, 0, n)]
        del data[:n]
        self.marks = marks_from(marks, n, size)
        return out

    def skip(self, n: int) -> None:
        self.take_spans(n)

    def clear(self) -> None:
        self.data.clear()
        self.marks.clear()


def slice_pieces(pieces: Pieces, start: int, length: int) -> Pieces:
    """The pieces of bytes ``start`` to ``start + length`` of the concatenation of
    ``pieces``."""
    out: Pieces = []
    at = 0
    end = start + length
    for data, origin in pieces:
        lo, hi = at, at + len(data)
        at = hi
        if hi <= start:
            continue
        if lo >= end:
            break
        out.append((data[max(start - lo, 0) : min(end, hi) - lo], origin))
    return out


def spread(plain: bytes, pieces: Pieces, start: int) -> Pieces:
    """``plain`` laid over the frames of ``pieces`` from byte ``start`` on: plaintext byte
    *i* is cited to the frame that carried byte ``start + i`` (its ciphertext)."""
    return spread_spans(plain, [(len(data), origin) for data, origin in pieces], start)


def spread_spans(plain: bytes, spans: list[tuple[int, Origin]], start: int) -> Pieces:
    """:func:`spread` over ``(length, origin)`` spans (:meth:`ReceiveBuffer.take_spans`)."""
    if len(spans) == 1 and start + len(plain) <= spans[0][0]:
        return [(plain, spans[0][1])]  # one frame carried the whole record
    pieces = spans
    out: Pieces = []
    at = 0
    pos = 0
    for size, origin in pieces:
        hi = at + size
        at = hi
        if hi <= start + pos:
            continue
        take = min(hi - (start + pos), len(plain) - pos)
        if take <= 0:
            break
        out.append((plain[pos : pos + take], origin))
        pos += take
    if pos < len(plain) and pieces:  # past the last piece (cannot happen for a real record)
        out.append((plain[pos:], pieces[-1][1]))
    return out


__all__ = [
    "Marks",
    "Piece",
    "Pieces",
    "ReceiveBuffer",
    "marks_from",
    "origin_at",
    "origins_in",
    "runs",
    "slice_pieces",
    "spread",
    "spread_spans",
]
