"""Typed events produced by the HTTP/1.1 exchange parser (:mod:`.http`).

An *exchange* is one request and the final response that answers it, numbered from 0 in
order on the connection (RFC 9112 §9.3: responses come in request order). Headers keep
their wire order and original case; names are compared case-insensitively.
"""

from __future__ import annotations

from dataclasses import dataclass

from sse_forensics.provenance import Origin
from sse_forensics.reassembly.stream import Direction, MissingSpan

Headers = list[tuple[str, str]]


def header(headers: Headers, name: str) -> str | None:
    """First value of header ``name`` (case-insensitive), or ``None``."""
    lname = name.lower()
    for key, value in headers:
        if key.lower() == lname:
            return value
    return None


@dataclass(slots=True)
class RequestHead:
    exchange: int
    method: str
    target: str
    version: str
    headers: Headers
    origin: Origin


@dataclass(slots=True)
class RequestBody:
    exchange: int
    data: bytes
    origin: Origin


@dataclass(slots=True)
class RequestEnd:
    """The request ended; ``complete``/``reason`` as for :class:`ResponseEnd`."""

    exchange: int
    origin: Origin | None
    complete: bool = True
    reason: str = "complete"


@dataclass(slots=True)
class ResponseHead:
    """A response head. ``interim`` for 1xx (other than 101), which precede the final one.

    ``head_captured`` is False for a head the parser inferred because the capture holds only
    the body of an event stream (it started, or lost its place, in mid-body): then
    ``status`` is 0, ``version`` empty, ``reason`` says so, and ``headers`` are only the
    framing the body showed (``Content-Type: text/event-stream``, maybe chunked).
    ``origin`` is the frame holding the first body byte the parser resumed at.
    """

    exchange: int
    status: int
    reason: str
    version: str
    headers: Headers
    origin: Origin
    interim: bool = False
    head_captured: bool = True


@dataclass(slots=True)
class ResponseBody:
    """Decoded body bytes (transfer- and content-coding removed) from one frame.

    ``chunk`` is the index of the chunked-coding chunk the bytes came from (``None`` when
    the body is not chunked, or for bytes after a hole whose chunk header was lost) — kept
    as provenance. After a hole, indices count the chunk headers seen.
    """

    exchange: int
    data: bytes
    origin: Origin
    chunk: int | None = None


@dataclass(slots=True)
class ResponseEnd:
    """The response ended. ``complete`` is False when it ended by the end of the capture,
    a missing-bytes span the parser could not cross, or a reset — ``reason`` says which."""

    exchange: int
    origin: Origin | None
    complete: bool
    reason: str = "complete"


@dataclass(slots=True)
class BodyGap:
    """A missing-bytes span that falls inside a message body of ``exchange``."""

    exchange: int
    direction: Direction
    span: MissingSpan


@dataclass(slots=True)
class ProtocolError:
    """The bytes broke an HTTP/1.1 rule; ``what`` names it. Parsing of that direction
    resynchronises at the next message start if it can. ``cap``: set when no rule was
    broken but a cap of :mod:`sse_forensics.limits` stopped the reading (its name)."""

    direction: Direction
    what: str
    origin: Origin | None
    exchange: int | None = None
    cap: str | None = None


@dataclass(slots=True)
class Tunnel:
    """After ``101 Switching Protocols`` or a 2xx to ``CONNECT`` the connection is no longer
    HTTP; the rest of it is ignored."""

    exchange: int
    origin: Origin
    protocol: str = ""


HTTPEvent = (
    RequestHead
    | RequestBody
    | RequestEnd
    | ResponseHead
    | ResponseBody
    | ResponseEnd
    | BodyGap
    | ProtocolError
    | Tunnel
)

__all__ = [
    "BodyGap",
    "HTTPEvent",
    "Headers",
    "ProtocolError",
    "RequestBody",
    "RequestEnd",
    "RequestHead",
    "ResponseBody",
    "ResponseEnd",
    "ResponseHead",
    "Tunnel",
    "header",
]
