"""Capture variants from servers, clients and proxies: each is read end to end through
:func:`scan_paths` from a small pcap built with scapy, and must give the same events and
IDs as the plain case, with no spurious errors."""

from __future__ import annotations

import gzip
import zlib
from pathlib import Path

import pytest

from sse_forensics.pipeline import scan_paths
from sse_forensics.reassembly.http import CODING_CUT
from sse_forensics.result import ScanResult

CLIENT, SERVER = ("10.0.0.1", 40001), ("10.0.0.2", 8080)
C_ISN, S_ISN = 100, 500
GET = b"GET /mcp HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\n\r\n"
EVENT_1, EVENT_2 = b"id: 1\ndata: a\n\n", b"id: 2\ndata: b\n\n"


def chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


def sse_head(*fields: str) -> bytes:
    lines = "".join(f"{f}\r\n" for f in ("Content-Type: text/event-stream", *fields))
    return f"HTTP/1.1 200 OK\r\n{lines}\r\n".encode()


Step = tuple[str, bytes] | tuple[str, bytes, str] | tuple[str, bytes, str, int]


def capture(
    path: Path,
    steps: list[Step],
    *,
    handshake: bool = True,
    isn: tuple[int, int] = (C_ISN, S_ISN),
    start: float = 1767225600,
) -> Path:
    """A pcap of one connection: the handshake, then ``steps`` as ``(side, payload[, flags
    [, seq]])`` with ``side`` ``"c"`` or ``"s"``; sequence numbers follow the bytes sent
    unless ``seq`` is given (a retransmission or a segment out of order)."""
    # scapy's layers as used, not scapy.all (every layer, and the routing table read: ~0.8
    # CPU s more), and here, not as the module is collected by every test process.
    from scapy.layers.inet import IP, TCP
    from scapy.layers.l2 import Ether
    from scapy.packet import Raw
    from scapy.utils import wrpcap

    c_isn, s_isn = isn
    seq = {"c": c_isn + 1, "s": s_isn + 1}
    ends = {"c": (CLIENT, SERVER), "s": (SERVER, CLIENT)}

    def segment(side: str, flags: str, at: int, ack: int, payload: bytes = b""):
        (src, sport), (dst, dport) = ends[side]
        packet = Ether() / IP(src=src, dst=dst)
        packet /= TCP(sport=sport, dport=dport, flags=flags, seq=at, ack=ack)
        return packet / Raw(payload) if payload else packet

    packets = []
    if handshake:
        packets += [
            segment("c", "S", c_isn, 0),
            segment("s", "SA", s_isn, c_isn + 1),
            segment("c", "A", c_isn + 1, s_isn + 1),
        ]
    for side, payload, *rest in steps:
        flags = rest[0] if rest else "PA"
        at = rest[1] if len(rest) > 1 else seq[side]
        packets.append(segment(side, flags, at, seq["s" if side == "c" else "c"], payload))
        if len(rest) < 2:
            seq[side] += len(payload) + ("F" in flags)
    for n, packet in enumerate(packets):
        packet.time = start + n * 0.01
    wrpcap(str(path), packets)
    return path


def events(result: ScanResult) -> list[tuple[str, str]]:
    return [(ev.id, ev.data) for ex in result.facts.exchanges for ev in ex.events]


def test_gzip_members_each_in_its_own_segment(tmp_path: Path):
    """RFC 1952 §2.2: a gzip body may be several members; a member that ends exactly at a
    segment boundary must not end the body (the next member's events were silently lost)."""
    head = sse_head("Transfer-Encoding: chunked", "Content-Encoding: gzip")
    pcap = capture(
        tmp_path / "members.pcap",
        [
            ("c", GET),
            ("s", head),
            ("s", chunk(gzip.compress(EVENT_1))),
            ("s", chunk(gzip.compress(EVENT_2))),
            ("s", b"0\r\n\r\n"),
        ],
    )
    result = scan_paths(keep_records=True, paths=[str(pcap)])
    assert events(result) == [("1", "a"), ("2", "b")]
    assert result.errors == [] and result.findings == []


def test_gzip_transfer_coding_is_decoded(tmp_path: Path):
    """RFC 9112 §6.1: a recipient undoes the transfer codings; ``gzip, chunked`` left the
    events as compressed bytes, with no error."""
    body = chunk(gzip.compress(EVENT_1 + EVENT_2)) + b"0\r\n\r\n"
    pcap = capture(
        tmp_path / "te-gzip.pcap",
        [("c", GET), ("s", sse_head("Transfer-Encoding: gzip, chunked") + body)],
    )
    result = scan_paths(keep_records=True, paths=[str(pcap)])
    assert events(result) == [("1", "a"), ("2", "b")]
    assert result.errors == []


