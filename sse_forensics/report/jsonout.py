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
from typing import TYPE_CHECKING, Any

import orjson

from sse_forensics import __version__
from sse_forensics.coverage import coverage
from sse_forensics.engine.finding import Finding, iso_time
from sse_forensics.engine.incidents import Incident, group_incidents, incident_of, summarize
from sse_forensics.report.siem import (
    SEVERITY_ID,
    compact,
    finding_time,
    observed,
    observed_flow,
    rule_reference,
)
from sse_forensics.result import SESSION_SUMMARY, ScanResult

if TYPE_CHECKING:
    from sse_forensics.reassembly.tls import TLSInfo

ECS_VERSION = "9.4.0"
"""The ECS release the findings are checked against (tests/data/ecs/)."""
ECS_DATASET = "sse_forensics.finding"

_OPTS = orjson.OPT_NON_STR_KEYS


def tls_by_flow(result: ScanResult) -> dict[str, TLSInfo]:
    """The TLS record (``TLSInfo``) of each TLS connection, by Community ID."""
    return {c.community_id: c.tls for c in result.connections if c.tls is not None}


def ecs_tls(info: TLSInfo) -> dict[str, object]:
    """ECS ``tls.*`` of a connection's TLS record: version (numeric part), protocol, cipher
    suite (IANA name), SNI and the ALPN protocol chosen."""
    version = getattr(info, "version", None) or ""
    number = version.removeprefix("TLS ") if version.startswith("TLS ") else None
    return compact(
        {
            "version": number,
            "version_protocol": "tls" if number else None,
            "cipher": getattr(info, "cipher_suite", None),
            "next_protocol": getattr(info, "alpn", None),
            "client": compact({"server_name": getattr(info, "server_name", None)}),
        }
    )


def tls_decryption(info: TLSInfo) -> dict[str, object]:
    """Whether a TLS connection's records were all read, and if not why (``reasons``)."""
    as_dict = info.as_dict()
    return {
        "decrypted": as_dict["decrypted"],
        "undecryptable_bytes": as_dict["undecryptable_bytes"],
        "reasons": as_dict["reasons"],
    }


