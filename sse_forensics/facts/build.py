"""Build the fact tables from a reassembled capture. Schemas: ``docs/facts.md``."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import polars as pl

from sse_forensics.evidence.pieces import EventPieces
from sse_forensics.evidence.tables import EventColumns
from sse_forensics.facts.causes import attribute
from sse_forensics.facts.columns import EventColumns as KeyedEvents
from sse_forensics.facts.columns import (
    Key,
    StreamCounts,
    answered_by_root,
    event_columns,
    events_plan,
    keyed_roots,
    stream_frame,
)
from sse_forensics.facts.earlier import events_where
from sse_forensics.facts.front import Front
from sse_forensics.facts.gaps import (
    GapRecord,
    incomplete_reason,
    live_gaps,
    missing_bytes,
    resume_gap,
    successor,
)
from sse_forensics.facts.ids import IdCodec
from sse_forensics.facts.index import StreamIndex
from sse_forensics.facts.join import Disagreement, join_logs
from sse_forensics.facts.load import prefetch_events
from sse_forensics.facts.model import (
    Evidence,
    ExchangeRecord,
    SessionRecord,
    StreamRecord,
    evidence,
)
from sse_forensics.facts.observed import ObservedOrders, ResumeOrder
from sse_forensics.facts.replay_columns import replay_data
from sse_forensics.facts.replays import RESUME_STORM_ATTEMPTS, ReplayFacts, ReplayJudge
from sse_forensics.facts.requests import RequestIndex, collect_requests
from sse_forensics.facts.session_rows import sessions_table
from sse_forensics.facts.sessions import BASE_SCHEMA, PostTime, SessionTable
from sse_forensics.facts.sessions import by_exchange as exchange_sessions
from sse_forensics.facts.signal_table import signals_plan, signals_table
from sse_forensics.facts.signals import RESUME_GAP, STREAM_GAP
from sse_forensics.facts.streams import (
    CounterExclusions,
    assign_ids,
    build_streams,
    counter_scopes,
    link_resumes,
    opened_by,
)
from sse_forensics.facts.tables import TABLE_SCHEMAS, frame, rows_frame
from sse_forensics.facts.taken import TakenKeys
from sse_forensics.facts.unjudged import lost_holes, not_judged
from sse_forensics.facts.windows import JumpViews, last_data_with_id, read_whole
from sse_forensics.limits import CapHit
from sse_forensics.reassembly.flows import Connection
from sse_forensics.reassembly.http_events import header

if TYPE_CHECKING:
    from polars._typing import PolarsDataType


# A fact table as rules read it: held, a query, or queries over its rows in order.
Table = pl.DataFrame | pl.LazyFrame | list[pl.LazyFrame]


@dataclass(slots=True)
class Facts:
    """The fact tables plus the records behind them (for the timeline view)."""

    tables: dict[str, pl.DataFrame]
    streams: list[StreamRecord] = field(default_factory=list)
    sessions: dict[str, SessionRecord] = field(default_factory=dict)
    gaps: list[GapRecord] = field(default_factory=list)
    exchange_sessions: dict[tuple[int, int], SessionRecord] = field(default_factory=dict)
    exchanges: list[ExchangeRecord] = field(default_factory=list)
    connections: dict[int, Connection] = field(default_factory=dict)
    # With ``lazy_events``: the ``events`` table as a query (``tables["events"]`` is then
    # empty) and its row count; the ``signals`` table as a query (``tables["signals"]``
    # empty too: .signal_table).
    events_plan: list[pl.LazyFrame] | None = None
    signals_plan: pl.LazyFrame | None = None
    event_rows: int = 0
    caps: list[CapHit] = field(default_factory=list)  # caps that fired while judging

    def rule_tables(self) -> dict[str, Table]:
        """The tables rules read: ``tables``, with the ``events`` and ``signals`` queries
        in place of their empty tables when the facts were built with ``lazy_events``."""
        out: dict[str, Table] = dict(self.tables)
        if self.events_plan is not None:
            out["events"] = self.events_plan
        if self.signals_plan is not None:
            out["signals"] = self.signals_plan
        return out


def build_facts(
    all_exchanges: list[ExchangeRecord],
    connections: dict[int, Connection],
    front: Front,
    events: pl.DataFrame | EventPieces | None = None,
    sessions: SessionTable | None = None,
    posts: dict[str, list[PostTime]] | None = None,
    lazy_events: bool = False,
) -> Facts:
    """The fact tables of one partition: its exchanges, their events (the ``events``
    evidence table), the connections they sit on, and what the whole scan decided across
    sessions (:mod:`.front`). With ``lazy_events`` the ``events`` fact table is left a
    query (:attr:`Facts.events_plan`, :func:`.columns.events_plan`): a scan that keeps no
    table never holds one wide row per event."""
    if events is None:
        events = EventColumns.frame()
    records, base = _session_records(sessions, all_exchanges)
    by_exchange = exchange_sessions(all_exchanges, records)
    exchanges, disagreements = join_logs(all_exchanges, by_exchange, front.folds, front.dropped)
    streams = build_streams(exchanges, connections, by_exchange)
    # Before any event is read: keys need it.
    codecs = assign_ids(streams, front.codecs, front.stream_codecs, front.links)
    # The events the resumes are judged on, read in one pass: every short stream of a
    # resumed logical stream (a long one's are asked of its columns: facts.earlier).
    prefetch_events(s.exchange for s in _resumed_groups(streams, front.links) if read_whole(s))
    link_resumes(streams, front.links)
    counter_scopes(streams, front.scopes)
    index = StreamIndex(streams)
    requests = RequestIndex(collect_requests(exchanges, by_exchange), posts)
    frame_ = stream_frame(streams)
    logged = {(ex.connection_id, ex.index) for ex in exchanges if ex.has_log}
    cap = front.limits.gaps_per_stream
    cols = event_columns(events, frame_, codecs, logged, cap)
    # Streams are judged on the events around their jumps (facts.windows) and an opaque
    # one's producer order from its IDs' column (gaps._log_order_gaps); short ones read whole.
    judged = [s for s in streams if (s.exchange.connection_id, s.exchange.index) in cols.to_judge]
    prefetch_events(s.exchange for s in judged if read_whole(s))
    taken = CounterExclusions(
        streams, front.shared_session, front.server_groups, lambda: keyed_roots(cols, frame_)
    )
    orders = ObservedOrders(index, cols, frame_)
    judge = ReplayJudge(index, requests, front.foreign, _replayed_in(cols), orders, cols.parts)

    gaps: list[GapRecord] = []
    resumes: list[tuple[StreamRecord, GapRecord | None]] = []
    views = JumpViews(cols.jump_pairs, cols.signal_at, cols.past_cap)
    for s in streams:
        if (s.exchange.connection_id, s.exchange.index) not in cols.to_judge:
            continue  # contiguous, no signal: no live gap (facts.columns)
        view = views.view(s)
        gaps.extend(live_gaps(s, _codec(s), taken.get(s.logical), view, cap))
        views.signals_past_cap(s, view)
    caps = views.caps(streams, front.limits)
    for s in streams:
        if s.kind != "resume":
            continue
        gap = resume_gap(s, _codec(s), taken.get(s.logical), index)
        if gap is not None:
            gaps.append(gap)
        resumes.append((s, gap))
    live_by_stream: dict[StreamRecord, list[GapRecord]] = defaultdict(list)
    live_by_logical: dict[StreamRecord, list[GapRecord]] = defaultdict(list)
    gaps_by_session: dict[str, list[GapRecord]] = defaultdict(list)
    for g in gaps:
        gaps_by_session[g.stream.session.session_id].append(g)
        if g.location == "live":
            live_by_stream[g.stream].append(g)
            live_by_logical[g.stream.logical].append(g)
    resume_gaps = {s: gap for s, gap in resumes if gap is not None}
    for g in gaps:
        g.codec = _codec(g.stream)
        _client_reaction(g, index, requests)
        attribute(g, live_by_stream, resume_gaps)
    resume_rows = [
        _resume_row(
            s,
            _codec(s),
            taken.get(s.logical),
            index,
            live_by_logical[s.logical],
            gap,
            judge.judge(s, gap),
            orders.of(s),
        )
        for s, gap in resumes
    ]
    counts = cols.counts
    plan = events_plan(cols, frame_)
    signals = signals_plan(streams, cols, frame_)
    tables = {
        "sessions": sessions_table(base, records, streams, gaps_by_session, counts, index),
        "streams": _with_common("streams", _stream_columns(streams, counts), frame_),
        "events": (
            pl.DataFrame(schema=TABLE_SCHEMAS["events"])
            if lazy_events
            else pl.concat([part.collect() for part in plan])
        ),
        "resumes": _with_common("resumes", resume_rows, frame_),
        "gaps": frame("gaps", [_gap_row(n, g) for n, g in enumerate(gaps, 1)]),
        "signals": (
            pl.DataFrame(schema=TABLE_SCHEMAS["signals"]) if lazy_events else signals_table(signals)
        ),
        "requests": frame("requests", _request_rows(requests, answered_by_root(cols, frame_))),
        "disagreements": frame(
            "disagreements", _disagreement_rows(disagreements, streams, connections)
        ),
    }
    assert set(tables) == set(TABLE_SCHEMAS)
    facts = Facts(tables, streams, records, gaps, by_exchange, all_exchanges, connections)
    facts.caps = caps
    if lazy_events:
        facts.events_plan, facts.event_rows = plan, cols.height
        facts.signals_plan = signals
    else:
        facts.event_rows = tables["events"].height
    return facts


def _resumed_groups(
    streams: list[StreamRecord], links: dict[tuple[int, int], tuple[tuple[int, int], int]]
) -> list[StreamRecord]:
    """The streams of every logical stream that holds a resume, found through ``links``
    (resume → the stream it continues) before the resumes are linked."""

    def root(key: tuple[int, int]) -> tuple[int, int]:
        seen = {key}
        while key in links and links[key][0] not in seen:
            key = links[key][0]
            seen.add(key)
        return key

    keys = {(s.exchange.connection_id, s.exchange.index): s for s in streams}
    roots = {root(k) for k, s in keys.items() if s.kind == "resume"}
    return [s for k, s in keys.items() if s.kind == "resume" or root(k) in roots]


def _session_records(
    sessions: SessionTable | None, exchanges: list[ExchangeRecord]
) -> tuple[dict[str, SessionRecord], pl.DataFrame]:
    """The records of the exchanges' sessions, and every session's own columns (the
    ``sessions`` table's rows): a session the table does not list (records built by
    hand) is added after the others."""
    table = SessionTable(pl.DataFrame(schema=BASE_SCHEMA)) if sessions is None else sessions
    records = table.records({ex.session for ex in exchanges})
    unlisted: list[tuple[str, bool, str, None]] = []
    for ex in exchanges:
        if ex.session not in records:
            records[ex.session] = SessionRecord(ex.session, ex.session_inferred, ex.session_how)
            unlisted.append((ex.session, ex.session_inferred, ex.session_how, None))
    if not unlisted:
        return records, table.frame
    added = pl.DataFrame(unlisted, schema=BASE_SCHEMA, orient="row")
    return records, pl.concat([table.frame, added])


# The columns every row about a stream carries (``_common``), as ``stream_frame`` holds them.
_COMMON = (
    "session_id",
    "session_inferred",
    "stream",
    "stream_label",
    "opened_by",
    "id_scheme",
    "counter_scope",
    "community_id",
    "client_ip",
    "client_port",
    "server_ip",
    "server_port",
)


def _with_common(
    table: str, rows: list[dict[str, Any]] | dict[str, list[Any]], frame_: pl.DataFrame
) -> pl.DataFrame:
    """A table about streams from its rows (each naming its stream by ``conn_id`` and
    ``ex_index``) and the columns every such row carries, joined from ``frame_``
    (:func:`.columns.stream_frame`) rather than written out row by row."""
    schema = TABLE_SCHEMAS[table]
    if isinstance(rows, list) and not rows:  # no row: nothing to join (the merged table's)
        return pl.DataFrame(schema=schema)
    own: dict[str, PolarsDataType] = {"conn_id": pl.Int64, "ex_index": pl.Int64}
    own.update((name, dtype) for name, dtype in schema.items() if name not in _COMMON)
    return (
        rows_frame(own, rows)
        .join(
            frame_.select("conn_id", "ex_index", *_COMMON),
            on=["conn_id", "ex_index"],
            how="left",
            maintain_order="left",
        )
        .select(list(schema))
    )


def _codec(s: StreamRecord) -> IdCodec:
    """The ID scheme of the stream's logical stream (set by ``assign_ids``)."""
    assert s.codec is not None
    return s.codec


