"""Every discontinuity in a stream's event IDs, the signal that covers it (if any) and
whether the capture holds all the bytes between its two ends (docs/profile.md, "Gap signalling"
and "What counts as what").

- A **live** gap: two consecutive ID-carrying events of one response whose counters jump.
  It is signalled only by a ``stream-gap`` covering it *before the next data event*.
- A **resume** gap: a resume whose first data event is not the successor of its
  ``Last-Event-ID``. It is signalled by a ``resume-gap`` on that response, a ``410``, or a
  ``stream-gap`` on the stream before it that declared the range dropped. A
  ``backpressure-disconnect`` naming W is *not* a signal: it promises that a resume from W
  continues at W's successor, so a jump after it is silent corruption.
- A gap whose stretch contains missing capture bytes is ``indeterminate``: capture loss is
  never server loss.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from itertools import pairwise
from typing import TYPE_CHECKING, Any, Literal

import polars as pl

from sse_forensics.facts.ids import IdCodec, IdKey
from sse_forensics.facts.index import StreamIndex
from sse_forensics.facts.load import CARRIES_ID
from sse_forensics.facts.model import EventRecord, Evidence, LogStreamInfo, StreamRecord, evidence
from sse_forensics.facts.requests import RequestRecord
from sse_forensics.facts.signals import RESUME_GAP, STREAM_GAP, SignalPayload
from sse_forensics.facts.taken import TakenKeys
from sse_forensics.provenance import Origin
from sse_forensics.reassembly.exchange import BodyHole
from sse_forensics.reassembly.stream import MissingSpan

if TYPE_CHECKING:
    from sse_forensics.facts.earlier import IdOrder

Verdict = Literal["expected_gap", "silent_corruption", "indeterminate"]
# A gap of thousands of events cites the first few eviction records, not all of them.
MAX_EVICTED_CITED = 20
Location = Literal["live", "resume"]


@dataclass(slots=True)
class MissingRange:
    """Counter values between two IDs that no stream of the capture carried."""

    prefix: str
    first: int | None
    last: int | None
    count: int


@dataclass(slots=True)
class GapRecord:
    location: Location
    stream: StreamRecord  # the response on which the discontinuity shows
    detected_by: str  # "id-jump" | "observed-order" | "signal" | "status"
    first: str | None
    last: str | None
    count: int | None
    before: EventRecord | None = None
    after: EventRecord | None = None
    signal: str | None = None
    signal_event: EventRecord | None = None
    signal_late: bool = False
    holes: list[BodyHole] = field(default_factory=list)
    keys: MissingRange | None = None
    missing_ids: list[str] = field(default_factory=list)  # opaque scheme: as observed
    reissue: RequestRecord | None = None  # the client re-issued the originating request
    # No request body to compare (logs): the client left this response with events pending
    # and POSTed again in the session afterwards, which may be the re-issue.
    reissue_possible: bool = False
    client_continued: bool = False  # the stream went on after the gap, or was resumed
    cause: str = "unknown"  # see facts.causes
    codec: IdCodec | None = None  # how the session's IDs read (set by the fact builder)
    cause_evidence: list[Evidence] = field(default_factory=list)

    @classmethod
    def of_ids(
        cls,
        location: Location,
        stream: StreamRecord,
        detected_by: str,
        missing: list[str],
        *,
        before: EventRecord | None = None,
        after: EventRecord | None = None,
    ) -> GapRecord:
        """A gap known by the list of its missing IDs (opaque schemes: no arithmetic)."""
        return cls(
            location,
            stream,
            detected_by,
            missing[0],
            missing[-1],
            len(missing),
            before=before,
            after=after,
            missing_ids=missing,
        )

    @property
    def complete(self) -> bool:
        return not self.holes

    @property
    def missing_bytes(self) -> int | None:
        """Bytes of this stretch the capture lacks (``None`` when a span's length is unknown
        and no other span has one)."""
        return missing_bytes(self.holes)

    @property
    def signalled(self) -> bool:
        return self.signal is not None and not self.signal_late

    @property
    def verdict(self) -> Verdict:
        if self.signalled or self.reissue is not None:
            return "expected_gap"
        if self.reissue_possible:  # it may have been recovered: the logs cannot tell
            return "indeterminate"
        return "silent_corruption" if self.complete else "indeterminate"

    def covers(self, event_id: str, codec: IdCodec) -> bool:
        if self.keys is not None and self.keys.first is not None:
            key = codec.key(event_id)
            return (
                key is not None
                and key.prefix == self.keys.prefix
                and self.keys.first <= key.seq <= (self.keys.last or self.keys.first)
            )
        return event_id in self.missing_ids or event_id == self.first

    def _evicted_ids(self, evicted: dict[str, Origin]) -> list[str]:
        """The IDs of this gap that the server's event log recorded as evicted."""
        if self.missing_ids:
            return [i for i in self.missing_ids if i in evicted]
        if self.codec is None:
            return []
        return [i for i in evicted if self.covers(i, self.codec)]

    def evidence(self) -> list[Evidence]:
        out: list[Evidence] = []
        s = self.stream
        if s.exchange.request is not None:
            req = s.exchange.request
            leid = f" Last-Event-ID {s.last_event_id!r}" if s.last_event_id is not None else ""
            out.append(evidence(req.origin, f"request {req.method} {req.target[:200]}{leid}"))
        if s.exchange.response is not None and self.location == "resume":
            out.append(evidence(s.response_origin, f"response status {s.status}"))
        if self.location == "resume" and s.resumed_event is not None:
            out.append(s.resumed_event.cite(f"Last-Event-ID {s.last_event_id!r} first seen here"))
        if self.before is not None:
            out.append(
                self.before.cite(f"last event before the gap: id {self.before.sse.id_field}")
            )
        if self.signal_event is not None:
            late = " (late: after the next data event)" if self.signal_late else ""
            out.append(
                self.signal_event.cite(
                    f"{self.signal} event {self.signal_event.sse.data[:120]}{late}"
                )
            )
        if self.after is not None:
            out.append(self.after.cite(f"first event after the gap: id {self.after.sse.id_field}"))
        for span in distinct_spans(self.holes):  # one missing span is cited once
            if span.reason == "inconsistent":  # the bytes are there, in two versions
                out.append(evidence(span.after, f"first copy: {span.describe()}"))
                out.append(evidence(span.before, "the retransmission that differs from it"))
            else:
                out.append(evidence(span.after, f"capture lacks bytes: {span.describe()}"))
        out.extend(self.cause_evidence)
        log = self.stream.exchange.log
        if log is not None:
            for event_id in self._evicted_ids(log.evicted)[:MAX_EVICTED_CITED]:
                out.append(evidence(log.evicted[event_id], f"event log: {event_id} evicted"))
        if self.reissue is not None:
            r = self.reissue
            out.append(evidence(r.origin, f"client re-issued {r.method} as JSON-RPC id {r.rpc_id}"))
        return out


