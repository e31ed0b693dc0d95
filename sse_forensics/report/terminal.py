"""The summary a person reads in ten seconds: what was scanned, the incidents and their
verdicts ("1 lost range in 1 session, 3 findings"), the findings by severity, read errors,
and the command that drills into each bad session; and the progress bar a long scan shows
meanwhile."""

from __future__ import annotations

import os
import shlex
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from typing import cast

from rich import box
from rich.console import Console
from rich.progress import BarColumn, Progress, TaskID, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from sse_forensics.coverage import Coverage, coverage
from sse_forensics.coverage import summary as unjudged_summary
from sse_forensics.engine.finding import Finding
from sse_forensics.engine.incidents import group_incidents, summarize
from sse_forensics.errors import ReadError
from sse_forensics.limits import CapHit, describe
from sse_forensics.report.escape import printable
from sse_forensics.result import ScanProgress, ScanResult
from sse_forensics.verdicts import (
    CONTRACT_VIOLATION,
    EXPECTED_GAP,
    INDETERMINATE,
    SILENT_CORRUPTION,
)

VERDICT_STYLE = {
    SILENT_CORRUPTION: "bold red",
    INDETERMINATE: "magenta",
    CONTRACT_VIOLATION: "cyan",
    EXPECTED_GAP: "yellow",
}
MAX_ERRORS_SHOWN = 20
MAX_DRILL_COMMANDS = 10
# A bar appears only once a scan has run this long: short scans print nothing extra.
PROGRESS_DELAY_S = 1.0
PROGRESS_REFRESH_S = 0.1
STAGE_LABEL = {
    "read": "reading captures",
    "logs": "reading logs",
    "facts": "building facts",
    "rules": "running rules",
}


