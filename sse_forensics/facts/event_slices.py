"""The per-event judgements of :mod:`.columns` fed one slice of a partition's keyed events
at a time, in stream time order, each handing its state on from slice to slice (issue 16: a
stream of ten million events is judged in one pass over its slices, never held whole):
each stream's counts (:class:`Tally`), the streams whose counter jumps or that carry a
``stream-gap`` signal (:class:`Jumps`), the events whose ID repeats or goes back
(:class:`Order`)."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import polars as pl

from sse_forensics.facts.load import CARRIES_ID, CONSIDERED
from sse_forensics.facts.signals import STREAM_GAP

Key = tuple[int, int]
Slices = Callable[[], Iterator[tuple[int, pl.DataFrame]]]

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
                pl.col("id_field").filter(CARRIES_ID).first().alias("first_id"),
                pl.col("id_field").filter(CARRIES_ID).last().alias("last_id"),
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
    """``rank, conn_id, ex_index, prefix, seq, position`` of the events of ``part`` whose
    counter :class:`Jumps` follows (an ID with a key, not a signal). The few columns read
    are selected before any filter: a filter copies every column it keeps."""
    return (
        part.lazy()
        .filter(CONSIDERED & pl.col("seq").is_not_null())
        .select("rank", "conn_id", "ex_index", "prefix", "seq", "position")
        .collect()
    )


_KEYS = ("conn_id", "ex_index")
PAIRS_SCHEMA = {"conn_id": pl.Int64, "ex_index": pl.Int64, "a_pos": pl.Int64, "b_pos": pl.Int64}
OVER_SCHEMA = {"conn_id": pl.Int64, "ex_index": pl.Int64, "over": pl.UInt32, "first": pl.Int64}
SIGNALS_SCHEMA = {
    "conn_id": pl.Int64,
    "ex_index": pl.Int64,
    "position": pl.Int64,
    "stream_gap": pl.Boolean,
    "prefix": pl.String,
    "seq": pl.Int64,
}


class Jumps:
    """Streams :func:`~.gaps.live_gaps` could find a gap in by their counters: one that
    jumps past its high-water mark within a run of one prefix (``gaps._advances``), or a
    ``stream-gap`` signal. The run in progress (its stream, prefix, high-water mark and
    where it was set) is handed on from slice to slice.

    Each jump is also kept as the positions of its two events (``a_pos``: the high-water
    event, ``b_pos``: the one past it), the first ``cap`` of each stream (the
    ``gaps_per_stream`` cap, issue 16): the jumps past them are only counted (``over``,
    with the first one's ``b_pos``), so a stream whose every ID jumps holds ``cap`` pairs,
    not one per event. With the positions of the signal events that say a range dropped or
    took a counter value, that is what judging a stream's live gaps reads of it
    (:mod:`.windows`): nothing else of it is materialised."""

    def __init__(self, cap: int | None = None) -> None:
        self.found: set[Key] = set()
        self.carried: pl.DataFrame | None = None  # the run in progress: its high-water row
        self.cap = cap
        self.pairs: list[pl.DataFrame] = [pl.DataFrame(schema=PAIRS_SCHEMA)]
        self.over: list[pl.DataFrame] = [pl.DataFrame(schema=OVER_SCHEMA)]
        self.signals: list[pl.DataFrame] = [pl.DataFrame(schema=SIGNALS_SCHEMA)]
        self.counted = pl.DataFrame(schema={**dict.fromkeys(_KEYS, pl.Int64), "n": pl.UInt32})

    def feed(self, part: pl.DataFrame) -> None:
        numbered = _numbered(part)
        signals = part.select(*_KEYS, "kind", "event", "position", "prefix", "seq").filter(
            pl.col("kind") == "signal"
        )
        if signals.height:
            # What judging reads of a signal: a stream-gap's event, another's counter value
            # (it took that value); the others are left out (a flood of them: issue 16).
            gap = pl.col("event") == STREAM_GAP
            self.signals.append(
                signals.filter(gap | pl.col("seq").is_not_null()).select(
                    *_KEYS, "position", gap.alias("stream_gap"), "prefix", "seq"
                )
            )
            self.found.update(signals.filter(gap).select(_KEYS).unique().iter_rows())
        if not numbered.height:
            return
        if self.carried is not None:
            numbered = pl.concat([self.carried, numbered], how="vertical_relaxed")
        numbered = numbered.with_columns(_RUN_STARTS.fill_null(True).cum_sum().alias("run"))
        high = pl.col("seq").cum_max().shift(1).over("run")
        numbered = numbered.with_columns(
            high.alias("high"), (high.is_null() | (pl.col("seq") > high)).alias("raises")
        ).with_columns(
            pl.when(pl.col("raises"))
            .then(pl.col("position"))
            .forward_fill()
            .shift(1)
            .over("run")
            .alias("a_pos")
        )
        jumps = numbered.filter(pl.col("seq") > pl.col("high") + 1).select(
            *_KEYS, "a_pos", pl.col("position").alias("b_pos")
        )
        self.found.update(jumps.select(_KEYS).unique().iter_rows())
        self._keep(jumps)
        self.carried = (
            numbered.filter((pl.col("run") == pl.col("run").last()) & pl.col("raises"))
            .tail(1)
            .select("rank", *_KEYS, "prefix", "seq", "position")
        )

    def _keep(self, jumps: pl.DataFrame) -> None:
        """Keep the jumps of ``jumps`` under each stream's cap; count the rest."""
        if not jumps.height:
            return
        if self.cap is None:
            self.pairs.append(jumps)
            return
        ranked = jumps.join(self.counted, on=_KEYS, how="left", maintain_order="left").select(
            *_KEYS,
            "a_pos",
            "b_pos",
            (pl.int_range(pl.len(), dtype=pl.UInt32).over(_KEYS) + pl.col("n").fill_null(0)).alias(
                "k"
            ),
        )
        self.pairs.append(ranked.filter(pl.col("k") < self.cap).select(PAIRS_SCHEMA.keys()))
        self.over.append(
            ranked.filter(pl.col("k") >= self.cap)
            .group_by(_KEYS, maintain_order=True)
            .agg(pl.len().cast(pl.UInt32).alias("over"), pl.col("b_pos").first().alias("first"))
        )
        self.counted = (
            pl.concat(
                [self.counted, jumps.group_by(_KEYS).agg(pl.len().cast(pl.UInt32).alias("n"))]
            )
            .group_by(_KEYS)
            .agg(pl.col("n").sum())
        )

    def jump_pairs(self) -> pl.DataFrame:
        """``conn_id, ex_index, a_pos, b_pos``: the jumps kept, each stream's in order."""
        return pl.concat(self.pairs, how="vertical_relaxed")

    def past_cap(self) -> pl.DataFrame:
        """``conn_id, ex_index, over, first``: per stream, its jumps past the cap and the
        ``b_pos`` of the first of them."""
        return (
            pl.concat(self.over, how="vertical_relaxed")
            .group_by(_KEYS, maintain_order=True)
            .agg(pl.col("over").sum(), pl.col("first").first())
        )

    def signal_positions(self) -> pl.DataFrame:
        """``conn_id, ex_index, position, stream_gap, prefix, seq`` of the signal events
        that are ``stream-gap`` events or carry a counter value, in table order."""
        return pl.concat(self.signals, how="vertical_relaxed")


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


# Each judged ID as a 64-bit hash (polars' own, stable within a process): what is held of
# every event whose ID is looked up among the earlier ones, not the ID itself.
_ID_HASH = pl.col("id_field").hash(0x5EED).alias("h")


class Order:
    """``row, id_order, prev_row`` of the events whose ID repeats or goes backwards within
    their stream (``rank``): a counter at or below the one before it under the same prefix
    (told slice by slice, the previous judged event handed on), or, where either of the two
    has no key, an ID seen earlier in the stream. Those are found after the pass
    (:meth:`result`): by the hash of each ID, then by the IDs of the few events whose hash
    was seen before (issue 16: an opaque stream of a million IDs held every one of them,
    several times over, to find none repeated)."""

    def __init__(self) -> None:
        self.flags: list[pl.DataFrame] = [pl.DataFrame(schema=ORDER_SCHEMA)]
        self.unkeyed: list[pl.DataFrame] = []  # row, rank, h: judged by earlier IDs
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
            c.filter(~keyed_pair & pl.col("p_row").is_not_null()).select("row", "rank", _ID_HASH)
        )

    def result(self, slices: Slices) -> pl.DataFrame:
        """The flags; ``slices`` reads the events again (``rank``, ``id_field``, ``kind``)
        when an event without a key pair must be looked up among the earlier ones: once
        for the first event of each hash, once more for the IDs behind the hashes seen
        before (only if one was)."""
        unkeyed = pl.concat(self.unkeyed) if self.unkeyed else pl.DataFrame()
        if unkeyed.height:
            by = ["rank", "h"]
            first = _first_rows(slices, unkeyed.select(by).unique(), by)
            seen = unkeyed.join(first, on=by).filter(pl.col("first_row") < pl.col("row"))
            if seen.height:
                self.flags.append(_repeats(slices, seen.select("row", *by)))
        return pl.concat(self.flags, how="vertical_relaxed").sort("row")


