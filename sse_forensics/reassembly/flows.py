"""TCP connection tracking: which segments belong together, who is the client, and the
two reassembled byte streams of each connection.

The client is, in order of evidence: the sender of a SYN without ACK; the receiver of a
SYN+ACK (RFC 9293 §3.5); the side whose first payload starts with an HTTP method token,
or whose peer's first payload starts with ``HTTP/`` (RFC 9112 §3, §4); else the side with
the higher (ephemeral) port. Until one of these is known, a new flow's segments are held
(at most :data:`UNDECIDED_LIMIT` of them) so no byte is assigned to the wrong side.

The flow table is bounded (``max_flows``, the ``flows`` cap of :mod:`sse_forensics.limits`,
like Zeek's and Suricata's memcaps): when a new 4-tuple would exceed it, the flow idle the
longest is evicted — finalised as it stands if still open (``Connection.evicted``), simply
forgotten if already finished — and a later segment of it starts a new, mid-stream flow.
"""

from __future__ import annotations

import base64
import hashlib
import socket
import struct
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from sse_forensics.ingest.packets import TCP_ACK, TCP_FIN, TCP_RST, TCP_SYN, TCPSegment
from sse_forensics.provenance import Origin
from sse_forensics.reassembly.loss import CaptureLoss, DirectionLoss
from sse_forensics.reassembly.stream import Direction, Inconsistency, MissingSpan, StreamData
from sse_forensics.reassembly.tcp import TCPStreamReassembler
from sse_forensics.reassembly.tcp_analysis import (
    Stall,
    TCPAnalyzer,
    TCPNote,
    TCPState,
    WindowPeriod,
)

if TYPE_CHECKING:
    from sse_forensics.reassembly.tls.session import TLSInfo

Endpoint = tuple[str, int]
Piece = StreamData | MissingSpan | Inconsistency
Output = list[tuple["Connection", Direction, Piece]]

# RFC 9110 §9.3 methods, with the space that ends the token in a request line.
HTTP_METHOD_PREFIXES = (
    b"GET ",
    b"POST ",
    b"HEAD ",
    b"PUT ",
    b"DELETE ",
    b"OPTIONS ",
    b"PATCH ",
    b"CONNECT ",
    b"TRACE ",
)
HTTP_RESPONSE_PREFIX = b"HTTP/"
# Payload-bearing segments to wait for an HTTP hint before falling back to port numbers.
UNDECIDED_LIMIT = 32
MAX_INCONSISTENCIES_KEPT = 20
"""Inconsistent retransmissions kept per connection with their detail (all are counted)."""
PLAIN_CONNECTIONS_KEPT = 10_000
"""Connections without an HTTP exchange kept as objects in a scan's result (issue 16: a
million SYNs must not cost a million objects); the others are counted, their loss summed."""

_COMMUNITY_ID_SEED = struct.pack("!H", 0)  # Community ID v1, seed 0
_IPPROTO_TCP_PAD = struct.pack("!BB", 6, 0)


def _packed(address: str) -> bytes:
    return socket.inet_pton(socket.AF_INET6 if ":" in address else socket.AF_INET, address)


def community_id(client: Endpoint, server: Endpoint) -> str:
    """Community ID v1 of a TCP flow, seed 0 (https://github.com/corelight/community-id-spec):
    base64 of SHA-1 over seed, the two addresses and ports in order (the lower endpoint
    first), protocol and a pad byte. Written out because the reference library validates
    each value at a cost a million connections feel; a test holds it to the library."""
    a, b = (_packed(client[0]), client[1]), (_packed(server[0]), server[1])
    if b < a:
        a, b = b, a
    digest = hashlib.sha1(
        _COMMUNITY_ID_SEED + a[0] + b[0] + _IPPROTO_TCP_PAD + struct.pack("!HH", a[1], b[1]),
        usedforsecurity=False,
    ).digest()
    return "1:" + base64.b64encode(digest).decode()


