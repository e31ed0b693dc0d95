"""Step 4b's access pseudo-connections reach the store through
:class:`sse_forensics.evidence.log_partitions.ClientRows`: held in a spill of their own (one
file per table and flush for every partition), then written to the store one partition at
a time. The store reads back the rows it would hold had it taken them directly, in the same
order, from one file per partition and table whatever the number of flushes."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from sse_forensics.evidence import log_partitions
from sse_forensics.evidence.log_partitions import CLIENT_MAX, ClientRows, client_budget
from sse_forensics.evidence.store import EvidenceStore, compact
from sse_forensics.evidence.tables import (
    EVIDENCE_TABLES,
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


def _batches() -> list[tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]]:
    out = []
    for conn in range(12):
        sessions = [f"s{(conn + i) % 7}" for i in range(5)]
        out.append((_connections(conn), compact(_exchanges(conn, sessions)), EventColumns.frame()))
    return out


def test_client_rows_read_back_as_added_one_file_each(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(log_partitions, "CLIENT_PER_PARTITION", 1)  # a flush per batch
    direct = EvidenceStore(3, memory_budget=1 << 30, scratch=str(tmp_path))
    store = EvidenceStore(3, memory_budget=1, scratch=str(tmp_path))
    sink = ClientRows(store)
    for batch in _batches():
        direct.add(*batch)
        sink.add(*batch)
    assert len(list(store.scratch_dir().glob("client-*.parquet"))) > 3  # several flushes
    sink.finish()
    files = store.files()
    assert sorted((b, name) for b, name, _ in files) == sorted(
        (b, t.name) for b in range(3) for t in EVIDENCE_TABLES if t is not EventColumns
    )
    assert not list(store.scratch_dir().glob("client-*.parquet"))  # each dropped once read
    for b in range(3):
        for got, want in zip(store.load(b), direct.load(b), strict=True):
            assert_frame_equal(got, want)
    columns = ["conn_id", "index", "session", "req_ts"]
    got = store.columns(ExchangeColumns, columns)
    want = direct.columns(ExchangeColumns, columns)
    assert_frame_equal(got, want)
    assert got["req_ts"].cast(pl.String).to_list() == want["req_ts"].cast(pl.String).to_list()
    store.close()
    direct.close()


def test_one_partition_takes_the_rows_as_they_come(tmp_path: Path) -> None:
    store = EvidenceStore(1, scratch=str(tmp_path))
    sink = ClientRows(store)
    for batch in _batches():
        sink.add(*batch)
    sink.finish()
    assert not store.spilled  # held in memory: a small scan writes no file
    assert store.rows["exchanges"] == 12 * 5
    store.close()


def test_client_budget() -> None:
    """A MiB per partition, at most CLIENT_MAX, never below the store's own budget."""
    assert client_budget(32 << 20, 4) == 32 << 20
    assert client_budget(32 << 20, 153) == CLIENT_MAX
    assert client_budget(1, 3) == 3 << 20