def _judged_ids(slices: Slices, wanted: pl.DataFrame) -> Iterator[pl.DataFrame]:
    """Per slice, ``row, rank, id_field, h`` of its judged events whose ``rank, h`` is
    one of ``wanted``."""
    for offset, part in slices():
        yield (
            considered(part, offset, ("rank", "id_field"))
            .with_columns(_ID_HASH)
            .join(wanted, on=["rank", "h"], how="semi")
        )


def _first_rows(slices: Slices, wanted: pl.DataFrame, by: list[str]) -> pl.DataFrame:
    """``by, first_row``: the first judged event of each of ``wanted`` (``by`` values)."""
    firsts = [
        part.group_by(by).agg(pl.col("row").min().alias("first_row"))
        for part in _judged_ids(slices, wanted)
    ]
    return pl.concat(firsts).group_by(by).agg(pl.col("first_row").min())


def _repeats(slices: Slices, seen: pl.DataFrame) -> pl.DataFrame:
    """The flags of the events of ``seen`` (``row, rank, h``: a judged event with the hash
    of an earlier one) whose ID itself came earlier in their stream (not only its hash)."""
    rows = pl.concat(list(_judged_ids(slices, seen.select("rank", "h").unique())))
    by = ["rank", "id_field"]
    first = rows.group_by(by).agg(pl.col("row").min().alias("first_row"))
    return (
        seen.select("row")
        .join(rows.select("row", *by), on="row")
        .join(first, on=by)
        .filter(pl.col("first_row") < pl.col("row"))
        .select("row", pl.lit("repeat").alias("id_order"), pl.col("first_row").alias("prev_row"))
    )
