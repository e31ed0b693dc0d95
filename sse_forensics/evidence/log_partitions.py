"""Logs into the evidence store in bounded memory, whatever their size (issue "production
scale": partitioned by session, spilled past a budget).

The rows of :mod:`.from_logs` need whole sessions (an event-log stream and the access
lines that describe it) or whole client addresses (the pseudo-connection of the access
lines that stand alone), and pseudo-connections numbered in the order of the whole scan.
So the log batches are routed, as they are read, into Parquet partitions (:class:`Spill`):

1. event-log records by session (a record whose session is not known yet waits, by
   stream, until the log has named it: :class:`~sse_forensics.ingest.logs.StreamSessions`),
   access lines that may describe a stream by the session they name, the others by client;
2. per session partition, the event-log groups and their place in the scan's order; one
   small table of all groups numbers their pseudo-connections;
3. per session partition, the rows (:func:`.from_logs.session_part`); the access lines no
   stream took join their client's partition;
4. per client partition, the same for the clients, then their rows
   (:func:`.from_logs.client_part`).

Peak memory follows the largest partition (and the largest client address), not the input.
The group and client tables hold one row per stream exchange and per client address.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from sse_forensics.errors import ReadError
from sse_forensics.evidence import from_logs as F
from sse_forensics.evidence.log_records import RECORD_COLUMNS
from sse_forensics.evidence.store import EvidenceStore
from sse_forensics.evidence.tables import EventColumns
from sse_forensics.facts.config import AnalysisConfig
from sse_forensics.ingest.logs import LogBatch, StreamSessions
from sse_forensics.ingest.logs.read import log_stats


class Spill:
    """Named tables of rows routed to ``buckets`` partitions: held in memory up to
    ``budget`` bytes, then written to Parquet files under ``scratch``."""

    def __init__(self, buckets: int, scratch: Path, budget: int, prefix: str = "log") -> None:
        self.buckets = buckets
        self.scratch = scratch
        self.budget = budget
        self.prefix = prefix
        self._held: dict[tuple[str, int], list[pl.DataFrame]] = {}
        self._files: dict[tuple[str, int], list[Path]] = {}
        self._bytes = 0
        self._flushes = 0

    def add(self, name: str, rows: pl.DataFrame, key: pl.Expr) -> None:
        """Route ``rows`` by the hash of ``key`` (a string expression)."""
        if not rows.height:
            return
        if self.buckets == 1:
            parts = {0: rows}
        else:
            tagged = rows.with_columns(
                (key.hash(seed=0) % self.buckets).cast(pl.Int64).alias("__bucket")
            )
            parts = {
                int(b): part.drop("__bucket")
                for (b,), part in tagged.partition_by("__bucket", as_dict=True).items()
            }
        for bucket, part in parts.items():
            self._held.setdefault((name, bucket), []).append(part)
            self._bytes += part.estimated_size()
        if self._bytes > self.budget:
            self.flush()

    def flush(self) -> None:
        """Write every held batch to its partition's files."""
        self._flushes += 1
        for (name, bucket), frames in self._held.items():
            path = self.scratch / f"{self.prefix}-{name}-{bucket:05d}-{self._flushes:05d}.parquet"
            pl.concat(frames, how="vertical_relaxed").write_parquet(
                path, compression="lz4", statistics=False
            )
            self._files.setdefault((name, bucket), []).append(path)
        self._held = {}
        self._bytes = 0

    def load(self, name: str, bucket: int, columns: list[str] | None = None) -> pl.DataFrame:
        """A partition's rows of table ``name`` (in the order they were added), or an
        empty frame without columns."""
        frames = [pl.read_parquet(p, columns=columns) for p in self._files.get((name, bucket), [])]
        for df in self._held.get((name, bucket), []):
            frames.append(df.select(columns) if columns is not None else df)
        return pl.concat(frames, how="vertical_relaxed") if frames else pl.DataFrame()

    def drop(self, name: str, bucket: int) -> None:
        """Forget a partition (its files are removed)."""
        for p in self._files.pop((name, bucket), []):
            p.unlink(missing_ok=True)
        for df in self._held.pop((name, bucket), []):
            self._bytes -= df.estimated_size()


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
    files: Callable[[], list] | None = None,
) -> LogIngest:
    """Route the log ``batches`` (:func:`~sse_forensics.ingest.logs.iter_log_batches`) to
    partitions, then add their evidence rows to ``store``, pseudo-connections numbered from
    ``first_conn_id``. ``files``: the reader's per-file statistics, once read."""
    started = time.perf_counter()
    buckets = store.buckets
    spill = Spill(buckets, store.scratch_dir(), store.memory_budget // 3)
    sessions = StreamSessions()
    file_no: dict[str, int] = {}
    access_rows = event_rows = 0
    out = LogIngest()
    for batch in batches:
        out.errors.extend(batch.errors)
        rows = batch.rows
        if batch.table == "events":
            rows = rows.select(F.EVENT_LOG_COLUMNS)
            event_rows += rows.height
            sessions.learn(rows)
            rows = sessions.attach(rows)
            known = rows.filter(pl.col("session").is_not_null())
            spill.add("events", known, _session_key())
            if known.height != rows.height:
                waiting = rows.filter(pl.col("session").is_null())
                spill.add("waiting", waiting, pl.col("stream"))
        else:
            number = file_no.setdefault(batch.source, len(file_no))
            rows = rows.select(F.ACCESS_LOG_COLUMNS).with_columns(
                pl.lit(number, pl.Int64).alias("file_no"), *F.line_times()
            )
            access_rows += rows.height
            may_match = rows.filter(F.matchable())
            spill.add("access", may_match, F.access_session())
            if may_match.height != rows.height:
                spill.add("unmatched", rows.filter(~F.matchable()), F.client_expr())
    # Records read before their session was named: all names are known now.
    for b in range(buckets):
        waiting = spill.load("waiting", b)
        if waiting.height:
            spill.add("events", sessions.attach(waiting), _session_key())
        spill.drop("waiting", b)

    # Event-log groups numbered in the scan's order (one row per group).
    orders = [F.group_order(spill.load("events", b, RECORD_COLUMNS)) for b in range(buckets)]
    orders = [o for o in orders if o.height]
    next_id = first_conn_id
    group_ids = pl.DataFrame()
    if orders:
        group_ids = (
            pl.concat(orders)
            .sort(F.GROUP_ORDER, nulls_last=True)
            .with_row_index("conn_id", offset=next_id)
            .with_columns(pl.col("conn_id").cast(pl.Int64))
        )
        next_id += group_ids.height
    del orders

    for b in range(buckets):
        events = spill.load("events", b)
        access = spill.load("access", b)
        if not events.height and not access.height:
            continue
        if not access.height:
            access = pl.DataFrame(schema={**_access_schema()})
        part = F.session_part(events, access, group_ids)
        del events, access
        spill.drop("events", b)
        spill.drop("access", b)
        store.add(part.connections, part.exchanges, part.events)
        store.spill()  # a partition's rows are written at once: memory holds one partition
        out.exchanges += part.exchanges.height
        out.connections += part.connections.height
        spill.add("unmatched", part.unmatched, F.client_expr())
    del group_ids

    # Access pseudo-connections, one per client address, numbered in the scan's order.
    keys = (spill.load("unmatched", b, _CLIENT_KEYS) for b in range(buckets))
    firsts = [F.client_order(k) for k in keys if k.height]
    if firsts:
        client_ids = (
            pl.concat(firsts)
            .sort(F.LINE_ORDER, nulls_last=True)
            .with_row_index("conn_id", offset=next_id)
            .with_columns(pl.col("conn_id").cast(pl.Int64))
            .select("client", "conn_id")
        )
        next_id += client_ids.height
        for b in range(buckets):
            unmatched = spill.load("unmatched", b)
            if not unmatched.height:
                continue
            conns, exchanges = F.client_part(unmatched, client_ids, config)
            del unmatched
            spill.drop("unmatched", b)
            store.add(conns, exchanges, EventColumns.frame())
            out.exchanges += exchanges.height
            out.connections += conns.height
    out.next_conn_id = next_id
    out.stats = log_stats(files() if files is not None else [], access_rows, event_rows, started)
    return out


_CLIENT_KEYS = ["client_ip", *F.LINE_ORDER]


def _access_schema() -> dict[str, pl.DataType]:
    from sse_forensics.ingest.logs.model import ACCESS_SCHEMA

    schema = {c: ACCESS_SCHEMA[c] for c in F.ACCESS_LOG_COLUMNS}
    return {**schema, "file_no": pl.Int64(), "t0": pl.Float64(), "t1": pl.Float64()}
