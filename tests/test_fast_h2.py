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
from test_fast_reassembly import ACK, PSH, _Conversation, assert_equivalent, fast

from sse_forensics.reassembly.fast.h2 import R_H2_CODING, R_H2_FRAME
from sse_forensics.reassembly.h2 import PREFACE


class _CleanConversation(_Conversation):
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


def h2_capture(seed: int, clean: bool = True) -> bytes:
    """An h2c conversation (see the module docstring) as a pcap."""
    rng = random.Random(seed)
    conv = (_CleanConversation if clean else _Conversation)(rng, 0)
    conv.handshake()
    client, server = Encoder(), Encoder()
    # The preface in one segment, as clients send it (both paths sniff the first segment).
    conv.send(True, PSH | ACK, PREFACE + SettingsFrame(0).serialize())
    sends: list[tuple[bool, bytes]] = [(False, SettingsFrame(0).serialize())]
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
        events = [b'id: %d\ndata: {"n":%d}\n\n' % (n, n) for n in range(rng.randint(0, 12))]
        if kind < 0.08:
            events = [gzip.compress(b"".join(events))]
        open_streams[sid] = events
    # The server's DATA, streams interleaved; the client resets one, or the server goes away.
    reset = rng.choice([*ids, None, None])
    padded = rng.random() < 0.1
    while open_streams:
        sid = rng.choice(list(open_streams))
        events = open_streams[sid]
        if events:
            sends.append((False, _data(sid, events.pop(0), padded=padded and rng.random() < 0.3)))
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
