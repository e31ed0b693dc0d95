"""One scan, top to bottom: ingest → reassembly → evidence (partitioned by session) → facts →
rules. The CLI and the tests both call :func:`scan_paths`; nothing here prints.

Captures are reassembled connection by connection; each finalised connection becomes rows of
the evidence tables and its objects are released. Logs become rows with polars expressions.
The rows land in session-hash partitions (spilled to Parquet past a memory budget); facts
and rules then run on one partition at a time (:func:`analyze_partition`, a pure function:
partition tables in, fact tables and findings out), in ``jobs`` worker processes.
"""

from __future__ import annotations

import contextlib
import gc
import os
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Executor, Future
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import polars as pl

from sse_forensics.coverage import UnjudgedTotals, keep_listed
from sse_forensics.engine.evaluate import evaluate, not_judged_rules
from sse_forensics.engine.finding import Finding
from sse_forensics.engine.registry import RuleSet, load_rules
from sse_forensics.errors import ReadError
from sse_forensics.evidence.pieces import EventPieces, open_files, open_task
from sse_forensics.evidence.store import (
    EvidenceStore,
    compact,
    read_rows,
    stored_once,
)
from sse_forensics.evidence.tables import ConnectionColumns, EventColumns, ExchangeColumns
from sse_forensics.facts.build import Facts, build_facts
from sse_forensics.facts.config import AnalysisConfig
from sse_forensics.facts.front import Front, compute_front
from sse_forensics.facts.ids import over_long_counters
from sse_forensics.facts.load import load_connections, load_exchanges
from sse_forensics.facts.sessions import session_table
from sse_forensics.facts.tables import TABLE_SCHEMAS
from sse_forensics.ingest.inputs import (
    classify_inputs,
    input_size,
    merged_frames,
    resolve_inputs,
)
from sse_forensics.ingest.packet_index import PacketIndex, index_captures
from sse_forensics.ingest.spool import Spool, restore_names
from sse_forensics.judged import read_sessions, write_sessions
from sse_forensics.limits import CapHit, fold_caps
from sse_forensics.memory import return_freed_memory
from sse_forensics.query_engine import engine_for
from sse_forensics.reassembly.capture import Reassembly, reassemble
from sse_forensics.reassembly.fast import FastReassembly, combine, reassemble_fast
from sse_forensics.reassembly.sse_columns import RETRY_MAX
from sse_forensics.result import (
    SCAN_SESSION_CATEGORIES,
    SCAN_SESSION_COLUMNS,
    ScanProgress,
    ScanResult,
    ScanStats,
)
from sse_forensics.verdicts import PROVIDED_BY
from sse_forensics.workers import SHARD_BYTES, input_bytes
from sse_forensics.workers import start_workers as _started

if TYPE_CHECKING:
    from sse_forensics.evidence.log_partitions import LogIngest
    from sse_forensics.reassembly.fast.flow_shard import FlowShard

# Evidence bytes (file size) per partition: the objects of one partition are built at once,
# so this bounds the judging's memory (benchmarks/scale.py: 64 MB gave a 590 MB peak on a
# 52 MB log set judged as one partition, 32 MB 476 MB, 16 MB 375 MB but more overhead; on
# a 400k-packet capture of 50 long sessions, 32 MB 666 MB and 8 MB 418 MB for ~20% more CPU).
PARTITION_BYTES = 8 << 20
# The same for a scan in worker processes (--jobs N > 1): each partition costs them a file
# per reading task and table and a task per step, so fewer, larger ones (issue 9's --jobs 2
# on two cores: a 300 MB prefix of the --big log set and the 8x growth log set each spent
# ~3 CPU s (8 %) less at 16 MB than at 8 MB, the workers' peak RSS unchanged, 281-290 MB;
# 32 MB saved no more and raised it to 373 MB).
POOLED_PARTITION_BYTES = 16 << 20

A = TypeVar("A")
R = TypeVar("R")


# A scan builds many short-lived objects per connection and frees few while it runs: the
# cyclic collector's default young-generation threshold (700) makes it re-walk them
# thousands of times for nothing. Raised for the scan only; reference counting still frees
# everything acyclic at once.
SCAN_GC_THRESHOLD = (200_000, 50, 1000)


@contextmanager
def _scan_gc() -> Iterator[None]:
    previous = gc.get_threshold()
    gc.set_threshold(*SCAN_GC_THRESHOLD)
    try:
        yield
    finally:
        gc.set_threshold(*previous)


