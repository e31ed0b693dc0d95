"""Log files: which ones, in what order, and their bytes in line-aligned chunks.

The only module here that opens files. A file may be plain, gzip (RFC 1952, several
members allowed, as ``cat a.gz b.gz`` and logrotate's ``delaycompress`` produce) or
Zstandard (RFC 8878, several frames allowed). It is read in chunks of about
``CHUNK_BYTES`` cut after a newline, so memory stays bounded whatever the file size.
A compressed stream that ends early yields what it decompressed and a :class:`ReadError`
saying where it broke.
"""

from __future__ import annotations

import glob
import os
import re
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import BinaryIO

import numpy as np
import zstandard

from sse_forensics.errors import ReadError, UnreadableInput

CHUNK_BYTES = 8 * 1024 * 1024
"""Decompressed bytes per chunk when reading batch by batch: large enough that polars'
per-call overhead is noise and both cores are busy inside one ``read_csv``, small enough
that reading a log batch by batch stays under 300 MB whatever its size (a chunk's parse
holds ~6x its size at its peak; measured in benchmarks/logs_bench.py). Below 32 MiB in
any case: glibc serves larger blocks with a fresh ``mmap`` each time and unmaps them on
``free``, so every chunk (and every chunk-sized numpy temporary) would fault its pages in
anew, ~1 s of system time per GB; below that it recycles them."""

_READ_BYTES = 4 * 1024 * 1024
GZIP_MAGIC = b"\x1f\x8b"
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
_WBITS_GZIP = 31  # zlib: gzip header and trailer (RFC 1952)


@dataclass(frozen=True, slots=True)
class Chunk:
    """Whole lines of one file: ``data`` starts at line ``first_line`` (1-based) and holds
    ``rows`` lines (blank ones and a last one without newline included)."""

    data: bytes
    first_line: int
    rows: int = -1  # -1: not counted


def compression(head: bytes) -> str | None:
    """``"gzip"``, ``"zstd"`` or None (plain), from the magic number."""
    if head.startswith(GZIP_MAGIC):
        return "gzip"
    if head.startswith(ZSTD_MAGIC):
        return "zstd"
    return None


def _decompressor(kind: str):
    if kind == "gzip":
        return zlib.decompressobj(_WBITS_GZIP)
    return zstandard.ZstdDecompressor().decompressobj()


def _raw_blocks(fh: BinaryIO, source: str, errors: list[ReadError]) -> Iterator[bytes]:
    """The decompressed bytes of the buffered file ``fh``. A broken stream ends the
    iteration after a :class:`ReadError` in ``errors``."""
    kind = compression(fh.peek(4)[:4])
    if kind is None:
        while block := fh.read(_READ_BYTES):
            yield block
        return
    consumed = 0  # compressed bytes read from the file
    dec = _decompressor(kind)
    data = fh.read(_READ_BYTES)
    while data:
        consumed += len(data)
        try:
            out = dec.decompress(data)
        except (zlib.error, zstandard.ZstdError) as exc:
            errors.append(
                ReadError(source, f"corrupt {kind} data within the first {consumed} bytes: {exc}")
            )
            return
        if out:
            yield out
        if not dec.eof:
            data = fh.read(_READ_BYTES)
            continue
        # Another member or frame may follow (concatenated .gz, multi-frame zstd).
        rest = dec.unused_data
        consumed -= len(rest)
        data = rest or fh.read(_READ_BYTES)
        if not data:
            return
        if compression(data) is None:
            errors.append(
                ReadError(source, f"{len(data)}+ bytes of garbage after the {kind} stream ignored")
            )
            return
        dec = _decompressor(kind)
    errors.append(
        ReadError(source, f"truncated {kind} file: the stream ends after {consumed} bytes")
    )


def _open(path: str) -> BinaryIO:
    try:
        return open(path, "rb", buffering=_READ_BYTES)
    except OSError as exc:
        raise UnreadableInput(path, exc.strerror or str(exc)) from exc


_PROBE_BYTES = 64 * 1024


def _pread_chunks(fd: int, chunk_bytes: int) -> Iterator[bytes]:
    """Line-aligned chunks of an uncompressed file, each one ``pread`` of exactly its
    lines: the cut is found in a small read of the chunk's tail first, so the chunk is one
    copy out of the page cache (a ``read`` then a slice at the cut is two). Not ``mmap``:
    a log truncated while mapped (logrotate's ``copytruncate``) kills the process with
    SIGBUS; a short ``pread`` just ends the file."""
    start = 0
    while True:
        end = start + chunk_bytes
        probe_at = max(start, end - _PROBE_BYTES)
        tail = os.pread(fd, end - probe_at, probe_at)
        if len(tail) < end - probe_at:  # the file ends within this chunk
            size = probe_at + len(tail) - start
        elif (cut := tail.rfind(b"\n")) >= 0:
            size = probe_at + cut + 1 - start
        else:  # no newline in the tail: read the chunk and cut as it comes
            data = os.pread(fd, chunk_bytes, start)
            cut = data.rfind(b"\n") + 1
            if cut == 0:  # a line longer than a chunk: extend it to its newline
                parts = [data]
                while (block := os.pread(fd, _PROBE_BYTES, start + sum(map(len, parts)))) and (
                    b"\n" not in block
                ):
                    parts.append(block)
                parts.append(block[: block.find(b"\n") + 1] if block else b"")
                data = b"".join(parts)
            else:
                data = data[:cut]
            if not data:
                return
            yield data
            start += len(data)
            continue
        data = os.pread(fd, size, start) if size else b""
        if not data:
            return
        yield data
        start += len(data)


