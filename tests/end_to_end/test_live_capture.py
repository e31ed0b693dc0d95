"""Capture real traffic now, then analyze it: the committed samples are not the only evidence.

Each test runs one scenario of samples/make_samples.py live (real uvicorn/Starlette PROFILE
server and httpx client, or the official MCP Python SDK on both ends, tcpdump on ``lo``) into
``tmp_path``, scans the pcap, and checks two things against independent ground truth: the
findings equal the scenario's designed findings, and the data events reassembled from the
wire are the ones the client itself received. Marked ``live`` (a few seconds each, real
servers): ``python -m pytest -m live`` runs them, as ``.ci/run`` does; they need the
``samples`` extra (uvicorn, httpx, the mcp SDK), root and tcpdump on ``lo``.
"""

from __future__ import annotations

import importlib
import os
import random
import shutil
import sys
from collections import Counter
from pathlib import Path
from types import ModuleType

import pytest

from sse_forensics.pipeline import scan_paths
from sse_forensics.result import ScanResult

SAMPLES_DIR = Path(__file__).resolve().parents[2] / "samples"
PROFILE_SCENARIOS = ["clean-resume-int", "resume-jump-unsignalled"]
SDK_SCENARIO = "mcp-sdk-resume"
# The SDK client returns only once initialize, tools/list (it lists the tools to validate
# the call's result) and tools/call are answered: three JSON-RPC responses on the wire.
SDK_RESPONSES = 3

pytestmark = pytest.mark.live


@pytest.fixture(scope="module")
def make_samples() -> ModuleType:
    """samples/make_samples.py, imported once the live machinery is known to be usable."""
    if os.geteuid() != 0:
        pytest.skip("live capture needs root (tcpdump records lo)")
    if shutil.which("tcpdump") is None:
        pytest.skip("tcpdump not on PATH")
    sys.path.insert(0, str(SAMPLES_DIR))  # samples/ is not a package
    return importlib.import_module("make_samples")


_used_ports: set[int] = set()


def free_port(make_samples: ModuleType) -> int:
    """A free port below the kernel's ephemeral range, never make_samples' fixed ones: no
    client connection (ours, another test's, a concurrent make_samples run's) can have it as
    its source port, so ``tcp port P`` captures this scenario's traffic only."""
    range_file = Path("/proc/sys/net/ipv4/ip_local_port_range")
    low = int(range_file.read_text().split()[0]) if range_file.exists() else 32768
    fixed = range(make_samples.FIRST_PORT, make_samples.FIRST_PORT + 100)
    candidates = [p for p in range(max(1024, low - 10000), low) if p not in fixed]
    random.shuffle(candidates)
    for port in candidates:
        if port not in _used_ports and make_samples.port_is_free(port):
            _used_ports.add(port)
            return port
    pytest.skip("no free port below the ephemeral range")


def live_scan(
    make_samples: ModuleType, name: str, out_dir: Path
) -> tuple[object, object, ScanResult]:
    """Capture scenario ``name`` live into ``out_dir``; return (scenario, client view, scan)."""
    scenario = next(s for s in make_samples.scenarios() if s.name == name)
    pcap, seen = make_samples.capture(scenario, free_port(make_samples), out_dir)
    return scenario, seen, scan_paths([str(pcap)])


def designed(findings: list[dict]) -> Counter:
    return Counter(
        (f["rule"], f["classification"], f["gap"]["first"], f["gap"]["last"]) for f in findings
    )


def reported(result: ScanResult) -> Counter:
    return Counter(
        (f.rule, f.classification, f.gap["first"], f.gap["last"]) for f in result.findings
    )


def data_events(result: ScanResult) -> list[dict]:
    events = result.tables["events"]
    return [e for e in events.to_dicts() if e["kind"] == "data"]


@pytest.mark.parametrize("name", PROFILE_SCENARIOS)
def test_profile_capture_matches_design_and_client(
    make_samples: ModuleType, name: str, tmp_path: Path
) -> None:
    scenario, logs, result = live_scan(make_samples, name, tmp_path)
    assert result.errors == []
    assert reported(result) == designed(scenario.findings)
    # What the httpx client dispatched (after its planned hang-up), event ID by event ID.
    client_ids = Counter(e.event_id for log in logs for e in log.data_events)
    wire_ids = Counter(e["id"] for e in data_events(result))
    assert wire_ids == client_ids
    assert sum(wire_ids.values()) == {"clean-resume-int": 20, "resume-jump-unsignalled": 15}[name]
    (resume,) = result.tables["resumes"].to_dicts()
    assert resume["last_event_id"] == "7" and resume["status"] == 200


def test_sdk_resume_capture_matches_design_and_client(
    make_samples: ModuleType, tmp_path: Path
) -> None:
    scenario, progress, result = live_scan(make_samples, SDK_SCENARIO, tmp_path)
    assert result.errors == []
    assert reported(result) == designed(scenario.findings) == Counter()
    # The client saw the 8 steps plus the one stored while it was disconnected (replayed).
    assert sorted(progress) == [1, 2, 3, 3.5, 4, 5, 6, 7, 8]
    events = data_events(result)
    notifications = [e for e in events if e["rpc_method"] == "notifications/progress"]
    responses = [e for e in events if e["rpc_id"] is not None]
    assert len(notifications) == len(progress)
    assert len(responses) == SDK_RESPONSES
    assert len(events) == len(progress) + SDK_RESPONSES
    # The SDK's own reconnect is seen as one resume of the tools/call stream.
    (resume,) = result.tables["resumes"].to_dicts()
    assert resume["status"] == 200 and resume["resumes_stream"] == resume["stream"]
