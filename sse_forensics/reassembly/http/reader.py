"""One direction of an HTTP/1.1 connection: its receive buffer, its framing state, and the
events its bytes produce (RFC 9112 §6).

The reader parses until it has the whole of what it was asked for, or until it needs a
decision only the connection can make (whose response this is, which framing a body has,
whether a tunnel was accepted): it then stops with an :data:`Ask` in ``ask`` and the
position it stopped at, and :class:`~.connection.HTTPConnection` answers before asking it
to go on. The reader never calls into the connection.

What each state reads is in :mod:`.readers` (one step per state, from a table); a step
takes ``(reader, buf, pos, out)`` and returns the next position.
"""

from __future__ import annotations

from sse_forensics.provenance import Origin
from sse_forensics.reassembly.content_coding import CODING_CAPPED, DecodeCapped, DecodeError
from sse_forensics.reassembly.http.asks import Ask, Body, TunnelRequestEnded
from sse_forensics.reassembly.http.grammar import CHUNK_RESYNC_WINDOW
from sse_forensics.reassembly.http.readers import STEPS
from sse_forensics.reassembly.http.state import (
    AWAIT_TUNNEL,
    BODY_LENGTH,
    BODY_STATES,
    BODY_UNTIL_CLOSE,
    CHUNK_DATA,
    CHUNK_DATA_END,
    CHUNK_SIZE,
    CLOSED,
    CONTENT_LENGTH,
    FIRST_STATE,
    IDLE,
    NO_BODY,
    RESYNC_CHUNK,
    RESYNC_MESSAGE,
    TUNNEL,
    Framing,
)
from sse_forensics.reassembly.http_events import (
    BodyGap,
    HTTPEvent,
    ProtocolError,
    RequestBody,
    RequestEnd,
    ResponseBody,
    ResponseEnd,
)
from sse_forensics.reassembly.receive_buffer import Marks, marks_from, origin_at, runs
from sse_forensics.reassembly.stream import Direction, MissingSpan

CODING_CUT = "content-coding cannot be decoded across missing bytes"
"""Start of the :class:`ProtocolError` saying a coded body's bytes after a hole are passed
on still coded (a DEFLATE/brotli/zstd stream cannot be resumed mid-way)."""


