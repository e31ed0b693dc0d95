"""Partitioning never changes a finding: the same inputs scanned as one partition and as
several (sessions hashed into buckets, cross-session facts decided over the whole scan)
give the same findings, fact tables and JSON lines."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Iterator
from concurrent.futures import Executor, Future
from pathlib import Path
from typing import Any, TypeVar

import pytest
from conftest import SAMPLES
from support.partitions import assert_same_in_partitions

from sse_forensics.pipeline import scan_paths
from sse_forensics.report.jsonout import findings_jsonl
from sse_forensics.result import ScanResult


@functools.cache  # the samples in six partitions: compared here and by the worker tests
def _in_partitions(paths: tuple[str, ...]) -> ScanResult:
    return scan_paths(list(paths), jobs=1, buckets=6)


def test_findings_and_tables_do_not_depend_on_partitioning() -> None:
    """Every capture at once: many sessions, cross-session replays. (Each log sample
    joined with its capture: ``tests/end_to_end/test_log_samples.py``, beside the scan
    in one partition its other tests make.)"""
    paths = [str(SAMPLES)]
    assert_same_in_partitions(scan_paths(paths, buckets=1), _in_partitions(tuple(paths)))


def test_cross_session_replay_is_found_across_partitions() -> None:
    """The replay that leaks session 1's result into session 2 is judged from a first
    sighting in another partition."""
    capture = str(SAMPLES / "replay-crossed-sessions.pcap")
    for buckets in (1, 2, 3, 5, 8):
        result = scan_paths([capture], buckets=buckets)
        found = [json.loads(line) for line in findings_jsonl(result).splitlines()]
        assert [(f["rule"]["id"], f["sse_forensics"]["gap"]["first"]) for f in found] == [
            ("replay-crossed-sessions", "s2_8")
        ], buckets


T = TypeVar("T")


class _Shared(Executor):
    """The module's worker processes, lent to one scan: its shutdown leaves them running."""

    def __init__(self, workers: Executor) -> None:
        self.workers = workers

    def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> Future[T]:
        return self.workers.submit(fn, *args, **kwargs)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        pass


@pytest.fixture(scope="module")
def _pool() -> Iterator[Executor]:
    from sse_forensics.pipeline import _started

    with _started(2) as workers:
        yield workers


