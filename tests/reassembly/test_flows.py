"""ConnectionTracker on crafted segments, and end to end on the shared captures."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from sse_forensics.errors import ReadError
from sse_forensics.ingest.linklayer import decode_tcp
from sse_forensics.ingest.packets import (
    TCP_ACK,
    TCP_FIN,
    TCP_PSH,
    TCP_RST,
    TCP_SYN,
    Frame,
    TCPSegment,
)
from sse_forensics.ingest.pcap import read_frames
from sse_forensics.provenance import Origin
from sse_forensics.reassembly.flows import ConnectionTracker, community_id
from sse_forensics.reassembly.stream import MissingSpan, StreamData

C = ("10.0.0.1", 51000)
S = ("10.0.0.2", 80)


class Wire:
    """Builds segments between C and S with running frame numbers."""

    def __init__(self) -> None:
        self.n = 0
        self.tracker = ConnectionTracker()
        self.out: list = []

    def send(self, frm, to, seq, ack=0, flags=TCP_ACK, payload=b""):
        self.n += 1
        seg = TCPSegment(
            Origin("t.pcap", self.n, float(self.n)),
            frm[0],
            frm[1],
            to[0],
            to[1],
            seq,
            ack,
            flags,
            65535,
            payload,
        )
        got = self.tracker.feed(seg)
        self.out += got
        return got

    def handshake(self, client=C, server=S, isn_c=100, isn_s=900):
        self.send(client, server, isn_c, 0, TCP_SYN)
        self.send(server, client, isn_s, isn_c + 1, TCP_SYN | TCP_ACK)
        self.send(client, server, isn_c + 1, isn_s + 1)

    def stream(self, direction: str) -> bytes:
        return b"".join(
            p.data for _c, d, p in self.out if d == direction and isinstance(p, StreamData)
        )


def test_handshake_names_the_client_and_streams_flow_by_direction():
    w = Wire()
    w.handshake()
    w.send(C, S, 101, 901, TCP_PSH | TCP_ACK, b"GET / HTTP/1.1\r\n\r\n")
    w.send(S, C, 901, 119, TCP_PSH | TCP_ACK, b"HTTP/1.1 200 OK\r\n\r\n")
    [conn] = w.tracker.connections
    assert (conn.id, conn.client, conn.server) == (1, C, S)
    assert conn.handshake_seen and not conn.mid_stream
    assert conn.packets == 5 and conn.first.number == 1 and conn.last.number == 5
    assert w.stream("client") == b"GET / HTTP/1.1\r\n\r\n"
    assert w.stream("server") == b"HTTP/1.1 200 OK\r\n\r\n"
    assert conn.community_id == community_id(C, S) == community_id(S, C)


def test_community_id_matches_the_spec_example():
    # Community ID spec baseline: 128.232.110.120:34855 -> 66.35.250.204:80, TCP, seed 0.
    assert community_id(("128.232.110.120", 34855), ("66.35.250.204", 80)) == (
        "1:LQU9qZlK+B5F3KDmev6m5PMibrg="
    )


def test_syn_ack_alone_names_its_receiver_the_client():
    w = Wire()
    w.send(S, C, 900, 101, TCP_SYN | TCP_ACK)
    [conn] = w.tracker.connections
    assert conn.client == C and not conn.handshake_seen


@pytest.mark.parametrize(
    ("sender", "payload"),
    [(C, b"POST /mcp HTTP/1.1\r\n"), (S, b"HTTP/1.1 200 OK\r\n")],
)
def test_midstream_client_from_http_payload(sender, payload):
    # Client on the LOW port, so the port fallback would get it wrong.
    client, server = ("10.0.0.1", 80), ("10.0.0.2", 51000)
    w = Wire()
    frm = client if sender == C else server
    to = server if sender == C else client
    w.send(frm, to, 5000, 7000)  # bare ACK: held until the roles are known
    assert w.tracker.connections == []
    w.send(frm, to, 5000, 7000, TCP_PSH | TCP_ACK, payload)
    [conn] = w.tracker.connections
    assert (conn.client, conn.mid_stream, conn.packets) == (client, True, 2)


def test_undecided_flow_falls_back_to_the_higher_port_at_close():
    w = Wire()
    w.send(S, C, 5000, 7000, TCP_PSH | TCP_ACK, b"\x16\x03\x01 binary")
    assert w.tracker.connections == []
    w.tracker.close()
    [conn] = w.tracker.connections
    assert conn.client == C  # 51000 > 80


def test_new_syn_after_both_fins_starts_a_new_connection():
    w = Wire()
    w.handshake()
    w.send(C, S, 101, 901, TCP_FIN | TCP_ACK)
    w.send(S, C, 901, 102, TCP_FIN | TCP_ACK)
    w.send(C, S, 102, 902)
    first = w.tracker.connections[0]
    assert first.finished and set(first.fin) == {"client", "server"}
    w.send(C, S, 100, 902)  # stray ACK on the finished connection: still the old one
    w.handshake(isn_c=50_000, isn_s=70_000)
    w.send(C, S, 50_001, 70_001, TCP_PSH | TCP_ACK, b"GET /2 HTTP/1.1\r\n")
    assert [c.id for c in w.tracker.connections] == [1, 2]
    second = w.tracker.connections[1]
    assert second.handshake_seen and second.packets == 4 and first.packets == 7
    assert [p.data for c, _d, p in w.out if c is second] == [b"GET /2 HTTP/1.1\r\n"]


def test_rst_ends_the_connection_and_records_who_sent_it():
    w = Wire()
    w.handshake()
    w.send(S, C, 901, 101, TCP_RST | TCP_ACK)
    [conn] = w.tracker.connections
    assert conn.rst.number == 4 and conn.rst_by == "server" and conn.finished


def test_peer_ack_beyond_a_hole_reports_acked_unseen():
    w = Wire()
    w.handshake()
    w.send(C, S, 101, 901, TCP_PSH | TCP_ACK, b"GET / HTTP/1.1\r\n\r\n")
    w.send(S, C, 901 + 1000, 119, TCP_ACK, b"B" * 500)  # server bytes [0, 1000) not captured
    got = w.send(C, S, 119, 901 + 1500)  # the client acknowledges all of it
    [conn] = w.tracker.connections
    kinds = [(d, type(p).__name__, p.offset) for _c, d, p in got]
    assert kinds == [("server", "MissingSpan", 0), ("server", "StreamData", 1000)]
    assert conn.missing == [got[0][2]]
    span = got[0][2]
    assert (span.reason, span.length, span.after, span.before.number) == (
        "acked-unseen",
        1000,
        None,
        5,
    )


# -- shared captures, end to end ----------------------------------------------------------


def run(path: Path):
    tracker = ConnectionTracker()
    out = []
    errors = []
    for item in read_frames(str(path)):
        seg = decode_tcp(item) if isinstance(item, Frame) else item
        if isinstance(seg, ReadError):
            errors.append(seg)
        elif seg is not None:
            out += tracker.feed(seg)
    out += tracker.close()
    return tracker, out, errors


def stream_bytes(out, conn, direction) -> bytes:
    return b"".join(
        p.data for c, d, p in out if c is conn and d == direction and isinstance(p, StreamData)
    )


def test_every_shared_capture_reassembles(shared_captures):
    for path in sorted(shared_captures.glob("*.pcap*")):
        tracker, out, _errors = run(path)
        assert tracker.connections, path.name
        for conn in tracker.connections:
            for direction in ("client", "server"):
                offset = 0  # pieces of a direction tile the stream: no gap, no overlap
                for c, d, p in out:
                    if c is conn and d == direction:
                        assert p.offset == offset, (path.name, conn.id, direction)
                        offset += len(p.data) if isinstance(p, StreamData) else p.length or 0


def test_qinq_capture_is_one_http_connection(shared_captures):
    tracker, out, _ = run(shared_captures / "zeek__http-qinq-vlan.pcap")
    [conn] = tracker.connections
    assert conn.server[1] == 80 and conn.handshake_seen
    assert stream_bytes(out, conn, "client").startswith(b"GET ")
    assert stream_bytes(out, conn, "server").startswith(b"HTTP/1.1 200")


def test_ipv6_null_loopback_port_8065(shared_captures):
    tracker, out, _ = run(shared_captures / "suricata__http-ipv6-null-loopback-port8065-json.pcap")
    http = [c for c in tracker.connections if stream_bytes(out, c, "client").startswith(b"POST ")]
    assert len(http) == 1
    assert http[0].server == ("::1", 8065) and http[0].client[0] == "::1"
    assert stream_bytes(out, http[0], "client").count(b"POST ") == 3
    # Two idle connections opened before the capture carry only keep-alive probes
    # (SND.NXT-1): the peer's ACK of them must not look like an unseen byte.
    assert [c.mid_stream for c in tracker.connections].count(True) == 2
    assert not any(c.missing for c in tracker.connections)


def test_pipelined_40_requests(shared_captures):
    tracker, out, _ = run(shared_captures / "suricata__http-pipelined-40req.pcap")
    [conn] = tracker.connections
    client = stream_bytes(out, conn, "client")
    assert len(re.findall(rb"(?:^|\r\n)GET [^\r\n]+ HTTP/1\.[01]\r\n", client)) == 40
    assert stream_bytes(out, conn, "server").count(b"HTTP/1.1 ") >= 40


def test_bro_org_connections_and_server_hole(shared_captures):
    tracker, out, _ = run(shared_captures / "zeek__http-browsing-bro.org-31req-8conn.pcap")
    http = [c for c in tracker.connections if stream_bytes(out, c, "client").startswith(b"GET ")]
    assert len(http) == 8
    assert sum(stream_bytes(out, c, "client").count(b"GET ") for c in http) == 31
    assert any(m.direction == "server" for c in http for m in c.missing)


def test_capture_drops_leave_missing_spans_in_both_directions(shared_captures):
    tracker, _out, _ = run(shared_captures / "zeek__http-keepalive-with-capture-drops.pcap")
    [conn] = tracker.connections
    assert {m.direction for m in conn.missing} == {"client", "server"}
    assert all(isinstance(m, MissingSpan) and m.length > 0 for m in conn.missing)


def test_cut_capture_still_reassembles_up_to_the_cut(shared_captures):
    tracker, _out, errors = run(
        shared_captures / "derived__http-browsing-bro.org-cut-mid-record.pcap"
    )
    assert [e.frame for e in errors] == [501]
    assert all(c.last.number <= 500 for c in tracker.connections)


@pytest.mark.skipif(shutil.which("tshark") is None, reason="tshark not installed")
@pytest.mark.parametrize(
    "name",
    [
        "zeek__http-browsing-bro.org-31req-8conn.pcap",
        "suricata__http-plaintext-port443-chunked-gzip-json.pcap",
        "zeek__http-206-retransmissions-out-of-order.pcap",
    ],
)
def test_connections_match_tshark_conversations(shared_captures, name):
    path = shared_captures / name
    report = subprocess.run(
        ["tshark", "-r", str(path), "-q", "-z", "conv,tcp"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    expected = {}
    for m in re.finditer(
        r"^(\S+):(\d+)\s+<->\s+(\S+):(\d+)\s+(\d+)\s+\S+\s+\S+\s+(\d+)\s+\S+\s+\S+\s+(\d+)",
        report,
        re.M,
    ):
        a, b = (m[1], int(m[2])), (m[3], int(m[4]))
        expected[frozenset((a, b))] = int(m[7])
    tracker, _out, _ = run(path)
    got = {frozenset((c.client, c.server)): c.packets for c in tracker.connections}
    assert got == expected


def test_community_id_equals_the_reference_implementation() -> None:
    """flows.community_id is written out for speed (issue 16: a million connections); it
    must give what the Community ID library gives, IPv4 and IPv6, either endpoint order."""
    import ipaddress
    import random

    import communityid

    from sse_forensics.reassembly.flows import community_id

    reference = communityid.CommunityID()
    rnd = random.Random(16)
    for k in range(500):
        if k % 3:
            a = str(ipaddress.IPv4Address(rnd.getrandbits(32)))
            b = a if k % 7 == 0 else str(ipaddress.IPv4Address(rnd.getrandbits(32)))
        else:
            a = str(ipaddress.IPv6Address(rnd.getrandbits(128)))
            b = str(ipaddress.IPv6Address(rnd.getrandbits(128)))
        client, server = (a, rnd.randrange(65536)), (b, rnd.randrange(65536))
        tuple_ = communityid.FlowTuple.make_tcp(client[0], server[0], client[1], server[1])
        assert community_id(client, server) == reference.calc(tuple_)
