"""A scan on a Dask cluster: :func:`~sse_forensics.pipeline.scan_paths` itself, its parallel
stages submitted to the cluster instead of local worker processes.

The plan (docs/cluster.md, docs/scaling.md):

1. **Inputs** are resolved on the client (:mod:`.inputs`); each object-store file is copied
   by one worker task into the staging tree under the scratch directory — with an
   object-store scratch, not copied: the client reads its size and head only
   (:func:`_read_in_place`), each task downloads the inputs it reads.
2. **Captures** (:mod:`.captures`): one task per capture file indexes it; then one task per
   worker thread (``pipeline``'s capture shards) merges the indexes into the one timeline
   whose connections are numbered in it and reassembles the connections whose id falls to
   its shard, writing its session-hash partitions as Parquet under the scratch directory.
3. **Logs** (:mod:`.logs`): one task per log file routes its rows to partitions, then tasks
   per partition write the evidence; log pseudo-connections are numbered on the client from
   one small table per partition.
4. **Cross-session facts** (``pipeline.cross_session_front``): one task per partition
   reads its events (``pipeline._front_task``: the ID schemes' statistics and the
   sightings a resume can link to, the counter keys, the first sightings of replayed
   events); the client reads the exchanges' columns it needs and merges the tasks' small
   results.
5. **Partitions**: one task per partition group, ``pipeline._analyze_files`` — the pure
   function ``--jobs`` runs in local processes: Parquet files in, findings out.
6. **Merge** on the client, sorted as a local scan sorts (``pipeline.scan_paths``).

The scratch directory must be one the client and every worker see (checked before any task
runs); it is removed at the end, also after an error or Ctrl-C.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shutil
import tempfile
import threading
from collections.abc import Callable
from concurrent.futures import CancelledError, Future
from pathlib import Path
from typing import Any, TypeVar

from sse_forensics.cluster.client import ClusterExecutor, open_cluster, worker_threads
from sse_forensics.cluster.inputs import (
    StagedInputs,
    fetch_input,
    plan_inputs,
    unpack_input,
    why,
)
from sse_forensics.cluster.mirror import Mirror, fsspec_of, local_root, probe, remove_local
from sse_forensics.cluster.spec import ClusterSpec, ClusterUnavailable, parse_cluster
from sse_forensics.engine.registry import RuleSet
from sse_forensics.errors import UnreadableInput
from sse_forensics.facts.config import AnalysisConfig
from sse_forensics.ingest.inputs import RemoteFile, RemoteInputs, Unpacked, remote_inputs
from sse_forensics.ingest.spool import (
    capture_inside,
    compressed_other,
    compression_of,
    is_capture_head,
)
from sse_forensics.limits import DEFAULT_LIMITS
from sse_forensics.pipeline import PARTITION_BYTES, LogOptions, scan_paths
from sse_forensics.result import ScanProgress, ScanResult
from sse_forensics.workers import input_bytes

# Partitions of a cluster scan (:func:`cluster_partitions`).
PARTITIONS_PER_WORKER_MIN = 4
PARTITIONS_PER_WORKER_MAX = 16
# A partition task's peak is ~320 MB plus ~9x its partition's input (the 2.45 GB log set at
# --cluster local:1: 16 partitions of 153 MB, worker 1,718 MB; 39 of 63 MB, 896 MB).
MAX_PARTITION_BYTES = 64 << 20

# Which stage of the progress bar each task function advances.
TASK_STAGES = {
    "fetch_input": "read",
    "unpack_input": "read",
    "index_capture_file": "read",
    "number_flow_shard": "read",
    "reassemble_flow_shard": "read",
    "reassemble_indexed_shard": "read",
    "_analyze_files": "facts",
}

# What the client reads of each object-store input with an object-store scratch: enough for
# the capture and log sniffers (a log's 64 KiB head, decompressed) — the rest is the workers'.
HEAD_BYTES = 1 << 20

T = TypeVar("T")

SCRATCH_HINT = (
    "give --scratch a directory on a filesystem the client and every worker share, or an "
    "object-store URL they all reach (s3://bucket/prefix)"
)


def scan_on_cluster(
    paths: list[str],
    cluster: str | ClusterSpec | Any,
    *,
    config: AnalysisConfig | None = None,
    rules: RuleSet | None = None,
    logs: LogOptions | None = None,
    progress: ScanProgress | None = None,
    keep_tables: bool = True,
    scratch: str | None = None,
    on_dashboard: Callable[[str], None] | None = None,
    unjudged_listed: int | None = None,
) -> ScanResult:
    """Scan ``paths`` (local paths, ``file://`` or fsspec URLs; files, directories, globs)
    on ``cluster``: ``local``, ``local:N``, a scheduler address, a :class:`ClusterSpec`, or
    a ``distributed.Client`` already open (left open). The result is the one a local scan
    of the same inputs gives (``unjudged_listed``: as
    :func:`~sse_forensics.pipeline.scan_paths` takes it). Raises :class:`UnreadableInput`
    (inputs) and :class:`ClusterUnavailable` (cluster, scratch)."""
    root, url = _scratch_root(scratch)
    mirror = Mirror(str(root), f"{url}/{root.name}") if url is not None else None
    try:
        staged = plan_inputs(paths, root / "inputs")  # before any worker starts
        with _client(cluster) as client:
            try:
                return _run(
                    staged,
                    client,
                    root,
                    mirror,
                    config,
                    rules,
                    logs,
                    progress,
                    keep_tables,
                    on_dashboard,
                    unjudged_listed,
                )
            finally:
                if mirror is not None:
                    _forget(client, mirror)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _client(cluster: str | ClusterSpec | Any) -> contextlib.AbstractContextManager[Any]:
    if isinstance(cluster, str):
        return open_cluster(parse_cluster(cluster))
    if isinstance(cluster, ClusterSpec):
        return open_cluster(cluster)
    return contextlib.nullcontext(cluster)  # the caller's client: left open


def _scratch_root(scratch: str | None) -> tuple[Path, str | None]:
    """The scan's local scratch directory, and the object-store URL that mirrors it (None
    for a directory every machine shares)."""
    if scratch is not None and "://" in scratch and not scratch.startswith("file://"):
        try:
            import fsspec

            fs, inner = fsspec.core.url_to_fs(scratch)
            fs.mkdirs(inner, exist_ok=True)
        except Exception as exc:  # any store's own error: one line, exit 2
            raise ClusterUnavailable(f"--scratch {scratch}: {why(exc)}") from exc
        return Path(local_root()), scratch.rstrip("/")
    if scratch is not None:
        scratch = scratch.removeprefix("file://")
    if scratch is not None and not os.path.isdir(scratch):
        raise ClusterUnavailable(f"--scratch {scratch}: no such directory")
    try:
        root = tempfile.mkdtemp(prefix="sse-forensics-cluster-", dir=scratch)
        return Path(root).resolve(), None
    except OSError as exc:
        raise ClusterUnavailable(f"--scratch {scratch}: {exc.strerror or exc}") from exc


def _run(
    staged: StagedInputs,
    client: Any,
    root: Path,
    mirror: Mirror | None,
    config: AnalysisConfig | None,
    rules: RuleSet | None,
    logs: LogOptions | None,
    progress: ScanProgress | None,
    keep_tables: bool,
    on_dashboard: Callable[[str], None] | None,
    unjudged_listed: int | None = None,
) -> ScanResult:
    from distributed import KilledWorker

    if on_dashboard is not None and getattr(client, "dashboard_link", None):
        on_dashboard(client.dashboard_link)
    workers = worker_threads(client)
    if mirror is not None:
        _check_store(client, mirror)
    _check_shared(client, root, staged, mirror)
    progress = _serialised(progress)
    executor = ClusterExecutor(client, progress, TASK_STAGES, mirror)
    try:
        remote = RemoteInputs()
        if mirror is None:
            _fetch(executor, staged)
        else:
            remote = _read_in_place(staged, mirror, executor)
        size = input_bytes(staged.paths) + sum(f.size for f in remote.files.values())
        with remote_inputs(remote):  # the client reads no more of them than their heads
            result = scan_paths(
                staged.paths,
                config,
                rules=rules,
                progress=progress,
                logs=logs,
                jobs=workers,
                buckets=cluster_partitions(size, workers),
                keep_tables=keep_tables,
                executor=executor,
                scratch=str(root),
                unjudged_listed=unjudged_listed,
            )
    except UnreadableInput as exc:
        raise UnreadableInput(staged.source(exc.source), exc.reason) from exc
    except KilledWorker as exc:
        raise ClusterUnavailable(f"a task kept killing its workers: {exc}") from exc
    except CancelledError as exc:
        raise ClusterUnavailable("the cluster cancelled the scan's tasks") from exc
    except OSError as exc:  # a worker that cannot read what the client wrote, or the reverse
        raise ClusterUnavailable(f"{exc}; {SCRATCH_HINT}") from exc
    finally:
        executor.shutdown(wait=False)
    return restore_sources(result, staged)


def cluster_partitions(size: int, workers: int) -> int:
    """How many session partitions a cluster scan of ``size`` input bytes uses: about
    :data:`~sse_forensics.pipeline.PARTITION_BYTES` of input each (what bounds a partition
    task's memory), at least :data:`PARTITIONS_PER_WORKER_MIN` per worker so they finish
    together, and at most :data:`PARTITIONS_PER_WORKER_MAX` per worker — every partition is
    a task, and a file from each task that writes rows to it — unless a partition would
    then hold more than :data:`MAX_PARTITION_BYTES`."""
    by_size = -(-size // PARTITION_BYTES)
    cap = max(PARTITIONS_PER_WORKER_MAX * workers, -(-size // MAX_PARTITION_BYTES))
    return max(1, PARTITIONS_PER_WORKER_MIN * workers, min(by_size, cap))


def _check_shared(
    client: Any, root: Path, staged: StagedInputs, mirror: Mirror | None = None
) -> None:
    """Every worker must see the scratch directory (unless an object store mirrors it) and
    the local inputs: say so before a task fails on it."""
    local = [p for p in staged.paths if not p.startswith(str(root))]
    seen = client.run(_missing, local if mirror is not None else [str(root), *local])
    for worker, missing in sorted(seen.items()):
        if str(root) in missing:
            raise ClusterUnavailable(f"worker {worker} cannot see {root}: {SCRATCH_HINT}")
        if missing:
            raise ClusterUnavailable(
                f"worker {worker} cannot see {staged.source(missing[0])}: local inputs must be "
                "on a filesystem every worker shares (or give them as URLs)"
            )


def _check_store(client: Any, mirror: Mirror) -> None:
    """Every worker must reach the object-store scratch: each reads back an object the
    client wrote (their credentials may not be the client's)."""
    name = ".reachable"
    token = os.urandom(8).hex()
    url = f"{mirror.url}/{name}"
    try:
        fs, inner = fsspec_of(url)
        fs.pipe_file(inner, token.encode())
    except Exception as exc:
        raise ClusterUnavailable(f"--scratch {mirror.url}: {why(exc)}") from exc
    try:
        seen = client.run(probe, mirror, name)
    except Exception as exc:
        raise ClusterUnavailable(
            f"a worker cannot reach --scratch {mirror.url}: {why(exc)}"
        ) from exc
    for worker, got in sorted(seen.items()):
        if got != token:
            raise ClusterUnavailable(f"worker {worker} does not see --scratch {mirror.url}")


def _read_in_place(staged: StagedInputs, mirror: Mirror, executor: ClusterExecutor) -> RemoteInputs:
    """With an object-store scratch, object-store inputs are not staged: each worker
    downloads the ones its tasks name straight from their store. The client reads of each
    only its size and its first :data:`HEAD_BYTES` (a ranged read, a few objects at a
    time), enough to tell captures from logs (:class:`RemoteInputs`). An input a local
    scan decompresses into its spool (a compressed capture, an xz or bzip2 file) is
    decompressed by a worker task (:func:`unpack_input`), and the client reads the head of
    what it wrote; one with no line end in its head, on to its first line end
    (:func:`_first_lines`)."""
    from concurrent.futures import ThreadPoolExecutor

    for url, _ in staged.fetches:
        scheme = url.split("://", 1)[0]
        local = str(Path(mirror.root) / "inputs" / scheme) + os.sep
        if (local, f"{scheme}://") not in mirror.sources:
            mirror.sources.append((local, f"{scheme}://"))
    heads = Path(mirror.root) / "heads"
    remote = RemoteInputs(members=dict(staged.members))
    packed: list[tuple[str, str, str]] = []
    with ThreadPoolExecutor(max_workers=8) as pool:
        found = pool.map(lambda fetch: _head_one(mirror, heads, *fetch), staged.fetches)
        for (url, dest), got in zip(staged.fetches, found, strict=True):
            if isinstance(got, BaseException):
                raise UnreadableInput(url, f"could not read it: {why(got)}")
            if got is not None:
                remote.files[dest] = got
                if (kind := capture_inside(got.head) or compressed_other(got.head)) is not None:
                    packed.append((url, dest, kind))
    out_dir = str(Path(mirror.root) / "unpacked")
    tasks = [(u, d, k, executor.submit(unpack_input, d, k, out_dir)) for u, d, k in packed]
    for url, dest, kind, task in tasks:
        unpacked = _task_result(url, task, "decompress")
        url_of = mirror.location(unpacked.path)
        assert url_of is not None  # written under the mirror's root
        got = _head_one(mirror, heads, url_of, unpacked.path, whole=False)
        if isinstance(got, BaseException) or got is None:
            raise UnreadableInput(url, f"could not read it decompressed: {why(got or EOFError())}")
        remote.files[unpacked.path] = got
        remote.unpacked[dest] = Unpacked(unpacked.path, kind, unpacked.errors)
    return remote


def _task_result(url: str, task: Future[T], doing: str) -> T:
    """``task``'s result; its failure as ``url``'s input problem ("a worker could not
    ``doing`` it"), unless it is the cluster's own (a killed worker, a cancelled task)."""
    from distributed import KilledWorker

    try:
        return task.result()
    except (KilledWorker, CancelledError):
        raise  # the cluster's own failure: the caller words it
    except Exception as exc:  # the store's, such as a credential the workers lack
        raise UnreadableInput(url, f"a worker could not {doing} it: {why(exc)}") from exc


def _head_one(
    mirror: Mirror, heads: Path, url: str, dest: str, *, whole: bool = True
) -> RemoteFile | Exception | None:
    """``url``'s size and head copy (under ``heads``, never at ``dest``: no partial file
    ever stands where the input's full copy goes), or None once it is downloaded whole
    (``whole``: when no line end ends the file's first line, so only the file tells what
    it is)."""
    try:
        fs, inner = fsspec_of(url)
        size = int(fs.size(inner))
        data = bytes(fs.cat_file(inner, start=0, end=min(size, HEAD_BYTES))) if size else b""
        if whole and size > len(data) and _undecided(data):
            found = _first_lines(fs, inner, size)
            if found is None:
                mirror.pull([dest])
                return None
            data = found
        head = heads / os.path.relpath(dest, mirror.root)
        head.parent.mkdir(parents=True, exist_ok=True)
        head.write_bytes(data)
        return RemoteFile(size, str(head))
    except Exception as exc:  # the store's own error, reported per input
        return exc


def _first_lines(fs: Any, inner: str, size: int) -> bytes | None:
    """What the log sniffer reads of a file whose first line is longer than the head
    (:func:`sse_forensics.ingest.logs.read.detect`): that line whole and a head after it,
    or, when the line is past the ``log_line_bytes`` cap (which the sniffer skips), the
    head after it alone. Read a head at a time by ranged reads, up to the first line end:
    never more than the line and two heads, where the file may be gigabytes. None when the
    file has no line end at all (then it is read whole, as a local scan would)."""
    cap = DEFAULT_LIMITS.log_line_bytes
    kept = bytearray()
    pos = 0
    while pos < size:
        piece = bytes(fs.cat_file(inner, start=pos, end=min(size, pos + HEAD_BYTES)))
        if not piece:
            break
        nl = piece.find(b"\n")
        if nl < 0:
            if len(kept) <= cap:
                kept += piece
            pos += len(piece)
            continue
        end = pos + nl + 1  # just past the first line end
        after = bytes(fs.cat_file(inner, start=end, end=min(size, end + HEAD_BYTES)))
        return bytes(kept + piece[: nl + 1]) + after if end - 1 <= cap else after
    return None


def _undecided(head: bytes) -> bool:
    """A head that may not tell a log from the rest: no capture, not compressed, and no
    line end (the log sniffer reads a first line whole)."""
    return not is_capture_head(head) and compression_of(head[:8]) is None and b"\n" not in head


def _forget(client: Any, mirror: Mirror) -> None:
    """The object-store copy and every worker's local copy of the scratch, removed."""
    with contextlib.suppress(Exception):
        mirror.remove()
    with contextlib.suppress(Exception):
        client.run(remove_local, mirror.root)


def _missing(paths: list[str]) -> list[str]:
    """On a worker: which of ``paths`` (files, directories, globs) it cannot see."""
    import glob

    return [p for p in paths if not (os.path.exists(p) or glob.has_magic(p))]


def _fetch(executor: ClusterExecutor, staged: StagedInputs) -> None:
    """Copy the object-store inputs into the staging tree, one worker task per file."""
    for _, dest in staged.fetches:
        # Made here, not by the task: a task still running after Ctrl-C cannot re-create
        # a scratch tree already removed.
        Path(dest).parent.mkdir(parents=True, exist_ok=True)
    futures = [(url, executor.submit(fetch_input, url, dest)) for url, dest in staged.fetches]
    for url, future in futures:
        _task_result(url, future, "copy")


def _serialised(progress: ScanProgress | None) -> ScanProgress | None:
    """Task completions call ``progress`` from the client's event-loop thread."""
    if progress is None:
        return None
    lock = threading.Lock()

    def call(stage: str, done: int, total: int) -> None:
        with lock:
            progress(stage, done, total)

    return call


def restore_sources(result: ScanResult, staged: StagedInputs) -> ScanResult:
    """``result`` citing inputs as the user gave them (see :mod:`.inputs`)."""
    source = staged.source
    for finding in result.findings:
        finding.evidence = [
            {**e, "source": source(name)} if isinstance(name := e.get("source"), str) else e
            for e in finding.evidence
        ]
    result.paths = list(staged.given)
    result.inputs = [source(p) for p in result.inputs]
    result.errors = [dataclasses.replace(e, source=source(e.source)) for e in result.errors]
    files = result.log_stats.get("files") if result.log_stats else None
    if isinstance(files, list):
        for f in files:
            if isinstance(f, dict) and isinstance(f.get("source"), str):
                f["source"] = source(f["source"])
    result.loss.per_file_drops = {source(k): v for k, v in result.loss.per_file_drops.items()}
    return result
