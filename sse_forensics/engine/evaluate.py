"""Run rules over fact tables and turn the matching rows into findings."""

from __future__ import annotations

import hashlib
import string
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import polars as pl

from sse_forensics.engine.finding import Finding
from sse_forensics.engine.registry import RuleSet, packaged_rules_dir
from sse_forensics.engine.rule import Rule
from sse_forensics.verdicts import CONTRACT_VIOLATION, EVIDENCE_KINDS, severity_for

# A fact table: held, a query, or queries over its rows in order (the ``events`` table of a
# partition judged slice by slice, issue 16), each run by itself.
Table = pl.DataFrame | pl.LazyFrame | list[pl.LazyFrame]

_FORMATTER = string.Formatter()
GAP_KEYS = ("first", "last", "count")


class _Row(dict[str, Any]):
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
    """Stable across runs and input order: the rule id, the row's identifying columns
    (never timestamps or frame numbers) and where the row was seen — its response
    (``response_stream``), else its connection (Community ID). The last part tells apart
    two findings that agree on every column the rule names: one resume seen on both legs of
    a proxy, or retried on two connections, is two findings with two ids."""
    parts = [rule.id, *(f"{c}={row.get(c)!s}" for c in rule.fingerprint)]
    parts.append(f"seen_on={row.get('response_stream') or row.get('community_id')!s}")
    return hashlib.sha256("\x1f".join(parts).encode("utf-8", "surrogatepass")).hexdigest()[:32]


def rule_summary(rule: Rule) -> str:
    """The first paragraph of the rule's rationale ("What it does: …") on one line."""
    first = rule.rationale.strip().split("\n\n", 1)[0]
    text = " ".join(first.split()).removeprefix("What it does:").strip()
    return text[:1].upper() + text[1:]


def ruleset(rule: Rule) -> str:
    """``sse-forensics`` for a packaged rule, else the name of the ``--rules`` folder."""
    if not rule.path:
        return ""
    folder = Path(rule.path).parent
    return "sse-forensics" if folder.resolve() == packaged_rules_dir().resolve() else folder.name


def evaluate_rule(rule: Rule, table: Table) -> list[Finding]:
    """The findings of ``rule`` over ``table``; a lazy table (a partition's ``events``,
    ``facts.build.Facts.events_plan``) is filtered by the streaming engine, so only the
    matching rows are ever held; a table in parts, part by part."""
    if isinstance(table, list):
        parts = [part.filter(rule.predicate()).collect() for part in table]
        matched = pl.concat(parts) if parts else pl.DataFrame()
    elif isinstance(table, pl.LazyFrame):
        matched = table.filter(rule.predicate()).collect(engine="streaming")
    else:
        matched = table.filter(rule.predicate())
    return _findings(rule, matched)


def _findings(rule: Rule, matched: pl.DataFrame) -> list[Finding]:
    """A finding per row of ``matched``: the rows of its table ``rule`` selected."""
    lost_nothing = [False] * matched.height
    if rule.contract_violation_when is not None and matched.height:
        lost_nothing = (
            matched.select(pl.sql_expr(rule.contract_violation_when).fill_null(False))
            .to_series()
            .to_list()
        )
    findings: list[Finding] = []
    if not matched.height:
        return findings
    # The same for every finding of the rule: worked out once (``ruleset`` reads the disk).
    summary, origin = rule_summary(rule), ruleset(rule)
    for row, cost_nothing in zip(matched.to_dicts(), lost_nothing, strict=True):
        classification = rule.classification or row.get(rule.classification_from or "")
        if cost_nothing:
            classification = CONTRACT_VIOLATION
        evidence: list[dict[str, Any]] = []
        for column in rule.evidence:  # list-of-struct columns (facts.tables.EVIDENCE)
            value = row.get(column)
            if isinstance(value, list):
                evidence.extend(e for e in value if isinstance(e, dict))
        evidence = _distinct([{k: v for k, v in e.items() if v is not None} for e in evidence])
        classification = str(classification)
        # A contract violation lost nothing: it names no gap, whatever the row holds.
        gap = (
            dict.fromkeys(GAP_KEYS)
            if classification == CONTRACT_VIOLATION
            else {k: row.get(c) for k, c in zip(GAP_KEYS, rule.gap_columns, strict=True)}
        )
        findings.append(
            Finding(
                rule=rule.id,
                title=rule.title,
                classification=classification,
                severity=severity_for(rule.severity, classification),
                session_id=row.get("session_id"),
                session_inferred=bool(row.get("session_inferred")),
                stream=row.get("stream"),
                stream_label=row.get("stream_label"),
                id_scheme=row.get("id_scheme"),
                counter_scope=row.get("counter_scope"),
                location=row.get("location") or ("resume" if rule.table == "resumes" else None),
                last_event_id=row.get("last_event_id"),
                gap=gap,
                evidence=evidence,
                message=render_message(rule.message_for(classification), row),
                fingerprint=fingerprint(rule, row),
                references=list(rule.references),
                ts=row.get("ts", row.get("ts_first")),
                cause=row.get("cause"),
                community_id=row.get("community_id"),
                client=(row.get("client_ip"), row.get("client_port")),
                server=(row.get("server_ip"), row.get("server_port")),
                rule_description=summary,
                remediation=rule.remediation_for(classification),
                ruleset=origin,
                rule_table=rule.table,
                opened_by=row.get("opened_by"),
            )
        )
    return findings


def _distinct(evidence: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each piece of evidence once, in first-cited order: a missing span or an event a row
    cites twice (say, as the gap's edge and as its cause) is one fact."""
    seen: set[tuple[Any, ...]] = set()
    out = []
    for e in evidence:
        key = tuple(sorted((k, repr(v)) for k, v in e.items()))
        if key not in seen:
            seen.add(key)
            out.append(e)
    return out


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
    tables: Mapping[str, Table],
    provided: frozenset[str] = frozenset(EVIDENCE_KINDS),
) -> tuple[list[Finding], list[dict[str, object]]]:
    """Every rule the evidence can judge, over its table; findings sorted most severe
    first, then by time. Also returns the rules not judged, with the evidence they lack
    (a scan of access logs alone cannot see replayed event IDs, say)."""
    findings: list[Finding] = []
    not_judged: list[dict[str, object]] = []
    judged: list[Rule] = []
    for rule in rules.rules:
        lacking = [n for n in rule.needs if n not in provided]
        if lacking:
            not_judged.append({"rule": rule.id, "lacks": lacking})
        else:
            judged.append(rule)
    # The rules over tables already held are filtered together, in one polars call.
    # A table without rows matches none: not queried (a small scan has several).
    held = {n: tables[r.table] for n, r in enumerate(judged)}
    frames = {n: t for n, t in held.items() if isinstance(t, pl.DataFrame)}
    eager = [n for n, t in frames.items() if t.height]
    queries = [frames[n].lazy().filter(judged[n].predicate()) for n in eager]
    matched = dict(zip(eager, pl.collect_all(queries) if queries else [], strict=True))
    matched.update((n, t) for n, t in held.items() if isinstance(t, pl.DataFrame) and not t.height)
    for n, rule in enumerate(judged):
        rows = matched.get(n)
        findings.extend(
            evaluate_rule(rule, tables[rule.table]) if rows is None else _findings(rule, rows)
        )
    findings.sort(key=Finding.sort_key)
    return findings, not_judged
