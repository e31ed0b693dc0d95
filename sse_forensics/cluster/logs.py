"""Logs on the cluster: :func:`~sse_forensics.evidence.log_partitions.ingest_logs`'s steps
as tasks, on any :class:`concurrent.futures.Executor` (a cluster's: :mod:`.client`).

1. **One task per log file** — per byte range of a plain file larger than
   :data:`~sse_forensics.ingest.logs.ranges.RANGE_BYTES`, cut at line ends — reads it and
   routes its rows to session-hash partitions
   (:class:`~sse_forensics.evidence.log_partitions.LogRouter`), written as Parquet under the
   scratch directory, with the session each stream is first named in (``named``, by
   stream) and each client address's first line (``firsts``, by client). It returns the
   partition files, the statistics and errors. A range's lines are numbered from the
   newlines before it: a quick task per range counts them, and a range is read once those
   before it are counted. The client puts a file's ranges back together in line order:
   its statistics summed, its error samples the file's first.
2. **One task per stream partition** with records read before their session was named
   attaches them (the first name of each stream in reading order, from ``named``).
3. **One task per session partition** writes its event-log groups and returns their
   places in the scan's order as numbers; the client numbers them all
   (:mod:`~sse_forensics.evidence.log_numbers`: a few numbers per group, no string) —
   then tasks over runs of consecutive session partitions (two per worker) write their
   evidence rows (the store's partition files) and route the access lines no stream took
   by client (their clients' first lines to ``firsts``).
4. The same for client addresses: one task per client partition returns its clients'
   first lines (numbers only), the client numbers them, then two tasks per worker over
   runs of client partitions write their rows.

Local worker processes (``--jobs N`` on a large input) run the same plan. The client adopts
the evidence files in the order a local scan writes them, so the store,
the pseudo-connection numbers and the findings are a local scan's. A task never removes
what it read and writes into a directory of its own: a task run again after its worker died
sees none of the dead attempt's files. The log partition files go when the logs are done;
the evidence files with the scan's scratch directory.
"""

from __future__ import annotations

import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import Executor, Future
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

import polars as pl

from sse_forensics.errors import ReadError, UnreadableInput
from sse_forensics.evidence import log_numbers as N
from sse_forensics.evidence.log_partitions import (
    SPILL_SHARE,
    ClientFirsts,
    ClientRows,
    LogIngest,
    LogRouter,
    Spill,
    SpillFiles,
    attach_waiting,
    client_rows,
    group_order,
    session_rows,
)
from sse_forensics.evidence.store import DEFAULT_MEMORY_BUDGET, EvidenceStore
from sse_forensics.facts.config import AnalysisConfig
from sse_forensics.ingest.inputs import input_size, sniff_path
from sse_forensics.ingest.logs import iter_log_batches
from sse_forensics.ingest.logs.files import compressed
from sse_forensics.ingest.logs.formats import compile_format
from sse_forensics.ingest.logs.jsonmap import LogMap, load_log_map
from sse_forensics.ingest.logs.model import FileStats
from sse_forensics.ingest.logs.ranges import RANGE_BYTES, LineRange, count_newlines, plan_ranges
from sse_forensics.ingest.logs.read import MAX_SAMPLES_PER_FILE, log_stats
from sse_forensics.limits import DEFAULT_LIMITS, CapHit, Limits

if TYPE_CHECKING:
    from sse_forensics.pipeline import LogOptions
    from sse_forensics.result import ScanProgress

StoreFiles = list[tuple[int, str, Path]]
"""(partition, table, file) of evidence rows, as :meth:`EvidenceStore.files` gives them."""

# A task's rows held in memory before it writes them (a local scan's share for logs).
SPILL_BUDGET = DEFAULT_MEMORY_BUDGET // SPILL_SHARE


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
    refused: tuple[str, str] | None = None
    detected: bool = False


@dataclass(slots=True)
class PartRows:
    """What a task that writes evidence rows returns."""

    files: StoreFiles
    rows: dict[str, int]
    exchanges: int
    connections: int
    unmatched: SpillFiles = field(default_factory=dict)  # and their clients' ``firsts``


