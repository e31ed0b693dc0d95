"""Log pseudo-connections numbered without a string per stream, group or client address
in the process that numbers them (issue 9: the client of a 5.8 GB log set held 16 M
stream names and group keys): what the tasks of ``cluster.logs`` hand back holds numbers,
their keys stay in the partitions' files; and the numbers are the global sort's."""

from __future__ import annotations

import dataclasses
import random
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import polars as pl
from support.log_sets import write_log_set

from sse_forensics.evidence.log_numbers import GroupKeys, number_keys
from sse_forensics.evidence.log_records import GROUP_ORDER
from sse_forensics.facts.config import AnalysisConfig
from sse_forensics.pipeline import LogOptions, scan_paths
from sse_forensics.report.jsonout import findings_jsonl

FORMAT = LogOptions(
    'nginx:$remote_addr - $remote_user [$time_local] "$request" $status $body_bytes_sent '
    '"$http_referer" "$http_user_agent" "$http_last_event_id" "$sent_http_mcp_session_id" '
    "$request_time"
)


class Recording(ThreadPoolExecutor):
    """A thread pool that keeps the result of every task of the log ingest (what a worker
    sends back to be numbered)."""

    def __init__(self) -> None:
        super().__init__(max_workers=2)
        self.results: list[tuple[str, Any]] = []

    def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> Future[Any]:
        future = super().submit(fn, *args, **kwargs)
        if fn.__module__ == "sse_forensics.cluster.logs":
            future.add_done_callback(lambda f: self.results.append((fn.__name__, f.result())))
        return future


def _string_rows(value: Any) -> int:
    """Rows of string columns in every frame or series ``value`` holds."""
    if isinstance(value, pl.DataFrame):
        return sum(value.height for t in value.dtypes if t == pl.String)
    if isinstance(value, pl.Series):
        return len(value) if value.dtype == pl.String else 0
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return sum(_string_rows(getattr(value, f.name)) for f in dataclasses.fields(value))
    if isinstance(value, dict):
        return sum(_string_rows(v) for v in value.values())
    if isinstance(value, list | tuple):
        return sum(_string_rows(v) for v in value)
    return 0


def test_tasks_hand_back_no_string_per_stream_group_or_client(tmp_path: Path) -> None:
    paths = write_log_set(tmp_path, 40)
    local = scan_paths(paths, AnalysisConfig(), logs=FORMAT, jobs=1, buckets=3)
    with Recording() as pool:
        tasks = scan_paths(paths, AnalysisConfig(), logs=FORMAT, jobs=2, buckets=3, executor=pool)
    assert findings_jsonl(tasks) == findings_jsonl(local) and local.findings
    names = {name for name, _ in pool.results}
    assert {"read_log_file", "group_order_task", "session_partition"} <= names, names
    strings = {name: _string_rows(r) for name, r in pool.results if _string_rows(r)}
    assert not strings, strings  # the old tasks: stream names, group keys, client firsts


def _old_numbers(groups: pl.DataFrame, first_id: int) -> pl.DataFrame:
    """The numbering before: all groups, strings and all, sorted in one table."""
    return (
        groups.with_columns(
            pl.col("first_ts").fill_null(0.0).alias("order_ts"),
            pl.col("first_ts").is_null().alias("first_untimed"),
        )
        .sort(GROUP_ORDER, nulls_last=True)
        .with_row_index("conn_id", offset=first_id)
        .select("id", pl.col("conn_id").cast(pl.Int64))
    )


def test_group_numbers_are_those_of_one_sort_of_every_group() -> None:
    """Ties of time broken by untimed, then the source's name, then the line; null times,
    sources and lines; partitions with sources of their own."""
    rnd = random.Random(3)
    sources = ["b.jsonl", "a.jsonl", "c/z.jsonl", "ä.jsonl"]
    rows = [
        {
            "id": i,
            "bucket": rnd.randrange(5),
            "first_ts": rnd.choice([None, 0.0, 1.5, 2.0, rnd.random() * 10]),
            "first_src": rnd.choice([*sources, None]),
            "first_line": rnd.choice([None, rnd.randrange(1, 50)]),
        }
        for i in range(600)
    ]
    groups = pl.DataFrame(rows).unique(["first_src", "first_line"], keep="first").sort("id")
    keys: dict[int, GroupKeys] = {}
    ids: dict[int, list[int]] = {}
    for (bucket,), part in groups.partition_by("bucket", as_dict=True).items():
        part = part.sort(["first_src", "first_line"], nulls_last=True)
        own = sorted(part.get_column("first_src").drop_nulls().unique().to_list())
        src = part.get_column("first_src").replace_strict(
            own, range(len(own)), default=None, return_dtype=pl.UInt32
        )
        order = part.select("first_ts", "first_line").with_columns(src.alias("src"))
        keys[int(bucket)] = GroupKeys(order, own)
        ids[int(bucket)] = part.get_column("id").to_list()
    numbers = number_keys(keys, 100)
    got = sorted(
        (i, n)
        for b, series in numbers.items()
        for i, n in zip(ids[b], series.to_list(), strict=True)
    )
    assert got == sorted(_old_numbers(groups, 100).iter_rows())
