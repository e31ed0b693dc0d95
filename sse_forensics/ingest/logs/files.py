"""Log files: which ones, in what order, and their bytes in line-aligned chunks.

The only module here that opens files, with :mod:`.ranges` (a large plain file cut into
line-aligned byte ranges, each read on its own). A file may be plain, gzip (RFC 1952,
several members allowed, as ``cat a.gz b.gz`` and logrotate's ``delaycompress`` produce) or
Zstandard (RFC 8878, several frames allowed). It is read in chunks of about
``CHUNK_BYTES`` cut after a newline, so memory stays bounded whatever the file size.
A compressed stream that ends early yields what it decompressed and a :class:`ReadError`
saying where it broke.
"""

from __future__ import annotations

import functools
import glob
import os
import re
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, replace
from io import BufferedReader
from typing import Any

import numpy as np
import zstandard

from sse_forensics.errors import ReadError, UnreadableInput
from sse_forensics.ingest.logs.ranges import LineRange, bounds
from sse_forensics.limits import DEFAULT_LIMITS, CapHit, Limits

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


def _decompressor(kind: str) -> Any:  # a zlib or a zstandard decompressobj
    if kind == "gzip":
        return zlib.decompressobj(_WBITS_GZIP)
    return zstandard.ZstdDecompressor().decompressobj()


# Compressed bytes fed to zstd per call: a zstd block may expand 32768-fold (RLE), so this
# bounds one call's output to 64 MiB whatever the stream (zlib takes a max_length).
_ZSTD_STEP = 2048


def _inflate(dec: Any, kind: str, pending: memoryview) -> tuple[bytes, memoryview]:
    """One bounded step of ``dec`` over ``pending``: its output (at most ``CHUNK_BYTES``
    for gzip, 64 MiB for zstd) and the input still to feed."""
    if kind == "gzip":
        out = dec.decompress(pending, CHUNK_BYTES)
        tail = dec.unconsumed_tail
        return out, memoryview(tail) if tail else pending[len(pending) :]
    return dec.decompress(pending[:_ZSTD_STEP]), pending[_ZSTD_STEP:]


def _raw_blocks(
    fh: BufferedReader, source: str, errors: list[ReadError], limits: Limits = DEFAULT_LIMITS
) -> Iterator[bytes]:
    """The decompressed bytes of the buffered file ``fh``, each call's output bounded (a
    compression bomb never lands in memory at once) and the whole past the
    ``log_decoded_bytes`` cap cut (a :class:`CapHit` in ``errors``). A broken stream ends
    the iteration after a :class:`ReadError` in ``errors``."""
    kind = compression(fh.peek(4)[:4])
    if kind is None:
        while block := fh.read(_READ_BYTES):
            yield block
        return
    consumed = 0  # compressed bytes read from the file
    decoded = 0
    dec = _decompressor(kind)
    pending = memoryview(fh.read(_READ_BYTES))
    consumed += len(pending)
    while pending:
        while pending and not dec.eof:
            try:
                out, pending = _inflate(dec, kind, pending)
            except (zlib.error, zstandard.ZstdError) as exc:
                errors.append(
                    ReadError(
                        source, f"corrupt {kind} data within the first {consumed} bytes: {exc}"
                    )
                )
                return
            if not out:
                continue
            decoded += len(out)
            if decoded > limits.log_decoded_bytes:
                yield out[: len(out) - (decoded - limits.log_decoded_bytes)]
                errors.append(
                    CapHit.of(
                        "log_decoded_bytes",
                        limits,
                        source,
                        f"{kind} data decompressing past {limits.log_decoded_bytes} bytes",
                        "the rest of the file is not read",
                    )
                )
                return
            yield out
        if not dec.eof:
            pending = memoryview(fh.read(_READ_BYTES))
            consumed += len(pending)
            continue
        # Another member or frame may follow (concatenated .gz, multi-frame zstd).
        rest = bytes(dec.unused_data) + bytes(pending)
        data = rest or fh.read(_READ_BYTES)
        if not data:
            return
        if not rest:
            consumed += len(data)
        if compression(data) is None:
            errors.append(
                ReadError(source, f"{len(data)}+ bytes of garbage after the {kind} stream ignored")
            )
            return
        dec = _decompressor(kind)
        pending = memoryview(data)
    errors.append(
        ReadError(source, f"truncated {kind} file: the stream ends after {consumed} bytes")
    )


def _open(path: str) -> BufferedReader:
    try:
        fh = open(path, "rb", buffering=_READ_BYTES)  # noqa: SIM115 - the caller closes it
    except OSError as exc:
        raise UnreadableInput(path, exc.strerror or str(exc)) from exc
    assert isinstance(fh, BufferedReader)  # binary and buffered: it has peek()
    return fh


