"""The Dask side: a client to the cluster ``--cluster`` names, and the
:class:`concurrent.futures.Executor` the pipeline submits its tasks to.

Imports Dask when called, never at import time: the base install has no Dask.
"""

from __future__ import annotations

import logging
import os
import threading
import warnings
from collections.abc import Callable, Iterator
from concurrent.futures import Executor, Future
from contextlib import contextmanager
from pathlib import PurePath
from types import FunctionType
from typing import Any

from sse_forensics.cluster.mirror import Mirror, client_reads, paths_in, run_mirrored
from sse_forensics.cluster.spec import INSTALL_HINT, ClusterSpec, ClusterUnavailable
from sse_forensics.workers import POLARS_THREADS

# An existing cluster may still be adding workers when the scan starts.
WAIT_FOR_WORKERS_S = 60.0
# Plain values travel inside each task; anything else (the cross-session front, the rules,
# the analysis config) is sent to the cluster once and referenced by every task.
_SCALARS = (str, bytes, int, float, bool, type(None), PurePath, FunctionType)
_CONTAINERS = (list, tuple, dict, set, frozenset)
_INLINE = (*_SCALARS, *_CONTAINERS)
# A container that pickles to more than this is shared like any other value: sent once as
# a task of its own, not inside its task's graph (Dask warns on stderr past 10 MB of graph,
# "Sending large graph", and the scheduler holds the graph until the task is done).
INLINE_BYTES = 1 << 20

ProgressCall = Callable[[str, int, int], None]

LOST_WORKER_TIMEOUT = "distributed.deploy.lost-worker-timeout"
# A LocalCluster's nanny restarts a worker that died (an out-of-memory kill, a crash), and
# the cluster closes that nanny for good if the worker has not registered again
# ``lost-worker-timeout`` after a removal (Dask's default 15 s), timed from that removal:
# a worker that died twice within it, on a loaded machine, lost its nanny while restarting
# and the scan waited on a cluster short of a worker. Here the nannies are ours and always
# restart: a task that kills every worker is still bounded by Dask's allowed-failures.
LOCAL_LOST_WORKER_S = "1h"

# Tasks a LocalCluster's worker runs at once: one, polars parallelising inside it on as many
# threads (:func:`_polars_share`); Dask runs the workers side by side.
THREADS_PER_WORKER = 1

PRE_SPAWN_ENVIRON = "distributed.nanny.pre-spawn-environ"
"""Variables a nanny sets in its own process's environment before it spawns a worker (the
only way to size polars' thread pool, read when a process imports polars)."""


def _distributed() -> Any:
    try:
        import distributed
    except ImportError as exc:
        raise ClusterUnavailable(f"--cluster needs Dask distributed: {INSTALL_HINT}") from exc
    return distributed


@contextmanager
def open_cluster(spec: ClusterSpec, processes: bool = True) -> Iterator[Any]:
    """A ``distributed.Client`` to the scheduler at ``spec.address``, or to a LocalCluster
    started here (``processes=False``: worker threads in this process, for tests). Closed
    on exit, the LocalCluster with it. An unreachable scheduler raises
    :class:`ClusterUnavailable` (the connect timeout is Dask's
    ``distributed.comm.timeouts.connect``)."""
    distributed = _distributed()
    if spec.local:
        import dask

        workers = spec.local_workers or os.cpu_count() or 1
        # Port 0: a free port for the dashboard, whatever else runs on 8787.
        with (
            dask.config.set({LOST_WORKER_TIMEOUT: LOCAL_LOST_WORKER_S}),
            _polars_share(THREADS_PER_WORKER),
            distributed.LocalCluster(
                n_workers=workers,
                threads_per_worker=THREADS_PER_WORKER,
                processes=processes,
                dashboard_address=":0",
                # A worker's heartbeat racing the scheduler's shutdown is logged as an ERROR
                # with a traceback: noise on the user's stderr. A task's own error comes
                # back to the client as its exception anyway.
                silence_logs=logging.CRITICAL,
            ) as cluster,
            distributed.Client(cluster) as client,
        ):
            yield client
        return
    try:
        client = distributed.Client(spec.address)
    except (OSError, TimeoutError) as exc:
        raise ClusterUnavailable(
            f"--cluster {spec.address}: cannot reach the scheduler: {_first_line(exc)}"
        ) from exc
    try:
        yield client
    finally:
        client.close()


