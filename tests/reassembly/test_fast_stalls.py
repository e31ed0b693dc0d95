"""Stalls and keep-alives judged from the fast path's columns (``fast/tcp.py`` ``_stalls``,
issue 16) against the exact :class:`TCPAnalyzer` run over the same connection's segments:
the same stall records (sender, reason, start, end, retransmission) and notes, at the end of
the capture and as they stood when the connection was finalised, and the same evidence end
to end.

Crafted connections: a stall of the server or of the client, one ended by a retransmission,
one before a FIN or an RST, one judged after the connection was finalised, silences up to
the end of the capture (judged there or, once finalised, not), both sides judged at one
segment, timestamps that step back, a silence of exactly one second, sequence numbers that
wrap, a receiver that never acknowledged, a sender idle with everything acknowledged;
keep-alives (bare and of one byte) among FIN and RST notes, before and after the
finalisation, and one that ends a stall."""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pytest
from support.fast_path import ACK, FIN, PSH, RST, SYN, assert_equivalent

from sse_forensics.ingest.packet_index import index_capture
from sse_forensics.reassembly.fast import tcp
from sse_forensics.reassembly.tcp_analysis import TCPState

T0 = (1 << 31) - 2
"""2038: a float timestamp's unit doubles 2 s in (see :func:`exactly_one_second`)."""
SEQ_MOD = 1 << 32


class Conn:
    """One connection 10.1.0.n:port -> 10.1.255.1:8000; ``nxt``: each side's next sequence
    number (True: the client's)."""

    def __init__(self, n: int, isn: int = 1000) -> None:
        self.ip = bytes((10, 1, 0, n + 2))
        self.port = 40000 + n
        self.nxt = {True: isn, False: (isn * 7 + 99) % SEQ_MOD}

    def frame(self, client: bool, flags: int, data: bytes, seq: int | None, ack: int | None):
        src, dst = (self.ip, b"\x0a\x01\xff\x01") if client else (b"\x0a\x01\xff\x01", self.ip)
        sport, dport = (self.port, 8000) if client else (8000, self.port)
        if seq is None:
            seq = self.nxt[client]
            self.nxt[client] = (seq + len(data) + (1 if flags & (SYN | FIN) else 0)) % SEQ_MOD
        if ack is None:
            ack = self.nxt[not client] if flags & ACK else 0
        tcp_h = struct.pack("!HHIIBBHHH", sport, dport, seq, ack, 5 << 4, flags, 65535, 0, 0)
        ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 40 + len(data), 0, 0x4000, 64, 6, 0, src, dst)
        eth = b"\x02\x00\x00\x00\x00\x01\x02\x00\x00\x00\x00\x02\x08\x00"
        return eth + ip + tcp_h + data


class Capture:
    """Frames of crafted connections at given times (seconds after ``T0``, microseconds),
    written in the order sent."""

    def __init__(self) -> None:
        self.frames: list[tuple[int, bytes]] = []

    def send(
        self,
        conn: Conn,
        at: float,
        client: bool,
        flags: int,
        data: bytes = b"",
        seq: int | None = None,
        ack: int | None = None,
    ) -> int:
        """One segment (``seq``/``ack`` default: the sender's next, all the peer sent);
        returns its frame number."""
        self.frames.append((round(at * 1e6), conn.frame(client, flags, data, seq, ack)))
        return len(self.frames)

    def handshake(self, conn: Conn, at: float) -> int:
        """SYN, SYN+ACK, ACK; returns the client's ack (of the server's SYN)."""
        self.send(conn, at, True, SYN)
        self.send(conn, at + 0.001, False, SYN | ACK)
        self.send(conn, at + 0.002, True, ACK)
        return conn.nxt[False]

    @staticmethod
    def ts(at: float) -> float:
        """The timestamp the index reads for ``at`` (sec + usec / 10**6)."""
        sec, usec = divmod(round(at * 1e6), 1_000_000)
        return T0 + sec + usec / 1_000_000

    def write(self, path: Path) -> str:
        out = [struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1)]
        for usecs, frame in self.frames:
            sec, usec = divmod(usecs, 1_000_000)
            out.append(struct.pack("<IIII", T0 + sec, usec, len(frame), len(frame)) + frame)
        path.write_bytes(b"".join(out))
        return str(path)


D = PSH | ACK

# Each scenario writes its connections and returns the stalls the analyzer must record in
# them: (client port, sender, start frame, end frame or None, retransmission).
Expected = list[tuple[int, str, int, int | None, bool]]


