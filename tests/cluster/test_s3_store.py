"""Inputs and ``--scratch`` in S3 (docs/cluster.md, "Inputs", "Object-store scratch").

The store is moto's S3 server on loopback: the S3 REST API over HTTP, answered by an
emulator, read and written through the real client stack a user has (s3fs → aiobotocore →
botocore), credentials and endpoint from the usual ``AWS_*`` environment variables. What
this shows that the in-memory stores of the other tests cannot: URL listing and globbing,
ranged GETs, multipart-free PUTs of the scratch's Parquet and their removal, and the errors
of a real client (a missing bucket, a wrong endpoint) reaching the user as one line.
"""

from __future__ import annotations

import gzip
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

# A server and a cluster per module, ~12 CPU s: with the live captures, after the main suite.
pytestmark = pytest.mark.live

BUCKET = "incident-42"


@pytest.fixture(scope="module")
def endpoint() -> Iterator[str]:
    """An S3 endpoint on loopback with the bucket made, and this process's AWS_* variables
    pointing at it (the Dask workers below are threads of this process)."""
    import boto3
    from moto.server import ThreadedMotoServer

    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    url = f"http://127.0.0.1:{port}"
    with pytest.MonkeyPatch.context() as mp:
        for name, value in (
            ("AWS_ACCESS_KEY_ID", "testing"),
            ("AWS_SECRET_ACCESS_KEY", "testing"),
            ("AWS_DEFAULT_REGION", "us-east-1"),
            ("AWS_ENDPOINT_URL", url),
        ):
            mp.setenv(name, value)
        boto3.client("s3").create_bucket(Bucket=BUCKET)
        try:
            yield url
        finally:
            server.stop()


@pytest.fixture(scope="module")
def client():
    with open_cluster(parse_cluster("local:2"), processes=False) as c:
        yield c


def _objects(prefix: str) -> list[str]:
    import boto3

    listed = boto3.client("s3").list_objects_v2(Bucket=BUCKET, Prefix=prefix)
    return sorted(o["Key"] for o in listed.get("Contents", []))


def test_s3_inputs_and_scratch_give_the_local_findings(
    endpoint: str, client, tmp_path: Path
) -> None:
    """Captures (one gzip), a directory prefix and a glob of logs in S3, the scratch in the
    same bucket: the findings and errors are a local scan's of the same files, cited by
    their s3:// URLs, and nothing is left under the scratch prefix."""
    import boto3

    local = tmp_path / "in"
    (local / "caps").mkdir(parents=True)
    (local / "logs").mkdir()
    shutil.copy(SAMPLES / "backpressure-eviction.pcap", local / "caps")
    small = (SAMPLES / "mcp-sdk-resume.pcap").read_bytes()
    (local / "caps" / "resume.pcap.gz").write_bytes(gzip.compress(small, mtime=0))
    shutil.copy(SAMPLES / "crafted-garbage-chunk.pcap", local / "caps")
    write_log_set(local / "logs", 6)
    s3 = boto3.client("s3")
    url = {}
    for path in sorted(p for p in local.rglob("*") if p.is_file()):
        key = f"hosts/{path.relative_to(local)}"
        s3.put_object(Bucket=BUCKET, Key=key, Body=path.read_bytes())
        url[str(path)] = f"s3://{BUCKET}/{key}"

    assert_store_scan_is_local(client, f"s3://{BUCKET}", local, url)
    assert _objects("scratch") == []  # the scan's scratch objects were removed


def test_s3_problems_are_one_line_and_exit_2(endpoint: str, monkeypatch) -> None:
    """A missing bucket, a missing object and an endpoint nobody answers: one line naming
    the URL, exit 2, no traceback."""
    cases = [
        ([f"s3://no-such-bucket-{BUCKET}/x.pcap"], "s3://no-such-bucket"),
        ([f"s3://{BUCKET}/hosts/none/*.pcap"], f"s3://{BUCKET}/hosts/none/*.pcap"),
    ]
    for paths, says in cases:
        result = run("scan", *paths, "--cluster", "local:1", "-f", "jsonl")
        err = result.stderr.decode()
        assert result.returncode == 2, err
        assert says in err and "Traceback" not in err and len(err.splitlines()) == 1
    import s3fs

    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{free_port()}")
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")
    s3fs.S3FileSystem.clear_instance_cache()  # else the last test's listings are reused
    result = run("scan", f"s3://{BUCKET}/hosts/caps/", "--cluster", "local:1", "-f", "jsonl")
    err = result.stderr.decode()
    assert result.returncode == 2 and f"s3://{BUCKET}/hosts/caps/" in err, err
    assert "Traceback" not in err and len(err.splitlines()) == 1
