"""TCP expert analysis: window scale, zero-window/window-full periods, probes, keep-alives,
FIN/RST notes, stalls, capture-loss accounting and early finalisation."""

from __future__ import annotations

import struct

from sse_forensics.ingest.packets import TCP_ACK, TCP_FIN, TCP_RST, TCP_SYN, TCPSegment
from sse_forensics.provenance import Origin
from sse_forensics.reassembly.flows import ConnectionTracker
from sse_forensics.reassembly.tcp_analysis import window_scale_offer

C = ("10.0.0.1", 51000)
S = ("10.0.0.2", 80)
ISN_C = 100
ISN_S = 900


def wscale(shift: int) -> bytes:
    return b"\x02\x04\x05\xb4\x01\x03\x03" + bytes([shift])  # MSS, NOP, WS


WS2, WS3 = wscale(2), wscale(3)


class Wire:
    def __init__(self) -> None:
        self.n = 0
        self.ts = 0.0
        self.tracker = ConnectionTracker()
        self.out: list = []

    def send(
        self, frm, to, seq, ack, flags=TCP_ACK, payload=b"", window=65535, options=b"", dt=0.01
    ):
        self.n += 1
        self.ts += dt
        seg = TCPSegment(
            Origin("t.pcap", self.n, self.ts),
            *frm,
            *to,
            seq % (1 << 32),
            ack % (1 << 32),
            flags,
            window,
            payload,
            0,
            options,
        )
        self.out += self.tracker.feed(seg)
        return self.n

    def handshake(self, c_opts=WS2, s_opts=WS3):
        self.send(C, S, ISN_C, 0, TCP_SYN, options=c_opts)
        self.send(S, C, ISN_S, ISN_C + 1, TCP_SYN | TCP_ACK, options=s_opts)
        self.send(C, S, ISN_C + 1, ISN_S + 1)

    @property
    def conn(self):
        (conn,) = self.tracker.connections
        return conn


def test_window_scale_option_parsing():
    assert window_scale_offer(wscale(7)) == 7
    assert window_scale_offer(wscale(15)) == 14  # RFC 7323 §2.3: capped
    assert window_scale_offer(b"\x02\x04\x05\xb4") is None
    assert window_scale_offer(b"\x00\x01\x03\x03\x05") is None  # after EOL: ignored
    assert window_scale_offer(b"\x08\x00\x03\x03\x05") is None  # length 0: unwalkable


def test_window_scale_needs_both_syns_and_both_offers():
    w = Wire()
    w.handshake()
    assert w.conn.window_scale == {"client": 2, "server": 3}
    w = Wire()
    w.handshake(s_opts=b"")
    assert w.conn.window_scale == {"client": 0, "server": 0}
    w = Wire()  # picked up mid-stream: unknown, not guessed
    w.send(C, S, ISN_C + 1, ISN_S + 1, payload=b"GET / HTTP/1.1\r\n\r\n")
    assert w.conn.window_scale == {"client": None, "server": None}


def test_zero_window_period_with_probes_and_its_end():
    w = Wire()
    w.handshake(c_opts=b"", s_opts=b"")
    w.send(S, C, ISN_S + 1, ISN_C + 1, payload=b"x" * 100)
    zero = w.send(C, S, ISN_C + 1, ISN_S + 101, window=0)
    w.send(C, S, ISN_C + 1, ISN_S + 101, window=0)  # still closed: same period
    w.send(S, C, ISN_S + 101, ISN_C + 1, payload=b"y")  # 1-byte probe at the next seq
    w.send(S, C, ISN_S + 101, ISN_C + 1)  # Linux-style probe: bare, at next-1
    reopen = w.send(C, S, ISN_C + 1, ISN_S + 101, window=4096)
    (period,) = w.conn.windows
    assert (period.receiver, period.kind, period.probes) == ("client", "zero-window", 2)
    assert (period.start.number, period.end.number) == (zero, reopen)
    kinds = [n.kind for n in w.conn.tcp_notes]
    assert kinds == ["zero-window-probe", "zero-window-probe"]


def test_keep_alive_fin_and_rst_notes():
    w = Wire()
    w.handshake()
    w.send(S, C, ISN_S + 1, ISN_C + 1, payload=b"abc")
    ka = w.send(S, C, ISN_S + 3, ISN_C + 1)  # RFC 9293 §3.8.4: SND.NXT-1, no data
    fin = w.send(C, S, ISN_C + 1, ISN_S + 4, TCP_FIN | TCP_ACK)
    w.send(C, S, ISN_C + 1, ISN_S + 4, TCP_FIN | TCP_ACK)  # retransmitted FIN: one note
    rst = w.send(S, C, ISN_S + 4, 0, TCP_RST)
    notes = [(n.kind, n.direction, n.origin.number) for n in w.conn.tcp_notes]
    assert notes == [
        ("keep-alive", "server", ka),
        ("fin", "client", fin),
        ("rst", "server", rst),
    ]


def test_window_full_uses_the_scaled_window_and_ends_when_the_window_opens():
    w = Wire()
    w.handshake(c_opts=wscale(2), s_opts=wscale(0))
    # The client advertises 250 << 2 = 1000 bytes.
    w.send(C, S, ISN_C + 1, ISN_S + 1, window=250)
    w.send(S, C, ISN_S + 1, ISN_C + 1, payload=b"a" * 600)
    full = w.send(S, C, ISN_S + 601, ISN_C + 1, payload=b"b" * 400)  # reaches the edge
    w.send(C, S, ISN_C + 1, ISN_S + 1001, window=0)  # then closes it entirely
    reopen = w.send(C, S, ISN_C + 1, ISN_S + 1001, window=250)
    kinds = [(p.kind, p.start.number, p.end.number if p.end else None) for p in w.conn.windows]
    assert kinds == [("window-full", full, full + 1), ("zero-window", full + 1, reopen)]


