"""``scan --jobs 2`` on a large input starts its worker processes first, before it imports
the analyzer (``sse_forensics.workers.early_workers``), so that their imports overlap the
command's own; the scan then runs on those workers and shuts them down."""

from __future__ import annotations

from concurrent.futures import Executor, ThreadPoolExecutor

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
