"""Traffic from the official MCP Python SDK (``mcp``): its server with an in-memory EventStore,
its client calling a tool that sends progress notifications.

``mcp-sdk-resume`` uses the SDK's own resumption path (SEP-1699 polling): the tool calls
``ctx.close_sse_stream()``, the server ends the response after the priming event's
``retry:``, and the SDK client reconnects by itself with ``GET`` + ``Last-Event-ID``; the
server replays from the event store, sends a fresh priming event, then the live tail.

The SDK draws session IDs and (in its example store) event IDs from ``uuid4``; both are
replaced here by seeded UUIDs so that every run writes the same bytes.

With a log folder the server also writes the logs such a deployment leaves, in the shape a
Python SDK server writes them: an nginx access log (``combined-mcp``: the session only in
the response header column) and an event log written by two hooks an SDK user has — the
EventStore (``emitted`` when the SDK stores an event: its stream is the SDK's stream ID,
the request ID it answers; a priming event is stored with no message, ``data`` ``""``;
the store knows no HTTP exchange) and an ASGI middleware that reads the event stream it
passes to the client (``written``, naming the exchange, the ``Last-Event-ID`` of a resume,
and the stream the store filed the event under).
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import random
import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import mcp.server.streamable_http_manager as sdk_session_manager
from mcp import Client
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.streamable_http import EventCallback, EventMessage, EventStore
from profile_server import AccessLog, LogStyle, ServerLog, running_server

# The SDK suggests this `retry:` (ms) in its priming events; the client waits that long
# before it reconnects.
RETRY_MS = 100
PROGRESS_STEPS = 8
CLOSE_AFTER_STEP = 3  # mcp-sdk-resume: the tool drops the stream after this progress event


def seeded_uuid4(rng: random.Random) -> uuid.UUID:
    return uuid.UUID(int=rng.getrandbits(128), version=4)


@dataclass
class StoredMessage:
    stream_id: str
    event_id: str
    message: object | None  # None: a priming event (never replayed)


class InMemoryEventStore(EventStore):
    """Like the SDK's example store (examples/servers/simple-streamablehttp): UUID event IDs,
    one list per server, replay = the later events of the stream the ID belongs to."""

    def __init__(self, seed: str) -> None:
        self.rng = random.Random(seed)
        self.events: list[StoredMessage] = []

    async def store_event(self, stream_id, message):  # type: ignore[override]
        event_id = str(seeded_uuid4(self.rng))
        self.events.append(StoredMessage(stream_id, event_id, message))
        return event_id

    async def replay_events_after(self, last_event_id, send_callback: EventCallback):  # type: ignore[override]
        position = next((i for i, e in enumerate(self.events) if e.event_id == last_event_id), None)
        if position is None:
            return None
        stream_id = self.events[position].stream_id
        for stored in self.events[position + 1 :]:
            if stored.stream_id == stream_id and stored.message is not None:
                await send_callback(EventMessage(stored.message, stored.event_id))
        return stream_id


# The HTTP exchange the SDK is serving when it stores an event: set per request by
# :class:`SseTap`. The SDK stores live messages in a task started by the session's
# `initialize` request, which copies that request's context: its holder learns the session
# from the response header.
EXCHANGE: contextvars.ContextVar[dict[str, str | None]] = contextvars.ContextVar("exchange")


class LoggingEventStore(InMemoryEventStore):
    """The store, writing an ``emitted`` record for every event the SDK stores."""

    def __init__(self, seed: str, log: ServerLog | None) -> None:
        super().__init__(seed)
        self.log = log

    async def store_event(self, stream_id, message):  # type: ignore[override]
        event_id = await super().store_event(stream_id, message)
        if self.log is not None:
            data = (
                "" if message is None else message.model_dump_json(by_alias=True, exclude_none=True)
            )
            session = EXCHANGE.get({}).get("session")
            self.log.record("emitted", session, str(stream_id), event_id, event={"data": data})
        return event_id

    def stream_of(self, event_id: str) -> str | None:
        return next((e.stream_id for e in self.events if e.event_id == event_id), None)


_SSE_BLOCK = re.compile(rb"\r?\n\r?\n")


class SseTap:
    """ASGI middleware between the SDK and the client: every SSE event of an event-stream
    response, as it passes, is a ``written`` record (the stream its ID was stored under)."""

    def __init__(self, app: Any, log: ServerLog, store: LoggingEventStore) -> None:
        self.app = app
        self.log = log
        self.store = store

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        holder: dict[str, str | None] = {
            "session": headers.get("mcp-session-id"),
            "request": exchange_of_scope(scope),
            "last_event_id": headers.get("last-event-id"),
        }
        EXCHANGE.set(holder)
        state = {"sse": False, "buffer": b""}

        async def tapping_send(message: dict) -> None:
            if message["type"] == "http.response.start":
                for name, value in message.get("headers", []):
                    name = name.lower()
                    if name == b"mcp-session-id" and holder["session"] is None:
                        holder["session"] = value.decode("latin-1")
                    if name == b"content-type" and value.startswith(b"text/event-stream"):
                        state["sse"] = True
            elif message["type"] == "http.response.body" and state["sse"]:
                state["buffer"] += message.get("body", b"")
                *blocks, state["buffer"] = _SSE_BLOCK.split(state["buffer"])
                for block in blocks:
                    self.written(block, holder)
            await send(message)

        await self.app(scope, receive, tapping_send)

    def written(self, block: bytes, exchange: dict[str, str | None]) -> None:
        fields: dict[str, list[str]] = {}
        for line in block.decode("utf-8").splitlines():
            if not line or line.startswith(":"):
                continue
            name, _, value = line.partition(":")
            fields.setdefault(name, []).append(value[1:] if value.startswith(" ") else value)
        if "id" not in fields and "data" not in fields:
            return
        event_id = fields.get("id", [None])[-1]
        event = {
            "type": fields.get("event", ["message"])[-1],
            "data": "\n".join(fields.get("data", [])),
        }
        stream = self.store.stream_of(event_id) if event_id else None
        self.log.record(
            "written",
            exchange["session"],
            stream,
            event_id,
            exchange["request"],
            exchange["last_event_id"],
            event=event,
        )


def exchange_of_scope(scope: dict) -> str | None:
    return scope.get("state", {}).get("exchange")


def build_server(close_stream: bool) -> MCPServer:
    server = MCPServer("sse-forensics-sample")

    @server.tool()
    async def long_task(ctx: Context) -> str:
        """Report eight progress notifications, then return."""
        for step in range(1, PROGRESS_STEPS + 1):
            await ctx.report_progress(step, PROGRESS_STEPS, f"step {step}")
            await asyncio.sleep(0.02)
            if close_stream and step == CLOSE_AFTER_STEP:
                # Drop the stream once step 3 is on the wire; store step 4 while the client
                # waits `retry` ms, so the resume replays it before the live tail.
                await asyncio.sleep(0.05)
                await ctx.close_sse_stream()
                await asyncio.sleep(0.05)
                await ctx.report_progress(step + 0.5, PROGRESS_STEPS, "while disconnected")
                await asyncio.sleep(0.3)
        return f"done after {PROGRESS_STEPS} steps"

    return server


async def call_long_task(url: str) -> list[float]:
    progress: list[float] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append(value)

    async with Client(url, mode="legacy") as client:
        await client.call_tool("long_task", {}, progress_callback=on_progress)
    return progress


def run(port: int, resume: bool, seed: str, log_dir: Path | None = None) -> list[float]:
    """Serve the SDK app on ``port`` and call the tool once; return the progress seen.
    With ``log_dir`` the server writes its access and event logs there."""
    for name in ("mcp", "httpx", "httpx2", "uvicorn"):
        logging.getLogger(name).setLevel(logging.WARNING)
    log = ServerLog(log_dir, LogStyle(access_format="combined-mcp")) if log_dir else None
    session_rng = random.Random(f"{seed}/session")
    original_uuid4 = sdk_session_manager.uuid4
    sdk_session_manager.uuid4 = lambda: seeded_uuid4(session_rng)  # deterministic session ID
    try:
        store = LoggingEventStore(seed, log)
        server = build_server(close_stream=resume)
        app: Any = server.streamable_http_app(event_store=store, retry_interval=RETRY_MS)
        if log is not None:
            app = AccessLog(SseTap(app, log, store), log)
        with running_server(app, port) as url:
            return asyncio.run(call_long_task(url))
    finally:
        sdk_session_manager.uuid4 = original_uuid4
        if log is not None:
            log.close()
