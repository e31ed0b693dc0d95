"""Which files to read, and their frames merged into one timeline (like ``mergecap``)."""

from __future__ import annotations

import contextlib
import glob
import heapq
import math
import os
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field

from sse_forensics.errors import ReadError, UnreadableInput
from sse_forensics.ingest.packets import Frame
from sse_forensics.ingest.pcap import CaptureReader, CaptureStats, sniff_capture
from sse_forensics.ingest.spool import (
    Spool,
    capture_inside,
    compressed_other,
    compression_of,
    needs_copy,
)


@dataclass(slots=True)
class Inputs:
    """What ``paths`` expand to. ``captures`` and ``logs`` are paths the readers open (a
    copy in the spool for standard input, a pipe or a compressed capture); ``skipped``
    says, one error per file, which files of a directory or glob were neither."""

    captures: list[str] = field(default_factory=list)
    logs: list[str] = field(default_factory=list)
    skipped: list[ReadError] = field(default_factory=list)
    # Files of a directory or glob that are documents or source code, not evidence: named
    # in one line, never an input problem (a capture directory often holds a README).
    ignored: list[str] = field(default_factory=list)


# Names no capture or log carries: documentation, source code, configuration, pictures.
NOT_EVIDENCE_SUFFIXES = frozenset(
    [
        ".md",
        ".rst",
        ".adoc",
        ".py",
        ".pyc",
        ".ipynb",
        ".js",
        ".mjs",
        ".ts",
        ".go",
        ".rs",
        ".java",
        ".c",
        ".h",
        ".sh",
        ".toml",
        ".yaml",
        ".yml",
        ".ini",
        ".cfg",
        ".html",
        ".css",
        ".svg",
        ".png",
        ".jpg",
        ".jpeg",
        ".gif",
        ".pdf",
    ]
)


def _is_document(path: str, probe: str | None = None) -> bool:
    """A file that is plainly not evidence: a documentation/source/config name, or a JSON
    *document* (an event log is JSON lines: its first line is a whole object; a document's
    first line is a lone ``{`` or ``[``)."""
    suffix = os.path.splitext(path)[1].lower()
    if suffix in NOT_EVIDENCE_SUFFIXES:
        return True
    if suffix != ".json":
        return False
    try:
        with open(probe or path, "rb") as fh:
            first = fh.readline(4096).strip()
    except OSError:
        return False
    return first in (b"{", b"[")


@dataclass(frozen=True, slots=True)
class RemoteFile:
    """An input this process holds only the first bytes of (an object-store input of a
    cluster scan, read whole by the workers' tasks): its ``size``, and ``head``, a local
    file of its first bytes under another name, read only to tell what the input is."""

    size: int
    head: str


@dataclass(frozen=True, slots=True)
class Unpacked:
    """A compressed remote input (``kind`` from :func:`compression_of`) that another
    machine decompressed to ``path`` (itself a remote file), as :meth:`Spool.decompress`
    does, with the ``errors`` that gave."""

    path: str
    kind: str
    errors: list[ReadError]


@dataclass(slots=True)
class RemoteInputs:
    """``files``: path -> :class:`RemoteFile`; ``members``: the files of a directory or
    glob path that this process cannot list (in the order a listing gives); ``unpacked``:
    path -> :class:`Unpacked`, the compressed inputs decompressed elsewhere."""

    files: dict[str, RemoteFile] = field(default_factory=dict)
    members: dict[str, list[str]] = field(default_factory=dict)
    unpacked: dict[str, Unpacked] = field(default_factory=dict)


_REMOTE: ContextVar[RemoteInputs | None] = ContextVar("remote_inputs", default=None)


@contextlib.contextmanager
def remote_inputs(remote: RemoteInputs) -> Iterator[None]:
    """Within the block, :func:`resolve_inputs`, :func:`input_size` and
    :func:`sniff_path` know ``remote``'s files without reading them (docs/cluster.md)."""
    token = _REMOTE.set(remote)
    try:
        yield
    finally:
        _REMOTE.reset(token)


def _remote(path: str) -> RemoteFile | None:
    remote = _REMOTE.get()
    return remote.files.get(path) if remote is not None else None


def input_size(path: str) -> int:
    """The size of the input file ``path`` (of a remote one: as its store said)."""
    found = _remote(path)
    return found.size if found is not None else os.path.getsize(path)


def sniff_path(path: str) -> str:
    """What to open to tell what ``path`` is: itself, or a remote file's head copy."""
    found = _remote(path)
    return found.head if found is not None else path


def _unpack(spool: Spool | None, path: str, kind: str) -> str:
    """``path`` decompressed (``kind``) into ``spool``, or by another machine already."""
    remote = _REMOTE.get()
    done = remote.unpacked.get(path) if remote is not None else None
    if done is None:
        return _spool(spool, path).decompress(path, kind)
    into = _spool(spool, path)
    into.names[done.path] = into.name(path)
    into.errors.extend(done.errors)
    return done.path


def _members(path: str) -> list[str] | None:
    remote = _REMOTE.get()
    return remote.members.get(path) if remote is not None else None


NOT_RECOGNISED = (
    "neither a pcap/pcapng capture nor a log this tool recognises (for an access log, "
    "give its format with --log-format)"
)


