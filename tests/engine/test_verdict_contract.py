"""Verdicts a responder can trust (issue 12, "Contract", "ID schemes", "Capture loss"):

- a ``backpressure-disconnect`` is no gap signal: a resume from the W it names that does not
  continue at W's successor is silent corruption;
- a contract violation that lost nothing is ``contract_violation``, never with a gap;
- ID schemes are judged per logical stream, and an ID that does not fit is an outlier that
  never hides the gaps around it;
- what could not be seen is never "all clear": exit 4 and a list of what was not judged;
  ``indeterminate`` findings are worded as capture loss.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from types import ModuleType

import pytest
from conftest import SAMPLES
from support.cli import run as _in_process
from support.hand_capture import HandCapture, progress_event, silent_only, uuids
from support.scripts import load_script

from sse_forensics.engine.evaluate import evaluate_rule
from sse_forensics.engine.registry import load_rules
from sse_forensics.engine.rule import load_rule
from sse_forensics.facts.gaps import GapRecord
from sse_forensics.facts.ids import detect_scheme, follows
from sse_forensics.facts.tables import frame
from sse_forensics.pipeline import scan_paths
from sse_forensics.reassembly.exchange import BodyHole
from sse_forensics.reassembly.stream import MissingSpan
from sse_forensics.verdicts import (
    CAPTURE_ADVICE,
    CLASSIFICATIONS,
    classification_rank,
    severity_for,
)

BD = 'event: backpressure-disconnect\ndata: {{"last_written_id": {w}}}\n\n'


def _crafted() -> ModuleType:
    return load_script("samples/crafted.py", "samples_crafted")


crafted = _crafted()


def run(*args: str) -> subprocess.CompletedProcess[bytes]:
    return _in_process(*args, columns=120)


# -- 1a. backpressure-disconnect signals no gap ---------------------------------------------


def test_resume_from_w_that_skips_is_silent_corruption() -> None:
    """W = 3 named, the resume from 3 is answered 200 from 6: 4 and 5 were discarded and
    nothing said so (docs/profile.md, "What counts as what": a backpressure-disconnect
    promises W's successor)."""
    cap = HandCapture()
    cap.add("".join(progress_event(str(i)) for i in (1, 2, 3)) + BD.format(w=3), method="POST")
    cap.add(progress_event("6") + progress_event("7"), leid="3")
    _, found = cap.findings()
    assert ("silent-resume-jump", "silent_corruption", "4", "5") in found
    assert ("resume-in-gap-2xx", "silent_corruption", "4", "5") in found
    assert not {f for f in found if f[1] == "expected_gap"}


def test_resume_from_w_that_continues_at_its_successor_is_clean() -> None:
    cap = HandCapture()
    cap.add("".join(progress_event(str(i)) for i in (1, 2, 3)) + BD.format(w=3), method="POST")
    cap.add(progress_event("4") + progress_event("5"), leid="3")
    _, found = cap.findings()
    assert found == set()


def test_only_a_resume_gap_or_410_makes_the_loss_after_w_expected() -> None:
    signalled = HandCapture()
    signalled.add(
        "".join(progress_event(str(i)) for i in (1, 2, 3)) + BD.format(w=3), method="POST"
    )
    replay = 'event: resume-gap\ndata: {"requested": 3, "oldest_retained": 6}\n\n'
    signalled.add(replay + progress_event("6") + progress_event("7"), leid="3")
    _, found = signalled.findings()
    assert not silent_only(found)
    assert ("resume-gap-signalled", "expected_gap", "4", "5") in found
    refused = HandCapture()
    refused.add("".join(progress_event(str(i)) for i in (1, 2, 3)) + BD.format(w=3), method="POST")
    refused.add("", leid="3", status=410, ctype="text/plain")
    _, found = refused.findings()
    assert ("resume-refused-410", "expected_gap", "4", None) in found


def test_backpressure_sample_is_silent_corruption_and_fails_the_run() -> None:
    capture = SAMPLES / "backpressure-disconnect-resume.pcap"
    got = {
        (f.rule, f.classification, f.gap["first"], f.gap["last"])
        for f in scan_paths([str(capture)]).findings
    }
    assert got == {
        ("silent-resume-jump", "silent_corruption", "8", "12"),
        ("resume-in-gap-2xx", "silent_corruption", "8", "12"),
        ("client-accepted-gap", "silent_corruption", "8", "12"),
    }
    assert run("scan", str(capture), "-q", "--format", "table").returncode == 1
    assert load_rules().get("backpressure-gap-signalled") is None


# -- 1b. contract_violation ----------------------------------------------------------------


def test_contract_violation_sits_between_expected_gap_and_indeterminate() -> None:
    assert CLASSIFICATIONS == (
        "expected_gap",
        "contract_violation",
        "indeterminate",
        "silent_corruption",
    )
    assert classification_rank("contract_violation") > classification_rank("expected_gap")


def test_stateless_era_resume_with_the_right_continuation_lost_nothing() -> None:
    capture = SAMPLES / "resume-in-stateless-era.pcap"
    (finding,) = scan_paths([str(capture)]).findings
    assert finding.rule == "resume-in-stateless-era"
    assert finding.classification == "contract_violation"
    assert finding.gap == {"first": None, "last": None, "count": None}
    assert "contract violation, not a loss" in finding.message
    # Not a loss: the default run passes; --fail-on contract_violation selects it.
    assert run("scan", str(capture), "-q").returncode == 0
    assert run("scan", str(capture), "-q", "--fail-on", "contract_violation").returncode == 1
    assert run("scan", str(capture), "-q", "--fail-on", "indeterminate").returncode == 0


def test_stateless_era_resume_that_skips_is_both_a_violation_and_a_loss() -> None:
    init = (
        b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2026-07-28"}}'
    )
    answer = '{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2026-07-28"}}'
    cap = HandCapture()
    ex = cap.add("", method="POST", request_body=init, ctype="application/json")
    ex.response_body = bytearray(answer.encode())
    cap.add("".join(progress_event(str(i)) for i in (1, 2, 3)), method="POST")
    cap.add(progress_event("6"), leid="3")
    _, found = cap.findings()
    assert ("resume-in-stateless-era", "contract_violation", None, None) in found
    assert ("silent-resume-jump", "silent_corruption", "4", "5") in found


def test_a_contract_violation_never_carries_a_gap(tmp_path: Path) -> None:
    """Whatever columns the rule's table holds, a contract_violation finding names no gap."""
    (tmp_path / "cv.toml").write_text(
        'id="cv"\ntitle="t"\nseverity="low"\ntable="gaps"\nwhere="count >= 1"\n'
        'classification="contract_violation"\nmessage="m {first}"\nrationale="r"\n'
        'remediation="x"\n'
    )
    rule = load_rule(tmp_path / "cv.toml")
    gaps = frame("gaps", [{"first": "8", "last": "12", "count": 5, "session_id": "S"}])
    (finding,) = evaluate_rule(rule, gaps)
    assert finding.classification == "contract_violation"
    assert finding.gap == {"first": None, "last": None, "count": None}


def test_no_packaged_rule_gives_a_constant_loss_verdict_to_a_stateless_resume() -> None:
    """Checked rule by rule (issue 12): the only era rule is a contract violation."""
    rule = load_rules().get("resume-in-stateless-era")
    assert rule is not None and rule.classification == "contract_violation"


def test_a_reconnect_loop_that_recovers_lost_nothing() -> None:
    """Three empty 200 answers to Last-Event-ID 3, then a fourth that replays 4 and 5: the
    loop broke the contract, but the client got every event (issue 12: "check every rule
    for the same confusion")."""
    recovered = HandCapture()
    recovered.add("".join(progress_event(str(i)) for i in (1, 2, 3)), method="POST")
    for _ in range(3):
        recovered.add("", leid="3")
    recovered.add(progress_event("4") + progress_event("5"), leid="3")
    facts, found = recovered.findings()
    assert found == {("resume-storm", "contract_violation", None, None)}
    assert facts.tables["resumes"]["successor_delivered_later"].to_list() == [
        True,
        True,
        True,
        False,
    ]
    stuck = HandCapture()
    stuck.add("".join(progress_event(str(i)) for i in (1, 2, 3)), method="POST")
    for _ in range(3):
        stuck.add("", leid="3")
    _, found = stuck.findings()
    assert found == {("resume-storm", "silent_corruption", "4", None)}


# -- 2. ID schemes per stream; outliers ----------------------------------------------------


def test_one_odd_id_does_not_hide_the_gap_around_it() -> None:
    capture = SAMPLES / "crafted-odd-id-live-jump.pcap"
    result = scan_paths([str(capture)])
    got = {(f.rule, f.classification, f.gap["first"], f.gap["last"]) for f in result.findings}
    assert ("missing-stream-gap", "silent_corruption", "8", "12") in got
    assert ("id-scheme-outlier", "contract_violation", None, None) in got
    (outlier,) = [f for f in result.findings if f.rule == "id-scheme-outlier"]
    assert "prime-7f3a" in outlier.message and outlier.id_scheme == "int"
    assert any(e.get("frame") and "prime-7f3a" in e["what"] for e in outlier.evidence)
    assert result.tables["sessions"]["id_scheme"].to_list() == ["int"]


def test_each_stream_of_a_session_is_read_by_its_own_scheme() -> None:
    """A session whose tools/call stream counts (and jumps) while its GET stream uses UUIDs:
    the UUIDs do not make the counter stream opaque, and the session says `mixed`."""
    cap = HandCapture()
    cap.add("".join(progress_event(str(i)) for i in (1, 2, 3, 7, 8)), method="POST")
    cap.add("".join(progress_event(u) for u in uuids(4)), method="GET")
    facts, found = cap.findings()
    assert ("missing-stream-gap", "silent_corruption", "4", "6") in found
    assert facts.tables["sessions"]["id_scheme"].to_list() == ["mixed"]
    schemes = dict(
        facts.tables["streams"].select("method", "id_scheme").iter_rows()  # type: ignore[attr-defined]
    )
    assert schemes == {"POST": "int", "GET": "opaque"}
    assert not [f for f in found if f[0] == "id-scheme-outlier"]  # a whole stream is no outlier


def test_a_resume_from_an_outlier_id_is_judged_by_observed_order() -> None:
    cap = HandCapture()
    cap.add("".join(progress_event(i) for i in ("1", "2", "x9", "3", "4", "5")), method="POST")
    cap.add(progress_event("5"), leid="x9")  # the replay should have started at 3
    _, found = cap.findings()
    assert ("silent-resume-jump", "silent_corruption", "3", "4") in found


def test_opaque_ids_that_happen_to_be_digits_stay_opaque() -> None:
    """Hex IDs, a few of them all digits: far from the three in four an int stream needs."""
    ids = [f"{n:08x}" for n in range(0x1234ABCD, 0x1234ABCD + 40 * 977, 977)]
    digits = sum(i.isdigit() for i in ids)
    assert detect_scheme([ids]).scheme == "opaque" and digits < len(ids) // 2
    assert detect_scheme([["1", "2", "prime", "3"]]).scheme == "int"
    assert detect_scheme([["1", "x"]]).scheme == "opaque"  # one of two is no scheme
    assert follows(1, 1) and follows(8, 6) and not follows(8, 5) and not follows(2, 1)


SCHEME_CASES = {
    "int": [str(n) for n in range(1, 9)],
    "int, one outlier": ["prime", *(str(n) for n in range(1, 8))],
    "int, two of eight odd": ["a", "b", *(str(n) for n in range(1, 7))],
    "three of eight odd": ["a", "b", "c", *(str(n) for n in range(1, 6))],
    "prefixed": [f"s1_{n}" for n in range(1, 9)],
    "prefixed, one outlier": ["p", *(f"s1_{n}" for n in range(1, 8))],
    "counter first": [f"{n}/7" for n in range(1, 9)],
    "uuid": uuids(8),
    "typescript": [f"abc_{1700000000000 + 7 * n}_k{n}x" for n in range(8)],
}


@pytest.mark.parametrize("name", list(SCHEME_CASES))
def test_the_vectorised_detection_agrees_with_the_reference(name: str) -> None:
    ids = SCHEME_CASES[name]
    cap = HandCapture()
    cap.add("".join(progress_event(i) for i in ids), method="POST")
    facts, _ = cap.findings()
    (scheme,) = facts.tables["streams"]["id_scheme"].to_list()
    assert scheme == detect_scheme([ids]).scheme, name


# -- 3. capture loss -----------------------------------------------------------------------


def _snaplen_everything(path: Path) -> Path:
    """Snap length 200 and every event longer than that: no event can be read whole."""
    incident = crafted.Incident.of(40, path.stem)
    capture = incident.capture(crafted.LINKTYPE_ETHERNET, snaplen=200)
    conn = crafted._ethernet_connection(capture, incident)
    crafted._open_call(conn, incident)
    pad = b"x" * 300
    events = [crafted.sse_event(b"%d" % n, crafted.progress(n, 20, pad)) for n in range(1, 21)]
    crafted._stream_chunks(conn, [crafted.chunk(e) for e in events] + [crafted.LAST_CHUNK])
    conn.close()
    crafted.write_pcap(path, capture)
    return path


def _no_http(path: Path) -> Path:
    incident = crafted.Incident.of(41, path.stem)
    capture = incident.capture(crafted.LINKTYPE_ETHERNET)
    conn = crafted._ethernet_connection(capture, incident)
    conn.handshake()
    conn.send_data(crafted.CLIENT, b"SSH-2.0-OpenSSH_9.6\r\n")
    conn.send_data(crafted.SERVER, b"SSH-2.0-OpenSSH_9.6\r\n" + bytes(range(256)))
    conn.close()
    crafted.write_pcap(path, capture)
    return path


def _lost_tail(path: Path) -> Path:
    """Events 1-10 seen, then the capture misses the segment with 11-20 (ACKed)."""
    incident = crafted.Incident.of(42, path.stem)
    capture = incident.capture(crafted.LINKTYPE_ETHERNET)
    conn = crafted._ethernet_connection(capture, incident)
    crafted._open_call(conn, incident)
    events = [crafted.chunk(e) for e in crafted.call_events(range(1, 21), 20)]
    crafted._stream_chunks(conn, events[:10])
    conn.send(crafted.SERVER, "PA", b"".join(events[10:]), captured=False)
    conn.send(crafted.CLIENT, "A")
    crafted._stream_chunks(conn, [crafted.LAST_CHUNK])
    conn.close()
    crafted.write_pcap(path, capture)
    return path


def _could_not_judge(path: Path) -> tuple[int, dict, str]:
    doc = run("scan", str(path), "--format", "json")
    table = run("scan", str(path), "-q")
    assert doc.returncode == table.returncode
    return doc.returncode, json.loads(doc.stdout)["could_not_judge"], table.stdout.decode()


def test_a_capture_with_no_readable_event_is_not_all_clear(tmp_path: Path) -> None:
    code, cov, text = _could_not_judge(_snaplen_everything(tmp_path / "snap200.pcap"))
    assert code == 4
    assert cov["nothing_judged"] is True
    assert "No findings" not in text and "Could not judge" in text
    scopes = {item["scope"] for item in cov["items"]}
    assert "stream" in scopes and "input" in scopes  # the stream, and the capture's loss
    (stream,) = [item for item in cov["items"] if item["scope"] == "stream"]
    assert stream["missing_bytes"] > 0 and stream["frame"] and "snaplen" in stream["why"]


def test_an_empty_directory_is_not_all_clear(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    code, cov, text = _could_not_judge(tmp_path / "empty")
    assert code == 4 and cov["nothing_judged"]
    assert "no capture or log file" in text


def test_a_capture_with_no_http_is_not_all_clear(tmp_path: Path) -> None:
    code, cov, text = _could_not_judge(_no_http(tmp_path / "ssh.pcap"))
    assert code == 4 and cov["nothing_judged"]
    assert any("no HTTP/1.1 exchange" in item["why"] for item in cov["items"])
    # Read errors are still listed; "could not judge" wins over exit 3.
    assert "input problem" in text


def test_a_stream_whose_tail_the_capture_lacks_is_listed_and_exits_4(tmp_path: Path) -> None:
    code, cov, text = _could_not_judge(_lost_tail(tmp_path / "tail.pcap"))
    assert code == 4 and not cov["nothing_judged"]
    (item,) = [i for i in cov["items"] if i["scope"] == "stream"]
    assert "after event 10" in item["why"]
    assert "No lost events were detected in what could be judged" in text


def test_complete_captures_still_exit_0_and_say_so() -> None:
    for name in ("clean-live-int.pcap", "crafted-midstream-pickup.pcap"):
        proc = run("scan", str(SAMPLES / name), "-q")
        assert proc.returncode == 0, name
        assert "No findings: no lost events were detected." in proc.stdout.decode()


def test_indeterminate_findings_are_worded_as_capture_loss() -> None:
    result = scan_paths([str(SAMPLES / "crafted-capture-loss.pcap")])
    rules = load_rules()
    for f in result.findings:
        assert f.classification == "indeterminate"
        assert f.severity in ("info", "low"), f.rule  # follows the verdict, not the rule
        assert "IDs 8–9 not seen" in f.message
        assert "278 bytes of this stretch are missing from the capture" in f.message
        assert "never reached the client" not in f.message
        rule = rules.get(f.rule)
        assert rule is not None and rule.remediation_for(f.classification) == CAPTURE_ADVICE
        spans = [e for e in f.evidence if e["what"].startswith("capture lacks bytes")]
        assert len(spans) == 1


def test_every_rule_that_can_be_indeterminate_has_capture_loss_wording() -> None:
    """The wording of why the evidence is incomplete comes from the fact row's
    ``incomplete`` (capture loss: "N bytes of this stretch are missing from the capture",
    checked on a sample above; issue 16 adds inconsistent retransmissions and caps)."""
    for rule in load_rules().rules:
        if rule.classification_from is not None:
            assert rule.indeterminate_message, rule.id
            assert "{incomplete}" in rule.indeterminate_message, rule.id


def test_severity_follows_the_verdict() -> None:
    assert severity_for("high", "indeterminate") == "low"
    assert severity_for("info", "indeterminate") == "info"
    assert severity_for("high", "silent_corruption") == "high"


def test_one_missing_span_is_cited_once() -> None:
    """A span that reaches the stretch twice (two body holes) is one piece of evidence."""
    cap = HandCapture()
    cap.add("".join(progress_event(str(i)) for i in (1, 2, 5)), method="POST")
    facts, _ = cap.findings()
    (stream,) = facts.streams
    span = MissingSpan("server", 100, 171, "snaplen")
    gap = GapRecord("live", stream, "id-jump", "3", "4", 2)
    gap.holes = [BodyHole(10, span), BodyHole(20, span), BodyHole(30, span)]
    cited = [e for e in gap.evidence() if e["what"].startswith("capture lacks bytes")]
    assert len(cited) == 1 and gap.missing_bytes == 171


@pytest.mark.parametrize("fail_on", ["never", "silent_corruption"])
def test_could_not_judge_ignores_fail_on(tmp_path: Path, fail_on: str) -> None:
    (tmp_path / "empty").mkdir()
    assert run("scan", str(tmp_path / "empty"), "-q", "--fail-on", fail_on).returncode == 4


def test_the_html_report_never_says_all_clear_about_what_it_could_not_see(
    tmp_path: Path,
) -> None:
    from sse_forensics.report.html import render_report

    rules = load_rules()
    capture = _snaplen_everything(tmp_path / "snap200.pcap")
    result = scan_paths([str(capture)], rules=rules, keep_records=True)
    page = render_report(result, rules)
    assert "No findings: no lost events were detected." not in page
    assert "Could not judge" in page and "snaplen" in page
