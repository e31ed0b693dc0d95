"""Drive the layers over one capture: frames → TCP segments → per-connection byte streams →
HTTP exchanges → SSE events. This module wires the sans-I/O parsers together; it reads no
files itself (the frames come from :mod:`sse_forensics.ingest`)."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from sse_forensics.errors import ReadError
from sse_forensics.ingest.linklayer import decode_tcp
from sse_forensics.ingest.packets import Frame
from sse_forensics.ingest.pcap import CaptureStats
from sse_forensics.limits import DEFAULT_LIMITS, CapHit, Limits
from sse_forensics.provenance import Origin
from sse_forensics.reassembly.exchange import BodyHole, Exchange
from sse_forensics.reassembly.flows import (
    MAX_INCONSISTENCIES_KEPT,
    Connection,
    ConnectionTracker,
)
from sse_forensics.reassembly.h2 import PREFACE as H2_PREFACE
from sse_forensics.reassembly.h2 import H2Connection
from sse_forensics.reassembly.http import CODING_CAPPED, CODING_CUT, HTTPConnection
from sse_forensics.reassembly.http_events import (
    BodyGap,
    HTTPEvent,
    ProtocolError,
    RequestBody,
    RequestEnd,
    RequestHead,
    ResponseBody,
    ResponseEnd,
    ResponseHead,
    Tunnel,
    header,
)
from sse_forensics.reassembly.loss import CaptureLoss
from sse_forensics.reassembly.receive_buffer import Pieces
from sse_forensics.reassembly.sse import SSEAnomaly, SSEParser
from sse_forensics.reassembly.stream import Direction, Inconsistency, MissingSpan, StreamData
from sse_forensics.reassembly.stream_table import StreamTable, streams_capped
from sse_forensics.reassembly.tls import TLSData, TLSGap, TLSKeys, TLSProblem, TLSSession
from sse_forensics.reassembly.tls.session import TLSEvent

# SSE lines a browser would silently repair or ignore, but that mean the bytes were not what
# the server meant to send: reported under ``errors`` with their frame.
BODY_FRAMES_KEPT = 4096
"""Frames whose response-body bytes are remembered (exchange, body offsets), so that an
inconsistent retransmission of them is placed in the body it touches."""
SPILL_EVENTS = 8192
"""Events an exchange holds as objects before a ``spill`` hook hands them on as rows
(issue 16: a stream of millions of events costs a window of them, not all)."""
EventSpill = Callable[[Exchange], None]
"""Takes an exchange's ``events`` (and comments) so far as rows and empties them, noting what
it took in ``Exchange.spilled`` (``evidence.from_capture.CaptureEvidence.spill``)."""
REPORTED_SSE_ANOMALIES = {
    "invalid-utf8": "event-stream line is not valid UTF-8 (decoded with U+FFFD)",
    "id-contains-nul": "id field contains NUL and was ignored (WHATWG)",
}


@dataclass(slots=True)
class Reassembly:
    """Everything reassembled from one capture (one or more files merged in time order).

    ``capture_stats``: per input file, what the file says about its own completeness
    (pcapng ISB drop counters, link types). ``loss``: capture-loss totals over all
    connections plus those drop counters (per connection: ``Connection.loss``).
    """

    connections: list[Connection] = field(default_factory=list)
    exchanges: list[Exchange] = field(default_factory=list)
    errors: list[ReadError] = field(default_factory=list)
    frames: int = 0
    tcp_segments: int = 0
    capture_stats: dict[str, CaptureStats] = field(default_factory=dict)
    loss: CaptureLoss = field(default_factory=CaptureLoss)
    log_stats: dict[str, object] = field(default_factory=dict)  # read_logs' stats, if any
    # TCP connections in all, and the highest id: ``connections`` may hold only some of
    # them (a scan keeps those without HTTP up to a number, ConnectionLedger).
    connection_count: int = 0
    max_connection_id: int = 0


_TLS_HANDSHAKE = re.compile(rb"\x16\x03[\x00-\x04]")  # TLS record: handshake, version 3.x
_H2_PREFACE = H2_PREFACE  # RFC 9113 §3.4


def foreign_protocol(first_client_bytes: bytes) -> str | None:
    """Say what a connection is when its first client bytes show it is not plaintext
    HTTP/1.1: ``"TLS"`` or ``"HTTP/2"`` (prior knowledge). The exact path reads both
    (:class:`_ConnectionAnalyzer`); the fast path hands such connections to it."""
    if _TLS_HANDSHAKE.match(first_client_bytes):
        return "TLS"
    if first_client_bytes.startswith(_H2_PREFACE[:16]):
        return "HTTP/2"
    return None


class _ConnectionAnalyzer:
    """HTTP and SSE state of one TCP connection."""

    __slots__ = (
        "app",
        "body_frames",
        "coded",
        "connection",
        "errors",
        "evicted",
        "exchanges",
        "h2",
        "held",
        "http",
        "inconsistent",
        "keys",
        "limits",
        "not_http",
        "parsers",
        "sniffed",
        "spill",
        "streams",
        "tls",
        "tls_first",
        "tls_problem",
        "upgrade",
    )

    def __init__(
        self,
        connection: Connection,
        errors: list[ReadError],
        keys: TLSKeys | None = None,
        limits: Limits = DEFAULT_LIMITS,
        streams: StreamTable | None = None,
        spill: EventSpill | None = None,
    ) -> None:
        self.connection = connection
        self.spill = spill  # hands a long stream's events on as rows (None: keep them)
        self.keys = keys
        self.limits = limits
        self.tls: TLSSession | None = None
        self.h2: H2Connection | None = None
        self.app: str | None = "http/1.1"  # the application protocol; None: not known yet
        self.held: list[tuple[Direction, Pieces | MissingSpan]] = []  # until it is known
        self.tls_first: Origin | None = None  # the ClientHello's frame
        self.tls_problem: Origin | None = None  # the first record that could not be read
        self.upgrade: int | None = None  # the exchange answered 101 to Upgrade: h2c
        self.http = HTTPConnection(limits)
        self.exchanges: dict[int, Exchange] = {}
        self.parsers: dict[int, SSEParser] = {}
        self.errors = errors
        self.sniffed = False  # the first client bytes were checked for TLS / HTTP/2
        self.not_http = False  # they were: the connection is skipped, said once in errors
        # Event streams whose content-coding a hole cut: the bytes after it are still
        # compressed, so they are not parsed as text (they would give noise, not events).
        self.coded: set[int] = set()
        # Recent frames of the server's response bodies: (exchange, body offset, bytes), and
        # of the client's requests: exchange (inconsistent retransmissions are placed there).
        self.body_frames: dict[Origin, tuple[int, int, int]] = {}
        self.inconsistent = 0  # inconsistent retransmissions reported so far
        # The scan's open event streams (the ``streams`` cap), and this connection's streams
        # it evicted: the rest of their bodies is counted, not parsed nor kept.
        self.streams = streams
        self.evicted: set[int] = set()

    def _exchange(self, index: int) -> Exchange:
        ex = self.exchanges.get(index)
        if ex is None:
            ex = self.exchanges[index] = Exchange(connection_id=self.connection.id, index=index)
        return ex

    def data(self, direction: Direction, piece: StreamData | MissingSpan | Inconsistency) -> None:
        if isinstance(piece, Inconsistency):
            self._inconsistency(piece)
            return
        if self.not_http:
            return
        if isinstance(piece, StreamData):
            if not self.sniffed and direction == "client" and piece.offset == 0:
                self.sniffed = True
                what = foreign_protocol(piece.data)
                if what == "TLS":
                    keys = self.keys if self.keys is not None else TLSKeys()
                    self.tls = TLSSession(keys.lookup, keys.why_none)
                    self.connection.tls = self.tls.info
                    self.tls_first = piece.origin
                    self.app = None  # ALPN or the first decrypted bytes will say
                elif what == "HTTP/2":
                    self._start_h2()
            if self.tls is not None:
                self._tls(self.tls.feed(direction, piece.data, piece.origin))
            elif self.h2 is not None:
                self._handle(self.h2.feed(direction, [(piece.data, piece.origin)]))
            else:
                self._handle(self.http.feed(direction, piece.data, piece.origin))
        elif self.tls is not None:
            self._tls(self.tls.missing(piece))
        elif self.h2 is not None:
            self._handle(self.h2.missing(piece))
        else:
            self._handle(self.http.missing(piece))

    def end(self, direction: Direction, origin: Origin | None, reason: str) -> None:
        if self.tls is not None and direction == "client":
            self._tls(self.tls.end())
        if self.app is None:
            self._choose_app("http/1.1")
        if self.h2 is not None:
            self._handle(self.h2.end(direction, origin, reason))
        else:
            self._handle(self.http.end(direction, origin, reason))

    # -- TLS and HTTP/2 --------------------------------------------------------------------

    def _start_h2(self) -> None:
        self.h2 = H2Connection(limits=self.limits)
        self.app = "h2"
        self.connection.application = "h2"

    def _tls(self, events: list[TLSEvent]) -> None:
        for ev in events:
            if isinstance(ev, TLSData):
                self._app(ev.direction, ev.pieces)
            elif isinstance(ev, TLSGap):
                self._app(ev.direction, ev.span)
            elif isinstance(ev, TLSProblem) and self.tls_problem is None:
                self.tls_problem = ev.origin

    def _app(self, direction: Direction, piece: Pieces | MissingSpan) -> None:
        """Decrypted bytes (or a span of them missing) to the application protocol: the
        ALPN choice, else HTTP/2 when the client's first bytes are its preface."""
        if self.app is None:
            assert self.tls is not None
            alpn = self.tls.info.alpn
            if alpn in ("h2", "http/1.1"):
                self._choose_app(alpn)
            elif direction == "client" and not isinstance(piece, MissingSpan):
                first = b"".join(p for p, _ in piece)
                self._choose_app("h2" if first.startswith(_H2_PREFACE[:16]) else "http/1.1")
            else:
                last = self.held[-1] if self.held else None
                if not (
                    isinstance(piece, MissingSpan)
                    and last
                    and last[0] == direction
                    and isinstance(last[1], MissingSpan)
                ):
                    self.held.append((direction, piece))  # consecutive gaps: one is enough
                return
        if isinstance(piece, MissingSpan):
            if self.h2 is not None:
                self._handle(self.h2.missing(piece))
            else:
                self._handle(self.http.missing(piece))
        elif self.h2 is not None:
            self._handle(self.h2.feed(direction, piece))
        else:
            for data, origin in piece:
                self._handle(self.http.feed(direction, data, origin))

    def _choose_app(self, app: str) -> None:
        if app == "h2":
            self._start_h2()
        else:
            self.app = app
            self.connection.application = app
        held, self.held = self.held, []
        for direction, piece in held:
            self._app(direction, piece)

    def tls_report(self) -> None:
        """One line per TLS connection whose records could not all be decrypted."""
        tls = self.tls
        if tls is None:
            return
        info = tls.info
        conn = self.connection
        where = f"connection {conn.id} ({conn.client[0]} -> {conn.server[0]}:{conn.server[1]})"
        if not info.key_found:
            reason = info.reasons[0] if info.reasons else tls._no_key_reason()
            what = f"{where} is TLS-encrypted and was not decrypted: {reason}"
            origin = self.tls_first
        elif info.undecryptable_bytes:
            counts = info.counts.values()
            records = sum(c.undecryptable_records for c in counts)
            what = (
                f"{where} TLS: {info.undecryptable_bytes} bytes ({records} records) could "
                f"not be decrypted: {'; '.join(info.reasons)}"
            )
            origin = self.tls_problem or self.tls_first
        else:
            return
        self.errors.append(
            ReadError(
                origin.source if origin else conn.first.source,
                what,
                frame=origin.number if origin else None,
                ts=origin.ts if origin else None,
            )
        )

    def finalise(self) -> None:
        """TCP finalised the connection (closed, evicted, or the capture ended): each
        direction ends as TCP ended it, then streams still open are closed. An evicted
        connection's open event streams end in a ``cap`` span: what came after is not
        judged on them (issue 16, the ``flows`` cap)."""
        conn = self.connection
        if conn.evicted is not None:
            for index, parser in self.parsers.items():
                span = MissingSpan("server", parser.offset, None, "cap", conn.evicted, None)
                self._exchange(index).holes.append(BodyHole(parser.offset, span))
        for direction in ("client", "server"):
            fin = conn.fin.get(direction)
            if fin is not None:
                self.end(direction, fin, "fin")
            elif conn.rst is not None:
                self.end(direction, conn.rst, "rst")
            elif conn.evicted is not None:
                self.end(direction, conn.last, "evicted")
            else:
                self.end(direction, conn.last, "capture-end")
        self.finish()

    def finish(self) -> None:
        """End of capture: streams still open are closed as incomplete."""
        for index, parser in list(self.parsers.items()):
            self._close_parser(self._exchange(index), parser)
        self.tls_report()

    def _drain(self, ex: Exchange, parser: SSEParser) -> None:
        ex.comments.extend(parser.take_comments())
        if parser.has_partial_blocks:
            ex.partials.extend(parser.take_partial_blocks())
        for anomaly in parser.take_anomalies():
            if anomaly.kind == "event-over-cap":
                self._event_capped(ex, anomaly)
                continue
            if anomaly.kind not in REPORTED_SSE_ANOMALIES:
                continue
            origin = anomaly.origin
            self.errors.append(
                ReadError(
                    source=origin.source if origin else self.connection.first.source,
                    what=f"SSE: {REPORTED_SSE_ANOMALIES[anomaly.kind]} "
                    f"(connection {self.connection.id}, body offset {anomaly.start})",
                    frame=origin.number if origin else None,
                    ts=origin.ts if origin else None,
                )
            )

    def _close_parser(self, ex: Exchange, parser: SSEParser) -> None:
        ex.events.extend(parser.close())
        self._drain(ex, parser)
        ex.trailing = parser.trailing
        del self.parsers[ex.index]
        if self.streams is not None:
            self.streams.close(self, ex.index)

    def evict_stream(self, index: int, origin: Origin | None) -> None:
        """The ``streams`` cap ended this event stream where it stands (:mod:`.stream_table`):
        a ``cap`` span from its parser's offset on, so a gap reaching past it is
        indeterminate; its parser is released."""
        parser = self.parsers.get(index)
        if parser is None:
            return
        ex = self._exchange(index)
        span = MissingSpan("server", parser.offset, None, "cap", origin, None)
        ex.holes.append(BodyHole(parser.offset, span))
        ex.events.extend(parser.skip(None))
        self._close_parser(ex, parser)
        self.evicted.add(index)

    def _note_body(self, origin: Origin | None, exchange: int, offset: int, size: int) -> None:
        if origin is None:
            return
        frames = self.body_frames
        known = frames.get(origin)
        if known is not None and known[0] == exchange:
            offset = known[1]
            size += known[2]
        elif len(frames) >= BODY_FRAMES_KEPT:
            del frames[next(iter(frames))]
        frames[origin] = (exchange, offset, size)

    def _inconsistency(self, piece: Inconsistency) -> None:
        """A retransmission differs from the first copy (issue 16): reported once per
        retransmission (the first :data:`~.flows.MAX_INCONSISTENCIES_KEPT` of a
        connection), and a ``inconsistent`` hole put where its bytes fell, so any gap whose
        stretch it touches is ``indeterminate``."""
        conn = self.connection
        self.inconsistent += 1
        span = MissingSpan(
            piece.direction, piece.offset, piece.length, "inconsistent", piece.first, piece.second
        )
        hole = self._inconsistent_hole(piece, span)
        if self.inconsistent > MAX_INCONSISTENCIES_KEPT:
            return
        (c_ip, c_port), (s_ip, s_port) = conn.client, conn.server
        where = f"connection {conn.id} ({c_ip}:{c_port} -> {s_ip}:{s_port})"
        touched = (
            f"; it falls in exchange {hole[0]}, whose gaps it touches are indeterminate"
            if hole is not None
            else ""
        )
        self.errors.append(
            ReadError(
                piece.second.source,
                f"TCP: inconsistent retransmission on {where}: {piece.describe()}; the first "
                f"copy was read, the receiver may have kept the other{touched}",
                frame=piece.second.number,
                ts=piece.second.ts,
            )
        )

    def _inconsistent_hole(
        self, piece: Inconsistency, span: MissingSpan
    ) -> tuple[int, BodyHole] | None:
        """Where the disputed bytes fell: the response body whose bytes the first copy's
        frame carried (from there on, over the frame's body bytes and the stretch), or the
        exchange being read (from its start: a head or framing was disputed)."""
        found = self.body_frames.get(piece.first)
        if found is not None:
            index, offset, size = found
            hole = BodyHole(offset, span, size + piece.length)
        else:
            if not self.exchanges:
                return None
            index = max(self.exchanges)
            ex = self.exchanges[index]
            parser = self.parsers.get(index)
            reached = parser.offset if parser is not None else ex.body_bytes
            hole = BodyHole(0, span, reached + piece.length)
        self._exchange(index).holes.append(hole)
        return index, hole

    def _event_capped(self, ex: Exchange, anomaly: SSEAnomaly) -> None:
        """An event longer than the ``event_bytes`` cap was not read: a ``cap`` span where
        it starts (a gap across it is indeterminate), and the cap reported."""
        origin = anomaly.origin
        span = MissingSpan("server", anomaly.start, None, "cap", origin, None)
        ex.holes.append(BodyHole(anomaly.start, span))
        conn = self.connection
        self.errors.append(
            CapHit.of(
                "event_bytes",
                self.limits,
                origin.source if origin else conn.first.source,
                f"an SSE event of more than {anomaly.end - anomaly.start} bytes at body offset "
                f"{anomaly.start} (connection {conn.id})",
                "the event was not read: a gap across it is indeterminate",
                frame=origin.number if origin else None,
                ts=origin.ts if origin else None,
            )
        )

    def _capped(self, ev: ProtocolError) -> None:
        """A cap stopped the decoding of a response body (issue 16): the rest of it is
        one span of unknown length that the capture cannot show (reason ``cap``), so a gap
        whose stretch reaches it is ``indeterminate``; the cap is reported."""
        origin = ev.origin
        consequence = "the rest of that body was not decoded"
        if ev.exchange is not None:
            ex = self._exchange(ev.exchange)
            parser = self.parsers.get(ev.exchange)
            offset = parser.offset if parser is not None else ex.body_bytes
            span = MissingSpan(ev.direction, offset, None, "cap", origin, None)
            ex.holes.append(BodyHole(body_offset=offset, span=span))
            if parser is not None:
                self.coded.add(ev.exchange)
                ex.events.extend(parser.skip(None))
                self._drain(ex, parser)
                consequence += ": the rest of the event stream is indeterminate"
        conn = self.connection
        self.errors.append(
            CapHit.of(
                ev.cap or "",
                self.limits,
                origin.source if origin else conn.first.source,
                f"{ev.what.removeprefix(CODING_CAPPED + ': ')} (connection {conn.id})",
                consequence,
                frame=origin.number if origin else None,
                ts=origin.ts if origin else None,
            )
        )

    def _upgrade_h2(self) -> None:
        """RFC 7540 §3.2: after ``101`` to ``Upgrade: h2c`` the connection is HTTP/2; the
        upgraded request is stream 1, whose response follows as HTTP/2. The 101 is that
        exchange's interim response."""
        exchange, self.upgrade = self.upgrade, None
        assert exchange is not None
        request = self._exchange(exchange).request
        settings = header(request.headers, "http2-settings") if request is not None else None
        self.h2 = H2Connection(
            exchange + 1, upgraded=exchange, settings=settings, limits=self.limits
        )
        self.app = "h2"
        self.connection.application = "h2"
        for direction in ("client", "server"):  # bytes held or fed after the switch
            pieces = self.http.take_tunnel_bytes(direction)
            if pieces:
                self._handle(self.h2.feed(direction, pieces))

    def _handle(self, events: list[HTTPEvent]) -> None:
        self._handle_events(events)
        if self.upgrade is not None and self.h2 is None:
            self._upgrade_h2()

    def _handle_events(self, events: list[HTTPEvent]) -> None:
        for ev in events:
            if isinstance(ev, ResponseBody):
                ex = self._exchange(ev.exchange)
                if ev.exchange in self.evicted:  # the streams cap ended its parsing
                    ex.body_bytes += len(ev.data)
                    ex.last_body_origin = ev.origin
                    continue
                parser = self.parsers.get(ev.exchange)
                at = parser.offset if parser is not None else ex.body_bytes
                self._note_body(ev.origin, ev.exchange, at, len(ev.data))
                ex.body_bytes += len(ev.data)
                ex.last_body_origin = ev.origin
                if parser is not None and ev.exchange in self.coded:
                    continue
                if parser is not None:
                    if self.streams is not None:
                        self.streams.touch(self, ev.exchange)
                    ex.events.extend(parser.feed(ev.data, ev.origin))
                    self._drain(ex, parser)
                    if self.spill is not None and len(ex.events) >= SPILL_EVENTS:
                        self.spill(ex)
                else:
                    ex.keep_response_body(ev.data)
            elif isinstance(ev, RequestHead):
                self._exchange(ev.exchange).request = ev
                self._note_body(ev.origin, ev.exchange, 0, 0)
            elif isinstance(ev, RequestBody):
                self._exchange(ev.exchange).keep_request_body(ev.data)
            elif isinstance(ev, RequestEnd):
                self._exchange(ev.exchange).request_complete = ev.complete
            elif isinstance(ev, ResponseHead):
                ex = self._exchange(ev.exchange)
                if ev.interim:
                    ex.interim.append(ev)
                else:
                    ex.response = ev
                    if ex.is_event_stream:
                        self.parsers[ev.exchange] = SSEParser(
                            report_empty=True, max_event_bytes=self.limits.event_bytes
                        )
                        if self.streams is not None:
                            self.streams.open(self, ev.exchange, ev.origin)
            elif isinstance(ev, Tunnel):
                ex = self._exchange(ev.exchange)
                if ev.protocol.strip().lower() == "h2c" and self.h2 is None:
                    self.upgrade = ev.exchange
                    if ex.response is not None:
                        ex.interim.append(ex.response)
                        ex.response = None
            elif isinstance(ev, ResponseEnd):
                if ev.exchange == self.upgrade and ev.reason == "tunnel":
                    continue  # the response is the HTTP/2 one on stream 1
                ex = self._exchange(ev.exchange)
                ex.response_complete = ev.complete
                ex.response_end_reason = ev.reason
                ex.response_end = ev.origin
                parser = self.parsers.get(ev.exchange)
                if parser is not None:
                    self._close_parser(ex, parser)
            elif isinstance(ev, BodyGap):
                if ev.direction != "server":
                    continue
                ex = self._exchange(ev.exchange)
                parser = self.parsers.get(ev.exchange)
                offset = parser.offset if parser is not None else ex.body_bytes
                ex.holes.append(BodyHole(body_offset=offset, span=ev.span))
                if parser is not None:
                    ex.events.extend(parser.skip(ev.span.length))
            elif isinstance(ev, ProtocolError) and ev.cap is not None:
                self._capped(ev)
            elif isinstance(ev, ProtocolError):
                key = ev.exchange
                parser = self.parsers.get(key) if key is not None else None
                if (
                    key is not None
                    and parser is not None
                    and ev.direction == "server"
                    and ev.what.startswith(CODING_CUT)
                ):
                    # What follows cannot be read: the rest of the stream is one hole of
                    # unknown decoded length (the BodyGap counted coded bytes).
                    self.coded.add(key)
                    ex = self._exchange(key)
                    ex.events.extend(parser.skip(None))
                    self._drain(ex, parser)
                origin = ev.origin
                self.errors.append(
                    ReadError(
                        source=origin.source if origin else "",
                        what=f"HTTP {ev.direction}: {ev.what}",
                        frame=origin.number if origin else None,
                        ts=origin.ts if origin else None,
                    )
                )


