"""Issue 16: the judgements of a long stream beside its live gaps read the events they need,
not all of them (each ~1.5 KB as a record), and say what the whole stream's records say.

- A stream with missing capture bytes: why it is not judged (``facts.unjudged``) reads the
  first and the last event with an ID (``facts.windows.id_ends``)."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
from support.scripts import load_script

from sse_forensics.evidence import pieces
from sse_forensics.facts import model, windows
from sse_forensics.pipeline import scan_paths
from sse_forensics.report.jsonout import findings_jsonl
from sse_forensics.result import ScanResult

hostile = load_script("samples/hostile.py", "samples_hostile")
EVENTS = 6000


def _records_built(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Each :class:`~.model.EventRecord` of a stream of more than 1,000 events built from
    now on, by position (a short stream is read whole: ``windows.WINDOWED_EVENTS``)."""
    built: list[int] = []
    post_init = model.EventRecord.__post_init__

    def counted(self: model.EventRecord) -> None:
        if self.stream.exchange.n_events > 1000:
            built.append(self.position)
        post_init(self)

    monkeypatch.setattr(model.EventRecord, "__post_init__", counted)
    return built


def _judged(result: ScanResult) -> tuple[str, list[tuple[object, ...]], list[object]]:
    """The findings, the long stream's ``streams`` row (what is not judged of it) and the
    ``sessions`` table's ``unjudged`` entries."""
    streams = result.tables["streams"].filter(pl.col("response_label").str.starts_with("conn 2 "))
    rows = streams.select("missing_spans", "missing_bytes", "not_judged").rows()
    unjudged = result.tables["sessions"].get_column("unjudged").to_list()
    return findings_jsonl(result), rows, unjudged


@pytest.mark.parametrize("from_pieces", [False, True])
@pytest.mark.parametrize("lose", [0, EVENTS // 2, EVENTS - 1])
def test_a_long_stream_with_capture_loss_is_told_unjudged_from_its_two_ends(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, lose: int, from_pieces: bool
) -> None:
    """6,000 events, the segment holding event ``lose`` missing from the capture: what is
    not judged of the stream (before its first ID, after its last, or nothing: the hole
    lies between two IDs) is what its whole records say, and besides the events around
    its jump only its first and last events with an ID are built."""
    path = tmp_path / "lost.pcap"
    hostile.write(path, lambda w: hostile.long_stream(w, EVENTS, lose=lose))
    if from_pieces:
        monkeypatch.setattr(pieces, "STREAM_ROWS", 1)
    built = _records_built(monkeypatch)
    windowed = _judged(scan_paths([str(path)], jobs=1))
    assert windowed[1][0][0] == 1  # the stream lacks one span
    assert len(built) <= 4, sorted(built)  # the jump's two events, the two ends
    monkeypatch.setattr(windows, "WINDOWED_EVENTS", 1 << 30)  # read whole
    assert _judged(scan_paths([str(path)], jobs=1)) == windowed
    assert len(built) > EVENTS // 2
