"""What decryption costs: the same traffic scanned in plaintext and over TLS.

Records (as root: tcpdump on ``lo``) one long tools/call stream from the PROFILE server on
hypercorn to httpx, four times with the same server knobs — plaintext HTTP/1.1, HTTP/1.1 over
TLS 1.3, h2c, HTTP/2 over TLS 1.3 — into ``benchmarks/out/tls/`` (reused by later runs;
``--fresh`` records again), then times ``scan_paths`` on each in this process (best of
``--repeat``, GC as in a scan) and prints the ratios:

- ``h1 TLS / h1 plain``: what a TLS capture costs over the plaintext capture of the same
  exchanges. Both take the fast path (HTTP/1.1 over TLS by its decrypted route).
- ``h2 TLS / h2c``: the same for HTTP/2 (both by the fast path's HTTP/2 route).
- ``h2 TLS / h1 plain``: HTTP/2 over TLS against the cheapest form of the same traffic.

The packet counts differ (loopback segments the streams as it likes), so compare within
one run.

Checks (not timed): every capture gives the same number of SSE events and no error.

    python benchmarks/tls_bench.py [--events 20000] [--repeat 3] [--fresh]
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "samples"))

OUT = ROOT / "benchmarks" / "out" / "tls"
PORT = 38401
VARIANTS = [  # (name, tls, http2)
    ("h1-plain", None, False),
    ("h1-tls13", "1.3", False),
    ("h2c", None, True),
    ("h2-tls13", "1.3", True),
]


def record(events: int, fresh: bool) -> dict[str, tuple[Path, tuple[str, ...]]]:
    from make_tls_samples import TLSScenario, knobs, record
    from profile_client import ClientPlan

    OUT.mkdir(parents=True, exist_ok=True)
    server = knobs(
        "tls-bench", events_per_call=events, event_interval=0.0, payload_bytes=300, priming=True
    )
    out = {}
    for k, (name, tls, http2) in enumerate(VARIANTS):
        stem = f"{name}-{events}"
        pcap, keys = OUT / f"{stem}.pcap", OUT / f"{stem}.keys"
        if fresh or not pcap.exists():
            if os.geteuid() != 0:
                raise SystemExit("tls_bench.py records with tcpdump on lo: run as root")
            scenario = TLSScenario(stem, "", name, server, ClientPlan(), tls, http2=http2)
            record(scenario, PORT + k, OUT)
        out[name] = (pcap, (str(keys),) if keys.exists() else ())
    return out


def scan_seconds(pcap: Path, keys: tuple[str, ...], repeat: int) -> tuple[float, int, int]:
    from sse_forensics.facts.config import AnalysisConfig
    from sse_forensics.pipeline import scan_paths

    best = float("inf")
    events = errors = 0
    for _ in range(repeat):
        gc.collect()
        start = time.perf_counter()
        result = scan_paths([str(pcap)], AnalysisConfig(tls_keylog=keys), jobs=1)
        best = min(best, time.perf_counter() - start)
        events, errors = result.stats.events, len(result.errors)
    return best, events, errors


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=20000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--fresh", action="store_true")
    args = parser.parse_args()
    captures = record(args.events, args.fresh)
    print(
        f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
        f"Python {platform.python_version()}"
    )
    times: dict[str, float] = {}
    counts = set()
    print("| capture | MB | packets | events | scan s |")
    print("|---|---|---|---|---|")
    for name, (pcap, keys) in captures.items():
        seconds, events, errors = scan_seconds(pcap, keys, args.repeat)
        times[name] = seconds
        counts.add(events)
        if errors:
            print(f"{name}: {errors} errors", file=sys.stderr)
            return 1
        size = pcap.stat().st_size / 1e6
        from sse_forensics.ingest.inputs import merged_frames

        packets = sum(1 for _ in merged_frames([str(pcap)]))
        print(f"| {name} | {size:.1f} | {packets} | {events} | {seconds:.2f} |")
    if len(counts) != 1:
        print(f"event counts differ: {sorted(counts)}", file=sys.stderr)
        return 1
    print()
    print(f"h1 TLS / h1 plain: {times['h1-tls13'] / times['h1-plain']:.2f}x")
    print(f"h2 TLS / h2c:      {times['h2-tls13'] / times['h2c']:.2f}x")
    print(f"h2 TLS / h1 plain: {times['h2-tls13'] / times['h1-plain']:.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
