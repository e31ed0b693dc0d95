"""Which files to read, and their frames merged into one timeline (like ``mergecap``)."""

from __future__ import annotations

import glob
import heapq
import math
import os
from collections.abc import Iterator

from sse_forensics.errors import ReadError, UnreadableInput
from sse_forensics.ingest.packets import Frame
from sse_forensics.ingest.pcap import CaptureReader, CaptureStats, sniff_capture


def classify_inputs(
    paths: list[str], access_format: str | None = None
) -> tuple[list[str], list[str]]:
    """Split ``paths`` into capture files and log files (each told by its content, not its
    name). A directory contributes the captures and logs directly in it (other files are
    skipped); a glob, the files it matches. A file given by name that is neither raises
    :class:`UnreadableInput`. Logs come back with each rotated set oldest first
    (``access.log.2.gz``, ``access.log.1``, ``access.log``)."""
    from sse_forensics.ingest.logs import sniff_log  # logs are optional input: load lazily
    from sse_forensics.ingest.logs.files import rotation_key

    captures: list[str] = []
    logs: list[str] = []
    for path in paths:
        if os.path.isdir(path) or (not os.path.exists(path) and glob.has_magic(path)):
            if os.path.isdir(path):
                names = [os.path.join(path, n) for n in sorted(os.listdir(path))]
            else:
                names = sorted(glob.glob(path))
            if not names and not os.path.isdir(path):
                raise UnreadableInput(path, "the pattern matches no file")
            for candidate in names:
                if not os.path.isfile(candidate) or os.path.basename(candidate).startswith("."):
                    continue
                if sniff_capture(candidate):
                    captures.append(candidate)
                elif sniff_log(candidate, access_format=access_format):
                    logs.append(candidate)
        elif not os.path.exists(path):
            raise UnreadableInput(path, "no such file or directory")
        elif sniff_capture(path):
            captures.append(path)
        elif sniff_log(path, access_format=access_format) or access_format is not None:
            # With a format given, a named file is read as that log: the reader then says
            # exactly where its first line stops matching.
            logs.append(path)
        else:
            raise UnreadableInput(
                path,
                "neither a pcap/pcapng capture nor a log this tool recognises "
                "(for an access log, give its format with --log-format)",
            )
    return captures, sorted(dict.fromkeys(logs), key=rotation_key)


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
