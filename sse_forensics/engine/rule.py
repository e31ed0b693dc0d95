"""A rule file: one detection, documented like a ruff rule (what it does, why it is bad,
an example, how to fix it). No Python in a rule: its predicate is an SQL boolean expression
over one fact table, compiled with ``polars.sql_expr`` so it runs vectorised."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from sse_forensics.facts.tables import TABLE_SCHEMAS
from sse_forensics.verdicts import (
    CAPTURE_ADVICE,
    CLASSIFICATIONS,
    EVIDENCE_KINDS,
    INDETERMINATE,
    SEVERITIES,
)

_REQUIRED = ("id", "title", "severity", "table", "where", "message", "rationale", "remediation")


class RuleError(Exception):
    """A rule file that cannot be used; ``str()`` says which file and why."""


@dataclass(frozen=True, slots=True)
class Rule:
    id: str
    title: str
    severity: str
    table: str
    where: str
    message: str
    rationale: str
    remediation: str
    classification: str | None = None  # a constant …
    classification_from: str | None = None  # … or a column holding one per row
    evidence: tuple[str, ...] = ("evidence",)
    fingerprint: tuple[str, ...] = ("session_id", "stream", "first", "last")
    gap_columns: tuple[str, str, str] = ("first", "last", "count")  # the finding's gap
    needs: tuple[str, ...] = tuple(EVIDENCE_KINDS)  # evidence it cannot be judged without
    example: str = ""
    references: tuple[str, ...] = ()
    path: str = ""
    # The message of an ``indeterminate`` finding: what the capture lacks, not what the
    # server did (capture loss is never server loss).
    indeterminate_message: str | None = None
    # An SQL predicate over the same table: where it holds, the fault cost no event (the
    # stream was recovered later, say) and the finding is a contract_violation, no gap.
    contract_violation_when: str | None = None

    def predicate(self) -> pl.Expr:
        return pl.sql_expr(self.where)

    def message_for(self, classification: str) -> str:
        if classification == INDETERMINATE and self.indeterminate_message:
            return self.indeterminate_message
        return self.message

    def remediation_for(self, classification: str) -> str:
        """What to do about a finding of this rule: capture advice when the capture, not
        the server, is what is known to be incomplete."""
        if classification == INDETERMINATE and self.classification != INDETERMINATE:
            return CAPTURE_ADVICE  # a rule about the evidence itself keeps its own advice
        return self.remediation


def load_rule(path: Path) -> Rule:
    """Parse and validate one rule file; raise :class:`RuleError` naming what is wrong."""
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise RuleError(f"{path}: cannot read rule file: {exc}") from None
    missing = [k for k in _REQUIRED if not isinstance(raw.get(k), str) or not raw[k].strip()]
    if missing:
        raise RuleError(f"{path}: missing or empty key(s): {', '.join(missing)}")
    table = raw["table"]
    if table not in TABLE_SCHEMAS:
        raise RuleError(f"{path}: unknown table {table!r} (one of {', '.join(TABLE_SCHEMAS)})")
    columns = TABLE_SCHEMAS[table]
    if raw["severity"] not in SEVERITIES:
        raise RuleError(f"{path}: severity must be one of {', '.join(SEVERITIES)}")
    classification = raw.get("classification")
    classification_from = raw.get("classification_from")
    if (classification is None) == (classification_from is None):
        raise RuleError(f"{path}: give exactly one of 'classification' or 'classification_from'")
    if classification is not None and classification not in CLASSIFICATIONS:
        raise RuleError(f"{path}: classification must be one of {', '.join(CLASSIFICATIONS)}")
    if classification_from is not None and classification_from not in columns:
        raise RuleError(f"{path}: classification_from names unknown column {classification_from!r}")
    for key in ("evidence", "fingerprint", "references"):
        value = raw.get(key, [])
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise RuleError(f"{path}: {key!r} must be a list of strings")
    for key in ("evidence", "fingerprint"):
        unknown = [c for c in raw.get(key, []) if c not in columns]
        if unknown:
            raise RuleError(f"{path}: {key} names unknown column(s) {', '.join(unknown)}")
    indeterminate_message = raw.get("indeterminate_message")
    if indeterminate_message is not None and (
        not isinstance(indeterminate_message, str) or not indeterminate_message.strip()
    ):
        raise RuleError(f"{path}: 'indeterminate_message' must be a non-empty string")
    contract_violation_when = raw.get("contract_violation_when")
    if contract_violation_when is not None and (
        not isinstance(contract_violation_when, str) or not contract_violation_when.strip()
    ):
        raise RuleError(f"{path}: 'contract_violation_when' must be a non-empty SQL predicate")
    needs = raw.get("needs", list(EVIDENCE_KINDS))
    if not isinstance(needs, list) or not set(needs) <= set(EVIDENCE_KINDS):
        raise RuleError(f"{path}: 'needs' is a list of {', '.join(EVIDENCE_KINDS)}")
    gap = raw.get("gap", {})
    if not isinstance(gap, dict) or set(gap) - {"first", "last", "count"}:
        raise RuleError(f"{path}: 'gap' maps first/last/count to column names")
    gap_columns = (gap.get("first", "first"), gap.get("last", "last"), gap.get("count", "count"))
    unknown = [c for c in gap.values() if c not in columns]
    if unknown:
        raise RuleError(f"{path}: gap names unknown column(s) {', '.join(unknown)}")
    rule = Rule(
        id=raw["id"],
        title=raw["title"],
        severity=raw["severity"],
        table=table,
        where=raw["where"],
        message=raw["message"],
        rationale=raw["rationale"].strip(),
        remediation=raw["remediation"].strip(),
        classification=classification,
        classification_from=classification_from,
        evidence=tuple(raw.get("evidence", ["evidence"])),
        fingerprint=tuple(raw.get("fingerprint", ["session_id", "stream", "first", "last"])),
        gap_columns=gap_columns,
        needs=tuple(needs),
        example=str(raw.get("example", "")).strip(),
        references=tuple(raw.get("references", [])),
        path=str(path),
        indeterminate_message=indeterminate_message,
        contract_violation_when=contract_violation_when,
    )
    try:  # compile against an empty table of the right schema: catches bad SQL and columns
        pl.DataFrame(schema=columns).filter(rule.predicate())
    except Exception as exc:  # polars raises several error types for bad SQL
        raise RuleError(f"{path}: predicate {rule.where!r} does not compile: {exc}") from None
    if contract_violation_when is not None:
        try:
            pl.DataFrame(schema=columns).filter(pl.sql_expr(contract_violation_when))
        except Exception as exc:
            raise RuleError(
                f"{path}: contract_violation_when {contract_violation_when!r} does not "
                f"compile: {exc}"
            ) from None
    return rule
