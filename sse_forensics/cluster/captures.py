"""Captures on the cluster: each capture file indexed once, by a task of its own; then shard
tasks reassemble from those indexes instead of each reading every capture.

1. **One task per capture file** builds its packet index
   (:mod:`sse_forensics.ingest.packet_index`: frame and TCP header columns, reading errors,
   the file's statistics) and writes it under the scratch directory: its TCP rows split by
   a hash of their 4-tuple (either direction) into one Parquet file per shard, the other
   rows in one more, each row with its place in the file (together about 5 % of a
   capture's size); its timestamps; the rest pickled beside them.
2. **Shards of flows** (issue 10), when every file's rows are in time order and no file has
   a reading or decoding error: shard ``k`` reads part ``k`` of every file only, merges it
   in the one timeline a local scan reads, and places each of its rows in the whole
   capture from the other files' timestamps (only those of files whose time span overlaps
   its rows: in a ring, none). A first task per shard returns its connections' sort keys
   (:func:`~sse_forensics.reassembly.fast.flow_shard.decision_keys`), the client ranks them
   into the ids one pass gives (:func:`~sse_forensics.reassembly.fast.flow_shard.numbering`),
   and a second task per shard reassembles its connections under those ids, reading their
   payload bytes from the capture files themselves (``pread``). So a shard holds the index
   of its own flows: about 1/N of the capture's.
3. **Otherwise** (a file out of time order or with errors, or more flows for the exact path
   than the ``flows`` cap): one task per shard merges every file's whole index
   (``packet_index._merge``: the same rows, numbers and errors) and reassembles the
   connections whose number falls to it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import os
import pickle
import tempfile
from concurrent.futures import Executor
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl

from sse_forensics.errors import UnreadableInput
from sse_forensics.facts.config import AnalysisConfig
from sse_forensics.ingest.inputs import input_size
from sse_forensics.ingest.packet_index import (
    Addresses,
    PacketIndex,
    _FileIndex,
    _index_file,
    _merge,
)
from sse_forensics.reassembly.fast import FastReassembly
from sse_forensics.reassembly.fast.flow_shard import (
    DecisionKeys,
    FlowShard,
    decision_keys,
    numbering,
)

ShardResult = tuple[list[tuple[int, str, Path]], dict[str, int], FastReassembly]
"""What a shard returns: its evidence files (partition, table, file), row counts, summary."""

ROW = "_row"  # a part's column: the row's place in its file
SHARD_CAPTURE_BYTES = 1 << 30
"""Capture bytes per shard of flows at most (read at call time): the shards outnumber the
workers when the captures are larger (a shard's peak follows its flows' share: on a 1 GB
ring, 2 shards: 362-394 MB, one pass's merged index 545 MB)."""


@dataclass(frozen=True, slots=True)
class SavedIndex:
    """One capture file's index under the scratch directory: ``parts`` (Parquet) the TCP
    rows of each shard's flows, then the other rows; ``times`` its timestamps (Parquet);
    ``rest`` the pickled rest; its frames, TCP segments, first and last timestamps, each
    part's first and last (``spans``), and whether shards of flows can read it
    (``by_flow``: rows in time order, no error). ``refused``: why the file is no capture
    (``UnreadableInput``'s source and reason). A shard's view (:func:`shard_view`) names
    its own part only, and ``times`` only if it needs them."""

    path: str
    parts: tuple[str, ...] = ()
    times: str = ""
    rest: str = ""
    frames: int = 0
    tcp_segments: int = 0
    first_ts: float = 0.0
    last_ts: float = 0.0
    by_flow: bool = False
    refused: tuple[str, str] | None = None
    spans: tuple[tuple[float, float], ...] = ()


def index_capture_file(path: str, scratch: str, shards: int = 1) -> SavedIndex:
    """Step 1 (on a worker): index ``path`` and write the index, split into ``shards``
    parts by flow, under a new directory of ``scratch`` (a rerun after a worker died writes
    its own)."""
    try:
        found = _index_file(path)
    except UnreadableInput as exc:
        return SavedIndex(path, refused=(exc.source, exc.reason))
    _close(found)
    out = Path(tempfile.mkdtemp(prefix="index-", dir=scratch))
    cols = found.cols
    ts = cols["ts"]
    n = len(ts)
    part = flow_parts(cols, found.addresses, shards)
    order = np.argsort(part, kind="stable")  # by part, rows ascending in each
    bounds = np.searchsorted(part[order], np.arange(shards + 2))
    del part
    parts, spans = [], []
    for k in range(shards + 1):  # one part's rows gathered at a time
        rows = order[bounds[k] : bounds[k + 1]]
        name = out / f"part-{k}.parquet"
        gathered = {c: v[rows] for c, v in cols.items()}
        at = gathered["ts"]
        spans.append((float(at.min()), float(at.max())) if len(at) else (math.inf, -math.inf))
        pl.DataFrame({**gathered, ROW: rows}).write_parquet(
            name, compression="zstd", statistics=False
        )
        parts.append(str(name))
    del order, gathered
    times = out / "times.parquet"
    pl.DataFrame({"ts": ts}).write_parquet(times, compression="zstd", statistics=False)
    rest = out / "rest.pickle"
    with open(rest, "wb") as fh:
        pickle.dump(dataclasses.replace(found, buf=b"", cols={}, fd=None), fh, protocol=5)
    return SavedIndex(
        path,
        tuple(parts),
        str(times),
        str(rest),
        n,
        int(np.count_nonzero(cols["is_tcp"])),
        float(ts[0]) if n else 0.0,
        float(ts[-1]) if n else 0.0,
        not found.read_errors and not found.decode_errors and bool(np.all(ts[1:] >= ts[:-1])),
        spans=tuple(spans),
    )


def flow_parts(cols: dict[str, np.ndarray], addresses: Addresses, shards: int) -> np.ndarray:
    """The shard of each row (int64): a hash of its 4-tuple, the same either way and in
    every file (of the addresses' values, not of the file's address numbers); ``shards``
    for the rows that are no TCP segment."""
    raw = np.frombuffer(addresses.keys().tobytes(), dtype=np.uint8).reshape(-1, 17)
    h = np.full(len(raw), 0xCBF29CE484222325, dtype=np.uint64)  # FNV-1a over the 17 bytes
    for byte in range(17):
        h ^= raw[:, byte].astype(np.uint64)
        h *= np.uint64(0x100000001B3)
    h = np.append(h, np.uint64(0))  # src/dst -1 (no address): the last
    a = _mix(h[cols["src"]] ^ cols["sport"].astype(np.uint64))
    b = _mix(h[cols["dst"]] ^ cols["dport"].astype(np.uint64))
    flow = _mix(np.minimum(a, b) * np.uint64(0x9E3779B97F4A7C15) ^ np.maximum(a, b))
    out = (flow % np.uint64(shards)).astype(np.int64)
    out[~cols["is_tcp"].astype(bool)] = shards
    return out


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser (uint64, wrapping)."""
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    out: np.ndarray = x ^ (x >> np.uint64(31))
    return out


def _load_file(s: SavedIndex) -> tuple[_FileIndex, np.ndarray]:
    """The file index of ``s`` holding the rows of its ``parts`` (in file order), and
    those rows' places in the file; payload bytes are read from the file (``pread``)."""
    with open(s.rest, "rb") as fh:
        found: _FileIndex = pickle.load(fh)
    frame = pl.concat([pl.read_parquet(p) for p in s.parts])
    if len(s.parts) > 1:
        frame = frame.sort(ROW)
    row = frame.get_column(ROW).to_numpy().astype(np.int64)  # a copy: load_flow_shard adds
    frame = frame.drop(ROW)
    found.cols = {c: frame.get_column(c).to_numpy(writable=True) for c in frame.columns}
    found.fd = os.open(s.path, os.O_RDONLY)
    return found, row


def _load_files(saved: list[SavedIndex]) -> tuple[list[_FileIndex], list[np.ndarray]]:
    """:func:`_load_file` of each of ``saved``; the files opened closed again if one fails."""
    files: list[_FileIndex] = []
    rows: list[np.ndarray] = []
    try:
        for s in saved:
            found, row = _load_file(s)
            files.append(found)
            rows.append(row)
    except BaseException:
        for f in files:
            _close(f)
        raise
    return files, rows


def load_index(saved: list[SavedIndex]) -> PacketIndex:
    """The merged index of ``saved`` files, as ``index_captures`` of their paths gives it;
    payload bytes are read from the files (``pread``)."""
    return _merge(_load_files(saved)[0])


def shard_view(saved: list[SavedIndex], k: int) -> list[SavedIndex]:
    """What shard ``k`` reads of ``saved``: its part of each file, and the timestamps of
    the files it must count rows in (:func:`_overlap`); an object-store scratch sends a
    task the files its arguments name, no other shard's."""
    out = []
    for j, other in enumerate(saved):
        spans = [s.spans[k] for i, s in enumerate(saved) if i != j]
        needed = any(_overlap(other, span) for span in spans)
        out.append(
            dataclasses.replace(
                other, parts=(other.parts[k],), spans=(other.spans[k],), times=other.times * needed
            )
        )
    return out


def _overlap(other: SavedIndex, span: tuple[float, float]) -> bool:
    """Whether ``other``'s rows must be counted one by one before rows of timestamps
    ``span``: neither all before them nor all after (nor an empty side)."""
    if not other.frames or span[0] > span[1]:
        return False
    return not other.last_ts < span[0] and not other.first_ts > span[1]


def load_flow_shard(view: list[SavedIndex]) -> tuple[PacketIndex, FlowShard]:
    """A shard's rows of every file (its :func:`shard_view`) merged in the capture's time
    order, and each one's row in the whole capture: before it, in every other file, the
    rows of an earlier timestamp (of an equal one too in a file given before it) — counted
    from that file's timestamps only where its time span overlaps this shard's rows."""
    files, placed = _load_files(view)
    for j, other in enumerate(view):
        times: np.ndarray | None = None
        for i, mine in enumerate(view):
            if i == j or not len(placed[i]) or not other.frames:
                continue
            if other.last_ts < mine.spans[0][0]:
                placed[i] += other.frames
            elif _overlap(other, mine.spans[0]):
                if times is None:
                    times = pl.read_parquet(other.times).get_column("ts").to_numpy()
                at = files[i].cols["ts"]
                placed[i] += np.searchsorted(times, at, side="right" if j < i else "left")
    ends = [s.last_ts for s in view if s.frames]
    shard = FlowShard(
        np.sort(np.concatenate(placed)) if placed else np.zeros(0, dtype=np.int64),
        sum(s.frames for s in view),
        sum(s.tcp_segments for s in view),
        max(ends) if ends else None,
    )
    return _merge(files), shard


def _close(found: _FileIndex) -> None:
    close = getattr(found.buf, "close", None)
    if close is not None:
        with contextlib.suppress(BufferError):
            close()
    if found.fd is not None:
        os.close(found.fd)
        found.fd = None


def number_flow_shard(view: list[SavedIndex], config: AnalysisConfig) -> DecisionKeys:
    """Step 2a (on a worker): the sort keys of a shard's connections (``view``: its
    :func:`shard_view`)."""
    index, shard = load_flow_shard(view)
    try:
        return decision_keys(index, shard, config.limits)
    finally:
        index.close()


def reassemble_flow_shard(
    view: list[SavedIndex],
    buckets: int,
    scratch: str,
    config: AnalysisConfig,
    shard: tuple[int, int],
    ids: tuple[np.ndarray, np.ndarray],
) -> ShardResult:
    """Step 2b (on a worker): shard ``k``'s connections (``view``: its :func:`shard_view`)
    under the ids ``ids`` (its candidates', its exact path's) as evidence rows written
    under ``scratch``."""
    from sse_forensics.pipeline import shard_rows

    index, flows = load_flow_shard(view)
    flows.cand_ids, flows.exact_ids = ids
    return shard_rows(index, buckets, scratch, config, shard, flows)


def reassemble_indexed_shard(
    saved: list[SavedIndex],
    buckets: int,
    scratch: str,
    config: AnalysisConfig,
    shard: tuple[int, int],
) -> ShardResult:
    """Step 3 (on a worker): the connections of ``shard`` as evidence rows written under
    ``scratch`` (``pipeline._reassemble_shard`` with the saved indexes)."""
    from sse_forensics.pipeline import shard_rows

    return shard_rows(load_index(saved), buckets, scratch, config, shard)


def reassemble_on(
    executor: Executor,
    inputs: list[str],
    buckets: int,
    scratch: str,
    config: AnalysisConfig,
    shards: int,
) -> list[ShardResult]:
    """Steps 1 and 2 (or 3) on ``executor``: the shards' results, in shard order (shards of
    flows: ``shards``, more for captures past ``shards`` × :data:`SHARD_CAPTURE_BYTES`).
    Raises :class:`UnreadableInput` for the first input that is no capture, as a local
    scan."""
    by_size = -(-sum(input_size(p) for p in inputs) // SHARD_CAPTURE_BYTES)
    flow_shards = max(shards, by_size)
    indexed = [executor.submit(index_capture_file, p, scratch, flow_shards) for p in inputs]
    saved = [f.result() for f in indexed]
    refused = next((s.refused for s in saved if s.refused is not None), None)
    if refused is not None:
        raise UnreadableInput(*refused)
    if all(s.by_flow for s in saved):
        views = [shard_view(saved, k) for k in range(flow_shards)]
        keys = [executor.submit(number_flow_shard, view, config) for view in views]
        ids = numbering([f.result() for f in keys], config.limits)
        if ids is not None:
            futures = [
                executor.submit(
                    reassemble_flow_shard, view, buckets, scratch, config, (k, flow_shards), ids[k]
                )
                for k, view in enumerate(views)
            ]
            return [f.result() for f in futures]
    futures = [
        executor.submit(reassemble_indexed_shard, saved, buckets, scratch, config, (k, shards))
        for k in range(shards)
    ]
    return [f.result() for f in futures]
