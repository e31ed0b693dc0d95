"""Issue 16: a long event stream the fast path hands to the exact one (capture loss inside
it) holds a window of event objects at a time, not the whole stream: the exact path hands
its events on as rows every ``SPILL_EVENTS`` (``CaptureEvidence.spill``), and the rows are
those of the exact path that keeps them all (``reassemble``)."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.fast_path import assert_equivalent, fast
from support.scripts import load_script

from sse_forensics.evidence import from_capture
from sse_forensics.reassembly import capture

hostile = load_script("samples/hostile.py", "samples_hostile")
EVENTS = 3000
WINDOW = 256
SEGMENT_EVENTS = 200  # more than one segment of hostile.long_stream carries


@pytest.mark.parametrize("lose", [10, EVENTS // 2])
def test_a_lossy_long_stream_holds_a_window_of_events(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, lose: int
) -> None:
    """3,000 events, the segment holding event ``lose`` missing: no exchange of the exact
    path holds more than a window of event objects at once, and the rows (events with their
    positions and frames, the exchange with its hole) equal those of ``reassemble``."""
    path = tmp_path / "lost.pcap"
    hostile.write(path, lambda w: hostile.long_stream(w, EVENTS, lose=lose))
    monkeypatch.setattr(capture, "SPILL_EVENTS", WINDOW, raising=False)
    held = [0]
    handle = capture._ConnectionAnalyzer._handle_events

    def counted(self: capture._ConnectionAnalyzer, events: list) -> None:
        handle(self, events)
        held[0] = max([held[0], *(len(ex.events) for ex in self.exchanges.values())])

    monkeypatch.setattr(capture._ConnectionAnalyzer, "_handle_events", counted)
    result, _rows = fast([str(path)])
    assert result.loss.connections_with_loss == 1  # the stream took the exact path
    assert 0 < held[0] <= WINDOW + SEGMENT_EVENTS
    monkeypatch.undo()
    monkeypatch.setattr(capture, "SPILL_EVENTS", WINDOW, raising=False)
    monkeypatch.setattr(from_capture, "HAND_ON_FRAMES", 4, raising=False)  # several batches
    assert_equivalent([str(path)], shards=(1, 2))


def test_held_rows_past_their_budget_wait_in_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The rows a still-open stream's windows become wait in scratch files once the held
    rows pass ``HELD_BYTES`` (none held in memory here), and the evidence is the same."""
    from sse_forensics.evidence import held_rows

    path = tmp_path / "lost.pcap"
    hostile.write(path, lambda w: hostile.long_stream(w, EVENTS, lose=10))
    monkeypatch.setattr(capture, "SPILL_EVENTS", WINDOW, raising=False)
    monkeypatch.setattr(held_rows, "HELD_BYTES", 0)
    written = []
    add = held_rows.HeldRows.add

    def counted(self: held_rows.HeldRows, key: held_rows.Key, rows) -> None:
        add(self, key, rows)
        written.append(self.written)
        assert self._bytes == 0  # nothing in memory

    monkeypatch.setattr(held_rows.HeldRows, "add", counted)
    monkeypatch.setattr(from_capture, "HAND_ON_FRAMES", 4, raising=False)
    assert_equivalent([str(path)], shards=(1, 2))
    # A window is SPILL_EVENTS and up to a segment more.
    assert written and written[-1] >= EVENTS // (WINDOW + SEGMENT_EVENTS)
