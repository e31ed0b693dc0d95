"""A real Starlette/uvicorn server speaking the wire contract of docs/profile.md.

MCP streamable-HTTP style at ``/mcp``: ``initialize`` is answered with JSON and an
``Mcp-Session-Id``; ``tools/call`` with a ``text/event-stream`` of progress notifications and
the JSON-RPC result; ``GET /mcp`` with ``Last-Event-ID`` replays a stream from its replay
buffer (linked by event ID, never by URL). Every way of losing events the samples need is a
knob of :class:`ServerKnobs`, so each scenario is the same honest server told to misbehave in
one precise way. Not part of the package: only ``samples/make_samples.py`` uses it.

Given a :class:`ServerLog`, the server also writes the logs a production deployment would
leave (docs/logs.md): an nginx-format access log (preset ``mcp``), one line per request when
its response ends, and a JSON-lines event log, one record per thing that happened to an
event, written by the producer, the send queue and the replay code as it happens.
"""

from __future__ import annotations

import asyncio
import gzip
import itertools
import json
import random
import socket
import threading
import time
import uuid
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, fields, replace
from functools import partial
from pathlib import Path
from typing import IO, Any, Literal

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route
from uvicorn.protocols.http.auto import AutoHTTPProtocol

PROTOCOL_VERSION = "2025-11-25"  # answered when the client asks for none
IdScheme = Literal["int", "prefixed", "opaque"]
EmptyReplay = Literal["ends", "keepalive"]

# Headers every event stream carries: caches and reverse proxies must neither store nor
# buffer an event stream (nginx honours X-Accel-Buffering).
STREAM_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
# How long a stalled live stream waits for its client to go away before giving up.
STALL_SECONDS = 5.0
KEEPALIVE_SECONDS = 0.5  # between the `: ping` comments of a replay that sends nothing else
# How long the writer's send must have been waiting before the producer calls it blocked:
# far above a send that merely yields to the event loop, far below the client's pause.
BLOCKED_SECONDS = 0.3
FILLER = "the quick brown fox jumps over the lazy dog "  # pads progress messages
# Event-log eviction records (docs/logs.md): `where` the event was dropped, and why.
LIVE_QUEUE = "live-queue"  # before it was written on the live stream
REPLAY_BUFFER = "replay-buffer"  # from what a resume can replay
QUEUE_FULL = "send queue full"  # SendQueue overflow: the writer is blocked in send
LIVE_LOSS = "dropped by the producer"  # the live_evicted knob: a careless server
REPLAY_LOSS = "not retained"  # the replay_evicted knob: the buffer lost it


@dataclass(frozen=True)
class ServerKnobs:
    """How the server numbers, writes, evicts and replays events (one scenario's server).

    The stream faults (``STREAM_FAULTS``: eviction, stalls, stream-gap, re-sends, replay
    buffer loss) apply to the streams in ``faulty_streams``, numbered server-wide from 1 in
    the order the server opened them (``None``: every stream); the resume knobs apply to
    every resume.
    """

    session_prefix: str  # the k-th initialize opens session f"{session_prefix}-{k:04d}"
    id_scheme: IdScheme = "int"
    shared_counter: bool = False  # one counter for all streams of the server
    seed: str = "sse-forensics"  # opaque IDs come from a PRNG seeded with this
    events_per_call: int = 20  # data events per tools/call stream, the result included
    event_interval: float = 0.005  # seconds between events (one TCP segment each)
    priming: bool = True  # 2025-11-25 priming event: an ID with empty data
    retry_ms: int = 1000
    keepalive_every: int = 0  # a `: ping` comment after every k data events (0: none)
    live_evicted: tuple[int, int] | None = None  # data events assigned an ID, never written
    signal_stream_gap: bool = False  # announce live_evicted with a stream-gap event
    stream_gap_late: bool = False  # ... but only after the next data event (too late)
    resend: tuple[int, int] | None = None  # (a, b): after data event a, send event b again
    live_stop_after: int | None = None  # live writer stalls after this data event
    backpressure_after: int | None = None  # backpressure-disconnect after this data event
    backpressure_unflushed: bool = False  # ... which it names, but it never hit the socket
    replay_evicted: tuple[int, int] | None = None  # data events missing from the replay buffer
    resume_status: int = 200  # e.g. 410 or 500: the server refuses every resume
    signal_resume_gap: bool = False  # a resume-gap event opens a replay that jumps
    empty_replay: EmptyReplay | None = None  # a 200 resume that ends at once / only pings
    replay_from_oldest: bool = False  # replay the whole buffer whatever Last-Event-ID says
    replay_inclusive: bool = False  # off by one: the replay starts AT Last-Event-ID
    replay_foreign: str | None = None  # this event of another stream ends every replay
    no_store: bool = False  # streams carry Cache-Control: no-store (no resumption offered)
    faulty_streams: tuple[int, ...] | None = None
    interleaved_calls: int = 0  # n concurrent tools/call streams take turns on the counter
    standalone_events: int = 0  # GET stream: notifications sent once the calls finished
    payload_bytes: int = 0  # pad each progress message to about this many bytes
    # Backpressure: events pass through a bounded send queue of this many events, drained by
    # a writer that awaits the ASGI send; when the queue is full the producer evicts the
    # oldest queued event and keeps counting (0: events go straight to the response).
    send_queue: int = 0
    burst: tuple[int, int] | None = None  # data events produced at once, writer idle
    blocked_burst: tuple[int, int] | None = None  # ... at once, writer blocked in send
    send_buffer: int | None = None  # SO_SNDBUF of the listening socket (connections inherit it)
    write_high_water: int | None = None  # uvicorn pauses writing above this many bytes buffered


