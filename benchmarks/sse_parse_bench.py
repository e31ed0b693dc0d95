"""MB/s of ``SSEParser`` (one ``feed()`` + ``close()``) vs the columnar ``parse_body`` on
generated MCP-style event-stream bodies.

    python benchmarks/sse_parse_bench.py                # 50 MB per body, best of 3
    python benchmarks/sse_parse_bench.py --mb 200 --repeat 5

Bodies: ``lf`` (``id``/``event``/``data`` events of 150-400 bytes, JSON-RPC progress
notifications), ``crlf`` (the same with CRLF line ends), ``keepalive`` (two ``: ping``
comments between events), ``utf8`` (non-ASCII text in every payload), ``multidata`` (data
split over three lines) and ``invalid`` (one invalid UTF-8 byte every 1000 events: the
fallback path). Prints a markdown table; exits 1 if the two parsers disagree on the events.
"""

from __future__ import annotations

import argparse
import gc
import random
import sys
import time

from sse_forensics.reassembly.sse import SSEParser
from sse_forensics.reassembly.sse_columns import parse_body


def make_body(kind: str, megabytes: float, seed: int = 1) -> bytes:
    rng = random.Random(seed)
    eol = "\r\n" if kind == "crlf" else "\n"
    parts: list[str] = []
    size = 0
    i = 0
    while size < megabytes * 1_000_000:
        i += 1
        message = "".join(rng.choices("abcdefghij klmnop", k=rng.randint(20, 250)))
        if kind == "utf8":
            message += " héllo wörld € ✓ 日本語"
        data = (
            '{"jsonrpc":"2.0","method":"notifications/progress","params":'
            f'{{"progressToken":"tok-{i % 97}","progress":{i},"total":{i + 100},'
            f'"message":"{message}"}}}}'
        )
        if kind == "multidata":
            third = len(data) // 3
            data = eol.join(
                (
                    "data: " + data[:third],
                    "data: " + data[third : 2 * third],
                    "data: " + data[2 * third :],
                )
            )
        else:
            data = "data: " + data
        if kind == "invalid" and i % 1000 == 0:
            data += "\udcff"  # surrogateescape: becomes the lone byte 0xFF
        event = f"id: {i}{eol}event: message{eol}{data}{eol}{eol}"
        if kind == "keepalive":
            event = f": ping - 2025-01-01T00:00:{i % 60:02d}Z{eol}" * 2 + event
        parts.append(event)
        size += len(event)
    return "".join(parts).encode("utf-8", "surrogateescape")


def best_of(repeat: int, fn) -> tuple[float, object]:
    best, result = float("inf"), None
    for _ in range(repeat):
        gc.collect()
        t0 = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - t0)
    return best, result


def run_parser(body: bytes) -> list:
    parser = SSEParser(report_empty=True)
    return parser.feed(body) + parser.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mb", type=float, default=50.0, help="size of each body, MB")
    ap.add_argument("--repeat", type=int, default=3, help="best of N runs")
    ap.add_argument(
        "--kinds", default="lf,crlf,keepalive,utf8,multidata,invalid", help="bodies to time"
    )
    args = ap.parse_args()
    rows = []
    ok = True
    for kind in args.kinds.split(","):
        body = make_body(kind, args.mb)
        mb = len(body) / 1e6
        t_parser, events = best_of(args.repeat, lambda b=body: run_parser(b))
        t_columns, columns = best_of(args.repeat, lambda b=body: parse_body(b))
        same = columns.events.select("start", "end", "id", "data").rows() == [
            (e.start, e.end, e.id, e.data) for e in events
        ]
        ok &= same
        rows.append(
            (kind, mb, len(events), mb / t_parser, mb / t_columns, t_parser / t_columns, same)
        )
        del events, columns
    print("| body | MB | events | SSEParser MB/s | parse_body MB/s | speed-up | same events |")
    print("|---|---|---|---|---|---|---|")
    for kind, mb, n, a, b, x, same in rows:
        print(f"| {kind} | {mb:.1f} | {n:,} | {a:.0f} | {b:.0f} | {x:.1f}x | {same} |")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