@dataclass(frozen=True, slots=True)
class LogOptions:
    """How to read logs: ``access_format`` (``nginx:<log_format>``, ``apache:<LogFormat>``
    or a preset name) and ``log_map`` (a TOML field map), as in docs/logs.md."""

    access_format: str | None = None
    log_map: str | None = None

    def text_format(self) -> str | None:
        """The text access-log format: ``access_format``, else the map's ``[access]
        format`` (raises ``ValueError`` for a map that cannot be read)."""
        if self.access_format is not None or self.log_map is None:
            return self.access_format
        from sse_forensics.ingest.logs import load_log_map

        return load_log_map(self.log_map).access_format


@dataclass(slots=True)
class Ingested:
    inputs: list[str]
    reassembly: Reassembly
    provided: frozenset[str]
    exchanges: int
    log_connections: int = 0
    ignored: list[str] = field(default_factory=list)


def _ingest_logs(
    logs: list[str],
    options: LogOptions,
    store: EvidenceStore,
    first_conn_id: int,
    config: AnalysisConfig,
    progress: ScanProgress | None,
    executor: Executor | None = None,
    pool: Executor | None = None,
    jobs: int = 1,
) -> LogIngest:
    """The logs read batch by batch into ``store`` (:mod:`sse_forensics.evidence.log_partitions`):
    memory follows a batch and a partition, not the logs. With an ``executor`` (a
    cluster's) or a ``pool`` (local workers), as tasks there: one per file (per range of a
    large plain file), then per partition (:mod:`sse_forensics.cluster.logs`)."""
    tasks = executor or (pool if store.buckets > 1 else None)
    if tasks is not None:
        from sse_forensics.cluster.logs import ingest_logs_on

        return ingest_logs_on(
            tasks, logs, options, store, first_conn_id, config, progress, workers=jobs
        )
    # Only scans with logs pay for these imports.
    from sse_forensics.evidence.log_partitions import ingest_logs
    from sse_forensics.ingest.logs import iter_log_batches

    on_chunk = None
    if progress is not None:
        # Sizes on disk: compressed files finish early, which only makes the bar jump.
        total = sum(os.path.getsize(p) for p in logs)
        done = [0]

        def on_chunk(nbytes: int) -> None:
            done[0] += nbytes
            progress("logs", min(done[0], total), total)

    batches = iter_log_batches(
        logs,
        access_format=options.access_format,
        log_map=options.log_map,
        progress=on_chunk,
        limits=config.limits,
    )
    try:
        return ingest_logs(batches, store, first_conn_id, config, lambda: batches.files)
    finally:
        batches.close()


def _reassemble_captures(
    inputs: list[str],
    store: EvidenceStore,
    config: AnalysisConfig,
    jobs: int,
    progress: ScanProgress | None,
    executor: Executor | None = None,
    pool: Executor | None = None,
) -> Reassembly:
    """The captures' connections as evidence rows in ``store`` (the fast path, falling back
    to the exact one connection by connection; :mod:`sse_forensics.reassembly.fast`). With
    ``jobs`` > 1 and a large capture, or an ``executor`` (a cluster's), each of ``jobs``
    workers reassembles the connections whose id falls to its shard and writes its own
    partition files (``pool``'s processes, when given)."""
    total = sum(input_size(p) for p in inputs)  # a cluster's remote inputs: as listed
    if not inputs:
        return Reassembly()
    if executor is not None or (jobs > 1 and total >= SHARD_BYTES):
        store.spill()  # the workers' files join the parent's scratch directory
        scratch = str(store.scratch_dir())
        if executor is not None:  # each capture indexed once (sse_forensics.cluster.captures)
            from sse_forensics.cluster.captures import reassemble_on

            parts = reassemble_on(executor, inputs, store.buckets, scratch, config, jobs)
        else:
            with _worker_pool(pool, jobs) as workers:
                futures = [
                    workers.submit(
                        _reassemble_shard, inputs, store.buckets, scratch, config, (k, jobs)
                    )
                    for k in range(jobs)
                ]
                parts = [f.result() for f in futures]
        for files, rows, _ in parts:
            store.adopt(files, rows)
        result = combine([summary for _, _, summary in parts])
    else:
        index = index_captures(inputs)
        index.release()  # the index pass touched every page: only the batches' come back
        try:
            result = reassemble_fast(index, store.add, config)
        finally:
            index.close()
    if progress is not None:
        progress("read", total, total)
    return result.reassembly()


def _worker_pool(executor: Executor | None, workers: int) -> contextlib.AbstractContextManager[Any]:
    """``executor`` as it is (its owner shuts it down), else ``workers`` spawned processes
    (:func:`_started`)."""
    if executor is not None:
        return contextlib.nullcontext(executor)
    return _started(workers)


