"""The ``signals`` table of a scan that keeps no table is a query (issue 16: a stream of a
million signal events held a row each for a table no packaged rule reads): no row is built
unless a rule reads it, and what a rule reads is the table a scan that keeps its tables
holds, row for row and in order (carried signals, ``410`` and ``no-store`` rows of
several streams)."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
from conftest import SAMPLES

from sse_forensics import pipeline
from sse_forensics.engine.evaluate import Table
from sse_forensics.pipeline import scan_paths
from sse_forensics.report.jsonout import findings_jsonl

# Between them: every kind of row, on several streams of one partition.
SIGNALLED = [
    "gap-client-reissued.pcap",  # no-store, two streams
    "live-gap-signalled.pcap",  # stream-gap
    "gap-signal-late.pcap",  # stream-gap
    "resume-410.pcap",  # 410
    "resume-gap-signalled.pcap",  # resume-gap
    "backpressure-disconnect-resume.pcap",  # backpressure-disconnect
]
KINDS = {"stream-gap", "resume-gap", "backpressure-disconnect", "410", "no-store"}

# A user's rule over the signals table: a finding per row.
SIGNAL_RULE = """
id = "every-signal"
title = "A gap signal"
severity = "info"
table = "signals"
where = "kind IS NOT NULL"
classification = "expected_gap"
message = "Session {session_id}: {kind} on {response_stream} at {position}"
evidence = []
fingerprint = ["session_id", "response_stream", "kind", "position", "first"]
rationale = "Lists every signal."
remediation = "Nothing."
"""


def _paths() -> list[str]:
    return [str(SAMPLES / name) for name in SIGNALLED]


def test_a_scan_without_tables_builds_no_signal_row(monkeypatch: pytest.MonkeyPatch) -> None:
    handed: list[Table] = []
    evaluate = pipeline.evaluate

    def spy(rules, tables, provided):  # type: ignore[no-untyped-def]
        handed.append(tables["signals"])
        return evaluate(rules, tables, provided)

    monkeypatch.setattr(pipeline, "evaluate", spy)
    scan_paths(_paths(), keep_tables=False, buckets=1)
    eager = scan_paths(_paths(), keep_tables=True, buckets=1).tables["signals"]
    assert len(handed) == 2
    lazy, held = handed
    assert isinstance(lazy, pl.LazyFrame)  # a query: no row held
    assert isinstance(held, pl.DataFrame)
    assert set(eager.get_column("kind")) == KINDS
    assert eager.get_column("stream").n_unique() > 3
    assert lazy.collect().equals(eager)
    assert held.equals(eager)


@pytest.mark.parametrize("jobs", [1, 2])
def test_a_rule_over_the_signals_query_finds_what_over_the_table(tmp_path: Path, jobs: int) -> None:
    (tmp_path / "every-signal.toml").write_text(SIGNAL_RULE, encoding="utf-8")
    lazy = scan_paths(_paths(), rule_dirs=[tmp_path], keep_tables=False, jobs=jobs)
    eager = scan_paths(_paths(), rule_dirs=[tmp_path], keep_tables=True, jobs=jobs)
    mine = [f for f in lazy.findings if f.rule == "every-signal"]
    assert len(mine) == eager.tables["signals"].height
    assert findings_jsonl(lazy) == findings_jsonl(eager)
