"""The server logs in samples/logs/ (written by the PROFILE server during the very run its
capture recorded) give the capture's findings: alone, for every rule logs can judge, and
joined with the capture, exactly, one stream per response, citing frames and log lines."""

from __future__ import annotations

import functools
import gzip
import json
import shutil
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import SAMPLES
from support import sample_scans
from support.log_samples import LOGS, Finding, event_log_of, expected_findings, got_findings
from support.partitions import assert_same_in_partitions

from sse_forensics.pipeline import scan_paths
from sse_forensics.result import ScanResult

SCENARIOS = sorted(p.name for p in LOGS.iterdir() if p.is_dir()) if LOGS.is_dir() else []


@dataclass(frozen=True)
class Difference:
    """Findings a scan of the logs alone gives beyond (``extra``) or short of (``missing``)
    the capture's truth, and why."""

    reason: str
    extra: tuple[Finding, ...] = ()
    missing: tuple[Finding, ...] = ()


# Logs legitimately cannot see this the way the capture does.
LOGS_CANNOT_SEE: dict[str, Difference] = {
    # The client recovered by re-issuing the call: in logs, a response it left with events
    # pending and a later POST whose body no log holds. Not silent, not expected: the logs
    # cannot tell (`gap-client-reissued` itself needs request bodies).
    "gap-client-reissued": Difference(
        "a later POST may be the re-issue; no request body says so",
        extra=(("gap-reissue-unknown", "indeterminate", "8", "12"),),
    ),
}


def test_log_samples_exist() -> None:
    assert len(SCENARIOS) >= 10
    kinds = {p.name.split(".")[0] for folder in SCENARIOS for p in (LOGS / folder).iterdir()}
    assert kinds == {"access", "events"}
    # One rotated access log and one compressed event log exercise rotation and gzip.
    assert list(LOGS.glob("*/access.log.1.gz")) and list(LOGS.glob("*/events.jsonl.gz"))
    for name in SCENARIOS:
        assert (SAMPLES / f"{name}.pcap").exists(), f"{name}: no capture of the same run"


SIGNALS = ("stream-gap", "resume-gap", "backpressure-disconnect")


def _signal_records(records: list[dict], kind: str) -> list[dict]:
    return [
        r
        for r in records
        if r["kind"] == kind
        and isinstance(r.get("event"), dict)
        and r["event"].get("type") in SIGNALS
    ]


def test_log_samples_come_in_the_shapes_real_servers_write() -> None:
    """Three server shapes (the PROFILE server, the official Python SDK's event store, the
    official TypeScript SDK through a middleware); signals recorded as the decision, as
    the event written, and both; access logs with the session only in the response header
    column (nginx combined + "$http_last_event_id" "$sent_http_mcp_session_id"
    $request_time)."""
    assert {n for n in SCENARIOS if n.startswith("mcp-sdk")} == {"mcp-sdk-clean", "mcp-sdk-resume"}
    assert {n for n in SCENARIOS if n.startswith("ts-sdk")} >= {
        "ts-sdk-resume",
        "ts-sdk-stream-gap",
    }
    ways = set()
    for name in SCENARIOS:
        _, records = event_log_of(LOGS / name)
        decided, wrote = _signal_records(records, "control"), _signal_records(records, "written")
        ways.add((bool(decided), bool(wrote)))
    assert {(True, False), (False, True), (True, True)} <= ways
    wanted, formats = {"mcp", "combined-mcp"}, set()
    for name in SCENARIOS:  # until both formats are seen (a scan each)
        files = scan_paths([str(LOGS / name / "access.log")]).log_stats["files"]
        formats |= {f["format"] for f in files}
        if wanted <= formats:
            break
    assert wanted <= formats


@functools.cache  # resume-storm's logs are read by three tests: one scan
def _logs_alone(name: str) -> ScanResult:
    return sample_scans.scan([LOGS / name])


