"""Captures the readers cannot map where they are: standard input (``-``), a pipe or a
process substitution (``<(zcat x.pcap.gz)``), and compressed captures (``.pcap.gz``,
``.pcapng.zst``, ``.xz``, ``.bz2``).

The capture readers map a file and jump around in it, so such an input is first copied to
a temporary file, decompressed on the way when it is compressed, in chunks of
:data:`COPY_BYTES`: memory stays bounded whatever the capture's size, the disk holds the
copy. A regular uncompressed file is read where it is, and a compressed log is left to the
log reader (it reads gzip and Zstandard itself); only what needs it is copied.

Each copy remembers the name the user gave (:attr:`Spool.names`): :func:`restore_names`
makes a scan's findings, errors and records cite ``capture.pcap.gz`` frame 12 or
``<stdin>`` frame 12 (frame numbers are those of the decompressed capture, as Wireshark
numbers them), never the temporary file. A compressed stream that ends early or holds
garbage keeps what decompressed before that, and says so in :attr:`Spool.errors`.
"""

from __future__ import annotations

import bz2
import contextlib
import gzip
import io
import lzma
import os
import pickle
import shutil
import stat
import sys
import tempfile
import zlib
from collections.abc import Callable
from types import TracebackType
from typing import IO, Any, Protocol

from sse_forensics.errors import ReadError, UnreadableInput

COPY_BYTES = 1 << 20
STDIN = "-"
STDIN_NAME = "<stdin>"
_PEEK = 64  # enough decompressed bytes to read a capture's magic number

# Magic numbers: gzip (RFC 1952), Zstandard (RFC 8878), xz, bzip2.
COMPRESSION_MAGIC = {
    "gzip": b"\x1f\x8b",
    "zstd": b"\x28\xb5\x2f\xfd",
    "xz": b"\xfd7zXZ\x00",
    "bzip2": b"BZh",
}


def compression_of(head: bytes) -> str | None:
    """``gzip``, ``zstd``, ``xz``, ``bzip2`` or None, from a file's first bytes."""
    for kind, magic in COMPRESSION_MAGIC.items():
        if head.startswith(magic):
            return kind
    return None


class _Decompressing(Protocol):
    """A decompressing reader over a raw file (:data:`_READERS`), closed on ``with`` exit."""

    def read(self, size: int = -1, /) -> bytes: ...

    def __enter__(self) -> _Decompressing: ...

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
        /,
    ) -> None: ...


def _zstd_reader(raw: IO[bytes]) -> _Decompressing:
    return _ZstdReader(raw)


class _ZstdReader(io.RawIOBase):
    """Zstandard frames (several allowed) as a file: ``read`` raises ``EOFError`` when the
    data ends inside a frame (``zstandard``'s own stream reader stops silently there)."""

    def __init__(self, raw: IO[bytes]) -> None:
        self._raw = raw
        self._dec = self._new()
        self._buf = b""
        self._started = False

    @staticmethod
    def _new() -> Any:  # a zstandard decompressobj (zstandard ships no type hints)
        import zstandard

        return zstandard.ZstdDecompressor().decompressobj()

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        # Input is fed 64 KiB at a time: the output of one call stays modest on any
        # realistic capture (a capture compresses far less than a crafted bomb).
        while not self._buf:
            data = self._raw.read(1 << 16)
            if not data:
                if self._started and not self._dec.eof:
                    raise EOFError("the Zstandard data ends inside a frame")
                return b""
            while data:
                if self._dec.eof:
                    self._dec = self._new()
                self._started = True
                self._buf += self._dec.decompress(data)
                data = self._dec.unused_data if self._dec.eof else b""
        n = len(self._buf) if size < 0 else size
        out, self._buf = self._buf[:n], self._buf[n:]
        return out


