"""Findings a SIEM takes as they are (issue 15): every OCSF record valid against the official
Detection Finding schema of the version it declares, every JSONL finding valid against the
ECS field definitions (``ecs_flat.yml`` of the pinned release, tests/data/ecs/) and the
project's own schema — log-only findings included —, no made-up addresses, ports or
Community IDs, and finding ids unique per finding and stable across runs."""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import jsonschema
import pytest
from conftest import SAMPLES, SHARED_CAPTURES, sample_captures
from support import sample_scans
from support.proxy_legs import two_legs
from support.schemas import (
    NAMESPACE,
    SCHEMAS,
    _ecs_flat,
    _ecs_type_error,
    _leaves,
    ecs_errors,
    schema_validator,
)

from sse_forensics.engine.incidents import group_incidents
from sse_forensics.pipeline import scan_paths
from sse_forensics.report.jsonout import (
    ECS_VERSION,
    ecs_finding,
    ecs_findings,
    findings_jsonl,
    scan_document,
)
from sse_forensics.report.ocsf import OCSF_VERSION, findings_ocsf, ocsf_record

LOGS = SAMPLES / "logs"
NEWEST_OCSF = "1.8.0"  # the newest release ocsf-json-schema 1.2.0 ships
# Two scenarios whose logs and capture describe the same run (samples/README.md).
JOINED = ("resume-410", "live-jump-unsignalled")


# -- the findings under test ---------------------------------------------------------------


@cache
def _scans() -> dict[str, list]:
    """Findings of every kind of input: all sample captures in one scan, all samples' logs
    without a capture in one scan, two captures joined with their logs, and a capture of
    two proxy-like legs. (The logs in one scan give the findings of a scan per folder,
    field for field but their ids: ~1.2 CPU s instead of 5.6.)"""
    out = {"captures": sample_scans.scan(sample_captures()).findings}  # test_incidents'
    out["logs"] = scan_paths([str(p) for p in sorted(LOGS.iterdir()) if p.is_dir()]).findings
    for name in JOINED:
        out[f"joined:{name}"] = scan_paths(
            [str(SAMPLES / f"{name}.pcap"), str(LOGS / name)]
        ).findings
    return out


def _all_findings() -> list:
    return [f for findings in _scans().values() for f in findings]


@cache
def _ocsf_records() -> list[dict]:
    """Every record as ``--format ocsf`` writes it: with its incident's correlation_uid."""
    return [
        json.loads(line)
        for findings in _scans().values()
        for line in findings_ocsf(findings).splitlines()
    ]


@cache
def _ecs_docs() -> list[dict]:
    """Every finding as ``--format jsonl`` writes it: with its incident's id."""
    return [
        doc
        for findings in _scans().values()
        for doc in ecs_findings(findings, group_incidents(findings))
    ]


def _log_only() -> list:
    return _scans()["logs"]


def test_inputs_give_findings_of_every_kind() -> None:
    scans = _scans()
    assert len(scans["captures"]) >= 40
    assert len(_log_only()) >= 20
    assert all(scans[f"joined:{name}"] for name in JOINED)


# -- OCSF ----------------------------------------------------------------------------------


@cache
def _ocsf_validator(version: str):
    """The official Detection Finding (2004) class of ``version`` as JSON Schema 2020-12,
    objects embedded, no profiles; strict: ``additionalProperties: false`` throughout."""
    from ocsf_json_schema import OcsfJsonSchemaEmbedded, get_ocsf_schema

    schema = OcsfJsonSchemaEmbedded(get_ocsf_schema(version=version)).get_class_schema(
        class_name="detection_finding", profiles=[]
    )
    assert schema["additionalProperties"] is False
    cls = jsonschema.validators.validator_for(schema)
    return cls(schema, format_checker=cls.FORMAT_CHECKER)


def _ocsf_errors(record: dict, version: str) -> list[str]:
    return [
        f"{e.json_path}: {e.message[:200]}" for e in _ocsf_validator(version).iter_errors(record)
    ]


def test_ocsf_records_are_valid_against_the_declared_and_the_newest_version() -> None:
    records = _ocsf_records()
    assert {r["metadata"]["version"] for r in records} == {OCSF_VERSION}
    assert all(re.fullmatch(r"[0-9a-f]{32}", r["metadata"]["correlation_uid"]) for r in records)
    for record in records:
        for version in (record["metadata"]["version"], NEWEST_OCSF):
            assert not _ocsf_errors(record, version), (version, record["finding_info"]["uid"])


def _as_ocsf_1_1(record: dict) -> dict:
    """What docs/findings.md tells a pipeline held to OCSF 1.1 (Security Lake's validation) to
    drop: the attributes and the observable type 1.1 does not have."""
    out = json.loads(json.dumps(record))
    out.pop("is_alert")
    for evidence in out["evidences"]:
        evidence.get("connection_info", {}).pop("community_uid", None)
    out["metadata"]["version"] = "1.1.0"
    out["observables"] = [
        o
        for o in out.get("observables", [])
        if o["type_id"] != 11 and not o["name"].endswith("community_uid")
    ]
    return out