def server_then_more(cap: Capture) -> Expected:
    """The server's data unacknowledged for 1.5 s, then more data; the client's request
    acknowledged (idle: no stall)."""
    c = Conn(1)
    cap.handshake(c, 0.0)
    cap.send(c, 0.01, True, D, b"GET / HTTP/1.1\r\n\r\n")
    cap.send(c, 0.02, False, ACK)
    start = cap.send(c, 0.03, False, D, b"HTTP/1.1 200 OK\r\n")
    end = cap.send(c, 1.53, False, D, b"more")
    cap.send(c, 1.54, True, ACK)
    cap.send(c, 1.55, True, FIN | ACK)
    cap.send(c, 1.56, False, FIN | ACK)
    cap.send(c, 1.57, True, ACK)
    return [(c.port, "server", start, end, False)]


def retransmitted(cap: Capture) -> Expected:
    """The server's data resent after 1.2 s (the client never acknowledged it)."""
    c = Conn(2)
    cap.handshake(c, 0.0)
    start = cap.send(c, 0.01, False, D, b"event: 1\n\n")
    end = cap.send(c, 1.21, False, D, b"event: 1\n\n", seq=c.nxt[False] - 10)
    cap.send(c, 1.22, True, ACK)
    return [(c.port, "server", start, end, True)]


def client_stall(cap: Capture) -> Expected:
    """The client's request, part of it acknowledged by the segment 2 s later that judges
    its silence, then the rest of the request."""
    c = Conn(3)
    cap.handshake(c, 0.0)
    start = cap.send(c, 0.01, True, D, b"POST / HTTP/1.1\r\n")
    cap.send(c, 2.01, False, ACK, ack=c.nxt[True] - 2)
    end = cap.send(c, 2.02, True, D, b"\r\n")
    return [(c.port, "client", start, end, False)]


def before_fin_and_rst(cap: Capture) -> Expected:
    """Silences judged at a FIN (the server's data unacknowledged: the FIN carries no ACK;
    the stall ends after the connection was finalised, open in the state at that point)
    and at an RST (the client's request)."""
    a = Conn(4)
    cap.handshake(a, 0.0)
    start_a = cap.send(a, 0.01, False, D, b"data")
    cap.send(a, 1.21, True, FIN)
    cap.send(a, 1.22, False, FIN | ACK)
    cap.send(a, 1.23, True, ACK)
    # Resent after the finalisation: it ends the stall, a retransmission, after it.
    end_a = cap.send(a, 1.3, False, D, b"data", seq=a.nxt[False] - 5)
    b = Conn(5)
    cap.handshake(b, 0.0)
    start_b = cap.send(b, 0.02, True, D, b"req")
    cap.send(b, 1.5, False, RST | ACK)
    return [(a.port, "server", start_a, end_a, True), (b.port, "client", start_b, None, False)]


def after_final(cap: Capture) -> Expected:
    """Both FINs, then the server's late data, silent 1.1 s before a stray ACK: judged after
    the connection was finalised (in the state at the end only), ended by more late data."""
    c = Conn(6)
    acked = cap.handshake(c, 0.0)
    cap.send(c, 0.01, True, FIN | ACK)
    cap.send(c, 0.02, False, FIN | ACK)
    start = cap.send(c, 0.03, False, D, b"late")
    cap.send(c, 1.13, True, ACK, ack=acked)
    end = cap.send(c, 1.2, False, D, b"later")
    return [(c.port, "server", start, end, False)]


def to_the_end(cap: Capture) -> Expected:
    """Silences up to the end of the capture: an open connection's (judged there), a
    finalised one's (not judged: the close at its FIN judges nothing), and one that ends
    less than a second before the end (not stalled)."""
    a = Conn(7)
    cap.handshake(a, 0.0)
    start = cap.send(a, 0.01, False, D, b"open")
    b = Conn(8)
    cap.handshake(b, 0.0)
    cap.send(b, 0.01, True, FIN | ACK)
    cap.send(b, 0.02, False, FIN | ACK)
    cap.send(b, 0.03, False, D, b"late")
    c = Conn(9)
    cap.handshake(c, 2.0)
    cap.send(c, 2.5, False, D, b"young")
    return [(a.port, "server", start, None, False)]


def both_at_once(cap: Capture) -> Expected:
    """Both sides' data unacknowledged (no ACK flags), both judged at one client segment
    1.5 s later: its sender's stall is recorded first."""
    c = Conn(10)
    cap.handshake(c, 0.0)
    start_s = cap.send(c, 0.01, False, PSH, b"s")
    start_c = cap.send(c, 0.02, True, PSH, b"c")
    end_c = cap.send(c, 1.6, True, PSH, b"d")
    return [(c.port, "client", start_c, end_c, False), (c.port, "server", start_s, None, False)]


