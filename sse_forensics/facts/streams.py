"""Streams, their events, and the resumes that continue them (PROFILE.md, "Sessions and
streams", "Event IDs", "Events that are not data").

A resume is linked to its stream by event ID, never by URL: it continues the stream on which
its ``Last-Event-ID`` was seen, which may have been opened by a ``POST`` on another
connection.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict

from sse_forensics.facts.config import AnalysisConfig
from sse_forensics.facts.ids import IdCodec, detect_scheme
from sse_forensics.facts.model import (
    EventRecord,
    ExchangeRecord,
    SessionRecord,
    StreamRecord,
)
from sse_forensics.facts.sessions import ExchangeKey
from sse_forensics.facts.taken import NOTHING_TAKEN, CounterGroup, TakenKeys
from sse_forensics.ingest.logs.files import rotation_key
from sse_forensics.reassembly.flows import Connection
from sse_forensics.reassembly.http_events import header

LAST_EVENT_ID = "Last-Event-ID"
# A stream with fewer ID-carrying events says nothing about whether its counter is shared.
MIN_VALUES_TO_JUDGE = 2
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def stream_key(conn: Connection, ex: ExchangeRecord) -> str:
    """Stable across runs and input order: the Community ID of the flow plus the exchange's
    position on it."""
    return f"{conn.community_id}/{ex.index}"


def stream_label(conn: Connection, ex: ExchangeRecord) -> str:
    req = ex.request
    what = f"{req.method} {_CONTROL.sub('?', req.target)[:80]}" if req else "(request not captured)"
    return f"conn {conn.id} #{ex.index} {what}"


def build_streams(
    exchanges: list[ExchangeRecord],
    connections: dict[int, Connection],
    sessions: dict[ExchangeKey, SessionRecord],
) -> list[StreamRecord]:
    """A record per event-stream response and per resume request, in time order."""
    streams: list[StreamRecord] = []
    for ex in exchanges:
        leid = header(ex.request_headers, LAST_EVENT_ID)
        if not ex.is_event_stream and leid is None:
            continue
        conn = connections[ex.connection_id]
        method = ex.request.method.upper() if ex.request else ""
        if leid is not None:
            kind = "resume"
        else:
            kind = {"POST": "post", "GET": "get"}.get(method, "unknown")
        rec = StreamRecord(
            key=stream_key(conn, ex),
            label=stream_label(conn, ex),
            exchange=ex,
            connection=conn,
            session=sessions[(ex.connection_id, ex.index)],
            kind=kind,
            last_event_id=leid.strip() if leid is not None else None,
        )
        for position, sse in enumerate(ex.events):
            rec.events.append(
                EventRecord(
                    rec,
                    position,
                    sse,
                    ex.kinds[position],  # type: ignore[arg-type]
                    signal=ex.signals[position],
                    rpc=ex.rpcs[position],
                )
            )
        streams.append(rec)
    streams.sort(key=_time_order)
    return streams


def _time_order(s: StreamRecord) -> tuple:
    """Time, then where the request is recorded: log timestamps have one-second resolution,
    and within a second an access log's line order is the order the responses ended."""
    origin = s.request_origin
    if origin is None:
        where: tuple = (("", 0, ""), 0)
    elif origin.kind == "line":  # a rotated set reads oldest file first
        where = (rotation_key(origin.source), origin.number)
    else:
        where = ((origin.source, 0, ""), origin.number)
    return (s.first_ts, *where, s.connection.id, s.exchange.index)


def link_resumes(streams: list[StreamRecord]) -> None:
    """Point each resume at the stream where its ``Last-Event-ID`` was seen: the latest such
    stream of the same session that began before the resume (of any session only when the
    resume's session is inferred)."""
    wanted = {s.last_event_id for s in streams if s.kind == "resume" and s.last_event_id}
    if not wanted:
        return
    # Only the IDs some resume asks for are indexed: (stream, last event with that ID).
    seen: dict[str, list[tuple[StreamRecord, EventRecord]]] = defaultdict(list)
    for stream in streams:  # time order: a resume may continue an earlier resume
        if stream.kind == "resume" and stream.last_event_id:
            candidates = [(s, e) for s, e in seen.get(stream.last_event_id, []) if s is not stream]
            same_session = [c for c in candidates if c[0].session is stream.session]
            # Another session's stream only when this resume's own session is a guess (no
            # Mcp-Session-Id): an explicit session never continues another's stream.
            fallback = candidates if stream.session.inferred else []
            pick = (same_session or fallback or [None])[-1]
            if pick is not None:
                stream.resumed_from, stream.resumed_event = pick
                stream.root = pick[0].logical
        for event in stream.events:
            if event.carries_id and event.sse.id_field in wanted:
                bucket = seen[event.sse.id_field]
                if bucket and bucket[-1][0] is stream:
                    bucket[-1] = (stream, event)
                else:
                    bucket.append((stream, event))


