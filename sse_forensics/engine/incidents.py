"""Incidents: the findings about one loss, together (issue 12, "one incident per lost range").

One lost range fires several rules (``resume-in-gap-2xx``, ``silent-resume-jump`` and
``client-accepted-gap`` name the same 8..12), a resume storm fires one rule per attempt, and
a capture taken on a proxy host shows every stream twice (client ↔ proxy and proxy ↔
server, same session ID). An incident is one of those losses:

- one per session + logical stream + lost range: findings whose ranges overlap on the same
  stream of the same session. The stream is named by the request that opened it
  (``opened_by``: the same on both legs of a proxy), else by its key;
- one per session + rule for findings with no range (a ``contract_violation`` names none).

It carries the rules that fired (identical findings collapsed with a count), the most
alarming verdict among them, the cause, the evidence once, the connections it was seen on
and a fingerprint that is stable across runs and input order (it never includes frame
numbers, times or file names), so a re-scan updates a ticket instead of opening another.

Grouping is columnar: one row per finding, ranges read as (prefix, counter) in polars,
overlapping ranges merged by a running maximum over the sorted rows; no finding is compared
with every other.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from sse_forensics.engine.finding import Finding
from sse_forensics.verdicts import CONTRACT_VIOLATION, SEVERITIES, classification_rank

# An ID read as a prefix and a trailing counter (``8`` → ("", 8); ``s1_8`` → ("s1_", 8)).
# Opaque IDs allow no arithmetic: their counter is null and only an equal first ID overlaps.
_COUNTER = r"(\d{1,18})$"
NO_CAUSE = "unknown"


@dataclass(frozen=True, slots=True)
class RuleCount:
    """Findings of one rule and verdict in an incident: identical findings collapsed."""

    rule: str
    title: str
    classification: str
    severity: str
    count: int
    finding_ids: tuple[str, ...]
    message: str  # the most alarming one's
    remediation: str
    references: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Connection:
    """A connection an incident's findings were seen on (one per leg of a proxy)."""

    community_id: str | None
    client: tuple[str | None, int | None]
    server: tuple[str | None, int | None]


@dataclass(slots=True)
class Incident:
    fingerprint: str
    findings: list[Finding]  # most alarming first (the engine's order)
    gap: dict[str, object]  # first, last, count; all None for an incident with no range
    rules: list[RuleCount] = field(default_factory=list)

    @property
    def lead(self) -> Finding:
        """The most alarming finding: its session, stream and scheme are the incident's."""
        return self.findings[0]

    @property
    def has_range(self) -> bool:
        return self.gap.get("first") is not None

    @property
    def classification(self) -> str:
        return self.lead.classification

    @property
    def severity(self) -> str:
        return max(
            (f.severity for f in self.findings if f.classification == self.classification),
            key=lambda s: SEVERITIES.index(s) if s in SEVERITIES else -1,
        )

    @property
    def session_id(self) -> str | None:
        return self.lead.session_id

    @property
    def location(self) -> str | None:
        return next((f.location for f in self.findings if f.location), None)

    @property
    def cause(self) -> str | None:
        """The cause a finding named on its evidence; ``unknown`` if they only say that."""
        causes = [f.cause for f in self.findings if f.cause]
        return next((c for c in causes if c != NO_CAUSE), causes[0] if causes else None)

    @property
    def ts(self) -> float | None:
        times = [f.ts for f in self.findings if f.ts]
        return min(times) if times else None

    @property
    def evidence(self) -> list[dict[str, object]]:
        """Every finding's evidence, each entry once, in first-cited order."""
        seen: set[tuple[Any, ...]] = set()
        out = []
        for f in self.findings:
            for e in f.evidence:
                key = tuple(sorted((k, repr(v)) for k, v in e.items()))
                if key not in seen:
                    seen.add(key)
                    out.append(e)
        return out

    @property
    def connections(self) -> list[Connection]:
        """The connections the findings were seen on, each once (both legs of a proxy)."""
        seen = dict.fromkeys(Connection(f.community_id, f.client, f.server) for f in self.findings)
        return list(seen)

    @property
    def servers(self) -> list[tuple[str | None, int | None]]:
        """The servers, upstream first: a server whose address is also a client of another
        connection of the incident is a proxy in front of the real one."""
        conns = self.connections
        clients = {c.client[0] for c in conns if c.client[0]}
        servers = list(dict.fromkeys(c.server for c in conns))
        return sorted(servers, key=lambda s: s[0] in clients)