def _sends(s: StreamRecord, event: str) -> bool:
    """``s`` holds an event of type ``event`` (a long stream's asked of its columns)."""
    found = events_where(s, pl.col("event") == event, lambda e: e.sse.event == event)
    return next(found, None) is not None


def _replayed_in(cols: KeyedEvents) -> Callable[[set[tuple[str, str]]], set[Key]]:
    """The streams holding the first data event (in time order) with one of the given (ID,
    data) pairs: where a replayed event was sent first (:class:`.replays.ReplayJudge`)."""

    def holders(pairs: set[tuple[str, str]]) -> set[Key]:
        if not pairs:
            return set()
        wanted = pl.DataFrame(
            list(pairs), schema={"id_field": pl.String, "data": pl.String}, orient="row"
        )
        read = ("kind", "id_field", "data")
        found = pl.concat(
            part.filter(pl.col("kind") == "data").join(wanted, on=["id_field", "data"], how="semi")
            for part in cols.parts(read)
        ).unique(["id_field", "data"], keep="first", maintain_order=True)
        return set(found.select("conn_id", "ex_index").unique().iter_rows())

    return holders


def _endpoints(s: StreamRecord | None) -> dict[str, Any]:
    """ECS-style flow columns of the connection a row is about."""
    conn = s.connection if s is not None else None
    return {
        "community_id": conn.community_id if conn else None,
        "client_ip": conn.client[0] if conn else None,
        "client_port": conn.client[1] if conn else None,
        "server_ip": conn.server[0] if conn else None,
        "server_port": conn.server[1] if conn else None,
    }


