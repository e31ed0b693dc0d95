"""How `sse-forensics scan` grows on hostile captures (issue 16): many concurrent streams,
a SYN flood, many events in one stream. Each series doubles its size; every scan runs as a
child process (wall time, peak RSS from ``os.wait4``) and must still report the ordinary
silent gap ``samples/hostile.py`` plants in every capture.

    python benchmarks/hostile_scale.py                         # all series, default sizes
    python benchmarks/hostile_scale.py --only syn-flood --base 250000 --steps 3
    python benchmarks/hostile_scale.py --limit flows=50000     # passed on to every scan

Prints one table per series: size, frames, seconds (wall, and CPU: user + system of the
scan, the figure to read on a loaded machine), peak RSS, the CPU and RSS ratios to the
previous size (2.0 per doubling is linear), the caps that fired, whether the ordinary gap
was found.
Inputs go to ``benchmarks/out/hostile/`` (git-ignored; ``--out`` elsewhere) and are reused.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from scale import run_timed  # noqa: E402

OUT = ROOT / "benchmarks" / "out" / "hostile"

# series: (generator kind of samples/hostile.py, default first size)
SERIES = {
    "streams": ("streams", 5_000),
    "syn-flood": ("syn-flood", 100_000),
    "syn-plus-one": ("syn-plus-one", 100_000),
    "events": ("events", 250_000),
    "events-gap": ("events-gap", 250_000),
    "events-every-jump": ("events-every-jump", 5_000),
    "streams-midstream": ("streams-midstream", 5_000),
    "events-lost": ("events-lost", 1_000_000),
    "events-resume-jump": ("events-resume-jump", 1_000_000),  # a long stream, then a resume
    "events-resume-opaque": ("events-resume-opaque", 1_000_000),
    "events-long-replay": ("events-long-replay", 1_000_000),  # a resume answered at length
    "events-long-replay-opaque": ("events-long-replay-opaque", 1_000_000),
    "events-zero-window": ("events-zero-window", 1_000_000),
    "signals": ("signals", 1_000_000),
    "signals-stream-gap": ("signals-stream-gap", 1_000_000),
    "log-events": ("log-events", 1_000_000),  # event logs (samples/hostile.py LOG_KINDS)
    "log-events-gap": ("log-events-gap", 1_000_000),
    "log-events-opaque": ("log-events-opaque", 1_000_000),
    # a capture and the event log of its long stream (samples/hostile.py PAIR_KINDS)
    "events-logged": ("events-logged", 1_000_000),
}
# The ordinary gap: a silent live gap in the session samples/hostile.py's ordinary_gap
# opens. Told by rule, verdict and session, not by its IDs: beside a stream whose IDs
# step by 2 (events-every-jump) the server's counter is judged shared, and the even IDs
# of the gap count as the other stream's (the gap is 9..11 there, 8..12 elsewhere).
ORDINARY = ("missing-stream-gap", "silent_corruption")


def _hostile():
    spec = importlib.util.spec_from_file_location(
        "samples_hostile", ROOT / "samples" / "hostile.py"
    )
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _scan(path: Path, limits: list[str], timeout: float | None) -> dict:
    """One scan as a child process (``scale.run_timed``) and its JSON document."""
    cmd = [sys.executable, "-m", "sse_forensics", "scan", str(path), "--format", "json"]
    cmd += ["--jobs", "1"]
    for item in limits:
        cmd += ["--limit", item]
    seconds, cpu, rss, out, code, err, killed = run_timed(cmd, timeout or 0)
    if killed:
        return {"seconds": None, "cpu": cpu, "rss": rss, "status": "timeout", "doc": None}
    crashed = code not in (0, 1, 3, 4) or b"Traceback" in err
    return {
        "seconds": seconds,
        "cpu": cpu,
        "rss": rss,
        "status": "CRASH" if crashed else str(code),
        "doc": json.loads(out) if out.strip() else None,
        "stderr": err.decode("utf-8", "replace")[-400:],
    }


def run_series(
    name: str,
    base: int,
    steps: int,
    limits: list[str],
    timeout: float | None,
    out: Path = OUT,
):
    hostile = _hostile()
    kind, _default = SERIES[name]
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for k in range(steps):
        n = base << k
        logged = kind in hostile.LOG_KINDS
        path = out / (f"{kind}-{n}.events.jsonl" if logged else f"{kind}-{n}.pcap")
        if kind in hostile.PAIR_KINDS:
            path = out / f"{kind}-{n}"
        frames = None
        if path.exists():
            pass
        elif kind in hostile.PAIR_KINDS:
            frames = hostile.PAIR_KINDS[kind](path, n)
        elif logged:
            hostile.LOG_KINDS[kind](path, n)
        else:
            frames = hostile.write(path, lambda w, n=n: hostile.KINDS[kind](w, n))
        got = _scan(path, limits, timeout)
        doc = got["doc"] or {}
        ordinary = (
            hostile.ORDINARY_LOG_SESSION if logged else hostile.session_of(0xFFFF_FFFF).decode()
        )
        findings = {
            (f["rule"]["id"], f["sse_forensics"]["classification"])
            for f in doc.get("findings", [])
            if f["sse_forensics"].get("session_id") == ordinary
        }
        rows.append(
            {
                "size": n,
                "frames": frames or doc.get("stats", {}).get("frames"),
                "mb": sum(f.stat().st_size for f in [path, *path.glob("*")] if f.is_file()) / 1e6,
                "seconds": got["seconds"],
                "cpu": got["cpu"],
                "rss": got["rss"],
                "status": got["status"],
                "caps": {c["cap"]: c.get("count", 1) for c in doc.get("caps", [])},
                "found": ORDINARY in findings,
                "events": doc.get("stats", {}).get("events"),
            }
        )
        if got["status"] in ("CRASH", "timeout"):
            print(f"  {name} {n}: {got['status']} {got.get('stderr', '')}", file=sys.stderr)
            break
    return rows


def print_table(name: str, rows: list[dict]) -> None:
    print(f"\n### {name}\n")
    print(
        "| size | frames | MB | wall s | CPU s | peak RSS MB | CPU/prev | RSS/prev | caps fired "
        "| gap found |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    prev = None
    for r in rows:
        done = r["seconds"] is not None
        cpu_ratio = f"{r['cpu'] / prev['cpu']:.2f}x" if prev and done else "—"
        rss_ratio = f"{r['rss'] / prev['rss']:.2f}x" if prev and done else "—"
        secs = f"{r['seconds']:.2f}" if done else r["status"]
        rss = f"{r['rss']:.0f}" if r["rss"] is not None else "—"
        caps = ", ".join(f"{k}×{v}" for k, v in r["caps"].items()) or "none"
        print(
            f"| {r['size']:,} | {r['frames'] or '—'} | {r['mb']:.1f} | {secs} | {r['cpu']:.2f} "
            f"| {rss} | {cpu_ratio} | {rss_ratio} | {caps} | {'yes' if r['found'] else 'NO'} |"
        )
        prev = r


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=sorted(SERIES), action="append")
    parser.add_argument("--base", type=int, help="first size (default: per series)")
    parser.add_argument("--steps", type=int, default=3, help="doublings + 1 (default 3)")
    parser.add_argument("--limit", action="append", default=[], help="NAME=VALUE, to scan")
    parser.add_argument("--timeout", type=float, default=None, help="seconds per scan")
    parser.add_argument("--out", type=Path, default=OUT, help="where the inputs are written")
    args = parser.parse_args(argv)
    # The scans import this checkout's package.
    os.environ["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p
    )
    bad = False
    for name in args.only or list(SERIES):
        base = args.base or SERIES[name][1]
        rows = run_series(name, base, args.steps, args.limit, args.timeout, args.out)
        print_table(name, rows)
        bad |= any(r["status"] == "CRASH" or not r["found"] for r in rows)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
