"""The fast path's TCP flow grouping (``reassembly.fast.tcp.group_flows``): every TCP row
in the group of its 4-tuple, either direction, groups in the order of their first row (the
flow table's order), rows ascending; whether the endpoint pairs fit one integer key or are
numbered first (more than 2**15 endpoints)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest

from sse_forensics.reassembly.fast import tcp
from sse_forensics.reassembly.fast.tcp import group_flows


@dataclass
class _Index:
    """The columns of a packet index that the grouping reads."""

    is_tcp: np.ndarray
    src: np.ndarray
    dst: np.ndarray
    sport: np.ndarray
    dport: np.ndarray


def _expected(index: _Index) -> list[list[int]]:
    groups: dict[tuple[tuple[int, int], tuple[int, int]], list[int]] = {}
    for row in np.flatnonzero(index.is_tcp).tolist():
        a = (int(index.src[row]), int(index.sport[row]))
        b = (int(index.dst[row]), int(index.dport[row]))
        groups.setdefault((min(a, b), max(a, b)), []).append(row)
    return list(groups.values())  # insertion order: by first row


@pytest.mark.parametrize("chunk", [1 << 18, 1, 7, 333])
@pytest.mark.parametrize("endpoints", [50, 40_000])
def test_rows_grouped_by_connection_in_first_row_order(
    endpoints: int, chunk: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whole, and in chunks of frames (``GROUP_ROWS``, read at call time) that cut every
    flow's rows many times: the same groups, rows in order across the chunks' borders."""
    monkeypatch.setattr(tcp, "GROUP_ROWS", chunk)
    rng = np.random.default_rng(7)
    rows = 5_000
    flows = rng.integers(0, endpoints, size=(300, 2))
    ports = rng.integers(1024, 65535, size=(300, 2))
    pick = rng.integers(0, 300, size=rows)
    turn = rng.random(rows) < 0.5  # either direction
    src = np.where(turn, flows[pick, 0], flows[pick, 1]).astype(np.uint32)
    dst = np.where(turn, flows[pick, 1], flows[pick, 0]).astype(np.uint32)
    sport = np.where(turn, ports[pick, 0], ports[pick, 1]).astype(np.uint16)
    dport = np.where(turn, ports[pick, 1], ports[pick, 0]).astype(np.uint16)
    index = _Index(rng.random(rows) < 0.9, src, dst, sport, dport)
    got = group_flows(index)  # type: ignore[arg-type]  # duck-typed: the columns it reads
    want = _expected(index)
    assert [got.group_rows(g).tolist() for g in range(len(got))] == want
    assert got.first_row.tolist() == [g[0] for g in want]
