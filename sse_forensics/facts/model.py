"""In-memory records the fact builder works on before it writes polars tables."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

import orjson

from sse_forensics.facts.ids import IdCodec, IdKey
from sse_forensics.facts.jsonrpc import RpcMessage
from sse_forensics.facts.signals import SignalPayload
from sse_forensics.provenance import Origin
from sse_forensics.reassembly.exchange import BodyHole
from sse_forensics.reassembly.flows import Connection
from sse_forensics.reassembly.http_events import Headers, RequestHead, ResponseHead
from sse_forensics.sse import SSEEvent

if TYPE_CHECKING:
    from sse_forensics.facts.load import EventSource

EventKind = Literal["data", "priming", "signal", "close", "other"]
# An event and what ingest read of it: its kind, JSON-RPC messages and signal payload.
EventParts = tuple[SSEEvent, EventKind, list[RpcMessage] | None, SignalPayload | None]
StreamKind = Literal["post", "get", "resume", "unknown"]  # unknown: request not captured
Evidence = dict[str, object]


def evidence(origin: Origin | None, what: str) -> Evidence:
    """One evidence entry with every key present: an element of the ``evidence`` columns
    (``facts.tables.EVIDENCE``)."""
    if origin is None:
        return {"source": None, "frame": None, "line": None, "ts": None, "what": what}
    return {
        "source": origin.source,
        "frame": origin.number if origin.kind == "frame" else None,
        "line": origin.number if origin.kind == "line" else None,
        "ts": origin.ts,
        "what": what,
    }


@dataclass(slots=True)
class LogStreamInfo:
    """What the server's event log says about one stream beyond its written events."""

    emitted: list[str] = field(default_factory=list)  # IDs in producer order (whole stream)
    evicted: dict[str, Origin] = field(default_factory=dict)  # ID → its eviction record
    evicted_why: dict[str, str] = field(default_factory=dict)  # ID → "reason where"
    stream: str = ""

    @classmethod
    def from_json(cls, text: str) -> LogStreamInfo:
        """The ``log_info`` column of the ``exchanges`` evidence table, parsed."""
        doc = orjson.loads(text)
        return cls(
            emitted=doc["emitted"],
            evicted={k: Origin(*v) for k, v in doc["evicted"].items()},
            evicted_why=doc["evicted_why"],
            stream=doc["stream"],
        )


@dataclass(frozen=True, slots=True)
class RpcCall:
    """A JSON-RPC request (not a notification) a request body carried."""

    method: str | None
    rpc_id: str | None
    signature: str  # method and params without ``_meta`` (facts.requests.call_signature)


# Records compare and hash by identity (eq=False): look-ups key dicts by the record itself.
@dataclass(slots=True, eq=False)
class ExchangeRecord:
    """One HTTP exchange as the fact layer sees it, read back from the ``exchanges`` and
    ``events`` evidence tables (:mod:`sse_forensics.evidence.tables`): the heads, the SSE
    events with their provenance, and what ingest read out of the bodies."""

    connection_id: int
    index: int
    session: str
    session_how: str
    session_inferred: bool
    request: RequestHead | None
    response: ResponseHead | None
    is_event_stream: bool
    n_events: int = 0
    # Where the events are read from when first asked for (facts.load.EventSource): most
    # streams of a partition are judged from columns and never need them as objects.
    source: EventSource | None = None
    _events: list[SSEEvent] | None = None
    # Per event, what ingest read of it (sse_forensics.evidence.classify): its kind, its
    # JSON-RPC messages (data events) and what it says (signal events).
    _kinds: list[EventKind] = field(default_factory=list)
    _rpcs: list[list[RpcMessage] | None] = field(default_factory=list)
    _signals: list[SignalPayload | None] = field(default_factory=list)
    holes: list[BodyHole] = field(default_factory=list)
    comments: int = 0
    trailing_bytes: int = 0
    body_bytes: int = 0
    response_complete: bool = False
    response_end_reason: str | None = None
    response_end: Origin | None = None
    last_body_origin: Origin | None = None
    from_log: bool = False
    # What the server's event log says of the stream, as ingest wrote it: parsed on first
    # use (``log``), since only the streams judged one by one read it.
    log_text: str | None = None
    _log: LogStreamInfo | None = None
    calls: list[RpcCall] = field(default_factory=list)
    json_answers: list[str | None] = field(default_factory=list)
    protocol_version: str | None = None

    @property
    def events(self) -> list[SSEEvent]:
        if self._events is None:
            self._events = []
            if self.source is not None:
                self.source.materialize(self)
        return self._events

    @property
    def log(self) -> LogStreamInfo | None:
        if self._log is None and self.log_text:
            self._log = LogStreamInfo.from_json(self.log_text)
        return self._log

    @log.setter
    def log(self, value: LogStreamInfo | None) -> None:
        self._log, self.log_text = value, None

    @property
    def has_log(self) -> bool:
        """The event log accounts for this stream (without parsing what it says)."""
        return self._log is not None or bool(self.log_text)

    @property
    def kinds(self) -> list[EventKind]:
        self.events  # noqa: B018 - materialises
        return self._kinds

    @property
    def rpcs(self) -> list[list[RpcMessage] | None]:
        self.events  # noqa: B018
        return self._rpcs

    @property
    def signals(self) -> list[SignalPayload | None]:
        self.events  # noqa: B018
        return self._signals

    @property
    def request_headers(self) -> Headers:
        return self.request.headers if self.request else []

    @property
    def response_headers(self) -> Headers:
        return self.response.headers if self.response else []


