"""The vectorised ID readings of the cross-session pass (:mod:`sse_forensics.facts.front`)
agree with :class:`~sse_forensics.facts.ids.IdCodec`, the reference, on every ID: leading
zeros, over-long and past-64-bit counters, digits of other scripts and a final newline
(which Python's ``re`` reads differently from polars' engine), separators."""

from __future__ import annotations

import random
import re

import polars as pl
import pytest

from sse_forensics.facts import front
from sse_forensics.facts.ids import COUNTER_FIRST, DEFAULT_PREFIXED, IdCodec

EDGES = [
    *("0", "00", "01", "1", "12\n", "\n", "\u0663", "1\u0663", "\u0661\u0662", "-1", "+1"),
    *(" 1", "1 ", "", "1e3", "abc", "9" * 19, "9" * 20, "1" * 19, str(2**63 - 1), str(2**63)),
    *("a_1", "x:7", "7/abc", "1-2-3", "\u00e9_5", "a_\u0663", "a_12\n", "0_0", "a_" + "9" * 25),
]


def _ids() -> pl.Series:
    rng = random.Random(16)
    alphabet = "0123456789_:/-ab\n\u0663 "
    noise = ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 24))) for _ in range(3000)]
    return pl.Series([*EDGES, *noise], dtype=pl.String)


@pytest.mark.parametrize("max_digits", [19, 3])
def test_int_keys_agree_with_the_codec(max_digits: int) -> None:
    ids = _ids()
    got = {v: (ok, seq) for v, ok, seq in front._int_keys(ids, max_digits).iter_rows()}
    codec = IdCodec("int", max_digits=max_digits)
    assert len(got) == ids.n_unique()
    for value in ids.unique().to_list():
        key = codec.key(value)
        assert got[value] == (key is not None, key.seq if key else None), repr(value)


@pytest.mark.parametrize("pattern", [DEFAULT_PREFIXED, COUNTER_FIRST, r"^(?P<seq>\d+)$"])
def test_prefixed_matches_agree_with_the_codec(pattern: str) -> None:
    ids = _ids()
    rows = front._match_prefixed(ids, pattern, 19).iter_rows()
    got = {v: (m, prefix, seq) for v, m, prefix, seq in rows}
    codec = IdCodec("prefixed", re.compile(pattern), 19)
    assert len(got) == ids.n_unique()
    for value in ids.unique().to_list():
        key = codec.key(value)
        want = (key is not None, key.prefix if key else None, key.seq if key else None)
        assert got[value] == want, repr(value)
