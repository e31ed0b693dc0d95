"""Run rules over fact tables and turn the matching rows into findings."""

from __future__ import annotations

import hashlib
import string
from collections.abc import Mapping

import orjson
import polars as pl

from sse_forensics.engine.finding import Finding
from sse_forensics.engine.registry import RuleSet
from sse_forensics.engine.rule import Rule
from sse_forensics.verdicts import EVIDENCE_KINDS

_FORMATTER = string.Formatter()
GAP_KEYS = ("first", "last", "count")


class _Row(dict):
    """Template values: a missing or null column reads as ``?`` so a message never fails."""

    def __missing__(self, key: str) -> str:
        return "?"


def render_message(template: str, row: Mapping[str, object]) -> str:
    values = _Row({k: ("?" if v is None else v) for k, v in row.items() if k != "evidence"})
    try:
        return _FORMATTER.vformat(template, (), values)
    except (ValueError, IndexError, KeyError, AttributeError):
        return template


def fingerprint(rule: Rule, row: Mapping[str, object]) -> str:
    """Stable across runs and input order: the rule id and the row's identifying columns
    (never timestamps or frame numbers)."""
    parts = [rule.id, *(f"{c}={row.get(c)!s}" for c in rule.fingerprint)]
    return hashlib.sha256("\x1f".join(parts).encode("utf-8", "surrogatepass")).hexdigest()[:32]


def evaluate_rule(rule: Rule, table: pl.DataFrame) -> list[Finding]:
    rows = table.filter(rule.predicate()).to_dicts()
    findings = []
    for row in rows:
        classification = rule.classification or row.get(rule.classification_from or "")
        evidence: list[dict] = []
        for column in rule.evidence:
            value = row.get(column)
            if isinstance(value, str) and value.startswith("["):
                value = orjson.loads(value)  # evidence columns hold JSON arrays
            if isinstance(value, list):
                evidence.extend(e for e in value if isinstance(e, dict))
        evidence = [{k: v for k, v in e.items() if v is not None} for e in evidence]
        findings.append(
            Finding(
                rule=rule.id,
                title=rule.title,
                classification=str(classification),
                severity=rule.severity,
                session_id=row.get("session_id"),
                session_inferred=bool(row.get("session_inferred")),
                stream=row.get("stream"),
                stream_label=row.get("stream_label"),
                id_scheme=row.get("id_scheme"),
                counter_scope=row.get("counter_scope"),
                location=row.get("location") or ("resume" if rule.table == "resumes" else None),
                last_event_id=row.get("last_event_id"),
                gap={k: row.get(c) for k, c in zip(GAP_KEYS, rule.gap_columns, strict=True)},
                evidence=evidence,
                message=render_message(rule.message, row),
                fingerprint=fingerprint(rule, row),
                references=list(rule.references),
                ts=row.get("ts", row.get("ts_first")),
                cause=row.get("cause"),
                community_id=row.get("community_id"),
                client=(row.get("client_ip"), row.get("client_port")),
                server=(row.get("server_ip"), row.get("server_port")),
            )
        )
    return findings


def not_judged_rules(rules: RuleSet, provided: frozenset[str]) -> list[dict[str, object]]:
    """The rules the evidence cannot judge, with the evidence kinds they lack (a scan of
    access logs alone cannot see replayed event IDs, say)."""
    out: list[dict[str, object]] = []
    for rule in rules.rules:
        lacking = [n for n in rule.needs if n not in provided]
        if lacking:
            out.append({"rule": rule.id, "lacks": lacking})
    return out


def evaluate(
    rules: RuleSet,
    tables: Mapping[str, pl.DataFrame],
    provided: frozenset[str] = frozenset(EVIDENCE_KINDS),
) -> tuple[list[Finding], list[dict[str, object]]]:
    """Every rule the evidence can judge, over its table; findings sorted most severe
    first, then by time. Also returns the rules not judged, with the evidence they lack
    (a scan of access logs alone cannot see replayed event IDs, say)."""
    findings: list[Finding] = []
    not_judged: list[dict[str, object]] = []
    for rule in rules.rules:
        lacking = [n for n in rule.needs if n not in provided]
        if lacking:
            not_judged.append({"rule": rule.id, "lacks": lacking})
            continue
        findings.extend(evaluate_rule(rule, tables[rule.table]))
    findings.sort(key=Finding.sort_key)
    return findings, not_judged