@dataclass(slots=True)
class GroupRead:
    """What step 3a's task returns: its partition's groups' places, no string (their keys
    in its ``groups`` files)."""

    keys: N.GroupKeys
    files: SpillFiles


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
    span: tuple[int, int | None, int] | None = None,
    limits: Limits = DEFAULT_LIMITS,
) -> FileRead:
    """Step 1: one log file (the ``file_no``-th of the scan) into partitions; with a
    ``span`` (``lo``, ``hi``, ``first_line`` of a :class:`LineRange`), that range of it."""
    try:
        batches = iter_log_batches(
            [path],
            access_format=access_format,
            log_map=log_map,
            limits=limits,
            span=LineRange(*span) if span is not None else None,
        )
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
    spill.add("firsts", router.clients.table(), pl.col("client"))
    return FileRead(
        _own(spill, "events", "waiting", "access", "unmatched", "named", "firsts"),
        batches.files,
        router.errors,
        router.access_rows,
        router.event_rows,
    )


def attach_partition(files: SpillFiles, bucket: int, buckets: int, scratch: str) -> SpillFiles:
    """Step 2: the waiting records of one stream partition, sessions named from its
    ``named`` files (:func:`~sse_forensics.evidence.log_numbers.named_sessions`), to the
    session partitions."""
    spill = _spill(buckets, scratch, files)
    attach_waiting(spill, N.named_sessions(spill, bucket), bucket)
    return _own(spill, "events")


def group_order_task(files: SpillFiles, bucket: int, buckets: int, scratch: str) -> GroupRead:
    """Step 3a: :func:`~sse_forensics.evidence.log_partitions.group_order`, the groups
    written to ``groups`` and their places returned (:func:`.log_numbers.group_keys`)."""
    spill = _spill(buckets, scratch, files)
    keys = N.group_keys(spill, bucket, group_order(spill, bucket))
    return GroupRead(keys, _own(spill, "groups"))


def session_partition(
    files: SpillFiles,
    group: list[int],
    conn_ids: dict[int, pl.Series | None],
    buckets: int,
    scratch: str,
    store_dir: str,
) -> PartRows:
    """Step 3b: the evidence rows of the session partitions ``group`` (their groups'
    numbers in ``conn_ids``, in the order of their ``groups``), one after the other
    (written under ``store_dir``: the client adopts them), and their access lines no
    stream took (one file per client partition for all of them) with their clients'
    first lines (``firsts``)."""
    spill = _spill(buckets, scratch, files)
    store = EvidenceStore(buckets, scratch=store_dir)  # not closed: its files live on
    firsts = ClientFirsts()
    exchanges = connections = 0
    for bucket in group:
        ids = N.group_ids(spill, bucket, conn_ids[bucket])
        added = session_rows(spill, bucket, ids, store, firsts)
        exchanges += added[0]
        connections += added[1]
    spill.add("firsts", firsts.table(), pl.col("client"))
    return PartRows(
        store.files(),
        dict(store.rows),
        exchanges,
        connections,
        _own(spill, "unmatched", "firsts"),
    )


def client_order_task(files: SpillFiles, bucket: int, buckets: int, scratch: str) -> pl.DataFrame:
    """Step 4a: one client partition's first lines, no address
    (:func:`~sse_forensics.evidence.log_numbers.client_keys`)."""
    return N.client_keys(_spill(buckets, scratch, files), bucket)


