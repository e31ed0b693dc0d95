"""Property and fuzz tests: random and mutated inputs never raise out of the readers, the
TCP reassembly, the HTTP/SSE parsers or the whole scan, never hang, stay in bounded memory.

Bounded time by default (a few seconds per target). ``SSE_FORENSICS_FUZZ_EXAMPLES=N`` runs
N examples per target instead (e.g. 5000 in a nightly job).
"""

from __future__ import annotations

import os
import signal
import tracemalloc
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.mutations import mutated_capture

from sse_forensics.errors import ReadError, UnreadableInput
from sse_forensics.ingest.linklayer import decode_tcp
from sse_forensics.ingest.packets import TCP_ACK, TCP_FIN, TCP_RST, TCP_SYN, Frame, TCPSegment
from sse_forensics.ingest.pcap import read_frames
from sse_forensics.pipeline import scan_paths
from sse_forensics.provenance import Origin
from sse_forensics.reassembly.capture import reassemble
from sse_forensics.reassembly.flows import ConnectionTracker
from sse_forensics.reassembly.http import HTTPConnection
from sse_forensics.reassembly.sse import SSEParser
from sse_forensics.reassembly.stream import Inconsistency, MissingSpan, StreamData

SAMPLES = Path(__file__).resolve().parents[2] / "samples"
EXAMPLES = int(os.environ.get("SSE_FORENSICS_FUZZ_EXAMPLES", "40"))
PER_EXAMPLE_SECONDS = 10  # a hang, not a slow example: every input here is a few KB
SMALL_SAMPLES = sorted(
    p for p in SAMPLES.glob("*.pcap*") if p.stat().st_size < 16_000 and p.is_file()
)
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    derandomize="SSE_FORENSICS_FUZZ_EXAMPLES" not in os.environ,
)


@contextmanager
def time_limit(seconds: int = PER_EXAMPLE_SECONDS) -> Iterator[None]:
    def hang(_signum, _frame):
        raise TimeoutError(f"example ran over {seconds} s: a hang")

    previous = signal.signal(signal.SIGALRM, hang)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


@FUZZ
@given(mutated_capture(SMALL_SAMPLES))
def test_readers_never_raise_on_mutated_captures(tmp_path_factory, content):
    path = tmp_path_factory.mktemp("fuzz") / "m.pcap"
    path.write_bytes(content)
    with time_limit():
        try:
            reader = read_frames(str(path))
        except UnreadableInput:
            return  # the magic number was hit: refused up front, as documented
        items = list(reader)
    assert all(isinstance(i, Frame | ReadError) for i in items)
    assert sum(isinstance(i, ReadError) and "ends inside" in i.what for i in items) <= 1
    for item in items:
        if isinstance(item, Frame):
            decode_tcp(item)  # never raises: a segment, a ReadError or None


@FUZZ
@given(mutated_capture(SMALL_SAMPLES))
def test_scan_never_raises_and_stays_small_on_mutated_captures(tmp_path_factory, content):
    path = tmp_path_factory.mktemp("fuzz") / "m.pcap"
    path.write_bytes(content)
    tracemalloc.start()
    try:
        with time_limit():
            try:
                result = scan_paths([str(path)])
            except UnreadableInput:
                return
        _current, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert result.stats.frames >= 0
    assert peak < 64 << 20, f"{peak} bytes traced for a {len(content)}-byte capture"


SEQ_BASE = (1 << 32) - 3000  # near the wrap, so offsets cross it


