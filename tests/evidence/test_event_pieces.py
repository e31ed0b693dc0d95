"""A large partition's events left in their pieces (evidence/pieces.py, issue 16): read a
slice, a gather or a query at a time, they are the rows a whole read gives, and each
exchange is taken for one run only when its rows are one run of rising positions."""

from __future__ import annotations

import itertools

import polars as pl
import pytest

from sse_forensics.evidence import pieces as pieces_module
from sse_forensics.evidence.pieces import EventPieces, open_files, open_task
from sse_forensics.evidence.store import EvidenceStore
from sse_forensics.evidence.tables import ConnectionColumns, EventColumns, ExchangeColumns


def _events(exchanges: list[tuple[int, int, list[int]]]) -> pl.DataFrame:
    """Events of each ``(conn_id, ex_index, positions)`` in that order."""
    rows = EventColumns.buffer()
    for conn, index, positions in exchanges:
        for k in positions:
            row = {name: None for name in rows}
            row.update(
                conn_id=conn, ex_index=index, session=f"s-{conn}", position=k,
                id=str(k), id_field=str(k), event="message", data="x" * (k % 3),
                start=10 * k, end=10 * k + 9, dispatched=True, kind="data",
                first_src="a.pcap", first_num=k + 1, first_ts=1.5 + k, first_kind="frame",
                last_src="a.pcap", last_num=k + 1, last_ts=1.5 + k, last_kind="frame",
            )  # fmt: skip
            for name, value in row.items():
                rows[name].append(value)
    return EventColumns.frame(rows)


def _pieces(events: pl.DataFrame, store: EvidenceStore, cuts: list[int]) -> EventPieces:
    """``events`` added to ``store`` in batches cut at ``cuts``: all spilled but the last."""
    bounds = [0, *cuts, events.height]
    for n, (a, b) in enumerate(itertools.pairwise(bounds)):
        store.memory_budget = 1 << 30 if n == len(bounds) - 2 else 0
        store.add(ConnectionColumns.frame(), ExchangeColumns.frame(), events.slice(a, b - a))
    files, batches = store.sources(0, EventColumns.name)
    return EventPieces([*files, *batches])


@pytest.mark.parametrize("cuts", [[], [3], [2, 9, 10]])
def test_pieces_read_as_the_whole(cuts: list[int]) -> None:
    events = _events([(1, 0, list(range(8))), (2, 0, list(range(6)))])
    with EvidenceStore(1) as store:
        source = _pieces(events, store, cuts)
        whole = store.load(0)[2]
        assert source.height == events.height
        assert source.frame().equals(whole)
        assert source.lazy().collect().equals(whole)
        for size in (1, 4, 100):
            assert pl.concat(p for _, p in source.slices(size)).equals(whole)
            assert [a for a, _ in source.slices(size)] == sorted(
                {a for a, _ in source.slices(size)}
            )
        assert source.slice(2, 9).equals(whole.slice(2, 9))
        rows = pl.Series([0, 3, 4, 13])
        assert source.take(rows, ["id", "first_num"]).equals(
            whole.select("id", "first_num").gather(rows)
        )
        runs = source.runs(size=2)
        assert runs is not None
        assert runs.rows() == [(1, 0, 0, 8), (2, 0, 8, 6)]


@pytest.mark.parametrize(
    "exchanges",
    [
        [(1, 0, [0, 1, 2]), (2, 0, [0, 1]), (1, 0, [3, 4])],  # one exchange in two runs
        [(1, 0, [0, 1, 3, 2, 4])],  # a step back
        [(1, 0, [0, 1, 1, 2])],  # a repeat
    ],
)
@pytest.mark.parametrize("size", [1, 2, 3, 100])
def test_an_exchange_out_of_one_run_is_refused(
    exchanges: list[tuple[int, int, list[int]]], size: int
) -> None:
    """Told at any row, a slice's first included: such a partition is read whole."""
    with EvidenceStore(1) as store:
        source = _pieces(_events(exchanges), store, [2])
        assert source.runs(size=size) is None


def test_open_task_leaves_only_a_large_partition_in_pieces(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    events = _events([(1, 0, list(range(10)))])
    with EvidenceStore(1) as store:
        _pieces(events, store, [4])
        assert isinstance(open_task(store, [0])[2], pl.DataFrame)
        monkeypatch.setattr(pieces_module, "STREAM_ROWS", 5)
        opened = open_task(store, [0])[2]
        assert isinstance(opened, EventPieces) and opened.frame().equals(store.load(0)[2])


def test_open_files_as_open_task(monkeypatch: pytest.MonkeyPatch) -> None:
    """A worker's task (its spilled files) is opened as the scan's own process opens it."""
    events = _events([(1, 0, list(range(6))), (2, 0, list(range(4)))])
    with EvidenceStore(1) as store:
        _pieces(events, store, [3, 7])
        store.spill()
        files = store.task_files([0])
        whole = store.load(0)[2]
        assert open_files(files)[2].equals(whole)
        monkeypatch.setattr(pieces_module, "STREAM_ROWS", 5)
        opened = open_files(files)[2]
        assert isinstance(opened, EventPieces) and opened.frame().equals(whole)
        # An exchange in two runs: read whole, as before.
        store.add(ConnectionColumns.frame(), ExchangeColumns.frame(), events.slice(0, 1))
        store.spill()
        again = open_files(store.task_files([0]))[2]
        assert isinstance(again, pl.DataFrame) and again.height == events.height + 1
