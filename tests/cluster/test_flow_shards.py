"""Captures on a cluster by shards of flows (issue 10, ``sse_forensics.cluster.captures``):
each shard holds the index rows of its own 4-tuples only, and the scan's output is a local
scan's. The cluster's executor is stood in for by a thread pool (no Dask needed): the tasks
are the ones a cluster runs."""

from __future__ import annotations

import dataclasses
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
from support.fast_path import make_capture_module, pcap_records

import sse_forensics.cluster.captures as captures
from sse_forensics.facts.config import AnalysisConfig
from sse_forensics.limits import DEFAULT_LIMITS
from sse_forensics.pipeline import scan_paths
from sse_forensics.report.jsonout import findings_jsonl
from sse_forensics.result import ScanResult


def _ring(tmp_path: Path, files: int, mid_stream: bool = False) -> list[str]:
    """A generated capture cut into ``files`` pcap files (its connections cross them);
    ``mid_stream``: without the clients' SYNs (every connection on the exact path, all of
    them open at once)."""
    whole = tmp_path / "mcp.pcap"
    make_capture_module().write_capture(whole, 3000, 5)
    header, records = pcap_records(whole)
    if mid_stream:
        records = [r for r in records if _tcp_flags(r) & 0x12 != 0x02]
    paths = []
    cut = np.linspace(0, len(records), files + 1).astype(int)
    for n in range(files):
        path = tmp_path / f"ring_{n:05d}.pcap"
        path.write_bytes(header + b"".join(records[cut[n] : cut[n + 1]]))
        paths.append(str(path))
    return paths


def _tcp_flags(record: bytes) -> int:
    """The TCP flags of a pcap record of an Ethernet frame carrying IPv4 (the generator's)."""
    ip = record[16 + 14 :]
    return ip[(ip[0] & 15) * 4 + 13]


def _scan(paths: list[str], tmp_path: Path, shards: int, config: AnalysisConfig) -> ScanResult:
    scratch = tmp_path / f"scratch-{shards}"
    scratch.mkdir()
    with ThreadPoolExecutor(shards) as pool:
        return scan_paths(
            paths, config, jobs=shards, executor=pool, scratch=str(scratch), keep_tables=False
        )


def _same(cluster: ScanResult, local: ScanResult) -> None:
    assert findings_jsonl(cluster) == findings_jsonl(local)
    assert [e.as_dict() for e in cluster.errors] == [e.as_dict() for e in local.errors]
    assert [c.id for c in cluster.connections] == [c.id for c in local.connections]
    assert dataclasses.replace(cluster.stats, partitions=0) == dataclasses.replace(
        local.stats, partitions=0
    )


@pytest.mark.parametrize(
    ("workers", "shards", "mid_stream"), [(2, 2, False), (3, 3, False), (2, 2, True), (2, 5, False)]
)
def test_a_shard_holds_the_rows_of_its_own_flows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, workers: int, shards: int, mid_stream: bool
) -> None:
    """A four-file ring whose connections cross the files: each shard is sent its own
    part of each file and no file's timestamps (no file overlaps another in time), its
    index holds its own flows' rows only (together every TCP row once, each its row in the
    whole capture), and the connection ids, errors and JSON lines are the local scan's —
    also when every connection is read mid-stream (the exact path decides them, not the
    fast path), and with more shards than workers (captures past SHARD_CAPTURE_BYTES a
    worker)."""
    paths = _ring(tmp_path, 4, mid_stream)
    size = sum(Path(p).stat().st_size for p in paths)
    monkeypatch.setattr(captures, "SHARD_CAPTURE_BYTES", -(-size // shards))
    loaded: list[tuple[int, int, np.ndarray]] = []
    load = captures.load_flow_shard

    def spy(view: list[captures.SavedIndex]):  # type: ignore[no-untyped-def]
        index, shard = load(view)
        k = int(Path(view[0].parts[0]).stem.removeprefix("part-"))
        assert all(s.parts == (str(Path(s.parts[0]).parent / f"part-{k}.parquet"),) for s in view)
        assert not any(s.times for s in view)  # a ring's files do not overlap in time
        loaded.append((k, len(index), shard.rows.copy()))
        return index, shard

    monkeypatch.setattr(captures, "load_flow_shard", spy)
    config = AnalysisConfig()
    cluster = _scan(paths, tmp_path, workers, config)
    local = scan_paths(paths, config, jobs=1, keep_tables=False)
    assert local.stats.connections > 20 and local.findings
    _same(cluster, local)
    assert len(loaded) == 2 * shards  # a numbering pass and a reassembly pass per shard
    rows = {k: r for k, _n, r in loaded}
    assert sorted(rows) == list(range(shards))
    assert all(0 < len(r) < local.stats.tcp_segments for r in rows.values())
    assert all(n == len(r) for _k, n, r in loaded)  # no other row than its own flows'
    every = np.sort(np.concatenate(list(rows.values())))
    assert np.array_equal(every, np.arange(local.stats.frames))  # each TCP row once


def test_more_flows_than_the_cap_are_numbered_in_the_whole_index(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """When the exact path's 4-tuples exceed the ``flows`` cap, one pass's tracker evicts
    flows (flows then depend on each other): the shards number their connections in the
    merged index of every file instead, and the output is still the local scan's."""
    paths = _ring(tmp_path, 4, mid_stream=True)
    numbered: list[bool] = []
    numbering = captures.numbering

    def spy(keys, limits):  # type: ignore[no-untyped-def]
        got = numbering(keys, limits)
        numbered.append(got is not None)
        return got

    monkeypatch.setattr(captures, "numbering", spy)
    config = AnalysisConfig(limits=dataclasses.replace(DEFAULT_LIMITS, flows=10))
    cluster = _scan(paths, tmp_path, 2, config)
    local = scan_paths(paths, config, jobs=1, keep_tables=False)
    assert any("evicted from the flow table" in str(e.as_dict()) for e in local.errors)
    _same(cluster, local)
    assert numbered == [False]