def client_partition(
    files: SpillFiles,
    group: list[int],
    numbers: dict[int, pl.DataFrame],
    config: AnalysisConfig,
    buckets: int,
    scratch: str,
    store_dir: str,
) -> PartRows:
    """Step 4b: the access pseudo-connections of the client partitions ``group`` (their
    first lines' numbers in ``numbers``: :func:`.log_numbers.client_ids`), in partition
    order, written under ``store_dir``: their
    rows fall into every session partition, one file per partition and table
    (:class:`~sse_forensics.evidence.log_partitions.ClientRows`)."""
    store = EvidenceStore(buckets, scratch=store_dir)  # not closed: its files live on
    spill = _spill(buckets, scratch, files)
    sink = ClientRows(store)
    exchanges = connections = 0
    for bucket in group:
        ids = N.client_ids(spill, bucket, numbers[bucket])
        added = client_rows(spill, bucket, ids, config, sink)
        exchanges += added[0]
        connections += added[1]
    sink.finish()
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
    workers: int = 1,
) -> LogIngest:
    """The log files at ``paths`` (in reading order) into ``store`` as tasks on
    ``executor`` (``workers`` of them run at once): the :class:`LogIngest` a local scan's
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
        reads = _submit_reads(
            executor, paths, options.access_format, log_map, store, scratch, config.limits
        )
        _track_bytes(reads, progress)
        read = [_joined([f.result() for f in ranges]) for _, ranges in reads]
        _raise_refused(read)
        out = LogIngest()
        for r in read:
            out.errors.extend(r.errors)
        files = [r.files for r in read]
        files.extend(_attach(executor, read, buckets, scratch))
        unmatched = [r.files for r in read]
        next_id = _sessions(
            executor, files, store, scratch, first_conn_id, out, unmatched, 2 * workers
        )
        out.next_conn_id = _clients(
            executor, unmatched, store, scratch, next_id, config, out, 2 * workers
        )
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
    tasks: int,
) -> int:
    """Step 3: the event-log groups numbered from ``first_id`` (one task per partition
    for their places, numbered here: :func:`.log_numbers.number_keys`), then the session
    partitions' rows into ``store`` (their unmatched access lines and their clients'
    first lines appended to ``unmatched``): ``tasks`` tasks, each a run of consecutive
    partitions (adopted in order, their rows are a local scan's; fewer tasks, fewer small
    files of unmatched lines). Returns the next free id."""
    buckets, store_dir = store.buckets, str(store.scratch_dir())
    events = sorted(_tables(files, "events").items())
    orders = {b: executor.submit(group_order_task, f, b, buckets, scratch) for b, f in events}
    keys = {b: f.result() for b, f in orders.items()}
    conn_ids = N.number_keys({b: k.keys for b, k in keys.items()}, first_id)
    groups = sum(k.keys.order.height for k in keys.values())
    by_bucket = _tables([*files, *(k.files for k in keys.values())], "events", "access", "groups")
    del keys
    futures = [
        executor.submit(
            session_partition,
            {k: v for b in run for k, v in by_bucket[b].items()},
            run,
            {b: conn_ids.pop(b, None) for b in run},
            buckets,
            scratch,
            store_dir,
        )
        for run in _runs(sorted(by_bucket), tasks)
    ]
    parts_rows = _adopt(store, futures, out)
    unmatched.extend(part.unmatched for part in parts_rows)
    return first_id + groups


def _clients(
    executor: Executor,
    unmatched: list[SpillFiles],
    store: EvidenceStore,
    scratch: str,
    first_id: int,
    config: AnalysisConfig,
    out: LogIngest,
    tasks: int,
) -> int:
    """Step 4: the client addresses numbered from ``first_id`` (one task per partition
    for their first lines, numbered here: :func:`.log_numbers.number_lines`), then the
    client partitions' rows into ``store``: ``tasks`` tasks, each a run of consecutive
    partitions (adopted in order, their rows are a local scan's). Returns the next free
    id."""
    buckets, store_dir = store.buckets, str(store.scratch_dir())
    files = _tables(unmatched, "unmatched", "firsts")
    runs = _runs(sorted(files), tasks)
    orders = {
        b: executor.submit(client_order_task, files[b], b, buckets, scratch) for b in sorted(files)
    }
    numbers = N.number_lines({b: f.result() for b, f in orders.items()}, first_id)
    clients = sum(df.height for df in numbers.values())
    empty = pl.DataFrame(schema={"file_no": pl.Int64, "line": pl.Int64, "conn_id": pl.Int64})
    futures = [
        executor.submit(
            client_partition,
            {k: v for b in run for k, v in files[b].items()},
            run,
            {b: numbers.pop(b, empty) for b in run},
            config,
            buckets,
            scratch,
            store_dir,
        )
        for run in runs
    ]
    _adopt(store, futures, out)
    return first_id + clients


def _runs(items: list[int], n: int) -> list[list[int]]:
    """``items`` cut into at most ``n`` runs of consecutive items, of even lengths."""
    n = max(1, min(n, len(items)))
    size, extra = divmod(len(items), n)
    runs, at = [], 0
    for k in range(n):
        step = size + (k < extra)
        runs.append(items[at : at + step])
        at += step
    return [r for r in runs if r]


Reads = list[tuple[list[int], list[Future[FileRead]]]]
"""Per file, in reading order: the bytes of each of its ranges and their tasks."""


def _submit_reads(
    executor: Executor,
    paths: list[str],
    access_format: str | None,
    log_map: LogMap | None,
    store: EvidenceStore,
    scratch: str,
    limits: Limits,
) -> Reads:
    """Step 1's tasks: each file's first range at once, then the newlines of every range
    but the last of each file counted, each later range submitted once those before it
    are (the counts are quick, and queued before it)."""

    def read(i: int, span: tuple[int, int | None, int] | None) -> Future[FileRead]:
        args = (paths[i], i, access_format, log_map, store.buckets, scratch, span, limits)
        return executor.submit(read_log_file, *args)

    plans = [_ranges(path) for path in paths]
    out: Reads = []
    for i, (size, ranges) in enumerate(plans):
        first = (ranges[0][0], ranges[0][1], 1) if len(ranges) > 1 else None
        out.append(([_span_bytes(ranges[0], size)], [read(i, first)]))
    counts = {
        (i, k): executor.submit(count_newlines, paths[i], lo, hi)
        for i, (_, ranges) in enumerate(plans)
        for k, (lo, hi) in enumerate(ranges[:-1])
    }
    for i, (size, ranges) in enumerate(plans):
        line = 1
        for k in range(1, len(ranges)):
            line += counts[i, k - 1].result()
            lo, hi = ranges[k]
            out[i][0].append(_span_bytes(ranges[k], size))
            out[i][1].append(read(i, (lo, hi, line)))
    return out


def _ranges(path: str) -> tuple[int, list[tuple[int, int | None]]]:
    """A file's size and its ranges (:func:`plan_ranges`; one for a compressed file, and
    for one this process cannot read: its task says why, as for any file). An object-store
    input is known by its listed size and its head (:func:`sniff_path`), not read here."""
    try:
        size = input_size(path)
        if size <= RANGE_BYTES or compressed(sniff_path(path)):
            return size, [(0, None)]
    except (OSError, UnreadableInput):
        return 0, [(0, None)]
    return size, plan_ranges(size, RANGE_BYTES)


def _span_bytes(span: tuple[int, int | None], size: int) -> int:
    return (size if span[1] is None else span[1]) - span[0]


def _joined(ranges: list[FileRead]) -> FileRead:
    """One file's :class:`FileRead` from those of its ranges (in line order): files in
    that order, statistics summed, the file's first error samples, then its own errors —
    the long-line cap's hits counted in the first — as a read of the whole file gives."""
    if len(ranges) == 1:
        return ranges[0]
    out = FileRead(stats=[_summed([s for r in ranges for s in r.stats])])
    samples: list[ReadError] = []
    own: CapHit | None = None
    for r in ranges:
        for key, paths in r.files.items():
            out.files.setdefault(key, []).extend(paths)
        for error in r.errors:
            if isinstance(error, CapHit) and error.cap == "log_line_bytes":  # the file's own
                own = error if own is None else replace(own, count=own.count + error.count)
            else:
                samples.append(error)
        out.access_rows += r.access_rows
        out.event_rows += r.event_rows
        if out.refused is None:
            out.refused, out.detected = r.refused, r.detected
    out.errors = samples[:MAX_SAMPLES_PER_FILE] + ([own] if own is not None else [])
    return out


