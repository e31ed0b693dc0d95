"""The log spill (:class:`sse_forensics.evidence.log_partitions.Spill`) gives back what it
was given: each partition's rows in the order they were added, whatever was written to
disk, with the columns that hold one value in a file left out of it and put back."""

from __future__ import annotations

from pathlib import Path

import polars as pl
from polars.testing import assert_frame_equal

from sse_forensics.evidence.log_partitions import Spill


def _batch(start: int, n: int, source: str) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "session": [f"s{(start + i) % 5}" for i in range(n)],
            "source": [source] * n,  # one value in a batch, two in the scan
            "line": list(range(start, start + n)),
            "ts": [-0.0 if i % 2 else 0.0 for i in range(n)],  # equal, not the same
            "kind": ["line"] * n,
            "empty": pl.Series([None] * n, dtype=pl.String),
            "nan": [float("nan") if i % 3 else 1.0 for i in range(n)],
            "flag": [True] * n,
            "bytes": [b""] * n,
        }
    )


def test_spilled_partitions_read_back_as_added(tmp_path: Path) -> None:
    spill = Spill(4, tmp_path, budget=1 << 10)  # a flush every batch or two
    batches = [_batch(k * 50, 50, "a.log" if k < 3 else "b.log") for k in range(6)]
    for batch in batches:
        spill.add("rows", batch, pl.col("session"))
    spill.flush()  # every row on disk
    whole = pl.concat(batches)
    back = []
    for b in range(4):
        part = spill.load("rows", b)
        if part.height:
            # A partition's rows: whole sessions, in the order added.
            expected = whole.filter(
                pl.col("session").is_in(part.get_column("session").unique().implode())
            )
            assert_frame_equal(part, expected)
            # The bit patterns too: -0.0 stays -0.0, NaN stays NaN.
            assert part["ts"].cast(pl.String).to_list() == expected["ts"].cast(pl.String).to_list()
            back.append(part)
            # Some columns only, constant ones among them.
            assert_frame_equal(
                spill.load("rows", b, ["kind", "line", "empty"]),
                expected.select("kind", "line", "empty"),
            )
            assert_frame_equal(spill.load("rows", b, ["kind"]), expected.select("kind"))
    assert sum(df.height for df in back) == whole.height
    # Constant columns were left out of the files written.
    files = list(tmp_path.glob("*.parquet"))
    assert files
    assert all("kind" not in pl.read_parquet_schema(f) for f in files)


def test_a_float_column_is_constant_only_when_its_bits_are() -> None:
    """min and max call 0.0 and -0.0 equal and skip NaN: neither is one value."""
    from sse_forensics.evidence.store import constant_value

    assert constant_value(pl.Series([0.0, -0.0]))[0] is False
    assert constant_value(pl.Series([1.0, float("nan")]))[0] is False
    assert constant_value(pl.Series([2.5, 2.5], dtype=pl.Float32)) == (True, 2.5)
    assert constant_value(pl.Series([None, None], dtype=pl.Float64)) == (True, None)