def _common(s: StreamRecord) -> dict[str, Any]:
    return {
        "session_id": s.session.session_id,
        "session_inferred": s.session.inferred,
        "stream": s.logical.key,
        "stream_label": s.logical.label,
        "opened_by": opened_by(s),
        "id_scheme": _codec(s).scheme,
        "counter_scope": s.session.counter_scope,
        **_endpoints(s),
    }


def _client_reaction(g: GapRecord, index: StreamIndex, requests: RequestIndex) -> None:
    """Did the client re-issue the originating request after an unsignalled gap, or keep
    consuming (the stream went on, or it resumed later)?"""
    if g.signalled or (g.location == "resume" and g.signal == "410"):
        return
    when = (g.before.origin.ts if g.before and g.before.origin else None) or g.stream.first_ts
    g.reissue = requests.reissue_after(g.stream, when)
    later_resume = any(
        s.kind == "resume" and s.first_ts > g.stream.first_ts for s in index.logical(g.stream)
    )
    g.client_continued = g.after is not None or later_resume
    if g.reissue is None and not later_resume and not requests.originating(g.stream):
        # Logs: no request body tells the re-issue apart from any other POST (as for
        # no-reissue-after-410, a later POST may be it), but only after a response the
        # client left with events still pending.
        left = _left_with_events_pending(g.stream)
        g.reissue_possible = left is not None and requests.post_after(g.stream, left)


