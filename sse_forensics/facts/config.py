"""What a user can tell the analyzer about their servers (docs/profile.md: "every name
here is the default; each one is configurable")."""

from __future__ import annotations

from dataclasses import dataclass

from sse_forensics.facts.ids import DEFAULT_PREFIXED, IdScheme
from sse_forensics.limits import DEFAULT_LIMITS, Limits


@dataclass(frozen=True, slots=True)
class AnalysisConfig:
    session_header: str = "Mcp-Session-Id"
    session_path_regex: str = r"/session/(?P<session>[^/]+)/"
    session_query_params: tuple[str, ...] = ("session_id", "sessionId")
    id_scheme: IdScheme | None = None  # None: auto-detect per session
    prefixed_regex: str = DEFAULT_PREFIXED
    protocol_version_header: str = "MCP-Protocol-Version"
    # NSS key log files (--tls-keylog) to decrypt TLS with (reassembly/tls).
    tls_keylog: tuple[str, ...] = ()
    # The caps on the work one input may cost (sse_forensics.limits, --limit).
    limits: Limits = DEFAULT_LIMITS
