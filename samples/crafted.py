"""Crafted captures for what a loopback recording cannot produce.

Each sample is an MCP streamable-HTTP conversation (``POST /mcp`` ``tools/call`` answered by a
chunked ``text/event-stream``, or a ``GET /mcp`` resume) built segment by segment with explicit
TCP sequence numbers, so that reordering, retransmission, capture loss, snap-length truncation,
sequence wraparound, odd link layers and hostile bytes happen exactly where intended.

IP and TCP headers come from scapy (checksums); link-layer headers and the pcap / pcapng
containers are packed by hand so every byte is under control. Nothing depends on the clock, the
host or randomness: every run writes byte-identical files, so tests may rely on frame numbers.

``sse-forensics scan samples/`` merges a directory into one capture (mergecap semantics), so each
sample is a separate incident: its own hour after ``BASE_EPOCH_NS``, its own ``Mcp-Session-Id``
and its own client port (see ``Incident``); merged, no connection or session collides.

Run: ``python samples/crafted.py [--out DIR]``; ``main(out_dir)`` returns the written paths.
"""

import argparse
import hashlib
import json
import struct
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from email.utils import formatdate
from pathlib import Path
from typing import Self

from scapy.layers.inet import IP, TCP
from scapy.layers.inet6 import IPv6
from scapy.packet import Raw

# --- capture containers ---------------------------------------------------------------------

# tcpdump.org link-layer header types.
LINKTYPE_NULL = 0
LINKTYPE_ETHERNET = 1
LINKTYPE_LINUX_SLL2 = 276

BASE_EPOCH_NS = 1_767_225_600 * 1_000_000_000  # 2026-01-01T00:00:00Z
HOUR_NS = 3_600 * 1_000_000_000  # each sample's slot; the longest sample lasts about 2 s
TICK_NS = 1_000_000  # default spacing between records: 1 ms
DEFAULT_SNAPLEN = 262_144  # tcpdump's default

PCAP_MAGIC_USEC = 0xA1B2C3D4  # libpcap file format, microsecond timestamps
PCAPNG_SHB = 0x0A0D0D0A
PCAPNG_IDB = 0x00000001
PCAPNG_EPB = 0x00000006
PCAPNG_BYTE_ORDER_MAGIC = 0x1A2B3C4D
OPT_ENDOFOPT = 0
OPT_SHB_USERAPPL = 4
OPT_IF_NAME = 2
OPT_IF_TSRESOL = 9


@dataclass(slots=True)
class Record:
    """One captured packet: ``wire`` is what was on the wire; ``snaplen`` cuts it when written."""

    ts_ns: int
    wire: bytes


@dataclass
class Capture:
    """The records of one capture file, in capture order, with a deterministic clock."""

    linktype: int
    now_ns: int  # the clock; the first record is one step after it
    snaplen: int = DEFAULT_SNAPLEN
    records: list[Record] = field(default_factory=list)

    def add(self, wire: bytes, *, captured: bool = True, dt_ns: int = TICK_NS) -> None:
        """Advance the clock and record ``wire`` (the clock moves even for uncaptured packets)."""
        self.now_ns += dt_ns
        if captured:
            self.records.append(Record(self.now_ns, wire))

    def pause(self, dt_ns: int) -> None:
        self.now_ns += dt_ns


def _pad4(data: bytes) -> bytes:
    return data + b"\0" * (-len(data) % 4)


