"""Bytes of whole lines → a polars frame with one row per line, at CSV-reader speed."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

import polars as pl

if TYPE_CHECKING:
    from polars._typing import PolarsDataType


def split_lines(
    data: bytes, separator: str, ncols: int, *, rows: int | None = None
) -> pl.DataFrame:
    """One row per line of ``data`` (blank lines too, as nulls), split at ``separator``
    into ``ncols`` columns ``s0``… plus a sentinel column that is non-null when a line has
    more separators. No quoting: nothing in a line can make it span two rows. ``rows``:
    the number of lines, when the caller has counted them (saves a pass over ``data``)."""
    names: dict[str, PolarsDataType] = {f"s{i}": pl.String for i in range(ncols + 1)}

    def read(encoding: Literal["utf8", "utf8-lossy"]) -> pl.DataFrame:
        return pl.read_csv(
            data,
            separator=separator,
            quote_char=None,
            has_header=False,
            schema=names,
            truncate_ragged_lines=True,
            missing_columns="insert",
            # Without it, polars refuses a chunk whose *first* line has more separators
            # than the schema has columns (later such lines are truncated): that line is
            # to read as any other, the sentinel column telling it apart.
            extra_columns="ignore",
            raise_if_empty=False,
            encoding=encoding,
        )

    try:
        df = read("utf8")
    except pl.exceptions.ComputeError:
        # Invalid UTF-8 somewhere: the lossy decoder is ~40% slower, so only on demand.
        df = read("utf8-lossy")
    expected = rows if rows is not None else data.count(b"\n") + (not data.endswith(b"\n"))
    if df.height == expected:
        return df
    # Not seen in practice; kept so that a row always is a line (line numbers cite it).
    lines = data.decode("utf-8", "replace").split("\n")
    if data.endswith(b"\n"):
        lines.pop()
    parts = pl.Series("line", lines).str.split_exact(separator, ncols).struct.unnest()
    return parts.select(
        pl.col(c).replace("", None).alias(n) for c, n in zip(parts.columns, names, strict=True)
    )