def _left_with_events_pending(stream: StreamRecord) -> float | None:
    """When the client left ``stream`` (its last written event), if the server's event log
    shows events produced for it afterwards that it never wrote nor evicted; else None."""
    log = stream.exchange.log
    if log is None:  # before the events are read: a capture's long stream is never built
        return None
    last = last_data_with_id(stream)
    if last is None or last.id_field not in log.emitted:
        return None
    after = log.emitted[log.emitted.index(last.id_field) + 1 :]
    if not any(i not in log.evicted for i in after):
        return None
    return last.origin.ts if last.origin is not None else stream.first_ts


def _counts(s: StreamRecord, counts: dict[Key, StreamCounts]) -> StreamCounts:
    return counts.get((s.exchange.connection_id, s.exchange.index)) or StreamCounts()


def _stream_columns(
    streams: list[StreamRecord], counts: dict[Key, StreamCounts]
) -> list[dict[str, Any]] | dict[str, list[Any]]:
    """The ``streams`` table's own columns: :func:`_stream_row` of every event stream,
    transposed at once (``rows_frame`` would look each name up in each row)."""
    rows = [_stream_row(s, counts) for s in streams if s.exchange.is_event_stream]
    if not rows:
        return rows
    # Every row is the same dict literal: its values transpose with zip, in key order.
    names = tuple(rows[0])
    values = zip(*(row.values() for row in rows), strict=True)
    return dict(zip(names, map(list, values), strict=True))


