"""The polars engine a scan's lazy queries run on (issue 13: a small scan's fixed cost).

polars 2 runs a lazy query (``LazyFrame.collect``, ``pl.collect_all``) on its streaming
engine unless told otherwise: each query then starts the streaming executor, ~0.5 ms of
CPU however few its rows, where the in-memory engine takes ~0.1 ms (eager frame methods
always use the in-memory engine). A small scan runs ~150 such queries over a few dozen
rows. A scan of less than :data:`SMALL_SCAN_BYTES` of input runs them on the in-memory
engine; a larger one keeps polars' default (the streaming engine bounds its memory), and
so does a scan whose process names an engine (``POLARS_ENGINE_AFFINITY``). The engine
changes how a query runs, not its result.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Final

import polars as pl

# Input bytes below which a scan's lazy queries run on the in-memory engine: one
# partition's (pipeline.PARTITION_BYTES), whose evidence is held in memory whole anyway.
SMALL_SCAN_BYTES: Final = 8 << 20

_AFFINITY = "POLARS_ENGINE_AFFINITY"


@contextmanager
def engine_for(size: int) -> Iterator[None]:
    """Within the block, lazy queries run on the in-memory engine if ``size`` (input bytes)
    is below :data:`SMALL_SCAN_BYTES` and no engine is named; polars' default after."""
    if size >= SMALL_SCAN_BYTES or os.environ.get(_AFFINITY):
        yield
        return
    pl.Config.set_engine_affinity("in-memory")
    try:
        yield
    finally:
        pl.Config.set_engine_affinity(None)
