"""The fast reassembly path (sse_forensics/reassembly/fast/) against its definition: the exact
path (``reassemble`` + ``CaptureEvidence``). For every capture the fast path must give the
same evidence rows (as polars frames, sorted), errors (in order), counters, capture loss and
connections (the unpickled ``state`` column's fields too), unsharded and as shards combined.

Captures: the samples, the shared third-party captures, ``benchmarks/make_capture.py``
captures (where the fast path must be taken for every connection), random MCP-like
conversations written here (every framing and SSE form the fast path handles, and the
anomalies it must refuse), and mutated samples (as in test_fuzz.py).
"""

from __future__ import annotations

import json
import random
import struct
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.fast_path import (
    ROOT,
    Conversation,
    assert_equivalent,
    fast,
    make_capture_module,
    pcap_records,
)
from support.mutations import mutated_capture

from sse_forensics.errors import UnreadableInput
from sse_forensics.evidence.classify import classify, put_classified
from sse_forensics.ingest.inputs import merged_frames
from sse_forensics.reassembly.fast.rows import CLASS_COLUMNS, classify_events
from sse_forensics.reassembly.fast.sse import head_end

SAMPLES = ROOT / "samples"
SHARED = ROOT.parent / "shared" / "captures"


def _captures(folder: Path) -> list[Path]:
    return sorted(p for p in folder.glob("*.pcap*") if p.is_file()) if folder.is_dir() else []


# -- running both paths -------------------------------------------------------------------------


# -- samples, shared captures, make_capture ------------------------------------------------------

FALLBACKS: Counter[str] = Counter()
TAKEN: Counter[str] = Counter()


@pytest.mark.parametrize("path", _captures(SAMPLES) + _captures(SHARED), ids=lambda p: p.name)
def test_real_captures(path: Path) -> None:
    result = assert_equivalent([str(path)])
    TAKEN[path.parent.name] += result.fast
    FALLBACKS.update(result.fallbacks)


def test_the_fast_path_is_taken_on_real_captures() -> None:
    """On the samples and shared captures, how often the fast path is taken, and why not."""
    if not TAKEN:
        for path in _captures(SAMPLES) + _captures(SHARED):
            got, _ = fast([str(path)])
            TAKEN[path.parent.name] += got.fast
            FALLBACKS.update(got.fallbacks)
    print(f"\nfast connections: {dict(TAKEN)}; fallbacks: {dict(FALLBACKS)}")
    assert TAKEN["samples"] >= 60  # 68 of the 80 sample connections when this was written
    assert sum(FALLBACKS.values()) > 0


def test_directory_of_files_as_one_capture() -> None:
    paths = sorted(str(p) for p in _captures(SAMPLES))[:6]
    assert_equivalent(paths)


@pytest.mark.parametrize("seed", [1, 2, 25])
def test_make_capture_takes_the_fast_path(tmp_path: Path, seed: int) -> None:
    """3,000 packets, 50 connections of ~44 KB. Seed 25: four of them have server sequence
    numbers that wrap past 2^32 (seed 1: one, seed 2: none; a 20,000-packet capture, four
    times the CPU, had six and crossed no batch boundary either: the batches are
    test_small_batches_and_three_shards')."""
    path = tmp_path / "mcp.pcap"
    make_capture_module().write_capture(path, 3000, seed)
    result = assert_equivalent([str(path)])
    assert result.fast == 50, result.fallbacks
    assert not result.fallbacks


# -- random conversations ------------------------------------------------------------------------


def _chunked(rng: random.Random, body: bytes, last: bool = True) -> bytes:
    out = []
    pos = 0
    while pos < len(body):
        n = rng.randint(1, 200)
        piece = body[pos : pos + n]
        pos += len(piece)
        size = f"{len(piece):x}" if rng.random() < 0.9 else f"{len(piece):X}"
        ext = ";ext=1" if rng.random() < 0.03 else ""
        eol = "\r\n" if rng.random() < 0.98 else "\n"
        out.append(f"{size}{ext}\r\n".encode() + piece + eol.encode())
    if last:
        trailer = "X-Trailer: 1\r\n" if rng.random() < 0.05 else ""
        out.append(f"0\r\n{trailer}\r\n".encode())
    return b"".join(out)


