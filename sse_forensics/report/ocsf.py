"""Findings as OCSF Detection Finding records (class 2004), one JSON object per line, for
Security Lake and SIEM pipelines that normalise to OCSF.

Every record is valid against the Detection Finding class of :data:`OCSF_VERSION` as the
official schema export defines it, strictly (no attribute the class does not have; tests
check it with the ``ocsf-json-schema`` package). :data:`OCSF_VERSION` is the oldest release
that has every attribute filled here (``connection_info.community_uid`` and ``is_alert``
came in 1.4.0). The connection goes into ``evidences`` (Detection Finding has no top-level
endpoints), with the frames or log lines that prove the finding as the evidence's ``data``;
``observables`` repeats the addresses, ports, Community ID and session for pivoting; what
OCSF has no attribute for (verdict, gap, stream, …) travels in ``unmapped.sse_forensics``,
the same object as in the ECS output. OCSF types forbid null: an unknown attribute is left
out (``report/siem.py``)."""

from __future__ import annotations

import orjson

from sse_forensics import __version__
from sse_forensics.engine.finding import Finding
from sse_forensics.engine.incidents import group_incidents, incident_of
from sse_forensics.report.siem import (
    SEVERITY_ID,
    Flow,
    compact,
    data_sources,
    finding_time,
    observed_flow,
    rule_reference,
)

OCSF_VERSION = "1.4.0"
DETECTION_FINDING = 2004  # class_uid
FINDINGS_CATEGORY = 2  # category_uid
ACTIVITY_CREATE = 1
SEVERITY_NAME = {1: "Informational", 2: "Low", 3: "Medium", 4: "High", 5: "Critical"}
STATUS_NEW = 1
ANALYTIC_RULE = 1  # finding_info.analytic.type_id
DIRECTION_UNKNOWN = 0  # connection_info.direction_id: no network boundary is known here
TCP = 6  # connection_info.protocol_num (IANA protocol number)
# observable.type_id
OBSERVABLE_IP = 2
OBSERVABLE_PORT = 11
OBSERVABLE_OTHER = 99


def _endpoint(ip: str | None, port: int | None) -> dict[str, object]:
    # network_endpoint needs an ip (or a name); a port alone identifies nothing.
    return compact({"ip": ip, "port": port}) if ip else {}


def _evidence(f: Finding, flow: Flow) -> dict[str, object]:
    connection = None
    if flow.captured:
        connection = {
            "community_uid": flow.community_id,
            "protocol_name": "tcp",
            "protocol_num": TCP,
            "direction_id": DIRECTION_UNKNOWN,
            "direction": "Unknown",
        }
    return compact(
        {
            "connection_info": connection,
            "src_endpoint": _endpoint(flow.client_ip, flow.client_port),
            "dst_endpoint": _endpoint(flow.server_ip, flow.server_port),
            "data": {"evidence": f.evidence},
        }
    )


def _observables(f: Finding, flow: Flow) -> list[dict[str, object]]:
    """Pivot values, named by OCSF attribute path (dotted, no array index). A port is only
    observed with its address (``_endpoint``)."""
    found: list[tuple[str, int, str, object]] = []
    for side, ip, port in (
        ("src", flow.client_ip, flow.client_port),
        ("dst", flow.server_ip, flow.server_port),
    ):
        if ip:
            found.append((f"evidences.{side}_endpoint.ip", OBSERVABLE_IP, "IP Address", ip))
            found.append((f"evidences.{side}_endpoint.port", OBSERVABLE_PORT, "Port", port))
    found.append(
        ("evidences.connection_info.community_uid", OBSERVABLE_OTHER, "Other", flow.community_id)
    )
    if not f.session_inferred:
        found.append(("unmapped.sse_forensics.session_id", OBSERVABLE_OTHER, "Other", f.session_id))
    return [
        {"name": name, "type_id": type_id, "type": type_name, "value": str(value)}
        for name, type_id, type_name, value in found
        if value is not None and value != ""
    ]


def ocsf_record(f: Finding, incident: str | None = None) -> dict[str, object]:
    """One finding as a Detection Finding. ``incident``: the id of its incident
    (:mod:`sse_forensics.engine.incidents`), as ``metadata.correlation_uid``: the findings
    of one loss share it, ``metadata.uid`` stays one per finding."""
    flow = observed_flow(f)
    ts = finding_time(f)
    # ``time`` is required: 0 only for a finding with no time at all (a log without times).
    time_ms = round(ts * 1000) if ts is not None else 0
    severity_id = SEVERITY_ID.get(f.severity, 0)
    metadata: dict[str, object] = {
        "version": OCSF_VERSION,
        "product": {
            "name": "sse-forensics",
            "vendor_name": "sse-forensics",
            "version": __version__,
        },
        "uid": f.fingerprint,
    }
    if incident is not None:
        metadata["correlation_uid"] = incident
    record: dict[str, object] = {
        "class_uid": DETECTION_FINDING,
        "class_name": "Detection Finding",
        "category_uid": FINDINGS_CATEGORY,
        "category_name": "Findings",
        "activity_id": ACTIVITY_CREATE,
        "activity_name": "Create",
        "type_uid": DETECTION_FINDING * 100 + ACTIVITY_CREATE,
        "type_name": "Detection Finding: Create",
        "severity_id": severity_id,
        "severity": SEVERITY_NAME.get(severity_id, "Unknown"),
        "status_id": STATUS_NEW,
        "status": "New",
        "is_alert": True,
        "time": time_ms,
        "message": f.message,
        "metadata": metadata,
        "finding_info": compact(
            {
                "uid": f.fingerprint,
                "title": f.title,
                "desc": f.message,
                "types": [f.classification],
                "first_seen_time": time_ms if ts is not None else None,
                "data_sources": data_sources(f),
                "analytic": compact(
                    {
                        "uid": f.rule,
                        "name": f.title,
                        "desc": f.rule_description,
                        "category": f.rule_table,
                        "type_id": ANALYTIC_RULE,
                        "type": "Rule",
                    }
                ),
            }
        ),
        "evidences": [_evidence(f, flow)],
        "observables": _observables(f, flow),
    }
    if f.remediation:
        references = list(dict.fromkeys(r for r in (rule_reference(f), *f.references) if r))
        record["remediation"] = compact({"desc": f.remediation, "references": references})
    record["unmapped"] = {
        "sse_forensics": {
            "classification": f.classification,
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
            "ruleset": f.ruleset or None,
        }
    }
    if not record["observables"]:
        del record["observables"]
    return record


def findings_ocsf(findings: list[Finding]) -> bytes:
    """One record per finding, each with its incident's id (``correlation_uid``)."""
    of = incident_of(group_incidents(findings))
    return b"".join(orjson.dumps(ocsf_record(f, of.get(f.fingerprint))) + b"\n" for f in findings)