def shell_word(value: str) -> str:
    """``value`` as one exact bash word that is safe to print: ``shlex.quote`` when every
    character is printable, else ANSI-C quoting (``$'\\x1b…'``) so the escaped form a
    terminal shows still names the real session when pasted. No argument can hold NUL: a
    value with one is given in its escaped form, which ``timeline --session`` resolves
    (:func:`~sse_forensics.report.escape.find_session`)."""
    if "\0" in value:
        return shlex.quote(printable(value, None))
    if all(printable(ch, None) == ch for ch in value):
        return shlex.quote(value)
    out = []
    for ch in value:
        code = ord(ch)
        if ch in "\\'":
            out.append("\\" + ch)
        elif printable(ch, None) != ch:
            out.append(f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")
        else:
            out.append(ch)
    return "$'" + "".join(out) + "'"


def _gap_span(f: Finding) -> str:
    gap = f.gap
    first, last = gap.get("first"), gap.get("last")
    if first is None and last is None:
        return ""
    span = (
        printable(first, 24)
        if last in (None, first)
        else (f"{printable(first, 24)}–{printable(last, 24)}")
    )
    if gap.get("count") is not None:
        span += f" ({gap['count']})"
    return span


def _frames(f: Finding) -> str:
    """Where to look: capture frame numbers, then log line numbers (``L12``)."""
    # Evidence entries hold ints or None there (facts.model.evidence).
    places = sorted({n for e in f.evidence if isinstance(n := e.get("frame"), int)})
    lines = sorted({n for e in f.evidence if isinstance(n := e.get("line"), int)})
    shown = [str(x) for x in places] + [f"L{x}" for x in lines]
    # ", ": a narrow column wraps between two numbers, never inside one.
    return ", ".join(shown[:6]) + ("…" if len(shown) > 6 else "")


# Below this width the seven-column table squeezes out the gap and evidence columns.
WIDE_TABLE = 110


def print_findings_compact(console: Console, findings: list[Finding]) -> None:
    """Two lines per finding, for narrow terminals: what, then where."""
    for n, f in enumerate(findings, 1):
        head = Text(f"{n:>3}. ")
        head.append(f.classification, style=VERDICT_STYLE.get(f.classification, ""))
        head.append(f"  {f.severity}  ")
        head.append(f.rule, style="bold")
        console.print(head)
        where = f"     session {printable(f.session_id, MAX_SESSION_SHOWN)}  gap {_gap_span(f)}"
        frames = _frames(f)
        console.print(Text(where + (f"  at {frames}" if frames else ""), style="dim"))


# The session column is never narrower than this; wider, up to the whole ID, when the
# terminal leaves room beside the other columns.
MIN_SESSION_WIDTH = 24
MAX_SESSION_SHOWN = 200  # a session ID is the client's to choose: a hostile one is cut
# The gap and frames columns get at least this much when a wide session column is sized.
ROOM_FOR_GAP_AND_FRAMES = 40


def _session_width(findings: list[Finding], width: int | None) -> int:
    longest = max((len(printable(f.session_id, MAX_SESSION_SHOWN)) for f in findings), default=0)
    if width is None:
        return max(MIN_SESSION_WIDTH, longest)
    fixed = sum(  # "#", verdict, severity and rule columns, plus two spaces between columns
        max((len(x) for x in values), default=0) + 2
        for values in (
            [str(len(findings))],
            [f.classification for f in findings],
            [f.severity for f in findings],
            [f.rule for f in findings],
        )
    )
    room = width - fixed - ROOM_FOR_GAP_AND_FRAMES
    return max(MIN_SESSION_WIDTH, min(longest, room))


def findings_table(findings: list[Finding], width: int | None = None) -> Table:
    """Most alarming first (the engine's order: verdict, then severity, then time). Session
    IDs are whole when ``width`` (the terminal's) leaves room for them, else cut with "…"
    (the drill-down commands below the table always name them whole)."""
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, header_style="bold")
    for col in ("#", "verdict", "severity", "rule"):
        table.add_column(col, no_wrap=True, justify="right" if col == "#" else "left")
    # Long session IDs must not squeeze the gap and evidence columns out of a narrow terminal.
    table.add_column(
        "session", overflow="ellipsis", max_width=_session_width(findings, width), no_wrap=True
    )
    table.add_column("gap (events)", overflow="fold", min_width=8)
    table.add_column("frames/lines", overflow="fold", min_width=8)
    for n, f in enumerate(findings, 1):
        table.add_row(
            str(n),
            Text(f.classification, style=VERDICT_STYLE.get(f.classification, "")),
            f.severity,
            f.rule,
            Text(printable(f.session_id, MAX_SESSION_SHOWN)),
            Text(_gap_span(f)),
            Text(_frames(f), style="dim"),
        )
    return table


MAX_UNJUDGED_SHOWN = 20


def print_unjudged(console: Console, cov: Coverage) -> None:
    """What could not be judged, and why: never an "all clear" for what was not seen."""
    console.print(Text(unjudged_summary(cov), style="bold magenta"))
    for item in cov.items(MAX_UNJUDGED_SHOWN):
        where = f" (frame {item.frame})" if item.frame is not None else ""
        where = f" (line {item.line})" if item.line is not None else where
        console.print(Text(f"  {printable(item.sentence(), 400)}{where}"), soft_wrap=True)
    if cov.count > MAX_UNJUDGED_SHOWN:
        console.print(f"  … and {cov.count - MAX_UNJUDGED_SHOWN} more (see --format json)")
    if cov.missing_bytes()[0]:
        console.print(
            Text(
                "  Capture again with -s 0 and a bigger buffer (docs/capturing.md); "
                "capture loss is never server loss.",
                style="dim",
            )
        )