_PROBE_BYTES = 64 * 1024


@dataclass(frozen=True, slots=True)
class LongLine:
    """A line longer than the ``log_line_bytes`` cap, skipped unread: ``size`` bytes, its
    newline left out (a last line without one may end the file)."""

    size: int


def _pread_line(fd: int, start: int, data: bytes, max_line: int) -> bytes | LongLine:
    """The line at ``start`` of which ``data`` (longer than a chunk, no newline) is the
    beginning, with its newline; or :class:`LongLine` once it passes ``max_line`` bytes —
    the rest is then scanned for its end, never held."""
    parts = [data]
    size = len(data)
    step = _PROBE_BYTES
    while block := os.pread(fd, step, start + size):
        nl = block.find(b"\n")
        if nl >= 0:
            size += nl
            if size > max_line:
                return LongLine(size)
            parts.append(block[: nl + 1])
            return b"".join(parts)
        size += len(block)
        if size > max_line:
            parts = []
            step = _READ_BYTES
        else:
            parts.append(block)
    return LongLine(size) if size > max_line else b"".join(parts)


def _pread_chunks(
    fd: int, chunk_bytes: int, max_line: int, start: int = 0, stop: int | None = None
) -> Iterator[bytes | LongLine]:
    """Line-aligned chunks of an uncompressed file, each one ``pread`` of exactly its
    lines: the cut is found in a small read of the chunk's tail first, so the chunk is one
    copy out of the page cache (a ``read`` then a slice at the cut is two). Not ``mmap``:
    a log truncated while mapped (logrotate's ``copytruncate``) kills the process with
    SIGBUS; a short ``pread`` just ends the file. ``start``/``stop``: the bytes read (a
    :class:`~.ranges.LineRange`'s, cut at line starts), ``stop`` None to the end."""

    def pread(size: int, at: int) -> bytes:
        if stop is not None:
            size = min(size, stop - at)
        return os.pread(fd, size, at) if size > 0 else b""

    while stop is None or start < stop:
        end = start + chunk_bytes if stop is None else min(start + chunk_bytes, stop)
        probe_at = max(start, end - _PROBE_BYTES)
        tail = pread(end - probe_at, probe_at)
        if len(tail) < end - probe_at:  # the file ends within this chunk
            size = probe_at + len(tail) - start
        elif (cut := tail.rfind(b"\n")) >= 0:
            size = probe_at + cut + 1 - start
        else:  # no newline in the tail: read the chunk and cut as it comes
            data = pread(chunk_bytes, start)
            cut = data.rfind(b"\n") + 1
            if cut == 0:  # a line longer than a chunk: extend it to its newline
                line = _pread_line(fd, start, data, max_line)
                if isinstance(line, LongLine):
                    yield line
                    start += line.size + 1
                    continue
                data = line
            else:
                data = data[:cut]
            if not data:
                return
            yield data
            start += len(data)
            continue
        data = pread(size, start) if size else b""
        if not data:
            return
        yield data
        start += len(data)


def _plain_chunks(
    fh: BufferedReader, chunk_bytes: int, max_line: int
) -> Iterator[bytes | LongLine]:
    """Line-aligned chunks of an uncompressed file: by ``pread`` when the file allows it,
    else read, then seek back to the start of the cut line."""
    try:
        os.pread(fh.fileno(), 1, 0)
    except (OSError, AttributeError, ValueError):
        pass
    else:
        yield from _pread_chunks(fh.fileno(), chunk_bytes, max_line)
        return
    while data := fh.read(chunk_bytes):
        if len(data) == chunk_bytes:
            cut = data.rfind(b"\n") + 1
            if cut == 0:  # a line longer than a chunk
                while not data.endswith(b"\n") and (more := fh.readline(_READ_BYTES)):
                    data += more
                    if len(data) > max_line:
                        size = len(data)
                        while not more.endswith(b"\n") and (more := fh.readline(_READ_BYTES)):
                            size += len(more)
                        yield LongLine(size - more.endswith(b"\n"))
                        data = b""
                        break
                if not data:
                    continue
            elif cut < len(data):
                fh.seek(cut - len(data), os.SEEK_CUR)
                data = data[:cut]
        yield data


