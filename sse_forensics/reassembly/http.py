"""Sans-I/O HTTP/1.1 exchange parser for reassembled TCP streams (RFC 9112).

:class:`HTTPConnection` takes both directions of one connection — bytes in, typed events
(:mod:`.http_events`) out, no I/O, in the manner of h11 — and pairs each response with
the request it answers by order (RFC 9112 §9.3), so pipelining needs no timing.

Why not httptools (llhttp) or h11: they are built for live endpoints and stop at the
first error. A capture needs more: resynchronising after a capture hole (a missing-bytes
span inside a header section or chunked body), knowing that a response answers ``HEAD``
(the request is in the other direction), and the frame each body byte came from. So this
is a small parser of its own, written for the hot path: heads and chunk-size lines are
found with ``bytes.find``/regex searches, and body bytes pass through as slices of the
frame's payload, never byte by byte.

Conventions:

- Each request gets the next exchange number (0, 1, 2, …). A response whose request was
  not seen (the capture started mid-connection, or the request fell in a hole) gets the
  next number of its own: it is an exchange with no ``RequestHead``.
- Feed both directions in capture order: pairing is by order, and a response that arrives
  while no request is pending is numbered as its own exchange — unless the next request
  parsed was sent before it (its bytes were held behind a TCP hole), which then takes
  that response's number.
- A head's ``origin`` is the frame holding its first byte; a body event's is the frame
  holding its bytes (after content decoding: the frame whose coded bytes produced it);
  an end's is the frame holding the last byte, or the frame that ended the direction.
- Nothing the bytes contain raises: a broken rule is a :class:`ProtocolError` value, and
  the direction resynchronises at the next message start (bytes that are not HTTP give
  one error, then are scanned silently).
- ``ResponseEnd.reason`` / ``RequestEnd.reason``: ``complete``; ``tunnel`` (101, or 2xx
  to CONNECT: a :class:`Tunnel` precedes it and both directions are ignored afterwards;
  the bytes of either direction that followed the switch in what was fed, held or not,
  are kept for the caller, :meth:`HTTPConnection.take_tunnel_bytes`, e.g. HTTP/2 after
  ``Upgrade: h2c``);
  ``fin``/``rst``/``capture-end`` (the direction ended first; a close-delimited body ended
  by ``fin`` is complete, RFC 9112 §6.3 rule 8); ``missing-bytes`` (a hole the framing
  could not cross, or a response lost whole in a hole — that end has no head and no
  origin); ``malformed-chunk``; ``unknown-length`` (request with unusable framing).
  A hole the framing crosses (inside a Content-Length body or one chunk, or anywhere in a
  close-delimited body) gives a :class:`BodyGap` and the message can still end complete.
- Event-stream pickup: after a server-side hole that lost the message boundaries (above
  all the capture starting mid-stream), bytes that are not a status line are searched
  (within :data:`PICKUP_WINDOW`) for an event-stream body — SSE field lines, chunked or
  not. If found, the parser infers a :class:`ResponseHead` with ``head_captured=False``
  (status 0), gives a :class:`BodyGap` for the bytes before where it resumed, then reads
  the body as usual. Long-lived streams predate the capture that records an incident.
"""

from __future__ import annotations

import re
from collections import deque
from dataclasses import dataclass

from sse_forensics.limits import DEFAULT_LIMITS, Limits
from sse_forensics.provenance import Origin
from sse_forensics.reassembly.content_coding import (
    CODING_CAPPED,
    DecodeCapped,
    DecodeError,
    Decoder,
    make_decoder,
)
from sse_forensics.reassembly.http_events import (
    BodyGap,
    Headers,
    HTTPEvent,
    ProtocolError,
    RequestBody,
    RequestEnd,
    RequestHead,
    ResponseBody,
    ResponseEnd,
    ResponseHead,
    Tunnel,
)
from sse_forensics.reassembly.stream import Direction, MissingSpan

MAX_HEAD = 64 * 1024
"""Cap on a header section (and a trailer section). h11 and llhttp use 16–80 KiB."""
MAX_CHUNK_LINE = 4096
"""Cap on a chunk-size line with its extensions."""
CHUNK_RESYNC_WINDOW = 256 * 1024
"""How far past a hole in a chunked body to look for the next chunk header before giving
the body up: a server flushes chunks far smaller than this."""
_RESYNC_TAIL = 64
"""Bytes kept across frames while searching, so a message start or chunk header split
between two frames is still found (longer than any pattern searched for)."""

# RFC 9112 §2.2: a recipient MAY recognise a lone LF as a line terminator.
_HEAD_END = re.compile(rb"\r?\n\r?\n")
_TOKEN = rb"[!#$%&'*+.^_`|~0-9A-Za-z-]+"  # RFC 9110 §5.6.2
_FIELD_NAME = re.compile(_TOKEN.decode())
_OWS = " \t"  # RFC 9110 §5.6.3
_REQUEST_LINE = re.compile(rb"(" + _TOKEN + rb")[ \t]+([^ \t]+)[ \t]+(HTTP/[0-9]\.[0-9])[ \t]*")
_STATUS_LINE = re.compile(rb"(HTTP/[0-9]\.[0-9])[ \t]+([0-9]{3})(?:[ \t](.*))?")
_METHOD_PREFIX = re.compile(rb"[!#$%&'*+.^_`|~0-9A-Za-z-]{1,32}(?: |\Z)")
_VERSION_PREFIX = b"HTTP/"
# Where to resume after a hole: a plausible message start (strict, to avoid matching body
# bytes) and a plausible chunk header (RFC 9112 §7.1: chunk-size [chunk-ext] CRLF).
_RESPONSE_START = re.compile(rb"HTTP/1\.[01] [1-5][0-9][0-9][ \r\n]")
_REQUEST_START = re.compile(
    rb"(?:GET|POST|PUT|DELETE|HEAD|OPTIONS|PATCH|CONNECT|TRACE|PROPFIND|PROPPATCH|MKCOL|COPY"
    rb"|MOVE|LOCK|UNLOCK|REPORT|SEARCH) (?:/|\*|[A-Za-z][A-Za-z0-9+.-]*:)"
)
_CHUNK_HEADER = re.compile(rb"\r\n([0-9A-Fa-f]{1,8})(?:[ \t]*;[^\r\n]*)?\r\n")
_CHUNK_HEADER_AT_HOLE = re.compile(rb"(?:\r?\n)?([0-9A-Fa-f]{1,8})(?:[ \t]*;[^\r\n]*)?\r\n")
_CHUNK_SIZE = re.compile(rb"[0-9A-Fa-f]{1,16}")

