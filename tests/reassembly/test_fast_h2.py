"""The fast path's HTTP/2 route (sse_forensics/reassembly/fast/h2.py) against its definition,
the exact path: random h2c conversations — several streams, DATA interleaved, frames cut
across TCP segments and segments holding several frames, both directions interleaved, the
client resetting a stream, GOAWAY, trailers, CONTINUATION, interim responses, a request
body — give the same rows, errors and connections on both paths, whether the route takes
them or hands them over (padded DATA, a content-coded response, TCP anomalies)."""

from __future__ import annotations

import gzip
import random
import struct
from pathlib import Path

import pytest
from hpack import Encoder
from hyperframe.frame import (
    ContinuationFrame,
    DataFrame,
    GoAwayFrame,
    HeadersFrame,
    RstStreamFrame,
    SettingsFrame,
    WindowUpdateFrame,
)
from support.fast_path import ACK, PSH, Conversation, assert_equivalent, fast

from sse_forensics.reassembly.fast.h2 import R_H2_CODING, R_H2_FRAME
from sse_forensics.reassembly.h2 import PREFACE


class _CleanConversation(Conversation):
    """A conversation whose TCP is clean (random segment sizes, nothing lost or resent):
    only HTTP/2 decides whether the route takes it."""

    def stream(self, client: bool, data: bytes) -> None:
        rng = self.rng
        pos = 0
        while pos < len(data):
            size = rng.choice([1, 5, 9, 17, 100, 536, 1448])
            self.send(client, PSH | ACK, data[pos : pos + size], gap=rng.uniform(1e-5, 1e-3))
            pos += size
            if rng.random() < 0.5:
                self.send(not client, ACK, gap=rng.uniform(1e-5, 1e-3))


def _headers(encoder: Encoder, stream: int, fields: list, end: bool, rng: random.Random) -> bytes:
    block = encoder.encode(fields)
    if rng.random() < 0.2 and len(block) > 4:  # HEADERS + CONTINUATION
        cut = rng.randint(1, len(block) - 1)
        first = HeadersFrame(stream, block[:cut])
        rest = ContinuationFrame(stream, block[cut:])
        rest.flags.add("END_HEADERS")
        if end:
            first.flags.add("END_STREAM")
        return first.serialize() + rest.serialize()
    frame = HeadersFrame(stream, block)
    frame.flags.add("END_HEADERS")
    if end:
        frame.flags.add("END_STREAM")
    return frame.serialize()


def _data(stream: int, body: bytes, end: bool = False, padded: bool = False) -> bytes:
    frame = DataFrame(stream, body)
    if end:
        frame.flags.add("END_STREAM")
    if padded:
        frame.flags.add("PADDED")
        frame.pad_length = 3
    return frame.serialize()


