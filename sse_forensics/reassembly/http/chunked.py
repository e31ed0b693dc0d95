"""The body reader for the chunked transfer coding (RFC 9112 §7.1), and its way back in
after a hole: the next chunk header whose data checks out."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from sse_forensics.reassembly.http.grammar import (
    CHUNK_HEADER,
    CHUNK_HEADER_AT_HOLE,
    CHUNK_SIZE_DIGITS,
    MAX_CHUNK_LINE,
    MAX_HEAD,
    RESYNC_TAIL,
)
from sse_forensics.reassembly.http.resync import message_start
from sse_forensics.reassembly.http.state import CHUNK_DATA, CHUNK_DATA_END, CHUNK_SIZE, TRAILERS
from sse_forensics.reassembly.http_events import HTTPEvent

if TYPE_CHECKING:
    from sse_forensics.reassembly.http.reader import DirectionReader


def read_chunk_size(reader: DirectionReader, buf: bytes, pos: int, out: list[HTTPEvent]) -> int:
    """RFC 9112 §7.1: ``chunk-size [ chunk-ext ] CRLF``; extensions are ignored."""
    body = reader.body
    assert body is not None
    eol = buf.find(b"\n", pos)
    if eol < 0:
        if len(buf) - pos > MAX_CHUNK_LINE:
            return bad_chunk(reader, pos, "chunk-size line too long", out)
        reader.stop = True
        return pos
    size_field = buf[pos:eol].split(b";", 1)[0].strip(b" \t\r")
    if CHUNK_SIZE_DIGITS.fullmatch(size_field) is None:
        return bad_chunk(reader, pos, f"malformed chunk size {size_field[:16]!r}", out)
    size = int(size_field, 16)
    if size == 0:
        reader.state = TRAILERS
    else:
        body.chunk += 1
        body.remaining = size
        reader.state = CHUNK_DATA
    return eol + 1


def bad_chunk(reader: DirectionReader, pos: int, what: str, out: list[HTTPEvent]) -> int:
    origin = reader.origin_at(pos)
    reader.error(f"{what} (RFC 9112 §7.1)", origin, out)
    reader.end_message(out, origin, False, "malformed-chunk")
    reader.quiet = True
    reader.lose_track(out, None, origin)
    return pos


def read_chunk_data(reader: DirectionReader, buf: bytes, pos: int, out: list[HTTPEvent]) -> int:
    body = reader.body
    assert body is not None
    end = min(pos + body.remaining, len(buf))
    reader.emit_body(buf, pos, end, out, body.chunk)
    body.remaining -= end - pos
    if body.remaining == 0:
        reader.state = CHUNK_DATA_END
    return end


def read_chunk_data_end(reader: DirectionReader, buf: bytes, pos: int, out: list[HTTPEvent]) -> int:
    first = buf[pos]
    if first == 10:  # lone LF (RFC 9112 §2.2)
        reader.state = CHUNK_SIZE
        return pos + 1
    if first == 13:
        if pos + 1 == len(buf):
            reader.stop = True
            return pos
        if buf[pos + 1] == 10:
            reader.state = CHUNK_SIZE
            return pos + 2
    return bad_chunk(reader, pos, "chunk data not followed by CRLF", out)


def read_trailers(reader: DirectionReader, buf: bytes, pos: int, out: list[HTTPEvent]) -> int:
    """RFC 9112 §7.1.2: trailer fields are read and dropped; an empty line ends."""
    eol = buf.find(b"\n", pos)
    if eol < 0:
        if len(buf) - pos > MAX_HEAD:
            return bad_chunk(reader, pos, "trailer section too long", out)
        reader.stop = True
        return pos
    if eol == pos or (eol == pos + 1 and buf[pos] == 13):
        reader.end_message(out, reader.origin_at(eol), True, "complete")
    return eol + 1


def resync_chunk(reader: DirectionReader, buf: bytes, pos: int, out: list[HTTPEvent]) -> int:
    """After a hole in a chunked body: the body resumes at the next plausible chunk
    header; bytes before it are the tail of a chunk whose size was lost."""
    body = reader.body
    assert body is not None
    n = len(buf)
    found = None
    if reader.at_hole:
        found = verified_chunk_header(CHUNK_HEADER_AT_HOLE.match(buf, pos), buf)
    if found is None:
        for match in CHUNK_HEADER.finditer(buf, pos):
            found = verified_chunk_header(match, buf)
            if found is not None:
                break
    limit = found.start() if found is not None else n
    start = message_start(reader, buf, pos, limit)
    if start is not None:
        # The end of the body was in the hole; the next message is already here.
        if start > pos:
            reader.emit_body(buf, pos, start, out, None)
        reader.end_message(out, reader.origin_at(max(start - 1, pos)), False, "missing-bytes")
        reader.at_hole = False
        return start
    if found is not None:
        if found.start() > pos:
            reader.emit_body(buf, pos, found.start(), out, None)
        reader.at_hole = False
        reader.state = CHUNK_SIZE
        return found.start(1)
    keep = max(pos, n - RESYNC_TAIL)
    if keep > pos:
        reader.emit_body(buf, pos, keep, out, None)
        reader.at_hole = False
        body.resync_budget -= keep - pos
    if body.resync_budget <= 0:
        reader.end_message(out, reader.origin_at(keep), False, "missing-bytes")
        reader.lose_track(out, None, None)
        return keep
    reader.stop = True
    return keep


def verified_chunk_header(match: re.Match[bytes] | None, buf: bytes) -> re.Match[bytes] | None:
    """A chunk header is believed when its data is followed by CRLF (or not seen yet)."""
    if match is None:
        return None
    size = int(match.group(1), 16)
    data_end = match.end() + size
    if size and data_end + 2 <= len(buf) and buf[data_end : data_end + 2] != b"\r\n":
        return None
    return match
