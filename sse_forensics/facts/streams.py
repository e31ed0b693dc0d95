"""Streams, their events, and the resumes that continue them (docs/profile.md, "Sessions and
streams", "Event IDs", "Events that are not data").

A resume is linked to its stream by event ID, never by URL: it continues the stream on which
its ``Last-Event-ID`` was seen, which may have been opened by a ``POST`` on another
connection.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from typing import Any

import polars as pl

from sse_forensics.facts.earlier import event_at
from sse_forensics.facts.front import label_of
from sse_forensics.facts.ids import IdCodec
from sse_forensics.facts.model import (
    ExchangeRecord,
    SessionRecord,
    StreamKind,
    StreamRecord,
)
from sse_forensics.facts.sessions import ExchangeKey
from sse_forensics.facts.taken import NO_KEYS, NOTHING_TAKEN, CounterGroup, TakenKeys
from sse_forensics.ingest.logs.files import rotation_key
from sse_forensics.reassembly.flows import Connection
from sse_forensics.reassembly.http_events import header

LAST_EVENT_ID = "Last-Event-ID"


def stream_key(conn: Connection, ex: ExchangeRecord) -> str:
    """Stable across runs and input order: the Community ID of the flow plus the exchange's
    position on it."""
    return f"{conn.community_id}/{ex.index}"


def stream_label(conn: Connection, ex: ExchangeRecord) -> str:
    req = ex.request
    return label_of(conn.id, ex.index, req.method if req else None, req.target if req else None)


def opened_by(s: StreamRecord) -> str | None:
    """The request that opened ``s``'s logical stream, in words every leg of a proxy shares
    (issue 12, "one incident per lost range"): ``POST tools/call id=3`` (the JSON-RPC calls
    of its body: a request ID is never reused within a session), ``GET`` (a standalone
    stream). ``None`` when the request or its calls were not captured: then only the stream
    key (connection and exchange) names the stream."""
    root = s.logical
    ex = root.exchange
    if root.kind == "get":
        return "GET"
    if root.kind != "post" or not ex.calls:
        return None
    calls = ",".join(f"{c.method} id={c.rpc_id}" for c in ex.calls)
    return f"POST {calls}"


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
        kind: StreamKind
        if leid is not None:
            kind = "resume"
        elif method in ("POST", "GET"):
            kind = "post" if method == "POST" else "get"
        else:
            kind = "unknown"
        rec = StreamRecord(
            key=stream_key(conn, ex),
            label=stream_label(conn, ex),
            exchange=ex,
            connection=conn,
            session=sessions[(ex.connection_id, ex.index)],
            kind=kind,
            last_event_id=leid.strip() if leid is not None else None,
        )
        streams.append(rec)
    streams.sort(key=_time_order)
    return streams


def _time_order(s: StreamRecord) -> tuple[Any, ...]:
    """Time, then where the request is recorded: log timestamps have one-second resolution,
    and within a second an access log's line order is the order the responses ended."""
    origin = s.request_origin
    if origin is None:
        where: tuple[Any, ...] = (("", 0, ""), 0)
    elif origin.kind == "line":  # a rotated set reads oldest file first
        where = (rotation_key(origin.source), origin.number)
    else:
        where = ((origin.source, 0, ""), origin.number)
    return (s.first_ts, *where, s.connection.id, s.exchange.index)


def link_resumes(
    streams: list[StreamRecord], links: dict[tuple[int, int], tuple[tuple[int, int], int]]
) -> None:
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
        stream.resumed_from, stream.resumed_event = target, event_at(target, position)
        stream.root = target.logical


def assign_ids(
    streams: list[StreamRecord],
    session_codecs: dict[str, IdCodec],
    stream_codecs: dict[tuple[int, int], IdCodec],
    links: dict[tuple[int, int], tuple[tuple[int, int], int]],
) -> dict[tuple[int, int], IdCodec]:
    """Give every stream the ID scheme of its logical stream (its events get their keys
    from it), decided over the whole scan (:mod:`.front`): the root is found through
    ``links`` (resume → the stream it continues), before any event is read. A stream whose
    logical stream carried no ID reads IDs the session's way. Each session's ``id_scheme``
    is its streams' scheme, or ``mixed`` when they differ. Returns each response's codec."""
    out: dict[tuple[int, int], IdCodec] = {}
    schemes: dict[str, set[str]] = defaultdict(set)
    for s in streams:
        key = (s.exchange.connection_id, s.exchange.index)
        root, seen = key, {key}
        while root in links and links[root][0] not in seen:
            root = links[root][0]
            seen.add(root)
        session_id = s.session.session_id
        codec = stream_codecs.get(root)
        if codec is not None:
            schemes[session_id].add(codec.scheme)
        else:
            codec = session_codecs.get(session_id) or IdCodec("opaque")
        s.codec = out[key] = codec
    for s in streams:
        session_id = s.session.session_id
        own = schemes.get(session_id)
        if own:
            s.session.id_scheme = next(iter(own)) if len(own) == 1 else "mixed"
        else:
            s.session.id_scheme = (session_codecs.get(session_id) or IdCodec("opaque")).scheme
    return out