def _rpc(rng: random.Random) -> str:
    r = rng.random()
    rid: Any = rng.choice([1, 2, "abc", 3.5, None, True, 10**20, -7])
    if r < 0.35:
        msg: Any = {
            "jsonrpc": "2.0",
            "method": "notifications/progress",
            "params": {"progress": rng.randint(0, 9)},
        }
    elif r < 0.55:
        msg = {"jsonrpc": "2.0", "id": rid, "result": {"protocolVersion": "2025-06-18"}}
    elif r < 0.65:
        msg = {"jsonrpc": "2.0", "id": rid, "error": {"code": -1}}
    elif r < 0.72:
        msg = {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": {}}
    elif r < 0.78:
        msg = [{"jsonrpc": "2.0", "method": "a"}, {"jsonrpc": "2.0", "id": 4, "result": 1}]
    elif r < 0.84:
        return '{"jsonrpc": "2.0", "method": '  # not JSON
    elif r < 0.9:
        msg = {"jsonrpc": "1.0", "id": 1}
    else:
        return "plain text"
    return json.dumps(msg)


def _sse(rng: random.Random) -> bytes:
    eol = rng.choice(["\n", "\n", "\n", "\r\n", "\r"])
    lines: list[str] = []
    if rng.random() < 0.03:
        lines.append("\ufeff")
    for _ in range(rng.randint(0, 8)):
        block = []
        if rng.random() < 0.2:
            block.append(": ping")
        if rng.random() < 0.8:
            block.append("id:" + rng.choice([" 1", " 2", "", " s1_3", " 7", "9"]))
        event = rng.random()
        if event < 0.1:
            block.append("event: stream-gap")
            block.append(f'data: {{"first": {rng.randint(1, 5)}, "last": 9}}')
        elif event < 0.15:
            block.append("event: close")
        elif event < 0.2:
            block.append("event: endpoint")
            block.append("data: /messages?session_id=s" + str(rng.randint(1, 3)))
        else:
            for _ in range(rng.choice([0, 1, 1, 1, 2])):
                block.append("data: " + _rpc(rng))
        if rng.random() < 0.05:
            block.append("retry: " + rng.choice(["1000", "x1", "99999999999"]))
        if rng.random() < 0.02:
            block.append("id: bad\x00id")
        lines.append(eol.join(block) + eol + eol)
    body = "".join(lines)
    if rng.random() < 0.2:
        body += "data: unterminated" + rng.choice(["", eol, eol + "id: 5" + eol])
    raw = body.encode()
    if rng.random() < 0.02:
        raw += b"data: \xff\xfe" + eol.encode() + eol.encode()
    return raw


def _request(rng: random.Random, session: str) -> tuple[bytes, str]:
    method = rng.choice(["POST", "POST", "POST", "GET", "GET", "HEAD", "DELETE"])
    target = rng.choice(["/mcp", "/mcp", "/session/abc/x", "/sse?session_id=q1"])
    headers = ["Host: 10.1.255.1:8000"]
    if session and rng.random() < 0.7:
        headers.append(f"Mcp-Session-Id: {session}")
    if rng.random() < 0.2:
        headers.append(f"Last-Event-ID: {rng.randint(0, 9)}")
    if rng.random() < 0.2:
        headers.append("MCP-Protocol-Version: 2025-06-18")
    if rng.random() < 0.01:
        headers.append("Upgrade: websocket")
    if rng.random() < 0.01:
        headers.append("bad header line")
    body = b""
    if method == "POST":
        body = json.dumps(
            rng.choice(
                [
                    {
                        "jsonrpc": "2.0",
                        "id": 0,
                        "method": "initialize",
                        "params": {"protocolVersion": "2025-03-26"},
                    },
                    {
                        "jsonrpc": "2.0",
                        "id": rng.randint(1, 9),
                        "method": "tools/call",
                        "params": {"name": "t", "_meta": {"progressToken": "p"}},
                    },
                    {"jsonrpc": "2.0", "method": "notifications/initialized"},
                ]
            )
        ).encode()
    if body and rng.random() < 0.1:
        headers.append("Transfer-Encoding: chunked")
        body = _chunked(rng, body)
    elif body or rng.random() < 0.2:
        headers.append(f"Content-Length: {len(body)}")
    eol = "\r\n" if rng.random() < 0.97 else "\n"
    head = f"{method} {target} HTTP/1.1{eol}" + "".join(h + eol for h in headers) + eol
    return head.encode() + body, method


def _response(rng: random.Random, method: str, session: str, last: bool) -> bytes:
    status = rng.choice([200, 200, 200, 200, 202, 204, 404, 410])
    interim = "HTTP/1.1 100 Continue\r\n\r\n" if rng.random() < 0.02 else ""
    headers = []
    if session and rng.random() < 0.8:
        headers.append(f"Mcp-Session-Id: {session}")
    stream = rng.random() < 0.6 and status == 200
    if stream:
        headers.append(
            "Content-Type: text/event-stream" + ("; charset=utf-8" if rng.random() < 0.2 else "")
        )
        headers.append("Cache-Control: " + rng.choice(["no-cache", "no-store"]))
        body = _sse(rng)
    else:
        headers.append("Content-Type: application/json")
        body = _rpc(rng).encode() if status != 204 else b""
    gzip_it = rng.random() < 0.02
    if gzip_it:
        import gzip

        headers.append("Content-Encoding: gzip")
        body = gzip.compress(body)
    r = rng.random()
    cut = last and rng.random() < 0.3  # the capture (or the close) ends inside it
    if r < 0.55:
        headers.append("Transfer-Encoding: chunked")
        body = _chunked(rng, body, last=not cut)
    elif r < 0.95 or not last:
        headers.append(f"Content-Length: {len(body)}")
        if cut:
            body = body[: len(body) // 2]
    head = f"HTTP/1.1 {status} Whatever\r\n" + "".join(h + "\r\n" for h in headers) + "\r\n"
    bodiless = method == "HEAD" or status == 204
    return interim.encode() + head.encode() + (b"" if bodiless else body)


def _conversation(rng: random.Random, n: int, port: int | None = None) -> Conversation:
    conv = Conversation(rng, n, port)
    conv.handshake()
    session = f"sess{rng.randint(0, 3)}" if rng.random() < 0.8 else ""
    exchanges = rng.randint(0, 4)
    pending: list[str] = []
    for k in range(exchanges):
        request, method = _request(rng, session)
        conv.stream(True, request)
        pending.append(method)
        if rng.random() < 0.15 and k + 1 < exchanges:
            continue  # pipelined: the next request goes out first
        if rng.random() < 0.05:
            continue  # never answered
        while pending:
            m = pending.pop(0)
            conv.stream(False, _response(rng, m, session, last=k + 1 == exchanges))
    if rng.random() < 0.03:
        conv.stream(False, b"garbage after the last response")
    conv.close()
    return conv


def random_capture(seed: int) -> bytes:
    rng = random.Random(seed)
    convs = [_conversation(rng, n) for n in range(rng.randint(1, 4))]
    reuse = rng.random() < 0.1  # a new connection on the first one's 4-tuple, after it
    if reuse:
        convs.append(_conversation(rng, 0, port=convs[0].c.port))
    queues = [list(c.frames) for c in convs]
    active = [i for i in range(len(convs)) if queues[i] and not (reuse and i == len(convs) - 1)]
    order: list[tuple[float, bytes]] = []
    while active:
        i = rng.choice(active)
        order.append(queues[i].pop(0))
        if not queues[i]:
            active.remove(i)
            if reuse and i == 0 and queues[-1]:
                active.append(len(convs) - 1)
    out = [struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1)]
    ts = 1_700_000_000.0
    for gap, frame in order:
        ts += gap + 1e-5
        sec = int(ts)
        usec = min(int((ts - sec) * 1e6), 999_999)
        out.append(struct.pack("<IIII", sec, usec, len(frame), len(frame)) + frame)
    return b"".join(out)


FUZZ = settings(
    max_examples=60,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


@FUZZ
@given(st.integers(0, 2**32 - 1))
def test_random_conversations(tmp_path_factory, seed: int) -> None:
    path = tmp_path_factory.mktemp("conv") / f"conv-{seed}.pcap"
    path.write_bytes(random_capture(seed))
    assert_equivalent([str(path)])


def test_random_conversations_mostly_take_the_fast_path(tmp_path: Path) -> None:
    taken = fallbacks = 0
    for seed in range(30):
        path = tmp_path / f"c{seed}.pcap"
        path.write_bytes(random_capture(seed))
        got, _ = fast([str(path)])
        taken += got.fast
        fallbacks += sum(got.fallbacks.values())
    assert taken > fallbacks > 0


# -- mutated samples ----------------------------------------------------------------------------

SMALL_SAMPLES = sorted(p for p in _captures(SAMPLES) if p.stat().st_size < 16_000)


@FUZZ
@given(mutated_capture(SMALL_SAMPLES))
def test_mutated_samples(tmp_path_factory, content: bytes) -> None:
    path = tmp_path_factory.mktemp("mutated") / "m.pcap"
    path.write_bytes(content)
    try:
        merged_frames([str(path)])
    except UnreadableInput:
        return
    assert_equivalent([str(path)])


def test_reading_errors_interleave_with_connection_errors(tmp_path: Path) -> None:
    """A cut last record (a reading error at the end) after a connection whose HTTP errors
    are reported earlier, and a garbage record in the middle."""
    content = (SAMPLES / "crafted-garbage-chunk.pcap").read_bytes()
    path = tmp_path / "cut.pcap"
    path.write_bytes(content[:-7])
    result = assert_equivalent([str(path)])
    assert len(result.errors) >= 2


# -- pieces -------------------------------------------------------------------------------------

_TEXT = st.text(
    st.sampled_from([*'{}[]",:0123456789 abcjsonrpc2.-\\nidmethodresulterror', "\ud7ff"]),
    max_size=40,
)
_JSONISH = st.one_of(
    _TEXT,
    st.builds(
        lambda rid, key, extra: json.dumps({"jsonrpc": "2.0", key: extra, "id": rid}),
        st.one_of(st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.floats(), _TEXT),
        st.sampled_from(["method", "result", "error", "params", "x", "protocolVersion"]),
        st.one_of(_TEXT, st.integers(), st.none()),
    ),
    st.builds(lambda a, b: f"[{a}, {b}]", _TEXT, _TEXT),
    st.builds(
        lambda version, method, batch: json.dumps(
            (lambda m: [m] if batch else m)(
                {"jsonrpc": "2.0", "id": 1, "result": {"protocolVersion": version}}
                if method is None
                else {
                    "jsonrpc": "2.0",
                    "id": 1,
                    "method": method,
                    "params": {"protocolVersion": version},
                }
            )
        ),
        st.one_of(_TEXT, st.integers()),
        st.sampled_from([None, "initialize", "tools/call"]),
        st.booleans(),
    ),
)


@settings(max_examples=300, deadline=None, derandomize=True)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["message", "stream-gap", "resume-gap", "close", "endpoint", "x"]),
            _JSONISH,
            st.one_of(st.none(), st.text(max_size=3)),
        ),
        max_size=8,
    )
)
def test_classification_equals_classify(rows) -> None:
    events = pl.DataFrame(
        {
            "event": [r[0] for r in rows],
            "data": [r[1] for r in rows],
            "id_field": [r[2] for r in rows],
        },
        schema={"event": pl.String, "data": pl.String, "id_field": pl.String},
    )
    want: dict[str, list[Any]] = {name: [] for name in CLASS_COLUMNS}
    for event, data, id_field in rows:
        kind, rpc = classify(event, data, id_field)
        put_classified(want, kind, rpc, event, data)
    got, versions = classify_events(events)
    assert {name: column.to_list() for name, column in got.items()} == want
    # Every event data from which exchange_protocol_version could read a version is listed.
    from sse_forensics.evidence.from_capture import exchange_protocol_version

    for i, (_event, data, _id) in enumerate(rows):
        if exchange_protocol_version([data], None) is not None:
            assert i in versions


