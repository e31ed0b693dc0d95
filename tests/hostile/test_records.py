"""Issue 16, part A: no single record can abort a scan, and the log-side caps.

Each input holds one hostile record and one ordinary silent gap (events 8-12 dropped with
no ``stream-gap``, samples/hostile_records.py) that must still be reported; the hostile
record costs that record (an input problem, a cap hit, or a stream listed as not judged),
never the scan. Big inputs are made at test time, compactly (a streamed gzip, a sparse
file), or the cap is lowered with ``--limit``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import SAMPLES

from sse_forensics.cli.common import FailOn, exit_code
from sse_forensics.errors import ReadError
from sse_forensics.facts.config import AnalysisConfig
from sse_forensics.ingest.logs.files import iter_chunks
from sse_forensics.limits import CapHit, Limits, parse_limits
from sse_forensics.pipeline import LogOptions, scan_paths
from sse_forensics.result import ScanResult

sys.path.insert(0, str(SAMPLES))  # samples/ is not a package
import hostile_records as hostile
from support.cli import run  # in-process; the pasted-command test below spawns bash

ORDINARY = hostile.ORDINARY_SESSION
LOG_SESSION = hostile.LOG_SESSION


def scan(paths: list[Path], *limits: str, log_map: Path | None = None) -> ScanResult:
    config = AnalysisConfig(limits=parse_limits(list(limits)))
    logs = LogOptions(log_map=str(log_map) if log_map else None)
    return scan_paths([str(p) for p in paths], config, logs=logs)


def ordinary_gap_found(result: ScanResult, session: str = ORDINARY) -> bool:
    return any(
        f.rule == "missing-stream-gap"
        and f.session_id == session
        and (f.gap.get("first"), f.gap.get("last")) == ("8", "12")
        for f in result.findings
    )


def capture(tmp_path: Path, name: str) -> Path:
    return hostile.write_case(name, tmp_path / f"{name}.pcap")


def event_log(tmp_path: Path, name: str) -> Path:
    path = tmp_path / f"{name}.jsonl"
    path.write_bytes(hostile.event_log_case(name))
    return path


# -- over-long numbers: IDs, counters, Last-Event-ID, retry -----------------------------------


@pytest.mark.parametrize(
    ("name", "what"),
    [
        ("long-int-id", "event ID of 5000 characters"),
        ("long-prefixed-id", "event ID of 5002 characters"),
        ("int64-overflow-id", "event ID of 25 characters"),
        ("long-last-event-id-400", "Last-Event-ID of 5000 characters"),
        ("long-last-event-id-200", "Last-Event-ID of 5000 characters"),
    ],
)
def test_an_over_long_id_is_opaque_and_reported(tmp_path: Path, name: str, what: str) -> None:
    result = scan([capture(tmp_path, name)])
    assert ordinary_gap_found(result)
    (hit,) = result.caps
    assert hit.cap == "id_digits" and what in hit.cut and hit.frame
    # The hostile stream (1, 2, <long>, 3) lost nothing: no gap is invented around it.
    assert all(f.session_id == ORDINARY or not f.gap.get("first") for f in result.findings)


def test_a_retry_past_64_bits_is_noted(tmp_path: Path) -> None:
    result = scan([capture(tmp_path, "long-retry")])
    assert ordinary_gap_found(result)
    assert any("retry of more than 19 digits" in e.what and e.frame for e in result.errors)


def test_the_id_cap_is_configurable(tmp_path: Path) -> None:
    """With ``--limit id_digits=1`` the ordinary stream's ``12``-``20`` are opaque too: the
    jump 7 -> 13 is then no arithmetic gap, and the cap says so."""
    result = scan([capture(tmp_path, "long-int-id")], "id_digits=1")
    assert not ordinary_gap_found(result)
    assert {c.cap for c in result.caps} == {"id_digits"}


def test_report_and_timeline_survive_a_long_id(tmp_path: Path) -> None:
    path = capture(tmp_path, "long-last-event-id-200")
    proc = run("timeline", str(path), "--session", ORDINARY)
    assert proc.returncode == 3, proc.stderr  # input problem: the cap hit
    assert b"8\xe2\x80\x9312 dropped" in proc.stdout
    proc = run("report", str(path), "-o", str(tmp_path / "r.html"), "--quiet")
    assert proc.returncode == 1, proc.stderr
    assert b"Traceback" not in proc.stderr


@pytest.mark.parametrize("name", ["event-log-long-id", "event-log-long-id-number"])
def test_an_over_long_event_log_id_is_opaque(tmp_path: Path, name: str) -> None:
    result = scan([event_log(tmp_path, name)])
    assert ordinary_gap_found(result, LOG_SESSION)
    if name == "event-log-long-id":
        (hit,) = result.caps
        assert hit.cap == "id_digits" and hit.line == 45  # after the ordinary 42 lines, 1, 2


def test_a_log_map_index_of_5000_digits_is_a_usage_error(tmp_path: Path) -> None:
    log_map = tmp_path / "map.toml"
    log_map.write_text(f'[events]\nsession = "sid.{"9" * 5000}"\n')
    proc = run("scan", str(hostile.ORDINARY_EVENT_LOG), "--log-map", str(log_map))
    assert proc.returncode == 2
    assert b"list index of 5000 digits" in proc.stderr and b"Traceback" not in proc.stderr


# -- times -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name", ["pcapng-tsoffset-huge", "pcapng-tsoffset-negative", "pcapng-year-10000"]
)
def test_pcapng_times_outside_1970_to_9999(tmp_path: Path, name: str) -> None:
    path = tmp_path / f"{name}.pcapng"
    path.write_bytes(hostile.PCAPNG_CASES[name]())
    result = scan([path])
    assert ordinary_gap_found(result)
    # The other interface's connection is read too, with its frames' times replaced.
    assert sum(f.rule == "missing-stream-gap" for f in result.findings) == 2
    (problem,) = result.errors
    assert "outside the years 1970-9999 (interface 1" in problem.what
    if name == "pcapng-year-10000":  # every output prints times: none is past 9999 now
        for fmt in ("json", "ocsf"):
            assert run("scan", str(path), "-f", fmt).returncode == 1
        assert run("timeline", str(path)).returncode == 3
        assert run("report", str(path), "-o", str(tmp_path / "r.html"), "--quiet").returncode == 1


@pytest.mark.parametrize("name", ["event-log-year-10000", "event-log-type-change"])
def test_event_log_times_and_changing_types(tmp_path: Path, name: str) -> None:
    path = event_log(tmp_path, name)
    result = scan([path])
    assert ordinary_gap_found(result, LOG_SESSION)
    if name == "event-log-year-10000":
        assert [e.line for e in result.errors if "unreadable ts" in e.what] == [43, 44, 45]
    assert run("scan", str(path), "-f", "ocsf").returncode == 1
    assert run("report", str(path), "-o", str(tmp_path / "r.html"), "--quiet").returncode == 1


@pytest.mark.parametrize("scale", ["inf", "nan", "-1.0", "0.0"])
def test_a_log_map_scale_that_is_no_factor_is_refused(tmp_path: Path, scale: str) -> None:
    log_map = tmp_path / "map.toml"
    log_map.write_text(f'[events]\nts = {{ path = "ts", scale = {scale} }}\n')
    proc = run("scan", str(hostile.ORDINARY_EVENT_LOG), "--log-map", str(log_map))
    assert proc.returncode == 2
    assert b"scale must be a finite positive number" in proc.stderr


def test_a_log_map_scale_of_1e300_makes_times_unreadable(tmp_path: Path) -> None:
    """Every time past the year 9999: no line of the log fits the map, which is said."""
    log_map = tmp_path / "map.toml"
    log_map.write_text('[events]\nts = { path = "ts", scale = 1e300 }\n')
    proc = run("scan", str(hostile.ORDINARY_EVENT_LOG), "--log-map", str(log_map))
    assert proc.returncode == 2 and b"Traceback" not in proc.stderr
    assert b"unreadable ts" in proc.stderr


# -- what detection and judging must not skip ----------------------------------------------


@pytest.mark.parametrize("name", ["event-log-long-first-record", "event-log-nested-first-record"])
def test_an_event_log_with_a_hostile_first_record_is_read(tmp_path: Path, name: str) -> None:
    (tmp_path / "logs").mkdir()
    path = tmp_path / "logs" / "events.jsonl"
    path.write_bytes(hostile.event_log_case(name))
    result = scan([tmp_path / "logs"])  # in a directory: detected, not silently skipped
    assert result.inputs == [str(path)]
    assert ordinary_gap_found(result, LOG_SESSION)


def test_a_garbage_last_event_id_is_listed_as_not_judged(tmp_path: Path) -> None:
    result = scan([capture(tmp_path, "garbage-last-event-id")])
    assert ordinary_gap_found(result)
    from sse_forensics.coverage import coverage

    (item,) = coverage(result).items()
    assert item.session_id != ORDINARY and "'7\\rX-Injected: 1'" in item.why
    assert exit_code(result, FailOn.never) == 4
    # The same resume with a Last-Event-ID the capture saw is judged: a silent jump.
    plain = scan([capture(tmp_path, "plain-resume-jump")])
    assert any(f.rule == "silent-resume-jump" for f in plain.findings)


@pytest.mark.parametrize("name", ["session-nul", "session-non-ascii"])
def test_the_printed_timeline_command_finds_the_session(tmp_path: Path, name: str) -> None:
    path = capture(tmp_path, name)
    out = run("scan", str(path)).stdout.decode()
    (command,) = [
        line.strip() for line in out.splitlines() if "--session" in line and ORDINARY not in line
    ]
    # Pasted into bash as printed (sse-forensics being this checkout).
    shell = f'sse-forensics() {{ {sys.executable} -m sse_forensics "$@"; }}; {command}'
    proc = subprocess.run(
        ["bash", "-c", shell],
        capture_output=True,
        timeout=300,
        cwd=tmp_path,
        env={"COLUMNS": "200", "PATH": "/usr/bin:/bin", "PYTHONPATH": str(SAMPLES.parent)},
    )
    assert proc.returncode == 0, proc.stdout  # read cleanly
    assert b"8\xe2\x80\x9312 dropped" in proc.stdout  # the session's own resume jump
    assert run("timeline", str(path), "--session", "no-such-session").returncode == 2


def test_unreadable_capture_files_keep_the_findings_of_the_rest(tmp_path: Path) -> None:
    real = SAMPLES / "live-jump-unsignalled.pcap"
    data = real.read_bytes()
    (tmp_path / "a.pcap").write_bytes(data)
    (tmp_path / "cut-header.pcap").write_bytes(data[:20])
    linktype = data[:20] + (65535).to_bytes(4, "little") + data[24:]
    (tmp_path / "linktype.pcap").write_bytes(linktype)
    result = scan([tmp_path])
    assert ordinary_gap_found(result, LOG_SESSION)
    assert len(result.errors) == 2
    assert exit_code(result, FailOn.never) == 3


# -- log-side caps ---------------------------------------------------------------------------


def test_a_gzip_log_expanding_past_the_cap_is_cut(tmp_path: Path) -> None:
    bomb = hostile.write_gzip(
        tmp_path / "events.jsonl.gz",
        hostile.ORDINARY_EVENT_LOG.read_bytes(),
        64 << 20,
        b"\n" + hostile.event_record(event_id="99") + b"\n",
    )
    result = scan([bomb], "log_decoded_bytes=32MiB")
    assert ordinary_gap_found(result, LOG_SESSION)
    (hit,) = [c for c in result.caps if c.cap == "log_decoded_bytes"]
    assert hit.limit == 32 << 20 and hit.consequence == "the rest of the file is not read"
    assert result.log_stats["lines"] == 42  # the record after the bomb is not read


def test_a_gzip_bomb_line_is_skipped_at_the_default_caps(tmp_path: Path) -> None:
    """64 MiB of zeros in one line (past log_line_bytes) after the log: skipped as it
    streams by, the record after it still read."""
    bomb = hostile.write_gzip(
        tmp_path / "events.jsonl.gz",
        hostile.ORDINARY_EVENT_LOG.read_bytes(),
        64 << 20,
        b"\n" + hostile.event_record(event_id="99") + b"\n",
    )
    result = scan([bomb])
    assert ordinary_gap_found(result, LOG_SESSION)
    (hit,) = result.caps
    assert (hit.cap, hit.line, hit.cut) == ("log_line_bytes", 43, "a line of 67108864 bytes")
    assert result.log_stats["lines"] == 43  # the ordinary 42 and the one after the bomb


def test_an_access_log_with_an_over_long_line(tmp_path: Path) -> None:
    access = hostile.write_long_line_log(
        tmp_path / "access.log",
        hostile.ORDINARY_ACCESS_LOG.read_bytes(),
        20 << 20,  # past the default 16 MiB: a sparse file
        hostile.ORDINARY_ACCESS_LOG.read_bytes(),
    )
    result = scan([access, hostile.ORDINARY_EVENT_LOG])
    assert ordinary_gap_found(result, LOG_SESSION)
    (hit,) = result.caps
    assert (hit.cap, hit.line, hit.source) == ("log_line_bytes", 5, str(access))
    (stats,) = [f for f in result.log_stats["files"] if f["source"] == str(access)]
    assert stats["lines"] == 8


@pytest.mark.parametrize("kind", ["plain", "gzip", "zstd"])
def test_long_lines_stream_by_in_every_container(tmp_path: Path, kind: str) -> None:
    """Lines longer than a chunk and past the cap, at the start, middle and end of a file,
    are skipped with their numbers counted, in plain, gzip and zstd files alike; lines
    between the cap and the chunk size too (numpy pass)."""
    lines = [b"a" * 10, b"b" * 50_000, b"c" * 10, b"d" * 3_000, b"e" * 10, b"f" * 60_000]
    data = b"\n".join(lines)
    path = tmp_path / "log"
    if kind == "gzip":
        import gzip

        path.write_bytes(gzip.compress(data))
    elif kind == "zstd":
        import zstandard

        path.write_bytes(zstandard.ZstdCompressor().compress(data))
    else:
        path.write_bytes(data)
    errors: list[ReadError] = []
    chunks = list(
        iter_chunks(str(path), errors, chunk_bytes=4096, limits=Limits(log_line_bytes=2048))
    )
    kept = [
        (c.first_line + i, line)
        for c in chunks
        for i, line in enumerate(c.data.split(b"\n"))
        if line
    ]
    assert kept == [(1, b"a" * 10), (3, b"c" * 10), (5, b"e" * 10)]
    (hit,) = errors
    assert isinstance(hit, CapHit) and (hit.line, hit.count) == (2, 3)


def test_a_record_nested_past_json_depth_is_skipped(tmp_path: Path) -> None:
    result = scan([event_log(tmp_path, "event-log-deep-record")])
    assert ordinary_gap_found(result, LOG_SESSION)
    (hit,) = result.caps
    assert (hit.cap, hit.line) == ("json_depth", 43)
    assert scan([event_log(tmp_path, "event-log-deep-record")], "json_depth=400").caps == []


def test_caps_in_the_json_document_and_the_summary(tmp_path: Path) -> None:
    path = capture(tmp_path, "long-int-id")
    doc = json.loads(run("scan", str(path), "-f", "json").stdout)
    (cap,) = doc["caps"]
    assert cap["cap"] == "id_digits" and cap["limit"] == 19 and cap["frame"] and cap["count"] == 1
    assert [e.get("cap") for e in doc["errors"]] == ["id_digits"]
    table = run("scan", str(path)).stdout.decode()
    assert "1 cap(s) fired" in table and "id_digits=19" in table
    proc = run("scan", str(path), "--limit", "id_digits=abc")
    assert proc.returncode == 2 and b"not a count" in proc.stderr