def h2_capture(seed: int, clean: bool = True, tls: bool = False, events: int = 12) -> bytes:
    """An h2c conversation (see the module docstring) as a pcap; with ``tls``, inside TLS
    1.3 (:func:`_tls13`); up to ``events`` events per stream (more: exactly that many)."""
    rng = random.Random(seed)
    conv = (_CleanConversation if clean else Conversation)(rng, 0)
    conv.handshake()
    client, server = Encoder(), Encoder()
    preface = PREFACE + SettingsFrame(0).serialize()
    if not tls:  # the preface in one segment, as clients send it (sniffed from it)
        conv.send(True, PSH | ACK, preface)
    sends: list[tuple[bool, bytes]] = [(True, preface)] if tls else []
    sends.append((False, SettingsFrame(0).serialize()))
    ids = [1, 3, 5][: rng.randint(1, 3)]
    open_streams: dict[int, list[bytes]] = {}
    for sid in ids:
        post = rng.random() < 0.3
        fields = [
            (":method", "POST" if post else "GET"),
            (":path", "/mcp"),
            (":scheme", "http"),
            (":authority", "x"),
            ("mcp-session-id", f"s{seed}"),
        ]
        if not post:
            fields.append(("last-event-id", str(rng.randint(0, 9))))
        sends.append((True, _headers(client, sid, fields, not post, rng)))
        if post:
            body = b'{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{}}' % sid
            sends.append((True, _data(sid, body, end=True)))
        if rng.random() < 0.1:
            sends.append((False, _headers(server, sid, [(":status", "103")], False, rng)))
        kind = rng.random()
        resp = [(":status", "200"), ("content-type", "text/event-stream")]
        if kind < 0.08:
            resp.append(("content-encoding", "gzip"))
        elif kind < 0.2:
            resp = [(":status", "200"), ("content-type", "application/json")]
        sends.append((False, _headers(server, sid, resp, False, rng)))
        count = rng.randint(0, events) if events <= 12 else events
        events_of = [b'id: %d\ndata: {"n":%d}\n\n' % (n, n) for n in range(count)]
        if kind < 0.08:
            events_of = [gzip.compress(b"".join(events_of))]
        open_streams[sid] = events_of
    # The server's DATA, streams interleaved; the client resets one, or the server goes away.
    reset = rng.choice([*ids, None, None])
    padded = rng.random() < 0.1
    while open_streams:
        sid = rng.choice(list(open_streams))
        pending = open_streams[sid]
        if pending:
            sends.append((False, _data(sid, pending.pop(0), padded=padded and rng.random() < 0.3)))
            if rng.random() < 0.1:
                sends.append((True, WindowUpdateFrame(0, 1000).serialize()))
            if sid == reset and rng.random() < 0.3:
                sends.append((True, RstStreamFrame(sid, error_code=8).serialize()))
                reset = None
                if rng.random() < 0.5:  # DATA the server had already sent
                    sends.append((False, _data(sid, b"id: 99\ndata: {}\n\n")))
                del open_streams[sid]
            continue
        end = rng.random()
        if end < 0.15:  # trailers end the stream
            sends.append((False, _headers(server, sid, [("x-done", "1")], True, rng)))
        elif end < 0.8:
            sends.append((False, _data(sid, b"", end=True)))
        del open_streams[sid]  # else: left open (the connection's end ends it)
    if rng.random() < 0.2:
        sends.append((False, GoAwayFrame(0, last_stream_id=1).serialize()))
    if tls:
        sends = _tls13(sends, rng)
        # The ClientHello in one segment, as clients send it (sniffed from it).
        conv.send(True, PSH | ACK, sends.pop(0)[1])
    # Consecutive sends of one side in one go, then cut into segments.
    for client_side, data in _runs(sends, rng):
        conv.stream(client_side, data)
    conv.close()
    out = [struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1)]
    ts = 1_700_000_000.0
    for gap, frame in conv.frames:
        ts += gap + 1e-5
        sec = int(ts)
        usec = min(int((ts - sec) * 1e6), 999_999)
        out.append(struct.pack("<IIII", sec, usec, len(frame), len(frame)) + frame)
    return b"".join(out)


def _runs(sends: list[tuple[bool, bytes]], rng: random.Random) -> list[tuple[bool, bytes]]:
    out: list[tuple[bool, bytes]] = []
    for side, data in sends:
        if out and out[-1][0] == side and rng.random() < 0.6:
            out[-1] = (side, out[-1][1] + data)
        else:
            out.append((side, data))
    return out


@pytest.mark.parametrize("seed", range(40))
def test_random_h2c_conversations(tmp_path: Path, seed: int) -> None:
    path = tmp_path / "h2c.pcap"
    path.write_bytes(h2_capture(seed, clean=seed % 4 != 3))
    assert_equivalent([str(path)])


def test_the_route_takes_clean_h2c_and_hands_over_what_it_cannot_prove(tmp_path: Path) -> None:
    taken, reasons = 0, set()
    for seed in range(40):
        path = tmp_path / f"h2c-{seed}.pcap"
        path.write_bytes(h2_capture(seed))
        got, _rows = fast([str(path)])
        taken += got.fast
        reasons |= set(got.fallbacks)
        assert all(c.application == "h2" for c in got.connections)
    assert taken >= 25, taken
    assert {R_H2_FRAME, R_H2_CODING} <= reasons, reasons  # padded DATA, gzip


