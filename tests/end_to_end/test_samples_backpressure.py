"""Real slow-consumer backpressure (samples/backpressure-eviction.pcap, captured over loopback)
is attributed to ``backpressure-eviction`` (issue 3, "Done when").

The capture: a client with a 4 KB SO_RCVBUF stops reading for 2 s, its kernel advertises a
zero window, the server's writer blocks in the ASGI send and the producer evicts 19-23 from
its bounded send queue without a stream-gap (see samples/make_samples.py).
"""

from __future__ import annotations

import json
from pathlib import Path

import dpkt
import pytest
from conftest import SAMPLES

from sse_forensics.pipeline import scan_paths
from sse_forensics.result import ScanResult

BACKPRESSURE_SAMPLES = sorted(SAMPLES.glob("backpressure-eviction*.pcap"))
GAP_RULES = ("missing-stream-gap", "client-accepted-gap")  # findings that carry the gap's cause


def _designed_gaps(capture: Path) -> set[tuple[str, str]]:
    doc = json.loads(capture.with_suffix(".expected.json").read_text())
    return {(f["gap"]["first"], f["gap"]["last"]) for f in doc["findings"]}


@pytest.fixture(scope="module", params=BACKPRESSURE_SAMPLES, ids=lambda p: p.name)
def scanned(request: pytest.FixtureRequest) -> tuple[Path, ScanResult]:
    return request.param, scan_paths([str(request.param)])


def test_a_backpressure_sample_is_committed() -> None:
    assert [p.name for p in BACKPRESSURE_SAMPLES] == ["backpressure-eviction.pcap"]


def test_every_designed_gap_is_attributed_to_backpressure_eviction(
    scanned: tuple[Path, ScanResult],
) -> None:
    capture, result = scanned
    gaps = result.tables["gaps"].to_dicts()
    designed = _designed_gaps(capture)
    assert designed  # the scenario evicts at least one range
    assert {(g["first"], g["last"]) for g in gaps} == designed
    for gap in gaps:
        assert gap["location"] == "live" and gap["signal"] is None
        assert gap["cause"] == "backpressure-eviction", gap
        # The cause cites the client's closed or full receive window on the wire.
        whats = [e["what"] for e in gap["evidence"]]
        assert any(w.startswith("client ") and "window" in w for w in whats), whats
    for finding in result.findings:
        if finding.rule in GAP_RULES:
            assert finding.cause == "backpressure-eviction"


def test_the_client_advertised_a_zero_window_and_the_server_stalled(
    scanned: tuple[Path, ScanResult],
) -> None:
    """The TCP analysis sees the pause: a client zero-window period of over a second on the
    stream's connection, the server stalled for it, and both before the gap's events reach
    the wire (they were queued behind the backlog while the producer evicted)."""
    _, result = scanned
    (gap,) = result.tables["gaps"].to_dicts()
    (conn,) = [c for c in result.connections if c.client[1] == gap["client_port"]]
    zero = [w for w in conn.windows if w.receiver == "client" and w.kind == "zero-window"]
    assert len(zero) == 1 and zero[0].end is not None
    assert zero[0].end.ts - zero[0].start.ts > 1.0
    stalls = [s for s in conn.stalls if s.sender == "server" and s.reason == "zero-window"]
    assert len(stalls) == 1 and not stalls[0].retransmission
    assert zero[0].end.ts <= gap["ts"]


def _server_payload(capture: Path, server_port: int) -> bytes:
    """Server-to-client TCP payload by sequence number, read with dpkt (not the analyzer)."""
    segments: dict[int, bytes] = {}
    with capture.open("rb") as handle:
        for _, buf in dpkt.pcap.Reader(handle):
            tcp = dpkt.ethernet.Ethernet(buf).data.data
            if isinstance(tcp, dpkt.tcp.TCP) and tcp.sport == server_port and tcp.data:
                segments.setdefault(tcp.seq, bytes(tcp.data))
    return b"".join(data for _, data in sorted(segments.items()))


def test_wire_shows_zero_window_and_no_evicted_ids(scanned: tuple[Path, ScanResult]) -> None:
    """Independent of the analyzer: a zero window from the client (what tshark flags as
    ``tcp.analysis.zero_window``), and the evicted IDs never on the wire."""
    capture, result = scanned
    (gap,) = result.tables["gaps"].to_dicts()
    server_port = gap["server_port"]
    control = dpkt.tcp.TH_SYN | dpkt.tcp.TH_FIN | dpkt.tcp.TH_RST
    zero_windows = 0
    with capture.open("rb") as handle:
        for _, buf in dpkt.pcap.Reader(handle):
            tcp = dpkt.ethernet.Ethernet(buf).data.data
            to_server = isinstance(tcp, dpkt.tcp.TCP) and tcp.dport == server_port
            zero_windows += to_server and tcp.win == 0 and not tcp.flags & control
    assert zero_windows >= 1
    payload = _server_payload(capture, server_port)
    first, last = int(gap["first"]), int(gap["last"])
    for n in range(first, last + 1):
        assert f"\nid: {n}\n".encode() not in payload
    for n in (first - 1, last + 1):
        assert f"\nid: {n}\n".encode() in payload
    data_ids = [e["id"] for e in result.tables["events"].to_dicts() if e["kind"] == "data"]
    assert not {str(n) for n in range(first, last + 1)} & set(data_ids)
