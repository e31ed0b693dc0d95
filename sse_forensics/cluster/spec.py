"""What ``--cluster`` names, parsed without importing Dask (the base install has none)."""

from __future__ import annotations

import re
from dataclasses import dataclass

INSTALL_HINT = "install the cluster extra: pip install 'sse-forensics[cluster]'"

# A scheduler address as Dask's comm layer spells it (``tcp://host:8786``, ``tls://…``,
# ``ws://…``); ``inproc://`` only exists inside one process, so a command line cannot use it.
_ADDRESS = re.compile(r"^(?P<scheme>tcp|tls|ws|wss|ucx)://(?P<rest>\S+)$")
_LOCAL = re.compile(r"^local(?::(?P<workers>\d+))?$")


class ClusterUnavailable(Exception):
    """The scan cannot run on the cluster asked for: Dask is not installed, the scheduler
    cannot be reached, ``--scratch`` is not usable, or the cluster failed mid-scan. The CLI
    prints it as one line and exits 2."""


@dataclass(frozen=True, slots=True)
class ClusterSpec:
    """``address`` of an existing scheduler, or a LocalCluster of ``local_workers`` worker
    processes (``None``: one per core)."""

    address: str | None = None
    local_workers: int | None = None

    @property
    def local(self) -> bool:
        return self.address is None


def parse_cluster(value: str) -> ClusterSpec:
    """``local``, ``local:N`` or a scheduler address (``tcp://host:8786``). Raises
    :class:`ClusterUnavailable` for anything else."""
    value = value.strip()
    local = _LOCAL.match(value)
    if local is not None:
        workers = local.group("workers")
        if workers is not None and int(workers) < 1:
            raise ClusterUnavailable(f"--cluster {value}: a LocalCluster needs at least 1 worker")
        return ClusterSpec(local_workers=int(workers) if workers is not None else None)
    if _ADDRESS.match(value):
        return ClusterSpec(address=value)
    raise ClusterUnavailable(
        f"--cluster {value!r}: expected local, local:N or a scheduler address such as "
        "tcp://scheduler:8786"
    )