@contextmanager
def _polars_share(threads: int) -> Iterator[None]:
    """A LocalCluster's worker processes run polars on ``threads`` threads, their Dask
    thread count, as Dask's nanny sizes OpenMP and BLAS pools (``OMP_NUM_THREADS=1`` in
    :data:`PRE_SPAWN_ENVIRON`): a worker given one core that runs polars on every core
    competes with the node's other workers (docs/scaling.md). A value the user set is
    kept; the one set here leaves this process's environment with the cluster (a nanny
    sets it at every spawn, restarts included)."""
    import dask

    if POLARS_THREADS in os.environ:
        yield
        return
    try:
        with dask.config.set({f"{PRE_SPAWN_ENVIRON}.{POLARS_THREADS}": str(threads)}):
            yield
    finally:
        os.environ.pop(POLARS_THREADS, None)


def worker_threads(client: Any) -> int:
    """How many tasks the cluster runs at once (waiting a while for a first worker)."""
    if not client.nthreads():
        try:
            client.wait_for_workers(1, timeout=WAIT_FOR_WORKERS_S)
        except (OSError, TimeoutError) as exc:
            raise ClusterUnavailable(
                f"the cluster has no worker (waited {WAIT_FOR_WORKERS_S:.0f} s)"
            ) from exc
    threads: int = sum(client.nthreads().values())
    return max(1, threads)


