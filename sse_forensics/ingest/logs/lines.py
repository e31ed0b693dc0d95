"""Bytes of whole lines → a polars frame with one row per line, at CSV-reader speed."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

import polars as pl

if TYPE_CHECKING:
    from polars._typing import PolarsDataType


# Leading bytes that polars' CSV reader takes for a gzip, zstd or zlib stream, which it then
# inflates (polars 2.1: gzip, zstd, and "x" followed by one of four zlib flag bytes).
_INFLATED = (b"\x1f\x8b", b"\x28\xb5\x2f\xfd")
_ZLIB_FLAGS = (b"\x01", b"\x5e", b"\x9c", b"\xda")


def read_as_compressed(data: bytes) -> bool:
    """Whether polars would read ``data`` as a compressed stream: a log chunk whose first
    line starts ``x^`` (hostile or not) raised ``OSError: corrupt deflate stream``, or
    worse, would be read as what it inflates to. Such a chunk is split without polars'
    reader (issue 16: one record costs only itself)."""
    return data.startswith(_INFLATED) or (data[:1] == b"x" and data[1:2] in _ZLIB_FLAGS)


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

    expected = rows if rows is not None else data.count(b"\n") + (not data.endswith(b"\n"))
    if not read_as_compressed(data):
        try:
            df = read("utf8")
        except pl.exceptions.ComputeError:
            # Invalid UTF-8 somewhere: the lossy decoder is ~40% slower, so only on demand.
            df = read("utf8-lossy")
        if df.height == expected:
            return df
    # Rare (a chunk polars would inflate; a row count that differs: not seen in practice),
    # kept so that a row always is a line (line numbers cite it).
    lines = data.decode("utf-8", "replace").split("\n")
    if data.endswith(b"\n"):
        lines.pop()
    parts = pl.Series("line", lines).str.split_exact(separator, ncols).struct.unnest()
    return parts.select(
        pl.col(c).replace("", None).alias(n) for c, n in zip(parts.columns, names, strict=True)
    )
