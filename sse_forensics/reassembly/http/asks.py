"""What a direction's reader hands its connection: the body it reads, and the decisions
only the connection can make (whose response a head is, which framing a body has, whether
a tunnel was accepted). The reader stops at each of these; the connection answers, then
lets it go on (h11's "the connection asks the reader for the next event").

Plain slotted dataclasses, made once per message (a NamedTuple costs half as much again).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from sse_forensics.provenance import Origin
from sse_forensics.reassembly.content_coding import Decoder
from sse_forensics.reassembly.http_events import Headers
from sse_forensics.reassembly.stream import MissingSpan


@dataclass(slots=True)
class Body:
    """Framing and decoding state of the body being read."""

    exchange: int
    chunked: bool
    remaining: int = 0
    chunk: int = -1  # index of the current chunk
    decoder: Decoder | None = None
    last_origin: Origin | None = None
    wants_tunnel: bool = False  # client: CONNECT or Upgrade request
    resync_budget: int = 0


@dataclass(slots=True)
class ParsedHead:
    """A start line and header section were read: the connection pairs and frames it."""

    line: re.Match[bytes]
    headers: Headers
    origin: Origin | None  # the frame holding its first byte
    end_origin: Origin | None  # the frame holding its last byte


@dataclass(slots=True)
class HeadlessBody:
    """An event-stream body whose head the capture lacks starts here (:mod:`.pickup`)."""

    chunked: bool
    origin: Origin | None
    hole: MissingSpan  # the hole it was found after


@dataclass(slots=True)
class TunnelRequestEnded:
    """A CONNECT or Upgrade request ended: the client waits for the answer unless the
    connection already has it."""

    exchange: int


Ask = ParsedHead | HeadlessBody | TunnelRequestEnded
