"""Traffic from the official MCP Python SDK (``mcp``): its server with an in-memory EventStore,
its client calling a tool that sends progress notifications.

``mcp-sdk-resume`` uses the SDK's own resumption path (SEP-1699 polling): the tool calls
``ctx.close_sse_stream()``, the server ends the response after the priming event's
``retry:``, and the SDK client reconnects by itself with ``GET`` + ``Last-Event-ID``; the
server replays from the event store, sends a fresh priming event, then the live tail.

The SDK draws session IDs and (in its example store) event IDs from ``uuid4``; both are
replaced here by seeded UUIDs so that every run writes the same bytes.
"""

from __future__ import annotations

import asyncio
import logging
import random
import uuid
from dataclasses import dataclass

import mcp.server.streamable_http_manager as sdk_session_manager
from mcp import Client
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.streamable_http import EventCallback, EventMessage, EventStore
from profile_server import running_server

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


def run(port: int, resume: bool, seed: str) -> list[float]:
    """Serve the SDK app on ``port`` and call the tool once; return the progress seen."""
    for name in ("mcp", "httpx", "httpx2", "uvicorn"):
        logging.getLogger(name).setLevel(logging.WARNING)
    session_rng = random.Random(f"{seed}/session")
    original_uuid4 = sdk_session_manager.uuid4
    sdk_session_manager.uuid4 = lambda: seeded_uuid4(session_rng)  # deterministic session ID
    try:
        server = build_server(close_stream=resume)
        app = server.streamable_http_app(
            event_store=InMemoryEventStore(seed), retry_interval=RETRY_MS
        )
        with running_server(app, port) as url:
            return asyncio.run(call_long_task(url))
    finally:
        sdk_session_manager.uuid4 = original_uuid4