def _reassemble_shard(
    inputs: list[str],
    buckets: int,
    scratch: str,
    config: AnalysisConfig,
    shard: tuple[int, int],
) -> tuple[list[tuple[int, str, Path]], dict[str, int], FastReassembly]:
    """One worker's share of :func:`_reassemble_captures`: its rows spilled under
    ``scratch`` (the parent removes them), its summary returned."""
    index = index_captures(inputs)
    index.release()
    return shard_rows(index, buckets, scratch, config, shard)


def shard_rows(
    index: PacketIndex,
    buckets: int,
    scratch: str,
    config: AnalysisConfig,
    shard: tuple[int, int],
    flows: FlowShard | None = None,
) -> tuple[list[tuple[int, str, Path]], dict[str, int], FastReassembly]:
    """The connections of ``shard`` of ``index`` (of its flows: ``flows``) as evidence rows
    spilled under ``scratch`` (the caller adopts the files; ``index`` is closed), and the
    shard's summary."""
    store = EvidenceStore(buckets, scratch=scratch)
    try:
        with _scan_gc():
            summary = reassemble_fast(index, store.add, config, shard=shard, flows=flows)
    finally:
        index.close()
    store.spill()
    return store.files(), dict(store.rows), summary


def ingest(
    paths: list[str],
    store: EvidenceStore,
    config: AnalysisConfig,
    logs: LogOptions | None = None,
    progress: ScanProgress | None = None,
    jobs: int = 1,
    executor: Executor | None = None,
    spool: Spool | None = None,
    pool: Executor | None = None,
) -> Ingested:
    """Read the captures and logs at ``paths`` into ``store``. Raises ``UnreadableInput`` for
    a path that is neither a capture nor a log, or a log format that does not fit. Standard
    input, pipes and compressed captures are copied into ``spool`` first; a directory's
    files that are neither become errors (:func:`~sse_forensics.ingest.inputs.resolve_inputs`).
    ``pool``: ``jobs`` local worker processes, for the logs' tasks."""
    logs = logs or LogOptions()
    found = resolve_inputs(paths, logs.text_format(), spool)
    inputs, log_files = found.captures, found.logs
    with _scan_gc():
        reassembly = _reassemble_captures(inputs, store, config, jobs, progress, executor, pool)
    reassembly.errors[:0] = found.skipped + (spool.errors if spool is not None else [])
    exchanges = store.rows["exchanges"]
    log_connections = 0
    if log_files:
        first_id = reassembly.max_connection_id + 1
        with _scan_gc():
            read = _ingest_logs(
                log_files, logs, store, first_id, config, progress, executor, pool, jobs
            )
        reassembly.errors.extend(read.errors)
        reassembly.log_stats = read.stats
        exchanges += read.exchanges
        log_connections = read.connections
    return Ingested(
        inputs + log_files,
        reassembly,
        evidence_provided(reassembly),
        exchanges,
        log_connections,
        found.ignored,
    )


@dataclass(slots=True)
class PartitionResult:
    tables: dict[str, pl.DataFrame]  # all fact tables, or ``sessions``' SCAN_SESSION_COLUMNS
    findings: list[Finding]
    counts: dict[str, int]  # rows of every fact table
    facts: Facts | None = None
    # Each ``sessions`` row's first exchange (``conn_id, index``; null without one): the
    # scan's order of the sessions (:func:`_session_order`).
    first_seen: pl.DataFrame | None = None
    caps: list[CapHit] = field(default_factory=list)  # caps that fired while judging
    # The ``sessions`` rows and ``first_seen`` written here instead (:mod:`.judged`).
    sessions_file: str | None = None
    # The totals of the could-not-judge items, where only the first few were kept.
    unjudged: UnjudgedTotals | None = None


