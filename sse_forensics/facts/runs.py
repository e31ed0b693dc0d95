"""Counter keys as runs (issue 16): the counter values a root's streams carried, per
``root, prefix``, as runs of consecutive values (``first``, ``last``, both included), so a
stream of ten million IDs counting up costs a few rows, not one per event.

A run table is *normalised* when the runs of each ``root, prefix`` neither overlap nor
touch (sorted by ``first``): the values a root carried, each once, as the fewest runs — what
the cross-session pass's counter scope (docs/profile.md, "Event IDs") counts: each root's
values (``n``) and how many of them another root of its group carries too (``shared``).
Counter values are 64-bit integers (``facts.ids.counter``): no step here adds one to a
value that may be the largest (the arithmetic stays within Int64).
"""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl

from sse_forensics.evidence.store import constant_value
from sse_forensics.facts.ids import INT64_MAX


def _follows(value: pl.Expr, before: pl.Expr) -> pl.Expr:
    """``value == before + 1``, false where ``before`` is the largest value (or null)."""
    return pl.when(before < INT64_MAX).then(value == before + 1).otherwise(False).fill_null(False)


def runs_of(keys: pl.DataFrame) -> pl.DataFrame:
    """``root, prefix, first, last``: ``keys`` (``root, prefix, seq``, one chunk of a
    partition's keyed events in order) cut into runs where the root or prefix changes or
    ``seq`` does not step up by one. Not normalised: a repeat or a step back starts a new
    run (:func:`normalised` merges them)."""
    same = [c for c in ("root", "prefix") if constant_value(keys.get_column(c))[0]]
    seq = pl.col("seq")
    breaks = ~_follows(seq, seq.shift(1))
    for c in ("root", "prefix"):
        if c not in same:
            breaks = breaks | pl.col(c).ne_missing(pl.col(c).shift(1))
    starts = keys.select(breaks.alias("b")).to_series().arg_true()
    ends = pl.concat([starts.slice(1) - 1, pl.Series([keys.height - 1], dtype=starts.dtype)])
    head = keys.select("root", "prefix", pl.col("seq").alias("first"))[starts]
    return head.with_columns(keys.get_column("seq").gather(ends).alias("last"))


def normalised(runs: pl.DataFrame, by: Sequence[str] = ("root", "prefix")) -> pl.DataFrame:
    """``runs`` (``*by, first, last``) merged per ``by`` where they overlap or touch: every
    value once, as the fewest runs; sorted by ``by`` and ``first``, or in their order when
    each key's runs already rise apart."""
    key = list(by)
    if not runs.height:
        return runs.select(*key, "first", "last")
    first = pl.col("first")
    # As they are when each key's runs already rise apart, row by row (values that never
    # count up one by one: no sorted copy of millions of them).
    before = pl.col("last").shift(1)
    if not all(constant_value(runs.get_column(c))[0] for c in key):
        before = before.over(key)  # the key's run before, in row order
    apart = before.is_null() | ((first > before) & ~_follows(first, before))
    if runs.select(apart.all()).item():
        return runs.select(*key, "first", "last")
    ordered = runs.select(*key, "first", "last").sort([*key, "first"])
    reach = pl.col("last").cum_max().shift(1).over(key)  # the furthest run before
    starts = reach.is_null() | ((first > reach) & ~_follows(first, reach))
    return (
        ordered.with_columns(starts.cum_sum().alias("_run"))
        .group_by([*key, "_run"], maintain_order=True)
        .agg(first.first(), pl.col("last").max())
        .drop("_run")
    )


def _lengths(first: pl.Expr, last: pl.Expr) -> pl.Expr:
    """Values in ``[first, last]`` (a run of values seen: never more than the events)."""
    return (last - first + 1).cast(pl.Int64)