@pytest.mark.parametrize("name", SCENARIOS)
def test_logs_alone_match_the_capture_for_judged_rules(name: str) -> None:
    result = _logs_alone(name)
    assert not result.errors and result.log_stats["unreadable_lines"] == 0
    not_judged = {item["rule"] for item in result.not_judged}
    judged = Counter({f: n for f, n in expected_findings(name).items() if f[0] not in not_judged})
    got = got_findings(result)
    cannot_see = LOGS_CANNOT_SEE.get(name)
    if cannot_see is not None:
        judged = judged - Counter(cannot_see.missing) + Counter(cannot_see.extra)
    assert got == judged
    # No false alarm: silent corruption from logs alone only where the capture has it.
    silent = {f for f in got if f[1] == "silent_corruption"}
    assert silent <= {f for f in expected_findings(name) if f[1] == "silent_corruption"}
    for finding in result.findings:  # logs alone: evidence is log lines, never frames
        assert finding.evidence and all("line" in e and "frame" not in e for e in finding.evidence)


def _lines(path: Path) -> list[bytes]:
    with (gzip.open if path.suffix == ".gz" else open)(path, "rb") as handle:
        return handle.read().splitlines()


def test_rotated_access_log_is_read_whole() -> None:
    folder = LOGS / "resume-storm"
    result = _logs_alone(folder.name)
    names = {Path(p).name for p in result.inputs}
    assert names == {"access.log.1.gz", "access.log", "events.jsonl"}
    rotated, current = _lines(folder / "access.log.1.gz"), _lines(folder / "access.log")
    assert result.log_stats["access_rows"] == len(rotated) + len(current)
    # The resumes are split over both files; all four are counted.
    resumes = result.tables["resumes"]
    assert sorted(resumes["cursor_attempt"].to_list()) == [1, 2, 3, 4]
    assert sum(b'"7"' in line for line in rotated) == 1


def test_rotated_access_log_lines_come_first() -> None:
    result = _logs_alone("resume-storm")
    resumes = result.tables["resumes"].sort("cursor_attempt")
    first = resumes["evidence"][0][0]
    assert Path(first["source"]).name == "access.log.1.gz"


def _gap_ids(records: list[dict], first: str, last: str) -> set[str]:
    """The IDs from ``first`` to ``last`` in the producer's order (the emitted records)."""
    for stream in {(r.get("session"), r.get("stream")) for r in records}:
        emitted = [
            r.get("event_id") for r in records if (r.get("session"), r.get("stream")) == stream
        ]
        emitted = [i for i in dict.fromkeys(emitted) if i is not None]
        if first in emitted and last in emitted:
            return set(emitted[emitted.index(first) : emitted.index(last) + 1])
    return set()


def _streams_are_the_captures(joined: ScanResult, pcap: Path) -> None:
    """One stream per response: every stream of the joined scan is one the capture holds
    (its file, its own request frame), the log records folded into it, none added beside
    it (a scan of the capture alone is not needed to count them)."""
    streams = joined.tables["streams"]
    assert streams.height and streams["source"].eq(str(pcap)).all(), streams["source"].unique()
    assert not streams.select("connection", "request_frame").is_duplicated().any()


@pytest.mark.parametrize("name", SCENARIOS)
def test_capture_and_logs_joined_match_the_capture(name: str) -> None:
    pcap = SAMPLES / f"{name}.pcap"
    joined = scan_paths([str(pcap), str(LOGS / name)])
    assert got_findings(joined) == expected_findings(
        name
    )  # no sources-disagree either: none is expected
    _streams_are_the_captures(joined, pcap)
    events_path, records = event_log_of(LOGS / name)
    for finding in joined.findings:
        frames = [e for e in finding.evidence if "frame" in e]
        assert frames, f"{finding.rule} cites no frame"
        first, last = finding.gap["first"], finding.gap["last"]
        if last is None:
            continue
        gap = _gap_ids(records, first, last)
        evicted = {
            n + 1
            for n, r in enumerate(records)
            if r["kind"] == "evicted" and r.get("event_id") in gap
        }
        if not evicted:
            continue  # the event log holds nothing about this gap
        cited = {e["line"] for e in finding.evidence if e.get("source") == str(events_path)}
        assert cited & evicted, f"{finding.rule} {first}-{last} cites no eviction record"


