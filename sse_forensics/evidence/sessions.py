"""Which MCP session each exchange belongs to (docs/profile.md, "Sessions and streams"), decided
once at ingest because the session is the key the scan is partitioned by.

1. the ``Mcp-Session-Id`` header (set on the ``initialize`` response, echoed on every later
   request); 2. a path segment matched by a configurable regex, or a ``session_id`` query
   parameter (the 2024-11-05 HTTP+SSE transport), or that transport's ``endpoint`` event;
   3. the client's TCP connection group (same client address, same server) — ``inferred``.

On one connection, exchanges before the first one that names a session (the ``initialize``
request travels before the server assigns one) belong to that session; later exchanges that
name none belong to the last one named.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from urllib.parse import parse_qs, urlsplit

from sse_forensics.facts.config import AnalysisConfig


@dataclass(frozen=True, slots=True)
class SessionKey:
    session: str
    how: str  # "header" | "path" | "query" | "connection"
    inferred: bool


@lru_cache(maxsize=8)
def _path_regex(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


def query_session(url: str, config: AnalysisConfig) -> str:
    """The session named by a ``session_id``-style query parameter of ``url``, or ``""``."""
    if "?" not in url:
        return ""
    query = parse_qs(urlsplit(url).query)
    for name in config.session_query_params:
        values = query.get(name)
        if values and values[0].strip():
            return values[0].strip()
    return ""


def explicit_session(
    header_value: str | None,
    target: str | None,
    endpoint_data: Sequence[str],
    config: AnalysisConfig,
) -> tuple[str, str]:
    """(session, how) named by one exchange itself, or ``("", "")``.

    ``header_value``: the session header of the request, else of the response;
    ``endpoint_data``: the data of ``endpoint`` events among the response's first two events.
    """
    if header_value and header_value.strip():
        return header_value.strip(), "header"
    if target is not None:
        m = _path_regex(config.session_path_regex).search(target)
        if m and m.groupdict().get("session"):
            return m.group("session"), "path"
        found = query_session(target, config)
        if found:
            return found, "query"
    for data in endpoint_data:
        found = query_session(data.strip(), config)
        if found:
            return found, "query"
    return "", ""


def endpoint_text(ip: str, port: int) -> str:
    return f"[{ip}]:{port}" if ":" in ip else f"{ip}:{port}"


def inferred_session(client_ip: str, server_ip: str, server_port: int) -> str:
    return f"inferred:{client_ip}->{endpoint_text(server_ip, server_port)}"


def attribute_connection(explicit: Sequence[tuple[str, str]], fallback: str) -> list[SessionKey]:
    """Sessions of a connection's exchanges, in exchange order, from what each names itself
    (``explicit``: (session, how) or ``("", "")``). ``fallback``: the inferred session of
    the connection, for exchanges when none on the connection names one."""
    out: list[SessionKey | None] = []
    pending: list[int] = []
    last: SessionKey | None = None
    for session, how in explicit:
        if session:
            last = SessionKey(session, how, False)
            for i in pending:
                out[i] = last
            pending = []
            out.append(last)
        elif last is not None:
            out.append(last)
        else:
            pending.append(len(out))
            out.append(None)
    inferred = SessionKey(fallback, "connection", True)
    return [key or inferred for key in out]
