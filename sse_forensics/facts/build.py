"""Build the fact tables from a reassembled capture. Schemas: ``docs/facts.md``."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

import polars as pl

from sse_forensics.facts.causes import attribute
from sse_forensics.facts.front import Front
from sse_forensics.facts.gaps import GapRecord, live_gaps, resume_gap, successor
from sse_forensics.facts.ids import IdCodec
from sse_forensics.facts.index import StreamIndex
from sse_forensics.facts.join import Disagreement, join_logs
from sse_forensics.facts.model import (
    EventRecord,
    ExchangeRecord,
    SessionRecord,
    StreamRecord,
    evidence,
    evidence_json,
)
from sse_forensics.facts.replays import RESUME_STORM_ATTEMPTS, ReplayFacts, ReplayJudge
from sse_forensics.facts.requests import RequestIndex, collect_requests, posts_by_session
from sse_forensics.facts.sessions import session_records
from sse_forensics.facts.signals import RESUME_GAP, STREAM_GAP
from sse_forensics.facts.streams import (
    assign_ids,
    build_streams,
    counter_scopes,
    link_resumes,
)
from sse_forensics.facts.tables import TABLE_SCHEMAS, frame
from sse_forensics.facts.taken import NOTHING_TAKEN, TakenKeys
from sse_forensics.reassembly.flows import Connection
from sse_forensics.reassembly.http_events import header


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


def build_facts(
    all_exchanges: list[ExchangeRecord],
    connections: dict[int, Connection],
    front: Front,
) -> Facts:
    """The fact tables of one partition: its exchanges (with their events), the connections
    they sit on, and what the whole scan decided across sessions (:mod:`.front`)."""
    by_exchange, sessions = session_records(all_exchanges)
    exchanges, disagreements = join_logs(all_exchanges, by_exchange, front.folds, front.dropped)
    streams = build_streams(exchanges, connections, by_exchange)
    link_resumes(streams, front.links)
    codecs = assign_ids(streams, front.codecs)
    taken = counter_scopes(streams, front.scopes, front.shared_session, front.server_groups)
    index = StreamIndex(streams)
    requests = RequestIndex(
        collect_requests(exchanges, by_exchange), posts_by_session(exchanges, by_exchange)
    )
    judge = ReplayJudge(index, codecs, requests, front.foreign)

    gaps: list[GapRecord] = []
    resumes: list[tuple[StreamRecord, GapRecord | None]] = []
    for s in streams:
        codec = codecs[s.session.session_id]
        excl = taken.get(id(s.logical), NOTHING_TAKEN)
        gaps.extend(live_gaps(s, codec, excl))
    for s in streams:
        if s.kind != "resume":
            continue
        codec = codecs[s.session.session_id]
        excl = taken.get(id(s.logical), NOTHING_TAKEN)
        gap = resume_gap(s, codec, excl, index)
        if gap is not None:
            gaps.append(gap)
        resumes.append((s, gap))
    live_by_stream: dict[int, list[GapRecord]] = defaultdict(list)
    live_by_logical: dict[int, list[GapRecord]] = defaultdict(list)
    gaps_by_session: dict[str, list[GapRecord]] = defaultdict(list)
    for g in gaps:
        gaps_by_session[g.stream.session.session_id].append(g)
        if g.location == "live":
            live_by_stream[id(g.stream)].append(g)
            live_by_logical[id(g.stream.logical)].append(g)
    for g in gaps:
        g.codec = codecs[g.stream.session.session_id]
        _client_reaction(g, index, requests)
        attribute(g, live_by_stream)
    resume_rows = [
        _resume_row(
            s,
            codecs[s.session.session_id],
            taken.get(id(s.logical), NOTHING_TAKEN),
            index,
            live_by_logical[id(s.logical)],
            gap,
            judge.judge(s, gap),
        )
        for s, gap in resumes
    ]

    tables = {
        "sessions": frame(
            "sessions",
            [
                _session_row(r, index.of_session(r.session_id), gaps_by_session[r.session_id])
                for r in sessions.values()
            ],
        ),
        "streams": frame(
            "streams", [_stream_row(s) for s in streams if s.exchange.is_event_stream]
        ),
        "events": frame("events", _event_columns(streams)),
        "resumes": frame("resumes", resume_rows),
        "gaps": frame("gaps", [_gap_row(n, g) for n, g in enumerate(gaps, 1)]),
        "signals": frame("signals", [row for s in streams for row in _signal_rows(s)]),
        "requests": frame("requests", _request_rows(requests, streams)),
        "disagreements": frame(
            "disagreements", _disagreement_rows(disagreements, streams, connections)
        ),
    }
    assert set(tables) == set(TABLE_SCHEMAS)
    return Facts(tables, streams, sessions, gaps, by_exchange, all_exchanges, connections)


def _endpoints(s: StreamRecord | None) -> dict:
    """ECS-style flow columns of the connection a row is about."""
    conn = s.connection if s is not None else None
    return {
        "community_id": conn.community_id if conn else None,
        "client_ip": conn.client[0] if conn else None,
        "client_port": conn.client[1] if conn else None,
        "server_ip": conn.server[0] if conn else None,
        "server_port": conn.server[1] if conn else None,
    }


def _common(s: StreamRecord) -> dict:
    return {
        "session_id": s.session.session_id,
        "session_inferred": s.session.inferred,
        "stream": s.logical.key,
        "stream_label": s.logical.label,
        "id_scheme": s.session.id_scheme,
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


def _unsignalled_live(g: GapRecord) -> bool:
    return (
        g.location == "live"
        and g.detected_by == "id-jump"
        and not g.signalled
        and g.reissue is None
        and g.complete
    )


def _session_row(r: SessionRecord, mine: list[StreamRecord], gaps: list[GapRecord]) -> dict:
    """``mine``: the session's streams; ``gaps``: its gaps."""
    silent = [g for g in gaps if _unsignalled_live(g)]
    offering = [
        s
        for s in mine
        if s.exchange.is_event_stream
        and s.exchange.response is not None
        and s.exchange.response.head_captured
        and "no-store" not in (header(s.exchange.response_headers, "cache-control") or "").lower()
    ]
    ev = []
    if silent:
        ev = silent[0].evidence()
        for s in offering[:3]:
            ev.append(
                evidence(
                    s.response_origin, f"{s.label}: stream offered without Cache-Control: no-store"
                )
            )
    return {
        "session_id": r.session_id,
        "session_inferred": r.inferred,
        "session_source": r.how,
        "protocol_version": r.protocol_version,
        "id_scheme": r.id_scheme,
        "counter_scope": r.counter_scope,
        "streams": sum(1 for s in mine if s.exchange.is_event_stream),
        "resumes": sum(1 for s in mine if s.kind == "resume"),
        "data_events": sum(len(s.data_events()) for s in mine),
        "silent_live_gaps": len(silent),
        "resumable_streams": len(offering),
        "stream": silent[0].stream.logical.key if silent else None,
        "stream_label": silent[0].stream.logical.label if silent else None,
        "first": silent[0].first if silent else None,
        "last": silent[0].last if silent else None,
        "count": silent[0].count if silent else None,
        "ts": silent[0].before.origin.ts
        if silent and silent[0].before and silent[0].before.origin
        else None,
        "evidence": evidence_json(ev),
        **_endpoints(silent[0].stream if silent else (mine[0] if mine else None)),
    }