def distinct_spans(holes: list[BodyHole]) -> list[MissingSpan]:
    """The capture's missing spans behind ``holes``, each once (a span can reach a body at
    more than one offset, and a resume's stretch may hold its original's holes too)."""
    seen: set[tuple[Any, ...]] = set()
    out = []
    for hole in holes:
        span = hole.span
        key = (span.direction, span.offset, span.length, span.reason)
        if key not in seen:
            seen.add(key)
            out.append(span)
    return out


def missing_bytes(holes: list[BodyHole]) -> int | None:
    """Sum of the known lengths of the distinct spans behind ``holes`` that the capture lacks
    (``None`` if none is known, 0 without such holes): bytes it holds in two versions
    (``inconsistent``) are there, and are not counted."""
    spans = [s for s in distinct_spans(holes) if s.reason != "inconsistent"]
    known = [s.length for s in spans if s.length is not None]
    if spans and not known:
        return None
    return sum(known)


def incomplete_reason(holes: list[BodyHole]) -> str | None:
    """Why the evidence of a stretch is incomplete, as a message clause (``None`` when it is
    complete): bytes missing from the capture, bytes captured twice with different contents
    (an inconsistent retransmission, issue 16), or a body a cap stopped decoding."""
    if not holes:
        return None
    spans = distinct_spans(holes)
    parts = []
    if any(s.reason not in ("inconsistent", "cap") for s in spans):
        lost = missing_bytes([h for h in holes if h.span.reason != "cap"])
        size = "an unknown number of" if lost is None else str(lost)
        parts.append(f"{size} bytes of this stretch are missing from the capture")
    twice = sum(s.length or 0 for s in spans if s.reason == "inconsistent")
    if twice:
        parts.append(
            f"{twice} bytes of this stretch were captured twice with different contents (an "
            "inconsistent retransmission: which copy the client kept cannot be known)"
        )
    if any(s.reason == "cap" for s in spans):
        parts.append("a cap stopped the reading of this body before or inside it (see caps)")
    return "; ".join(parts)


