"""Join log evidence with the capture of the same incident (issue: "records join on session
ID and time, a finding cites every source that supports it, and where the sources disagree
that disagreement is itself reported").

- An event-log stream that a captured response also carries (same session, shared event
  IDs) is not counted twice: the capture's exchange keeps its wire events and gains the
  log's producer order and eviction records; every ID one source has and the other lacks
  becomes a ``disagreements`` row.
- An access-log line that a captured exchange also shows (same session, method and
  ``Last-Event-ID``, status, and the capture's request inside the line's time span) is
  dropped: the capture already holds that exchange, with more detail.
"""

from __future__ import annotations

from dataclasses import dataclass

from sse_forensics.facts.model import ExchangeRecord, LogStreamInfo, SessionRecord
from sse_forensics.provenance import Origin
from sse_forensics.reassembly.http_events import header

# A log line's clock and the capture's may differ a little even on one host.
CLOCK_TOLERANCE = 2.0

ExchangeKey = tuple[int, int]


@dataclass(slots=True)
class Disagreement:
    """One event ID that one source says was written and the other never shows."""

    session: SessionRecord
    capture: ExchangeRecord
    event_id: str
    kind: str  # "log-only" (written per the event log, not in the capture) | "capture-only"
    origin: Origin | None
    what: str


def _ids(ex: ExchangeRecord) -> list[str]:
    return [e.id_field for e in ex.events if e.id_field]


def join_logs(
    exchanges: list[ExchangeRecord], sessions: dict[ExchangeKey, SessionRecord]
) -> tuple[list[ExchangeRecord], list[Disagreement]]:
    """The exchanges with log duplicates of captured ones folded in, and the disagreements."""
    captured = [ex for ex in exchanges if not ex.from_log]
    logged = [ex for ex in exchanges if ex.from_log]
    if not logged or not captured:
        return exchanges, []
    session_of = {id(ex): sessions.get((ex.connection_id, ex.index)) for ex in exchanges}
    streams = [ex for ex in captured if ex.is_event_stream]
    dropped: set[int] = set()
    disagreements: list[Disagreement] = []
    for log_ex in logged:
        session = session_of[id(log_ex)]
        if log_ex.log is not None:
            match = _matching_stream(log_ex, streams, session, session_of)
            if match is not None:
                disagreements.extend(_fold_event_log(log_ex, match, session))
                dropped.add(id(log_ex))
        elif _captured_request(log_ex, captured, session, session_of):
            dropped.add(id(log_ex))
    return [ex for ex in exchanges if id(ex) not in dropped], disagreements


def _matching_stream(
    log_ex: ExchangeRecord,
    streams: list[ExchangeRecord],
    session: SessionRecord | None,
    session_of: dict,
) -> ExchangeRecord | None:
    wanted = set(_ids(log_ex))
    best, best_overlap = None, 0
    for ex in streams:
        if session_of[id(ex)] is not session:
            continue
        overlap = len(wanted & set(_ids(ex)))
        if overlap > best_overlap:
            best, best_overlap = ex, overlap
    return best


def _fold_event_log(
    log_ex: ExchangeRecord, capture: ExchangeRecord, session: SessionRecord | None
) -> list[Disagreement]:
    info: LogStreamInfo = log_ex.log  # type: ignore[assignment]
    capture.log = LogStreamInfo(
        emitted=info.emitted,
        evicted=info.evicted,
        evicted_why=info.evicted_why,
        stream=info.stream,
    )
    on_wire = set(_ids(capture))
    written = {e.id_field: e for e in log_ex.events if e.id_field}
    out: list[Disagreement] = []
    if session is None:
        return out
    holes = " (the capture lacks bytes of this response)" if capture.holes else ""
    for event_id, ev in written.items():
        if event_id not in on_wire:
            origin = ev.origins[0] if ev.origins else None
            out.append(
                Disagreement(
                    session,
                    capture,
                    event_id,
                    "log-only",
                    origin,
                    f"event log: {event_id} written, never seen in the capture{holes}",
                )
            )
    emitted = set(info.emitted)
    for ev in capture.events:
        if not ev.id_field or ev.id_field in written:
            continue
        if ev.id_field in info.evicted:
            what = f"capture: {ev.id_field} on the wire, the event log says evicted"
        elif ev.id_field in emitted:
            what = f"capture: {ev.id_field} on the wire, the event log never records writing it"
        else:
            continue  # not an event this log knows (another producer, a priming event)
        origin = ev.origins[0] if ev.origins else None
        out.append(Disagreement(session, capture, ev.id_field, "capture-only", origin, what))
    return out


def _captured_request(
    log_ex: ExchangeRecord,
    captured: list[ExchangeRecord],
    session: SessionRecord | None,
    session_of: dict,
) -> bool:
    req, resp = log_ex.request, log_ex.response
    if req is None or resp is None:
        return False
    leid = header(req.headers, "Last-Event-ID")
    end = req.origin.ts
    for ex in captured:
        if ex.request is None or session_of[id(ex)] is not session:
            continue
        if ex.request.method.upper() != req.method.upper():
            continue
        if header(ex.request.headers, "Last-Event-ID") != leid:
            continue
        if ex.response is not None and ex.response.status != resp.status:
            continue
        if abs(ex.request.origin.ts - end) <= CLOCK_TOLERANCE or (
            ex.last_body_origin is not None and abs(ex.last_body_origin.ts - end) <= CLOCK_TOLERANCE
        ):
            return True
    return False
