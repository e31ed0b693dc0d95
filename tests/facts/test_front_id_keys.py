"""The vectorised ID readings of the cross-session pass (:mod:`sse_forensics.facts.front`)
agree with :class:`~sse_forensics.facts.ids.IdCodec`, the reference, on every ID: leading
zeros, over-long and past-64-bit counters, digits of other scripts and a final newline
(which Python's ``re`` reads differently from polars' engine), separators."""

from __future__ import annotations

import re

import pytest
from support.id_corpus import id_corpus

from sse_forensics.facts import front
from sse_forensics.facts.ids import COUNTER_FIRST, DEFAULT_PREFIXED, IdCodec


@pytest.mark.parametrize("max_digits", [19, 3])
def test_int_keys_agree_with_the_codec(max_digits: int) -> None:
    ids = id_corpus()
    got = {v: (ok, seq) for v, ok, seq in front._int_keys(ids, max_digits).iter_rows()}
    codec = IdCodec("int", max_digits=max_digits)
    assert len(got) == ids.n_unique()
    for value in ids.unique().to_list():
        key = codec.key(value)
        assert got[value] == (key is not None, key.seq if key else None), repr(value)


@pytest.mark.parametrize("pattern", [DEFAULT_PREFIXED, COUNTER_FIRST, r"^(?P<seq>\d+)$"])
def test_prefixed_matches_agree_with_the_codec(pattern: str) -> None:
    ids = id_corpus()
    rows = front._match_prefixed(ids, pattern, 19).iter_rows()
    got = {v: (m, prefix, seq) for v, m, prefix, seq in rows}
    codec = IdCodec("prefixed", re.compile(pattern), 19)
    assert len(got) == ids.n_unique()
    for value in ids.unique().to_list():
        key = codec.key(value)
        want = (key is not None, key.prefix if key else None, key.seq if key else None)
        assert got[value] == want, repr(value)
