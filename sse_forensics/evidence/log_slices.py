"""A session partition of many event-log records made into evidence a spill part at a time
(issue 16: one stream of millions of records was held whole, and copied, by each step of
:func:`.from_logs.session_part`: 1.4 GB for a stream of two million events).

Records in (ts, source, line) order, as a log is read, are read twice, a part of the
partition's :class:`~.log_partitions.Spill` at a time (:meth:`~.log_partitions.Spill.pieces`):

1. every record but the written data records (role ``wire``), and of those only the ones
   that decide their group's ends and resume (its first and last, its first naming a
   ``Last-Event-ID``, :func:`_deciding`): the groups, their signals and the log's
   ``info`` come out as :func:`.from_logs.session_part` makes them from every record; of
   the rest, only the emitted IDs (each slice's as one list per stream) and the first
   time each ID an access line resumes from was written;
2. the written records again, with their group, held by group in a spill of their own and
   handed to the store a group at a time in group order, each group's positions and
   last-event-ID buffer carried from one part to the next (:func:`_hand_on`).

A partition of at most :data:`SLICE_RECORDS` records, or whose records are out of that
order (times that go back, records that waited for their session), is read whole as before.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

import polars as pl

from sse_forensics.evidence import from_logs as F
from sse_forensics.evidence import log_records as R
from sse_forensics.evidence.store import EvidenceStore
from sse_forensics.evidence.tables import (
    ConnectionColumns,
    EventColumns,
    ExchangeColumns,
    split_by,
)

if TYPE_CHECKING:
    from sse_forensics.evidence.log_partitions import Spill

# A partition of more event-log records than this is read a spill part at a time; read
# when called (a test lowers it).
SLICE_RECORDS = 1 << 18
# Records read, and events rows made, at once at most (a spill part is a flush's worth of
# log rows already, but its events rows are several times their size); a test lowers it.
PIECE_ROWS = 1 << 16

_KEYS = ["session", "stream"]
# The SSE records step 1 keeps (the written data records, ``wire``, are step 2's).
_SSE_ROLES = ("wire-signal", "decision")
# What :func:`.from_logs._event_log_events` reads of a record, and its place.
_SSE_COLUMNS = [
    "group", "order", "role", "ctype", "event_id", "data", "payload", "sig_first",
    "sig_last", "sig_valid", "source", "line", "ts",
]  # fmt: skip


def _pieces(
    spill: Spill, bucket: int, columns: list[str] | None = None, name: str = "events"
) -> Iterator[pl.DataFrame]:
    """A partition's rows of table ``name``, :data:`PIECE_ROWS` at most at a time, in
    order."""
    size = PIECE_ROWS
    for piece in spill.pieces(name, bucket, columns):
        for at in range(0, piece.height, size):
            yield piece.slice(at, size)


def sliced(spill: Spill, bucket: int) -> bool:
    """Is partition ``bucket``'s event log read a part at a time?"""
    return spill.rows("events", bucket) > SLICE_RECORDS


@dataclass(slots=True)
class Reduced:
    """What step 1 keeps of a partition's records."""

    rows: pl.DataFrame  # sorted_records' rows but the written data ones not _deciding
    info: pl.DataFrame  # from_logs._log_info of every record (empty unless asked)
    sent: pl.DataFrame  # from_logs.first_sent of the IDs asked for


def _deciding(wire: pl.DataFrame) -> pl.DataFrame:
    """The written data records of a slice that may decide their group's first and last
    record, its resume (``Last-Event-ID``) and the ``Last-Event-ID`` of its span: what
    :func:`.log_records.groups_of` and the placing of loose records read of them."""
    if not wire.height:
        return wire
    order = pl.col("order")
    by = [*_KEYS, "__key"]
    named = (R.resume_of(), pl.col("last_event_id"))
    found = [
        order == order.min().over(by),
        order == order.max().over(by),
        *(order == order.filter(c.is_not_null()).min().over(by) for c in named),
    ]
    return (
        wire.with_columns(R.wire_key().alias("__key"))
        .filter(pl.any_horizontal(f.fill_null(False) for f in found))
        .drop("__key")
    )


