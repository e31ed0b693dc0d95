"""A real httpx client driving the PROFILE server (samples/profile_server.py) over loopback.

It behaves like an MCP streamable-HTTP client (2025-11-25): ``initialize``, the
``notifications/initialized`` notification, ``tools/call`` read as an event stream, a resume
with ``GET /mcp`` + ``Last-Event-ID`` + ``Mcp-Session-Id``, and a ``DELETE`` to end the
session. :class:`ClientPlan` says where the client drops the stream and whether it resumes.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import httpx

PROTOCOL_VERSION = "2025-11-25"


@dataclass(frozen=True)
class ClientPlan:
    """What the client does in one scenario."""

    disconnect_after: int | None = None  # close the tools/call stream after this data event
    linger: float = 0.0  # seconds between that event and the close: later bytes still arrive
    resume: bool = False  # reconnect with Last-Event-ID after the stream ended or was dropped
    concurrent_calls: int = 1  # tools/call streams open at once on the session
    standalone_stream: bool = False  # also open the GET notification stream


@dataclass(frozen=True)
class SseEvent:
    """A dispatched event (WHATWG HTML §9.2.6): its type, last event ID and data."""

    event: str
    event_id: str
    data: str


class SseReader:
    """Minimal `text/event-stream` parser, enough to follow what the server sends."""

    def __init__(self) -> None:
        self.buffer = b""
        self.event = ""
        self.data: list[str] = []
        self.last_event_id = ""

    def feed(self, chunk: bytes) -> list[SseEvent]:
        self.buffer += chunk
        dispatched = []
        *lines, self.buffer = self.buffer.replace(b"\r\n", b"\n").split(b"\n")
        for raw in lines:
            line = raw.decode()
            if not line:
                if self.data or self.event:
                    data = "\n".join(self.data)
                    dispatched.append(SseEvent(self.event or "message", self.last_event_id, data))
                elif self.last_event_id:  # a priming event: an ID, empty data
                    dispatched.append(SseEvent("message", self.last_event_id, ""))
                self.event, self.data = "", []
                continue
            name, _, value = line.partition(":")
            value = value.removeprefix(" ")
            if name == "event":
                self.event = value
            elif name == "data":
                self.data.append(value)
            elif name == "id" and "\0" not in value:
                self.last_event_id = value
        return dispatched


@dataclass
class StreamLog:
    """What the client saw on one response."""

    status: int
    events: list[SseEvent] = field(default_factory=list)

    @property
    def data_events(self) -> list[SseEvent]:
        return [e for e in self.events if e.event == "message" and e.data]

    @property
    def last_event_id(self) -> str:
        return self.events[-1].event_id if self.events else ""


class McpClient:
    """One MCP session over a pooled httpx client."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.http = httpx.Client(timeout=10.0)
        self.session_id = ""

    def headers(self, accept: str = "application/json, text/event-stream") -> dict[str, str]:
        headers = {"Accept": accept, "MCP-Protocol-Version": PROTOCOL_VERSION}
        if self.session_id:
            headers["Mcp-Session-Id"] = self.session_id
        return headers

    def initialize(self) -> None:
        params = {
            "protocolVersion": PROTOCOL_VERSION,
            "capabilities": {},
            "clientInfo": {"name": "profile-client", "version": "1.0"},
        }
        message = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params}
        response = self.http.post(self.url, json=message, headers=self.headers())
        response.raise_for_status()
        self.session_id = response.headers["mcp-session-id"]
        notification = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        self.http.post(self.url, json=notification, headers=self.headers())

    def call_tool(
        self, request_id: int, plan: ClientPlan, started: threading.Event | None = None
    ) -> StreamLog:
        """POST tools/call and read its event stream to the end or to the planned drop."""
        params = {"name": "long_task", "arguments": {}, "_meta": {"progressToken": request_id}}
        message = {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}
        request = self.http.build_request("POST", self.url, json=message, headers=self.headers())
        response = self.http.send(request, stream=True)
        if started is not None:
            started.set()
        return self.read(response, plan.disconnect_after, plan.linger)

    def resume(self, last_event_id: str) -> StreamLog:
        """GET with Last-Event-ID: the server replays the stream that ID was seen on."""
        headers = {**self.headers("text/event-stream"), "Last-Event-ID": last_event_id}
        request = self.http.build_request("GET", self.url, headers=headers)
        return self.read(self.http.send(request, stream=True))

    def standalone_stream(self) -> StreamLog:
        request = self.http.build_request(
            "GET", self.url, headers=self.headers("text/event-stream")
        )
        return self.read(self.http.send(request, stream=True))

    def read(
        self, response: httpx.Response, drop_after: int | None = None, linger: float = 0.0
    ) -> StreamLog:
        """Collect events; after data event ``drop_after`` wait ``linger`` s, then hang up."""
        log = StreamLog(response.status_code)
        reader = SseReader()
        try:
            if not response.headers.get("content-type", "").startswith("text/event-stream"):
                response.read()
                return log
            for chunk in response.iter_raw():
                log.events.extend(reader.feed(chunk))
                if drop_after is not None and len(log.data_events) >= drop_after:
                    # Keep only what the client had processed when it decided to leave.
                    log.events = trim_after_data_event(log.events, drop_after)
                    time.sleep(linger)
                    break
        finally:
            response.close()  # unread: httpx closes the connection instead of reusing it
        return log

    def close(self) -> None:
        self.http.delete(self.url, headers=self.headers())
        self.http.close()


def trim_after_data_event(events: list[SseEvent], k: int) -> list[SseEvent]:
    seen = 0
    for i, event in enumerate(events):
        if event.event == "message" and event.data:
            seen += 1
            if seen == k:
                return events[: i + 1]
    return events


def run_plan(url: str, plan: ClientPlan) -> list[StreamLog]:
    """Play ``plan`` against the server at ``url``; return every stream the client read."""
    client = McpClient(url)
    logs: list[StreamLog] = []
    try:
        client.initialize()
        with ThreadPoolExecutor(max_workers=plan.concurrent_calls + 1) as pool:
            standalone = pool.submit(client.standalone_stream) if plan.standalone_stream else None
            calls = []
            for request_id in range(2, 2 + plan.concurrent_calls):
                # Start each call once the previous one has its response headers, so the
                # server sees the streams in request-ID order (deterministic IDs).
                started = threading.Event()
                calls.append(pool.submit(client.call_tool, request_id, plan, started))
                started.wait(timeout=5)
            logs.extend(call.result() for call in calls)
            if standalone is not None:
                logs.append(standalone.result())
        if plan.resume:
            logs.append(client.resume(logs[0].last_event_id))
    finally:
        client.close()
    return logs