@dataclass(eq=False, slots=True)
class Connection:
    id: int  # 1-based, order of first frame
    client: Endpoint
    server: Endpoint
    community_id: str
    first: Origin
    last: Origin
    handshake_seen: bool = False  # SYN from the client seen
    mid_stream: bool = False  # picked up without SYN
    fin: dict[Direction, Origin] = field(default_factory=dict)
    rst: Origin | None = None
    rst_by: Direction | None = None
    missing: list[MissingSpan] = field(default_factory=list)
    # Retransmissions or overlaps that differ from the first copy (the first
    # MAX_INCONSISTENCIES_KEPT; ``loss[direction].inconsistent`` counts them all).
    inconsistencies: list[Inconsistency] = field(default_factory=list)
    packets: int = 0
    tcp: TCPState = field(default_factory=TCPState)
    loss: dict[Direction, DirectionLoss] = field(
        default_factory=lambda: {"client": DirectionLoss(), "server": DirectionLoss()}
    )
    # What runs over TCP: "http/1.1" or "h2" (after ALPN, or HTTP/2 prior knowledge); and for
    # a TLS connection its TLSInfo (version, suite, SNI, ALPN, what was not decrypted).
    application: str = "http/1.1"
    tls: TLSInfo | None = None
    # Finalised early because the flow table was full (the ``flows`` cap): the segment that
    # needed the room. Its streams end there as far as this connection goes.
    evicted: Origin | None = None

    @property
    def finished(self) -> bool:
        """Closed on the wire (FIN both ways, or RST): a new SYN starts a new connection."""
        return self.rst is not None or len(self.fin) == 2

    @property
    def window_scale(self) -> dict[Direction, int | None]:
        """Shift applied to the windows each side advertises; None when the handshake
        was not captured (see :mod:`.tcp_analysis`)."""
        return self.tcp.window_scale

    @property
    def windows(self) -> list[WindowPeriod]:
        """Zero-window and window-full periods, in order of their start."""
        return self.tcp.windows

    @property
    def tcp_notes(self) -> list[TCPNote]:
        return self.tcp.tcp_notes

    @property
    def stalls(self) -> list[Stall]:
        return self.tcp.stalls


class _Flow:
    """Tracker state of one connection (or of a 4-tuple whose roles are still unknown)."""

    __slots__ = ("analyzer", "conn", "done", "key", "pending", "streams")

    def __init__(self, key: tuple[str, int, str, int]) -> None:
        self.key = key
        self.conn: Connection | None = None
        self.pending: list[TCPSegment] = []
        self.streams: dict[Endpoint, tuple[Direction, TCPStreamReassembler]] = {}
        self.analyzer = TCPAnalyzer()
        self.done = False  # finalised: reassemblers flushed and released


def _client_hint(seg: TCPSegment) -> Endpoint | None:
    """The client endpoint if this segment alone tells it, else None."""
    src, dst = (seg.src, seg.sport), (seg.dst, seg.dport)
    flags = seg.flags
    if flags & TCP_SYN:
        return dst if flags & TCP_ACK else src
    payload = seg.payload
    if payload:
        if payload.startswith(HTTP_METHOD_PREFIXES):
            return src
        if payload.startswith(HTTP_RESPONSE_PREFIX):
            return dst
    return None