def flows_capped(tracker: ConnectionTracker, limits: Limits) -> CapHit:
    """The ``flows`` cap fired: how often, where first, and what it cost."""
    first = tracker.first_eviction
    return CapHit.of(
        "flows",
        limits,
        first.source if first is not None else "",
        f"{tracker.evicted} open connection(s) evicted from the flow table, the one idle "
        "the longest first",
        "each ended where it stood (its streams are not judged past that point); later "
        "packets of it start a new connection, read mid-stream",
        frame=first.number if first is not None else None,
        ts=first.ts if first is not None else None,
    )


def _capture_loss(
    connections: list[Connection],
    stats: Mapping[str, CaptureStats],
    counted: CaptureLoss | None = None,
) -> CaptureLoss:
    """Loss totals: ``counted`` (connections already summed) or the ``connections``, plus
    what the files say they dropped."""
    loss = CaptureLoss()
    if counted is not None:
        loss.merge(counted)
    else:
        for conn in connections:
            loss.add_connection(conn.loss)
            loss.evicted_connections += conn.evicted is not None
    for path, st in stats.items():
        if_drops, os_drops = sum(st.interface_drops.values()), sum(st.os_drops.values())
        loss.interface_drops += if_drops
        loss.os_drops += os_drops
        loss.per_file_drops[path] = if_drops + os_drops
    return loss


