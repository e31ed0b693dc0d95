"""HTTP/1.1 framing of whole reassembled byte streams, for the fast path.

The streams of every fast connection sit in two buffers (client bytes, server bytes), each
connection a ``[lo, hi)`` range of them. Messages are framed over the range as
:class:`~sse_forensics.reassembly.http.HTTPConnection` frames them frame by frame — with its
own regular expressions, header parser and framing rules (RFC 9112 §6.3) — and anything that
parser would report, or handle in a way that is not a plain sequence of requests and
responses, is a fallback reason instead:

- heads: status/request line and fields as the parser accepts them without a
  ``ProtocolError`` (no invalid field line), within ``MAX_HEAD``;
- requests: no ``CONNECT``/``Upgrade``; body by Content-Length or chunked, or none;
- responses: no 1xx, each one's request parsed before it (no requestless response); body
  none (``HEAD``, 204, 304, length 0), Content-Length or chunked; no content-coding; no
  close-delimited body;
- nothing after the last message but the end of the stream (a cut head would be an error).

Chunked bodies: every chunk-size line starts after a LF, so the canonical ones
(``HEX CRLF``) are found for the whole server buffer at once (:class:`ChunkIndex`), each with
where its successor must start; a body whose chunks chain from one candidate to the next up
to the last chunk is framed without a Python step per chunk. Elsewhere (chunk extensions, a
lone LF, a candidate inside chunk data, the end of the stream) :func:`walk_chunks` walks on
exactly as the exact path's chunked reader (``http.chunked``) would.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from sse_forensics.reassembly.content_coding import make_decoder
from sse_forensics.reassembly.exchange import MAX_KEPT_BODY
from sse_forensics.reassembly.http.fields import (
    applied_codings,
    content_length,
    field_values,
    last_coding_is_chunked,
)
from sse_forensics.reassembly.http.fields import parse_fields as parse_field_lines
from sse_forensics.reassembly.http.grammar import (
    CHUNK_SIZE_DIGITS,
    HEAD_END,
    MAX_CHUNK_LINE,
    MAX_HEAD,
    METHOD_PREFIX,
    REQUEST_LINE,
    STATUS_LINE,
    VERSION_PREFIX,
)
from sse_forensics.reassembly.http_events import Headers, header
from sse_forensics.reassembly.sse_columns import byte_positions

R_LEFTOVER = "http: bytes after the last complete message"
R_HEAD = "http: head the parser would reject or report"
R_FIELDS = "http: invalid header field line"
R_TUNNEL = "http: CONNECT or Upgrade"
R_INTERIM = "http: interim (1xx) or 101 response"
R_ORPHAN = "http: response before (or without) its request"
R_CODING = "http: content-coding"
R_CLOSE = "http: close-delimited body"
R_LENGTH = "http: invalid Content-Length or Transfer-Encoding"
R_CHUNK = "http: malformed chunked framing"

_HEX = np.full(256, 255, dtype=np.uint8)
for _i, _c in enumerate(b"0123456789abcdef"):
    _HEX[_c] = _i
for _i, _c in enumerate(b"ABCDEF"):
    _HEX[_c] = 10 + _i
_LF, _CR = 10, 13
_WIDTH = 16  # hex digits of a canonical chunk-size line (CHUNK_SIZE_DIGITS allows 16)


class Fallback(Exception):
    """This connection cannot be framed identically here: ``reason`` says why."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


_FIELDS_CACHE: dict[str, Headers] = {}
_FIELDS_CACHE_SIZE = 4096


def parse_fields(section: str) -> Headers:
    """:func:`~sse_forensics.reassembly.http.fields.parse_fields`; a section seen before
    gives the same (shared, read-only) list: a connection's heads repeat."""
    headers = _FIELDS_CACHE.get(section)
    if headers is not None:
        return headers
    headers, bad = parse_field_lines(section)
    if bad:
        raise Fallback(R_FIELDS)
    if len(_FIELDS_CACHE) >= _FIELDS_CACHE_SIZE:
        _FIELDS_CACHE.clear()
        _FRAMING.clear()
    _FIELDS_CACHE[section] = headers
    return headers


