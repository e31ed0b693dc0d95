"""What a resume's answer did with ``Last-Event-ID`` (docs/profile.md, "Gap signalling": the
silent answers seen in real servers) and what the client did around it.

Each function judges one resume against the streams observed before it; the fact builder
writes the results as columns of the ``resumes`` table.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import polars as pl

from sse_forensics.facts.earlier import (
    CARRIES_ID,
    DATA_WITH_ID,
    event_at,
    events_where,
    first_data,
    has_data,
    key_prefixes,
    top_counter,
)
from sse_forensics.facts.front import ForeignEvent
from sse_forensics.facts.gaps import GapRecord
from sse_forensics.facts.ids import IdCodec, IdKey
from sse_forensics.facts.index import StreamIndex
from sse_forensics.facts.model import EventRecord, Evidence, StreamRecord, evidence
from sse_forensics.facts.observed import ObservedOrders, ResumeOrder
from sse_forensics.facts.replay_columns import (
    Parts,
    Sightings,
    crossings,
    duplicates,
    is_long,
)
from sse_forensics.facts.requests import RequestIndex
from sse_forensics.facts.signals import BACKPRESSURE_DISCONNECT, STREAM_GAP

# A 200 that only sends keep-alive comments "stays open" once it has sent this many of them
# or lasted this long without a data event (docs/profile.md, "Gap signalling": a silent
# answer seen in real servers).
KEEPALIVE_ONLY_COMMENTS = 2
KEEPALIVE_ONLY_SECONDS = 5.0
# Same stream, same Last-Event-ID, no progress: a reconnect loop from this many attempts.
RESUME_STORM_ATTEMPTS = 3


@dataclass(slots=True)
class ReplayFacts:
    replay_start: str | None = None  # successor | jump | duplicate | older | empty | unknown
    duplicates: int = 0
    later_events_known: bool = False
    empty_replay: bool = False
    empty_how: str | None = None  # "ended" | "keep-alive only"
    crossed_streams: int = 0
    crossed_sessions: int = 0
    crossed_first: str | None = None
    crossed_session: str | None = None  # the session the first leaked event belongs to
    bd_last_written: str | None = None
    continues_after_bd: bool = False  # the replay starts at the successor of that W
    cursor_attempt: int = 1
    cursorless_get_after: bool = False
    reissued: bool = False
    client_adjusted: bool = False
    last_seen_id: str | None = None
    adjusted_first: str | None = None  # first ID the client skipped by adjusting its cursor
    adjusted_count: int | None = None
    extra_evidence: list[Evidence] = field(default_factory=list)


def _is_2xx_stream(s: StreamRecord) -> bool:
    return s.status is not None and 200 <= s.status < 300 and s.exchange.is_event_stream


# An event that may carry a JSON-RPC response (its first message, or more than one).
_MAY_ANSWER = pl.col("rpc_kind").is_in(["response", "error"]) | pl.col("rpc_more").is_not_null()


def _answered(stream: StreamRecord, index: StreamIndex, until: float) -> set[str | None]:
    """JSON-RPC ids answered on the logical stream before ``until``."""
    ids: set[str | None] = set()
    for s in index.logical(stream):
        for e in events_where(
            s,
            _MAY_ANSWER,
            lambda e: bool(e.rpc) and (e.origin is None or e.origin.ts < until),
            ("rpc_kind", "rpc_more"),
        ):
            assert e.rpc is not None
            ids.update(m.rpc_id for m in e.rpc if m.kind in ("response", "error"))
    return ids


class ReplayJudge:
    """Judges every resume of a capture; built once with indexes over all streams."""

    def __init__(
        self,
        index: StreamIndex,
        requests: RequestIndex,
        foreign: dict[tuple[int, int], dict[int, ForeignEvent]] | None = None,
        first_seen_in: Callable[[set[tuple[str, str]]], set[tuple[int, int]]] | None = None,
        orders: ObservedOrders | None = None,
        parts: Parts | None = None,
    ) -> None:
        self.index = index
        # Where each resume's Last-Event-ID sits in its observed order (:mod:`.observed`).
        self.orders = orders
        self.streams = index.streams
        self.requests = requests
        # Replayed events whose first sighting another partition holds (:mod:`.front`).
        self.foreign = foreign or {}
        self._first_seen: dict[tuple[str, str], EventRecord] | None = None
        # Which streams hold given (ID, data) pairs (facts.build): the first sightings are
        # looked for there only, not in every event of the partition.
        self._first_seen_in = first_seen_in
        # A long resume's replayed events are looked for in the partition's columns
        # (:mod:`.replay_columns`), not as records.
        self.sightings = Sightings(parts, index.logical) if parts is not None else None

    @property
    def first_seen(self) -> dict[tuple[str, str], EventRecord]:
        """(id, data) → the first event that carried it, in time order (built on first use:
        only captures with resumes need it)."""
        if self._first_seen is None:
            self._first_seen = {}
            candidates = self.streams
            if self._first_seen_in is not None:
                pairs = {
                    (e.id_field, e.sse.data)
                    for s in self.streams
                    if s.kind == "resume" and s.resumed_from is not None and not self._long(s)
                    for e in s.data_events()
                    if e.carries_id
                }
                holders = self._first_seen_in(pairs)
                candidates = [
                    s
                    for s in self.streams
                    if (s.exchange.connection_id, s.exchange.index) in holders
                ]
            # Only the pairs asked for are looked up: a long stream's other events are
            # left in their columns.
            where = DATA_WITH_ID
            if self._first_seen_in is not None:
                where = where & pl.col("id_field").is_in(sorted({i for i, _ in pairs}))
            for s in candidates:
                for e in events_where(s, where, lambda e: e.kind == "data" and e.carries_id):
                    self._first_seen.setdefault((e.id_field, e.sse.data), e)
        return self._first_seen

    def judge(self, r: StreamRecord, gap: GapRecord | None) -> ReplayFacts:
        facts = ReplayFacts()
        codec = r.codec or IdCodec("opaque")
        same_logical = self.index.logical_before(r)
        leid = r.last_event_id or ""
        lk = codec.key(leid) if codec.arithmetic else None
        order = self.order(r)
        li = order.last

        facts.bd_last_written = self._backpressure_w(same_logical)
        facts.cursor_attempt = self._attempt(r, self.index)
        if self.requests.originating(r):
            facts.reissued = self.requests.reissue_after(r, r.first_ts) is not None
        else:  # no request body to compare (an access log): any later POST may be the re-issue
            facts.reissued = self.requests.post_after(r, r.first_ts)
        facts.later_events_known = self._later_events(r, lk, order)
        facts.client_adjusted, facts.last_seen_id = self._adjusted(r, codec, lk)
        if facts.client_adjusted and lk is not None and facts.last_seen_id is not None:
            seen = codec.key(facts.last_seen_id)
            if seen is not None:
                facts.adjusted_first = codec.render(IdKey(seen.prefix, seen.seq + 1), leid)
                facts.adjusted_count = lk.seq - seen.seq
        facts.cursorless_get_after = self._cursor_lost(r)
        if not _is_2xx_stream(r):
            return facts
        long = self._long(r)
        # A long replay is asked of its columns (.replay_columns), never built whole.
        data = [] if long else r.data_events()
        first = first_data(r) if long else next(iter(data), None)
        if first is None:
            facts.replay_start = "empty"
            facts.empty_how = self._empty_how(r)
            facts.empty_replay = facts.empty_how is not None
            return facts
        facts.replay_start = self._start(first, gap, codec, lk, order, li, leid)
        if facts.bd_last_written is not None:
            wk = codec.key(facts.bd_last_written)
            if wk is not None and first.key is not None:
                facts.continues_after_bd = first.key == IdKey(wk.prefix, wk.seq + 1)
            elif (wi := order.ids().last(facts.bd_last_written)) is not None:
                ids = order.ids()
                facts.continues_after_bd = wi + 1 < len(ids) and ids[wi + 1] == first.sse.id_field
        if long:
            facts.duplicates = duplicates(r, lk, order)
        before_leid: set[str] | None = None  # read only for an event without a matching key
        for e in data:
            if lk is not None and e.key is not None and e.key.prefix == lk.prefix:
                facts.duplicates += e.key.seq <= lk.seq
                continue
            if before_leid is None:
                replayed = {e.id_field for e in data}
                before_leid = order.ids().among(replayed, li + 1) if li is not None else set()
            if e.sse.id_field in before_leid:
                facts.duplicates += 1
        self._crossings(r, data, facts, codec)
        return facts

    def _long(self, r: StreamRecord) -> bool:
        """``r``'s replay is judged from its columns (:mod:`.replay_columns`)."""
        return self.sightings is not None and is_long(r)

    def order(self, r: StreamRecord) -> ResumeOrder:
        """Where ``r``'s Last-Event-ID sits in its observed order (:mod:`.observed`)."""
        if self.orders is None:
            self.orders = ObservedOrders(self.index)
        return self.orders.of(r)

    # -- individual judgements -------------------------------------------------------

    @staticmethod
    def _start(
        first: EventRecord,
        gap: GapRecord | None,
        codec: IdCodec,
        lk: IdKey | None,
        order: ResumeOrder,
        li: int | None,
        leid: str,
    ) -> str:
        if gap is not None:
            return "jump"
        if lk is not None and first.key is not None and first.key.prefix == lk.prefix:
            if first.key.seq < lk.seq:
                return "older"
            return "duplicate" if first.key.seq == lk.seq else "successor"
        if li is None or not first.sse.id_field:
            return "unknown"
        if first.sse.id_field == leid:
            return "duplicate"
        return "older" if order.ids().before(first.sse.id_field, li) else "successor"

    @staticmethod
    def _backpressure_w(same_logical: list[StreamRecord]) -> str | None:
        for s in reversed(same_logical):  # the last one sent
            for e in events_where(
                s,
                pl.col("event") == BACKPRESSURE_DISCONNECT,
                lambda e: (
                    e.sse.event == BACKPRESSURE_DISCONNECT
                    and e.signal is not None
                    and e.signal.valid
                ),
                reverse=True,
            ):
                assert e.signal is not None
                return e.signal.first
        return None

    @staticmethod
    def _attempt(r: StreamRecord, index: StreamIndex) -> int:
        """How many resumes in a row asked for this Last-Event-ID with nothing delivered.

        Resumes whose stream the inputs never showed (an access log alone) continue "the
        stream of that Last-Event-ID in that session": they are counted together."""

        def same_stream(s: StreamRecord) -> bool:
            if s.logical is r.logical:
                return True
            unlinked = s.resumed_from is None and r.resumed_from is None
            return unlinked and s.session is r.session and s.last_event_id == r.last_event_id

        # Only streams of the same logical stream or the same session can be the same stream.
        earlier = {*index.logical_before(r), *index.session_before(r)}
        attempt = 1
        for s in sorted(earlier, key=index.rank, reverse=True):
            if not same_stream(s):
                continue
            if has_data(s):
                break
            if s.kind == "resume" and s.last_event_id == r.last_event_id:
                attempt += 1
        return attempt

    def _later_events(self, r: StreamRecord, lk: IdKey | None, order: ResumeOrder) -> bool:
        """The logical stream is known to have had events after Last-Event-ID while this
        resume was answered: seen on the wire anywhere before its answer ended, or its
        originating request never answered. Events first sent after it (a later resume of a
        polling stream that the server closed on purpose, 2025-11-25) do not count."""
        end = r.exchange.last_body_origin or r.response_origin
        until = end.ts if end is not None else r.first_ts
        for s in self.index.logical(r) if lk is not None else ():
            if s is r:
                continue
            assert lk is not None
            later = (
                (pl.col("kind") == "data")
                & (pl.col("prefix") == lk.prefix)
                & (pl.col("seq") > lk.seq)
                & (pl.col("first_ts").is_null() | (pl.col("first_ts") <= until))
            )

            def test(e: EventRecord, lk: IdKey = lk) -> bool:
                return (
                    e.kind == "data"
                    and e.key is not None
                    and e.key.prefix == lk.prefix
                    and e.key.seq > lk.seq
                    and (e.origin is None or e.origin.ts <= until)
                )

            if next(events_where(s, later, test, ("kind", "first_ts"), keyed=True), None):
                return True
        if order.last is not None and order.last + 1 < order.length:
            return True
        for s in self.index.logical(r):  # the server's event log: produced after it
            log = s.exchange.log
            if (
                log is not None
                and r.last_event_id in log.emitted
                and log.emitted.index(r.last_event_id) + 1 < len(log.emitted)
            ):
                return True
        originals = self.requests.originating(r)
        if originals:
            # Answered on a later resume: the answer was not lost, only not produced yet.
            answered = _answered(r, self.index, float("inf"))
            return any(req.rpc_id not in answered for req in originals)
        return False

    @staticmethod
    def _empty_how(r: StreamRecord) -> str | None:
        ex = r.exchange
        if ex.response_end_reason in ("complete", "fin", "rst") or ex.response_complete:
            return "ended"
        if ex.response_end_reason == "log":
            # An access-log line is written when the response has ended.
            return "ended (access log)"
        start = r.response_origin.ts if r.response_origin else r.first_ts
        end = ex.last_body_origin.ts if ex.last_body_origin else start
        if ex.comments >= KEEPALIVE_ONLY_COMMENTS or end - start >= KEEPALIVE_ONLY_SECONDS:
            return "keep-alive only"
        return None

    def _crossings(
        self, r: StreamRecord, data: list[EventRecord], facts: ReplayFacts, codec: IdCodec
    ) -> None:
        """Replayed events first sent on another stream or session. Only judged where IDs
        identify an event across streams (opaque or prefixed IDs, or a shared counter):
        with per-stream integer counters two streams legitimately send the same ID and,
        often, the same progress notification."""
        if r.resumed_from is None:
            return
        scope = r.session.counter_scope
        unique_ids = codec.scheme != "int" or scope in ("session", "server")
        if not unique_ids:
            return
        # Prefixed IDs name their stream: an ID under the resumed stream's own prefix is that
        # stream's, even when another session uses the same prefix (per-session stream
        # numbering like `1_8` repeats across sessions, and so may a progress notification).
        own_prefixes = {p for s in self.index.logical(r) if s is not r for p in key_prefixes(s)}
        foreign = self.foreign.get((r.exchange.connection_id, r.exchange.index), {})
        if self._long(r):
            prefixed = own_prefixes if codec.scheme == "prefixed" else None
            self._long_crossings(r, facts, codec, prefixed, foreign)
            return
        for e in data:
            if not e.carries_id:
                continue
            if codec.scheme == "prefixed" and e.key is not None and e.key.prefix in own_prefixes:
                continue
            elsewhere = foreign.get(e.position)
            if elsewhere is not None:
                if not (scope == "server" or codec.scheme != "int"):
                    continue
                facts.crossed_sessions += 1
                self._cite_crossing(
                    facts, r, e, evidence(elsewhere.origin, ""), elsewhere.label, elsewhere.session
                )
                continue
            pair = (e.id_field, e.sse.data)
            first = self.first_seen.get(pair)
            if first is None or first is e or first.stream.logical is r.logical:
                continue
            owner = None
            if first.stream.session is r.session:
                facts.crossed_streams += 1
            elif scope == "server" or codec.scheme != "int":
                facts.crossed_sessions += 1
                owner = first.stream.session.session_id
            else:
                continue
            self._cite_crossing(facts, r, e, first.cite(""), first.stream.label, owner)

    def _long_crossings(
        self,
        r: StreamRecord,
        facts: ReplayFacts,
        codec: IdCodec,
        own_prefixes: set[str] | None,
        foreign: dict[int, ForeignEvent],
    ) -> None:
        """:meth:`_crossings` of a long resume, from its columns (:func:`.replay_columns.
        crossings`): only the events cited are built."""
        assert self.sightings is not None  # a long resume is judged with them (_long)
        other_sessions = r.session.counter_scope == "server" or codec.scheme != "int"
        found = crossings(
            r, own_prefixes, foreign, self.sightings, lambda rank: self.streams[rank].logical
        )
        for c in found:
            owner: str | None = None
            if c.rank is None:
                if not other_sessions:
                    continue
                elsewhere = foreign[c.position]
                owner, label = elsewhere.session, elsewhere.label
                facts.crossed_sessions += 1
            else:
                holder = self.streams[c.rank]
                label = holder.label
                if holder.session is r.session:
                    facts.crossed_streams += 1
                elif other_sessions:
                    facts.crossed_sessions += 1
                    owner = holder.session.session_id
                else:
                    continue
            if facts.crossed_first is not None and (
                owner is None or facts.crossed_session is not None
            ):
                continue  # nothing more to cite (_cite_crossing)
            if c.rank is None:
                sighting = evidence(foreign[c.position].origin, "")
            else:
                sighting = event_at(self.streams[c.rank], c.first_position).cite("")
            self._cite_crossing(facts, r, event_at(r, c.position), sighting, label, owner)

    @staticmethod
    def _cite_crossing(
        facts: ReplayFacts,
        r: StreamRecord,
        e: EventRecord,
        sighting: Evidence,
        label: str,
        owner: str | None,
    ) -> None:
        """Cite the first leaked event, and the first event of another session: the
        finding names the session the leaked events belong to."""
        first_crossing = facts.crossed_first is None
        first_of_session = owner is not None and facts.crossed_session is None
        if not (first_crossing or first_of_session):
            return
        if first_crossing:
            facts.crossed_first = e.sse.id_field
        if first_of_session:
            facts.crossed_session = owner
        where = label if owner is None else f"{label}, session {owner}"
        facts.extra_evidence.append(
            {**sighting, "what": f"event {e.sse.id_field} first sent on {where}"}
        )
        facts.extra_evidence.append(e.cite(f"and replayed here to {r.label}"))

    def _adjusted(
        self, r: StreamRecord, codec: IdCodec, lk: IdKey | None
    ) -> tuple[bool, str | None]:
        """Last-Event-ID ahead of the last ID the stream being resumed carried."""
        if lk is None or r.resumed_from is not None:
            return False, None
        resumed = next(
            (
                s.logical
                for s in reversed(self.index.session_before(r))
                if next(self._keyed_as(s, lk.prefix), None) is not None
            ),
            None,
        )
        if resumed is None:
            return False, None
        earlier = self.index.root_before(resumed, r)
        last: EventRecord | None = None
        for s in earlier:  # the first event with the highest counter (max)
            top = top_counter(s, lk.prefix)
            if top is not None and (last is None or top.counter.seq > last.counter.seq):
                last = top
        assert last is not None
        # A cursor moved to the end of a range the server declared dropped (`stream-gap`
        # F..L, then Last-Event-ID L) skips nothing the server still had.
        declared = [
            k.seq
            for s in earlier
            for e in events_where(
                s,
                pl.col("event") == STREAM_GAP,
                lambda e: e.sse.event == STREAM_GAP and e.signal is not None and e.signal.valid,
            )
            if e.signal is not None
            for k in [codec.key(e.signal.last or "")]
            if k is not None and k.prefix == lk.prefix and k.seq >= last.counter.seq
        ]
        if declared and lk.seq <= max(declared):
            return False, last.sse.id_field
        return lk.seq > last.counter.seq, last.sse.id_field

    @staticmethod
    def _keyed_as(s: StreamRecord, prefix: str) -> Iterator[EventRecord]:
        """``s``'s events that carry an ID whose key is under ``prefix``."""
        return events_where(
            s,
            CARRIES_ID & (pl.col("prefix") == prefix),
            lambda e: e.carries_id and e.key is not None and e.key.prefix == prefix,
            keyed=True,
        )

    def _cursor_lost(self, r: StreamRecord) -> bool:
        """After this resume failed, the client's next stream request in the session came
        without Last-Event-ID while the original request was still unanswered."""
        failed = (
            r.status is not None and not 200 <= r.status < 300 and r.status not in (404, 410)
        ) or (
            _is_2xx_stream(r)
            and not has_data(r)
            and r.exchange.response_end_reason in ("complete", "fin")
        )
        if not failed:
            return False
        nxt = next(
            (
                s
                for s in self.index.session_after(r)
                if s.exchange.request is not None and s.exchange.request.method.upper() == "GET"
            ),
            None,
        )
        if nxt is None or nxt.kind == "resume":
            return False
        originals = self.requests.originating(r)
        if not originals:
            return True
        answered = _answered(r, self.index, float("inf"))
        return any(req.rpc_id not in answered for req in originals)
