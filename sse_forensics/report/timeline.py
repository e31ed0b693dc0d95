"""``timeline`` in the terminal: per session, the ladder (:mod:`sse_forensics.report.ladder`)
as a Rich table — time, connection, frame (or log line) and what happened — with its
title and a count of its gaps by verdict. This module only chooses how things look: the
tones of the view model become Rich styles here."""

from __future__ import annotations

import os
from collections import Counter
from typing import TYPE_CHECKING

from rich.console import Console
from rich.table import Table
from rich.text import Text

from sse_forensics.report.escape import printable
from sse_forensics.report.ladder import (
    Line,
    frame_header,
    frame_label,
    session_ladders,
    session_title,
)
from sse_forensics.report.selection import Selection
from sse_forensics.verdicts import (
    CONTRACT_VIOLATION,
    EXPECTED_GAP,
    INDETERMINATE,
    SILENT_CORRUPTION,
)

if TYPE_CHECKING:
    from sse_forensics.facts.build import Facts

# How each tone of the ladder looks (a gap's tone is its verdict).
TONE_STYLE = {
    "quiet": "dim",
    "strong": "bold",
    "signal": "cyan",
    "missing": "magenta",
    "warning": "yellow",
    "alarm": "bold yellow",
    "fault": "red",
    "severe": "bold red",
    SILENT_CORRUPTION: "bold red",
    INDETERMINATE: "magenta",
    CONTRACT_VIOLATION: "cyan",
    EXPECTED_GAP: "yellow",
}
CONNECTION_STYLES = ("cyan", "green", "blue", "bright_magenta", "bright_yellow", "bright_cyan")


def _style(tones: tuple[str, ...]) -> str:
    return " ".join(TONE_STYLE[t] for t in tones if TONE_STYLE.get(t))


def rich_line(line: Line) -> Text:
    """``line`` as a Rich ``Text`` (its spans appended as text, never parsed as markup)."""
    text = Text(style=_style((line.tone,)))
    for span in line.spans:
        text.append(span.text, style=_style(span.tones) or None)
    return text


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
        title = rich_line(session_title(ladder))
        if len(sources) == 1:
            title.append(
                f"  in {printable(os.path.basename(next(iter(sources))), 80)}", style="dim"
            )
        console.print(title, overflow="fold")
        table = Table(show_edge=False, box=None)
        table.add_column("time", justify="right", no_wrap=True)
        table.add_column("conn", justify="right", no_wrap=True)
        table.add_column(frame_header(ladder.rungs, many), justify="right", no_wrap=True)
        table.add_column("what happened", justify="left", overflow="fold")
        for r in ladder.rungs:
            style = CONNECTION_STYLES[r.connection % len(CONNECTION_STYLES)]
            table.add_row(
                f"+{r.ts - t0:.3f}s" if r.ts is not None else "",
                Text(str(r.connection), style=style),
                frame_label(r, many),
                rich_line(r.text),
            )
        console.print(table)
        if ladder.gaps:
            counts = Counter(g.verdict for g in ladder.gaps)
            summary = Text(f"{len(ladder.gaps)} gap(s): ")
            summary.append(", ".join(f"{n} {v}" for v, n in counts.most_common()))
            console.print(summary)
        console.print()
