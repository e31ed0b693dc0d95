"""Time ``read_logs`` on a generated ≥1 GB MCP access log and an event log, beside
``grep -c`` and ``wc -l`` on the same files in the same run.

    python benchmarks/logs_bench.py                 # 1 GB access log, 200 MB event log
    python benchmarks/logs_bench.py --access-mb 200 --events-mb 50 --repeat 3 --keep

Each tool runs as a child process (best of ``--repeat`` wall times, peak RSS from
``os.wait4``). Exits 1 if read_logs did not read every generated line.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BLOCK_LINES = 20_000
USER_AGENTS = [
    "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0",
    "python-httpx/0.27.0",
    "node",
    "curl/8.5.0 \\x22quoted\\x22",
]


def access_block(rng: random.Random) -> bytes:
    """nginx ``mcp`` preset lines: POSTs opening streams, resumes with Last-Event-ID,
    initialize responses setting Mcp-Session-Id, a few 410s; day placeholder ``DD``."""
    out = []
    for i in range(BLOCK_LINES):
        sid = f"{rng.getrandbits(128):032x}"
        sec = i // 10
        t = f"DD/Nov/2023:{sec // 3600 % 24:02d}:{sec // 60 % 60:02d}:{sec % 60:02d} +0000"
        resume = i % 4 == 0
        method, lei = ("GET", str(rng.randint(1, 99999))) if resume else ("POST", "-")
        status = 410 if resume and i % 97 == 0 else 200
        sent = sid if i % 50 == 0 else "-"
        ip = f"10.{i % 7}.{i % 256}.{i % 200}" if i % 9 else f"2001:db8::{i % 4096:x}"
        out.append(
            f'{ip} - - [{t}] "{method} /mcp HTTP/1.1" {status} {rng.randint(100, 90000)} "-" '
            f'"{USER_AGENTS[i % len(USER_AGENTS)]}" "{lei}" "{sid}" "{sent}" '
            f"{rng.random() * 30:.3f}\n"
        )
    return "".join(out).encode()


def events_block(rng: random.Random) -> bytes:
    kinds = ["emitted", "written", "written", "written", "evicted"]
    out = []
    for i in range(BLOCK_LINES):
        kind = kinds[i % len(kinds)]
        record = {
            "ts": 1700000000 + i / 100,
            "session": None if i % 31 == 0 else f"s{i % 100}",
            "stream": f"st{i % 500}",
            "event_id": str(i),
            "kind": kind,
        }
        if kind == "evicted":
            record |= {"reason": "buffer-full", "where": "ring"}
        if i % 1000 == 0:
            record |= {
                "kind": "control",
                "event": {"type": "stream-gap", "first": i, "last": i + 2},
            }
        out.append(json.dumps(record))
    return ("\n".join(out) + "\n").encode()


def generate(path: Path, megabytes: int, make_block, day: bool) -> int:
    rng = random.Random(1)
    blocks = [make_block(rng) for _ in range(4)]
    lines = 0
    with open(path, "wb") as fh:
        k = 0
        while fh.tell() < megabytes * 1_000_000:
            block = blocks[k % len(blocks)]
            if day:
                block = block.replace(b"[DD/", f"[{k % 28 + 1:02d}/".encode())
            fh.write(block)
            lines += BLOCK_LINES
            k += 1
    return lines


def run(cmd: list[str], repeat: int) -> tuple[float, int, str]:
    """Best wall time, peak RSS (MB) and stdout of ``cmd``."""
    best, rss, out = float("inf"), 0, ""
    for _ in range(repeat):
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE)
        stdout = proc.stdout.read() if proc.stdout else b""
        _, status, usage = os.wait4(proc.pid, 0)
        elapsed = time.perf_counter() - start
        if status != 0:
            raise SystemExit(f"{cmd[0]} failed ({status})")
        best = min(best, elapsed)
        rss = max(rss, usage.ru_maxrss // 1024)
        out = stdout.decode().strip()
    return best, rss, out


READER = """
import json, sys
from sse_forensics.ingest.logs import read_logs
logs = read_logs([sys.argv[1]])
print(json.dumps({"rows": logs.access.height + logs.events.height,
                  "unreadable": logs.stats["unreadable_lines"]}))
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--access-mb", type=int, default=1024)
    ap.add_argument("--events-mb", type=int, default=200)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--dir", default=None, help="where to write the logs (default: a temp dir)")
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()
    workdir = Path(args.dir or tempfile.mkdtemp(prefix="logs-bench-"))
    workdir.mkdir(parents=True, exist_ok=True)
    files = {
        "access": (workdir / "access.log", args.access_mb, access_block, True),
        "events": (workdir / "events.jsonl", args.events_mb, events_block, False),
    }
    repo = Path(__file__).resolve().parents[1]
    env_cmd = [sys.executable, "-c", f"import sys; sys.path.insert(0, {str(repo)!r});" + READER]
    failed = False
    print(f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}")
    print("| file | MB | lines | tool | seconds | MB/s | peak RSS MB | time vs grep -c |")
    print("|---|---|---|---|---|---|---|---|")
    for name, (path, mb, block, day) in files.items():
        start = time.perf_counter()
        lines = generate(path, mb, block, day)
        made = time.perf_counter() - start
        size = path.stat().st_size / 1e6
        print(f"<!-- {name}: {lines} lines, {size:.0f} MB, generated in {made:.1f} s -->")
        results = {
            "wc -l": run(["wc", "-l", str(path)], args.repeat),
            "grep -c": run(
                ["grep", "-c", "mcp" if name == "access" else "kind", str(path)], args.repeat
            ),
            "read_logs": run([*env_cmd, str(path)], args.repeat),
        }
        grep = results["grep -c"][0]
        for tool, (secs, rss, _out) in results.items():
            print(
                f"| {name} | {size:.0f} | {lines} | {tool} | {secs:.2f} | {size / secs:.0f} | "
                f"{rss} | {secs / grep:.1f}x |"
            )
        read = json.loads(results["read_logs"][2])
        if read["rows"] != lines or read["unreadable"]:
            print(
                f"!! {name}: read {read['rows']} rows of {lines}, {read['unreadable']} unreadable"
            )
            failed = True
    if not args.keep:
        for path, *_ in files.values():
            path.unlink()
        if args.dir is None:
            workdir.rmdir()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