def test_ocsf_records_less_the_1_4_additions_are_valid_ocsf_1_1() -> None:
    for written in _ocsf_records():
        record = _as_ocsf_1_1(written)
        assert not _ocsf_errors(record, "1.1.0"), record["finding_info"]["uid"]


def test_ocsf_validator_is_strict() -> None:
    """What the old records did — endpoints at the top level — is rejected."""
    record = ocsf_record(_scans()["captures"][0])
    assert not _ocsf_errors(record, OCSF_VERSION)
    record["src_endpoint"] = {"ip": "127.0.0.1", "port": 4242}
    assert any("src_endpoint" in e for e in _ocsf_errors(record, OCSF_VERSION))


def test_ocsf_evidence_carries_the_connection_and_observables() -> None:
    for f in _scans()["captures"]:
        record = ocsf_record(f)
        (evidence,) = record["evidences"]
        assert evidence["connection_info"]["community_uid"] == f.community_id
        assert evidence["src_endpoint"] == {"ip": f.client[0], "port": f.client[1]}
        assert evidence["dst_endpoint"] == {"ip": f.server[0], "port": f.server[1]}
        assert evidence["data"]["evidence"] == f.evidence
        observed = {(o["name"], o["value"]) for o in record["observables"]}
        assert ("evidences.src_endpoint.ip", f.client[0]) in observed
        assert ("evidences.connection_info.community_uid", f.community_id) in observed
        assert record["unmapped"]["sse_forensics"]["gap"] == f.gap
        assert record["finding_info"]["analytic"]["uid"] == f.rule


# -- ECS -----------------------------------------------------------------------------------


def test_ecs_flat_is_the_pinned_release() -> None:
    ecs = _ecs_flat()
    assert len(ecs) == 2605
    assert ecs["rule.ruleset"]["type"] == "keyword" and ecs["@timestamp"]["required"]


def test_every_jsonl_finding_is_valid_ecs() -> None:
    docs = _ecs_docs()
    assert len(docs) == len(_all_findings())
    for doc in docs:
        assert not ecs_errors(doc), (doc["rule"]["id"], ecs_errors(doc))
        assert doc["@timestamp"] == doc["event"]["start"]
        assert re.fullmatch(r"[0-9a-f]{32}", doc["sse_forensics"]["incident_id"])


def test_the_ecs_check_rejects_the_old_shape() -> None:
    """The old document: ``rule`` a string, custom fields at the top level, no
    ``@timestamp`` or ``ecs.version``, ``source.ip`` "log" on log-only findings."""
    old = {
        "rule": "missing-stream-gap",
        "title": "t",
        "classification": "silent_corruption",
        "event": {"start": "2026-11-30T03:42:33.030703Z", "kind": "alert", "category": ["network"]},
        "network": {"community_id": "log:access/127.0.0.1", "transport": "tcp", "protocol": "http"},
        "source": {"ip": "log", "port": 0},
    }
    errors = "\n".join(ecs_errors(old))
    for what in (
        "rule: no such ECS field",
        "title: not an ECS field set",
        "source.ip:",
        "@timestamp: required",
        "ecs.version: required",
    ):
        assert what in errors


# -- the project's schema ------------------------------------------------------------------


def test_every_finding_matches_the_project_schema_log_only_included() -> None:
    validator = schema_validator("finding.schema.json")
    for f in _all_findings():
        validator.validate(ecs_finding(f))
    for doc in _ecs_docs():  # as written, with the incident id
        validator.validate(doc)
    assert (
        json.loads((SCHEMAS / "finding.schema.json").read_text())["properties"]["ecs"][
            "properties"
        ]["version"]["const"]
        == ECS_VERSION
    )


def test_json_document_holds_the_jsonl_findings() -> None:
    """``--format json`` and ``--format jsonl`` give a finding the same shape."""
    result = scan_paths([str(SAMPLES / "resume-jump-unsignalled.pcap")])
    lines = [json.loads(line) for line in findings_jsonl(result).splitlines()]
    assert lines and json.loads(scan_document(result))["findings"] == lines


# -- no made-up values ---------------------------------------------------------------------


def _values(value: object) -> Iterator[object]:
    if isinstance(value, dict):
        for v in value.values():
            yield from _values(v)
    elif isinstance(value, list):
        for v in value:
            yield from _values(v)
    else:
        yield value


