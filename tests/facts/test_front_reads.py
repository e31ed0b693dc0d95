"""The cross-session pass holds one partition's exchanges at a time where it can (issue 9:
peak memory bounded whatever the input size), and hands each task the share of the front
its own exchanges key, whatever the partitioning."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from conftest import SAMPLES
from support.log_samples import LOGS
from support.log_sets import write_log_set

from sse_forensics import pipeline
from sse_forensics.evidence.store import EvidenceStore
from sse_forensics.evidence.tables import ExchangeColumns
from sse_forensics.facts.config import AnalysisConfig
from sse_forensics.facts.front import _fold_inputs, compute_front

ACCESS_FORMAT = (
    'nginx:$remote_addr - $remote_user [$time_local] "$request" $status $body_bytes_sent '
    '"$http_referer" "$http_user_agent" "$http_last_event_id" "$sent_http_mcp_session_id" '
    "$request_time"
)
_STREAMS = pl.col("event_stream") | pl.col("last_event_id").is_not_null()

SCENARIOS = ["backpressure-disconnect-resume", "clean-resume-int", "gap-signal-late"]


@dataclass
class _Reads(pipeline._StoreSource):
    """The store as the pass reads it, noting the rows of every whole-scan exchanges read
    that no filter narrowed."""

    unfiltered: list[int] = field(default_factory=list)
    stream_columns: list[str] = field(default_factory=list)  # of the read of every stream

    def exchanges(
        self, columns: Sequence[str | pl.Expr], where: pl.Expr | None = None
    ) -> pl.DataFrame:
        df = super().exchanges(columns, where)
        if where is None:
            self.unfiltered.append(df.height)
        elif str(where) == str(_STREAMS):
            self.stream_columns.extend(df.columns)
        return df


def _paths() -> list[str]:
    return [str(p) for name in SCENARIOS for p in (SAMPLES / f"{name}.pcap", LOGS / name)]


def _fold_keys(buckets: int) -> tuple[list[tuple[int, int]], list[tuple[int, int]], int, int]:
    config = AnalysisConfig()
    with EvidenceStore(buckets) as store:
        pipeline.ingest(_paths(), store, config)
        source = _Reads(store)
        logged, captured, _ = _fold_inputs(source)
        total = store.columns(ExchangeColumns, ["conn_id"]).height
        largest = max(source.unfiltered, default=0)
    return (
        sorted(logged.select("conn_id", "index").iter_rows()),
        sorted(captured.select("conn_id", "index").iter_rows()),
        largest,
        total,
    )


def test_fold_inputs_are_found_partition_by_partition() -> None:
    """The sessions both captures and logs hold are found without reading every exchange
    of the scan at once, and are the same sessions in one partition and in six."""
    logged, captured, largest, total = _fold_keys(6)
    assert logged and captured  # each scenario's logs and capture share sessions
    assert largest < total  # no read of all the scan's exchanges
    one_logged, one_captured, _, _ = _fold_keys(1)
    assert (logged, captured) == (one_logged, one_captured)


def test_each_task_gets_the_front_its_exchanges_key() -> None:
    """The tasks' shares of the front together are the whole scan's folds, dropped log
    exchanges and links, each in its task, folds in key order."""
    config = AnalysisConfig()
    with EvidenceStore(6) as store:
        pipeline.ingest(_paths(), store, config)
        front = pipeline.cross_session_front(store, config)
        shares = front.split()
        # Each share keys its own task's exchanges only.
        for task, share in zip(front.tasks, shares, strict=True):
            keys = set(store.task_columns(task, ExchangeColumns, ["conn_id", "index"]).iter_rows())
            assert share.dropped <= keys and set(share.folds) <= keys
            assert set(share.links) <= keys and set(share.stream_codecs) <= keys
            sessions = set(store.task_columns(task, ExchangeColumns, ["session"])["session"])
            assert set(share.codecs) <= sessions and set(share.scopes) <= sessions
    assert front.folds and front.dropped and front.links
    assert sum(len(s.folds) for s in shares) == len(front.folds)
    assert {k: v for s in shares for k, v in s.folds.items()} == front.folds
    assert all(list(s.folds) == sorted(s.folds) for s in shares)
    assert set().union(*(s.dropped for s in shares)) == front.dropped
    assert {k: v for s in shares for k, v in s.links.items()} == front.links
    assert {k: v for s in shares for k, v in s.stream_codecs.items()} == front.stream_codecs
    assert sum(len(s.codecs) for s in shares) == len(front.codecs)
    assert {k: v for s in shares for k, v in s.codecs.items()} == front.codecs
    assert {k: v for s in shares for k, v in s.scopes.items()} == front.scopes


def test_session_readings_are_of_the_sessions_with_streams(tmp_path: Path) -> None:
    """A session's ID reading is asked for its streams only (``assign_ids``): the front
    holds one for each session with a stream, none for a session that only POSTed (issue
    9: 1.28M of them on the --big log set)."""
    sample = (LOGS / "clean-resume-int" / "access.log").read_text().splitlines()[2]
    posts = tmp_path / "access.log"
    posts.write_text(sample.replace("clean-resume-int-0001", "posted-only") + "\n")
    config = AnalysisConfig()
    with EvidenceStore(6) as store:
        pipeline.ingest([*_paths(), str(posts)], store, config)
        front = pipeline.cross_session_front(store, config)
        streams = pl.col("event_stream") | pl.col("last_event_id").is_not_null()
        with_streams = set(store.columns(ExchangeColumns, ["session"], streams)["session"])
        every = set(store.columns(ExchangeColumns, ["session"])["session"])
    assert every - with_streams == {"posted-only"}
    assert set(front.codecs) == with_streams
    assert set(front.scopes) <= with_streams


def test_the_scans_streams_are_not_walked_row_by_row(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The pass walks in Python the linked streams only, never a table of every stream of
    the scan (issue 9: a dict of each stream's key and of its session held two Python
    objects per stream, 3.2 M streams on the --big log set), and reads the streams with
    the columns their order and links need (not the request line: it is not held)."""
    walked: list[tuple[list[str], int]] = []
    iter_rows = pl.DataFrame.iter_rows

    def noted(self: pl.DataFrame, *args: Any, **kwargs: Any) -> Any:
        walked.append((self.columns, self.height))
        return iter_rows(self, *args, **kwargs)

    config = AnalysisConfig()
    logs = pipeline.LogOptions(ACCESS_FORMAT)
    with EvidenceStore(4) as store:
        pipeline.ingest(write_log_set(tmp_path, 40), store, config, logs)
        source = _Reads(store)
        streams = store.columns(ExchangeColumns, ["conn_id"], _STREAMS).height
        monkeypatch.setattr(pl.DataFrame, "iter_rows", noted)
        front = compute_front(source, config)
    assert front.links and 3 * len(front.links) < 2 * streams  # a third of them resumes
    ranked = [height for columns, height in walked if "rank" in columns]
    assert ranked and max(ranked) < streams, (ranked, streams)
    assert not {"req_target", "req_method"} & set(source.stream_columns)