def analyze_partition(
    connections: pl.DataFrame,
    exchanges: pl.DataFrame,
    events: pl.DataFrame | EventPieces,
    front: Front,
    rules: RuleSet,
    provided: frozenset[str],
    keep_records: bool = False,
    keep_tables: bool = True,
    unjudged_listed: int | None = None,
) -> PartitionResult:
    """Facts and rules over one partition's evidence: a pure function (partition tables and
    the scan's cross-session facts in, fact tables and findings out) that a worker process —
    or a cluster task — can run. Without ``keep_tables`` only the ``sessions`` table comes
    back, the columns a scan shows (the other tables are counted): a scan's memory then
    does not grow with its events; with ``unjudged_listed`` too, of what could not be
    judged only the items the scan may list and the totals (:func:`keep_listed`)."""
    with _scan_gc():
        sessions, latest_post = session_table(exchanges, front.dropped)
        firsts = _first_exchanges(exchanges)
        if not keep_records:
            # Exchanges the judgements read one by one: streams and resumes, requests with a
            # JSON-RPC call, and log exchanges folded into captured ones. The rest count
            # only in the sessions table.
            folded = [k for pair in front.folds.items() for k in pair]
            keys = pl.DataFrame(
                folded, schema={"conn_id": pl.Int64, "index": pl.Int64}, orient="row"
            )
            wanted = (
                pl.col("event_stream")
                | pl.col("last_event_id").is_not_null()
                | pl.col("req_rpc").is_not_null()
            )
            exchanges = pl.concat(
                [
                    exchanges.filter(wanted),
                    exchanges.join(keys, on=["conn_id", "index"], how="semi"),
                ]
            ).unique(["conn_id", "index"], keep="first")
        connections = connections.join(
            exchanges.select("conn_id").unique(), on="conn_id", how="semi"
        )
        records = load_exchanges(exchanges, events)
        lazy = not keep_tables and not keep_records
        facts = build_facts(
            records,
            load_connections(connections),
            front,
            events,
            sessions,
            latest_post,
            lazy_events=lazy,
        )
        del events
        findings, _ = evaluate(rules, facts.rule_tables(), provided)
        fact_tables, kept = facts.tables, facts if keep_records else None
        event_rows = facts.event_rows
        caps = facts.caps
        if kept is None:  # freed here by reference counting, not walked by the collector
            for stream in facts.streams:
                stream.release()
            del records, facts
    counts = {name: df.height for name, df in fact_tables.items()}
    counts["events"] = event_rows
    first_seen = (
        fact_tables["sessions"]
        .select("session_id")
        .join(firsts, on="session_id", how="left", maintain_order="left")
        .select("conn_id", "index")
    )
    # The sessions table kept compact until the scan merges it: the columns the scan shows,
    # those of one value (sparse ones, where no session had a silent gap) stored once.
    unjudged = None
    if keep_tables:
        tables = fact_tables
    else:
        scan_sessions = _scan_sessions(fact_tables["sessions"])
        if unjudged_listed is not None:
            # Only the rows of the items kept go on; the sessions are counted (``counts``).
            scan_sessions, first_seen, unjudged = keep_listed(
                scan_sessions, first_seen, unjudged_listed
            )
        tables = {"sessions": compact(scan_sessions)}
    return PartitionResult(tables, findings, counts, kept, first_seen, caps, unjudged=unjudged)


def _scan_sessions(sessions: pl.DataFrame) -> pl.DataFrame:
    """The ``sessions`` columns a scan keeps (:data:`SCAN_SESSION_COLUMNS`), its strings of
    a few values as categories (:data:`SCAN_SESSION_CATEGORIES`): what the scan's process
    holds for every session until the scan's output is written."""
    return sessions.select(SCAN_SESSION_COLUMNS).with_columns(
        pl.col(SCAN_SESSION_CATEGORIES).cast(pl.Categorical)
    )


def _first_exchanges(exchanges: pl.DataFrame) -> pl.DataFrame:
    """``session_id, conn_id, index``: each session's first exchange in (connection, index)
    order (a session's exchanges are all in its partition)."""
    return (
        exchanges.select(pl.col("session").cast(pl.String).alias("session_id"), "conn_id", "index")
        .sort("conn_id", "index")
        .unique("session_id", keep="first", maintain_order=True)
    )


@dataclass(slots=True)
class _StoreSource:
    """The evidence store as the cross-session pass reads it (:class:`FrontSource`): its
    partitions' tasks run on ``workers`` (the scan's pool or cluster; the store spilled),
    else here."""

    store: EvidenceStore
    workers: Executor | None = None

    def map_events(
        self,
        task: Callable[[Iterator[pl.DataFrame], A], R | None],
        columns: Sequence[str | pl.Expr],
        where: pl.Expr | None,
        asks: Sequence[tuple[int, A]],
        chunked: bool,
    ) -> Iterator[tuple[int, R]]:
        if self.workers is None:
            for b, ask in asks:
                result = task(self.store.bucket_rows(b, EventColumns, columns, where, chunked), ask)
                if result is not None:
                    yield b, result
            return
        futures: list[tuple[int, Future[R | None]]] = []
        for b, ask in asks:
            files = self.store.task_files([b])[EventColumns.name]
            if files:  # spilled: a partition without files has no events
                run: Callable[..., R | None] = _front_task
                futures.append(
                    (b, self.workers.submit(run, task, files, columns, where, chunked, ask))
                )
        for b, future in futures:
            got = future.result()
            if got is not None:
                yield b, got

    @property
    def buckets(self) -> int:
        return self.store.buckets

    def exchanges(
        self, columns: Sequence[str | pl.Expr], where: pl.Expr | None = None
    ) -> pl.DataFrame:
        return self.store.columns(ExchangeColumns, columns, where)

    def events(
        self, columns: Sequence[str | pl.Expr], where: pl.Expr | None = None
    ) -> pl.DataFrame:
        return self.store.columns(EventColumns, columns, where)

    def bucket_exchanges(
        self, columns: Sequence[str | pl.Expr], where: pl.Expr | None = None
    ) -> Iterator[tuple[int, pl.DataFrame]]:
        return self.store.bucket_columns(ExchangeColumns, columns, where)

    def servers(self, conn_ids: pl.Series) -> pl.DataFrame:
        return self.store.columns(
            ConnectionColumns,
            ["conn_id", "server_ip", "server_port"],
            pl.col("conn_id").is_in(conn_ids.implode()),
        ).unique("conn_id")


