"""The evidence of a scan, partitioned by session (the issue's "partitioned by session"): each
session's connections, exchanges and events land in one of ``buckets`` partitions
(a stable hash of the session ID), held as polars batches and spilled to Parquet in a scratch
directory once they exceed a memory budget. Facts and rules then run partition by
partition, so peak memory follows the largest partition, not the input.

A connection whose exchanges belong to several sessions (a proxy's upstream connection, an
access log's client address) is written to each partition that holds one of them.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

import numpy as np
import polars as pl

from sse_forensics.evidence.tables import (
    EVIDENCE_TABLES,
    Columns,
    ConnectionColumns,
    EventColumns,
    ExchangeColumns,
    concat,
    split_by,
)

# How the store and the log spill compress their scratch Parquet: lz4 is a third cheaper to
# write than zstd, for files about twice as large (the mid log set's 153 MB wrote its store
# in 1.15 CPU s, 1.68 with zstd).
SCRATCH_COMPRESSION: Final = "lz4"

# Batches held in memory before the store writes them to its scratch directory. Parquet
# files are half of the in-memory size or less; reading one partition back
# costs one sequential read. benchmarks/scale.py's 400k-packet capture, one process: peak
# RSS 434 MB with 96 MiB, 355 MB with 32 MiB, 320 MB with 16 MiB (235 MB at 50k packets
# with any of them), CPU within noise; the smaller, the more files per partition.
DEFAULT_MEMORY_BUDGET = 32 << 20

# A partition's held event batches of fewer rows in all are read back narrowed but not
# compacted: the bytes it saves are few, its query per column (:func:`constant_value`) a
# small scan's ~2%.
COMPACT_MIN_ROWS = 1 << 12


def bucket_expr(buckets: int, column: str = "session") -> pl.Expr:
    """The bucket of each session: a hash of the session ID, the same in every process of a
    scan (one polars version, fixed seeds; never Python's salted ``hash``)."""
    return (pl.col(column).hash(seed=0) % buckets).cast(pl.Int64)


def buckets_of(sessions: list[str], buckets: int) -> dict[str, int]:
    """:func:`bucket_expr` for a list of session IDs."""
    df = pl.DataFrame({"session": sessions}, schema={"session": pl.String})
    return dict(df.with_columns(bucket_expr(buckets).alias("b")).iter_rows())


@dataclass
class Partition:
    """One bucket's batches in memory and the Parquet files it spilled."""

    batches: dict[str, list[pl.DataFrame]] = field(
        default_factory=lambda: {t.name: [] for t in EVIDENCE_TABLES}
    )
    files: dict[str, list[Path]] = field(
        default_factory=lambda: {t.name: [] for t in EVIDENCE_TABLES}
    )


# Event columns whose values repeat from event to event and come from a small set (a
# session, a capture file's path, a handful of kinds; not the ``event`` type a sender
# chooses: polars interns every distinct categorical value for the life of the process):
# read back for judging as categoricals, four bytes a row instead of a string view (16
# bytes) plus, past 12 bytes, the string itself (issue 16: one stream of ten million
# events). The fact layer compares them with strings and casts them back where a fact
# table shows them.
EVENT_CATEGORIES = ("session", "kind", "first_src", "first_kind", "last_src", "last_kind")


def narrow_events(events: pl.LazyFrame) -> pl.LazyFrame:
    """``events`` with :data:`EVENT_CATEGORIES` as categoricals."""
    return events.with_columns(pl.col(c).cast(pl.Categorical) for c in EVENT_CATEGORIES)


def constant_value(column: pl.Series) -> tuple[bool, object]:
    """Whether every row of ``column`` holds one value (nulls included), and that value.
    Decided without hashing: null count, else min and max (strings: each compared with the
    first; floats: their bit patterns, since min and max do not tell -0.0 from 0.0 and skip
    NaN)."""
    nulls = column.null_count()
    if nulls == column.len():
        return True, None
    if nulls or column.dtype == pl.Binary:
        return False, None
    if column.dtype == pl.String:
        first = column[0]
        return bool((column == first).all()), first
    values = column.to_physical() if column.dtype == pl.Categorical else column
    if values.dtype == pl.Boolean:
        values = values.cast(pl.UInt8)
    if values.dtype.is_float():
        array = values.to_numpy()
        values = pl.Series(array.view(np.dtype(f"i{array.itemsize}")))
    if values.dtype.is_numeric() and values.min() == values.max():
        return True, column[0]
    return False, None


def with_scalars(df: pl.DataFrame, scalars: Sequence[pl.Expr]) -> pl.DataFrame:
    """``df`` with the literal columns ``scalars`` (``pl.lit(value).alias(name)``) as
    scalar columns, replacing those of the same name in place. Not ``df.with_columns``: on a
    frame of several chunks (files concatenated) it copies every column, and it may
    materialise the scalar columns ``df`` holds (polars 1.x; issue 16: one stream of ten
    million events). The scalars are made beside a one-byte column, then put beside ``df``
    (a horizontal concatenation keeps every column as it is)."""
    if not scalars:
        return df
    extra = pl.DataFrame({"_": np.zeros(df.height, dtype=np.bool_)}).with_columns(scalars).drop("_")
    names = extra.columns
    order = [*df.columns, *(n for n in names if n not in df.columns)]
    kept = df.drop([n for n in names if n in df.columns])
    return pl.concat([kept, extra], how="horizontal").select(order)


def aligned(columns: Sequence[pl.Series], like: pl.DataFrame) -> list[pl.Series]:
    """``columns`` (as long as ``like``) cut where the columns of ``like`` are cut into
    chunks, to be put beside them. polars gives a frame whose columns are chunked
    differently one chunk per column before it selects from it: a copy of every column
    (issue 16: 220 MB for a partition of one stream of 2.5 million events read back from
    several files, beside its ID keys computed slice by slice). Each column here is copied
    once, piece by piece; ``like``'s scalar columns are never read."""
    counts = chunk_counts(like)
    most = max(counts, default=1)
    if most <= 1:
        return [c.rechunk() for c in columns]
    lengths = [c.len() for c in like.get_column(like.columns[counts.index(most)]).get_chunks()]
    out = []
    for column in columns:
        pieces, at = [], 0
        for n in lengths:
            pieces.append(column.slice(at, n).rechunk())
            at += n
        out.append(pl.concat(pieces, rechunk=False))
    return out


def _is_scalar(df: pl.DataFrame, name: str) -> bool:
    """Whether column ``name`` of ``df``, one chunk, holds one value throughout (a scalar
    column, or all null): its estimated size is less than a bit per row. Told without
    reading it (reading a scalar column materialises it)."""
    return df.height > 64 and df.select(name).estimated_size() * 8 < df.height


def stored_once(df: pl.DataFrame, name: str) -> bool:
    """Whether column ``name`` of ``df`` holds one value throughout, told without reading
    it as a series: :func:`_is_scalar`, which a fixed-width column's estimated size
    decides; a string column's estimate leaves out its views (short or empty strings
    estimate at next to nothing), so its null count, least and greatest value confirm it."""
    if not _is_scalar(df, name):
        return False
    dtype = df.schema[name]
    if dtype == pl.Binary:
        return False
    if dtype != pl.String:
        return True
    nulls, least, most = df.select(
        pl.col(name).null_count().alias("n"),
        pl.col(name).min().alias("lo"),
        pl.col(name).max().alias("hi"),
    ).row(0)
    return bool(nulls == df.height or (nulls == 0 and least == most))


def chunk_counts(df: pl.DataFrame, once: list[bool] | None = None) -> list[int]:
    """Each column's number of chunks, a column holding one value (:func:`stored_once`;
    ``once``: that test's answer per column, when the caller has it) counted as one without
    reading it. Not ``df.n_chunks("all")``: it reads every column as a series, which
    materialises each scalar column, and polars keeps that copy beside the scalar (issue
    16: ~500 MB for a partition of one stream of ten million events, whose sparse columns
    are all scalars)."""
    if once is None:
        once = [stored_once(df, n) for n in df.columns]
    return [1 if o else df.get_column(n).n_chunks() for n, o in zip(df.columns, once, strict=True)]


def align_chunks(df: pl.DataFrame) -> pl.DataFrame:
    """``df`` with every column cut into chunks where its most-cut column is (see
    :func:`aligned`). A frame concatenated from files, where a column stored once in one
    file (:func:`compact`) and per row in the next is cut differently from the others, is
    copied whole by polars at its first select, filter or drop (issue 16: one stream of
    ten million events read back from a few dozen files). The columns are taken as they
    are (no copy where their chunks nest in the most-cut column's), those that hold one
    value throughout as scalar columns."""
    once = [stored_once(df, n) for n in df.columns]  # asked once: a string column's is a query
    counts = chunk_counts(df, once)
    most = max(counts, default=1)
    if most <= 1 or min(counts) == most:
        return df
    scalar = [n for n, o in zip(df.columns, once, strict=True) if o]
    if all(c == most or n in scalar for n, c in zip(df.columns, counts, strict=True)):
        return df
    real = [df.get_column(n) for n in df.columns if n not in scalar]
    values = df.select(pl.col(n).first() for n in scalar).row(0) if scalar else ()
    schema = df.schema
    lits = [pl.lit(v, dtype=schema[n]).alias(n) for n, v in zip(scalar, values, strict=True)]
    return with_scalars(pl.DataFrame(aligned(real, df)), lits).select(df.columns)


def compact(df: pl.DataFrame, columns: Sequence[str] | None = None) -> pl.DataFrame:
    """``df`` with each column that holds one value on every row (say, the sparse JSON-RPC
    and signal columns of a stream with none, or the connection of a partition of one
    stream) stored once, as a polars scalar column that filters, gathers and concatenations
    keep scalar: the events of one long stream cost their varying columns only (issue 16).
    Only ``columns`` are tried when given (a column already scalar is best left untouched:
    reading it as a series materialises it)."""
    if not df.height:
        return df
    scalars = []
    names = df.columns if columns is None else columns
    for column in (df.get_column(n) for n in names):
        same, value = constant_value(column)
        if same:
            scalars.append(pl.lit(value, dtype=column.dtype).alias(column.name))
    return with_scalars(df, scalars)


# Rows of spilled files read together by read_rows(chunked=True); read when called (a test
# lowers it).
CHUNK_ROWS = 1 << 20


def _file_groups(files: list[Path], chunk_rows: int) -> list[list[Path]]:
    """``files`` in order, grouped so that a group holds about ``chunk_rows`` rows (row
    counts from the Parquet footers), or one file."""
    groups: list[list[Path]] = []
    rows = 0
    for path in files:
        n = pl.scan_parquet(path).select(pl.len()).collect().item()
        if groups and rows + n <= chunk_rows:
            groups[-1].append(path)
            rows += n
        else:
            groups.append([path])
            rows = n
    return groups


def read_rows(
    files: list[Path],
    batches: Sequence[pl.DataFrame],
    columns: Sequence[str | pl.Expr],
    where: pl.Expr | None = None,
    chunked: bool = False,
) -> Iterator[pl.DataFrame]:
    """``columns`` of the rows ``where`` selects in one bucket's table: its spilled
    ``files`` then its held ``batches``, in the order they were added. ``chunked``: in
    several frames (the files about :data:`CHUNK_ROWS` rows at a time, or one file; then
    the batches one at a time), so that a bucket holding one stream of millions of events
    is never read whole (issue 16); else in one frame read by one query
    (:meth:`EvidenceStore.bucket_columns`). Frames without rows are left out. What a worker
    process reads of a partition it was handed as files."""
    lazies: list[pl.LazyFrame]
    if not chunked:
        parts = [pl.scan_parquet(files)] if files else []
        parts.extend(df.lazy() for df in batches)
        lazies = [pl.concat(parts)] if parts else []
    else:
        lazies = [pl.scan_parquet(g) for g in _file_groups(files, CHUNK_ROWS)]
        lazies.extend(df.lazy() for df in batches)
    for lazy in lazies:
        if where is not None:
            lazy = lazy.filter(where)
        df = lazy.select(columns).collect()
        if df.height:
            yield df


def read_spilled(path: Path, table: type[Columns]) -> pl.DataFrame:
    """One spilled file of ``table``; events narrowed (:func:`narrow_events`) as they are
    read, row group by row group, so a file holding one long stream is never held wide, and
    compacted (:func:`compact`)."""
    if table is not EventColumns:
        return pl.read_parquet(path)
    return compact(narrow_events(pl.scan_parquet(path)).collect(engine="streaming"))


def narrowed_batches(frames: list[pl.DataFrame], table: type[Columns]) -> list[pl.DataFrame]:
    """Held batches of ``table`` as :func:`read_spilled` reads a file: events narrowed, and
    compacted when the batches together are many rows."""
    if table is not EventColumns:
        return frames
    if sum(f.height for f in frames) < COMPACT_MIN_ROWS:  # the partition's, not a batch's
        return [narrow_events(f.lazy()).collect() for f in frames]
    return [compact(narrow_events(f.lazy()).collect()) for f in frames]


def task_connections(frames: list[pl.DataFrame]) -> pl.DataFrame:
    """The connections of a task's buckets together: a connection whose sessions fall in
    several buckets is in each, kept once (its first row)."""
    return concat(frames, ConnectionColumns).unique("conn_id", keep="first", maintain_order=True)


def join_buckets(
    loaded: list[tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]],
) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    return (
        task_connections([c for c, _, _ in loaded]),
        concat([x for _, x, _ in loaded], ExchangeColumns),
        align_chunks(concat([e for _, _, e in loaded], EventColumns)),
    )