@dataclass
class StoredEvent:
    """One event as written (or as it would have been written) on a stream."""

    event_id: str
    data: str  # "" for a priming event
    replayable: bool = True


@dataclass
class EventStream:
    """A server-side stream: its number, its events in ID order, and its replay buffer."""

    number: int
    session: str
    faulty: bool  # the scenario's misbehaviour applies to this stream
    exchange: str | None = None  # the HTTP exchange that opened it (the event log's `request`)
    assigned: list[str] = field(default_factory=list)  # every ID handed out, evicted or not
    events: list[StoredEvent] = field(default_factory=list)  # the replay buffer
    written: dict[str, StoredEvent] = field(default_factory=dict)  # every event, by ID


class EventIdAllocator:
    """Hands out event IDs in one of the three PROFILE schemes.

    Allocation ``n`` of stream ``s`` is ``n`` (int, per stream), ``s<s>_<n>`` (prefixed) or
    the ``n``-th UUID of a PRNG seeded by (seed, s) (opaque): the same IDs on every run.
    With ``shared`` the int counter is one for the whole server and starts at 1.
    """

    def __init__(self, scheme: IdScheme, shared: bool, seed: str) -> None:
        self.scheme = scheme
        self.shared = shared
        self.seed = seed
        self.shared_next = 1
        self.per_stream_next: dict[int, int] = {}
        self.generators: dict[int, random.Random] = {}

    def allocate(self, stream: int) -> str:
        if self.shared:
            value = self.shared_next
            self.shared_next += 1
            return str(value)
        n = self.per_stream_next.get(stream, 0)
        self.per_stream_next[stream] = n + 1
        if self.scheme == "int":
            return str(n)
        if self.scheme == "prefixed":
            return f"s{stream}_{n}"
        rng = self.generators.setdefault(stream, random.Random(f"{self.seed}/{stream}"))
        return str(uuid.UUID(int=rng.getrandbits(128), version=4))


def expected_event_id(knobs: ServerKnobs, stream: int, data_event: int) -> str:
    """The ID data event ``data_event`` (1-based) of ``stream`` gets: for expected.json."""
    allocator = EventIdAllocator(knobs.id_scheme, knobs.shared_counter, knobs.seed)
    offset = 0 if knobs.priming else 1
    event_id = ""
    for _ in range(data_event + 1 - offset):
        event_id = allocator.allocate(stream)
    return event_id


def sse_event(
    data: str, event_id: str | None = None, event: str | None = None, retry: int | None = None
) -> bytes:
    """Serialize one event (WHATWG HTML §9.2.5 `text/event-stream`), LF line endings."""
    lines = []
    if event is not None:
        lines.append(f"event: {event}")
    if event_id is not None:
        lines.append(f"id: {event_id}")
    if retry is not None:
        lines.append(f"retry: {retry}")
    lines.extend(f"data: {line}" if line else "data:" for line in data.split("\n"))
    return ("\n".join(lines) + "\n\n").encode()


def wire_id(event_id: str) -> int | str:
    """IDs inside signal payloads are written as on the wire: JSON numbers for int IDs."""
    return int(event_id) if event_id.isdigit() else event_id


def jsonrpc(payload: dict) -> str:
    return json.dumps({"jsonrpc": "2.0", **payload}, separators=(",", ":"))


