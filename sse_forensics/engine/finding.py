"""The finding: one answer to "which session lost which events, and was it signalled?",
shaped to drop into a ticket (``docs/findings.md`` documents the JSON)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from sse_forensics.verdicts import SEVERITIES, classification_rank


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

    def as_dict(self) -> dict[str, object]:
        return asdict(self)

    def sort_key(self) -> tuple:
        severity = SEVERITIES.index(self.severity) if self.severity in SEVERITIES else 0
        return (-classification_rank(self.classification), -severity, self.ts or 0.0, self.rule)
