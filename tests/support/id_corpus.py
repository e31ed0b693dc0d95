"""Event IDs that exercise every reading of an ID (:class:`~sse_forensics.facts.ids.IdCodec`
and the cross-session pass's vectorised readings): leading zeros, over-long and past-64-bit
counters, digits of other scripts, a final newline (which Python's ``re`` reads differently
from polars' engine), separators; and random noise over the characters that matter."""

from __future__ import annotations

import random

import polars as pl

EDGES = [
    *("0", "00", "01", "1", "12\n", "\n", "\u0663", "1\u0663", "\u0661\u0662", "-1", "+1"),
    *(" 1", "1 ", "", "1e3", "abc", "9" * 19, "9" * 20, "1" * 19, str(2**63 - 1), str(2**63)),
    *("a_1", "x:7", "7/abc", "1-2-3", "\u00e9_5", "a_\u0663", "a_12\n", "0_0", "a_" + "9" * 25),
]


def id_corpus() -> pl.Series:
    """:data:`EDGES` and 3,000 random IDs (seeded: the same every run)."""
    rng = random.Random(16)
    alphabet = "0123456789_:/-ab\n\u0663 "
    noise = ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 24))) for _ in range(3000)]
    return pl.Series([*EDGES, *noise], dtype=pl.String)