def _missing(lo: IdKey, hi: IdKey, taken: TakenKeys) -> MissingRange:
    """Counter values strictly between ``lo`` and ``hi`` not taken by other streams."""
    start, end = lo.seq + 1, hi.seq - 1
    if end < start:
        return MissingRange(lo.prefix, None, None, 0)
    excluded = taken.between(lo.prefix, start, end)
    count = end - start + 1 - len(excluded)
    if count <= 0:
        return MissingRange(lo.prefix, None, None, 0)
    excluded_set = set(excluded)
    first = start
    while first in excluded_set:
        first += 1
    last = end
    while last in excluded_set:
        last -= 1
    return MissingRange(lo.prefix, first, last, count)


def _signal_covers(event: EventRecord, rng: MissingRange, codec: IdCodec, taken: TakenKeys) -> bool:
    """A ``stream-gap`` (first..last) or ``resume-gap`` (after requested, before
    oldest_retained) covers every missing value of ``rng``."""
    return _payload_covers(event.signal, event.sse.event == RESUME_GAP, rng, codec, taken)


def _payload_covers(
    payload: SignalPayload | None,
    resume_gap: bool,
    rng: MissingRange,
    codec: IdCodec,
    taken: TakenKeys,
) -> bool:
    """:func:`_signal_covers` of a signal event's payload (``resume_gap``: of a
    ``resume-gap`` event, else of a ``stream-gap``)."""
    if payload is None or not payload.valid or rng.first is None or rng.last is None:
        return False
    a = codec.key(payload.first or "")
    b = codec.key(payload.last or "")
    if a is None or b is None or a.prefix != rng.prefix or b.prefix != rng.prefix:
        return False
    if resume_gap:  # exclusive bounds
        lo, hi = a.seq + 1, b.seq - 1
    else:
        lo, hi = a.seq, b.seq
    if lo <= rng.first and rng.last <= hi:
        return True
    # Partial coverage still counts when everything outside it went to other streams.
    outside_lo = _missing(IdKey(rng.prefix, rng.first - 1), IdKey(rng.prefix, lo), taken)
    outside_hi = _missing(IdKey(rng.prefix, hi), IdKey(rng.prefix, rng.last + 1), taken)
    return lo <= rng.last and hi >= rng.first and outside_lo.count == 0 and outside_hi.count == 0


def _holes_between(stream: StreamRecord, start: int, end: int) -> list[BodyHole]:
    """The body's holes that reach into ``[start, end]`` (a hole over bytes the capture
    holds in two versions stretches over ``body_length`` of them)."""
    return [
        h
        for h in stream.exchange.holes
        if start <= h.body_offset + h.body_length and h.body_offset <= end
    ]


def _render(codec: IdCodec, rng: MissingRange, like: str) -> tuple[str | None, str | None]:
    if rng.first is None:
        return None, None
    return (
        codec.render(IdKey(rng.prefix, rng.first), like),
        codec.render(IdKey(rng.prefix, rng.last or rng.first), like),
    )


def _advances(numbered: list[EventRecord]) -> list[tuple[EventRecord, EventRecord]]:
    """Pairs (highest ID so far, next higher ID) whose counters jump by more than one.

    Judged against the high-water mark, not the previous event: after ``7, 8, 6, 9`` the
    step to 9 is no gap (a repeated or older ID is the non-monotonic rule's business)."""
    out: list[tuple[EventRecord, EventRecord]] = []
    high: EventRecord | None = None
    for e in numbered:
        if high is None or e.counter.prefix != high.counter.prefix:
            high = e  # a new epoch (prefix) restarts the count
            continue
        if e.counter.seq <= high.counter.seq:
            continue
        if e.counter.seq > high.counter.seq + 1:
            out.append((high, e))
        high = e
    return out


