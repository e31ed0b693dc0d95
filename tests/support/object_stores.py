"""What a scan of inputs in an object store must give (docs/cluster.md, "Inputs"): a local
scan's findings and errors, cited by the store's URLs. Shared by the S3 and GCS tests."""

from __future__ import annotations

import socket
from pathlib import Path

from sse_forensics.cluster.scan import scan_on_cluster
from sse_forensics.pipeline import scan_paths
from sse_forensics.report.jsonout import findings_jsonl


def assert_store_scan_is_local(
    client: object, prefix: str, local: Path, url: dict[str, str]
) -> None:
    """Scan ``prefix``/hosts/caps/ and ``prefix``/hosts/logs/* on the cluster, the scratch
    under ``prefix``/scratch, and the same files at ``local``: the JSON lines are equal once
    local paths read as their URLs (``url``), every input is cited, and the errors (the
    garbage-chunk capture's among them) are the same."""
    cluster = scan_on_cluster(
        [f"{prefix}/hosts/caps/", f"{prefix}/hosts/logs/*"],
        client,
        keep_tables=False,
        scratch=f"{prefix}/scratch",
    )
    scanned = scan_paths([str(local / "caps"), str(local / "logs" / "*")], keep_tables=False)
    expected = findings_jsonl(scanned)
    for path, name in url.items():
        expected = expected.replace(f'"{path}"'.encode(), f'"{name}"'.encode())
    assert cluster.findings and findings_jsonl(cluster) == expected
    assert sorted(cluster.inputs) == sorted(url.values())
    assert [(url[e.source], e.what) for e in scanned.errors] == [
        (e.source, e.what) for e in cluster.errors
    ]
    assert any("malformed chunk size" in e.what for e in cluster.errors)


def free_port() -> int:
    """A TCP port on loopback nobody listens on (for an emulator, or for an endpoint that
    must not answer)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port