def test_joined_findings_and_tables_do_not_depend_on_partitioning() -> None:
    """Every capture with its logs, the log records folding into the capture's exchanges
    across partitions (docs/profile.md, "Sessions and streams"): one partition and six
    give the same JSON lines and fact tables. All samples in one scan: a session's
    partition is a hash of its ID (``evidence.store.bucket_expr``), whatever else is
    scanned, so the sessions the wire or the logs name are split as a scan of their
    sample alone splits them."""
    paths = [str(p) for name in SCENARIOS for p in (SAMPLES / f"{name}.pcap", LOGS / name)]
    whole = scan_paths(paths, buckets=1)
    assert len(whole.findings) >= len(SCENARIOS)
    assert_same_in_partitions(whole, scan_paths(paths, buckets=6))


def _copy_with(tmp_path: Path, name: str, change) -> Path:
    """The logs of ``name`` in ``tmp_path``, the event log's records passed through ``change``."""
    folder = tmp_path / name
    shutil.copytree(LOGS / name, folder)
    path, records = event_log_of(folder)
    path.unlink()
    (folder / "events.jsonl").write_text("".join(json.dumps(r) + "\n" for r in change(records)))
    return folder


def _written(records: list[dict], event_id: str) -> dict:
    return next(r for r in records if r["kind"] == "written" and r["event_id"] == event_id)


def test_an_added_written_record_is_a_disagreement(tmp_path: Path) -> None:
    """The event log claims 10 was written (it was evicted): the capture never saw it."""
    name = "live-jump-unsignalled"

    def add(records: list[dict]) -> list[dict]:
        after_7 = _written(records, "7")
        return [*records, {**after_7, "event_id": "10", "ts": after_7["ts"] + 0.001}]

    folder = _copy_with(tmp_path, name, add)
    joined = scan_paths([str(SAMPLES / f"{name}.pcap"), str(folder)])
    assert got_findings(joined) == expected_findings(name) + Counter(
        [("sources-disagree", "indeterminate", "10", "10")]
    )
    (disagree,) = [f for f in joined.findings if f.rule == "sources-disagree"]
    assert {"frame", "line"} <= {k for e in disagree.evidence for k in e}


def test_a_written_record_turned_evicted_is_a_disagreement(tmp_path: Path) -> None:
    """The event log says 14 was evicted, the capture shows it on the wire."""
    name = "live-jump-unsignalled"

    def flip(records: list[dict]) -> list[dict]:
        wrong = {"kind": "evicted", "reason": "send queue full", "where": "live-queue"}
        return [{**r, **wrong} if r is _written(records, "14") else r for r in records]

    folder = _copy_with(tmp_path, name, flip)
    joined = scan_paths([str(SAMPLES / f"{name}.pcap"), str(folder)])
    disagree = [f for f in joined.findings if f.rule == "sources-disagree"]
    assert [(f.gap["first"], f.gap["last"]) for f in disagree] == [("14", "14")]


def test_a_removed_written_record_is_a_disagreement(tmp_path: Path) -> None:
    """The event log emitted 14 and never says it was written; the capture shows it."""
    name = "live-jump-unsignalled"

    def remove(records: list[dict]) -> list[dict]:
        return [r for r in records if r is not _written(records, "14")]

    folder = _copy_with(tmp_path, name, remove)
    joined = scan_paths([str(SAMPLES / f"{name}.pcap"), str(folder)])
    assert "sources-disagree" in {f.rule for f in joined.findings}