class ConnectionTracker:
    """Feed decoded segments in capture order; get ``(connection, direction, piece)``.

    A connection is finalised as soon as it is closed on the wire (FIN both ways with every
    byte before them delivered, or an RST) and nothing is held out of order: its
    reassemblers are flushed and released, and it is listed by :meth:`take_finished` so the
    caller can finish its HTTP/SSE state too. Later segments of the same 4-tuple
    (retransmissions, the last ACK) are counted and ignored, unless a new SYN reuses it.
    """

    def __init__(
        self, max_buffered: int = 8 << 20, max_flows: int | None = None, keep: bool = True
    ) -> None:
        self.max_buffered = max_buffered
        self.max_flows = max_flows
        self.keep = keep
        self._flows: dict[tuple[str, int, str, int], _Flow] = {}
        # Every flow of the table, the one idle the longest first (moved to the end on each
        # of its segments; an OrderedDict, whose front stays O(1) after many removals).
        self._idle: OrderedDict[_Flow, None] = OrderedDict()
        self._connections: list[Connection] = []
        self._decided: list[Connection] = []
        self._count = 0
        self._finished: list[Connection] = []
        self.evicted = 0  # open connections evicted (flows cap)
        self.first_eviction: Origin | None = None

    @property
    def connections(self) -> list[Connection]:
        """Every connection decided so far (only with ``keep``; else see
        :meth:`take_decided`)."""
        return self._connections

    @property
    def count(self) -> int:
        """Connections decided so far."""
        return self._count

    @property
    def tracked(self) -> int:
        """Flows in the table now (open, undecided, or finished but not yet forgotten)."""
        return len(self._idle)

    def take_decided(self) -> list[Connection]:
        """Connections decided since the last call, in order."""
        out, self._decided = self._decided, []
        return out

    def take_finished(self) -> list[Connection]:
        """Connections finalised since the last call (their last pieces were returned)."""
        out, self._finished = self._finished, []
        return out

    def feed(self, seg: TCPSegment) -> Output:
        key = (seg.src, seg.sport, seg.dst, seg.dport)
        flow = self._flows.get(key)
        out: Output = []
        if flow is None:
            flow = self._new_flow(seg, out)
        elif (
            seg.flags & (TCP_SYN | TCP_ACK) == TCP_SYN
            and flow.conn is not None
            and (flow.conn.finished or self._new_isn(flow, seg))
        ):
            # Port reuse: a fresh SYN on a 4-tuple whose connection ended, or whose end the
            # capture missed (another ISN: RFC 9293 §3.4, not a retransmitted SYN).
            self._finish(flow, out, seg.origin.ts)
            self._forget(flow)
            flow = self._new_flow(seg, out)
        else:
            self._idle.move_to_end(flow)  # the most recently active now
        conn = flow.conn
        if conn is not None:
            if flow.done:
                # Retransmissions, the last ACK, a late RST: TCP notes only.
                conn.packets += 1
                conn.last = seg.origin
                src = (seg.src, seg.sport)
                direction: Direction = "client" if src == conn.client else "server"
                flow.analyzer.segment(direction, seg)
                if seg.flags & TCP_RST and conn.rst is None:
                    conn.rst, conn.rst_by = seg.origin, direction
                return out
            self._process(flow, seg, out)
            if conn.finished and self._settled(flow):
                self._finish(flow, out, seg.origin.ts)
            return out
        flow.pending.append(seg)
        client = _client_hint(seg)
        if client is None:
            with_payload = sum(1 for s in flow.pending if s.payload)
            if with_payload < UNDECIDED_LIMIT and not seg.flags & (TCP_FIN | TCP_RST):
                return out
            client = self._client_by_port(seg)
        self._decide(flow, client, out)
        return out

    def close(self, end_ts: float | None = None) -> Output:
        """End of capture (its last frame at ``end_ts``): decide pending flows, flush every
        reassembler."""
        out: Output = []
        seen: set[int] = set()
        for flow in self._flows.values():
            if id(flow) in seen:
                continue
            seen.add(id(flow))
            if flow.conn is None and flow.pending:
                self._decide(flow, self._client_by_port(flow.pending[0]), out)
            self._finish(flow, out, end_ts)
        self._flows.clear()
        self._idle.clear()
        return out

    # -- internals ------------------------------------------------------------------------

    def _new_flow(self, seg: TCPSegment, out: Output) -> _Flow:
        if self.max_flows is not None:
            while len(self._idle) >= self.max_flows:
                oldest, _ = self._idle.popitem(last=False)
                self._evict(oldest, seg.origin, out)
        key = (seg.src, seg.sport, seg.dst, seg.dport)
        flow = _Flow(key)
        self._flows[key] = flow
        self._flows[(seg.dst, seg.dport, seg.src, seg.sport)] = flow
        self._idle[flow] = None
        return flow

    def _forget(self, flow: _Flow) -> None:
        src, sport, dst, dport = flow.key
        for key in (flow.key, (dst, dport, src, sport)):
            if self._flows.get(key) is flow:
                del self._flows[key]
        self._idle.pop(flow, None)

    def _evict(self, flow: _Flow, origin: Origin, out: Output) -> None:
        """Make room in the flow table: the flow idle the longest goes. A finished one is
        only forgotten; an open one is finalised as it stands (its held bytes released,
        its holes reported), marked ``evicted``."""
        self._forget(flow)
        if flow.done:
            return
        if flow.conn is None and flow.pending:
            self._decide(flow, self._client_by_port(flow.pending[0]), out)
        if flow.conn is None:
            return
        flow.conn.evicted = origin
        self.evicted += 1
        if self.first_eviction is None:
            self.first_eviction = origin
        self._finish(flow, out, origin.ts)

    @staticmethod
    def _settled(flow: _Flow) -> bool:
        """No later segment can add to the streams: after an RST nothing held out of order
        (RFC 9293 §3.10.7.4: data after it does not count), after FINs both ways every byte
        before them delivered."""
        streams = [stream for _direction, stream in flow.streams.values()]
        if flow.conn is not None and flow.conn.rst is not None:
            return not any(stream.buffered for stream in streams)
        return all(stream.fin_delivered for stream in streams)

    @staticmethod
    def _new_isn(flow: _Flow, seg: TCPSegment) -> bool:
        """A SYN whose sequence number is not the ISN its sender's SYN already gave."""
        entry = flow.streams.get((seg.src, seg.sport))
        isn = entry[1].isn if entry is not None else None
        return isn is not None and isn != seg.seq

    @staticmethod
    def _client_by_port(seg: TCPSegment) -> Endpoint:
        # Ephemeral ports are the high ones (RFC 6056); on a tie keep the first sender.
        if seg.dport > seg.sport:
            return (seg.dst, seg.dport)
        return (seg.src, seg.sport)

    def _decide(self, flow: _Flow, client: Endpoint, out: Output) -> None:
        first = flow.pending[0]
        if client == (first.src, first.sport):
            server = (first.dst, first.dport)
        else:
            server = (first.src, first.sport)
        self._count += 1
        conn = Connection(
            id=self._count,
            client=client,
            server=server,
            community_id=community_id(client, server),
            first=first.origin,
            last=first.origin,
            mid_stream=not first.flags & TCP_SYN,
            tcp=flow.analyzer.state,
        )
        if self.keep:
            self._connections.append(conn)
        else:
            self._decided.append(conn)
        flow.conn = conn
        flow.streams = {
            client: ("client", TCPStreamReassembler("client", self.max_buffered)),
            server: ("server", TCPStreamReassembler("server", self.max_buffered)),
        }
        pending, flow.pending = flow.pending, []
        for seg in pending:
            self._process(flow, seg, out)

    def _process(self, flow: _Flow, seg: TCPSegment, out: Output) -> None:
        conn = flow.conn
        assert conn is not None
        origin = seg.origin
        conn.packets += 1
        conn.last = origin
        direction, stream = flow.streams[(seg.src, seg.sport)]
        flags = seg.flags
        rst = bool(flags & TCP_RST)
        if rst and not stream.rst_acceptable(seg.seq):
            # Far outside the sender's sequence space: the peer ignored it (RFC 9293
            # §3.10.7.4), so the connection and the stream it carries go on.
            return
        flow.analyzer.segment(direction, seg)
        syn = bool(flags & TCP_SYN)
        if syn and direction == "client" and not flags & TCP_ACK:
            conn.handshake_seen = True
        fin = bool(flags & TCP_FIN)
        if fin and direction not in conn.fin:
            conn.fin[direction] = origin
        if rst and conn.rst is None:
            conn.rst = origin
            conn.rst_by = direction
        pieces = stream.segment(
            seg.seq,
            seg.payload,
            origin,
            syn=syn,
            fin=fin,
            rst=rst,
            missing_tail=seg.missing_tail,
        )
        if pieces:
            self._collect(conn, direction, pieces, out)
        if flags & TCP_ACK and not rst:
            peer_direction: Direction = "server" if direction == "client" else "client"
            peer = flow.streams[(seg.dst, seg.dport)][1]
            pieces = peer.acknowledged(seg.ack, origin)
            if pieces:
                self._collect(conn, peer_direction, pieces, out)

    @staticmethod
    def _collect(conn: Connection, direction: Direction, pieces: list[Piece], out: Output) -> None:
        loss = conn.loss[direction]
        for piece in pieces:
            if isinstance(piece, StreamData):
                loss.bytes_seen += len(piece.data)
            elif isinstance(piece, MissingSpan):
                conn.missing.append(piece)
                loss.count(piece)
            else:
                loss.inconsistent += 1
                loss.inconsistent_bytes += piece.length
                if len(conn.inconsistencies) < MAX_INCONSISTENCIES_KEPT:
                    conn.inconsistencies.append(piece)
            out.append((conn, direction, piece))

    def _finish(self, flow: _Flow, out: Output, end_ts: float | None) -> None:
        conn = flow.conn
        if conn is None or flow.done:
            return
        flow.done = True
        for direction, stream in flow.streams.values():
            pieces = stream.close()
            if pieces:
                self._collect(conn, direction, pieces, out)
        flow.streams = {}
        flow.analyzer.close(conn.last.ts if end_ts is None else end_ts)
        self._finished.append(conn)


@dataclass
class ConnectionLedger:
    """A capture's finalised connections as a scan keeps them: every one counted and its
    loss summed (:class:`CaptureLoss`), but kept as an object only when it carried an HTTP
    exchange (its rows are evidence anyway) or is among the first
    :data:`PLAIN_CONNECTIONS_KEPT` others — so memory follows the evidence, not the number
    of connections."""

    count: int = 0
    max_id: int = 0
    kept: list[Connection] = field(default_factory=list)
    plain_kept: int = 0
    loss: CaptureLoss = field(default_factory=CaptureLoss)

    def add(self, conn: Connection, http: bool) -> None:
        self.count += 1
        self.max_id = max(self.max_id, conn.id)
        self.loss.add_connection(conn.loss)
        self.loss.evicted_connections += conn.evicted is not None
        if http or self.plain_kept < PLAIN_CONNECTIONS_KEPT:
            self.kept.append(conn)
            self.plain_kept += not http

    def merge(self, other: ConnectionLedger) -> None:
        """Add the connections of another shard."""
        self.count += other.count
        self.max_id = max(self.max_id, other.max_id)
        self.kept.extend(other.kept)
        self.plain_kept += other.plain_kept
        self.loss.merge(other.loss)