@st.composite
def segments(draw) -> list[TCPSegment]:
    c, s = ("10.0.0.1", 50000), ("10.0.0.2", 80)
    out = []
    for n in range(draw(st.integers(1, 40))):
        from_client = draw(st.booleans())
        frm, to = (c, s) if from_client else (s, c)
        flags = draw(st.sampled_from([TCP_ACK, TCP_ACK, TCP_ACK, TCP_SYN, TCP_FIN | TCP_ACK]))
        if draw(st.integers(0, 30)) == 0:
            flags |= TCP_RST
        seq = (SEQ_BASE + draw(st.integers(-200, 6000))) % (1 << 32)
        ack = (SEQ_BASE + draw(st.integers(-200, 6000))) % (1 << 32)
        payload = draw(st.binary(max_size=300))
        out.append(
            TCPSegment(
                Origin("f.pcap", n + 1, n / 10),
                *frm,
                *to,
                seq,
                ack,
                flags,
                draw(st.sampled_from([0, 1, 512, 65535])),
                payload,
                draw(st.sampled_from([0, 0, 0, 7])),
            )
        )
    return out


@FUZZ
@given(segments())
def test_tcp_reassembly_pieces_are_contiguous_per_direction(segs):
    tracker = ConnectionTracker(max_buffered=2048)
    out = []
    with time_limit():
        for seg in segs:
            out += tracker.feed(seg)
        out += tracker.close()
    ends: dict[tuple[int, str], int] = {}
    for conn, direction, piece in out:
        key = (conn.id, direction)
        if isinstance(piece, Inconsistency):
            # A report on bytes already emitted or held, not more bytes.
            assert piece.offset >= 0 and piece.length > 0
            assert piece.first_bytes != piece.second_bytes
            continue
        if isinstance(piece, MissingSpan) and piece.reason == "mid-stream":
            assert key not in ends and piece.offset == 0
            ends[key] = 0
            continue
        assert piece.offset == ends.get(key, 0), "a byte emitted twice or skipped silently"
        size = len(piece.data) if isinstance(piece, StreamData) else piece.length
        assert size and size > 0
        ends[key] = piece.offset + size
    for conn in tracker.connections:
        for direction, loss in conn.loss.items():
            seen = sum(
                len(p.data)
                for c, d, p in out
                if c is conn and d == direction and isinstance(p, StreamData)
            )
            assert loss.bytes_seen == seen


@st.composite
def http_bytes(draw) -> bytes:
    parts = [
        b"HTTP/1.1 200 OK\r\n",
        b"GET /mcp HTTP/1.1\r\n",
        b"Content-Type: text/event-stream\r\n",
        b"Transfer-Encoding: chunked\r\n",
        b"Content-Length: 12\r\n",
        b"Content-Encoding: gzip\r\n",
        b"\r\n",
        b"1a\r\n",
        b"0\r\n\r\n",
        b"id: 3\ndata: x\n\n",
        b"ffffffffffff\r\n",
    ]
    chosen = draw(st.lists(st.sampled_from(parts) | st.binary(max_size=40), max_size=30))
    return b"".join(chosen)


@FUZZ
@given(
    http_bytes(),
    http_bytes(),
    st.lists(st.integers(1, 64), min_size=1, max_size=8),
    st.lists(st.integers(0, 40), max_size=3),
)
def test_http_and_sse_never_raise(client, server, cuts, holes):
    http = HTTPConnection()
    parsers: dict[int, SSEParser] = {}
    frame = 0
    with time_limit():
        for direction, data in (("client", client), ("server", server)):
            pos, i = 0, 0
            while pos < len(data):
                size = cuts[i % len(cuts)]
                i += 1
                frame += 1
                origin = Origin("h.pcap", frame, float(frame))
                events = http.feed(direction, data[pos : pos + size], origin)
                if i - 1 < len(holes) and holes[i - 1]:
                    span = MissingSpan(direction, pos + size, holes[i - 1], "hole", origin, None)
                    events += http.missing(span)
                pos += size
                for ev in events:
                    # HTTPConnection turns a parser exception into this event so a scan goes
                    # on; on any input it is a parser bug, which this test must catch.
                    assert "internal parser error" not in str(getattr(ev, "what", "")), ev
                    data_ = getattr(ev, "data", None)
                    index = getattr(ev, "exchange", 0)
                    if type(ev).__name__ == "ResponseBody" and data_ is not None:
                        parsers.setdefault(index, SSEParser(report_empty=True)).feed(data_, origin)
                    elif type(ev).__name__ == "BodyGap" and index in parsers:
                        parsers[index].skip(ev.span.length)
            http.end(direction, None, "capture-end")
        for parser in parsers.values():
            parser.close()
            parser.take_partial_blocks()