def ecs_finding(
    f: Finding, incident: str | None = None, tls: TLSInfo | None = None
) -> dict[str, object]:
    """One finding as an ECS document (``docs/findings.md``; schema
    ``docs/schemas/finding.schema.json``). ``@timestamp`` and ``event.start`` are capture
    time, never the time of the scan, so a re-scan writes the same bytes; both are absent
    only for a finding with no time at all (logs without timestamps). ``incident``: the id
    of the incident the finding belongs to (:mod:`sse_forensics.engine.incidents`);
    ``tls``: the TLS record of the finding's connection, if it was TLS (ECS ``tls.*``, and
    whether it was decrypted under ``sse_forensics.tls``)."""
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
    if tls is not None and ecs_tls(tls):
        doc["tls"] = ecs_tls(tls)
    own: dict[str, object] = {
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
    doc["sse_forensics"] = own
    if incident is not None:
        own["incident_id"] = incident
    if tls is not None:
        own["tls"] = tls_decryption(tls)
    return doc


def ecs_findings(
    findings: list[Finding],
    incidents: list[Incident],
    tls: dict[str, TLSInfo] | None = None,
) -> list[dict[str, object]]:
    """The findings as ECS documents, each with its incident's id (and with ``tls``, the
    TLS records by Community ID, its connection's TLS)."""
    of = incident_of(incidents)
    tls = tls or {}
    return [ecs_finding(f, of.get(f.fingerprint), tls.get(f.community_id or "")) for f in findings]


def findings_jsonl(result: ScanResult) -> bytes:
    docs = ecs_findings(result.findings, group_incidents(result.findings), tls_by_flow(result))
    return b"".join(orjson.dumps(doc, option=_OPTS) + b"\n" for doc in docs)


def _endpoint(ip: str | None, port: int | None) -> dict[str, object] | None:
    return compact({"ip": ip, "port": port}) or None


def incident_document(incident: Incident) -> dict[str, object]:
    """One incident (``incidents`` of the JSON document; ``docs/findings.md#incidents``)."""
    lead = incident.lead
    connections = []
    for c in incident.connections:
        flow = observed(c.community_id, c.client, c.server)
        connections.append(
            compact(
                {
                    "community_id": flow.community_id,
                    "client": _endpoint(flow.client_ip, flow.client_port),
                    "server": _endpoint(flow.server_ip, flow.server_port),
                }
            )
        )
    return {
        "id": incident.fingerprint,
        "classification": incident.classification,
        "severity": incident.severity,
        "start": iso_time(incident.ts),
        "session_id": lead.session_id,
        "session_inferred": lead.session_inferred,
        "stream": lead.stream,
        "stream_label": lead.stream_label,
        "opened_by": lead.opened_by,
        "id_scheme": lead.id_scheme,
        "location": incident.location,
        "gap": incident.gap,
        "cause": incident.cause,
        "rules": [
            {
                "rule": r.rule,
                "title": r.title,
                "classification": r.classification,
                "severity": r.severity,
                "count": r.count,
                "finding_ids": list(r.finding_ids),
            }
            for r in incident.rules
        ],
        "findings": len(incident.findings),
        "connections": connections,
        "evidence": incident.evidence,
    }


def tls_connections(result: ScanResult) -> list[dict[str, object]]:
    """One object per TLS connection (``tls`` of the JSON document): where it is, what its
    handshake showed, and whether its records were decrypted (and why not)."""
    out = []
    for conn in result.connections:
        info = conn.tls
        if info is None:
            continue
        flow = observed(conn.community_id, conn.client, conn.server)
        entry: dict[str, object] = {
            "connection": conn.id,
            "community_id": flow.community_id,
            "client": _endpoint(flow.client_ip, flow.client_port),
            "server": _endpoint(flow.server_ip, flow.server_port),
            "source": conn.first.source,
            "frame": conn.first.number,
            # Unknown when nothing was decrypted and ALPN did not say (TLS 1.3 encrypts it).
            "application": conn.application if info.key_found or info.alpn else None,
        }
        entry.update(info.as_dict())
        out.append(entry)
    return out


def session_summaries(result: ScanResult) -> list[dict[str, Any]]:
    verdicts: dict[str, Counter[str]] = {}
    for f in result.findings:
        verdicts.setdefault(f.session_id or "", Counter())[f.classification] += 1
    rows = []
    for row in result.tables["sessions"].select(SESSION_SUMMARY).to_dicts():
        row["verdicts"] = dict(verdicts.get(row["session_id"], Counter()))
        rows.append(row)
    return rows


def scan_document(result: ScanResult) -> bytes:
    counts = Counter(f.classification for f in result.findings)
    incidents = group_incidents(result.findings)
    doc = {
        "tool": {"name": "sse-forensics", "version": __version__},
        "inputs": result.inputs,
        "ignored_files": result.ignored,
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
        # Findings grouped into incidents: "3 lost ranges in 2 sessions, 7 findings".
        "summary": summarize(incidents).as_dict(),
        "sessions": session_summaries(result),
        "incidents": [incident_document(i) for i in incidents],
        "findings": ecs_findings(result.findings, incidents, tls_by_flow(result)),
        # TLS connections: SNI, ALPN, version, suite, decrypted or why not.
        "tls": tls_connections(result),
        "errors": [e.as_dict() for e in result.errors],
        # The caps that fired (sse_forensics.limits, docs/limits.md); each is in errors too.
        "caps": [c.cap_dict() for c in result.caps],
        "rule_errors": result.rule_errors,
        "not_judged": result.not_judged,
        # What the inputs did not show well enough to judge (sse_forensics.coverage).
        "could_not_judge": coverage(result).as_dict(),
    }
    return orjson.dumps(doc, option=_OPTS | orjson.OPT_INDENT_2) + b"\n"
