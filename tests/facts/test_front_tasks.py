"""The cross-session pass's per-partition work runs as tasks in the scan's worker pool
(``FrontSource.map_events``: one partition's event files in, a small result out), the
parent only merging: the front is the same as the one computed in one process, and no
partition's events are read by the parent."""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable
from concurrent.futures import Future, ProcessPoolExecutor
from pathlib import Path
from typing import Any

from conftest import SAMPLES
from support.log_samples import LOGS
from support.log_sets import write_log_set

from sse_forensics import pipeline
from sse_forensics.evidence.store import EvidenceStore
from sse_forensics.facts.config import AnalysisConfig
from sse_forensics.facts.front import Front
from sse_forensics.pipeline import LogOptions

ACCESS_FORMAT = (
    'nginx:$remote_addr - $remote_user [$time_local] "$request" $status $body_bytes_sent '
    '"$http_referer" "$http_user_agent" "$http_last_event_id" "$sent_http_mcp_session_id" '
    "$request_time"
)
# Captures and logs of one scan: folds, links, a replay of another session's events
# (foreign first sightings), a counter shared by a session's streams.
SAMPLE_NAMES = ["clean-resume-int", "replay-crossed-sessions", "shared-counter-two-streams"]


class _Recording(ProcessPoolExecutor):
    """A spawned worker pool that notes the task function of each front task it runs."""

    def __init__(self) -> None:
        super().__init__(max_workers=1, mp_context=multiprocessing.get_context("spawn"))
        self.tasks: list[str] = []

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        if fn is pipeline._front_task:
            self.tasks.append(args[0].__name__)
        return super().submit(fn, *args, **kwargs)


def _as_plain(front: Front) -> dict[str, Any]:
    """Every table of ``front`` as comparable values."""
    return {
        "dropped": front.dropped,
        "folds": list(front.folds.items()),
        "links": front.links,
        "codecs": front.codecs,
        "stream_codecs": front.stream_codecs,
        "scopes": front.scopes,
        "shared_session": front.shared_session,
        "shared_server": front.shared_server,
        "server_groups": {k: g.sorted for k, g in front.server_groups.items()},
        "foreign": front.foreign,
        "tasks": front.tasks,
        "key_tasks": None if front.key_tasks is None else sorted(front.key_tasks.iter_rows()),
    }


def _fronts(
    paths: list[str], buckets: int, logs: LogOptions | None = None
) -> tuple[Front, Front, list[str]]:
    config = AnalysisConfig()
    with EvidenceStore(buckets) as store:
        pipeline.ingest(paths, store, config, logs)
        here = pipeline.cross_session_front(store, config)
        with _Recording() as pool:
            pooled = pipeline.cross_session_front(store, config, pool)
    return here, pooled, pool.tasks


def test_front_tasks_in_workers_give_the_front_of_one_process() -> None:
    paths = [
        str(p)
        for name in SAMPLE_NAMES
        for p in (SAMPLES / f"{name}.pcap", LOGS / name)
        if p.exists()
    ]
    here, pooled, tasks = _fronts(paths, buckets=3)
    # The pass had work to do: links, folds, a replay first seen in another task's
    # partition, a session-wide counter.
    assert here.links and here.folds and here.foreign and here.shared_session
    assert _as_plain(pooled) == _as_plain(here)
    # Every event loop ran in the pool, one task per partition holding events.
    assert {"partition_ids", "partition_keys", "partition_first"} <= set(tasks)


def test_front_tasks_merge_many_partitions(tmp_path: Path) -> None:
    """A log set whose resumes link streams of several partitions: the tasks' results are
    merged into the same links, scopes, counters and task groups."""
    paths = write_log_set(tmp_path, 40)
    here, pooled, tasks = _fronts(paths, buckets=8, logs=LogOptions(ACCESS_FORMAT))
    assert here.links and len(here.tasks) > 1
    assert _as_plain(pooled) == _as_plain(here)
    assert tasks.count("partition_ids") > 1


def test_a_partition_without_events_is_not_a_task() -> None:
    """A store spilled with empty partitions: only the partitions with event files are
    sent (a task per empty partition would only start and read nothing)."""
    config = AnalysisConfig()
    with EvidenceStore(16) as store:
        pipeline.ingest([str(SAMPLES / "clean-resume-int.pcap")], store, config)
        with _Recording() as pool:
            pipeline.cross_session_front(store, config, pool)
        holding = [b for b in range(16) if store.task_files([b])["events"]]
    assert 0 < len(holding) < 16
    assert pool.tasks.count("partition_ids") == len(holding)


def test_first_sightings_are_read_only_for_events_two_tasks_hold() -> None:
    """Resumes whose replayed events no other task holds (issue 16: a replay of a million
    events was looked up whole, every sighting with its origin, to find none elsewhere):
    the pass screens the pairs by a hash per task and reads no first sighting."""
    paths = [
        str(p)
        for name in ("clean-resume-int", "shared-counter-two-streams")
        for p in (SAMPLES / f"{name}.pcap", LOGS / name)
        if p.exists()
    ]
    here, pooled, tasks = _fronts(paths, buckets=3)
    assert len(here.tasks) > 1 and not here.foreign
    assert _as_plain(pooled) == _as_plain(here)
    assert "partition_pairs" in tasks and "partition_first" not in tasks