def print_caps(console: Console, caps: list[CapHit]) -> None:
    """The caps that fired (docs/limits.md): which, where, what was cut, what it costs."""
    if not caps:
        return
    console.print(
        Text(
            f"{len(caps)} cap(s) fired (the scan went on; --limit changes them):",
            style="bold yellow",
        )
    )
    for hit in caps[:MAX_ERRORS_SHOWN]:
        where = (
            f" frame {hit.frame}"
            if hit.frame is not None
            else (f" line {hit.line}" if hit.line is not None else "")
        )
        times = f" ({hit.count} times)" if hit.count > 1 else ""
        console.print(
            Text(
                f"  {hit.cap}={describe(hit.cap, hit.limit)}: {printable(hit.source, 120)}{where}: "
                f"{printable(hit.cut, 200)}{times}; {printable(hit.consequence, 200)}"
            )
        )
    if len(caps) > MAX_ERRORS_SHOWN:
        console.print(f"  … and {len(caps) - MAX_ERRORS_SHOWN} more (see --format json)")


def _read_summary(result: ScanResult) -> str:
    parts = []
    if result.stats.frames or not result.log_stats:
        stats = result.stats
        parts.append(f"{stats.frames} frames, {stats.tcp_connections} TCP connections")
    if result.log_stats:
        parts.append(f"{result.log_stats.get('lines', 0)} log lines")
    return ", ".join(parts)


def _error_place(err: ReadError) -> tuple[str, int | None]:
    if err.frame is not None:
        return "frame", err.frame
    if err.line is not None:
        return "line", err.line
    return "", None


def fold_errors(errors: list[ReadError]) -> list[str]:
    """One line per input problem, ``source frame N: what``; a run of consecutive problems
    that say the same thing about the same file folds into one line with its first and
    last place and a count (``frames 12–80: … ×60``)."""
    lines: list[str] = []
    run: list[ReadError] = []

    def flush() -> None:
        if not run:
            return
        first, last = run[0], run[-1]
        kind, start = _error_place(first)
        _, end = _error_place(last)
        where = ""
        if start is not None and len(run) > 1 and end != start:
            where = f" {kind}s {start}–{end}"
        elif start is not None:
            where = f" {kind} {start}"
        count = f" ×{len(run)}" if len(run) > 1 else ""
        what = printable(first.what, 200)
        lines.append(f"{printable(first.source, 120)}{where}: {what}{count}")
        run.clear()

    for err in errors:
        if run and (err.source, err.what, _error_place(err)[0]) != (
            run[0].source,
            run[0].what,
            _error_place(run[0])[0],
        ):
            flush()
        run.append(err)
    flush()
    return lines


def _ignored_line(ignored: list[str]) -> str:
    """One line for the documents and source files of a scanned directory."""
    kinds = sorted({os.path.splitext(p)[1].lower() or "(no suffix)" for p in ignored})
    return (
        f"Not evidence, not read: {len(ignored)} document/source file(s) "
        f"({printable(', '.join(kinds), 120)}; listed in --format json)."
    )


