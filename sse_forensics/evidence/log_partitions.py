"""Logs into the evidence store in bounded memory, whatever their size (issue "production
scale": partitioned by session, spilled past a budget).

The rows of :mod:`.from_logs` need whole sessions (an event-log stream and the access
lines that describe it) or whole client addresses (the pseudo-connection of the access
lines that stand alone), and pseudo-connections numbered in the order of the whole scan.
So the log batches are routed, as they are read, into Parquet partitions (:class:`Spill`):

1. event-log records by session (a record whose session is not known yet waits, by
   stream, until the log has named it: each batch's first names of its streams go to
   ``named``, :func:`.log_numbers.named_sessions`), access lines that may describe a
   stream by the session they name, the others by client — each client address's first
   line kept as they pass (:class:`ClientFirsts`);
2. per session partition, the event-log groups (kept in the spill) and their place in the
   scan's order as numbers; all of them numbered at once, a few numbers per group
   (:mod:`.log_numbers`);
3. per session partition, the rows (:func:`.from_logs.session_part`); the access lines no
   stream took join their client's partition (their first lines the client table);
4. the client table numbers the access pseudo-connections (no read of the lines), then,
   per client partition, their rows (:func:`.from_logs.client_part`), routed to the
   store's session partitions and written there one partition at a time
   (:class:`ClientRows`: one file per partition and table).

Peak memory follows the largest partition (and the largest client address), not the input;
a partition of many event-log records (one long stream: a session cannot be split) is read
a spill part at a time in steps 2 and 3 (:mod:`.log_slices`).
The numbering holds a few numbers per stream exchange (no string); the client table one
row per client address (one process; the tasks of :mod:`sse_forensics.cluster.logs` leave
it in the client partitions).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import polars as pl

from sse_forensics.errors import ReadError
from sse_forensics.evidence import from_logs as F
from sse_forensics.evidence import log_numbers as N
from sse_forensics.evidence import log_slices as S
from sse_forensics.evidence.log_records import RECORD_COLUMNS
from sse_forensics.evidence.store import (
    SCRATCH_COMPRESSION,
    EvidenceStore,
    compact,
    constant_value,
)
from sse_forensics.evidence.tables import EVIDENCE_TABLES, EventColumns, split_by
from sse_forensics.facts.config import AnalysisConfig
from sse_forensics.ingest.logs import LogBatch, StreamSessions
from sse_forensics.ingest.logs.model import own_strings
from sse_forensics.ingest.logs.read import log_stats

if TYPE_CHECKING:
    from polars._typing import PolarsDataType  # a dtype class (pl.String) or instance

    from sse_forensics.ingest.logs.model import FileStats


# The routed log rows held before they are written: this share of the store's memory
# budget. A log scan's peak RSS is reached while it routes (held rows, the chunk being
# parsed, the flush's copies); on benchmarks/scale.py's 417 MB log set, one process:
# 470 MB with 32 MiB held, 419 MB with 16 MiB, for the same CPU time.
SPILL_SHARE = 2  # of evidence.store.DEFAULT_MEMORY_BUDGET (32 MiB): 16 MiB
# With many partitions, more: each flush's file holds a part of every partition, and
# reading a partition back costs ~1 ms per part (a partition reads one part per flush).
# On the 1.2 GB --big log set (153 partitions) at 16 MiB, reading the parts back took
# ~45 of ~135 CPU s of the ingest.
SPILL_PER_PARTITION = 512 << 10
SPILL_MAX = 64 << 20


# The access pseudo-connections' rows held before they are written (step 4b,
# :class:`ClientRows`): each flush leaves a part in every session partition, read back
# once per part. On the 1.2 GB --big log set (153 partitions) 32 MiB made the store's
# spills write 8,866 files, ~14% of the scan's CPU time (185 -> 158 CPU s with 128 MiB,
# same peak RSS: the scan's peak is elsewhere).
CLIENT_PER_PARTITION = 1 << 20
CLIENT_MAX = 128 << 20


def client_budget(store_budget: int, buckets: int) -> int:
    """The bytes of client rows :class:`ClientRows` holds before it writes them."""
    return max(store_budget, min(CLIENT_MAX, buckets * CLIENT_PER_PARTITION))


def spill_budget(store_budget: int, buckets: int) -> int:
    """The bytes a scan's log :class:`Spill` holds before it writes them."""
    base = store_budget // SPILL_SHARE
    return max(base, min(SPILL_MAX, buckets * SPILL_PER_PARTITION))