class DirectionReader:
    """One direction: the message framing state machine of RFC 9112 §6."""

    # Slots: a capture may hold a hundred thousand connections open at once (issue 16).
    __slots__ = (
        "ask",
        "at_hole",
        "body",
        "direction",
        "final",
        "is_server",
        "last_origin",
        "lost_track",
        "origin",
        "origins",
        "pending",
        "pending_origins",
        "pickup",
        "quiet",
        "state",
        "stop",
        "tunnel_bytes",
    )

    def __init__(self, direction: Direction) -> None:
        self.direction: Direction = direction
        self.is_server = direction == "server"
        self.state = IDLE
        self.body: Body | None = None
        self.ask: Ask | None = None  # a decision the connection must make before going on
        # The receive buffer: bytes of an unfinished element (head, chunk-size line, search
        # tail) carried to the next frame, with the origin marks of the frames they came
        # from (receive_buffer.Marks).
        self.pending = b""
        self.pending_origins: Marks[Origin] = []
        self.origin: Origin | None = None  # frame being parsed
        self.origins: Marks[Origin] | None = None  # set when pending was joined
        self.last_origin: Origin | None = None
        self.quiet = False  # a ProtocolError was reported; resyncing without more noise
        self.at_hole = False  # the next byte is the first after a missing-bytes span
        # Set by a step to stop the run: to hold the rest until more bytes come, or (with
        # ``ask``) for the connection's answer.
        self.stop = False
        # Server: the hole after which an event-stream body may be picked up headless.
        self.pickup: MissingSpan | None = None
        self.final = False  # no bytes will follow the ones being parsed (a hole, the end)
        self.lost_track = False  # server: a hole at a message boundary (responses lost)
        self.tunnel_bytes: list[tuple[bytes, Origin]] = []  # after a switch of protocol

    @property
    def closed(self) -> bool:
        return self.state >= TUNNEL

    # -- the receive buffer ----------------------------------------------------------------

    def take_input(self, data: bytes, origin: Origin) -> bytes:
        """The bytes to parse next: what was held, then ``data`` from ``origin``."""
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
        return buf

    def take_held(self) -> bytes:
        """The held bytes, to parse again (a tunnel refused, a pickup to settle)."""
        buf, origins = self.pending, self.pending_origins
        self.pending, self.pending_origins = b"", []
        self.origins = origins
        self.origin = origins[-1][1]
        return buf

    def stash(self, buf: bytes, pos: int) -> None:
        self.pending = buf[pos:]
        if self.origins is None:
            self.pending_origins = (
                [(0, self.origin)] if self.pending and self.origin is not None else []
            )
            return
        self.pending_origins = marks_from(self.origins, pos, len(buf))

    def origin_at(self, pos: int) -> Origin | None:
        origins = self.origins
        if origins is None:
            return self.origin
        found = origin_at(origins, pos)
        return found if found is not None else origins[0][1]

    # -- driving -------------------------------------------------------------------------

    def run(self, buf: bytes, pos: int, out: list[HTTPEvent]) -> int:
        """Parse ``buf`` from ``pos`` until it is all read (or the rest held for more
        bytes) or a step asks the connection something (``ask``); return where it stopped.
        A step sets ``stop`` to end the loop (one flag checked per step, for both)."""
        n = len(buf)
        steps = STEPS  # one table for every reader: a dict of bound methods each cost ~1 KiB
        self.stop = False  # an ask made outside a run (end, missing) left it set
        while pos < n:
            pos = steps[self.state](self, buf, pos, out)
            if self.stop:
                self.stop = False
                if self.ask is not None:
                    return pos
                self.stash(buf, pos)
                return n
        return pos

    def start_body(
        self, body: Body, framing: Framing, end_origin: Origin | None, out: list[HTTPEvent]
    ) -> None:
        """Read ``body`` with the reader of its framing (RFC 9112 §6.3)."""
        self.body = body
        if framing is NO_BODY or (framing is CONTENT_LENGTH and not body.remaining):
            self.end_message(out, end_origin, True, "complete")
            return
        self.state = FIRST_STATE[framing]

    def become_tunnel(self) -> None:
        """The connection switched protocols: bytes held behind the request that asked for
        the switch follow it (kept for the caller); nothing more is parsed as HTTP."""
        if self.pending and self.state == AWAIT_TUNNEL:
            self.origins = self.pending_origins
            self.keep_tunnel_bytes(self.pending, 0)
        self.state = TUNNEL
        self.body = None
        self.pending, self.pending_origins = b"", []

    def keep_tunnel_bytes(self, buf: bytes, pos: int) -> None:
        """``buf[pos:]`` belongs to the protocol switched to: kept with their origins."""
        if self.origins is None:
            if self.origin is not None:
                self.tunnel_bytes.append((buf[pos:], self.origin))
            return
        for lo, hi, origin in runs(self.origins, pos, len(buf)):
            self.tunnel_bytes.append((buf[lo:hi], origin))

    def abort(self) -> None:
        """An internal error: nothing more is read in this direction."""
        self.state = CLOSED
        self.ask = None
        self.pending, self.pending_origins = b"", []

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
        for lo, hi, origin in runs(origins, start, end):
            self.deliver(buf[lo:hi], origin, out, chunk)

    def deliver(
        self, data: bytes, origin: Origin | None, out: list[HTTPEvent], chunk: int | None
    ) -> None:
        body = self.body
        assert body is not None and origin is not None
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
        if tail and body.last_origin is not None:
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
            if body.wants_tunnel:
                # Held until the server answers, unless it already has (the connection says).
                self.state = AWAIT_TUNNEL
                self.ask = TunnelRequestEnded(body.exchange)
                self.stop = True  # stop for the connection's answer
            return
        if body.decoder is not None:
            try:
                tail = body.decoder.flush()
            except DecodeCapped as exc:
                if exc.data and body.last_origin is not None:
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
            if tail and body.last_origin is not None:
                out.append(ResponseBody(body.exchange, tail, body.last_origin, None))
        out.append(ResponseEnd(body.exchange, origin, complete, reason))

    def lose_track(self, out: list[HTTPEvent], what: str | None, origin: Origin | None) -> None:
        """Look for the next message start (RFC 9112 §2.2 gives no other way back in)."""
        if what is not None and not self.quiet:
            self.error(what, origin, out)
            self.quiet = True
        self.state = RESYNC_MESSAGE
        if self.is_server:
            self.lost_track = True

    # -- missing bytes and the end -------------------------------------------------------

    def take_unsettled(self) -> bytes | None:
        """Bytes held for an event-stream pickup that must be decided now (a hole or the
        end comes, no more bytes will follow them); ``None`` if there are none."""
        if self.pickup is None or self.state != RESYNC_MESSAGE or not self.pending:
            return None
        return self.take_held()

    def missing(self, span: MissingSpan, out: list[HTTPEvent]) -> None:
        """A hole of ``span.length`` bytes (unknown: ``None``) in this direction; what is
        held for a pickup is settled first (:meth:`take_unsettled`)."""
        state = self.state
        if self.closed:
            return
        self.pending, self.pending_origins = b"", []
        self.at_hole = False
        body = self.body
        length = span.length
        if body is not None and state in BODY_STATES:
            out.append(BodyGap(body.exchange, self.direction, span))
            if state in (BODY_LENGTH, CHUNK_DATA) and length is not None:
                if length < body.remaining:
                    # The framing crosses the hole: the body continues right after it.
                    body.remaining -= length
                    self.stop_decoding(CODING_CUT, out)
                    return
                if length == body.remaining:
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
            self.end_message(out, span.after, False, "missing-bytes")
        # A head, or an unknown amount of the stream, is gone: find the next message, or
        # the body of an event stream whose head is gone.
        self.lose_track(out, None, None)
        self.at_hole = True
        if self.is_server:
            self.pickup = span

    def end(self, origin: Origin | None, reason: str, out: list[HTTPEvent]) -> None:
        """The direction ended (``fin``, ``rst``, ``capture-end``); what is held for a
        pickup is settled first (:meth:`take_unsettled`)."""
        state = self.state
        if self.closed:
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
        elif state in BODY_STATES:
            self.end_message(out, origin, False, reason)
        elif state == IDLE and self.pending.strip(b"\r\n"):
            kind = "response" if self.is_server else "request"
            self.error(f"{kind} head cut off by {reason}", self.pending_origins[0][1], out)
        self.state = CLOSED
        self.ask = None
        self.pending, self.pending_origins = b"", []
