"""Write a large synthetic capture of MCP streamable-HTTP traffic, with known planted gaps.

The capture is a classic pcap (Ethernet / IPv4 / TCP), built with ``struct`` because scapy
needs minutes for 200k packets. It holds ``CONNECTIONS`` concurrent keep-alive HTTP/1.1
connections to port 8000, each of which:

- does the TCP handshake, ``initialize`` (the server sets ``Mcp-Session-Id``) and
  ``notifications/initialized`` (``202``);
- then repeats ``POST /mcp`` ``tools/call``, each answered by a ``200`` chunked
  ``text/event-stream`` carrying int-ID events (a per-stream counter starting at 1) with
  JSON-RPC progress notifications (150-400 bytes each) and a final JSON-RPC result;
- segments the server's bytes at a per-connection size that is not aligned to events, so
  events straddle TCP segments; the client ACKs every other server segment.

Some server ISNs sit just below 2^32 so sequence numbers wrap. ``NEVER_ENDING`` connections
are mid-stream when the capture ends. ``PLANTED_GAPS`` streams each skip ``GAP_WIDTH`` IDs
with no ``stream-gap`` event: a correct scan reports exactly those as silent corruption.

The ground truth (planted gaps, events and responses that made it into the capture) is
returned by :func:`write_capture` and written next to the pcap as ``<FILE>.truth.json``.
Output is byte-identical for a given ``--packets`` and ``--seed``.
"""

from __future__ import annotations

import argparse
import json
import random
import struct
import sys
import time
from collections import deque
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path

CONNECTIONS = 50
NEVER_ENDING = 5  # connections whose last stream is cut by the end of the capture
PLANTED_GAPS = 10  # streams that skip event IDs without signalling it
GAP_WIDTH = 3  # IDs skipped per planted gap
MIN_STREAMS = 3  # tools/call streams every other connection completes before closing
WRAPPING_CONNECTIONS = 8  # connections whose server ISN sits just below 2^32
SERVER_PORT = 8000
PROTOCOL_VERSION = "2025-06-18"
EVENT_BYTES = (150, 400)  # size of one SSE event on the wire (JSON-RPC progress notifications)
EVENTS_PER_STREAM = (15, 60)
SEGMENT_BYTES = (300, 1448)  # per-connection server segment size; 1448 = 1500 MTU - headers
START_TS = 1_760_000_000.0  # fixed, so the output is deterministic

LINKTYPE_ETHERNET = 1
ETHERTYPE_IPV4 = 0x0800
IPPROTO_TCP = 6
FIN, SYN, PSH, ACK = 0x01, 0x02, 0x08, 0x10
SEQ_MOD = 1 << 32

_ETH = struct.pack(
    "!6s6sH", b"\x02\x00\x00\x00\x00\x01", b"\x02\x00\x00\x00\x00\x02", ETHERTYPE_IPV4
)
_ETH_REVERSE = struct.pack(
    "!6s6sH", b"\x02\x00\x00\x00\x00\x02", b"\x02\x00\x00\x00\x00\x01", ETHERTYPE_IPV4
)
_PCAP_HEADER = struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, LINKTYPE_ETHERNET)
_RECORD = struct.Struct("<IIII")
_IP = struct.Struct("!BBHHHBBH4s4s")
_TCP = struct.Struct("!HHIIBBHHH")


def internet_checksum(data: bytes) -> int:
    """RFC 1071 one's-complement checksum. Since 2^16 ≡ 1 (mod 0xFFFF), the one's-complement
    sum of the 16-bit words equals the whole buffer read as one integer, mod 0xFFFF: one C-level
    bignum operation instead of a Python loop over words."""
    if len(data) % 2:
        data += b"\x00"
    folded = int.from_bytes(data, "big") % 0xFFFF
    # A zero remainder from non-zero data is the one's-complement sum 0xFFFF.
    return 0 if folded == 0 else (~folded) & 0xFFFF


@dataclass(slots=True)
class PlantedGap:
    session_id: str
    connection: int
    request_id: int
    first: str
    last: str


@dataclass(slots=True)
class Truth:
    """What a correct analyzer must find in the capture."""

    packets: int = 0
    bytes: int = 0
    connections: int = CONNECTIONS
    events: int = 0  # SSE events whose final byte is in the capture
    http_responses: int = 0  # responses complete in the capture
    streams_complete: int = 0
    streams_cut: int = 0
    planted_gaps: list[PlantedGap] = field(default_factory=list)