class ProfileServer:
    """State of one server instance: its sessions, their streams and the ID counter."""

    def __init__(self, knobs: ServerKnobs, log: ServerLog | None = None) -> None:
        self.knobs = knobs
        self.log = log
        self.ids = EventIdAllocator(knobs.id_scheme, knobs.shared_counter, knobs.seed)
        self.sessions: list[str] = []
        self.streams: list[EventStream] = []
        self.event_index: dict[str, EventStream] = {}  # event ID -> the stream it was sent on
        self.calls_started = 0
        self.calls_finished = 0
        self.turn = asyncio.Condition()
        self.calls_done = asyncio.Event()

    def app(self) -> Any:
        app = Starlette(routes=[Route("/mcp", self.endpoint, methods=["POST", "GET", "DELETE"])])
        return app if self.log is None else AccessLog(app, self.log)

    def note(
        self,
        kind: str,
        stream: EventStream,
        event_id: str | None = None,
        exchange: str | None = None,
        last_event_id: str | None = None,
        **what: object,
    ) -> None:
        """One event-log record about ``stream`` (nothing without a log); ``exchange``
        defaults to the request that opened the stream."""
        if self.log is not None:
            exchange = exchange or stream.exchange
            self.log.event(kind, stream, event_id, exchange, last_event_id, **what)

    # --- HTTP ---------------------------------------------------------------------------
    async def endpoint(self, request: Request) -> Response:
        if request.method == "POST":
            return await self.post(request)
        session = request.headers.get("mcp-session-id", "")
        if session not in self.sessions:
            return self.error(404, None, "Not Found: unknown session", session)
        if request.method == "DELETE":
            return Response(status_code=200, headers=session_header(session))
        last_event_id = request.headers.get("last-event-id")
        if last_event_id is not None:
            return self.resume(last_event_id, session, exchange_of(request))
        return self.standalone_stream(session, exchange_of(request))

    def error(self, status: int, request_id: object, message: str, session: str) -> JSONResponse:
        body = {"jsonrpc": "2.0", "id": request_id, "error": {"code": -32000, "message": message}}
        return JSONResponse(body, status_code=status, headers=session_header(session))

    def initialize(self, message: dict) -> JSONResponse:
        """A new session; the protocol version the client asks for is the one negotiated."""
        session = f"{self.knobs.session_prefix}-{len(self.sessions) + 1:04d}"
        self.sessions.append(session)
        version = message.get("params", {}).get("protocolVersion", PROTOCOL_VERSION)
        if self.log is not None and self.log.style.initialize:
            what = {"type": "initialize", "protocol_version": version}
            self.log.record("control", session, event=what)
        result = {
            "protocolVersion": version,
            "capabilities": {"tools": {"listChanged": False}},
            "serverInfo": {"name": "profile-server", "version": "1.0"},
        }
        body = {"jsonrpc": "2.0", "id": message["id"], "result": result}
        return JSONResponse(body, headers=session_header(session))

    async def post(self, request: Request) -> Response:
        message = await request.json()
        method = message.get("method")
        if method == "initialize":
            return self.initialize(message)
        session = request.headers.get("mcp-session-id", "")
        if session not in self.sessions:
            return self.error(404, message.get("id"), "Not Found: unknown session", session)
        if "id" not in message:  # a notification (initialized, cancelled)
            return Response(status_code=202, headers=session_header(session))
        if method == "tools/call":
            stream = self.new_stream(session, exchange_of(request))
            # A server that disconnects slow streams closes the connection, not just the body.
            closes = stream.faulty and self.knobs.backpressure_after is not None
            return self.event_stream(self.tool_call(stream, message), session, close=closes)
        return self.error(400, message["id"], f"unsupported method {method}", session)

    def event_stream(
        self, body: AsyncIterator[bytes], session: str, close: bool = False
    ) -> StreamingResponse:
        headers = {**STREAM_HEADERS, **session_header(session)}
        if self.knobs.no_store:  # PROFILE: "the server offers no resumption"
            headers["Cache-Control"] = "no-store"
        if close:  # the server ends the connection, not only the response
            headers["Connection"] = "close"
        return StreamingResponse(body, media_type="text/event-stream", headers=headers)

    # --- streams ------------------------------------------------------------------------
    def new_stream(self, session: str, exchange: str | None) -> EventStream:
        number = len(self.streams) + 1
        faulty = self.knobs.faulty_streams is None or number in self.knobs.faulty_streams
        stream = EventStream(number, session, faulty, exchange)
        self.streams.append(stream)
        return stream

    async def allocate(self, stream: EventStream, slot: int | None) -> str:
        """Next ID for ``stream``; interleaved calls wait their turn on the shared counter."""
        if slot is None:
            return self.ids.allocate(stream.number)
        turns = self.knobs.interleaved_calls
        async with self.turn:
            await asyncio.wait_for(
                self.turn.wait_for(lambda: (self.ids.shared_next - 1) % turns == slot),
                timeout=STALL_SECONDS,
            )
            event_id = self.ids.allocate(stream.number)
            self.turn.notify_all()
        return event_id

    def store(self, stream: EventStream, event: StoredEvent, keep: bool) -> None:
        """A new event (the producer ``emitted`` it), kept for replay unless ``keep`` is
        False: then the replay buffer lost it at once (``evicted`` there)."""
        stream.assigned.append(event.event_id)
        stream.written[event.event_id] = event
        self.event_index[event.event_id] = stream
        self.note("emitted", stream, event.event_id)
        if keep:
            stream.events.append(event)
        else:
            self.note("evicted", stream, event.event_id, reason=REPLAY_LOSS, where=REPLAY_BUFFER)

    def written(self, stream: EventStream, event_id: str, chunk: bytes, **to: str | None) -> bytes:
        """``chunk`` (event ``event_id``), noted as handed to the socket: the caller yields
        it to Starlette, which passes it to the ASGI send at once. ``to``: the exchange and
        Last-Event-ID of a replay (default: the live stream)."""
        self.note("written", stream, event_id, **to)
        return chunk

    def signal(self, stream: EventStream, event: dict, **to: str | None) -> bytes:
        """A control event (docs/profile.md, "Gap signalling"), noted as the log's style says (the
        decision, the event written, or both), as it goes on the wire."""
        fields = {k: v for k, v in event.items() if k != "type"}
        data = json.dumps(fields)
        if self.log is not None:
            exchange = to.get("exchange") or stream.exchange
            if self.log.style.signals in ("control", "both"):
                self.log.decision(stream, event, exchange, to.get("last_event_id"))
            if self.log.style.signals in ("written", "both"):
                written = {"type": event["type"], "data": data}
                self.note("written", stream, event=written, **to)
        return sse_event(data, event=event["type"])

    def keepalive(self, stream: EventStream | None, **to: str | None) -> bytes:
        """A `: ping` comment, noted when the log's style records keep-alives."""
        if self.log is not None and self.log.style.keepalives and stream is not None:
            self.note("control", stream, event={"type": "keepalive"}, **to)
        return b": ping\n\n"

    async def tool_call(self, stream: EventStream, request: dict) -> AsyncIterator[bytes]:
        """The result stream of one tools/call: priming, progress notifications, result.

        ``arguments.steps`` sets the number of progress notifications (default: the knob's).
        """
        knobs = self.knobs if stream.faulty else honest(self.knobs)
        if knobs.send_queue:
            async for chunk in self.queued_tool_call(stream, request, knobs):
                yield chunk
            return
        slot = None
        if knobs.interleaved_calls:
            slot = self.calls_started
            self.calls_started += 1
        params = request.get("params", {})
        token = params.get("_meta", {}).get("progressToken", request["id"])
        steps = params.get("arguments", {}).get("steps")
        live = True  # False once the live connection stopped carrying events
        try:
            if knobs.priming:
                priming = StoredEvent(await self.allocate(stream, slot), "", replayable=False)
                self.store(stream, priming, keep=True)
                primed = sse_event("", priming.event_id, retry=knobs.retry_ms)
                yield self.written(stream, priming.event_id, primed)
            total = knobs.events_per_call if steps is None else steps + 1
            for n in range(1, total + 1):
                data = call_data(request["id"], token, n, total, knobs.payload_bytes)
                event = StoredEvent(await self.allocate(stream, slot), data)
                self.store(stream, event, keep=not in_range(n, knobs.replay_evicted))
                if not live:
                    continue  # the tool keeps producing into the replay buffer
                if in_range(n, knobs.live_evicted):
                    # A careless server evicts events and keeps counting.
                    self.note("evicted", stream, event.event_id, reason=LIVE_LOSS, where=LIVE_QUEUE)
                    continue
                gap = knobs.live_evicted
                signal_now = knobs.signal_stream_gap and gap and n == gap[1] + 1
                if signal_now and not knobs.stream_gap_late:
                    yield self.stream_gap_event(stream, gap)
                await asyncio.sleep(knobs.event_interval)
                unflushed = n == knobs.backpressure_after and knobs.backpressure_unflushed
                if unflushed:  # still queued when the server dropped the queue
                    reason = "dropped at backpressure-disconnect"
                    self.note("evicted", stream, event.event_id, reason=reason, where=LIVE_QUEUE)
                else:
                    yield self.written(stream, event.event_id, sse_event(data, event.event_id))
                if signal_now and knobs.stream_gap_late:  # after the data event it covers for
                    yield self.stream_gap_event(stream, gap)
                if knobs.resend and n == knobs.resend[0]:  # a retry bug: an old event again
                    again = stream.written[self.id_of(stream, knobs.resend[1])]
                    await asyncio.sleep(knobs.event_interval)
                    yield self.written(
                        stream, again.event_id, sse_event(again.data, again.event_id)
                    )
                if knobs.keepalive_every and n % knobs.keepalive_every == 0 and n < total:
                    yield self.keepalive(stream)
                if n == knobs.backpressure_after:
                    last = wire_id(event.event_id)
                    yield self.signal(
                        stream, {"type": "backpressure-disconnect", "last_written_id": last}
                    )
                    live = False
                elif n == knobs.live_stop_after:
                    live = False
            if knobs.live_stop_after is not None and knobs.backpressure_after is None:
                # Stalled: hold the response open until the client gives up (Starlette
                # cancels this generator when uvicorn reports the disconnect).
                await asyncio.sleep(STALL_SECONDS)
        finally:
            self.calls_finished += 1
            if self.calls_finished >= max(knobs.interleaved_calls, 1):
                self.calls_done.set()

    async def queued_tool_call(
        self, stream: EventStream, request: dict, knobs: ServerKnobs
    ) -> AsyncIterator[bytes]:
        """The tools/call stream of a server with a bounded send queue: a producer task
        puts events in, this generator is the writer (Starlette awaits the ASGI send for
        each chunk it yields before asking for the next; uvicorn makes that send wait
        while the transport is paused, i.e. while the socket's buffers are full)."""
        queue = SendQueue(knobs.send_queue, partial(self.note, stream=stream))
        producer = asyncio.create_task(self.produce(stream, request, knobs, queue))
        try:
            async for chunk in queue.writer():
                yield chunk
        finally:
            producer.cancel()

    async def produce(
        self, stream: EventStream, request: dict, knobs: ServerKnobs, queue: SendQueue
    ) -> None:
        """The tool: priming, progress notifications and result into ``queue``.

        Bursts make the evicted IDs the same on every run whatever the buffers hold: the
        ``burst`` is produced while the writer is idle, so it takes it whole in one send
        that overfills the transport (uvicorn pauses writing); the next event's send then
        waits, and only once it has waited :data:`BLOCKED_SECONDS` is the
        ``blocked_burst`` produced, into an empty queue: its first events are evicted
        by the later ones."""
        try:
            params = request.get("params", {})
            token = params.get("_meta", {}).get("progressToken", request["id"])
            steps = params.get("arguments", {}).get("steps")
            if knobs.priming:
                priming = StoredEvent(self.ids.allocate(stream.number), "", replayable=False)
                self.store(stream, priming, keep=True)
                primed = sse_event("", priming.event_id, retry=knobs.retry_ms)
                queue.offer(priming.event_id, primed)
            total = knobs.events_per_call if steps is None else steps + 1
            bursts = [span for span in (knobs.burst, knobs.blocked_burst) if span]
            for n in range(1, total + 1):
                data = call_data(request["id"], token, n, total, knobs.payload_bytes)
                event = StoredEvent(self.ids.allocate(stream.number), data)
                self.store(stream, event, keep=True)
                if knobs.burst and n == knobs.burst[0]:
                    await queue.idle()
                elif knobs.blocked_burst and n == knobs.blocked_burst[0]:
                    await queue.blocked(BLOCKED_SECONDS)
                elif knobs.blocked_burst and n == knobs.blocked_burst[1] + 1:
                    await queue.idle()  # the client caught up: back to the usual pace
                if not any(in_range(n, span) for span in bursts):
                    await asyncio.sleep(knobs.event_interval)
                queue.offer(event.event_id, sse_event(data, event.event_id))
        finally:
            queue.close()
            self.calls_finished += 1
            if self.calls_finished >= max(knobs.interleaved_calls, 1):
                self.calls_done.set()

    def stream_gap_event(self, stream: EventStream, gap: tuple[int, int]) -> bytes:
        """`stream-gap` {first, last}: the IDs the evicted data events were assigned."""
        first = wire_id(self.id_of(stream, gap[0]))
        last = wire_id(self.id_of(stream, gap[1]))
        return self.signal(stream, {"type": "stream-gap", "first": first, "last": last})

    def id_of(self, stream: EventStream, data_event: int) -> str:
        """ID assigned to data event ``data_event`` (1-based) of ``stream``."""
        offset = 0 if self.knobs.priming else 1
        return stream.assigned[data_event - offset]

    def resume(self, last_event_id: str, session: str, exchange: str | None) -> Response:
        """GET with Last-Event-ID: replay what follows that ID on the stream it was seen on."""
        stream = self.event_index.get(last_event_id)
        status = self.knobs.resume_status
        if stream is None or status == 410:
            if self.log is not None and self.log.style.refusals:
                refused = {"type": "resume-refused", "requested": wire_id(last_event_id)}
                self.log.record("control", session, event=refused)
            message = f"Gone: events after {last_event_id} are no longer kept"
            return self.error(410, None, message, session)
        if status != 200:
            return self.error(status, None, "Internal Server Error: replay failed", session)
        if self.knobs.empty_replay is not None:
            to = {"exchange": exchange, "last_event_id": last_event_id}
            return self.event_stream(self.empty_replay(stream, **to), session)
        replay = self.replay(stream, last_event_id, exchange)
        return self.event_stream(replay, session)

    async def empty_replay(self, stream: EventStream, **to: str | None) -> AsyncIterator[bytes]:
        """A 200 that replays nothing: it ends at once, or sends only keep-alive comments."""
        if self.knobs.empty_replay == "keepalive":
            deadline = time.monotonic() + STALL_SECONDS
            while time.monotonic() < deadline:  # until the client gives up
                await asyncio.sleep(KEEPALIVE_SECONDS)
                yield self.keepalive(stream, **to)

    async def replay(
        self, stream: EventStream, requested: str, exchange: str | None
    ) -> AsyncIterator[bytes]:
        """What the replay buffer still holds after ``requested``, in ID order (or, per the
        knobs, the whole buffer, from ``requested`` itself, plus a foreign event)."""
        to = {"exchange": exchange, "last_event_id": requested}
        rank = {event_id: i for i, event_id in enumerate(stream.assigned)}
        start = rank[requested] + (0 if self.knobs.replay_inclusive else 1)
        if self.knobs.replay_from_oldest:
            start = 0
        pending = [e for e in stream.events if e.replayable and rank[e.event_id] >= start]
        if self.knobs.replay_foreign is not None:  # the event store mixed up its streams
            foreign = self.event_index[self.knobs.replay_foreign]
            pending.append(foreign.written[self.knobs.replay_foreign])
        if self.knobs.signal_resume_gap and pending:
            oldest = wire_id(pending[0].event_id)
            signal = {"type": "resume-gap", "requested": wire_id(requested)}
            yield self.signal(stream, {**signal, "oldest_retained": oldest}, **to)
        for event in pending:
            await asyncio.sleep(self.knobs.event_interval)
            yield self.written(stream, event.event_id, sse_event(event.data, event.event_id), **to)

    def standalone_stream(self, session: str, exchange: str | None) -> Response:
        if not self.knobs.standalone_events:
            return Response(status_code=405, headers=session_header(session))
        stream = self.new_stream(session, exchange)
        return self.event_stream(self.notifications(stream), session)

    async def notifications(self, stream: EventStream) -> AsyncIterator[bytes]:
        """Standalone GET stream: quiet until the calls finish, then a few notifications."""
        await asyncio.wait_for(self.calls_done.wait(), timeout=STALL_SECONDS)
        if self.knobs.priming:
            priming = StoredEvent(self.ids.allocate(stream.number), "", replayable=False)
            self.store(stream, priming, keep=True)
            primed = sse_event("", priming.event_id, retry=self.knobs.retry_ms)
            yield self.written(stream, priming.event_id, primed)
        for n in range(1, self.knobs.standalone_events + 1):
            params = {"level": "info", "logger": "profile-server", "data": f"notice {n}"}
            data = jsonrpc({"method": "notifications/message", "params": params})
            event = StoredEvent(self.ids.allocate(stream.number), data)
            self.store(stream, event, keep=True)
            await asyncio.sleep(self.knobs.event_interval)
            yield self.written(stream, event.event_id, sse_event(data, event.event_id))