CODING_CUT = "content-coding cannot be decoded across missing bytes"
"""Start of the :class:`ProtocolError` saying a coded body's bytes after a hole are passed
on still coded (a DEFLATE/brotli/zstd stream cannot be resumed mid-way)."""

PICKUP_WINDOW = 64 * 1024
"""How far past a mid-stream start to look for an event-stream body whose head was not
captured. A server flushes every event at once (WHATWG §9.2: events are dispatched as their
blank line arrives), so a window this size holds many of them."""
HEAD_NOT_CAPTURED = "(head not captured)"
"""``ResponseHead.reason`` of a head inferred from an event-stream body."""
# Evidence of text/event-stream (WHATWG HTML §9.2.6): a line that starts with a field name
# the format defines and a colon, or with a colon (a comment).
_SSE_FIELD_LINE = re.compile(rb"(?m)^(?:(?:data|id|event|retry):|:)")
_SSE_LINE = re.compile(rb"([^\r\n]*)(\r\n|\n|\r)")  # WHATWG: CRLF, LF or CR ends a line
_SSE_FIELD = re.compile(rb"(data|id|event|retry)(?::|\Z)|:")
_NEXT_CHUNK_HEADER = re.compile(rb"[0-9A-Fa-f]{1,8}(?:[ \t]*;[^\r\n]*)?\r\n")
_CHUNK_HEADER_PREFIX = re.compile(rb"[0-9A-Fa-f]{1,8}(?:[ \t]*(?:;[^\r\n]*)?)?\r?")
# Bytes that text never holds (C0 controls other than HT, LF, CR and ESC, and DEL): their
# share tells compressed or binary bytes from an event stream.
_CONTROL_BYTES = bytes(b for b in range(32) if b not in (9, 10, 13, 27)) + b"\x7f"
_BINARY_SAMPLE = 512
_WAIT = "wait"  # a pickup search needs more bytes to decide
_BINARY = "binary"  # a pickup search met compressed or binary bytes: give up

# Reader states, named for what the next bytes are.
IDLE = "IDLE"  # a message head, or empty lines before it
BODY_LENGTH = "BODY_LENGTH"  # Content-Length body
CHUNK_SIZE = "CHUNK_SIZE"  # chunk-size line
CHUNK_DATA = "CHUNK_DATA"
CHUNK_DATA_END = "CHUNK_DATA_END"  # the CRLF after chunk data
TRAILERS = "TRAILERS"  # trailer section after the last chunk
BODY_UNTIL_CLOSE = "BODY_UNTIL_CLOSE"  # close-delimited body
RESYNC_CHUNK = "RESYNC_CHUNK"  # after a hole in a chunked body: looking for a chunk header
RESYNC_MESSAGE = "RESYNC_MESSAGE"  # looking for the next message start
AWAIT_TUNNEL = "AWAIT_TUNNEL"  # client: held until the server accepts or refuses a tunnel
CLOSED = "CLOSED"  # direction ended, or the connection became a tunnel

_BODY_STATES = frozenset(
    {BODY_LENGTH, CHUNK_SIZE, CHUNK_DATA, CHUNK_DATA_END, TRAILERS, BODY_UNTIL_CLOSE, RESYNC_CHUNK}
)


@dataclass(slots=True)
class _Request:
    """A request whose response has not been seen yet."""

    exchange: int
    method: str | None  # None: the request was not seen
    wants_tunnel: bool = False


@dataclass(slots=True)
class _Body:
    """Framing and decoding state of the body being read."""

    exchange: int
    chunked: bool
    remaining: int = 0
    chunk: int = -1  # index of the current chunk
    decoder: Decoder | None = None
    last_origin: Origin | None = None
    wants_tunnel: bool = False  # client: CONNECT or Upgrade request
    resync_budget: int = 0


def _field_values(headers: Headers, name: str) -> str | None:
    """All field lines of ``name`` combined with commas (RFC 9110 §5.3)."""
    values = [v for k, v in headers if k.lower() == name]
    return ", ".join(values) if values else None


def _content_length(value: str) -> int | None:
    """RFC 9110 §8.6: 1*DIGIT; a list of identical values is the same length (RFC 9112
    §6.3 rule 5). ``None`` when invalid."""
    lengths = {v.strip() for v in value.split(",")}
    if len(lengths) != 1:
        return None
    (length,) = lengths
    return int(length) if length.isdigit() and length.isascii() else None


def _last_coding_is_chunked(transfer_encoding: str) -> bool:
    codings = [c.strip().lower() for c in transfer_encoding.split(",") if c.strip()]
    return bool(codings) and codings[-1].split(";", 1)[0].strip() == "chunked"


def _applied_codings(content_encoding: str | None, transfer_encoding: str | None) -> str | None:
    """Every coding applied to the body, in order: content codings, then the transfer
    codings other than ``chunked`` (RFC 9112 §6.1: a recipient undoes them; ``gzip,
    chunked`` is gzip inside the chunks)."""
    codings = [content_encoding] if content_encoding else []
    if transfer_encoding:
        codings += [
            c for c in transfer_encoding.split(",") if c.strip() and c.strip().lower() != "chunked"
        ]
    return ", ".join(codings) or None


def _sent_before(first: Origin, second: Origin) -> bool:
    """Capture order of two frames: by timestamp, then frame number within one file."""
    if first.ts != second.ts or first.source != second.source:
        return first.ts < second.ts
    return first.number < second.number


def _looks_binary(data: bytes) -> bool:
    """More than 1 in 32 bytes are controls text never holds (compressed bytes: ~1 in 9)."""
    return (len(data) - len(data.translate(None, _CONTROL_BYTES))) * 32 > len(data)


def _sse_chunk_start(buf: bytes, pos: int, end: int, partial_ok: bool) -> int | str | None:
    """Where a chunked event-stream body can be resumed in ``buf[pos:end]``: the start of a
    chunk-size line (RFC 9112 §7.1) whose chunk holds an SSE field line and whose data ends
    with CRLF before another plausible chunk-size line. ``_WAIT`` when a candidate runs
    past ``end``, ``_BINARY`` when the first well-framed chunk is not text.

    The start of ``buf`` is believed as a chunk-size line only if its chunk checks out: the
    capture may have started inside a longer size (``b`` of ``1b``), whose data then ends
    elsewhere. ``partial_ok``: no more bytes will come, so a chunk cut by ``end`` is judged
    on the data it has.
    """
    window_end = pos + PICKUP_WINDOW
    match = _CHUNK_HEADER_AT_HOLE.match(buf, pos, end)
    search_from = pos
    while True:
        if match is None:
            match = _CHUNK_HEADER.search(buf, search_from, end)
            if match is None or match.start() >= window_end:
                return None
        verdict = _judge_sse_chunk(buf, match, end, partial_ok)
        if verdict is not None:
            return verdict
        search_from = match.end() - 2  # its CRLF may begin the next candidate
        match = None


