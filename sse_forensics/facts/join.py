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
from typing import Any

import polars as pl

from sse_forensics.facts.load import CARRIES_ID
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


_ORIGIN = ("first_src", "first_num", "first_ts", "first_kind")
_ID_ROWS = {
    "id_field": pl.String,
    "first_src": pl.String,
    "first_num": pl.Int64,
    "first_ts": pl.Float64,
    "first_kind": pl.String,
}


def _id_rows(ex: ExchangeRecord) -> pl.DataFrame:
    """``id_field`` and the first origin (``first_src, first_num, first_ts, first_kind``)
    of each event of ``ex`` that carries an ID, in position order: read from its columns
    when its events are not objects yet (issue 16: a stream both a capture and an event
    log hold was read as an object per event on each side)."""
    source = ex.source
    if ex._events is not None or source is None:
        rows: list[tuple[str, str | None, int | None, float | None, str | None]] = []
        for e in ex.events:
            if e.id_field:
                o = e.origins[0] if e.origins else None
                if o is None:
                    rows.append((e.id_field, None, None, None, None))
                else:
                    rows.append((e.id_field, o.source, o.number, o.ts, o.kind))
        return pl.DataFrame(rows, schema=_ID_ROWS, orient="row")
    parts = [
        hits.select(*_ID_ROWS)
        for hits in source.rows_where(
            (ex.connection_id, ex.index), CARRIES_ID, ("id_field", *_ORIGIN)
        )
    ]
    return pl.concat(parts) if parts else pl.DataFrame(schema=_ID_ROWS)


def _origin(row: tuple[Any, ...]) -> Origin | None:
    """The origin of an ``_id_rows`` row (``None`` without one)."""
    _id, src, num, ts, kind = row
    return None if src is None else Origin(src, num, ts, kind)


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
    out: list[Disagreement] = []
    if session is None:
        return out
    on_wire = _id_rows(capture)
    # Each ID the log wrote, in the order first written, with its last record's origin.
    written = (
        _id_rows(log_ex)
        .group_by("id_field", maintain_order=True)
        .agg(pl.col(c).last() for c in _ORIGIN)
    )
    holes = " (the capture lacks bytes of this response)" if capture.holes else ""
    for row in written.join(
        on_wire.select("id_field").unique(), on="id_field", how="anti", maintain_order="left"
    ).iter_rows():
        event_id = row[0]
        out.append(
            Disagreement(
                session,
                capture,
                event_id,
                "log-only",
                _origin(row),
                f"event log: {event_id} written, never seen in the capture{holes}",
            )
        )
    unwritten = on_wire.join(
        written.select("id_field"), on="id_field", how="anti", maintain_order="left"
    )
    asked = set(unwritten.get_column("id_field").to_list())
    emitted = {i for i in info.emitted if i in asked}  # not a set of every emitted ID
    for row in unwritten.iter_rows():
        event_id = row[0]
        if event_id in info.evicted:
            what = f"capture: {event_id} on the wire, the event log says evicted"
        elif event_id in emitted:
            what = f"capture: {event_id} on the wire, the event log never records writing it"
        else:
            continue  # not an event this log knows (another producer, a priming event)
        out.append(Disagreement(session, capture, event_id, "capture-only", _origin(row), what))
    return out
