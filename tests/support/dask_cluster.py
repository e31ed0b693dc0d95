"""A Dask cluster in the test process, shared by the cluster tests' module fixtures."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


@contextmanager
def threaded_client(distributed: Any) -> Iterator[Any]:
    """A client of a LocalCluster of 2 single-threaded workers running as threads of this
    process (no worker process to start: the tests that kill one start their own)."""
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
