"""SSE parsing of many whole event-stream bodies at once, for the fast path.

The exact path feeds one :class:`~sse_forensics.reassembly.sse.SSEParser`
(``report_empty=True``) per response, body piece by body piece; its events do not depend on
how the body is split. Here the bodies are read where they lie — chunk data ranges of the
joined server bytes (:class:`BodySource`) — and every body is split at its *last
LF-terminated blank line*:

- the heads (everything up to that point) of all bodies are read as one concatenation
  (:class:`Heads`, in place) and parsed by the columnar
  :func:`~sse_forensics.reassembly.sse_columns.parse_body`, a piece of :data:`HEAD_PIECE`
  bytes cut after a blank line at a time; twice (:class:`ParsedBodies`): once for what
  decides a body, once as its rows are built, so a batch never holds every event at once.
  At each junction the parser is where a fresh parser starts — after a blank line that a
  later byte cannot extend (LF), no block open — except for the last-event-ID buffer, which
  is recomputed per body (it is the last valid ``id`` field so far, every block with one
  being an event), and a byte order mark, which only a stream's start drops (a body whose
  head starts with one is refused);
- each tail (the unterminated last block, often empty) is parsed by an ``SSEParser`` of its
  own, which also gives the body's ``trailing`` bytes.

A body whose bytes the exact path would report (invalid UTF-8, an ``id`` with NUL) is
refused: its connection takes the exact path, which words those errors.

With ``parse_body`` set to None (a test compares the two), the heads are parsed by
``SSEParser`` too (one feed).
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np
import polars as pl

from sse_forensics.reassembly.capture import REPORTED_SSE_ANOMALIES
from sse_forensics.reassembly.sse import UTF8_BOM, SSEParser
from sse_forensics.reassembly.sse_columns import EVENT_SCHEMA, RETRY_MAX, SSEColumns
from sse_forensics.reassembly.sse_columns import parse_body as _columnar_parse

# The columnar parser; SSEParser is the definition and the stand-in (a test sets this to
# None and compares the two).
parse_body: Callable[..., SSEColumns] | None = _columnar_parse

R_SSE_REPORTED = "sse: bytes the parser reports (invalid UTF-8, id with NUL)"
R_SSE_BOM = "sse: byte order mark after the start of a body"
R_SSE_RETRY = "sse: retry value beyond Int64"
R_SSE_EVENT_CAP = "sse: an event over the event_bytes cap"

_BLANK_ENDS = (b"\n\n", b"\n\r\n", b"\r\r\n")


def _last_blank(buf: bytes, lo: int, hi: int) -> int:
    """End of the last ``\n\n``, ``\n\r\n`` or ``\r\r\n`` in ``buf[lo:hi]``, or -1."""
    best = -1
    for pattern in _BLANK_ENDS:
        found = buf.rfind(pattern, lo, hi)
        if found >= 0:
            best = max(best, found + len(pattern))
    return best


def _first_line_blank(head: bytes, start: int) -> int:
    """End of a blank first line at ``start`` (LF or CRLF), or -1."""
    if head[start : start + 1] == b"\n":
        return start + 1
    if head[start : start + 2] == b"\r\n":
        return start + 2
    return -1


def _last_blank_within(buf: bytes, lo: int, hi: int) -> int:
    """:func:`_last_blank` over ``buf[lo:hi]``, searched backwards in growing windows (the
    last blank line is usually near ``hi``)."""
    window = 4096
    while True:
        at = max(lo, hi - window)
        best = _last_blank(buf, at, hi)
        # A match that starts before ``at`` ends before at + 3: anything later was seen.
        if best >= at + 3 or at == lo:
            return best
        window *= 4


def head_end(buf: bytes, lo: int, hi: int, bom: int) -> int:
    """Offset just after the last LF-terminated blank line of ``buf[lo:hi]`` (``lo`` when
    there is none). ``bom``: bytes of a leading byte order mark (the body's first line starts
    after it). Searched backwards in growing windows: a stream's last blank line is near its
    end."""
    best = _last_blank_within(buf, lo, hi)
    if best < 0:
        best = _first_line_blank(buf[lo : lo + bom + 2], bom)
        best = best + lo if best >= 0 else lo
    return max(best, lo)


class BodySource:
    """Decoded bodies as ranges of a buffer: body ``i`` is the concatenation of chunks
    (``starts``/``sizes`` in ``buf``) numbered ``first[i]`` to ``first[i + 1]``; offsets are
    *virtual*, in the concatenation of all bodies (``body_start``)."""

    def __init__(
        self, buf: bytes, starts: np.ndarray, sizes: np.ndarray, body_lens: np.ndarray
    ) -> None:
        self.buf = buf
        self.starts = starts
        self.sizes = sizes
        self.offsets = np.zeros(len(sizes), dtype=np.int64)  # virtual offset of each chunk
        if len(sizes):
            np.cumsum(sizes[:-1], out=self.offsets[1:])
        self.body_start = np.zeros(len(body_lens), dtype=np.int64)
        if len(body_lens):
            np.cumsum(body_lens[:-1], out=self.body_start[1:])
        self.body_end = self.body_start + body_lens
        self._lists: tuple[list[int], list[int], list[int]] | None = None

    def read(self, lo: int, hi: int) -> bytes:
        """Virtual bytes ``[lo, hi)``."""
        if hi <= lo:
            return b""
        if self._lists is None:
            self._lists = (self.offsets.tolist(), self.starts.tolist(), self.sizes.tolist())
        offsets, starts, sizes = self._lists
        i = bisect_right(offsets, lo) - 1
        buf = self.buf
        parts = []
        while lo < hi:
            skip = lo - offsets[i]
            take = min(sizes[i] - skip, hi - lo)
            at = starts[i] + skip
            parts.append(buf[at : at + take])
            lo += take
            i += 1
        return parts[0] if len(parts) == 1 else b"".join(parts)

    def heads(self, ends: np.ndarray) -> Heads:
        """Every body ``i`` up to virtual offset ``ends[i]``, concatenated (read in place)."""
        body = np.searchsorted(self.body_start, self.offsets, side="right") - 1
        room = ends[body] - self.offsets if len(body) else self.offsets
        sizes = np.minimum(self.sizes, room)
        keep = sizes > 0
        return Heads(self.buf, self.starts[keep], sizes[keep])


class Heads:
    """Byte ranges of a buffer read as their concatenation, a stretch at a time: the
    event-stream heads of a batch are parsed piece by piece where they lie, never copied
    whole (issue 16: one stream of ten million events is 220 MB of body)."""

    def __init__(self, buf: bytes, starts: np.ndarray, sizes: np.ndarray) -> None:
        self.buf = buf
        self.starts = starts
        self.sizes = sizes
        self.offsets = np.zeros(len(sizes), dtype=np.int64)  # of each range in the whole
        if len(sizes):
            np.cumsum(sizes[:-1], out=self.offsets[1:])
        self.size = int(sizes.sum())

    def __len__(self) -> int:
        return self.size

    def read(self, lo: int, hi: int) -> bytes:
        """Bytes ``[lo, hi)`` of the concatenation (``hi`` clipped to its end)."""
        hi = min(hi, self.size)
        if hi <= lo:
            return b""
        offsets = self.offsets
        i = int(np.searchsorted(offsets, lo, side="right")) - 1
        j = int(np.searchsorted(offsets, hi, side="left"))
        starts = self.starts[i:j].copy()
        ends = starts + self.sizes[i:j]
        ends[-1] = self.starts[j - 1] + (hi - offsets[j - 1])
        starts[0] += lo - offsets[i]
        return bytes(gather(self.buf, starts, ends - starts))


GATHER_SPAN = 16 << 20
"""Bytes of the source one boolean mask of :func:`gather` covers: the mask and the bytes it
picks are temporaries of this size, not of the whole buffer (issue 16: one stream of ten
million events is 220 MB of body)."""
JOIN_MEAN = 128
"""Mean bytes per range from which :func:`gather` joins slices of the buffer: one Python
step per range (a view of ~200 bytes, held until the join), one copy, and no temporary the
size of the result, whose fresh pages cost more than the steps (issue 9: the heads of the
200k-packet capture, 60k page faults of the fast path's 350k)."""


def gather(buf: bytes, starts: np.ndarray, sizes: np.ndarray) -> bytes | bytearray:
    """``buf[starts[i]:starts[i] + sizes[i]]`` for every i, concatenated. Ranges of
    :data:`JOIN_MEAN` bytes or more on average are joined as slices; shorter ones
    (ascending and disjoint) are picked by boolean masks over spans of
    :data:`GATHER_SPAN` bytes, written into the result, with no Python step per range."""
    n = len(starts)
    if not n:
        return b""
    ends = starts + sizes
    joined = n < 64 or int(sizes.sum()) >= JOIN_MEAN * n
    if joined or bool((starts[1:] < ends[:-1]).any()):
        view = memoryview(buf)
        try:
            return b"".join(map(view.__getitem__, map(slice, starts.tolist(), ends.tolist())))
        finally:
            view.release()
    out = bytearray(int(sizes.sum()))
    dest = np.frombuffer(out, dtype=np.uint8)
    src = np.frombuffer(buf, dtype=np.uint8)
    at = i = 0
    while i < n:
        lo = int(starts[i])
        j = max(i + 1, int(np.searchsorted(ends, lo + GATHER_SPAN, side="right")))
        hi = int(ends[j - 1])
        size = int(sizes[i:j].sum())
        if j == i + 1:
            dest[at : at + size] = src[lo:hi]
        else:
            dest[at : at + size] = _masked(src[lo:hi], starts[i:j] - lo, sizes[i:j])
        at += size
        i = j
    return out


def _masked(src: np.ndarray, starts: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """The bytes of ``src`` in the ranges (ascending, disjoint, the last ending at its end)."""
    n = len(starts)
    runs = np.empty(2 * n, dtype=np.int64)
    runs[0] = starts[0]
    runs[2::2] = starts[1:] - (starts[:-1] + sizes[:-1])
    runs[1::2] = sizes
    pattern = np.zeros(2 * n, dtype=bool)
    pattern[1::2] = True
    picked: np.ndarray = src[np.repeat(pattern, runs)]
    return picked


def _last_blank_back(source: BodySource | Heads, lo: int, hi: int, window: int) -> int:
    """:func:`_last_blank` over ``source``'s bytes ``lo`` to ``hi`` (absolute offset, or
    -1), read backwards in growing windows (the last blank line is usually near ``hi``)."""
    while True:
        at = max(lo, hi - window)
        piece = source.read(at, hi)
        best = _last_blank(piece, 0, len(piece))
        # A match that starts before ``at`` ends before at + 3: anything later was seen.
        if best >= 3 or at == lo:
            return at + best if best >= 0 else -1
        window *= 4


def _body_head_end(source: BodySource, lo: int, hi: int, bom: int) -> int:
    """:func:`head_end` of the virtual body ``[lo, hi)``, reading only its end."""
    best = _last_blank_back(source, lo, hi, 256)
    if best >= 0:
        return best
    found = _first_line_blank(source.read(lo, min(hi, lo + bom + 2)), bom)
    return lo + found if found >= 0 else lo


def _parse_heads(heads: bytes) -> tuple[pl.DataFrame, np.ndarray, pl.DataFrame]:
    """(events, comment starts, anomalies as kind/start) of the concatenated heads."""
    if parse_body is not None:
        cols = parse_body(heads, stream_start=False)
        return cols.events, cols.comments["start"].to_numpy(), cols.anomalies
    parser = SSEParser(report_empty=True)
    parser._bom_head = None  # not a stream start: a leading BOM is content
    evs = parser.feed(heads) + parser.close()
    events = pl.DataFrame(
        {
            "start": [e.start for e in evs],
            "end": [e.end for e in evs],
            "id": [e.id for e in evs],
            "id_field": [e.id_field for e in evs],
            "event": [e.event for e in evs],
            "data": [e.data for e in evs],
            "retry": [min(e.retry, RETRY_MAX) if e.retry is not None else None for e in evs],
            "dispatched": [e.dispatched for e in evs],
        },
        schema=EVENT_SCHEMA,
    )
    comments = np.array([c.start for c in parser.take_comments()], dtype=np.int64)
    found = parser.take_anomalies()
    anomalies = pl.DataFrame(
        {"kind": [a.kind for a in found], "start": [a.start for a in found]},
        schema={"kind": pl.String, "start": pl.Int64},
    )
    return events, comments, anomalies


HEAD_PIECE = 4 << 20
"""Bytes of the concatenated heads parsed in one call: the columnar parser's working
arrays grow with the lines it reads at once (issue 16: one stream of ten million events)."""
KEPT_PIECES = 4
"""Heads of at most this many pieces are parsed once: the first read keeps every piece's
events for the second (a batch of the fast path holds about ``BATCH_BYTES`` of payload,
two pieces' worth; issue 9: the second parse was a sixth of a capture scan's CPU). Longer
heads, one long stream's, are parsed again piece by piece (issue 16)."""


def _last_blank_in(heads: Heads, lo: int, hi: int) -> int:
    """:func:`_last_blank` over ``heads[lo:hi]`` (absolute offset, or -1), read backwards
    in growing windows (the last blank line is usually near ``hi``)."""
    return _last_blank_back(heads, lo, min(hi, len(heads)), 4096)


def _first_blank_from(heads: Heads, start: int) -> int:
    """End of the first ``\n\n``, ``\n\r\n`` or ``\r\r\n`` starting at or after
    ``start``, or -1; read forwards a window at a time."""
    window = 1 << 16
    while start < len(heads):
        piece = heads.read(start, start + window + 2)  # a match may run 2 bytes over
        found = [f + len(p) for p in _BLANK_ENDS if 0 <= (f := piece.find(p)) < window]
        if found:
            return start + min(found)
        start += window
    return -1


def _piece_end(heads: Heads, lo: int) -> int:
    """Where the piece of ``heads`` starting at ``lo`` ends: just after its last LF-terminated
    blank line within :data:`HEAD_PIECE` bytes (a parser is there where a fresh one starts),
    else after the first one beyond (one event longer than a piece), else the end."""
    want = lo + HEAD_PIECE
    best = _last_blank_in(heads, lo, want)
    if best > lo:
        return best
    found = _first_blank_from(heads, want)
    return found if found >= 0 else len(heads)


def _head_pieces(
    heads: Heads,
) -> Iterator[tuple[int, int, pl.DataFrame, np.ndarray, pl.DataFrame]]:
    """(lo, hi, events, comment starts, anomalies) of ``heads[lo:hi]``, a piece
    (:data:`HEAD_PIECE`) at a time, offsets within the piece: cut after blank lines, the
    pieces give the events, comments and anomalies of the whole."""
    if len(heads) <= HEAD_PIECE:
        yield (0, len(heads), *_parse_heads(heads.read(0, len(heads))))
        return
    lo = 0
    while lo < len(heads):
        hi = _piece_end(heads, lo)
        yield (lo, hi, *_parse_heads(heads.read(lo, hi)))
        lo = hi


def _body_of(head_start: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    if not len(offsets):
        return np.zeros(0, dtype=np.int64)
    return np.searchsorted(head_start, offsets, side="right").astype(np.int64) - 1


_TAIL_SCHEMA = {
    "body": pl.Int64,
    "start": pl.Int64,
    "end": pl.Int64,
    "id_field": pl.String,
    "event": pl.String,
    "data": pl.String,
    "retry": pl.Int64,
    "dispatched": pl.Boolean,
}
_NONE = np.zeros(0, dtype=np.int64)


@dataclass(slots=True)
class _Piece:
    """One piece's events (see :class:`ParsedBodies`) and the bodies its heads refuse."""

    events: pl.DataFrame
    comment_bodies: np.ndarray  # the body of each comment of the heads
    reported: np.ndarray  # bodies with an anomaly the exact path reports
    retry: np.ndarray  # bodies with a retry beyond Int64
    oversize: np.ndarray  # bodies with an event over the cap


@dataclass(slots=True)
class _Carry:
    """What a body continued in the next piece takes along: its ID buffer (None: no valid
    ``id`` yet) and how many events it had."""

    body: int = -1
    last_id: str | None = None
    events: int = 0


def _carried(events: pl.DataFrame, carry: _Carry) -> pl.DataFrame:
    """``events`` with ``position`` (in its body) and ``id`` (WHATWG: the last valid ``id``
    field so far in the stream, every block with one being an event here), continuing a
    body the previous piece left open (``carry``, updated)."""
    if not events.height:
        return events.with_columns(
            id=pl.lit("", dtype=pl.String), position=pl.lit(0, dtype=pl.Int64)
        )
    body = events["body"].to_numpy()
    at = np.arange(len(body), dtype=np.int64)
    position = at - np.maximum.accumulate(np.where(np.diff(body, prepend=-1) != 0, at, 0))
    cont = body == carry.body  # only the leading run can be the carried body
    position[cont] += carry.events
    ids = events.select(pl.col("id_field").forward_fill().over("body")).to_series()
    if carry.last_id is not None and bool(cont[0]):
        ids = (
            pl.DataFrame({"i": ids, "c": cont})
            .select(
                pl.when(pl.col("c") & pl.col("i").is_null())
                .then(pl.lit(carry.last_id, dtype=pl.String))
                .otherwise(pl.col("i"))
            )
            .to_series()
        )
    carry.body, carry.last_id, carry.events = int(body[-1]), ids[-1], int(position[-1]) + 1
    return events.with_columns(id=ids.fill_null(""), position=pl.Series(position, dtype=pl.Int64))


class ParsedBodies:
    """Every body's events, a piece at a time (:meth:`pieces`), and per body: comment
    count, trailing bytes, refusal reason, the data of its ``endpoint`` events among its
    first two (``endpoints``) and of its events that name ``protocolVersion``
    (``versions``), in order.

    The events of a piece hold ``body``, ``position`` (in its body), ``start``/``end``
    (body offsets), ``id`` (the ID buffer at dispatch) and the other columns of
    :data:`~sse_forensics.reassembly.sse_columns.EVENT_SCHEMA`, in body then stream
    order. Between the two reads only the tails' events are held (the heads are read
    where they lie), never the events of every piece: one stream of ten million events
    is parsed again piece by piece as its rows are built (issue 16); heads of at most
    :data:`KEPT_PIECES` pieces are kept from the first read instead (issue 9)."""

    def __init__(self, heads: Heads, head_start: np.ndarray, head_len: np.ndarray) -> None:
        self.heads = heads
        self.head_start = head_start
        self.head_done = head_start + head_len  # where each body's head ends in ``heads``
        n = len(head_start)
        self.comments = np.zeros(n, dtype=np.int64)
        self.trailing: list[bytes] = [b""] * n
        self.refused: dict[int, str] = {}
        self.endpoints: dict[int, list[str]] = {}
        self.versions: dict[int, list[str]] = {}
        self.tails: pl.DataFrame | None = None  # the tails' events (body, body offsets)
        self.max_event_bytes: int | None = None
        self._kept: list[pl.DataFrame] | None = None  # every piece, when heads are short

    def pieces(self) -> Iterator[pl.DataFrame]:
        """The events, piece by piece (the same on every call)."""
        if self._kept is not None:
            yield from self._kept
            return
        for piece in self._pieces():
            yield piece.events

    def _pieces(self) -> Iterator[_Piece]:
        """Head events piece by piece, with the tails of the bodies whose heads end in the
        piece after them; the ID buffer and positions carried across pieces."""
        head_start, tails = self.head_start, self.tails
        tail_body = tails["body"].to_numpy() if tails is not None else _NONE
        taken = 0  # tails merged so far (by ascending body)
        carry = _Carry()
        for lo, hi, events, comment_starts, anomalies in _head_pieces(self.heads):
            ev_start = events["start"].to_numpy() + lo
            ev_end = events["end"].to_numpy() + lo
            ev_body = _body_of(head_start, ev_start)
            base = head_start[ev_body]
            reported = retry = oversize = _NONE
            if anomalies.height:
                found = anomalies.filter(pl.col("kind").is_in(list(REPORTED_SSE_ANOMALIES)))
                reported = np.unique(_body_of(head_start, found["start"].to_numpy() + lo))
            if events.height:
                capped = (events["retry"] == RETRY_MAX).fill_null(False).to_numpy()
                retry = np.unique(ev_body[capped])
                if self.max_event_bytes is not None:
                    oversize = np.unique(ev_body[ev_end - ev_start > self.max_event_bytes])
            events = events.drop("id").with_columns(
                body=pl.Series(ev_body, dtype=pl.Int64),
                start=pl.Series(ev_start - base, dtype=pl.Int64),
                end=pl.Series(ev_end - base, dtype=pl.Int64),
            )
            # The tails of the bodies whose heads end in this piece (every one at the last).
            last = hi >= len(self.heads)
            upto = len(head_start) if last else int(np.searchsorted(self.head_done, hi, "right"))
            t_hi = int(np.searchsorted(tail_body, upto, side="left"))
            if tails is not None and t_hi > taken:
                events = pl.concat(
                    [events, tails.slice(taken, t_hi - taken)], how="diagonal_relaxed"
                ).sort("body", "start", maintain_order=True)
                taken = t_hi
            events = _carried(events, carry)
            comment_bodies = _body_of(head_start, comment_starts + lo)
            yield _Piece(events, comment_bodies, reported, retry, oversize)

    def _read(self, tail_cut: np.ndarray, tail_results: dict[int, tuple[int, bytes, str]]) -> None:
        """The first read: refusals, comments, endpoints and versions. ``tail_cut``: bodies
        whose tail is over the event cap; ``tail_results``: per body with a tail, its
        comments, trailing bytes and refusal reason ("" if none)."""
        reported, retry, oversize = [], [], []
        keep = len(self.heads) <= KEPT_PIECES * HEAD_PIECE
        kept: list[pl.DataFrame] = []
        for piece in self._pieces():
            if keep:
                kept.append(piece.events)
            self.comments += np.bincount(piece.comment_bodies, minlength=len(self.comments))
            reported.append(piece.reported)
            retry.append(piece.retry)
            oversize.append(piece.oversize)
            ev = piece.events
            if not ev.height:
                continue
            ends = ev.filter((pl.col("position") < 2) & (pl.col("event") == "endpoint"))
            for b, data in ends.select("body", "data").iter_rows():
                self.endpoints.setdefault(b, []).append(data)
            named = ev.filter(pl.col("data").str.contains(_VERSION_KEY, literal=True))
            for b, data in named.select("body", "data").iter_rows():
                self.versions.setdefault(b, []).append(data)
        self._kept = kept if keep else None
        # Reasons in the order one whole read gives them (the first one stays).
        refused = self.refused
        for bodies, why in (
            (reported, R_SSE_REPORTED),
            (retry, R_SSE_RETRY),
            (oversize, R_SSE_EVENT_CAP),
        ):
            for b in np.unique(np.concatenate(bodies)).tolist() if bodies else ():
                refused.setdefault(int(b), why)
        for b in tail_cut.tolist():
            refused.setdefault(int(b), R_SSE_EVENT_CAP)
        for b, (comments, trailing, why) in tail_results.items():
            if b in refused:
                continue
            if why:
                refused[b] = why
            if why != R_SSE_REPORTED:
                self.comments[b] += comments
                self.trailing[b] = trailing


_VERSION_KEY = "protocolVersion"


def parse_bodies(source: BodySource, max_event_bytes: int | None = None) -> ParsedBodies:
    """Parse every body of ``source`` (each a whole decoded body). A body with an event (or
    an unterminated last block) longer than ``max_event_bytes`` is refused: the exact path
    reads it, and reports the cap."""
    starts, ends = source.body_start, source.body_end
    n = len(starts)
    bom_refused: dict[int, str] = {}
    heads_end = np.empty(n, dtype=np.int64)
    for i, (lo, hi) in enumerate(zip(starts.tolist(), ends.tolist(), strict=True)):
        bom = len(UTF8_BOM) if source.read(lo, min(hi, lo + 3)) == UTF8_BOM else 0
        h = _body_head_end(source, lo, hi, bom)
        heads_end[i] = h
        # Only a stream's start drops a BOM: the concatenated heads keep every one, and a
        # tail parsed on its own would drop one that is not at the start.
        if (bom and h > lo) or (lo < h < hi and source.read(h, min(hi, h + 3)) == UTF8_BOM):
            bom_refused[i] = R_SSE_BOM
    head_len = heads_end - starts
    head_start = np.zeros(n, dtype=np.int64)
    if n:
        np.cumsum(head_len[:-1], out=head_start[1:])
    parsed = ParsedBodies(source.heads(heads_end), head_start, head_len)
    parsed.refused.update(bom_refused)
    parsed.max_event_bytes = max_event_bytes
    tail_cut = (
        np.flatnonzero(ends - heads_end > max_event_bytes) if max_event_bytes is not None else _NONE
    )

    # Tails: one SSEParser each (usually none: a finished stream ends with a blank line).
    tail_results: dict[int, tuple[int, bytes, str]] = {}
    tails = []
    for i in np.flatnonzero(heads_end < ends).tolist():
        if i in bom_refused:
            continue
        parser = SSEParser(report_empty=True)
        tail = source.read(int(heads_end[i]), int(ends[i]))
        evs = parser.feed(tail) + parser.close()
        if any(a.kind in REPORTED_SSE_ANOMALIES for a in parser.take_anomalies()):
            tail_results[i] = (0, b"", R_SSE_REPORTED)
            continue
        why = ""
        shift = int(head_len[i])
        for e in evs:
            if e.retry is not None and e.retry >= RETRY_MAX:
                why = R_SSE_RETRY
                break
            tails.append(
                (
                    i,
                    e.start + shift,
                    e.end + shift,
                    e.id_field,
                    e.event,
                    e.data,
                    e.retry,
                    e.dispatched,
                )
            )
        tail_results[i] = (len(parser.take_comments()), parser.trailing, why)
    if tails:
        parsed.tails = pl.DataFrame(tails, schema=_TAIL_SCHEMA, orient="row")
    parsed._read(tail_cut, tail_results)
    return parsed
