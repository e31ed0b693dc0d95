"""What was reassembled, in time order (``timeline``).

- ``--format jsonl``: every request, response, SSE event, missing-bytes span and response end
  with its session, stream, ID, frame and timestamp (:func:`timeline_records`; a stable
  record format).
- the terminal view: per session a *ladder* (:func:`session_ladders`) of its connections and
  streams: requests with ``Last-Event-ID``, statuses, SSE events compressed into ID runs, the
  gaps the facts found (PROFILE.md, "Gap signalling"), signals, missing capture bytes and
  FIN/RST disconnects; marks on the resumes the ``resumes`` facts single out (empty and
  keep-alive-only replays, resume storms, events replayed from another stream or session);
  the JSON-RPC method of each request. Identical consecutive lines fold into one with a
  count, and the middle of a resume storm folds into one line.

Both take a :class:`~sse_forensics.report.selection.Selection` (``--session``, ``--since``,
``--until``, ``--host``, ``--port``).
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Literal

import orjson
from rich.console import Console
from rich.table import Table
from rich.text import Text

from sse_forensics.facts.build import Facts
from sse_forensics.facts.gaps import GapRecord
from sse_forensics.facts.model import EventRecord, ExchangeRecord, SessionRecord, StreamRecord
from sse_forensics.provenance import Origin
from sse_forensics.reassembly.flows import Connection
from sse_forensics.reassembly.http_events import header
from sse_forensics.reassembly.stream import Direction
from sse_forensics.report.escape import printable
from sse_forensics.report.selection import Selection
from sse_forensics.verdicts import (
    CONTRACT_VIOLATION,
    EXPECTED_GAP,
    INDETERMINATE,
    SILENT_CORRUPTION,
)


def _where(origin) -> dict:
    if origin is None:
        return {"source": None, "frame": None, "ts": None}
    return {"source": origin.source, origin.kind: origin.number, "ts": origin.ts}


def _selected_connections(facts: Facts, selection: Selection) -> set[int] | None:
    """The connections ``--host``/``--port`` select (None: no such filter)."""
    if selection.host is None and selection.port is None:
        return None
    return {
        cid
        for cid, conn in facts.connections.items()
        if selection.on_endpoints(tuple(conn.client), tuple(conn.server))
    }


def timeline_records(
    facts: Facts, session: str | None = None, selection: Selection | None = None
) -> Iterator[dict]:
    """Records sorted by timestamp: ``request``, ``response``, ``event``, ``missing-bytes``,
    ``response-end``; only those ``selection`` selects."""
    selection = selection or Selection(session)
    session = selection.session or session
    wanted_conns = _selected_connections(facts, selection)
    streams = {(s.exchange.connection_id, s.exchange.index): s for s in facts.streams}
    records: list[dict] = []
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
                    "last_event_id": header(ex.request.headers, "Last-Event-ID"),
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
                    "content_type": header(ex.response.headers, "Content-Type"),
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


def timeline_jsonl(records: Iterator[dict]) -> bytes:
    return b"".join(orjson.dumps(r) + b"\n" for r in records)


# --- The ladder: one session's connections and streams in time order ---------------------

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
VERDICT_STYLE = {
    SILENT_CORRUPTION: "bold red",
    INDETERMINATE: "magenta",
    CONTRACT_VIOLATION: "cyan",
    EXPECTED_GAP: "yellow",
}
CONNECTION_STYLES = ("cyan", "green", "blue", "bright_magenta", "bright_yellow", "bright_cyan")


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
    text: Text
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
    at: EventRecord | Origin | None,
    ts: float | None,
    exchange: tuple[int, int] | None = None,
) -> Rung:
    origin = at.origin if isinstance(at, EventRecord) else at
    style = VERDICT_STYLE.get(gap.verdict, "")
    return Rung("gap", ts, conn, origin, Text(gap_label(gap), style=style), exchange)


def _event_rungs(s: StreamRecord, gaps: list[GapRecord], all_events: bool) -> list[Rung]:
    """A stream's events as ID runs (or one rung each), its gaps placed where they show:
    before the first event after the gap, or at the signal that alone reveals it."""
    conn = s.connection.id
    key = (s.exchange.connection_id, s.exchange.index)
    before_event: dict[int, list[GapRecord]] = {}
    at_signal: dict[int, list[GapRecord]] = {}
    for g in gaps:
        if g.after is not None:
            before_event.setdefault(id(g.after), []).append(g)
        elif g.signal_event is not None and g.detected_by == "signal":
            at_signal.setdefault(id(g.signal_event), []).append(g)
    rungs: list[Rung] = []
    run: list[EventRecord] = []

    def flush() -> None:
        if run:
            first = run[0].origin
            ts = first.ts if first else None
            rungs.append(Rung("events", ts, conn, first, Text(_run_label(run)), key))
            run.clear()

    for e in s.events:
        ts = e.origin.ts if e.origin else None
        for g in before_event.get(id(e), []):
            flush()
            rungs.append(_gap_rung(g, conn, e, ts, key))
        if e.kind == "signal":
            flush()
            payload = printable(e.sse.data, 80)
            text = Text(f"⚑ {printable(e.sse.event, 40)} {payload}", style="cyan")
            rungs.append(Rung("signal", ts, conn, e.origin, text, key))
            rungs.extend(_gap_rung(g, conn, e, ts, key) for g in at_signal.get(id(e), []))
        elif all_events:
            style = "dim" if e.kind in ("priming", "close", "other") else ""
            text = Text(_event_label(e), style=style)
            rungs.append(Rung("event", ts, conn, e.origin, text, key))
        elif e.kind in ("data", "other"):
            run.append(e)
        else:
            flush()
            label = f"prime {printable(e.sse.id_field, 40)}" if e.kind == "priming" else "close"
            rungs.append(Rung("event", ts, conn, e.origin, Text(label, style="dim"), key))
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


def _request_text(ex: ExchangeRecord, stream: StreamRecord | None) -> Text:
    if ex.request is None:
        return Text("→ (request not captured)", style="dim")
    text = Text(f"→ {printable(ex.request.method, 20)} {printable(ex.request.target, 80)}")
    methods = rpc_methods(ex)
    if methods:
        text.append(f"  {methods}", style="bold")
    leid = header(ex.request.headers, "Last-Event-ID")
    if leid is not None:
        text.append(f"  Last-Event-ID: {printable(leid, 40)}", style="bold")
    if stream is not None and stream.kind == "resume":
        text.append("  (resume)", style="dim")
    return text


def _response_text(ex: ExchangeRecord) -> Text:
    resp = ex.response
    if resp is None:
        return Text("← (no response captured)", style="dim")
    if resp.status == 0:
        return Text(f"← (response head not captured: {printable(resp.reason, 60)})", style="dim")
    ctype = header(resp.headers, "Content-Type")
    style = "bold yellow" if resp.status == 410 else ("yellow" if resp.status >= 400 else "")
    text = Text(f"← {resp.status} {printable(resp.reason, 40)}", style=style)
    if ctype:
        text.append(f"  {printable(ctype, 60)}", style="dim")
    return text


def _count(n: int, what: str) -> str:
    return f"{n} {what}{'s' if n != 1 else ''}"


def resume_marks(
    row: dict[str, Any], ex: ExchangeRecord, owner: str | None = None, in_storm: bool = False
) -> list[Text]:
    """What the ``resumes`` facts single out about one resume (docs/facts.md, "resumes"),
    one line each: an empty or keep-alive-only replay, a resume storm (``in_storm``: a
    later attempt of a storm ``resume_storm`` started), replayed events that were first
    sent on another stream or to another session (``owner``: the session the first of
    them was first sent to)."""
    marks: list[Text] = []
    leid = printable(row.get("last_event_id"), 40)
    if row.get("empty_replay"):
        ended = str(row.get("empty_how") or "").startswith("ended")
        if ex.comments:
            how = f"keep-alives only ({_count(ex.comments, 'comment')}), no event"
            how += ", then the stream ended" if ended else ""
        else:
            how = "the stream ended without an event" if ended else "no event"
        known = "; the stream had events after it" if row.get("later_events_known") else ""
        style = "bold red" if row.get("later_events_known") else "yellow"
        marks.append(Text(f"∅ empty replay after Last-Event-ID {leid}: {how}{known}", style=style))
    attempt = row.get("cursor_attempt") or 0
    if row.get("resume_storm") or in_storm:
        marks.append(
            Text(
                f"↻ resume storm: attempt {attempt} from Last-Event-ID {leid} with no data "
                "in between",
                style="bold yellow",
            )
        )
    crossed = row.get("crossed_sessions") or 0
    if crossed:
        first = printable(row.get("crossed_first"), 40)
        whose = f"session {printable(owner, MAX_SESSION_SHOWN)}" if owner else "another session"
        marks.append(
            Text(
                f"⇄ cross-session leak: {_count(crossed, 'replayed event')} first sent to "
                f"{whose} (first: {first})",
                style="bold red",
            )
        )
    crossed_streams = row.get("crossed_streams") or 0
    if crossed_streams:
        first = printable(row.get("crossed_first"), 40)
        marks.append(
            Text(
                f"⇄ {_count(crossed_streams, 'replayed event')} first sent on another stream "
                f"of this session (first: {first})",
                style="red",
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
        text = _request_text(ex, None)
        text.append("  ")
        text.append_text(_response_text(ex))
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
        text = Text(f"⚠ {hole.span.describe()}", style="magenta")
        rungs.append(Rung("missing-bytes", at.ts if at else None, conn, at, text, key))
    # A log records a response, not how its bytes ended: nothing to say about its end.
    ended_early = ex.response_end_reason not in (None, "log") and not ex.response_complete
    if stream is not None and ended_early:
        end = ex.response_end or ex.last_body_origin
        text = Text(f"⏹ response ended early: {printable(ex.response_end_reason, 80)}", style="dim")
        rungs.append(Rung("response-end", end.ts if end else None, conn, end, text, key))
    return rungs


def _connection_rungs(conn: Connection) -> list[Rung]:
    rungs: list[Rung] = []
    if conn.mid_stream:
        text = Text("connection picked up mid-stream (no SYN in the capture)", style="dim")
        rungs.append(Rung("disconnect", conn.first.ts, conn.id, conn.first, text))
    for side, origin in sorted(conn.fin.items(), key=lambda kv: kv[1].ts):
        rungs.append(Rung("disconnect", origin.ts, conn.id, origin, Text(f"⏏ FIN from {side}")))
    if conn.rst is not None:
        text = Text(f"⏏ RST from {conn.rst_by or 'unknown side'}", style="bold")
        rungs.append(Rung("disconnect", conn.rst.ts, conn.id, conn.rst, text))
    for z in zero_window_periods(conn):
        until = f" until frame {z.end.number}" if z.end is not None else " until the capture ended"
        text = Text(f"⏸ zero window on the {z.direction} side{until}", style="magenta")
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
                Rung(
                    "collapsed", hidden[0].ts, hidden[0].connection, None, Text(label, style="dim")
                )
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
            out.append(Rung("collapsed", r.ts, r.connection, None, Text(label, style="dim")))
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
        out.append(
            Rung(r.kind, r.ts, r.connection, r.origin, r.text.copy(), r.exchange, r.count, r.last)
        )
    for r in out:
        if r.count > 1:
            r.text.append(f" ×{r.count}", style="bold")
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
    wanted_conns = _selected_connections(facts, selection)
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


def _frame_header(rungs: list[Rung], many_sources: bool) -> str:
    kinds = {r.origin.kind for r in rungs if r.origin is not None}
    header = {frozenset({"line"}): "log line", frozenset({"frame"}): "frame"}.get(
        frozenset(kinds), "frame/line" if kinds else "frame"
    )
    return f"file:{header}" if many_sources else header


def _title(ladder: SessionLadder) -> Text:
    rec = ladder.session
    title = Text("session ", style="bold")
    title.append(printable(rec.session_id, MAX_SESSION_SHOWN))
    inferred = "inferred, " if rec.inferred else ""
    version = printable(rec.protocol_version or "?", 20)
    title.append(
        f"  ({inferred}{rec.id_scheme} IDs, {rec.counter_scope} counter, protocol {version})",
        style="dim",
    )
    return title


def render_timeline(
    console: Console,
    facts: Facts,
    session: str | None = None,
    all_events: bool = False,
    selection: Selection | None = None,
) -> None:
    """Per session, a ladder of its connections and streams in time order (rich tables;
    every captured string goes through :func:`printable` into a ``Text``, never markup).
    Time, connection and frame numbers are never broken across lines; the session title
    is whole (wrapped, not cut, on a narrow terminal)."""
    selection = selection or Selection(session)
    session = selection.session or session
    ladders = session_ladders(facts, session, all_events, selection)
    if not ladders:
        if session is not None and session not in facts.sessions:
            known = ", ".join(printable(s, 60) for s in sorted(facts.sessions)[:10])
            console.print(Text(f"No session {printable(session, 80)!s} in this capture."))
            if known:
                console.print(Text(f"Sessions: {known}"))
        elif not selection.everything:
            console.print(Text(f"Nothing selected ({printable(selection.describe(), 300)})."))
        else:
            console.print("No HTTP exchanges found.")
        return
    for ladder in ladders:
        t0 = ladder.start or 0.0
        # A session usually lives in one file: name it once, frames are then plain numbers.
        sources = {r.origin.source for r in ladder.rungs if r.origin is not None}
        many = len(sources) > 1
        title = _title(ladder)
        if len(sources) == 1:
            title.append(
                f"  in {printable(os.path.basename(next(iter(sources))), 80)}", style="dim"
            )
        console.print(title, overflow="fold")
        table = Table(show_edge=False, box=None)
        table.add_column("time", justify="right", no_wrap=True)
        table.add_column("conn", justify="right", no_wrap=True)
        table.add_column(_frame_header(ladder.rungs, many), justify="right", no_wrap=True)
        table.add_column("what happened", justify="left", overflow="fold")
        for r in ladder.rungs:
            style = CONNECTION_STYLES[r.connection % len(CONNECTION_STYLES)]
            table.add_row(
                f"+{r.ts - t0:.3f}s" if r.ts is not None else "",
                Text(str(r.connection), style=style),
                frame_label(r, many),
                r.text,
            )
        console.print(table)
        if ladder.gaps:
            counts = Counter(g.verdict for g in ladder.gaps)
            summary = Text(f"{len(ladder.gaps)} gap(s): ")
            summary.append(", ".join(f"{n} {v}" for v, n in counts.most_common()))
            console.print(summary)
        console.print()