def _judge_sse_chunk(
    buf: bytes, match: re.Match[bytes], end: int, partial_ok: bool
) -> int | str | None:
    """``match.start(1)`` if the chunk at ``match`` is event-stream data, ``_WAIT`` or
    ``_BINARY`` as in :func:`_sse_chunk_start`, ``None`` to try the next candidate."""
    size = int(match.group(1), 16)
    if size == 0 or size > PICKUP_WINDOW:  # a last chunk proves nothing; see the window
        return None
    data_start = match.end()
    data_end = data_start + size
    if data_end + 2 > end:
        if not partial_ok:
            return _WAIT
        data_end = end
    elif buf[data_end : data_end + 2] != b"\r\n":
        return None
    else:
        next_start = data_end + 2
        if _NEXT_CHUNK_HEADER.match(buf, next_start, end) is None:
            prefix = _CHUNK_HEADER_PREFIX.match(buf, next_start, end)
            could_grow = prefix is not None and prefix.end() == end
            if not (could_grow or next_start == end):
                return None
            if not partial_ok:
                return _WAIT
    if _looks_binary(buf[data_start : min(data_end, data_start + _BINARY_SAMPLE)]):
        return _BINARY
    if _SSE_FIELD_LINE.search(buf, data_start, data_end) is None:
        return None
    return match.start(1)


def _sse_lines(buf: bytes, pos: int, end: int) -> bool | str:
    """Whether ``buf[pos:end]`` reads as an event stream that is not chunked: after the line
    the start cut, every complete line is an SSE field line, comment or blank line (WHATWG
    §9.2.6) up to a blank line ending a block that had a ``data`` or ``id`` field.
    ``_WAIT`` when ``end`` comes first."""
    end = min(end, pos + PICKUP_WINDOW)
    cut = _SSE_LINE.search(buf, pos, end)
    if cut is None:
        return _WAIT
    line_start = cut.end()
    block_has_field = False
    while True:
        line = _SSE_LINE.match(buf, line_start, end)
        if line is None or (line.group(2) == b"\r" and line.end() == end):
            return _WAIT  # a CR at the end may be half of a CRLF
        content = line.group(1)
        if not content:
            if block_has_field:
                return True
        else:
            field = _SSE_FIELD.match(content)
            if field is None:
                return False
            block_has_field = block_has_field or field.group(1) in (b"data", b"id")
        line_start = line.end()


