"""Issue 16: a resume after a long stream is judged from the earlier stream's columns
(``facts.earlier``), not from a record per event of it, and says what the whole stream's
records say: where the replay starts, whether it jumped, duplicated or was declared, the
``backpressure-disconnect`` it follows, a cursor the client moved ahead, opaque IDs'
observed order."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl
import pytest
from support.records import records_built
from support.scripts import load_script

from sse_forensics.evidence import pieces
from sse_forensics.facts import build, earlier, windows
from sse_forensics.pipeline import scan_paths
from sse_forensics.report.jsonout import findings_jsonl
from sse_forensics.result import ScanResult

hostile = load_script("samples/hostile.py", "samples_hostile")
# A stream of EVENTS is long: past the WINDOWED size the test sets (a lower one than the
# scan's own, so the suite stays quick; what it asserts does not depend on the size).
EVENTS = 1500
WINDOWED = 512

# (skip, leid, opaque, closing): see samples/hostile.py long_stream_resume.
SHAPES = {
    "successor": (0, 0, False, b""),
    "jump": (5, 0, False, b""),
    "duplicates": (-3, 0, False, b""),
    "adjusted-cursor": (0, 3, False, b""),
    "after-backpressure": (0, 0, False, b"bd"),
    "declared-jump": (5, 0, False, b"declared"),
    "opaque-skip": (-4, -10, True, b""),
    "opaque-successor": (0, 0, True, b""),
}


def _judged(result: ScanResult) -> tuple[str, list[dict[str, object]]]:
    """The findings and the ``resumes`` table (every judgement of the replay)."""
    return findings_jsonl(result), result.tables["resumes"].to_dicts()


@pytest.mark.parametrize("from_pieces", [False, True])
@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_a_resume_after_a_long_stream_reads_the_events_it_asks_about(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, shape: str, from_pieces: bool
) -> None:
    """1,500 events (past the windowed size), then a resume: what the replay judgements
    say is what the whole stream's records say, and of the long stream only the events a
    question found are built."""
    skip, leid, opaque, closing = SHAPES[shape]
    path = tmp_path / f"{shape}.pcap"
    hostile.write(
        path, lambda w: hostile.long_stream_resume(w, EVENTS, skip, leid, opaque, closing)
    )
    monkeypatch.setattr(windows, "WINDOWED_EVENTS", WINDOWED)
    if from_pieces:
        monkeypatch.setattr(pieces, "STREAM_ROWS", 256)  # read 256 rows at a time
    built = records_built(monkeypatch)
    windowed = _judged(scan_paths([str(path)], jobs=1))
    resumes = pl.DataFrame(windowed[1])
    assert resumes.height == 1
    # The resumed event, the first sightings of the replay's 20 events (those the client
    # had), and the one or two a question found (the top counter, the signal).
    assert len(built) <= 24, sorted(built)[:30]
    monkeypatch.setattr(windows, "WINDOWED_EVENTS", 1 << 30)  # read whole
    assert _judged(scan_paths([str(path)], jobs=1)) == windowed
    assert len(built) > EVENTS


def test_the_shapes_judge_what_they_are_built_for(tmp_path: Path) -> None:
    """Each shape asks the question it names (so the test above compares answers that
    matter): the replay's start, the jump, the declared range, the moved cursor, the
    backpressure-disconnect, the opaque order."""
    got = {}
    for shape, (skip, leid, opaque, closing) in SHAPES.items():
        path = tmp_path / f"{shape}.pcap"
        hostile.write(
            path, lambda w, a=(skip, leid, opaque, closing): hostile.long_stream_resume(w, 60, *a)
        )
        row = scan_paths([str(path)], jobs=1).tables["resumes"].row(0, named=True)
        got[shape] = row
    assert got["successor"]["replay_start"] == "successor"
    assert got["jump"]["replay_start"] == "jump"
    assert got["duplicates"]["replay_start"] == "older"
    assert got["duplicates"]["replayed_duplicates"] == 3
    assert got["adjusted-cursor"]["client_adjusted"] is True
    assert got["adjusted-cursor"]["last_seen_id"] == "60"
    assert got["after-backpressure"]["bd_last_written"] == "60"
    assert got["after-backpressure"]["continues_after_bd"] is True
    assert got["declared-jump"]["replay_start"] == "jump"
    assert got["opaque-skip"]["replay_start"] == "jump"
    assert got["opaque-successor"]["replay_start"] == "successor"


def test_an_id_order_answers_as_the_list_of_ids() -> None:
    """:class:`.earlier.IdOrder` against the list questions it replaces, repeated IDs
    included."""
    ids = ["a", "b", "c", "b", "d", "a", "e"]
    order = earlier.IdOrder(pl.Series(ids, dtype=pl.String))
    assert len(order) == len(ids) and order[4] == "d"
    for event_id in ("a", "b", "e", "x"):
        last = len(ids) - 1 - ids[::-1].index(event_id) if event_id in ids else None
        assert order.last(event_id) == last
        for stop in range(len(ids) + 1):
            assert order.before(event_id, stop) == (event_id in ids[:stop])
            tail = ids[stop:]
            found = order.first_from(event_id, stop)
            assert found == (stop + tail.index(event_id) if event_id in tail else None)
    assert order.among({"a", "d", "x"}, 3) == {"a"}
    assert order.between(1, 4) == ids[1:4]
    assert order.tail_without(2, {"b", "a"}) == ["c", "d", "e"]


@pytest.mark.parametrize("opaque", [False, True])
def test_a_long_resume_is_judged_from_its_first_event_and_columns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, opaque: bool
) -> None:
    """A short stream, then its resume answered with 1,500 events (past the windowed
    size) after a silent jump of five: ``gaps.resume_gap`` builds the resume's first data
    event, no other of its records (it built all of them), and its gap is the whole
    records' gap."""
    path = tmp_path / "replay.pcap"
    hostile.write(
        path, lambda w: hostile.long_stream_resume(w, 20, 5, opaque=opaque, replay=EVENTS)
    )
    monkeypatch.setattr(windows, "WINDOWED_EVENTS", WINDOWED)
    built = records_built(monkeypatch)
    in_resume_gap: list[int] = []
    judge = build.resume_gap

    def counted(*args: Any) -> Any:
        before = len(built)
        gap = judge(*args)
        in_resume_gap.append(len(built) - before)
        return gap

    monkeypatch.setattr(build, "resume_gap", counted)
    windowed = _judged(scan_paths([str(path)], jobs=1))
    assert in_resume_gap == [1]  # the first data event
    monkeypatch.setattr(windows, "WINDOWED_EVENTS", 1 << 30)  # read whole
    assert _judged(scan_paths([str(path)], jobs=1)) == windowed
    assert in_resume_gap[-1] == EVENTS
    if not opaque:
        assert windowed[1][0]["replay_start"] == "jump"