def test_window_not_reached_is_not_full():
    w = Wire()
    w.handshake(c_opts=wscale(2), s_opts=wscale(0))
    w.send(C, S, ISN_C + 1, ISN_S + 1, window=250)
    w.send(S, C, ISN_S + 1, ISN_C + 1, payload=b"a" * 999)
    assert w.conn.windows == []


def test_stall_while_the_client_window_is_closed():
    w = Wire()
    w.handshake()
    last = w.send(S, C, ISN_S + 1, ISN_C + 1, payload=b"x" * 100)
    w.send(C, S, ISN_C + 1, ISN_S + 101, window=0, dt=0.001)
    w.send(C, S, ISN_C + 1, ISN_S + 101, window=2000, dt=2.5)
    resumed = w.send(S, C, ISN_S + 101, ISN_C + 1, payload=b"y" * 100, dt=0.01)
    (stall,) = w.conn.stalls
    assert (stall.sender, stall.reason) == ("server", "zero-window")
    assert (stall.start.number, stall.end.number) == (last, resumed)
    assert stall.seconds is not None and stall.seconds > 2.5 and not stall.retransmission


def test_idle_sender_with_everything_acknowledged_is_not_stalled():
    w = Wire()
    w.handshake()
    w.send(S, C, ISN_S + 1, ISN_C + 1, payload=b"x" * 100)
    w.send(C, S, ISN_C + 1, ISN_S + 101, dt=0.04)
    w.send(S, C, ISN_S + 101, ISN_C + 1, payload=b"y" * 100, dt=30.0)  # a quiet SSE stream
    assert w.conn.stalls == []


def test_stall_waiting_for_an_ack_ends_with_a_retransmission():
    w = Wire()
    w.handshake()
    first = w.send(S, C, ISN_S + 1, ISN_C + 1, payload=b"x" * 100)
    w.send(S, C, ISN_S + 1, ISN_C + 1, payload=b"x" * 100, dt=1.2)  # RTO
    (stall,) = w.conn.stalls
    assert (stall.reason, stall.start.number, stall.retransmission) == (
        "unacknowledged",
        first,
        True,
    )


def test_loss_accounting_per_direction():
    w = Wire()
    w.handshake()
    w.send(S, C, ISN_S + 1, ISN_C + 1, payload=b"a" * 10)
    w.send(S, C, ISN_S + 31, ISN_C + 1, payload=b"c" * 10)  # bytes 10..30 never captured
    w.send(C, S, ISN_C + 1, ISN_S + 41)  # ...but acknowledged
    loss = w.conn.loss["server"]
    assert (loss.bytes_seen, loss.acked_unseen, loss.acked_unseen_spans) == (20, 20, 1)
    assert loss.missing_bytes == 20 and w.conn.loss["client"].missing_bytes == 0


def test_connection_is_finalised_once_both_fins_are_delivered():
    w = Wire()
    w.handshake()
    w.send(C, S, ISN_C + 1, ISN_S + 1, TCP_FIN | TCP_ACK)
    assert w.tracker.take_finished() == []
    w.send(S, C, ISN_S + 1, ISN_C + 2, TCP_FIN | TCP_ACK)
    assert w.tracker.take_finished() == [w.conn]
    w.send(C, S, ISN_C + 2, ISN_S + 2)  # the last ACK: counted, nothing to reassemble
    assert w.conn.packets == 6 and w.tracker.close() == []


def test_fins_with_a_hole_before_them_wait_for_the_retransmission():
    w = Wire()
    w.handshake()
    w.send(S, C, ISN_S + 11, ISN_C + 1, TCP_FIN | TCP_ACK, payload=b"b" * 10)
    w.send(C, S, ISN_C + 1, ISN_S + 1, TCP_FIN | TCP_ACK)
    assert w.tracker.take_finished() == []  # bytes 0..10 may still come
    w.send(S, C, ISN_S + 1, ISN_C + 2, payload=b"a" * 10)
    assert w.tracker.take_finished() == [w.conn]
    data = b"".join(p.data for _c, d, p in w.out if d == "server" and hasattr(p, "data"))
    assert data == b"a" * 10 + b"b" * 10


def test_capture_stats_and_interface_drops_reach_the_reassembly(tmp_path):
    from sse_forensics.ingest.inputs import merged_frames
    from sse_forensics.reassembly.capture import reassemble

    def block(btype: int, body: bytes) -> bytes:
        body += b"\0" * (-len(body) % 4)
        return struct.pack("<II", btype, len(body) + 12) + body + struct.pack("<I", len(body) + 12)

    isb_opts = struct.pack("<HH", 5, 8) + struct.pack("<Q", 7) + struct.pack("<HH", 0, 0)
    content = (
        block(0x0A0D0D0A, struct.pack("<IHHq", 0x1A2B3C4D, 1, 0, -1))
        + block(1, struct.pack("<HHI", 101, 0, 0))
        + block(5, struct.pack("<III", 0, 0, 0) + isb_opts)
    )
    path = tmp_path / "drops.pcapng"
    path.write_bytes(content)
    result = reassemble(merged_frames([str(path)]))
    assert result.capture_stats[str(path)].interface_drops == {0: 7}
    assert result.loss.interface_drops == 7
    assert result.loss.as_dict()["per_file_drops"] == {str(path): 7}