def _summed(stats: list[FileStats]) -> FileStats:
    """The statistics of a file from those of its ranges."""
    out = FileStats(stats[0].source, stats[0].kind, stats[0].format)
    for s in stats:
        out.bytes += s.bytes
        out.lines += s.lines
        out.rows += s.rows
        out.unreadable += s.unreadable
        out.truncated |= s.truncated
        for name, n in s.control_types.items():
            out.control_types[name] = out.control_types.get(name, 0) + n
    return out


def _track_bytes(reads: Reads, progress: ScanProgress | None) -> None:
    """The bar's ``logs`` stage: bytes of the files read so far, across the cluster."""
    if progress is None:
        return
    sizes = [n for spans, _ in reads for n in spans]
    futures = [f for _, ranges in reads for f in ranges]
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
    named = _tables([r.files for r in read], "named")  # in reading order
    futures = [
        executor.submit(attach_partition, {**f, **named.get(b, {})}, b, buckets, scratch)
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


def _adopt(store: EvidenceStore, futures: list[Future[PartRows]], out: LogIngest) -> list[PartRows]:
    """The tasks' evidence files into ``store``, in partition order (a local scan's)."""
    parts = [f.result() for f in futures]
    for part in parts:
        store.adopt(part.files, part.rows)
        out.exchanges += part.exchanges
        out.connections += part.connections
    return parts
