"""A large partition's events left where the store put them (issue 16: one stream of ten
million events must not be judged from a copy of every event held at once): its spilled
Parquet files and held batches, in the order they were added, read a slice and a few
columns at a time as the fact layer asks (:class:`EventPieces`). A partition of fewer events,
or whose exchanges' events are not each one run in position order, is read whole as before
(:meth:`~.store.EvidenceStore.load_task`)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import polars as pl

from sse_forensics.evidence.store import (
    EvidenceStore,
    align_chunks,
    narrow_events,
    narrowed_batches,
    read_files,
    read_spilled,
    read_table,
    task_connections,
)
from sse_forensics.evidence.tables import (
    ConnectionColumns,
    EventColumns,
    ExchangeColumns,
    concat,
)

# A task's events past this many are judged from their pieces, not read whole; read when
# called (a test lowers it). One million events held whole are ~90 MB.
STREAM_ROWS = 1 << 20

Piece = Path | pl.DataFrame

# Rows of a piece read at once by EventPieces.take.
TAKE_WINDOW = 1 << 16


def _rows(piece: Piece) -> int:
    if isinstance(piece, pl.DataFrame):
        return piece.height
    return int(pl.scan_parquet(piece).select(pl.len()).collect().item())


class EventPieces:
    """One task's ``events`` evidence rows as pieces (Parquet files, held frames) in table
    order, each read a slice and a projection at a time, narrowed as a whole read narrows
    them (:func:`~.store.narrow_events`); nothing of them is kept between reads."""

    def __init__(self, pieces: Sequence[Piece]) -> None:
        counted = [(p, _rows(p)) for p in pieces]
        self.pieces = [p for p, n in counted if n]
        self.lengths = [n for _p, n in counted if n]
        self.height = sum(self.lengths)
        self.columns = EventColumns.names()
        self._runs: tuple[pl.DataFrame | None] | None = None  # (runs(),) once found

    def _read(self, piece: Piece, offset: int, length: int, columns: Sequence[str]) -> pl.DataFrame:
        lazy = piece.lazy() if isinstance(piece, pl.DataFrame) else pl.scan_parquet(piece)
        return narrow_events(lazy.slice(offset, length)).select(columns).collect()

    def slices(
        self, size: int, columns: Sequence[str] | None = None
    ) -> Iterator[tuple[int, pl.DataFrame]]:
        """``(offset, rows)`` of up to ``size`` rows at a time, never across two pieces."""
        names = list(columns or self.columns)
        at = 0
        for piece, n in zip(self.pieces, self.lengths, strict=True):
            for k in range(0, n, size):
                yield at + k, self._read(piece, k, min(size, n - k), names)
            at += n

    def slice(self, offset: int, length: int, columns: Sequence[str] | None = None) -> pl.DataFrame:
        """Rows ``offset`` to ``offset + length`` of the table."""
        names = list(columns or self.columns)
        parts, at = [], 0
        for piece, n in zip(self.pieces, self.lengths, strict=True):
            lo, hi = max(offset, at), min(offset + length, at + n)
            if lo < hi:
                parts.append(self._read(piece, lo - at, hi - lo, names))
            at += n
        return pl.concat(parts) if parts else self.empty(names)

    def take(self, rows: pl.Series, columns: Sequence[str]) -> pl.DataFrame:
        """The rows numbered ``rows`` (ascending) of the table: of each piece, only the
        :data:`TAKE_WINDOW`-row windows that hold some are read, a gather each (a few
        events of a stream of millions cost a few windows, not the stream)."""
        index = rows.to_numpy().astype(np.int64)
        parts, at = [], 0
        for piece, n in zip(self.pieces, self.lengths, strict=True):
            lo, hi = np.searchsorted(index, [at, at + n])
            local = index[lo:hi] - at
            for window in np.unique(local // TAKE_WINDOW):
                first = int(window) * TAKE_WINDOW
                a, b = np.searchsorted(local, [first, first + TAKE_WINDOW])
                mine = local[a:b] - first
                read = self._read(piece, first, min(TAKE_WINDOW, n - first), columns)
                parts.append(read.gather(pl.Series(mine)))
            at += n
        return pl.concat(parts) if parts else self.empty(columns)

    def empty(self, columns: Sequence[str]) -> pl.DataFrame:
        return narrow_events(EventColumns.frame().lazy()).select(columns).collect()

    def frame(self) -> pl.DataFrame:
        """The whole table, read as :meth:`~.store.EvidenceStore.load_task` reads it."""
        read = [
            narrowed_batches([p], EventColumns)[0]
            if isinstance(p, pl.DataFrame)
            else read_spilled(p, EventColumns)
            for p in self.pieces
        ]
        return align_chunks(concat(read, EventColumns))

    def lazies(self, size: int) -> Iterator[tuple[int, int, pl.LazyFrame]]:
        """``(offset, rows, query)`` of up to ``size`` rows at a time (as :meth:`slices`),
        each read when it runs."""
        at = 0
        for piece, n in zip(self.pieces, self.lengths, strict=True):
            lazy = piece.lazy() if isinstance(piece, pl.DataFrame) else pl.scan_parquet(piece)
            for k in range(0, n, size):
                length = min(size, n - k)
                yield at + k, length, narrow_events(lazy.slice(k, length))
            at += n

    def lazy(self) -> pl.LazyFrame:
        """The whole table as one query (each piece scanned when it runs)."""
        return pl.concat([q for _a, _n, q in self.lazies(max(self.lengths, default=1))])

    def runs(self, size: int | None = None) -> pl.DataFrame | None:
        """``conn_id, ex_index, start, n``: each exchange's rows, when they are one run of
        the table in rising ``position`` (as ingest writes them), in table order; else
        None. Read ``size`` rows (default :data:`STREAM_ROWS`) of three columns at a time;
        found once."""
        if self._runs is None:
            self._runs = (self._find_runs(size or STREAM_ROWS),)
        return self._runs[0]

    def _find_runs(self, size: int) -> pl.DataFrame | None:
        keys = ("conn_id", "ex_index")
        starts: list[pl.DataFrame] = []
        last: tuple[int, int, int] | None = None
        for offset, part in self.slices(size, (*keys, "position")):
            if part.select(pl.any_horizontal(pl.all().is_null()).any()).item():
                return None
            head = part.row(0)
            new = (pl.col("conn_id") != pl.col("conn_id").shift(1)) | (
                pl.col("ex_index") != pl.col("ex_index").shift(1)
            )
            first_new = last is None or head[:2] != last[:2]
            if not first_new and last is not None and head[2] <= last[2]:
                return None
            rising = (pl.col("position") > pl.col("position").shift(1)) | new
            if not part.select(rising.fill_null(True).all()).item():
                return None
            flags = new.fill_null(first_new)
            starts.append(
                part.with_row_index("start", offset=offset)
                .filter(flags)
                .select(*keys, pl.col("start").cast(pl.Int64))
            )
            last = part.row(part.height - 1)
        if not starts:
            return None
        runs = pl.concat(starts)
        if runs.select(pl.struct(keys).is_duplicated().any()).item():
            return None
        ends = runs.get_column("start").shift(-1).fill_null(self.height)
        return runs.with_columns((ends - pl.col("start")).alias("n"))


def open_task(
    store: EvidenceStore, buckets: list[int]
) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame | EventPieces]:
    """:meth:`EvidenceStore.load_task`, with the events left as :class:`EventPieces` when
    there are more than :data:`STREAM_ROWS` of them and each exchange's are one run."""
    held: list[Piece] = []
    for b in buckets:  # each bucket's files, then its batches: as load_task reads them
        files, batches = store.sources(b, EventColumns.name)
        held += [*files, *batches]
    pieces = EventPieces(held)
    if pieces.height <= STREAM_ROWS or pieces.runs() is None:
        return store.load_task(buckets)
    conns = task_connections([store.load_table(b, ConnectionColumns) for b in buckets])
    exchanges = concat([store.load_table(b, ExchangeColumns) for b in buckets], ExchangeColumns)
    return conns, exchanges, pieces


def open_files(
    files: dict[str, list[Path]],
) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame | EventPieces]:
    """:func:`~.store.read_files` in a worker process, the events left as
    :class:`EventPieces` as :func:`open_task` leaves them."""
    pieces = EventPieces(list(files[EventColumns.name]))
    if pieces.height <= STREAM_ROWS or pieces.runs() is None:
        return read_files(files)
    conns = task_connections([read_table(files[ConnectionColumns.name], ConnectionColumns)])
    return conns, read_table(files[ExchangeColumns.name], ExchangeColumns), pieces
