"""A real httpx client driving the PROFILE server (samples/profile_server.py) over loopback.

It behaves like an MCP streamable-HTTP client (2025-11-25): ``initialize``, the
``notifications/initialized`` notification, ``tools/call`` read as an event stream, a resume
with ``GET /mcp`` + ``Last-Event-ID`` + ``Mcp-Session-Id``, and a ``DELETE`` to end the
session. :class:`ClientPlan` says where the client drops the stream, how it resumes (or
fails to), and whether it re-issues a call whose event IDs jumped; a :class:`SlowConsumer`
reads its tools/call stream over a raw socket (h11) with a small receive buffer, slowly.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import h11
import httpx

PROTOCOL_VERSION = "2025-11-25"


@dataclass(frozen=True)
class SlowConsumer:
    """A client that reads its event stream slowly from a small socket receive buffer, and
    stops reading for a while: the kernel then advertises a zero window (RFC 9293 §3.8.6)."""

    # SO_RCVBUF, set before connect: Linux doubles it, locks it (no autotuning) and sizes
    # the SYN's window scale from it (socket(7), tcp(7)).
    receive_buffer: int = 4096
    pause_after: int = 7  # stop reading after this data event ...
    pause_seconds: float = 2.0  # ... for this long
    read_size: int = 2048  # bytes per recv
    read_interval: float = 0.005  # seconds between recvs


@dataclass(frozen=True)
class ClientPlan:
    """What the client does in one scenario."""

    disconnect_after: int | None = None  # close the tools/call stream after this data event
    linger: float = 0.0  # seconds between that event and the close: later bytes still arrive
    resume: bool = False  # reconnect with Last-Event-ID after the stream ended or was dropped
    concurrent_calls: int = 1  # tools/call streams open at once on the session
    standalone_stream: bool = False  # also open the GET notification stream
    protocol_version: str = PROTOCOL_VERSION  # asked for in initialize and sent as a header
    steps: int | None = None  # tools/call arguments.steps (None: the server's default)
    resume_from: str | None = None  # Last-Event-ID to send instead of the last ID received
    resume_attempts: int = 1  # resumes with the same Last-Event-ID while none delivers data
    give_up_after_comments: int | None = None  # leave a resume that sent only comments
    reopen_without_cursor: bool = False  # after a failed resume: GET without Last-Event-ID
    reissue_on_jump: bool = False  # IDs jumped: leave, cancel, re-issue the same tools/call
    second_call_steps: int | None = None  # before resuming: another tools/call, read to the end
    prior_session_steps: int | None = None  # first another session reads a whole tools/call
    slow_consumer: SlowConsumer | None = None  # read the tools/call stream(s) this way


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
        self.comments = 0

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
            if line.startswith(":"):
                self.comments += 1
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

    @property
    def delivered(self) -> bool:
        """A 2xx that carried at least one data event (else the resume failed)."""
        return 200 <= self.status < 300 and bool(self.data_events)


class McpClient:
    """One MCP session over a pooled httpx client."""

    def __init__(
        self,
        url: str,
        protocol_version: str = PROTOCOL_VERSION,
        http: Callable[[], httpx.Client] | None = None,
    ) -> None:
        self.url = url
        self.protocol_version = protocol_version
        # ``http``: how to make the httpx client (HTTP/2, TLS); default plain HTTP/1.1.
        self.http = http() if http is not None else httpx.Client(timeout=10.0)
        self.session_id = ""

    def headers(self, accept: str = "application/json, text/event-stream") -> dict[str, str]:
        headers = {"Accept": accept, "MCP-Protocol-Version": self.protocol_version}
        if self.session_id:
            headers["Mcp-Session-Id"] = self.session_id
        return headers

    def initialize(self) -> None:
        params = {
            "protocolVersion": self.protocol_version,
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
        self,
        request_id: int,
        params: dict,
        plan: ClientPlan = ClientPlan(),
        started: threading.Event | None = None,
    ) -> StreamLog:
        """POST tools/call and read its event stream to the end or to the planned drop."""
        message = {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}
        if plan.slow_consumer is not None:
            if started is not None:
                started.set()
            return self.post_slowly(message, plan.slow_consumer)
        request = self.http.build_request("POST", self.url, json=message, headers=self.headers())
        response = self.http.send(request, stream=True)
        if started is not None:
            started.set()
        return self.read(response, plan.disconnect_after, plan.linger, plan.reissue_on_jump)

    def post_slowly(self, message: dict, consumer: SlowConsumer) -> StreamLog:
        """POST ``message`` on a connection of its own and read the answer as ``consumer``."""
        url = httpx.URL(self.url)
        body = json.dumps(message).encode()
        headers = [
            ("Host", f"{url.host}:{url.port}"),
            ("Content-Type", "application/json"),
            ("Content-Length", str(len(body))),
            *self.headers().items(),
            ("Connection", "close"),
        ]
        http = h11.Connection(h11.CLIENT)
        log = StreamLog(0)
        reader = SseReader()
        paused = False
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, consumer.receive_buffer)
            sock.settimeout(10.0)
            sock.connect((url.host, url.port))
            request = h11.Request(method="POST", target=url.raw_path, headers=headers)
            sock.sendall(http.send(request) + http.send(h11.Data(data=body)))
            sock.sendall(http.send(h11.EndOfMessage()))
            while True:
                event = http.next_event()
                if event is h11.NEED_DATA:
                    time.sleep(consumer.read_interval)
                    http.receive_data(sock.recv(consumer.read_size))
                elif isinstance(event, h11.Response):
                    log.status = event.status_code
                elif isinstance(event, h11.Data):
                    log.events.extend(reader.feed(bytes(event.data)))
                    if not paused and len(log.data_events) >= consumer.pause_after:
                        paused = True
                        time.sleep(consumer.pause_seconds)  # the receive buffer fills up
                elif isinstance(event, (h11.EndOfMessage, h11.ConnectionClosed)):
                    return log

    def cancel(self, request_id: int, reason: str) -> None:
        """MCP notifications/cancelled for a request the client gave up on."""
        params = {"requestId": request_id, "reason": reason}
        message = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": params}
        self.http.post(self.url, json=message, headers=self.headers())

    def resume(self, last_event_id: str, give_up_after_comments: int | None = None) -> StreamLog:
        """GET with Last-Event-ID: the server replays the stream that ID was seen on."""
        headers = {**self.headers("text/event-stream"), "Last-Event-ID": last_event_id}
        request = self.http.build_request("GET", self.url, headers=headers)
        response = self.http.send(request, stream=True)
        return self.read(response, give_up_after_comments=give_up_after_comments)

    def standalone_stream(self) -> StreamLog:
        request = self.http.build_request(
            "GET", self.url, headers=self.headers("text/event-stream")
        )
        return self.read(self.http.send(request, stream=True))

    def read(
        self,
        response: httpx.Response,
        drop_after: int | None = None,
        linger: float = 0.0,
        leave_on_jump: bool = False,
        give_up_after_comments: int | None = None,
    ) -> StreamLog:
        """Collect events; after data event ``drop_after`` (or the first data event whose int
        ID is not its predecessor's successor) wait ``linger`` s, then hang up; leave a
        stream that sent ``give_up_after_comments`` comments and no data event."""
        log = StreamLog(response.status_code)
        reader = SseReader()
        try:
            if not response.headers.get("content-type", "").startswith("text/event-stream"):
                response.read()
                return log
            for chunk in response.iter_raw():
                log.events.extend(reader.feed(chunk))
                jump = first_jump(log.data_events) if leave_on_jump else None
                if jump is not None:
                    drop_after = jump
                if drop_after is not None and len(log.data_events) >= drop_after:
                    # Keep only what the client had processed when it decided to leave.
                    log.events = trim_after_data_event(log.events, drop_after)
                    time.sleep(linger)
                    break
                quiet = give_up_after_comments is not None and not log.data_events
                if quiet and reader.comments >= give_up_after_comments:
                    break
        finally:
            response.close()  # unread: httpx closes the connection instead of reusing it
        return log

    def close(self) -> None:
        self.http.delete(self.url, headers=self.headers())
        self.http.close()


def first_jump(data_events: list[SseEvent]) -> int | None:
    """1-based position of the first data event whose int ID skips its predecessor's successor."""
    for k in range(1, len(data_events)):
        previous, current = data_events[k - 1].event_id, data_events[k].event_id
        if previous.isdigit() and current.isdigit() and int(current) != int(previous) + 1:
            return k + 1
    return None


def tool_params(progress_token: int, steps: int | None) -> dict:
    """tools/call params; a re-issued call sends the very same ones."""
    arguments = {} if steps is None else {"steps": steps}
    return {"name": "long_task", "arguments": arguments, "_meta": {"progressToken": progress_token}}


def trim_after_data_event(events: list[SseEvent], k: int) -> list[SseEvent]:
    seen = 0
    for i, event in enumerate(events):
        if event.event == "message" and event.data:
            seen += 1
            if seen == k:
                return events[: i + 1]
    return events


def run_plan(
    url: str, plan: ClientPlan, http: Callable[[], httpx.Client] | None = None
) -> list[StreamLog]:
    """Play ``plan`` against the server at ``url`` (``http`` makes the httpx client, see
    :class:`McpClient`); return every stream the client read."""
    logs: list[StreamLog] = []
    prior = None
    if plan.prior_session_steps is not None:  # another session, kept open to the end
        prior = McpClient(url, plan.protocol_version, http)
        prior.initialize()
        logs.append(prior.call_tool(2, tool_params(2, plan.prior_session_steps)))
    client = McpClient(url, plan.protocol_version, http)
    try:
        client.initialize()
        logs += play_session(client, plan)
    finally:
        client.close()
        if prior is not None:
            prior.close()
    return logs


def play_session(client: McpClient, plan: ClientPlan) -> list[StreamLog]:
    """The plan's tools/call streams, then its re-issue, second call and resumes."""
    logs: list[StreamLog] = []
    with ThreadPoolExecutor(max_workers=plan.concurrent_calls + 1) as pool:
        standalone = pool.submit(client.standalone_stream) if plan.standalone_stream else None
        calls = []
        for request_id in range(2, 2 + plan.concurrent_calls):
            # Start each call once the previous one has its response headers, so the
            # server sees the streams in request-ID order (deterministic IDs).
            started = threading.Event()
            params = tool_params(request_id, plan.steps)
            calls.append(pool.submit(client.call_tool, request_id, params, plan, started))
            started.wait(timeout=5)
        logs.extend(call.result() for call in calls)
        if standalone is not None:
            logs.append(standalone.result())
    next_id = 2 + plan.concurrent_calls
    if plan.reissue_on_jump and first_jump(logs[0].data_events) is not None:
        # The IDs jumped: events were lost. Cancel the call and ask again (same params).
        client.cancel(2, "event IDs jumped: events were lost")
        logs.append(client.call_tool(next_id, tool_params(2, plan.steps)))
        next_id += 1
    if plan.second_call_steps is not None:
        logs.append(client.call_tool(next_id, tool_params(next_id, plan.second_call_steps)))
    if plan.resume:
        cursor = plan.resume_from or logs[0].last_event_id
        for _ in range(plan.resume_attempts):
            logs.append(client.resume(cursor, plan.give_up_after_comments))
            if logs[-1].delivered:
                break
        if plan.reopen_without_cursor and not logs[-1].delivered:
            logs.append(client.standalone_stream())
    return logs
