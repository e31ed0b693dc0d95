"""The HTTP/2 route of the fast path: a candidate that speaks HTTP/2 (h2c with prior
knowledge, or h2 decrypted by :mod:`.tls`) is read here over the batch's joined bytes, and
its response bodies' DATA payloads go to the columnar SSE parser as ranges of the server
buffer, like chunked HTTP/1.1 bodies.

Everything but the server's DATA frames goes through the exact path's own
:class:`~sse_forensics.reassembly.h2.H2Connection` (HPACK, stream states, RST_STREAM,
GOAWAY, SETTINGS, request bodies), frame by frame in the order the exact path reads them:
both directions merged by the row that completed each frame (its last byte, or for
decrypted bytes the record holding it). A server DATA frame is what ``H2Connection._data``
does with it, without an event per frame: its payload range is added to its stream's body
and END_STREAM ends the response at the frame's last byte.

A connection leaves the route (fallback reason) where the exact path would report or do
something this does not: a client that does not open with the preface, bytes after the
last whole frame, a frame hyperframe would not parse, padded DATA, a content-coded response,
DATA inside a header block, or any :class:`ProtocolError`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from hyperframe.frame import Frame

from sse_forensics.provenance import Origin
from sse_forensics.reassembly.content_coding import make_decoder
from sse_forensics.reassembly.exchange import Exchange
from sse_forensics.reassembly.fast import http as fhttp
from sse_forensics.reassembly.fast.tls import Side
from sse_forensics.reassembly.flows import Connection
from sse_forensics.reassembly.h2 import FRAME_HEADER, PREFACE, H2Connection
from sse_forensics.reassembly.http_events import (
    HTTPEvent,
    ProtocolError,
    RequestBody,
    RequestEnd,
    RequestHead,
    ResponseBody,
    ResponseEnd,
    ResponseHead,
    header,
)

R_H2_PREFACE = "h2: client does not open with the preface"
R_H2_LEFTOVER = "h2: bytes after the last whole frame"
R_H2_FRAME = "h2: a frame the exact path would report"
R_H2_CODING = "h2: content-coding"

DATA = 0
END_STREAM = 0x1
PADDED = 0x8


def _frames(buf: bytes, lo: int, hi: int) -> list[tuple[int, int, int, int, int]] | None:
    """``(pos, length, type, flags, stream)`` of every whole frame in ``[lo, hi)``; ``None``
    when bytes are left after the last one."""
    out = []
    pos = lo
    while pos + FRAME_HEADER <= hi:
        length = int.from_bytes(buf[pos : pos + 3], "big")
        end = pos + FRAME_HEADER + length
        if end > hi:
            return None
        stream = int.from_bytes(buf[pos + 5 : pos + 9], "big") & 0x7FFFFFFF
        out.append((pos, length, buf[pos + 3], buf[pos + 4], stream))
        pos = end
    return out if pos == hi else None


MARK = {False: "\0c", True: "\0s"}  # no file is named so


class _Marks:
    """Origins the route hands to ``H2Connection`` stand for byte positions (``source``:
    :data:`MARK` of the side, ``number``: the position) until the frames are known."""

    __slots__ = ("client", "server")

    def __init__(self) -> None:
        self.client: dict[int, Origin] = {}
        self.server: dict[int, Origin] = {}

    def at(self, server: bool, pos: int) -> Origin:
        table = self.server if server else self.client
        mark = table.get(pos)
        if mark is None:
            mark = table[pos] = Origin(MARK[server], pos, 0.0)
        return mark


@dataclass(slots=True)
class H2Streams:
    """A connection read by the route: its exchanges as the exact path builds them (origins
    still marks), each response body's DATA ranges in the server buffer, and the
    ``H2Connection`` (its end of connection is applied once the connection is known)."""

    h2: H2Connection
    exchanges: dict[int, Exchange]
    bodies: dict[int, fhttp.Chunks] = field(default_factory=dict)
    marks: _Marks = field(default_factory=_Marks)

    def event_bodies(self) -> list[tuple[int, fhttp.Chunks]]:
        """(exchange, DATA ranges) of each event-stream response, in exchange order."""
        return [
            (k, self.bodies.get(k) or fhttp.Chunks())
            for k, ex in sorted(self.exchanges.items())
            if ex.is_event_stream
        ]


def read_h2(
    conn_id: int,
    client: Side,
    c_range: tuple[int, int],
    server: Side,
    s_range: tuple[int, int],
    c_deliver: np.ndarray,
    s_deliver: np.ndarray,
) -> H2Streams | str:
    """The streams of one HTTP/2 connection, or why it leaves the route (``*_deliver``: the
    row at which each segment's bytes reach HTTP, parallel to the sides' segments)."""
    c_lo, c_hi = c_range
    s_lo, s_hi = s_range
    if client.buf[c_lo : c_lo + len(PREFACE)] != PREFACE:
        return R_H2_PREFACE
    c_frames = _frames(client.buf, c_lo + len(PREFACE), c_hi)
    s_frames = _frames(server.buf, s_lo, s_hi)
    if c_frames is None or s_frames is None:
        return R_H2_LEFTOVER
    # The row that completes each frame: the exact path reads it then.
    c_last = np.fromiter((p + FRAME_HEADER + n - 1 for p, n, *_ in c_frames), np.int64)
    s_last = np.fromiter((p + FRAME_HEADER + n - 1 for p, n, *_ in s_frames), np.int64)
    c_at = c_deliver[np.searchsorted(client.start, c_last, side="right") - 1]
    s_at = s_deliver[np.searchsorted(server.start, s_last, side="right") - 1]
    order = np.argsort(np.concatenate([c_at, s_at]), kind="stable").tolist()
    n_client = len(c_frames)

    h2 = H2Connection()
    h2.sides["client"].preface = False
    streams = H2Streams(h2, {})
    marks = streams.marks
    s_side = h2.sides["server"]
    for k in order:
        is_server = k >= n_client
        pos, length, kind, flags, stream_id = s_frames[k - n_client] if is_server else c_frames[k]
        if is_server and kind == DATA:
            # H2Connection._data, server side, without an event per frame.
            if stream_id == 0 or flags & PADDED or s_side.block is not None:
                return R_H2_FRAME
            stream = h2.streams.get(stream_id)
            if stream is None or stream.opaque or not stream.response_open:
                continue
            if length:
                chunks = streams.bodies.get(stream.exchange)
                if chunks is None:
                    chunks = streams.bodies[stream.exchange] = fhttp.Chunks()
                chunks.add(pos + FRAME_HEADER, length)
            if flags & END_STREAM:
                h2.out = []
                end_at = marks.at(True, pos + FRAME_HEADER + length - 1)
                h2._end_response(stream, end_at, True, "complete")
                why = _apply(streams, conn_id, h2.out)
                if why is not None:
                    return why
            continue
        buf = server.buf if is_server else client.buf
        raw = buf[pos : pos + FRAME_HEADER + length]
        try:
            frame, _ = Frame.parse_frame_header(memoryview(raw[:FRAME_HEADER]))
            frame.parse_body(memoryview(raw[FRAME_HEADER:]))
        except Exception:
            return R_H2_FRAME
        h2.out = []
        try:
            h2._frame("server" if is_server else "client", frame, [(raw, marks.at(is_server, pos))])
        except Exception:
            return R_H2_FRAME
        why = _apply(streams, conn_id, h2.out)
        if why is not None:
            return why
    return streams


def _apply(streams: H2Streams, conn_id: int, events: list[HTTPEvent]) -> str | None:
    """``_ConnectionAnalyzer._handle`` for what the route meets (bodies come as ranges);
    the reason for what it leaves to the exact path."""
    exchanges = streams.exchanges
    for ev in events:
        if isinstance(ev, ProtocolError | ResponseBody):
            return R_H2_FRAME
        ex = exchanges.get(ev.exchange)
        if ex is None:
            ex = exchanges[ev.exchange] = Exchange(connection_id=conn_id, index=ev.exchange)
        if isinstance(ev, RequestHead):
            ex.request = ev
        elif isinstance(ev, RequestBody):
            ex.keep_request_body(ev.data)
        elif isinstance(ev, RequestEnd):
            ex.request_complete = ev.complete
        elif isinstance(ev, ResponseHead):
            if ev.interim:
                ex.interim.append(ev)
            else:
                if make_decoder(header(ev.headers, "content-encoding")) is not None:
                    return R_H2_CODING
                ex.response = ev
        elif isinstance(ev, ResponseEnd):
            ex.response_complete = ev.complete
            ex.response_end_reason = ev.reason
            ex.response_end = ev.origin
        else:  # BodyGap: cannot happen without a hole
            return R_H2_FRAME
    return None


def finish(
    streams: H2Streams,
    conn: Connection,
    origin_at: Callable[[bool, int], Origin],
    server_buf: bytes,
) -> list[Exchange]:
    """The connection's exchanges as the exact path hands them to the sink: its ends
    applied (``conn`` as finalised), bodies counted, non-stream bodies kept, marks replaced
    by the frames they stand for (``origin_at(server, position)``). Event-stream events are
    the caller's (columnar)."""
    h2 = streams.h2
    for direction in ("client", "server"):
        fin = conn.fin.get(direction)
        if fin is not None:
            events = h2.end(direction, fin, "fin")
        elif conn.rst is not None:
            events = h2.end(direction, conn.rst, "rst")
        else:
            events = h2.end(direction, conn.last, "capture-end")
        _apply(streams, conn.id, events)

    def real_origin(origin: Origin) -> Origin:
        if origin.source not in (MARK[False], MARK[True]):
            return origin
        return origin_at(origin.source == MARK[True], origin.number)

    def real(origin: Origin | None) -> Origin | None:
        return None if origin is None else real_origin(origin)

    out = []
    for index, ex in sorted(streams.exchanges.items()):
        chunks = streams.bodies.get(index)
        if chunks is not None and chunks.nbytes and ex.response is not None:
            ex.body_bytes = chunks.nbytes
            ex.last_body_origin = real(streams.marks.at(True, chunks.last))
            if not ex.is_event_stream:
                ex.keep_response_body(fhttp.kept_body(server_buf, chunks))
        if ex.request is not None:
            ex.request.origin = real_origin(ex.request.origin)
        if ex.response is not None:
            ex.response.origin = real_origin(ex.response.origin)
        for head in ex.interim:
            head.origin = real_origin(head.origin)
        ex.response_end = real(ex.response_end)
        out.append(ex)
    return out


__all__ = ["H2Streams", "finish", "read_h2"]