class CounterExclusions:
    """Per logical stream (by its root), the keys other streams took: built on
    first use from the keyed event columns (:mod:`.columns`), since only the streams that
    are judged one by one ask."""

    def __init__(
        self,
        streams: list[StreamRecord],
        shared_sessions: set[str],
        server_groups: dict[tuple[str, int], CounterGroup],
        keyed: pl.DataFrame | Callable[[], pl.DataFrame],
    ) -> None:
        """``keyed``: ``session_id, root_conn, root_index, prefix, seq`` of every keyed
        ID-carrying event of the partition, or what builds it: a table with a row per
        event, built only if a stream on a shared counter is judged."""
        self._roots = {s.logical for s in streams}
        self._shared_sessions = shared_sessions
        self._server_groups = server_groups
        self._keyed = keyed
        self._built = False
        self._session_groups: dict[str, CounterGroup] = {}
        self._own_keys: dict[str, dict[tuple[int, int], CounterGroup]] = {}
        self._taken: dict[StreamRecord, TakenKeys] = {}

    def _groups(self) -> None:
        """Every session's counter values (per prefix, sorted), and each logical stream's
        own, from two ``group_by`` over the keyed table: a Python step per group, none per
        event (issue 9: no per-row Python loop)."""
        keyed = self._keyed() if callable(self._keyed) else self._keyed
        self._keyed, self._built = keyed, True
        seq = pl.col("seq").unique().sort()
        own = keyed.group_by("session_id", "root_conn", "root_index", "prefix").agg(seq)
        streams: dict[str, dict[tuple[int, int], dict[str, list[int]]]] = defaultdict(
            lambda: defaultdict(dict)
        )
        for session_id, rc, ri, prefix, seqs in own.iter_rows():
            streams[session_id][(rc, ri)][prefix] = seqs
        self._own_keys = {
            sid: {k: CounterGroup.from_sorted(v) for k, v in roots.items()}
            for sid, roots in streams.items()
        }
        shared = keyed.group_by("session_id", "prefix").agg(seq)
        sessions: dict[str, dict[str, list[int]]] = defaultdict(dict)
        for session_id, prefix, seqs in shared.iter_rows():
            sessions[session_id][prefix] = seqs
        self._session_groups = {k: CounterGroup.from_sorted(v) for k, v in sessions.items()}

    def _own(self, root: StreamRecord) -> CounterGroup:
        if not self._built:  # every session of the partition at once
            self._groups()
        own = self._own_keys.get(root.session.session_id, {})
        return own.get((root.exchange.connection_id, root.exchange.index), NO_KEYS)

    def get(self, root: StreamRecord, default: TakenKeys = NOTHING_TAKEN) -> TakenKeys:
        taken = self._taken.get(root)
        if taken is not None:
            return taken
        if root not in self._roots:
            return default
        session_id = root.session.session_id
        server_group = self._server_groups.get(root.connection.server)
        if server_group is not None:
            taken = TakenKeys(server_group, self._own(root))
        elif session_id in self._shared_sessions:
            own = self._own(root)  # the session's groups are built with it
            taken = TakenKeys(self._session_groups.get(session_id, CounterGroup(())), own)
        else:
            taken = NOTHING_TAKEN
        self._taken[root] = taken
        return taken


def counter_scopes(streams: list[StreamRecord], scopes: dict[str, str]) -> None:
    """Each session's counter scope (docs/profile.md, "Event IDs": with a shared counter a value
    is missing only if it appears on no stream of the capture), as decided over every stream
    of the scan (:mod:`.front`)."""
    for s in streams:
        s.session.counter_scope = scopes.get(s.session.session_id, "unknown")
