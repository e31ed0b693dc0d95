"""The body reader for a Content-Length body (RFC 9112 §6.3 rule 6)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sse_forensics.reassembly.http_events import HTTPEvent

if TYPE_CHECKING:
    from sse_forensics.reassembly.http.reader import DirectionReader


def read_length_body(reader: DirectionReader, buf: bytes, pos: int, out: list[HTTPEvent]) -> int:
    body = reader.body
    assert body is not None
    end = min(pos + body.remaining, len(buf))
    reader.emit_body(buf, pos, end, out, None)
    body.remaining -= end - pos
    if body.remaining == 0:
        reader.end_message(out, reader.origin_at(end - 1), True, "complete")
    return end
