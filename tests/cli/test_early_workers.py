"""``scan --jobs 2`` on a large input starts its worker processes first, before it imports
the analyzer (``sse_forensics.workers.early_workers``), so that their imports overlap the
command's own; the scan then runs on those workers and shuts them down."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from concurrent.futures import Executor, ThreadPoolExecutor
from pathlib import Path

import pytest
from support.cli import invoke
from support.log_samples import LOGS

from sse_forensics import pipeline, workers
from sse_forensics.cli import scan as scan_command


def test_scan_starts_its_workers_before_the_analyzer(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    pools: list[ThreadPoolExecutor] = []
    log_options = scan_command.log_options

    def start(jobs: int) -> Executor:
        calls.append(f"start {jobs}")
        pools.append(ThreadPoolExecutor(jobs))  # the wiring, not the processes
        return pools[-1]

    def started_late(jobs: int) -> Executor:
        raise AssertionError("the scan started workers of its own")

    def options(*args: str | None) -> pipeline.LogOptions:
        calls.append("log_options")  # the first import of the analyzer
        return log_options(*args)

    monkeypatch.setattr(workers, "SHARD_BYTES", 0)  # "large"
    monkeypatch.setattr(pipeline, "SHARD_BYTES", 0)
    monkeypatch.setattr(workers, "start_workers", start)
    monkeypatch.setattr(pipeline, "_started", started_late)
    monkeypatch.setattr(scan_command, "log_options", options)
    args = ["scan", str(LOGS / "gap-client-reissued"), str(LOGS / "resume-storm"), "-f", "jsonl"]
    pooled = invoke(*args, "--jobs", "2")
    assert calls == ["start 2", "log_options"]
    assert pools[0]._shutdown
    alone = invoke(*args, "--jobs", "1")
    assert pooled.stdout and pooled.stdout == alone.stdout
    assert pooled.exit_code == alone.exit_code
    assert calls == ["start 2", "log_options", "log_options"]


# A process that starts two workers, prints their process IDs, keeps one busy and waits.
_PARENT = """
import sys, time
from sse_forensics.workers import start_workers
pool = start_workers(2)
print(" ".join(str(pid) for pid in pool._processes), flush=True)
pool.submit(time.sleep, 120)
time.sleep(120)
"""


def _running(pid: int) -> bool:
    """``pid`` is a process that has not exited (a zombie has)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="prctl(PR_SET_PDEATHSIG)")
def test_workers_exit_when_the_scan_process_is_killed() -> None:
    """A scan killed outright (SIGKILL, the out-of-memory killer) takes its workers with
    it: a busy one does not run its task on, an idle one does not wait for good."""
    parent = subprocess.Popen(
        [sys.executable, "-c", _PARENT], stdout=subprocess.PIPE, text=True, env=os.environ
    )
    try:
        assert parent.stdout is not None
        pids = [int(p) for p in parent.stdout.readline().split()]
        assert len(pids) == 2 and all(_running(p) for p in pids)
        time.sleep(1.0)  # the busy worker has its task
    finally:
        parent.send_signal(signal.SIGKILL)
        parent.wait()
    deadline = time.monotonic() + 20
    while any(_running(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = [p for p in pids if _running(p)]
    for pid in left:  # not left behind by a failing run
        os.kill(pid, signal.SIGKILL)
    assert left == []
