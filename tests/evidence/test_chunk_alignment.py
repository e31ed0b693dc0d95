"""A partition's events read back from several files are cut into chunks differently column
by column (a column stored once in one file, per row in the next): polars then copies the
whole frame at its first select. ``evidence.store.align_chunks`` cuts every column alike,
keeping each value and each column that holds one value a scalar column (issue 16)."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import polars as pl
import pytest
from polars.testing import assert_frame_equal

from sse_forensics.evidence.store import align_chunks, aligned, compact


def _file(start: int, n: int, conn: int | None) -> pl.DataFrame:
    """One file's rows: ``conn`` one connection throughout (a scalar column once
    compacted), else two."""
    conns = np.full(n, conn) if conn is not None else np.arange(n) % 2
    rows = pl.DataFrame(
        {
            "conn_id": conns.astype(np.int64),
            "position": np.arange(start, start + n, dtype=np.int64),
            "id_field": [str(k) for k in range(start, start + n)],
            "kind": ["data"] * n,  # one value everywhere: scalar in every file
            "rpc_id": pl.Series([None] * n, dtype=pl.String),
        }
    )
    # Read back in two chunks, as a streamed read of a file gives them.
    return compact(pl.concat([rows.head(n // 2), rows.tail(n - n // 2)]))


def _parts() -> pl.DataFrame:
    files = [_file(0, 300, None), _file(300, 200, 7), _file(500, 250, 7), _file(750, 100, None)]
    return pl.concat(files, how="vertical")


def _scalar_size(df: pl.DataFrame, name: str) -> int:
    return df.select(name).estimated_size()


def test_concatenated_files_are_cut_alike_and_keep_every_value() -> None:
    whole = _parts()
    counts = dict(zip(whole.columns, whole.n_chunks("all"), strict=True))
    assert counts["conn_id"] != counts["position"]  # the case: cut differently
    out = align_chunks(whole)
    assert_frame_equal(out, _parts())  # a fresh copy: ``whole`` was not altered unseen
    after = dict(zip(out.columns, out.n_chunks("all"), strict=True))
    assert after["conn_id"] == after["position"] == after["id_field"] == counts["position"]
    # Columns holding one value stay scalar: a few bytes, not a value per row.
    assert _scalar_size(out, "kind") < 16 and _scalar_size(out, "rpc_id") < 16
    # Cut alike, a select takes the columns as they are (polars re-cuts, i.e. copies, a
    # frame whose columns are cut differently into one chunk each).
    picked = out.select("conn_id", "position", "id_field")
    assert picked.n_chunks("all") == [after["position"]] * 3
    assert whole.select("conn_id", "position").n_chunks("all") == [1, 1]


def test_aligned_columns_follow_the_frame() -> None:
    frame = pl.concat([pl.DataFrame({"a": np.arange(k, k + 5)}) for k in range(0, 20, 5)])
    column = pl.concat([pl.Series("b", np.arange(0, 7)), pl.Series("b", np.arange(7, 20))])
    (cut,) = aligned([column], frame)
    assert [c.len() for c in cut.get_chunks()] == [5, 5, 5, 5]
    assert cut.to_list() == list(range(20))
    (one,) = aligned([column], pl.DataFrame({"a": np.arange(20)}))
    assert one.n_chunks() == 1 and one.to_list() == list(range(20))


def test_scalar_columns_are_never_read_as_series(monkeypatch: pytest.MonkeyPatch) -> None:
    """Reading a scalar column as a series materialises it, and polars keeps the copy
    beside the scalar (``DataFrame.n_chunks("all")`` reads every column so): for a
    partition of one stream of ten million events ~500 MB of sparse columns. Counting
    chunks, aligning and cutting alike read only the columns that hold a value per row."""
    read: list[str] = []
    get_column, iter_columns = pl.DataFrame.get_column, pl.DataFrame.iter_columns

    def spy_get(self: pl.DataFrame, name: str, *args: object, **kwargs: object) -> pl.Series:
        read.append(name)
        return get_column(self, name, *args, **kwargs)

    def spy_iter(self: pl.DataFrame) -> Iterator[pl.Series]:
        for column in iter_columns(self):
            read.append(column.name)
            yield column

    whole = _parts()
    monkeypatch.setattr(pl.DataFrame, "get_column", spy_get)
    monkeypatch.setattr(pl.DataFrame, "iter_columns", spy_iter)
    out = align_chunks(whole)
    aligned([pl.Series("b", np.arange(whole.height))], out)
    assert read and {"kind", "rpc_id"}.isdisjoint(read)


def test_short_strings_are_not_taken_for_one_value() -> None:
    """A string column's estimated size leaves out its views: a sparse one (say a few
    JSON-RPC ids among nulls) estimates at next to nothing, yet holds values that aligning
    keeps."""
    n = 200
    short = ["7" if k % 50 == 3 else None for k in range(n)]

    def file(conn: int) -> pl.DataFrame:
        rows = pl.DataFrame(
            {"conn_id": np.full(n, conn, dtype=np.int64), "position": range(n), "rpc_id": short},
            schema={"conn_id": pl.Int64, "position": pl.Int64, "rpc_id": pl.String},
        )
        return compact(pl.concat([rows.head(n // 2), rows.tail(n - n // 2)]))

    whole = pl.concat([file(1), file(2), file(2)])
    assert whole.select("rpc_id").estimated_size() * 8 < whole.height  # the estimate
    out = align_chunks(whole)
    assert out.get_column("rpc_id").to_list() == short * 3
    assert out.get_column("conn_id").to_list() == [1] * n + [2] * 2 * n
