"""What a resume's answer did with ``Last-Event-ID`` (docs/profile.md, "Gap signalling": the
silent answers seen in real servers) and what the client did around it.

Each function judges one resume against the streams observed before it; the fact builder
writes the results as columns of the ``resumes`` table.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from sse_forensics.facts.front import ForeignEvent
from sse_forensics.facts.gaps import GapRecord, observed_order
from sse_forensics.facts.ids import IdCodec, IdKey
from sse_forensics.facts.index import StreamIndex
from sse_forensics.facts.model import EventRecord, Evidence, StreamRecord, evidence
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


def _answered(stream: StreamRecord, index: StreamIndex, until: float) -> set[str | None]:
    """JSON-RPC ids answered on the logical stream before ``until``."""
    ids: set[str | None] = set()
    for s in index.logical(stream):
        for e in s.events:
            if e.rpc and (e.origin is None or e.origin.ts < until):
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
    ) -> None:
        self.index = index
        self.streams = index.streams
        self.requests = requests
        # Replayed events whose first sighting another partition holds (:mod:`.front`).
        self.foreign = foreign or {}
        self._first_seen: dict[tuple[str, str], EventRecord] | None = None
        # Which streams hold given (ID, data) pairs (facts.build): the first sightings are
        # looked for there only, not in every event of the partition.
        self._first_seen_in = first_seen_in

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
                    if s.kind == "resume" and s.resumed_from is not None
                    for e in s.data_events()
                    if e.carries_id
                }
                holders = self._first_seen_in(pairs)
                candidates = [
                    s
                    for s in self.streams
                    if (s.exchange.connection_id, s.exchange.index) in holders
                ]
            for s in candidates:
                for e in s.events:
                    if e.kind == "data" and e.carries_id:
                        self._first_seen.setdefault((e.id_field, e.sse.data), e)
        return self._first_seen

    def judge(self, r: StreamRecord, gap: GapRecord | None) -> ReplayFacts:
        facts = ReplayFacts()
        codec = r.codec or IdCodec("opaque")
        same_logical = self.index.logical_before(r)
        leid = r.last_event_id or ""
        lk = codec.key(leid) if codec.arithmetic else None
        order = [e.id_field for e in observed_order(r, self.index)]
        li = len(order) - 1 - order[::-1].index(leid) if leid in order else None

        facts.bd_last_written = self._backpressure_w(same_logical)
        facts.cursor_attempt = self._attempt(r, self.index)
        if self.requests.originating(r):
            facts.reissued = self.requests.reissue_after(r, r.first_ts) is not None
        else:  # no request body to compare (an access log): any later POST may be the re-issue
            facts.reissued = self.requests.post_after(r, r.first_ts)
        facts.later_events_known = self._later_events(r, lk, order, li)
        facts.client_adjusted, facts.last_seen_id = self._adjusted(r, codec, lk)
        if facts.client_adjusted and lk is not None and facts.last_seen_id is not None:
            seen = codec.key(facts.last_seen_id)
            if seen is not None:
                facts.adjusted_first = codec.render(IdKey(seen.prefix, seen.seq + 1), leid)
                facts.adjusted_count = lk.seq - seen.seq
        facts.cursorless_get_after = self._cursor_lost(r)
        if not _is_2xx_stream(r):
            return facts
        data = r.data_events()
        if not data:
            facts.replay_start = "empty"
            facts.empty_how = self._empty_how(r)
            facts.empty_replay = facts.empty_how is not None
            return facts
        first = data[0]
        facts.replay_start = self._start(first, gap, codec, lk, order, li, leid)
        if facts.bd_last_written is not None:
            wk = codec.key(facts.bd_last_written)
            if wk is not None and first.key is not None:
                facts.continues_after_bd = first.key == IdKey(wk.prefix, wk.seq + 1)
            elif facts.bd_last_written in order:
                wi = len(order) - 1 - order[::-1].index(facts.bd_last_written)
                facts.continues_after_bd = (
                    wi + 1 < len(order) and order[wi + 1] == first.sse.id_field
                )
        before_leid = set(order[: li + 1]) if li is not None else set()
        for e in data:
            if lk is not None and e.key is not None and e.key.prefix == lk.prefix:
                facts.duplicates += e.key.seq <= lk.seq
            elif e.sse.id_field in before_leid:
                facts.duplicates += 1
        self._crossings(r, data, facts, codec)
        return facts

    # -- individual judgements -------------------------------------------------------

    @staticmethod
    def _start(
        first: EventRecord,
        gap: GapRecord | None,
        codec: IdCodec,
        lk: IdKey | None,
        order: list[str],
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
        return "older" if first.sse.id_field in order[:li] else "successor"

    @staticmethod
    def _backpressure_w(same_logical: list[StreamRecord]) -> str | None:
        w = None
        for s in same_logical:
            for e in s.events:
                if e.sse.event == BACKPRESSURE_DISCONNECT and e.signal and e.signal.valid:
                    w = e.signal.first
        return w

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
            if s.data_events():
                break
            if s.kind == "resume" and s.last_event_id == r.last_event_id:
                attempt += 1
        return attempt

    def _later_events(
        self, r: StreamRecord, lk: IdKey | None, order: list[str], li: int | None
    ) -> bool:
        """The logical stream is known to have had events after Last-Event-ID while this
        resume was answered: seen on the wire anywhere before its answer ended, or its
        originating request never answered. Events first sent after it (a later resume of a
        polling stream that the server closed on purpose, 2025-11-25) do not count."""
        end = r.exchange.last_body_origin or r.response_origin
        until = end.ts if end is not None else r.first_ts
        for s in self.index.logical(r):
            if s is r:
                continue
            for e in s.data_events():
                if (
                    lk is not None
                    and e.key is not None
                    and e.key.prefix == lk.prefix
                    and e.key.seq > lk.seq
                    and (e.origin is None or e.origin.ts <= until)
                ):
                    return True
        if li is not None and li + 1 < len(order):
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
        own_prefixes = {
            ev.key.prefix
            for s in self.index.logical(r)
            for ev in s.events
            if ev.key is not None and s is not r
        }
        foreign = self.foreign.get((r.exchange.connection_id, r.exchange.index), {})
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
        candidates = [
            s
            for s in self.index.session_before(r)
            if any(e.key is not None and e.key.prefix == lk.prefix for e in s.id_events())
        ]
        if not candidates:
            return False, None
        resumed = candidates[-1].logical
        earlier = self.index.root_before(resumed, r)
        seen = [
            e
            for s in earlier
            for e in s.id_events()
            if e.key is not None and e.key.prefix == lk.prefix
        ]
        last = max(seen, key=lambda e: e.counter.seq)
        # A cursor moved to the end of a range the server declared dropped (`stream-gap`
        # F..L, then Last-Event-ID L) skips nothing the server still had.
        declared = [
            k.seq
            for s in earlier
            for e in s.events
            if e.sse.event == STREAM_GAP and e.signal is not None and e.signal.valid
            for k in [codec.key(e.signal.last or "")]
            if k is not None and k.prefix == lk.prefix and k.seq >= last.counter.seq
        ]
        if declared and lk.seq <= max(declared):
            return False, last.sse.id_field
        return lk.seq > last.counter.seq, last.sse.id_field

    def _cursor_lost(self, r: StreamRecord) -> bool:
        """After this resume failed, the client's next stream request in the session came
        without Last-Event-ID while the original request was still unanswered."""
        failed = (
            r.status is not None and not 200 <= r.status < 300 and r.status not in (404, 410)
        ) or (
            _is_2xx_stream(r)
            and not r.data_events()
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