@dataclass(frozen=True, slots=True)
class SpillPart:
    """One partition's rows of one spilled Parquet file: ``rows`` rows from ``offset``
    (a flush writes one file per table, its partitions one after another). ``constants``:
    the columns that hold one value on every row of the file, left out of it (name, value,
    dtype), and ``order`` the file's columns as they were held."""

    path: Path
    offset: int
    rows: int
    constants: tuple[tuple[str, object, PolarsDataType], ...] = ()
    order: tuple[str, ...] = ()

    @property
    def parent(self) -> Path:
        return self.path.parent

    def read(self, columns: list[str] | None = None) -> pl.DataFrame:
        """The part's rows (``columns`` only, when given): the row groups that hold them,
        the constant columns put back as scalar columns."""
        return self.lazy(columns).collect()

    def lazy(self, columns: list[str] | None = None) -> pl.LazyFrame:
        """:meth:`read` as a query, to be read with others (:meth:`Spill.load`: one query
        for all of a partition's parts costs about half the CPU of one per part)."""
        lazy = pl.scan_parquet(self.path)
        if not self.constants:
            if columns is not None:
                lazy = lazy.select(columns)
            return lazy.slice(self.offset, self.rows)
        wanted = list(self.order) if columns is None else columns
        fixed = {name: (value, dtype) for name, value, dtype in self.constants}
        stored = [c for c in wanted if c not in fixed]
        scalars = [pl.lit(v, dtype=t).alias(c) for c, (v, t) in fixed.items() if c in wanted]
        if stored:
            part = lazy.select(stored).slice(self.offset, self.rows)
            return part.with_columns(scalars).select(wanted)
        return self._constant_rows(wanted, scalars).lazy()

    def _constant_rows(self, wanted: list[str], scalars: list[pl.Expr]) -> pl.DataFrame:
        """A part of no stored column read: the constants on the part's rows."""
        # Its height is the part's (a scalar column's length follows the frame it is added
        # to).
        df = pl.DataFrame({"__rows": pl.repeat(0, self.rows, eager=True)})
        return df.with_columns(scalars).select(wanted)


def _constants(df: pl.DataFrame) -> tuple[tuple[str, object, PolarsDataType], ...]:
    """The columns of ``df`` that hold one value on every row (a log line's file, an access
    pseudo-connection's thirty fixed exchange columns), with that value and their dtype;
    one column is always left to be written (a file's height is its columns')."""
    found = []
    for column in df.get_columns()[1:]:
        same, value = constant_value(column)
        if same:
            found.append((column.name, value, column.dtype))
    return tuple(found)


SpillFiles = dict[tuple[str, int], list[SpillPart]]
"""(table, partition) → its parts of the spilled files, in the order they were written."""

# Rows per Parquet row group of a flush's file, at least: a partition's part is read as
# the row groups that hold it, so they are about a part's size (a flush holds rows of
# every partition; 153 partitions on the 1.2 GB --big log set).
_ROW_GROUP_MIN = 1024


