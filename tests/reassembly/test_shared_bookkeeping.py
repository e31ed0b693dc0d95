"""The helpers every reassembly layer shares: sequence arithmetic (RFC 9293 §3.4) and the
origin marks that say which frame each byte came from."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from sse_forensics.provenance import Origin
from sse_forensics.reassembly.receive_buffer import (
    ReceiveBuffer,
    marks_from,
    origin_at,
    origins_in,
    runs,
)
from sse_forensics.reassembly.seq import SEQ_HALF, SEQ_MOD, seq_add, seq_after, seq_diff

SEQ = st.integers(0, SEQ_MOD - 1)
DISTANCE = st.integers(-SEQ_HALF, SEQ_HALF - 1)


@given(SEQ, DISTANCE)
def test_sequence_numbers_wrap_and_unwrap(seq: int, distance: int) -> None:
    later = seq_add(seq, distance)
    assert 0 <= later < SEQ_MOD
    assert seq_diff(later, seq) == distance
    assert seq_after(later, seq) == (distance > 0)


def test_sequence_arithmetic_is_the_same_on_arrays() -> None:
    a = np.array([0, 5, SEQ_MOD - 1, 10, SEQ_HALF], dtype=np.int64)
    b = np.array([SEQ_MOD - 3, 5, 2, SEQ_HALF + 11, 0], dtype=np.int64)
    assert list(seq_diff(a, b)) == [seq_diff(int(x), int(y)) for x, y in zip(a, b, strict=True)]
    assert list(seq_diff(a, b)) == [3, 0, -3, -SEQ_HALF - 1 + SEQ_MOD, -SEQ_HALF]
    assert list(seq_add(a, 3)) == [3, 8, 2, 13, SEQ_HALF + 3]


FRAMES = st.lists(st.binary(min_size=1, max_size=7), min_size=1, max_size=8)


@given(FRAMES, st.data())
def test_marks_cite_the_frame_of_every_byte(frames: list[bytes], data: st.DataObject) -> None:
    buf = ReceiveBuffer()
    owner: list[Origin] = []  # the frame of each byte, the slow way
    for n, frame in enumerate(frames):
        origin = Origin("m.pcap", n, float(n))
        buf.append(frame, origin)
        owner += [origin] * len(frame)
    joined = b"".join(frames)
    size = len(joined)
    start = data.draw(st.integers(0, size))
    end = data.draw(st.integers(start, size))
    pieces = runs(buf.marks, start, end)
    assert [i for lo, hi, _ in pieces for i in range(lo, hi)] == list(range(start, end))
    assert all(owner[i] == origin for lo, hi, origin in pieces for i in range(lo, hi))
    assert all(origin_at(buf.marks, i) == owner[i] for i in range(size))
    assert origins_in(buf.marks, start, end) == tuple(dict.fromkeys(owner[start:end]))
    kept = marks_from(buf.marks, start, size)  # the marks once bytes before start are gone
    assert all(origin_at(kept, i - start) == owner[i] for i in range(start, size))
    taken = buf.take(start)
    assert b"".join(piece for piece, _ in taken) == joined[:start]
    assert bytes(buf.data) == joined[start:]
    assert all(buf.origin_at(i - start) == owner[i] for i in range(start, size))