@FUZZ
@given(st.binary(max_size=2000), st.lists(st.integers(1, 50), min_size=1, max_size=10))
def test_sse_split_anywhere_gives_the_same_events(body, cuts):
    whole = SSEParser(report_empty=True)
    expected = whole.feed(body) + whole.close()
    split = SSEParser(report_empty=True)
    got, pos, i = [], 0, 0
    while pos < len(body):
        size = cuts[i % len(cuts)]
        got += split.feed(body[pos : pos + size])
        pos, i = pos + size, i + 1
    got += split.close()
    strip = [(e.id, e.event, e.data, e.start, e.end) for e in expected]
    assert [(e.id, e.event, e.data, e.start, e.end) for e in got] == strip


def test_one_byte_segments_are_linear_in_time_and_hold_nothing():
    """Bounded time and memory for a degenerate flow: an SSE response sent one byte per
    segment (about 20,000 of them) is delivered byte by byte with nothing held back."""
    c, s = ("10.0.0.1", 50000), ("10.0.0.2", 80)
    body = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n" + b"data: x\n\n" * 2000
    segs = [
        TCPSegment(
            Origin("one.pcap", n + 1, n / 1000), *s, *c, 1 + n, 0, TCP_ACK, 1000, body[n : n + 1]
        )
        for n in range(len(body))
    ]
    tracker = ConnectionTracker()
    with time_limit(20):
        out = [p for seg in segs for p in tracker.feed(seg)]
    data = [p for _c, _d, p in out if isinstance(p, StreamData)]
    assert b"".join(p.data for p in data) == body and len(data) == len(body)
    with time_limit(20):
        result = reassemble(
            Frame(seg.origin, 101, _ipv4_tcp(seg), 40 + len(seg.payload)) for seg in segs
        )
    (ex,) = result.exchanges
    assert len(ex.events) == 2000


def _ipv4_tcp(seg: TCPSegment) -> bytes:
    import socket
    import struct

    tcp = struct.pack(
        "!HHIIBBHHH", seg.sport, seg.dport, seg.seq, seg.ack, 0x50, seg.flags, seg.window, 0, 0
    )
    ip = struct.pack(
        "!BBHHHBBH4s4s",
        0x45,
        0,
        40 + len(seg.payload),
        0,
        0,
        64,
        6,
        0,
        socket.inet_aton(seg.src),
        socket.inet_aton(seg.dst),
    )
    return ip + tcp + seg.payload


def test_reassemble_of_random_frames_never_raises():
    import random

    rng = random.Random(7)
    frames = []
    for n in range(3000):
        linktype = rng.choice([0, 1, 101, 113, 276])
        data = rng.randbytes(rng.randint(0, 90))
        if linktype == 101 and data:
            data = b"\x45" + data[1:9] + b"\x06" + data[10:]  # IPv4, protocol TCP
        frames.append(Frame(Origin("r.pcap", n + 1, n), linktype, data, 90))
    with time_limit():
        result = reassemble(frames)
    assert result.frames == 3000


def test_a_parser_exception_is_visible_to_the_fuzz_test(monkeypatch) -> None:
    """The fuzz test above fails on a parser crash: HTTPConnection turns the exception into
    an ``internal parser error`` event (the scan goes on), which that test rejects."""
    from sse_forensics.reassembly.http.reader import DirectionReader

    def crash(self, buf, pos, out):
        raise ValueError("boom")

    monkeypatch.setattr(DirectionReader, "run", crash)
    events = HTTPConnection().feed("client", b"GET / HTTP/1.1\r\n\r\n", Origin("h.pcap", 1, 1.0))
    assert any("internal parser error" in str(getattr(ev, "what", "")) for ev in events)
