"""Logs as exchanges: server event-log records and access-log lines turned into the same
:class:`Exchange` records a capture gives, so one fact builder and one rule set judge both.

- An **event log** describes each response's events: the records of one stream and one
  HTTP exchange (``request``, else the resume's ``last_event_id``, else the live stream)
  become one event-stream exchange; ``written`` records are its data events, ``control``
  records its signals. ``emitted`` and ``evicted`` records are what no capture can show:
  the producer's order and the events dropped before the socket (:class:`LogStreamInfo`).
- An **access log** line is one request and its status. Lines that describe an exchange the
  event log already gives are merged into it (same session, same ``Last-Event-ID``, the
  line's request interval covering the first record); the rest stand alone, so resumes,
  410s and storms are still seen with access logs only.

Each exchange sits on a pseudo-connection whose Community ID field reads ``log:…``: stable
across runs, and never mistaken for a TCP flow.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

import orjson
import polars as pl

from sse_forensics.ingest.logs.model import LogSet
from sse_forensics.provenance import Origin
from sse_forensics.reassembly.exchange import Exchange
from sse_forensics.reassembly.flows import Connection
from sse_forensics.reassembly.http_events import RequestHead, ResponseHead
from sse_forensics.sse import SSEEvent

# An access line is written when the response ends; its request began request_time before.
# Without request_time, a line matches records up to this long before it.
UNTIMED_WINDOW = 3600.0


@dataclass(slots=True)
class LogStreamInfo:
    """What the server's event log says about one response beyond its written events."""

    kinds: list[str] = field(default_factory=list)  # per exchange event: "data" | "signal"
    emitted: list[str] = field(default_factory=list)  # IDs in producer order (whole stream)
    evicted: dict[str, Origin] = field(default_factory=dict)  # ID → its eviction record
    evicted_why: dict[str, str] = field(default_factory=dict)  # ID → "reason where"
    stream: str = ""


def _origin(row: dict) -> Origin:
    return Origin(row["source"], row["line"], row["ts"] or 0.0, "line")


def _signal_data(row: dict) -> str:
    kind = row["control_type"]
    if kind == "stream-gap":
        payload = {"first": row["first"], "last": row["last"]}
    elif kind == "resume-gap":
        payload = {"requested": row["requested"], "oldest_retained": row["oldest_retained"]}
    else:
        payload = {"last_written_id": row["last_written_id"]}
    return orjson.dumps(payload).decode()


class _Builder:
    def __init__(self, first_connection_id: int) -> None:
        self.next_id = first_connection_id
        self.connections: list[Connection] = []
        self.exchanges: list[Exchange] = []

    def connection(
        self, label: str, first: Origin, last: Origin, client: str = "log"
    ) -> Connection:
        conn = Connection(
            id=self.next_id,
            client=(client, 0),
            server=("log", 0),
            community_id=f"log:{label}",
            first=first,
            last=last,
        )
        self.next_id += 1
        self.connections.append(conn)
        return conn


def _event_exchanges(events: pl.DataFrame, build: _Builder) -> list[tuple[Exchange, dict]]:
    """One event-stream exchange per (session, stream, exchange) of the event log."""
    rows = events.sort(["ts", "source", "line"], nulls_last=True).to_dicts()
    emitted: dict[tuple, list[str]] = defaultdict(list)
    evicted: dict[tuple, dict[str, Origin]] = defaultdict(dict)
    evicted_why: dict[tuple, dict[str, str]] = defaultdict(dict)
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for row in rows:
        stream_key = (row["session"], row["stream"])
        if row["kind"] == "emitted" and row["event_id"] is not None:
            emitted[stream_key].append(row["event_id"])
        elif row["kind"] == "evicted" and row["event_id"] is not None:
            evicted[stream_key][row["event_id"]] = _origin(row)
            why = " ".join(x for x in (row["reason"], row["where"]) if x)
            evicted_why[stream_key][row["event_id"]] = why
        elif row["kind"] in ("written", "control"):
            exchange_key = row["request"] or (
                f"resume:{row['last_event_id']}" if row["last_event_id"] is not None else "live"
            )
            groups[(*stream_key, exchange_key)].append(row)
    out: list[tuple[Exchange, dict]] = []
    ordered = sorted(groups.items(), key=lambda kv: kv[1][0]["ts"] or 0.0)
    for (session, stream, exchange_key), records in ordered:
        first, last = _origin(records[0]), _origin(records[-1])
        conn = build.connection(f"{session}/{stream}/{exchange_key}", first, last)
        leid = next((r["last_event_id"] for r in records if r["last_event_id"] is not None), None)
        headers = [("Mcp-Session-Id", session)] if session else []
        if leid is not None:
            headers.append(("Last-Event-ID", leid))
        method = "GET" if leid is not None else ""
        ex = Exchange(connection_id=conn.id, index=0, from_log=True)
        ex.request = RequestHead(0, method, "", "", headers, first)
        ex.response = ResponseHead(
            0,
            200,
            "(from event log)",
            "",
            [("Content-Type", "text/event-stream")],
            first,
            head_captured=False,
        )
        info = LogStreamInfo(
            emitted=emitted.get((session, stream), []),
            evicted=evicted.get((session, stream), {}),
            evicted_why=evicted_why.get((session, stream), {}),
            stream=stream or "",
        )
        last_id = ""
        for n, r in enumerate(records):
            o = _origin(r)
            if r["kind"] == "control":
                ev = SSEEvent(
                    last_id,
                    r["control_type"] or "control",
                    _signal_data(r),
                    None,
                    r["event_id"],
                    n,
                    n + 1,
                    (o,),
                )
                info.kinds.append("signal")
            else:
                last_id = r["event_id"] or last_id
                ev = SSEEvent(last_id, "message", "", None, r["event_id"], n, n + 1, (o,))
                info.kinds.append("data")
            ex.events.append(ev)
        ex.log = info
        ex.response_end_reason = "log"
        ex.last_body_origin = last
        out.append((ex, {"session": session, "leid": leid, "start": first.ts, "end": last.ts}))
        build.exchanges.append(ex)
    return out


