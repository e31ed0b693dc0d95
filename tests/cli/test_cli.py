"""The command line as a user meets it: exit codes, output formats, bad input, hostile bytes."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from conftest import SAMPLES
from support.cli import run as _in_process

CLEAN = SAMPLES / "clean-resume-int.pcap"
SILENT = SAMPLES / "live-jump-unsignalled.pcap"
SIGNALLED = SAMPLES / "live-gap-signalled.pcap"
LOSS = SAMPLES / "crafted-capture-loss.pcap"
HOSTILE = SAMPLES / "crafted-hostile-bytes.pcap"


def run(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[bytes]:
    return _in_process(*args, columns=120, cwd=cwd)


def test_version_and_help() -> None:
    assert run("--version").stdout.decode().startswith("sse-forensics ")
    out = run("--help").stdout.decode()
    assert "scan" in out and "timeline" in out and "rules" in out


@pytest.mark.parametrize(
    ("capture", "fail_on", "code"),
    [
        (CLEAN, "silent_corruption", 0),
        (SILENT, "silent_corruption", 1),
        (SILENT, "never", 0),
        (SIGNALLED, "silent_corruption", 0),
        (SIGNALLED, "expected_gap", 1),
        (LOSS, "silent_corruption", 0),
        (LOSS, "indeterminate", 1),
    ],
)
def test_exit_codes_follow_fail_on(capture: Path, fail_on: str, code: int) -> None:
    assert run("scan", str(capture), "--fail-on", fail_on, "--format", "jsonl").returncode == code


def test_jsonl_has_the_finding_fields() -> None:
    proc = run("scan", str(SILENT), "--format", "jsonl")
    findings = [json.loads(line) for line in proc.stdout.decode().splitlines()]
    (finding,) = [f for f in findings if f["rule"]["id"] == "missing-stream-gap"]
    for key in ("@timestamp", "ecs", "message", "event", "rule", "network", "sse_forensics"):
        assert key in finding
    assert {"id", "name", "description", "reference", "category", "ruleset"} <= set(finding["rule"])
    ours = finding["sse_forensics"]
    for key in ("classification", "severity", "session_id", "session_inferred", "stream"):
        assert key in ours
    assert ours["gap"] == {"first": "8", "last": "12", "count": 5}
    assert {"source", "frame", "ts", "what"} <= set(ours["evidence"][0])


def test_json_document_lists_inputs_sessions_findings_errors() -> None:
    doc = json.loads(run("scan", str(SAMPLES), "--format", "json").stdout)
    assert len(doc["inputs"]) >= 20
    assert doc["findings"] and doc["sessions"]
    assert any(
        e.get("frame") for e in doc["errors"]
    )  # the garbage chunk is reported with its frame


def test_not_a_capture_exits_2_with_one_line(tmp_path: Path) -> None:
    bogus = tmp_path / "notes.txt"
    bogus.write_text("this is not a capture\n")
    proc = run("scan", str(bogus))
    assert proc.returncode == 2
    err = proc.stderr.decode()
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert "notes.txt" in err
    assert run("scan", str(tmp_path / "missing.pcap")).returncode == 2


def test_truncated_capture_exits_3_and_says_where(tmp_path: Path) -> None:
    cut = tmp_path / "cut.pcap"
    data = SILENT.read_bytes()
    cut.write_bytes(data[: len(data) - 7])
    proc = run("scan", str(cut), "--format", "json", "--fail-on", "never")
    assert proc.returncode == 3
    doc = json.loads(proc.stdout)
    assert any(e["source"] == str(cut) and e.get("frame") for e in doc["errors"])


def test_hostile_bytes_never_reach_the_terminal_raw() -> None:
    for args in (["scan", str(HOSTILE)], ["timeline", str(HOSTILE)]):
        proc = run(*args)
        out = proc.stdout + proc.stderr
        assert b"\x1b" not in out
        assert b"Traceback" not in out
        assert b"[bold red]" in out or args[0] == "timeline"  # markup printed literally
    doc = json.loads(run("scan", str(HOSTILE), "--format", "json").stdout)
    session = doc["findings"][0]["sse_forensics"]["session_id"]
    assert "\x1b" in session and "<script>" in session  # JSON keeps the real bytes, escaped


def test_timeline_jsonl_lists_requests_responses_and_events() -> None:
    proc = run("timeline", str(CLEAN), "--format", "jsonl")
    records = [json.loads(line) for line in proc.stdout.decode().splitlines()]
    types = {r["type"] for r in records}
    assert {"request", "response", "event"} <= types
    events = [r for r in records if r["type"] == "event" and r["kind"] == "data"]
    assert [r["ts"] for r in records] == sorted(r["ts"] for r in records)
    assert all(r["session_id"] and r["stream"] and r["frame"] for r in events)
    resume = next(r for r in records if r["type"] == "request" and r["last_event_id"])
    assert resume["last_event_id"] == "7"


def test_rules_list_and_show() -> None:
    listing = run("rules", "list").stdout.decode()
    for rule in ("silent-resume-jump", "missing-stream-gap", "resume-in-gap-2xx"):
        assert rule in listing
    shown = run("rules", "show", "missing-stream-gap").stdout.decode()
    assert "Rationale" in shown and "Remediation" in shown and "stream-gap" in shown
    assert run("rules", "show", "no-such-rule").returncode == 2


def test_bad_user_rule_is_reported_and_others_still_run(tmp_path: Path) -> None:
    (tmp_path / "broken.toml").write_text('id = "broken"\ntitle = "x"\n')
    (tmp_path / "bad-sql.toml").write_text(
        'id="bad-sql"\ntitle="t"\nseverity="low"\ntable="gaps"\nwhere="location = = 1"\n'
        'classification="expected_gap"\nmessage="m"\nrationale="r"\nremediation="x"\n'
    )
    (tmp_path / "every-gap.toml").write_text(
        'id="every-gap"\ntitle="t"\nseverity="low"\ntable="gaps"\nwhere="count >= 1"\n'
        'classification="expected_gap"\nmessage="gap {first}..{last}"\n'
        'rationale="r"\nremediation="x"\n'
    )
    proc = run("scan", str(SILENT), "--rules", str(tmp_path), "--format", "json")
    doc = json.loads(proc.stdout)
    assert {f["rule"]["id"] for f in doc["findings"]} == {
        "missing-stream-gap",
        "client-accepted-gap",
        "resumable-while-evicting",
        "every-gap",
    }
    errors = " ".join(doc["rule_errors"])
    assert "broken.toml" in errors and "bad-sql.toml" in errors


def test_usage_errors_exit_2() -> None:
    assert run("scan", str(CLEAN), "--format", "xml").returncode == 2
    assert run("scan", str(CLEAN), "--prefixed-regex", "(unclosed").returncode == 2


ACCESS_FORMAT = (
    'nginx:$remote_addr - $remote_user [$time_local] "$request" $status $body_bytes_sent '
    '"$http_referer" "$http_user_agent" "$http_last_event_id" "$sent_http_mcp_session_id" '
    "$request_time"
)


def test_machine_formats_list_the_first_unjudged_on_stderr_and_count_the_rest(
    tmp_path: Path,
) -> None:
    """An access log alone shows resumes but no event IDs: each resume is unjudged. On
    stderr (stdout holds the JSONL findings) the first 20 are listed, the rest counted;
    ``--format json`` still lists every one."""
    log = tmp_path / "access.log"
    log.write_text(
        "".join(
            f'10.0.0.{n} - - [01/Dec/2026:00:00:{n:02d} +0000] "GET /mcp HTTP/1.1" 200 4680 '
            f'"-" "node" "{10 + n}" "session{n:04d}" 0.036\n'
            for n in range(25)
        )
    )
    jsonl = run("scan", str(log), "--log-format", ACCESS_FORMAT, "--format", "jsonl")
    doc = run("scan", str(log), "--log-format", ACCESS_FORMAT, "--format", "json")
    assert jsonl.returncode == doc.returncode == 4
    items = json.loads(doc.stdout)["could_not_judge"]["items"]
    assert len(items) == 25
    # A log's place is a line, never called a frame.
    assert [(i["line"], i["frame"]) for i in items[:3]] == [(1, None), (2, None), (3, None)]
    err = jsonl.stderr.decode()
    listed = [line for line in err.splitlines() if "Last-Event-ID" in line]
    assert len(listed) == 20 and "session0000" in listed[0] and "session0019" in err
    assert listed[0].endswith("(line 1)")
    assert "session0020" not in err and "… and 5 more" in err
    assert "Could not judge all of 25" in err
