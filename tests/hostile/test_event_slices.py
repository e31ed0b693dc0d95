"""Issue 16: a stream of millions of events is judged in slices (the evidence store's
chunks, the ID keys, the per-stream counts, the live-gap screen, the ID order), each slice
handing its boundary state on to the next (the previous event, the run's high-water mark,
the first and last ID). Here every slice size is lowered to a few events, so that the
streams of a small capture straddle many boundaries and every jump, repeat and signal sits
exactly at one for some size: the scan must give the findings and fact tables it gives with
one slice."""

from __future__ import annotations

from typing import Any

import orjson
import polars as pl
import pytest
from support.scripts import load_script

from sse_forensics.evidence import pieces, store, tables
from sse_forensics.facts import build, columns, front
from sse_forensics.pipeline import scan_paths
from sse_forensics.report.jsonout import findings_jsonl

hostile = load_script("samples/hostile.py", "samples_hostile")

# Each stream's events, in order: an ID (``None``: no ``id:`` field) or a raw event.
JUMP = [str(n) for n in (*range(1, 7), *range(10, 15))]  # 7-9 dropped, nothing said
ORDER = [str(n) for n in (1, 2, 3, 3, 4, 2, 5, 6)]  # a repeat (3), then backwards (2)
PREFIXED = [
    *(f"s1_{n}" for n in range(1, 5)),
    b'event: stream-gap\ndata: {"first": "s1_5", "last": "s1_6"}\n\n',  # 5-6 signalled
    *(f"s1_{n}" for n in (7, 8, 12, 13)),  # then 9-11 dropped, nothing said
]
OPAQUE = ["a", "b", None, "a", "c", "b"]  # opaque IDs seen again: repeats
CONTIGUOUS = [str(n) for n in range(1, 30)]
STREAMS = [JUMP, ORDER, PREFIXED, OPAQUE, CONTIGUOUS]
# Findings of these rules the scan reports, samples/hostile.py's ordinary gap 8-12
# included: the jumps 7-9, s1_9-s1_11 and 8-12; the repeats 3, a, b and the step back to 2;
# the signalled s1_5-s1_6.
EXPECTED = {"missing-stream-gap": 3, "non-monotonic-id": 4, "stream-gap-signalled": 1}


def _event(item: str | bytes | None, n: int) -> bytes:
    if isinstance(item, bytes):
        return item
    data = b'{"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":%d}}' % n
    head = b"" if item is None else b"id: " + item.encode() + b"\n"
    return head + b"data: " + data + b"\n\n"


def _streams(w: Any) -> None:
    """Each of :data:`STREAMS` as a ``tools/call`` answered by a chunked event stream, two
    events per segment, in a session of its own."""
    for k, items in enumerate(STREAMS):
        flow = hostile.Flow(w, hostile.client_ip(100 + k), 41_000 + k, isn=9_000 * (k + 1))
        session = hostile.session_of(100 + k)
        flow.handshake()
        flow.data(True, hostile.post(session))
        flow.data(False, hostile.response_head(session))
        events = [_event(item, n) for n, item in enumerate(items, 1)]
        for at in range(0, len(events), 2):
            flow.send(
                False, hostile.PSH | hostile.ACK, hostile.chunk(b"".join(events[at : at + 2]))
            )
        flow.send(False, hostile.PSH | hostile.ACK, b"0\r\n\r\n")
        flow.send(True, hostile.ACK)
        flow.close()


