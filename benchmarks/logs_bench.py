"""Time ``read_logs`` on generated ≥1 GB MCP access logs and event logs, beside ``grep -c``
and ``wc -l`` on the same files in the same run, and the peak memory of reading them batch
by batch (``iter_log_batches``, what a caller that aggregates holds).

    python benchmarks/logs_bench.py                 # all four files, best of 3
    python benchmarks/logs_bench.py --access-mb 200 --events-mb 50 --repeat 3 --keep
    python benchmarks/logs_bench.py --files access events --dir /tmp/logs --keep

Files:

- ``access``: nginx ``mcp`` preset lines, written here (``access_block``);
- ``access-gen``: the shape /work/shared/bench/gen_mcp_logs.py writes (combined +
  ``"$http_last_event_id" "$sent_http_mcp_session_id" $request_time``), its lines repeated
  with the day changed up to the size, read with that format;
- ``events``: canonical event-log records written here (``events_block``, json.dumps);
- ``events-gen``: gen_mcp_logs.py's event log (compact JSON), cut to the size.

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
GEN_SCRIPT = Path("/work/shared/bench/gen_mcp_logs.py")
GEN_FORMAT = (
    'nginx:$remote_addr - $remote_user [$time_local] "$request" $status $body_bytes_sent '
    '"$http_referer" "$http_user_agent" "$http_last_event_id" "$sent_http_mcp_session_id" '
    "$request_time"
)


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
            lines += block.count(b"\n")
            k += 1
    return lines


def generate_mcp_logs(workdir: Path, sessions: int) -> tuple[bytes, bytes]:
    """gen_mcp_logs.py's access and event logs for ``sessions`` sessions."""
    prefix = workdir / "gen"
    subprocess.run(
        [sys.executable, str(GEN_SCRIPT), str(prefix), str(sessions), "1"],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    access = Path(f"{prefix}.access.log").read_bytes()
    events = Path(f"{prefix}.events.jsonl").read_bytes()
    Path(f"{prefix}.access.log").unlink()
    Path(f"{prefix}.events.jsonl").unlink()
    return access, events


def generate_from(path: Path, megabytes: int, text: bytes, *, days: bool) -> int:
    """``text`` (whole lines) repeated up to ``megabytes`` (``days``: the day of
    ``[01/Dec/2026`` moved on at each copy) or cut to it at a line end."""
    lines = 0
    limit = megabytes * 1_000_000
    with open(path, "wb") as fh:
        k = 0
        while fh.tell() < limit:
            block = text
            if days:
                block = block.replace(b"[01/Dec/2026", f"[{k % 28 + 1:02d}/Dec/2026".encode())
            room = limit - fh.tell()
            if len(block) > room and not days:
                block = block[: block.rfind(b"\n", 0, room) + 1]
            fh.write(block)
            lines += block.count(b"\n")
            k += 1
            if not days and len(block) < len(text):
                break
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
fmt = sys.argv[2] or None
logs = read_logs([sys.argv[1]], access_format=fmt)
print(json.dumps({"rows": logs.access.height + logs.events.height,
                  "unreadable": logs.stats["unreadable_lines"]}))
"""

BATCHES = """
import json, sys
from sse_forensics.ingest.logs import iter_log_batches
fmt = sys.argv[2] or None
rows = unreadable = 0
for batch in iter_log_batches([sys.argv[1]], access_format=fmt):
    rows += batch.rows.height
    unreadable += batch.unreadable
print(json.dumps({"rows": rows, "unreadable": unreadable}))
"""


NAMES = {
    "access": "access.log",
    "access-gen": "gen.access.log",
    "events": "events.jsonl",
    "events-gen": "gen.events.jsonl",
}


def write_files(workdir: Path, files: list[str], access_mb: int, events_mb: int, sessions: int):
    """Write the files; print ``{name: [lines, seconds]}`` as JSON (run as a child, so the
    benchmark's own memory, which the tools' children inherit, stays small)."""
    wanted = {"access-gen", "events-gen"} & set(files)
    gen = generate_mcp_logs(workdir, sessions) if wanted else None
    made = {}
    for name in files:
        path = workdir / NAMES[name]
        start = time.perf_counter()
        if name == "access":
            lines = generate(path, access_mb, access_block, True)
        elif name == "events":
            lines = generate(path, events_mb, events_block, False)
        else:
            assert gen is not None
            text = gen[0] if name == "access-gen" else gen[1]
            mb = access_mb if name == "access-gen" else events_mb
            lines = generate_from(path, mb, text, days=name == "access-gen")
        made[name] = [lines, time.perf_counter() - start]
    print(json.dumps(made))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--access-mb", type=int, default=1024)
    ap.add_argument("--events-mb", type=int, default=200)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--files", nargs="+", default=list(NAMES), choices=list(NAMES))
    ap.add_argument("--sessions", type=int, default=9000, help="gen_mcp_logs.py sessions")
    ap.add_argument("--dir", default=None, help="where to write the logs (default: a temp dir)")
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--write-only", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    workdir = Path(args.dir or tempfile.mkdtemp(prefix="logs-bench-"))
    workdir.mkdir(parents=True, exist_ok=True)
    if args.write_only:
        write_files(workdir, args.files, args.access_mb, args.events_mb, args.sessions)
        return 0
    writer = [sys.executable, __file__, "--write-only", "--dir", str(workdir), "--files"]
    sizes = ["--access-mb", str(args.access_mb), "--events-mb", str(args.events_mb)]
    made = json.loads(
        subprocess.run(
            [*writer, *args.files, *sizes, "--sessions", str(args.sessions)],
            check=True,
            capture_output=True,
        ).stdout
    )
    repo = Path(__file__).resolve().parents[1]
    prelude = f"import sys; sys.path.insert(0, {str(repo)!r});"
    failed = False
    print(f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}")
    print("| file | MB | lines | tool | seconds | MB/s | peak RSS MB | time vs grep -c |")
    print("|---|---|---|---|---|---|---|---|")
    for name in args.files:
        path = workdir / NAMES[name]
        lines, seconds = made[name]
        size = path.stat().st_size / 1e6
        fmt = GEN_FORMAT if name == "access-gen" else ""
        print(f"<!-- {name}: {lines} lines, {size:.0f} MB, generated in {seconds:.1f} s -->")
        results = {
            "wc -l": run(["wc", "-l", str(path)], args.repeat),
            "grep -c": run(
                ["grep", "-c", "mcp" if name.startswith("access") else "kind", str(path)],
                args.repeat,
            ),
            "read_logs": run([sys.executable, "-c", prelude + READER, str(path), fmt], args.repeat),
            "iter_log_batches": run(
                [sys.executable, "-c", prelude + BATCHES, str(path), fmt], args.repeat
            ),
        }
        grep = results["grep -c"][0]
        for tool, (secs, rss, _out) in results.items():
            print(
                f"| {name} | {size:.0f} | {lines} | {tool} | {secs:.2f} | {size / secs:.0f} | "
                f"{rss} | {secs / grep:.1f}x |"
            )
        for tool in ("read_logs", "iter_log_batches"):
            read = json.loads(results[tool][2])
            if read["rows"] != lines or read["unreadable"]:
                print(
                    f"!! {name} {tool}: read {read['rows']} rows of {lines}, "
                    f"{read['unreadable']} unreadable"
                )
                failed = True
    print(f"<!-- load average after: {os.getloadavg()[0]:.1f} -->")
    if not args.keep:
        for name in args.files:
            (workdir / NAMES[name]).unlink(missing_ok=True)
        if args.dir is None:
            workdir.rmdir()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
