"""How fast captures become evidence rows: the exact reassembly path, the fast path (one
process, and two shards in two processes), next to ``tcpflow -r``.

Generates ``make_capture.py`` captures (default 50k, 100k and 200k packets) into
``benchmarks/out/fast/`` (reused by later runs) and times, per capture, from the file to the
evidence rows (connections, exchanges, events as polars batches):

- ``exact``: ``merged_frames`` + ``reassemble`` with ``CaptureEvidence`` as the sink (what
  ``sse-forensics scan`` runs today);
- ``fast``: ``index_captures`` + ``reassemble_fast`` (sse_forensics/reassembly/fast/);
- ``fast, 2 procs``: a pool of two worker processes (started and warmed before timing, as
  a scan's workers would be; spawned, not forked: polars' thread pool does not survive a
  fork), each indexing the whole file and running ``reassemble_fast`` with
  ``shard=(k, 2)``; wall time from submitting to both summaries back (the rows stay in the
  worker, as its partitions would);
- ``tcpflow -r FILE -o DIR``: TCP reassembly only (a child process), when installed.

Checks (not timed): the fast path's rows are counted against the exact path's, and every
connection must have taken the fast path. In-process timings are the best of ``--repeat``
(the exact path runs ``--exact-repeat`` times: it is slow); the machine is shared, so
compare within one run. ``--stages`` prints where the fast path spends its time.

    python benchmarks/fast_bench.py [--sizes 50000,100000,200000] [--seed 1] [--repeat 3]
"""

from __future__ import annotations

import argparse
import gc
import multiprocessing
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

from make_capture import write_capture  # noqa: E402

from sse_forensics.evidence.from_capture import CaptureEvidence  # noqa: E402
from sse_forensics.facts.config import AnalysisConfig  # noqa: E402
from sse_forensics.ingest.inputs import merged_frames  # noqa: E402
from sse_forensics.ingest.packet_index import index_captures  # noqa: E402
from sse_forensics.pipeline import SCAN_GC_THRESHOLD  # noqa: E402
from sse_forensics.reassembly.capture import reassemble  # noqa: E402
from sse_forensics.reassembly.fast import FastReassembly, combine, reassemble_fast  # noqa: E402

OUT = HERE / "out" / "fast"


class _Rows:
    """Keeps the row batches (as a scan's store would) and counts them."""

    def __init__(self) -> None:
        self.batches: list = []

    def add(self, conns, exchanges, events) -> None:
        self.batches.append((conns, exchanges, events))

    def counts(self) -> tuple[int, int, int]:
        return tuple(sum(b[i].height for b in self.batches) for i in range(3))  # type: ignore[return-value]


def _gc() -> None:
    gc.collect()
    gc.set_threshold(*SCAN_GC_THRESHOLD)  # as the scan runs


def run_exact(path: Path) -> tuple[int, int, int]:
    rows = _Rows()
    frames = merged_frames([str(path)])
    sink = CaptureEvidence(rows, AnalysisConfig())  # type: ignore[arg-type]
    reassemble(frames, frames.stats, sink=sink)
    sink.flush()
    return rows.counts()


def run_fast(path: Path, shard: tuple[int, int] = (0, 1)) -> tuple[FastReassembly, _Rows]:
    rows = _Rows()
    with index_captures([str(path)]) as index:
        result = reassemble_fast(index, rows.add, AnalysisConfig(), shard=shard)
    return result, rows


def _shard(path: Path, shard: tuple[int, int]) -> tuple[FastReassembly, tuple[int, int, int]]:
    _gc()
    result, rows = run_fast(path, shard)
    return result, rows.counts()


def _warm() -> None:
    """Imports done in a pool worker before it is timed."""
    import sse_forensics.reassembly.fast  # noqa: F401


def run_fast_procs(
    pool: ProcessPoolExecutor, path: Path, procs: int
) -> tuple[FastReassembly, tuple[int, int, int]]:
    futures = [pool.submit(_shard, path, (k, procs)) for k in range(procs)]
    got = [f.result() for f in futures]
    counts = tuple(sum(c[i] for _r, c in got) for i in range(3))
    return combine([r for r, _c in got]), counts  # type: ignore[return-value]


CPU: dict[str, float] = {}  # best CPU seconds (this process, all its threads) per label


