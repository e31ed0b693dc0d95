"""Hypothesis strategies that damage real captures: the fuzzers' inputs."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import strategies as st


@st.composite
def mutated_capture(draw: st.DrawFn, samples: list[Path]) -> bytes:
    """One of ``samples`` with bytes flipped, a range cut or duplicated, or truncated."""
    if not samples:
        pytest.skip("no samples")
    data = bytearray(draw(st.sampled_from(samples)).read_bytes())
    for _ in range(draw(st.integers(0, 8))):
        at = draw(st.integers(0, len(data) - 1))
        data[at] = draw(st.integers(0, 255))
    action = draw(st.sampled_from(["none", "truncate", "cut", "duplicate"]))
    a = draw(st.integers(4, len(data)))
    b = draw(st.integers(a, min(len(data), a + 400)))
    if action == "truncate":
        del data[a:]
    elif action == "cut":
        del data[a:b]
    elif action == "duplicate":
        data[a:a] = data[a:b]
    return bytes(data)