def _rising(positions: list[int]) -> list[int] | None:
    """``positions`` when they rise (an event's position is its index in its stream), for
    :func:`bisect_right`; None otherwise (then walked)."""
    return positions if all(x < y for x, y in pairwise(positions)) else None


def _next_after(stream: StreamRecord, data_at: list[int] | None, position: int) -> int:
    """The position of the first data event of ``stream`` past ``position`` (the stream's
    length when none): bisected in ``data_at``, its data events' rising positions."""
    if data_at is None:
        return next(
            (e.position for e in stream.events if e.position > position and e.kind == "data"),
            len(stream.events),
        )
    k = bisect_right(data_at, position)
    return data_at[k] if k < len(data_at) else len(stream.events)


@dataclass(slots=True)
class StreamGaps:
    """A long stream's ``stream-gap`` events left in their columns (:mod:`.windows`):
    ``rows`` yields the position and payload of each, in position order; ``records``
    builds those at the given positions (rising)."""

    rows: Callable[[], Iterator[tuple[int, SignalPayload | None]]]
    records: Callable[[list[int]], list[EventRecord]]


@dataclass(slots=True)
class LiveView:
    """What :func:`live_gaps` reads of a stream: its ID jumps (``pairs``: the high-water
    event and the event past it, :func:`_advances`), its signal events in position order
    (its ``stream-gap`` events at least), ``next_data``: the position of its first data
    event past a position (its length when none), and ``signal_keys``: the counter values
    its signal events carry (those inside its jumps at least: no other is asked for).
    :func:`full_view` finds them among every event of the stream; :mod:`.windows`
    materialises only these events of a long one (issue 16)."""

    pairs: list[tuple[EventRecord, EventRecord]]
    signals: list[EventRecord]
    next_data: Callable[[int], int]
    signal_keys: list[IdKey]
    # Set by live_gaps under a cap: the stream-gap signals no jump explains past it (each
    # would be a gap of its own), and the first of them.
    signals_over: int = 0
    first_over: EventRecord | None = None
    # Its stream-gap events, when ``signals`` holds none of them: live_gaps builds those
    # it needs (_needed_signals).
    unread: StreamGaps | None = None


def full_view(stream: StreamRecord) -> LiveView:
    """:class:`LiveView` of ``stream`` from all its events."""
    numbered = [
        e for e in stream.events if e.carries_id and e.key is not None and e.kind != "signal"
    ]
    # Each jump's next data event found by bisection over the data events' rising
    # positions rather than by a walk from the stream's start per jump (a stream whose
    # every ID jumps cost time in the square of its events: issue 16).
    data_at = _rising([e.position for e in stream.events if e.kind == "data"])
    signals = [e for e in stream.events if e.kind == "signal"]
    return LiveView(
        _advances(numbered),
        signals,
        lambda position: _next_after(stream, data_at, position),
        [e.key for e in signals if e.key is not None],
    )