def _over_long_numbers(store: EvidenceStore, config: AnalysisConfig) -> list[ReadError]:
    """The ``id_digits`` cap hits (:func:`sse_forensics.facts.ids.over_long_counters`):
    event IDs and Last-Event-IDs long enough to hold an over-long counter, read back from
    the store (a filtered column scan); and retry values past 64 bits."""
    long = config.limits.id_digits

    def origin(prefix: str) -> list[str | pl.Expr]:
        return [pl.col(f"{prefix}_{f}").alias(f) for f in ("src", "num", "ts", "kind")]

    ids = [
        store.columns(
            EventColumns,
            [pl.col("id_field").alias("value"), pl.lit("event ID").alias("what"), *origin("first")],
            pl.col("id_field").str.len_chars() >= long,
        ),
        store.columns(
            ExchangeColumns,
            [
                pl.col("last_event_id").alias("value"),
                pl.lit("Last-Event-ID").alias("what"),
                *origin("req"),
            ],
            pl.col("last_event_id").str.len_chars() >= long,
        ),
    ]
    frames = [f for f in ids if f.height]
    hits: list[ReadError] = []
    if frames:
        hits += over_long_counters(pl.concat(frames), config.prefixed_regex, config.limits)
    # A retry past 64 bits is kept as the largest one: said once per file.
    retries = store.columns(EventColumns, origin("first"), pl.col("retry") >= RETRY_MAX).unique(
        "src", keep="first", maintain_order=True
    )
    for src, num, ts, kind in retries.iter_rows():
        where = {"frame": num} if kind == "frame" else {"line": num}
        what = "retry of more than 19 digits: read as the longest reconnection time"
        hits.append(ReadError(src, what, ts=ts, **where))
    return hits


def _front_task(
    task: Callable[[Iterator[pl.DataFrame], A], R | None],
    files: list[Path],
    columns: Sequence[str | pl.Expr],
    where: pl.Expr | None,
    chunked: bool,
    ask: A,
) -> R | None:
    """One partition's share of the cross-session pass in a worker process (or a cluster
    task): its event files in (read in chunks, or whole), ``task``'s small result out."""
    return task(read_rows(files, [], columns, where, chunked), ask)


def cross_session_front(
    store: EvidenceStore, config: AnalysisConfig, workers: Executor | None = None
) -> Front:
    """What the whole scan decides across sessions (:mod:`sse_forensics.facts.front`),
    reading the events one partition at a time: each partition's share on ``workers``
    (the store spilled first), the parent merging."""
    if workers is not None:
        store.spill()  # the workers read the partitions' files
    with _scan_gc():
        return compute_front(_StoreSource(store, workers), config)


def _analyze_files(
    files: dict[str, list[Path]],
    front: Front,
    rules: RuleSet,
    provided: frozenset[str],
    keep_tables: bool,
    sessions_to: tuple[str, str] | None = None,
    unjudged_listed: int | None = None,
) -> PartitionResult:
    """One task in a worker process: its Parquet files and its share of the front
    (:meth:`~sse_forensics.facts.front.Front.split`) in, its facts and findings out; with
    ``sessions_to`` (a directory, a file name: an object-store scratch's mirror makes a
    directory of any missing path a task names), its sessions rows written there, not
    handed back (:mod:`.judged`)."""
    connections, exchanges, events = open_files(files)
    result = analyze_partition(
        connections,
        exchanges,
        events,
        front,
        rules,
        provided,
        keep_tables=keep_tables,
        unjudged_listed=unjudged_listed,
    )
    if sessions_to is None:
        return result
    return _sessions_written(result, os.path.join(*sessions_to))


def _sessions_written(result: PartitionResult, path: str) -> PartitionResult:
    """``result`` with its sessions rows and their first exchanges moved to ``path``
    (none written for a partition without sessions: a merge leaves those out)."""
    sessions = result.tables.pop("sessions", _NO_ROWS)
    if sessions.height and result.first_seen is not None:
        write_sessions(sessions, result.first_seen, path)
        result.sessions_file = path
    result.first_seen = None
    return result