# (skip, leid, opaque): a short stream, then its resume answered with EVENTS events.
LONG_REPLAYS = {
    "jump": (5, 0, False),
    "duplicates": (-3, 0, False),
    "opaque-jump": (5, 0, True),
    "opaque-duplicates": (-4, 0, True),
}


@pytest.mark.parametrize("from_pieces", [False, True])
@pytest.mark.parametrize("shape", sorted(LONG_REPLAYS))
def test_a_long_replay_is_judged_from_its_columns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, shape: str, from_pieces: bool
) -> None:
    """A resume answered with 1,500 events (past the windowed size): its data events,
    duplicates and leaked events are counted from its columns (``facts.replay_columns``;
    ``ReplayJudge.judge`` built a record of each, and so did the resumes table), the
    events cited only are built, and every judgement is the whole records' one."""
    skip, leid, opaque = LONG_REPLAYS[shape]
    path = tmp_path / f"{shape}.pcap"
    hostile.write(
        path,
        lambda w: hostile.long_stream_resume(w, 20, skip, leid, opaque=opaque, replay=EVENTS),
    )
    monkeypatch.setattr(windows, "WINDOWED_EVENTS", WINDOWED)
    if from_pieces:
        monkeypatch.setattr(pieces, "STREAM_ROWS", 256)  # read 256 rows at a time
    built = records_built(monkeypatch)
    windowed = _judged(scan_paths([str(path)], jobs=1))
    assert len(built) <= 2, sorted(built)[:30]  # the first data event, a gap's end
    monkeypatch.setattr(windows, "WINDOWED_EVENTS", 1 << 30)  # read whole
    assert _judged(scan_paths([str(path)], jobs=1)) == windowed
    assert len(built) > EVENTS
    row = windowed[1][0]
    assert row["data_events"] == EVENTS
    assert row["replayed_duplicates"] == (-skip if skip < 0 else 0)
