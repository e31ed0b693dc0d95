"""What was reassembled, in time order: every request, response and SSE event with its
session, stream, ID, frame and timestamp (``timeline``)."""

from __future__ import annotations

from collections.abc import Iterator

import orjson
from rich.console import Console
from rich.table import Table
from rich.text import Text

from sse_forensics.facts.build import Facts
from sse_forensics.facts.gaps import GapRecord
from sse_forensics.facts.model import StreamRecord
from sse_forensics.reassembly.capture import Reassembly
from sse_forensics.reassembly.http_events import header
from sse_forensics.report.escape import printable
from sse_forensics.verdicts import EXPECTED_GAP, SILENT_CORRUPTION


def _where(origin) -> dict:
    if origin is None:
        return {"source": None, "frame": None, "ts": None}
    return {"source": origin.source, origin.kind: origin.number, "ts": origin.ts}


def timeline_records(
    reassembly: Reassembly, facts: Facts, session: str | None = None
) -> Iterator[dict]:
    """Records sorted by timestamp: ``request``, ``response``, ``event``, ``missing-bytes``,
    ``response-end``."""
    streams = {(s.exchange.connection_id, s.exchange.index): s for s in facts.streams}
    records: list[dict] = []
    for ex in reassembly.exchanges:
        rec = facts.exchange_sessions.get((ex.connection_id, ex.index))
        session_id = rec.session_id if rec else None
        if session is not None and session_id != session:
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
    records.sort(key=lambda r: (r["ts"] is None, r["ts"] or 0.0, r["connection"], r["exchange"]))
    yield from records


def timeline_jsonl(records: Iterator[dict]) -> bytes:
    return b"".join(orjson.dumps(r) + b"\n" for r in records)


def _runs(stream: StreamRecord, gaps: list[GapRecord]) -> Text:
    """Compress a stream's events into ID runs with its gaps in between."""
    text = Text()
    by_after = {id(g.after): g for g in gaps if g.stream is stream and g.after is not None}
    run: list[str] = []

    def flush() -> None:
        if run:
            text.append(
                printable(run[0], 40)
                if len(run) == 1
                else f"{printable(run[0], 40)}–{printable(run[-1], 40)}"
            )
            text.append(f" ({len(run)})  ", style="dim")
            run.clear()

    for e in stream.events:
        gap = by_after.get(id(e))
        if gap is not None:
            flush()
            style = (
                "yellow"
                if gap.verdict == EXPECTED_GAP
                else "bold red"
                if gap.verdict == SILENT_CORRUPTION
                else "magenta"
            )
            how = gap.signal or "unsignalled"
            text.append(
                f"✗ {printable(gap.first, 40)}–{printable(gap.last, 40)} dropped, {how} ",
                style=style,
            )
        if e.kind == "signal":
            flush()
            text.append(f"⚑ {e.sse.event} {printable(e.sse.data, 60)}  ", style="cyan")
        elif e.kind == "data" and e.carries_id:
            run.append(e.sse.id_field)
        elif e.kind == "priming":
            flush()
            text.append(f"prime {printable(e.sse.id_field, 40)}  ", style="dim")
    flush()
    if stream.exchange.holes:
        text.append(f"  ⚠ {len(stream.exchange.holes)} missing-bytes span(s)", style="magenta")
    return text


def render_timeline(console: Console, facts: Facts, session: str | None = None) -> None:
    """Per session, its streams in time order with requests, status, Last-Event-ID and
    compressed event-ID runs."""
    by_session: dict[str, list[StreamRecord]] = {}
    for s in facts.streams:
        by_session.setdefault(s.session.session_id, []).append(s)
    if not by_session:
        console.print("No text/event-stream responses or resumes found.")
        return
    for session_id, streams in by_session.items():
        if session is not None and session_id != session:
            continue
        rec = streams[0].session
        title = Text("session ", style="bold")
        title.append(printable(session_id, 80))
        inferred = "inferred, " if rec.inferred else ""
        version = printable(rec.protocol_version or "?", 20)
        title.append(
            f"  ({inferred}{rec.id_scheme} IDs, {rec.counter_scope} counter, protocol {version})",
            style="dim",
        )
        table = Table(title=title, show_lines=False, expand=False)
        for col in ("time", "conn", "request", "status", "Last-Event-ID", "events"):
            table.add_column(col, overflow="fold")
        t0 = streams[0].first_ts
        for s in streams:
            req = s.exchange.request
            table.add_row(
                f"+{s.first_ts - t0:.3f}s",
                str(s.connection.id),
                Text(printable(f"{req.method} {req.target}", 60) if req else "(not captured)"),
                str(s.status or "-"),
                Text(printable(s.last_event_id, 40) if s.last_event_id is not None else ""),
                _runs(s, facts.gaps),
            )
        console.print(table)