def _counter_parts(column: str) -> list[pl.Expr]:
    """``column`` as (prefix, counter): the trailing digits of an ``int`` or ``prefixed`` ID."""
    value = pl.col(column)
    arithmetic = pl.col("id_scheme").is_in(["int", "prefixed"])
    seq = value.str.extract(_COUNTER, 1).cast(pl.Int64, strict=False)
    prefix = value.str.replace(_COUNTER, "")
    return [
        pl.when(arithmetic & seq.is_not_null()).then(prefix).otherwise(value).alias(f"{column}_p"),
        pl.when(arithmetic).then(seq).alias(f"{column}_n"),
    ]


def _keys(findings: list[Finding]) -> pl.DataFrame:
    """One row per finding with the group it belongs to (``group``)."""
    rows = pl.DataFrame(
        {
            "i": list(range(len(findings))),
            "session": [f.session_id for f in findings],
            "stream": [f.opened_by or f.stream for f in findings],
            "rule": [f.rule for f in findings],
            "id_scheme": [f.id_scheme for f in findings],
            "first": [f.gap.get("first") for f in findings],
            "last": [f.gap.get("last") for f in findings],
        },
        schema={
            "i": pl.Int64,
            "session": pl.String,
            "stream": pl.String,
            "rule": pl.String,
            "id_scheme": pl.String,
            "first": pl.String,
            "last": pl.String,
        },
    ).with_columns(pl.col("first").cast(pl.String), pl.col("last").cast(pl.String))
    rows = rows.with_columns(*_counter_parts("first"), *_counter_parts("last"))
    # A range's end: its last ID's counter under the same prefix, else its first's.
    rows = rows.with_columns(
        pl.when(pl.col("last_n").is_not_null() & (pl.col("last_p") == pl.col("first_p")))
        .then(pl.max_horizontal("first_n", "last_n"))
        .otherwise(pl.col("first_n"))
        .alias("end_n")
    )
    ranged = rows.filter(pl.col("first").is_not_null())
    part = ["session", "stream", "first_p"]
    ranged = ranged.sort([*part, "first_n", "end_n"], nulls_last=True).with_columns(
        # Opaque IDs (no counter) overlap only when their first IDs are equal.
        pl.col("first_n").fill_null(0).alias("lo"),
        pl.col("end_n").fill_null(0).alias("hi"),
    )
    reach = pl.col("hi").cum_max().shift(1).over(part)
    starts = reach.is_null() | (pl.col("lo") > reach)
    ranged = ranged.with_columns(starts.alias("starts")).with_columns(
        pl.format("range:{}", pl.col("starts").cum_sum()).alias("group")
    )
    unranged = rows.filter(pl.col("first").is_null()).with_columns(
        pl.format("rule:{}:{}", pl.col("session").fill_null(""), pl.col("rule")).alias("group")
    )
    return pl.concat([ranged.select("i", "group"), unranged.select("i", "group")])


def _fingerprint(first: Finding, anchor: str | None) -> str:
    """Session, stream (by the request that opened it, else its key) and the first lost ID;
    or session and rule for an incident with no range."""
    if anchor is None:
        parts = ["incident", f"session={first.session_id!s}", f"rule={first.rule}"]
    else:
        stream = first.opened_by or first.stream
        parts = ["incident", f"session={first.session_id!s}", f"stream={stream!s}"]
        parts.append(f"first={anchor}")
    return hashlib.sha256("\x1f".join(parts).encode("utf-8", "surrogatepass")).hexdigest()[:32]


def _span(members: list[Finding]) -> dict[str, object]:
    """The incident's range: from its earliest first ID to its furthest last ID (as the
    findings spell them); the count when one finding names exactly that range."""
    ranged = [f for f in members if f.gap.get("first") is not None]
    if not ranged:
        return {"first": None, "last": None, "count": None}
    first = min(ranged, key=lambda f: _order(f, "first")).gap["first"]
    ends = [f for f in ranged if f.gap.get("last") is not None]
    last = max(ends, key=lambda f: _order(f, "last")).gap["last"] if ends else None
    count = next(
        (
            f.gap.get("count")
            for f in ranged
            if f.gap.get("first") == first and f.gap.get("last") == last
        ),
        None,
    )
    return {"first": first, "last": last, "count": count}


