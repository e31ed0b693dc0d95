"""The fast path parses the concatenated event-stream heads a piece at a time, cut after
blank lines (issue 16: one stream of ten million events must not cost the columnar parser's
working arrays for all of them at once). The pieces must give what one call gives: every
event, comment and anomaly at the same offsets, whatever the cut (CR, CRLF and LF line
ends, invalid UTF-8, NUL in an id, events longer than a piece)."""

from __future__ import annotations

import random

import numpy as np
import polars as pl
import pytest

from sse_forensics.reassembly.fast import sse as fsse

PARTS = [
    *(b"id: 1\n", b"data: x\n", b"\n", b"\r\n", b"\r", b": c\n", b"event: e\n", b"retry: 5\n"),
    *(b"data: \xff\n", b"id: a\x00b\n", b"data:" + b"y" * 3000 + b"\n", b"\n\n", b"\xe2\x82\xac"),
    b"retry: 99999999999999999999999\n",
]


def _parse_head_pieces(heads: bytes) -> tuple[pl.DataFrame, np.ndarray, pl.DataFrame]:
    """What the pieces of ``heads`` (``fsse._head_pieces``) give, offsets shifted back."""
    events, comments, anomalies = [], [], []
    whole = fsse.Heads(heads, np.zeros(1, dtype=np.int64), np.array([len(heads)], dtype=np.int64))
    for lo, _hi, ev, cm, an in fsse._head_pieces(whole):
        events.append(ev.with_columns(pl.col("start") + lo, pl.col("end") + lo))
        comments.append(cm + lo)
        anomalies.append(an.with_columns(pl.col(c) + lo for c in ("start", "end") if c in an))
    return pl.concat(events), np.concatenate(comments), pl.concat(anomalies)


