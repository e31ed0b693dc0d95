"""The ``timeline`` ladder as plain data: per session, one :class:`Rung` per line (requests
with ``Last-Event-ID``, statuses, SSE events compressed into ID runs, the gaps the facts
found (docs/profile.md, "Gap signalling"), signals, missing capture bytes, FIN/RST
disconnects, zero windows), the marks the ``resumes`` facts single out (empty and
keep-alive-only replays, resume storms, events replayed from another stream or session),
and the folds (identical consecutive lines with a count, long stretches of plain exchanges,
the middle of a resume storm).

A line is a :class:`Line` of text spans, each with *tones* that say what it is (``quiet``,
``strong``, a verdict…), not how it looks: the terminal renderer
(:mod:`sse_forensics.report.timeline`) maps tones to Rich styles, the HTML report
(:mod:`sse_forensics.report.html`) writes the text. Every captured string goes through
:func:`~sse_forensics.report.escape.printable` before it enters a span.

The records come from the facts layer; only their types are imported from it, so the
renderers do not depend on it (tests/report/test_layers.py).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from sse_forensics.provenance import Origin
from sse_forensics.report.escape import printable
from sse_forensics.report.selection import Selection

if TYPE_CHECKING:
    from sse_forensics.facts.build import Facts
    from sse_forensics.facts.gaps import GapRecord
    from sse_forensics.facts.model import EventRecord, ExchangeRecord, SessionRecord, StreamRecord
    from sse_forensics.reassembly.flows import Connection
    from sse_forensics.reassembly.stream import Direction


@dataclass(frozen=True, slots=True)
class Span:
    """Text and what it is (``tones``, outermost first; none: plain)."""

    text: str
    tones: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Line:
    """One line of text spans; ``tone`` applies to the whole line."""

    spans: tuple[Span, ...] = ()
    tone: str = ""

    @classmethod
    def of(cls, text: str, tone: str = "") -> Line:
        return cls((Span(text),), tone)

    @property
    def plain(self) -> str:
        return "".join(s.text for s in self.spans)

    def add(self, text: str, tone: str = "") -> Line:
        """This line followed by ``text`` (in ``tone`` as well as the line's)."""
        return Line((*self.spans, Span(text, (tone,) if tone else ())), self.tone)

    def then(self, other: Line) -> Line:
        """This line followed by ``other``, whose spans keep ``other``'s line tone."""
        outer = (other.tone,) if other.tone else ()
        return Line((*self.spans, *(Span(s.text, outer + s.tones) for s in other.spans)), self.tone)


def field_value(fields: Sequence[tuple[str, str]], name: str) -> str | None:
    """The first value of header field ``name``; field names are case-insensitive (RFC 9110
    §5.1)."""
    wanted = name.lower()
    return next((value for key, value in fields if key.lower() == wanted), None)


def selected_connections(facts: Facts, selection: Selection) -> set[int] | None:
    """The connections ``--host``/``--port`` select (None: no such filter)."""
    if selection.host is None and selection.port is None:
        return None
    return {
        cid
        for cid, conn in facts.connections.items()
        if selection.on_endpoints(
            (conn.client[0], conn.client[1]), (conn.server[0], conn.server[1])
        )
    }


RungKind = Literal[
    "exchange",
    "request",
    "response",
    "events",
    "event",
    "signal",
    "gap",
    "mark",
    "missing-bytes",
    "response-end",
    "disconnect",
    "zero-window",
    "collapsed",
]
# Consecutive plain (non-event-stream) exchanges beyond this many fold into one line unless
# --all-events: an MCP session is mostly small JSON-RPC POSTs that say little about loss.
MAX_PLAIN_EXCHANGES_SHOWN = 4
# Of a resume storm (the ``resume_storm`` fact), the resumes shown before and after the
# fold: the attempts that make it a storm, and the last one.
STORM_SHOWN_BEFORE = 3
STORM_SHOWN_AFTER = 1
MAX_SESSION_SHOWN = 200  # a session ID is the client's to choose: a hostile one is cut
MAX_METHODS_SHOWN = 2


@dataclass(slots=True)
class ZeroWindowPeriod:
    """The receiver on ``direction`` advertised a zero window (RFC 9293 §3.8.6.1), so its
    peer could not send: a slow consumer, often before a ``backpressure-disconnect``."""

    connection: int
    direction: Direction  # the side whose receive window was zero
    start: Origin
    end: Origin | None  # None: still zero when the capture ended


def zero_window_periods(connection: Connection) -> list[ZeroWindowPeriod]:
    """The zero-window periods the TCP analysis recorded on ``connection`` (window-full
    periods are left out of the ladder: they are short and frequent on fast links)."""
    return [
        ZeroWindowPeriod(connection.id, p.receiver, p.start, p.end)
        for p in connection.windows
        if p.kind == "zero-window"
    ]


@dataclass(slots=True)
class Rung:
    """One line of the ladder. ``exchange``: the (connection, index) it belongs to, if any.
    ``count`` identical consecutive lines folded into this one, the last at ``last``."""

    kind: RungKind
    ts: float | None
    connection: int
    origin: Origin | None
    text: Line
    exchange: tuple[int, int] | None = None
    count: int = 1
    last: Origin | None = None


@dataclass(slots=True)
class SessionLadder:
    session: SessionRecord
    rungs: list[Rung]
    gaps: list[GapRecord]

    @property
    def start(self) -> float | None:
        return next((r.ts for r in self.rungs if r.ts is not None), None)


def id_span(first: str | None, last: str | None, limit: int = 40) -> str:
    """``8–12``, ``8``, or ``8…`` when the end is unknown."""
    if first is None:
        return "?"
    if last is None:
        return f"{printable(first, limit)}…"
    if last == first:
        return printable(first, limit)
    return f"{printable(first, limit)}–{printable(last, limit)}"


def gap_label(gap: GapRecord) -> str:
    """The gap in words, as the ladder and the HTML report show it (plain, unescaped)."""
    if gap.detected_by == "status":
        text = f"✗ {id_span(gap.first, None)} not replayed, signalled by {gap.signal}"
    else:
        if gap.signal is None:
            how = "unsignalled"
        elif gap.signal_late:
            how = f"{gap.signal} came late (after the next data event)"
        else:
            how = f"signalled by {gap.signal}"
        text = f"✗ {id_span(gap.first, gap.last)} dropped, {how}"
    if gap.count is not None:
        text += f" ({gap.count} event{'s' if gap.count != 1 else ''})"
    if gap.reissue is not None:
        text += "; the client re-issued the request"
    if gap.holes:
        text += "; the capture lacks bytes in between"
    return f"{text} → {gap.verdict}"


def _run_label(run: list[EventRecord]) -> str:
    ids = [e.sse.id_field for e in run if e.carries_id]
    n = len(run)
    if not ids:
        return f"{n} event{'s' if n != 1 else ''} without id"
    label = f"{id_span(ids[0], ids[-1])}  ({n} event{'s' if n != 1 else ''}"
    if len(ids) < n:
        label += f", {n - len(ids)} without id"
    return label + ")"


def _event_label(e: EventRecord) -> str:
    ident = f"id {printable(e.sse.id_field, 40)}" if e.carries_id else "no id"
    return f"{ident}  {printable(e.sse.event, 30)}  {printable(e.sse.data, 60)}"


def _gap_rung(
    gap: GapRecord,
    conn: int,
    origin: Origin | None,
    ts: float | None,
    exchange: tuple[int, int] | None = None,
) -> Rung:
    return Rung("gap", ts, conn, origin, Line.of(gap_label(gap), gap.verdict), exchange)


def _event_rungs(s: StreamRecord, gaps: list[GapRecord], all_events: bool) -> list[Rung]:
    """A stream's events as ID runs (or one rung each), its gaps placed where they show:
    before the first event after the gap, or at the signal that alone reveals it."""
    conn = s.connection.id
    key = (s.exchange.connection_id, s.exchange.index)
    before_event: dict[EventRecord, list[GapRecord]] = {}
    at_signal: dict[EventRecord, list[GapRecord]] = {}
    for g in gaps:
        if g.after is not None:
            before_event.setdefault(g.after, []).append(g)
        elif g.signal_event is not None and g.detected_by == "signal":
            at_signal.setdefault(g.signal_event, []).append(g)
    rungs: list[Rung] = []
    run: list[EventRecord] = []

    def flush() -> None:
        if run:
            first = run[0].origin
            ts = first.ts if first else None
            rungs.append(Rung("events", ts, conn, first, Line.of(_run_label(run)), key))
            run.clear()

    for e in s.events:
        ts = e.origin.ts if e.origin else None
        for g in before_event.get(e, []):
            flush()
            rungs.append(_gap_rung(g, conn, e.origin, ts, key))
        if e.kind == "signal":
            flush()
            payload = printable(e.sse.data, 80)
            text = Line.of(f"⚑ {printable(e.sse.event, 40)} {payload}", "signal")
            rungs.append(Rung("signal", ts, conn, e.origin, text, key))
            rungs.extend(_gap_rung(g, conn, e.origin, ts, key) for g in at_signal.get(e, []))
        elif all_events:
            tone = "quiet" if e.kind in ("priming", "close", "other") else ""
            text = Line.of(_event_label(e), tone)
            rungs.append(Rung("event", ts, conn, e.origin, text, key))
        elif e.kind in ("data", "other"):
            run.append(e)
        else:
            flush()
            label = f"prime {printable(e.sse.id_field, 40)}" if e.kind == "priming" else "close"
            rungs.append(Rung("event", ts, conn, e.origin, Line.of(label, "quiet"), key))
    flush()
    return rungs


def rpc_methods(ex: ExchangeRecord) -> str:
    """The JSON-RPC methods the request body called (``tools/call``, or ``tools/call +2``
    for a batch), "" for none."""
    methods = [printable(c.method or "?", 40) for c in ex.calls]
    if not methods:
        return ""
    shown = ", ".join(methods[:MAX_METHODS_SHOWN])
    return shown + (f" +{len(methods) - MAX_METHODS_SHOWN}" if len(methods) > 2 else "")


def _request_text(ex: ExchangeRecord, stream: StreamRecord | None) -> Line:
    if ex.request is None:
        return Line.of("→ (request not captured)", "quiet")
    text = Line.of(f"→ {printable(ex.request.method, 20)} {printable(ex.request.target, 80)}")
    methods = rpc_methods(ex)
    if methods:
        text = text.add(f"  {methods}", "strong")
    leid = field_value(ex.request.headers, "Last-Event-ID")
    if leid is not None:
        text = text.add(f"  Last-Event-ID: {printable(leid, 40)}", "strong")
    if stream is not None and stream.kind == "resume":
        text = text.add("  (resume)", "quiet")
    return text


def _response_text(ex: ExchangeRecord) -> Line:
    resp = ex.response
    if resp is None:
        return Line.of("← (no response captured)", "quiet")
    if resp.status == 0:
        return Line.of(f"← (response head not captured: {printable(resp.reason, 60)})", "quiet")
    ctype = field_value(resp.headers, "Content-Type")
    tone = "alarm" if resp.status == 410 else ("warning" if resp.status >= 400 else "")
    text = Line.of(f"← {resp.status} {printable(resp.reason, 40)}", tone)
    if ctype:
        text = text.add(f"  {printable(ctype, 60)}", "quiet")
    return text


def _count(n: int, what: str) -> str:
    return f"{n} {what}{'s' if n != 1 else ''}"


def resume_marks(
    row: dict[str, Any], ex: ExchangeRecord, owner: str | None = None, in_storm: bool = False
) -> list[Line]:
    """What the ``resumes`` facts single out about one resume (docs/facts.md, "resumes"),
    one line each: an empty or keep-alive-only replay, a resume storm (``in_storm``: a
    later attempt of a storm ``resume_storm`` started), replayed events that were first
    sent on another stream or to another session (``owner``: the session the first of
    them was first sent to)."""
    marks: list[Line] = []
    leid = printable(row.get("last_event_id"), 40)
    if row.get("empty_replay"):
        ended = str(row.get("empty_how") or "").startswith("ended")
        if ex.comments:
            how = f"keep-alives only ({_count(ex.comments, 'comment')}), no event"
            how += ", then the stream ended" if ended else ""
        else:
            how = "the stream ended without an event" if ended else "no event"
        known = "; the stream had events after it" if row.get("later_events_known") else ""
        tone = "severe" if row.get("later_events_known") else "warning"
        marks.append(Line.of(f"∅ empty replay after Last-Event-ID {leid}: {how}{known}", tone))
    attempt = row.get("cursor_attempt") or 0
    if row.get("resume_storm") or in_storm:
        marks.append(
            Line.of(
                f"↻ resume storm: attempt {attempt} from Last-Event-ID {leid} with no data "
                "in between",
                "alarm",
            )
        )
    crossed = row.get("crossed_sessions") or 0
    if crossed:
        first = printable(row.get("crossed_first"), 40)
        whose = f"session {printable(owner, MAX_SESSION_SHOWN)}" if owner else "another session"
        marks.append(
            Line.of(
                f"⇄ cross-session leak: {_count(crossed, 'replayed event')} first sent to "
                f"{whose} (first: {first})",
                "severe",
            )
        )
    crossed_streams = row.get("crossed_streams") or 0
    if crossed_streams:
        first = printable(row.get("crossed_first"), 40)
        marks.append(
            Line.of(
                f"⇄ {_count(crossed_streams, 'replayed event')} first sent on another stream "
                f"of this session (first: {first})",
                "fault",
            )
        )
    return marks


def _exchange_rungs(
    ex: ExchangeRecord,
    stream: StreamRecord | None,
    gaps: list[GapRecord],
    all_events: bool,
    resume: dict[str, Any] | None = None,
    owner: str | None = None,
    in_storm: bool = False,
) -> list[Rung]:
    conn = ex.connection_id
    key = (ex.connection_id, ex.index)
    req_origin = ex.request.origin if ex.request else None
    resp_origin = ex.response.origin if ex.response else None
    if stream is None and not ex.holes:
        # A plain exchange (JSON, 202): one line, request and answer together.
        text = _request_text(ex, None).add("  ").then(_response_text(ex))
        origin = req_origin or resp_origin
        return [Rung("exchange", origin.ts if origin else None, conn, origin, text, key)]
    rungs: list[Rung] = []
    if req_origin is not None or ex.request is None:
        ts = req_origin.ts if req_origin else (resp_origin.ts if resp_origin else None)
        rungs.append(Rung("request", ts, conn, req_origin, _request_text(ex, stream), key))
    resp_ts = resp_origin.ts if resp_origin else None
    rungs.append(Rung("response", resp_ts, conn, resp_origin, _response_text(ex), key))
    if resume is not None:
        rungs.extend(
            Rung("mark", resp_ts, conn, resp_origin, mark, key)
            for mark in resume_marks(resume, ex, owner, in_storm)
        )
    mine = [g for g in gaps if g.stream is stream] if stream is not None else []
    for g in mine:
        if g.after is None and g.detected_by == "status":
            rungs.append(_gap_rung(g, conn, resp_origin, resp_ts, key))
    if stream is not None:
        rungs.extend(_event_rungs(stream, mine, all_events))
    for hole in ex.holes:
        at = hole.span.after or hole.span.before
        text = Line.of(f"⚠ {hole.span.describe()}", "missing")
        rungs.append(Rung("missing-bytes", at.ts if at else None, conn, at, text, key))
    # A log records a response, not how its bytes ended: nothing to say about its end.
    ended_early = ex.response_end_reason not in (None, "log") and not ex.response_complete
    if stream is not None and ended_early:
        end = ex.response_end or ex.last_body_origin
        text = Line.of(f"⏹ response ended early: {printable(ex.response_end_reason, 80)}", "quiet")
        rungs.append(Rung("response-end", end.ts if end else None, conn, end, text, key))
    return rungs


def _connection_rungs(conn: Connection) -> list[Rung]:
    rungs: list[Rung] = []
    if conn.mid_stream:
        text = Line.of("connection picked up mid-stream (no SYN in the capture)", "quiet")
        rungs.append(Rung("disconnect", conn.first.ts, conn.id, conn.first, text))
    for side, origin in sorted(conn.fin.items(), key=lambda kv: kv[1].ts):
        rungs.append(Rung("disconnect", origin.ts, conn.id, origin, Line.of(f"⏏ FIN from {side}")))
    if conn.rst is not None:
        text = Line.of(f"⏏ RST from {conn.rst_by or 'unknown side'}", "strong")
        rungs.append(Rung("disconnect", conn.rst.ts, conn.id, conn.rst, text))
    for z in zero_window_periods(conn):
        until = f" until frame {z.end.number}" if z.end is not None else " until the capture ended"
        text = Line.of(f"⏸ zero window on the {z.direction} side{until}", "missing")
        rungs.append(Rung("zero-window", z.start.ts, conn.id, z.start, text))
    return rungs


def _collapse_plain(rungs: list[Rung]) -> list[Rung]:
    """Fold long stretches of plain exchanges into first, "… N more", last."""
    out: list[Rung] = []
    stretch: list[Rung] = []

    def flush() -> None:
        if len(stretch) <= max(MAX_PLAIN_EXCHANGES_SHOWN, 2):  # folding must hide one
            out.extend(stretch)
        else:
            hidden = stretch[1:-1]
            label = f"… {len(hidden)} more plain exchanges (--all-events shows them)"
            out.append(stretch[0])
            out.append(
                Rung("collapsed", hidden[0].ts, hidden[0].connection, None, Line.of(label, "quiet"))
            )
            out.append(stretch[-1])
        stretch.clear()

    for r in rungs:
        if r.kind == "exchange":
            stretch.append(r)
        else:
            flush()
            out.append(r)
    flush()
    return out


def _collapse_storms(rungs: list[Rung], storms: list[list[tuple[int, int]]]) -> list[Rung]:
    """Fold the middle of each resume storm (``storms``: the exchanges of each, in time
    order) into one line: the attempts that made it a storm and the last one stay. A
    connection that carried nothing but folded resumes folds with them (its FIN/RST)."""
    hidden: set[tuple[int, int]] = set()
    labels: dict[tuple[int, int], str] = {}
    for storm in storms:
        middle = storm[STORM_SHOWN_BEFORE : len(storm) - STORM_SHOWN_AFTER]
        if len(middle) < 2:  # folding must hide more than it adds
            continue
        hidden.update(middle)
        labels[middle[0]] = (
            f"… ↻ {len(middle)} more resumes of this storm, answered like those around "
            "them (--all-events shows them)"
        )
    if not hidden:
        return rungs
    shown_conns = {r.exchange[0] for r in rungs if r.exchange and r.exchange not in hidden}
    hidden_conns = {k[0] for k in hidden} - shown_conns
    out: list[Rung] = []
    for r in rungs:
        if r.exchange in labels and r.kind in ("request", "response", "exchange"):
            label = labels.pop(r.exchange)
            out.append(Rung("collapsed", r.ts, r.connection, None, Line.of(label, "quiet")))
        if r.exchange in hidden or (r.exchange is None and r.connection in hidden_conns):
            continue
        out.append(r)
    return out


def fold_repeats(rungs: list[Rung]) -> list[Rung]:
    """Identical consecutive lines of one connection as one line with a count ("⚠ 441
    server bytes missing (snaplen) ×60"), its frame column showing first–last."""
    out: list[Rung] = []
    for r in rungs:
        prev = out[-1] if out else None
        if (
            prev is not None
            and prev.kind == r.kind
            and prev.connection == r.connection
            and prev.text.plain == r.text.plain
            and r.kind not in ("request", "response", "exchange")
        ):
            prev.count += r.count
            prev.last = r.last or r.origin
            continue
        out.append(Rung(r.kind, r.ts, r.connection, r.origin, r.text, r.exchange, r.count, r.last))
    for r in out:
        if r.count > 1:
            r.text = r.text.add(f" ×{r.count}", "strong")
    return out


def _resume_rows(facts: Facts) -> dict[str, dict[str, Any]]:
    """The ``resumes`` fact rows by the key of the resume's own stream."""
    table = facts.tables.get("resumes")
    if table is None or not table.height or "response_stream" not in table.columns:
        return {}
    return {row["response_stream"]: row for row in table.iter_rows(named=True)}


class _FirstSent:
    """Which session an event ID was first sent to, over every stream of the records
    (indexed once, on the first question: only a cross-session leak asks)."""

    def __init__(self, facts: Facts) -> None:
        self.facts = facts
        self._first: dict[str, tuple[float, str]] | None = None

    def session(self, event_id: str | None, other_than: str) -> str | None:
        if event_id is None:
            return None
        if self._first is None:
            self._first = {}
            for s in self.facts.streams:
                for e in s.events:
                    if not e.carries_id or e.origin is None or e.sse.id_field is None:
                        continue
                    seen = self._first.get(e.sse.id_field)
                    if seen is None or e.origin.ts < seen[0]:
                        self._first[e.sse.id_field] = (e.origin.ts, s.session.session_id)
        seen = self._first.get(event_id)
        return seen[1] if seen is not None and seen[1] != other_than else None


def _storms(
    mine: list[ExchangeRecord], streams: dict[tuple[int, int], StreamRecord], resumes: dict
) -> list[list[tuple[int, int]]]:
    """Per storm (consecutive resumes of one stream from one Last-Event-ID with no data in
    between, ``cursor_attempt`` counting them), its exchanges in order."""
    storms: dict[tuple[str, str], list[tuple[int, int]]] = {}
    for ex in mine:
        stream = streams.get((ex.connection_id, ex.index))
        row = resumes.get(stream.key) if stream is not None else None
        if row is None or not row.get("cursor_attempt"):
            continue
        cursor = (str(row.get("stream")), str(row.get("last_event_id")))
        if row["cursor_attempt"] == 1:
            storms.pop(cursor, None)
        storms.setdefault(cursor, []).append((ex.connection_id, ex.index))
    return [keys for keys in storms.values() if len(keys) >= STORM_SHOWN_BEFORE]


def session_ladders(
    facts: Facts,
    session: str | None = None,
    all_events: bool = False,
    selection: Selection | None = None,
) -> list[SessionLadder]:
    """Per session (in order of first activity), its requests, responses, event runs, gaps,
    signals, missing-bytes spans and disconnects, sorted by capture time; only what
    ``selection`` selects (a session with nothing selected has no ladder)."""
    selection = selection or Selection(session)
    session = selection.session or session
    wanted_conns = selected_connections(facts, selection)
    streams = {(s.exchange.connection_id, s.exchange.index): s for s in facts.streams}
    resumes = _resume_rows(facts)
    # Where each storm began: (stream, Last-Event-ID) → the attempt ``resume_storm`` marks.
    storm_start = {
        (row.get("stream"), row.get("last_event_id")): row.get("cursor_attempt") or 0
        for row in resumes.values()
        if row.get("resume_storm")
    }
    first_sent = _FirstSent(facts)
    connections = facts.connections
    exchanges: dict[str, list[ExchangeRecord]] = {}
    records: dict[str, SessionRecord] = {}
    for ex in facts.exchanges:
        rec = facts.exchange_sessions.get((ex.connection_id, ex.index))
        if rec is None or (session is not None and rec.session_id != session):
            continue
        if wanted_conns is not None and ex.connection_id not in wanted_conns:
            continue
        exchanges.setdefault(rec.session_id, []).append(ex)
        records[rec.session_id] = rec
    ladders: list[SessionLadder] = []
    for session_id, mine in exchanges.items():
        gaps = [g for g in facts.gaps if g.stream.session.session_id == session_id]
        rungs: list[Rung] = []
        for ex in mine:
            stream = streams.get((ex.connection_id, ex.index))
            resume = resumes.get(stream.key) if stream is not None else None
            owner = None
            if resume is not None and resume.get("crossed_sessions"):
                owner = first_sent.session(resume.get("crossed_first"), session_id)
            in_storm = False
            if resume is not None:
                began = storm_start.get((resume.get("stream"), resume.get("last_event_id")))
                in_storm = began is not None and (resume.get("cursor_attempt") or 0) > began
            rungs.extend(_exchange_rungs(ex, stream, gaps, all_events, resume, owner, in_storm))
        for conn_id in sorted({ex.connection_id for ex in mine}):
            if conn_id in connections:
                rungs.extend(_connection_rungs(connections[conn_id]))
        rungs.sort(key=lambda r: (r.ts is None, r.ts or 0.0))  # stable: stream order kept
        rungs = [r for r in rungs if selection.in_time(r.ts)]
        if not rungs:
            continue
        if not all_events:
            rungs = _collapse_storms(_collapse_plain(rungs), _storms(mine, streams, resumes))
            rungs = fold_repeats(rungs)
        ladders.append(SessionLadder(records[session_id], rungs, gaps))
    ladders.sort(key=lambda lad: (lad.start is None, lad.start or 0.0))
    return ladders


def _place(origin: Origin, many_sources: bool) -> str:
    if many_sources:
        return f"{printable(os.path.basename(origin.source), 40)}:{origin.number}"
    return str(origin.number)


def frame_label(rung: Rung, many_sources: bool) -> str:
    """The frame (or log line) of ``rung``, ``first–last`` for a folded one; prefixed with
    the file's name when the session spans several files."""
    if rung.origin is None:
        return ""
    label = _place(rung.origin, many_sources)
    if rung.last is not None and rung.last != rung.origin:
        if rung.last.source == rung.origin.source:
            label += f"–{rung.last.number}"
        else:
            label += f"–{_place(rung.last, True)}"
    return label


def frame_header(rungs: list[Rung], many_sources: bool) -> str:
    kinds = {r.origin.kind for r in rungs if r.origin is not None}
    header = {frozenset({"line"}): "log line", frozenset({"frame"}): "frame"}.get(
        frozenset(kinds), "frame/line" if kinds else "frame"
    )
    return f"file:{header}" if many_sources else header


def session_title(ladder: SessionLadder) -> Line:
    """``session <id>  (<scheme> IDs, <scope> counter, protocol <version>)``."""
    rec = ladder.session
    inferred = "inferred, " if rec.inferred else ""
    version = printable(rec.protocol_version or "?", 20)
    return (
        Line.of("session ", "strong")
        .add(printable(rec.session_id, MAX_SESSION_SHOWN))
        .add(
            f"  ({inferred}{rec.id_scheme} IDs, {rec.counter_scope} counter, protocol {version})",
            "quiet",
        )
    )
