"""The per-event judgements of :mod:`.columns` fed one slice of a partition's keyed events
at a time, in stream time order, each handing its state on from slice to slice (issue 16: a
stream of ten million events is judged in one pass over its slices, never held whole):
each stream's counts (:class:`Tally`), the streams whose counter jumps or that carry a
``stream-gap`` signal (:class:`Jumps`), the events whose ID repeats or goes back
(:class:`Order`)."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import polars as pl

from sse_forensics.facts.signals import STREAM_GAP

Key = tuple[int, int]
Slices = Callable[[], Iterator[tuple[int, pl.DataFrame]]]

_CARRIES = pl.col("id_field").fill_null("") != ""
# The events whose ID order is judged: an ID, not a signal.
CONSIDERED = _CARRIES & (pl.col("kind") != "signal")
_OUTLIER = CONSIDERED & pl.col("arithmetic") & pl.col("seq").is_null()
_ORIGIN = ("o_id", "o_src", "o_num", "o_ts", "o_kind")


class Tally:
    """Per stream (``conn_id, ex_index``): its events (``n``), data events, first and last
    ID carried, the outliers (IDs that do not fit an arithmetic scheme) and where the first
    one was seen; counted slice by slice and added up."""

    def __init__(self) -> None:
        self.parts: list[pl.DataFrame] = []

    def feed(self, part: pl.DataFrame) -> None:
        self.parts.append(
            part.group_by("conn_id", "ex_index", maintain_order=True).agg(
                pl.len().alias("n"),
                (pl.col("kind") == "data").sum().alias("data"),
                pl.col("id_field").filter(_CARRIES).first().alias("first_id"),
                pl.col("id_field").filter(_CARRIES).last().alias("last_id"),
                _OUTLIER.sum().alias("outliers"),
                pl.col("id_field").filter(_OUTLIER).first().alias("o_id"),
                pl.col("first_src").filter(_OUTLIER).first().alias("o_src"),
                pl.col("first_num").filter(_OUTLIER).first().alias("o_num"),
                pl.col("first_ts").filter(_OUTLIER).first().alias("o_ts"),
                pl.col("first_kind").filter(_OUTLIER).first().alias("o_kind"),
            )
        )

    def result(self) -> pl.DataFrame:
        if len(self.parts) == 1:
            return self.parts[0]
        found = pl.col("outliers") > 0
        return (
            pl.concat(self.parts, how="vertical_relaxed")
            .group_by("conn_id", "ex_index", maintain_order=True)
            .agg(
                pl.col("n").sum(),
                pl.col("data").sum(),
                pl.col("first_id").drop_nulls().first(),
                pl.col("last_id").drop_nulls().last(),
                pl.col("outliers").sum(),
                *(pl.col(c).filter(found).first() for c in _ORIGIN),
            )
        )


# A run of counters starts where the stream (``rank``) or the prefix changes: the keyed
# events hold each stream's events together (rank, position order), so runs are numbered
# over the slice (no window per stream; one group per run).
_RUN_STARTS = (pl.col("rank") != pl.col("rank").shift(1)) | (
    pl.col("prefix") != pl.col("prefix").shift(1)
)


def _numbered(part: pl.DataFrame) -> pl.DataFrame:
    """``rank, conn_id, ex_index, prefix, seq`` of the events of ``part`` whose counter
    :class:`Jumps` follows (an ID with a key, not a signal). The few columns read are
    selected before any filter: a filter copies every column it keeps."""
    return (
        part.lazy()
        .filter(CONSIDERED & pl.col("seq").is_not_null())
        .select("rank", "conn_id", "ex_index", "prefix", "seq")
        .collect()
    )


class Jumps:
    """Streams :func:`~.gaps.live_gaps` could find a gap in by their counters: one that
    jumps past its high-water mark within a run of one prefix (``gaps._advances``), or a
    ``stream-gap`` signal. The run in progress (its stream, prefix and high-water mark) is
    handed on from slice to slice."""

    def __init__(self) -> None:
        self.found: set[Key] = set()
        self.carried: pl.DataFrame | None = None  # the run in progress: its last row, max seq

    def feed(self, part: pl.DataFrame) -> None:
        numbered = _numbered(part)
        self.found.update(
            part.select("conn_id", "ex_index", "kind", "event")
            .filter((pl.col("kind") == "signal") & (pl.col("event") == STREAM_GAP))
            .select("conn_id", "ex_index")
            .unique()
            .iter_rows()
        )
        if not numbered.height:
            return
        if self.carried is not None:
            numbered = pl.concat([self.carried, numbered], how="vertical_relaxed")
        numbered = numbered.with_columns(_RUN_STARTS.fill_null(True).cum_sum().alias("run"))
        high = pl.col("seq").cum_max().shift(1).over("run")
        jumps = numbered.filter(pl.col("seq") > high + 1).select("conn_id", "ex_index").unique()
        self.found.update(jumps.iter_rows())
        self.carried = numbered.filter(pl.col("run") == pl.col("run").last()).select(
            pl.col("rank", "conn_id", "ex_index", "prefix").last(), pl.col("seq").max()
        )


ORDER_SCHEMA = {"row": pl.UInt32, "id_order": pl.String, "prev_row": pl.UInt32}


def considered(part: pl.DataFrame, offset: int, columns: tuple[str, ...]) -> pl.DataFrame:
    """``row`` and ``columns`` of the events of one slice whose ID order is judged (an ID,
    not a signal); ``row`` counts over the whole table (``offset``: the slice's first)."""
    return (
        part.lazy()
        .with_row_index("row", offset=offset)
        .filter(CONSIDERED)
        .select("row", *columns)
        .collect()
    )


class Order:
    """``row, id_order, prev_row`` of the events whose ID repeats or goes backwards within
    their stream (``rank``): a counter at or below the one before it under the same prefix
    (told slice by slice, the previous judged event handed on), or, where either of the two
    has no key, an ID seen earlier in the stream. Those are found after the pass, among the
    few events that need it (:meth:`result`): no hash of every event's ID is held."""

    def __init__(self) -> None:
        self.flags: list[pl.DataFrame] = [pl.DataFrame(schema=ORDER_SCHEMA)]
        self.unkeyed: list[pl.DataFrame] = []  # row, rank, id_field: judged by earlier IDs
        self.carried: pl.DataFrame | None = None  # the last judged event of the slices before

    def feed(self, part: pl.DataFrame, offset: int) -> None:
        c = considered(part, offset, ("rank", "id_field", "prefix", "seq"))
        if not c.height:
            return
        last = c.tail(1)
        if self.carried is not None:
            c = pl.concat([self.carried, c], how="vertical_relaxed")
        same = pl.col("rank") == pl.col("rank").shift(1)
        c = c.with_columns(
            pl.when(same).then(pl.col("prefix").shift(1)).alias("p_prefix"),
            pl.when(same).then(pl.col("seq").shift(1)).alias("p_seq"),
            pl.when(same).then(pl.col("row").shift(1)).alias("p_row"),
        )
        if self.carried is not None:
            c = c.slice(1)
        self.carried = last
        keyed_pair = pl.col("seq").is_not_null() & pl.col("p_seq").is_not_null()
        back = (
            keyed_pair
            & (pl.col("prefix") == pl.col("p_prefix"))
            & (pl.col("seq") <= pl.col("p_seq"))
        )
        repeat_or_back = (
            pl.when(pl.col("seq") == pl.col("p_seq"))
            .then(pl.lit("repeat"))
            .otherwise(pl.lit("backwards"))
        )
        self.flags.append(
            c.filter(back).select(
                "row", repeat_or_back.alias("id_order"), pl.col("p_row").alias("prev_row")
            )
        )
        self.unkeyed.append(
            c.filter(~keyed_pair & pl.col("p_row").is_not_null()).select("row", "rank", "id_field")
        )

    def result(self, slices: Slices) -> pl.DataFrame:
        """The flags; ``slices`` reads the events again (``rank``, ``id_field``, ``kind``)
        when an event without a key pair must be looked up among the earlier ones."""
        unkeyed = pl.concat(self.unkeyed) if self.unkeyed else pl.DataFrame()
        if unkeyed.height:
            wanted = unkeyed.select("rank", "id_field").unique()
            by = ["rank", "id_field"]
            firsts = [
                considered(part, offset, ("rank", "id_field"))
                .join(wanted, on=by, how="semi")
                .group_by(by)
                .agg(pl.col("row").min().alias("first_row"))
                for offset, part in slices()
            ]
            first = pl.concat(firsts).group_by(by).agg(pl.col("first_row").min())
            self.flags.append(
                unkeyed.join(first, on=by, how="left")
                .filter(pl.col("first_row") < pl.col("row"))
                .select(
                    "row", pl.lit("repeat").alias("id_order"), pl.col("first_row").alias("prev_row")
                )
            )
        return pl.concat(self.flags, how="vertical_relaxed").sort("row")
