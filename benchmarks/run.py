"""Benchmark ``sse-forensics scan`` against tshark and tcpflow on one synthetic capture.

Generates the capture with ``make_capture.py`` into ``benchmarks/out/`` (git-ignored), then
times each tool once as a subprocess (wall time; peak RSS of that very child via
``os.wait4``), checks that sse-forensics found exactly the planted gaps and every SSE event
written, and prints a table. Absolute times are noisy on a shared machine; the ratios
between tools are what to compare.

    python benchmarks/run.py [--packets N] [--seed S] [--keep]

Exit status: 0 if sse-forensics found what was planted, 1 if not.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from rich.console import Console
from rich.table import Table

HERE = Path(__file__).resolve().parent
OUT = HERE / "out"
sys.path.insert(0, str(HERE))

from make_capture import SERVER_PORT, Truth, write_capture  # noqa: E402


@dataclass(slots=True)
class Run:
    tool: str
    seconds: float
    peak_rss_mb: float
    returncode: int
    found: str = ""
    expected: str = ""


def measure(tool: str, cmd: list[str], stdout: Path) -> Run:
    """Run ``cmd`` with stdout to a file; ``os.wait4`` gives this child's own rusage, so each
    tool's peak RSS is its own (RUSAGE_CHILDREN would report the maximum over all children)."""
    with stdout.open("wb") as out:
        started = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.PIPE)
        stderr = proc.stderr.read() if proc.stderr else b""
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.perf_counter() - started
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.stderr:
        proc.stderr.close()
    run = Run(tool, seconds, usage.ru_maxrss / 1024, proc.returncode)  # ru_maxrss: KiB on Linux
    if stderr.strip():
        run.found = "stderr: " + stderr.decode(errors="replace").strip().splitlines()[-1][:80]
    return run


def sse_forensics_cmd() -> list[str]:
    exe = shutil.which("sse-forensics")
    return [exe] if exe else [sys.executable, "-m", "sse_forensics"]


def flat_finding(line: bytes | str) -> dict:
    """A JSONL finding (an ECS document, docs/findings.md) as the flat dict the checks here
    read: its ``sse_forensics`` fields, ``rule`` (the rule id) and ``message``."""
    doc = json.loads(line)
    return {**doc["sse_forensics"], "rule": doc["rule"]["id"], "message": doc["message"]}


def gap_key(finding: dict) -> tuple[str, str, str]:
    gap = finding.get("gap") or {}
    return (finding.get("session_id") or "", str(gap.get("first")), str(gap.get("last")))


def check_sse_forensics(
    pcap: Path, findings_jsonl: Path, truth: Truth, console: Console
) -> tuple[bool, str]:
    """Compare the findings with the planted gaps and the event count with the events
    written; print expected vs found and return (all as planted?, what was found). The event
    count needs a second, untimed run.

    Each planted gap must be reported once by ``missing-stream-gap`` as silent corruption;
    other rules may report the same gap from another angle (e.g. the client kept consuming),
    but no finding may name a gap that was not planted."""
    findings = [flat_finding(line) for line in findings_jsonl.read_text().splitlines() if line]
    live_jumps = [
        gap_key(f)
        for f in findings
        if f["rule"] == "missing-stream-gap" and f["classification"] == "silent_corruption"
    ]
    found = set(live_jumps)
    planted = {(g.session_id, g.first, g.last) for g in truth.planted_gaps}
    unplanted = [f for f in findings if gap_key(f) not in planted]
    doc = json.loads(
        subprocess.run(
            [*sse_forensics_cmd(), "scan", str(pcap), "--format", "json"],
            capture_output=True,
            check=False,
        ).stdout
    )
    events = doc["stats"]["events"]
    by_rule = Counter(f"{f['rule']} ({f['classification']})" for f in findings)
    console.print(
        f"planted gaps: expected {len(planted)}, missing-stream-gap found {len(found & planted)}"
        f" of them; {len(findings)} findings in all, {len(unplanted)} on no planted gap"
    )
    for rule, count in sorted(by_rule.items()):
        console.print(f"  {count:4d}  {rule}")
    for session_id, first, last in sorted(planted - found):
        console.print(f"  MISSED   session {session_id} IDs {first}..{last}")
    for f in unplanted:
        console.print(f"  EXTRA    {f['rule']} {f['classification']}: {f['message'][:140]}")
    console.print(f"SSE events: expected {truth.events}, found {events}")
    if doc["errors"]:
        console.print(f"input problems reported: {len(doc['errors'])} (first: {doc['errors'][0]})")
    ok = (
        found == planted
        and len(live_jumps) == len(planted)
        and not unplanted
        and events == truth.events
    )
    summary = f"{len(live_jumps)} gaps ({len(findings)} findings), {events} events"
    return ok, summary + ("" if ok else " (MISMATCH)")


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    system = f"{platform.system()} {platform.release()}"
    return f"{cpu}, {os.cpu_count()} cores, {system}, Python {platform.python_version()}"


