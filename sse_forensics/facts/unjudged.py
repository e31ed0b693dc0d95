"""Why a stream could not be judged (docs/profile.md, "What counts as what": the evidence
itself is incomplete): bytes the capture lacks around its readable IDs, or a resume whose
``Last-Event-ID`` names nothing the inputs show. The ``streams`` table's ``not_judged`` and
the ``sessions`` table's ``unjudged`` read these."""

from __future__ import annotations

from typing import Any

from sse_forensics.facts.gaps import distinct_spans, missing_bytes
from sse_forensics.facts.model import StreamRecord
from sse_forensics.facts.windows import id_ends
from sse_forensics.provenance import Origin
from sse_forensics.reassembly.exchange import BodyHole

# How much of a Last-Event-ID a reason quotes.
QUOTED_ID = 40


def lost_holes(s: StreamRecord) -> list[BodyHole]:
    """The body's missing spans that are capture loss: a capture that starts mid-stream
    lacks nothing it could have held (``mid-stream`` pickups are not loss)."""
    return [h for h in s.exchange.holes if h.span.reason != "mid-stream"]


def _bytes_text(n: int | None) -> str:
    return "an unknown number of bytes" if n is None else f"{n} bytes"


def not_judged(s: StreamRecord) -> str | None:
    """Why the capture cannot say whether this event stream lost events, or ``None`` when it
    can: continuity is judged between two readable IDs, so missing bytes with fewer than
    two readable IDs, or before the first or after the last of them, hide what was sent."""
    if not s.exchange.holes:
        return None
    holes = lost_holes(s)
    if not holes:
        return None
    reasons = ", ".join(sorted({span.reason for span in distinct_spans(holes)}))
    lacks = f"the capture lacks {_bytes_text(missing_bytes(holes))} of this response ({reasons})"
    if not s.exchange.n_events and not s.events:
        return f"no SSE event could be read: {lacks}"
    first, last = id_ends(s)
    if first is None or last is None or first is last:
        read = "only 1 event ID could" if first is not None else "no event ID could"
        return f"{read} be read, too few to judge continuity: {lacks}"
    parts = []
    before = [h for h in holes if h.body_offset <= first.sse.start]
    after = [h for h in holes if h.body_offset >= last.sse.end]
    if before:
        parts.append(
            f"the capture lacks {_bytes_text(missing_bytes(before))} before event "
            f"{first.sse.id_field}: what was sent before it could not be seen"
        )
    if after:
        parts.append(
            f"the capture lacks {_bytes_text(missing_bytes(after))} after event "
            f"{last.sse.id_field}: what was sent after it could not be seen"
        )
    return "; ".join(parts) or None


def unlinked_resume(s: StreamRecord) -> str | None:
    """Why a resume answered with a 2xx event stream cannot be judged, or ``None``: its
    ``Last-Event-ID`` is no event ID the inputs show (so no stream to continue) and no
    counter of the session's scheme (so no successor by arithmetic) — a garbage or
    over-long value (issue 16). Where its replay had to start is unknown."""
    lei = s.last_event_id
    if s.kind != "resume" or lei is None or s.resumed_from is not None:
        return None
    if not s.exchange.is_event_stream or not 200 <= (s.status or 0) < 300:
        return None
    if s.codec is not None and s.codec.key(lei) is not None:
        return None
    quoted = lei if len(lei) <= QUOTED_ID else f"{lei[:QUOTED_ID]}… ({len(lei)} characters)"
    return (
        f"its Last-Event-ID {quoted!r} is no event ID the inputs show and no counter of the "
        "session's ID scheme: where its replay had to start is unknown"
    )


def unjudged_entries(s: StreamRecord) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """The ``sessions`` table's ``unjudged`` entries of one stream: why its continuity
    could not be judged (an event stream, :func:`not_judged`) and why its replay could not
    (a resume, :func:`unlinked_resume`); ``None`` where it could."""
    judged = None
    if s.exchange.is_event_stream and (why := not_judged(s)) is not None:
        judged = {
            "stream": s.label,
            "response_stream": s.key,
            "missing_bytes": missing_bytes(lost_holes(s)),
            "why": why,
            # Nothing of it could be judged (fewer than two readable IDs), or only its edges.
            "whole": _fewer_than_two_ids(s),
            **_first_span_origin(s),
        }
    linked = None
    if (why := unlinked_resume(s)) is not None:
        linked = {
            "stream": s.label,
            "response_stream": s.key,
            "missing_bytes": None,
            "why": why,
            "whole": False,
            **_request_origin(s),
        }
    return judged, linked


def _fewer_than_two_ids(s: StreamRecord) -> bool:
    """Fewer than two of ``s``'s events carry an ID and are no signal."""
    first, last = id_ends(s)
    return first is None or first is last


def _request_origin(s: StreamRecord) -> dict[str, Any]:
    origin = s.exchange.request.origin if s.exchange.request is not None else None
    return _place(origin)


def _first_span_origin(s: StreamRecord) -> dict[str, Any]:
    spans = distinct_spans(lost_holes(s))
    return _place(spans[0].after or spans[0].before if spans else None)


def _place(origin: Origin | None) -> dict[str, Any]:
    """Where to look: a capture's frame number or a log's line number, each under its name."""
    if origin is None:
        return {"source": None, "frame": None, "line": None}
    number = origin.number
    is_frame = origin.kind == "frame"
    return {
        "source": origin.source,
        "frame": number if is_frame else None,
        "line": None if is_frame else number,
    }