@settings(max_examples=300, deadline=None, derandomize=True)
@given(st.binary(max_size=30).map(lambda b: b.replace(b"a", b"\n").replace(b"b", b"\r")))
def test_head_end_is_after_the_last_lf_blank_line(body: bytes) -> None:
    """Brute force: parse every prefix's line structure and find the last blank line that
    ends with LF."""
    bom = 3 if body.startswith(b"\xef\xbb\xbf") else 0
    want = 0
    pos, line_start, n = bom, bom, len(body)
    while pos < n:
        c = body[pos]
        if c == 10 or (c == 13 and pos + 1 < n and body[pos + 1] != 10):
            if pos == line_start and c == 10:
                want = pos + 1
            pos += 1
            line_start = pos
        elif c == 13 and pos + 1 < n:  # CRLF
            if pos == line_start:
                want = pos + 2
            pos += 2
            line_start = pos
        else:
            pos += 1
    assert head_end(body, 0, n, bom) == want


def test_no_tcp_at_all(tmp_path: Path) -> None:
    header = struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1)
    empty = tmp_path / "empty.pcap"
    empty.write_bytes(header)
    assert_equivalent([str(empty)])
    udp = tmp_path / "udp.pcap"
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 28, 0, 0, 64, 17, 0, b"\1\2\3\4", b"\5\6\7\10")
    frame = b"\0" * 12 + b"\x08\x00" + ip + b"\0" * 8
    udp.write_bytes(header + struct.pack("<IIII", 1, 0, len(frame), len(frame)) + frame)
    assert_equivalent([str(udp)])


