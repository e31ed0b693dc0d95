"""The body reader for a body delimited by the close of the connection (RFC 9112 §6.3
rule 8): every byte is body; :meth:`~.reader.DirectionReader.end` says whether it ended
complete (an orderly FIN) or not."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sse_forensics.reassembly.http_events import HTTPEvent

if TYPE_CHECKING:
    from sse_forensics.reassembly.http.reader import DirectionReader


def read_until_close(reader: DirectionReader, buf: bytes, pos: int, out: list[HTTPEvent]) -> int:
    reader.emit_body(buf, pos, len(buf), out, None)
    return len(buf)
