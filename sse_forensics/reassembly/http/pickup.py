"""Event-stream pickup: after a server-side hole that lost the message boundaries (above
all the capture starting mid-stream), the bytes that are not a status line are searched
(within :data:`PICKUP_WINDOW`) for an event-stream body — SSE field lines (WHATWG §9.2.6,
the grammar of :mod:`sse_forensics.reassembly.sse`), chunked (RFC 9112 §7.1) or not. If
found, the connection infers a head with ``head_captured=False`` and the body is read from
there. Long-lived streams predate the capture that records an incident.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Literal

from sse_forensics.reassembly.http.asks import HeadlessBody
from sse_forensics.reassembly.http.grammar import (
    CHUNK_HEADER,
    CHUNK_HEADER_AT_HOLE,
    CHUNK_HEADER_PREFIX,
    NEXT_CHUNK_HEADER,
)
from sse_forensics.reassembly.http.resync import message_start
from sse_forensics.reassembly.http_events import HTTPEvent
from sse_forensics.reassembly.sse import FIELD_OR_COMMENT, FIELD_START, LINE

if TYPE_CHECKING:
    from sse_forensics.reassembly.http.reader import DirectionReader

PICKUP_WINDOW = 64 * 1024
"""How far past a mid-stream start to look for an event-stream body whose head was not
captured. A server flushes every event at once (WHATWG §9.2: events are dispatched as their
blank line arrives), so a window this size holds many of them."""

# Evidence of text/event-stream: a line that starts with a field name the format defines
# and a colon, or with a colon (a comment).
_FIELD_LINE = re.compile(rb"(?m)^" + FIELD_START.pattern)
# Bytes that text never holds (C0 controls other than HT, LF, CR and ESC, and DEL): their
# share tells compressed or binary bytes from an event stream.
_CONTROL_BYTES = bytes(b for b in range(32) if b not in (9, 10, 13, 27)) + b"\x7f"
_BINARY_SAMPLE = 512

Undecided = Literal["wait", "binary"]
WAIT: Undecided = "wait"  # the search needs more bytes to decide
BINARY: Undecided = "binary"  # the search met compressed or binary bytes: give up


def pick_up_event_stream(
    reader: DirectionReader, buf: bytes, pos: int, out: list[HTTPEvent]
) -> int:
    """After a hole that lost the message boundaries: a message start wins (a normal
    response is never read as anything else); bytes before it, or all bytes if there
    is none, are searched for an event-stream body whose head was not captured. The
    bytes are held, not dropped, until the search decides."""
    n = len(buf)
    start = message_start(reader, buf, pos, n)
    if start is not None:
        # Only a chunked body can end (with its last chunk) before the next message.
        found = sse_chunk_start(buf, pos, start, partial_ok=False)
        if isinstance(found, int):
            return _pick_up(reader, found, True)
        reader.pickup = None
        return pos
    final = reader.final or n - pos >= PICKUP_WINDOW
    found = sse_chunk_start(buf, pos, n, partial_ok=final)
    if isinstance(found, int):
        return _pick_up(reader, found, True)
    if found is None:
        sample = buf[pos : pos + _BINARY_SAMPLE]
        if len(sample) == _BINARY_SAMPLE and looks_binary(sample):
            found = BINARY
        elif sse_lines(buf, pos, n) is True:
            return _pick_up(reader, pos, False)
    if found != BINARY and not final:
        # Undecided (a chunk or a block runs past the bytes held): wait for more.
        reader.stop = True
        return pos
    # No event stream where one could be: resynchronise at message starts only.
    reader.pickup = None
    return pos


def _pick_up(reader: DirectionReader, at: int, chunked: bool) -> int:
    """Resume an event-stream body at ``at``: the connection infers a head and gives the
    gap before ``at``; the body is chunked (``at`` is a chunk-size line) or delimited by
    the close (RFC 9112 §6.3 rule 8). No content-coding is known, so none is removed (a
    coded body does not pass the search)."""
    hole, reader.pickup = reader.pickup, None
    assert hole is not None
    reader.ask = HeadlessBody(chunked, reader.origin_at(at), hole)
    reader.stop = True  # stop for the connection's answer
    reader.at_hole = False
    reader.quiet = False
    return at


def looks_binary(data: bytes) -> bool:
    """More than 1 in 32 bytes are controls text never holds (compressed bytes: ~1 in 9)."""
    return (len(data) - len(data.translate(None, _CONTROL_BYTES))) * 32 > len(data)


def sse_chunk_start(buf: bytes, pos: int, end: int, partial_ok: bool) -> int | Undecided | None:
    """Where a chunked event-stream body can be resumed in ``buf[pos:end]``: the start of a
    chunk-size line (RFC 9112 §7.1) whose chunk holds an SSE field line and whose data ends
    with CRLF before another plausible chunk-size line. ``WAIT`` when a candidate runs
    past ``end``, ``BINARY`` when the first well-framed chunk is not text.

    The start of ``buf`` is believed as a chunk-size line only if its chunk checks out: the
    capture may have started inside a longer size (``b`` of ``1b``), whose data then ends
    elsewhere. ``partial_ok``: no more bytes will come, so a chunk cut by ``end`` is judged
    on the data it has.
    """
    window_end = pos + PICKUP_WINDOW
    match = CHUNK_HEADER_AT_HOLE.match(buf, pos, end)
    search_from = pos
    while True:
        if match is None:
            match = CHUNK_HEADER.search(buf, search_from, end)
            if match is None or match.start() >= window_end:
                return None
        verdict = _judge_sse_chunk(buf, match, end, partial_ok)
        if verdict is not None:
            return verdict
        search_from = match.end() - 2  # its CRLF may begin the next candidate
        match = None


def _judge_sse_chunk(
    buf: bytes, match: re.Match[bytes], end: int, partial_ok: bool
) -> int | Undecided | None:
    """``match.start(1)`` if the chunk at ``match`` is event-stream data, ``WAIT`` or
    ``BINARY`` as in :func:`sse_chunk_start`, ``None`` to try the next candidate."""
    size = int(match.group(1), 16)
    if size == 0 or size > PICKUP_WINDOW:  # a last chunk proves nothing; see the window
        return None
    data_start = match.end()
    data_end = data_start + size
    if data_end + 2 > end:
        if not partial_ok:
            return WAIT
        data_end = end
    elif buf[data_end : data_end + 2] != b"\r\n":
        return None
    else:
        next_start = data_end + 2
        if NEXT_CHUNK_HEADER.match(buf, next_start, end) is None:
            prefix = CHUNK_HEADER_PREFIX.match(buf, next_start, end)
            could_grow = prefix is not None and prefix.end() == end
            if not (could_grow or next_start == end):
                return None
            if not partial_ok:
                return WAIT
    if looks_binary(buf[data_start : min(data_end, data_start + _BINARY_SAMPLE)]):
        return BINARY
    if _FIELD_LINE.search(buf, data_start, data_end) is None:
        return None
    return match.start(1)


def sse_lines(buf: bytes, pos: int, end: int) -> bool | Undecided:
    """Whether ``buf[pos:end]`` reads as an event stream that is not chunked: after the line
    the start cut, every complete line is an SSE field line, comment or blank line (WHATWG
    §9.2.6) up to a blank line ending a block that had a ``data`` or ``id`` field.
    ``WAIT`` when ``end`` comes first."""
    end = min(end, pos + PICKUP_WINDOW)
    cut = LINE.search(buf, pos, end)
    if cut is None:
        return WAIT
    line_start = cut.end()
    block_has_field = False
    while True:
        line = LINE.match(buf, line_start, end)
        if line is None or (line.group(2) == b"\r" and line.end() == end):
            return WAIT  # a CR at the end may be half of a CRLF
        content = line.group(1)
        if not content:
            if block_has_field:
                return True
        else:
            field = FIELD_OR_COMMENT.match(content)
            if field is None:
                return False
            block_has_field = block_has_field or field.group(1) in (b"data", b"id")
        line_start = line.end()