@dataclass(frozen=True, slots=True)
class Framing:
    """What the framing rules read of a header list (RFC 9112 §6.3)."""

    transfer_encoding: str | None
    content_length: str | None
    coded: bool  # a content- or transfer-coding other than chunked applies
    upgrade: bool
    event_stream: bool


_FRAMING: dict[int, tuple[Headers, Framing]] = {}


def framing(headers: Headers) -> Framing:
    """:class:`Framing` of ``headers`` (memoised per list: cached heads share theirs)."""
    got = _FRAMING.get(id(headers))
    if got is not None and got[0] is headers:
        return got[1]
    te = field_values(headers, "transfer-encoding")
    coded = make_decoder(applied_codings(field_values(headers, "content-encoding"), te))
    info = Framing(
        te,
        field_values(headers, "content-length"),
        coded is not None,
        any(k.lower() == "upgrade" for k, _ in headers),
        is_event_stream(headers),
    )
    if len(_FRAMING) >= 2 * _FIELDS_CACHE_SIZE:
        _FRAMING.clear()
    _FRAMING[id(headers)] = (headers, info)
    return info


class ChunkIndex:
    """Canonical chunk-size lines (``HEX CRLF`` right after a LF) of one buffer, in order,
    with their chunk's data and whether the next candidate is the next chunk. Found from the
    buffer's CRLFs (fewer than its LFs in an LF-delimited event stream), looking back over
    at most 16 hex digits to a LF."""

    def __init__(self, buf: bytes) -> None:
        arr = np.frombuffer(buf, dtype=np.uint8)
        n = len(arr)
        cr = byte_positions(arr, _CR)
        cr = cr[(cr >= 2) & (cr + 1 < n)]
        cr = cr[(arr[cr + 1] == _LF) & (_HEX[arr[cr - 1]] != 255)]
        width = _WIDTH + 1
        # The `width` bytes before each CR (zero before the buffer's start), nearest first.
        look = np.zeros((len(cr), width), dtype=np.uint8)
        full = cr >= width
        if n > width:
            items = np.ndarray(
                (n - width + 1,), dtype=np.dtype((np.void, width)), buffer=arr, strides=(1,)
            )
            look[full] = items[cr[full] - width].view(np.uint8).reshape(-1, width)
        for row in np.flatnonzero(~full).tolist():
            at = int(cr[row])
            look[row, width - at :] = arr[:at]
        digits = _HEX[look[:, ::-1]]
        nonhex = digits == 255
        run = np.where(nonhex.any(axis=1), nonhex.argmax(axis=1), width).astype(np.int64)
        ok = (run >= 1) & (run <= _WIDTH)
        cr, run, digits = cr[ok], run[ok], digits[ok]
        ok = arr[cr - run - 1] == _LF
        cr, run, digits = cr[ok], run[ok], digits[ok]
        value = np.zeros(len(cr), dtype=np.uint64)
        for k in range(_WIDTH):
            here = run > k
            if not here.any():
                break
            value[here] |= digits[here, k].astype(np.uint64) << np.uint64(4 * k)
        start = cr - run
        # Sizes past the buffer can never chain: clip them to keep int64 arithmetic.
        size = np.minimum(value, np.uint64(n + 1)).astype(np.int64)
        data = cr + 2
        after = data + size  # where the data's CRLF must be
        crlf = np.zeros(len(start), dtype=bool)
        inside = after + 1 < n
        at = after[inside]
        crlf[inside] = (arr[at] == _CR) & (arr[at + 1] == _LF)
        chained = np.zeros(len(start), dtype=bool)
        if len(start) > 1:
            chained[:-1] = crlf[:-1] & (after[:-1] + 2 == start[1:])
        m = len(start)
        idx = np.arange(m, dtype=np.int64)
        zero = size == 0
        # next_zero[i]: first zero-size candidate at or after i (m if none); next_break[i]:
        # first candidate at or after i that does not chain to its successor.
        self.next_zero = np.minimum.accumulate(np.where(zero, idx, m)[::-1])[::-1]
        self.next_break = np.minimum.accumulate(np.where(chained, m, idx)[::-1])[::-1]
        self.count = m
        self.start = start
        self.data = data
        self.size = size
        self.total = np.zeros(m + 1, dtype=np.int64)  # sizes before each candidate
        np.cumsum(size, out=self.total[1:])

    def find(self, pos: int) -> int:
        """The candidate starting at ``pos``, or -1."""
        i = int(np.searchsorted(self.start, pos))
        return i if i < self.count and self.start[i] == pos else -1

    def before(self, pos: int) -> int:
        """How many candidates start before ``pos``."""
        return int(np.searchsorted(self.start, pos))