def write_pcap(path: Path, capture: Capture) -> None:
    """libpcap format, little-endian, microsecond timestamps, snap length applied per record."""
    out = [struct.pack("<IHHiIII", PCAP_MAGIC_USEC, 2, 4, 0, 0, capture.snaplen, capture.linktype)]
    for record in capture.records:
        seconds, nanos = divmod(record.ts_ns, 1_000_000_000)
        data = record.wire[: capture.snaplen]
        out.append(struct.pack("<IIII", seconds, nanos // 1000, len(data), len(record.wire)))
        out.append(data)
    path.write_bytes(b"".join(out))


def _pcapng_option(code: int, value: bytes) -> bytes:
    return struct.pack("<HH", code, len(value)) + _pad4(value)


def _pcapng_block(block_type: int, body: bytes) -> bytes:
    length = 12 + len(body)
    return struct.pack("<II", block_type, length) + body + struct.pack("<I", length)


def write_pcapng(path: Path, capture: Capture, *, if_name: bytes) -> None:
    """pcapng, little-endian, one interface with ``if_tsresol`` = 9 (nanosecond timestamps)."""
    end = _pcapng_option(OPT_ENDOFOPT, b"")
    shb = struct.pack("<IHHq", PCAPNG_BYTE_ORDER_MAGIC, 1, 0, -1)
    shb += _pcapng_option(OPT_SHB_USERAPPL, b"sse-forensics samples/crafted.py") + end
    idb = struct.pack("<HHI", capture.linktype, 0, capture.snaplen)
    idb += _pcapng_option(OPT_IF_NAME, if_name) + _pcapng_option(OPT_IF_TSRESOL, b"\x09") + end
    out = [_pcapng_block(PCAPNG_SHB, shb), _pcapng_block(PCAPNG_IDB, idb)]
    for record in capture.records:
        data = record.wire[: capture.snaplen]
        ts_high, ts_low = divmod(record.ts_ns, 1 << 32)
        epb = struct.pack("<IIIII", 0, ts_high, ts_low, len(data), len(record.wire))
        out.append(_pcapng_block(PCAPNG_EPB, epb + _pad4(data)))
    path.write_bytes(b"".join(out))


# --- link layers ----------------------------------------------------------------------------

ETHERTYPE_IPV4 = 0x0800
ETHERTYPE_IPV6 = 0x86DD
ETHERTYPE_VLAN = 0x8100  # IEEE 802.1Q
AF_INET_BSD = 2  # DLT_NULL carries the BSD address family in the capturing host's byte order
ARPHRD_ETHER = 1
PACKET_HOST = 0  # SLL2 packet type: addressed to the capturing host
PACKET_OUTGOING = 4  # SLL2 packet type: sent by the capturing host


def _mac(text: str) -> bytes:
    return bytes.fromhex(text.replace(":", ""))


@dataclass(frozen=True, slots=True)
class Endpoint:
    mac: str
    ip: str
    port: int


LinkWrap = Callable[[bytes, bool, int], bytes]
"""(ip packet, sent by the client?, ethertype) -> link-layer frame."""


def ethernet(client: Endpoint, server: Endpoint, vlan: int | None = None) -> LinkWrap:
    def wrap(packet: bytes, from_client: bool, ethertype: int) -> bytes:
        src, dst = (client, server) if from_client else (server, client)
        tag = b"" if vlan is None else struct.pack("!HH", ETHERTYPE_VLAN, vlan & 0x0FFF)
        return _mac(dst.mac) + _mac(src.mac) + tag + struct.pack("!H", ethertype) + packet

    return wrap


def null_loopback(packet: bytes, from_client: bool, ethertype: int) -> bytes:
    # Written by a little-endian host, so the family is little-endian (as in the pcapng SHB).
    return struct.pack("<I", AF_INET_BSD) + packet


def linux_cooked_v2(client: Endpoint, server: Endpoint, ifindex: int) -> LinkWrap:
    """SLL2 header as captured on the server's ``any`` device: the client's packets come in."""

    def wrap(packet: bytes, from_client: bool, ethertype: int) -> bytes:
        sender = client if from_client else server
        pkttype = PACKET_HOST if from_client else PACKET_OUTGOING
        header = struct.pack("!HHIHBB", ethertype, 0, ifindex, ARPHRD_ETHER, pkttype, 6)
        return header + _mac(sender.mac) + b"\0\0" + packet

    return wrap


# --- TCP ------------------------------------------------------------------------------------

CLIENT, SERVER = "client", "server"
SEQ_MOD = 1 << 32
SYN_OPTIONS = [("MSS", 1460), ("SAckOK", b""), ("WScale", 7)]
WINDOW = 502  # scaled by 2**7 (WScale above)


class TcpConnection:
    """Builds the segments of one TCP connection; ``nxt`` is each side's next sequence number.

    Sequence numbers are absolute and wrap modulo 2**32 (RFC 9293 §3.4). ``send`` without an
    explicit ``seq`` sends new data and advances ``nxt``; with ``seq`` it (re)sends old data.
    The default acknowledgment is everything the other side has sent.
    """

    def __init__(
        self,
        capture: Capture,
        wrap: LinkWrap,
        client: Endpoint,
        server: Endpoint,
        *,
        client_isn: int,
        server_isn: int,
        ipv6: bool = False,
    ) -> None:
        self.capture, self.wrap = capture, wrap
        self.ends = {CLIENT: client, SERVER: server}
        self.isn = {CLIENT: client_isn, SERVER: server_isn}
        self.nxt = {CLIENT: client_isn, SERVER: server_isn}
        self.ip_id = {CLIENT: 0x3A10, SERVER: 0x7C40}
        self.ipv6 = ipv6

    def wire(
        self, side: str, flags: str, payload: bytes, seq: int, ack: int | None, options: list
    ) -> bytes:
        src = self.ends[side]
        dst = self.ends[SERVER if side == CLIENT else CLIENT]
        tcp = TCP(
            sport=src.port,
            dport=dst.port,
            seq=seq % SEQ_MOD,
            ack=0 if ack is None else ack % SEQ_MOD,
            flags=flags,
            window=65535 if "S" in flags else WINDOW,
            options=options,
        )
        if self.ipv6:
            packet = IPv6(src=src.ip, dst=dst.ip, hlim=64, fl=0) / tcp
            ethertype = ETHERTYPE_IPV6
        else:
            self.ip_id[side] += 1
            packet = IP(src=src.ip, dst=dst.ip, id=self.ip_id[side], flags="DF", ttl=64) / tcp
            ethertype = ETHERTYPE_IPV4
        if payload:
            packet = packet / Raw(payload)
        return self.wrap(bytes(packet), side == CLIENT, ethertype)

    def send(
        self,
        side: str,
        flags: str = "PA",
        payload: bytes = b"",
        *,
        seq: int | None = None,
        ack: int | None = None,
        captured: bool = True,
        dt_ns: int = TICK_NS,
    ) -> int:
        """Send one segment and record it (unless ``captured`` is False); return its seq."""
        other = SERVER if side == CLIENT else CLIENT
        if seq is None:
            seq = self.nxt[side]
            self.nxt[side] += len(payload) + ("S" in flags) + ("F" in flags)
        if ack is None and "A" in flags:
            ack = self.nxt[other]
        options = SYN_OPTIONS if "S" in flags else []
        self.capture.add(
            self.wire(side, flags, payload, seq, ack, options), captured=captured, dt_ns=dt_ns
        )
        return seq

    def handshake(self) -> None:
        self.send(CLIENT, "S")
        self.send(SERVER, "SA", dt_ns=40_000)
        self.send(CLIENT, "A", dt_ns=40_000)

    def send_data(self, side: str, payload: bytes, *, mss: int = 1448) -> None:
        """Send ``payload`` as consecutive segments of at most ``mss`` bytes, each ACKed."""
        other = SERVER if side == CLIENT else CLIENT
        for start in range(0, len(payload), mss):
            self.send(side, "PA", payload[start : start + mss])
            self.send(other, "A", dt_ns=30_000)

    def close(self) -> None:
        """The client closes first (RFC 9293 §3.6), then the server."""
        self.send(CLIENT, "FA")
        self.send(SERVER, "FA", dt_ns=50_000)
        self.send(CLIENT, "A", dt_ns=30_000)


class Receiver:
    """What a receiver has of the peer's stream: ``ack`` is the cumulative acknowledgment."""

    def __init__(self, start: int) -> None:
        self.ack = start
        self.pending: list[tuple[int, int]] = []

    def receive(self, seq: int, length: int) -> int:
        self.pending.append((seq, seq + length))
        self.pending.sort()
        for begin, end in list(self.pending):
            if begin > self.ack:
                break
            self.ack = max(self.ack, end)
            self.pending.remove((begin, end))
        return self.ack


# --- HTTP and SSE ---------------------------------------------------------------------------

HOST = b"api.example.test:8000"
CALL = (
    b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"index_repository",'
    b'"arguments":{"path":"/srv/repo"},"_meta":{"progressToken":1}}}'
)
LAST_CHUNK = b"0\r\n\r\n"


def headers(lines: Iterable[tuple[bytes, bytes]]) -> bytes:
    return b"".join(name + b": " + value + b"\r\n" for name, value in lines)


def tools_call_request(
    session: bytes,
    target: bytes = b"/mcp",
    host: bytes = HOST,
    extra: Iterable = (),
    call: bytes = CALL,
) -> bytes:
    fields = [
        (b"Host", host),
        (b"User-Agent", b"python-httpx/0.28.1"),
        (b"Accept", b"application/json, text/event-stream"),
        (b"Content-Type", b"application/json"),
        (b"Mcp-Session-Id", session),
        (b"MCP-Protocol-Version", b"2025-11-25"),
        *extra,
        (b"Content-Length", str(len(call)).encode()),
    ]
    return b"POST " + target + b" HTTP/1.1\r\n" + headers(fields) + b"\r\n" + call


def resume_request(last_event_id: bytes, session: bytes) -> bytes:
    fields = [
        (b"Host", HOST),
        (b"User-Agent", b"python-httpx/0.28.1"),
        (b"Accept", b"text/event-stream"),
        (b"Mcp-Session-Id", session),
        (b"MCP-Protocol-Version", b"2025-11-25"),
        (b"Last-Event-ID", last_event_id),
    ]
    return b"GET /mcp HTTP/1.1\r\n" + headers(fields) + b"\r\n"


def http_date(ts_ns: int) -> bytes:
    """IMF-fixdate (RFC 9110 §5.6.7); always 29 bytes, so frame sizes do not depend on it."""
    return formatdate(ts_ns // 1_000_000_000, usegmt=True).encode()


def sse_response_head(
    session: bytes, date: bytes, extra: Iterable[tuple[bytes, bytes]] = ()
) -> bytes:
    fields = [
        (b"date", date),
        (b"server", b"uvicorn"),
        (b"cache-control", b"no-cache, no-transform"),
        (b"connection", b"keep-alive"),
        (b"content-type", b"text/event-stream"),
        (b"mcp-session-id", session),
        *extra,
        (b"x-accel-buffering", b"no"),
        (b"Transfer-Encoding", b"chunked"),
    ]
    return b"HTTP/1.1 200 OK\r\n" + headers(fields) + b"\r\n"


def progress(n: int, total: int, message: bytes = b"") -> bytes:
    extra = b',"message":"' + message + b'"' if message else b""
    return (
        b'{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,'
        b'"progress":%d,"total":%d%s}}' % (n, total, extra)
    )


def result(text: bytes) -> bytes:
    return (
        b'{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"'
        + text
        + b'"}],"isError":false}}'
    )


def sse_event(event_id: bytes | None, data: bytes, event: bytes | None = b"message") -> bytes:
    """One event (WHATWG HTML §9.2.6): ``id``, ``event`` and one ``data`` line, blank line."""
    lines = b"" if event_id is None else b"id: " + event_id + b"\n"
    lines += b"" if event is None else b"event: " + event + b"\n"
    return lines + b"data: " + data + b"\n\n"


def chunk(data: bytes) -> bytes:
    """RFC 9112 §7.1: chunk-size in hex, CRLF, chunk-data, CRLF."""
    return b"%x\r\n" % len(data) + data + b"\r\n"


def call_events(ids: Iterable[int], total: int, prefix: bytes = b"") -> list[bytes]:
    """Progress events for ``ids``; the last ID carries the tools/call result instead."""
    ids = list(ids)
    events = [sse_event(prefix + b"%d" % n, progress(n, total)) for n in ids[:-1]]
    events.append(sse_event(prefix + b"%d" % ids[-1], result(b"indexed %d files" % total)))
    return events


# --- scenarios ------------------------------------------------------------------------------

CLIENT_PORT_BASE = 50_000
PORTS_PER_SAMPLE = 10  # a sample's consecutive connections use client_port, client_port + 1, ...


@dataclass(frozen=True, slots=True)
class Incident:
    """What keeps one sample apart from the others when a directory is merged into one capture.

    Separate incidents do not share a clock, an MCP session or a TCP 4-tuple: sample ``index``
    starts ``index`` hours after ``BASE_EPOCH_NS``, its ``Mcp-Session-Id`` is derived from its
    name and its first client port is ``CLIENT_PORT_BASE + index * PORTS_PER_SAMPLE``.
    """

    start_ns: int
    session: bytes
    client_port: int

    @classmethod
    def of(cls, index: int, name: str) -> Self:
        return cls(
            start_ns=BASE_EPOCH_NS + index * HOUR_NS,
            session=hashlib.sha256(name.encode()).hexdigest()[:32].encode(),
            client_port=CLIENT_PORT_BASE + index * PORTS_PER_SAMPLE,
        )

    def capture(self, linktype: int, **kwargs) -> Capture:
        return Capture(linktype, self.start_ns, **kwargs)

    def client(self, template: Endpoint, connection: int = 0) -> Endpoint:
        """``template`` (MAC and address) with this incident's port for its ``connection``-th."""
        assert connection < PORTS_PER_SAMPLE
        return replace(template, port=self.client_port + connection)

    def response_head(self, extra: Iterable[tuple[bytes, bytes]] = ()) -> bytes:
        return sse_response_head(self.session, http_date(self.start_ns), extra)


# Client ports are placeholders: Incident.client() gives each sample its own.
CLIENT_V4 = Endpoint("02:42:0a:00:00:0b", "10.0.0.11", 0)
SERVER_V4 = Endpoint("02:42:0a:00:00:02", "10.0.0.2", 8000)
CLIENT_V6 = Endpoint("02:42:0a:00:00:0b", "2001:db8:120::11", 0)
SERVER_V6 = Endpoint("02:42:0a:00:00:02", "2001:db8:120::2", 8000)
CLIENT_LO = Endpoint("00:00:00:00:00:00", "127.0.0.1", 0)
SERVER_LO = Endpoint("00:00:00:00:00:00", "127.0.0.1", 8000)
CLIENT_ISN = 0x1C2D3E4F
SERVER_ISN = 0x8A9B0C1D


def _ethernet_connection(capture: Capture, incident: Incident, **kwargs) -> TcpConnection:
    client = incident.client(CLIENT_V4)
    return TcpConnection(
        capture,
        ethernet(client, SERVER_V4),
        client,
        SERVER_V4,
        client_isn=kwargs.pop("client_isn", CLIENT_ISN),
        server_isn=kwargs.pop("server_isn", SERVER_ISN),
        **kwargs,
    )


def _open_call(conn: TcpConnection, incident: Incident, **head) -> None:
    """Handshake, ``POST /mcp`` tools/call, and the 200 event-stream response head."""
    conn.handshake()
    conn.send_data(CLIENT, tools_call_request(incident.session))
    conn.send_data(SERVER, incident.response_head(**head))


def _stream_chunks(conn: TcpConnection, chunks: Iterable[bytes]) -> None:
    """One segment per chunk, 50 ms apart, each ACKed by the client."""
    for body in chunks:
        conn.send(SERVER, "PA", body, dt_ns=50 * TICK_NS)
        conn.send(CLIENT, "A", dt_ns=40_000)


def reorder_retransmit(incident: Incident) -> Capture:
    """20 events cut at irregular offsets, delivered out of order, with retransmissions."""
    capture = incident.capture(LINKTYPE_ETHERNET)
    conn = _ethernet_connection(capture, incident)
    conn.handshake()
    conn.send_data(CLIENT, tools_call_request(incident.session))
    body = incident.response_head() + b"".join(chunk(e) for e in call_events(range(1, 21), 20))
    body += LAST_CHUNK
    # Irregular sizes so that events straddle segments; 40-byte pieces split one event in 3.
    sizes = [97, 45, 150, 60, 203, 38, 41, 120, 233, 70]
    start0 = conn.nxt[SERVER]
    segments: list[tuple[int, int]] = []  # (offset into body, length)
    offset = 0
    while offset < len(body):
        length = min(sizes[len(segments) % len(sizes)], len(body) - offset)
        segments.append((offset, length))
        offset += length
    conn.nxt[SERVER] = start0 + len(body)
    # The order the capture point saw them: swaps, a triple rotation, exact duplicates
    # (retransmissions after a spurious timeout), and one segment (17) lost upstream of the
    # capture point then covered by a repacketized retransmission overlapping segment 16.
    order: list[int | tuple[int, int]] = list(range(len(segments)))
    order[3], order[4] = order[4], order[3]
    order[9:12] = [11, 9, 10]
    order.insert(order.index(7) + 1, 6)  # duplicate of 6
    order.insert(order.index(15) + 1, 14)  # duplicate of 14
    order.remove(17)
    overlap_start = segments[16][0] + segments[16][1] // 2
    overlap = (overlap_start, segments[17][0] + segments[17][1] - overlap_start)
    order.insert(order.index(18) + 1, overlap)
    receiver = Receiver(start0)
    for item in order:
        off, length = segments[item] if isinstance(item, int) else item
        conn.send(SERVER, "PA", body[off : off + length], seq=start0 + off, dt_ns=3 * TICK_NS)
        conn.send(CLIENT, "A", ack=receiver.receive(start0 + off, length), dt_ns=40_000)
    conn.close()
    return capture


def capture_loss(incident: Incident) -> Capture:
    """Events 8 and 9 travel in one segment the capture missed; the client ACKs past it."""
    capture = incident.capture(LINKTYPE_ETHERNET)
    conn = _ethernet_connection(capture, incident)
    _open_call(conn, incident)
    events = [chunk(e) for e in call_events(range(1, 21), 20)]
    _stream_chunks(conn, events[:7])
    conn.send(SERVER, "PA", events[7] + events[8], captured=False, dt_ns=50 * TICK_NS)
    conn.send(CLIENT, "A", dt_ns=40_000)  # acknowledges the uncaptured segment: delivered
    _stream_chunks(conn, [*events[9:], LAST_CHUNK])
    conn.close()
    return capture


SNAPLEN_CUT = 200
SNAPLEN_MSS = SNAPLEN_CUT - 54  # Ethernet 14 + IPv4 20 + TCP 20: every other frame fits


def snaplen(incident: Incident) -> Capture:
    """Snap length 200: only the frame carrying event 8 (a long progress message) is cut."""
    capture = incident.capture(LINKTYPE_ETHERNET, snaplen=SNAPLEN_CUT)
    conn = _ethernet_connection(capture, incident)
    conn.handshake()
    conn.send_data(CLIENT, tools_call_request(incident.session), mss=SNAPLEN_MSS)
    conn.send_data(SERVER, incident.response_head(), mss=SNAPLEN_MSS)
    events = call_events(range(1, 21), 20)
    message = b"scanning /srv/repo/src: " + b"parser.py lexer.py grammar.py " * 6
    events[7] = sse_event(b"8", progress(8, 20, message.rstrip()))
    _stream_chunks(conn, [chunk(e) for e in events] + [LAST_CHUNK])
    conn.close()
    cut = [r for r in capture.records if len(r.wire) > SNAPLEN_CUT]
    assert len(cut) == 1 and b"id: 8\n" in cut[0].wire, "exactly the event-8 frame is cut"
    return capture


WRAP_ISN = 0xFFFFF000


def seq_wraparound(incident: Incident) -> Capture:
    """Server ISN 0xFFFFF000: 40 events push its sequence numbers past 2**32."""
    capture = incident.capture(LINKTYPE_ETHERNET)
    conn = _ethernet_connection(capture, incident, server_isn=WRAP_ISN)
    _open_call(conn, incident)
    _stream_chunks(conn, [chunk(e) for e in call_events(range(1, 41), 40)] + [LAST_CHUNK])
    conn.close()
    assert conn.nxt[SERVER] > SEQ_MOD, "the server's sequence space wrapped"
    return capture


def midstream_pickup(incident: Incident) -> Capture:
    """Recording starts inside event 5's chunk; handshake, request and head were before it."""
    capture = incident.capture(LINKTYPE_ETHERNET)
    conn = _ethernet_connection(capture, incident)
    before = incident.capture(LINKTYPE_ETHERNET)  # what happened before the capture started
    conn.capture = before
    _open_call(conn, incident)
    events = [chunk(e) for e in call_events(range(1, 21), 20)]
    _stream_chunks(conn, events[:4])
    conn.capture = capture
    capture.now_ns = before.now_ns
    # Event 5's chunk is split: its first 40 bytes went out before the capture started.
    conn.send(SERVER, "PA", events[4][:40], captured=False, dt_ns=50 * TICK_NS)
    conn.send(CLIENT, "A", captured=False, dt_ns=40_000)
    conn.send(SERVER, "PA", events[4][40:] + events[5], dt_ns=2 * TICK_NS)
    conn.send(CLIENT, "A", dt_ns=40_000)
    _stream_chunks(conn, [*events[6:], LAST_CHUNK])
    conn.close()
    return capture


def vlan_ipv6_live_jump(incident: Incident) -> Capture:
    """802.1Q VLAN 120, IPv6: the live stream sends 1–7 then 13–20 with no stream-gap."""
    capture = incident.capture(LINKTYPE_ETHERNET)
    client = incident.client(CLIENT_V6)
    conn = TcpConnection(
        capture,
        ethernet(client, SERVER_V6, vlan=120),
        client,
        SERVER_V6,
        client_isn=CLIENT_ISN,
        server_isn=SERVER_ISN,
        ipv6=True,
    )
    _open_call(conn, incident)
    ids = [*range(1, 8), *range(13, 21)]
    _stream_chunks(conn, [chunk(e) for e in call_events(ids, 20)] + [LAST_CHUNK])
    conn.close()
    return capture


def sll2_resume_jump(incident: Incident) -> Capture:
    """SLL2 on the server: stream 1–7, client hangs up; a resume from 7 is replayed from 13."""
    capture = incident.capture(LINKTYPE_LINUX_SLL2)
    client = incident.client(CLIENT_V4)
    conn = TcpConnection(
        capture,
        linux_cooked_v2(client, SERVER_V4, ifindex=2),
        client,
        SERVER_V4,
        client_isn=CLIENT_ISN,
        server_isn=SERVER_ISN,
    )
    _open_call(conn, incident)
    events = [chunk(e) for e in call_events(range(1, 21), 20)]
    _stream_chunks(conn, events[:7])
    conn.close()  # the client dropped the stream after event 7 (no last chunk)
    capture.pause(500 * TICK_NS)
    client2 = incident.client(CLIENT_V4, connection=1)
    resume = TcpConnection(
        capture,
        linux_cooked_v2(client2, SERVER_V4, ifindex=2),
        client2,
        SERVER_V4,
        client_isn=0x5E6F7081,
        server_isn=0x2B3C4D5E,
    )
    resume.handshake()
    resume.send_data(CLIENT, resume_request(b"7", incident.session))
    resume.send_data(SERVER, incident.response_head())
    _stream_chunks(resume, [*events[12:], LAST_CHUNK])
    resume.close()
    return capture


NS_STEP = 1_000_123  # not a whole number of microseconds: only ns resolution keeps it


def pcapng_ns_nullloop_prefixed(incident: Incident) -> Capture:
    """DLT_NULL loopback, prefixed IDs s1:N; a stream-gap event covers s1:8..s1:12."""
    capture = incident.capture(LINKTYPE_NULL)
    client = incident.client(CLIENT_LO)
    conn = TcpConnection(
        capture,
        null_loopback,
        client,
        SERVER_LO,
        client_isn=CLIENT_ISN,
        server_isn=SERVER_ISN,
    )
    conn.handshake()
    conn.send_data(CLIENT, tools_call_request(incident.session), mss=16344)
    conn.send_data(SERVER, incident.response_head(), mss=16344)
    events = call_events([*range(1, 8), *range(13, 21)], 20, prefix=b"s1:")
    gap = sse_event(None, b'{"first":"s1:8","last":"s1:12"}', event=b"stream-gap")
    events.insert(7, gap)
    for body in [*(chunk(e) for e in events), LAST_CHUNK]:
        conn.send(SERVER, "PA", body, dt_ns=NS_STEP)
        conn.send(CLIENT, "A", dt_ns=NS_STEP // 7)
    conn.close()
    return capture


HOSTILE_MARKUP = b"\x1b[31m[bold red]x[/]<script>alert(1)</script>\x1b[0m"
HOSTILE_SESSION = b"\x1b[31m[bold red]sess[/]<script>alert(1)</script>"
INVALID_UTF8 = b"\xff\xfe\xc3\x28\xed\xa0\x80"  # bad start bytes, bad continuation, surrogate


def hostile_bytes(incident: Incident) -> Capture:
    """Escapes, markup, script tags, NUL in an id and invalid UTF-8; live jump 4 -> 7."""
    incident = replace(incident, session=HOSTILE_SESSION)  # the session ID is itself hostile
    capture = incident.capture(LINKTYPE_ETHERNET)
    conn = _ethernet_connection(capture, incident)
    extra = [(b"x-debug", HOSTILE_MARKUP + b" " + INVALID_UTF8)]
    _open_call(conn, incident, extra=extra)
    # JSON forbids raw control characters in strings, so data events carry ESC as \u001b;
    # raw ESC, markup and invalid UTF-8 go where no JSON is parsed (comments, a text event).
    escaped = b"\\u001b[31m[bold red]x[/]<script>alert(1)</script>\\u001b[0m"
    events = [
        sse_event(b"1", progress(1, 8, escaped)),
        sse_event(b"2", progress(2, 8, INVALID_UTF8)),
        b": " + HOSTILE_MARKUP + b" " + INVALID_UTF8 + b"\n\n",
        sse_event(b"3", progress(3, 8, b"</pre></td><img src=x onerror=alert(1)>")),
        sse_event(b"4", progress(4, 8)),
        # WHATWG: an id containing NUL is ignored, so this (non-JSON-RPC) event keeps
        # last-event-ID 4; a parser that took "5" from it would hide half of the gap.
        sse_event(b"5\x00" + HOSTILE_MARKUP, HOSTILE_MARKUP + b" " + INVALID_UTF8, b"notice"),
        sse_event(b"7", progress(7, 8, escaped)),
        sse_event(b"8", result(escaped)),
    ]
    _stream_chunks(conn, [chunk(e) for e in events] + [LAST_CHUNK])
    conn.close()
    return capture


def garbage_chunk(incident: Incident) -> Capture:
    """Events 1–5, then a chunk-size line that is not hex; the server goes on with 6–12."""
    capture = incident.capture(LINKTYPE_ETHERNET)
    conn = _ethernet_connection(capture, incident)
    _open_call(conn, incident)
    events = [chunk(e) for e in call_events(range(1, 13), 12)]
    garbage = b"zz; not-a-chunk-size\r\nthis is not chunked framing\r\n"
    _stream_chunks(conn, [*events[:5], garbage, *events[5:], LAST_CHUNK])
    conn.close()
    return capture


ODD_ID = b"prime-7f3a"


def odd_id_live_jump(incident: Incident) -> Capture:
    """Integer IDs after a priming event whose ID is not one; 8–12 dropped, no stream-gap."""
    capture = incident.capture(LINKTYPE_ETHERNET)
    conn = _ethernet_connection(capture, incident)
    _open_call(conn, incident)
    # docs/profile.md, "Events that are not data": a priming event is an ID with empty data
    priming = sse_event(ODD_ID, b"", event=None)
    events = [priming, *call_events([*range(1, 8), *range(13, 21)], 20)]
    _stream_chunks(conn, [chunk(e) for e in events] + [LAST_CHUNK])
    conn.close()
    return capture


PROXY_V4 = Endpoint("02:42:0a:00:00:05", "10.0.0.5", 8080)  # the host the capture ran on
PROXY_HOST = b"mcp.example.test"
PROXY_HOP_NS = 200_000  # the proxy forwards each segment 0.2 ms after it arrives


def proxy_two_legs(incident: Incident) -> Capture:
    """Captured on a proxy host: the client's leg (client → proxy:8080, ``POST /api/mcp``)
    and the upstream leg (proxy → server:8000, ``POST /mcp``) carry the same session and
    the same stream; the server drops 8–12 without a stream-gap, the proxy relays the rest."""
    capture = incident.capture(LINKTYPE_ETHERNET)
    client, upstream = incident.client(CLIENT_V4), incident.client(PROXY_V4, connection=1)
    front = TcpConnection(
        capture,
        ethernet(client, PROXY_V4),
        client,
        PROXY_V4,
        client_isn=CLIENT_ISN,
        server_isn=SERVER_ISN,
    )
    back = TcpConnection(
        capture,
        ethernet(upstream, SERVER_V4),
        upstream,
        SERVER_V4,
        client_isn=0x3D4E5F60,
        server_isn=0x6A7B8C9D,
    )
    front.handshake()
    front.send_data(CLIENT, tools_call_request(incident.session, b"/api/mcp", PROXY_HOST))
    back.handshake()
    via = [(b"Via", b"1.1 mcp-proxy"), (b"X-Forwarded-For", CLIENT_V4.ip.encode())]
    back.send_data(CLIENT, tools_call_request(incident.session, b"/mcp", HOST, via))
    head = incident.response_head()
    back.send_data(SERVER, head)
    front.send_data(SERVER, head)
    events = [chunk(e) for e in call_events([*range(1, 8), *range(13, 21)], 20)]
    for body in [*events, LAST_CHUNK]:
        back.send(SERVER, "PA", body, dt_ns=50 * TICK_NS)
        back.send(CLIENT, "A", dt_ns=40_000)
        front.send(SERVER, "PA", body, dt_ns=PROXY_HOP_NS)
        front.send(CLIENT, "A", dt_ns=40_000)
    front.close()
    back.close()
    return capture


def replay_handoff(incident: Incident) -> Capture:
    """Stream 1–7, the client hangs up; its resume from 7 replays 8–10 at once from the store,
    then the live tail goes on at 12: 11 was produced while the stream passed from the replay
    to the live feed. The server evicted nothing (the replay began at the successor)."""
    capture = incident.capture(LINKTYPE_ETHERNET)
    conn = _ethernet_connection(capture, incident)
    _open_call(conn, incident)
    events = [chunk(e) for e in call_events(range(1, 21), 20)]
    _stream_chunks(conn, events[:7])
    conn.close()  # the client dropped the stream after event 7 (no last chunk)
    capture.pause(500 * TICK_NS)
    client2 = incident.client(CLIENT_V4, connection=1)
    resume = TcpConnection(
        capture,
        ethernet(client2, SERVER_V4),
        client2,
        SERVER_V4,
        client_isn=0x5E6F7081,
        server_isn=0x2B3C4D5E,
    )
    resume.handshake()
    resume.send_data(CLIENT, resume_request(b"7", incident.session))
    # The replay is written in one go with the head; the live tail follows as produced.
    resume.send_data(SERVER, incident.response_head() + b"".join(events[7:10]))
    _stream_chunks(resume, [*events[11:], LAST_CHUNK])
    resume.close()
    return capture


# --- the sample set -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Sample:
    name: str
    build: Callable[[Incident], Capture]
    description: str
    findings: list[dict]
    pcapng_if_name: bytes | None = None  # set: write pcapng with this interface name


def _gap(rule: str, classification: str, first: str | None, last: str | None) -> dict:
    return {"rule": rule, "classification": classification, "gap": {"first": first, "last": last}}


SECOND_CALL = (
    b'{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"search_repository",'
    b'"arguments":{"query":"TODO"},"_meta":{"progressToken":2}}}'
)


def inconsistent_retransmission(incident: Incident) -> Capture:
    """Events 8 and 9 travel in one segment captured twice with different bytes: the first
    copy (never ACKed, as when it expired before the client) holds keep-alive comments of the
    same size, the retransmission the events. A second connection of the session has an
    ordinary unsignalled jump 7 -> 13."""
    capture = incident.capture(LINKTYPE_ETHERNET)
    conn = _ethernet_connection(capture, incident)
    _open_call(conn, incident)
    raw = call_events(range(1, 21), 20)
    events = [chunk(e) for e in raw]
    _stream_chunks(conn, events[:7])
    real = events[7] + events[8]
    decoy = b"".join(chunk(b": keep-alive" + b" " * (len(e) - 14) + b"\n\n") for e in raw[7:9])
    assert len(decoy) == len(real), "the two copies cover the same sequence numbers"
    seq = conn.send(SERVER, "PA", decoy, dt_ns=50 * TICK_NS)
    conn.send(SERVER, "PA", real, seq=seq, dt_ns=200 * TICK_NS)  # the retransmission
    conn.send(CLIENT, "A", dt_ns=40_000)
    _stream_chunks(conn, [*events[9:], LAST_CHUNK])
    conn.close()
    capture.pause(500 * TICK_NS)
    client2 = incident.client(CLIENT_V4, connection=1)
    other = TcpConnection(
        capture,
        ethernet(client2, SERVER_V4),
        client2,
        SERVER_V4,
        client_isn=0x5E6F7081,
        server_isn=0x2B3C4D5E,
    )
    other.handshake()
    other.send_data(CLIENT, tools_call_request(incident.session, call=SECOND_CALL))
    other.send_data(SERVER, incident.response_head())
    ids = [*range(1, 8), *range(13, 21)]
    _stream_chunks(other, [chunk(e) for e in call_events(ids, 20)] + [LAST_CHUNK])
    other.close()
    return capture


SAMPLES = [
    Sample(
        "crafted-reorder-retransmit",
        reorder_retransmit,
        "A tools/call stream of 20 events (19 progress, then the result) cut at irregular "
        "offsets, captured out of order with duplicate retransmissions and one repacketized "
        "retransmission overlapping an earlier segment; reassembled, all 20 events are there.",
        [],
    ),
    Sample(
        "crafted-capture-loss",
        capture_loss,
        "The server sent events 1-20 one chunk per segment, but the segment with events 8 and 9 "
        "is missing from the capture while the client's ACK covers it: capture loss.",
        # Capture loss is no proof of server eviction: no resumable-while-evicting; the client
        # read on (its ACKs go past the hole), but whether it lost anything is unknowable.
        [
            _gap("missing-stream-gap", "indeterminate", "8", "9"),
            _gap("client-accepted-gap", "indeterminate", "8", "9"),
        ],
    ),
    Sample(
        "crafted-snaplen",
        snaplen,
        "Events 1-20 captured with snap length 200; only the frame carrying event 8 (a long "
        "progress message) was longer, so its tail is missing from the capture.",
        [
            _gap("missing-stream-gap", "indeterminate", "8", "8"),
            _gap("client-accepted-gap", "indeterminate", "8", "8"),
        ],
    ),
    Sample(
        "crafted-seq-wraparound",
        seq_wraparound,
        "A 40-event tools/call stream whose server ISN is 0xFFFFF000, so the server's sequence "
        "numbers wrap past 2**32 mid-stream; nothing is lost.",
        [],
    ),
    Sample(
        "crafted-midstream-pickup",
        midstream_pickup,
        "The capture starts in the middle of a chunked event-stream response (inside event 5's "
        "chunk): no handshake, request or response head; events 6-20 follow intact.",
        [],
    ),
    Sample(
        "crafted-vlan-ipv6-live-jump",
        vlan_ipv6_live_jump,
        "Ethernet with 802.1Q VLAN 120 and IPv6: the live stream sends events 1-7 then 13-20 "
        "with no stream-gap event.",
        # The response says Cache-Control: no-cache (not no-store); the client reads on.
        [
            _gap("missing-stream-gap", "silent_corruption", "8", "12"),
            _gap("resumable-while-evicting", "silent_corruption", "8", "12"),
            _gap("client-accepted-gap", "silent_corruption", "8", "12"),
        ],
    ),
    Sample(
        "crafted-sll2-resume-jump",
        sll2_resume_jump,
        "Linux cooked v2 on the server: the tools/call stream delivers 1-7 and the client hangs "
        "up; its resume (GET with Last-Event-ID: 7) is answered 200 replaying from 13.",
        [
            _gap("silent-resume-jump", "silent_corruption", "8", "12"),
            _gap("resume-in-gap-2xx", "silent_corruption", "8", "12"),
            _gap("client-accepted-gap", "silent_corruption", "8", "12"),  # it read 13-20
        ],
    ),
    Sample(
        "crafted-pcapng-ns-nullloop-prefixed",
        pcapng_ns_nullloop_prefixed,
        "pcapng with nanosecond timestamps on a BSD loopback (DLT_NULL) interface: prefixed IDs "
        "s1:1-s1:7, a stream-gap event for s1:8-s1:12, then s1:13-s1:20.",
        [_gap("stream-gap-signalled", "expected_gap", "s1:8", "s1:12")],
        pcapng_if_name=b"lo0",
    ),
    Sample(
        "crafted-hostile-bytes",
        hostile_bytes,
        "ANSI escapes, rich markup, script tags and invalid UTF-8 in the session ID, a header, "
        "comments and event data, and a NUL in an id line (ignored); the live stream jumps "
        "from 4 to 7 unsignalled.",
        [
            _gap("missing-stream-gap", "silent_corruption", "5", "6"),
            _gap("resumable-while-evicting", "silent_corruption", "5", "6"),
            _gap("client-accepted-gap", "silent_corruption", "5", "6"),
        ],
    ),
    Sample(
        "crafted-garbage-chunk",
        garbage_chunk,
        "A chunked event stream whose sixth chunk-size line is not hex: events 1-5 are "
        "readable, the rest of the body cannot be framed, so no jump is observable.",
        [],
    ),
    Sample(
        "crafted-odd-id-live-jump",
        odd_id_live_jump,
        "Integer IDs, but the stream's priming event is `id: prime-7f3a`; the live stream then "
        "sends 1-7 and 13-20 with no stream-gap. The one odd ID is an outlier of the stream's "
        "int scheme, not a reason to read every ID as opaque and miss the jump.",
        [
            _gap("missing-stream-gap", "silent_corruption", "8", "12"),
            _gap("resumable-while-evicting", "silent_corruption", "8", "12"),
            _gap("client-accepted-gap", "silent_corruption", "8", "12"),
            _gap("id-scheme-outlier", "contract_violation", None, None),  # lost nothing
        ],
    ),
    Sample(
        "crafted-proxy-two-legs",
        proxy_two_legs,
        "Captured on a proxy host: one tools/call stream seen on the client's leg (POST "
        "/api/mcp to the proxy) and on the upstream leg (POST /mcp to the server), same "
        "session; the server sends events 1-7 then 13-20 with no stream-gap and the proxy "
        "relays them. One lost range, one incident, both legs as evidence.",
        # Each leg is a stream of its own, so the gap rules fire once per leg; the session
        # rule once. The five findings are one incident (tests/engine/test_incidents.py).
        [
            _gap("missing-stream-gap", "silent_corruption", "8", "12"),
            _gap("missing-stream-gap", "silent_corruption", "8", "12"),
            _gap("client-accepted-gap", "silent_corruption", "8", "12"),
            _gap("client-accepted-gap", "silent_corruption", "8", "12"),
            _gap("resumable-while-evicting", "silent_corruption", "8", "12"),
        ],
    ),
    Sample(
        "crafted-replay-handoff",
        replay_handoff,
        "The tools/call stream delivers 1-7 and the client hangs up; its resume (GET with "
        "Last-Event-ID: 7) is answered 200 replaying 8-10 from the store, then the live tail "
        "continues at 12: event 11 fell between the replay and the live feed. The replay "
        "began at the successor, so the server evicted nothing: the cause is replay-handoff, "
        "and the session is not resumable-while-evicting.",
        [
            _gap("missing-stream-gap", "silent_corruption", "11", "11"),
            _gap("client-accepted-gap", "silent_corruption", "11", "11"),
        ],
    ),
    Sample(
        "crafted-inconsistent-retransmission",
        inconsistent_retransmission,
        "The segment carrying events 8 and 9 is captured twice with different bytes: first "
        "keep-alive comments of the same size (the copy a monitor keeps), then, retransmitted "
        "at the same sequence number, the events themselves (the copy the client ACKs). Which "
        "one the client kept cannot be known from the capture: the jump 7 -> 10 the first copy "
        "shows is indeterminate. Another tools/call of the session (a second connection) "
        "jumps 7 -> 13 with no stream-gap event: an ordinary silent gap.",
        # The first copy wins in reassembly, so 8-9 look dropped; the retransmission says
        # otherwise. Not resumable-while-evicting: an indeterminate gap proves no eviction.
        [
            _gap("missing-stream-gap", "indeterminate", "8", "9"),
            _gap("client-accepted-gap", "indeterminate", "8", "9"),
            _gap("missing-stream-gap", "silent_corruption", "8", "12"),
            _gap("resumable-while-evicting", "silent_corruption", "8", "12"),
            _gap("client-accepted-gap", "silent_corruption", "8", "12"),
        ],
    ),
]


def write_sample(sample: Sample, out_dir: Path, index: int) -> list[Path]:
    """Build ``sample`` as the ``index``-th incident and write its capture and expectations."""
    capture = sample.build(Incident.of(index, sample.name))
    if sample.pcapng_if_name is None:
        capture_path = out_dir / f"{sample.name}.pcap"
        write_pcap(capture_path, capture)
    else:
        capture_path = out_dir / f"{sample.name}.pcapng"
        write_pcapng(capture_path, capture, if_name=sample.pcapng_if_name)
    expected = {
        "description": sample.description,
        "made_by": "crafted (scapy)",
        "findings": sample.findings,
    }
    expected_path = out_dir / f"{sample.name}.expected.json"
    expected_path.write_text(json.dumps(expected, indent=2) + "\n", encoding="utf-8")
    return [capture_path, expected_path]


def main(out_dir: Path) -> list[Path]:
    """Write every crafted sample and its expected findings into ``out_dir``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    return [
        path
        for index, sample in enumerate(SAMPLES)
        for path in write_sample(sample, out_dir, index)
    ]


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent)
    for written in main(parser.parse_args().out):
        print(written)