@pytest.fixture
def started_once(_pool: Executor, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """``--jobs 2``'s two spawned worker processes (``pipeline._started``), started once for
    the tests that use this fixture: each start imports the analyzer (~1.5 CPU s), and these
    tests are about what the workers compute; the scan still runs its own code for them
    (started when the input is large, shut down when it ends). A scan that starts and
    stops its own: test_worker_processes_give_the_same_findings."""
    import sse_forensics.pipeline as pipeline

    lent = []

    def lend(workers: int) -> Executor:
        assert workers == 2
        lent.append(workers)
        return _Shared(_pool)

    monkeypatch.setattr(pipeline, "_started", lend)
    yield
    assert lent, "the scan started no worker processes"


def _samples_in_one_process() -> ScanResult:
    """What both worker-process tests compare with (scanned once for the file)."""
    return _in_partitions((str(SAMPLES),))


def test_worker_processes_give_the_same_findings() -> None:
    """``--jobs 2``: the partitions are judged in two spawned worker processes that read
    them back from the scratch Parquet files."""
    paths = [str(SAMPLES)]
    alone = _samples_in_one_process()
    pooled = scan_paths(paths, jobs=2, buckets=6)
    assert pooled.stats.partitions == alone.stats.partitions > 1
    assert findings_jsonl(pooled) == findings_jsonl(alone)


def test_capture_sharded_across_workers_gives_the_same_findings(
    monkeypatch: pytest.MonkeyPatch, started_once: None
) -> None:
    """Two worker processes each reassemble half of the connections of the capture (by
    connection id) into partition files of their own."""
    import sse_forensics.pipeline as pipeline

    monkeypatch.setattr(pipeline, "SHARD_BYTES", 0)
    paths = [str(SAMPLES)]
    alone = _samples_in_one_process()  # one process: SHARD_BYTES plays no part
    sharded = scan_paths(paths, jobs=2, buckets=6)
    assert findings_jsonl(sharded) == findings_jsonl(alone)
    assert sharded.stats == alone.stats
    assert [e.as_dict() for e in sharded.errors] == [e.as_dict() for e in alone.errors]


def _production_logs(tmp: Path, sessions: int) -> list[str]:
    from support.log_sets import write_log_set

    return write_log_set(tmp, sessions)


def _late_sessions(paths: list[str], tmp: Path) -> str:
    """The event log with the session left out of every record but each stream's last:
    the records wait, by stream, until the log names their session."""
    rows = [json.loads(line) for line in Path(paths[1]).read_text().splitlines()]
    last = {r["stream"]: i for i, r in enumerate(rows)}
    for i, r in enumerate(rows):
        if last[r["stream"]] != i:
            r.pop("session")
    out = tmp / "late-sessions.jsonl"
    out.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(out)


def test_logs_are_partitioned_and_spilled_without_changing_a_finding(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Logs go through the partitioned reader (rows routed by session, client address or
    stream; pseudo-connections numbered over the whole scan): one partition and many,
    held in memory or spilled to Parquet at every batch, give the same JSON lines and
    sessions — for an event log with its access log, an access log alone, and an event
    log whose records name their session only at the end of each stream."""
    from sse_forensics import pipeline
    from sse_forensics.evidence.store import EvidenceStore
    from sse_forensics.pipeline import LogOptions

    paths = _production_logs(tmp_path, 36)
    options = LogOptions(
        'nginx:$remote_addr - $remote_user [$time_local] "$request" $status '
        '$body_bytes_sent "$http_referer" "$http_user_agent" "$http_last_event_id" '
        '"$sent_http_mcp_session_id" $request_time'
    )
    cases = {
        "joined": paths,
        "access alone": paths[:1],
        "late sessions": [paths[0], _late_sessions(paths, tmp_path)],
    }
    for name, inputs in cases.items():
        whole = scan_paths(inputs, logs=options, buckets=1)
        assert whole.tables["sessions"].height > 30, name
        assert whole.findings or name == "access alone", name
        for budget in (None, 1 << 12):
            if budget is not None:
                monkeypatch.setattr(
                    pipeline,
                    "EvidenceStore",
                    functools.partial(EvidenceStore, memory_budget=budget),
                )
            split = scan_paths(inputs, logs=options, buckets=5)
            assert split.stats.partitions > 1, name
            assert findings_jsonl(split) == findings_jsonl(whole), (name, budget)
            assert split.tables["sessions"].equals(whole.tables["sessions"]), (name, budget)


def test_log_partitions_built_by_worker_processes_give_the_same_findings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, started_once: None
) -> None:
    """``--jobs 2`` on a large input: the worker processes, started at once, build each
    log partition's evidence rows (as a cluster's tasks do), then judge the partitions; the
    JSON lines, sessions and statistics are those of one process — also with records
    that wait for their session and access lines no stream takes."""
    import sse_forensics.pipeline as pipeline
    from sse_forensics.pipeline import LogOptions

    monkeypatch.setattr(pipeline, "SHARD_BYTES", 0)  # "large": the pool starts at once

    paths = _production_logs(tmp_path, 12)
    paths = [paths[0], _late_sessions(paths, tmp_path)]
    options = LogOptions(
        'nginx:$remote_addr - $remote_user [$time_local] "$request" $status '
        '$body_bytes_sent "$http_referer" "$http_user_agent" "$http_last_event_id" '
        '"$sent_http_mcp_session_id" $request_time'
    )
    alone = scan_paths(paths, logs=options, jobs=1, buckets=3)
    pooled = scan_paths(paths, logs=options, jobs=2, buckets=3)
    assert alone.findings and alone.stats.partitions > 1
    assert findings_jsonl(pooled) == findings_jsonl(alone)
    assert pooled.tables["sessions"].equals(alone.tables["sessions"])
    assert pooled.stats == alone.stats


def test_worker_processes_get_fewer_larger_partitions() -> None:
    """--jobs N > 1 cuts the input into partitions of POOLED_PARTITION_BYTES (each costs
    the workers a file per reading task and a task per step), one process into
    PARTITION_BYTES (what bounds its memory); at least four per worker either way."""
    from sse_forensics.pipeline import partition_count

    mb = 1 << 20
    assert partition_count(400 * mb, 1) == 50  # 8 MB each
    assert partition_count(400 * mb, 2) == 25  # 16 MB each
    assert partition_count(1 * mb, 1) == 1
    assert partition_count(1 * mb, 2) == 8