def test_small_batches_and_three_shards(tmp_path: Path, monkeypatch) -> None:
    """Candidates framed in many batches give the same rows as in one."""
    from sse_forensics.reassembly.fast import capture

    path = tmp_path / "mcp.pcap"
    make_capture_module().write_capture(path, 3000, 5)
    monkeypatch.setattr(capture, "BATCH_BYTES", 20_000)
    result = assert_equivalent([str(path)], shards=(1, 3))
    assert result.fast == 50


def test_heads_in_pieces_and_events_in_slices(tmp_path: Path, monkeypatch) -> None:
    """Event-stream heads parsed a few hundred bytes at a time and events turned into rows
    a few at a time (issue 16: bounded memory for one long stream) give the same rows.

    The samples in pieces of 100 and 300 bytes: cuts after a blank line within the piece,
    after the first one beyond it (an event longer than a piece) and at the end. The
    generated capture (1.7 MB of heads, 50 connections) in pieces of 32,000 bytes and slices
    of 256 events: about 55 cuts and 225 slices, each costing a parse call (~10 ms; at 8,000
    bytes and 64 events, 3x the CPU; a junction one byte off fails either way), the samples
    in slices of 7 events."""
    from sse_forensics.reassembly.fast import capture, sse

    path = tmp_path / "mcp.pcap"
    make_capture_module().write_capture(path, 3000, 7)
    monkeypatch.setattr(capture, "EVENT_SLICE", 256)
    monkeypatch.setattr(sse, "HEAD_PIECE", 32000)
    assert assert_equivalent([str(path)], shards=(1,)).fast == 50
    monkeypatch.setattr(capture, "EVENT_SLICE", 7)
    for piece in (100, 300):
        monkeypatch.setattr(sse, "HEAD_PIECE", piece)
        for name in ("mcp-sdk-resume.pcap", "resume-storm.pcap", "gap-signal-late.pcap"):
            assert_equivalent([str(SAMPLES / name)], shards=(1,))


