"""What the two SIEM shapes of a finding share (ECS in ``jsonout``, OCSF in ``ocsf``): the
flow as the evidence shows it, with nothing made up, and how the rule is named.

A finding judged from logs alone sits on a pseudo-connection (``evidence/from_logs.py``):
its Community ID reads ``log:…``, its ports are 0 and its server address is a placeholder.
None of that is an observation, so none of it reaches a SIEM: a field the evidence does not
give is left out. An access log's client address is an observation and is kept.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass

from sse_forensics.engine.finding import Finding

# Community ID v1 (corelight/community-id-spec): "1:" + base64 of a SHA-1 digest (20 bytes).
COMMUNITY_ID = re.compile(r"^1:[A-Za-z0-9+/]{27}=$")
PACKAGED_RULESET = "sse-forensics"
RULES_DOC = "docs/rules.md"
# Finding severity as a number: OCSF severity_id (1 Informational … 5 Critical), also ECS
# event.severity.
SEVERITY_ID = {"info": 1, "low": 2, "medium": 3, "high": 4, "critical": 5}


def ip_or_none(value: object) -> str | None:
    """``value`` if it is an IPv4 or IPv6 address (as ECS ``ip`` and OCSF ``ip_t`` need)."""
    if not isinstance(value, str):
        return None
    try:
        return str(ipaddress.ip_address(value))
    except ValueError:
        return None


def port_or_none(value: object) -> int | None:
    """``value`` if it is a TCP port a connection can use (1-65535); 0 is no observation."""
    if isinstance(value, int) and not isinstance(value, bool) and 0 < value <= 65535:
        return value
    return None


@dataclass(frozen=True, slots=True)
class Flow:
    """The connection a finding is about, as far as the evidence shows it."""

    community_id: str | None = None  # set only for a TCP connection a capture showed
    client_ip: str | None = None
    client_port: int | None = None
    server_ip: str | None = None
    server_port: int | None = None

    @property
    def captured(self) -> bool:
        return self.community_id is not None

    @property
    def ips(self) -> list[str]:
        return list(dict.fromkeys(ip for ip in (self.client_ip, self.server_ip) if ip))

    @property
    def ip_type(self) -> str | None:
        """ECS ``network.type``: ``ipv4`` or ``ipv6``, when both ends agree."""
        versions = {ipaddress.ip_address(ip).version for ip in self.ips}
        return f"ipv{versions.pop()}" if len(versions) == 1 else None


def observed(
    community_id: str | None,
    client: tuple[str | None, int | None],
    server: tuple[str | None, int | None],
) -> Flow:
    """A connection as far as the evidence shows it: no placeholder of a log's
    pseudo-connection survives."""
    return Flow(
        community_id=community_id if community_id and COMMUNITY_ID.match(community_id) else None,
        client_ip=ip_or_none(client[0]),
        client_port=port_or_none(client[1]),
        server_ip=ip_or_none(server[0]),
        server_port=port_or_none(server[1]),
    )


def observed_flow(f: Finding) -> Flow:
    return observed(f.community_id, f.client, f.server)


def finding_time(f: Finding) -> float | None:
    """The finding's capture time, else its earliest evidence's. A log line without a time
    is recorded at 0.0 (``evidence/from_logs.py``): that is no time, not 1970."""
    if f.ts is not None and f.ts > 0:
        return f.ts
    times = [t for e in f.evidence if isinstance(t := e.get("ts"), int | float) and t > 0]
    return min(times, default=None)


def rule_reference(f: Finding) -> str | None:
    """Where the rule is explained: its section of docs/rules.md for a packaged rule, else
    the first reference its file lists."""
    if f.ruleset == PACKAGED_RULESET:
        return f"{RULES_DOC}#{f.rule}"
    return f.references[0] if f.references else None


def data_sources(f: Finding) -> list[str]:
    """What the evidence came from: ``capture`` (frames) and/or ``log`` (log lines)."""
    frames = any("frame" in e for e in f.evidence)
    lines = any("line" in e for e in f.evidence)
    return [kind for kind, seen in (("capture", frames), ("log", lines)) if seen]


def compact(value: dict[str, object]) -> dict[str, object]:
    """``value`` without the keys whose value is unknown (None) or empty."""
    return {k: v for k, v in value.items() if v is not None and v != {} and v != [] and v != ""}