class Spill:
    """Named tables of rows routed to ``buckets`` partitions: held in memory up to
    ``budget`` bytes, then written to Parquet files under ``scratch`` — one file per table
    and flush, whatever the number of partitions (one per partition made thousands of
    small files on a 1 GB log, their writes, reads and removal a third of its scan)."""

    def __init__(self, buckets: int, scratch: Path, budget: int, prefix: str = "log") -> None:
        self.buckets = buckets
        self.scratch = scratch
        self.budget = budget
        self.prefix = prefix
        self._held: dict[tuple[str, int], list[pl.DataFrame]] = {}
        self._files: SpillFiles = {}
        self._users: dict[Path, int] = {}  # parts of each file not dropped yet
        self._bytes = 0
        self._flushes = 0

    def add(self, name: str, rows: pl.DataFrame, key: pl.Expr) -> None:
        """Route ``rows`` by the hash of ``key`` (a string expression)."""
        if not rows.height:
            return
        if self.buckets == 1:
            parts = {0: rows}
        else:
            tagged = rows.with_columns(self.bucket_of(key).alias("__bucket"))
            parts = {
                int(b): part for b, part in split_by(tagged, "__bucket", keep_key=False).items()
            }
        for bucket, part in parts.items():
            self.hold(name, bucket, part)

    def hold(self, name: str, bucket: int, rows: pl.DataFrame) -> None:
        """Keep ``rows`` of table ``name`` in partition ``bucket``."""
        self._held.setdefault((name, bucket), []).append(rows)
        self._bytes += int(rows.estimated_size())  # bytes: an int
        if self._bytes > self.budget:
            self.flush()

    def bucket_of(self, key: pl.Expr) -> pl.Expr:
        """The partition of each row, from ``key`` (as :meth:`add` routes)."""
        return (key.hash(seed=0) % self.buckets).cast(pl.Int64)

    def files(self) -> SpillFiles:
        """(table, bucket) → its parts, once :meth:`flush` wrote what was held (what a
        cluster task hands on to the next one's :meth:`adopt`)."""
        return {key: list(parts) for key, parts in self._files.items()}

    def adopt(self, files: SpillFiles) -> None:
        """Read ``files`` (another Spill's :meth:`files`, same buckets) as this one's own,
        after those it has."""
        for key, parts in files.items():
            self._files.setdefault(key, []).extend(parts)
            for part in parts:
                self._users[part.path] = self._users.get(part.path, 0) + 1

    def flush(self) -> None:
        """Write every held batch: one file per table, its partitions in bucket order."""
        self._flushes += 1
        tables: dict[str, list[tuple[int, pl.DataFrame]]] = {}
        for (name, bucket), frames in sorted(self._held.items()):
            tables.setdefault(name, []).append(
                (bucket, pl.concat(frames, how="vertical_relaxed", rechunk=False))
            )
        self._held = {}
        self._bytes = 0
        for name, parts in tables.items():
            path = self.scratch / f"{self.prefix}-{name}-{self._flushes:05d}.parquet"
            whole = pl.concat([df for _, df in parts], how="vertical_relaxed", rechunk=False)
            order = tuple(whole.columns)
            constants = _constants(whole)
            if constants:
                whole = whole.drop([c for c, _, _ in constants])
            group = max(_ROW_GROUP_MIN, whole.height // len(parts))
            whole.write_parquet(
                path, compression=SCRATCH_COMPRESSION, statistics=False, row_group_size=group
            )
            del whole
            offset = 0
            for bucket, df in parts:
                self._files.setdefault((name, bucket), []).append(
                    SpillPart(path, offset, df.height, constants, order)
                )
                offset += df.height
            self._users[path] = len(parts)

    def load(self, name: str, bucket: int, columns: list[str] | None = None) -> pl.DataFrame:
        """A partition's rows of table ``name`` (in the order they were added), or an
        empty frame without columns."""
        frames = [part.lazy(columns) for part in self._files.get((name, bucket), [])]
        for df in self._held.get((name, bucket), []):
            frames.append((df.select(columns) if columns is not None else df).lazy())
        return pl.concat(frames, how="vertical_relaxed").collect() if frames else pl.DataFrame()

    def rows(self, name: str, bucket: int) -> int:
        """How many rows of table ``name`` partition ``bucket`` holds (none read)."""
        held = self._held.get((name, bucket), [])
        return sum(p.rows for p in self._files.get((name, bucket), [])) + sum(
            df.height for df in held
        )

    def pieces(
        self, name: str, bucket: int, columns: list[str] | None = None
    ) -> Iterator[pl.DataFrame]:
        """:meth:`load`'s rows a flush's part (or a held batch) at a time: at most a
        budget's worth each (issue 16: a partition of one long stream is not held whole)."""
        for part in list(self._files.get((name, bucket), [])):
            yield part.read(columns)
        for df in list(self._held.get((name, bucket), [])):
            yield df.select(columns) if columns is not None else df

    def drop(self, name: str, bucket: int) -> None:
        """Forget a partition (a file is removed once none of its parts is wanted)."""
        for part in self._files.pop((name, bucket), []):
            users = self._users.get(part.path, 1) - 1
            self._users[part.path] = users
            if users <= 0:
                del self._users[part.path]
                part.path.unlink(missing_ok=True)
        for df in self._held.pop((name, bucket), []):
            self._bytes -= int(df.estimated_size())


@dataclass(slots=True)
class LogIngest:
    """What reading the logs into the store gave."""

    stats: dict[str, object] = field(default_factory=dict)
    errors: list[ReadError] = field(default_factory=list)
    exchanges: int = 0
    connections: int = 0
    next_conn_id: int = 0


def _session_key() -> pl.Expr:
    """An event-log record's partition: its session, or (no session known) its stream —
    such records never meet an access line, and a group never spans streams."""
    return pl.coalesce(pl.col("session"), pl.lit("\x00stream:") + pl.col("stream"))


def ingest_logs(
    batches: Iterable[LogBatch],
    store: EvidenceStore,
    first_conn_id: int,
    config: AnalysisConfig,
    files: Callable[[], list[FileStats]] | None = None,
) -> LogIngest:
    """Route the log ``batches`` (:func:`~sse_forensics.ingest.logs.iter_log_batches`) to
    partitions, then add their evidence rows to ``store``, pseudo-connections numbered from
    ``first_conn_id``. ``files``: the reader's per-file statistics, once read.

    The steps below are the module docstring's, in this process; a scan with worker
    processes or a cluster runs each of them as tasks (one per file or range of a file,
    then one per partition: :mod:`sse_forensics.cluster.logs`)."""
    started = time.perf_counter()
    buckets = store.buckets
    spill = Spill(buckets, store.scratch_dir(), spill_budget(store.memory_budget, buckets))
    router = LogRouter(spill, attach=False)
    firsts = router.clients
    for batch in batches:
        router.add(batch)
    # Records read before their session was named: all names are known now.
    for b in range(buckets):
        attach_waiting(spill, N.named_sessions(spill, b), b)
        spill.drop("waiting", b)
        spill.drop("named", b)

    # Event-log groups numbered in the scan's order: their keys stay in the spill, the
    # numbering holds a few numbers per group (log_numbers).
    keys = {b: N.group_keys(spill, b, group_order(spill, b)) for b in range(buckets)}
    conn_ids = N.number_keys(keys, first_conn_id)
    next_id = first_conn_id + sum(k.order.height for k in keys.values())
    del keys
    out = LogIngest(errors=router.errors)
    for b in range(buckets):
        part_ids = N.group_ids(spill, b, conn_ids.pop(b, None))
        spill.drop("groups", b)
        exchanges, connections = session_rows(spill, b, part_ids, store, firsts)
        spill.drop("events", b)
        spill.drop("access", b)
        out.exchanges += exchanges
        out.connections += connections

    # Access pseudo-connections, one per client address, numbered in the scan's order.
    client_ids = number_clients([firsts.table()], next_id)
    next_id += client_ids.height
    if client_ids.height:
        # Each client partition joins its own clients only (see the groups above).
        client_parts = _by_bucket(spill, client_ids, pl.col("client"))
        del client_ids
        # A client partition's rows go to every session partition (ClientRows).
        sink = ClientRows(store)
        for b in range(buckets):
            mine = client_parts.pop(b) if b in client_parts else None
            if mine is None:  # no client: no line either
                spill.drop("unmatched", b)
                continue
            exchanges, connections = client_rows(spill, b, mine, config, sink)
            spill.drop("unmatched", b)
            out.exchanges += exchanges
            out.connections += connections
        sink.finish()
    out.next_conn_id = next_id
    out.stats = log_stats(
        files() if files is not None else [], router.access_rows, router.event_rows, started
    )
    return out


def _by_bucket(spill: Spill, ids: pl.DataFrame, key: pl.Expr) -> dict[int, pl.DataFrame]:
    """The rows of ``ids`` by the partition :meth:`Spill.add` routes ``key`` to."""
    if not ids.height:
        return {}
    if spill.buckets == 1:
        return {0: ids}
    tagged = ids.with_columns(spill.bucket_of(key).alias("__bucket"))
    return {int(b): df for b, df in split_by(tagged, "__bucket", keep_key=False).items()}


@dataclass(slots=True)
class LogRouter:
    """Step 1: each batch's rows to their partitions of ``spill``: event-log records by
    session (:func:`_session_key`), those whose session is not known yet to ``waiting`` by
    stream; access lines that may describe a stream by the session they name, the others
    (``unmatched``) by client. ``file_no`` numbers the access files in reading order (a
    caller that reads one file of many gives its place).

    ``attach``: fill a record's null session from what ``sessions`` learned so far. A
    router that does not leaves them all waiting, and each batch's first names of its
    streams to the spill's ``named`` (by stream: :func:`.log_numbers.named_sessions`) —
    a router that sees one file of a set must (an earlier file may name the stream's
    session), and one that sees all holds no table of every stream."""

    spill: Spill
    sessions: StreamSessions = field(default_factory=StreamSessions)
    attach: bool = True
    file_no: dict[str, int] = field(default_factory=dict)
    access_rows: int = 0
    event_rows: int = 0
    errors: list[ReadError] = field(default_factory=list)
    clients: ClientFirsts = field(default_factory=lambda: ClientFirsts())

    def add(self, batch: LogBatch) -> None:
        self.errors.extend(batch.errors)
        rows = batch.rows
        if batch.table == "events":
            rows = rows.select(F.EVENT_LOG_COLUMNS)
            self.event_rows += rows.height
            if self.attach:
                self.sessions.learn(rows)
                rows = self.sessions.attach(rows)
            else:
                self.spill.add("named", N.first_names(rows), pl.col("stream"))
            known = rows.filter(pl.col("session").is_not_null())
            self.spill.add("events", known, _session_key())
            if known.height != rows.height:
                waiting = rows.filter(pl.col("session").is_null())
                self.spill.add("waiting", waiting, pl.col("stream"))
        else:
            number = self.file_no.setdefault(batch.source, len(self.file_no))
            rows = rows.select(F.ACCESS_LOG_COLUMNS).with_columns(
                pl.lit(number, pl.Int64).alias("file_no"), *F.line_times()
            )
            self.access_rows += rows.height
            matchable = rows.select(F.matchable()).to_series()  # once for both halves
            may_match = rows.filter(matchable)
            self.spill.add("access", may_match, F.access_session())
            if may_match.height != rows.height:
                unmatched = rows.filter(~matchable)
                self.spill.add("unmatched", unmatched, F.client_expr())
                self.clients.add(unmatched)


def attach_waiting(spill: Spill, sessions: StreamSessions, bucket: int) -> None:
    """Step 1b: the ``waiting`` records of one stream partition, their sessions named by
    ``sessions`` (every file read), routed to ``events``."""
    waiting = spill.load("waiting", bucket)
    if waiting.height:
        spill.add("events", sessions.attach(waiting), _session_key())


def group_order(spill: Spill, bucket: int) -> pl.DataFrame:
    """Step 2a: one session partition's event-log groups with their place in the scan's
    order (:func:`.from_logs.group_order`); a partition of many records a part at a time
    (:mod:`.log_slices`)."""
    if S.sliced(spill, bucket) and (groups := S.group_order(spill, bucket)) is not None:
        return own_strings(groups)
    return own_strings(F.group_order(spill.load("events", bucket, RECORD_COLUMNS)))


def _numbered(frames: list[pl.DataFrame], order: list[str], first_id: int) -> pl.DataFrame:
    """``frames`` (one per partition) as one table sorted by ``order``, with ``conn_id``
    counting from ``first_id``; an empty frame when there are no rows."""
    frames = [f for f in frames if f.height]
    if not frames:
        return pl.DataFrame()
    return (
        pl.concat(frames)
        .sort(order, nulls_last=True)
        .with_row_index("conn_id", offset=first_id)
        .with_columns(pl.col("conn_id").cast(pl.Int64))
    )


def session_rows(
    spill: Spill,
    bucket: int,
    group_ids: pl.DataFrame,
    store: EvidenceStore,
    firsts: ClientFirsts,
) -> tuple[int, int]:
    """Step 3: one session partition's evidence rows into ``store`` (written at once when
    there are several: memory holds one partition), its access lines no stream took to
    ``unmatched`` (and their clients' first lines to ``firsts``). Returns (exchanges,
    connections) added. A partition of many records is read a part at a time, its events
    rows handed to ``store`` as they are made (:mod:`.log_slices`)."""
    access = spill.load("access", bucket)
    if not access.height:
        access = pl.DataFrame(schema={**_access_schema()})
    part = None
    if S.sliced(spill, bucket):
        part = S.session_part(spill, bucket, access, group_ids, store)
    if part is None:
        events = spill.load("events", bucket)
        if not events.height and not access.height:
            return 0, 0
        part = F.session_part(events, access, group_ids)
        del events
    del access
    store.add(part.connections, part.exchanges, part.events)
    if store.buckets > 1:
        # Written at once: memory holds one partition. A scan of one partition (less than
        # pipeline.PARTITION_BYTES of input) keeps it in memory (written past the store's
        # budget only, EvidenceStore.add): no Parquet write and read-back per small scan.
        store.spill()
    spill.add("unmatched", part.unmatched, F.client_expr())
    firsts.add(part.unmatched)
    return part.exchanges.height, part.connections.height


class ClientFirsts:
    """Steps 1 and 3: each client address of the access lines routed to ``unmatched``, with
    its first line's place in the scan's order (:func:`.from_logs.client_order`), kept as
    the lines pass: numbering the pseudo-connections reads no line back. One row per
    client address (the earlier keys of a batch's clients merged in once they are as many
    as the clients kept).

    The first of a client's lines over the scan is the first of the batches' firsts: a
    line's place (``t0``, ``file_no``, ``line``) is its own (no two lines share one), and
    the lines of a session partition are added once their ``t0`` is refined."""

    def __init__(self) -> None:
        self._kept = pl.DataFrame()
        self._new: list[pl.DataFrame] = []
        self._new_rows = 0

    def add(self, lines: pl.DataFrame) -> None:
        """The clients of ``lines`` (access lines with :data:`_CLIENT_KEYS`)."""
        if not lines.height:
            return
        # Its own copy: the lines' strings are let go (:func:`~.model.own_strings`).
        firsts = own_strings(F.client_order(lines.select(_CLIENT_KEYS)))
        self._new.append(firsts)
        self._new_rows += firsts.height
        if self._new_rows > max(self._kept.height, _FIRSTS_MERGE):
            self._merge()

    def extend(self, firsts: Iterable[pl.DataFrame]) -> None:
        """Firsts found elsewhere (a cluster task's :meth:`table`)."""
        for df in firsts:
            if df.height:
                self._new.append(df)
                self._new_rows += df.height
        self._merge()

    def table(self) -> pl.DataFrame:
        """``client`` and :data:`.from_logs.LINE_ORDER` of each client's first line (an
        empty frame when no line stood alone)."""
        self._merge()
        return self._kept

    def _merge(self) -> None:
        frames = [f for f in (self._kept, *self._new) if f.height]
        self._new, self._new_rows = [], 0
        if frames:
            self._kept = (
                pl.concat(frames)
                .sort(F.LINE_ORDER, nulls_last=True, maintain_order=True)
                .unique("client", keep="first", maintain_order=True)
            )


# Clients' first lines gathered before they are merged, at least.
_FIRSTS_MERGE = 1 << 16


def number_clients(firsts: list[pl.DataFrame], first_id: int) -> pl.DataFrame:
    """Step 4a: the client addresses of every partition numbered in the scan's order
    (``client``, ``conn_id`` and any other column given)."""
    numbered = _numbered(firsts, F.LINE_ORDER, first_id)
    return numbered.drop(F.LINE_ORDER) if numbered.height else numbered


def client_rows(
    spill: Spill,
    bucket: int,
    client_ids: pl.DataFrame,
    config: AnalysisConfig,
    store: EvidenceStore | ClientRows,
) -> tuple[int, int]:
    """Step 4b: one client partition's access pseudo-connections into ``store`` (through
    :class:`ClientRows`, when the store has several partitions). Returns (exchanges,
    connections) added."""
    unmatched = spill.load("unmatched", bucket)
    if not unmatched.height:
        return 0, 0
    conns, exchanges = F.client_part(unmatched, client_ids, config)
    del unmatched
    # The columns of one value (an access pseudo-connection's thirty fixed exchange
    # columns, its file) held once: a third of the rows' bytes on the mid log set, so
    # the store spills (and writes a file to every partition) a third less often.
    store.add(conns, compact(exchanges), EventColumns.frame())
    return exchanges.height, conns.height


class ClientRows:
    """Step 4b's rows on their way to ``store``: each client partition's rows fall into
    every session partition, so they are routed to the store's partitions and held in a
    :class:`Spill` of their own (one file per table and flush, whatever the number of
    partitions), then :meth:`finish` writes each partition's rows to the store as one file
    per table. The store's own spills wrote a file to every partition per flush, then read
    them back and rewrote them past eight (1.2 GB --big log set, 153 partitions: ~3,000
    files and a merge pass). A store of one partition takes the rows as they come."""

    def __init__(self, store: EvidenceStore) -> None:
        self.store = store
        buckets = store.buckets
        budget = client_budget(store.memory_budget, buckets)
        self._routed = (
            Spill(buckets, store.scratch_dir(), budget, prefix="client") if buckets > 1 else None
        )

    def add(self, connections: pl.DataFrame, exchanges: pl.DataFrame, events: pl.DataFrame) -> None:
        """Rows as :meth:`EvidenceStore.add` takes them (routed as it routes them)."""
        if self._routed is None:
            self.store.add(connections, exchanges, events)
            return
        for bucket, table, df in self.store.route(connections, exchanges, events):
            if df.height:
                self._routed.hold(table.name, bucket, df)

    def finish(self) -> None:
        """Every partition's rows into the store, in the order they were added, one
        partition at a time (written at once: memory holds one partition)."""
        routed = self._routed
        if routed is None:
            return
        for b in range(self.store.buckets):
            held = False
            for table in EVIDENCE_TABLES:
                rows = routed.load(table.name, b)
                routed.drop(table.name, b)
                if rows.height:
                    self.store.add_routed(b, table, table.conform(rows))
                    held = True
            if held:
                self.store.spill()


_CLIENT_KEYS = ["client_ip", *F.LINE_ORDER]


def _access_schema() -> dict[str, PolarsDataType]:
    from sse_forensics.ingest.logs.model import ACCESS_SCHEMA

    schema = {c: ACCESS_SCHEMA[c] for c in F.ACCESS_LOG_COLUMNS}
    return {**schema, "file_no": pl.Int64(), "t0": pl.Float64(), "t1": pl.Float64()}