def _joined(
    fh: BufferedReader, source: str, errors: list[ReadError], chunk_bytes: int, limits: Limits
) -> Iterator[bytes | LongLine]:
    """Line-aligned chunks of a decompressed stream; a line past the ``log_line_bytes``
    cap is skipped as it streams by (:class:`LongLine`), never held whole."""
    parts: list[bytes] = []
    size = 0
    skipped = -1  # >= 0: bytes of an over-long line skipped so far
    for block in _raw_blocks(fh, source, errors, limits):
        if skipped >= 0:
            nl = block.find(b"\n")
            if nl < 0:
                skipped += len(block)
                continue
            yield LongLine(skipped + nl)
            skipped = -1
            block = block[nl + 1 :]
        parts.append(block)
        size += len(block)
        if size < chunk_bytes:
            continue
        data = b"".join(parts)
        cut = data.rfind(b"\n") + 1
        if cut == 0:
            if size > limits.log_line_bytes:
                skipped, parts, size = size, [], 0
            else:
                parts = [data]  # one line longer than a chunk: keep reading
            continue
        parts = [data[cut:]]
        size = len(parts[0])
        yield data[:cut]
    if skipped >= 0:
        yield LongLine(skipped)
    elif parts and (data := b"".join(parts)):
        yield data


def _blank_long_lines(data: bytes, max_line: int) -> tuple[bytes, list[tuple[int, int]]]:
    """``data`` with every line longer than ``max_line`` emptied (its newline kept, so line
    numbers hold), and (index, length) of each: for a cap below the chunk size."""
    ends = np.flatnonzero(np.frombuffer(data, dtype=np.uint8) == 10)
    ends = np.append(ends, len(data)) if not data.endswith(b"\n") else ends
    starts = np.concatenate(([0], ends[:-1] + 1))
    long = np.flatnonzero(ends - starts > max_line)
    if not long.size:
        return data, []
    pieces, at = [], 0
    for i in long.tolist():
        pieces.append(data[at : int(starts[i])])
        at = int(ends[i])
    pieces.append(data[at:])
    return b"".join(pieces), [(i, int(ends[i] - starts[i])) for i in long.tolist()]


def iter_chunks(
    path: str,
    errors: list[ReadError],
    *,
    chunk_bytes: int = CHUNK_BYTES,
    limits: Limits = DEFAULT_LIMITS,
    span: LineRange | None = None,
) -> Iterator[Chunk]:
    """Line-aligned chunks of ``path`` (decompressed). Problems go to ``errors``; a
    truncation error names the last line read. A final line without a newline is kept. A
    line past the ``log_line_bytes`` cap is skipped (its number still counts) and a
    compressed file past ``log_decoded_bytes`` cut, each a :class:`CapHit`. ``span``: only
    the lines of that range of a plain file (:mod:`.ranges`; ValueError for a compressed
    one), numbered from its ``first_line``."""
    line = 1 if span is None else span.first_line
    broken: list[ReadError] = []
    max_line = limits.log_line_bytes
    long_lines: list[CapHit] = []  # the first, then its count: one per file however many

    def long_line(number: int, size: int) -> None:
        if long_lines:
            long_lines[0] = replace(long_lines[0], count=long_lines[0].count + 1)
            return
        hit = CapHit.of(
            "log_line_bytes",
            limits,
            path,
            f"a line of {size} bytes",
            "skipped; the lines after it are read",
            line=number,
        )
        long_lines.append(hit)

    with _open(path) as fh:
        plain = compression(fh.peek(4)[:4]) is None
        if span is not None:
            if not plain:
                raise ValueError(f"{path}: a compressed file is read whole, not by range")
            start, stop = bounds(fh.fileno(), span.lo, span.hi)
            blocks = _pread_chunks(fh.fileno(), chunk_bytes, max_line, start, stop)
        elif plain:
            blocks = _plain_chunks(fh, chunk_bytes, max_line)
        else:
            blocks = _joined(fh, path, broken, chunk_bytes, limits)
        for data in blocks:
            if isinstance(data, LongLine):
                long_line(line, data.size)
                line += 1
                continue
            if max_line < chunk_bytes:  # lines under a chunk may pass the cap too
                data, cut = _blank_long_lines(data, max_line)
                for i, size in cut:
                    long_line(line + i, size)
            rows = count_lines(data)
            yield Chunk(data, line, rows)
            line += rows
    errors.extend(long_lines)
    for error in broken:
        if isinstance(error, CapHit):
            errors.append(error)
            continue
        last = line - 1
        what = f"{error.what}; {last} lines read, the rest is lost"
        errors.append(ReadError(path, what, line=last if last > 0 else None))


def compressed(path: str) -> bool:
    """Is ``path`` gzip or Zstandard data (read whole: it has no byte ranges to enter)?"""
    with _open(path) as fh:
        return compression(fh.peek(4)[:4]) is not None


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


@functools.lru_cache(maxsize=4096)  # asked once per stream, of a few files
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