@dataclass(slots=True, eq=False)
class SessionRecord:
    session_id: str
    inferred: bool
    how: str  # "header" | "path" | "connection"
    protocol_version: str | None = None
    id_scheme: str = "opaque"
    counter_scope: str = "unknown"


@dataclass(slots=True, eq=False)
class EventRecord:
    stream: StreamRecord
    position: int  # index among the stream's SSE events (0-based)
    sse: SSEEvent
    kind: EventKind
    key: IdKey | None = None
    signal: SignalPayload | None = None
    rpc: list[RpcMessage] | None = None
    carries_id: bool = False
    """The block set a non-empty ``id`` (WHATWG: an empty ``id`` resets, NUL is ignored)."""

    def __post_init__(self) -> None:
        self.carries_id = bool(self.sse.id_field)

    @property
    def id_field(self) -> str:
        """The ``id`` this block set; ``""`` when none did (``carries_id`` is False)."""
        return self.sse.id_field or ""

    @property
    def counter(self) -> IdKey:
        """``key`` of an event known to have one (its codec read its ID)."""
        assert self.key is not None, "counter of an event whose ID has no key"
        return self.key

    @property
    def origin(self) -> Origin | None:
        return self.sse.origins[0] if self.sse.origins else None

    @property
    def last_origin(self) -> Origin | None:
        return self.sse.origins[-1] if self.sse.origins else None

    def cite(self, what: str | None = None) -> Evidence:
        label = what or f"{self.kind} event id {self.sse.id_field or self.sse.id!r}"
        return evidence(self.origin, label)


@dataclass(slots=True, eq=False)
class StreamRecord:
    """One ``text/event-stream`` response (docs/profile.md, "Sessions and streams")."""

    key: str
    label: str
    exchange: ExchangeRecord
    connection: Connection
    session: SessionRecord
    kind: StreamKind
    last_event_id: str | None
    root: StreamRecord | None = None  # the stream this one continues (itself when original)
    resumed_from: StreamRecord | None = None  # where Last-Event-ID was seen
    resumed_event: EventRecord | None = None
    codec: IdCodec | None = None  # the session's ID scheme: gives each event its key
    _events: list[EventRecord] | None = None
    # Records of single events built before the others (:meth:`record`), by position: the
    # very objects :attr:`events` holds once built (the timeline looks gaps' events up by
    # identity).
    _singles: dict[int, EventRecord] = field(default_factory=dict)

    @property
    def events(self) -> list[EventRecord]:
        """The response's events as records, built on first use."""
        if self._events is None:
            ex = self.exchange
            out = [
                self._new(position, parts)
                for position, parts in enumerate(
                    zip(ex.events, ex.kinds, ex.rpcs, ex.signals, strict=True)
                )
            ]
            for position, single in self._singles.items():
                out[position] = single
            self._events, self._singles = out, {}
        return self._events

    @property
    def events_built(self) -> bool:
        """Its events are records already, or read as objects (:attr:`events` is cheap)."""
        return self._events is not None or self.exchange._events is not None

    def record(self, position: int, parts: EventParts) -> EventRecord:
        """Event ``position`` of this response as a record, as :attr:`events` builds it,
        without building the others (``facts.windows``); :attr:`events` holds this one."""
        if self._events is not None:
            return self._events[position]
        e = self._singles.get(position)
        if e is None:
            e = self._singles[position] = self._new(position, parts)
        return e

    def _new(self, position: int, parts: EventParts) -> EventRecord:
        """Event ``position`` (``parts``: the event and what ingest read of it) as a
        record, keyed by the stream's ID scheme."""
        sse, kind, rpc, signal = parts
        e = EventRecord(self, position, sse, kind, signal=signal, rpc=rpc)
        if e.carries_id and self.codec is not None:
            e.key = self.codec.key(e.id_field)
        return e

    def release(self) -> None:
        """Drop the event records built for this stream: each points back at its stream,
        and the cycles would wait for the cyclic collector (pipeline.analyze_partition)."""
        self._events, self._singles = None, {}
        self.resumed_event = None

    @property
    def logical(self) -> StreamRecord:
        return self.root or self

    @property
    def status(self) -> int | None:
        return self.exchange.response.status if self.exchange.response else None

    @property
    def request_origin(self) -> Origin | None:
        return self.exchange.request.origin if self.exchange.request else None

    @property
    def response_origin(self) -> Origin | None:
        return self.exchange.response.origin if self.exchange.response else None

    @property
    def first_ts(self) -> float:
        origin = self.request_origin or self.response_origin or self.connection.first
        return origin.ts

    def id_events(self) -> list[EventRecord]:
        return [e for e in self.events if e.carries_id]

    def data_events(self) -> list[EventRecord]:
        return [e for e in self.events if e.kind == "data"]
