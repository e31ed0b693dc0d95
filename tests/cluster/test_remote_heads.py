"""``--scratch`` in an object store: the client reads of each object-store input only its
size and its head; the workers' tasks read it whole (docs/cluster.md, "Inputs").

A recording fsspec store (an in-memory one that notes every read: which object, which
bytes, and whether a Dask worker's task made it) holds the inputs; the findings are those
of a local scan of the same files. Skipped when Dask is not installed.
"""

from __future__ import annotations

import gzip
import shutil
from pathlib import Path

import pytest
from conftest import SAMPLES
from support.log_sets import write_log_set

from sse_forensics.cluster import parse_cluster
from sse_forensics.cluster.client import open_cluster
from sse_forensics.pipeline import scan_paths
from sse_forensics.report.jsonout import findings_jsonl

# The log sniffer's head: with the client's head this size, a plain log is told exactly
# as from the whole file (the default head is larger, for compressed logs).
HEAD = 64 * 1024


def _recording_store():
    """An fsspec protocol ``recorded://`` over the in-memory store; ``reads`` lists
    (on a worker, object, start, end) for every read (end None: to the end)."""
    import fsspec
    from fsspec.implementations.memory import MemoryFileSystem

    reads: list[tuple[bool, str, int, int | None]] = []

    from distributed import get_worker

    def on_worker() -> bool:
        try:
            get_worker()
        except ValueError:
            return False
        return True

    class Recorded(MemoryFileSystem):
        protocol = "recorded"
        root_marker = "/"

        @classmethod
        def _strip_protocol(cls, path):
            return super()._strip_protocol(path.removeprefix("recorded://"))

        def cat_file(self, path, start=None, end=None, **kwargs):
            reads.append((on_worker(), self._strip_protocol(path), start or 0, end))
            return super().cat_file(path, start=start, end=end, **kwargs)

        def _open(self, path, mode="rb", **kwargs):
            if "r" in mode:
                reads.append((on_worker(), self._strip_protocol(path), 0, None))
            return super()._open(path, mode=mode, **kwargs)

    fsspec.register_implementation("recorded", Recorded, clobber=True)
    return fsspec.filesystem("recorded"), reads


@pytest.fixture(scope="module")
def client():
    # Worker threads in this process. Dask is imported here, not as the module is collected
    # (~0.6 CPU s in every test process, most of which never starts a cluster).
    pytest.importorskip("distributed")
    with open_cluster(parse_cluster("local:2"), processes=False) as c:
        yield c


