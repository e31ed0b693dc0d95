"""Issue 16: the judgements of a long stream beside its live gaps read the events they need,
not all of them (each ~1.5 KB as a record), and say what the whole stream's records say.

- A stream with missing capture bytes: why it is not judged (``facts.unjudged``) reads the
  first and the last event with an ID (``facts.windows.id_ends``).
- A stream made mostly of signal events: its live gaps read its ``stream-gap`` events and,
  of the others, the counter values they took inside its jumps; the ``stream-gap`` events
  no jump explains make no more gaps than ``gaps_per_stream``.
- An event-log stream: whether its client left it with events pending reads its last
  written data event."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import polars as pl
import pytest
from support.records import records_built
from support.scripts import load_script

from sse_forensics.evidence import pieces
from sse_forensics.evidence.tables import EventColumns
from sse_forensics.facts import build, join, load, windows
from sse_forensics.facts.config import AnalysisConfig
from sse_forensics.facts.ids import IdKey
from sse_forensics.limits import Limits
from sse_forensics.pipeline import scan_paths
from sse_forensics.report.jsonout import findings_jsonl
from sse_forensics.result import ScanResult

hostile = load_script("samples/hostile.py", "samples_hostile")
EVENTS = 6000


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
        monkeypatch.setattr(pieces, "STREAM_ROWS", 256)  # read 256 rows at a time
    built = records_built(monkeypatch)
    windowed = _judged(scan_paths([str(path)], jobs=1))
    assert windowed[1][0][0] == 1  # the stream lacks one span
    assert len(built) <= 4, sorted(built)  # the jump's two events, the two ends
    monkeypatch.setattr(windows, "WINDOWED_EVENTS", 1 << 30)  # read whole
    assert _judged(scan_paths([str(path)], jobs=1)) == windowed
    assert len(built) > EVENTS // 2


def _flood(n: int) -> list[bytes]:
    """A stream of ``n`` events, fifteen in sixteen of them signals, its data IDs jumping
    from 99 to 140 halfway; among the signals, IDs inside the jump (those values taken,
    not dropped: 110 and 120 by a ``backpressure-disconnect``, 130 by a ``resume-gap``),
    outside it (2, 5000), and a ``stream-gap`` for 131..139 (part of the jump only: a
    signal of its own, the jump's 37 values unsignalled)."""
    data = b'{"jsonrpc":"2.0","method":"notifications/message"}'
    keyed = {n // 2 + 3: b"110", n // 2 + 5: b"120", n // 4: b"2", n - 9: b"5000"}
    out, seq = [], 0
    for e in range(1, n + 1):
        if e % 16 == 0:
            seq = 140 if seq == 99 else seq + 1
            out.append(b"id: %d\ndata: %s\n\n" % (seq, data))
        elif e in keyed:
            out.append(b"id: %s\n" % keyed[e] + hostile.SIGNALS[0] % 7)
        elif e == n // 2 + 7:
            out.append(b"id: 130\n" + hostile.SIGNALS[1] % (1, 2))
        elif e == n // 2 + 9:
            out.append(b'event: stream-gap\ndata: {"first":"131","last":"139"}\n\n')
        else:
            out.append(hostile.SIGNALS[0] % e if e % 2 else hostile.SIGNALS[1] % (e, e + 1))
    return out


@pytest.mark.parametrize("from_pieces", [False, True])
def test_a_signal_flood_reads_its_stream_gaps_and_the_values_signals_took(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, from_pieces: bool
) -> None:
    """Fifteen in sixteen of 6,400 events are signals: the stream's jump is judged on the
    events of its jump and its one ``stream-gap`` built as records (not every signal's),
    with the counter values the other signals took inside the jump (read from their
    columns) — the findings of the whole stream's records."""
    path = tmp_path / "flood.pcap"
    events = _flood(6400)
    hostile.write(path, lambda w: hostile._one_stream(w, events, chunked=True))
    if from_pieces:
        monkeypatch.setattr(pieces, "STREAM_ROWS", 256)  # read 256 rows at a time
    built = records_built(monkeypatch)
    windowed = _judged(scan_paths([str(path)], jobs=1))
    assert len(built) == 3, sorted(built)  # 99, 140 and the stream-gap
    monkeypatch.setattr(windows, "WINDOWED_EVENTS", 1 << 30)  # read whole
    assert _judged(scan_paths([str(path)], jobs=1)) == windowed
    assert len(built) > 6000
    gaps = result_gaps(path)
    assert {("100", "139", 37), ("131", "139", 9)} <= gaps  # 110, 120, 130 taken


def result_gaps(path: Path) -> set[tuple[object, ...]]:
    """``first, last, count`` of every gap of a scan of ``path``."""
    rows = scan_paths([str(path)], jobs=1).tables["gaps"].select("first", "last", "count")
    return set(rows.iter_rows())


def test_stream_gap_signals_no_jump_explains_are_capped(tmp_path: Path) -> None:
    """A ``stream-gap`` flood (each signal a gap of its own, and a finding: ~2 KB each)
    makes no more than ``gaps_per_stream`` gaps of one stream; the rest are counted in a
    cap hit that names the first of them. Under the cap, the same gaps as without it."""
    path = tmp_path / "stream-gaps.pcap"
    hostile.write(path, lambda w: hostile.signal_flood(w, 640, stream_gap=True))
    whole = scan_paths([str(path)], jobs=1)
    capped = scan_paths([str(path)], AnalysisConfig(limits=Limits(gaps_per_stream=10)), jobs=1)

    def signalled(result: ScanResult) -> list[tuple[object, ...]]:
        rows = result.tables["gaps"].filter(pl.col("detected_by") == "signal")
        return rows.select("first", "last", "verdict").rows()

    assert len(signalled(whole)) == 600 and whole.caps == []  # 640 - 640 / 16
    assert signalled(capped) == signalled(whole)[:10]
    (hit,) = capped.caps
    assert (hit.cap, hit.limit, hit.count) == ("gaps_per_stream", 10, 1)
    first = signalled(whole)[10][0]
    assert hit.cut.startswith("590 more stream-gap signal(s) no ID jump explains on conn 2 ")
    assert hit.cut.endswith(f"from the one for {first}..{first} on") and hit.frame


def _stream_gap_flood(n: int) -> list[bytes]:
    """``n`` events, fifteen in sixteen of them ``stream-gap`` signals for ranges of no
    gap (one value each, past the stream's IDs), its data IDs jumping from 99 to 140
    halfway; a hundred events past the jump, one ``stream-gap`` for 100..139 (late)."""
    data = b'{"jsonrpc":"2.0","method":"notifications/message"}'
    out, seq = [], 0
    for e in range(1, n + 1):
        if e % 16 == 0:
            seq = 140 if seq == 99 else seq + 1
            out.append(b"id: %d\ndata: %s\n\n" % (seq, data))
        else:
            first, last = (100, 139) if e == n // 2 + 100 else (10_000 + e, 10_000 + e)
            out.append(b'event: stream-gap\ndata: {"first":"%d","last":"%d"}\n\n' % (first, last))
    return out


@pytest.mark.parametrize("from_pieces", [False, True])
def test_a_stream_gap_flood_builds_the_signals_judged_and_no_other(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, from_pieces: bool
) -> None:
    """6,000 ``stream-gap`` signals, one of them covering the stream's jump (late): read
    from their columns, only the one covering the jump and the first ``cap + 1`` that no
    jump explains are built as records (one past the cap: the cap hit names it); the
    gaps, findings and cap hit are those of the whole stream's records."""
    path = tmp_path / "stream-gap-flood.pcap"
    events = _stream_gap_flood(6400)
    hostile.write(path, lambda w: hostile._one_stream(w, events, chunked=True))
    if from_pieces:
        monkeypatch.setattr(pieces, "STREAM_ROWS", 256)  # read 256 rows at a time
    config = AnalysisConfig(limits=Limits(gaps_per_stream=10))

    def judged(result: ScanResult) -> tuple[object, ...]:
        gaps = result.tables["gaps"].select("first", "last", "signal", "signal_late", "verdict")
        return _judged(result), gaps.rows(), [c.cap_dict() for c in result.caps]

    built = records_built(monkeypatch)
    windowed = judged(scan_paths([str(path)], config, jobs=1))
    assert len(built) == 2 + 1 + 11, sorted(built)
    assert ("100", "139", "stream-gap", True, "silent_corruption") in windowed[1]
    monkeypatch.setattr(windows, "WINDOWED_EVENTS", 1 << 30)  # read whole
    assert judged(scan_paths([str(path)], config, jobs=1)) == windowed
    assert len(built) > 6000


def _events(kinds: list[str], ids: list[str | None]) -> pl.DataFrame:
    """One response's events (``conn_id`` 1, ``ex_index`` 0) of these kinds and IDs."""
    n = len(kinds)
    base = EventColumns.frame()
    return pl.DataFrame(
        {
            "conn_id": [1] * n,
            "ex_index": [0] * n,
            "position": list(range(n)),
            "kind": kinds,
            "id_field": ids,
        },
        schema_overrides=base.schema,
    ).select(
        pl.col(c)
        if c in ("conn_id", "ex_index", "position", "kind", "id_field")
        else pl.lit(None, dtype).alias(c)
        for c, dtype in base.schema.items()
    )


@pytest.mark.parametrize("slice_", [4, 1 << 16])
@pytest.mark.parametrize(
    ("kinds", "ids", "ends", "last_data"),
    [
        # An event without an ID first, a signal with one last: neither counts.
        (["other", "data", "data", "signal"], [None, "1", "2", "9"], (1, 2), 2),
        (["data", "other", "priming", "data", "other"], [None, "", "3", "4", "5"], (2, 4), 3),
        (["data", "signal", "data"], [None, "7", ""], (None, None), None),
        (["other"] * 9 + ["data"], [None] * 8 + ["1", "2"], (8, 9), 9),
    ],
)
def test_the_ends_of_a_stream_are_found_in_its_columns(
    monkeypatch: pytest.MonkeyPatch,
    slice_: int,
    kinds: list[str],
    ids: list[str | None],
    ends: tuple[int | None, int | None],
    last_data: int | None,
) -> None:
    """The first and last events with an ID that are no signal, and the last data event
    with an ID, whichever slice of the ``kind`` and ``id_field`` columns they fall in."""
    monkeypatch.setattr(load, "KIND_SLICE", slice_)
    source = load.EventSource(_events(kinds, ids))
    assert source.id_ends((1, 0)) == ends
    assert source.last_data_with_id((1, 0)) == last_data


def _pending_log(path: Path, n: int) -> None:
    """An event log of one stream: ``n`` events written, their IDs jumping by 5 halfway
    (a silent gap), then three more emitted and never written (left pending)."""
    ids = [e + 5 * (e > n // 2) for e in range(1, n + 1)]
    records = list(hostile._log_records("pending-0001", "x1", ids, hostile.START_S))
    more = hostile._log_records("pending-0001", "x1", range(n + 6, n + 9), hostile.START_S + 1)
    records += [r for r in more if b'"emitted"' in r]
    path.write_bytes(b"".join(records))


@pytest.mark.parametrize("from_pieces", [False, True])
def test_when_the_client_left_a_long_logged_stream_is_read_from_its_last_written_event(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, from_pieces: bool
) -> None:
    """An event-log stream of 6,000 written events with a silent gap, three more events
    emitted after its last written one: whether the client left it with events pending
    (``build._left_with_events_pending``, asked of its unsignalled gap) is told from its
    last written data event alone, as its whole records tell it."""
    path = tmp_path / "pending.events.jsonl"
    _pending_log(path, 6000)
    if from_pieces:
        monkeypatch.setattr(pieces, "STREAM_ROWS", 256)  # read 256 rows at a time
    built = records_built(monkeypatch)
    result = scan_paths([str(path)], jobs=1, keep_records=True)
    assert result.facts is not None
    (stream,) = (s for s in result.facts.streams if s.exchange.n_events == 6000)
    left = build._left_with_events_pending(stream)
    assert len(built) == 3, sorted(built)  # the jump's two events, the last written
    assert left is not None and built[-1] == 5999
    stream.release()
    monkeypatch.setattr(windows, "WINDOWED_EVENTS", 1 << 30)  # read whole
    assert build._left_with_events_pending(stream) == left
    assert len(built) > 6000


def test_the_values_signals_took_are_kept_inside_the_jumps_only() -> None:
    """``windows._inside``: of the counter values signal events carry, those strictly
    inside one of the stream's jumps (ranges of one prefix merged where they overlap: a
    later run of the prefix may jump inside an earlier one's range), and no other."""

    def jump(prefix: str, lo: int, hi: int) -> tuple[Any, Any]:
        return SimpleNamespace(counter=IdKey(prefix, lo)), SimpleNamespace(
            counter=IdKey(prefix, hi)
        )

    jumps = [jump("a", 1, 30), jump("a", 5, 10), jump("b", 1, 3)]
    keyed = [("a", 1), ("a", 2), ("a", 15), ("a", 30), ("a", 31), ("b", 2), ("b", 3), ("c", 2)]
    signals = pl.DataFrame(
        [*keyed, ("a", None)], schema={"prefix": pl.String, "seq": pl.Int64}, orient="row"
    )
    inside = windows._inside(signals, jumps)
    assert sorted((k.prefix, k.seq) for k in inside) == [("a", 2), ("a", 15), ("b", 2)]


@pytest.mark.parametrize("from_pieces", [False, True])
def test_an_opaque_event_log_stream_is_judged_from_its_ids_column(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, from_pieces: bool
) -> None:
    """An event-log stream of 3,000 opaque IDs (past the windowed size the test sets),
    five of them emitted and never written halfway: its gap in the producer's order is
    found in its IDs' column, and only the events around it (and the last written one)
    are built as records, where the whole stream's records were; the findings are the
    whole records' (``gaps._log_order_gaps``, issue 16)."""
    path = tmp_path / "opaque.events.jsonl"
    hostile.write_event_log(path, 3000, opaque=True)
    monkeypatch.setattr(windows, "WINDOWED_EVENTS", 512)
    if from_pieces:
        monkeypatch.setattr(pieces, "STREAM_ROWS", 256)  # read 256 rows at a time
    built = records_built(monkeypatch)
    windowed = findings_jsonl(scan_paths([str(path)], jobs=1))
    assert b"Session hostile-long-0001" in windowed and b"opaque IDs" in windowed
    assert len(built) == 3, sorted(built)  # the gap's two events, the last written
    monkeypatch.setattr(windows, "WINDOWED_EVENTS", 1 << 30)  # read whole
    assert findings_jsonl(scan_paths([str(path)], jobs=1)) == windowed
    assert len(built) > 2900  # its 2,995 written events


def test_a_stream_in_a_capture_and_an_event_log_is_joined_from_its_columns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stream of 3,000 events both a capture and the server's event log hold: the
    disagreements of the two (``facts.join``) are found in their ID columns, neither
    side's events read as objects (they were, on each side), and they are the
    disagreements the objects give: three events the log never records writing, three
    it wrote past the capture's last."""
    folder = tmp_path / "logged"
    hostile.write_logged_capture(folder, 3000)
    folded: list[int] = []
    fold = join._fold_event_log

    def counted(log_ex: Any, capture: Any, session: Any) -> Any:
        out = fold(log_ex, capture, session)
        assert (log_ex._events, capture._events) == (None, None)  # neither read as objects
        folded.append(capture.n_events)
        rows = join._id_rows(capture), join._id_rows(log_ex)
        assert capture.events and log_ex.events  # as objects now: read from them
        assert join._id_rows(capture).equals(rows[0]) and join._id_rows(log_ex).equals(rows[1])
        return out

    monkeypatch.setattr(join, "_fold_event_log", counted)
    result = scan_paths([str(folder)], jobs=1)
    assert folded == [3000]
    told = {f.message for f in result.findings if f.rule == "sources-disagree"}
    assert len(told) == 6
    for event_id, kind in [
        *((k, "capture-only") for k in (1500, 1501, 1502)),
        *((k, "log-only") for k in (3001, 3002, 3003)),
    ]:
        assert any(f"event {event_id} ({kind})" in m for m in told), (event_id, told)
