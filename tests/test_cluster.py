"""``scan --cluster``: the same findings as a local scan, on a Dask LocalCluster.

Most tests share one LocalCluster of two worker threads (``processes=False``: it starts in
milliseconds and sees this process's in-memory fsspec store); the command-line tests and
the worker-kill test start real worker processes. Skipped when Dask is not installed (the
``cluster`` extra); the base-install test runs regardless.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from conftest import SAMPLES

from sse_forensics.cluster import ClusterUnavailable, parse_cluster
from sse_forensics.cluster.spec import ClusterSpec
from sse_forensics.errors import UnreadableInput
from sse_forensics.pipeline import ScanResult, scan_paths
from sse_forensics.report.jsonout import findings_jsonl

LOG_SAMPLES = SAMPLES / "logs"
LOG_DIRS = sorted(p for p in LOG_SAMPLES.iterdir() if p.is_dir())
REPO = SAMPLES.parent
CLUSTER_2 = ["--cluster", "local:2"]


@pytest.fixture(scope="module")
def distributed():
    return pytest.importorskip("distributed")


@pytest.fixture(scope="module")
def client(distributed):
    with (
        distributed.LocalCluster(
            n_workers=2,
            threads_per_worker=1,
            processes=False,
            dashboard_address=":0",
            silence_logs=logging.ERROR,
        ) as cluster,
        distributed.Client(cluster) as c,
    ):
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
    errors): capture shards and partition tasks on the workers."""
    paths = [str(SAMPLES)]
    calls: list[tuple[str, int, int]] = []
    cluster = _on_cluster(paths, client, progress=lambda *call: calls.append(call))
    _same_scan(cluster, scan_paths(paths, jobs=1, keep_tables=False))
    # The bar counts the shards read and the partitions judged across the cluster.
    assert ("read", 2, 2) in calls  # two workers: two shards
    tasks = max(total for stage, _, total in calls if stage == "facts")
    assert tasks > 1 and ("facts", tasks, tasks) in calls


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
    pytest.importorskip("fsspec")
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
    fsspec = pytest.importorskip("fsspec")
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


# -- faults and scratch ---------------------------------------------------------------------


def test_scratch_removed_after_the_scan_and_after_ctrl_c(client, tmp_path: Path) -> None:
    paths = [str(SAMPLES)]
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


def test_killed_workers_do_not_change_the_findings(distributed, tmp_path: Path) -> None:
    """A worker dies after writing a capture shard's partitions, another before judging a
    partition: Dask reruns both tasks elsewhere, the findings are those of a local scan,
    and the scratch directory is empty at the end."""
    import cloudpickle

    from sse_forensics.cluster.client import ClusterExecutor
    from sse_forensics.cluster.scan import TASK_STAGES

    cloudpickle.register_pickle_by_value(sys.modules[__name__])  # workers cannot import tests/

    deaths = {"_reassemble_shard": True, "_analyze_files": False}  # name → die after it ran

    class Dying(ClusterExecutor):
        def submit(self, fn, /, *args, **kwargs):
            after = deaths.pop(fn.__name__, None)  # the first task of each kind
            if after is None:
                return super().submit(fn, *args, **kwargs)
            marker = str(tmp_path / f"died-{fn.__name__}")
            return super().submit(_die_once, marker, after, fn, *args)

    paths = [str(SAMPLES)]
    local = scan_paths(paths, jobs=1, keep_tables=False)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    with (
        distributed.LocalCluster(
            n_workers=2,
            threads_per_worker=1,
            dashboard_address=":0",
            silence_logs=logging.CRITICAL,
        ) as cluster,
        distributed.Client(cluster) as client,
    ):
        executor = Dying(client, None, TASK_STAGES)
        killed = scan_paths(
            paths, jobs=2, keep_tables=False, executor=executor, scratch=str(scratch)
        )
        executor.shutdown(wait=False)
    _same_scan(killed, local)
    assert all((tmp_path / f"died-{n}").exists() for n in ("_reassemble_shard", "_analyze_files"))
    assert list(scratch.iterdir()) == []


# -- the command line -------------------------------------------------------------------------


def test_cli_local_cluster_output_is_byte_identical(distributed) -> None:
    """``scan --cluster local:2`` (two worker processes) over the capture samples and every
    log sample at once: stdout holds the bytes a local scan writes, the exit code is a local
    scan's, and stderr starts with the dashboard link."""
    paths = ["samples", *(os.path.relpath(d, REPO) for d in LOG_DIRS)]
    cwd = os.getcwd()
    os.chdir(REPO)
    try:
        local = scan_paths(paths, jobs=1, keep_tables=False)
    finally:
        os.chdir(cwd)
    run = subprocess.run(
        [sys.executable, "-m", "sse_forensics", "scan", *paths, "-f", "jsonl", *CLUSTER_2],
        capture_output=True,
        cwd=REPO,
        timeout=180,
    )
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