def live_gaps(
    stream: StreamRecord,
    codec: IdCodec,
    taken: TakenKeys,
    view: LiveView | None = None,
    cap: int | None = None,
) -> list[GapRecord]:
    """Jumps between consecutive ID-carrying events of one response, and ``stream-gap``
    signals that no observed jump explains (the only evidence with opaque IDs). ``view``:
    what is read of the stream (default: :func:`full_view`); ``cap``: the signals no jump
    explains made gaps of, the first ``cap`` (``gaps_per_stream``, issue 16: a flood of
    them made a gap and a finding each), the rest counted in ``view.signals_over``."""
    if view is None:
        view = full_view(stream)
    gaps: list[GapRecord] = []
    used_signals: set[int] = set()
    # A signal event that carries an `id:` took that counter value itself (servers that number
    # every event they write): the value was delivered, not dropped.
    taken = taken.with_extra(view.signal_keys)
    ranged = [(a, b, _missing(a.counter, b.counter, taken)) for a, b in view.pairs]
    ranged = [(a, b, rng) for a, b, rng in ranged if rng.count]
    log = stream.exchange.log
    by_order = not codec.arithmetic and log is not None
    signals = [e for e in view.signals if e.sse.event == STREAM_GAP]
    if view.unread is not None and by_order:  # producer order reads every signal
        signals += view.unread.records([p for p, _payload in view.unread.rows()])
    elif view.unread is not None:
        signals += _needed_signals(view, ranged, codec, taken, cap)
    # The signals after each jump found by bisection over their rising positions.
    signals_at = _rising([sig.position for sig in signals])
    for a, b, rng in ranged:
        first, last = _render(codec, rng, a.id_field)
        gap = GapRecord(
            "live",
            stream,
            "id-jump",
            first,
            last,
            rng.count,
            before=a,
            after=b,
            keys=rng,
            holes=_holes_between(stream, a.sse.end, b.sse.start),
        )
        start = bisect_right(signals_at, a.position) if signals_at is not None else 0
        for k in range(start, len(signals)):
            sig = signals[k]
            if sig.position > a.position and _signal_covers(sig, rng, codec, taken):
                gap.signal, gap.signal_event = STREAM_GAP, sig
                gap.signal_late = sig.position > view.next_data(a.position)
                used_signals.add(sig.position)
                break
        gaps.append(gap)
    if by_order:
        assert log is not None  # by_order says so
        gaps.extend(_log_order_gaps(stream, log, signals, used_signals))
    made = 0
    for sig in signals:
        if sig.position in used_signals or sig.signal is None or not sig.signal.valid:
            continue
        if cap is not None and made >= cap:
            view.signals_over += 1
            view.first_over = view.first_over or sig
            continue
        made += 1
        ka, kb = codec.key(sig.signal.first or ""), codec.key(sig.signal.last or "")
        count = None
        keys = None
        if ka is not None and kb is not None and ka.prefix == kb.prefix and kb.seq >= ka.seq:
            count = kb.seq - ka.seq + 1
            keys = MissingRange(ka.prefix, ka.seq, kb.seq, count)
        gaps.append(
            GapRecord(
                "live",
                stream,
                "signal",
                sig.signal.first,
                sig.signal.last,
                count,
                signal=STREAM_GAP,
                signal_event=sig,
                keys=keys,
            )
        )
    return gaps


def _needed_signals(
    view: LiveView,
    ranged: list[tuple[EventRecord, EventRecord, MissingRange]],
    codec: IdCodec,
    taken: TakenKeys,
    cap: int | None,
) -> list[EventRecord]:
    """The records of ``view.unread``'s ``stream-gap`` events that :func:`live_gaps` makes
    something of: each jump's first covering signal past it, and the valid signals no jump
    explains up to one past ``cap`` (those past it only counted, in ``view.signals_over``),
    found in one pass over their payloads (a flood of them is never held as records)."""
    assert view.unread is not None
    pending = sorted((a.position, k) for k, (a, _b, _rng) in enumerate(ranged))
    open_: list[int] = []  # jumps before the signal and not yet covered
    keep: list[int] = []
    unexplained = 0
    j = 0
    for position, payload in view.unread.rows():
        while j < len(pending) and pending[j][0] < position:
            open_.append(pending[j][1])
            j += 1
        covered = [k for k in open_ if _payload_covers(payload, False, ranged[k][2], codec, taken)]
        if covered:
            keep.append(position)
            open_ = [k for k in open_ if k not in covered]
        elif payload is not None and payload.valid:
            unexplained += 1
            if cap is None or unexplained <= cap + 1:
                keep.append(position)
    if cap is not None and unexplained > cap + 1:
        view.signals_over += unexplained - cap - 1
    return view.unread.records(keep)