def _order(f: Finding, key: str) -> tuple[Any, ...]:
    value = str(f.gap.get(key))
    digits = len(value) - len(value.rstrip("0123456789"))
    counter = int(value[-digits:]) if digits and f.id_scheme in ("int", "prefixed") else -1
    return (counter, value)


def _rule_counts(members: list[Finding]) -> list[RuleCount]:
    """Findings of the same rule and verdict, collapsed with a count (most alarming first)."""
    grouped: dict[tuple[str, str], list[Finding]] = {}
    for f in members:
        grouped.setdefault((f.rule, f.classification), []).append(f)
    return [
        RuleCount(
            rule=same[0].rule,
            title=same[0].title,
            classification=same[0].classification,
            severity=same[0].severity,
            count=len(same),
            finding_ids=tuple(f.fingerprint for f in same),
            message=same[0].message,
            remediation=same[0].remediation,
            references=tuple(same[0].references),
        )
        for same in grouped.values()
    ]


def group_incidents(findings: list[Finding]) -> list[Incident]:
    """The incidents of a scan's findings, most alarming first (verdict, severity, time)."""
    if not findings:
        return []
    ordered = sorted(findings, key=Finding.sort_key)
    groups = (
        _keys(ordered)
        .group_by("group", maintain_order=True)
        .agg(pl.col("i").sort())
        .get_column("i")
        .to_list()
    )
    incidents = []
    for members_at in groups:
        members = [ordered[i] for i in members_at]
        gap = _span(members)
        anchor = None if gap["first"] is None else str(gap["first"])
        incidents.append(
            Incident(
                fingerprint=_fingerprint(members[0], anchor),
                findings=members,
                gap=gap,
                rules=_rule_counts(members),
            )
        )
    incidents.sort(key=_incident_order)
    return incidents


def _incident_order(incident: Incident) -> tuple[Any, ...]:
    severity = SEVERITIES.index(incident.severity) if incident.severity in SEVERITIES else 0
    return (
        -classification_rank(incident.classification),
        -severity,
        incident.ts or 0.0,
        incident.fingerprint,
    )


def incident_of(incidents: list[Incident]) -> dict[str, str]:
    """Each finding's id → its incident's id (ECS ``sse_forensics.incident.id``, OCSF
    ``metadata.correlation_uid``)."""
    return {f.fingerprint: i.fingerprint for i in incidents for f in i.findings}


@dataclass(frozen=True, slots=True)
class Summary:
    """What the incidents add up to: "3 lost ranges in 2 sessions, 7 findings"."""

    incidents: int
    lost_ranges: int
    contract_violations: int
    other: int  # incidents with neither a range nor a contract violation
    sessions: int
    findings: int
    verdicts: dict[str, int]  # incidents per verdict

    def text(self) -> str:
        parts = []
        if self.lost_ranges or not self.incidents:
            parts.append(_plural(self.lost_ranges, "lost range"))
        if self.contract_violations:
            parts.append(_plural(self.contract_violations, "contract violation"))
        if self.other:
            parts.append(_plural(self.other, "other incident"))
        what = " and ".join(parts)
        return f"{what} in {_plural(self.sessions, 'session')}, {_plural(self.findings, 'finding')}"

    def as_dict(self) -> dict[str, object]:
        return {
            "text": self.text(),
            "incidents": self.incidents,
            "lost_ranges": self.lost_ranges,
            "contract_violations": self.contract_violations,
            "other": self.other,
            "sessions": self.sessions,
            "findings": self.findings,
            "verdicts": self.verdicts,
        }


def _plural(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


def summarize(incidents: list[Incident]) -> Summary:
    ranged = sum(1 for i in incidents if i.has_range)
    violations = sum(
        1 for i in incidents if not i.has_range and i.classification == CONTRACT_VIOLATION
    )
    verdicts: dict[str, int] = {}
    for i in incidents:
        verdicts[i.classification] = verdicts.get(i.classification, 0) + 1
    return Summary(
        incidents=len(incidents),
        lost_ranges=ranged,
        contract_violations=violations,
        other=len(incidents) - ranged - violations,
        sessions=len({f.session_id for i in incidents for f in i.findings}),
        findings=sum(len(i.findings) for i in incidents),
        verdicts=verdicts,
    )