def shares(runs: pl.DataFrame) -> pl.DataFrame:
    """``g, root, n, shared``: each root's values (``n``) and how many of them another
    root of its group ``g`` carries too (``shared``). ``runs``: ``g, root, prefix, first,
    last``, normalised per ``root, prefix`` (a root is in one group).

    Sorted by ``first`` within ``g, prefix``, the part of a run the runs before it already
    reach is carried twice (by two roots: a root's own runs never overlap); those parts
    merged are the values of the group more than one root carries, and each run counts
    its values among them (a backward as-of search on the merged parts, with their
    lengths summed before each)."""
    group = ["g", "prefix"]
    n = runs.group_by(["g", "root"]).agg(_lengths(pl.col("first"), pl.col("last")).sum().alias("n"))
    ordered = _near_others(runs).sort([*group, "first"])
    reach = pl.col("last").cum_max().shift(1).over(group).alias("_reach")
    twice = (
        ordered.with_columns(reach)
        .filter(pl.col("_reach") >= pl.col("first"))
        .select(*group, "first", pl.min_horizontal("last", "_reach").alias("last"))
        .pipe(normalised, group)
    )
    if not twice.height:
        return n.with_columns(pl.lit(0, pl.Int64).alias("shared"))
    twice = twice.with_columns(
        (_lengths(pl.col("first"), pl.col("last")).cum_sum().over(group)).alias("_upto")
    ).sort("first")

    def upto(column: str) -> pl.DataFrame:
        """Per run, the twice-carried values up to its ``column`` (included), and whether
        its ``column`` itself is one."""
        at = ordered.select(*group, "root", pl.col(column).alias("_at")).with_row_index("_r")
        hit = at.sort("_at").join_asof(
            twice.rename({"first": "t_first", "last": "t_last"}),
            left_on="_at",
            right_on="t_first",
            by=group,
            strategy="backward",
            check_sortedness=False,
        )
        inside = pl.col("_at") <= pl.col("t_last")
        return hit.select(
            "_r",
            "g",
            "root",
            pl.when(pl.col("t_first").is_null())
            .then(0)
            .when(inside)
            .then(pl.col("_upto") - (pl.col("t_last") - pl.col("_at")))
            .otherwise(pl.col("_upto"))
            .alias("_v"),
            inside.fill_null(False).alias("_in"),
        ).sort("_r")

    lo, hi = upto("first"), upto("last")
    # Within [first, last]: those up to last, less those up to first, plus first itself.
    per_run = hi.select(
        "g",
        "root",
        (pl.col("_v") - lo.get_column("_v") + lo.get_column("_in").cast(pl.Int64)).alias("s"),
    )
    counted = per_run.group_by(["g", "root"]).agg(pl.col("s").sum().alias("shared"))
    return n.join(counted, on=["g", "root"], how="left").with_columns(pl.col("shared").fill_null(0))


def _near_others(runs: pl.DataFrame) -> pl.DataFrame:
    """The runs of ``runs`` (``g, root, prefix, first, last``) within the span of the other
    roots of their group: only those can share a value (a root alone in its group, or a
    stream of millions of values beside a few, is not sorted nor searched whole)."""
    bounds = runs.group_by(["g", "root"]).agg(
        pl.col("first").min().alias("lo"), pl.col("last").max().alias("hi")
    )
    if bounds.height == bounds.get_column("g").n_unique():  # every root alone
        return runs.clear()

    def two(column: str, descending: bool) -> pl.DataFrame:
        return (
            bounds.sort(column, descending=descending)
            .group_by("g", maintain_order=True)
            .agg(pl.col("root").head(2).alias(f"{column}_r"), pl.col(column).head(2))
        )

    def other(column: str) -> pl.Expr:
        """The least ``lo`` (greatest ``hi``) of another root of the group: the group's,
        unless it is this root's own, then the next one (none when alone)."""
        mine = pl.col(f"{column}_r").list.get(0) == pl.col("root")
        values = pl.col(f"{column}_v")
        return (
            pl.when(mine)
            .then(values.list.get(1, null_on_oob=True))
            .otherwise(values.list.get(0))
            .alias(column)
        )

    spans = (
        bounds.select("g", "root")
        .join(two("lo", False).rename({"lo": "lo_v"}), on="g")
        .join(two("hi", True).rename({"hi": "hi_v"}), on="g")
        .select("root", other("lo"), other("hi"))
        .drop_nulls()
    )
    roots = spans.get_column("root")
    lo = pl.col("root").replace_strict(roots, spans.get_column("lo"), default=None)
    hi = pl.col("root").replace_strict(roots, spans.get_column("hi"), default=None)
    near = (pl.col("last") >= lo) & (pl.col("first") <= hi)
    return runs.filter(near.fill_null(False))


def expanded(runs: pl.DataFrame) -> pl.DataFrame:
    """``g, prefix, seq``: every value of ``runs`` (``g, prefix, first, last``), one row
    each (counted from ``first``: the largest value has no successor to stop at)."""
    return (
        runs.select(
            "g",
            "prefix",
            "first",
            pl.int_ranges(0, _lengths(pl.col("first"), pl.col("last")), dtype=pl.Int64).alias("k"),
        )
        .explode("k")
        .select("g", "prefix", (pl.col("first") + pl.col("k")).alias("seq"))
    )
