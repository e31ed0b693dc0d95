"""One incident per lost range (issue 12): findings about one loss grouped, on real and
crafted captures — several rules on one range, a resume storm, both legs of a proxy — with
ids stable across runs, input order and proxy legs, and the tickets built from them
(``--format tickets``). Also: a cross-session replay names the other session, and a cause is
named only on its evidence (``replay-handoff``)."""

from __future__ import annotations

import functools
import json
import shlex
import subprocess
from pathlib import Path

import pytest
from conftest import SAMPLES, sample_captures
from support import sample_scans
from support.cli import run as _in_process
from support.proxy_legs import two_legs
from support.scripts import load_script

from sse_forensics.engine.incidents import group_incidents, summarize
from sse_forensics.pipeline import scan_paths
from sse_forensics.report.jsonout import findings_jsonl, scan_document
from sse_forensics.report.ocsf import findings_ocsf
from sse_forensics.report.tickets import ticket, tickets_jsonl

PROXY = SAMPLES / "crafted-proxy-two-legs.pcap"
HANDOFF = SAMPLES / "crafted-replay-handoff.pcap"
STORM = SAMPLES / "resume-storm.pcap"
LIVE_JUMP = SAMPLES / "live-jump-unsignalled.pcap"
RESUME_JUMP = SAMPLES / "resume-jump-unsignalled.pcap"
ODD_ID = SAMPLES / "crafted-odd-id-live-jump.pcap"
HOSTILE = SAMPLES / "crafted-hostile-bytes.pcap"


def _incidents(*paths: Path):
    return group_incidents(scan_paths([str(p) for p in paths]).findings)


@functools.cache  # two tests group every sample's findings: one scan per sample
def _sample_incidents(capture: Path):
    return group_incidents(sample_scans.scan([capture]).findings)  # test_samples.py's


@functools.cache  # three tests read the proxy capture's findings: one scan
def _proxy():
    return scan_paths([str(PROXY)])


def _rules(incident) -> dict[str, int]:
    return {r.rule: r.count for r in incident.rules}


# -- grouping ------------------------------------------------------------------------------


def test_rules_on_one_range_are_one_incident() -> None:
    (incident,) = _incidents(RESUME_JUMP)
    assert _rules(incident) == {
        "resume-in-gap-2xx": 1,
        "silent-resume-jump": 1,
        "client-accepted-gap": 1,
    }
    assert incident.classification == "silent_corruption" and incident.severity == "high"
    assert incident.gap == {"first": "8", "last": "12", "count": 5}
    assert incident.cause == "replay-buffer-truncation"
    # The three findings cite the same four frames: the incident cites each once.
    frames = [e["frame"] for e in incident.evidence]
    assert sorted(frames) == [31, 38, 40, 42]
    assert summarize([incident]).text() == "1 lost range in 1 session, 3 findings"


def test_a_resume_storm_collapses_identical_findings_with_a_count() -> None:
    (incident,) = _incidents(STORM)
    assert _rules(incident) == {"empty-replay-2xx": 4, "resume-storm": 1}
    (empty,) = [r for r in incident.rules if r.rule == "empty-replay-2xx"]
    assert len(set(empty.finding_ids)) == 4  # four findings, four ids, one line


def test_both_legs_of_a_proxy_are_one_incident_with_both_as_evidence() -> None:
    result = _proxy()
    assert len(result.findings) == 5
    (incident,) = group_incidents(result.findings)
    assert _rules(incident) == {
        "missing-stream-gap": 2,
        "client-accepted-gap": 2,
        "resumable-while-evicting": 1,
    }
    legs = {(c.client, c.server) for c in incident.connections}
    assert legs == {
        (("10.0.0.11", 50110), ("10.0.0.5", 8080)),
        (("10.0.0.5", 50111), ("10.0.0.2", 8000)),
    }
    frames = {e["frame"] for e in incident.evidence}
    assert {4, 9, 39, 41, 43, 45} <= frames  # requests, and each leg's edges of the gap
    assert incident.servers[0] == ("10.0.0.2", 8000)  # upstream first, the proxy after
    # The proxy rewrote the target; the request that opened the stream is the same.
    assert {f.opened_by for f in incident.findings} == {"POST tools/call id=1"}
    assert {f.stream_label for f in incident.findings} == {
        "conn 1 #0 POST /api/mcp",
        "conn 2 #0 POST /mcp",
    }


