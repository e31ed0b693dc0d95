"""A large plain log file as line-aligned byte ranges, each read by a task of its own
(:mod:`sse_forensics.cluster.logs`, step 1): one file no longer keeps one core busy while
the others wait.

The file is cut into ranges of at most ``range_bytes`` bytes; a range owns the lines that
*start* in its bytes (:class:`LineRange`), so the cuts fall at line ends whatever the cut
points, and each task finds its own cuts (:func:`bounds`) with no word from the others. A
range's first line number is one more than the newlines before it: the sum of the counts
of the ranges before it (:func:`count_newlines`, a pass ~20x quicker than parsing), added
up by the caller. A compressed file cannot be entered mid-stream: it stays one range.

With :mod:`.files`, the only module of the log readers that reads files.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

RANGE_BYTES = 64 << 20
"""Bytes per range of a plain log file read by several tasks: enough ranges of a large file
to keep every worker busy, few enough that each task's fixed cost (detecting the format,
one Parquet file per partition and table) stays small beside its ~2-4 s of parsing."""

_PROBE_BYTES = 64 * 1024
_COUNT_BYTES = 8 << 20


@dataclass(frozen=True, slots=True)
class LineRange:
    """The lines of a plain file that start in bytes ``lo`` to ``hi`` (exclusive; None:
    the end of the file), the first of them numbered ``first_line``. The last of them may
    run past ``hi``: it is read whole."""

    lo: int
    hi: int | None
    first_line: int = 1


def plan_ranges(size: int, range_bytes: int = RANGE_BYTES) -> list[tuple[int, int | None]]:
    """``(lo, hi)`` of each range of a file of ``size`` bytes: as few ranges of at most
    ``range_bytes`` bytes as it takes, all of about the same size; the last one
    open-ended (a log still written to is read to its end, as a whole-file read does)."""
    n = max(1, -(-size // max(1, range_bytes)))
    step = -(-size // n)
    return [(k * step, (k + 1) * step if k < n - 1 else None) for k in range(n)]


def _next_line(fd: int, at: int, limit: int | None = None) -> int | None:
    """The first byte at or after ``at`` that begins a line (0, or the byte after a
    newline), else the end of the file; None when no newline lies in ``at - 1`` to
    ``limit - 1`` (then no line starts before ``limit``)."""
    if at <= 0:
        return 0
    pos = at - 1
    while limit is None or pos < limit - 1:
        size = _PROBE_BYTES if limit is None else min(_PROBE_BYTES, limit - 1 - pos)
        block = os.pread(fd, size, pos)
        if not block:
            return pos  # the end of the file
        nl = block.find(b"\n")
        if nl >= 0:
            return pos + nl + 1
        pos += len(block)
    return None


def bounds(fd: int, lo: int, hi: int | None) -> tuple[int, int | None]:
    """``(start, stop)``: the bytes of the lines that start in ``lo`` to ``hi`` of the
    open file ``fd`` (``stop`` None: to the end); ``start == stop`` when none does. A line
    that runs past ``hi`` belongs to this range: ``stop`` is its end. The next range's
    ``start`` is this one's ``stop``, as both scan for the same newline."""
    start = _next_line(fd, lo, hi)
    if start is None:  # one line runs across the whole range: the range before owns it
        assert hi is not None  # (an open-ended range scans to the end of the file)
        return hi, hi
    if hi is None:
        return start, None
    stop = _next_line(fd, hi)
    assert stop is not None  # unlimited: a newline or the end of the file
    return start, max(start, stop)


def count_newlines(path: str, lo: int, hi: int | None) -> int:
    """The newlines in the lines of ``path`` that start in ``lo`` to ``hi``: what the
    ranges after this one add to their first line number."""
    fd = os.open(path, os.O_RDONLY)
    try:
        start, stop = bounds(fd, lo, hi)
        newlines = 0
        at = start
        while stop is None or at < stop:
            size = _COUNT_BYTES if stop is None else min(_COUNT_BYTES, stop - at)
            block = os.pread(fd, size, at)
            if not block:
                break
            newlines += int(np.count_nonzero(np.frombuffer(block, dtype=np.uint8) == 10))
            at += len(block)
        return newlines
    finally:
        os.close(fd)