def test_port_reuse_when_the_close_was_not_captured(tmp_path: Path):
    """A SYN with a new ISN on a 4-tuple whose FIN/RST the capture missed starts a new
    connection; it was glued to the old one as megabytes of ``acked-unseen`` loss."""
    head = sse_head("Transfer-Encoding: chunked")
    resume = GET.replace(b"Accept", b"Last-Event-ID: 2\r\nAccept")
    first = capture(tmp_path / "a.pcap", [("c", GET), ("s", head + chunk(EVENT_1 + EVENT_2))])
    second = capture(
        tmp_path / "b.pcap",
        [
            ("c", resume),
            ("s", head + chunk(b"id: 3\ndata: c\n\n") + b"0\r\n\r\n"),
            ("s", b"", "FA"),
            ("c", b"", "FA"),
        ],
        isn=(900_000, 7_000_000),
        start=1767225610,
    )
    result = scan_paths(keep_records=True, paths=[str(first), str(second)])
    assert [c.missing for c in result.connections] == [[], []]
    assert result.loss.acked_unseen == 0
    assert events(result) == [("1", "a"), ("2", "b"), ("3", "c")]
    cut, resumed = result.facts.exchanges
    assert (cut.response_end_reason, cut.holes) == ("capture-end", [])
    assert resumed.response_complete and resumed.request.headers == [("Last-Event-ID", "2")]


def test_gzip_stream_after_a_hole_is_not_parsed_as_text(tmp_path: Path):
    """A gzip event stream (flushed per event, as compression middleware does) with one
    segment lost: after the hole the bytes stay compressed. They were fed to the SSE parser
    as text, giving invalid-UTF-8 errors in proportion to the stream's length."""
    deflate = zlib.compressobj(wbits=31)
    pieces = [
        deflate.compress(b'id: %d\ndata: {"progress": %d}\n\n' % (i, i * 7919 % 1000))
        + deflate.flush(zlib.Z_SYNC_FLUSH)
        for i in range(1, 40)
    ] + [deflate.flush()]
    segments = [sse_head("Transfer-Encoding: chunked", "Content-Encoding: gzip")]
    segments += [chunk(p) for p in pieces] + [b"0\r\n\r\n"]
    steps: list[Step] = [("c", GET)]
    at = S_ISN + 1
    for n, data in enumerate(segments):
        if n != 10:  # lost by the capture
            steps.append(("s", data, "PA", at))
        at += len(data)
    result = scan_paths(keep_records=True, paths=[str(capture(tmp_path / "gzip-hole.pcap", steps))])
    (error,) = result.errors
    assert error.what.startswith("HTTP server: " + CODING_CUT)
    (exchange,) = result.facts.exchanges
    assert [ev.id for ev in exchange.events] == [str(i) for i in range(1, 10)]
    assert exchange.trailing_bytes == 0 and len(exchange.holes) == 1


@pytest.mark.parametrize("side", ["s", "c"])
def test_reset_outside_the_window_does_not_end_the_stream(tmp_path: Path, side: str):
    """RFC 9293 §3.10.7.4: an RST whose sequence number is outside the window is ignored
    (a forged or stray reset); the stream goes on. It ended the connection, and the events
    after it were dropped without a word."""
    events_ = [chunk(b"id: %d\ndata: a\n\n" % i) for i in (1, 2, 3)]
    pcap = capture(
        tmp_path / "rst.pcap",
        [
            ("c", GET),
            ("s", sse_head("Transfer-Encoding: chunked") + events_[0]),
            (side, b"", "R", 123_456_789),
            ("s", events_[1]),
            ("s", events_[2] + b"0\r\n\r\n"),
        ],
    )
    result = scan_paths(keep_records=True, paths=[str(pcap)])
    assert [ev.id for ev in result.facts.exchanges[0].events] == ["1", "2", "3"]
    assert result.facts.exchanges[0].response_complete
    assert result.connections[0].rst is None and result.errors == []


def test_reset_at_the_next_sequence_number_ends_the_stream(tmp_path: Path):
    head = sse_head("Transfer-Encoding: chunked") + chunk(EVENT_1)
    pcap = capture(tmp_path / "rst.pcap", [("c", GET), ("s", head), ("s", b"", "R")])
    result = scan_paths(keep_records=True, paths=[str(pcap)])
    (exchange,) = result.facts.exchanges
    assert exchange.response_end_reason == "rst" and not exchange.response_complete
    assert result.connections[0].rst_by == "server"


def test_retry_beyond_64_bits_does_not_stop_the_scan(tmp_path: Path):
    """WHATWG: ``retry`` is any run of ASCII digits. One wider than a 64-bit column is kept
    at the column's maximum; the events around it are read as usual."""
    huge = b"retry: " + b"9" * 30 + b"\n\n"
    body = chunk(EVENT_1 + huge + EVENT_2) + b"0\r\n\r\n"
    pcap = capture(
        tmp_path / "retry.pcap",
        [("c", GET), ("s", sse_head("Transfer-Encoding: chunked") + body)],
    )
    result = scan_paths(keep_records=True, paths=[str(pcap)])
    assert events(result) == [("1", "a"), ("1", ""), ("2", "b")]
    (retry,) = [ev.retry for ex in result.facts.exchanges for ev in ex.events if ev.retry]
    assert retry == (1 << 63) - 1