@pytest.mark.parametrize("name", ["resume-jump-unsignalled", "resume-410", "resume-storm"])
def test_a_second_leg_adds_findings_not_incidents(name: str, tmp_path: Path) -> None:
    alone = _incidents(SAMPLES / f"{name}.pcap")
    both = _incidents(two_legs(SAMPLES / f"{name}.pcap", tmp_path / "legs.pcap"))
    assert [i.fingerprint for i in both] == [i.fingerprint for i in alone]
    assert sum(len(i.findings) for i in both) > sum(len(i.findings) for i in alone)
    assert all(
        len(i.connections) == 2 * len(a.connections) for i, a in zip(both, alone, strict=True)
    )


def test_separate_losses_stay_separate() -> None:
    """Another session with the same range, and a fault with no range, are incidents of
    their own."""
    incidents = _incidents(LIVE_JUMP, SAMPLES / "prefixed-live-jump.pcap", ODD_ID)
    summary = summarize(incidents)
    assert summary.text() == "3 lost ranges and 1 contract violation in 3 sessions, 10 findings"
    (violation,) = [i for i in incidents if not i.has_range]
    assert _rules(violation) == {"id-scheme-outlier": 1}
    assert violation.classification == "contract_violation"
    assert len({i.fingerprint for i in incidents}) == 4


def test_incident_ids_are_stable_across_runs_input_order_and_merging() -> None:
    captures = sample_captures()
    merged = sample_scans.scan(captures).findings  # test_siem_schemas.py's
    again = scan_paths([str(p) for p in reversed(captures)]).findings
    one_by_one = [i.fingerprint for p in captures for i in _sample_incidents(p)]
    ids = [i.fingerprint for i in group_incidents(merged)]
    assert sorted(ids) == sorted(i.fingerprint for i in group_incidents(again))
    assert sorted(ids) == sorted(one_by_one)
    assert len(set(ids)) == len(ids)
    # Every finding is in exactly one incident.
    members = [f.fingerprint for i in group_incidents(merged) for f in i.findings]
    assert sorted(members) == sorted(f.fingerprint for f in merged)


def test_every_sample_gives_one_incident_per_expected_range() -> None:
    """Each sample's expected findings name its lost ranges: one incident per distinct
    range, plus one per rule that names none."""
    for capture in sample_captures():
        expected = json.loads(capture.with_suffix(".expected.json").read_text())["findings"]
        # A range is its first and last ID: two streams may lose 8-9 and 8-12.
        ranges = {
            (f["gap"]["first"], f["gap"]["last"]) for f in expected if f["gap"]["first"] is not None
        }
        unranged = {f["rule"] for f in expected if f["gap"]["first"] is None}
        incidents = _sample_incidents(capture)
        assert len(incidents) == len(ranges) + len(unranged), capture.name


# -- outputs ---------------------------------------------------------------------------------


def test_json_document_counts_incidents() -> None:
    result = scan_paths([str(PROXY), str(STORM)])
    doc = json.loads(scan_document(result))
    assert doc["summary"]["text"] == "2 lost ranges in 2 sessions, 10 findings"
    assert doc["summary"]["verdicts"] == {"silent_corruption": 2}
    assert doc["verdicts"] == {"silent_corruption": 10}  # findings, as before
    incident_ids = {i["id"] for i in doc["incidents"]}
    assert {f["sse_forensics"]["incident_id"] for f in doc["findings"]} == incident_ids
    (proxy,) = [i for i in doc["incidents"] if len(i["connections"]) == 2]
    assert proxy["findings"] == 5 and proxy["opened_by"] == "POST tools/call id=1"