class _Reader:
    """One direction: the message framing state machine of RFC 9112 §6."""

    # Slots: a capture may hold a hundred thousand connections open at once (issue 16).
    __slots__ = (
        "at_hole",
        "body",
        "conn",
        "direction",
        "final",
        "is_server",
        "last_origin",
        "origin",
        "origins",
        "pending",
        "pending_origins",
        "pickup",
        "quiet",
        "seen_message",
        "state",
        "tunnel_bytes",
        "wait",
    )

    def __init__(self, conn: HTTPConnection, direction: Direction) -> None:
        self.conn = conn
        self.direction: Direction = direction
        self.is_server = direction == "server"
        self.state = IDLE
        self.body: _Body | None = None
        # Bytes of an unfinished element (head, chunk-size line, search tail) carried to
        # the next frame, with (offset in pending, origin) for each frame they came from.
        self.pending = b""
        self.pending_origins: list[tuple[int, Origin]] = []
        self.origin: Origin | None = None  # frame being parsed
        self.origins: list[tuple[int, Origin]] | None = None  # set when pending was joined
        self.last_origin: Origin | None = None
        self.seen_message = False
        self.quiet = False  # a ProtocolError was reported; resyncing without more noise
        self.at_hole = False  # the next byte is the first after a missing-bytes span
        self.wait = False  # set by a step: stash the rest and wait for more bytes
        # Server: the hole after which an event-stream body may be picked up headless.
        self.pickup: MissingSpan | None = None
        self.final = False  # no bytes will follow the ones being parsed (a hole, the end)
        self.tunnel_bytes: list[tuple[bytes, Origin]] = []  # after a switch of protocol

    # -- driving -------------------------------------------------------------------------

    def feed(self, data: bytes, origin: Origin, out: list[HTTPEvent]) -> None:
        if self.state == CLOSED:
            return
        self.last_origin = origin
        self.origin = origin
        if self.pending:
            self.origins = [*self.pending_origins, (len(self.pending), origin)]
            buf = self.pending + data
            self.pending = b""
            self.pending_origins = []
        else:
            self.origins = None
            buf = data
        self.run(buf, out)

    def resume(self, out: list[HTTPEvent]) -> None:
        """Parse what was held while waiting (AWAIT_TUNNEL refused)."""
        self.state = IDLE
        if self.pending:
            buf, origins = self.pending, self.pending_origins
            self.pending, self.pending_origins = b"", []
            self.origins = origins
            self.origin = origins[-1][1]
            self.run(buf, out)

    def run(self, buf: bytes, out: list[HTTPEvent]) -> None:
        pos, n = 0, len(buf)
        steps = _STEPS  # one table for every reader: a dict of bound methods each cost ~1 KiB
        while pos < n:
            pos = steps[self.state](self, buf, pos, out)
            if self.wait:
                self.wait = False
                self.stash(buf, pos)
                return

    def stash(self, buf: bytes, pos: int) -> None:
        self.pending = buf[pos:]
        if self.origins is None:
            self.pending_origins = [(0, self.origin)] if self.pending else []
            return
        kept = []
        starts = self.origins
        for i, (start, origin) in enumerate(starts):
            end = starts[i + 1][0] if i + 1 < len(starts) else len(buf)
            if end > pos and end > start:
                kept.append((max(start - pos, 0), origin))
        self.pending_origins = kept

    def origin_at(self, pos: int) -> Origin | None:
        if self.origins is None:
            return self.origin
        found = self.origins[0][1]
        for start, origin in self.origins:
            if start > pos:
                break
            found = origin
        return found

    # -- events --------------------------------------------------------------------------

    def error(self, what: str, origin: Origin | None, out: list[HTTPEvent]) -> None:
        exchange = self.body.exchange if self.body is not None else None
        out.append(ProtocolError(self.direction, what, origin, exchange))

    def emit_body(
        self, buf: bytes, start: int, end: int, out: list[HTTPEvent], chunk: int | None
    ) -> None:
        """Body bytes ``buf[start:end]``, one event per frame they came from."""
        origins = self.origins
        if origins is None or start >= origins[-1][0]:
            self.deliver(buf[start:end], self.origin_at(start), out, chunk)
            return
        for i, (piece_start, origin) in enumerate(origins):
            piece_end = origins[i + 1][0] if i + 1 < len(origins) else end
            lo, hi = max(start, piece_start), min(end, piece_end)
            if lo < hi:
                self.deliver(buf[lo:hi], origin, out, chunk)

    def deliver(self, data: bytes, origin: Origin, out: list[HTTPEvent], chunk: int | None) -> None:
        body = self.body
        body.last_origin = origin
        if not self.is_server:
            out.append(RequestBody(body.exchange, data, origin))
            return
        if body.decoder is not None:
            try:
                data = body.decoder.decode(data)
            except DecodeCapped as exc:
                # What was decoded up to the cap, then the rest raw, marked as capped.
                body.decoder = None
                if exc.data:
                    out.append(ResponseBody(body.exchange, exc.data, origin, chunk))
                what = f"{CODING_CAPPED}: {exc.cut}"
                out.append(ProtocolError(self.direction, what, origin, body.exchange, exc.cap))
                out.append(ResponseBody(body.exchange, data, origin, chunk))
                return
            except DecodeError as exc:
                # Pass the rest through raw: the bytes stay visible, the error says why.
                self.error(f"{exc}; rest of body passed undecoded", origin, out)
                body.decoder = None
            if not data:
                return
        out.append(ResponseBody(body.exchange, data, origin, chunk))

    def stop_decoding(self, why: str, out: list[HTTPEvent]) -> None:
        """The body cannot be decoded past a hole: flush what was decoded, then go raw."""
        body = self.body
        if body is None or body.decoder is None:
            return
        decoder, body.decoder = body.decoder, None
        try:
            tail = decoder.flush()
        except DecodeError:
            tail = b""
        if tail:
            out.append(ResponseBody(body.exchange, tail, body.last_origin, self.chunk_index()))
        self.error(f"{why}; rest of body passed undecoded", body.last_origin, out)

    def chunk_index(self) -> int | None:
        body = self.body
        return body.chunk if body is not None and body.chunked else None

    def end_message(
        self, out: list[HTTPEvent], origin: Origin | None, complete: bool, reason: str
    ) -> None:
        body = self.body
        self.body = None
        self.state = IDLE
        if body is None:
            return
        if not self.is_server:
            out.append(RequestEnd(body.exchange, origin, complete, reason))
            if body.wants_tunnel and not self.conn.answered(body.exchange):
                self.state = AWAIT_TUNNEL
            return
        if body.decoder is not None:
            try:
                tail = body.decoder.flush()
            except DecodeCapped as exc:
                if exc.data:
                    out.append(ResponseBody(body.exchange, exc.data, body.last_origin, None))
                tail = b""
                what = f"{CODING_CAPPED}: {exc.cut}"
                capped = ProtocolError(
                    self.direction, what, body.last_origin, body.exchange, exc.cap
                )
                out.append(capped)
            except DecodeError as exc:
                self.error(str(exc), body.last_origin, out)
                tail = b""
            if tail:
                out.append(ResponseBody(body.exchange, tail, body.last_origin, None))
        out.append(ResponseEnd(body.exchange, origin, complete, reason))

    def lose_track(self, out: list[HTTPEvent], what: str | None, origin: Origin | None) -> None:
        """Look for the next message start (RFC 9112 §2.2 gives no other way back in)."""
        if what is not None and not self.quiet:
            self.error(what, origin, out)
            self.quiet = True
        self.state = RESYNC_MESSAGE
        if self.is_server:
            self.conn.server_lost_track = True

    # -- steps: each takes (buf, pos) and returns the next pos -----------------------------

    def step_closed(self, buf: bytes, pos: int, out: list[HTTPEvent]) -> int:
        if self.conn.tunnel and pos < len(buf):
            self.keep_tunnel_bytes(buf, pos)
        return len(buf)

    def keep_tunnel_bytes(self, buf: bytes, pos: int) -> None:
        """``buf[pos:]`` belongs to the protocol switched to: kept with their origins."""
        if self.origins is None:
            self.tunnel_bytes.append((buf[pos:], self.origin))  # type: ignore[arg-type]
            return
        starts = self.origins
        for i, (start, origin) in enumerate(starts):
            end = starts[i + 1][0] if i + 1 < len(starts) else len(buf)
            if end > max(start, pos):
                self.tunnel_bytes.append((buf[max(start, pos) : end], origin))

    def step_await_tunnel(self, buf: bytes, pos: int, out: list[HTTPEvent]) -> int:
        if len(buf) - pos > MAX_HEAD:
            # The server never answered: stop holding and parse as HTTP again.
            self.state = IDLE
            return pos
        self.wait = True
        return pos

    def step_idle(self, buf: bytes, pos: int, out: list[HTTPEvent]) -> int:
        n = len(buf)
        # RFC 9112 §2.2: ignore at least one empty line before a request-line.
        while pos < n and buf[pos] in b"\r\n":
            pos += 1
        if pos == n:
            return n
        if self.is_server:
            plausible = _VERSION_PREFIX.startswith(buf[pos : pos + 5])
        else:
            plausible = _METHOD_PREFIX.match(buf, pos, pos + 33) is not None
        if not plausible:
            return self.not_a_message(buf, pos, out)
        match = _HEAD_END.search(buf, pos)
        if match is None:
            if n - pos > MAX_HEAD:
                return self.head_too_large(pos, n, out)
            self.wait = True
            return pos
        if match.start() - pos > MAX_HEAD:
            return self.head_too_large(pos, match.end(), out)
        eol = buf.find(b"\n", pos)
        start_line = buf[pos : eol - 1 if buf[eol - 1] == 13 else eol]
        line_match = (_STATUS_LINE if self.is_server else _REQUEST_LINE).fullmatch(start_line)
        if line_match is None:
            return self.not_a_message(buf, pos, out)
        section = buf[eol + 1 : match.start()].decode("latin-1")
        headers = self.parse_fields(section, self.origin_at(pos), out)
        self.seen_message = True
        self.quiet = False
        head_origin = self.origin_at(pos)
        end_origin = self.origin_at(match.end() - 1)
        if self.is_server:
            self.conn.response_head(self, line_match, headers, head_origin, end_origin, out)
        else:
            self.conn.request_head(self, line_match, headers, head_origin, end_origin, out)
        return match.end()

    def parse_fields(self, section: str, origin: Origin | None, out: list[HTTPEvent]) -> Headers:
        """RFC 9112 §5: ``field-name ":" OWS field-value OWS``. The section is decoded
        latin-1 (never fails; RFC 9110 §5.5: field values are historically ISO-8859-1)."""
        headers: Headers = []
        bad = False
        if not section:
            return headers
        for line in section.split("\n"):
            if line[-1:] == "\r":
                line = line[:-1]
            if line[:1] in (" ", "\t") and headers:
                # RFC 9112 §5.2: obs-fold; a recipient may replace it with SP.
                name, value = headers[-1]
                headers[-1] = (name, value + " " + line.strip(_OWS))
                continue
            name, sep, value = line.partition(":")
            if not sep or _FIELD_NAME.fullmatch(name) is None:
                bad = True
                continue
            headers.append((name, value.strip(_OWS)))
        if bad:
            self.error("invalid header field line ignored (RFC 9112 §5)", origin, out)
        return headers

    def not_a_message(self, buf: bytes, pos: int, out: list[HTTPEvent]) -> int:
        kind = "status-line" if self.is_server else "request-line"
        what = f"bytes are not an HTTP/1.1 {kind} (RFC 9112 §3, §4): {buf[pos : pos + 16]!r}"
        self.lose_track(out, what, self.origin_at(pos))
        return pos + 1

    def head_too_large(self, pos: int, end: int, out: list[HTTPEvent]) -> int:
        what = f"header section longer than {MAX_HEAD} bytes"
        self.lose_track(out, what, self.origin_at(pos))
        return end

    def step_body_length(self, buf: bytes, pos: int, out: list[HTTPEvent]) -> int:
        body = self.body
        end = min(pos + body.remaining, len(buf))
        self.emit_body(buf, pos, end, out, None)
        body.remaining -= end - pos
        if body.remaining == 0:
            self.end_message(out, self.origin_at(end - 1), True, "complete")
        return end

    def step_body_until_close(self, buf: bytes, pos: int, out: list[HTTPEvent]) -> int:
        self.emit_body(buf, pos, len(buf), out, None)
        return len(buf)

    def step_chunk_size(self, buf: bytes, pos: int, out: list[HTTPEvent]) -> int:
        """RFC 9112 §7.1: ``chunk-size [ chunk-ext ] CRLF``; extensions are ignored."""
        eol = buf.find(b"\n", pos)
        if eol < 0:
            if len(buf) - pos > MAX_CHUNK_LINE:
                return self.bad_chunk(buf, pos, "chunk-size line too long", out)
            self.wait = True
            return pos
        size_field = buf[pos:eol].split(b";", 1)[0].strip(b" \t\r")
        if _CHUNK_SIZE.fullmatch(size_field) is None:
            return self.bad_chunk(buf, pos, f"malformed chunk size {size_field[:16]!r}", out)
        size = int(size_field, 16)
        if size == 0:
            self.state = TRAILERS
        else:
            self.body.chunk += 1
            self.body.remaining = size
            self.state = CHUNK_DATA
        return eol + 1

    def bad_chunk(self, buf: bytes, pos: int, what: str, out: list[HTTPEvent]) -> int:
        origin = self.origin_at(pos)
        self.error(f"{what} (RFC 9112 §7.1)", origin, out)
        self.end_message(out, origin, False, "malformed-chunk")
        self.quiet = True
        self.lose_track(out, None, origin)
        return pos

    def step_chunk_data(self, buf: bytes, pos: int, out: list[HTTPEvent]) -> int:
        body = self.body
        end = min(pos + body.remaining, len(buf))
        self.emit_body(buf, pos, end, out, body.chunk)
        body.remaining -= end - pos
        if body.remaining == 0:
            self.state = CHUNK_DATA_END
        return end

    def step_chunk_data_end(self, buf: bytes, pos: int, out: list[HTTPEvent]) -> int:
        first = buf[pos]
        if first == 10:  # lone LF (RFC 9112 §2.2)
            self.state = CHUNK_SIZE
            return pos + 1
        if first == 13:
            if pos + 1 == len(buf):
                self.wait = True
                return pos
            if buf[pos + 1] == 10:
                self.state = CHUNK_SIZE
                return pos + 2
        return self.bad_chunk(buf, pos, "chunk data not followed by CRLF", out)

    def step_trailers(self, buf: bytes, pos: int, out: list[HTTPEvent]) -> int:
        """RFC 9112 §7.1.2: trailer fields are read and dropped; an empty line ends."""
        eol = buf.find(b"\n", pos)
        if eol < 0:
            if len(buf) - pos > MAX_HEAD:
                return self.bad_chunk(buf, pos, "trailer section too long", out)
            self.wait = True
            return pos
        if eol == pos or (eol == pos + 1 and buf[pos] == 13):
            self.end_message(out, self.origin_at(eol), True, "complete")
        return eol + 1

    def step_resync_chunk(self, buf: bytes, pos: int, out: list[HTTPEvent]) -> int:
        """After a hole in a chunked body: the body resumes at the next plausible chunk
        header; bytes before it are the tail of a chunk whose size was lost."""
        body = self.body
        n = len(buf)
        found = None
        if self.at_hole:
            found = self.verified_chunk_header(_CHUNK_HEADER_AT_HOLE.match(buf, pos), buf)
        if found is None:
            for match in _CHUNK_HEADER.finditer(buf, pos):
                found = self.verified_chunk_header(match, buf)
                if found is not None:
                    break
        limit = found.start() if found is not None else n
        start = self.message_start(buf, pos, limit)
        if start is not None:
            # The end of the body was in the hole; the next message is already here.
            if start > pos:
                self.emit_body(buf, pos, start, out, None)
            self.end_message(out, self.origin_at(max(start - 1, pos)), False, "missing-bytes")
            self.at_hole = False
            return start
        if found is not None:
            if found.start() > pos:
                self.emit_body(buf, pos, found.start(), out, None)
            self.at_hole = False
            self.state = CHUNK_SIZE
            return found.start(1)
        keep = max(pos, n - _RESYNC_TAIL)
        if keep > pos:
            self.emit_body(buf, pos, keep, out, None)
            self.at_hole = False
            body.resync_budget -= keep - pos
        if body.resync_budget <= 0:
            self.end_message(out, self.origin_at(keep), False, "missing-bytes")
            self.lose_track(out, None, None)
            return keep
        self.wait = True
        return keep

    def verified_chunk_header(
        self, match: re.Match[bytes] | None, buf: bytes
    ) -> re.Match[bytes] | None:
        """A chunk header is believed when its data is followed by CRLF (or not seen yet)."""
        if match is None:
            return None
        size = int(match.group(1), 16)
        data_end = match.end() + size
        if size and data_end + 2 <= len(buf) and buf[data_end : data_end + 2] != b"\r\n":
            return None
        return match

    def message_start(self, buf: bytes, pos: int, limit: int) -> int | None:
        """The first plausible message start in ``buf[pos:limit]``. Not only at line
        starts: a message often follows a body that did not end with a newline."""
        pattern = _RESPONSE_START if self.is_server else _REQUEST_START
        match = pattern.search(buf, pos, min(limit + 16, len(buf)))
        return match.start() if match is not None and match.start() < limit else None

    def step_resync_message(self, buf: bytes, pos: int, out: list[HTTPEvent]) -> int:
        if self.pickup is not None:
            return self.step_pickup(buf, pos, out)
        start = self.message_start(buf, pos, len(buf))
        if start is not None:
            self.at_hole = False
            self.state = IDLE
            return start
        keep = max(pos, len(buf) - _RESYNC_TAIL)
        if keep > pos:
            self.at_hole = False
        self.wait = True
        return keep

    def step_pickup(self, buf: bytes, pos: int, out: list[HTTPEvent]) -> int:
        """After a hole that lost the message boundaries: a message start wins (a normal
        response is never read as anything else); bytes before it, or all bytes if there
        is none, are searched for an event-stream body whose head was not captured. The
        bytes are held, not dropped, until the search decides."""
        n = len(buf)
        start = self.message_start(buf, pos, n)
        if start is not None:
            # Only a chunked body can end (with its last chunk) before the next message.
            found = _sse_chunk_start(buf, pos, start, partial_ok=False)
            if isinstance(found, int):
                return self.pick_up(found, True, out)
            self.pickup = None
            return pos
        final = self.final or n - pos >= PICKUP_WINDOW
        found = _sse_chunk_start(buf, pos, n, partial_ok=final)
        if isinstance(found, int):
            return self.pick_up(found, True, out)
        if found is None:
            sample = buf[pos : pos + _BINARY_SAMPLE]
            if len(sample) == _BINARY_SAMPLE and _looks_binary(sample):
                found = _BINARY
            elif _sse_lines(buf, pos, n) is True:
                return self.pick_up(pos, False, out)
        if found != _BINARY and not final:
            # Undecided (a chunk or a block runs past the bytes held): wait for more.
            self.wait = True
            return pos
        # No event stream where one could be: resynchronise at message starts only.
        self.pickup = None
        return pos

    def pick_up(self, at: int, chunked: bool, out: list[HTTPEvent]) -> int:
        """Resume an event-stream body at ``at``: an inferred head, the gap before ``at``,
        then the body framing (chunked: ``at`` is a chunk-size line; otherwise the body is
        delimited by the close, RFC 9112 §6.3 rule 8). No content-coding is known, so none
        is removed (a coded body does not pass the search)."""
        hole, self.pickup = self.pickup, None
        origin = self.origin_at(at)
        exchange = self.conn.headless_response(self, chunked, origin, out)
        span = MissingSpan(self.direction, hole.offset, None, hole.reason, hole.after, origin)
        out.append(BodyGap(exchange, self.direction, span))
        self.at_hole = False
        self.quiet = False
        self.seen_message = True
        return at

    def settle_pickup(self, out: list[HTTPEvent]) -> None:
        """No more bytes follow the held ones (a hole or the end comes): decide on them."""
        if self.pickup is None or self.state != RESYNC_MESSAGE or not self.pending:
            return
        buf, self.origins = self.pending, self.pending_origins
        self.pending, self.pending_origins = b"", []
        self.origin = self.origins[-1][1]
        self.final = True
        try:
            self.run(buf, out)
        finally:
            self.final = False

    # -- missing bytes and the end -------------------------------------------------------

    def missing(self, span: MissingSpan, out: list[HTTPEvent]) -> None:
        self.settle_pickup(out)
        state = self.state
        if state == CLOSED:
            return
        self.pending, self.pending_origins = b"", []
        self.at_hole = False
        body = self.body
        length = span.length
        if state in _BODY_STATES:
            out.append(BodyGap(body.exchange, self.direction, span))
        if state in (BODY_LENGTH, CHUNK_DATA) and length is not None and length < body.remaining:
            # The framing crosses the hole: the body continues right after it.
            body.remaining -= length
            self.stop_decoding(CODING_CUT, out)
            return
        if state in (BODY_LENGTH, CHUNK_DATA) and length == body.remaining:
            body.remaining = 0
            self.stop_decoding(CODING_CUT, out)
            if state == CHUNK_DATA:
                self.state = CHUNK_DATA_END
            else:
                self.end_message(out, span.before, True, "complete")
            return
        if state == BODY_UNTIL_CLOSE:
            # Everything up to the close is body, so the body goes on after the hole.
            self.stop_decoding(CODING_CUT, out)
            return
        if state in (CHUNK_SIZE, CHUNK_DATA, CHUNK_DATA_END, RESYNC_CHUNK) and (
            length is None or length <= CHUNK_RESYNC_WINDOW
        ):
            self.stop_decoding(CODING_CUT, out)
            if state != RESYNC_CHUNK:
                body.resync_budget = CHUNK_RESYNC_WINDOW
            self.state = RESYNC_CHUNK
            self.at_hole = True
            return
        if state in _BODY_STATES:
            self.end_message(out, span.after, False, "missing-bytes")
        elif state == IDLE and self.is_server:
            self.conn.drop_interim(out)
        # A head, or an unknown amount of the stream, is gone: find the next message, or
        # the body of an event stream whose head is gone.
        self.lose_track(out, None, None)
        self.at_hole = True
        if self.is_server:
            self.pickup = span

    def end(self, origin: Origin | None, reason: str, out: list[HTTPEvent]) -> None:
        self.settle_pickup(out)
        state = self.state
        if state == CLOSED:
            return
        origin = origin if origin is not None else self.last_origin
        if state == BODY_UNTIL_CLOSE:
            # RFC 9112 §6.3 rule 8: a close-delimited body ends at the close; only an
            # orderly FIN says that the close is the sender's and not the capture's.
            complete = reason == "fin"
            self.end_message(out, origin, complete, "complete" if complete else reason)
        elif state == RESYNC_CHUNK:
            # No chunk header found after the hole before the end: the hole is why.
            self.end_message(out, origin, False, "missing-bytes")
        elif state in _BODY_STATES:
            self.end_message(out, origin, False, reason)
        elif state == IDLE and self.pending.strip(b"\r\n"):
            kind = "response" if self.is_server else "request"
            self.error(f"{kind} head cut off by {reason}", self.pending_origins[0][1], out)
        self.state = CLOSED
        self.pending, self.pending_origins = b"", []