# The knobs that make a stream misbehave; a stream outside ``faulty_streams`` has none.
STREAM_FAULTS = (
    "live_evicted",
    "signal_stream_gap",
    "stream_gap_late",
    "resend",
    "live_stop_after",
    "backpressure_after",
    "backpressure_unflushed",
    "replay_evicted",
    "send_queue",
    "burst",
    "blocked_burst",
)


def honest(knobs: ServerKnobs) -> ServerKnobs:
    """``knobs`` without the stream faults: same numbering and timing, nothing lost."""
    defaults = {f.name: f.default for f in fields(ServerKnobs) if f.name in STREAM_FAULTS}
    return replace(knobs, **defaults)


class SendQueue:
    """A bounded queue of serialized events between a producer and one writer.

    A careless server: when the queue is full, :meth:`offer` evicts the oldest queued event
    (its ID stays assigned, it is never written, nothing tells the client).
    """

    def __init__(self, capacity: int, note: Callable[..., None] | None = None) -> None:
        self.capacity = capacity
        self.note = note or (lambda *args, **kw: None)  # event-log records: evicted, written
        self.queued: deque[tuple[str, bytes]] = deque()
        self.evicted: list[str] = []
        self.sending_since: float | None = None  # the writer's send started then, not done
        self.closed = False
        self.ready = asyncio.Event()  # set: something queued, or closed

    def offer(self, event_id: str, chunk: bytes) -> None:
        if len(self.queued) >= self.capacity:
            evicted = self.queued.popleft()[0]
            self.evicted.append(evicted)
            self.note("evicted", event_id=evicted, reason=QUEUE_FULL, where=LIVE_QUEUE)
        self.queued.append((event_id, chunk))
        self.ready.set()

    def close(self) -> None:
        self.closed = True
        self.ready.set()

    async def writer(self) -> AsyncIterator[bytes]:
        """Everything queued, as one chunk per send, until closed and empty."""
        while True:
            await self.ready.wait()
            if not self.queued:
                return  # closed
            chunk = b"".join(c for _, c in self.queued)
            for event_id, _ in self.queued:  # one send hands them all to the socket
                self.note("written", event_id=event_id)
            self.queued.clear()
            if not self.closed:
                self.ready.clear()
            self.sending_since = time.monotonic()
            yield chunk  # resumed once the send returned
            self.sending_since = None

    async def idle(self) -> None:
        """Until the writer has sent everything queued (it waits for the next event)."""
        await self.poll(lambda: not self.queued and self.sending_since is None)

    async def blocked(self, seconds: float) -> None:
        """Until the writer's send has been waiting ``seconds`` (the socket is full)."""

        def waited() -> bool:
            since = self.sending_since
            return since is not None and time.monotonic() - since >= seconds

        await self.poll(waited)

    async def poll(self, condition: Callable[[], bool]) -> None:
        """Wait for ``condition``; give up after :data:`STALL_SECONDS` (the capture's
        wire check then reports what the scenario failed to produce)."""
        deadline = time.monotonic() + STALL_SECONDS
        while not condition() and time.monotonic() < deadline:
            await asyncio.sleep(0.01)