class ClusterExecutor(Executor):
    """``Client.get_executor`` (a standard Executor over Dask futures), plus:

    - an argument shared by many tasks goes to the cluster once, as a task of its own that
      the others depend on (:data:`_INLINE` values travel inside each task);
    - each finished task moves the progress bar: ``stages`` maps a task function's name to
      the stage it reports (``_analyze_files`` → ``facts``: partitions done of submitted).

    With a ``mirror`` (an object-store scratch, :mod:`.mirror`), each task runs inside
    :func:`~.mirror.run_mirrored`; the files the client wrote are uploaded before a task
    names them, and the evidence files a result names are downloaded when the client asks
    for that result.

    A task is not retried when it raises (the pipeline's tasks are deterministic); Dask
    reschedules it when its worker dies (``distributed.scheduler.allowed-failures``).
    """

    def __init__(
        self,
        client: Any,
        progress: ProgressCall | None = None,
        stages: dict[str, str] | None = None,
        mirror: Mirror | None = None,
    ) -> None:
        self.client = client
        self.mirror = mirror
        self._inner = client.get_executor(pure=False)
        self._sent: dict[int, tuple[object, Any]] = {}
        self._users: dict[int, int] = {}  # id() in _sent → its tasks not done yet
        self._progress = progress
        self._stages = stages or {}
        self._counts: dict[str, list[int]] = {}  # stage → [done, submitted]
        self._lock = threading.Lock()

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        stage = self._stages.get(getattr(fn, "__name__", ""))
        mirror = self.mirror
        if mirror is not None:
            mirror.push(paths_in([args, kwargs], mirror.root))  # files the client wrote
            args = (mirror, fn, *args)
            fn = run_mirrored
        used: list[int] = []
        args = tuple(self._shared(a, used) for a in args)
        kwargs = {k: self._shared(v, used) for k, v in kwargs.items()}
        future: Future[Any] = self._inner.submit(fn, *args, **kwargs)
        if mirror is not None:
            future = _Pulled.chain(future, mirror)
        if used:
            future.add_done_callback(lambda _f: self._release(used))
        if stage is not None and self._progress is not None:
            with self._lock:
                self._counts.setdefault(stage, [0, 0])[1] += 1
            future.add_done_callback(lambda _f: self._done(stage))
        return future

    def _shared(self, value: object, used: list[int]) -> object:
        """``value`` itself (:data:`_INLINE`, a container of at most :data:`INLINE_BYTES`
        pickled), or the future of the task that gives it to its tasks (its id() appended to
        ``used``: :meth:`_release` once they are done)."""
        from distributed.protocol.pickle import dumps

        if isinstance(value, _SCALARS):
            return value
        with self._lock:
            hit = self._sent.get(id(value))
            if hit is not None:
                self._users[id(value)] += 1
        blob: bytes | None = None
        if hit is None and isinstance(value, _CONTAINERS):
            blob = dumps(value)  # type: ignore[no-untyped-call]
            if len(blob) <= INLINE_BYTES:
                return value
        if hit is None:
            # A task that returns the value, not ``scatter``: the scheduler keeps the task,
            # so a value lost with its worker is computed again; scattered data would be
            # lost for good, and every task that needs it with it. (The object is kept
            # beside its future: its id() cannot be reused meanwhile.)
            # Pickled here, once: the task carries bytes, which the scheduler (in this
            # process, for a LocalCluster) passes on as they are. An object would be
            # pickled, unpickled by the scheduler and pickled again for the worker: three
            # passes over each task's share of the front (10.5 MB pickled for the 16 tasks
            # of the 8x growth log set: 50,920 replayed events' first sightings), all of
            # them on this process's one core while the workers wait for their shares.
            # distributed.protocol.pickle has no annotations (pickle, else cloudpickle).
            if blob is None:
                blob = dumps(value)  # type: ignore[no-untyped-call]
            with warnings.catch_warnings():
                # Dask advises against large task graphs; this one is sent exactly once.
                warnings.filterwarnings("ignore", "Sending large graph", UserWarning)
                hit = (value, self.client.submit(_shared_value, blob, pure=False))
            with self._lock:
                self._sent[id(value)] = hit
                self._users[id(value)] = 1
        used.append(id(value))
        return hit[1]

    def _release(self, used: list[int]) -> None:
        """A task done: the values it shared that no task still waits for are let go, here
        and on the workers (each task's share of the cross-session front is its own: held
        to the end, they were ~600 MB of the client's peak on the 2.45 GB log set). One
        submitted again is sent again."""
        gone = []
        with self._lock:
            for key in used:
                self._users[key] -= 1
                if not self._users[key]:
                    del self._users[key]
                    gone.append(self._sent.pop(key))
        del gone  # the objects and their futures, released outside the lock

    def _done(self, stage: str) -> None:
        with self._lock:
            count = self._counts[stage]
            count[0] += 1
            done, total = count
        assert self._progress is not None
        self._progress(stage, done, total)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        self._inner.shutdown(wait=wait)
        futures = [f for _, f in self._sent.values()]
        self._sent.clear()
        self._users.clear()
        if futures:
            self.client.cancel(futures)


class _Pulled(Future[Any]):
    """A task's future whose :meth:`result` first downloads the evidence files the result
    names (in the caller's thread, not Dask's event loop)."""

    def __init__(self, mirror: Mirror) -> None:
        super().__init__()
        self._mirror = mirror
        self._pulled = False
        self._pull_lock = threading.Lock()

    @classmethod
    def chain(cls, inner: Future[Any], mirror: Mirror) -> _Pulled:
        outer = cls(mirror)

        def copy(done: Future[Any]) -> None:
            if done.cancelled():
                outer.cancel()
                outer.set_running_or_notify_cancel()
            elif done.exception() is not None:
                outer.set_exception(done.exception())
            else:
                outer.set_result(done.result())

        inner.add_done_callback(copy)
        return outer

    def result(self, timeout: float | None = None) -> Any:
        value = super().result(timeout)
        with self._pull_lock:
            if not self._pulled:
                mirror = self._mirror
                named = paths_in(value, mirror.root)
                mirror.held(named)
                mirror.pull(list(client_reads(named)))
                self._pulled = True
        return value


def _shared_value(blob: bytes) -> object:
    """On a worker: the value :meth:`ClusterExecutor._shared` pickled."""
    from distributed.protocol.pickle import loads

    # distributed.protocol.pickle has no annotations.
    return loads(blob)  # type: ignore[no-untyped-call]


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__
