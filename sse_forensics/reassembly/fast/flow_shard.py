"""A capture reassembled by shards of flows: each shard holds the index rows of its own
4-tuples only (issue 10), and connection ids stay those of one pass over the whole capture.

:func:`~.capture.reassemble_fast` numbers connections in order of decision over all flows:
a candidate at its first row, a connection of the exact path at the row whose segment the
tracker decides it on, or at the end of the capture (after every row) in the order of the
tracker's flow table, i.e. of its flow's first row. Flows are independent in the tracker
while its flow table is not full (no eviction: see :func:`numbering`), so a shard that holds
all the rows of its flows, knows each row's place in the whole capture (:attr:`FlowShard.rows`)
and the capture's end, decides the same connections at the same rows:

1. :func:`decision_keys` (per shard): every connection's sort key ``(row, end order, step)``;
2. :func:`numbering` (once): all shards' keys ranked into ids, handed back per shard;
3. ``reassemble_fast(..., flows=shard)`` with :attr:`FlowShard.cand_ids` and
   :attr:`FlowShard.exact_ids`: the shard's connections under those ids.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sse_forensics.ingest.packet_index import PacketIndex
from sse_forensics.limits import Limits
from sse_forensics.reassembly.exchange import Exchange
from sse_forensics.reassembly.fast.exact import END, ExactDriver
from sse_forensics.reassembly.fast.tcp import classify_groups, group_flows
from sse_forensics.reassembly.flows import Connection


@dataclass(slots=True)
class FlowShard:
    """What a shard of flows knows of the whole capture: the place of each of its rows
    (``rows``: ascending, one per row of its index), the capture's frames, TCP segments and
    last timestamp; and, once numbered, its candidates' ids (in order of their first row)
    and its exact-path connections' ids (in order of decision)."""

    rows: np.ndarray
    frames: int
    tcp_segments: int
    capture_end: float | None
    cand_ids: np.ndarray | None = None
    exact_ids: np.ndarray | None = None

    def at(self, row: float) -> float:
        """The whole capture's row of this shard's row ``row`` (``END`` stays ``END``)."""
        return row if row == END else float(self.rows[int(row)])


@dataclass(frozen=True, slots=True)
class DecisionKeys:
    """One shard's connections as sort keys: candidates first (by first row), then the
    exact path's in order of decision; ``flows``: its 4-tuples the exact path tracks."""

    row: np.ndarray  # float64: the whole capture's row of decision, inf at the end
    end_order: np.ndarray  # int64: at the end, the row its flow was created at; else 0
    candidates: int
    flows: int


def decision_keys(index: PacketIndex, shard: FlowShard, limits: Limits) -> DecisionKeys:
    """Step 1: the sort key of every connection of ``index`` (a shard of flows); the exact
    path runs its tracker only (no HTTP analysis: ``own`` refuses every connection)."""
    end = shard.capture_end if shard.capture_end is not None else 0.0
    groups = group_flows(index)
    check = classify_groups(index, groups, end)
    cand_first = groups.first_row[check.candidate]
    rows: list[float] = []
    ends: list[int] = []
    frame_rows: dict[str, tuple[np.ndarray, np.ndarray]] = {}

    def created(conn: Connection) -> int:
        f = index.sources.index(conn.first.source)
        known = frame_rows.get(conn.first.source)
        if known is None:
            at = np.flatnonzero(index.file == f)
            known = frame_rows[conn.first.source] = (at, index.frame[at])
        at, frames = known
        return int(shard.rows[at[np.searchsorted(frames, frames.dtype.type(conn.first.number))]])

    def assign(row: float, conn: Connection) -> int:
        rows.append(shard.at(row))
        ends.append(created(conn) if row == END else 0)  # the flow table's order
        return len(rows)

    driver = ExactDriver(
        index, assign, lambda _c: 0, _no_sink, own=lambda _id: False, limits=limits
    )
    driver.tracker.max_flows = None  # numbering() checks the whole capture's flows
    other = ~check.candidate
    if bool(other.any()):
        mask = np.repeat(other, np.diff(groups.starts))
        driver.feed_rows(np.sort(groups.rows[mask]))
    driver.close(shard.capture_end)
    return DecisionKeys(
        np.concatenate([shard.rows[cand_first].astype(np.float64), np.array(rows)]),
        np.concatenate([np.zeros(len(cand_first), np.int64), np.array(ends, np.int64)]),
        len(cand_first),
        int(np.count_nonzero(other)),
    )


def _no_sink(_conn: Connection, _exchanges: list[Exchange]) -> None:  # pragma: no cover
    raise AssertionError("a numbering pass analyses no connection")


def numbering(
    keys: list[DecisionKeys], limits: Limits
) -> list[tuple[np.ndarray, np.ndarray]] | None:
    """Step 2: per shard, its candidates' ids and its exact-path connections' ids — the
    rank of each key among all shards' keys, as one pass numbers them. None when the exact
    path's 4-tuples exceed the ``flows`` cap: then one pass's tracker evicts flows, which
    makes flows depend on each other (the caller numbers in the whole index instead)."""
    if limits.flows is not None and sum(k.flows for k in keys) > limits.flows:
        return None
    shard = np.concatenate([np.full(len(k.row), s, np.int64) for s, k in enumerate(keys)])
    step = np.concatenate([np.arange(len(k.row), dtype=np.int64) for k in keys])
    row = np.concatenate([k.row for k in keys]) if keys else np.zeros(0)
    end_order = np.concatenate([k.end_order for k in keys]) if keys else np.zeros(0, np.int64)
    order = np.lexsort((step, shard, end_order, row))  # ties: one flow, so one shard
    ids = np.empty(len(order), dtype=np.int64)
    ids[order] = np.arange(1, len(order) + 1)
    out = []
    at = 0
    for k in keys:
        mine = ids[at : at + len(k.row)]
        out.append((mine[: k.candidates], mine[k.candidates :]))
        at += len(k.row)
    return out
