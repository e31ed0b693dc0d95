"""One HTTP exchange as reassembled from a capture: the request, the final response, and —
for a ``text/event-stream`` response — its SSE events, comments and missing-bytes spans."""

from __future__ import annotations

from dataclasses import dataclass, field

from sse_forensics.provenance import Origin
from sse_forensics.reassembly.http_events import Headers, RequestHead, ResponseHead, header
from sse_forensics.reassembly.sse import SSEComment, SSEEvent, SSEPartialBlock
from sse_forensics.reassembly.stream import MissingSpan

# Bodies other than event streams are kept only as far as the facts need them (JSON-RPC
# requests and responses are small); a cap keeps a large download from living in memory.
MAX_KEPT_BODY = 1 << 20


@dataclass(slots=True)
class BodyHole:
    """A missing-bytes span inside a response body, at ``body_offset`` of the decoded body;
    ``body_length``: body bytes it stretches over when they are there but unreliable (an
    inconsistent retransmission), 0 for bytes that are not there at all."""

    body_offset: int
    span: MissingSpan
    body_length: int = 0


@dataclass(slots=True)
class ColumnarBody:
    """What the columnar path (:mod:`sse_forensics.reassembly.fast`) keeps of an event-stream
    body it parsed into tables rather than objects: what the exchange row reads of it."""

    event_data: list[str]  # each event's ``data``, in order (protocol version, JSON answers)
    comments: int


@dataclass(slots=True)
class SpilledEvents:
    """What an exchange keeps of the events it already handed on as rows (issue 16: a long
    event stream read by the exact path is turned into rows as it is read, not held whole):
    what the exchange row reads of them."""

    events: int = 0  # events handed on: the first ones; ``Exchange.events`` holds the rest
    lead: list[SSEEvent] = field(default_factory=list)  # the first two (an ``endpoint``)
    version_data: list[str] = field(default_factory=list)  # the first ``data`` naming a version
    comments: int = 0  # comments counted and dropped


@dataclass(slots=True)
class Exchange:
    """Request ``index`` on its connection and the final response that answered it."""

    connection_id: int
    index: int
    request: RequestHead | None = None
    request_body: bytearray = field(default_factory=bytearray)
    request_complete: bool = False
    interim: list[ResponseHead] = field(default_factory=list)
    response: ResponseHead | None = None
    response_body: bytearray = field(default_factory=bytearray)
    response_complete: bool = False
    response_end_reason: str | None = None
    response_end: Origin | None = None
    last_body_origin: Origin | None = None
    events: list[SSEEvent] = field(default_factory=list)
    comments: list[SSEComment] = field(default_factory=list)
    holes: list[BodyHole] = field(default_factory=list)
    partials: list[SSEPartialBlock] = field(default_factory=list)  # blocks a hole cut
    trailing: bytes = b""
    body_bytes: int = 0
    columnar: ColumnarBody | None = None  # the body as the columnar path keeps it
    spilled: SpilledEvents | None = None  # events already handed on as rows
    from_log: bool = False  # described by a log, not reassembled from a capture

    @property
    def request_headers(self) -> Headers:
        return self.request.headers if self.request else []

    @property
    def response_headers(self) -> Headers:
        return self.response.headers if self.response else []

    def event_data(self) -> list[str]:
        """Each SSE event's ``data``, in order, whichever path parsed the body."""
        if self.columnar is not None:
            return self.columnar.event_data
        data = [sse.data for sse in self.events]
        return self.spilled.version_data + data if self.spilled is not None else data

    def lead_events(self) -> list[SSEEvent]:
        """The first two events (spilled or not)."""
        return self.spilled.lead if self.spilled is not None else self.events[:2]

    def comment_count(self) -> int:
        if self.columnar is not None:
            return self.columnar.comments
        spilled = self.spilled.comments if self.spilled is not None else 0
        return spilled + len(self.comments)

    @property
    def is_event_stream(self) -> bool:
        """RFC 9110 §8.3: media type compared case-insensitively, parameters ignored."""
        if self.response is None:
            return False
        ctype = header(self.response.headers, "content-type") or ""
        return ctype.split(";", 1)[0].strip().lower() == "text/event-stream"

    def keep_request_body(self, data: bytes) -> None:
        room = MAX_KEPT_BODY - len(self.request_body)
        if room > 0:
            self.request_body += data[:room]

    def keep_response_body(self, data: bytes) -> None:
        room = MAX_KEPT_BODY - len(self.response_body)
        if room > 0:
            self.response_body += data[:room]
