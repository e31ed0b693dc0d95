"""Inputs and ``--scratch`` in Google Cloud Storage (docs/cluster.md, "Inputs",
"Object-store scratch").

The store is gcp-storage-emulator on loopback: the GCS JSON API over HTTP, read and written
through the client a user has (gcsfs → aiohttp), pointed at the emulator by the
``STORAGE_EMULATOR_HOST`` variable gcsfs documents. The S3 test's twin: listing, globbing,
ranged reads, scratch Parquet written and removed, and a missing bucket as one line.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import SAMPLES
from support.cli import run
from support.log_sets import write_log_set
from support.object_stores import assert_store_scan_is_local, free_port

from sse_forensics.cluster import parse_cluster
from sse_forensics.cluster.client import open_cluster

# A server and a cluster per module: with the live captures, after the main suite.
pytestmark = pytest.mark.live

BUCKET = "incident-43"


@pytest.fixture(scope="module")
def endpoint() -> Iterator[str]:
    """A GCS endpoint on loopback with the bucket made, and this process's variables
    pointing gcsfs at it (the Dask workers below are threads of this process)."""
    from gcp_storage_emulator.server import create_server

    port = free_port()
    server = create_server("127.0.0.1", port, in_memory=True, default_bucket=BUCKET)
    server.start()
    url = f"http://127.0.0.1:{port}"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("STORAGE_EMULATOR_HOST", url)
        # gcsfs asks a real bucket for its type over gRPC first; the emulator speaks only
        # the JSON API (gcsfs's own switch for those experimental paths).
        mp.setenv("GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT", "false")
        mp.setenv("NO_GCE_CHECK", "true")  # no metadata-server probe for credentials
        try:
            yield url
        finally:
            server.stop()


@pytest.fixture(scope="module")
def client():
    with open_cluster(parse_cluster("local:2"), processes=False) as c:
        yield c


def _gcs():
    import gcsfs

    gcsfs.GCSFileSystem.clear_instance_cache()
    return gcsfs.GCSFileSystem(token="anon")


def test_gcs_inputs_and_scratch_give_the_local_findings(
    endpoint: str, client, tmp_path: Path
) -> None:
    """Captures under a prefix, a glob of logs, the scratch in the same bucket: the
    findings and errors are a local scan's of the same files, cited by their gs:// URLs,
    and nothing is left under the scratch prefix."""
    local = tmp_path / "in"
    (local / "caps").mkdir(parents=True)
    (local / "logs").mkdir()
    shutil.copy(SAMPLES / "backpressure-eviction.pcap", local / "caps")
    shutil.copy(SAMPLES / "crafted-garbage-chunk.pcap", local / "caps")
    write_log_set(local / "logs", 4)
    fs = _gcs()
    url = {}
    for path in sorted(p for p in local.rglob("*") if p.is_file()):
        key = f"{BUCKET}/hosts/{path.relative_to(local)}"
        fs.pipe(key, path.read_bytes())
        url[str(path)] = f"gs://{key}"

    assert_store_scan_is_local(client, f"gs://{BUCKET}", local, url)
    fs = _gcs()
    assert not fs.glob(f"{BUCKET}/scratch/**")  # the scan's scratch objects were removed


def test_gcs_problems_are_one_line_and_exit_2(endpoint: str) -> None:
    """A missing bucket and a glob that matches nothing in the bucket: one line naming the
    URL, exit 2, no traceback."""
    for wanted in (f"gs://no-such-bucket-{BUCKET}/x.pcap", f"gs://{BUCKET}/hosts/none/*.pcap"):
        result = run("scan", wanted, "--cluster", "local:1", "-f", "jsonl")
        err = result.stderr.decode()
        assert result.returncode == 2, err
        assert wanted in err and "Traceback" not in err and len(err.splitlines()) == 1
