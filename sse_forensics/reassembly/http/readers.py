"""The readers table: the step that reads each :class:`~.state.ReadState` (h11's
``READERS``). A body's first state comes from its framing (:data:`.state.FIRST_STATE`):
content-length, chunked, close-delimited; tunnel and closed directions read nothing as
HTTP.

Each step takes ``(reader, buf, pos, out)``, appends the events the bytes give, and returns
the next position; it sets ``reader.stop`` to hold the rest until more bytes come, or
``reader.ask`` to let the connection decide something first.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from sse_forensics.reassembly.http.chunked import (
    read_chunk_data,
    read_chunk_data_end,
    read_chunk_size,
    read_trailers,
    resync_chunk,
)
from sse_forensics.reassembly.http.close_delimited import read_until_close
from sse_forensics.reassembly.http.content_length import read_length_body
from sse_forensics.reassembly.http.heads import read_head
from sse_forensics.reassembly.http.pickup import pick_up_event_stream
from sse_forensics.reassembly.http.resync import find_message_start
from sse_forensics.reassembly.http.state import ReadState
from sse_forensics.reassembly.http.tunnel import await_tunnel, read_nothing, read_tunnel
from sse_forensics.reassembly.http_events import HTTPEvent

if TYPE_CHECKING:
    from sse_forensics.reassembly.http.reader import DirectionReader

Step = Callable[["DirectionReader", bytes, int, list[HTTPEvent]], int]


def resync_message(reader: DirectionReader, buf: bytes, pos: int, out: list[HTTPEvent]) -> int:
    """The next message start; on the server after a hole, first an event-stream body."""
    if reader.pickup is not None:
        return pick_up_event_stream(reader, buf, pos, out)
    return find_message_start(reader, buf, pos, out)


_BY_STATE: dict[ReadState, Step] = {
    ReadState.IDLE: read_head,
    ReadState.BODY_LENGTH: read_length_body,
    ReadState.CHUNK_SIZE: read_chunk_size,
    ReadState.CHUNK_DATA: read_chunk_data,
    ReadState.CHUNK_DATA_END: read_chunk_data_end,
    ReadState.TRAILERS: read_trailers,
    ReadState.BODY_UNTIL_CLOSE: read_until_close,
    ReadState.RESYNC_CHUNK: resync_chunk,
    ReadState.RESYNC_MESSAGE: resync_message,
    ReadState.AWAIT_TUNNEL: await_tunnel,
    ReadState.TUNNEL: read_tunnel,
    ReadState.CLOSED: read_nothing,
}

STEPS: tuple[Step, ...] = tuple(_BY_STATE[state] for state in ReadState)
"""The step per state, indexed by the state's value (one table for every reader)."""