def _stream_row(s: StreamRecord) -> dict:
    ex = s.exchange
    ids = s.id_events()
    cache_control = (header(ex.response_headers, "cache-control") or "").lower()
    return {
        **_common(s),
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
        "events": len(s.events),
        "data_events": len(s.data_events()),
        "first_id": ids[0].sse.id_field if ids else None,
        "last_id": ids[-1].sse.id_field if ids else None,
        "complete": ex.response_complete,
        "end_reason": ex.response_end_reason,
        "missing_spans": len(ex.holes),
        "no_store": "no-store" in cache_control,
        "trailing_bytes": ex.trailing_bytes,
    }


def _id_order(s: StreamRecord) -> dict[int, tuple[str, EventRecord]]:
    """Events whose ID repeats or goes backwards within one response (WHATWG IDs are a
    cursor: a client resuming from a repeated or older ID asks for events again)."""
    out: dict[int, tuple[str, EventRecord]] = {}
    prev: EventRecord | None = None
    seen: dict[str, EventRecord] = {}
    for e in s.events:
        if not e.carries_id or e.kind == "signal":
            continue
        if prev is not None and e.key is not None and prev.key is not None:
            if e.key.prefix == prev.key.prefix and e.key.seq <= prev.key.seq:
                out[e.position] = ("repeat" if e.key.seq == prev.key.seq else "backwards", prev)
        elif e.sse.id_field in seen:
            out[e.position] = ("repeat", seen[e.sse.id_field])
        seen.setdefault(e.sse.id_field, e)
        prev = e
    return out