@dataclass(slots=True)
class Chunks:
    """Body data ranges in a buffer, in order: numpy parts (verified chains) then Python
    lists; ``nbytes`` and ``last`` (offset of the last body byte, -1 when empty) kept as
    ranges are added, the arrays built on demand."""

    parts: list[tuple[np.ndarray, np.ndarray]] = field(default_factory=list)
    starts: list[int] = field(default_factory=list)
    sizes: list[int] = field(default_factory=list)
    nbytes: int = 0
    last: int = -1
    _arrays: tuple[np.ndarray, np.ndarray] | None = None

    def add_part(self, starts: np.ndarray, sizes: np.ndarray, nbytes: int) -> None:
        if len(starts):
            self.parts.append((starts, sizes))
            self.nbytes += nbytes
            self.last = int(starts[-1] + sizes[-1] - 1)

    def add(self, start: int, size: int) -> None:
        if size:
            self.starts.append(start)
            self.sizes.append(size)
            self.nbytes += size
            self.last = start + size - 1

    def arrays(self) -> tuple[np.ndarray, np.ndarray]:
        if self._arrays is None:
            starts = [p[0] for p in self.parts]
            sizes = [p[1] for p in self.parts]
            if self.starts or not starts:
                starts.append(np.asarray(self.starts, dtype=np.int64))
                sizes.append(np.asarray(self.sizes, dtype=np.int64))
            self._arrays = (
                starts[0] if len(starts) == 1 else np.concatenate(starts),
                sizes[0] if len(sizes) == 1 else np.concatenate(sizes),
            )
        return self._arrays


def _one_range(pos: int, size: int) -> Chunks:
    chunks = Chunks()
    chunks.add(pos, size)
    return chunks


def walk_chunks(buf: bytes, pos: int, hi: int, chunks: Chunks) -> tuple[int, int]:
    """Chunked framing from the chunk-size line at ``pos`` (``http.chunked`` step by step).
    Returns ``(end_lf, next_pos)`` of a complete body (``end_lf``: the LF of its final
    empty line), or ``(-1, hi)`` when the stream ends first. Raises :class:`Fallback` where
    the parser would report an error."""
    add = chunks.add
    while True:
        eol = buf.find(b"\n", pos, hi)
        if eol < 0:
            if hi - pos > MAX_CHUNK_LINE:
                raise Fallback(R_CHUNK)
            return -1, hi
        if eol - pos > MAX_CHUNK_LINE:
            raise Fallback(R_CHUNK)
        size_field = buf[pos:eol].split(b";", 1)[0].strip(b" \t\r")
        if CHUNK_SIZE_DIGITS.fullmatch(size_field) is None:
            raise Fallback(R_CHUNK)
        size = int(size_field, 16)
        pos = eol + 1
        if size == 0:
            break
        avail = min(size, hi - pos)
        add(pos, avail)
        if avail < size:
            return -1, hi
        pos += size
        if pos >= hi:
            return -1, hi
        first = buf[pos]
        if first == _LF:
            pos += 1
        elif first == _CR:
            if pos + 1 >= hi:
                return -1, hi
            if buf[pos + 1] != _LF:
                raise Fallback(R_CHUNK)
            pos += 2
        else:
            raise Fallback(R_CHUNK)
    return trailers(buf, pos, hi)


