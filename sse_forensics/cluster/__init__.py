"""Scans on a Dask distributed cluster (``scan --cluster``; docs/cluster.md).

Optional: ``pip install 'sse-forensics[cluster]'`` adds Dask and fsspec. Importing this
package imports neither; :func:`scan_on_cluster` does, and says what to install when they
are missing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sse_forensics.cluster.spec import ClusterSpec, ClusterUnavailable, parse_cluster

if TYPE_CHECKING:
    from sse_forensics.result import ScanResult

__all__ = ["ClusterSpec", "ClusterUnavailable", "parse_cluster", "scan_on_cluster"]


def scan_on_cluster(paths: list[str], cluster: Any, **options: Any) -> ScanResult:
    """:func:`sse_forensics.cluster.scan.scan_on_cluster` (imported on first use)."""
    from sse_forensics.cluster.scan import scan_on_cluster as scan

    return scan(paths, cluster, **options)