def test_without_the_columnar_sse_parser(monkeypatch) -> None:
    """The stand-in for ``sse_columns.parse_body`` (one SSEParser feed) gives the same."""
    from sse_forensics.reassembly.fast import sse

    monkeypatch.setattr(sse, "parse_body", None)
    for name in ("mcp-sdk-resume.pcap", "resume-storm.pcap", "gap-signal-late.pcap"):
        assert_equivalent([str(SAMPLES / name)], shards=(1,))


def test_ring_buffer_split_inside_connections(tmp_path: Path) -> None:
    """A capture cut into two files (ring buffer): connections span both."""
    path = tmp_path / "mcp.pcap"
    make_capture_module().write_capture(path, 3000, 4)
    header, records = pcap_records(path)
    half = len(records) // 2
    first, second = tmp_path / "ring-1.pcap", tmp_path / "ring-2.pcap"
    first.write_bytes(header + b"".join(records[:half]))
    second.write_bytes(header + b"".join(records[half:]))
    result = assert_equivalent([str(first), str(second)])
    assert result.fast == 50


def test_flows_grouped_in_chunks(tmp_path: Path, monkeypatch) -> None:
    """Flows grouped a chunk of frames at a time (issue 9: ``GROUP_ROWS``, read at call
    time), every connection's rows cut across many chunks: the exact path's connections,
    errors and rows, unsharded and in two shards, and the same connections on the fast path
    (rows out of order there would send them to the exact one)."""
    from sse_forensics.ingest.packet_index import index_capture
    from sse_forensics.reassembly.fast import tcp

    path = tmp_path / "mcp.pcap"
    make_capture_module().write_capture(path, 3000, 9)
    monkeypatch.setattr(tcp, "GROUP_ROWS", 37)
    for p, on_fast in ((str(path), 50), (str(SAMPLES / "crafted-capture-loss.pcap"), None)):
        with index_capture(p) as index:
            assert len(tcp.group_flows(index).rows) > 37  # more than one chunk
        result = assert_equivalent([p])
        assert on_fast is None or result.fast == on_fast