def _stream_row(s: StreamRecord, counts: dict[Key, StreamCounts]) -> dict[str, Any]:
    ex = s.exchange
    mine = _counts(s, counts)
    cache_control = (header(ex.response_headers, "cache-control") or "").lower()
    return {
        "conn_id": ex.connection_id,
        "ex_index": ex.index,
        "response_stream": s.key,
        "response_label": s.label,
        "kind": s.kind,
        "method": ex.request.method if ex.request else None,
        "target": ex.request.target if ex.request else None,
        "status": s.status,
        "head_captured": ex.response.head_captured if ex.response else False,
        "last_event_id": s.last_event_id,
        "resumes_stream": s.resumed_from.key if s.resumed_from else None,
        "connection": s.connection.id,
        "community_id": s.connection.community_id,
        "request_frame": s.request_origin.number if s.request_origin else None,
        "response_frame": s.response_origin.number if s.response_origin else None,
        "source": (s.response_origin or s.connection.first).source,
        "first_ts": s.first_ts,
        "last_ts": (ex.last_body_origin or s.response_origin or s.connection.last).ts,
        "events": mine.events,
        "data_events": mine.data,
        "first_id": mine.first_id,
        "last_id": mine.last_id,
        "complete": ex.response_complete,
        "end_reason": ex.response_end_reason,
        "missing_spans": len(ex.holes),
        "missing_bytes": missing_bytes(lost_holes(s)),
        "not_judged": not_judged(s),
        "no_store": "no-store" in cache_control,
        "trailing_bytes": ex.trailing_bytes,
        "id_outliers": mine.outliers,
        "first_outlier": mine.first_outlier,
        "evidence": _outlier_evidence(s, mine),
    }


def _outlier_evidence(s: StreamRecord, mine: StreamCounts) -> list[Evidence]:
    """Where the stream's IDs do not fit its scheme: the first outlier, cited."""
    if not mine.outliers:
        return []
    scheme = _codec(s).scheme
    what = f"event id {mine.first_outlier} does not fit the stream's {scheme} IDs"
    if mine.outliers > 1:
        what += f" ({mine.outliers} such IDs on this response)"
    ev = [evidence(s.request_origin, f"request {s.label}")] if s.request_origin else []
    return [*ev, evidence(mine.first_outlier_at, what)]


