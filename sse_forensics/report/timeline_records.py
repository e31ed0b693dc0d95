"""``timeline --format jsonl``: every request, response, SSE event, missing-bytes span and
response end with its session, stream, ID, frame and timestamp, in time order (a stable
record format, docs/report.md). Takes a :class:`~sse_forensics.report.selection.Selection`
(``--session``, ``--since``, ``--until``, ``--host``, ``--port``)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

import orjson

from sse_forensics.report.ladder import field_value, selected_connections
from sse_forensics.report.selection import Selection

if TYPE_CHECKING:
    from sse_forensics.facts.build import Facts
    from sse_forensics.provenance import Origin


def _where(origin: Origin | None) -> dict[str, Any]:
    if origin is None:
        return {"source": None, "frame": None, "ts": None}
    return {"source": origin.source, origin.kind: origin.number, "ts": origin.ts}


def timeline_records(
    facts: Facts, session: str | None = None, selection: Selection | None = None
) -> Iterator[dict[str, Any]]:
    """Records sorted by timestamp: ``request``, ``response``, ``event``, ``missing-bytes``,
    ``response-end``; only those ``selection`` selects."""
    selection = selection or Selection(session)
    session = selection.session or session
    wanted_conns = selected_connections(facts, selection)
    streams = {(s.exchange.connection_id, s.exchange.index): s for s in facts.streams}
    records: list[dict[str, Any]] = []
    for ex in facts.exchanges:
        rec = facts.exchange_sessions.get((ex.connection_id, ex.index))
        session_id = rec.session_id if rec else None
        if session is not None and session_id != session:
            continue
        if wanted_conns is not None and ex.connection_id not in wanted_conns:
            continue
        stream = streams.get((ex.connection_id, ex.index))
        base = {
            "session_id": session_id,
            "connection": ex.connection_id,
            "exchange": ex.index,
            "stream": stream.logical.key if stream else None,
        }
        if ex.request is not None:
            records.append(
                {
                    "type": "request",
                    **base,
                    **_where(ex.request.origin),
                    "method": ex.request.method,
                    "target": ex.request.target,
                    "last_event_id": field_value(ex.request.headers, "Last-Event-ID"),
                    "rpc_methods": [c.method for c in ex.calls] or None,
                }
            )
        if ex.response is not None:
            records.append(
                {
                    "type": "response",
                    **base,
                    **_where(ex.response.origin),
                    "status": ex.response.status,
                    "content_type": field_value(ex.response.headers, "Content-Type"),
                }
            )
        events = stream.events if stream else []
        for e in events:
            records.append(
                {
                    "type": "event",
                    **base,
                    **_where(e.origin),
                    "id": e.sse.id,
                    "id_field": e.sse.id_field,
                    "event": e.sse.event,
                    "kind": e.kind,
                    "data_bytes": len(e.sse.data),
                }
            )
        for hole in ex.holes:
            records.append(
                {
                    "type": "missing-bytes",
                    **base,
                    **_where(hole.span.after),
                    "length": hole.span.length,
                    "reason": hole.span.reason,
                }
            )
        if ex.response is not None and ex.response_end_reason is not None:
            records.append(
                {
                    "type": "response-end",
                    **base,
                    **_where(ex.response_end or ex.last_body_origin),
                    "complete": ex.response_complete,
                    "reason": ex.response_end_reason,
                }
            )
    records = [r for r in records if selection.in_time(r["ts"])]
    records.sort(key=lambda r: (r["ts"] is None, r["ts"] or 0.0, r["connection"], r["exchange"]))
    yield from records


def timeline_jsonl(records: Iterable[dict[str, Any]]) -> bytes:
    """One JSON object per line."""
    return b"".join(orjson.dumps(r) + b"\n" for r in records)
