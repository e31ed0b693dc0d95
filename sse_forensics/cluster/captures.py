"""Captures on the cluster: each capture file indexed once, by a task of its own; then the
shard tasks of :func:`~sse_forensics.pipeline._reassemble_captures` reassemble from those
indexes instead of each reading every capture.

1. **One task per capture file** builds its packet index
   (:mod:`sse_forensics.ingest.packet_index`: frame and TCP header columns, reading errors,
   the file's statistics) and writes it under the scratch directory: the columns as Parquet
   (about 5 % of a capture's size), the rest pickled beside them.
2. **One task per shard** (one per worker thread) loads every file's index, merges them into
   the one timeline a local scan reads (``packet_index._merge``: the same rows, numbers and
   errors), and reassembles the connections whose number falls to it, reading their payload
   bytes from the capture files themselves (``pread``).

So each capture byte is parsed once, and a shard reads the indexes (not the captures) and its
own connections' payloads. Every shard still holds the merged index of all the captures:
connections are numbered in that one timeline (docs/scaling.md).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import pickle
import tempfile
from concurrent.futures import Executor
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from sse_forensics.errors import UnreadableInput
from sse_forensics.facts.config import AnalysisConfig
from sse_forensics.ingest.packet_index import PacketIndex, _FileIndex, _index_file, _merge
from sse_forensics.reassembly.fast import FastReassembly

ShardResult = tuple[list[tuple[int, str, Path]], dict[str, int], FastReassembly]
"""What a shard returns: its evidence files (partition, table, file), row counts, summary."""


@dataclass(frozen=True, slots=True)
class SavedIndex:
    """One capture file's index under the scratch directory; ``refused``: why the file is
    no capture (``UnreadableInput``'s source and reason)."""

    path: str
    columns: str = ""
    rest: str = ""
    refused: tuple[str, str] | None = None


def index_capture_file(path: str, scratch: str) -> SavedIndex:
    """Step 1 (on a worker): index ``path`` and write the index under a new directory of
    ``scratch`` (a rerun after a worker died writes its own)."""
    try:
        found = _index_file(path)
    except UnreadableInput as exc:
        return SavedIndex(path, refused=(exc.source, exc.reason))
    _close(found)
    out = Path(tempfile.mkdtemp(prefix="index-", dir=scratch))
    columns, rest = out / "columns.parquet", out / "rest.pickle"
    pl.DataFrame(found.cols).write_parquet(columns, compression="zstd", statistics=False)
    with open(rest, "wb") as fh:
        pickle.dump(dataclasses.replace(found, buf=b"", cols={}, fd=None), fh, protocol=5)
    return SavedIndex(path, str(columns), str(rest))


def load_index(saved: list[SavedIndex]) -> PacketIndex:
    """The merged index of ``saved`` files, as ``index_captures`` of their paths gives it;
    payload bytes are read from the files (``pread``)."""
    files: list[_FileIndex] = []
    try:
        for s in saved:
            with open(s.rest, "rb") as fh:
                found: _FileIndex = pickle.load(fh)
            frame = pl.read_parquet(s.columns)
            found.cols = {c: frame.get_column(c).to_numpy(writable=True) for c in frame.columns}
            found.fd = os.open(s.path, os.O_RDONLY)
            files.append(found)
    except BaseException:
        for f in files:
            _close(f)
        raise
    return _merge(files)


def _close(found: _FileIndex) -> None:
    close = getattr(found.buf, "close", None)
    if close is not None:
        with contextlib.suppress(BufferError):
            close()
    if found.fd is not None:
        os.close(found.fd)
        found.fd = None


def reassemble_indexed_shard(
    saved: list[SavedIndex],
    buckets: int,
    scratch: str,
    config: AnalysisConfig,
    shard: tuple[int, int],
) -> ShardResult:
    """Step 2 (on a worker): the connections of ``shard`` as evidence rows written under
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
    """Steps 1 and 2 on ``executor``: the shards' results, in shard order. Raises
    :class:`UnreadableInput` for the first input that is no capture, as a local scan."""
    indexed = [executor.submit(index_capture_file, path, scratch) for path in inputs]
    saved = [f.result() for f in indexed]
    refused = next((s.refused for s in saved if s.refused is not None), None)
    if refused is not None:
        raise UnreadableInput(*refused)
    futures = [
        executor.submit(reassemble_indexed_shard, saved, buckets, scratch, config, (k, shards))
        for k in range(shards)
    ]
    return [f.result() for f in futures]