def test_payload_sizes_in_slices(tmp_path: Path, monkeypatch) -> None:
    """Each group's payload bytes summed a slice of rows at a time (``SIZE_ROWS``, read at
    call time; slices that cut groups) equal the sum over the whole group."""
    from sse_forensics.ingest.packet_index import index_capture
    from sse_forensics.reassembly.fast import capture, tcp

    path = tmp_path / "mcp.pcap"
    make_capture_module().write_capture(path, 3000, 9)
    for p in [str(path), str(SAMPLES / "crafted-capture-loss.pcap")]:
        with index_capture(p) as index:
            groups = tcp.group_flows(index)
            want = [int(index.payload_len[groups.group_rows(g)].sum()) for g in range(len(groups))]
            for rows in (1 << 20, 1, 13, 100):
                monkeypatch.setattr(capture, "SIZE_ROWS", rows)
                assert capture._payload_sizes(index, groups).tolist() == want, (p, rows)


def test_flows_classified_in_slices(tmp_path: Path, monkeypatch) -> None:
    """Groups classified a slice of rows at a time (issue 16: the classification's
    temporaries are bounded) give the same check, and the same rows end to end."""
    from sse_forensics.ingest.packet_index import index_capture
    from sse_forensics.reassembly.fast import tcp

    path = tmp_path / "mcp.pcap"
    make_capture_module().write_capture(path, 3000, 9)
    names = ("crafted-inconsistent-retransmission.pcap", "crafted-capture-loss.pcap")
    for p in [str(path), *(str(SAMPLES / name) for name in names)]:
        with index_capture(p) as index:
            groups = tcp.group_flows(index)
            whole = tcp.classify_groups(index, groups, float(index.ts[-1]))
            monkeypatch.setattr(tcp, "CLASSIFY_ROWS", 40)
            sliced = tcp.classify_groups(index, groups, float(index.ts[-1]))
            monkeypatch.setattr(tcp, "CLASSIFY_ROWS", 1 << 18)
        assert len(index.frame) > 40  # more than one slice (or one group larger than it)
        for name in tcp.GroupCheck.__slots__:
            a, b = getattr(whole, name), getattr(sliced, name)
            assert np.array_equal(np.asarray(a), np.asarray(b)), (p, name)
    monkeypatch.setattr(tcp, "CLASSIFY_ROWS", 40)
    assert assert_equivalent([str(path)], shards=(1,)).fast == 50


def test_overlaps_follow_their_rows(monkeypatch) -> None:
    """The repeated bytes are held for the rows that repeat only (issue 9): their positions
    move with the candidates' rows when a refused group comes first (the capture-loss
    sample's) and when groups are classified a slice at a time (the one that repeats bytes
    after another candidate's), so the retransmission that differs from its first copy is
    still found (and the rest equals the exact path)."""
    from sse_forensics.reassembly.fast import tcp

    names = ("capture-loss", "garbage-chunk", "inconsistent-retransmission")
    paths = [str(SAMPLES / f"crafted-{name}.pcap") for name in names]  # in time order
    for rows in (1 << 18, 1, 7):
        monkeypatch.setattr(tcp, "CLASSIFY_ROWS", rows)
        got = assert_equivalent(paths, shards=(1,))
        assert got.fallbacks[tcp.R_INCONSISTENT] == 1, rows
