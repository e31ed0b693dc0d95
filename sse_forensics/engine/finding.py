"""The finding: one answer to "which session lost which events, and was it signalled?",
shaped to drop into a ticket (``docs/findings.md`` documents the JSON; its JSON Schema is
``docs/schemas/finding.schema.json``).

Flow fields follow ECS (``network.community_id``, ``source.ip``, ``destination.port``,
``event.start``) so SIEMs ingest the JSONL as it is.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime

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

    def as_dict(self) -> dict[str, object]:
        return {
            "rule": self.rule,
            "title": self.title,
            "classification": self.classification,
            "severity": self.severity,
            "session_id": self.session_id,
            "session_inferred": self.session_inferred,
            "stream": self.stream,
            "stream_label": self.stream_label,
            "id_scheme": self.id_scheme,
            "counter_scope": self.counter_scope,
            "location": self.location,
            "last_event_id": self.last_event_id,
            "gap": self.gap,
            "cause": self.cause,
            "message": self.message,
            "evidence": self.evidence,
            "fingerprint": self.fingerprint,
            "references": self.references,
            "event": {"start": iso_time(self.ts), "kind": "alert", "category": ["network"]},
            "network": {"community_id": self.community_id, "transport": "tcp", "protocol": "http"},
            "source": {"ip": self.client[0], "port": self.client[1]},
            "destination": {"ip": self.server[0], "port": self.server[1]},
        }

    def sort_key(self) -> tuple:
        severity = SEVERITIES.index(self.severity) if self.severity in SEVERITIES else 0
        return (
            -classification_rank(self.classification),
            -severity,
            self.ts or 0.0,
            self.rule,
            self.fingerprint,
        )
