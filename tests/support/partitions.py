"""Comparing a scan in one partition with the same scan in several."""

from __future__ import annotations

import polars as pl

from sse_forensics.report.jsonout import findings_jsonl
from sse_forensics.result import ScanResult


def sorted_tables(result: ScanResult) -> dict[str, pl.DataFrame]:
    """Every fact table, rows in a set order (partitions give them in another)."""
    return {
        name: df.sort(df.columns, nulls_last=True) if df.height else df
        for name, df in result.tables.items()
    }


def assert_same_in_partitions(whole: ScanResult, split: ScanResult) -> None:
    """The same JSON lines and fact tables, whether judged in one partition or several."""
    assert split.stats.partitions > 1 or whole.stats.partitions == 1
    assert findings_jsonl(split) == findings_jsonl(whole)
    tables = sorted_tables(split)
    for name, df in sorted_tables(whole).items():
        assert tables[name].equals(df), name
