"""An event log whose one stream holds many records is made into evidence a spill part at a
time, never from every record of its partition at once (issue 16: a stream of two million
events held whole, several times over, took 1.4 GB), and gives the evidence rows a whole
read gives."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import polars as pl
import pytest
from support.scripts import load_script

from sse_forensics.evidence import from_logs, log_partitions, log_records, log_slices
from sse_forensics.evidence.store import EvidenceStore
from sse_forensics.facts.config import AnalysisConfig
from sse_forensics.ingest.logs import iter_log_batches

Tables = list[tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]]


def _evidence(path: Path, buckets: int) -> Tables:
    """Every partition's (connections, exchanges, events) rows of the log at ``path``."""
    store = EvidenceStore(buckets=buckets)
    batches = iter_log_batches([str(path)])
    try:
        log_partitions.ingest_logs(batches, store, 0, AnalysisConfig(), lambda: batches.files)
    finally:
        batches.close()
    try:
        # A partition's connections come in no set order (EvidenceStore.route's join).
        return [(c.sort("conn_id"), x, e) for c, x, e in map(store.load, range(buckets))]
    finally:
        store.close()


def _spy(heights: list[int], function: Callable[..., pl.DataFrame]) -> Callable[..., pl.DataFrame]:
    """``function``, noting the height of the frame it is given first."""

    def spy(frame: pl.DataFrame, *args: object) -> pl.DataFrame:
        heights.append(frame.height)
        return function(frame, *args)

    return spy


@pytest.mark.parametrize("buckets", [1, 3])
@pytest.mark.parametrize("opaque", [False, True])
def test_a_long_stream_is_never_held_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, buckets: int, opaque: bool
) -> None:
    hostile = load_script("samples/hostile.py", "samples_hostile")
    path = tmp_path / "long.events.jsonl"
    records = hostile.write_event_log(path, 3_000, opaque=opaque)
    monkeypatch.setattr(log_slices, "SLICE_RECORDS", 1 << 40)  # every partition whole
    whole = _evidence(path, buckets)

    monkeypatch.setattr(log_slices, "SLICE_RECORDS", 1_000)
    monkeypatch.setattr(log_slices, "PIECE_ROWS", 500)
    # A flush of the routed records every 64 KiB: a spill part is a few hundred records.
    monkeypatch.setattr(log_partitions, "spill_budget", lambda *_: 64 << 10)
    loaded: list[int] = []  # event-log records loaded at once
    load = log_partitions.Spill.load

    def spy_load(
        spill: log_partitions.Spill, name: str, bucket: int, columns: list[str] | None = None
    ) -> pl.DataFrame:
        rows = load(spill, name, bucket, columns)
        if name == "events":
            loaded.append(rows.height)
        return rows

    monkeypatch.setattr(log_partitions.Spill, "load", spy_load)
    grouped: list[int] = []  # records grouped into responses at once
    monkeypatch.setattr(log_records, "assign_groups", _spy(grouped, log_records.assign_groups))
    made: list[int] = []  # records made into events rows at once
    monkeypatch.setattr(from_logs, "_event_log_events", _spy(made, from_logs._event_log_events))
    sliced = _evidence(path, buckets)

    assert records > 6_000
    assert max(loaded, default=0) <= records // 8, loaded
    assert max(grouped) <= records // 8, grouped
    assert made and max(made) <= records // 8, made
    assert sum(x.height for _, x, _ in sliced) == 2  # the ordinary stream, the long one
    for (conns, exchanges, events), (c, x, e) in zip(whole, sliced, strict=True):
        assert conns.equals(c)
        assert exchanges.equals(x)
        assert events.equals(e)
