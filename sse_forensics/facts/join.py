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
    exchanges: list[ExchangeRecord],
    sessions: dict[ExchangeKey, SessionRecord],
    folds: dict[ExchangeKey, ExchangeKey],
    dropped: set[ExchangeKey],
) -> tuple[list[ExchangeRecord], list[Disagreement]]:
    """The exchanges with log duplicates of captured ones folded in, and the disagreements.
    Which log exchange folds into which captured one is decided over the whole scan
    (:mod:`.front`): ``folds`` (event-log stream → captured stream), ``dropped`` (those and
    the access lines a captured exchange also shows)."""
    if not dropped:
        return exchanges, []
    by_key = {(ex.connection_id, ex.index): ex for ex in exchanges}
    disagreements: list[Disagreement] = []
    for log_key, capture_key in folds.items():
        log_ex, capture = by_key.get(log_key), by_key.get(capture_key)
        if log_ex is None or capture is None:
            continue
        disagreements.extend(_fold_event_log(log_ex, capture, sessions.get(log_key)))
    return [ex for ex in exchanges if (ex.connection_id, ex.index) not in dropped], disagreements


def _fold_event_log(
    log_ex: ExchangeRecord, capture: ExchangeRecord, session: SessionRecord | None
) -> list[Disagreement]:
    info = log_ex.log
    # Folds pair only event-log streams that carry log info (front._folds: ``log_stream``).
    assert info is not None, "an event-log stream folded without its log info"
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