def tool_version(cmd: list[str]) -> str:
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=30)
    except OSError:
        return "?"
    text = (done.stdout or done.stderr).strip().splitlines()
    return text[0] if text else "?"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--packets", type=int, default=200_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--keep", action="store_true", help="keep the capture and tool output")
    args = parser.parse_args(argv)
    console = Console(highlight=False, width=150)
    OUT.mkdir(exist_ok=True)
    pcap = OUT / f"mcp-{args.packets}-seed{args.seed}.pcap"

    started = time.perf_counter()
    truth = write_capture(pcap, args.packets, args.seed)
    size_mb = pcap.stat().st_size / 1e6
    console.print(
        f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC · {machine()}\n"
        f"capture: {pcap.name}, {truth.packets} packets, {size_mb:.1f} MB, "
        f"{truth.connections} connections, {truth.http_responses} complete HTTP responses, "
        f"{truth.events} SSE events, {len(truth.planted_gaps)} planted gaps, "
        f"{truth.streams_cut} streams cut; generated in {time.perf_counter() - started:.1f} s"
    )

    runs: list[Run] = []
    out_files: list[Path] = [pcap, pcap.with_name(pcap.name + ".truth.json")]

    findings = OUT / "sse-forensics.jsonl"
    out_files.append(findings)
    sse = measure(
        "sse-forensics",
        [*sse_forensics_cmd(), "scan", str(pcap), "--format", "jsonl"],
        findings,
    )
    ok, sse.found = check_sse_forensics(pcap, findings, truth, console)
    sse.expected = f"{len(truth.planted_gaps)} gaps, {truth.events} events"
    runs.append(sse)

    if shutil.which("tshark"):
        responses = OUT / "tshark.txt"
        out_files.append(responses)
        run = measure(
            "tshark",
            [
                "tshark",
                "-r",
                str(pcap),
                "-Y",
                "http.response",
                "-T",
                "fields",
                "-e",
                "http.response.code",
                "-d",
                f"tcp.port=={SERVER_PORT},http",
            ],
            responses,
        )
        run.found = f"{len(responses.read_text().split())} HTTP responses"
        run.expected = f"{truth.http_responses} responses"
        runs.append(run)
        console.print(f"tshark: {tool_version(['tshark', '--version'])}")
    else:
        console.print("tshark not found: skipped")

    if shutil.which("tcpflow"):
        flows = OUT / "tcpflow"
        shutil.rmtree(flows, ignore_errors=True)
        flows.mkdir()
        log = OUT / "tcpflow.txt"
        out_files.append(log)
        run = measure("tcpflow", ["tcpflow", "-r", str(pcap), "-o", str(flows)], log)
        flow_files = [p for p in flows.iterdir() if p.is_file() and p.suffix != ".xml"]
        flow_mb = sum(p.stat().st_size for p in flow_files) / 1e6
        run.found = f"{len(flow_files)} flow files, {flow_mb:.1f} MB"
        run.expected = f"{2 * truth.connections} flows"
        runs.append(run)
        console.print(f"tcpflow: {tool_version(['tcpflow', '-V'])}")
    else:
        console.print("tcpflow not found: skipped (apt-get install tcpflow)")

    table = Table(title=f"{truth.packets} packets, {size_mb:.1f} MB")
    for col in (
        "tool",
        "seconds",
        "packets/s",
        "MB/s",
        "peak RSS MB",
        "time vs sse-forensics",
        "found",
        "expected",
    ):
        table.add_column(col, justify="left" if col in ("tool", "found", "expected") else "right")
    for run in runs:
        table.add_row(
            run.tool,
            f"{run.seconds:.2f}",
            f"{truth.packets / run.seconds:,.0f}",
            f"{size_mb / run.seconds:.1f}",
            f"{run.peak_rss_mb:.0f}",
            f"{run.seconds / sse.seconds:.2f}x",
            run.found + ("" if run.returncode in (0, 1) else f" (exit {run.returncode})"),
            run.expected,
        )
    console.print(table)

    if not args.keep:
        for path in out_files:
            path.unlink(missing_ok=True)
        shutil.rmtree(OUT / "tcpflow", ignore_errors=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
