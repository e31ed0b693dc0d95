"""A scan with the default options, run once per test session and shared by the test files
that read it: several files judge the same bundled samples (each capture alone, every
capture at once, a sample's logs), each in its own xdist worker.

The first scan of a set of paths is pickled under the session's shared temporary directory
(the parent of the workers' ``basetemp``: new for every run, so a change to the analyzer
is always scanned), keyed by the paths and their bytes; a later call, in any worker, reads
that file back. Every call returns its own copy: a test that changes its result changes
nobody else's."""

from __future__ import annotations

import hashlib
import os
import pickle
from collections.abc import Iterable
from pathlib import Path

from sse_forensics.pipeline import scan_paths
from sse_forensics.result import ScanResult

_directory: Path | None = None


def share_under(directory: Path) -> None:
    """Where the scans are kept (conftest.py sets it as the session starts); unset, every
    call scans."""
    global _directory
    _directory = directory / "sample-scans"
    _directory.mkdir(exist_ok=True)


def scan(paths: Iterable[Path | str]) -> ScanResult:
    """``scan_paths(paths)`` (files or directories, cited as given), scanned once a session."""
    names = [str(p) for p in paths]
    if _directory is None:
        return scan_paths(names)
    cached = _directory / f"{_key(names)}.pickle"
    if cached.exists():
        result: ScanResult = pickle.loads(cached.read_bytes())
        return result
    result = scan_paths(names)
    data = pickle.dumps(result)
    partial = cached.with_suffix(f".{os.getpid()}")
    partial.write_bytes(data)
    partial.replace(cached)  # whole or absent for the other workers
    copy: ScanResult = pickle.loads(data)
    return copy


def _key(names: list[str]) -> str:
    digest = hashlib.sha256()
    for name in names:
        digest.update(name.encode() + b"\0")
        path = Path(name)
        files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
        for file in files:
            digest.update(str(file).encode() + b"\0" + hashlib.sha256(file.read_bytes()).digest())
    return digest.hexdigest()