# -- HTTP/2 inside TLS 1.3 ---------------------------------------------------------------------

CLIENT_SECRET, SERVER_SECRET = bytes(range(1, 33)), bytes(range(33, 65))


def _tls13(sends: list[tuple[bool, bytes]], rng: random.Random) -> list[tuple[bool, bytes]]:
    """``sends`` as TLS 1.3 records (TLS_AES_128_GCM_SHA256) of random sizes — HTTP/2 frames
    cut across records, records holding several frames — after the two hellos."""
    from support.tls_records import client_hello, server_hello, tls13_record

    out = [(True, client_hello(b"\x02\x03\x04")), (False, server_hello(0x1301, True))]
    seq = {True: 0, False: 0}
    for client_side, data in sends:
        secret = CLIENT_SECRET if client_side else SERVER_SECRET
        records = b""
        pos = 0
        while pos < len(data):
            # The preface in one record, as clients send it (sniffed from it).
            first = pos == 0 and data.startswith(PREFACE)
            size = len(PREFACE) if first else rng.choice([1, 3, 9, 40, 1000])
            records += tls13_record(secret, seq[client_side], 23, data[pos : pos + size])
            seq[client_side] += 1
            pos += size
        out.append((client_side, records))
    return out


def _keylog(path: Path) -> Path:
    from support.tls_records import CLIENT_RANDOM

    random_hex = CLIENT_RANDOM.hex()
    path.write_text(
        f"CLIENT_TRAFFIC_SECRET_0 {random_hex} {CLIENT_SECRET.hex()}\n"
        f"SERVER_TRAFFIC_SECRET_0 {random_hex} {SERVER_SECRET.hex()}\n"
    )
    return path


@pytest.mark.parametrize("seed", range(16))
def test_random_h2_conversations_inside_tls(tmp_path: Path, seed: int) -> None:
    from sse_forensics.facts.config import AnalysisConfig

    path = tmp_path / "h2-tls.pcap"
    path.write_bytes(h2_capture(seed, tls=True))
    config = AnalysisConfig(tls_keylog=(str(_keylog(tmp_path / "keys")),))
    got = assert_equivalent([str(path)], config=config)
    assert all(c.tls.decrypted and c.application == "h2" for c in got.connections)


def test_the_routes_take_random_h2_inside_tls(tmp_path: Path) -> None:
    from sse_forensics.facts.config import AnalysisConfig
    from sse_forensics.reassembly.fast.tls import R_TLS_UNREAD

    config = AnalysisConfig(tls_keylog=(str(_keylog(tmp_path / "keys")),))
    taken, reasons = 0, set()
    for seed in range(16):
        path = tmp_path / f"h2-tls-{seed}.pcap"
        path.write_bytes(h2_capture(seed, tls=True))
        got, _rows = fast([str(path)], config=config)
        taken += got.fast
        reasons |= set(got.fallbacks)
    assert taken >= 12 and R_TLS_UNREAD not in reasons, (taken, reasons)


def test_cost_grows_linearly_with_the_stream(tmp_path: Path) -> None:
    """Python calls of the fast path for an HTTP/2-in-TLS stream of N and 2N events: about
    twice (as tests/facts/test_scaling_shape.py counts them), never four times."""
    import cProfile
    import pstats

    from sse_forensics.facts.config import AnalysisConfig

    config = AnalysisConfig(tls_keylog=(str(_keylog(tmp_path / "keys")),))
    calls = []
    for events in (1500, 3000):
        path = tmp_path / f"h2-tls-{events}.pcap"
        path.write_bytes(h2_capture(1, tls=True, events=events))
        profile = cProfile.Profile()
        profile.enable()
        got, rows = fast([str(path)], config=config)
        profile.disable()
        assert got.fast == 1 and rows.tables()[2].height >= events
        calls.append(pstats.Stats(profile).total_calls)  # type: ignore[attr-defined]
    assert calls[1] / calls[0] < 2.3, calls
