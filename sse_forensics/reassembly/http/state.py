"""What a direction's reader expects next (RFC 9112 §6 message framing), and the framings
a message body can have.

States are ``IntEnum`` members so that the readers table (:mod:`.readers`) is a tuple
indexed by state: a hot-path lookup that costs no hashing.
"""

from __future__ import annotations

from enum import IntEnum


class ReadState(IntEnum):
    """Named for what the next bytes of the direction are."""

    IDLE = 0
    """A message head, or empty lines before it (RFC 9112 §2.2)."""
    BODY_LENGTH = 1
    """A Content-Length body (RFC 9112 §6.3 rule 6)."""
    CHUNK_SIZE = 2
    """A chunk-size line (RFC 9112 §7.1)."""
    CHUNK_DATA = 3
    CHUNK_DATA_END = 4
    """The CRLF after chunk data."""
    TRAILERS = 5
    """The trailer section after the last chunk (RFC 9112 §7.1.2)."""
    BODY_UNTIL_CLOSE = 6
    """A close-delimited body (RFC 9112 §6.3 rule 8)."""
    RESYNC_CHUNK = 7
    """After a hole in a chunked body: looking for a chunk header."""
    RESYNC_MESSAGE = 8
    """Looking for the next message start (or, after a server-side hole, an event-stream
    body whose head was lost: :mod:`.pickup`)."""
    AWAIT_TUNNEL = 9
    """Client: held until the server accepts or refuses a tunnel (CONNECT, Upgrade)."""
    TUNNEL = 10
    """The connection switched protocols (RFC 9112 §9.7): the rest of what is being parsed
    is kept for the caller; later bytes are not fed."""
    CLOSED = 11
    """The direction ended."""


# The members as module constants: ``ReadState.IDLE`` costs a class-attribute lookup
# through the enum machinery (~150 ns on 3.11), paid per step on the hot path.
IDLE = ReadState.IDLE
BODY_LENGTH = ReadState.BODY_LENGTH
CHUNK_SIZE = ReadState.CHUNK_SIZE
CHUNK_DATA = ReadState.CHUNK_DATA
CHUNK_DATA_END = ReadState.CHUNK_DATA_END
TRAILERS = ReadState.TRAILERS
BODY_UNTIL_CLOSE = ReadState.BODY_UNTIL_CLOSE
RESYNC_CHUNK = ReadState.RESYNC_CHUNK
RESYNC_MESSAGE = ReadState.RESYNC_MESSAGE
AWAIT_TUNNEL = ReadState.AWAIT_TUNNEL
TUNNEL = ReadState.TUNNEL
CLOSED = ReadState.CLOSED

BODY_STATES = frozenset(
    {BODY_LENGTH, CHUNK_SIZE, CHUNK_DATA, CHUNK_DATA_END, TRAILERS, BODY_UNTIL_CLOSE, RESYNC_CHUNK}
)
"""States inside a message body: a hole there is a :class:`~..http_events.BodyGap`."""


class Framing(IntEnum):
    """How a message body is delimited (RFC 9112 §6.3)."""

    NO_BODY = 0  # rule 1 (and a request without framing fields, rule 7)
    CHUNKED = 1  # rules 3-4
    CONTENT_LENGTH = 2  # rules 5-6
    UNTIL_CLOSE = 3  # rule 8 (responses only)


NO_BODY = Framing.NO_BODY
CHUNKED = Framing.CHUNKED
CONTENT_LENGTH = Framing.CONTENT_LENGTH
UNTIL_CLOSE = Framing.UNTIL_CLOSE

FIRST_STATE = {CHUNKED: CHUNK_SIZE, CONTENT_LENGTH: BODY_LENGTH, UNTIL_CLOSE: BODY_UNTIL_CLOSE}
"""The reader a body of each framing starts with."""