def stepping_back(cap: Capture) -> Expected:
    """Timestamps that step back: a client segment 1.2 s after the server's data judges its
    silence, a later one back in time does not, nor the data that ends the stall after it;
    a second silence is judged at the first segment a second later, after two earlier."""
    c = Conn(11)
    acked = cap.handshake(c, 0.0)
    start = cap.send(c, 0.5, False, D, b"one")
    cap.send(c, 0.3, True, ACK, ack=acked)
    cap.send(c, 1.7, True, ACK, ack=acked)
    cap.send(c, 0.9, True, ACK, ack=acked)
    end = cap.send(c, 2.0, False, D, b"two")
    start2 = cap.send(c, 2.8, False, D, b"three")
    cap.send(c, 3.5, True, ACK, ack=acked)
    cap.send(c, 2.0, True, ACK, ack=acked)
    end2 = cap.send(c, 3.9, False, D, b"four")
    return [(c.port, "server", start, end, False), (c.port, "server", start2, end2, False)]


def exactly_one_second(cap: Capture) -> Expected:
    """Silences of one second in microseconds, across the second where the timestamps'
    float unit doubles: the float difference the analyzer computes decides (some fall
    short of 1.0, some reach it, some pass it). First of :data:`SCENARIOS` (not moved)."""
    out: Expected = []
    for k, at in enumerate((1.0, 1.000003, 1.000006, 1.25)):
        c = Conn(12 + k)
        acked = cap.handshake(c, 0.0)
        start = cap.send(c, at, False, D, b"x")
        cap.send(c, at + 1.0, True, ACK, ack=acked)
        end = cap.send(c, at + 1.0, False, D, b"z")
        if cap.ts(at + 1.0) - cap.ts(at) >= 1.0:
            out.append((c.port, "server", start, end, False))
    assert 0 < len(out) < 4  # both sides of the boundary
    return out


def wrapping(cap: Capture) -> Expected:
    """Sequence numbers that wrap inside the stalled data, which is resent."""
    c = Conn(16, isn=SEQ_MOD - 3)
    c.nxt[False] = SEQ_MOD - 5
    cap.handshake(c, 0.0)
    start = cap.send(c, 0.01, False, D, b"wrapping")
    end = cap.send(c, 1.5, False, D, b"wrapping", seq=(c.nxt[False] - 8) % SEQ_MOD)
    return [(c.port, "server", start, end, True)]


def never_acknowledged(cap: Capture) -> Expected:
    """A receiver that sent no ACK at all (the client's SYN, then data without ACK): the
    analyzer knows no ack of it, so the server's silence is no stall."""
    c = Conn(17)
    cap.send(c, 0.0, True, SYN)
    cap.send(c, 0.001, False, SYN | ACK)
    cap.send(c, 0.002, False, D, b"early")
    cap.send(c, 1.5, True, PSH, b"late")
    return []


def keep_alives(cap: Capture) -> Expected:
    """Keep-alives of both sides (bare, and one byte at next - 1) before, between and after
    the FINs and beside an RST; a one-byte keep-alive 1.5 s after unacknowledged data ends
    that stall as a retransmission (it is payload). Not a keep-alive: a bare ACK at next."""
    c = Conn(18)
    cap.handshake(c, 0.0)
    cap.send(c, 0.01, True, D, b"GET /sse HTTP/1.1\r\n\r\n")
    cap.send(c, 0.02, False, ACK)
    cap.send(c, 0.03, True, ACK, seq=c.nxt[True] - 1)  # bare keep-alive
    start = cap.send(c, 0.04, False, D, b"HTTP/1.1 200 OK\r\n")
    end = cap.send(c, 1.54, False, ACK, b"\n", seq=c.nxt[False] - 1)  # resends one byte
    cap.send(c, 1.55, True, ACK, b"")  # at next: no keep-alive
    cap.send(c, 1.56, True, FIN | ACK)
    cap.send(c, 1.57, True, ACK, seq=c.nxt[True] - 1)
    cap.send(c, 1.58, False, FIN | ACK)
    cap.send(c, 1.59, True, ACK)
    cap.send(c, 3.0, True, ACK, b"x", seq=c.nxt[True] - 1)  # after the final; all acked
    cap.send(c, 3.1, False, RST | ACK)
    cap.send(c, 3.2, False, ACK, seq=c.nxt[False] - 1)
    return [(c.port, "server", start, end, True)]


