"""``scan --cluster``: the same findings as a local scan, on a Dask LocalCluster.

Most tests share one LocalCluster of two worker threads (``processes=False``: it starts in
milliseconds and sees this process's in-memory fsspec store); the command-line tests and
the worker-kill test start real worker processes. Skipped when Dask is not installed (the
``cluster`` extra); the base-install test runs regardless.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import threading
from concurrent.futures import Future
from pathlib import Path

import pytest
from conftest import SAMPLES
from support.cli import run as run_in_process

from sse_forensics.cluster import ClusterUnavailable, parse_cluster
from sse_forensics.cluster.client import (
    LOCAL_LOST_WORKER_S,
    LOST_WORKER_TIMEOUT,
    PRE_SPAWN_ENVIRON,
    THREADS_PER_WORKER,
    _polars_share,
    open_cluster,
)
from sse_forensics.cluster.spec import ClusterSpec
from sse_forensics.errors import UnreadableInput
from sse_forensics.pipeline import scan_paths
from sse_forensics.report.jsonout import findings_jsonl
from sse_forensics.result import ScanResult
from sse_forensics.workers import POLARS_THREADS

LOG_SAMPLES = SAMPLES / "logs"
LOG_DIRS = sorted(p for p in LOG_SAMPLES.iterdir() if p.is_dir())
REPO = SAMPLES.parent
CLUSTER_2 = ["--cluster", "local:2"]
# A few inputs for the tests whose point is not every sample (that is
# test_samples_directory_gives_the_local_findings' and test_log_samples_give_the_local_findings'):
# a scan of them has findings, silent corruption (exit 1) and an input problem.
FEW = [
    "samples/resume-storm.pcap",  # the logs' own capture: log records fold into its exchanges
    "samples/replay-crossed-sessions.pcap",  # a first sighting another partition holds
    "samples/live-jump-unsignalled.pcap",  # silent corruption: exit 1
    "samples/crafted-garbage-chunk.pcap",  # an input problem, reported under errors
    "samples/logs/resume-storm",  # an access log and an event log
]


@pytest.fixture(scope="module")
def distributed():
    """Dask with worker processes forked from a server that imported Dask and the analyzer
    once (``forkserver``, as Dask's own suite runs): a spawned worker imports both itself,
    ~1.5 CPU s for each of the 9 worker starts here (the killed workers' restarts count).
    The server is stopped at the end, so its CPU time and its workers' count in this
    process's (as a spawned worker's do)."""
    from multiprocessing import forkserver

    import dask
    import distributed
    from distributed.utils import get_mp_context

    with dask.config.set({"distributed.worker.multiprocessing-method": "forkserver"}):
        get_mp_context().set_forkserver_preload(
            ["distributed", "polars", "sse_forensics.pipeline", "sse_forensics.cluster.scan"]
        )
        try:
            yield distributed
        finally:
            forkserver._forkserver._stop()  # type: ignore[attr-defined]


@pytest.fixture(scope="module")
def client():
    # Worker threads in this process (the tests that kill a worker start their own).
    with open_cluster(parse_cluster("local:2"), processes=False) as c:
        yield c


def _on_cluster(paths: list[str], client, **options) -> ScanResult:
    from sse_forensics.cluster.scan import scan_on_cluster

    return scan_on_cluster(paths, client, keep_tables=False, **options)


def _same_scan(cluster: ScanResult, local: ScanResult) -> None:
    """Byte-identical JSON lines, and the same errors, counters and log statistics (the
    time a log took to read aside)."""
    assert findings_jsonl(cluster) == findings_jsonl(local)
    assert [e.as_dict() for e in cluster.errors] == [e.as_dict() for e in local.errors]
    assert dataclasses.replace(cluster.stats, partitions=0) == dataclasses.replace(
        local.stats, partitions=0
    )
    assert cluster.inputs == local.inputs
    assert _untimed(cluster.log_stats) == _untimed(local.log_stats)
    assert cluster.loss == local.loss


def _untimed(stats: dict) -> dict:
    return {k: v for k, v in stats.items() if k != "seconds"}


# -- parsing (no Dask needed) ------------------------------------------------------------


def test_cluster_option_values() -> None:
    assert parse_cluster("local") == ClusterSpec(local_workers=None)
    assert parse_cluster("local:3") == ClusterSpec(local_workers=3)
    assert parse_cluster("tcp://scheduler:8786") == ClusterSpec(address="tcp://scheduler:8786")
    for bad in ("local:0", "scheduler:8786", "http://x:8786", "local:two", ""):
        with pytest.raises(ClusterUnavailable):
            parse_cluster(bad)


def test_partitions_scale_with_the_workers() -> None:
    """A few partitions per worker for a small input; about 8 MB of input each for a
    larger one, but at most 16 per worker unless each would then hold over 64 MB (what
    keeps a one-worker cluster's worker under 1 GB on the 2.45 GB log set)."""
    from sse_forensics.cluster.scan import cluster_partitions

    mb, gb, tb = 1 << 20, 1 << 30, 1 << 40
    assert cluster_partitions(5 * mb, 2) == 8
    assert cluster_partitions(5 * mb, 100) == 400
    assert cluster_partitions(2 * gb, 2) == 32  # not 64: 16 per worker
    assert cluster_partitions(2 * gb, 8) == 128  # 16 per worker (8 MB each would be 256)
    assert cluster_partitions(2 * gb, 1) == 32  # 64 MB each, not 16 of 128 MB
    assert cluster_partitions(10 * tb, 100) == 163840  # 64 MB each, not 1,600 of 6.4 GB


def test_base_install_needs_no_dask() -> None:
    """With Dask and fsspec unimportable: a plain scan works and never imports them;
    ``--cluster`` is one line naming the extra, exit 2."""
    probe = (
        "import sys\n"
        "for name in ('dask', 'distributed', 'fsspec'):\n"
        "    sys.modules[name] = None\n"
        "from sse_forensics.cli import app\n"
        "for extra in ([], ['--cluster', 'local:1']):\n"
        "    try:\n"
        "        app(['scan', sys.argv[1], '-f', 'jsonl', *extra])\n"
        "    except SystemExit as exit:\n"
        "        print(f'exit {exit.code}', flush=True)\n"
        "        print(f'exit {exit.code}', file=sys.stderr, flush=True)\n"
    )
    capture = str(SAMPLES / "live-jump-unsignalled.pcap")
    run = subprocess.run(
        [sys.executable, "-c", probe, capture], capture_output=True, cwd=REPO, timeout=120
    )
    out = run.stdout.decode().splitlines()
    assert '"missing-stream-gap"' in out[0] and out[-2:] == ["exit 1", "exit 2"], run.stdout
    err = run.stderr.decode().splitlines()
    cluster_err = err[err.index("exit 1") + 1 : err.index("exit 2")]
    assert len(cluster_err) == 1 and "pip install 'sse-forensics[cluster]'" in cluster_err[0]


# -- identical results --------------------------------------------------------------------


def test_samples_directory_gives_the_local_findings(client) -> None:
    """Every capture sample at once (cross-session replays, corrupt inputs reported under
    errors): each capture indexed by a task of its own, then the shards and partition
    tasks on the workers."""
    paths = [str(SAMPLES)]
    calls: list[tuple[str, int, int]] = []
    cluster = _on_cluster(paths, client, progress=lambda *call: calls.append(call))
    _same_scan(cluster, scan_paths(paths, jobs=1, keep_tables=False))
    # The bar counts the captures indexed, the shards read and the partitions judged
    # across the cluster: one index task per capture file, two workers: two shards.
    read = len(cluster.inputs) + 2
    assert ("read", read, read) in calls
    tasks = max(total for stage, _, total in calls if stage == "facts")
    assert tasks > 1 and ("facts", tasks, tasks) in calls


def test_capture_ring_gives_the_local_findings(client, tmp_path: Path) -> None:
    """A generated capture cut into a three-file ring (connections span the files), beside
    a corrupt capture: each file indexed once, the shards merge the indexes into the local
    scan's timeline (same connection numbers, same errors in the same order)."""
    import shutil

    from support.fast_path import make_capture_module, pcap_records

    whole = tmp_path / "mcp.pcap"
    make_capture_module().write_capture(whole, 3000, 5)
    header, records = pcap_records(whole)
    ring = tmp_path / "ring"
    ring.mkdir()
    third = len(records) // 3
    for n, part in enumerate((records[:third], records[third : 2 * third], records[2 * third :])):
        (ring / f"ring_{n:05d}.pcap").write_bytes(header + b"".join(part))
    shutil.copy(SAMPLES / "crafted-garbage-chunk.pcap", ring / "other.pcap")
    calls: list[tuple[str, int, int]] = []
    cluster = _on_cluster([str(ring)], client, progress=lambda *call: calls.append(call))
    local = scan_paths([str(ring)], jobs=1, keep_tables=False)
    assert local.stats.connections > 50 and local.findings and local.errors
    _same_scan(cluster, local)
    assert [c.id for c in cluster.connections] == [c.id for c in local.connections]
    assert ("read", 4 + 2, 4 + 2) in calls  # four files indexed, two shards


def test_log_samples_give_the_local_findings(client) -> None:
    """Every log sample as one multi-file set (rotated access logs, event logs: 70-odd
    files, relative paths and a glob) with the captures of the same sessions, whose
    exchanges the log records fold into across partitions."""
    paths = [os.path.relpath(d, REPO) for d in LOG_DIRS[:-1]]
    paths.append(os.path.relpath(LOG_DIRS[-1], REPO) + "/access.log*")
    paths.extend(os.path.relpath(SAMPLES / f"{d.name}.pcap", REPO) for d in LOG_DIRS)
    cwd = os.getcwd()
    os.chdir(REPO)
    try:
        local = scan_paths(paths, jobs=1, keep_tables=False)
        cluster = _on_cluster(paths, client)
    finally:
        os.chdir(cwd)
    assert len(local.inputs) > 50 and local.findings
    assert all(not os.path.isabs(p) for p in cluster.inputs)  # cited as the user wrote them
    _same_scan(cluster, local)


def _fleet_logs(tmp: Path) -> Path:
    """A generated multi-file log set in one directory: the access log rotated into three
    files (one gzipped, one with unreadable lines), the event log into three, and event
    records that wait for their session across files — named only by the stream's last
    record (often in a later file), only by its first (an earlier file), and one stream
    named twice, differently, in two files (the first name read wins)."""
    import gzip
    import json

    from support.log_sets import write_log_set

    access, events = (Path(p) for p in write_log_set(tmp, 90))
    out = tmp / "fleet"
    out.mkdir()
    lines = access.read_text().splitlines(keepends=True)
    third = len(lines) // 3
    (out / "access.log.2.gz").write_bytes(gzip.compress("".join(lines[:third]).encode()))
    bad = ["this is not an access line\n", "10.0.0.1 - - [garbage\n"]
    (out / "access.log.1").write_text("".join(lines[third : 2 * third] + bad))
    (out / "access.log").write_text("".join(lines[2 * third :]))
    records = [json.loads(line) for line in events.read_text().splitlines()]
    streams = sorted({r["stream"] for r in records})
    first = {r["stream"]: i for i, r in reversed(list(enumerate(records)))}
    last = {r["stream"]: i for i, r in enumerate(records)}
    for i, r in enumerate(records):
        n = streams.index(r["stream"])
        if n % 3 == 0 and i != last[r["stream"]]:
            r.pop("session")  # named by its last record
        elif n % 3 == 1 and i != first[r["stream"]]:
            r.pop("session")  # named by its first record
    sixth = len(records) // 6
    files = {
        "events.jsonl.2": records[: 2 * sixth],
        "events.jsonl.1": records[2 * sixth : 4 * sixth],
        "events.jsonl": records[4 * sixth :],
    }
    # A stream of the last file named there by its first record, and named differently in
    # an earlier file: its records that name none take the name read first.
    twice = next(r for r in files["events.jsonl"] if streams.index(r["stream"]) % 3 == 1)
    files["events.jsonl.2"].append({**twice, "session": "named-in-an-earlier-file"})
    for name, part in files.items():
        (out / name).write_text("".join(json.dumps(r) + "\n" for r in part))
    return out


FLEET_FORMAT = (
    'nginx:$remote_addr - $remote_user [$time_local] "$request" $status $body_bytes_sent '
    '"$http_referer" "$http_user_agent" "$http_last_event_id" "$sent_http_mcp_session_id" '
    "$request_time"
)


def test_multi_file_logs_are_read_one_task_per_file(client, tmp_path: Path) -> None:
    """A generated multi-file log set: each file is read by a task of its own on the
    workers (the bar counts bytes file by file), then partitions judged there; the JSON
    lines, errors and log statistics are a single-process scan's."""
    from sse_forensics.pipeline import LogOptions

    fleet = _fleet_logs(tmp_path)
    options = LogOptions(FLEET_FORMAT)
    calls: list[tuple[str, int, int]] = []
    cluster = _on_cluster(
        [str(fleet)], client, logs=options, progress=lambda *call: calls.append(call)
    )
    local = scan_paths([str(fleet)], logs=options, jobs=1, keep_tables=False)
    assert len(local.inputs) == 6 and local.findings and local.errors
    _same_scan(cluster, local)
    assert cluster.tables["sessions"].equals(local.tables["sessions"])
    assert "named-in-an-earlier-file" in local.tables["sessions"]["session_id"].to_list()
    sizes = {p.stat().st_size for p in fleet.iterdir()}
    done = [d for stage, d, _ in calls if stage == "logs"]
    steps = {b - a for a, b in zip([0, *done], done, strict=False)}
    assert len(done) == 6 and steps <= sizes, (done, sizes)
    # Several partitions: the waiting records were attached across stream partitions.
    assert cluster.stats.partitions > 1


def test_partition_tasks_hand_back_no_sessions_rows(client, tmp_path: Path) -> None:
    """Each partition task writes its sessions rows to a scratch file and hands back its
    name, not the rows (issue 10: the workers held 2.56M rows until the client gathered
    them); the scan reads the files into the local scan's sessions table, row for row."""
    from sse_forensics.cluster.client import ClusterExecutor
    from sse_forensics.pipeline import LogOptions

    fleet = _fleet_logs(tmp_path)
    paths = [str(fleet), *(str(REPO / p) for p in FEW)]
    options = LogOptions(FLEET_FORMAT)
    handed: list[Future] = []

    class Watching(ClusterExecutor):
        def submit(self, fn, /, *args, **kwargs):
            future = super().submit(fn, *args, **kwargs)
            if fn.__name__ == "_analyze_files":
                handed.append(future)
            return future

    scratch = tmp_path / "scratch"
    scratch.mkdir()
    executor = Watching(client)
    try:
        cluster = scan_paths(
            paths,
            logs=options,
            jobs=2,
            keep_tables=False,
            executor=executor,
            scratch=str(scratch),
        )
    finally:
        executor.shutdown(wait=False)
    local = scan_paths(paths, logs=options, jobs=1, keep_tables=False)
    _same_scan(cluster, local)
    assert cluster.tables["sessions"].equals(local.tables["sessions"])
    results = [f.result() for f in handed]
    assert len(results) > 1 and cluster.tables["sessions"].height > 50
    assert all("sessions" not in r.tables and r.first_seen is None for r in results)
    assert all(r.sessions_file.endswith(".parquet") for r in results)
    assert list(scratch.iterdir()) == []


def test_a_shared_value_is_let_go_once_its_tasks_are_done(client, tmp_path: Path) -> None:
    """The executor keeps a value its tasks share (each task's share of the cross-session
    front) only until they are done, not to the end of the scan (issue 10: ~600 MB of the
    client's peak on the 2.45 GB log set); one submitted again is sent again."""
    import gc
    import time
    import weakref

    from sse_forensics.cluster.client import ClusterExecutor

    executor = ClusterExecutor(client)
    share = _Share(str(tmp_path), b"x" * 100)
    kept = weakref.ref(share)
    try:
        futures = [executor.submit(_payload_size, share) for _ in range(3)]
        assert [f.result() for f in futures] == [100] * 3
        assert executor.submit(_payload_size, share).result() == 100
        del share, futures
        deadline = time.monotonic() + 10
        while kept() is not None and time.monotonic() < deadline:
            time.sleep(0.05)  # the last task's done callback runs on Dask's event loop
            gc.collect()
        assert kept() is None
    finally:
        executor.shutdown(wait=False)


def test_unreadable_log_files_are_the_local_scans_errors(client, tmp_path: Path) -> None:
    """Files that are no log: in a scanned directory, listed under errors as a local scan
    lists them; named on the command line, the first of them in reading order stops the
    scan with the local scan's reason."""
    from sse_forensics.pipeline import LogOptions

    fleet = _fleet_logs(tmp_path)
    (fleet / "access.log.1").write_text("{not json and not an access line\n" * 3)
    (fleet / "events.jsonl.1").write_bytes(b"\x00\x01binary junk\n")
    options = LogOptions(FLEET_FORMAT)
    local = scan_paths([str(fleet)], logs=options, jobs=1, keep_tables=False)
    assert len(local.errors) >= 2
    _same_scan(_on_cluster([str(fleet)], client, logs=options), local)

    named = [str(fleet / n) for n in ("events.jsonl.1", "access.log", "access.log.1")]
    with pytest.raises(UnreadableInput) as alone:
        scan_paths(named, logs=options, jobs=1)
    with pytest.raises(UnreadableInput) as cluster:
        _on_cluster(named, client, logs=options)
    assert alone.value.source.endswith("access.log.1")
    assert (cluster.value.source, cluster.value.reason) == (alone.value.source, alone.value.reason)


# -- object stores ------------------------------------------------------------------------


def _memory_store(files: dict[str, Path]):
    import fsspec

    fs = fsspec.filesystem("memory")
    for name, path in files.items():
        fs.pipe(name, path.read_bytes())
    return fs


def test_object_store_urls_give_the_local_findings(client) -> None:
    """Captures and rotated logs in an fsspec store (a directory URL and a glob URL): staged
    by the workers, cited by their URLs."""
    storm = LOG_SAMPLES / "resume-storm"
    captures = sorted(SAMPLES.glob("*.pcap"))[:6]
    fs = _memory_store(
        {f"/bucket/caps/{p.name}": p for p in captures}
        | {f"/bucket/logs/{p.name}": p for p in storm.iterdir()}
    )
    try:
        urls = ["memory://bucket/caps/", "memory://bucket/logs/access.log*"]
        cluster = _on_cluster(urls, client)
        local = scan_paths(
            [*map(str, captures), str(storm / "access.log*")], jobs=1, keep_tables=False
        )
    finally:
        fs.rm("/bucket", recursive=True)
    to_url = {str(p): f"memory://bucket/caps/{p.name}" for p in captures} | {
        str(p): f"memory://bucket/logs/{p.name}" for p in storm.iterdir()
    }
    expected = findings_jsonl(local)
    for path, url in sorted(to_url.items(), key=lambda kv: -len(kv[0])):
        expected = expected.replace(f'"{path}"'.encode(), f'"{url}"'.encode())
    assert findings_jsonl(cluster) == expected
    assert cluster.inputs == [to_url[p] for p in local.inputs]
    assert [e.source for e in cluster.errors] == [to_url[e.source] for e in local.errors]


def test_unreadable_store_is_one_clear_error(client, tmp_path: Path) -> None:
    """A store that refuses (a missing credential), a path it does not have, a protocol
    nobody installed: UnreadableInput naming the URL, and the scratch directory is gone."""
    import fsspec
    from fsspec.implementations.memory import MemoryFileSystem

    class NoCredentials(MemoryFileSystem):
        protocol = "locked"

        def info(self, path, **kwargs):
            raise PermissionError("Unable to locate credentials")

    fsspec.register_implementation("locked", NoCredentials, clobber=True)
    cases = {
        "locked://bucket/x.pcap": "cannot reach the store: PermissionError: Unable to locate",
        "memory://no-such-bucket/x.pcap": "no such file or directory",
        "memory://no-such-bucket/*.pcap": "the pattern matches no file",
        "nosuch://bucket/x.pcap": "Protocol not known: nosuch",
    }
    for url, reason in cases.items():
        with pytest.raises(UnreadableInput) as caught:
            _on_cluster([url], client, scratch=str(tmp_path))
        assert caught.value.source == url
        assert reason in caught.value.reason
        assert "\n" not in caught.value.reason
    assert list(tmp_path.iterdir()) == []


def _mirror_roots() -> set[Path]:
    from sse_forensics.cluster import mirror

    return set(Path(mirror.LOCAL_BASE).glob("sse-forensics-cluster-20*"))


def test_object_store_scratch_gives_the_local_findings(
    client, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--scratch memory://…``: every file a task writes goes to the store and leaves the
    worker's disk, every task and the client download what they read (nothing is shared
    but the store); captures, logs and an object-store input give a local scan's lines,
    and the store and the local directories are empty afterwards — after Ctrl-C too.
    The local directories are made under this test's own base (the cluster's workers are
    threads of this process): /tmp holds those of any other scan running on the machine."""
    from sse_forensics.cluster import mirror

    monkeypatch.setattr(mirror, "LOCAL_BASE", str(tmp_path))
    storm = LOG_SAMPLES / "resume-storm"
    fs = _memory_store({f"/inputs/{p.name}": p for p in storm.iterdir()})
    captures = sorted(SAMPLES.glob("*.pcap"))[:8]
    paths = [*map(str, captures), "memory://inputs/"]
    seen: dict[str, int] = {}
    before = _mirror_roots()

    def look(stage: str, done: int, total: int) -> None:
        if stage == "facts" and threading.current_thread() is threading.main_thread():
            stored = [p for p in fs.find("/scratch") if p.endswith(".parquet")]
            seen["stored"] = len(stored)
            (root,) = _mirror_roots() - before
            seen["local"] = sum(1 for _ in root.rglob("log-*.parquet"))

    try:
        cluster = _on_cluster(paths, client, scratch="memory://scratch/", progress=look)
        local = scan_paths([*map(str, captures), str(storm)], jobs=1, keep_tables=False)
        expected = findings_jsonl(local)
        for p in storm.iterdir():
            expected = expected.replace(f'"{p}"'.encode(), f'"memory://inputs/{p.name}"'.encode())
        assert findings_jsonl(cluster) == expected and local.findings
        assert seen["stored"] > 10  # the evidence, log partitions and capture indexes
        assert seen["local"] == 0  # log partition files left the workers once uploaded
        assert fs.find("/scratch") == [] and _mirror_roots() == before

        def interrupt(stage: str, done: int, total: int) -> None:
            if stage == "facts" and threading.current_thread() is threading.main_thread():
                raise KeyboardInterrupt

        with pytest.raises(KeyboardInterrupt):
            _on_cluster(paths, client, scratch="memory://scratch/", progress=interrupt)
        assert fs.find("/scratch") == [] and _mirror_roots() == before
    finally:
        fs.rm("/inputs", recursive=True)


def test_unreachable_object_store_scratch_is_one_line(client) -> None:
    import fsspec
    from fsspec.implementations.memory import MemoryFileSystem

    class NoCredentials(MemoryFileSystem):
        protocol = "lockedscratch"

        def mkdirs(self, path, exist_ok=False):
            raise PermissionError("Unable to locate credentials")

    fsspec.register_implementation("lockedscratch", NoCredentials, clobber=True)
    for scratch, says in (
        ("lockedscratch://bucket/x", "Unable to locate credentials"),
        ("nosuch://bucket/x", "Protocol not known: nosuch"),
    ):
        with pytest.raises(ClusterUnavailable) as caught:
            _on_cluster([str(SAMPLES / "live-jump-unsignalled.pcap")], client, scratch=scratch)
        assert f"--scratch {scratch}" in str(caught.value) and says in str(caught.value)
        assert "\n" not in str(caught.value)


# -- faults and scratch ---------------------------------------------------------------------


def test_scratch_removed_after_the_scan_and_after_ctrl_c(client, tmp_path: Path) -> None:
    paths = [str(REPO / p) for p in FEW]
    _on_cluster(paths, client, scratch=str(tmp_path))
    assert list(tmp_path.iterdir()) == []

    def interrupt(stage: str, done: int, total: int) -> None:
        # The pipeline's own call as facts start (the main thread): partition files exist.
        if stage == "facts" and threading.current_thread() is threading.main_thread():
            assert any(tmp_path.rglob("*.parquet"))
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        _on_cluster(paths, client, scratch=str(tmp_path), progress=interrupt)
    assert list(tmp_path.iterdir()) == []


def _die_once(marker: str, after: bool, fn, *args):
    """Kill this worker process the first time: before the task runs, or after it wrote
    its partition files (a retried task must not see or reuse them)."""
    if os.path.exists(marker):
        return fn(*args)
    Path(marker).touch()
    if after:
        fn(*args)
    os._exit(1)


def _loaded(marks: str, payload: bytes) -> _Share:
    Path(marks, f"loaded-{os.getpid()}").touch()
    return _Share(marks, payload)


@dataclasses.dataclass
class _Share:
    """A value that marks every process that unpickles it."""

    marks: str
    payload: bytes

    def __reduce__(self):
        return (_loaded, (self.marks, self.payload))


def _payload_size(share: _Share) -> int:
    return len(share.payload)


def _polars_pool() -> int:
    import polars

    return polars.thread_pool_size()


def test_local_workers_run_polars_on_their_dask_threads(
    distributed, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A LocalCluster's nannies spawn each worker with POLARS_MAX_THREADS = its Dask threads
    (one), whatever the number of workers: ``local:1`` on a machine of several cores is
    one core's worth, as a ``dask worker --nthreads 1`` of a real node should be."""
    import dask

    spawn = f"{PRE_SPAWN_ENVIRON}.{POLARS_THREADS}"
    before = dask.config.get(spawn, None)
    monkeypatch.delenv(POLARS_THREADS, raising=False)
    with open_cluster(parse_cluster("local:1"), processes=False) as client:
        assert dask.config.get(spawn) == "1"
        assert list(client.nthreads().values()) == [THREADS_PER_WORKER]
    assert dask.config.get(spawn, None) == before
    monkeypatch.setenv(POLARS_THREADS, "3")  # the user's own: kept, nothing set
    with _polars_share(THREADS_PER_WORKER):
        assert dask.config.get(spawn, None) == before


def test_killed_workers_do_not_change_the_findings(distributed, tmp_path: Path) -> None:
    """Workers die after indexing a capture, after numbering a capture shard's connections,
    after writing a capture shard's partitions,
    after reading a log file into partitions, after writing a session partition's rows, and
    before judging a partition: Dask reruns each task elsewhere, the findings are those of
    a local scan, and the scratch directory is empty at the end."""
    import cloudpickle
    import dask

    from sse_forensics.cluster.client import ClusterExecutor
    from sse_forensics.cluster.scan import TASK_STAGES

    cloudpickle.register_pickle_by_value(sys.modules[__name__])  # workers cannot import tests/

    deaths = {  # name → die after it ran
        "index_capture_file": True,
        "number_flow_shard": True,
        "reassemble_flow_shard": True,
        "read_log_file": True,
        "session_partition": True,
        "_analyze_files": False,
    }
    deaths_planned = list(deaths)

    class Dying(ClusterExecutor):
        def submit(self, fn, /, *args, **kwargs):
            after = deaths.pop(fn.__name__, None)  # the first task of each kind
            if after is None:
                return super().submit(fn, *args, **kwargs)
            marker = str(tmp_path / f"died-{fn.__name__}")
            return super().submit(_die_once, marker, after, fn, *args)

    # A few inputs (every capture at once: test_samples_directory_gives_the_local_findings):
    # the CPU this test spends, workers and restarts included, is what makes it slow on a
    # loaded machine (~6.7 CPU s here, 8.8 with all 44 captures; 165 s wall at load 25).
    paths = [str(REPO / p) for p in FEW]
    local = scan_paths(paths, jobs=1, keep_tables=False)
    assert local.findings and local.errors
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    given = os.environ.get(POLARS_THREADS)
    # The cluster a user's `--cluster local:2` starts (open_cluster): its nannies restart
    # the killed workers, and it must not close a nanny meanwhile. With Dask's default
    # ``lost-worker-timeout`` (15 s, timed from a removal), on a loaded machine the timer of
    # a worker's first death fired while its nanny restarted it after its second, one worker
    # was left for good and wait_for_workers(2) never returned (pytest-timeout at 300 s,
    # load ~20).
    with open_cluster(parse_cluster("local:2")) as client:
        assert dask.config.get(LOST_WORKER_TIMEOUT) == LOCAL_LOST_WORKER_S
        executor = Dying(client, None, TASK_STAGES)
        killed = scan_paths(
            paths, jobs=2, keep_tables=False, executor=executor, scratch=str(scratch)
        )
        executor.shutdown(wait=False)
        # The last worker killed is still being restarted by its nanny when the scan ends
        # (its task ran on the other worker): the cluster is closed once both are back,
        # not while a worker process is half started (on a loaded machine the restart
        # takes seconds, and closing a nanny mid-restart waits on that start).
        client.wait_for_workers(2, timeout=120)
        # Each worker, the restarted ones too, runs polars on its Dask threads: not on
        # every core, competing with the other worker.
        shares = client.run(_polars_pool)
        assert list(shares.values()) == [int(given or THREADS_PER_WORKER)] * 2
        # A value shared by tasks is pickled once here and unpickled on a worker only,
        # never by the scheduler in this process (and pickled again for the worker).
        marks = tmp_path / "marks"
        marks.mkdir()
        sent = ClusterExecutor(client).submit(_payload_size, _Share(str(marks), b"x" * 100))
        assert sent.result() == 100
        assert not (marks / f"loaded-{os.getpid()}").exists() and any(marks.iterdir())
    assert os.environ.get(POLARS_THREADS) == given  # the nannies' setting went with the cluster
    _same_scan(killed, local)
    assert all((tmp_path / f"died-{n}").exists() for n in deaths_planned)
    assert list(scratch.iterdir()) == []


# -- the command line -------------------------------------------------------------------------


def test_cli_local_cluster_output_is_byte_identical(distributed) -> None:
    """``scan --cluster local:2`` (two worker processes; the command itself runs in this
    process) over a few captures and logs, named relative to the working directory (every
    sample on the cluster: the tests above, in-process): stdout holds the bytes a local scan
    writes, the exit code is a local scan's, and stderr starts with the dashboard link."""
    paths = FEW
    cwd = os.getcwd()
    os.chdir(REPO)
    try:
        local = scan_paths(paths, jobs=1, keep_tables=False)
    finally:
        os.chdir(cwd)
    run = run_in_process("scan", *paths, "-f", "jsonl", *CLUSTER_2, cwd=REPO)
    assert run.stdout == findings_jsonl(local) and run.stdout
    assert run.returncode == 1  # silent corruption (that exit code wins over damaged input)
    assert run.stderr.startswith(b"Dask dashboard: http://")
    assert b"input problem: samples/crafted-garbage-chunk.pcap frame 18" in run.stderr


def test_cli_unusable_cluster_or_store_is_one_line_and_exit_2(distributed, monkeypatch) -> None:
    from typer.testing import CliRunner

    from sse_forensics.cli import app

    monkeypatch.setenv("DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT", "1s")
    import dask

    dask.config.refresh()
    for args, says in (
        (["samples", "--cluster", "tcp://127.0.0.1:9"], "cannot reach the scheduler"),
        (["nosuch://bucket/x.pcap", "--cluster", "local:1"], "Protocol not known: nosuch"),
        (["samples", "--cluster", "local:1", "--scratch", "s3://b/x"], "--scratch s3://b/x"),
        (["samples", "--cluster", "local:0"], "at least 1 worker"),
    ):
        result = CliRunner().invoke(app, ["scan", *args, "-f", "jsonl"])
        assert result.exit_code == 2, result.output
        assert says in result.output and "Traceback" not in result.output
        assert len(result.output.splitlines()) == 1


def test_a_large_plain_argument_is_sent_once_without_dask_warning(client) -> None:
    """A list, tuple or dict argument that pickles past ``INLINE_BYTES`` goes to the cluster
    as a shared value, not inside its task's graph: Dask's "Sending large graph" warning
    (printed on the scan's stderr past 10 MB, as on the 2.45 GB log set at local:1) is not
    raised, and the task gets the value as it was."""
    import warnings

    from sse_forensics.cluster import client as cluster_client

    executor = cluster_client.ClusterExecutor(client)
    big = [f"{k:024d}" for k in range(600_000)]  # ~17 MB pickled
    small = [1, 2, 3]
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            futures = [executor.submit(len, big), executor.submit(len, big)]
            assert [f.result() for f in futures] == [len(big)] * 2
            assert executor.submit(sum, small).result() == 6
        assert len(executor._sent) <= 1  # the big list, shared; the small one travels inline
    finally:
        executor.shutdown(wait=False)