def assign_ids(streams: list[StreamRecord], config: AnalysisConfig) -> dict[str, IdCodec]:
    """Detect each session's ID scheme and give every ID-carrying event its arithmetic key."""
    by_session: dict[str, list[StreamRecord]] = defaultdict(list)
    for s in streams:
        by_session[s.session.session_id].append(s)
    codecs: dict[str, IdCodec] = {}
    for session_id, items in by_session.items():
        ids = [[e.sse.id_field for e in s.id_events() if e.kind != "signal"] for s in items]
        codec = detect_scheme(ids, config.prefixed_regex, config.id_scheme)
        codecs[session_id] = codec
        items[0].session.id_scheme = codec.scheme
        for s in items:
            for e in s.id_events():
                e.key = codec.key(e.sse.id_field)
    return codecs


def counter_scopes(streams: list[StreamRecord]) -> dict[int, TakenKeys]:
    """Decide per session whether the ID counter is per stream or shared (session- or
    server-wide) and return, per logical stream, the keys that other streams took.

    PROFILE.md: with a shared counter a stream's IDs legitimately skip values that went to
    other streams, and a value is missing only if it appears on no stream of the capture.
    A value that repeats on two logical streams proves the counters are not shared.
    """
    logical: dict[int, StreamRecord] = {}
    keys: dict[int, set] = defaultdict(set)
    for s in streams:
        root = s.logical
        logical[id(root)] = root
        keys[id(root)].update(e.key for e in s.id_events() if e.key is not None)

    def repeats(roots: list[StreamRecord]) -> bool:
        """Most logical streams carry mostly values that other streams carry too: per-stream
        counters (each starts again at its first value). A stray repeat or two (a server
        restart, a replay the capture could not link) does not make a shared counter
        per-stream. Streams too short to tell are left out. Linear in the values."""
        holders: Counter = Counter()
        for r in roots:
            holders.update(keys[id(r)])
        judged = mostly_shared = 0
        for r in roots:
            mine = keys[id(r)]
            if len(mine) < MIN_VALUES_TO_JUDGE:
                continue
            judged += 1
            shared = sum(1 for k in mine if holders[k] > 1)
            mostly_shared += shared * 2 > len(mine)
        return judged > 0 and mostly_shared * 2 >= judged

    servers: dict[tuple, list[StreamRecord]] = defaultdict(list)
    sessions: dict[str, list[StreamRecord]] = defaultdict(list)
    for root in logical.values():
        servers[root.connection.server].append(root)
        sessions[root.session.session_id].append(root)

    def group(roots: list[StreamRecord]) -> CounterGroup:
        return CounterGroup(k for r in roots for k in keys[id(r)])

    session_shared: dict[str, CounterGroup | None] = {}
    exclusions: dict[int, TakenKeys] = {}
    for roots in servers.values():
        server_group = group(roots) if len(roots) > 1 and not repeats(roots) else None
        many_sessions = len({r.session.session_id for r in roots}) > 1
        for root in roots:
            peers = sessions[root.session.session_id]
            session_id = root.session.session_id
            if session_id not in session_shared:
                shared = len(peers) > 1 and not repeats(peers)
                session_shared[session_id] = group(peers) if shared else None
            own = frozenset(keys[id(root)])
            if server_group is not None:
                taken, scope = (
                    TakenKeys(server_group, own),
                    "server" if many_sessions else "session",
                )
            elif session_shared[session_id] is not None:
                taken, scope = TakenKeys(session_shared[session_id], own), "session"
            else:
                taken = NOTHING_TAKEN
                scope = "per-stream" if len(peers) > 1 or len(roots) > 1 else "unknown"
            root.session.counter_scope = scope
            exclusions[id(root)] = taken
    return exclusions
