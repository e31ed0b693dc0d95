"""The HTTP/2 observer (sse_forensics/reassembly/h2.py), bytes in, events out: streams as
exchanges, RST_STREAM and GOAWAY as ends, DATA cited to its frames, and caps on hostile
header blocks (an HPACK bomb, an endless CONTINUATION) reported without an exception."""

from __future__ import annotations

from hpack import Encoder
from hyperframe.frame import (
    ContinuationFrame,
    DataFrame,
    GoAwayFrame,
    HeadersFrame,
    RstStreamFrame,
    SettingsFrame,
)

from sse_forensics.provenance import Origin
from sse_forensics.reassembly.h2 import MAX_HEADER_BLOCK, PREFACE, H2Connection
from sse_forensics.reassembly.http_events import (
    BodyGap,
    ProtocolError,
    RequestEnd,
    RequestHead,
    ResponseBody,
    ResponseEnd,
    ResponseHead,
)
from sse_forensics.reassembly.stream import MissingSpan


def at(n: int) -> Origin:
    return Origin("t.pcap", n, float(n))


def headers(encoder: Encoder, stream: int, fields: list[tuple[str, str]], end: bool = False):
    frame = HeadersFrame(stream, encoder.encode(fields))
    frame.flags.add("END_HEADERS")
    if end:
        frame.flags.add("END_STREAM")
    return frame.serialize()


def data(stream: int, body: bytes, end: bool = False) -> bytes:
    frame = DataFrame(stream, body)
    if end:
        frame.flags.add("END_STREAM")
    return frame.serialize()


REQUEST = [(":method", "GET"), (":path", "/mcp"), (":scheme", "https"), (":authority", "x")]
SSE = [(":status", "200"), ("content-type", "text/event-stream")]


def test_stream_is_an_exchange_with_cited_data() -> None:
    h2 = H2Connection()
    client, server = Encoder(), Encoder()
    out = h2.feed("client", [(PREFACE + SettingsFrame(0).serialize(), at(1))])
    out += h2.feed(
        "client", [(headers(client, 1, [*REQUEST, ("last-event-id", "7")], True), at(2))]
    )
    out += h2.feed("server", [(headers(server, 1, SSE), at(3))])
    frame = data(1, b"id: 8\ndata: {}\n\n")
    # One DATA frame over two TCP segments: each byte keeps its own frame.
    out += h2.feed("server", [(frame[:12], at(4)), (frame[12:], at(5))])
    out += h2.feed("server", [(data(1, b"", end=True), at(6))])
    kinds = [type(e).__name__ for e in out]
    assert kinds == [
        "RequestHead",
        "RequestEnd",
        "ResponseHead",
        "ResponseBody",
        "ResponseBody",
        "ResponseEnd",
    ]
    head = out[0]
    assert isinstance(head, RequestHead) and head.method == "GET" and head.target == "/mcp"
    assert ("last-event-id", "7") in head.headers and ("host", "x") in head.headers
    assert isinstance(out[2], ResponseHead) and out[2].status == 200
    bodies = [e for e in out if isinstance(e, ResponseBody)]
    assert [(b.data, b.origin.number) for b in bodies] == [(b"id:", 4), (b" 8\ndata: {}\n\n", 5)]
    assert isinstance(out[-1], ResponseEnd) and out[-1].complete


def test_rst_stream_and_goaway_end_streams() -> None:
    h2 = H2Connection()
    client, server = Encoder(), Encoder()
    h2.feed("client", [(PREFACE, at(1))])
    for stream in (1, 3, 5):
        h2.feed("client", [(headers(client, stream, REQUEST, True), at(stream))])
    h2.feed("server", [(headers(server, 1, SSE) + headers(server, 5, SSE), at(6))])
    out = h2.feed("client", [(RstStreamFrame(1, error_code=8).serialize(), at(7))])
    assert [(type(e).__name__, e.exchange, e.reason) for e in out] == [("ResponseEnd", 0, "rst")]
    out = h2.feed("server", [(GoAwayFrame(0, last_stream_id=3).serialize(), at(8))])
    assert [(e.exchange, e.reason, e.complete) for e in out] == [(2, "goaway", False)]


def test_hole_gives_open_streams_a_gap_and_frames_are_found_again() -> None:
    h2 = H2Connection()
    client, server = Encoder(), Encoder()
    h2.feed("client", [(PREFACE + headers(client, 1, REQUEST, True), at(1))])
    h2.feed("server", [(headers(server, 1, SSE), at(2))])
    frame = data(1, b"id: 1\ndata: a\n\n")
    h2.feed("server", [(frame[:5], at(3))])
    out = h2.missing(MissingSpan("server", 100, 20, "hole", at(3), at(5)))
    assert [type(e).__name__ for e in out] == ["BodyGap"] and isinstance(out[0], BodyGap)
    assert h2.feed("server", [(b"garbage that is no frame", at(5))]) == []
    out = h2.feed("server", [(data(1, b"id: 3\ndata: c\n\n"), at(6))])
    assert [(type(e).__name__, e.origin.number) for e in out] == [("ResponseBody", 6)]


