"""Why a gap happened, from what the capture shows around it (issue: "was this gap
replay-safe resumption or backpressure-induced truncation?").

Causes, each only when the evidence supports it (otherwise ``unknown``):

- ``capture-loss``: the capture lacks bytes inside the gap's stretch.
- ``inconsistent-retransmission``: the capture holds bytes of the stretch twice with
  different contents (the receiver may have read the copy that carried the events).
- ``capped``: a cap (docs/limits.md) stopped the reading of the body before or inside
  the stretch (a decompression bomb, an event over ``event_bytes``).
- ``backpressure-eviction``: the dropped IDs were due while the client's receive window on
  that stream's connection was closed or full (a zero-window or window-full period, or a
  server send stall for that reason, overlaps the stretch between the two events).
- ``discard-on-close``: at a resume, the live stream was contiguous up to a close the
  *server* made (``backpressure-disconnect``, or the server's FIN/RST first): events due
  before that close never reached the socket and the replay skips them.
- ``replay-buffer-truncation``: at a resume (or a ``410``), the live stream was contiguous
  up to a disconnect the server did not make, and the gap appears only in the replay.
- ``replay-handoff``: a live gap on a resume's response, the first break on it, after a
  replay that began at the successor of ``Last-Event-ID`` (the server still held every
  event it was asked for), with no eviction on record (no window or stall evidence, no
  event-log eviction): events produced while the stream passed from the replay to the live
  feed were skipped, a race in a server that evicted nothing.

A cause is only named on its evidence: a live gap with none of the above is ``unknown``,
never eviction.
"""

from __future__ import annotations

import polars as pl

from sse_forensics.facts.earlier import events_where
from sse_forensics.facts.gaps import GapRecord
from sse_forensics.facts.model import Evidence, StreamRecord, evidence
from sse_forensics.facts.signals import BACKPRESSURE_DISCONNECT
from sse_forensics.provenance import Origin

CAPTURE_LOSS = "capture-loss"
INCONSISTENT_RETRANSMISSION = "inconsistent-retransmission"
CAPPED = "capped"
BACKPRESSURE_EVICTION = "backpressure-eviction"
DISCARD_ON_CLOSE = "discard-on-close"
REPLAY_BUFFER_TRUNCATION = "replay-buffer-truncation"
REPLAY_HANDOFF = "replay-handoff"
UNKNOWN = "unknown"


def _overlaps(start: Origin, end: Origin | None, lo: float, hi: float) -> bool:
    return start.ts <= hi and (end is None or end.ts >= lo)


def _stretch(gap: GapRecord) -> tuple[float, float] | None:
    before = gap.before.origin if gap.before else None
    after = gap.after.origin if gap.after else None
    if before is not None:
        lo = before.ts
    elif after is not None:
        lo = after.ts
    else:
        return None
    hi = after.ts if after else lo
    return lo, hi


def _backpressure(gap: GapRecord) -> list[Evidence]:
    """Window periods of the client (receiver of server data) or server stalls for lack of
    window that overlap the stretch of a live gap."""
    stretch = _stretch(gap)
    if stretch is None:
        return []
    lo, hi = stretch
    conn = gap.stream.connection
    out: list[Evidence] = []
    for period in getattr(conn, "windows", []):
        if period.receiver == "client" and _overlaps(period.start, period.end, lo, hi):
            out.append(evidence(period.start, f"client {period.kind} from here"))
            if period.end is not None:
                out.append(evidence(period.end, f"client {period.kind} ends"))
    for stall in getattr(conn, "stalls", []):
        if (
            stall.sender == "server"
            and stall.reason in ("zero-window", "window-full")
            and _overlaps(stall.start, stall.end, lo, hi)
        ):
            out.append(evidence(stall.start, f"server send stall ({stall.reason})"))
    return out


def _replay_handoff(
    gap: GapRecord, live_by_stream: dict[StreamRecord, list[GapRecord]]
) -> list[Evidence]:
    """Evidence that a live gap on a resume's response came right after a whole replay:
    the replay's first data event is the successor of ``Last-Event-ID`` and no break comes
    before this one (see the module docstring)."""
    s = gap.stream
    codec = gap.codec
    if s.kind != "resume" or gap.detected_by != "id-jump" or gap.before is None or not codec:
        return []
    before = gap.before.position
    if any(
        g.before is not None and g.before.position < before
        for g in live_by_stream.get(s, [])
        if g is not gap
    ):
        return []
    asked = codec.key(s.last_event_id) if s.last_event_id else None
    first = next((e for e in s.events if e.kind == "data" and e.key is not None), None)
    if asked is None or first is None or first.position > before or first.key is None:
        return []
    if (first.key.prefix, first.key.seq) != (asked.prefix, asked.seq + 1):
        return []
    return [
        first.cite(
            f"replay began at {first.sse.id_field}, the successor of Last-Event-ID "
            f"{s.last_event_id!r}: the server still held every event asked for"
        )
    ]


