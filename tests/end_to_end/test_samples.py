"""Every bundled sample reports exactly the findings its scenario was built to produce."""

from __future__ import annotations

import functools
import json
import re
from collections import Counter
from pathlib import Path

import pytest
from conftest import SAMPLES, sample_captures
from support import sample_scans

from sse_forensics.pipeline import scan_paths
from sse_forensics.result import ScanResult

CAPTURES = sample_captures()


def _expected(capture: Path) -> Counter:
    doc = json.loads(capture.with_suffix(".expected.json").read_text())
    return Counter(
        (f["rule"], f["classification"], f["gap"]["first"], f["gap"]["last"])
        for f in doc["findings"]
    )


@functools.cache  # two tests judge each sample's scan: one scan
def _scan(capture: Path) -> ScanResult:
    return sample_scans.scan([capture])


def _got(findings) -> Counter:
    return Counter((f.rule, f.classification, f.gap["first"], f.gap["last"]) for f in findings)


def test_samples_exist() -> None:
    assert len(CAPTURES) >= 20
    # Clean samples, silent ones, signalled ones and capture-loss ones are all represented.
    kinds = set()
    for capture in CAPTURES:
        kinds |= {c for (_, c, _, _) in _expected(capture)} or {"clean"}
    assert kinds >= {"clean", "silent_corruption", "expected_gap", "indeterminate"}


@pytest.mark.parametrize("capture", CAPTURES, ids=[c.name for c in CAPTURES])
def test_sample_findings_match_expected(capture: Path) -> None:
    result = _scan(capture)
    assert _got(result.findings) == _expected(capture)


@pytest.mark.parametrize("capture", CAPTURES, ids=[c.name for c in CAPTURES])
def test_every_finding_carries_its_evidence(capture: Path) -> None:
    result = _scan(capture)
    for f in result.findings:
        assert re.fullmatch(r"[0-9a-f]{32}", f.fingerprint)
        assert f.session_id and f.stream and f.id_scheme in ("int", "prefixed", "opaque")
        assert f.message and "?" not in f.message.split("Session", 1)[0]
        frames = [e for e in f.evidence if e.get("frame")]
        assert frames, f"{f.rule} cites no frame"
        for e in frames:
            assert e["source"] == str(capture) and isinstance(e["ts"], float) and e["what"]


def test_capture_loss_is_indeterminate_not_corruption() -> None:
    result = sample_scans.scan([SAMPLES / "crafted-capture-loss.pcap"])
    assert {f.classification for f in result.findings} == {"indeterminate"}
    (finding,) = [f for f in result.findings if f.rule == "missing-stream-gap"]
    assert any("capture lacks bytes" in e["what"] for e in finding.evidence)
    assert not [f for f in result.findings if f.rule == "resumable-while-evicting"]


def test_fingerprints_stable_across_runs_and_input_order() -> None:
    a = str(SAMPLES / "resume-jump-unsignalled.pcap")
    b = str(SAMPLES / "live-jump-unsignalled.pcap")
    first = sorted(f.fingerprint for f in scan_paths([a, b]).findings)
    again = sorted(f.fingerprint for f in scan_paths([b, a]).findings)
    alone = sorted(f.fingerprint for f in scan_paths([a]).findings + scan_paths([b]).findings)
    assert first == again == alone
    assert len(set(first)) == len(first) == 6


def test_shared_counter_is_detected_and_not_a_gap() -> None:
    result = sample_scans.scan([SAMPLES / "shared-counter-two-streams.pcap"])
    sessions = result.tables["sessions"]
    assert result.findings == []
    assert set(sessions["counter_scope"].to_list()) & {"session", "server"}


def test_resume_linked_to_stream_by_event_id_across_connections() -> None:
    result = sample_scans.scan([SAMPLES / "clean-resume-int.pcap"])
    resumes = result.tables["resumes"].to_dicts()
    streams = result.tables["streams"].to_dicts()
    (resume,) = resumes
    original = next(s for s in streams if s["kind"] == "post")
    assert resume["resumes_stream"] == original["response_stream"]
    assert resume["stream"] == original["stream"]
    replay = next(s for s in streams if s["kind"] == "resume")
    assert replay["connection"] != original["connection"]


def test_directory_scan_is_the_union_of_every_sample() -> None:
    """All samples merged as one capture (mergecap semantics): streams of different
    incidents never link or cross, so the findings are exactly the union."""
    want: Counter = Counter()
    for capture in CAPTURES:
        want += _expected(capture)
    assert _got(scan_paths([str(SAMPLES)]).findings) == want
