"""Streams, their events, and the resumes that continue them (PROFILE.md, "Sessions and
streams", "Event IDs", "Events that are not data").

A resume is linked to its stream by event ID, never by URL: it continues the stream on which
its ``Last-Event-ID`` was seen, which may have been opened by a ``POST`` on another
connection.
"""

from __future__ import annotations

import re
from collections import defaultdict

from sse_forensics.facts.ids import IdCodec
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


def link_resumes(streams: list[StreamRecord], links: dict[tuple[int, int], tuple]) -> None:
    """Point each resume at the stream where its ``Last-Event-ID`` was seen (decided over
    the whole scan, :mod:`.front`): ``links`` maps a resume's exchange to that stream's
    exchange and the position of the event; the root is what that stream continues."""
    by_key = {(s.exchange.connection_id, s.exchange.index): s for s in streams}
    for stream in streams:  # time order: a resume may continue an earlier resume
        link = links.get((stream.exchange.connection_id, stream.exchange.index))
        if link is None:
            continue
        target_key, position = link
        target = by_key.get(target_key)
        if target is None:
            continue
        stream.resumed_from, stream.resumed_event = target, target.events[position]
        stream.root = target.logical


def assign_ids(streams: list[StreamRecord], codecs: dict[str, IdCodec]) -> dict[str, IdCodec]:
    """Give every ID-carrying event its arithmetic key under its session's scheme."""
    out: dict[str, IdCodec] = {}
    for s in streams:
        session_id = s.session.session_id
        codec = out.get(session_id)
        if codec is None:
            codec = out[session_id] = codecs.get(session_id) or IdCodec("opaque")
            s.session.id_scheme = codec.scheme
        for e in s.id_events():
            e.key = codec.key(e.sse.id_field)  # type: ignore[arg-type]
    return out


def counter_scopes(
    streams: list[StreamRecord],
    scopes: dict[str, str],
    shared_sessions: set[str],
    server_groups: dict[tuple[str, int], CounterGroup],
) -> dict[int, TakenKeys]:
    """Per logical stream, the keys other streams took (PROFILE.md, "Event IDs": with a
    shared counter a value is missing only if it appears on no stream of the capture). Which
    counters are shared was decided over every stream of the scan (:mod:`.front`)."""
    logical: dict[int, StreamRecord] = {}
    keys: dict[int, set] = defaultdict(set)
    for s in streams:
        root = s.logical
        logical[id(root)] = root
        keys[id(root)].update(e.key for e in s.id_events() if e.key is not None)
    by_session: dict[str, list[StreamRecord]] = defaultdict(list)
    for root in logical.values():
        by_session[root.session.session_id].append(root)
    session_groups: dict[str, CounterGroup] = {}
    exclusions: dict[int, TakenKeys] = {}
    for root in logical.values():
        session_id = root.session.session_id
        root.session.counter_scope = scopes.get(session_id, "unknown")
        own = frozenset(keys[id(root)])
        server_group = server_groups.get(root.connection.server)
        if server_group is not None:
            exclusions[id(root)] = TakenKeys(server_group, own)
        elif session_id in shared_sessions:
            group = session_groups.get(session_id)
            if group is None:
                peers = by_session[session_id]
                group = session_groups[session_id] = CounterGroup(
                    k for r in peers for k in keys[id(r)]
                )
            exclusions[id(root)] = TakenKeys(group, own)
        else:
            exclusions[id(root)] = NOTHING_TAKEN
    return exclusions
