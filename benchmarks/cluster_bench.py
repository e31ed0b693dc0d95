"""``scan --cluster local:N`` against ``scan --jobs N`` on the same inputs, end to end.

For logs (an nginx access log and its event log, ``/work/shared/bench/gen_mcp_logs.py``) and
captures (``make_capture.write_capture``) at several sizes, each command is a child process
timed from exec until it has exited and its stdout is read (best of ``--repeat``), exactly as
``scale.py`` times a scan; the JSON lines of every configuration must be byte-identical
(the ``same`` column), or the script exits 1.

    python benchmarks/cluster_bench.py   # logs 1k,2k,4k sessions; captures 25k,50k,100k packets
    python benchmarks/cluster_bench.py --sizes 1,2 --only captures --repeat 2
    python benchmarks/cluster_bench.py --only logs --split 4   # each log rotated into 4 files

``--split N`` cuts the access log and the event log into N rotated files each (a directory
the scan reads as two rotated sets): a cluster scan reads each file in a task of its own.

Configurations: ``--jobs 1`` and ``--jobs 2`` (local worker processes), ``--cluster local:1``
and ``--cluster local:2`` (a LocalCluster started by the scan: its start-up is in the time).
Speed-ups are time(1 worker) / time(2 workers); ``local:2 vs j2`` is the cluster's time over
``--jobs 2``'s. ``client RSS`` is the ``--cluster local:2`` scan process's own peak (its
workers are other processes).
Inputs are cached in ``benchmarks/out/scale/`` (shared with ``scale.py``).
"""

from __future__ import annotations

import argparse
import os
import sys
from datetime import UTC, datetime
from pathlib import Path

from rich.console import Console
from rich.table import Table

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from run import machine, sse_forensics_cmd  # noqa: E402
from scale import (  # noqa: E402
    GEN_MCP_LOGS,
    LOG_FORMAT,
    OUT,
    Measure,
    capture_input,
    log_input,
    measure,
    parse_sizes,
    versions,
)

CONFIGS: dict[str, list[str]] = {
    "jobs 1": ["--jobs", "1"],
    "jobs 2": ["--jobs", "2"],
    "cluster local:1": ["--cluster", "local:1"],
    "cluster local:2": ["--cluster", "local:2"],
}
SCAN_OK = (0, 1)  # 1: the planted incidents are silent corruption


def _seconds(m: Measure) -> str:
    return f"{m.seconds:.2f}" if m.finished and m.seconds == m.seconds else "—"


def _series(
    console: Console,
    title: str,
    inputs: list[tuple[str, float, list[str]]],
    repeat: int,
) -> bool:
    """One table: a row per input, a column per configuration. Returns whether every
    configuration wrote the same bytes on every input."""
    table = Table(title=title, title_justify="left")
    for col in ("input", "MB", *CONFIGS):
        table.add_column(col, justify="left" if col == "input" else "right")
    for col in ("j2 speed-up", "local:2 speed-up", "local:2 vs j2", "MB/s local:2"):
        table.add_column(col, justify="right")
    table.add_column("client RSS", justify="right")
    table.add_column("same", justify="right")
    all_same = True
    for label, mb, args in inputs:
        runs = {
            name: measure(
                [*sse_forensics_cmd(), "scan", *args, "-f", "jsonl", *extra], repeat, ok=SCAN_OK
            )
            for name, extra in CONFIGS.items()
        }
        for name, m in runs.items():
            if not m.finished:
                console.print(f"  {label}, {name}: did not finish: {m.stderr_tail}")
        outputs = {m.stdout for m in runs.values() if m.finished}
        same = len(outputs) == 1 and all(m.finished for m in runs.values())
        all_same &= same
        j1, j2 = runs["jobs 1"].seconds, runs["jobs 2"].seconds
        c1, c2 = runs["cluster local:1"].seconds, runs["cluster local:2"].seconds
        table.add_row(
            label,
            f"{mb:.1f}",
            *(_seconds(m) for m in runs.values()),
            f"{j1 / j2:.2f}x",
            f"{c1 / c2:.2f}x",
            f"{c2 / j2:.2f}x time",
            f"{mb / c2:.1f}",
            f"{runs['cluster local:2'].rss_mb:.0f} MB",
            "yes" if same else "NO",
        )
        console.print(f"  {label}: done", style="dim")
    console.print(table)
    return all_same


def split_logs(access: Path, events: Path, parts: int) -> Path:
    """``access`` and ``events`` cut into ``parts`` rotated files each (oldest
    ``access.log.<parts-1>``, newest ``access.log``), cached beside them."""
    out = access.with_name(f"{access.name}.split{parts}")
    done = out / ".complete"
    if done.exists():
        return out
    out.mkdir(exist_ok=True)
    for src, name in ((access, "access.log"), (events, "events.jsonl")):
        lines = src.read_bytes().splitlines(keepends=True)
        step = -(-len(lines) // parts)
        for k in range(parts):
            newest_first = parts - 1 - k
            target = out / (name if newest_first == 0 else f"{name}.{newest_first}")
            target.write_bytes(b"".join(lines[k * step : (k + 1) * step]))
    done.touch()
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--log-base", type=int, default=1000, help="sessions at 1x (1000)")
    parser.add_argument("--cap-base", type=int, default=25_000, help="packets at 1x (25000)")
    parser.add_argument("--sizes", type=parse_sizes, default=[1, 2, 4], help="multiples (1,2,4)")
    parser.add_argument("--only", choices=("logs", "captures"))
    parser.add_argument("--repeat", type=int, default=1, help="best of K wall times (1)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--split", type=int, default=1, help="log files per log (1)")
    parser.add_argument("--gen-mcp-logs", type=Path, default=GEN_MCP_LOGS)
    args = parser.parse_args(argv)
    console = Console(highlight=False, width=220)
    OUT.mkdir(parents=True, exist_ok=True)
    console.print(
        f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC · {machine()} · load average "
        f"{os.getloadavg()[0]:.1f}\n{versions()}"
    )
    same = True
    if args.only != "captures":
        inputs = []
        for k in args.sizes:
            logs = log_input(args.gen_mcp_logs, args.log_base * k, args.seed)
            paths = [str(logs.access), str(logs.events)]
            label = f"logs {logs.sessions} sessions"
            if args.split > 1:
                paths = [str(split_logs(logs.access, logs.events, args.split))]
                label += f", {2 * args.split} files"
            inputs.append((label, logs.mb, [*paths, "--log-format", LOG_FORMAT]))
        same &= _series(console, "Logs (access + event log), seconds", inputs, args.repeat)
    if args.only != "logs":
        inputs = []
        for k in args.sizes:
            cap = capture_input(args.cap_base * k, args.seed)
            inputs.append((f"capture {cap.packets} packets", cap.mb, [str(cap.pcap)]))
        same &= _series(console, "Captures, seconds", inputs, args.repeat)
    console.print(f"load average at the end {os.getloadavg()[0]:.1f}")
    if not same:
        console.print("[bold]the configurations did not write the same JSON lines[/]")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
