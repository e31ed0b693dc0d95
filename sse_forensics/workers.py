"""The worker processes of ``--jobs N`` (:func:`sse_forensics.pipeline.scan_paths`), kept
light: nothing here imports polars or the analyzer, so that the ``scan`` command can start
them first and their imports overlap its own (:func:`early_workers`)."""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import glob
import multiprocessing
import os
import signal
import sys
from concurrent.futures import ProcessPoolExecutor

# A capture smaller than this is reassembled in this process: starting workers costs more.
SHARD_BYTES = 32 << 20

POLARS_THREADS = "POLARS_MAX_THREADS"
"""The variable that sizes polars' thread pool in a process that has not imported it yet
(a value the user set is kept). Worker processes that busy every core between them run
one thread each: their tasks are small and many, and polars' threads would only compete
(benchmarks/scale.py's 4x log set, --jobs 2 on 2 cores: 25.2 CPU s with one thread per
worker, 28.8 with two)."""


# prctl(2) option: the signal this process gets when its parent dies.
_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    """Linux: this worker gets SIGTERM when the scan's process dies (killed, or by the
    kernel's out-of-memory killer) instead of finishing, or waiting for, a task nobody will
    read: a worker's task queue never reads end-of-file, since every worker holds its
    writing end too. A no-op elsewhere."""
    if not sys.platform.startswith("linux"):
        return
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGTERM))
    parent = multiprocessing.parent_process()
    if parent is not None and os.getppid() != parent.pid:
        os._exit(1)  # the parent died before the signal was asked for


def _start_worker() -> None:
    """A worker process's start: tied to the scan's process (:func:`_die_with_parent`),
    the analyzer imported (as it starts, not at its first task), memory returned as the
    parent's is."""
    _die_with_parent()
    import sse_forensics.pipeline  # noqa: F401
    from sse_forensics.memory import return_freed_memory

    return_freed_memory()


def polars_threads(workers: int) -> str:
    """:data:`POLARS_THREADS` for each of ``workers`` processes sharing this machine: its
    share of the cores."""
    return str(max(1, (os.cpu_count() or 1) // workers))


def start_workers(workers: int) -> ProcessPoolExecutor:
    """``workers`` spawned processes, started now (a pool starts its processes at its
    first task otherwise: their imports overlap the parent's work), polars in each with its
    share of the cores (:data:`POLARS_THREADS`)."""
    # spawn, not fork: polars' thread pool must not be copied mid-flight.
    context = multiprocessing.get_context("spawn")
    pool = ProcessPoolExecutor(max_workers=workers, mp_context=context, initializer=_start_worker)
    given = os.environ.get(POLARS_THREADS)
    os.environ.setdefault(POLARS_THREADS, polars_threads(workers))
    try:
        for _ in range(workers):  # each submit spawns a process (and it reads the variable)
            pool.submit(int)
    finally:
        if given is None:
            del os.environ[POLARS_THREADS]
    return pool


def early_workers(paths: list[str], jobs: int) -> ProcessPoolExecutor | None:
    """The ``jobs`` worker processes a local scan of ``paths`` starts at once (``jobs`` > 1
    and an input of :data:`SHARD_BYTES` or more), started now, before the caller imports
    the analyzer (~0.4 CPU s that the workers' own imports then overlap); else None. The
    scan takes them (``scan_paths(pool=…)``) and shuts them down."""
    if jobs < 2 or input_bytes(paths) < SHARD_BYTES:
        return None
    return start_workers(jobs)


def input_bytes(paths: list[str]) -> int:
    """Bytes of the files ``paths`` name: files, a directory's own files (the files
    :func:`~sse_forensics.ingest.inputs.resolve_inputs` reads), glob matches."""
    total = 0
    for path in paths:
        if os.path.isdir(path):
            names = [os.path.join(path, n) for n in os.listdir(path)]
        elif glob.has_magic(path) and not os.path.exists(path):
            names = glob.glob(path)
        else:
            names = [path]
        for name in names:
            with contextlib.suppress(OSError):
                if os.path.isfile(name):
                    total += os.path.getsize(name)
    return total