def _event_columns(streams: list[StreamRecord]) -> dict[str, list]:
    """The ``events`` table, built column by column (one row per SSE event: the largest
    table by far, so no dict per row)."""
    columns: dict[str, list] = {name: [] for name in TABLE_SCHEMAS["events"]}
    per_event = (
        "position",
        "id",
        "id_field",
        "event",
        "kind",
        "data_bytes",
        "rpc_method",
        "rpc_id",
        "source",
        "frame_first",
        "frame_last",
        "ts_first",
        "ts_last",
        "offset_start",
        "offset_end",
        "id_order",
        "previous_id",
        "evidence",
    )
    for s in streams:
        n = len(s.events)
        if not n:
            continue
        disorder = _id_order(s)
        constant = {
            "session_id": s.session.session_id,
            "stream": s.logical.key,
            "response_stream": s.key,
            "session_inferred": s.session.inferred,
            "stream_label": s.logical.label,
            "response_label": s.label,
            "id_scheme": s.session.id_scheme,
            "counter_scope": s.session.counter_scope,
            **_endpoints(s),
        }
        for name, value in constant.items():
            columns[name].extend([value] * n)
        c = {name: columns[name] for name in per_event}
        for e in s.events:
            sse = e.sse
            origins = sse.origins
            first = origins[0] if origins else None
            last = origins[-1] if origins else None
            rpc = e.rpc[0] if e.rpc else None
            order, prev = disorder.get(e.position, ("ok", None))
            c["position"].append(e.position)
            c["id"].append(sse.id)
            c["id_field"].append(sse.id_field)
            c["event"].append(sse.event)
            c["kind"].append(e.kind)
            c["data_bytes"].append(len(sse.data))
            c["rpc_method"].append(rpc.method if rpc else None)
            c["rpc_id"].append(rpc.rpc_id if rpc else None)
            c["source"].append(first.source if first else None)
            c["frame_first"].append(first.number if first else None)
            c["frame_last"].append(last.number if last else None)
            c["ts_first"].append(first.ts if first else None)
            c["ts_last"].append(last.ts if last else None)
            c["offset_start"].append(sse.start)
            c["offset_end"].append(sse.end)
            c["id_order"].append(order)
            c["previous_id"].append(prev.sse.id_field if prev else None)
            c["evidence"].append(
                evidence_json(
                    [
                        prev.cite(f"earlier event id {prev.sse.id_field}"),
                        e.cite(f"then id {sse.id_field} ({order})"),
                    ]
                )
                if prev is not None
                else "[]"
            )
    return columns


def _signal_rows(s: StreamRecord) -> list[dict]:
    rows = []
    base = {"session_id": s.session.session_id, "stream": s.logical.key, "response_stream": s.key}
    for e in s.events:
        if e.kind == "signal" and e.signal is not None:
            o = e.origin
            rows.append(
                {
                    **base,
                    "kind": e.sse.event,
                    "first": e.signal.first,
                    "last": e.signal.last,
                    "valid": e.signal.valid,
                    "position": e.position,
                    "source": o.source if o else None,
                    "frame": o.number if o else None,
                    "ts": o.ts if o else None,
                }
            )
    resp = s.response_origin
    where = {
        "source": resp.source if resp else None,
        "frame": resp.number if resp else None,
        "ts": resp.ts if resp else None,
    }
    if s.kind == "resume" and s.status == 410:
        rows.append(
            {
                **base,
                "kind": "410",
                "first": s.last_event_id,
                "last": None,
                "valid": True,
                "position": None,
                **where,
            }
        )
    cache_control = (header(s.exchange.response_headers, "cache-control") or "").lower()
    if s.exchange.is_event_stream and "no-store" in cache_control:
        rows.append(
            {
                **base,
                "kind": "no-store",
                "first": None,
                "last": None,
                "valid": True,
                "position": None,
                **where,
            }
        )
    return rows