_READERS: dict[str, Callable[[IO[bytes]], _Decompressing]] = {
    "gzip": lambda raw: gzip.GzipFile(fileobj=raw, mode="rb"),
    "zstd": _zstd_reader,
    "xz": lambda raw: lzma.LZMAFile(raw, "rb"),  # noqa: SIM115 - the caller closes it
    "bzip2": lambda raw: bz2.BZ2File(raw, "rb"),
}


def _decompression_errors() -> tuple[type[BaseException], ...]:
    errors: list[type[BaseException]] = [EOFError, OSError, zlib.error, lzma.LZMAError]
    try:
        import zstandard

        errors.append(zstandard.ZstdError)
    except ImportError:  # pragma: no cover - a dependency
        pass
    return tuple(errors)


def _head(path: str, n: int = _PEEK) -> bytes:
    try:
        with open(path, "rb") as fh:
            return fh.read(n)
    except OSError:
        return b""


def decompressed_head(path: str, kind: str, n: int = _PEEK) -> bytes:
    """The first ``n`` decompressed bytes of ``path`` (fewer if it is shorter or broken)."""
    try:
        with open(path, "rb") as raw, _READERS[kind](raw) as reader:
            return reader.read(n)
    except _decompression_errors():
        return b""


def needs_copy(path: str) -> bool:
    """``-``, or something that exists but is not a regular file or a directory (a pipe,
    a FIFO, ``/dev/stdin``): it can be read once, front to back, and not mapped."""
    if path == STDIN:
        return True
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return not (stat.S_ISREG(mode) or stat.S_ISDIR(mode))


class Spool:
    """A private temporary directory of copies, removed by :meth:`close`. ``names`` maps
    each copy to the name the user gave; ``errors`` holds what went wrong while copying."""

    def __init__(self, parent: str | None = None) -> None:
        self._parent = parent
        self._dir: str | None = None
        self.names: dict[str, str] = {}
        self.errors: list[ReadError] = []

    def __enter__(self) -> Spool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None

    def name(self, path: str) -> str:
        """The name the user gave for ``path`` (``path`` itself when it is no copy)."""
        return self.names.get(path, path)

    def _new_file(self, shown: str) -> tuple[str, IO[bytes]]:
        if self._dir is None:
            self._dir = tempfile.mkdtemp(prefix="sse-forensics-input-", dir=self._parent)
        base = os.path.basename(shown.rstrip("/")) or "input"
        path = os.path.join(self._dir, f"{len(self.names) + 1}-{base}")
        self.names[path] = shown
        return path, open(path, "wb")

    def copy_stream(self, path: str) -> str:
        """Copy standard input (``-``) or the pipe at ``path`` to a file; its path."""
        shown = STDIN_NAME if path == STDIN else path
        with contextlib.ExitStack() as stack:
            if path == STDIN:
                if sys.stdin is None or sys.stdin.isatty():
                    raise UnreadableInput(
                        STDIN_NAME, "standard input is a terminal: pipe a capture or log into it"
                    )
                source: IO[bytes] = sys.stdin.buffer
            else:
                try:
                    source = stack.enter_context(open(path, "rb"))
                except OSError as exc:
                    raise UnreadableInput(path, f"cannot open: {exc.strerror or exc}") from exc
            target, out = self._new_file(shown)
            try:
                with out:
                    shutil.copyfileobj(source, out, COPY_BYTES)
            except OSError as exc:
                raise UnreadableInput(shown, f"cannot copy to a temporary file: {exc}") from exc
        return target

    def decompress(self, path: str, kind: str) -> str:
        """Decompress ``path`` (``kind`` from :func:`compression_of`) to a file; its path.
        A stream that breaks keeps what decompressed before, and adds a ``ReadError``."""
        shown = self.name(path)
        target, out = self._new_file(shown)
        written = 0
        try:
            with out, open(path, "rb") as raw, _READERS[kind](raw) as reader:
                # read1: a block as it decompresses (read() would lose the blocks it had
                # gathered when the stream breaks before COPY_BYTES).
                read = getattr(reader, "read1", reader.read)
                while block := read(COPY_BYTES):
                    out.write(block)
                    written += len(block)
        except _decompression_errors() as exc:
            self.errors.append(
                ReadError(
                    shown,
                    f"{kind} data broken after {written} decompressed bytes ({exc}): what "
                    "came before is read, the rest of the capture is missing",
                )
            )
        self.names[target] = shown  # a copy of a copy names the original
        return target


