"""The finding: one answer to "which session lost which events, and was it signalled?",
shaped to drop into a ticket. Its JSON forms live in ``report/``: an ECS document
(``report/jsonout.py``, schema ``docs/schemas/finding.schema.json``) and an OCSF Detection
Finding (``report/ocsf.py``); ``docs/findings.md`` documents both.

``fingerprint`` is the finding's identity (ECS ``event.id``, OCSF ``finding_info.uid``):
stable across runs, built from the rule's identifying columns and where the finding was
seen, so that two findings of a scan never share it (``engine.evaluate.fingerprint``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from sse_forensics.verdicts import SEVERITIES, classification_rank


def iso_time(ts: float | None) -> str | None:
    """Capture time as RFC 3339 UTC with microseconds (never wall-clock time)."""
    if ts is None:
        return None
    return datetime.fromtimestamp(ts, UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


@dataclass(slots=True)
class Finding:
    rule: str
    title: str
    classification: str
    severity: str
    session_id: str | None
    session_inferred: bool
    stream: str | None
    stream_label: str | None
    id_scheme: str | None
    counter_scope: str | None
    location: str | None
    last_event_id: str | None
    gap: dict[str, object]
    evidence: list[dict[str, object]]
    message: str
    fingerprint: str
    references: list[str] = field(default_factory=list)
    ts: float | None = None
    cause: str | None = None
    community_id: str | None = None
    client: tuple[str | None, int | None] = (None, None)
    server: tuple[str | None, int | None] = (None, None)
    # What a SIEM shows of the rule (ECS ``rule.*``, OCSF ``finding_info.analytic``).
    rule_description: str = ""  # the rule's "What it does", one paragraph
    remediation: str = ""
    ruleset: str = ""  # "sse-forensics" for the packaged rules, else the --rules folder's name
    rule_table: str = ""  # the fact table the rule reads: its category
    # The request that opened the logical stream, as every leg of a proxy shows it
    # (``facts.streams.opened_by``): what tells one stream seen on two connections.
    opened_by: str | None = None

    def sort_key(self) -> tuple[Any, ...]:
        severity = SEVERITIES.index(self.severity) if self.severity in SEVERITIES else 0
        return (
            -classification_rank(self.classification),
            -severity,
            self.ts or 0.0,
            self.rule,
            self.fingerprint,
        )