def _log_order_gaps(
    stream: StreamRecord, log: LogStreamInfo, signals: list[EventRecord], used_signals: set[int]
) -> list[GapRecord]:
    """Opaque IDs allow no arithmetic, but an event log (``log``, the stream's) gives the
    producer's order: IDs emitted between two consecutive written events and never written
    here are missing. Found by a polars query over the written events' IDs and the
    producer's order; records are built for the two events around each gap only (issue
    16: a stream of a million opaque IDs was read as a record per event, a dict and a set
    of its IDs)."""
    from sse_forensics.facts.earlier import data_id_rows  # earlier reads through windows
    from sse_forensics.facts.windows import events_at

    written = data_id_rows(stream)
    emitted = pl.Series("id_field", log.emitted, pl.String)
    # Each written ID's last place in the producer's order, and the next written event's.
    pairs = (
        written.join(
            emitted.to_frame().with_row_index("at").group_by("id_field").agg(pl.col("at").max()),
            on="id_field",
            how="left",
            maintain_order="left",
        )
        .select(
            pl.col("position").alias("a_pos"),
            pl.col("position").shift(-1).alias("b_pos"),
            pl.col("at").cast(pl.Int64).alias("ia"),
            pl.col("at").shift(-1).cast(pl.Int64).alias("ib"),
        )
        .filter(pl.col("ib") > pl.col("ia") + 1)
    )
    if not pairs.height:
        return []
    # Emitted, never written: ``before[k]`` of them among the first k emitted.
    unwritten = ~emitted.is_in(written.get_column("id_field").implode())
    before = pl.concat([pl.Series([0], dtype=pl.UInt32), unwritten.cast(pl.UInt32).cum_sum()])
    pairs = pairs.filter(
        (before.gather(pairs.get_column("ib")) - before.gather(pairs.get_column("ia") + 1)) > 0
    )
    at = events_at(stream, sorted({*pairs.get_column("a_pos"), *pairs.get_column("b_pos")}))
    out: list[GapRecord] = []
    for a_pos, b_pos, ia, ib in pairs.iter_rows():
        a, b = at[a_pos], at[b_pos]
        missing = emitted.slice(ia + 1, ib - ia - 1).filter(unwritten.slice(ia + 1, ib - ia - 1))
        gap = GapRecord.of_ids(
            "live", stream, "producer-order", missing.to_list(), before=a, after=b
        )
        for sig in signals:
            if (
                sig.position > a.position
                and sig.signal is not None
                and (sig.signal.first == gap.first and sig.signal.last == gap.last)
            ):
                gap.signal, gap.signal_event = STREAM_GAP, sig
                gap.signal_late = sig.position > b.position
                used_signals.add(sig.position)
                break
        out.append(gap)
    return out


def observed_order(stream: StreamRecord, index: StreamIndex) -> IdOrder:
    """The IDs of the data events of the logical stream that precede ``stream``: the
    original response and earlier resumes of it, in time order (the only continuity opaque
    IDs allow), read from the columns of a long one (:mod:`.earlier`, issue 16)."""
    from sse_forensics.facts.earlier import observed_ids  # earlier reads through windows

    return observed_ids(stream, index)


def resume_gap(
    resume: StreamRecord, codec: IdCodec, taken: TakenKeys, index: StreamIndex
) -> GapRecord | None:
    """Judge a resume's answer against its ``Last-Event-ID`` (docs/profile.md, "What counts as
    what": a resume whose first event is not the successor of ``Last-Event-ID`` is silent
    corruption unless signalled)."""
    leid = resume.last_event_id
    status = resume.status
    if leid is None or status is None or leid == "":
        return None
    if status == 410:
        succ = successor(resume, codec, index, taken)
        return GapRecord("resume", resume, "status", succ, None, None, signal="410")
    if not (200 <= status < 300 and resume.exchange.is_event_stream):
        return None
    # A long resume's events are asked of its columns (.earlier, issue 16): its first
    # data event, the IDs before it and its resume-gap signals; no other is built.
    from sse_forensics.facts.earlier import event_ids, events_where

    first = next(events_where(resume, pl.col("kind") == "data", lambda e: e.kind == "data"), None)
    if first is None or not first.carries_id:
        return None
    gap: GapRecord | None = None
    # A Last-Event-ID that is an outlier of an arithmetic stream (facts.ids) has no counter:
    # the resume is judged by observed order, like an opaque one.
    lk = codec.key(leid) if codec.arithmetic else None
    arithmetic = lk is not None
    if lk is not None:
        fk = first.key
        if fk is None or lk.prefix != fk.prefix or fk.seq <= lk.seq + 1:
            return None
        before_first = events_where(
            resume,
            (pl.col("position") < first.position) & CARRIES_ID,
            lambda e: e.position < first.position and e.key is not None,
        )
        replay_keys = frozenset(e.key for e in before_first if e.key is not None)
        rng = _missing(lk, fk, taken.with_extra(replay_keys))
        if rng.count == 0:
            return None
        lo, hi = _render(codec, rng, leid)
        gap = GapRecord("resume", resume, "id-jump", lo, hi, rng.count, after=first, keys=rng)
    else:
        order = observed_order(resume, index)
        li = order.last(leid)
        if li is None:
            return None
        if li + 1 >= len(order) or first.sse.id_field == order[li + 1]:
            return None
        at = order.first_from(first.id_field, li + 1)
        if at is not None:
            missing = order.between(li + 1, at)
        else:
            missing = order.tail_without(li + 1, event_ids(resume))
        if not missing:
            return None
        gap = GapRecord.of_ids("resume", resume, "observed-order", missing, after=first)
    gap.holes = _holes_between(resume, 0, first.sse.start)
    if not arithmetic and resume.resumed_from is not None and resume.resumed_event:
        origin = resume.resumed_from
        gap.holes += _holes_between(origin, resume.resumed_event.sse.end, 1 << 62)
    _cover_resume(gap, resume, codec, taken, index, first)
    return gap