def is_capture_head(head: bytes) -> bool:
    """``head`` starts with a pcap or pcapng magic number, in either byte order."""
    from sse_forensics.ingest import pcap

    if len(head) < 4:
        return False
    known = (pcap.PCAP_MAGIC_US, pcap.PCAP_MAGIC_NS, pcap.PCAP_MAGIC_KUZNETZOV, pcap.PCAPNG_SHB)
    return any(int.from_bytes(head[:4], order) in known for order in ("little", "big"))


def capture_inside(path: str) -> str | None:
    """The compression of ``path`` when it holds a compressed pcap/pcapng capture."""
    kind = compression_of(_head(path, 8))
    if kind is None:
        return None
    return kind if is_capture_head(decompressed_head(path, kind)) else None


def compressed_other(path: str) -> str | None:
    """``xz`` or ``bzip2`` when ``path`` is compressed so (the log reader reads only gzip and
    Zstandard): such a log is decompressed to a file like a capture."""
    kind = compression_of(_head(path, 8))
    return kind if kind in ("xz", "bzip2") else None


# -- the names the user gave, in a scan's result ----------------------------------------------


def _rename_string(value: str, names: dict[str, str]) -> str:
    if value in names:
        return names[value]
    for copy, shown in names.items():
        value = value.replace(copy, shown)
    return value


def _renamed(expr: Any, names: dict[str, str], marker: str) -> Any:
    """``expr`` (a string column) with every spooled copy's name replaced."""
    import polars as pl

    out = expr
    for copy, shown in names.items():
        out = out.str.replace_all(copy, shown, literal=True)
    return pl.when(expr.str.contains(marker, literal=True)).then(out).otherwise(expr)


def _rename_frame(df: Any, names: dict[str, str], marker: str) -> Any:
    """String columns, and the string fields of list-of-struct columns (the fact tables'
    ``evidence``), renamed."""
    import polars as pl

    exprs = []
    for column, dtype in df.schema.items():
        if dtype == pl.String:
            exprs.append(_renamed(pl.col(column), names, marker).alias(column))
        elif isinstance(dtype, pl.List) and isinstance(dtype.inner, pl.Struct):
            texts = [f.name for f in dtype.inner.fields if f.dtype == pl.String]
            if texts:
                fields = [_renamed(pl.field(t), names, marker).alias(t) for t in texts]
                element = pl.element().struct.with_fields(fields)
                exprs.append(pl.col(column).list.eval(element).alias(column))
    return df.with_columns(exprs) if exprs else df


def restore_names(value: Any, names: dict[str, str]) -> Any:
    """A copy of ``value`` (a scan result, with its records and tables) in which every
    string naming a spooled copy names what the user gave instead. One pickle round trip
    walks the whole object graph; polars frames are rewritten column by column."""
    if not names:
        return value
    import polars as pl

    marker = os.path.dirname(next(iter(names)))
    renamed: dict[int, Any] = {}

    class _Out(pickle.Pickler):
        def persistent_id(self, obj: Any) -> Any:
            if type(obj) is str:
                return ("s", _rename_string(obj, names)) if marker in obj else None
            if isinstance(obj, pl.DataFrame) and id(obj) not in renamed:
                frame = _rename_frame(obj, names, marker)
                renamed[id(frame)] = frame  # saved inside the persistent id: not again
                return ("f", frame)
            return None

    class _In(pickle.Unpickler):
        def persistent_load(self, pid: Any) -> Any:
            return pid[1]

    buf = io.BytesIO()
    _Out(buf, protocol=pickle.HIGHEST_PROTOCOL).dump(value)
    buf.seek(0)
    return _In(buf).load()
