"""The evidence store merges a partition's files (what the log ingest's client rows leave,
:func:`sse_forensics.evidence.log_partitions.merge_client_files`) without changing what
it reads back: the same rows in the same order, one file instead of several."""

from __future__ import annotations

from pathlib import Path

import polars as pl
from polars.testing import assert_frame_equal

from sse_forensics.evidence.log_partitions import (
    CLIENT_FILES,
    CLIENT_MAX,
    client_budget,
    merge_client_files,
)
from sse_forensics.evidence.store import EvidenceStore
from sse_forensics.evidence.tables import (
    Columns,
    ConnectionColumns,
    EventColumns,
    ExchangeColumns,
)


def _rows(table: type[Columns], given: dict[str, list[object]]) -> pl.DataFrame:
    """Rows of ``table`` with the ``given`` columns, the others null."""
    df = pl.DataFrame(given)
    nulls = [pl.lit(None, t).alias(c) for c, t in table.schema().items() if c not in given]
    return table.conform(df.with_columns(nulls))


def _exchanges(conn: int, sessions: list[str]) -> pl.DataFrame:
    n = len(sessions)
    rows: dict[str, list[object]] = {
        "conn_id": [conn] * n,
        "index": list(range(n)),
        "session": list(sessions),
        "req_ts": [-0.0 if i % 2 else 0.0 for i in range(n)],  # equal, not the same
    }
    return _rows(ExchangeColumns, rows)


def _connections(conn: int) -> pl.DataFrame:
    return _rows(ConnectionColumns, {"conn_id": [conn]})


def test_merged_files_read_back_as_added(tmp_path: Path) -> None:
    store = EvidenceStore(3, memory_budget=1, scratch=str(tmp_path))  # a spill per add
    before = store.file_counts()
    for conn in range(CLIENT_FILES + 3):
        sessions = [f"s{(conn + i) % 7}" for i in range(5)]
        store.add(_connections(conn), _exchanges(conn, sessions), EventColumns.frame())
    loaded = [store.load(b) for b in range(3)]
    queried = store.columns(ExchangeColumns, ["conn_id", "index", "session", "req_ts"])
    counts = store.file_counts()
    assert max(n for (_, name), n in counts.items() if name == "exchanges") > CLIENT_FILES
    merge_client_files(store, before)
    after = store.file_counts()
    assert all(n == 1 for (_, name), n in after.items() if counts[_, name] > CLIENT_FILES)
    assert len(list(Path(store.scratch_dir()).glob("*.parquet"))) == sum(after.values())
    for b in range(3):
        for got, want in zip(store.load(b), loaded[b], strict=True):
            assert_frame_equal(got, want)
    again = store.columns(ExchangeColumns, ["conn_id", "index", "session", "req_ts"])
    assert_frame_equal(again, queried)
    assert again["req_ts"].cast(pl.String).to_list() == queried["req_ts"].cast(pl.String).to_list()
    store.close()


def test_the_client_rows_step_holds_more_before_it_spills(tmp_path: Path) -> None:
    """Step 4b's rows spill a file to every partition each time the store spills: while
    it runs the store holds up to :func:`client_budget` (a MiB per partition, at most
    CLIENT_MAX), then its own budget again, also after an error."""
    assert client_budget(32 << 20, 4) == 32 << 20
    assert client_budget(32 << 20, 153) == CLIENT_MAX
    assert client_budget(1, 3) == 3 << 20
    store = EvidenceStore(3, memory_budget=1, scratch=str(tmp_path))
    with store.holding(client_budget(store.memory_budget, 3)):
        for conn in range(CLIENT_FILES + 3):
            store.add(_connections(conn), _exchanges(conn, ["s1", "s2"]), EventColumns.frame())
        assert sum(store.file_counts().values()) == 0  # held, not spilled
    assert store.memory_budget == 1
    try:
        with store.holding(1 << 30):
            raise RuntimeError("a failing step")
    except RuntimeError:
        pass
    assert store.memory_budget == 1
    store.add(_connections(99), _exchanges(99, ["s1"]), EventColumns.frame())
    assert sum(store.file_counts().values()) > 0  # its own budget: a spill per add
    store.close()
