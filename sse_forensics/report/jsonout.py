"""Machine-readable output: ``--format json`` (one document) and ``jsonl`` (one finding per
line). orjson writes any string as valid JSON, whatever bytes the capture held."""

from __future__ import annotations

from collections import Counter

import orjson

from sse_forensics import __version__
from sse_forensics.pipeline import ScanResult

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


def findings_jsonl(result: ScanResult) -> bytes:
    return b"".join(orjson.dumps(f.as_dict(), option=_OPTS) + b"\n" for f in result.findings)


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
        "findings": [f.as_dict() for f in result.findings],
        "errors": [e.as_dict() for e in result.errors],
        "rule_errors": result.rule_errors,
        "not_judged": result.not_judged,
    }
    return orjson.dumps(doc, option=_OPTS | orjson.OPT_INDENT_2) + b"\n"
