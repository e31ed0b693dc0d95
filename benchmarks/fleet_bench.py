"""One Dask worker against two on a fleet's logs: issue 10's ``--cluster local:1`` vs
``--cluster local:2`` figure on the 2.45 GB log set, the whole command timed.

The set is ``--hosts`` copies of ``scale.py``'s ``--big`` log pair (1 GB access log, 200 MB
event log): host 0 is the pair itself (symlinks), host k a copy whose session IDs (and the
event log's stream names) start with another letter, so that no two hosts share a session
(``benchmarks/out/scale/x<hosts>/``, cached). The configurations run alternately, ABBA,
``--pairs`` times; each run is a child process timed from exec until it has exited, and the
peak RSS of the scan's process and of each of its descendants (the LocalCluster's workers)
is sampled from ``/proc`` every 0.1 s. Every run must write the same JSON lines, or the
script exits 1.

    python benchmarks/fleet_bench.py                  # 2 hosts, 2 ABBA rounds (~30 min here)
    python benchmarks/fleet_bench.py --pairs 1
    python benchmarks/fleet_bench.py --from A.log E.jsonl --hosts 2   # a smaller pair
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from rich.console import Console
from rich.table import Table

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from run import machine, sse_forensics_cmd  # noqa: E402
from scale import GEN_MCP_LOGS, LOG_FORMAT, OUT, big_inputs, versions  # noqa: E402

CONFIGS = ("local:1", "local:2")
SCAN_OK = (0, 1)  # 1: the planted incidents are silent corruption
# A session ID in an access line (the quoted field before $request_time) and in an event
# log record (its session and stream): the first character is the host's letter.
_ACCESS_SESSION = re.compile(rb'"[0-9a-f]([0-9a-f]{31})" (\S+)$', re.MULTILINE)
_EVENT_NAMES = re.compile(rb'"(session|stream)":"[0-9a-f]')


def host_copy(src: Path, dest: Path, letter: str, events: bool) -> None:
    """``src`` with every session ID's first character replaced by ``letter`` (cached)."""
    if dest.exists():
        return
    part = dest.with_name(dest.name + ".partial")
    mark = letter.encode()
    with src.open("rb") as fin, part.open("wb") as fout:
        while chunk := fin.readlines(1 << 24):
            text = b"".join(chunk)
            if events:
                text = _EVENT_NAMES.sub(lambda m: b'"' + m.group(1) + b'":"' + mark, text)
            else:
                text = _ACCESS_SESSION.sub(
                    lambda m: b'"' + mark + m.group(1) + b'" ' + m.group(2), text
                )
            fout.write(text)
    part.rename(dest)


def fleet(access: Path, events: Path, hosts: int) -> Path:
    """The directory of ``hosts`` hosts' log pairs (see the module docstring)."""
    out = OUT / f"x{hosts}" if access.name.startswith("big-") else OUT / f"x{hosts}-{access.stem}"
    out.mkdir(parents=True, exist_ok=True)
    for k in range(hosts):
        name = "h0" if k == 0 else f"h{chr(ord('g') + k - 1)}"
        a, e = out / f"{name}.access.log", out / f"{name}.events.jsonl"
        if k == 0:
            for link, target in ((a, access), (e, events)):
                if not link.exists():
                    link.symlink_to(os.path.relpath(target, out))
            continue
        letter = chr(ord("g") + k - 1)
        host_copy(access, a, letter, events=False)
        host_copy(events, e, letter, events=True)
    return out


@dataclass
class Run:
    config: str
    seconds: float = 0.0
    returncode: int = 0
    client_mb: float = 0.0
    workers_mb: list[float] = field(default_factory=list)
    digest: str = ""


