"""Inputs a user will try: standard input, a pipe, compressed captures, a directory holding
a file the tool cannot read (docs/capturing.md, "Compressed captures and pipes")."""

from __future__ import annotations

import bz2
import functools
import gzip
import json
import lzma
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import zstandard
from conftest import SAMPLES
from support.cli import run as run_in_process

from sse_forensics.errors import UnreadableInput
from sse_forensics.ingest.inputs import resolve_inputs
from sse_forensics.ingest.spool import Spool
from sse_forensics.pipeline import scan_paths

SILENT = SAMPLES / "live-jump-unsignalled.pcap"
CLEAN = SAMPLES / "clean-resume-int.pcap"
COMPRESS = {
    ".gz": gzip.compress,
    ".zst": lambda b: zstandard.ZstdCompressor().compress(b),
    ".xz": lzma.compress,
    ".bz2": bz2.compress,
}


def run(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    """A child process, for what standard input is in one (a pipe); the rest in-process."""
    return subprocess.run(
        [sys.executable, "-m", "sse_forensics", *args],
        input=stdin,
        capture_output=True,
        timeout=120,
        env={"COLUMNS": "120", "PATH": "/usr/bin:/bin", "PYTHONPATH": str(SAMPLES.parent)},
    )


@functools.cache  # read by several tests: one scan
def silent():
    return scan_paths([str(SILENT)])


def findings(result) -> list[tuple]:
    return [(f.rule, f.fingerprint, f.gap.get("first"), f.gap.get("last")) for f in result.findings]


def sources(result) -> set[str]:
    return {e["source"] for f in result.findings for e in f.evidence if e.get("source")}


@pytest.mark.parametrize("suffix", sorted(COMPRESS))
def test_compressed_capture_reads_like_the_plain_one_and_keeps_its_name(tmp_path, suffix):
    packed = tmp_path / f"capture.pcap{suffix}"
    packed.write_bytes(COMPRESS[suffix](SILENT.read_bytes()))
    plain, unpacked = silent(), scan_paths([str(packed)])
    assert findings(unpacked) == findings(plain) and findings(plain)
    assert sources(unpacked) == {str(packed)}
    assert unpacked.inputs == [str(packed)] and not unpacked.errors


def test_several_gzip_members_are_one_capture(tmp_path):
    data = SILENT.read_bytes()
    packed = tmp_path / "capture.pcap.gz"
    packed.write_bytes(gzip.compress(data[:5000]) + gzip.compress(data[5000:]))
    assert findings(scan_paths([str(packed)])) == findings(silent())


def test_truncated_gzip_keeps_the_frames_before_the_break_and_says_so(tmp_path):
    packed = gzip.compress(SILENT.read_bytes())
    cut = tmp_path / "cut.pcap.gz"
    cut.write_bytes(packed[: len(packed) // 2])
    result = scan_paths([str(cut)])
    assert 0 < result.stats.frames < silent().stats.frames
    broken = [e for e in result.errors if "gzip data broken" in e.what]
    assert len(broken) == 1 and broken[0].source == str(cut)
    assert all(e.source == str(cut) for e in result.errors)


def test_standard_input_is_read_and_cited_as_stdin() -> None:
    plain = json.loads(run_in_process("scan", str(SILENT), "--format", "json").stdout)
    piped = run("scan", "-", "--format", "json", stdin=gzip.compress(SILENT.read_bytes()))
    doc = json.loads(piped.stdout)
    assert piped.returncode == 1 and doc["inputs"] == ["<stdin>"]
    assert [f["event"]["id"] for f in doc["findings"]] == [
        f["event"]["id"] for f in plain["findings"]
    ]
    cited = {e["source"] for f in doc["findings"] for e in f["sse_forensics"]["evidence"]}
    assert cited == {"<stdin>"}
    assert b"sse-forensics-input" not in piped.stdout  # never the temporary copy


def test_timeline_from_standard_input_cites_stdin() -> None:
    proc = run("timeline", "-", "--format", "jsonl", stdin=SILENT.read_bytes())
    records = [json.loads(line) for line in proc.stdout.splitlines()]
    assert proc.returncode == 0 and records
    assert {r["source"] for r in records} == {"<stdin>"}


def test_a_fifo_is_read_once_front_to_back(tmp_path):
    fifo = tmp_path / "capture.fifo"
    os.mkfifo(fifo)
    data = SILENT.read_bytes()

    def writer() -> None:
        with open(fifo, "wb") as fh:
            fh.write(data)

    thread = threading.Thread(target=writer)
    thread.start()
    result = scan_paths([str(fifo)])
    thread.join(5)
    assert findings(result) == findings(silent())
    assert sources(result) == {str(fifo)}


def test_standard_input_that_is_not_a_capture_is_one_line_exit_2() -> None:
    proc = run("scan", "-", stdin=b"hello, world\n")
    assert proc.returncode == 2
    assert proc.stderr.decode().count("\n") == 1 and "<stdin>" in proc.stderr.decode()


def test_directory_names_each_file_it_cannot_read(tmp_path):
    (tmp_path / "a.pcap").write_bytes(CLEAN.read_bytes())
    (tmp_path / "notes.txt").write_text("not a log\n")
    (tmp_path / "app.log").write_text("2026-11-30 something happened\n")
    (tmp_path / ".hidden").write_text("dot files are not looked at\n")
    result = scan_paths([str(tmp_path)])
    skipped = sorted(e.source for e in result.errors if e.what.startswith("not read"))
    assert skipped == [str(tmp_path / "app.log"), str(tmp_path / "notes.txt")]
    proc = run_in_process("scan", str(tmp_path))
    assert proc.returncode == 3  # part of the input could not be read
    out = proc.stdout.decode()
    assert "app.log" in out and "notes.txt" in out and ".hidden" not in out


def test_documents_beside_the_evidence_are_one_line_not_input_problems(tmp_path):
    """A capture directory's README, scripts and JSON documents are not evidence: named once
    (``ignored_files``), never an input problem; a JSON-lines file is still looked at."""
    (tmp_path / "a.pcap").write_bytes(CLEAN.read_bytes())
    (tmp_path / "README.md").write_text("# captures of the incident\n")
    (tmp_path / "make.py").write_text("print('hi')\n")
    (tmp_path / "a.expected.json").write_text('{\n  "findings": []\n}\n')
    (tmp_path / "notes.json").write_text('{"not": "an event log record"}\n')
    result = scan_paths([str(tmp_path)])
    assert sorted(os.path.basename(p) for p in result.ignored) == [
        "README.md",
        "a.expected.json",
        "make.py",
    ]
    skipped = [e.source for e in result.errors if e.what.startswith("not read")]
    assert skipped == [str(tmp_path / "notes.json")]
    (tmp_path / "notes.json").unlink()
    proc = run_in_process("scan", str(tmp_path), "--format", "json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert len(doc["ignored_files"]) == 3 and doc["errors"] == []
    table = run_in_process("scan", str(tmp_path)).stdout.decode()
    assert "Not evidence, not read: 3 document/source file(s)" in table


def test_without_a_spool_a_stream_is_refused(tmp_path):
    packed = tmp_path / "capture.pcap.gz"
    packed.write_bytes(gzip.compress(SILENT.read_bytes()))
    with pytest.raises(UnreadableInput):
        resolve_inputs([str(packed)])
    with Spool(str(tmp_path)) as spool:
        found = resolve_inputs([str(packed)], spool=spool)
        (copy,) = found.captures
        assert spool.name(copy) == str(packed) and Path(copy).exists()
    assert not Path(copy).exists()  # the copy goes with the spool


def test_compressed_log_is_left_to_the_log_reader(tmp_path):
    log = SAMPLES / "logs"
    plain = sorted(p for p in log.rglob("*") if p.is_file() and p.suffix in (".log", ".jsonl"))
    if not plain:
        pytest.skip("no plain log sample")
    packed = tmp_path / (plain[0].name + ".gz")
    packed.write_bytes(gzip.compress(plain[0].read_bytes()))
    with Spool(str(tmp_path)) as spool:
        found = resolve_inputs([str(packed)], spool=spool)
        assert found.logs == [str(packed)] and not spool.names


def test_fact_table_evidence_names_the_compressed_capture_not_its_copy(tmp_path) -> None:
    packed = tmp_path / "silent.pcap.gz"
    packed.write_bytes(gzip.compress(SILENT.read_bytes()))
    result = scan_paths([str(packed)])
    cited = {
        e["source"]
        for table in result.tables.values()
        if "evidence" in table.columns
        for row in table.get_column("evidence").to_list()
        for e in row or []
    }
    assert cited == {str(packed)}
