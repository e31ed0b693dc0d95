"""The summary a person reads in ten seconds: what was scanned, verdict counts, the
findings by severity, read errors, and the command that drills into each bad session."""

from __future__ import annotations

import shlex
from collections import Counter

from rich.console import Console
from rich.text import Text

from sse_forensics.pipeline import ScanResult
from sse_forensics.report.escape import printable
from sse_forensics.verdicts import EXPECTED_GAP, INDETERMINATE, SILENT_CORRUPTION

VERDICT_STYLE = {
    SILENT_CORRUPTION: "bold red",
    INDETERMINATE: "magenta",
    EXPECTED_GAP: "yellow",
}
MAX_ERRORS_SHOWN = 20


def render_scan(console: Console, result: ScanResult) -> None:
    tables = result.facts.tables
    counts = Counter(f.classification for f in result.findings)
    console.print(
        Text.assemble(
            ("Scanned ", "bold"),
            f"{len(result.inputs)} file(s): {result.reassembly.frames} frames, "
            f"{len(result.reassembly.connections)} TCP connections, "
            f"{tables['sessions'].height} session(s), {tables['streams'].height} event stream(s), "
            f"{tables['events'].height} SSE events, {tables['resumes'].height} resume(s).",
        )
    )
    verdicts = Text("Verdicts: ")
    for name in (SILENT_CORRUPTION, INDETERMINATE, EXPECTED_GAP):
        verdicts.append(f"{name} {counts.get(name, 0)}", style=VERDICT_STYLE[name])
        verdicts.append("  ")
    console.print(verdicts)

    if result.findings:
        console.print()
        for n, f in enumerate(result.findings, 1):
            gap = f.gap
            span = f"{printable(gap.get('first'), 30)}..{printable(gap.get('last'), 30)}"
            if gap.get("count") is not None:
                span += f" ({gap['count']} events)"
            frames = sorted({e.get("frame") for e in f.evidence if e.get("frame") is not None})
            shown = ",".join(str(x) for x in frames[:8]) + ("…" if len(frames) > 8 else "")
            head = Text(f"{n:>3}. ")
            head.append(f.classification, style=VERDICT_STYLE.get(f.classification, ""))
            head.append(f"  {f.severity}  ")
            head.append(f.rule, style="bold")
            head.append(f"  gap {span}")
            if shown:
                head.append(f"  frames {shown}", style="dim")
            console.print(head)
            console.print(Text(f"     {printable(f.message, 600)}"))
        console.print()
    else:
        console.print("No findings: no lost events were detected.", style="green")

    if result.errors:
        console.print(f"[bold]{len(result.errors)} input problem(s)[/bold] (the scan went on):")
        for err in result.errors[:MAX_ERRORS_SHOWN]:
            where = (
                f"frame {err.frame}"
                if err.frame is not None
                else (f"line {err.line}" if err.line is not None else "")
            )
            console.print(
                Text(f"  {printable(err.source, 120)} {where}: {printable(err.what, 200)}")
            )
        if len(result.errors) > MAX_ERRORS_SHOWN:
            console.print(
                f"  … and {len(result.errors) - MAX_ERRORS_SHOWN} more (see --format json)"
            )
    for msg in result.rule_errors:
        console.print(Text(f"rule not loaded: {printable(msg, 300)}", style="red"))

    bad = sorted(
        {f.session_id for f in result.findings if f.classification != EXPECTED_GAP and f.session_id}
    )
    if bad:
        console.print("Drill into a session:")
        inputs = " ".join(shlex.quote(p) for p in result.paths)
        for session_id in bad[:10]:
            session = shlex.quote(printable(session_id, 120))
            console.print(Text(f"  sse-forensics timeline {inputs} --session {session}"))
