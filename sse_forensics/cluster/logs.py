"""Logs on the cluster: :func:`~sse_forensics.evidence.log_partitions.ingest_logs`'s steps
as tasks, on any :class:`concurrent.futures.Executor` (a cluster's: :mod:`.client`).

1. **One task per log file** reads it and routes its rows to session-hash partitions
   (:class:`~sse_forensics.evidence.log_partitions.LogRouter`), written as Parquet under the
   scratch directory. It returns the partition files, the file's statistics and errors, and
   which session each stream is first named in it (one row per stream).
2. The client keeps, per stream, the first name in reading order (what a local scan's
   :class:`~sse_forensics.ingest.logs.StreamSessions` learns); **one task per stream
   partition** with records read before their session was named attaches them.
3. **One task per session partition** returns its event-log groups' place in the scan's
   order; the client numbers them (one row per group) — then one task per session partition
   writes its evidence rows (the store's partition files) and routes the access lines no
   stream took by client.
4. The same for client addresses: one task per client partition for their first line,
   numbered on the client, then one per client partition for their rows.

The client adopts the evidence files in the order a local scan writes them, so the store,
the pseudo-connection numbers and the findings are a local scan's. A task never removes
what it read and writes into a directory of its own: a task run again after its worker died
sees none of the dead attempt's files. The log partition files go when the logs are done;
the evidence files with the scan's scratch directory.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import Executor, Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import polars as pl

from sse_forensics.errors import ReadError, UnreadableInput
from sse_forensics.evidence.log_partitions import (
    SPILL_SHARE,
    LogIngest,
    LogRouter,
    Spill,
    SpillFiles,
    attach_waiting,
    client_order,
    client_rows,
    group_order,
    number_clients,
    number_groups,
    session_rows,
)
from sse_forensics.evidence.store import DEFAULT_MEMORY_BUDGET, EvidenceStore
from sse_forensics.evidence.tables import split_by
from sse_forensics.facts.config import AnalysisConfig
from sse_forensics.ingest.logs import StreamSessions, iter_log_batches
from sse_forensics.ingest.logs.formats import compile_format
from sse_forensics.ingest.logs.jsonmap import LogMap, load_log_map
from sse_forensics.ingest.logs.model import FileStats
from sse_forensics.ingest.logs.read import log_stats

if TYPE_CHECKING:
    from sse_forensics.pipeline import LogOptions
    from sse_forensics.result import ScanProgress

StoreFiles = list[tuple[int, str, Path]]
"""(partition, table, file) of evidence rows, as :meth:`EvidenceStore.files` gives them."""

# A task's rows held in memory before it writes them (a local scan's share for logs).
SPILL_BUDGET = DEFAULT_MEMORY_BUDGET // SPILL_SHARE
_BUCKET = "__bucket"


@dataclass(slots=True)
class FileRead:
    """What the task of one log file returns. ``refused``: why the file cannot be read at
    all, as (source, reason), and whether it was refused before any line was read
    (``detected``: a file that is no log) or at its first chunk (no line in its format)."""

    files: SpillFiles = field(default_factory=dict)
    stats: list[FileStats] = field(default_factory=list)
    errors: list[ReadError] = field(default_factory=list)
    access_rows: int = 0
    event_rows: int = 0
    named: pl.DataFrame | None = None  # (stream, __session): first name in this file
    refused: tuple[str, str] | None = None
    detected: bool = False


@dataclass(slots=True)
class PartRows:
    """What a task that writes evidence rows returns."""

    files: StoreFiles
    rows: dict[str, int]
    exchanges: int
    connections: int
    unmatched: SpillFiles = field(default_factory=dict)


# -- the tasks (on a worker) ---------------------------------------------------------------


def _spill(buckets: int, scratch: str, adopt: SpillFiles | None = None) -> Spill:
    """A Spill writing into a new directory of its own under ``scratch``."""
    spill = Spill(buckets, Path(tempfile.mkdtemp(prefix="task-", dir=scratch)), SPILL_BUDGET)
    if adopt:
        spill.adopt(adopt)
    return spill


def _own(spill: Spill, *tables: str) -> SpillFiles:
    """The files of ``tables`` that ``spill`` wrote itself (adopted files aside)."""
    spill.flush()
    own = {k: [p for p in v if p.parent == spill.scratch] for k, v in spill.files().items()}
    return {k: v for k, v in own.items() if k[0] in tables and v}


def read_log_file(
    path: str,
    file_no: int,
    access_format: str | None,
    log_map: LogMap | None,
    buckets: int,
    scratch: str,
) -> FileRead:
    """Step 1: one log file (the ``file_no``-th of the scan) into partitions."""
    try:
        batches = iter_log_batches([path], access_format=access_format, log_map=log_map)
    except UnreadableInput as exc:
        return FileRead(refused=(exc.source, exc.reason), detected=True)
    spill = _spill(buckets, scratch)
    router = LogRouter(spill, attach=False, file_no={path: file_no})
    try:
        for batch in batches:
            router.add(batch)
    except UnreadableInput as exc:
        return FileRead(refused=(exc.source, exc.reason))
    finally:
        batches.close()
    return FileRead(
        _own(spill, "events", "waiting", "access", "unmatched"),
        batches.files,
        router.errors,
        router.access_rows,
        router.event_rows,
        router.sessions.known,
    )


def attach_partition(
    files: SpillFiles, bucket: int, known: pl.DataFrame, buckets: int, scratch: str
) -> SpillFiles:
    """Step 2: the waiting records of one stream partition, sessions named from ``known``
    (that partition's streams), to the session partitions."""
    spill = _spill(buckets, scratch, files)
    sessions = StreamSessions()
    sessions.known = known
    attach_waiting(spill, sessions, bucket)
    return _own(spill, "events")


def group_order_task(files: SpillFiles, bucket: int, buckets: int, scratch: str) -> pl.DataFrame:
    """Step 3a: :func:`~sse_forensics.evidence.log_partitions.group_order`."""
    return group_order(_spill(buckets, scratch, files), bucket)


def session_partition(
    files: SpillFiles,
    bucket: int,
    group_ids: pl.DataFrame,
    buckets: int,
    scratch: str,
    store_dir: str,
) -> PartRows:
    """Step 3b: one session partition's evidence rows (written under ``store_dir``: the
    client adopts them) and its access lines no stream took."""
    spill = _spill(buckets, scratch, files)
    store = EvidenceStore(buckets, scratch=store_dir)  # not closed: its files live on
    exchanges, connections = session_rows(spill, bucket, group_ids, store)
    return PartRows(
        store.files(), dict(store.rows), exchanges, connections, _own(spill, "unmatched")
    )


def client_order_task(files: SpillFiles, bucket: int, buckets: int, scratch: str) -> pl.DataFrame:
    """Step 4a: :func:`~sse_forensics.evidence.log_partitions.client_order`."""
    return client_order(_spill(buckets, scratch, files), bucket)


def client_partition(
    files: SpillFiles,
    bucket: int,
    client_ids: pl.DataFrame,
    config: AnalysisConfig,
    buckets: int,
    scratch: str,
    store_dir: str,
) -> PartRows:
    """Step 4b: one client partition's access pseudo-connections (written under
    ``store_dir``)."""
    store = EvidenceStore(buckets, scratch=store_dir)  # not closed: its files live on
    exchanges, connections = client_rows(
        _spill(buckets, scratch, files), bucket, client_ids, config, store
    )
    store.spill()
    return PartRows(store.files(), dict(store.rows), exchanges, connections)


# -- the plan (on the client) --------------------------------------------------------------


def ingest_logs_on(
    executor: Executor,
    paths: list[str],
    options: LogOptions,
    store: EvidenceStore,
    first_conn_id: int,
    config: AnalysisConfig,
    progress: ScanProgress | None = None,
) -> LogIngest:
    """The log files at ``paths`` (in reading order) into ``store`` as tasks on
    ``executor``: the :class:`LogIngest` a local scan's
    :func:`~sse_forensics.evidence.log_partitions.ingest_logs` gives. Raises
    :class:`UnreadableInput` as it does: for the first file that is no log, else for the
    first whose lines are not in its format."""
    started = time.perf_counter()
    if options.access_format is not None:
        compile_format(options.access_format)  # ValueError here, as a local scan
    log_map = load_log_map(options.log_map) if options.log_map else None
    buckets = store.buckets
    store_dir = str(store.scratch_dir())
    scratch = tempfile.mkdtemp(prefix="logs-", dir=store_dir)
    try:
        reads = _submit_reads(executor, paths, options.access_format, log_map, store, scratch)
        _track_bytes(reads, paths, progress)
        read = [f.result() for f in reads]
        _raise_refused(read)
        out = LogIngest()
        for r in read:
            out.errors.extend(r.errors)
        files = [r.files for r in read]
        files.extend(_attach(executor, read, buckets, scratch))
        unmatched = [r.files for r in read]
        next_id = _sessions(executor, files, store, scratch, first_conn_id, out, unmatched)
        out.next_conn_id = _clients(executor, unmatched, store, scratch, next_id, config, out)
        stats = [s for r in read for s in r.stats]
        out.stats = log_stats(
            stats, sum(r.access_rows for r in read), sum(r.event_rows for r in read), started
        )
        return out
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _sessions(
    executor: Executor,
    files: list[SpillFiles],
    store: EvidenceStore,
    scratch: str,
    first_id: int,
    out: LogIngest,
    unmatched: list[SpillFiles],
) -> int:
    """Step 3: the event-log groups numbered from ``first_id``, then each session
    partition's rows into ``store`` (its unmatched access lines appended to
    ``unmatched``). Returns the next free id."""
    buckets, store_dir = store.buckets, str(store.scratch_dir())
    group_ids = _number(
        executor,
        group_order_task,
        _tables(files, "events"),
        buckets,
        scratch,
        lambda orders: number_groups(orders, first_id),
    )
    parts = _by_bucket(group_ids)
    futures = [
        executor.submit(
            session_partition,
            f,
            b,
            parts.get(b, group_ids.head(0)),
            buckets,
            scratch,
            store_dir,
        )
        for b, f in sorted(_tables(files, "events", "access").items())
    ]
    unmatched.extend(part.unmatched for part in _adopt(store, futures, out))
    return first_id + group_ids.height


def _clients(
    executor: Executor,
    unmatched: list[SpillFiles],
    store: EvidenceStore,
    scratch: str,
    first_id: int,
    config: AnalysisConfig,
    out: LogIngest,
) -> int:
    """Step 4: the client addresses numbered from ``first_id``, then each client
    partition's rows into ``store``. Returns the next free id."""
    buckets, store_dir = store.buckets, str(store.scratch_dir())
    files = _tables(unmatched, "unmatched")
    client_ids = _number(
        executor,
        client_order_task,
        files,
        buckets,
        scratch,
        lambda firsts: number_clients(firsts, first_id),
    )
    parts = _by_bucket(client_ids)
    futures = [
        executor.submit(
            client_partition,
            f,
            b,
            parts.get(b, client_ids.head(0)),
            config,
            buckets,
            scratch,
            store_dir,
        )
        for b, f in sorted(files.items())
    ]
    _adopt(store, futures, out)
    return first_id + client_ids.height


def _submit_reads(
    executor: Executor,
    paths: list[str],
    access_format: str | None,
    log_map: LogMap | None,
    store: EvidenceStore,
    scratch: str,
) -> list[Future[FileRead]]:
    return [
        executor.submit(read_log_file, path, i, access_format, log_map, store.buckets, scratch)
        for i, path in enumerate(paths)
    ]


def _track_bytes(
    futures: list[Future[FileRead]], paths: list[str], progress: ScanProgress | None
) -> None:
    """The bar's ``logs`` stage: bytes of the files read so far, across the cluster."""
    if progress is None:
        return
    sizes = [os.path.getsize(p) for p in paths]
    total = sum(sizes)
    done = [0]
    lock = threading.Lock()

    def finished(size: int) -> Callable[[Future[FileRead]], None]:
        """The callback of a future that read ``size`` bytes."""

        def callback(_future: Future[FileRead]) -> None:
            with lock:
                done[0] += size
                now = done[0]
            progress("logs", min(now, total), total)

        return callback

    for future, size in zip(futures, sizes, strict=True):
        future.add_done_callback(finished(size))


def _raise_refused(read: list[FileRead]) -> None:
    """A local scan detects every file before it reads any: a file that is no log wins
    over one whose first lines are not in its format; the first in reading order."""
    refused = [r.refused for r in read if r.refused is not None and r.detected]
    refused = refused or [r.refused for r in read if r.refused is not None]
    if refused:
        source, reason = refused[0]
        raise UnreadableInput(source, reason)


def _attach(
    executor: Executor, read: list[FileRead], buckets: int, scratch: str
) -> list[SpillFiles]:
    """Step 2: one task per stream partition with waiting records; the first name of each
    stream in reading order, each task given its partition's streams only."""
    waiting = _tables([r.files for r in read], "waiting")
    if not waiting:
        return []
    sessions = StreamSessions()
    for r in read:
        if r.named is not None and r.named.height:
            sessions.learn(r.named.rename({"__session": "session"}))
    bucket = Spill(buckets, Path(scratch), SPILL_BUDGET).bucket_of(pl.col("stream"))
    known = _by_bucket(sessions.known.with_columns(bucket.alias(_BUCKET)))
    empty = sessions.known.head(0)
    futures = [
        executor.submit(
            attach_partition, f, b, known.get(b, empty).select(empty.columns), buckets, scratch
        )
        for b, f in sorted(waiting.items())
    ]
    return [f.result() for f in futures]


def _tables(files: Iterable[SpillFiles], *tables: str) -> dict[int, SpillFiles]:
    """Partition → the files of ``tables`` in it, in the order of ``files``."""
    out: dict[int, SpillFiles] = {}
    for spilled in files:
        for (table, bucket), paths in spilled.items():
            if table in tables and paths:
                out.setdefault(bucket, {}).setdefault((table, bucket), []).extend(paths)
    return out


def _number(
    executor: Executor,
    task: Callable[[SpillFiles, int, int, str], pl.DataFrame],
    files: dict[int, SpillFiles],
    buckets: int,
    scratch: str,
    number: Callable[[list[pl.DataFrame]], pl.DataFrame],
) -> pl.DataFrame:
    """One ``task`` per partition of ``files`` for its keys' order; all of them numbered
    on the client by ``number``, each row tagged with its partition."""
    futures = {b: executor.submit(task, f, b, buckets, scratch) for b, f in sorted(files.items())}
    orders = {b: f.result() for b, f in futures.items()}
    return number(
        [o.with_columns(pl.lit(b, pl.Int64).alias(_BUCKET)) for b, o in orders.items() if o.height]
    )


def _by_bucket(df: pl.DataFrame) -> dict[int, pl.DataFrame]:
    if not df.height:
        return {}
    return {int(b): part for b, part in split_by(df, _BUCKET).items()}


def _adopt(store: EvidenceStore, futures: list[Future[PartRows]], out: LogIngest) -> list[PartRows]:
    """The tasks' evidence files into ``store``, in partition order (a local scan's)."""
    parts = [f.result() for f in futures]
    for part in parts:
        store.adopt(part.files, part.rows)
        out.exchanges += part.exchanges
        out.connections += part.connections
    return parts