def reduce_records(
    pieces: Iterable[pl.DataFrame], wanted: pl.DataFrame | None = None
) -> Reduced | None:
    """Step 1 over a partition's records; ``wanted``: the (session, last_event_id) pairs the
    access lines resume from (then the info and first writes are read too). None when
    the records are not in (ts, source, line) order, or there are none."""
    kept: list[pl.DataFrame] = []
    emitted: list[pl.DataFrame] = []
    priming: list[pl.DataFrame] = []
    evicted: list[pl.DataFrame] = []
    sent: list[pl.DataFrame] = []
    tail: pl.DataFrame | None = None
    at = 0
    for piece in pieces:
        if not piece.height:
            continue
        keys = piece.select(R.RECORD_ORDER)
        if not R.in_record_order(keys if tail is None else pl.concat([tail, keys])):
            return None
        tail = keys.tail(1)
        rows = R.numbered_records(piece, at)
        at += piece.height
        role = pl.col("role")
        wire = rows.filter(role == "wire")
        kept += [rows.filter(role.is_not_null() & (role != "wire")), _deciding(wire)]
        if wanted is None:
            continue
        ided = pl.col("event_id").is_not_null()
        emitted.append(
            rows.filter(ided & (pl.col("kind") == "emitted"))
            .group_by(_KEYS, maintain_order=True)
            .agg(pl.col("event_id").alias("emitted"))
        )
        primed = ided & pl.col("kind").is_in(["emitted", "written"]) & (pl.col("data") == "")
        priming.append(rows.filter(primed).select(*_KEYS, "event_id").unique())
        evicted.append(rows.filter(F.evicted_record()))
        pairs = ["session", "last_event_id"]
        sent.append(F.first_sent(wire).join(wanted, on=pairs, how="semi"))
    if not kept:
        return None
    rows = pl.concat(kept, how="vertical_relaxed").sort("order")
    if wanted is None:
        return Reduced(rows, pl.DataFrame(), pl.DataFrame())
    firsts = (
        pl.concat(sent)
        .group_by("session", "last_event_id", maintain_order=True)
        .agg(pl.col("sent").min())
    )
    return Reduced(rows, _info(emitted, priming, evicted), firsts)


def _info(
    emitted: list[pl.DataFrame], priming: list[pl.DataFrame], evicted: list[pl.DataFrame]
) -> pl.DataFrame:
    """:func:`.from_logs._log_info` from each slice's emitted IDs (a list per stream),
    priming IDs and eviction records."""
    primed = pl.concat(priming).unique()
    lists = pl.concat(emitted)
    if primed.height:  # priming IDs are no message: out of the producer's order
        ids = lists.explode("emitted").rename({"emitted": "event_id"})
        ids = ids.join(primed, on=[*_KEYS, "event_id"], how="anti", nulls_equal=True)
        table = ids.group_by(_KEYS, maintain_order=True).agg(pl.col("event_id").alias("emitted"))
    else:
        table = lists.group_by(_KEYS, maintain_order=True).agg(pl.col("emitted").explode())
    return F.info_table(table, pl.concat(evicted))


def group_order(spill: Spill, bucket: int) -> pl.DataFrame | None:
    """:func:`.log_records.group_order` of a partition read a part at a time; None when
    its records must be read whole."""
    reduced = reduce_records(_pieces(spill, bucket, R.RECORD_COLUMNS))
    if reduced is None:
        return None
    records = R.assign_groups(reduced.rows)
    if not records.height:
        return pl.DataFrame()
    return R.groups_of(records).select(*R.GROUP_KEYS, *R.GROUP_ORDER)