@pytest.fixture(scope="module")
def capture(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = tmp_path_factory.mktemp("slices") / "slices.pcap"
    hostile.write(path, _streams)
    return str(path)


def _scan(capture: str, buckets: int | None = None) -> tuple[bytes, dict[str, pl.DataFrame]]:
    result = scan_paths([capture], buckets=buckets)
    return findings_jsonl(result), result.tables


def _small_slices(monkeypatch: pytest.MonkeyPatch, size: int) -> None:
    """Every slice of the judging ``size`` events, and a store that spills each batch (so
    the cross-session pass reads it back in chunks of ``size`` rows)."""
    for module, name in (
        (columns, "ORDER_SLICE"),
        (front, "KEY_SLICE"),
        (store, "CHUNK_ROWS"),
        (tables, "ORDER_CHECK_ROWS"),
    ):
        monkeypatch.setattr(module, name, size)
    monkeypatch.setattr(store, "DEFAULT_MEMORY_BUDGET", 0)


@pytest.fixture(scope="module")
def whole(capture: str) -> tuple[bytes, dict[str, pl.DataFrame]]:
    """The scan with the default slices (each stream judged in one)."""
    return _scan(capture)


def test_the_capture_holds_what_the_slices_must_find(
    whole: tuple[bytes, dict[str, pl.DataFrame]],
) -> None:
    jsonl, tables = whole
    rules = _rules(jsonl)
    assert {rule: rules.count(rule) for rule in EXPECTED} == EXPECTED
    gaps = tables["gaps"].select("first", "last", "signal").rows()
    assert sorted(gaps, key=str) == sorted(
        [
            ("7", "9", None),
            ("8", "12", None),
            ("s1_5", "s1_6", "stream-gap"),
            ("s1_9", "s1_11", None),
        ],
        key=str,
    )
    order = tables["events"].filter(pl.col("id_order") != "ok")
    assert sorted(order.select("id_field", "id_order", "previous_id").rows()) == [
        ("2", "backwards", "4"),
        ("3", "repeat", "3"),
        ("a", "repeat", "a"),
        ("b", "repeat", "b"),
    ]


def _rules(jsonl: bytes) -> list[str]:
    return [orjson.loads(line)["rule"]["id"] for line in jsonl.splitlines()]


_COMPARED = ("events", "streams", "gaps", "signals", "sessions")


@pytest.mark.parametrize("size", [1, 2, 3, 4, 5, 7])
def test_small_slices_judge_as_one(
    capture: str,
    whole: tuple[bytes, dict[str, pl.DataFrame]],
    monkeypatch: pytest.MonkeyPatch,
    size: int,
) -> None:
    _small_slices(monkeypatch, size)
    jsonl, tables = _scan(capture)
    assert jsonl == whole[0]
    for name in _COMPARED:
        assert tables[name].equals(whole[1][name]), name


def test_small_slices_over_several_partitions(
    capture: str,
    whole: tuple[bytes, dict[str, pl.DataFrame]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _small_slices(monkeypatch, 2)
    jsonl, _tables = _scan(capture, buckets=3)
    assert jsonl == whole[0]


@pytest.mark.parametrize("size", [1, 2, 3, 7])
@pytest.mark.parametrize("buckets", [None, 3])
def test_events_judged_from_their_pieces(
    capture: str,
    whole: tuple[bytes, dict[str, pl.DataFrame]],
    monkeypatch: pytest.MonkeyPatch,
    size: int,
    buckets: int | None,
) -> None:
    """A partition past ``STREAM_ROWS`` events is judged from its spilled files, read a
    slice at a time (never held whole): the findings and tables of a whole read."""
    _small_slices(monkeypatch, size)
    monkeypatch.setattr(pieces, "STREAM_ROWS", 1)
    opened: list[bool] = []
    event_columns = columns.event_columns

    def spy(events: Any, *args: Any) -> columns.EventColumns:
        got = event_columns(events, *args)
        opened.append(got.streamed is not None)
        return got

    monkeypatch.setattr(build, "event_columns", spy)
    jsonl, tables = _scan(capture, buckets)
    assert any(opened)  # some partition was judged from its pieces
    assert jsonl == whole[0]
    for name in _COMPARED:
        if buckets is None:
            assert tables[name].equals(whole[1][name]), name


@pytest.mark.parametrize("size", [1, 2, 3, 5])
def test_one_response_in_order_is_told_slice_by_slice(
    monkeypatch: pytest.MonkeyPatch, size: int
) -> None:
    """A partition of one response is taken as it is only when its positions rise row by
    row: a step back or a repeat at any row, a slice's first included, is seen."""
    monkeypatch.setattr(tables, "ORDER_CHECK_ROWS", size)
    rising = list(range(10))

    def frame(positions: list[int]) -> pl.DataFrame:
        return pl.DataFrame(
            {"conn_id": 4, "ex_index": 0, "position": positions},
            schema={"conn_id": pl.Int64, "ex_index": pl.Int64, "position": pl.Int64},
        )

    assert tables.single_response(frame(rising)) == (4, 0)
    for at in range(1, 10):
        back = [*rising[:at], rising[at - 1], *rising[at + 1 :]]
        assert tables.single_response(frame(back)) is None, at
        assert tables.single_response(frame(back), ordered=False) == (4, 0)
