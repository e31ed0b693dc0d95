"""The keys other streams took (``facts.streams.CounterExclusions``): right, and built with
Python work that grows with the logical streams, not with their events (issue 9: no per-row
Python loop). Counted in lines run, not seconds, as ``test_scaling_shape`` counts."""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import polars as pl

from sse_forensics.facts import streams as streams_module
from sse_forensics.facts.streams import CounterExclusions

FACTS = str(Path(streams_module.__file__).parent)
STREAMS = 4  # two sessions of two logical streams each


class _Stream:
    """A stand-in for the records ``CounterExclusions`` reads (hashed by identity, as
    ``StreamRecord``): its own root."""

    def __init__(self, n: int) -> None:
        self.session = SimpleNamespace(session_id=f"s{n % 2}")
        self.connection = SimpleNamespace(server=("10.0.0.1", 80))
        self.exchange = SimpleNamespace(connection_id=n, index=0)
        self.logical = self


def _streams() -> list[Any]:
    return [_Stream(n) for n in range(STREAMS)]


def _keyed(per_stream: int) -> pl.DataFrame:
    """Stream ``n`` carried the counter values ``n, n + 4, n + 8, ...`` (prefix ``""``)."""
    conns = [n for n in range(STREAMS) for _ in range(per_stream)]
    return pl.DataFrame(
        {
            "session_id": [f"s{c % 2}" for c in conns],
            "root_conn": conns,
            "root_index": [0] * len(conns),
            "prefix": [""] * len(conns),
            "seq": [c + STREAMS * k for c in range(STREAMS) for k in range(per_stream)],
        },
        schema_overrides={"root_conn": pl.Int64, "root_index": pl.Int64, "seq": pl.Int64},
    )


def _lines_and_taken(per_stream: int) -> tuple[int, list[list[int]]]:
    """Lines of ``sse_forensics/facts`` run to ask every stream's taken keys, and each
    stream's taken values (all of them: ``between`` over the whole range)."""
    streams = _streams()
    exclusions = CounterExclusions(streams, {"s0", "s1"}, {}, _keyed(per_stream))
    count = 0

    def line(frame, event, arg):
        nonlocal count
        count += event == "line"
        return line

    def call(frame, event, arg):
        return line if frame.f_code.co_filename.startswith(FACTS) else None

    sys.settrace(call)
    try:
        taken = [exclusions.get(s) for s in streams]
    finally:
        sys.settrace(None)
    return count, [t.between("", 0, 10**9) for t in taken]


def test_each_stream_is_told_what_the_other_streams_of_its_session_took() -> None:
    _, taken = _lines_and_taken(3)
    # Session s0 holds streams 0 and 2, s1 streams 1 and 3.
    assert taken == [[2, 6, 10], [3, 7, 11], [0, 4, 8], [1, 5, 9]]


def test_building_the_counter_groups_does_not_walk_the_events() -> None:
    """Twice the events on the same streams: the same Python work (a loop over each
    session's key rows, as this was, runs twice the lines)."""
    small, _ = _lines_and_taken(200)
    large, _ = _lines_and_taken(400)
    assert large == small, (small, large)
