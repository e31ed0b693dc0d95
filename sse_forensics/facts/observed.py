"""Where each resume's ``Last-Event-ID`` sits in its observed order (:func:`.gaps.observed_order`:
the IDs of the data events of its logical stream before it, in time order), for every
resume of a partition in one query over the partition's event columns: a join from each
resume to the events of its logical stream that carry its ``Last-Event-ID``, and an as-of
join to the count of those before it (issue 9: "join_asof from a resume to the last event
before it — not Python loops over rows"). Asking each resume's order of the columns costs
two polars calls per resume (``IdOrder.last``), most of the judging of a log set whose
resumes have no events before them (an access log alone). The IDs themselves are read, as
before, only for a resume whose judgement compares them (:meth:`ResumeOrder.ids`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import polars as pl

from sse_forensics.facts.columns import ORDER_SLICE, EventColumns
from sse_forensics.facts.earlier import IdOrder, observed_ids
from sse_forensics.facts.index import StreamIndex
from sse_forensics.facts.load import DATA_WITH_ID
from sse_forensics.facts.model import StreamRecord

Key = tuple[int, int]
_ROOT = ("root_conn", "root_index")


@dataclass(slots=True)
class ResumeOrder:
    """What a resume's judgements ask of its observed order: its ``length``, the index of
    the last ``Last-Event-ID`` in it (``last``, ``None`` when absent) and the ID after that
    (``following``, ``None`` when none); the order itself read on first use (``ids``)."""

    length: int
    last: int | None
    following: str | None
    read: Callable[[], IdOrder]
    _ids: IdOrder | None = None

    def ids(self) -> IdOrder:
        if self._ids is None:
            self._ids = self.read()
        return self._ids


class ObservedOrders:
    """Every resume's :class:`ResumeOrder`, found in one query per partition
    (:func:`_positions`) when every stream reads its events from the partition's columns;
    else (records built by hand) asked of each resume's order."""

    def __init__(
        self,
        index: StreamIndex,
        cols: EventColumns | None = None,
        frame: pl.DataFrame | None = None,
    ) -> None:
        self.index = index
        resumes = [s for s in index.streams if s.kind == "resume"]
        self._found: dict[Key, tuple[int, int | None, str | None]] | None = None
        by_columns = all(s.exchange.source is not None for s in index.streams)
        if resumes and cols is not None and frame is not None and by_columns:
            self._found = _positions(resumes, index, cols, frame)

    def of(self, r: StreamRecord) -> ResumeOrder:
        def read() -> IdOrder:
            return observed_ids(r, self.index)

        found = self._found.get(_key(r)) if self._found is not None else None
        if found is not None:
            return ResumeOrder(*found, read)
        order = read()
        last = order.last(r.last_event_id or "")
        following = order[last + 1] if last is not None and last + 1 < len(order) else None
        return ResumeOrder(len(order), last, following, lambda: order, order)


def _key(s: StreamRecord) -> Key:
    return (s.exchange.connection_id, s.exchange.index)