def _cover_resume(
    gap: GapRecord,
    resume: StreamRecord,
    codec: IdCodec,
    taken: TakenKeys,
    index: StreamIndex,
    first: EventRecord,
) -> None:
    from sse_forensics.facts.earlier import events_where  # earlier reads through windows

    for sig in events_where(
        resume,
        (pl.col("kind") == "signal") & (pl.col("event") == RESUME_GAP),
        lambda e: e.kind == "signal" and e.sse.event == RESUME_GAP and e.signal is not None,
    ):
        assert sig.signal is not None  # the test above
        if gap.keys is not None:
            ok = _signal_covers(sig, gap.keys, codec, taken)
        else:
            ok = sig.signal.first == resume.last_event_id
        if ok:
            gap.signal, gap.signal_event = RESUME_GAP, sig
            gap.signal_late = sig.position > first.position
            return
    # A stream-gap on the stream before the resume that already declared the range dropped
    # (docs/profile.md, "What counts as what": a stream-gap covering it). A backpressure-disconnect
    # is no such signal: it names the last event written and so promises the successor.
    for s in index.logical_before(resume):
        for sig in events_where(
            s,
            (pl.col("kind") == "signal") & (pl.col("event") == STREAM_GAP),
            lambda e: e.kind == "signal" and e.sse.event == STREAM_GAP and e.signal is not None,
        ):
            if sig.signal is not None:
                if gap.keys is not None:
                    # A Last-Event-ID inside the declared range is no cursor before it: a 2xx
                    # to that resume stays silent corruption (docs/profile.md, "What counts
                    # as what").
                    lk, fk = (
                        codec.key(resume.last_event_id or ""),
                        codec.key(sig.signal.first or ""),
                    )
                    declared = (
                        lk is not None
                        and fk is not None
                        and lk.seq < fk.seq
                        and _signal_covers(sig, gap.keys, codec, taken)
                    )
                else:
                    declared = (sig.signal.first, sig.signal.last) == (
                        gap.missing_ids[0],
                        gap.missing_ids[-1],
                    )
                if declared:
                    gap.signal, gap.signal_event = STREAM_GAP, sig
                    return


def successor(
    resume: StreamRecord, codec: IdCodec, index: StreamIndex, taken: TakenKeys
) -> str | None:
    """The ID that should follow ``Last-Event-ID``: the next counter value no other stream
    took where the scheme allows arithmetic, else the event observed after it."""
    leid = resume.last_event_id or ""
    key = codec.key(leid) if codec.arithmetic else None
    if key is not None:
        nxt = IdKey(key.prefix, key.seq + 1)
        while nxt in taken:
            nxt = IdKey(key.prefix, nxt.seq + 1)
        return codec.render(nxt, leid)
    order = observed_order(resume, index)
    idx = order.last(leid)
    if idx is not None and idx + 1 < len(order):
        return order[idx + 1]
    return None
