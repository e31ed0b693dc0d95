"""Build the fact tables from a reassembled capture. Schemas: ``docs/facts.md``."""

from __future__ import annotations

from dataclasses import dataclass, field

import polars as pl

from sse_forensics.errors import ReadError
from sse_forensics.facts.config import AnalysisConfig
from sse_forensics.facts.gaps import GapRecord, live_gaps, resume_gap, successor
from sse_forensics.facts.ids import IdCodec
from sse_forensics.facts.jsonrpc import parse_messages
from sse_forensics.facts.model import SessionRecord, StreamRecord, evidence
from sse_forensics.facts.sessions import attribute_sessions
from sse_forensics.facts.signals import RESUME_GAP, STREAM_GAP
from sse_forensics.facts.streams import (
    assign_ids,
    build_streams,
    counter_scopes,
    link_resumes,
)
from sse_forensics.facts.tables import TABLE_SCHEMAS, frame
from sse_forensics.reassembly.capture import Reassembly
from sse_forensics.reassembly.http_events import header


@dataclass(slots=True)
class Facts:
    """The fact tables plus the records behind them (for the timeline view)."""

    tables: dict[str, pl.DataFrame]
    streams: list[StreamRecord] = field(default_factory=list)
    sessions: dict[str, SessionRecord] = field(default_factory=dict)
    gaps: list[GapRecord] = field(default_factory=list)
    errors: list[ReadError] = field(default_factory=list)
    exchange_sessions: dict[tuple[int, int], SessionRecord] = field(default_factory=dict)


def build_facts(reassembly: Reassembly, config: AnalysisConfig | None = None) -> Facts:
    config = config or AnalysisConfig()
    connections = {c.id: c for c in reassembly.connections}
    by_exchange, sessions = attribute_sessions(reassembly.exchanges, connections, config)
    streams = build_streams(reassembly.exchanges, connections, by_exchange)
    link_resumes(streams)
    codecs = assign_ids(streams, config)
    taken = counter_scopes(streams)

    gaps: list[GapRecord] = []
    resume_rows: list[dict] = []
    for s in streams:
        codec = codecs[s.session.session_id]
        excl = taken.get(id(s.logical), frozenset())
        gaps.extend(live_gaps(s, codec, excl))
    for s in streams:
        if s.kind != "resume":
            continue
        codec = codecs[s.session.session_id]
        excl = taken.get(id(s.logical), frozenset())
        gap = resume_gap(s, codec, excl, streams)
        if gap is not None:
            gaps.append(gap)
        resume_rows.append(_resume_row(s, codec, excl, streams, gaps, gap))

    tables = {
        "sessions": frame("sessions", [_session_row(r, streams) for r in sessions.values()]),
        "streams": frame(
            "streams", [_stream_row(s) for s in streams if s.exchange.is_event_stream]
        ),
        "events": frame("events", [row for s in streams for row in _event_rows(s)]),
        "resumes": frame("resumes", resume_rows),
        "gaps": frame("gaps", [_gap_row(n, g) for n, g in enumerate(gaps, 1)]),
        "signals": frame("signals", [row for s in streams for row in _signal_rows(s)]),
        "requests": frame("requests", _request_rows(reassembly, by_exchange)),
    }
    assert set(tables) == set(TABLE_SCHEMAS)
    return Facts(tables, streams, sessions, gaps, list(reassembly.errors), by_exchange)


def _common(s: StreamRecord) -> dict:
    return {
        "session_id": s.session.session_id,
        "session_inferred": s.session.inferred,
        "stream": s.logical.key,
        "stream_label": s.logical.label,
        "id_scheme": s.session.id_scheme,
        "counter_scope": s.session.counter_scope,
    }


def _session_row(r: SessionRecord, streams: list[StreamRecord]) -> dict:
    mine = [s for s in streams if s.session is r]
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
        "trailing_bytes": len(ex.trailing),
    }


def _event_rows(s: StreamRecord) -> list[dict]:
    rows = []
    for e in s.events:
        first, last = e.origin, e.last_origin
        rpc = e.rpc[0] if e.rpc else None
        rows.append(
            {
                "session_id": s.session.session_id,
                "stream": s.logical.key,
                "response_stream": s.key,
                "position": e.position,
                "id": e.sse.id,
                "id_field": e.sse.id_field,
                "event": e.sse.event,
                "kind": e.kind,
                "data_bytes": len(e.sse.data),
                "rpc_method": rpc.method if rpc else None,
                "rpc_id": rpc.rpc_id if rpc else None,
                "source": first.source if first else None,
                "frame_first": first.number if first else None,
                "frame_last": last.number if last else None,
                "ts_first": first.ts if first else None,
                "ts_last": last.ts if last else None,
                "offset_start": e.sse.start,
                "offset_end": e.sse.end,
            }
        )
    return rows


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
    taken: frozenset,
    streams: list[StreamRecord],
    gaps: list[GapRecord],
    gap: GapRecord | None,
) -> dict:
    """A resume and whether the ID it must continue at lies in a known dropped range."""
    succ = successor(s, codec, streams, taken) if s.last_event_id else None
    dropped_by = None
    if succ is not None:
        earlier = [
            g
            for g in gaps
            if g.stream.logical is s.logical
            and g is not gap
            and g.location == "live"
            and g.stream.first_ts <= s.first_ts
        ]
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
    ev = [evidence(s.request_origin, f"resume request Last-Event-ID {s.last_event_id!r}")]
    if s.response_origin is not None:
        ev.append(evidence(s.response_origin, f"response status {s.status}"))
    if s.resumed_event is not None:
        ev.append(s.resumed_event.cite(f"Last-Event-ID {s.last_event_id!r} first seen here"))
    if gap is not None:
        ev.extend(e for e in gap.evidence() if e not in ev)
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
        "verdict": "silent_corruption" if complete else "indeterminate",
        "request_frame": s.request_origin.number if s.request_origin else None,
        "ts": s.first_ts,
        "evidence": ev,
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
        "verdict": g.verdict,
        "ts": before_ts or sig_ts or s.first_ts,
        "ts_after": after_ts,
        "evidence": g.evidence(),
    }


def _request_rows(reassembly: Reassembly, by_exchange: dict) -> list[dict]:
    rows = []
    for ex in reassembly.exchanges:
        if ex.request is None or not ex.request_body:
            continue
        messages = parse_messages(bytes(ex.request_body))
        if not messages:
            continue
        answered = _answered_ids(ex)
        session = by_exchange.get((ex.connection_id, ex.index))
        for msg in messages:
            if msg.kind != "request":
                continue
            rows.append(
                {
                    "session_id": session.session_id if session else None,
                    "connection": ex.connection_id,
                    "exchange": ex.index,
                    "rpc_method": msg.method,
                    "rpc_id": msg.rpc_id,
                    "source": ex.request.origin.source,
                    "frame": ex.request.origin.number,
                    "ts": ex.request.origin.ts,
                    "status": ex.response.status if ex.response else None,
                    "response_complete": msg.rpc_id in answered,
                }
            )
    return rows


def _answered_ids(ex) -> set[str | None]:
    """JSON-RPC ids answered on the exchange itself (JSON body or its event stream)."""
    answered: set[str | None] = set()
    bodies = [sse.data for sse in ex.events] if ex.is_event_stream else [bytes(ex.response_body)]
    for body in bodies:
        for msg in parse_messages(body) or []:
            if msg.kind in ("response", "error"):
                answered.add(msg.rpc_id)
    return answered
