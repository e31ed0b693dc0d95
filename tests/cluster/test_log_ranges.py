"""A large plain log file is read as several byte ranges, one task each
(``cluster.logs``, step 1): the scan's JSON lines, errors, counters and log statistics are
those of the one-task read and of a single-process scan. Runs on a thread pool (any
``concurrent.futures`` executor takes the tasks): no Dask needed."""

from __future__ import annotations

import dataclasses
import json
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from support.log_sets import write_log_set

from sse_forensics.facts.config import AnalysisConfig
from sse_forensics.limits import Limits
from sse_forensics.pipeline import LogOptions, scan_paths
from sse_forensics.report.jsonout import findings_jsonl
from sse_forensics.result import ScanResult

FORMAT = LogOptions(
    'nginx:$remote_addr - $remote_user [$time_local] "$request" $status $body_bytes_sent '
    '"$http_referer" "$http_user_agent" "$http_last_event_id" "$sent_http_mcp_session_id" '
    "$request_time"
)
CONFIG = AnalysisConfig(limits=Limits(log_line_bytes=3000))


class Counting(ThreadPoolExecutor):
    """A thread pool that counts the tasks of each function submitted to it."""

    def __init__(self) -> None:
        super().__init__(max_workers=2)
        self.calls: dict[str, int] = {}

    def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> Future[Any]:
        self.calls[fn.__name__] = self.calls.get(fn.__name__, 0) + 1
        return super().submit(fn, *args, **kwargs)


def _damaged(tmp: Path) -> list[str]:
    """A generated log set with damage all through both files: 30 unreadable lines spread
    over each (more than the 20 samples a file lists), blank lines, and lines past the
    ``log_line_bytes`` cap in the event log."""
    access, events = (Path(p) for p in write_log_set(tmp, 40))
    for path, junk in ((access, "not an access line {}"), (events, '{{"ts": "broken {}')):
        lines = path.read_text().splitlines(keepends=True)
        step = max(1, len(lines) // 30)
        out = []
        for i, line in enumerate(lines):
            out.append(line)
            if i % step == 0:
                out.append(junk.format(i) + "\n")
            if i % 97 == 0:
                out.append("\n")
        if path == events:
            long = json.dumps({"ts": 1.0, "stream": "s", "kind": "written", "data": "x" * 5000})
            out[len(out) // 3 : len(out) // 3] = [long + "\n"]
            out[2 * len(out) // 3 : 2 * len(out) // 3] = [long + "\n"]
        path.write_text("".join(out))
    return [str(access), str(events)]


def _scan(paths: list[str], pool: Counting | None = None) -> ScanResult:
    return scan_paths(
        paths, CONFIG, logs=FORMAT, jobs=2, buckets=3, keep_tables=False, executor=pool
    )


def _same(a: ScanResult, b: ScanResult) -> None:
    assert findings_jsonl(a) == findings_jsonl(b)
    assert [e.as_dict() for e in a.errors] == [e.as_dict() for e in b.errors]
    assert dataclasses.replace(a.stats, partitions=0) == dataclasses.replace(b.stats, partitions=0)
    untimed = [{k: v for k, v in r.log_stats.items() if k != "seconds"} for r in (a, b)]
    assert untimed[0] == untimed[1]


def test_a_file_read_as_ranges_gives_the_one_task_scan(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sse_forensics.cluster.logs as cluster_logs

    paths = _damaged(tmp_path)
    local = scan_paths(paths, CONFIG, logs=FORMAT, jobs=1, buckets=3, keep_tables=False)
    assert local.findings and len(local.errors) > 20
    assert any(e.as_dict().get("cap") == "log_line_bytes" for e in local.errors)

    with Counting() as pool:
        whole = _scan(paths, pool)
    assert pool.calls["read_log_file"] == 2 and "count_newlines" not in pool.calls
    _same(whole, local)

    sizes = [Path(p).stat().st_size for p in paths]
    monkeypatch.setattr(cluster_logs, "RANGE_BYTES", max(sizes) // 7)
    with Counting() as pool:
        ranged = _scan(paths, pool)
    ranges = pool.calls["read_log_file"]
    assert ranges >= 9, pool.calls  # the event log in 7 or 8, the access log in 1 or more
    assert pool.calls["count_newlines"] == ranges - len(paths)
    _same(ranged, local)
