"""Freed memory goes back to the system (issue "production scale": peak memory bounded by
the work in flight, not by the input).

glibc serves a large allocation (a numpy array, a column) from ``mmap`` and returns it to
the system when it is freed — until the first such block is freed: from then on it raises
its threshold to that block's size, and later arrays of that size come from the heap, where
freed space stays resident for the rest of the process. A scan allocates and frees
per-packet and per-event arrays of every size batch after batch, so without a fixed
threshold its resident memory ratchets up with the input (measured on a 400k-packet
capture: classifying the flows kept 134 MB resident instead of 13). Fixing the threshold
costs CPU time: every block of 128 KB to 4 MB is a fresh mapping, faulted in 4 KB at a time
(numpy asks for huge pages from 4 MB up), and a page fault is dear in this VM (~4 µs).
Measured at 128 KB vs 4 MB (issue 9, --jobs 1, alternating runs): the 200k-packet capture
430-460k vs 285-320k minor faults, 1.75-1.93 vs 1.41-1.57 s system time, peak 259 vs
272-283 MB; the 400k one 0.6 s less system time but no less CPU in all, peak 261 vs
296-305 MB (its RSS over the 50k capture's, 1.24x, would pass 1.3x); the 2.3M-packet one
41.9+16.6 vs 41.5+12.2 CPU s, peak 686 vs 732 MB (8 MB: 759 MB; 4 MB with a 32 MB trim
threshold: 719 MB, 11.7 s system). The threshold stays at 128 KB: the saving is a few
percent of CPU, the cost a peak that grows with the input.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import sys

# mallopt(3) parameter number of M_MMAP_THRESHOLD, and the value glibc starts with.
_M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 128 * 1024

_done = False


def return_freed_memory() -> None:
    """Pin glibc's mmap threshold for this process (idempotent; a no-op elsewhere)."""
    global _done
    if _done or not sys.platform.startswith("linux"):
        return
    _done = True
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        libc.mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)


# polars allocates through its own jemalloc, which keeps freed pages resident for a while
# (polars sets ``dirty_decay_ms:500,muzzy_decay_ms:1000``): a scan that allocates and frees
# columns batch after batch holds the last second or two of freed batches on top of what it
# uses. Returning them sooner costs system time: every page given back is faulted in again
# (zeroed) by the next batch. On benchmarks/scale.py's log sets of 52 MB / 417 MB, one
# process: ``dirty_decay_ms:100,muzzy_decay_ms:0`` took 5.3 / 42.7 CPU s (10.7 of them
# system time at 417 MB), peak RSS 309 / 470 MB; ``dirty_decay_ms:1000,muzzy_decay_ms:0``
# with the log spill's budget halved (evidence.log_partitions.SPILL_SHARE) 5.1 / 37.0 CPU s
# (5.7 system), 328 / 469 MB. No muzzy stage: a page past its decay goes back at once.
# polars appends the variable's value to its own, so these win.
POLARS_ALLOCATOR = "dirty_decay_ms:1000,muzzy_decay_ms:0"
_JEMALLOC_CONF = "_RJEM_MALLOC_CONF"  # the variable polars' jemalloc reads when it starts


def configure_polars_allocator() -> None:
    """Ask polars' allocator to return freed pages sooner. Effective only before polars
    is imported (the command line calls it first); a ``_RJEM_MALLOC_CONF`` the user set
    is kept instead. Worker processes inherit it."""
    os.environ.setdefault(_JEMALLOC_CONF, POLARS_ALLOCATOR)