def best_of(repeat: int, run: Callable[[], object], label: str = "") -> tuple[float, object]:
    best, result = float("inf"), None
    for _ in range(repeat):
        _gc()
        started, cpu = time.perf_counter(), time.process_time()
        result = run()
        best = min(best, time.perf_counter() - started)
        if label:
            CPU[label] = min(CPU.get(label, float("inf")), time.process_time() - cpu)
    return best, result


def tcpflow(path: Path, repeat: int) -> float | None:
    exe = shutil.which("tcpflow")
    if exe is None:
        return None
    with tempfile.TemporaryDirectory(prefix="tcpflow-") as out:

        def once() -> None:
            flows = Path(out) / "flows"
            shutil.rmtree(flows, ignore_errors=True)
            flows.mkdir()
            subprocess.run(
                [exe, "-r", str(path), "-o", str(flows)],
                check=True,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )

        seconds, _ = best_of(repeat, once)
    return seconds


def capture(packets: int, seed: int) -> Path:
    path = OUT / f"mcp-{packets}-seed{seed}.pcap"
    if not path.exists():
        write_capture(path, packets, seed)
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="50000,100000,200000")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--exact-repeat", type=int, default=1)
    parser.add_argument("--procs", type=int, default=2)
    parser.add_argument("--stages", action="store_true", help="fast path: seconds per stage")
    parser.add_argument(
        "--worker-threads", type=int, default=0, help="POLARS_MAX_THREADS of the workers"
    )
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",") if s]
    print(
        f"Python {platform.python_version()}, {multiprocessing.cpu_count()} CPUs; "
        f"best of {args.repeat} (exact: {args.exact_repeat})"
    )
    ok = True
    table = []
    if args.worker_threads:
        # Read by polars when a spawned worker imports it (this process has its pool already).
        os.environ["POLARS_MAX_THREADS"] = str(args.worker_threads)
    pool = ProcessPoolExecutor(args.procs, mp_context=multiprocessing.get_context("spawn"))
    for f in [pool.submit(_warm) for _ in range(args.procs)]:
        f.result()
    for packets in sizes:
        path = capture(packets, args.seed)
        flow_s = tcpflow(path, args.repeat)
        exact_s, want = best_of(args.exact_repeat, lambda p=path: run_exact(p), f"exact{packets}")
        fast_s, (result, rows) = best_of(  # type: ignore[misc]
            args.repeat, lambda p=path: run_fast(p), f"fast{packets}"
        )
        run_fast_procs(pool, path, args.procs)  # untimed: the workers' first touch of it
        procs_s, (combined, counts) = best_of(  # type: ignore[misc]
            args.repeat, lambda p=path: run_fast_procs(pool, p, args.procs)
        )
        frames = result.frames
        for name, got, res in (("fast", rows.counts(), result), ("procs", counts, combined)):
            if got != want or res.fallbacks:
                print(f"MISMATCH {path.name} {name}: rows {got} vs {want}, {dict(res.fallbacks)}")
                ok = False
        if args.stages:
            stages = ", ".join(f"{k} {v:.3f}" for k, v in result.timings.items())
            print(f"{path.name}: fast path stages (last run, s): {stages}")
        cpu = (CPU[f"exact{packets}"], CPU[f"fast{packets}"])
        table.append((path.name, frames, flow_s, exact_s, fast_s, procs_s, want[2], cpu))
    pool.shutdown()

    print()
    print(
        "| capture | packets | SSE events | tcpflow s | exact s | fast s (1 proc) "
        f"| fast s ({args.procs} procs) | exact pkt/s | fast pkt/s (1) | fast pkt/s "
        f"({args.procs}) | fast vs exact (1 / {args.procs}) | vs tcpflow (1 / {args.procs}) "
        "| CPU s exact / fast (1) |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name, frames, flow_s, exact_s, fast_s, procs_s, events, cpu in table:
        flow = f"{flow_s:.3f}" if flow_s else "-"
        vs_flow = f"{fast_s / flow_s:.1f}x / {procs_s / flow_s:.1f}x" if flow_s else "-"
        print(
            f"| {name} | {frames} | {events} | {flow} | {exact_s:.2f} | {fast_s:.3f} | "
            f"{procs_s:.3f} | {frames / exact_s:,.0f} | {frames / fast_s:,.0f} | "
            f"{frames / procs_s:,.0f} | {exact_s / fast_s:.1f}x / {exact_s / procs_s:.1f}x | "
            f"{vs_flow} | {cpu[0]:.2f} / {cpu[1]:.3f} ({cpu[0] / cpu[1]:.1f}x) |"
        )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
