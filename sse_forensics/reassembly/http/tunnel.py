"""A direction that waits for a tunnel to be accepted, has switched protocols, or ended
(RFC 9112 §9.7, RFC 9110 §9.3.6)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sse_forensics.reassembly.http.grammar import MAX_HEAD
from sse_forensics.reassembly.http.state import IDLE
from sse_forensics.reassembly.http_events import HTTPEvent

if TYPE_CHECKING:
    from sse_forensics.reassembly.http.reader import DirectionReader


def await_tunnel(reader: DirectionReader, buf: bytes, pos: int, out: list[HTTPEvent]) -> int:
    """Client bytes after a CONNECT or Upgrade request are held until the server answers:
    they are the tunnel's if it accepts, HTTP if it refuses."""
    if len(buf) - pos > MAX_HEAD:
        # The server never answered: stop holding and parse as HTTP again.
        reader.state = IDLE
        return pos
    reader.stop = True
    return pos


def read_tunnel(reader: DirectionReader, buf: bytes, pos: int, out: list[HTTPEvent]) -> int:
    """The rest of the bytes being parsed belong to the protocol switched to."""
    reader.keep_tunnel_bytes(buf, pos)
    return len(buf)


def read_nothing(reader: DirectionReader, buf: bytes, pos: int, out: list[HTTPEvent]) -> int:
    """The direction ended: bytes are ignored."""
    return len(buf)
