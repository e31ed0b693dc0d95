"""A capture hole in the middle of a chunk that carries several SSE events: the events on
either side survive, the one the hole cuts is a partial block, the loss is accounted."""

from __future__ import annotations

import struct

from sse_forensics.ingest.packets import TCP_ACK, TCP_PSH, TCP_SYN, Frame
from sse_forensics.provenance import Origin
from sse_forensics.reassembly.capture import reassemble

LINKTYPE_RAW = 101
CLIENT, SERVER = (bytes([10, 0, 0, 1]), 51000), (bytes([10, 0, 0, 2]), 8000)


def raw_frame(n: int, frm, to, seq: int, ack: int, flags: int, payload: bytes = b"") -> Frame:
    tcp = struct.pack("!HHIIBBHHH", frm[1], to[1], seq, ack, 5 << 4, flags, 65535, 0, 0)
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 40 + len(payload), 0, 0, 64, 6, 0, frm[0], to[0])
    data = ip + tcp + payload
    return Frame(Origin("hole.pcap", n, n / 100), LINKTYPE_RAW, data, len(data))


def event(n: int) -> bytes:
    return f'id: {n}\ndata: {{"n": {n}, "pad": "{"x" * 40}"}}\n\n'.encode()


def test_hole_mid_chunk_keeps_the_events_around_it():
    request = b"GET /mcp HTTP/1.1\r\nHost: s\r\nAccept: text/event-stream\r\n\r\n"
    head = (
        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
    )
    events = event(1) + event(2) + event(3) + event(4)
    body = b"%x\r\n" % len(events) + events + b"\r\n" + b"%x\r\n" % len(event(5)) + event(5)
    cut_start = len(event(1)) + 10 + len(b"%x\r\n" % len(events))  # inside event 2's id line
    cut_end = cut_start + 30  # ...into its data line
    server = head + body
    c_isn, s_isn = 1000, 5000
    frames = [
        raw_frame(1, CLIENT, SERVER, c_isn, 0, TCP_SYN),
        raw_frame(2, SERVER, CLIENT, s_isn, c_isn + 1, TCP_SYN | TCP_ACK),
        raw_frame(3, CLIENT, SERVER, c_isn + 1, s_isn + 1, TCP_ACK),
        raw_frame(4, CLIENT, SERVER, c_isn + 1, s_isn + 1, TCP_ACK | TCP_PSH, request),
    ]
    start = len(head)
    seq = s_isn + 1
    frames.append(raw_frame(5, SERVER, CLIENT, seq, c_isn + 1 + len(request), TCP_ACK, head))
    a, b = start + cut_start, start + cut_end
    frames.append(raw_frame(6, SERVER, CLIENT, seq + start, 0, TCP_ACK, server[start:a]))
    # frame 7 (server[a:b]) was lost by the capture, but the client acknowledged it
    frames.append(raw_frame(8, SERVER, CLIENT, seq + b, 0, TCP_ACK, server[b:]))
    frames.append(
        raw_frame(9, CLIENT, SERVER, c_isn + 1 + len(request), seq + len(server), TCP_ACK)
    )

    result = reassemble(frames)
    (ex,) = [e for e in result.exchanges if e.response is not None]
    assert [e.id for e in ex.events] == ["1", "3", "4", "5"]
    assert ex.events[1].origins[0].number == 8  # resynchronised right after the hole
    (partial,) = ex.partials
    assert partial.holes[0][1] == b - a and partial.terminated
    (hole,) = ex.holes
    assert hole.span.reason == "acked-unseen" and hole.span.length == b - a
    assert result.connections[0].loss["server"].acked_unseen == b - a
    assert result.loss.acked_unseen == b - a and result.loss.connections_with_loss == 1