def _live_contiguous_until_close(
    gap: GapRecord, live_by_stream: dict[StreamRecord, list[GapRecord]]
) -> StreamRecord | None:
    """The stream the resume continues, if it showed no live gap of its own."""
    origin = gap.stream.resumed_from
    if origin is None:
        return None
    if any(g.keys is not None for g in live_by_stream.get(origin, [])):
        return None
    return origin


def _server_closed(origin: StreamRecord) -> list[Evidence]:
    """Evidence that the server ended the stream the resume continues."""
    bd = pl.col("event") == BACKPRESSURE_DISCONNECT
    for e in events_where(origin, bd, lambda e: e.sse.event == BACKPRESSURE_DISCONNECT):
        return [e.cite("server closed the stream: backpressure-disconnect")]
    conn = origin.connection
    server_fin, client_fin = conn.fin.get("server"), conn.fin.get("client")
    if conn.rst is not None and conn.rst_by == "server":
        return [evidence(conn.rst, "server reset the connection")]
    server_first = server_fin is not None and (client_fin is None or server_fin.ts <= client_fin.ts)
    if server_first and origin.exchange.response_end_reason in ("fin", "rst"):
        return [evidence(server_fin, "server closed the connection first (FIN)")]
    return []


# Words in an event log's eviction ``reason``/``where`` that name the cause.
_LOG_CAUSES = (
    (("replay", "store", "history", "retention"), REPLAY_BUFFER_TRUNCATION),
    (("backpressure", "slow", "queue", "buffer", "full", "lag", "send"), BACKPRESSURE_EVICTION),
    (("close", "disconnect", "shutdown"), DISCARD_ON_CLOSE),
)


def _from_event_log(gap: GapRecord) -> str | None:
    """The server's own account: what its event log says about the evicted IDs."""
    log = gap.stream.exchange.log
    if log is None or not log.evicted_why:
        return None
    for event_id, why in log.evicted_why.items():
        in_gap = gap.covers(event_id, gap.codec) if gap.codec else event_id in gap.missing_ids
        if not in_gap:
            continue
        text = why.lower()
        for words, cause in _LOG_CAUSES:
            if any(w in text for w in words):
                return cause
    return None


def attribute(
    gap: GapRecord,
    live_by_stream: dict[StreamRecord, list[GapRecord]],
    resume_gaps: dict[StreamRecord, GapRecord] | None = None,
) -> None:
    """Set ``gap.cause`` and ``gap.cause_evidence``. ``live_by_stream``: the live gaps of
    each stream; ``resume_gaps``: each resume's own gap."""
    if gap.holes:
        reasons = {h.span.reason for h in gap.holes}
        if reasons == {"inconsistent"}:
            gap.cause = INCONSISTENT_RETRANSMISSION
        elif reasons == {"cap"}:
            gap.cause = CAPPED
        else:
            gap.cause = CAPTURE_LOSS
        gap.cause_evidence = []
        return
    logged = _from_event_log(gap)
    if logged is not None:
        gap.cause, gap.cause_evidence = logged, []  # the eviction records are cited already
        return
    if gap.location == "live":
        found = _backpressure(gap)
        if found:
            gap.cause, gap.cause_evidence = BACKPRESSURE_EVICTION, found
            return
        whole_replay = gap.stream not in (resume_gaps or {})
        handoff = _replay_handoff(gap, live_by_stream) if whole_replay else []
        gap.cause, gap.cause_evidence = (REPLAY_HANDOFF, handoff) if handoff else (UNKNOWN, [])
        return
    origin = _live_contiguous_until_close(gap, live_by_stream)
    if origin is None:
        gap.cause, gap.cause_evidence = UNKNOWN, []
        return
    closed = _server_closed(origin)
    if closed:
        gap.cause, gap.cause_evidence = DISCARD_ON_CLOSE, closed
    else:
        gap.cause, gap.cause_evidence = REPLAY_BUFFER_TRUNCATION, []
