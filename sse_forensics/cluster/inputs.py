"""Where a cluster scan's inputs are: local paths, ``file://`` URLs, and object-store URLs
(``s3://``, ``gs://``, anything fsspec knows), each a file, a directory or a glob.

The readers open local files (captures are memory-mapped), so an object-store file is first
copied, by a worker, into a staging tree under the scan's scratch directory that mirrors the
store (``<stage>/s3/bucket/key``). The path handed to the scan has the shape the user gave
(the staged file, directory or glob), so a directory is listed and a glob matched exactly as
for local files, and rotated logs stay together. Local paths are made absolute (a remote
worker has another working directory). :meth:`StagedInputs.source` turns a path the scan
reports back into what the user wrote: findings, errors and log statistics cite
``s3://bucket/key`` or ``samples/x.pcap``, never the staging tree.

Listing happens on the client, before any worker starts: a missing credential, an unknown
protocol or a path that does not exist raises :class:`UnreadableInput` (one line, exit 2).
"""

from __future__ import annotations

import glob
import os
import re
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sse_forensics.cluster.spec import INSTALL_HINT
from sse_forensics.errors import ReadError, UnreadableInput
from sse_forensics.ingest.spool import Spool

_URL = re.compile(r"^(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*)://(?P<rest>.*)$")


@dataclass(slots=True)
class StagedInputs:
    """``paths``: what the scan reads. ``fetches``: (URL, staged file) to copy first.
    ``prefixes``: (scan-side prefix, user-side prefix), longest first. ``members``: the
    staged files of each object-store directory or glob in ``paths``, as listed."""

    given: list[str]
    paths: list[str] = field(default_factory=list)
    fetches: list[tuple[str, str]] = field(default_factory=list)
    prefixes: list[tuple[str, str]] = field(default_factory=list)
    members: dict[str, list[str]] = field(default_factory=dict)

    def source(self, path: str) -> str:
        """``path`` as the user spelled it (a URL for a staged file)."""
        for inner, outer in self.prefixes:
            if path.startswith(inner):
                return outer + path[len(inner) :]
        return path


def _fsspec() -> Any:
    try:
        import fsspec
    except ImportError as exc:  # pragma: no cover - the cluster extra installs it
        raise UnreadableInput("fsspec", f"URL inputs need fsspec: {INSTALL_HINT}") from exc
    return fsspec


def why(exc: BaseException) -> str:
    """One line: what the store said. fsspec says which package a protocol needs
    (``Install s3fs to access S3``); a store says which credential is missing."""
    lines = str(exc).strip().splitlines()
    text = lines[0] if lines else ""
    if isinstance(exc, FileNotFoundError):
        return "no such file or directory"
    if isinstance(exc, ImportError):
        return f"this protocol needs a package that is not installed: {text}"
    return f"cannot reach the store: {type(exc).__name__}: {text}".rstrip(": ")


def plan_inputs(paths: list[str], stage: Path, cwd: str | None = None) -> StagedInputs:
    """Resolve ``paths`` (client side: lists the stores, copies nothing)."""
    cwd = cwd or os.getcwd()
    plan = StagedInputs(given=list(paths))
    for path in paths:
        m = _URL.match(path)
        if m is None:
            if not os.path.exists(path) and not glob.has_magic(path):
                raise UnreadableInput(path, "no such file or directory")  # as a local scan
            if os.path.isabs(path):
                plan.paths.append(path)
            else:
                plan.paths.append(os.path.join(cwd, path))
                # What the scan reports under this argument, back as the user spelled it
                # (``./x``, ``../y``); for a glob, its directories before the first wildcard.
                spelled = path
                if glob.has_magic(path):
                    head = path[: _magic_start(path)]
                    spelled = head[: head.rfind(os.sep) + 1]
                plan.prefixes.append((os.path.join(cwd, spelled), spelled))
        elif m.group("scheme").lower() == "file":
            _, local = _fsspec().core.url_to_fs(path)
            plan.paths.append(local)
        else:
            _plan_remote(plan, path, m.group("scheme").lower(), stage)
    plan.prefixes.sort(key=lambda pair: len(pair[0]), reverse=True)
    return plan


def _plan_remote(plan: StagedInputs, url: str, scheme: str, stage: Path) -> None:
    fsspec = _fsspec()
    root = stage / scheme
    directory = False
    try:
        fs, target = fsspec.core.url_to_fs(url)
        if glob.has_magic(target):
            found = fs.glob(target, detail=True)
            files = sorted(n for n, info in found.items() if info.get("type") == "file")
            if not files:
                raise UnreadableInput(url, "the pattern matches no file")
        else:
            info = fs.info(target)
            directory = info.get("type") == "directory"
            if directory:
                files = sorted(
                    e["name"]
                    for e in fs.ls(target, detail=True)
                    if e.get("type") == "file" and not _base(e["name"]).startswith(".")
                )
            else:
                files = [info.get("name", target)]
    except UnreadableInput:
        raise
    except Exception as exc:  # any store's own error: one line, exit 2 (never a traceback)
        raise UnreadableInput(url, why(exc)) from exc
    local = root / _relative(target)
    if directory:
        local.mkdir(parents=True, exist_ok=True)  # an empty directory is still a directory
    if directory or glob.has_magic(target):
        plan.members[str(local)] = [str(root / _relative(name)) for name in files]
    known = {dest for _, dest in plan.fetches}
    for name in files:
        dest = str(root / _relative(name))
        if dest not in known:
            plan.fetches.append((f"{scheme}://{_relative(name)}", dest))
            known.add(dest)
    plan.paths.append(str(local))
    plan.prefixes.append((str(root) + os.sep, f"{scheme}://"))


def _magic_start(path: str) -> int:
    return min((i for i, c in enumerate(path) if c in "*?["), default=len(path))


def _relative(name: str) -> str:
    """A store path as a path under the staging root (``bucket/key``, ``/dir/x`` → ``dir/x``)."""
    return name.split("://", 1)[-1].lstrip("/")


def _base(name: str) -> str:
    return name.rstrip("/").rsplit("/", 1)[-1]


def fetch_input(url: str, dest: str) -> int:
    """Copy one object to ``dest`` (on a worker); atomic, so a retried copy after a worker
    died is harmless. Returns its size in bytes."""
    fsspec = _fsspec()
    Path(dest).parent.mkdir(parents=True, exist_ok=True)
    # Hidden while partial: a directory scan skips names starting with a dot.
    part = os.path.join(os.path.dirname(dest), f".{os.path.basename(dest)}.{uuid.uuid4().hex}")
    fs, target = fsspec.core.url_to_fs(url)
    try:
        fs.get_file(target, part)
        os.replace(part, dest)
    finally:
        if os.path.exists(part):
            os.unlink(part)
    return os.path.getsize(dest)


@dataclass(slots=True)
class UnpackedInput:
    """What :func:`unpack_input` wrote: the decompressed file, and what went wrong."""

    path: str
    errors: list[ReadError]


def unpack_input(path: str, kind: str, out_dir: str) -> UnpackedInput:
    """On a worker: the input at ``path`` decompressed (``kind``) into a new directory
    under ``out_dir``, as a local scan's spool does (:meth:`Spool.decompress`: a stream
    that breaks keeps what came before, and says so). A retried task writes a new file."""
    os.makedirs(out_dir, exist_ok=True)
    spool = Spool(out_dir)  # not closed: the file is the result (the scan removes out_dir)
    target = spool.decompress(path, kind)
    return UnpackedInput(target, spool.errors)
