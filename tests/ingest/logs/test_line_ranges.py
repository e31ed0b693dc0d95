"""A plain log file read as byte ranges (``ingest.logs.ranges``): the ranges' lines, each
numbered from the newlines counted before its range, are the whole file's lines — wherever
the cuts fall: inside a line, on a newline, inside a line longer than several ranges, at
the end of a file without a final newline."""

from __future__ import annotations

from pathlib import Path

import pytest

from sse_forensics.errors import ReadError
from sse_forensics.ingest.logs.files import iter_chunks
from sse_forensics.ingest.logs.ranges import LineRange, count_newlines, plan_ranges
from sse_forensics.limits import CapHit, Limits


def _lines(path: Path, limits: Limits, span: LineRange | None = None) -> list[tuple[int, bytes]]:
    """(number, bytes) of every line the reader yields; caps hit counted as lines too."""
    errors: list[ReadError] = []
    out = []
    for chunk in iter_chunks(str(path), errors, chunk_bytes=64, limits=limits, span=span):
        lines = chunk.data.split(b"\n")
        if chunk.data.endswith(b"\n"):
            lines.pop()
        out.extend((chunk.first_line + i, line) for i, line in enumerate(lines))
    out.extend((e.line or 0, b"<cap>") for e in errors if isinstance(e, CapHit))
    return out


def _by_ranges(path: Path, range_bytes: int, limits: Limits) -> list[tuple[int, bytes]]:
    out: list[tuple[int, bytes]] = []
    first = 1
    ranges = plan_ranges(path.stat().st_size, range_bytes)
    for lo, hi in ranges:
        out.extend(_lines(path, limits, LineRange(lo, hi, first)))
        first += count_newlines(str(path), lo, hi)
    return out


LINES = [
    b"short",
    b"",
    b"x" * 300,  # longer than a chunk (64) and than most ranges
    b"a line of some length",
    b"",
    b"",
    b"y" * 40,
    b"last",
]


@pytest.mark.parametrize("final_newline", [True, False])
@pytest.mark.parametrize("range_bytes", [1, 2, 7, 50, 64, 65, 129, 10_000])
def test_ranges_give_the_whole_files_lines(
    tmp_path: Path, range_bytes: int, final_newline: bool
) -> None:
    log = tmp_path / "access.log"
    log.write_bytes(b"\n".join(LINES) + (b"\n" if final_newline else b""))
    limits = Limits()
    whole = _lines(log, limits)
    assert [line for _, line in whole] == LINES
    assert _by_ranges(log, range_bytes, limits) == whole


@pytest.mark.parametrize("range_bytes", [3, 33, 100])
def test_a_line_past_the_cap_is_skipped_by_the_range_it_starts_in(
    tmp_path: Path, range_bytes: int
) -> None:
    """A line over the ``log_line_bytes`` cap is skipped once, by the range it starts in;
    the ranges it runs across read nothing of it."""
    log = tmp_path / "access.log"
    log.write_bytes(b"\n".join(LINES) + b"\n")
    limits = Limits(log_line_bytes=100)
    whole = _lines(log, limits)
    assert (3, b"<cap>") in whole and b"x" * 300 not in [line for _, line in whole]
    assert sorted(_by_ranges(log, range_bytes, limits)) == sorted(whole)


def test_ranges_are_even_and_cover_the_file() -> None:
    assert plan_ranges(10, 64) == [(0, None)]
    assert plan_ranges(0, 64) == [(0, None)]
    assert plan_ranges(130, 64) == [(0, 44), (44, 88), (88, None)]
    assert plan_ranges(128, 64) == [(0, 64), (64, None)]