ConnectionSink = Callable[[Connection, list[Exchange]], None]
"""Receives each connection's exchanges when TCP finalises it (instead of keeping them)."""


def reassemble(
    items: Iterable[Frame | ReadError],
    capture_stats: Mapping[str, CaptureStats] | None = None,
    sink: ConnectionSink | None = None,
    tls_keys: TLSKeys | None = None,
    limits: Limits = DEFAULT_LIMITS,
) -> Reassembly:
    """Reassemble every TCP connection in ``items`` (frames in capture order) into HTTP
    exchanges and SSE events.

    With ``sink``, each connection's exchanges go to it when the connection is finalised and
    are not kept in the result (``exchanges`` stays empty): memory then follows the
    connections still open, not the capture.

    ``capture_stats`` (default: ``items.stats`` when ``items`` comes from
    :func:`~sse_forensics.ingest.inputs.merged_frames`) is read after the last frame, when
    the readers have filled it in. A connection's HTTP/SSE state is finished and released as
    soon as TCP finalises it (see :class:`ConnectionTracker`), not only at the end.

    ``tls_keys``: the secrets to decrypt TLS with (default: only the pcapng Decryption
    Secrets Blocks of the inputs, as the readers meet them). ``limits``: the caps
    (:mod:`sse_forensics.limits`) on what one connection may cost.
    """
    if capture_stats is None:
        capture_stats = getattr(items, "stats", None) or {}
    if tls_keys is None:
        tls_keys = TLSKeys(stats=capture_stats)
    result = Reassembly()
    tracker = ConnectionTracker(max_flows=limits.flows)
    streams = StreamTable(limits.streams)
    analyzers: dict[int, _ConnectionAnalyzer] = {}
    errors = result.errors
    last_ts: float | None = None

    def route(
        pieces: list[tuple[Connection, Direction, StreamData | MissingSpan | Inconsistency]],
    ) -> None:
        for conn, direction, piece in pieces:
            analyzer = analyzers.get(conn.id)
            if analyzer is None:
                analyzer = analyzers[conn.id] = _ConnectionAnalyzer(
                    conn, errors, tls_keys, limits, streams
                )
            analyzer.data(direction, piece)

    def finalise(conn: Connection) -> None:
        analyzer = analyzers.pop(conn.id, None)
        if analyzer is None:
            return
        analyzer.finalise()
        if sink is not None:
            sink(conn, list(analyzer.exchanges.values()))
        else:
            result.exchanges.extend(analyzer.exchanges.values())

    frames = 0
    segments = 0
    feed = tracker.feed
    for item in items:
        if isinstance(item, ReadError):
            errors.append(item)
            continue
        frames += 1
        last_ts = item.origin.ts
        seg = decode_tcp(item)
        if seg is None:
            continue
        if isinstance(seg, ReadError):
            errors.append(seg)
            continue
        segments += 1
        pieces = feed(seg)
        if pieces:
            route(pieces)
        if tracker._finished:
            for conn in tracker.take_finished():
                finalise(conn)
    route(tracker.close(last_ts))
    for conn in tracker.take_finished():
        finalise(conn)
    if tracker.evicted:
        errors.append(flows_capped(tracker, limits))
    if streams.evicted:
        errors.append(streams_capped(streams, limits))

    result.frames = frames
    result.tcp_segments = segments
    # Connections finalise in the order they close; the output keeps connection order.
    result.exchanges.sort(key=lambda ex: (ex.connection_id, ex.index))
    result.connections = list(tracker.connections)
    result.connection_count = tracker.count
    result.max_connection_id = tracker.count
    result.capture_stats = dict(capture_stats)
    result.loss = _capture_loss(result.connections, result.capture_stats)
    return result
