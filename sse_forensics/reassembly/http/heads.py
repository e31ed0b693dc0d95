"""Reading a message head in the ``IDLE`` state (RFC 9112 §2.2, §3, §4, §5)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sse_forensics.reassembly.http.asks import ParsedHead
from sse_forensics.reassembly.http.fields import INVALID_FIELD_LINE, parse_fields
from sse_forensics.reassembly.http.grammar import (
    HEAD_END,
    MAX_HEAD,
    METHOD_PREFIX,
    REQUEST_LINE,
    STATUS_LINE,
    VERSION_PREFIX,
)
from sse_forensics.reassembly.http_events import HTTPEvent

if TYPE_CHECKING:
    from sse_forensics.reassembly.http.reader import DirectionReader


def read_head(reader: DirectionReader, buf: bytes, pos: int, out: list[HTTPEvent]) -> int:
    """A start line and header section: handed to the connection as a :class:`ParsedHead`
    (it pairs the message and picks its framing)."""
    n = len(buf)
    # RFC 9112 §2.2: ignore at least one empty line before a request-line.
    while pos < n and buf[pos] in b"\r\n":
        pos += 1
    if pos == n:
        return n
    if reader.is_server:
        plausible = VERSION_PREFIX.startswith(buf[pos : pos + 5])
    else:
        plausible = METHOD_PREFIX.match(buf, pos, pos + 33) is not None
    if not plausible:
        return not_a_message(reader, buf, pos, out)
    match = HEAD_END.search(buf, pos)
    if match is None:
        if n - pos > MAX_HEAD:
            return head_too_large(reader, pos, n, out)
        reader.stop = True
        return pos
    if match.start() - pos > MAX_HEAD:
        return head_too_large(reader, pos, match.end(), out)
    eol = buf.find(b"\n", pos)
    start_line = buf[pos : eol - 1 if buf[eol - 1] == 13 else eol]
    line_match = (STATUS_LINE if reader.is_server else REQUEST_LINE).fullmatch(start_line)
    if line_match is None:
        return not_a_message(reader, buf, pos, out)
    head_origin = reader.origin_at(pos)
    headers, bad = parse_fields(buf[eol + 1 : match.start()].decode("latin-1"))
    if bad:
        reader.error(INVALID_FIELD_LINE, head_origin, out)
    reader.quiet = False
    reader.ask = ParsedHead(line_match, headers, head_origin, reader.origin_at(match.end() - 1))
    reader.stop = True  # stop for the connection's answer
    return match.end()


def not_a_message(reader: DirectionReader, buf: bytes, pos: int, out: list[HTTPEvent]) -> int:
    kind = "status-line" if reader.is_server else "request-line"
    what = f"bytes are not an HTTP/1.1 {kind} (RFC 9112 §3, §4): {buf[pos : pos + 16]!r}"
    reader.lose_track(out, what, reader.origin_at(pos))
    return pos + 1


def head_too_large(reader: DirectionReader, pos: int, end: int, out: list[HTTPEvent]) -> int:
    what = f"header section longer than {MAX_HEAD} bytes"
    reader.lose_track(out, what, reader.origin_at(pos))
    return end
