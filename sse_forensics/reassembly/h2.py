"""HTTP/2 as a passive observer of both directions (RFC 9113), with ``hyperframe`` for the
frames and ``hpack`` for the header blocks (RFC 7541); sans-I/O like the HTTP/1.1 parser
in :mod:`.http`, and it emits the same events (:mod:`.http_events`).

Each stream becomes one exchange, numbered in the order the client opened them: its request
HEADERS are the request head, DATA the body, END_STREAM the end; the response likewise. A
RST_STREAM ends both halves of a stream (reason ``rst``); a GOAWAY ends the streams above its
last stream ID (``goaway``), which the server says it never processed.

Bytes arrive as *pieces* (``(bytes, Origin)``, e.g. one decrypted TLS record laid over the
frames that carried it), so DATA is cited to the frames of its own bytes.

A capture hole (or TLS bytes that could not be decrypted) loses frame boundaries and may lose
HPACK dynamic-table updates. Every stream open in that direction gets the gap (its events
become indeterminate); frames are looked for again at the start of the next piece (a TLS
record or a TCP segment) with a frame header that fits the connection's state. The HPACK
decoder restarts empty: entries inserted after the hole sit at the front of the dynamic
table exactly as the encoder has them (RFC 7541 §2.3.3), so a header block that refers only
to them (or to the static table and literals) decodes right; one that refers past them
cannot be decoded and is reported, never guessed.

Caps on hostile input: a header block (HEADERS + CONTINUATION) longer than
:data:`MAX_HEADER_BLOCK`, or decoding to more than :data:`MAX_HEADER_LIST` bytes (an HPACK
bomb), is refused for that stream and reported; the dynamic table is bounded by
:data:`MAX_TABLE_SIZE` whatever SETTINGS ask for.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass, field

from hpack import Decoder
from hpack.exceptions import HPACKError
from hyperframe.frame import (
    ContinuationFrame,
    DataFrame,
    Frame,
    GoAwayFrame,
    HeadersFrame,
    PushPromiseFrame,
    RstStreamFrame,
    SettingsFrame,
)

from sse_forensics.limits import DEFAULT_LIMITS, Limits
from sse_forensics.provenance import Origin
from sse_forensics.reassembly.content_coding import (
    CODING_CAPPED,
    DecodeCapped,
    DecodeError,
    make_decoder,
)
from sse_forensics.reassembly.content_coding import Decoder as BodyDecoder
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
    header,
)
from sse_forensics.reassembly.receive_buffer import Pieces, ReceiveBuffer, slice_pieces
from sse_forensics.reassembly.stream import Direction, MissingSpan

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"  # RFC 9113 §3.4
FRAME_HEADER = 9
MAX_FRAME = (1 << 24) - 1  # RFC 9113 §4.2: the largest SETTINGS_MAX_FRAME_SIZE
MAX_HEADER_BLOCK = 1 << 18  # compressed bytes of one header block
MAX_HEADER_LIST = 1 << 16  # decoded bytes (RFC 9113 §6.5.2 SETTINGS_MAX_HEADER_LIST_SIZE)
MAX_TABLE_SIZE = 1 << 16  # HPACK dynamic table, bytes (RFC 7541 §4.2)
DEFAULT_TABLE_SIZE = 4096  # RFC 9113 §6.5.2 SETTINGS_HEADER_TABLE_SIZE initial value
SETTINGS_HEADER_TABLE_SIZE = 0x1
VERSION = "HTTP/2"
# Frame types (RFC 9113 §6) and what a frame header must look like to be taken as one when
# frames are looked for again after a hole.
DATA, HEADERS, PRIORITY, RST_STREAM, SETTINGS, PUSH_PROMISE, PING, GOAWAY = range(8)
WINDOW_UPDATE, CONTINUATION = 8, 9


@dataclass(slots=True)
class _Stream:
    exchange: int
    request_open: bool = False  # request head seen, END_STREAM not yet
    response_open: bool = False  # final response head seen, END_STREAM not yet
    response_done: bool = False
    request_done: bool = False
    opaque: bool = False  # its header block could not be decoded: DATA not read
    decoder: BodyDecoder | None = None  # content-coding of the response body
    last_origin: Origin | None = None


@dataclass(slots=True)
class _Block:
    """A header block being collected (HEADERS or PUSH_PROMISE, then CONTINUATION)."""

    stream_id: int
    end_stream: bool
    origin: Origin
    push: bool = False
    fragments: list[bytes] = field(default_factory=list)
    size: int = 0
    refused: str | None = None


class _Side:
    __slots__ = ("block", "buf", "dead", "decoder", "lost", "preface")

    def __init__(self, preface: bool) -> None:
        self.buf = ReceiveBuffer()
        self.preface = preface  # the client's connection preface is still to come
        self.decoder = _decoder(DEFAULT_TABLE_SIZE)
        self.block: _Block | None = None
        self.lost = False  # past a hole: frame boundaries unknown
        self.dead = False


def _decoder(table_size: int) -> Decoder:
    decoder = Decoder(max_header_list_size=MAX_HEADER_LIST)
    decoder.max_allowed_table_size = min(table_size, MAX_TABLE_SIZE)
    return decoder


class H2Connection:
    """Both directions of one HTTP/2 connection (see the module docstring).

    ``upgraded``: the exchange index of an HTTP/1.1 request answered ``101`` with ``h2c``
    (RFC 7540 §3.2): its response is stream 1 and the client still sends the preface;
    ``settings``: that request's ``HTTP2-Settings`` (base64url of a SETTINGS payload, the
    client's first settings).
    """

    def __init__(
        self,
        first_exchange: int = 0,
        upgraded: int | None = None,
        settings: str | None = None,
        limits: Limits = DEFAULT_LIMITS,
    ) -> None:
        self.limits = limits  # body_bytes, expansion_ratio, coding_depth (content codings)
        self.sides: dict[Direction, _Side] = {"client": _Side(True), "server": _Side(False)}
        self.streams: dict[int, _Stream] = {}
        self.next_exchange = first_exchange
        self.table_size: dict[Direction, int] = {
            "client": DEFAULT_TABLE_SIZE,
            "server": DEFAULT_TABLE_SIZE,
        }
        self.goaway: int | None = None
        self.out: list[HTTPEvent] = []
        if upgraded is not None:
            self.streams[1] = _Stream(upgraded, request_done=True)
            self.next_exchange = max(self.next_exchange, upgraded + 1)
        if settings:
            self._settings("client", _upgrade_settings(settings))

    # -- input -------------------------------------------------------------------------------

    def feed(self, direction: Direction, pieces: Pieces) -> list[HTTPEvent]:
        """``pieces``: the next bytes of ``direction`` (one TLS record, or one segment)."""
        side = self.sides[direction]
        self.out = []
        if side.dead or not pieces:
            return self.out
        if side.lost:
            data = b"".join(p for p, _ in pieces)
            if not self._plausible_frame(direction, data):
                return self.out  # still lost: these bytes are part of the gap
            side.lost = False
        for data, origin in pieces:
            side.buf.append(data, origin)
        try:
            self._frames(direction)
        except Exception as exc:  # a bug here must not end the scan: say so, stop the side
            side.dead = True
            side.buf.clear()
            self.out.append(
                ProtocolError(
                    direction,
                    f"HTTP/2: internal error ({type(exc).__name__}); "
                    "rest of this direction not read",
                    pieces[0][1],
                )
            )
        return self.out

    def missing(self, span: MissingSpan) -> list[HTTPEvent]:
        direction = span.direction
        side = self.sides[direction]
        self.out = []
        side.buf.clear()
        side.block = None
        side.lost = True
        side.preface = False
        # The dynamic table may have lost insertions: start it empty (module docstring).
        side.decoder = _decoder(self.table_size[_peer(direction)])
        for stream in self.streams.values():
            if direction == "server" and stream.response_open:
                self.out.append(BodyGap(stream.exchange, "server", span))
            elif direction == "client" and stream.request_open:
                self.out.append(BodyGap(stream.exchange, "client", span))
        return self.out

    def end(self, direction: Direction, origin: Origin | None, reason: str) -> list[HTTPEvent]:
        """That direction of the connection ended (``fin``, ``rst``, ``capture-end``)."""
        self.out = []
        for stream in self.streams.values():
            if direction == "server" and stream.response_open:
                self._end_response(stream, origin, False, reason)
            elif direction == "client" and stream.request_open:
                stream.request_open = False
                stream.request_done = True
                self.out.append(RequestEnd(stream.exchange, origin, False, reason))
        return self.out

    # -- frames ------------------------------------------------------------------------------

    def _frames(self, direction: Direction) -> None:
        side = self.sides[direction]
        buf = side.buf
        while True:
            if side.preface:
                if len(buf) < len(PREFACE):
                    if not PREFACE.startswith(bytes(buf.data)):
                        self._die(direction, "client bytes are not the HTTP/2 preface")
                    return
                if bytes(buf.data[: len(PREFACE)]) != PREFACE:
                    self._die(direction, "client bytes are not the HTTP/2 preface")
                    return
                buf.skip(len(PREFACE))
                side.preface = False
            if len(buf) < FRAME_HEADER:
                return
            head = bytes(buf.data[:FRAME_HEADER])
            length = int.from_bytes(head[:3], "big")
            if len(buf) < FRAME_HEADER + length:
                return
            pieces = buf.take(FRAME_HEADER + length)
            data = b"".join(p for p, _ in pieces)
            try:
                frame, _ = Frame.parse_frame_header(memoryview(head))
                frame.parse_body(memoryview(data[FRAME_HEADER:]))
            except Exception as exc:  # hyperframe's errors, or a frame it cannot parse
                self._error(direction, f"HTTP/2 frame not readable ({exc})", pieces[0][1])
                continue
            self._frame(direction, frame, pieces)
            if side.dead:
                return

    def _frame(self, direction: Direction, frame: Frame, pieces: Pieces) -> None:
        side = self.sides[direction]
        origin = pieces[0][1]
        if side.block is not None and not isinstance(frame, ContinuationFrame):
            # RFC 9113 §6.10: nothing may come between a header block's frames.
            self._error(direction, "header block not continued", origin)
            side.block = None
            side.decoder = _decoder(self.table_size[_peer(direction)])
        if isinstance(frame, DataFrame):
            self._data(direction, frame, pieces)
        elif isinstance(frame, HeadersFrame | PushPromiseFrame):
            push = isinstance(frame, PushPromiseFrame)
            side.block = _Block(frame.stream_id, "END_STREAM" in frame.flags, origin, push)
            self._fragment(direction, frame.data, "END_HEADERS" in frame.flags, origin)
        elif isinstance(frame, ContinuationFrame):
            if side.block is None or side.block.stream_id != frame.stream_id:
                self._error(direction, "CONTINUATION without a header block", origin)
                return
            self._fragment(direction, frame.data, "END_HEADERS" in frame.flags, origin)
        elif isinstance(frame, RstStreamFrame):
            self._reset(frame.stream_id, origin)
        elif isinstance(frame, SettingsFrame):
            self._settings(direction, frame.settings)
        elif isinstance(frame, GoAwayFrame) and direction == "server":
            self.goaway = frame.last_stream_id
            for stream_id, stream in self.streams.items():
                if stream_id > frame.last_stream_id and stream_id % 2 == 1:
                    self._end_response(stream, origin, False, "goaway", force=True)

    def _settings(self, direction: Direction, settings: dict[int, int]) -> None:
        size = settings.get(SETTINGS_HEADER_TABLE_SIZE)
        if size is not None:
            # The peer's encoder may now use up to this (RFC 7541 §4.2).
            self.table_size[direction] = size
            peer = self.sides[_peer(direction)]
            peer.decoder.max_allowed_table_size = min(
                max(size, peer.decoder.max_allowed_table_size), MAX_TABLE_SIZE
            )

    def _data(self, direction: Direction, frame: DataFrame, pieces: Pieces) -> None:
        stream = self.streams.get(frame.stream_id)
        end = "END_STREAM" in frame.flags
        if stream is None or stream.opaque:
            return
        start = FRAME_HEADER + (1 if "PADDED" in frame.flags else 0)
        body = slice_pieces(pieces, start, len(frame.data))
        if direction == "client":
            if not stream.request_open:
                return
            for data, origin in body:
                self.out.append(RequestBody(stream.exchange, data, origin))
            if end:
                stream.request_open = False
                stream.request_done = True
                self.out.append(RequestEnd(stream.exchange, pieces[-1][1], True))
            return
        if not stream.response_open:
            return
        for data, origin in body:
            stream.last_origin = origin
            if stream.decoder is not None:
                try:
                    data = stream.decoder.decode(data)
                except DecodeCapped as exc:
                    # As in HTTP/1.1 (http.py): what fits, then the rest raw, marked capped.
                    stream.decoder = None
                    if exc.data:
                        self.out.append(ResponseBody(stream.exchange, exc.data, origin))
                    what = f"{CODING_CAPPED}: {exc.cut}"
                    self.out.append(ProtocolError("server", what, origin, stream.exchange, exc.cap))
                except DecodeError as exc:
                    self.out.append(
                        ProtocolError(
                            "server",
                            f"{exc}; rest of body passed undecoded",
                            origin,
                            stream.exchange,
                        )
                    )
                    stream.decoder = None
                if not data:
                    continue
            self.out.append(ResponseBody(stream.exchange, data, origin))
        if end:
            self._end_response(stream, pieces[-1][1], True, "complete")

    def _fragment(self, direction: Direction, data: bytes, last: bool, origin: Origin) -> None:
        side = self.sides[direction]
        block = side.block
        assert block is not None
        block.size += len(data)
        if block.size > MAX_HEADER_BLOCK:
            block.refused = block.refused or f"header block over {MAX_HEADER_BLOCK} bytes"
            block.fragments = []
        elif block.refused is None:
            block.fragments.append(bytes(data))
        if last:
            side.block = None
            self._header_block(direction, block)

    def _header_block(self, direction: Direction, block: _Block) -> None:
        side = self.sides[direction]
        headers: list[tuple[str, str]] | None = None
        why = block.refused
        if why is None:
            try:
                decoded = side.decoder.decode(b"".join(block.fragments), raw=True)
                headers = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in decoded]
            except HPACKError as exc:
                why = f"HPACK: {type(exc).__name__}: {exc}"
            except Exception as exc:
                why = f"HPACK: {type(exc).__name__}"
        if headers is None:
            # The decoder's table may now differ from the encoder's: restart it empty.
            side.decoder = _decoder(self.table_size[_peer(direction)])
        if block.push:
            return  # server push: its request is the server's own; not an exchange here
        stream = self._stream(block.stream_id, direction)
        if stream is None:
            return
        if headers is None:
            stream.opaque = True
            self.out.append(
                ProtocolError(
                    direction,
                    f"HTTP/2 stream {block.stream_id}: its header block could not be decoded "
                    f"({why}): its {'request' if direction == 'client' else 'response'} "
                    "headers are indeterminate",
                    block.origin,
                    stream.exchange,
                )
            )
            if direction == "server" and stream.response_open:
                self._end_response(stream, block.origin, False, "missing-bytes")
            return
        if direction == "client":
            self._request_head(stream, headers, block)
        else:
            self._response_head(stream, headers, block)

    def _request_head(self, stream: _Stream, headers: list[tuple[str, str]], block: _Block) -> None:
        if stream.request_open or stream.request_done:
            if block.end_stream and stream.request_open:  # trailers
                stream.request_open = False
                stream.request_done = True
                self.out.append(RequestEnd(stream.exchange, block.origin, True))
            return
        pseudo, regular = _split(headers)
        method = pseudo.get(":method", "")
        target = pseudo.get(":path", "")
        if ":authority" in pseudo and header(regular, "host") is None:
            regular.insert(0, ("host", pseudo[":authority"]))
        self.out.append(
            RequestHead(stream.exchange, method, target, VERSION, regular, block.origin)
        )
        if block.end_stream:
            stream.request_done = True
            self.out.append(RequestEnd(stream.exchange, block.origin, True))
        else:
            stream.request_open = True

    def _response_head(
        self, stream: _Stream, headers: list[tuple[str, str]], block: _Block
    ) -> None:
        if stream.response_open or stream.response_done:
            if block.end_stream and stream.response_open:  # trailers end the response
                self._end_response(stream, block.origin, True, "complete")
            return
        pseudo, regular = _split(headers)
        try:
            status = int(pseudo.get(":status", ""))
        except ValueError:
            status = 0
        if 100 <= status < 200:
            self.out.append(
                ResponseHead(
                    stream.exchange, status, "", VERSION, regular, block.origin, interim=True
                )
            )
            return
        self.out.append(ResponseHead(stream.exchange, status, "", VERSION, regular, block.origin))
        stream.decoder = make_decoder(header(regular, "content-encoding"), self.limits)
        stream.response_open = True
        if block.end_stream:
            self._end_response(stream, block.origin, True, "complete")

    def _stream(self, stream_id: int, direction: Direction) -> _Stream | None:
        stream = self.streams.get(stream_id)
        if stream is None:
            if stream_id == 0 or stream_id % 2 == 0:
                return None  # not a client-initiated stream
            stream = self.streams[stream_id] = _Stream(self.next_exchange)
            self.next_exchange += 1
        return stream

    def _reset(self, stream_id: int, origin: Origin) -> None:
        stream = self.streams.get(stream_id)
        if stream is None:
            return
        if stream.request_open:
            stream.request_open = False
            stream.request_done = True
            self.out.append(RequestEnd(stream.exchange, origin, False, "rst"))
        self._end_response(stream, origin, False, "rst", force=True)

    def _end_response(
        self,
        stream: _Stream,
        origin: Origin | None,
        complete: bool,
        reason: str,
        force: bool = False,
    ) -> None:
        if not stream.response_open and not (force and not stream.response_done):
            return
        was_open = stream.response_open
        stream.response_open = False
        stream.response_done = True
        if not was_open:
            return  # ended before any response head: nothing to close
        if stream.decoder is not None:
            try:
                tail = stream.decoder.flush()
            except DecodeError:
                tail = b""
            if tail:
                # The decoder holds bytes only once a DATA frame fed it: last_origin is set.
                assert stream.last_origin is not None
                self.out.append(ResponseBody(stream.exchange, tail, stream.last_origin))
        self.out.append(ResponseEnd(stream.exchange, origin, complete, reason))

    # -- after a hole ------------------------------------------------------------------------

    def _plausible_frame(self, direction: Direction, data: bytes) -> bool:
        """Whether ``data`` starts with a frame header this connection could send next."""
        if len(data) < FRAME_HEADER:
            return False
        length = int.from_bytes(data[:3], "big")
        kind, flags = data[3], data[4]
        stream_id = int.from_bytes(data[5:9], "big")
        if stream_id >> 31 or length > MAX_FRAME:
            return False
        if kind in (SETTINGS, PING, GOAWAY):
            fits = {SETTINGS: length % 6 == 0, PING: length == 8, GOAWAY: length >= 8}[kind]
            return stream_id == 0 and fits
        if kind == WINDOW_UPDATE:
            return length == 4
        if kind == RST_STREAM:
            return length == 4 and stream_id in self.streams
        if kind == PRIORITY:
            return length == 5 and stream_id != 0
        if kind == DATA:
            stream = self.streams.get(stream_id)
            if stream is None:
                return False
            return stream.response_open if direction == "server" else stream.request_open
        if kind == HEADERS:
            if stream_id == 0:
                return False
            return direction == "server" or stream_id in self.streams or stream_id % 2 == 1
        del flags
        return False  # CONTINUATION (its block's start is lost), PUSH_PROMISE, unknown

    # -- problems ----------------------------------------------------------------------------

    def _error(self, direction: Direction, what: str, origin: Origin | None) -> None:
        self.out.append(ProtocolError(direction, what, origin))

    def _die(self, direction: Direction, what: str) -> None:
        side = self.sides[direction]
        origin = side.buf.origin_at(0)
        side.dead = True
        side.buf.clear()
        self._error(direction, f"{what}; rest of this direction not read as HTTP/2", origin)


def _upgrade_settings(value: str) -> dict[int, int]:
    """RFC 7540 §3.2.1: ``HTTP2-Settings`` is the base64url (no padding) of a SETTINGS
    payload; what does not decode is ignored (the preface's SETTINGS frame follows)."""
    try:
        payload = base64.urlsafe_b64decode(value.strip() + "=" * (-len(value.strip()) % 4))
    except (ValueError, binascii.Error):
        return {}
    return {
        int.from_bytes(payload[i : i + 2], "big"): int.from_bytes(payload[i + 2 : i + 6], "big")
        for i in range(0, len(payload) - 5, 6)
    }


def _peer(direction: Direction) -> Direction:
    return "server" if direction == "client" else "client"


def _split(headers: list[tuple[str, str]]) -> tuple[dict[str, str], Headers]:
    pseudo: dict[str, str] = {}
    regular: Headers = []
    for name, value in headers:
        if name.startswith(":"):
            pseudo.setdefault(name, value)
        else:
            regular.append((name, value))
    return pseudo, regular


__all__ = ["PREFACE", "H2Connection"]
