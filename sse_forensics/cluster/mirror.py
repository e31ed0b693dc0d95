"""A scratch directory in an object store (``--scratch s3://bucket/prefix``): for clusters
whose machines share no filesystem.

The scan's code reads and writes local files. So every machine — the client and each
worker — works in a local directory at the *same path* (``/tmp/sse-forensics-cluster-…``),
and the object store holds the one true copy of each file under it (``<url>/<relative
path>``):

- around each task (:func:`run_mirrored`): the files its arguments name that this machine
  lacks are downloaded first (a name the store does not hold is a directory, made here);
  the files its result names that it wrote are uploaded, then removed here, so a machine's
  disk holds what its current tasks use;
- on the client (:class:`Mirror`): the files it wrote itself (spooled inputs) are uploaded
  before a task names them; the evidence files it reads itself (the cross-session pass) are
  downloaded when a task's result names them;
- object-store inputs are not staged: a worker (or the client) downloads one straight from
  its store when a task names its staged path;
- at the end, or after Ctrl-C, the store prefix and every machine's directory are removed.

Downloads and uploads go through a hidden temporary name and a rename: a task run again
after its worker died, or two tasks wanting the same file, never see half a file.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
import shutil
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePath
from typing import TYPE_CHECKING, Any, TypeGuard

from sse_forensics.evidence.tables import EVIDENCE_TABLES

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

# The evidence store's spill files (``EvidenceStore.spill``) and the partition tasks'
# sessions rows (``pipeline._analyze_files``): what the client reads itself.
CLIENT_READS = re.compile(
    rf"^(({'|'.join(t.name for t in EVIDENCE_TABLES)})-\d{{5}}-\d{{5}}|judged-\d{{5}})\.parquet$"
)
# A partition task's result (``pipeline._analyze_files``), which names its sessions file.
PARTITION_RESULT = "sse_forensics.pipeline.PartitionResult"
# Where a scan with an object-store scratch works on every machine.
LOCAL_BASE = "/tmp"


@dataclass(slots=True)
class Mirror:
    """``root`` (a local directory, the same path on every machine) mirrored at ``url``;
    ``sources``: (local prefix, URL prefix) of inputs read straight from their store."""

    root: str
    url: str
    sources: list[tuple[str, str]] = field(default_factory=list)
    _pushed: set[str] = field(default_factory=set, repr=False)

    def location(self, path: str) -> str | None:
        """The URL of a local ``path`` under the mirror, or None."""
        for local, remote in self.sources:
            if path.startswith(local):
                return remote + path[len(local) :]
        if path == self.root or path.startswith(self.root + os.sep):
            return self.url + path[len(self.root) :].replace(os.sep, "/")
        return None

    # -- transfers -----------------------------------------------------------------------

    def pull(self, paths: list[str]) -> list[str]:
        """Make ``paths`` (under the mirror) present here: download the files this machine
        lacks, make the directories. Returns the files downloaded."""
        fs = _filesystem(self.url)
        got = []
        for path in paths:
            if os.path.exists(path):
                continue
            url = self.location(path)
            if url is None:
                continue
            with _lock(path):  # one download per file in a process of several tasks
                if os.path.exists(path):
                    continue
                source_fs = fs if url.startswith(self.url) else _filesystem(url)
                if not source_fs.isfile(_inner(url)):
                    os.makedirs(path, exist_ok=True)
                    continue
                Path(path).parent.mkdir(parents=True, exist_ok=True)
                part = _hidden(path)
                try:
                    source_fs.get_file(_inner(url), part)
                    os.replace(part, path)
                finally:
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(part)
            got.append(path)
            self._pushed.add(path)  # the store has it
        return got

    def push(self, paths: list[str], *, remove: bool = False) -> None:
        """Upload the files among ``paths`` that exist here and were not uploaded yet
        (``remove``: delete them here afterwards)."""
        fs = _filesystem(self.url)
        for path in paths:
            if path in self._pushed or not os.path.isfile(path):
                continue
            url = self.location(path)
            if url is None or not url.startswith(self.url):
                continue
            fs.put_file(path, _inner(url))
            self._pushed.add(path)
            if remove:
                os.unlink(path)

    def held(self, paths: list[str]) -> None:
        """Note that the store holds ``paths`` (a task's result names them): the client
        never uploads them again (on a filesystem it shares with a worker, it may see them
        while that worker downloads them)."""
        self._pushed.update(paths)

    def remove(self) -> None:
        """The store's copy, gone (the local directories: :func:`remove_local`)."""
        fs = _filesystem(self.url)
        with contextlib.suppress(FileNotFoundError):
            fs.rm(_inner(self.url), recursive=True)


# Striped: a path's download is serialised with those of the paths that share its stripe.
_LOCKS = [threading.Lock() for _ in range(64)]


def _lock(path: str) -> threading.Lock:
    return _LOCKS[hash(path) % len(_LOCKS)]


def fsspec_of(url: str) -> tuple[Any, str]:
    """(filesystem, path inside it) of ``url``."""
    import fsspec

    found: tuple[Any, str] = fsspec.core.url_to_fs(url)
    return found


def _filesystem(url: str) -> Any:
    return fsspec_of(url)[0]


def _inner(url: str) -> str:
    return fsspec_of(url)[1]


def _hidden(path: str) -> str:
    return os.path.join(os.path.dirname(path), f".{os.path.basename(path)}.{uuid.uuid4().hex}")


def paths_in(value: object, root: str, found: list[str] | None = None) -> list[str]:
    """Every path under ``root`` that ``value`` names (strings and paths, inside lists,
    tuples, sets, dicts and dataclasses), in order."""
    found = [] if found is None else found
    if isinstance(value, str | PurePath):
        text = str(value)
        if text == root or text.startswith(root + os.sep):
            found.append(text)
    elif isinstance(value, list | tuple | set | frozenset):
        for item in value:
            paths_in(item, root, found)
    elif isinstance(value, dict):
        for key, item in value.items():
            paths_in(key, root, found)
            paths_in(item, root, found)
    elif _carries_paths(value):
        for f in dataclasses.fields(value):
            paths_in(getattr(value, f.name), root, found)
    return found


def _carries_paths(value: object) -> TypeGuard[DataclassInstance]:
    """The cluster's own task arguments and results, and a partition task's result (its
    sessions file); not the rules, the cross-session front or a partition's findings,
    which name no scratch file and can be large."""
    return (
        dataclasses.is_dataclass(value)
        and not isinstance(value, type)
        and (
            type(value).__module__.startswith("sse_forensics.cluster.")
            or f"{type(value).__module__}.{type(value).__qualname__}" == PARTITION_RESULT
        )
    )


def run_mirrored(mirror: Mirror, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """On a worker: ``fn(*args, **kwargs)`` with the files it names downloaded first, and
    the files it wrote (those its result names) uploaded and removed here afterwards."""
    needed = paths_in([args, kwargs], mirror.root)
    mirror.pull(needed)
    before = set(needed)
    result = fn(*args, **kwargs)
    mirror.push([p for p in paths_in(result, mirror.root) if p not in before], remove=True)
    return result


def probe(mirror: Mirror, name: str) -> str:
    """On a worker: the probe object the client wrote, read back (an error if this machine
    cannot reach the store)."""
    fs = _filesystem(mirror.url)
    text: str = fs.cat_file(_inner(f"{mirror.url}/{name}")).decode()
    return text


def remove_local(root: str) -> None:
    """On each machine: its local directory of the scan, gone."""
    shutil.rmtree(root, ignore_errors=True)


def local_root() -> str:
    """A new local directory for a scan whose scratch is a URL: a path every machine can
    make (under :data:`LOCAL_BASE`)."""
    base = LOCAL_BASE if os.path.isdir(LOCAL_BASE) else None
    name = f"sse-forensics-cluster-{time.strftime('%Y%m%d')}-{uuid.uuid4().hex[:12]}"
    root = os.path.join(base or os.path.realpath(os.path.expanduser("~")), name)
    os.makedirs(root)
    return os.path.realpath(root)


def client_reads(paths: list[str]) -> Iterator[str]:
    """The files among ``paths`` the client reads itself (evidence for the cross-session
    pass)."""
    return (p for p in paths if CLIENT_READS.match(os.path.basename(p)))