def test_the_client_reads_only_the_heads_of_object_store_inputs(
    client, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Captures and logs larger than the head, a gzip log and two gzip captures (one cut
    short) in the store: the findings and errors are a local scan's; the client read of
    each input its first ``HEAD`` bytes and nothing else, and every input was read whole
    by a worker's task (the captures decompressed there)."""
    from sse_forensics.cluster import mirror
    from sse_forensics.cluster import scan as cluster_scan

    monkeypatch.setattr(cluster_scan, "HEAD_BYTES", HEAD)
    # This machine's directory of the scan: not among those another test counts in /tmp.
    (tmp_path / "machine").mkdir()
    monkeypatch.setattr(mirror, "LOCAL_BASE", str(tmp_path / "machine"))
    local = tmp_path / "in"
    (local / "caps").mkdir(parents=True)
    (local / "logs").mkdir()
    shutil.copy(SAMPLES / "backpressure-eviction.pcap", local / "caps")
    small = (SAMPLES / "mcp-sdk-resume.pcap").read_bytes()
    (local / "caps" / "resume.pcap.gz").write_bytes(gzip.compress(small, mtime=0))
    broken = gzip.compress((SAMPLES / "mcp-sdk-clean.pcap").read_bytes(), mtime=0)
    (local / "caps" / "broken.pcap.gz").write_bytes(broken[: len(broken) // 2])
    for name in write_log_set(local / "logs", 8):
        assert Path(name).stat().st_size > HEAD or name.endswith(".log")
    events = local / "logs" / "events-8.jsonl"
    (local / "logs" / "events-old.jsonl.gz").write_bytes(
        gzip.compress(events.read_bytes()[: 3 * HEAD], mtime=0)
    )
    fs, reads = _recording_store()
    files = {p: f"/remote/{p.relative_to(local)}" for p in local.rglob("*") if p.is_file()}
    for path, name in files.items():
        fs.pipe(name, path.read_bytes())
    try:
        cluster = cluster_scan.scan_on_cluster(
            ["recorded://remote/caps/", "recorded://remote/logs/*"],
            client,
            keep_tables=False,
            scratch="memory://heads-scratch/",
        )
    finally:
        fs.rm("/remote", recursive=True)
    scanned = scan_paths([str(local / "caps"), str(local / "logs" / "*")], keep_tables=False)
    expected = findings_jsonl(scanned)
    for path, name in files.items():
        expected = expected.replace(f'"{path}"'.encode(), f'"recorded:/{name}"'.encode())
    assert findings_jsonl(cluster) == expected and cluster.findings
    url = {str(path): f"recorded:/{name}" for path, name in files.items()}
    assert [(url[e.source], e.what) for e in scanned.errors] == [
        (e.source, e.what) for e in cluster.errors
    ]
    assert any("gzip data broken" in e.what for e in cluster.errors)

    sizes = {name: path.stat().st_size for path, name in files.items()}
    by_client = [(n, s, e) for w, n, s, e in reads if not w]
    assert sorted(n for n, _, _ in by_client) == sorted(sizes)  # once each
    for name, start, end in by_client:
        assert start == 0 and end == min(sizes[name], HEAD)
    assert any(sizes[n] > HEAD for n, _, _ in by_client)  # a head, not a whole small file
    # Every input read whole by a task (the compressed captures decompressed there).
    assert {n for w, n, s, e in reads if w and s == 0 and e is None} == set(sizes)
    assert list((tmp_path / "machine").iterdir()) == []  # removed at the end


def test_a_first_line_longer_than_the_head_is_read_to_its_end_not_whole(
    client, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An event log whose first record is three heads long: the client reads it in ranged
    heads up to its first line end and one head after (the sniffer reads a first line
    whole), not the whole file; the findings are a local scan's."""
    import orjson

    from sse_forensics.cluster import mirror
    from sse_forensics.cluster import scan as cluster_scan

    monkeypatch.setattr(cluster_scan, "HEAD_BYTES", HEAD)
    (tmp_path / "machine").mkdir()
    monkeypatch.setattr(mirror, "LOCAL_BASE", str(tmp_path / "machine"))
    local = tmp_path / "logs"
    local.mkdir()
    write_log_set(local, 40)
    events = local / "events-40.jsonl"
    lines = events.read_bytes().splitlines(keepends=True)
    first = orjson.loads(lines[0])
    first["note"] = "x" * (3 * HEAD)
    events.write_bytes(orjson.dumps(first) + b"\n" + b"".join(lines[1:]))
    size = events.stat().st_size
    assert size > len(lines[0]) + 3 * HEAD + 4 * HEAD  # much more than the line and a head
    fs, reads = _recording_store()
    for path in local.iterdir():
        fs.pipe(f"/remote/{path.name}", path.read_bytes())
    try:
        cluster = cluster_scan.scan_on_cluster(
            ["recorded://remote/"], client, keep_tables=False, scratch="memory://long-line/"
        )
    finally:
        fs.rm("/remote", recursive=True)
    scanned = scan_paths([str(local)], keep_tables=False)
    expected = findings_jsonl(scanned)
    for path in local.iterdir():
        expected = expected.replace(
            f'"{path}"'.encode(), f'"recorded://remote/{path.name}"'.encode()
        )
    assert cluster.findings and findings_jsonl(cluster) == expected
    name = "/remote/events-40.jsonl"
    by_client = [(s, e) for w, n, s, e in reads if not w and n == name]
    assert all(e is not None for _, e in by_client)  # ranged reads only, never whole
    read = sum(e - s for s, e in by_client if e is not None)
    line_end = len(orjson.dumps(first)) + 1
    assert line_end <= read <= line_end + 3 * HEAD < size