def test_jsonl_and_ocsf_carry_the_incident_id() -> None:
    result = _proxy()
    (incident,) = group_incidents(result.findings)
    lines = [json.loads(x) for x in findings_jsonl(result).splitlines()]
    records = [json.loads(x) for x in findings_ocsf(result.findings).splitlines()]
    assert {x["sse_forensics"]["incident_id"] for x in lines} == {incident.fingerprint}
    assert {r["metadata"]["correlation_uid"] for r in records} == {incident.fingerprint}
    # Finding ids stay one per finding.
    assert len({r["metadata"]["uid"] for r in records}) == len(records) == 5


def _cli(*args: str) -> subprocess.CompletedProcess[bytes]:
    return _in_process(*args, columns=120)


def test_terminal_prints_the_incident_summary() -> None:
    out = _cli("scan", str(PROXY)).stdout.decode()
    assert "Incidents: 1 lost range in 1 session, 5 findings" in out
    assert "Verdicts: silent_corruption 1 " in out  # one incident, not five findings


def test_html_report_lists_incidents(tmp_path: Path) -> None:
    out = tmp_path / "r.html"
    assert _cli("report", str(PROXY), "-o", str(out)).returncode in (0, 1)
    page = out.read_text()
    (incident,) = group_incidents(_proxy().findings)
    assert "Incidents: 1 lost range in 1 session, 5 findings" in page
    assert "Incidents, most severe first" in page and incident.fingerprint in page


# -- tickets ---------------------------------------------------------------------------------


def test_tickets_format_writes_one_ticket_per_incident() -> None:
    proc = _cli("scan", str(PROXY), str(ODD_ID), "--format", "tickets")
    assert proc.returncode == 1  # silent corruption, as for any other format
    tickets = [json.loads(x) for x in proc.stdout.decode().splitlines()]
    ids = {i.fingerprint for i in _incidents(PROXY, ODD_ID)}
    assert {t["fingerprint"] for t in tickets} == ids and len(tickets) == 3
    (proxy,) = [t for t in tickets if t["session_id"] == "537b38fe99cec5ccfbb855cc49800dc6"]
    assert set(proxy) >= {"title", "body", "labels", "severity", "fingerprint"}
    assert proxy["title"] == (
        "silent_corruption · session 537b38fe99cec5ccfbb855cc49800dc6 · events 8–12 (5) · "
        "server 10.0.0.2:8000 via proxy 10.0.0.5:8080"
    )
    assert proxy["severity"] == "high"
    assert {"sse-forensics", "silent_corruption", "rule:missing-stream-gap"} <= set(proxy["labels"])
    body = proxy["body"]
    assert "`missing-stream-gap` ×2" in body and "### Evidence" in body
    assert "| 10.0.0.11:50110 | 10.0.0.5:8080 |" in body
    assert f"| {PROXY} | frame 45 |" in body
    session = "537b38fe99cec5ccfbb855cc49800dc6"
    command = f"sse-forensics timeline {PROXY} {ODD_ID} --session {session}"
    assert f"```sh\n{command}\n```" in body
    assert "### How to fix it" in body and proxy["fingerprint"] in body
    (violation,) = [t for t in tickets if t["classification"] == "contract_violation"]
    assert "id-scheme-outlier" in violation["title"] and "events" not in violation["title"]


def test_a_rescan_gives_the_same_tickets() -> None:
    a = tickets_jsonl(scan_paths([str(RESUME_JUMP), str(LIVE_JUMP)]))
    b = tickets_jsonl(scan_paths([str(RESUME_JUMP), str(LIVE_JUMP)]))
    assert a == b and a.count(b"\n") == 2