def _best_stream(row: dict, streams: list[tuple[Exchange, dict]], taken: set[int]) -> int | None:
    """The event-log stream an access line describes: same session (the request's own
    header: an ``initialize`` line only *sets* it), same ``Last-Event-ID``, an event-stream
    status (200), and the line's request start closest to the stream's first record."""
    session = row["session_id"]
    if session is None or row["status"] != 200:
        return None
    content_type = (row["content_type"] or "text/event-stream").split(";")[0].strip().lower()
    if content_type != "text/event-stream":
        return None
    end = row["ts"] or 0.0
    elapsed = row["request_time"] if row["request_time"] is not None else UNTIMED_WINDOW
    start = end - elapsed
    best, best_distance = None, None
    for i, (_ex, key) in enumerate(streams):
        if i in taken or key["session"] != session or key["leid"] != row["last_event_id"]:
            continue
        # $time_local has one-second resolution: allow a second either side.
        if not start - 1.0 <= key["start"] <= end + 1.0:
            continue
        distance = abs(key["start"] - start)
        if best_distance is None or distance < best_distance:
            best, best_distance = i, distance
    return best


def _merge_access(
    access: pl.DataFrame, streams: list[tuple[Exchange, dict]], build: _Builder
) -> None:
    """Give event-log exchanges their access-log line; keep the other lines as exchanges."""
    unmatched: list[dict] = []
    taken: set[int] = set()
    # Stable on ties: rows keep reading order (oldest rotated file first) within a second.
    for row in access.sort("ts", maintain_order=True, nulls_last=True).to_dicts():
        match = _best_stream(row, streams, taken)
        if match is None:
            unmatched.append(row)
            continue
        taken.add(match)
        ex, _ = streams[match]
        o = _origin(row)
        ex.request = RequestHead(
            0,
            row["method"] or ex.request.method,
            row["target"] or "",
            row["protocol"] or "",
            ex.request.headers,
            o,
        )
        ex.response = ResponseHead(
            0,
            row["status"] or 200,
            "(from access log)",
            "",
            ex.response.headers,
            o,
            head_captured=False,
        )
    by_client: dict[str, list[dict]] = defaultdict(list)
    for row in unmatched:
        by_client[row["client_ip"] or "-"].append(row)
    for client, rows in by_client.items():
        first, last = _origin(rows[0]), _origin(rows[-1])
        conn = build.connection(f"access/{client}", first, last, client=client)
        for index, row in enumerate(rows):
            o = _origin(row)
            headers = []
            if row["session_id"]:
                headers.append(("Mcp-Session-Id", row["session_id"]))
            if row["last_event_id"] is not None:
                headers.append(("Last-Event-ID", row["last_event_id"]))
            response_headers = []
            if row["sent_session_id"]:
                response_headers.append(("Mcp-Session-Id", row["sent_session_id"]))
            content_type = row["content_type"]
            status = row["status"] or 0
            # A 2xx to Last-Event-ID is an event stream even when the log omits the type.
            if content_type is None and row["last_event_id"] is not None and 200 <= status < 300:
                content_type = "text/event-stream"
            if content_type:
                response_headers.append(("Content-Type", content_type))
            ex = Exchange(connection_id=conn.id, index=index, from_log=True)
            ex.request = RequestHead(
                index, row["method"] or "", row["target"] or "", row["protocol"] or "", headers, o
            )
            ex.response = ResponseHead(
                index, status, "(from access log)", "", response_headers, o, head_captured=False
            )
            ex.response_end_reason = "log"
            ex.last_body_origin = o
            build.exchanges.append(ex)


def exchanges_from_logs(
    logs: LogSet, first_connection_id: int
) -> tuple[list[Connection], list[Exchange]]:
    """Pseudo-connections and exchanges for everything the logs describe."""
    build = _Builder(first_connection_id)
    streams = _event_exchanges(logs.events, build) if logs.events.height else []
    if logs.access.height:
        _merge_access(logs.access, streams, build)
    return build.connections, build.exchanges