def analyze_store(
    store: EvidenceStore,
    config: AnalysisConfig,
    rules: RuleSet,
    provided: frozenset[str],
    keep_records: bool = False,
    jobs: int = 1,
    keep_tables: bool = True,
    executor: Executor | None = None,
    pool: Executor | None = None,
    unjudged_listed: int | None = None,
) -> list[PartitionResult]:
    """The cross-session facts over the whole store, then every task (one or more
    partitions a cross-session link joins) judged on its own — in ``jobs`` worker
    processes (``pool``'s, when given) when there is more than one partition, or on
    ``executor`` (a cluster's): the same workers run the cross-session pass's per-partition
    tasks first (:func:`cross_session_front`). One task left is judged here."""
    nonempty = store.nonempty()
    pooled = not keep_records and (executor is not None or (jobs > 1 and len(nonempty) > 1))
    if not pooled:
        front = cross_session_front(store, config)
        shared = _shares(front, nonempty)  # each task's share; the whole scan's let go
        del front
        return _judge_here(
            store, shared, rules, provided, keep_records, keep_tables, unjudged_listed
        )
    store.spill()  # workers read the partitions from disk, not through a pipe
    size = min(jobs, len(nonempty))
    with _worker_pool(executor or pool, size) as workers:
        front = cross_session_front(store, config, workers)
        shared = _shares(front, nonempty)
        del front
        if executor is None and len(shared) < 2:  # one task: judged here
            return _judge_here(
                store, shared, rules, provided, keep_records, keep_tables, unjudged_listed
            )
        # Each task is sent its own share of the front, not the whole scan's; a cluster's
        # tasks write their sessions rows beside the store's files (read in scan order by
        # scan_paths, before the store goes).
        judged = str(store.scratch_dir()) if executor is not None else None
        futures = [
            workers.submit(
                _analyze_files,
                store.task_files(t),
                share,
                rules,
                provided,
                keep_tables,
                (judged, f"judged-{k:05d}.parquet") if judged is not None else None,
                unjudged_listed,
            )
            for k, (t, share) in enumerate(shared)
        ]
        return [f.result() for f in futures]


def _shares(front: Front, nonempty: list[int]) -> list[tuple[list[int], Front]]:
    """Each task with evidence, with its own share of the front (:meth:`Front.split`)."""
    held = set(nonempty)
    return [(t, s) for t, s in zip(front.tasks, front.split(), strict=True) if held.intersection(t)]


def _judge_here(
    store: EvidenceStore,
    shared: list[tuple[list[int], Front]],
    rules: RuleSet,
    provided: frozenset[str],
    keep_records: bool,
    keep_tables: bool,
    unjudged_listed: int | None = None,
) -> list[PartitionResult]:
    """Every task judged in this process, one after another."""
    out = []
    for task, share in shared:
        # Records kept for the timeline read their events after the store is gone.
        opened = store.load_task(task) if keep_records else open_task(store, task)
        connections, exchanges, events = opened
        out.append(
            analyze_partition(
                connections,
                exchanges,
                events,
                share,
                rules,
                provided,
                keep_records,
                keep_tables,
                unjudged_listed,
            )
        )
    return out


def _merge_tables(parts: list[dict[str, pl.DataFrame]]) -> dict[str, pl.DataFrame]:
    out: dict[str, pl.DataFrame] = {}
    for name, schema in TABLE_SCHEMAS.items():
        frames = [p[name] for p in parts if name in p and p[name].height]
        out[name] = pl.concat(frames) if frames else pl.DataFrame(schema=schema)
    # gap_id numbers the gaps of the whole scan (docs/facts.md): in time order, whatever
    # partition judged them.
    if not out["gaps"].height:
        return out
    out["gaps"] = (
        out["gaps"]
        .sort(
            ["ts", "session_id", "response_stream", "location", "first", "last"],
            nulls_last=True,
            maintain_order=True,
        )
        .with_columns(pl.int_range(1, pl.len() + 1, dtype=pl.Int64).alias("gap_id"))
    )
    return out


# Sessions table rows reordered in one query at the end of a scan (a copy of the table);
# past them, column by column (:func:`_in_order`). A small scan's 26 gathers took ~1 ms.
_GATHER_AT_ONCE = 1 << 16


_NO_ROWS = pl.DataFrame()


def _session_order(session_ids: pl.Series, firsts: list[pl.DataFrame]) -> pl.Series:
    """The rows of the merged sessions table (``session_ids``) in the order the sessions
    first appear: by their first exchange (``firsts``, the partitions' ``first_seen`` in
    the table's order: a pair of integers a row, no join of the session IDs), then those
    without one by ID. An exchange is one session's: no two rows share a first exchange."""
    if not firsts:
        return pl.Series("row", [], pl.UInt32)
    keys = pl.concat(firsts).with_row_index("row")
    seen = pl.col("conn_id").is_not_null()
    order = keys.filter(seen).sort("conn_id", "index").get_column("row")
    rest = keys.filter(~seen).get_column("row")
    if not rest.len():
        return order
    unseen = pl.DataFrame({"row": rest, "session_id": session_ids.gather(rest)})
    return pl.concat([order, unseen.sort("session_id", nulls_last=True).get_column("row")])


