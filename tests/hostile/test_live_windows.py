"""Issue 16: a long stream's live gaps cost what its jumps cost, not what its events cost.

- ``gaps_per_stream`` caps the ID jumps of one response judged one by one (a stream whose
  every ID jumps made ~2 findings of ~10 KB per event): the jumps past it are counted in a
  cap hit, never built as gap records.
- A stream with a jump is judged on the events around it (``facts.windows``): a stream of
  thousands of events with one jump materialises a handful of them, not all (each ~1.5 KB
  as a record), read from held events or from the pieces of a large partition alike."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from support.cli import run
from support.records import records_built
from support.scripts import load_script

from sse_forensics.evidence import pieces
from sse_forensics.facts import gaps, windows
from sse_forensics.facts.config import AnalysisConfig
from sse_forensics.limits import Limits
from sse_forensics.pipeline import scan_paths
from sse_forensics.report.jsonout import findings_jsonl
from sse_forensics.result import ScanResult

hostile = load_script("samples/hostile.py", "samples_hostile")
ORDINARY = ("missing-stream-gap", "silent_corruption", "8", "12")
EVERY_JUMP = 60  # events of the stream whose every ID jumps: 59 jumps


@pytest.fixture(scope="module")
def every_jump(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("windows") / "every-jump.pcap"
    hostile.write(path, lambda w: hostile.long_stream(w, EVERY_JUMP, step=2))
    return path


@pytest.fixture(scope="module")
def one_jump(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("windows") / "one-jump.pcap"
    hostile.write(path, lambda w: hostile.long_stream(w, 6000, gap=True))
    return path


def _scan(path: Path, **caps: int) -> ScanResult:
    return scan_paths([str(path)], AnalysisConfig(limits=Limits(**caps)), jobs=1)


def _long_stream_gaps(result: ScanResult) -> list[tuple[str, str, str, int]]:
    """``before_id, after_id, verdict, count`` of the long stream's jumps found (IDs that
    other streams of the session took are no gap: its shared counter)."""
    return [
        row[1:]
        for row in result.tables["gaps"]
        .select("response_label", "before_id", "after_id", "verdict", "count")
        .iter_rows()
        if row[0].startswith("conn 2 ")
    ]


def _findings(result: ScanResult) -> set[tuple[str, str, str, str]]:
    return {(f.rule, f.classification, f.gap["first"], f.gap["last"]) for f in result.findings}


@pytest.mark.parametrize("cap", [10, 30])
def test_the_gap_cap_fires_and_says_where(every_jump: Path, cap: int) -> None:
    result = _scan(every_jump, gaps_per_stream=cap)
    (hit,) = result.caps
    assert (hit.cap, hit.limit, hit.count) == ("gaps_per_stream", cap, 1)
    assert hit.cut.startswith(f"{EVERY_JUMP - 1 - cap} more ID jump(s) on conn 2 #0 POST /mcp")
    assert f"from event id {2 * (cap + 2)} on" in hit.cut  # the first jump not judged
    assert hit.frame is not None and hit.source == str(every_jump)
    assert "may have lost" in hit.consequence
    # The first ``cap`` jumps (2 -> 4 ... 2 cap -> 2 cap + 2) judged as without the cap.
    judged = [g for g in _long_stream_gaps(_scan(every_jump)) if int(g[1]) <= 2 * (cap + 1)]
    assert _long_stream_gaps(result) == judged


def test_under_the_default_cap_every_jump_is_judged(every_jump: Path) -> None:
    result = _scan(every_jump)
    assert result.caps == []
    # Up to its last event: 2 (cap + 1) past any cap lower than its 59 jumps.
    assert max(int(g[1]) for g in _long_stream_gaps(result)) == 2 * EVERY_JUMP


def test_gap_records_past_the_cap_are_never_built(
    every_jump: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The cap bounds memory where the jumps are found (the columnar screen): the jumps
    past it never become gap records, so their evidence and findings never exist."""
    built: list[int] = []

    class Counted(gaps.GapRecord):
        __slots__ = ()

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            built.append(1)
            record.__init__(self, *args, **kwargs)

    record = gaps.GapRecord

    monkeypatch.setattr(gaps, "GapRecord", Counted)
    _scan(every_jump)
    assert len(built) > 40  # most of its 59 jumps (those IDs no other stream took)
    built.clear()
    _scan(every_jump, gaps_per_stream=5)
    assert len(built) <= 5 + 1  # the ordinary stream's gap besides


