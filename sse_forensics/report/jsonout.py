"""Machine-readable output: ``--format json`` (one document) and ``jsonl`` (one finding per
line). orjson writes any string as valid JSON, whatever bytes the capture held.

A finding is an Elastic Common Schema document in both (``ecs_finding``): ECS fields where
ECS has one (``@timestamp``, ``event.*``, ``rule.*``, ``network.*``, ``source.*``,
``destination.*``, ``related.ip``), everything specific to sse-forensics under
``sse_forensics.*``, which no ECS field set will ever claim. An ECS field the evidence does
not give is left out, never filled with a placeholder (``report/siem.py``). Tests check
every finding against ``ecs_flat.yml`` of ECS :data:`ECS_VERSION`."""

from __future__ import annotations

from collections import Counter

import orjson

from sse_forensics import __version__
from sse_forensics.coverage import coverage
from sse_forensics.engine.finding import Finding, iso_time
from sse_forensics.pipeline import ScanResult
from sse_forensics.report.siem import (
    SEVERITY_ID,
    compact,
    finding_time,
    observed_flow,
    rule_reference,
)

ECS_VERSION = "9.4.0"
"""The ECS release the findings are checked against (tests/data/ecs/)."""
ECS_DATASET = "sse_forensics.finding"

_OPTS = orjson.OPT_NON_STR_KEYS
SESSION_SUMMARY = [
    "session_id",
    "session_inferred",
    "session_source",
    "protocol_version",
    "id_scheme",
    "counter_scope",
    "streams",
    "resumes",
    "data_events",
]


def ecs_finding(f: Finding) -> dict[str, object]:
    """One finding as an ECS document (``docs/findings.md``; schema
    ``docs/schemas/finding.schema.json``). ``@timestamp`` and ``event.start`` are capture
    time, never the time of the scan, so a re-scan writes the same bytes; both are absent
    only for a finding with no time at all (logs without timestamps)."""
    flow = observed_flow(f)
    when = iso_time(finding_time(f))
    doc: dict[str, object] = {} if when is None else {"@timestamp": when}
    doc["ecs"] = {"version": ECS_VERSION}
    doc["message"] = f.message
    doc["event"] = compact(
        {
            "kind": "alert",
            "category": ["network"],
            "type": ["info"],
            "id": f.fingerprint,
            "severity": SEVERITY_ID.get(f.severity),
            "start": when,
            "module": "sse_forensics",
            "dataset": ECS_DATASET,
        }
    )
    doc["rule"] = compact(
        {
            "id": f.rule,
            "name": f.title,
            "description": f.rule_description,
            "reference": rule_reference(f),
            "category": f.rule_table,
            "ruleset": f.ruleset,
        }
    )
    # A capture shows the TCP connection; a log shows an HTTP exchange, not its transport.
    doc["network"] = compact(
        {
            "community_id": flow.community_id,
            "transport": "tcp" if flow.captured else None,
            "protocol": "http",
            "type": flow.ip_type,
        }
    )
    source = compact({"ip": flow.client_ip, "port": flow.client_port})
    destination = compact({"ip": flow.server_ip, "port": flow.server_port})
    if source:
        doc["source"] = source
    if destination:
        doc["destination"] = destination
    if flow.ips:
        doc["related"] = {"ip": flow.ips}
    doc["sse_forensics"] = {
        "classification": f.classification,
        "severity": f.severity,
        "session_id": f.session_id,
        "session_inferred": f.session_inferred,
        "stream": f.stream,
        "stream_label": f.stream_label,
        "id_scheme": f.id_scheme,
        "counter_scope": f.counter_scope,
        "location": f.location,
        "last_event_id": f.last_event_id,
        "gap": f.gap,
        "cause": f.cause,
        "evidence": f.evidence,
        "references": f.references,
    }
    return doc


def findings_jsonl(result: ScanResult) -> bytes:
    return b"".join(orjson.dumps(ecs_finding(f), option=_OPTS) + b"\n" for f in result.findings)


def session_summaries(result: ScanResult) -> list[dict]:
    verdicts: dict[str, Counter] = {}
    for f in result.findings:
        verdicts.setdefault(f.session_id or "", Counter())[f.classification] += 1
    rows = []
    for row in result.tables["sessions"].select(SESSION_SUMMARY).to_dicts():
        row["verdicts"] = dict(verdicts.get(row["session_id"], Counter()))
        rows.append(row)
    return rows


def scan_document(result: ScanResult) -> bytes:
    counts = Counter(f.classification for f in result.findings)
    doc = {
        "tool": {"name": "sse-forensics", "version": __version__},
        "inputs": result.inputs,
        "stats": {
            "frames": result.stats.frames,
            "tcp_segments": result.stats.tcp_segments,
            "connections": result.stats.connections,
            "http_exchanges": result.stats.http_exchanges,
            "streams": result.stats.streams,
            "events": result.stats.events,
            "resumes": result.stats.resumes,
        },
        "capture_loss": result.loss.as_dict(),
        "logs": result.log_stats or None,
        "verdicts": dict(counts),
        "sessions": session_summaries(result),
        "findings": [ecs_finding(f) for f in result.findings],
        "errors": [e.as_dict() for e in result.errors],
        # The caps that fired (sse_forensics.limits, docs/limits.md); each is in errors too.
        "caps": [c.cap_dict() for c in result.caps],
        "rule_errors": result.rule_errors,
        "not_judged": result.not_judged,
        # What the inputs did not show well enough to judge (sse_forensics.coverage).
        "could_not_judge": coverage(result).as_dict(),
    }
    return orjson.dumps(doc, option=_OPTS | orjson.OPT_INDENT_2) + b"\n"