def _in_order(sessions: pl.DataFrame, order: pl.Series) -> pl.DataFrame:
    """The rows of ``sessions`` (emptied) in ``order``, gathered column by column, each
    column made contiguous first and let go once gathered. A column that holds one value
    throughout is kept as it is, a scalar column (the partitions' sessions tables are
    compacted, :func:`analyze_partition`): any order of it is itself (issue 9: 9 of the 26
    columns on a 400 MB prefix of the --big log set, none of whose 499k sessions had a
    silent gap). Told by :func:`~sse_forensics.evidence.store.stored_once`, not by size
    alone: a sparse string column (a few short values, nulls elsewhere) estimates at under
    a bit per row too, and left in place it would hold other sessions' values."""
    if sessions.height <= _GATHER_AT_ONCE:  # one query, not one per column
        return sessions.select(pl.all().gather(order))
    names = sessions.columns
    gathered = []
    for name in names:
        if stored_once(sessions, name):
            continue
        column = sessions.drop_in_place(name)
        gathered.append(column.rechunk().gather(order))
        del column
    if not gathered or not sessions.width:
        return sessions if not gathered else pl.DataFrame(gathered)
    return pl.concat([pl.DataFrame(gathered), sessions], how="horizontal").select(names)


def partition_count(size: int, jobs: int) -> int:
    """Enough partitions that each holds about :data:`PARTITION_BYTES` of ``size`` input
    bytes (:data:`POOLED_PARTITION_BYTES` in ``jobs`` > 1 worker processes), and a few per
    worker so the workers finish together."""
    by_size = -(-size // (POOLED_PARTITION_BYTES if jobs > 1 else PARTITION_BYTES))
    return max(1, by_size, 4 * jobs if jobs > 1 else 1)


def scan_paths(
    paths: list[str],
    config: AnalysisConfig | None = None,
    rule_dirs: list[Path] | None = None,
    rules: RuleSet | None = None,
    progress: ScanProgress | None = None,
    logs: LogOptions | None = None,
    jobs: int = 1,
    keep_records: bool = False,
    buckets: int | None = None,
    keep_tables: bool = True,
    executor: Executor | None = None,
    scratch: str | None = None,
    pool: Executor | None = None,
    unjudged_listed: int | None = None,
) -> ScanResult:
    """Scan ``paths`` (captures and logs; files, directories or globs) with ``rules``.
    ``executor`` (a cluster's, :mod:`sse_forensics.cluster`) runs the capture shards and the
    partition tasks instead of ``jobs`` local processes; they exchange Parquet files under
    ``scratch`` (default: the system's temp directory), which it must be able to read.
    ``pool``: the ``jobs`` local processes, started by the caller
    (:func:`~sse_forensics.workers.early_workers`): used where the scan would start its
    own, and shut down either way. ``unjudged_listed``: how many could-not-judge items the
    output lists (the terminal's first few): a scan without ``keep_tables`` then keeps
    those and the totals only (:attr:`ScanResult.unjudged`), not every item's text."""
    return_freed_memory()
    config = config or AnalysisConfig()
    rules = rules or load_rules(rule_dirs)
    size = input_bytes(paths)
    if buckets is None:
        if executor is None and size < SHARD_BYTES:
            # A small input is judged here: two interpreters starting and importing the
            # analyzer cost more CPU (~1.7 s) than its whole scan.
            jobs = 1
        buckets = 1 if keep_records else partition_count(size, jobs)
    # --jobs N on a large input: N worker processes started at once, for the partitions'
    # evidence rows and the judging (a small scan starts them only if it has several
    # partitions to judge, when it gets there).
    local = None
    if executor is None and jobs > 1 and buckets > 1 and not keep_records:
        local = (pool or _started(jobs)) if size >= SHARD_BYTES else None
    if pool is not None and local is not pool:
        pool.shutdown(wait=False)
    with (
        local or contextlib.nullcontext(),
        engine_for(size),  # a small scan's queries on the in-memory engine
        EvidenceStore(buckets, scratch=scratch) as store,
        Spool(scratch) as spool,
    ):
        ingested = ingest(paths, store, config, logs, progress, jobs, executor, spool, local)
        ingested.reassembly.errors.extend(_over_long_numbers(store, config))
        if progress is not None:
            progress("facts", 0, 1)
        results = analyze_store(
            store,
            config,
            rules,
            ingested.provided,
            keep_records,
            jobs,
            keep_tables,
            executor,
            local,
            None if keep_tables else unjudged_listed,
        )
        if local is not None:
            local.shutdown(wait=False)  # the workers exit while the scan finishes
        judged = [r.sessions_file for r in results if r.sessions_file is not None]
        read = read_sessions(judged, _session_order) if judged else None
    if progress is not None:
        progress("rules", 0, 1)
    not_judged = not_judged_rules(rules, ingested.provided)
    findings = sorted((f for r in results for f in r.findings), key=Finding.sort_key)
    # Each merged sessions row's first exchange, in the order _merge_tables puts the rows.
    firsts = [
        r.first_seen
        for r in results
        if r.first_seen is not None and r.tables.get("sessions", _NO_ROWS).height
    ]
    tables = _merge_tables([r.tables for r in results])
    for r in results:  # the merged tables hold the rows now
        r.tables, r.first_seen = {}, None
    # Sessions in the order they first appear, whatever partition judged them: the order
    # found on the partitions' first exchanges, then the table gathered column by column,
    # each column made contiguous first and let go once gathered (a join and a sort of the
    # whole table, or a gather over its partitions' chunks, each took one to several copies
    # of it: 1.66 / 2.66 GB peak for the 1.28M sessions of the --big log set).
    if read is not None:  # the tasks' rows, read from their files in this order above
        tables["sessions"] = read
    else:
        sessions = tables["sessions"]  # emptied column by column below
        order = _session_order(sessions.get_column("session_id"), firsts)
        tables["sessions"] = _in_order(sessions, order)
        del sessions, order
    del firsts, read
    reassembly = ingested.reassembly
    stats = ScanStats(
        frames=reassembly.frames,
        tcp_segments=reassembly.tcp_segments,
        connections=reassembly.connection_count + ingested.log_connections,
        tcp_connections=reassembly.connection_count,
        http_exchanges=ingested.exchanges,
        streams=sum(r.counts["streams"] for r in results),
        events=sum(r.counts["events"] for r in results),
        resumes=sum(r.counts["resumes"] for r in results),
        partitions=len(results),
        sessions=sum(r.counts["sessions"] for r in results),
    )
    facts = results[0].facts if keep_records and len(results) == 1 else None
    if keep_records and facts is None:
        facts = build_facts([], {}, Front())
    result = ScanResult(
        paths=list(paths),
        inputs=ingested.inputs,
        stats=stats,
        loss=reassembly.loss,
        log_stats=reassembly.log_stats,
        errors=fold_caps([*reassembly.errors, *(hit for r in results for hit in r.caps)]),
        connections=reassembly.connections,
        tables=tables,
        findings=findings,
        rule_errors=list(rules.errors),
        not_judged=not_judged,
        facts=facts,
        ignored=ingested.ignored,
        limits=config.limits,
        unjudged=_unjudged_totals(results, None if keep_tables else unjudged_listed),
    )
    # Findings, errors and records cite `x.pcap.gz` or `<stdin>`, never the spooled copy.
    restored: ScanResult = restore_names(result, spool.names)
    return restored


def _unjudged_totals(results: list[PartitionResult], listed: int | None) -> UnjudgedTotals | None:
    """The scan's could-not-judge totals where its partitions kept ``listed`` items only."""
    if listed is None:
        return None
    parts = (r.unjudged for r in results if r.unjudged is not None)
    return sum(parts, UnjudgedTotals(listed=listed))


def reassemble_paths(paths: list[str]) -> Reassembly:
    """The capture objects themselves (connections, exchanges with their events), for tests
    and tools that look at reassembly, not at facts."""
    inputs, _ = classify_inputs(paths, None)
    capture = merged_frames(inputs)
    with _scan_gc():
        return reassemble(capture, capture.stats)


def evidence_provided(reassembly: Reassembly) -> frozenset[str]:
    """The kinds of evidence the inputs give (``verdicts.PROVIDED_BY``)."""
    from sse_forensics.ingest.logs.model import INITIALIZE, canonical_control_type

    provided: set[str] = set()
    if reassembly.frames:
        provided |= PROVIDED_BY["capture"]
    files = reassembly.log_stats.get("files", [])  # ingest.logs.read.log_stats: a list
    for file in files if isinstance(files, list) else []:
        kind = file.get("kind", "")
        provided |= PROVIDED_BY["event-log" if kind == "event-log" else "access-log"]
        if INITIALIZE in {canonical_control_type(t) for t in file.get("control_types", {})}:
            provided |= PROVIDED_BY["event-log-initialize"]
    return frozenset(provided) if provided else PROVIDED_BY["capture"]