@pytest.mark.parametrize("seed", range(12))
def test_pieces_parse_as_the_whole(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(seed)
    heads = b"".join(rng.choice(PARTS) for _ in range(rng.randint(200, 1500)))
    events, comments, anomalies = fsse._parse_heads(heads)
    monkeypatch.setattr(fsse, "HEAD_PIECE", rng.choice([64, 500, 4096]))
    got_events, got_comments, got_anomalies = _parse_head_pieces(heads)
    # ``id`` (the ID buffer) is recomputed per body by parse_bodies, never read from here.
    assert got_events.drop("id").equals(events.drop("id"))
    assert np.array_equal(got_comments, comments)
    assert got_anomalies.equals(anomalies)


BODY_PARTS = [
    *(b"id: 1\n", b"id: 2\n", b"data: x\n", b"\n", b"\r\n", b": c\n", b"event: endpoint\n"),
    *(b'data: {"result": {"protocolVersion": "2025-06-18"}}\n', b"data: y" * 50 + b"\n"),
    *(b"retry: 5\n", b"data: \xff\n", b"id: a\x00b\n", b"retry: 99999999999999999999999\n"),
]


def _bodies(rng: random.Random) -> fsse.BodySource:
    """Bodies of random parts (many of them without an ``id``: the ID buffer carries over a
    cut), some with an unterminated tail, laid out in chunks of a few bytes."""
    bodies = [
        b"".join(rng.choice(BODY_PARTS[:9]) for _ in range(rng.randint(0, 120)))
        + rng.choice([b"", b"", b"data: tail\n", b": open\nid: 9\n", b"data: \xff"])
        for _ in range(rng.randint(1, 12))
    ]
    if rng.random() < 0.5:  # a body the exact path must read
        bodies[rng.randrange(len(bodies))] += rng.choice(BODY_PARTS[9:]) + b"\n"
    joined = b"".join(bodies)
    cuts = sorted({0, len(joined), *rng.sample(range(len(joined) + 1), min(len(joined), 40))})
    starts = np.array(cuts[:-1], dtype=np.int64)
    sizes = np.diff(np.array(cuts, dtype=np.int64))
    lens = np.array([len(b) for b in bodies], dtype=np.int64)
    return fsse.BodySource(joined, starts, sizes, lens)


@pytest.mark.parametrize("seed", range(10))
def test_bodies_in_pieces_read_as_one(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """parse_bodies gives the same events (ID buffer and positions carried over the cuts,
    tails after their body's last head event), comments, trailing bytes, refusals,
    endpoint and version data whether the heads are one piece or many (issue 16)."""
    rng = random.Random(seed)
    source = _bodies(rng)
    whole = fsse.parse_bodies(source, max_event_bytes=300)
    [one] = list(whole.pieces())
    monkeypatch.setattr(fsse, "HEAD_PIECE", rng.choice([40, 200, 700]))
    cut = fsse.parse_bodies(source, max_event_bytes=300)
    pieces = list(cut.pieces())
    assert len(pieces) > 1 or len(cut.heads) <= fsse.HEAD_PIECE
    assert pl.concat(pieces).equals(one)
    assert pl.concat(list(cut.pieces())).equals(one)  # read again: the same
    assert np.array_equal(cut.comments, whole.comments)
    assert cut.trailing == whole.trailing
    assert cut.refused == whole.refused
    assert cut.endpoints == whole.endpoints
    assert cut.versions == whole.versions
    assert one.filter(pl.col("position") == 0).height == one["body"].n_unique()


@pytest.mark.parametrize("seed", range(6))
def test_gather_in_spans(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """``gather`` picks the same bytes whatever span one mask covers (a range longer than a
    span, ranges touching, empty ones)."""
    rng = random.Random(seed)
    buf = bytes(rng.randrange(256) for _ in range(20_000))
    cuts = sorted(rng.sample(range(len(buf) + 1), 400))
    starts = np.array(cuts[0::2], dtype=np.int64)
    sizes = np.array(cuts[1::2], dtype=np.int64) - starts
    sizes[rng.randrange(len(sizes))] = 0
    want = b"".join(buf[s : s + n] for s, n in zip(starts.tolist(), sizes.tolist(), strict=True))
    for span in (1, 97, 5000, 1 << 20):
        monkeypatch.setattr(fsse, "GATHER_SPAN", span)
        assert bytes(fsse.gather(buf, starts, sizes)) == want
    monkeypatch.setattr(fsse, "JOIN_MEAN", 0)  # the ranges joined as slices
    assert bytes(fsse.gather(buf, starts, sizes)) == want


def test_gather_joins_long_ranges(monkeypatch: pytest.MonkeyPatch) -> None:
    """Ranges of ``JOIN_MEAN`` bytes or more on average are joined as slices: no mask over
    their span, no temporary of the result's size (issue 9: their fresh pages were a sixth
    of the fast path's page faults); shorter ones are masked."""
    buf = bytes(range(256)) * 400
    starts = np.arange(0, len(buf) - 300, 300, dtype=np.int64)
    sizes = np.full(len(starts), 200, dtype=np.int64)
    want = b"".join(buf[s : s + 200] for s in starts.tolist())
    masked: list[int] = []
    real = fsse._masked

    def spy(src: np.ndarray, at: np.ndarray, n: np.ndarray) -> np.ndarray:
        masked.append(len(at))
        return real(src, at, n)

    monkeypatch.setattr(fsse, "_masked", spy)
    assert fsse.gather(buf, starts, sizes) == want
    assert masked == []
    assert bytes(fsse.gather(buf, starts, sizes // 4)) == b"".join(
        buf[s : s + 50] for s in starts.tolist()
    )
    assert masked == [len(starts)]


def test_heads_read_in_place() -> None:
    """``Heads`` reads stretches of its ranges' concatenation as that concatenation's
    slices (a stretch inside one range, across many, clipped at the end)."""
    rng = random.Random(5)
    buf = bytes(rng.randrange(256) for _ in range(5000))
    cuts = sorted(rng.sample(range(1, len(buf)), 300))
    starts = np.array(cuts[0::2], dtype=np.int64)
    sizes = np.array(cuts[1::2], dtype=np.int64) - starts
    heads = fsse.Heads(buf, starts, sizes)
    whole = b"".join(buf[s : s + n] for s, n in zip(starts.tolist(), sizes.tolist(), strict=True))
    assert len(heads) == len(whole)
    for _ in range(300):
        lo = rng.randrange(len(whole))
        hi = lo + rng.randrange(1, 400)
        assert heads.read(lo, hi) == whole[lo:hi]


@pytest.mark.parametrize("cuts", [3, 12])
def test_short_heads_are_parsed_once(cuts: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Heads of at most ``KEPT_PIECES`` pieces are parsed once: the events of the first
    read are read again from memory (issue 9). Longer heads are parsed again piece by piece
    (issue 16). Either way every read gives the same events."""
    source = _bodies(random.Random(3))
    whole = fsse.parse_bodies(source, max_event_bytes=300)
    [one] = list(whole.pieces())
    piece = len(whole.heads) // cuts  # heads of about ``cuts`` pieces
    calls: list[int] = []
    parse = fsse.parse_body
    assert parse is not None

    def counted(body: bytes, **kwargs: object) -> object:
        calls.append(len(body))
        return parse(body, **kwargs)

    monkeypatch.setattr(fsse, "parse_body", counted)
    monkeypatch.setattr(fsse, "HEAD_PIECE", piece)
    parsed = fsse.parse_bodies(source, max_event_bytes=300)
    first = len(calls)
    long_heads = len(parsed.heads) > fsse.KEPT_PIECES * piece
    assert long_heads == (cuts > fsse.KEPT_PIECES)
    assert first > 1
    for _ in range(2):
        assert pl.concat(list(parsed.pieces())).equals(one)
    assert len(calls) == (3 * first if long_heads else first)
