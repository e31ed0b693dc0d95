"""Event rows held until their session is known, in memory up to a budget and in scratch
files past it (issue 16: a stream the exact path reads is handed on as rows every
``SPILL_EVENTS`` events, but its rows wait for the end of its connection — the session of
an exchange may be inferred from the connection's other exchanges — and a stream of ten
million events still open at the end of the capture would hold ~120 bytes an event).

The files are Arrow IPC (uncompressed: written once, read once, by this process) in a
directory of their own under the system's temporary directory, made at the first file and
removed when the rows are taken or the holder is let go.
"""

from __future__ import annotations

import shutil
import tempfile
import weakref
from collections.abc import Iterator
from pathlib import Path

import polars as pl

from sse_forensics.evidence.store import compact

# Bytes of rows (polars' estimate) held in memory, all streams together; past them, each
# further window of rows goes to a file.
HELD_BYTES = 64 << 20

Key = tuple[int, int]  # (connection, exchange)


class HeldRows:
    """Windows of event rows by exchange, in the order added (:meth:`add`), until taken
    (:meth:`take`)."""

    def __init__(self) -> None:
        self._windows: dict[Key, list[pl.DataFrame | Path]] = {}
        self._bytes = 0  # of the windows held in memory
        self._dir: Path | None = None
        self._files = 0
        self.written = 0  # windows written to files, ever (a test reads it)

    def __bool__(self) -> bool:
        return bool(self._windows)

    def add(self, key: Key, rows: pl.DataFrame) -> None:
        size = int(rows.estimated_size())
        windows = self._windows.setdefault(key, [])
        if self._bytes + size <= HELD_BYTES:
            windows.append(rows)
            self._bytes += size
            return
        path = self._directory() / f"{self._files:08d}.arrow"
        self._files += 1
        rows.write_ipc(path, compression="uncompressed")
        windows.append(path)
        self.written += 1

    def take(self, key: Key, per: int) -> Iterator[pl.DataFrame]:
        """The rows of ``key`` in order, ``per`` windows concatenated at a time (whole
        columns again), read back from their files (then removed) only when their group is
        asked for: the rows held once taken are those of the other exchanges only."""
        windows = self._windows.pop(key, [])
        for lo in range(0, len(windows), per):
            group = []
            for window in windows[lo : lo + per]:
                if isinstance(window, Path):
                    rows = pl.read_ipc(window)
                    window.unlink()
                    group.append(compact(rows))  # one-value columns stored once again
                else:
                    self._bytes -= int(window.estimated_size())
                    group.append(window)
            yield pl.concat(group, rechunk=True)
        if not self._windows:
            self._bytes = 0

    def _directory(self) -> Path:
        if self._dir is None:
            self._dir = Path(tempfile.mkdtemp(prefix="sse-forensics-held-"))
            weakref.finalize(self, shutil.rmtree, self._dir, ignore_errors=True)
        return self._dir