def _resume_row(
    s: StreamRecord,
    codec: IdCodec,
    taken: TakenKeys,
    index: StreamIndex,
    live: list[GapRecord],
    gap: GapRecord | None,
    replay: ReplayFacts,
    order: ResumeOrder,
) -> dict[str, Any]:
    """A resume, whether the ID it must continue at lies in a known dropped range, and what
    its answer and the client did (:mod:`.replays`). ``live``: the live gaps of its logical
    stream; ``order``: where its Last-Event-ID sits in their observed order."""
    succ = _successor(s, codec, index, taken, order) if s.last_event_id else None
    dropped_by = None
    if succ is not None:
        earlier = [g for g in live if g is not gap and g.stream.first_ts <= s.first_ts]
        for g in earlier:
            if g.covers(succ, codec):
                dropped_by = STREAM_GAP if g.signal == STREAM_GAP else "live-jump"
                break
        if dropped_by is None and gap is not None and gap.first == succ:
            dropped_by = "replay-jump"
    n_data, first_data = replay_data(s)  # a long replay's from its columns
    gap_signal = gap.signal if gap is not None and gap.signal != "410" else None
    if gap_signal is None and _sends(s, RESUME_GAP):
        gap_signal = RESUME_GAP
    complete = gap.complete if gap is not None else not s.exchange.holes
    if gap is not None:
        ev = gap.evidence()  # already cites the request, the status and the resumed event
    else:
        ev = [evidence(s.request_origin, f"resume request Last-Event-ID {s.last_event_id!r}")]
        if s.response_origin is not None:
            ev.append(evidence(s.response_origin, f"response status {s.status}"))
        if s.resumed_event is not None:
            ev.append(s.resumed_event.cite(f"Last-Event-ID {s.last_event_id!r} first seen here"))
    ev.extend(replay.extra_evidence)
    if first_data is not None and not gap:
        ev.append(first_data.cite(f"first replayed data event: id {first_data.sse.id_field}"))
    return {
        "conn_id": s.exchange.connection_id,
        "ex_index": s.exchange.index,
        "response_stream": s.key,
        "response_label": s.label,
        "last_event_id": s.last_event_id,
        "successor": succ,
        "resumes_stream": s.resumed_from.key if s.resumed_from else None,
        "status": s.status,
        "is_event_stream": s.exchange.is_event_stream,
        "data_events": n_data,
        "first_event_id": first_data.sse.id_field if first_data is not None else None,
        "successor_dropped": dropped_by is not None,
        "dropped_by": dropped_by,
        "gap_signal": gap_signal,
        "first": gap.first if gap is not None else succ,
        "last": gap.last if gap is not None else None,
        "count": gap.count if gap is not None else None,
        "evidence_complete": complete,
        "missing_bytes": gap.missing_bytes if gap is not None else missing_bytes(s.exchange.holes),
        "incomplete": incomplete_reason(gap.holes if gap is not None else s.exchange.holes),
        # What a finding about this resume is classified as: never a verdict on its own.
        "verdict_if_faulty": "silent_corruption" if complete else "indeterminate",
        "protocol_version": s.session.protocol_version,
        "replay_start": replay.replay_start,
        "replayed_duplicates": replay.duplicates,
        "later_events_known": replay.later_events_known,
        "successor_delivered_later": _delivered_later(s, succ, index),
        "empty_replay": replay.empty_replay,
        "empty_how": replay.empty_how,
        "crossed_streams": replay.crossed_streams,
        "crossed_sessions": replay.crossed_sessions,
        "crossed_first": replay.crossed_first,
        "crossed_session": replay.crossed_session,
        "bd_last_written": replay.bd_last_written,
        "continues_after_bd": replay.continues_after_bd,
        "cursor_attempt": replay.cursor_attempt,
        "resume_storm": replay.cursor_attempt == RESUME_STORM_ATTEMPTS,
        "cursorless_get_after": replay.cursorless_get_after,
        "reissued": replay.reissued,
        "client_adjusted": replay.client_adjusted,
        "last_seen_id": replay.last_seen_id,
        "adjusted_first": replay.adjusted_first,
        "adjusted_count": replay.adjusted_count,
        "request_frame": s.request_origin.number if s.request_origin else None,
        "ts": s.first_ts,
        "evidence": ev,
    }