def resolve_inputs(
    paths: list[str], access_format: str | None = None, spool: Spool | None = None
) -> Inputs:
    """Split ``paths`` into capture files and log files (each told by its content, not its
    name). A directory contributes the files directly in it; a glob, the files it matches;
    any such file that is neither a capture nor a log is listed in ``skipped`` (hidden
    files are not looked at). A file given by name that is neither raises
    :class:`UnreadableInput`. ``-`` (standard input), a pipe and a compressed capture are
    copied into ``spool`` first (:mod:`.spool`); without one they raise
    :class:`UnreadableInput`. Logs come back with each rotated set oldest first
    (``access.log.2.gz``, ``access.log.1``, ``access.log``). Inside :func:`remote_inputs`,
    the remote files are told by their head copies and listed from ``members``."""
    from sse_forensics.ingest.logs.files import rotation_key

    out = Inputs()
    for path in paths:
        members = _members(path)
        if members is not None:  # a remote directory or glob: its files, as listed
            for candidate in members:
                if not os.path.basename(candidate).startswith("."):
                    _classify(candidate, out, access_format, spool, False)
        elif _remote(path) is not None:
            _classify(path, out, access_format, spool, True)
        elif needs_copy(path):
            _classify(_spool(spool, path).copy_stream(path), out, access_format, spool, True)
        elif os.path.isdir(path) or (not os.path.exists(path) and glob.has_magic(path)):
            if os.path.isdir(path):
                names = [os.path.join(path, n) for n in sorted(os.listdir(path))]
            else:
                names = sorted(glob.glob(path))
            if not names and not os.path.isdir(path):
                raise UnreadableInput(path, "the pattern matches no file")
            for candidate in names:
                if not os.path.isfile(candidate) or os.path.basename(candidate).startswith("."):
                    continue
                _classify(candidate, out, access_format, spool, False)
        elif not os.path.exists(path):
            raise UnreadableInput(path, "no such file or directory")
        else:
            _classify(path, out, access_format, spool, True)
    out.logs = sorted(dict.fromkeys(out.logs), key=rotation_key)
    return out


def _spool(spool: Spool | None, path: str) -> Spool:
    if spool is None:
        raise UnreadableInput(path, "a stream or a compressed capture needs a scan to read it")
    return spool


def _classify(
    path: str, out: Inputs, access_format: str | None, spool: Spool | None, named: bool
) -> None:
    """Put ``path`` where it belongs in ``out``; ``named``: the user named it (else it came
    from a directory or a glob)."""
    from sse_forensics.ingest.logs import sniff_log  # logs are optional input: load lazily

    probe = sniff_path(path)  # a remote file: its head copy, never read as the file
    if sniff_capture(probe):
        out.captures.append(path)
        return
    kind = capture_inside(probe) or compressed_other(probe)
    if kind is not None:
        path = _unpack(spool, path, kind)
        probe = sniff_path(path)
        if sniff_capture(probe):
            out.captures.append(path)
            return
    if sniff_log(probe, access_format=access_format) or (named and access_format is not None):
        # With a format given, a named file is read as that log: the reader then says
        # exactly where its first line stops matching.
        out.logs.append(path)
        return
    shown = spool.name(path) if spool is not None else path
    if not named and kind is None and _is_document(path, probe):
        out.ignored.append(shown)
        return
    why = NOT_RECOGNISED
    if kind is None and (packed := compression_of(_head(probe))) is not None:
        why = f"{packed} data that decompresses to no capture or log this tool recognises"
    if named:
        raise UnreadableInput(shown, why)
    out.skipped.append(ReadError(shown, f"not read: {why}"))


def _head(path: str) -> bytes:
    try:
        with open(path, "rb") as fh:
            return fh.read(8)
    except OSError:
        return b""


def classify_inputs(
    paths: list[str], access_format: str | None = None
) -> tuple[list[str], list[str]]:
    """``(captures, logs)`` of :func:`resolve_inputs`, for files that need no copy."""
    found = resolve_inputs(paths, access_format)
    return found.captures, found.logs


def _keyed(reader: CaptureReader) -> Iterator[tuple[float, Frame | ReadError]]:
    """(merge key, item); a ReadError sorts at its own time, or right after the frame
    before it (its place in the file)."""
    last = -math.inf
    for item in reader:
        if isinstance(item, Frame):
            last = item.origin.ts
            yield last, item
        else:
            yield (item.ts if item.ts is not None else last), item


class MergedCapture:
    """Iterator over the merged frames of several files; :attr:`stats` maps each file to
    its :class:`CaptureStats` (filled in as it is read, final once iteration ends)."""

    def __init__(self, readers: list[CaptureReader]) -> None:
        self.stats: dict[str, CaptureStats] = {r.path: r.stats for r in readers}
        if len(readers) == 1:
            self._it: Iterator[Frame | ReadError] = iter(readers[0])
        else:
            merged = heapq.merge(*(_keyed(r) for r in readers), key=lambda pair: pair[0])
            self._it = (item for _key, item in merged)

    def __iter__(self) -> MergedCapture:
        return self

    def __next__(self) -> Frame | ReadError:
        return next(self._it)


def merged_frames(paths: list[str]) -> MergedCapture:
    """Frames of all ``paths`` in timestamp order, as one capture (``mergecap`` merges the
    same way: each file is assumed in order; equal times keep the order of ``paths``).
    Every frame keeps its own file and frame number.

    All files are opened first, so a file that is not a capture raises
    :class:`UnreadableInput` before any frame is produced.
    """
    return MergedCapture([CaptureReader(path) for path in paths])
