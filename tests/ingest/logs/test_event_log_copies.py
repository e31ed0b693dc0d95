"""An event log read in time order is turned into responses without a sorted copy of its
records (issue 16: one stream of a million records was copied whole by each sort), and
what it gives is what the same records in any other order give."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
from support.scripts import load_script

from sse_forensics.evidence import from_logs
from sse_forensics.ingest.logs import read_logs


def _records(tmp_path: Path, n: int) -> pl.DataFrame:
    """The records of ``samples/hostile.py``'s event log: the ordinary gap's stream, then
    one of ``n`` events (each emitted and written), in time order."""
    hostile = load_script("samples/hostile.py", "samples_hostile")
    path = tmp_path / "long.events.jsonl"
    hostile.write_event_log(path, n)
    return read_logs([str(path)]).events


def test_records_in_time_order_are_not_sorted_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    events = _records(tmp_path, 3_000)
    sorted_heights: list[int] = []
    sort = pl.DataFrame.sort

    def spy(self: pl.DataFrame, *args: object, **kwargs: object) -> pl.DataFrame:
        sorted_heights.append(self.height)
        return sort(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(pl.DataFrame, "sort", spy)
    log = from_logs._event_log_streams(events)
    monkeypatch.undo()
    written = events.filter(pl.col("kind") == "written").height
    assert log.records.height == written
    # Only the small tables are sorted (groups, a stream's spans), never the records.
    assert max(sorted_heights) < written // 2, sorted_heights
    shuffled = from_logs._event_log_streams(events.sample(fraction=1.0, shuffle=True, seed=7))
    assert shuffled.records.equals(log.records)
    assert shuffled.groups.equals(log.groups)
    assert shuffled.info.equals(log.info)