def test_headers_after_a_hole_that_need_lost_table_entries_are_indeterminate() -> None:
    h2 = H2Connection()
    client, server = Encoder(), Encoder()
    h2.feed("client", [(PREFACE + headers(client, 1, REQUEST, True), at(1))])
    h2.feed("client", [(headers(client, 3, REQUEST, True), at(2))])
    h2.feed("server", [(headers(server, 1, [*SSE, ("mcp-session-id", "s1")]), at(3))])
    h2.missing(MissingSpan("server", 50, 10, "hole", at(3), at(4)))
    # The encoder refers to the entries it inserted before the hole.
    out = h2.feed("server", [(headers(server, 3, [*SSE, ("mcp-session-id", "s1")]), at(4))])
    (error,) = out
    assert isinstance(error, ProtocolError) and error.exchange == 1
    assert "could not be decoded" in error.what and "indeterminate" in error.what
    # A block of static entries and literals still decodes after the hole.
    h2.feed("client", [(headers(client, 5, REQUEST, True), at(5))])
    out = h2.feed("server", [(HeadersFrame(5, b"\x88", flags=["END_HEADERS"]).serialize(), at(6))])
    assert [(type(e).__name__, e.exchange, e.status) for e in out] == [("ResponseHead", 2, 200)]


def test_hpack_bomb_is_capped_and_reported() -> None:
    """One 4 KB header inserted once and referred to a hundred times: 100 bytes on the wire
    decode to 400 KB, past the header list cap."""
    h2 = H2Connection()
    client = Encoder()
    h2.feed("client", [(PREFACE, at(1))])
    big = ("x-big", "a" * 4000)
    block = client.encode([*REQUEST, big])  # inserts x-big in the dynamic table
    index = bytes([0x80 | 62])  # RFC 7541 §6.1: indexed field, dynamic entry 62
    bomb = HeadersFrame(3, b"\x82\x84" + index * 100)  # static :method GET, :path /
    bomb.flags |= {"END_HEADERS", "END_STREAM"}
    first = HeadersFrame(1, block)
    first.flags |= {"END_HEADERS", "END_STREAM"}
    out = h2.feed("client", [(first.serialize() + bomb.serialize(), at(2))])
    errors = [e for e in out if isinstance(e, ProtocolError)]
    assert len(errors) == 1 and "HPACK" in errors[0].what and errors[0].exchange == 1
    assert [e.exchange for e in out if isinstance(e, RequestHead)] == [0]


def test_endless_continuation_is_capped() -> None:
    h2 = H2Connection()
    h2.feed("client", [(PREFACE, at(1))])
    start = HeadersFrame(1, b"\x82")
    wire = start.serialize()
    chunk = b"\x00" * 16000
    for _ in range(MAX_HEADER_BLOCK // len(chunk) + 2):
        wire += ContinuationFrame(1, chunk).serialize()
    last = ContinuationFrame(1, b"")
    last.flags.add("END_HEADERS")
    out = h2.feed("client", [(wire + last.serialize(), at(2))])
    (error,) = out
    assert isinstance(error, ProtocolError) and "header block over" in error.what
    # The connection goes on: a later stream is read.
    out = h2.feed("client", [(headers(Encoder(), 3, REQUEST, True), at(3))])
    assert [type(e) for e in out] == [RequestHead, RequestEnd]


def test_garbage_never_raises() -> None:
    h2 = H2Connection()
    for blob in (b"\xff" * 40, PREFACE + b"\x00\x00\x04\x08\x00\x00\x00\x00", b"\x00" * 9):
        h2.feed("client", [(blob, at(1))])
        h2.feed("server", [(blob[::-1], at(2))])
    h2.end("server", at(3), "fin")


def test_upgrade_h2c_continues_in_the_same_segments() -> None:
    """RFC 7540 §3.2: the 101, the server's SETTINGS and the whole answer on stream 1 in
    one segment, and the client's preface sent (and held) before the 101: the upgraded
    request gets its HTTP/2 response and events, the 101 is its interim response, a later
    stream is the next exchange, and the HTTP2-Settings table size reaches the decoder."""
    from sse_forensics.reassembly.capture import _ConnectionAnalyzer
    from sse_forensics.reassembly.flows import Connection
    from sse_forensics.reassembly.stream import StreamData

    conn = Connection(1, ("127.0.0.1", 5000), ("127.0.0.1", 80), "c", at(1), at(9))
    analyzer = _ConnectionAnalyzer(conn, [])
    client, server = Encoder(), Encoder()
    settings = "AAEAAAAAAAMAAABkAAQCAAAAAAIAAAAA"  # HEADER_TABLE_SIZE 0, ...
    upgrade = (
        b"GET /mcp HTTP/1.1\r\nHost: x\r\nLast-Event-ID: 7\r\nUpgrade: h2c\r\n"
        b"Connection: Upgrade, HTTP2-Settings\r\nHTTP2-Settings: " + settings.encode() + b"\r\n\r\n"
    )
    preface = PREFACE + SettingsFrame(0).serialize()
    analyzer.data("client", StreamData(0, upgrade + preface, at(2)))
    answer = b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: h2c\r\nConnection: Upgrade\r\n\r\n"
    answer += SettingsFrame(0).serialize() + headers(server, 1, SSE)
    answer += data(1, b"id: 8\ndata: {}\n\n", end=True)
    analyzer.data("server", StreamData(0, answer, at(3)))
    later = headers(client, 3, [*REQUEST, ("last-event-id", "8")], True)
    analyzer.data("client", StreamData(len(upgrade + preface), later, at(4)))
    analyzer.finish()
    assert conn.application == "h2"
    first, second = analyzer.exchanges[0], analyzer.exchanges[1]
    assert [h.status for h in first.interim] == [101] and first.response.status == 200
    assert first.response.version == "HTTP/2" and first.response_complete
    assert first.response_end_reason == "complete"
    assert [(e.id, e.data) for e in first.events] == [("8", "{}")]
    assert second.request.method == "GET" and second.request.version == "HTTP/2"
    assert analyzer.h2.table_size["client"] == 0