def _rss_mb(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def _descendants(pid: int) -> list[int]:
    out = []
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as f:
                for child in f.read().split():
                    out.append(int(child))
                    out.extend(_descendants(int(child)))
    except OSError:
        pass
    return out


def run_once(config: str, paths: list[str]) -> Run:
    """The scan of ``paths`` on ``--cluster config``, timed; peaks sampled every 0.1 s."""
    cmd = [*sse_forensics_cmd(), "scan", *paths, "--log-format", LOG_FORMAT, "-f", "jsonl"]
    cmd += ["--cluster", config]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    run = Run(config)
    peaks: dict[int, float] = {}
    started = time.perf_counter()
    child = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, cwd=HERE.parent
    )
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            for pid in [child.pid, *_descendants(child.pid)]:
                peaks[pid] = max(peaks.get(pid, 0.0), _rss_mb(pid))
            time.sleep(0.1)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    assert child.stdout is not None
    digest = hashlib.sha256()
    while chunk := child.stdout.read(1 << 20):
        digest.update(chunk)
    run.returncode = child.wait()
    run.seconds = time.perf_counter() - started
    done.set()
    sampler.join()
    run.digest = digest.hexdigest()[:16]
    run.client_mb = peaks.pop(child.pid, 0.0)
    # The workers: the largest descendants (a resource tracker is a few MB).
    run.workers_mb = sorted((mb for mb in peaks.values() if mb > 50), reverse=True)
    return run


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hosts", type=int, default=2, help="copies of the log pair (2)")
    parser.add_argument("--pairs", type=int, default=2, help="ABBA rounds (2)")
    parser.add_argument("--from", dest="source", nargs=2, type=Path, metavar=("ACCESS", "EVENTS"))
    parser.add_argument("--gen-mcp-logs", type=Path, default=GEN_MCP_LOGS)
    args = parser.parse_args(argv)
    console = Console(highlight=False, width=200)
    OUT.mkdir(parents=True, exist_ok=True)
    if args.source is not None:
        access, events = args.source
    else:
        access, events, _, _ = big_inputs(args.gen_mcp_logs, 1024, 200, 1, 20_000)
    folder = fleet(access, events, args.hosts)
    mb = sum(p.stat().st_size for p in folder.iterdir()) / 1e6
    console.print(
        f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC · {machine()} · load average "
        f"{os.getloadavg()[0]:.1f}\n{versions()}\n{folder} ({args.hosts} hosts, {mb:.0f} MB)"
    )
    order = [c for _ in range(args.pairs) for c in (*CONFIGS, *reversed(CONFIGS))]
    runs = []
    for config in order:
        runs.append(run_once(config, [os.path.relpath(folder, HERE.parent)]))
        r = runs[-1]
        console.print(f"  {config}: {r.seconds:.1f} s, exit {r.returncode}", style="dim")
    table = Table(title=f"--cluster local:1 vs local:2, {mb:.0f} MB of logs", title_justify="left")
    for col in ("run", "config", "seconds", "MB/s", "client peak MB", "worker peaks MB", "output"):
        table.add_column(col, justify="left" if col in ("config", "output") else "right")
    for k, r in enumerate(runs, 1):
        workers = " / ".join(f"{w:.0f}" for w in r.workers_mb)
        rate = mb / r.seconds
        table.add_row(
            str(k),
            r.config,
            f"{r.seconds:.1f}",
            f"{rate:.1f}",
            f"{r.client_mb:.0f}",
            workers,
            r.digest,
        )
    console.print(table)
    mean = {c: sum(r.seconds for r in runs if r.config == c) / (2 * args.pairs) for c in CONFIGS}
    same = len({r.digest for r in runs}) == 1 and all(r.returncode in SCAN_OK for r in runs)
    speedup = mean["local:1"] / mean["local:2"]
    console.print(
        f"speed-up local:1 / local:2 (mean of {2 * args.pairs} runs each): {speedup:.2f}x; "
        f"the same JSON lines: {'yes' if same else 'NO'}; "
        f"load average at the end {os.getloadavg()[0]:.1f}"
    )
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
