"""A small scan's fixed cost (issue 13): its lazy queries run on polars' in-memory engine
(:mod:`sse_forensics.query_engine`), and a log scan of one partition keeps its evidence in
memory instead of writing it to Parquet and reading it back. Neither changes a finding."""

from __future__ import annotations

import os
from pathlib import Path

import polars as pl
import pytest

import sse_forensics.pipeline as pipeline
from sse_forensics.facts.tables import EVIDENCE, evidence_column
from sse_forensics.query_engine import SMALL_SCAN_BYTES, engine_for

SAMPLES = Path(__file__).resolve().parents[2] / "samples"
AFFINITY = "POLARS_ENGINE_AFFINITY"


def test_engine_for_small_inputs_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(AFFINITY, raising=False)
    with engine_for(SMALL_SCAN_BYTES - 1):
        assert os.environ.get(AFFINITY) == "in-memory"
    assert os.environ.get(AFFINITY) is None  # polars' default again
    with engine_for(SMALL_SCAN_BYTES):
        assert os.environ.get(AFFINITY) is None
    monkeypatch.setenv(AFFINITY, "streaming")  # an engine the process names is kept
    with engine_for(0):
        assert os.environ.get(AFFINITY) == "streaming"
    assert os.environ.get(AFFINITY) == "streaming"


def test_small_scan_queries_run_in_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    """The cross-session pass of a sample scan runs with the in-memory affinity set."""
    monkeypatch.delenv(AFFINITY, raising=False)
    seen: list[str | None] = []
    front = pipeline.compute_front

    def spy(*args, **kwargs):  # type: ignore[no-untyped-def]
        seen.append(os.environ.get(AFFINITY))
        return front(*args, **kwargs)

    monkeypatch.setattr(pipeline, "compute_front", spy)
    pipeline.scan_paths([str(SAMPLES / "resume-storm.pcap")])
    assert seen == ["in-memory"]
    assert os.environ.get(AFFINITY) is None


def test_one_partition_log_scan_writes_no_parquet(monkeypatch: pytest.MonkeyPatch) -> None:
    written: list[object] = []
    write = pl.DataFrame.write_parquet

    def counted(self: pl.DataFrame, file: object, **kwargs: object) -> None:
        written.append(file)
        write(self, file, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(pl.DataFrame, "write_parquet", counted)
    result = pipeline.scan_paths([str(SAMPLES / "logs" / "resume-storm")])
    assert result.stats.partitions == 1 and result.findings
    assert written == []


def test_evidence_column_without_entries() -> None:
    """No entry at all: the empty lists and nulls as given, as the general path makes them
    (a row with an entry beside them takes that path)."""
    lists: list[list[dict[str, object]] | None] = [[], None, []]
    column = evidence_column(lists)
    assert column.dtype == EVIDENCE
    assert column.to_list() == [[], None, []]
    entry = {"source": "a.pcap", "frame": 1, "line": None, "ts": 1.0, "what": "x"}
    general = evidence_column([*lists, [entry]])
    assert general.head(3).to_list() == column.to_list()
    assert evidence_column([]).dtype == EVIDENCE and not evidence_column([]).len()