def render_scan(console: Console, result: ScanResult) -> None:
    incidents = group_incidents(result.findings)
    counts = Counter(i.classification for i in incidents)
    affected = {f.session_id for f in result.findings if f.session_id}
    console.print(
        Text.assemble(
            ("Scanned ", "bold"),
            f"{len(result.inputs)} file(s): {_read_summary(result)}, "
            f"{result.stats.sessions} session(s) ({len(affected)} with findings), "
            f"{result.stats.streams} event stream(s), "
            f"{result.stats.events} SSE events, {result.stats.resumes} resume(s).",
        )
    )
    if result.ignored:
        console.print(Text(_ignored_line(result.ignored), style="dim"))
    if incidents:  # "3 lost ranges in 2 sessions, 7 findings"
        console.print(Text.assemble(("Incidents: ", "bold"), summarize(incidents).text()))
    verdicts = Text("Verdicts: ", style="bold")  # of the incidents, not of the findings
    for name in (SILENT_CORRUPTION, INDETERMINATE, CONTRACT_VIOLATION, EXPECTED_GAP):
        verdicts.append(f"{name} {counts.get(name, 0)}", style=VERDICT_STYLE[name])
        verdicts.append("  ")
    console.print(verdicts)

    if result.findings:
        console.print()
        if console.width >= WIDE_TABLE:
            console.print(findings_table(result.findings, console.width))
        else:
            print_findings_compact(console, result.findings)
        console.print()
    cov = coverage(result)
    if not result.findings and cov.complete:
        console.print("No findings: no lost events were detected.", style="green")
    elif not result.findings and not cov.nothing_judged:
        console.print("No lost events were detected in what could be judged.", style="green")
    if not cov.complete:
        print_unjudged(console, cov)

    print_caps(console, result.caps)
    problems = [e for e in result.errors if not isinstance(e, CapHit)]
    if problems:
        console.print(Text(f"{len(problems)} input problem(s) (the scan went on):", style="bold"))
        lines = fold_errors(problems)
        for line in lines[:MAX_ERRORS_SHOWN]:
            console.print(Text(f"  {line}"))
        if len(lines) > MAX_ERRORS_SHOWN:
            console.print(f"  … and {len(lines) - MAX_ERRORS_SHOWN} more (see --format json)")
    for msg in result.rule_errors:
        console.print(Text(f"rule not loaded: {printable(msg, 300)}", style="red"))
    if result.not_judged:
        lacking = sorted(
            # a list of evidence kinds (engine.evaluate.not_judged_rules)
            {k for item in result.not_judged for k in cast("list[str]", item["lacks"])}
        )
        rules = ", ".join(str(item["rule"]) for item in result.not_judged)
        console.print(
            Text(
                f"Not judged for lack of evidence ({', '.join(lacking)}; a capture has it): "
                f"{rules}",
                style="yellow",
            )
        )

    bad = sorted(
        {f.session_id for f in result.findings if f.classification != EXPECTED_GAP and f.session_id}
    )
    inputs = " ".join(shell_word(p) for p in result.paths)
    if bad:
        console.print(Text("Drill into a session:", style="bold"))
        for session_id in bad[:MAX_DRILL_COMMANDS]:
            # soft_wrap: a command stays on one line, whole, for copy and paste.
            command = f"  sse-forensics timeline {inputs} --session {shell_word(session_id)}"
            console.print(Text(command), soft_wrap=True)
        if len(bad) > MAX_DRILL_COMMANDS:
            console.print(Text(f"  … and {len(bad) - MAX_DRILL_COMMANDS} more session(s)"))
    if result.findings:
        console.print(
            Text(
                f"Details: sse-forensics scan {inputs} --format json  ·  "
                f"ticket-ready file: sse-forensics report {inputs} -o incident.html",
                style="dim",
            ),
            soft_wrap=True,
        )


class _DelayedBar:
    """A rich progress bar that appears once the scan has run :data:`PROGRESS_DELAY_S`."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.started = time.monotonic()
        self.last_update = 0.0
        self.progress: Progress | None = None
        self.task: TaskID | None = None

    def __call__(self, stage: str, done: int, total: int) -> None:
        now = time.monotonic()
        if now - self.started < PROGRESS_DELAY_S:
            return
        if self.progress is None:
            self.progress = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                TextColumn("{task.percentage:>3.0f}%"),
                TimeElapsedColumn(),
                console=self.console,
                transient=True,
            )
            self.progress.start()
            self.task = self.progress.add_task(STAGE_LABEL.get(stage, stage), total=total)
        elif (
            stage in ("read", "logs")
            and done < total
            and now - self.last_update < PROGRESS_REFRESH_S
        ):
            return  # one call per frame: only redraw a few times a second
        self.last_update = now
        assert self.task is not None
        self.progress.update(
            self.task, description=STAGE_LABEL.get(stage, stage), completed=done, total=total
        )

    def stop(self) -> None:
        if self.progress is not None:
            self.progress.stop()


@contextmanager
def scan_progress(console: Console, enabled: bool) -> Iterator[ScanProgress | None]:
    """A ``progress`` callback for :func:`~sse_forensics.pipeline.scan_paths`, or ``None``
    when disabled (``--quiet``, or output that is not a terminal)."""
    if not enabled or not console.is_terminal:
        yield None
        return
    bar = _DelayedBar(console)
    try:
        yield bar
    finally:
        bar.stop()
