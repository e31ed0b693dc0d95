"""The fast path parses the concatenated event-stream heads a piece at a time, cut after
blank lines (issue 16: one stream of ten million events must not cost the columnar parser's
working arrays for all of them at once). The pieces must give what one call gives: every
event, comment and anomaly at the same offsets, whatever the cut (CR, CRLF and LF line
ends, invalid UTF-8, NUL in an id, events longer than a piece)."""

from __future__ import annotations

import random

import numpy as np
import pytest

from sse_forensics.reassembly.fast import sse as fsse

PARTS = [
    *(b"id: 1\n", b"data: x\n", b"\n", b"\r\n", b"\r", b": c\n", b"event: e\n", b"retry: 5\n"),
    *(b"data: \xff\n", b"id: a\x00b\n", b"data:" + b"y" * 3000 + b"\n", b"\n\n", b"\xe2\x82\xac"),
    b"retry: 99999999999999999999999\n",
]


@pytest.mark.parametrize("seed", range(12))
def test_pieces_parse_as_the_whole(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(seed)
    heads = b"".join(rng.choice(PARTS) for _ in range(rng.randint(200, 1500)))
    events, comments, anomalies = fsse._parse_heads(heads)
    monkeypatch.setattr(fsse, "HEAD_PIECE", rng.choice([64, 500, 4096]))
    got_events, got_comments, got_anomalies = fsse._parse_head_pieces(heads)
    # ``id`` (the ID buffer) is recomputed per body by parse_bodies, never read from here.
    assert got_events.drop("id").equals(events.drop("id"))
    assert np.array_equal(got_comments, comments)
    assert got_anomalies.equals(anomalies)