def _plain_chunks(fh: BinaryIO, chunk_bytes: int) -> Iterator[bytes]:
    """Line-aligned chunks of an uncompressed file: by ``pread`` when the file allows it,
    else read, then seek back to the start of the cut line."""
    try:
        os.pread(fh.fileno(), 1, 0)
    except (OSError, AttributeError, ValueError):
        pass
    else:
        yield from _pread_chunks(fh.fileno(), chunk_bytes)
        return
    while data := fh.read(chunk_bytes):
        if len(data) == chunk_bytes:
            cut = data.rfind(b"\n") + 1
            if cut == 0:
                data += fh.readline()  # a line longer than a chunk
            elif cut < len(data):
                fh.seek(cut - len(data), os.SEEK_CUR)
                data = data[:cut]
        yield data


def _joined(
    fh: BinaryIO, source: str, errors: list[ReadError], chunk_bytes: int
) -> Iterator[bytes]:
    """Line-aligned chunks of a decompressed stream."""
    parts: list[bytes] = []
    size = 0
    for block in _raw_blocks(fh, source, errors):
        parts.append(block)
        size += len(block)
        if size < chunk_bytes:
            continue
        data = b"".join(parts)
        cut = data.rfind(b"\n") + 1
        if cut == 0:
            parts = [data]  # one line longer than a chunk: keep reading
            continue
        parts = [data[cut:]]
        size = len(parts[0])
        yield data[:cut]
    if parts and (data := b"".join(parts)):
        yield data


def iter_chunks(
    path: str, errors: list[ReadError], *, chunk_bytes: int = CHUNK_BYTES
) -> Iterator[Chunk]:
    """Line-aligned chunks of ``path`` (decompressed). Problems go to ``errors``; a
    truncation error names the last line read. A final line without a newline is kept."""
    line = 1
    broken: list[ReadError] = []
    with _open(path) as fh:
        plain = compression(fh.peek(4)[:4]) is None
        blocks = _plain_chunks(fh, chunk_bytes) if plain else _joined(fh, path, broken, chunk_bytes)
        for data in blocks:
            rows = count_lines(data)
            yield Chunk(data, line, rows)
            line += rows
    for error in broken:
        last = line - 1
        what = f"{error.what}; {last} lines read, the rest is lost"
        errors.append(ReadError(path, what, line=last if last > 0 else None))


def count_lines(data: bytes) -> int:
    """The lines in ``data``: its newlines, and a last line without one. numpy a block at
    a time (``bytes.count`` is ~3x slower for one byte)."""
    buf = np.frombuffer(data, dtype=np.uint8)
    newlines = sum(
        int(np.count_nonzero(buf[at : at + _COUNT_BLOCK] == 10))
        for at in range(0, len(buf), _COUNT_BLOCK)
    )
    return newlines + (bool(data) and not data.endswith(b"\n"))


_COUNT_BLOCK = 1 << 20


def read_head(path: str, size: int = 64 * 1024) -> bytes:
    """The first ``size`` decompressed bytes (or fewer), for format detection."""
    out = b""
    with _open(path) as fh:
        for block in _raw_blocks(fh, path, []):
            out += block
            if len(out) >= size:
                break
    return out[:size]


# access.log, access.log.1, access.log.2.gz, access.log-20240101.zst ...
_ROTATION = re.compile(r"^(?P<base>.*?)(?:\.(?P<n>\d+)|-(?P<date>\d{8,10}))?(?:\.(?:gz|zst))?$")


def rotation_key(path: str) -> tuple[str, int, str]:
    """Sort key putting a rotated set in time order: oldest first.

    logrotate numbers backwards (``.1`` is newer than ``.2``) and dates forwards
    (``-20240101`` before ``-20240102``); the live file (no suffix) is the newest.
    """
    name = os.path.basename(path)
    m = _ROTATION.match(name)
    assert m is not None  # the pattern matches any name
    base = os.path.join(os.path.dirname(path), m.group("base"))
    if m.group("n") is not None:
        return (base, -int(m.group("n")), "")
    if m.group("date") is not None:
        return (base, 0, m.group("date"))
    return (base, 1, "")


def expand_log_paths(paths: list[str]) -> list[str]:
    """Files named by ``paths``: a file as is, a directory for the regular files directly
    in it (hidden ones skipped), a glob for its matches; each rotated set in time order.
    A path matching nothing raises :class:`UnreadableInput`."""
    files: list[str] = []
    for path in paths:
        if os.path.isdir(path):
            found = [
                os.path.join(path, n)
                for n in os.listdir(path)
                if not n.startswith(".") and os.path.isfile(os.path.join(path, n))
            ]
        elif os.path.exists(path):
            found = [path]
        elif glob.has_magic(path):
            found = [p for p in glob.glob(path) if os.path.isfile(p)]
            if not found:
                raise UnreadableInput(path, "the pattern matches no file")
        else:
            raise UnreadableInput(path, "no such file or directory")
        files.extend(sorted(found, key=rotation_key))
    return list(dict.fromkeys(files))