def test_log_only_findings_carry_no_placeholder_flow() -> None:
    findings = _log_only()
    for f in findings:
        doc, record = ecs_finding(f), ocsf_record(f)
        flow = {k: doc.get(k) for k in ("network", "source", "destination", "related")}
        assert "log" not in set(_values(flow)), doc
        assert 0 not in set(_values(flow)), doc
        assert "community_id" not in doc["network"] and "transport" not in doc["network"]
        assert "destination" not in doc  # a log names no server address
        (evidence,) = record["evidences"]
        assert "connection_info" not in evidence and "dst_endpoint" not in evidence
        assert not any(str(v).startswith("log:") for v in _values(record.get("observables", [])))


def test_log_only_findings_use_the_access_log_client_address() -> None:
    """Every sample's access log names client 127.0.0.1, also for the streams an event log
    describes (the access line of the same request)."""
    findings = _log_only()
    assert findings and all(ecs_finding(f)["source"] == {"ip": "127.0.0.1"} for f in findings)
    assert all(
        ocsf_record(f)["evidences"][0]["src_endpoint"] == {"ip": "127.0.0.1"} for f in findings
    )


# -- ids -----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["resume-jump-unsignalled", "resume-410", "live-jump-unsignalled"])
def test_ids_are_unique_when_one_resume_is_seen_on_two_connections(
    name: str, tmp_path: Path
) -> None:
    capture = two_legs(SAMPLES / f"{name}.pcap", tmp_path / f"{name}-proxy.pcap")
    findings = scan_paths([str(capture)]).findings
    alone = scan_paths([str(SAMPLES / f"{name}.pcap")]).findings
    assert len(findings) > len(alone)
    ids = [f.fingerprint for f in findings]
    assert len(set(ids)) == len(ids), Counter(ids).most_common(2)
    records = [ocsf_record(f) for f in findings]
    assert len({r["metadata"]["uid"] for r in records}) == len(records)
    assert sorted(ids) == sorted(f.fingerprint for f in scan_paths([str(capture)]).findings)


def test_ids_are_unique_in_every_scan() -> None:
    for key, findings in _scans().items():
        ids = [f.fingerprint for f in findings]
        assert len(set(ids)) == len(ids), (key, Counter(ids).most_common(2))
        incidents = [i.fingerprint for i in group_incidents(findings)]
        assert len(set(incidents)) == len(incidents), key


def test_ids_are_unique_over_the_shared_captures() -> None:
    if not SHARED_CAPTURES.is_dir():
        pytest.skip("shared captures not found")
    captures = sorted(p for p in SHARED_CAPTURES.iterdir() if p.suffix in (".pcap", ".pcapng"))
    ids = [f.fingerprint for f in scan_paths([str(p) for p in captures]).findings]
    assert len(set(ids)) == len(ids)


# -- Elasticsearch index template ----------------------------------------------------------


def _mappings(properties: dict, prefix: str = "") -> Iterator[tuple[str, dict]]:
    for key, mapping in properties.items():
        if "properties" in mapping:
            yield from _mappings(mapping["properties"], f"{prefix}{key}.")
        else:
            yield f"{prefix}{key}", mapping


def test_index_template_maps_every_field_as_ecs_types_it() -> None:
    """docs/schemas/elasticsearch-index-template.json: the ECS fields typed exactly as
    ``ecs_flat.yml`` types them, every ``sse_forensics.*`` field mapped with a type its
    values fit, every keyword bounded by ``ignore_above`` (a longer value is kept in
    ``_source``, not indexed, and never rejects the document)."""
    template = json.loads((SCHEMAS / "elasticsearch-index-template.json").read_text())
    assert template["_meta"]["ecs_version"] == ECS_VERSION
    mapped = dict(_mappings(template["template"]["mappings"]["properties"]))
    ecs = _ecs_flat()
    for name, mapping in mapped.items():
        if mapping["type"] == "keyword":
            assert mapping.get("ignore_above"), name
        if not name.startswith(NAMESPACE + "."):
            field = ecs[name]
            assert mapping == {k: field[k] for k in ("type", "ignore_above") if k in field}, name
    for doc in _ecs_docs():
        for name, value in _leaves(doc):
            if name == f"{NAMESPACE}.evidence":
                for item in value:  # an array of objects: each field mapped on its own
                    for key, v in item.items():
                        assert not _ecs_type_error(mapped[f"{name}.{key}"], v), (name, key)
                continue
            assert name in mapped, f"{name} is not mapped"
            values = value if isinstance(value, list) else [value]
            for v in values:
                if v is not None:
                    assert not _ecs_type_error(mapped[name], v), (name, v)


def test_rule_reference_points_at_the_rule_section() -> None:
    """``rule.reference`` of a packaged rule is its section of docs/rules.md."""
    rules_md = (SAMPLES.parent / "docs" / "rules.md").read_text(encoding="utf-8")
    for f in _all_findings():
        rule = ecs_finding(f)["rule"]
        assert rule["ruleset"] == "sse-forensics" and rule["reference"] == f"docs/rules.md#{f.rule}"
        assert f"### `{f.rule}`\n" in rules_md, f.rule