def trailers(buf: bytes, pos: int, hi: int) -> tuple[int, int]:
    """RFC 9112 §7.1.2 as ``http.chunked.read_trailers``: lines up to an empty one."""
    while True:
        eol = buf.find(b"\n", pos, hi)
        if eol < 0:
            if hi - pos > MAX_HEAD:
                raise Fallback(R_CHUNK)
            return -1, hi
        if eol - pos > MAX_HEAD:
            raise Fallback(R_CHUNK)
        if eol == pos or (eol == pos + 1 and buf[pos] == _CR):
            return eol, eol + 1
        pos = eol + 1


def chunked_body(
    buf: bytes, pos: int, hi: int, index: ChunkIndex | None, chunks: Chunks
) -> tuple[int, int]:
    """Frame a chunked body starting at ``pos``: verified chains from ``index`` (within
    ``hi``), the rest walked. Returns as :func:`walk_chunks`."""
    if index is not None:
        i = index.find(pos)
        if i >= 0:
            last = index.before(hi) - 1  # the last candidate inside the stream
            z = int(index.next_zero[i])
            brk = int(index.next_break[i])
            if z <= last and brk >= z:
                total = index.total
                chunks.add_part(index.data[i:z], index.size[i:z], int(total[z] - total[i]))
                return trailers(buf, int(index.data[z]), hi)
            upto = min(brk, last)
            if upto > i:
                total = index.total
                chunks.add_part(index.data[i:upto], index.size[i:upto], int(total[upto] - total[i]))
                pos = int(index.start[upto])
    return walk_chunks(buf, pos, hi, chunks)


@dataclass(slots=True)
class Message:
    """One parsed head and what follows it (positions are buffer offsets)."""

    pos: int  # first byte of the start line
    head_end: int  # just after the blank line
    line: tuple[str, str, str]  # method/target/version or version/status/reason
    headers: Headers
    body: Chunks | None = None  # data ranges (None: no body)
    complete: bool = False
    end_pos: int = -1  # the byte whose frame ends the message (-1: the connection's end)


_HEADS: dict[tuple[bool, bytes], tuple[tuple[str, str, str], Headers]] = {}


def _head(buf: bytes, pos: int, hi: int, server: bool) -> tuple[Message, int]:
    """The head at ``pos`` (after CR/LF are skipped by the caller) as ``http.heads.read_head``
    reads it; a head seen before (a connection's responses repeat theirs) is looked up."""
    m = HEAD_END.search(buf, pos, hi)
    if m is None:
        raise Fallback(R_LEFTOVER)
    end = m.end()
    if end - pos > MAX_HEAD:
        raise Fallback(R_HEAD)
    key = (server, buf[pos:end])
    known = _HEADS.get(key)
    if known is not None:
        return Message(pos, end, known[0], known[1]), end
    if server:
        plausible = VERSION_PREFIX.startswith(buf[pos : pos + 5])
    else:
        plausible = METHOD_PREFIX.match(buf, pos, pos + 33) is not None
    if not plausible:
        raise Fallback(R_HEAD)
    eol = buf.find(b"\n", pos, hi)
    start_line = buf[pos : eol - 1 if buf[eol - 1] == _CR else eol]
    line = (STATUS_LINE if server else REQUEST_LINE).fullmatch(start_line)
    if line is None:
        raise Fallback(R_HEAD)
    headers = parse_fields(buf[eol + 1 : m.start()].decode("latin-1"))
    if server:
        parts = (
            line.group(1).decode(),
            line.group(2).decode(),
            (line.group(3) or b"").strip(b" \t").decode("latin-1"),
        )
    else:
        parts = (
            line.group(1).decode("latin-1"),
            line.group(2).decode("latin-1"),
            line.group(3).decode(),
        )
    if len(_HEADS) >= _FIELDS_CACHE_SIZE:
        _HEADS.clear()
    _HEADS[key] = (parts, headers)
    return Message(pos, end, parts, headers), end