def _positions(
    resumes: list[StreamRecord], index: StreamIndex, cols: EventColumns, frame: pl.DataFrame
) -> dict[Key, tuple[int, int | None, str | None]]:
    """Per resume (``conn_id, ex_index``): the length of its observed order, the index of
    its ``Last-Event-ID``'s last occurrence in it and the ID after that. The data events
    with an ID of the logical streams that hold a resume are read a slice at a time
    (:data:`.columns.ORDER_SLICE` events, in time order); what is kept of a slice is its
    count per stream, its events that carry an ID some resume asks for (with the ID after
    each in the slice) and each logical stream's first ID in it: a resume after a stream of
    millions of events does not hold their IDs (issue 16)."""
    asked = _asked(resumes, index)
    roots = frame.select("conn_id", "ex_index", *_ROOT).join(
        asked.select(*_ROOT).unique(), on=list(_ROOT), how="semi"
    )
    pairs = asked.select(*_ROOT, "id_field").unique()
    counts, matches, firsts = [], [], []
    for part, (_offset, rows) in enumerate(cols.slices(ORDER_SLICE, False, ("kind", "id_field"))):
        # Each logical stream's IDs in the slice in time order (rank, then position),
        # numbered within it (``k``), each with the next one (``following``).
        ids = (
            rows.filter(DATA_WITH_ID)
            .select("conn_id", "ex_index", pl.col("rank").cast(pl.Int64), "id_field")
            .join(roots, on=["conn_id", "ex_index"], how="inner", maintain_order="left")
            .select(
                *_ROOT,
                "rank",
                "id_field",
                pl.int_range(pl.len(), dtype=pl.Int64).over(*_ROOT).alias("k"),
                pl.col("id_field").shift(-1).over(*_ROOT).alias("following"),
                pl.lit(part, pl.Int64).alias("part"),
            )
        )
        counts.append(ids.group_by(*_ROOT, "rank", "part").agg(pl.len().cast(pl.Int64).alias("n")))
        matches.append(ids.join(pairs, on=[*_ROOT, "id_field"], how="semi"))
        firsts.append(ids.filter(pl.col("k") == 0).select(*_ROOT, "part", "id_field"))
    if not counts:
        return {(c, i): (0, None, None) for c, i in asked.select("r_conn", "r_index").iter_rows()}
    by_rank = pl.concat(counts)
    # Where each slice's numbering starts in each logical stream: its IDs in earlier slices.
    offsets = (
        by_rank.group_by(*_ROOT, "part")
        .agg(pl.col("n").sum())
        .sort("part")
        .select(*_ROOT, "part", (pl.col("n").cum_sum() - pl.col("n")).over(*_ROOT).alias("at"))
    )
    # The length of each resume's order: the IDs of its logical stream's earlier streams.
    before = (
        by_rank.group_by(*_ROOT, "rank")
        .agg(pl.col("n").sum())
        .sort("rank")
        .select(*_ROOT, "rank", pl.col("n").cum_sum().over(*_ROOT).alias("length"))
    )
    lengths = (
        asked.with_columns((pl.col("r_rank") - 1).alias("rank"))
        .sort("rank")
        .join_asof(before, on="rank", by=list(_ROOT), check_sortedness=False)
        .select("r_conn", "r_index", pl.col("length").fill_null(0))
    )
    last = (
        pl.concat(matches)
        .join(offsets, on=[*_ROOT, "part"], how="left")
        .with_columns(pl.col("k") + pl.col("at"))
        .join(asked, on=[*_ROOT, "id_field"], how="inner")
        .filter(pl.col("rank") < pl.col("r_rank"))
        .group_by("r_conn", "r_index")
        .agg(
            pl.col("k").max().alias("last"),
            pl.col("following").sort_by("k").last().alias("next_in_slice"),
        )
    )
    # The ID after the last one of a slice is the first of its logical stream's next slice.
    starts = (
        pl.concat(firsts)
        .join(offsets, on=[*_ROOT, "part"], how="left")
        .select(*_ROOT, pl.col("at").alias("k"), pl.col("id_field").alias("next_slice"))
    )
    out = (
        asked.join(lengths, on=["r_conn", "r_index"], how="left")
        .join(last, on=["r_conn", "r_index"], how="left")
        .with_columns((pl.col("last") + 1).alias("k"))
        .join(starts, on=[*_ROOT, "k"], how="left")
        .with_columns(
            pl.when(pl.col("k") < pl.col("length"))
            .then(pl.coalesce("next_in_slice", "next_slice"))
            .alias("following")
        )
    )
    return {
        (c, i): (n, li, nxt)
        for c, i, n, li, nxt in out.select(
            "r_conn", "r_index", "length", "last", "following"
        ).iter_rows()
    }


def _asked(resumes: list[StreamRecord], index: StreamIndex) -> pl.DataFrame:
    """Per resume: its exchange, rank, logical stream (its root's exchange) and
    ``Last-Event-ID`` (as ``id_field``)."""
    return pl.DataFrame(
        {
            "r_conn": [s.exchange.connection_id for s in resumes],
            "r_index": [s.exchange.index for s in resumes],
            "r_rank": [index.rank(s) for s in resumes],
            "root_conn": [s.logical.exchange.connection_id for s in resumes],
            "root_index": [s.logical.exchange.index for s in resumes],
            "id_field": [s.last_event_id or "" for s in resumes],
        },
        schema={
            "r_conn": pl.Int64,
            "r_index": pl.Int64,
            "r_rank": pl.Int64,
            "root_conn": pl.Int64,
            "root_index": pl.Int64,
            "id_field": pl.String,
        },
    )