def test_the_cap_through_the_command_line(every_jump: Path) -> None:
    doc = json.loads(
        run("scan", str(every_jump), "-f", "json", "--limit", "gaps-per-stream=7").stdout
    )
    (cap,) = doc["caps"]
    assert cap["cap"] == "gaps_per_stream" and cap["limit"] == 7 and cap["frame"]
    assert cap["cut"].startswith(f"{EVERY_JUMP - 8} more ID jump(s)")
    assert [e.get("cap") for e in doc["errors"]] == ["gaps_per_stream"]
    table = run("scan", str(every_jump), "--limit", "gaps_per_stream=7").stdout.decode()
    assert "1 cap(s) fired" in table and "gaps_per_stream=7" in table


@pytest.mark.parametrize("from_pieces", [False, True])
def test_a_long_stream_with_one_jump_materialises_the_events_around_it(
    one_jump: Path, monkeypatch: pytest.MonkeyPatch, from_pieces: bool
) -> None:
    """6,000 events, one jump by 5 halfway: the jump is judged (the same finding whether
    the partition's events are held or read from their pieces), and only the two events
    of its jump are built as records, not the stream's 6,000."""
    whole = findings_jsonl(_scan(one_jump))
    if from_pieces:
        monkeypatch.setattr(pieces, "STREAM_ROWS", 256)  # read 256 rows at a time
    built = records_built(monkeypatch)
    result = _scan(one_jump)
    assert findings_jsonl(result) == whole
    jump = ("missing-stream-gap", "silent_corruption", "3001", "3005")
    assert {ORDINARY, jump} <= _findings(result)
    assert sorted(built) == [2999, 3000]  # IDs 3000 and 3006


def test_the_events_around_a_jump_are_the_stream_records(one_jump: Path) -> None:
    """The records built around a jump are those the stream's events hold once built (the
    timeline places each gap by looking its events up among them, by identity)."""
    result = scan_paths([str(one_jump)], keep_records=True)
    assert result.facts is not None
    found = [g for g in result.facts.gaps if g.before is not None and g.after is not None]
    assert len(found) == 2
    for g in found:
        assert g.before is not None and g.after is not None
        events = g.stream.events
        assert events[g.before.position] is g.before and events[g.after.position] is g.after


@pytest.mark.parametrize("from_pieces", [False, True])
def test_a_late_signal_is_judged_alike_around_the_jump_and_on_the_whole_stream(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, from_pieces: bool
) -> None:
    """A ``stream-gap`` signal three events past a long stream's jump covers it late: the
    windowed judgement finds the jump's next data event in the ``kind`` column
    (``EventSource.next_of_kind``, from held events or from the pieces of a large
    partition) and says what the whole stream's records say."""
    if from_pieces:
        monkeypatch.setattr(pieces, "STREAM_ROWS", 256)  # read 256 rows at a time
    path = tmp_path / "late-signal.pcap"
    hostile.write(path, lambda w: hostile.long_stream(w, 6000, gap=True, late_signal=True))

    def jump(result: ScanResult) -> list[tuple[Any, ...]]:
        rows = result.tables["gaps"].select(
            "response_label", "before_id", "after_id", "signal", "signal_late", "verdict"
        )
        return [r[1:] for r in rows.iter_rows() if r[0].startswith("conn 2 ")]

    windowed = _scan(path)
    assert jump(windowed) == [("3000", "3006", "stream-gap", True, "silent_corruption")]
    monkeypatch.setattr(windows, "WINDOWED_EVENTS", 1 << 30)  # read whole
    assert jump(_scan(path)) == jump(windowed)