def _resume_row(
    s: StreamRecord,
    codec: IdCodec,
    taken: TakenKeys,
    index: StreamIndex,
    live: list[GapRecord],
    gap: GapRecord | None,
    replay: ReplayFacts,
) -> dict:
    """A resume, whether the ID it must continue at lies in a known dropped range, and what
    its answer and the client did (:mod:`.replays`). ``live``: the live gaps of its logical
    stream."""
    succ = successor(s, codec, index, taken) if s.last_event_id else None
    dropped_by = None
    if succ is not None:
        earlier = [g for g in live if g is not gap and g.stream.first_ts <= s.first_ts]
        for g in earlier:
            if g.covers(succ, codec):
                dropped_by = STREAM_GAP if g.signal == STREAM_GAP else "live-jump"
                break
        if dropped_by is None and gap is not None and gap.first == succ:
            dropped_by = "replay-jump"
    data = s.data_events()
    gap_signal = gap.signal if gap is not None and gap.signal != "410" else None
    if gap_signal is None and any(e.sse.event == RESUME_GAP for e in s.events):
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
    data_events = s.data_events()
    if data_events and not gap:
        ev.append(
            data_events[0].cite(f"first replayed data event: id {data_events[0].sse.id_field}")
        )
    return {
        **_common(s),
        "response_stream": s.key,
        "response_label": s.label,
        "last_event_id": s.last_event_id,
        "successor": succ,
        "resumes_stream": s.resumed_from.key if s.resumed_from else None,
        "status": s.status,
        "is_event_stream": s.exchange.is_event_stream,
        "data_events": len(data),
        "first_event_id": data[0].sse.id_field if data else None,
        "successor_dropped": dropped_by is not None,
        "dropped_by": dropped_by,
        "gap_signal": gap_signal,
        "first": gap.first if gap is not None else succ,
        "last": gap.last if gap is not None else None,
        "count": gap.count if gap is not None else None,
        "evidence_complete": complete,
        # What a finding about this resume is classified as: never a verdict on its own.
        "verdict_if_faulty": "silent_corruption" if complete else "indeterminate",
        "protocol_version": s.session.protocol_version,
        "replay_start": replay.replay_start,
        "replayed_duplicates": replay.duplicates,
        "later_events_known": replay.later_events_known,
        "empty_replay": replay.empty_replay,
        "empty_how": replay.empty_how,
        "crossed_streams": replay.crossed_streams,
        "crossed_sessions": replay.crossed_sessions,
        "crossed_first": replay.crossed_first,
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
        "evidence": evidence_json(ev),
    }


def _gap_row(n: int, g: GapRecord) -> dict:
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
        "cause": g.cause,
        "client_reissued": g.reissue is not None,
        "client_continued": g.client_continued,
        "verdict": g.verdict,
        "ts": before_ts or sig_ts or s.first_ts,
        "ts_after": after_ts,
        "evidence": evidence_json(g.evidence()),
    }


def _request_rows(requests: RequestIndex, streams: list[StreamRecord]) -> list[dict]:
    """JSON-RPC requests and whether a response to them arrived anywhere on the logical
    stream they opened (the stream itself or a resume of it) or in a JSON body."""
    answered_by_stream: dict[int, set] = {}
    for s in streams:
        ids = answered_by_stream.setdefault(id(s.logical.exchange), set())
        for e in s.events:
            for m in e.rpc or []:
                if m.kind in ("response", "error"):
                    ids.add(m.rpc_id)
    rows = []
    for r in requests.requests:
        ex = r.exchange
        answered = answered_by_stream.get(id(ex), set()) | set(ex.json_answers)
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
    disagreements: list[Disagreement], streams: list[StreamRecord], connections: dict
) -> list[dict]:
    """Where the event log and the capture of the same stream tell different stories."""
    by_exchange = {id(s.exchange): s for s in streams}
    rows = []
    for d in disagreements:
        s = by_exchange.get(id(d.capture))
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
                "evidence": evidence_json(ev),
            }
        )
    return rows
