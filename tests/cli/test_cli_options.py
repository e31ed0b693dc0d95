"""Options a user will try on scan, timeline and report: filters (--session prefix,
--since/--until, --host/--port), -o FILE for every format, options that cannot apply, and
what --help and rules list look like (docs/README.md, "Commands")."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import SAMPLES
from support.cli import run_text as _in_process

from sse_forensics.report.selection import (
    Selection,
    SelectionError,
    parse_time,
    resolve_session,
)

SILENT = SAMPLES / "live-jump-unsignalled.pcap"
REFUSED = SAMPLES / "resume-410.pcap"
CROSSED = SAMPLES / "replay-crossed-sessions.pcap"
OPAQUE = SAMPLES / "opaque-resume-jump.pcap"


def run(*args: str, columns: int = 120) -> subprocess.CompletedProcess[str]:
    return _in_process(*args, columns=columns)


def rule_ids(jsonl: str) -> list[str]:
    return [json.loads(line)["rule"]["id"] for line in jsonl.splitlines()]


# -- --session: any unique prefix ---------------------------------------------------------


def test_session_prefix_resolves_exact_unique_and_refuses_ambiguous() -> None:
    ids = ["replay-crossed-sessions-0001", "replay-crossed-sessions-0002", "abc"]
    assert resolve_session("abc", ids) == "abc"
    assert resolve_session("replay-crossed-sessions-0002", ids).endswith("0002")
    assert resolve_session("a", ids) == "abc"
    with pytest.raises(SelectionError, match="matches 2 sessions"):
        resolve_session("replay", ids)
    with pytest.raises(SelectionError, match="matches no session"):
        resolve_session("zzz", ids)


def test_scan_session_prefix_shows_only_that_session() -> None:
    both = run("scan", str(SILENT), str(REFUSED), "-f", "jsonl")
    one = run("scan", str(SILENT), str(REFUSED), "-f", "jsonl", "--session", "resume-4")
    sessions = {json.loads(x)["sse_forensics"]["session_id"] for x in one.stdout.splitlines()}
    assert sessions == {"resume-410-0001"}
    assert len(one.stdout.splitlines()) < len(both.stdout.splitlines())


def test_ambiguous_session_prefix_is_one_line_exit_2_naming_the_candidates() -> None:
    for command in ("scan", "timeline"):
        proc = run(command, str(CROSSED), "--session", "replay-crossed")
        assert proc.returncode == 2 and proc.stdout == ""
        assert proc.stderr.count("\n") == 1
        assert "replay-crossed-sessions-0001" in proc.stderr
        assert "replay-crossed-sessions-0002" in proc.stderr


def test_timeline_takes_a_session_prefix() -> None:
    proc = run("timeline", str(SILENT), str(REFUSED), "--session", "resume-4")
    titles = [line for line in proc.stdout.splitlines() if line.startswith("session ")]
    assert proc.returncode == 0 and len(titles) == 1
    assert titles[0].startswith("session resume-410-0001")


# -- --since/--until, --host/--port -------------------------------------------------------


def test_time_parsing_reads_epoch_and_iso_8601_as_utc() -> None:
    assert parse_time("1796010152.5") == 1796010152.5
    assert parse_time("2026-11-30T03:42:41Z") == parse_time("2026-11-30 03:42:41")
    assert parse_time("2026-11-30T04:42:41+01:00") == parse_time("2026-11-30T03:42:41Z")
    with pytest.raises(ValueError, match="not a time"):
        parse_time("yesterday")


def test_time_and_endpoint_filters_select_findings() -> None:
    everything = rule_ids(run("scan", str(SILENT), "-f", "jsonl").stdout)
    assert everything
    after = run("scan", str(SILENT), "-f", "jsonl", "--since", "2099-01-01")
    assert after.stdout == "" and after.returncode == 0  # nothing selected, nothing failed
    around = run(
        "scan", str(SILENT), "-f", "jsonl", "--since", "2020-01-01", "--until", "2099-01-01"
    )
    assert rule_ids(around.stdout) == everything
    assert rule_ids(run("scan", str(SILENT), "-f", "jsonl", "--host", "127.0.0.1").stdout)
    assert run("scan", str(SILENT), "-f", "jsonl", "--host", "192.0.2.1").stdout == ""
    assert run("scan", str(SILENT), "-f", "jsonl", "--port", "1").stdout == ""


def test_selection_keeps_findings_without_time_only_when_no_time_is_asked() -> None:
    assert Selection().in_time(None)
    assert not Selection(since=1.0).in_time(None)
    assert Selection(port=80).on_endpoints(("10.0.0.1", 5000), ("10.0.0.2", 80))
    assert not Selection(host="10.0.0.9").on_endpoints(("10.0.0.1", 5000), (None, None))


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--since", "yesterday"], "--since"),
        (["--since", "2027-01-01", "--until", "2026-01-01"], "later than --until"),
        (["--host", "localhost"], "not an IP address"),
        (["--prefixed-regex", r"^(?P<seq>\d+)$"], "(?P<stream>...)"),
    ],
)
def test_filters_and_options_that_cannot_work_are_usage_errors(args, says) -> None:
    proc = run("scan", str(SILENT), *args)
    assert proc.returncode == 2 and says in proc.stderr and proc.stdout == ""


def test_forced_id_scheme_the_ids_do_not_follow_is_warned_about() -> None:
    proc = run("scan", str(OPAQUE), "--id-scheme", "int", "-f", "jsonl")
    assert "warning: --id-scheme int" in proc.stderr
    assert "warning" not in run("scan", str(OPAQUE), "-f", "jsonl").stderr


def test_options_with_nothing_to_apply_to_are_warned_about() -> None:
    assert "--log-format: no log" in run("scan", str(SILENT), "--log-format", "combined").stderr
    proc = run(
        "scan",
        str(SILENT),
        "--id-scheme",
        "opaque",
        "--prefixed-regex",
        r"(?P<stream>x)(?P<seq>\d)",
    )
    assert "--prefixed-regex has no effect" in proc.stderr


# -- -o FILE ------------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["table", "json", "jsonl", "ocsf"])
def test_scan_writes_every_format_to_a_file(tmp_path: Path, fmt: str) -> None:
    out = tmp_path / f"scan.{fmt}"
    proc = run("scan", str(SILENT), "-f", fmt, "-o", str(out))
    assert proc.returncode == 1 and proc.stdout == ""
    to_stdout = run("scan", str(SILENT), "-f", fmt).stdout
    if fmt == "table":
        assert "missing-stream-gap" in out.read_text() and "\x1b[" not in out.read_text()
    else:
        assert out.read_text() == to_stdout


@pytest.mark.parametrize("fmt", ["table", "jsonl"])
def test_timeline_writes_to_a_file(tmp_path: Path, fmt: str) -> None:
    out = tmp_path / f"timeline.{fmt}"
    proc = run("timeline", str(SILENT), "-f", fmt, "-o", str(out))
    assert proc.returncode == 0 and proc.stdout == ""
    assert "live-jump-unsignalled-0001" in out.read_text()


def test_output_file_that_cannot_be_written_is_exit_2(tmp_path: Path) -> None:
    proc = run("scan", str(SILENT), "-o", str(tmp_path / "no" / "such" / "dir.txt"))
    assert proc.returncode == 2 and "cannot write" in proc.stderr


def test_report_takes_the_filters(tmp_path: Path) -> None:
    out = tmp_path / "incident.html"
    proc = run("report", str(SILENT), str(REFUSED), "-o", str(out), "--session", "resume-4")
    assert proc.returncode == 1 and "resume-410-0001" in out.read_text()
    assert "live-jump-unsignalled-0001" not in proc.stderr
    assert "2 finding(s) in 1 session(s)" in proc.stderr


# -- what --help, --version and rules list look like ---------------------------------------


def test_version_and_help_load_no_analysis_libraries() -> None:
    code = (
        "import sys\n"
        "from sse_forensics.cli import main\n"
        "sys.argv = ['sse-forensics', '--version']\n"
        "main()\n"
        "assert not {'polars', 'rich', 'typer'} & set(sys.modules), sys.modules.keys()\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0 and proc.stdout.startswith("sse-forensics ")
    code = (
        "import sys\n"
        "from sse_forensics.cli import main\n"
        "sys.argv = ['sse-forensics', 'scan', '--help']\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "assert 'polars' not in sys.modules\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0 and "Usage: " in proc.stdout


@pytest.mark.parametrize("command", ["scan", "timeline", "report", "rules show"])
def test_help_names_arguments_in_words_not_python_types(command: str) -> None:
    text = run(*command.split(), "--help").stdout
    assert "{" not in text.split("\n", 1)[0]  # the usage line
    for python in ("<list[str]>", "<list[Path]>", "<str>", "<path>", "<int>"):
        assert python not in text
    if command != "rules show":
        assert "PATH..." in text and "--session ID" in text


def test_rules_list_fits_80_columns() -> None:
    text = run("rules", "list", columns=80).stdout
    assert all(len(line) <= 80 for line in text.splitlines())
    assert "missing-stream-gap" in text and "Live stream skipped" in text
    assert "…" not in text  # nothing cut: titles wrap


def test_repeated_input_problems_fold_into_one_line() -> None:
    from sse_forensics.errors import ReadError
    from sse_forensics.report.terminal import fold_errors

    errors = [ReadError("a.pcap", "bad chunk", frame=n) for n in range(12, 72)]
    errors += [ReadError("a.pcap", "other", frame=80), ReadError("b.log", "x", line=3)]
    errors += [ReadError("c.txt", "not read")]
    assert fold_errors(errors) == [
        "a.pcap frames 12–71: bad chunk ×60",
        "a.pcap frame 80: other",
        "b.log line 3: x",
        "c.txt: not read",
    ]