def session_part(
    spill: Spill,
    bucket: int,
    access: pl.DataFrame,
    conn_ids: pl.DataFrame,
    store: EvidenceStore,
) -> F.SessionPart | None:
    """:func:`.from_logs.session_part` of a partition read a part at a time, its events
    rows handed to ``store`` (the part's ``events`` empty); None when its records must be
    read whole."""
    access = F.numbered_access(access)
    wanted = (
        access.select(F.access_session().alias("session"), "last_event_id").drop_nulls().unique()
    )
    reduced = reduce_records(_pieces(spill, bucket), wanted)
    if reduced is None:
        return None
    held, reduced.rows = [reduced.rows], pl.DataFrame()
    log = F.streams_of(held, reduced.info, _SSE_ROLES)

    def events_of(groups: pl.DataFrame) -> pl.DataFrame:
        _hand_on(spill, bucket, log, groups, store)
        return EventColumns.frame()

    return F.log_part(log, access, conn_ids, reduced.sent, events_of)


def _hand_on(
    spill: Spill, bucket: int, log: F.EventLog, groups: pl.DataFrame, store: EvidenceStore
) -> None:
    """Step 2: the SSE events rows of ``groups`` (those kept of ``log.groups``) to
    ``store``, a group at a time in group order, as :func:`.from_logs._event_log_events`
    makes them from every record of a group at once."""
    keys = log.groups.select(*R.GROUP_KEYS, "group")
    signals = log.records.sort("order").select(_SSE_COLUMNS)
    by_group = type(spill)(max(1, keys.height), spill.scratch, spill.budget, f"sse{bucket}")
    none = pl.lit(None, pl.String)
    at = 0
    for piece in _pieces(spill, bucket):
        rows = R.numbered_records(piece, at)
        low, at = at, at + piece.height
        wire = (
            rows.filter(pl.col("role") == "wire")
            .with_columns(R.wire_key().alias("exchange_key"))
            .join(keys, on=R.GROUP_KEYS, how="left", nulls_equal=True)
            .with_columns(
                none.alias("payload"),  # a data event's payload is not read
                none.alias("sig_first"),
                none.alias("sig_last"),
                pl.lit(None, pl.Boolean).alias("sig_valid"),
            )
            .select(_SSE_COLUMNS)
        )
        order = pl.col("order")
        mine = signals.filter((order >= low) & (order < at))
        if mine.height:
            wire = pl.concat([wire, mine], how="vertical_relaxed").sort("order")
        for group, part in split_by(wire, "group").items():
            by_group.hold("sse", int(group), part)
    no_conns, no_exchanges = ConnectionColumns.frame(), ExchangeColumns.frame()
    # Groups from their first row, several at a time (a partition of many short streams
    # costs a call per PIECE_ROWS rows, not per stream); a later part of a group alone,
    # from its position and last-event-ID buffer so far.
    starting: list[pl.DataFrame] = []
    waiting = 0

    def hand(rows: pl.DataFrame, start: int = 0, carry: str | None = None) -> None:
        store.add(no_conns, no_exchanges, F._event_log_events(rows, groups, start, carry))

    for group in groups.get_column("group").to_list():
        position, carry, before = 0, None, None
        for part in _pieces(by_group, group, name="sse"):
            if before is not None:
                carry = _last_id(before, carry)
            if position == 0:
                starting.append(part)
                waiting += part.height
            if position or waiting >= PIECE_ROWS:
                if starting:
                    hand(pl.concat(starting))
                starting, waiting = [], 0
            if position:
                hand(part, position, carry)
            position += part.height
            before = part
    if starting:
        hand(pl.concat(starting))
    for group in range(by_group.buckets):
        by_group.drop("sse", group)


def _last_id(rows: pl.DataFrame, carry: str | None) -> str | None:
    """The last-event-ID buffer after ``rows`` of a group, ``carry`` before them."""
    carries = pl.col("role").is_in(["wire", "wire-signal"]) & (pl.col("event_id") != "")
    ids = rows.filter(carries.fill_null(False)).get_column("event_id")
    return str(ids[-1]) if ids.len() else carry