_STEPS = {
    IDLE: _Reader.step_idle,
    BODY_LENGTH: _Reader.step_body_length,
    CHUNK_SIZE: _Reader.step_chunk_size,
    CHUNK_DATA: _Reader.step_chunk_data,
    CHUNK_DATA_END: _Reader.step_chunk_data_end,
    TRAILERS: _Reader.step_trailers,
    BODY_UNTIL_CLOSE: _Reader.step_body_until_close,
    RESYNC_CHUNK: _Reader.step_resync_chunk,
    RESYNC_MESSAGE: _Reader.step_resync_message,
    AWAIT_TUNNEL: _Reader.step_await_tunnel,
    CLOSED: _Reader.step_closed,
}
"""The reader's step per state (RFC 9112 §6 framing), each ``(reader, buf, pos, out)``."""


class HTTPConnection:
    """Both directions of one HTTP/1.1 connection (h11-style: bytes in, events out; no I/O).

    Feed each direction's reassembled bytes in capture order; every method returns the
    events the call produced, possibly for both directions (a refused tunnel releases
    held client bytes).
    """

    __slots__ = (
        "_client",
        "_current",
        "_last_final",
        "_next_exchange",
        "_orphan",
        "_server",
        "_unanswered",
        "limits",
        "server_lost_track",
        "tunnel",
    )

    def __init__(self, limits: Limits = DEFAULT_LIMITS) -> None:
        self.limits = limits  # body_bytes, expansion_ratio, coding_depth (content codings)
        self._client = _Reader(self, "client")
        self._server = _Reader(self, "server")
        self._next_exchange = 0
        self._unanswered: deque[_Request] = deque()
        self._current: _Request | None = None  # request whose interim responses came
        self._last_final = -1  # highest exchange answered by a final response
        self.server_lost_track = False  # the server stream had a hole at a message boundary
        # The last response numbered without a request, while no request has followed it.
        self._orphan: tuple[_Request, Origin] | None = None
        self.tunnel = False

    # -- public API ------------------------------------------------------------------------

    def feed(self, direction: Direction, data: bytes, origin: Origin) -> list[HTTPEvent]:
        out: list[HTTPEvent] = []
        reader = self._server if direction == "server" else self._client
        try:
            reader.feed(data, origin, out)
        except Exception as exc:  # a parser bug must not lose the rest of the capture
            self._internal_error(reader, exc, origin, out)
        return out

    def missing(self, span: MissingSpan) -> list[HTTPEvent]:
        """Bytes the capture lacks in ``span.direction``."""
        out: list[HTTPEvent] = []
        reader = self._server if span.direction == "server" else self._client
        try:
            reader.missing(span, out)
        except Exception as exc:
            self._internal_error(reader, exc, span.after, out)
        return out

    def end(self, direction: Direction, origin: Origin | None, reason: str) -> list[HTTPEvent]:
        """That direction ended: ``reason`` is ``"fin"``, ``"rst"`` or ``"capture-end"``."""
        out: list[HTTPEvent] = []
        reader = self._server if direction == "server" else self._client
        try:
            reader.end(origin, reason, out)
            if direction == "server" and self._client.state == AWAIT_TUNNEL:
                self._client.resume(out)
        except Exception as exc:
            self._internal_error(reader, exc, origin, out)
        return out

    # -- called by the readers ---------------------------------------------------------------

    def _internal_error(
        self, reader: _Reader, exc: Exception, origin: Origin | None, out: list[HTTPEvent]
    ) -> None:
        out.append(ProtocolError(reader.direction, f"internal parser error: {exc!r}", origin, None))
        reader.state = CLOSED
        reader.pending, reader.pending_origins = b"", []

    def answered(self, exchange: int) -> bool:
        return exchange <= self._last_final

    def request_head(
        self,
        reader: _Reader,
        line: re.Match[bytes],
        headers: Headers,
        origin: Origin,
        end_origin: Origin,
        out: list[HTTPEvent],
    ) -> None:
        """RFC 9112 §6.3 rules 4–7 for a request: chunked, else Content-Length, else none."""
        method = line.group(1).decode("latin-1")
        target = line.group(2).decode("latin-1")
        wants_tunnel = method == "CONNECT" or any(k.lower() == "upgrade" for k, _ in headers)
        orphan, self._orphan = self._orphan, None
        if orphan is not None and _sent_before(origin, orphan[1]):
            # The request came late out of TCP reassembly (its bytes sat behind a hole) but
            # was sent before the response already numbered as requestless: it is that
            # response's request.
            exchange = orphan[0].exchange
            wants_tunnel = False
        else:
            exchange = self._next_exchange
            self._next_exchange += 1
            self._unanswered.append(_Request(exchange, method, wants_tunnel))
        out.append(RequestHead(exchange, method, target, line.group(3).decode(), headers, origin))
        body = reader.body = _Body(exchange, chunked=False, wants_tunnel=wants_tunnel)
        transfer_encoding = _field_values(headers, "transfer-encoding")
        content_length = _field_values(headers, "content-length")
        if transfer_encoding is not None:
            if not _last_coding_is_chunked(transfer_encoding):
                reader.error(
                    "request Transfer-Encoding without final chunked (RFC 9112 §6.3 rule 4)",
                    origin,
                    out,
                )
                reader.end_message(out, end_origin, False, "unknown-length")
                reader.lose_track(out, None, None)
                return
            body.chunked = True
            reader.state = CHUNK_SIZE
        elif content_length is not None:
            length = _content_length(content_length)
            if length is None:
                reader.error(f"invalid Content-Length {content_length!r}", origin, out)
                reader.end_message(out, end_origin, False, "unknown-length")
                reader.lose_track(out, None, None)
                return
            body.remaining = length
            if length:
                reader.state = BODY_LENGTH
            else:
                reader.end_message(out, end_origin, True, "complete")
        else:
            reader.end_message(out, end_origin, True, "complete")

    def response_head(
        self,
        reader: _Reader,
        line: re.Match[bytes],
        headers: Headers,
        origin: Origin,
        end_origin: Origin,
        out: list[HTTPEvent],
    ) -> None:
        """Pair the response with its request and pick its framing (RFC 9112 §6.3)."""
        status = int(line.group(2))
        reason = (line.group(3) or b"").strip(b" \t").decode("latin-1")
        version = line.group(1).decode()
        request = self._current or self._take_request(origin, out)
        # RFC 9110 §15.2: 1xx are interim, except 101 which ends HTTP on the connection.
        interim = 100 <= status < 200 and status != 101
        out.append(
            ResponseHead(request.exchange, status, reason, version, headers, origin, interim)
        )
        if interim:
            self._current = request
            return
        self._current = None
        self._last_final = max(self._last_final, request.exchange)
        if status == 101 or (request.method == "CONNECT" and 200 <= status < 300):
            # RFC 9112 §9.7 / RFC 9110 §9.3.6: the connection is now a tunnel.
            protocol = next((v for k, v in headers if k.lower() == "upgrade"), "")
            if not protocol and request.method == "CONNECT":
                protocol = "CONNECT"
            out.append(Tunnel(request.exchange, origin, protocol))
            out.append(ResponseEnd(request.exchange, end_origin, True, "tunnel"))
            self._become_tunnel()
            return
        reader.body = _Body(request.exchange, chunked=False)
        self._frame_response(reader, request, status, headers, origin, end_origin, out)
        if self._client.state == AWAIT_TUNNEL:
            self._client.resume(out)

    def _frame_response(
        self,
        reader: _Reader,
        request: _Request,
        status: int,
        headers: Headers,
        origin: Origin,
        end_origin: Origin,
        out: list[HTTPEvent],
    ) -> None:
        body = reader.body
        # RFC 9112 §6.3 rule 1: no body after HEAD, 1xx, 204 or 304, whatever the fields say.
        if request.method == "HEAD" or status in (204, 304):
            reader.end_message(out, end_origin, True, "complete")
            return
        transfer_encoding = _field_values(headers, "transfer-encoding")
        content_length = _field_values(headers, "content-length")
        body.decoder = make_decoder(
            _applied_codings(_field_values(headers, "content-encoding"), transfer_encoding),
            self.limits,
        )
        if transfer_encoding is not None:
            # Rule 3: chunked when it is the final coding, otherwise read until close.
            if _last_coding_is_chunked(transfer_encoding):
                body.chunked = True
                reader.state = CHUNK_SIZE
            else:
                reader.state = BODY_UNTIL_CLOSE
            return
        if content_length is not None:
            length = _content_length(content_length)
            if length is None:
                reader.error(
                    f"invalid Content-Length {content_length!r}; body read until close",
                    origin,
                    out,
                )
                reader.state = BODY_UNTIL_CLOSE
                return
            if length == 0:
                reader.end_message(out, end_origin, True, "complete")
                return
            body.remaining = length
            reader.state = BODY_LENGTH
            return
        # Rule 8: the body is delimited by the close of the connection.
        reader.state = BODY_UNTIL_CLOSE

    def _take_request(self, origin: Origin, out: list[HTTPEvent]) -> _Request:
        """The oldest unanswered request (RFC 9112 §9.3), with one exception: after a hole
        in the server stream that may have swallowed whole responses, the newest request
        is taken — a client that does not pipeline sends a request only after the previous
        response, so the older requests lost their responses to the hole."""
        unanswered = self._unanswered
        if self.server_lost_track:
            self.server_lost_track = False
            while len(unanswered) > 1:
                lost = unanswered.popleft()
                out.append(ResponseEnd(lost.exchange, None, False, "missing-bytes"))
        if unanswered:
            return unanswered.popleft()
        # The request was not seen: the response is an exchange of its own.
        request = _Request(self._next_exchange, None)
        self._next_exchange += 1
        self._orphan = (request, origin)
        return request

    def headless_response(
        self, reader: _Reader, chunked: bool, origin: Origin, out: list[HTTPEvent]
    ) -> int:
        """An event-stream body whose head the capture lacks: infer the head from what the
        body showed, pair it like any response (RFC 9112 §9.3), and set up its framing.
        Returns the exchange."""
        request = self._take_request(origin, out)
        self._current = None
        self._last_final = max(self._last_final, request.exchange)
        headers: Headers = [("Content-Type", "text/event-stream")]
        if chunked:
            headers.append(("Transfer-Encoding", "chunked"))
        out.append(
            ResponseHead(
                request.exchange, 0, HEAD_NOT_CAPTURED, "", headers, origin, head_captured=False
            )
        )
        reader.body = _Body(request.exchange, chunked=chunked)
        reader.state = CHUNK_SIZE if chunked else BODY_UNTIL_CLOSE
        if self._client.state == AWAIT_TUNNEL:
            self._client.resume(out)
        return request.exchange

    def drop_interim(self, out: list[HTTPEvent]) -> None:
        """A hole after interim responses may hold the final one: give that exchange up."""
        if self._current is not None:
            out.append(ResponseEnd(self._current.exchange, None, False, "missing-bytes"))
            self._current = None

    def _become_tunnel(self) -> None:
        self.tunnel = True
        for reader in (self._client, self._server):
            if reader.pending and reader.state == AWAIT_TUNNEL:
                # Held behind the request that asked for the switch: they follow it.
                reader.origins = reader.pending_origins
                reader.keep_tunnel_bytes(reader.pending, 0)
            reader.state = CLOSED
            reader.body = None
            reader.pending, reader.pending_origins = b"", []

    def take_tunnel_bytes(self, direction: Direction) -> list[tuple[bytes, Origin]]:
        """The bytes of ``direction`` after the switch to a tunnel (:class:`Tunnel`) that
        were fed or held until then, as ``(bytes, origin)`` pieces; later bytes are the
        caller's to route."""
        reader = self._server if direction == "server" else self._client
        pieces, reader.tunnel_bytes = reader.tunnel_bytes, []
        return pieces


__all__ = ["CODING_CAPPED", "CODING_CUT", "HEAD_NOT_CAPTURED", "PICKUP_WINDOW", "HTTPConnection"]