def read_table(paths: Sequence[Path], table: type[Columns]) -> pl.DataFrame:
    """``table``'s rows in the spilled files ``paths``, in order."""
    return concat([read_spilled(p, table) for p in paths], table)


def read_files(files: dict[str, list[Path]]) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """A task's tables from its Parquet files (see :meth:`EvidenceStore.task_files`)."""
    tables = [read_table(files[t.name], t) for t in EVIDENCE_TABLES]
    return join_buckets([(tables[0], tables[1], tables[2])])


class EvidenceStore:
    """Partitioned evidence of one scan. ``add`` batches; ``load(bucket)`` reads a bucket
    back as (connections, exchanges, events); ``close`` removes the scratch files."""

    def __init__(
        self,
        buckets: int = 1,
        memory_budget: int | None = None,
        scratch: str | None = None,
    ) -> None:
        self.buckets = max(1, buckets)
        # Read when the store is made (a test lowers it to spill every batch).
        self.memory_budget = DEFAULT_MEMORY_BUDGET if memory_budget is None else memory_budget
        self._scratch_parent = scratch
        self._scratch: Path | None = None
        self._parts = [Partition() for _ in range(self.buckets)]
        self._held = 0
        self._spills = 0
        self.rows = {t.name: 0 for t in EVIDENCE_TABLES}

    # -- writing ------------------------------------------------------------------------

    def add(
        self,
        connections: pl.DataFrame,
        exchanges: pl.DataFrame,
        events: pl.DataFrame,
    ) -> None:
        """Route one batch of rows to their buckets. Connections go to every bucket that
        holds one of their exchanges."""
        for bucket, table, df in self.route(connections, exchanges, events):
            self._hold(bucket, table, df)
        if self._held > self.memory_budget:
            self.spill()

    def route(
        self,
        connections: pl.DataFrame,
        exchanges: pl.DataFrame,
        events: pl.DataFrame,
    ) -> Iterator[tuple[int, type[Columns], pl.DataFrame]]:
        """(bucket, table, rows) of one batch, as :meth:`add` holds them."""
        if self.buckets == 1:
            yield 0, ConnectionColumns, connections
            yield 0, ExchangeColumns, exchanges
            yield 0, EventColumns, events
            return
        ex = exchanges.with_columns(bucket_expr(self.buckets).alias("_bucket"))
        ev = events.with_columns(bucket_expr(self.buckets).alias("_bucket"))
        pairs = ex.select("conn_id", "_bucket").unique()
        conns = connections.join(pairs, on="conn_id", how="inner")
        routed: tuple[tuple[type[Columns], pl.DataFrame], ...] = (
            (ExchangeColumns, ex),
            (EventColumns, ev),
            (ConnectionColumns, conns),
        )
        for table, df in routed:
            for bucket, part in split_by(df, "_bucket", keep_key=False).items():
                yield int(bucket), table, part

    def add_routed(self, bucket: int, table: type[Columns], df: pl.DataFrame) -> None:
        """Rows of ``table`` that :meth:`route` sent to ``bucket`` (routed once: a second
        route may reorder a partition's connections)."""
        self._hold(bucket, table, df)
        if self._held > self.memory_budget:
            self.spill()

    def _hold(self, bucket: int, table: type[Columns], df: pl.DataFrame) -> None:
        if not df.height:
            return
        self._parts[bucket].batches[table.name].append(df)
        self._held += int(df.estimated_size())  # bytes: an int
        self.rows[table.name] += df.height

    def scratch_dir(self) -> Path:
        if self._scratch is None:
            self._scratch = Path(
                tempfile.mkdtemp(prefix="sse-forensics-", dir=self._scratch_parent)
            )
        return self._scratch

    def files(self) -> list[tuple[int, str, Path]]:
        """(bucket, table, file) of everything spilled."""
        return [
            (b, name, path)
            for b, part in enumerate(self._parts)
            for name, paths in part.files.items()
            for path in paths
        ]

    def adopt(self, files: list[tuple[int, str, Path]], rows: dict[str, int]) -> None:
        """Take over the spilled files of another store with the same buckets (a worker's,
        written under this store's :meth:`scratch_dir`)."""
        for bucket, name, path in files:
            self._parts[bucket].files[name].append(path)
        for name, n in rows.items():
            self.rows[name] += n
        self._spills = max(self._spills, 1)

    def spill(self) -> None:
        """Write every batch held in memory to the scratch directory."""
        scratch = self.scratch_dir()
        self._spills += 1
        for bucket, part in enumerate(self._parts):
            for table in EVIDENCE_TABLES:
                batches = part.batches[table.name]
                if not batches:
                    continue
                path = scratch / f"{table.name}-{bucket:05d}-{self._spills:05d}.parquet"
                concat(batches, table).write_parquet(
                    path, compression=SCRATCH_COMPRESSION, statistics=False
                )
                part.files[table.name].append(path)
                part.batches[table.name] = []
        self._held = 0

    # -- reading ------------------------------------------------------------------------

    def load(self, bucket: int) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
        out = [self.load_table(bucket, table) for table in EVIDENCE_TABLES]
        return out[0], out[1], out[2]

    def load_table(self, bucket: int, table: type[Columns]) -> pl.DataFrame:
        """One bucket's rows of ``table``: its spilled files, then its held batches."""
        part = self._parts[bucket]
        frames = [read_spilled(p, table) for p in part.files[table.name]]
        frames.extend(narrowed_batches(part.batches[table.name], table))
        return concat(frames, table)

    def columns(
        self,
        table: type[Columns],
        columns: Sequence[str | pl.Expr],
        where: pl.Expr | None = None,
    ) -> pl.DataFrame:
        """``columns`` (names or expressions) of ``table`` over every bucket, of the rows
        ``where`` selects (only those are read back)."""
        return self._query(range(self.buckets), table, columns, where)

    def bucket_columns(
        self,
        table: type[Columns],
        columns: Sequence[str | pl.Expr],
        where: pl.Expr | None = None,
    ) -> Iterator[tuple[int, pl.DataFrame]]:
        """(bucket, :meth:`columns` of that bucket), one bucket at a time in bucket order
        (buckets with no such rows left out)."""
        for b in range(self.buckets):
            df = self._query([b], table, columns, where)
            if df.height:
                yield b, df

    def bucket_rows(
        self,
        bucket: int,
        table: type[Columns],
        columns: Sequence[str | pl.Expr],
        where: pl.Expr | None = None,
        chunked: bool = False,
    ) -> Iterator[pl.DataFrame]:
        """One bucket's rows of ``table`` (:func:`read_rows`: in chunks, or in one frame)."""
        part = self._parts[bucket]
        return read_rows(part.files[table.name], part.batches[table.name], columns, where, chunked)

    def task_columns(
        self, buckets: list[int], table: type[Columns], columns: list[str | pl.Expr]
    ) -> pl.DataFrame:
        """:meth:`columns` of the buckets of one task only."""
        return self._query(buckets, table, columns, None)

    def distinct(self, table: type[Columns], column: str) -> pl.Series:
        """The distinct values of one column, sorted (bucket by bucket, file by file)."""
        return (
            self._query(range(self.buckets), table, [column], None)
            .get_column(column)
            .unique()
            .sort()
        )

    def _query(
        self,
        buckets: Iterable[int],
        table: type[Columns],
        columns: Sequence[str | pl.Expr],
        where: pl.Expr | None,
    ) -> pl.DataFrame:
        """``columns`` of the rows ``where`` selects in ``buckets`` (bucket by bucket, files
        then held batches, in the order they were added): one polars query over all their
        files, not one per file (a scan's cross-session pass asks a few dozen of these)."""
        parts: list[pl.LazyFrame] = []
        for b in buckets:
            part = self._parts[b]
            files = part.files[table.name]
            if files:
                parts.append(pl.scan_parquet(files))
            parts.extend(df.lazy() for df in part.batches[table.name])
        lazy = pl.concat(parts) if parts else table.frame().lazy()
        if where is not None:
            lazy = lazy.filter(where)
        return lazy.select(columns).collect()

    def sources(self, bucket: int, table: str) -> tuple[list[Path], list[pl.DataFrame]]:
        """One bucket's spilled files and held batches of ``table``, in the order added."""
        part = self._parts[bucket]
        return list(part.files[table]), list(part.batches[table])

    def load_task(self, buckets: list[int]) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
        """The buckets of one task together (connections de-duplicated)."""
        return join_buckets([self.load(b) for b in buckets])

    def task_files(self, buckets: list[int]) -> dict[str, list[Path]]:
        """The Parquet files of a task's buckets (after :meth:`spill`): what a worker
        process reads."""
        return {
            t.name: [p for b in buckets for p in self._parts[b].files[t.name]]
            for t in EVIDENCE_TABLES
        }

    def nonempty(self) -> list[int]:
        return [
            b for b, p in enumerate(self._parts) if p.batches["exchanges"] or p.files["exchanges"]
        ]

    @property
    def spilled(self) -> bool:
        return self._spills > 0

    def close(self) -> None:
        if self._scratch is not None:
            shutil.rmtree(self._scratch, ignore_errors=True)
            self._scratch = None

    def __enter__(self) -> EvidenceStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