def _successor(
    s: StreamRecord, codec: IdCodec, index: StreamIndex, taken: TakenKeys, order: ResumeOrder
) -> str | None:
    """:func:`.gaps.successor`, the observed order's answer taken from ``order`` (found for
    every resume at once, :mod:`.observed`) rather than asked of the columns again."""
    if codec.arithmetic and codec.key(s.last_event_id or "") is not None:
        return successor(s, codec, index, taken)
    return order.following


def _delivered_later(s: StreamRecord, succ: str | None, index: StreamIndex) -> bool:
    """A later response of the same logical stream carried the successor of ``s``'s
    Last-Event-ID as a data event: whatever this resume's answer did, the client got it."""
    if succ is None:
        return False
    rank = index.rank(s)
    succ_data = (pl.col("kind") == "data") & (pl.col("id_field") == succ)
    return any(
        next(
            events_where(later, succ_data, lambda e: e.kind == "data" and e.sse.id_field == succ),
            None,
        )
        is not None
        for later in index.logical(s)
        if index.rank(later) > rank
    )


def _gap_row(n: int, g: GapRecord) -> dict[str, Any]:
    s = g.stream
    before_ts = g.before.origin.ts if g.before and g.before.origin else None
    after_ts = g.after.origin.ts if g.after and g.after.origin else None
    sig_ts = g.signal_event.origin.ts if g.signal_event and g.signal_event.origin else None
    return {
        "gap_id": n,
        **_common(s),
        "response_stream": s.key,
        "response_label": s.label,
        "location": g.location,
        "detected_by": g.detected_by,
        "first": g.first,
        "last": g.last,
        "count": g.count,
        "before_id": g.before.sse.id_field if g.before else None,
        "after_id": g.after.sse.id_field if g.after else None,
        "last_event_id": s.last_event_id if g.location == "resume" else None,
        "status": s.status,
        "signal": g.signal,
        "signal_late": g.signal_late,
        "evidence_complete": g.complete,
        "missing_spans": len(g.holes),
        "missing_bytes": g.missing_bytes,
        "incomplete": incomplete_reason(g.holes),
        "cause": g.cause,
        "client_reissued": g.reissue is not None,
        "reissue_possible": g.reissue_possible and g.reissue is None,
        "client_continued": g.client_continued,
        "verdict": g.verdict,
        "ts": before_ts or sig_ts or s.first_ts,
        "ts_after": after_ts,
        "evidence": g.evidence(),
    }


def _request_rows(
    requests: RequestIndex, answered_by_stream: dict[Key, set[str | None]]
) -> list[dict[str, Any]]:
    """JSON-RPC requests and whether a response to them arrived anywhere on the logical
    stream they opened (the stream itself or a resume of it) or in a JSON body."""
    rows = []
    for r in requests.requests:
        ex = r.exchange
        answered = answered_by_stream.get((ex.connection_id, ex.index), set()) | set(
            ex.json_answers
        )
        rows.append(
            {
                "session_id": r.session.session_id if r.session else None,
                "connection": ex.connection_id,
                "exchange": ex.index,
                "rpc_method": r.method,
                "rpc_id": r.rpc_id,
                "source": r.origin.source,
                "frame": r.origin.number,
                "ts": r.ts,
                "status": ex.response.status if ex.response else None,
                "response_complete": r.rpc_id in answered,
            }
        )
    return rows


def _disagreement_rows(
    disagreements: list[Disagreement],
    streams: list[StreamRecord],
    connections: dict[int, Connection],
) -> list[dict[str, Any]]:
    """Where the event log and the capture of the same stream tell different stories."""
    by_exchange = {s.exchange: s for s in streams}
    rows = []
    for d in disagreements:
        s = by_exchange.get(d.capture)
        if s is None:
            continue
        ev = [evidence(d.origin, d.what)]
        if s.response_origin is not None:
            ev.append(evidence(s.response_origin, f"captured response {s.label}"))
        rows.append(
            {
                **_common(s),
                "response_stream": s.key,
                "event_id": d.event_id,
                "kind": d.kind,
                "evidence_complete": not s.exchange.holes,
                "ts": d.origin.ts if d.origin else s.first_ts,
                "evidence": ev,
            }
        )
    return rows
