"""Findings as OCSF Detection Finding records (class 2004, OCSF 1.3), one JSON object per
line, for Security Lake and SIEM pipelines that normalise to OCSF. The sse-forensics
specifics (verdict, gap, evidence) travel in ``unmapped``."""

from __future__ import annotations

import orjson

from sse_forensics import __version__
from sse_forensics.engine.finding import Finding

OCSF_VERSION = "1.3.0"
DETECTION_FINDING = 2004  # class_uid
FINDINGS_CATEGORY = 2  # category_uid
ACTIVITY_CREATE = 1
# OCSF severity_id: 1 Informational, 2 Low, 3 Medium, 4 High, 5 Critical.
SEVERITY_ID = {"info": 1, "low": 2, "medium": 3, "high": 4, "critical": 5}
ANALYTIC_RULE = 1  # finding_info.analytic.type_id


def _endpoint(ip: str | None, port: int | None) -> dict[str, object]:
    return {k: v for k, v in (("ip", ip), ("port", port)) if v is not None}


def ocsf_record(f: Finding) -> dict[str, object]:
    time_ms = round((f.ts or 0.0) * 1000)
    severity_id = SEVERITY_ID.get(f.severity, 0)
    return {
        "class_uid": DETECTION_FINDING,
        "class_name": "Detection Finding",
        "category_uid": FINDINGS_CATEGORY,
        "category_name": "Findings",
        "activity_id": ACTIVITY_CREATE,
        "activity_name": "Create",
        "type_uid": DETECTION_FINDING * 100 + ACTIVITY_CREATE,
        "severity_id": severity_id,
        "severity": f.severity.capitalize() if f.severity != "info" else "Informational",
        "status_id": 1,
        "status": "New",
        "time": time_ms,
        "message": f.message,
        "metadata": {
            "version": OCSF_VERSION,
            "product": {
                "name": "sse-forensics",
                "vendor_name": "sse-forensics",
                "version": __version__,
            },
            "uid": f.fingerprint,
        },
        "finding_info": {
            "uid": f.fingerprint,
            "title": f.title,
            "desc": f.message,
            "types": [f.classification],
            "first_seen_time": time_ms,
            "analytic": {"uid": f.rule, "name": f.rule, "type_id": ANALYTIC_RULE, "type": "Rule"},
        },
        "src_endpoint": _endpoint(*f.client),
        "dst_endpoint": _endpoint(*f.server),
        "unmapped": {
            "classification": f.classification,
            "session_id": f.session_id,
            "session_inferred": f.session_inferred,
            "stream": f.stream,
            "community_id": f.community_id,
            "id_scheme": f.id_scheme,
            "counter_scope": f.counter_scope,
            "last_event_id": f.last_event_id,
            "gap": f.gap,
            "cause": f.cause,
            "evidence": f.evidence,
        },
    }


def findings_ocsf(findings: list[Finding]) -> bytes:
    return b"".join(orjson.dumps(ocsf_record(f)) + b"\n" for f in findings)
