"""A small scan's fixed cost (issue 13): a log scan of one partition keeps its evidence in
memory instead of writing it to Parquet and reading it back. It changes no finding."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

import sse_forensics.pipeline as pipeline

SAMPLES = Path(__file__).resolve().parents[2] / "samples"


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
