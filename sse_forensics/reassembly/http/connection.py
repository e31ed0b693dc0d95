"""Both directions of one HTTP/1.1 connection: pairing responses with requests by order
(RFC 9112 §9.3), choosing each body's framing (RFC 9112 §6.3), and protocol switches.

The connection drives its two :class:`~.reader.DirectionReader` s: it feeds a reader, and
whenever the reader stops with a question (:mod:`.asks`) it answers and lets it go on.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from sse_forensics.limits import DEFAULT_LIMITS, Limits
from sse_forensics.provenance import Origin
from sse_forensics.reassembly.content_coding import make_decoder
from sse_forensics.reassembly.http.asks import (
    Ask,
    Body,
    HeadlessBody,
    ParsedHead,
    TunnelRequestEnded,
)
from sse_forensics.reassembly.http.fields import applied_codings, field_values
from sse_forensics.reassembly.http.framing import request_framing, response_framing
from sse_forensics.reassembly.http.reader import DirectionReader
from sse_forensics.reassembly.http.state import (
    AWAIT_TUNNEL,
    CHUNKED,
    IDLE,
    NO_BODY,
    TUNNEL,
    UNTIL_CLOSE,
)
from sse_forensics.reassembly.http_events import (
    BodyGap,
    Headers,
    HTTPEvent,
    ProtocolError,
    RequestHead,
    ResponseEnd,
    ResponseHead,
    Tunnel,
)
from sse_forensics.reassembly.stream import Direction, MissingSpan

HEAD_NOT_CAPTURED = "(head not captured)"
"""``ResponseHead.reason`` of a head inferred from an event-stream body."""


@dataclass(slots=True)
class _Request:
    """A request whose response has not been seen yet."""

    exchange: int
    method: str | None  # None: the request was not seen
    wants_tunnel: bool = False


def _sent_before(first: Origin, second: Origin) -> bool:
    """Capture order of two frames: by timestamp, then frame number within one file."""
    if first.ts != second.ts or first.source != second.source:
        return first.ts < second.ts
    return first.number < second.number


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
        "tunnel",
    )

    def __init__(self, limits: Limits = DEFAULT_LIMITS) -> None:
        self.limits = limits  # body_bytes, expansion_ratio, coding_depth (content codings)
        self._client = DirectionReader("client")
        self._server = DirectionReader("server")
        self._next_exchange = 0
        self._unanswered: deque[_Request] = deque()
        self._current: _Request | None = None  # request whose interim responses came
        self._last_final = -1  # highest exchange answered by a final response
        # The last response numbered without a request, while no request has followed it.
        self._orphan: tuple[_Request, Origin] | None = None
        self.tunnel = False

    # -- public API ------------------------------------------------------------------------

    def feed(self, direction: Direction, data: bytes, origin: Origin) -> list[HTTPEvent]:
        out: list[HTTPEvent] = []
        reader = self._server if direction == "server" else self._client
        try:
            if reader.state < TUNNEL:  # not closed
                self._run(reader, reader.take_input(data, origin), out)
        except Exception as exc:  # a parser bug must not lose the rest of the capture
            self._internal_error(reader, exc, origin, out)
        return out

    def missing(self, span: MissingSpan) -> list[HTTPEvent]:
        """Bytes the capture lacks in ``span.direction``."""
        out: list[HTTPEvent] = []
        reader = self._server if span.direction == "server" else self._client
        try:
            self._settle_pickup(reader, out)
            between_messages = reader.state == IDLE
            reader.missing(span, out)
            if between_messages and reader.is_server:
                self._drop_interim(out)
            self._answer(reader, out)
        except Exception as exc:
            self._internal_error(reader, exc, span.after, out)
        return out

    def end(self, direction: Direction, origin: Origin | None, reason: str) -> list[HTTPEvent]:
        """That direction ended: ``reason`` is ``"fin"``, ``"rst"`` or ``"capture-end"``."""
        out: list[HTTPEvent] = []
        reader = self._server if direction == "server" else self._client
        try:
            self._settle_pickup(reader, out)
            reader.end(origin, reason, out)
            if direction == "server":
                self._release_client(out)
        except Exception as exc:
            self._internal_error(reader, exc, origin, out)
        return out

    def take_tunnel_bytes(self, direction: Direction) -> list[tuple[bytes, Origin]]:
        """The bytes of ``direction`` after the switch to a tunnel (:class:`Tunnel`) that
        were fed or held until then, as ``(bytes, origin)`` pieces; later bytes are the
        caller's to route."""
        reader = self._server if direction == "server" else self._client
        pieces, reader.tunnel_bytes = reader.tunnel_bytes, []
        return pieces

    # -- driving the readers -----------------------------------------------------------------

    def _run(self, reader: DirectionReader, buf: bytes, out: list[HTTPEvent]) -> None:
        """Let ``reader`` parse ``buf``, answering each question it stops at."""
        n = len(buf)
        pos = reader.run(buf, 0, out)
        while reader.ask is not None:
            self._answer(reader, out)
            if pos < n:
                pos = reader.run(buf, pos, out)

    def _answer(self, reader: DirectionReader, out: list[HTTPEvent]) -> None:
        ask: Ask | None = reader.ask
        while ask is not None:
            reader.ask = None
            if isinstance(ask, ParsedHead):
                if reader.is_server:
                    self._response_head(reader, ask, out)
                else:
                    self._request_head(reader, ask, out)
            elif isinstance(ask, HeadlessBody):
                self._headless_response(reader, ask, out)
            elif (
                isinstance(ask, TunnelRequestEnded)
                and reader.state == AWAIT_TUNNEL
                and self._answered(ask.exchange)
            ):
                reader.state = IDLE  # the server already accepted or refused
            ask = reader.ask

    def _settle_pickup(self, reader: DirectionReader, out: list[HTTPEvent]) -> None:
        """No more bytes follow the ones held for a pickup (a hole or the end comes):
        decide on them."""
        buf = reader.take_unsettled()
        if buf is None:
            return
        reader.final = True
        try:
            self._run(reader, buf, out)
        finally:
            reader.final = False

    def _release_client(self, out: list[HTTPEvent]) -> None:
        """The server answered (or ended) without a tunnel: parse what the client held."""
        client = self._client
        if client.state != AWAIT_TUNNEL:
            return
        client.state = IDLE
        if client.pending:
            self._run(client, client.take_held(), out)

    def _internal_error(
        self, reader: DirectionReader, exc: Exception, origin: Origin | None, out: list[HTTPEvent]
    ) -> None:
        out.append(ProtocolError(reader.direction, f"internal parser error: {exc!r}", origin, None))
        reader.abort()

    def _answered(self, exchange: int) -> bool:
        return exchange <= self._last_final

    # -- requests and responses ----------------------------------------------------------------

    def _request_head(
        self, reader: DirectionReader, head: ParsedHead, out: list[HTTPEvent]
    ) -> None:
        """Number the request, then read its body with the framing RFC 9112 §6.3 gives."""
        line, headers, origin, end_origin = head.line, head.headers, head.origin, head.end_origin
        assert origin is not None
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
        framing, length, problem = request_framing(
            field_values(headers, "transfer-encoding"), field_values(headers, "content-length")
        )
        body = Body(exchange, chunked=framing is CHUNKED, wants_tunnel=wants_tunnel)
        body.remaining = length
        if problem is not None:
            reader.body = body
            reader.error(problem, origin, out)
            reader.end_message(out, end_origin, False, "unknown-length")
            reader.lose_track(out, None, None)
            return
        reader.start_body(body, framing, end_origin, out)

    def _response_head(
        self, reader: DirectionReader, head: ParsedHead, out: list[HTTPEvent]
    ) -> None:
        """Pair the response with its request and pick its framing (RFC 9112 §6.3)."""
        line, headers, origin, end_origin = head.line, head.headers, head.origin, head.end_origin
        assert origin is not None
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
            self.tunnel = True
            self._client.become_tunnel()
            self._server.become_tunnel()
            return
        body = Body(request.exchange, chunked=False)
        # RFC 9112 §6.3 rule 1: no body after HEAD, 1xx, 204 or 304, whatever the fields say.
        if request.method == "HEAD" or status in (204, 304):
            reader.start_body(body, NO_BODY, end_origin, out)
        else:
            transfer_encoding = field_values(headers, "transfer-encoding")
            framing, body.remaining, problem = response_framing(
                transfer_encoding, field_values(headers, "content-length")
            )
            body.chunked = framing is CHUNKED
            body.decoder = make_decoder(
                applied_codings(field_values(headers, "content-encoding"), transfer_encoding),
                self.limits,
            )
            reader.body = body
            if problem is not None:
                reader.error(problem, origin, out)
            reader.start_body(body, framing, end_origin, out)
        self._release_client(out)

    def _take_request(self, origin: Origin | None, out: list[HTTPEvent]) -> _Request:
        """The oldest unanswered request (RFC 9112 §9.3), with one exception: after a hole
        in the server stream that may have swallowed whole responses, the newest request
        is taken — a client that does not pipeline sends a request only after the previous
        response, so the older requests lost their responses to the hole."""
        unanswered = self._unanswered
        if self._server.lost_track:
            self._server.lost_track = False
            while len(unanswered) > 1:
                lost = unanswered.popleft()
                out.append(ResponseEnd(lost.exchange, None, False, "missing-bytes"))
        if unanswered:
            return unanswered.popleft()
        # The request was not seen: the response is an exchange of its own.
        request = _Request(self._next_exchange, None)
        self._next_exchange += 1
        if origin is not None:
            self._orphan = (request, origin)
        return request

    def _headless_response(
        self, reader: DirectionReader, found: HeadlessBody, out: list[HTTPEvent]
    ) -> None:
        """An event-stream body whose head the capture lacks: infer the head from what the
        body showed, pair it like any response (RFC 9112 §9.3), give the gap before it, and
        read it (chunked, or until the close)."""
        chunked, origin, hole = found.chunked, found.origin, found.hole
        request = self._take_request(origin, out)
        self._current = None
        self._last_final = max(self._last_final, request.exchange)
        headers: Headers = [("Content-Type", "text/event-stream")]
        if chunked:
            headers.append(("Transfer-Encoding", "chunked"))
        assert origin is not None
        out.append(
            ResponseHead(
                request.exchange, 0, HEAD_NOT_CAPTURED, "", headers, origin, head_captured=False
            )
        )
        framing = CHUNKED if chunked else UNTIL_CLOSE
        reader.start_body(Body(request.exchange, chunked=chunked), framing, None, out)
        self._release_client(out)
        span = MissingSpan(reader.direction, hole.offset, None, hole.reason, hole.after, origin)
        out.append(BodyGap(request.exchange, reader.direction, span))

    def _drop_interim(self, out: list[HTTPEvent]) -> None:
        """A hole after interim responses may hold the final one: give that exchange up."""
        if self._current is not None:
            out.append(ResponseEnd(self._current.exchange, None, False, "missing-bytes"))
            self._current = None
