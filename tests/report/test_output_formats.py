"""Machine output for ticket systems: JSON Schema-valid, deterministic, fingerprints stable."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import jsonschema
import pytest
from conftest import SAMPLES
from support.cli import run as _in_process
from support.schemas import schema_validator

SCHEMAS = SAMPLES.parent / "docs" / "schemas"


def _run(*args: str, cwd: Path | None = None) -> bytes:
    return _in_process(*args, cwd=cwd).stdout


def test_jsonl_findings_match_schema() -> None:
    validator = schema_validator("finding.schema.json")
    lines = _run("scan", str(SAMPLES), "--format", "jsonl").splitlines()
    assert len(lines) >= 15
    for line in lines:
        validator.validate(json.loads(line))


def test_json_document_matches_schema() -> None:
    doc = json.loads(_run("scan", str(SAMPLES), "--format", "json"))
    schema_validator("scan-document.schema.json").validate(doc)
    assert sum(doc["verdicts"].values()) == len(doc["findings"])


def test_schema_rejects_a_broken_finding() -> None:
    line = _run("scan", str(SAMPLES / "live-jump-unsignalled.pcap"), "--format", "jsonl")
    finding = json.loads(line.splitlines()[0])
    finding["sse_forensics"]["classification"] = "probably_fine"
    with pytest.raises(jsonschema.ValidationError):
        schema_validator("finding.schema.json").validate(finding)


def test_jsonl_is_byte_identical_across_runs_directories_and_order(tmp_path: Path) -> None:
    a, b = "resume-jump-unsignalled.pcap", "crafted-vlan-ipv6-live-jump.pcap"
    first = _run("scan", str(SAMPLES / a), str(SAMPLES / b), "--format", "jsonl")
    assert first == _run("scan", str(SAMPLES / a), str(SAMPLES / b), "--format", "jsonl")
    shutil.copy(SAMPLES / a, tmp_path / a)
    shutil.copy(SAMPLES / b, tmp_path / b)
    elsewhere = _run("scan", b, a, "--format", "jsonl", cwd=tmp_path)

    def key(out: bytes) -> list[tuple]:
        rows = [json.loads(x) for x in out.splitlines()]
        return sorted((r["event"]["id"], r["rule"]["id"], r["message"]) for r in rows)

    assert key(first) == key(elsewhere)
    assert len({r[0] for r in key(first)}) == len(key(first))


def test_ocsf_records_are_detection_findings() -> None:
    lines = _run("scan", str(SAMPLES / "resume-jump-unsignalled.pcap"), "--format", "ocsf")
    records = [json.loads(x) for x in lines.splitlines()]
    assert records
    for r in records:
        assert r["class_uid"] == 2004 and r["type_uid"] == 200401 and r["category_uid"] == 2
        assert 1 <= r["severity_id"] <= 5 and isinstance(r["time"], int)
        assert r["finding_info"]["analytic"]["uid"] in {
            "silent-resume-jump",
            "resume-in-gap-2xx",
            "client-accepted-gap",
        }
        assert r["finding_info"]["uid"] == r["metadata"]["uid"]
        (evidence,) = r["evidences"]  # tests/report/test_siem_schemas.py checks the whole schema
        assert evidence["src_endpoint"]["ip"] and evidence["dst_endpoint"]["port"]
        assert evidence["connection_info"]["community_uid"].startswith("1:")
        assert r["unmapped"]["sse_forensics"]["classification"] in (
            "silent_corruption",
            "indeterminate",
            "expected_gap",
        )