def call_data(request_id: object, token: object, n: int, total: int, pad: int) -> str:
    """Data event ``n`` of ``total`` of a tools/call: a progress notification (its message
    padded to about ``pad`` bytes), the JSON-RPC result last."""
    if n == total:
        result = {"content": [{"type": "text", "text": f"done after {total - 1} steps"}]}
        return jsonrpc({"id": request_id, "result": result})
    message = f"step {n}"
    if pad > len(message):
        message += ": " + (FILLER * (pad // len(FILLER) + 1))[: pad - len(message) - 2]
    params = {"progressToken": token, "progress": n, "total": total - 1, "message": message}
    return jsonrpc({"method": "notifications/progress", "params": params})


# --- logs --------------------------------------------------------------------------------
@dataclass(frozen=True)
class LogStyle:
    """How a server writes its logs (docs/logs.md, "Record shapes"): the access-log format,
    and which records say what it signalled and decided.

    ``signals``: a signal sent is logged as the server's decision (``control``), as the
    event written (``written`` named after the signal, its payload in ``event.data``), or
    both. ``bare_decisions``: decision records name their session and time only (no
    ``request``, no ``stream``), as a server logs a decision taken away from the response.
    ``initialize``, ``keepalives``, ``refusals``: ``control`` records for the negotiated
    protocol version, each keep-alive comment written, each resume answered 410."""

    access_format: Literal["mcp", "combined-mcp"] = "mcp"
    signals: Literal["control", "written", "both"] = "control"
    bare_decisions: bool = False
    initialize: bool = False
    keepalives: bool = False
    refusals: bool = False


class ServerLog:
    """The logs of one server run, in ``directory``: ``access.log`` in nginx's ``mcp`` (or
    ``combined-mcp``) format and ``events.jsonl``, the event log (docs/logs.md, canonical
    schema), records shaped as ``style`` says. Each line is flushed as written, so the files
    are complete whenever the server is."""

    def __init__(self, directory: Path, style: LogStyle | None = None) -> None:
        self.style = style or LogStyle()
        directory.mkdir(parents=True, exist_ok=True)
        self.access_path = directory / "access.log"
        self.events_path = directory / "events.jsonl"
        self.access_file: IO[str] = self.access_path.open("w", encoding="utf-8")
        self.events_file: IO[str] = self.events_path.open("w", encoding="utf-8")
        self.exchanges = itertools.count(1)

    def next_exchange(self) -> str:
        """An identifier for the next HTTP exchange (the event log's ``request``)."""
        return f"x{next(self.exchanges):04d}"

    def event(
        self,
        kind: str,
        stream: EventStream,
        event_id: str | None,
        exchange: str | None,
        last_event_id: str | None,
        **what: object,
    ) -> None:
        """One record: ``kind`` emitted | written | evicted | control, at this moment."""
        self.record(
            kind,
            stream.session,
            f"stream-{stream.number}",
            event_id,
            exchange,
            last_event_id,
            **what,
        )

    def record(
        self,
        kind: str,
        session: str,
        stream: str | None = None,
        event_id: str | None = None,
        exchange: str | None = None,
        last_event_id: str | None = None,
        **what: object,
    ) -> None:
        """One record of ``session`` (``stream`` None: about no stream), at this moment."""
        record: dict[str, object] = {"ts": round(time.time(), 6), "session": session}
        if stream is not None:
            record["stream"] = stream
        record.update({"event_id": event_id, "kind": kind, **what})
        if exchange is not None:
            record["request"] = exchange
        if last_event_id is not None:
            record["last_event_id"] = last_event_id
        self.events_file.write(json.dumps(record, separators=(",", ":")) + "\n")
        self.events_file.flush()

    def decision(
        self, stream: EventStream, event: dict, exchange: str | None, last_event_id: str | None
    ) -> None:
        """A control record of what the server decided about ``stream``; bare (session and
        time only) when the style says so."""
        if self.style.bare_decisions:
            self.record("control", stream.session, event=event)
        else:
            self.event("control", stream, None, exchange, last_event_id, event=event)

    def access_line(self, *args: Any) -> str:
        """An access line in the style's format (:func:`mcp_access_line`)."""
        return mcp_access_line(*args, request_session=self.style.access_format == "mcp")

    def access(self, line: str) -> None:
        self.access_file.write(line + "\n")
        self.access_file.flush()

    def close(self) -> None:
        self.access_file.close()
        self.events_file.close()


def nginx_value(value: str | None) -> str:
    """A variable as nginx logs it: ``-`` when empty, ``"`` and ``\\`` and bytes outside
    printable ASCII as ``\\xHH`` (ngx_http_log_module, escape=default)."""
    if not value:
        return "-"
    out = []
    for byte in value.encode():
        printable = 0x20 <= byte < 0x7F and byte not in (0x22, 0x5C)
        out.append(chr(byte) if printable else f"\\x{byte:02X}")
    return "".join(out)


def mcp_access_line(
    scope: dict,
    started: float,
    ended: float,
    status: int,
    body_bytes: int,
    sent_session: str,
    request_session: bool = True,
) -> str:
    """The nginx ``mcp`` preset line (sse_forensics.ingest.logs.formats):
    ``$remote_addr - $remote_user [$time_local] "$request" $status $body_bytes_sent
    "$http_referer" "$http_user_agent" "$http_last_event_id" "$http_mcp_session_id"
    "$sent_http_mcp_session_id" $request_time``; ``$time_local`` is when the line is
    written (the response ended), ``$request_time`` the seconds since the request began.
    Without ``request_session``, the ``combined-mcp`` line: no ``$http_mcp_session_id``."""
    headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
    client = scope.get("client") or ("-", 0)
    target = scope.get("raw_path", b"").decode("latin-1") or scope["path"]
    if scope.get("query_string"):
        target += "?" + scope["query_string"].decode("latin-1")
    request = f"{scope['method']} {target} HTTP/{scope.get('http_version', '1.1')}"
    time_local = time.strftime("%d/%b/%Y:%H:%M:%S %z", time.localtime(ended))
    quoted = [
        headers.get("referer"),
        headers.get("user-agent"),
        headers.get("last-event-id"),
        *([headers.get("mcp-session-id")] if request_session else []),
        sent_session,
    ]
    fields = " ".join(f'"{nginx_value(v)}"' for v in quoted)
    return (
        f'{client[0]} - - [{time_local}] "{nginx_value(request)}" {status} {body_bytes} '
        f"{fields} {ended - started:.3f}"
    )


class AccessLog:
    """ASGI middleware writing one access-log line per request when its response ends (or
    the client went away): status and body bytes as sent, ``499`` when no response began
    (nginx's "client closed request"). It also names the exchange for the event log:
    ``scope["state"]["exchange"]``."""

    def __init__(self, app: Any, log: ServerLog) -> None:
        self.app = app
        self.log = log

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        scope.setdefault("state", {})["exchange"] = self.log.next_exchange()
        started = time.time()
        sent = {"status": 499, "bytes": 0, "session": ""}

        async def counting_send(message: dict) -> None:
            await send(message)
            if message["type"] == "http.response.start":
                sent["status"] = message["status"]
                for name, value in message.get("headers", []):
                    if name.lower() == b"mcp-session-id":
                        sent["session"] = value.decode("latin-1")
            elif message["type"] == "http.response.body":
                sent["bytes"] += len(message.get("body", b""))

        try:
            await self.app(scope, receive, counting_send)
        finally:
            line = self.log.access_line(
                scope, started, time.time(), sent["status"], sent["bytes"], sent["session"]
            )
            self.log.access(line)


def exchange_of(request: Request) -> str | None:
    """The exchange identifier :class:`AccessLog` gave this request (None: no logs)."""
    return request.scope.get("state", {}).get("exchange")


def rotate(path: Path, keep_lines: int) -> Path:
    """Rotate ``path`` as logrotate with ``compress`` would have at the moment it held
    ``keep_lines`` lines: those go to ``<path>.1.gz``, the rest stay in ``path``."""
    lines = path.read_bytes().splitlines(keepends=True)
    rotated = path.with_name(path.name + ".1.gz")
    with gzip.open(rotated, "wb") as out:
        out.writelines(lines[:keep_lines])
    path.write_bytes(b"".join(lines[keep_lines:]))
    return rotated


def gzip_file(path: Path) -> Path:
    """``path`` compressed to ``<path>.gz`` (the original removed)."""
    packed = path.with_name(path.name + ".gz")
    with gzip.open(packed, "wb") as out:
        out.write(path.read_bytes())
    path.unlink()
    return packed


def session_header(session: str) -> dict[str, str]:
    return {"Mcp-Session-Id": session}


def in_range(n: int, span: tuple[int, int] | None) -> bool:
    return span is not None and span[0] <= n <= span[1]


def high_water(limit: int) -> type[asyncio.Protocol]:
    """uvicorn's HTTP protocol with the transport's write high-water mark at ``limit``."""

    class SmallWriteBuffer(AutoHTTPProtocol):  # type: ignore[misc,valid-type]
        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            transport.set_write_buffer_limits(high=limit)

    return SmallWriteBuffer


@contextmanager
def running_server(
    app: object, port: int, send_buffer: int | None = None, write_high_water: int | None = None
) -> Iterator[str]:
    """Run ``app`` on uvicorn at 127.0.0.1:``port`` in a thread; yield the /mcp URL.

    ``send_buffer``: SO_SNDBUF of the listening socket, which accepted connections inherit
    with the lock that turns Linux's send-buffer autotuning off (socket(7)); on loopback
    autotuning would otherwise let the kernel absorb megabytes before the writer waits.
    ``write_high_water``: the asyncio transport's high-water mark (64 KiB by default), above
    which uvicorn's flow control makes the ASGI ``send`` wait.
    """
    config = uvicorn.Config(
        app,
        host="127.0.0.1",
        port=port,
        log_level="warning",
        access_log=False,
        timeout_graceful_shutdown=2,
        http=AutoHTTPProtocol if write_high_water is None else high_water(write_high_water),
    )
    server = uvicorn.Server(config)
    sockets = None
    if send_buffer is not None:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, send_buffer)
        listener.bind(("127.0.0.1", port))
        sockets = [listener]
    run = partial(server.run, sockets=sockets)
    thread = threading.Thread(target=run, name=f"uvicorn-{port}", daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError(f"uvicorn did not start on port {port}")
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