SCENARIOS = (
    exactly_one_second,
    server_then_more,
    retransmitted,
    client_stall,
    before_fin_and_rst,
    after_final,
    to_the_end,
    both_at_once,
    stepping_back,
    wrapping,
    never_acknowledged,
    keep_alives,
)


def _stalls(state: TCPState) -> list[tuple[str, str, int, int | None, bool]]:
    return [
        (s.sender, s.reason, s.start.number, s.end.number if s.end else None, s.retransmission)
        for s in state.stalls
    ]


def _check_group_by_group(path: str) -> dict[int, list]:
    """Each group's state from the columns (``build_connection``) equals the exact
    analyzer's over its segments, at the end and when finalised; returns the stalls at the
    end per client port."""
    got: dict[int, list] = {}
    with index_capture(path) as index:
        end = float(index.ts[-1])
        groups = tcp.group_flows(index)
        check = tcp.classify_groups(index, groups, end)
        for gi in range(len(groups)):
            assert check.candidate[gi], (gi, check.reason[gi])
            assert not check.exact_tcp[gi], gi  # the columns decide, not the exact analyzer
            conn, at_final = tcp.build_connection(index, groups, check, gi, gi, end)
            lo, hi = check.span(gi)
            final = int(check.final[gi]) - int(groups.starts[gi]) if check.final[gi] >= 0 else -1
            want, want_final = tcp._exact_tcp_state(
                index, groups.group_rows(gi), check.server[lo:hi], final, end
            )
            assert conn.tcp == want, (gi, conn.tcp.stalls, want.stalls)
            assert at_final.tcp == want_final, (gi, at_final.tcp.stalls, want_final.stalls)
            got[conn.client[1]] = _stalls(conn.tcp)
    return got


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.__name__)
def test_stalls_from_columns_equal_the_analyzer(tmp_path: Path, scenario) -> None:
    cap = Capture()
    expected = scenario(cap)
    path = cap.write(tmp_path / f"{scenario.__name__}.pcap")
    got = _check_group_by_group(path)
    want: dict[int, list] = {port: [] for port in got}
    for port, sender, start, end, resent in expected:
        want[port].append((sender, "unacknowledged", start, end, resent))
    assert got == want
    assert_equivalent([path], shards=(1,))


def test_stalls_of_every_scenario_in_one_capture_and_in_slices(tmp_path: Path, monkeypatch):
    """All scenarios in one capture, classified whole and a few rows at a time (the stall
    columns of slices joined): the same check, and the same evidence as the exact path."""
    cap = Capture()
    for k, scenario in enumerate(SCENARIOS):
        before = len(cap.frames)
        scenario(cap)
        # Each scenario's connections 10 s after the previous one's.
        cap.frames[before:] = [(at + 10_000_000 * k, f) for at, f in cap.frames[before:]]
    path = cap.write(tmp_path / "all.pcap")
    with index_capture(path) as index:
        groups = tcp.group_flows(index)
        whole = tcp.classify_groups(index, groups, float(index.ts[-1]))
        monkeypatch.setattr(tcp, "CLASSIFY_ROWS", 7)
        sliced = tcp.classify_groups(index, groups, float(index.ts[-1]))
    assert len(whole.stall_group) >= 10
    for name in tcp.GroupCheck.__slots__:
        a, b = getattr(whole, name), getattr(sliced, name)
        assert np.array_equal(np.asarray(a), np.asarray(b)), name
    _check_group_by_group(path)
    assert_equivalent([path], shards=(1, 2))


def test_keep_alives_from_columns(tmp_path: Path) -> None:
    """The keep-alive notes of :func:`keep_alives`, in segment order among FIN and RST notes
    (their equality with the analyzer's is checked group by group)."""
    cap = Capture()
    keep_alives(cap)
    path = cap.write(tmp_path / "keep-alives.pcap")
    _check_group_by_group(path)
    with index_capture(path) as index:
        groups = tcp.group_flows(index)
        check = tcp.classify_groups(index, groups, float(index.ts[-1]))
        conn, at_final = tcp.build_connection(index, groups, check, 0, 1, float(index.ts[-1]))
    notes = [(n.kind, n.direction, n.origin.number) for n in conn.tcp.tcp_notes]
    assert notes == [
        ("keep-alive", "client", 6),
        ("keep-alive", "server", 8),
        ("fin", "client", 10),
        ("keep-alive", "client", 11),
        ("fin", "server", 12),
        ("keep-alive", "client", 14),
        ("rst", "server", 15),
        ("keep-alive", "server", 16),
    ]
    assert [n.origin.number for n in at_final.tcp.tcp_notes] == [6, 8, 10, 11, 12]
