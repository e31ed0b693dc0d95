"""A partition task's sessions rows in a scratch Parquet file: a cluster scan's partition
task writes them there and hands back the file's name, not the rows; the scan reads every
task's file column by column into the one sessions table, in the order the sessions first
appear (issue 10: on the 2.45 GB log set the 2.56M rows were held by the workers until the
client gathered them, 1.3 GB per worker and 1.7 GB on the client at the end).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable
from pathlib import Path

import polars as pl

from sse_forensics.evidence.store import SCRATCH_COMPRESSION, constant_value, with_scalars

# Each row's first exchange (``conn_id, index``), beside the sessions columns in the file.
FIRST = {"conn_id": "_first_conn_id", "index": "_first_index"}

SessionOrder = Callable[[pl.Series, list[pl.DataFrame]], pl.Series]
"""The rows of the merged table in scan order, from its session IDs and the files' first
exchanges (``pipeline._session_order``)."""


def write_sessions(sessions: pl.DataFrame, first_seen: pl.DataFrame, path: str) -> None:
    """``sessions`` with each row's first exchange (``first_seen``, row for row) at
    ``path``, atomically: written under a hidden name in the same directory, then renamed
    over it. A task run again (its worker died) writes the same rows to the same name."""
    rows = pl.concat(
        [sessions, first_seen.select(pl.col(k).alias(v) for k, v in FIRST.items())],
        how="horizontal",
    )
    target = Path(path)
    part = target.with_name(f".{target.name}.{uuid.uuid4().hex}")
    try:
        rows.write_parquet(part, compression=SCRATCH_COMPRESSION, statistics=False)
        os.replace(part, target)
    finally:
        part.unlink(missing_ok=True)


def read_sessions(paths: list[str], order_of: SessionOrder) -> pl.DataFrame:
    """The rows of the files at ``paths`` (in task order) as one table in ``order_of``'s
    order, read one column at a time and each gathered into place before the next is read:
    the peak is the table and a column, not every task's rows twice. A column that holds
    one value throughout is kept as a scalar column, as :func:`~.store.compact` keeps it."""
    files = pl.scan_parquet(paths)
    names = [n for n in files.collect_schema().names() if n not in FIRST.values()]
    firsts = files.select(pl.col(v).alias(k) for k, v in FIRST.items()).collect()
    ids = _column(files, "session_id")
    order = order_of(ids, [firsts])
    del firsts
    varying = [ids.gather(order)]  # never a scalar: it gives the table its height
    del ids
    scalars = []
    for name in (n for n in names if n != "session_id"):
        column = _column(files, name)
        same, value = constant_value(column)
        if same:
            scalars.append(pl.lit(value, dtype=column.dtype).alias(name))
        else:
            varying.append(column.gather(order))
        del column
    return with_scalars(pl.DataFrame(varying), scalars).select(names)


def _column(files: pl.LazyFrame, name: str) -> pl.Series:
    return files.select(name).collect().get_column(name).rechunk()
