"""Finding the way back into a direction after a hole or bytes that are not HTTP: the next
plausible message start (RFC 9112 §2.2 gives no other way back in)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sse_forensics.reassembly.http.grammar import REQUEST_START, RESPONSE_START, RESYNC_TAIL
from sse_forensics.reassembly.http.state import IDLE
from sse_forensics.reassembly.http_events import HTTPEvent

if TYPE_CHECKING:
    from sse_forensics.reassembly.http.reader import DirectionReader


def message_start(reader: DirectionReader, buf: bytes, pos: int, limit: int) -> int | None:
    """The first plausible message start in ``buf[pos:limit]``. Not only at line
    starts: a message often follows a body that did not end with a newline."""
    pattern = RESPONSE_START if reader.is_server else REQUEST_START
    match = pattern.search(buf, pos, min(limit + 16, len(buf)))
    return match.start() if match is not None and match.start() < limit else None


def find_message_start(reader: DirectionReader, buf: bytes, pos: int, out: list[HTTPEvent]) -> int:
    """Skip to the next message start; hold the last bytes, which may begin one."""
    start = message_start(reader, buf, pos, len(buf))
    if start is not None:
        reader.at_hole = False
        reader.state = IDLE
        return start
    keep = max(pos, len(buf) - RESYNC_TAIL)
    if keep > pos:
        reader.at_hole = False
    reader.stop = True
    return keep