def _skip_blank(buf: bytes, pos: int, hi: int) -> int:
    while pos < hi and buf[pos] in (_CR, _LF):
        pos += 1
    return pos


def parse_requests(buf: bytes, lo: int, hi: int) -> list[Message]:
    out: list[Message] = []
    pos = _skip_blank(buf, lo, hi)
    while pos < hi:
        msg, pos = _head(buf, pos, hi, server=False)
        info = framing(msg.headers)
        if msg.line[0] == "CONNECT" or info.upgrade:
            raise Fallback(R_TUNNEL)
        te, cl = info.transfer_encoding, info.content_length
        if te is not None:
            if not last_coding_is_chunked(te):
                raise Fallback(R_LENGTH)
            msg.body = Chunks()
            end_lf, pos = walk_chunks(buf, pos, hi, msg.body)
            msg.complete = end_lf >= 0
        elif cl is not None:
            length = content_length(cl)
            if length is None:
                raise Fallback(R_LENGTH)
            if length:
                avail = min(length, hi - pos)
                msg.body = _one_range(pos, avail)
                msg.complete = avail == length
                pos += avail
            else:
                msg.complete = True
        else:
            msg.complete = True
        out.append(msg)
        if not msg.complete:
            break
        pos = _skip_blank(buf, pos, hi)
    return out


def parse_responses(
    buf: bytes, lo: int, hi: int, requests: list[Message], index: ChunkIndex | None
) -> list[Message]:
    out: list[Message] = []
    pos = _skip_blank(buf, lo, hi)
    while pos < hi:
        msg, pos = _head(buf, pos, hi, server=True)
        k = len(out)
        if k >= len(requests):
            raise Fallback(R_ORPHAN)
        status = int(msg.line[1])
        if 100 <= status < 200:
            raise Fallback(R_INTERIM)
        out.append(msg)
        if requests[k].line[0] == "HEAD" or status in (204, 304):
            msg.complete, msg.end_pos = True, pos - 1
            pos = _skip_blank(buf, pos, hi)
            continue
        info = framing(msg.headers)
        te, cl = info.transfer_encoding, info.content_length
        if info.coded:
            raise Fallback(R_CODING)
        if te is not None:
            if not last_coding_is_chunked(te):
                raise Fallback(R_CLOSE)
            msg.body = Chunks()
            end_lf, pos = chunked_body(buf, pos, hi, index, msg.body)
            msg.complete, msg.end_pos = end_lf >= 0, end_lf
        elif cl is not None:
            length = content_length(cl)
            if length is None:
                raise Fallback(R_LENGTH)
            if length:
                avail = min(length, hi - pos)
                msg.body = _one_range(pos, avail)
                msg.complete = avail == length
                pos += avail
                msg.end_pos = pos - 1 if msg.complete else -1
            else:
                msg.complete, msg.end_pos = True, pos - 1
        else:
            raise Fallback(R_CLOSE)
        if not msg.complete:
            break
        pos = _skip_blank(buf, pos, hi)
    return out


def is_event_stream(headers: Headers) -> bool:
    """``Exchange.is_event_stream`` of a response with these headers."""
    ctype = header(headers, "content-type") or ""
    return ctype.split(";", 1)[0].strip().lower() == "text/event-stream"


def kept_body(buf: bytes, chunks: Chunks | None) -> bytes:
    """The body's first ``MAX_KEPT_BODY`` bytes (``Exchange.keep_*_body``)."""
    if chunks is None or not chunks.nbytes:
        return b""
    if not chunks.parts and len(chunks.starts) == 1:
        start = chunks.starts[0]
        return buf[start : start + min(chunks.sizes[0], MAX_KEPT_BODY)]
    starts, sizes = chunks.arrays()
    out = bytearray()
    for s, z in zip(starts.tolist(), sizes.tolist(), strict=True):
        room = MAX_KEPT_BODY - len(out)
        if room <= 0:
            break
        out += buf[s : s + min(z, room)]
    return bytes(out)