def test_tickets_escape_captured_bytes() -> None:
    result = scan_paths([str(HOSTILE)])
    (incident,) = group_incidents(result.findings)
    t = ticket(incident, result.paths)
    assert "\x1b" not in t["title"] and "\n" not in t["title"]
    assert "\x1b" not in t["body"]
    # No captured byte becomes markup outside the code block: < [ ] ` | are escaped.
    before, code = t["body"].split("```sh\n", 1)
    after = code.split("```", 1)[1]
    assert "<script>" not in before + after
    assert r"\<script\>alert(1)\</script\>" in before
    # The timeline command is one shell word per argument, the session ID exactly.
    fenced = t["body"].split("```sh\n", 1)[1].split("\n", 1)[0]
    assert fenced.startswith("sse-forensics timeline ")
    session = incident.session_id
    if all(ch.isprintable() for ch in session):
        assert shlex.split(fenced)[-1] == session
    else:  # ANSI-C quoting ($'…'), which bash reads back as the session ID
        bash = subprocess.run(
            ["bash", "-c", f"printf %s {fenced.split('--session ', 1)[1]}"],
            capture_output=True,
            check=True,
        )
        assert bash.stdout.decode("utf-8", "surrogateescape") == session


# -- facts behind incidents ------------------------------------------------------------------


def test_cross_session_replay_names_the_session_the_events_belong_to() -> None:
    capture = SAMPLES / "replay-crossed-sessions.pcap"
    for buckets in (1, 4):  # judged in one partition, or with the owner in another
        findings = scan_paths([str(capture)], buckets=buckets).findings
        (finding,) = [f for f in findings if f.rule == "replay-crossed-sessions"]
        assert finding.session_id == "replay-crossed-sessions-0002"
        assert "ANOTHER session, replay-crossed-sessions-0001 " in finding.message
        assert any(
            e["what"].endswith("session replay-crossed-sessions-0001") for e in finding.evidence
        )


def test_a_live_gap_after_a_whole_replay_is_a_handoff_not_eviction() -> None:
    findings = scan_paths([str(HANDOFF)]).findings
    assert {f.rule for f in findings} == {"missing-stream-gap", "client-accepted-gap"}
    assert {f.cause for f in findings} == {"replay-handoff"}
    assert any(
        e["what"].startswith("replay began at 8, the successor") for e in findings[0].evidence
    )


def _crafted():
    return load_script("samples/crafted.py", "samples_crafted")


def test_a_live_gap_after_a_truncated_replay_is_not_a_handoff(tmp_path: Path) -> None:
    """The same handoff, but the replay skips 8: the server had lost events already, so
    the live gap is no handoff and the session is resumable-while-evicting."""
    crafted = _crafted()
    incident = crafted.Incident.of(12, "crafted-replay-handoff")
    capture = incident.capture(crafted.LINKTYPE_ETHERNET)
    conn = crafted._ethernet_connection(capture, incident)
    crafted._open_call(conn, incident)
    events = [crafted.chunk(e) for e in crafted.call_events(range(1, 21), 20)]
    crafted._stream_chunks(conn, events[:7])
    conn.close()
    client = incident.client(crafted.CLIENT_V4, connection=1)
    resume = crafted.TcpConnection(
        capture,
        crafted.ethernet(client, crafted.SERVER_V4),
        client,
        crafted.SERVER_V4,
        client_isn=1,
        server_isn=2,
    )
    resume.handshake()
    resume.send_data(crafted.CLIENT, crafted.resume_request(b"7", incident.session))
    resume.send_data(crafted.SERVER, incident.response_head() + b"".join(events[8:10]))
    crafted._stream_chunks(resume, [*events[11:], crafted.LAST_CHUNK])
    resume.close()
    path = tmp_path / "truncated.pcap"
    crafted.write_pcap(path, capture)
    findings = scan_paths([str(path)]).findings
    live = [f for f in findings if f.rule == "missing-stream-gap"]
    assert [(f.gap["first"], f.cause) for f in live] == [("11", "unknown")]
    assert "resumable-while-evicting" in {f.rule for f in findings}