class Capture:
    """Shared state of one generation run: the pcap writer, the clock and the counters."""

    def __init__(self, out, rng: random.Random, target_packets: int) -> None:
        self.out = out
        self.rng = rng
        self.target = target_packets
        # Wind down early enough that the other connections can finish their streams.
        self.wind_down_at = target_packets - max(1000, target_packets // 100)
        self.truth = Truth()
        self.ts = START_TS
        self._buf: list[bytes] = []

    @property
    def winding_down(self) -> bool:
        return self.truth.packets >= self.wind_down_at

    def write(self, frame: bytes) -> None:
        self.ts += 0.000004  # packets of one action leave a few µs apart
        sec = int(self.ts)
        usec = round((self.ts - sec) * 1e6)
        if usec == 1_000_000:
            sec, usec = sec + 1, 0
        self._buf.append(_RECORD.pack(sec, usec, len(frame), len(frame)))
        self._buf.append(frame)
        self.truth.packets += 1
        self.truth.bytes += len(frame)
        if len(self._buf) >= 8192:
            self.flush()

    def flush(self) -> None:
        self.out.write(b"".join(self._buf))
        self._buf.clear()


class Connection:
    """One client↔server TCP connection and the MCP session it carries."""

    def __init__(self, cap: Capture, index: int, never_ending: bool, wraps: bool) -> None:
        rng = cap.rng
        self.cap = cap
        self.index = index
        self.never_ending = never_ending
        self.client_ip = bytes((10, 0, index // 250, index % 250 + 2))
        self.server_ip = bytes((10, 0, 255, 1))
        self.client_port = 40000 + index
        self.session_id = f"{rng.getrandbits(128):032x}"
        self.segment_bytes = rng.randint(*SEGMENT_BYTES)
        self.client_seq = rng.getrandbits(32)
        # A server ISN a few hundred KB below 2^32 wraps within the first streams.
        self.server_seq = SEQ_MOD - rng.randint(2_000, 200_000) if wraps else rng.getrandbits(32)
        self._pseudo_c2s = self.client_ip + self.server_ip
        self._pseudo_s2c = self.server_ip + self.client_ip
        self._ip_id = rng.getrandbits(16)
        self._unacked_segments = 0
        self._pending = b""  # server bytes written but not yet sent (a part-filled segment)
        # Absolute server-stream offsets at which an SSE event's last byte is sent.
        self._server_offset = 0
        self._sent_offset = 0
        self._event_ends: deque[int] = deque()
        self.gap_stream: int | None = None  # index of the tools/call stream that skips IDs

    # -- wire ---------------------------------------------------------------------------
    def _frame(self, from_client: bool, flags: int, payload: bytes = b"") -> bytes:
        if from_client:
            src, dst, sport, dport = self.client_ip, self.server_ip, self.client_port, SERVER_PORT
            seq, ack, pseudo, eth = self.client_seq, self.server_seq, self._pseudo_c2s, _ETH
        else:
            src, dst, sport, dport = self.server_ip, self.client_ip, SERVER_PORT, self.client_port
            seq, ack, pseudo, eth = self.server_seq, self.client_seq, self._pseudo_s2c, _ETH_REVERSE
        tcp_len = 20 + len(payload)
        tcp = _TCP.pack(sport, dport, seq, ack if flags & ACK else 0, 5 << 4, flags, 65535, 0, 0)
        check = internet_checksum(
            pseudo + struct.pack("!BBH", 0, IPPROTO_TCP, tcp_len) + tcp + payload
        )
        tcp = tcp[:16] + struct.pack("!H", check) + tcp[18:]
        self._ip_id = (self._ip_id + 1) & 0xFFFF
        ip = _IP.pack(0x45, 0, 20 + tcp_len, self._ip_id, 0x4000, 64, IPPROTO_TCP, 0, src, dst)
        ip = ip[:10] + struct.pack("!H", internet_checksum(ip)) + ip[12:]
        advance = len(payload) + (1 if flags & (SYN | FIN) else 0)
        if from_client:
            self.client_seq = (self.client_seq + advance) % SEQ_MOD
        else:
            self.server_seq = (self.server_seq + advance) % SEQ_MOD
        return eth + ip + tcp + payload

    def client_sends(self, flags: int, payload: bytes = b"") -> None:
        self.cap.write(self._frame(True, flags, payload))

    def server_sends(self, flags: int, payload: bytes = b"") -> None:
        self.cap.write(self._frame(False, flags, payload))
        self._sent_offset += len(payload)
        while self._event_ends and self._event_ends[0] <= self._sent_offset:
            self._event_ends.popleft()
            self.cap.truth.events += 1

    def server_writes(self, data: bytes, flush: bool) -> None:
        """Send ``data`` in segments of this connection's size; the last, short one only on
        ``flush`` (a server that buffers until a segment fills or the response ends)."""
        self._pending += data
        size = self.segment_bytes
        while len(self._pending) >= size or (flush and self._pending):
            segment, self._pending = self._pending[:size], self._pending[size:]
            self.server_sends(PSH | ACK, segment)
            self._unacked_segments += 1
            if self._unacked_segments >= 2:  # RFC 1122 §4.2.3.2: ACK every second segment
                self.client_sends(ACK)
                self._unacked_segments = 0

    # -- HTTP / MCP ---------------------------------------------------------------------
    def _request(self, body: dict, with_session: bool = True) -> bytes:
        payload = json.dumps(body, separators=(",", ":")).encode()
        session = f"Mcp-Session-Id: {self.session_id}\r\n" if with_session else ""
        return (
            f"POST /mcp HTTP/1.1\r\nHost: 10.0.255.1:{SERVER_PORT}\r\n"
            "Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"
            f"{session}MCP-Protocol-Version: {PROTOCOL_VERSION}\r\n"
            f"Content-Length: {len(payload)}\r\n\r\n"
        ).encode() + payload

    def _progress_event(self, event_id: int, token: str, total: int) -> bytes:
        rng = self.cap.rng
        head = (
            f'id: {event_id}\ndata: {{"jsonrpc":"2.0","method":"notifications/progress",'
            f'"params":{{"progressToken":"{token}","progress":{event_id},"total":{total},'
            f'"message":"'
        )
        tail = '"}}\n\n'
        pad = max(0, rng.randint(*EVENT_BYTES) - len(head) - len(tail))
        return (head + "x" * pad + tail).encode()

    def _send_event(self, event: bytes, flush: bool) -> None:
        chunk = b"%x\r\n%s\r\n" % (len(event), event)
        # The event's blank line is 2 bytes (the chunk's CRLF) before the chunk ends.
        self._event_ends.append(self._server_offset + len(chunk) - 2)
        self._server_offset += len(chunk)
        self.server_writes(chunk, flush)

    def _respond(self, head: str, body: bytes = b"") -> None:
        data = head.encode() + body
        self._server_offset += len(data)
        self.server_writes(data, flush=True)

    def run(self) -> Iterator[None]:
        """The connection's life; each ``yield`` lets another connection take a turn."""
        rng, truth = self.cap.rng, self.cap.truth
        self.client_sends(SYN)
        self.server_sends(SYN | ACK)
        self.client_sends(ACK)
        yield
        init = {
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {
                "protocolVersion": PROTOCOL_VERSION,
                "capabilities": {},
                "clientInfo": {"name": "bench-client", "version": "1.0"},
            },
        }
        self.client_sends(PSH | ACK, self._request(init, with_session=False))
        yield
        result = json.dumps(
            {
                "jsonrpc": "2.0",
                "id": 0,
                "result": {
                    "protocolVersion": PROTOCOL_VERSION,
                    "capabilities": {"tools": {}},
                    "serverInfo": {"name": "bench-server", "version": "1.0"},
                },
            },
            separators=(",", ":"),
        ).encode()
        self._respond(
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
            f"Mcp-Session-Id: {self.session_id}\r\nContent-Length: {len(result)}\r\n\r\n",
            result,
        )
        truth.http_responses += 1
        yield
        self.client_sends(
            PSH | ACK, self._request({"jsonrpc": "2.0", "method": "notifications/initialized"})
        )
        self._respond("HTTP/1.1 202 Accepted\r\nContent-Length: 0\r\n\r\n")
        truth.http_responses += 1
        yield
        stream_index = 0
        while True:
            if self.cap.winding_down and not self.never_ending and stream_index >= MIN_STREAMS:
                break
            request_id = stream_index + 1
            token = f"c{self.index}-r{request_id}"
            # Every call asks for a different job: the same call again would read as the
            # client re-issuing it after a loss (docs/profile.md, "What counts as what": an
            # expected gap).
            call = {
                "jsonrpc": "2.0",
                "id": request_id,
                "method": "tools/call",
                "params": {
                    "name": "long_task",
                    "arguments": {"job": request_id},
                    "_meta": {"progressToken": token},
                },
            }
            self.client_sends(PSH | ACK, self._request(call))
            self.server_sends(ACK)
            yield
            self._respond(
                "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                "Cache-Control: no-cache\r\nTransfer-Encoding: chunked\r\n"
                f"Mcp-Session-Id: {self.session_id}\r\n\r\n"
            )
            n_events = rng.randint(*EVENTS_PER_STREAM)
            skip_at = rng.randint(3, n_events - 4) if stream_index == self.gap_stream else None
            event_id = 0
            sent = 0
            # A never-ending connection's stream started after wind-down runs to the end.
            endless = self.never_ending and self.cap.winding_down
            while sent < n_events or endless:
                for _ in range(rng.randint(1, 4)):
                    event_id += 1
                    if sent == skip_at:
                        truth.planted_gaps.append(
                            PlantedGap(
                                self.session_id,
                                self.index,
                                request_id,
                                str(event_id),
                                str(event_id + GAP_WIDTH - 1),
                            )
                        )
                        event_id += GAP_WIDTH
                    self._send_event(self._progress_event(event_id, token, n_events), False)
                    sent += 1
                    if sent >= n_events and not endless:
                        break
                # Most writes flush what they have, so segments end both on and off events.
                self.server_writes(b"", flush=rng.random() < 0.5)
                yield
                endless = endless or (self.never_ending and self.cap.winding_down)
            event_id += 1
            final = json.dumps(
                {
                    "jsonrpc": "2.0",
                    "id": request_id,
                    "result": {"content": [{"type": "text", "text": f"done {token}"}]},
                },
                separators=(",", ":"),
            )
            self._send_event(f"id: {event_id}\ndata: {final}\n\n".encode(), False)
            self.server_writes(b"0\r\n\r\n", flush=True)
            self._server_offset += 5
            truth.http_responses += 1
            truth.streams_complete += 1
            stream_index += 1
            yield
        if self._unacked_segments:
            self.client_sends(ACK)
        self.client_sends(FIN | ACK)
        self.server_sends(FIN | ACK)
        self.client_sends(ACK)


def write_capture(path: Path, packets: int = 200_000, seed: int = 1) -> Truth:
    """Write the capture to ``path`` (at least ``packets`` packets) and its ground truth to
    ``<path>.truth.json``; return the truth."""
    rng = random.Random(seed)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as out:
        out.write(_PCAP_HEADER)
        cap = Capture(out, rng, packets)
        order = list(range(CONNECTIONS))
        rng.shuffle(order)
        never_ending = set(order[:NEVER_ENDING])
        wrapping = set(order[NEVER_ENDING : NEVER_ENDING + WRAPPING_CONNECTIONS])
        conns = [Connection(cap, i, i in never_ending, i in wrapping) for i in range(CONNECTIONS)]
        for i in order[NEVER_ENDING : NEVER_ENDING + PLANTED_GAPS]:
            conns[i].gap_stream = rng.randrange(MIN_STREAMS)
        active = {c.index: c.run() for c in conns}
        while active:
            if cap.truth.packets >= packets and all(conns[i].never_ending for i in active):
                break  # the capture ends: the never-ending streams are cut mid-stream
            index = rng.choice(list(active))
            cap.ts += rng.uniform(20e-6, 400e-6)
            try:
                next(active[index])
            except StopIteration:
                del active[index]
        cap.truth.streams_cut = len(active)
        cap.flush()
    truth = cap.truth
    truth.planted_gaps.sort(key=lambda g: (g.connection, g.request_id))
    path.with_name(path.name + ".truth.json").write_text(json.dumps(asdict(truth), indent=2))
    return truth


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--packets", type=int, default=200_000, help="minimum packet count")
    parser.add_argument("--out", type=Path, required=True, help="pcap file to write")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    if args.packets < 1:
        parser.error("--packets must be positive")
    started = time.perf_counter()
    truth = write_capture(args.out, args.packets, args.seed)
    elapsed = time.perf_counter() - started
    print(
        f"{args.out}: {truth.packets} packets, {args.out.stat().st_size / 1e6:.1f} MB, "
        f"{truth.http_responses} complete HTTP responses, {truth.events} SSE events, "
        f"{truth.streams_cut} streams cut by the end of the capture, "
        f"{len(truth.planted_gaps)} planted gaps of {GAP_WIDTH} IDs; {elapsed:.1f} s",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
