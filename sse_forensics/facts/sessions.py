"""Which MCP session each exchange belongs to (PROFILE.md, "Sessions and streams").

1. the ``Mcp-Session-Id`` header (set on the ``initialize`` response, echoed on every later
   request); 2. a path segment matched by a configurable regex, or a ``session_id`` query
   parameter (the 2024-11-05 HTTP+SSE transport); 3. the client's TCP connection group
   (same client address, same server) — marked ``inferred``.
"""

from __future__ import annotations

import re
from collections import defaultdict
from urllib.parse import parse_qs, urlsplit

from sse_forensics.facts.config import AnalysisConfig
from sse_forensics.facts.jsonrpc import parse_messages, protocol_version
from sse_forensics.facts.model import SessionRecord
from sse_forensics.reassembly.exchange import Exchange
from sse_forensics.reassembly.flows import Connection
from sse_forensics.reassembly.http_events import header

ExchangeKey = tuple[int, int]


def _explicit(ex: Exchange, config: AnalysisConfig, path_re: re.Pattern[str]) -> tuple[str, str]:
    value = header(ex.request_headers, config.session_header) or header(
        ex.response_headers, config.session_header
    )
    if value and value.strip():
        return value.strip(), "header"
    if ex.request is not None:
        m = path_re.search(ex.request.target)
        if m and m.groupdict().get("session"):
            return m.group("session"), "path"
        # The 2024-11-05 HTTP+SSE transport (and servers modelled on it) names the session
        # in the query string of the POST endpoint: /messages?session_id=...
        found = _query_session(ex.request.target, config)
        if found:
            return found, "query"
    # That transport's GET stream announces the session in its first event:
    # `event: endpoint` with data `/messages/?session_id=...`.
    for sse in ex.events[:2]:
        if sse.event == "endpoint":
            found = _query_session(sse.data.strip(), config)
            if found:
                return found, "query"
    return "", ""


def _query_session(url: str, config: AnalysisConfig) -> str:
    query = parse_qs(urlsplit(url).query)
    for name in config.session_query_params:
        values = query.get(name)
        if values and values[0].strip():
            return values[0].strip()
    return ""


def attribute_sessions(
    exchanges: list[Exchange], connections: dict[int, Connection], config: AnalysisConfig
) -> tuple[dict[ExchangeKey, SessionRecord], dict[str, SessionRecord]]:
    """Map every exchange to a :class:`SessionRecord`; returns (by exchange, by session id)."""
    path_re = re.compile(config.session_path_regex)
    sessions: dict[str, SessionRecord] = {}
    by_exchange: dict[ExchangeKey, SessionRecord] = {}
    pending: dict[int, list[Exchange]] = defaultdict(list)

    def record(session_id: str, inferred: bool, how: str) -> SessionRecord:
        rec = sessions.get(session_id)
        if rec is None:
            rec = sessions[session_id] = SessionRecord(session_id, inferred, how)
        elif not inferred and rec.inferred:
            rec.inferred, rec.how = False, how
        return rec

    last_on_connection: dict[int, SessionRecord] = {}
    for ex in sorted(exchanges, key=lambda e: (e.connection_id, e.index)):
        session_id, how = _explicit(ex, config, path_re)
        if session_id:
            rec = record(session_id, False, how)
            by_exchange[(ex.connection_id, ex.index)] = rec
            last_on_connection[ex.connection_id] = rec
            # Earlier exchanges on this connection without a session (the `initialize`
            # request travels before the server assigns one) belong to the same client.
            for earlier in pending.pop(ex.connection_id, []):
                by_exchange[(earlier.connection_id, earlier.index)] = rec
        elif ex.connection_id in last_on_connection:
            by_exchange[(ex.connection_id, ex.index)] = last_on_connection[ex.connection_id]
        else:
            pending[ex.connection_id].append(ex)

    for conn_id, items in pending.items():
        conn = connections[conn_id]
        group = f"{conn.client[0]}->{_endpoint(conn.server)}"
        rec = record(f"inferred:{group}", True, "connection")
        for ex in items:
            by_exchange[(ex.connection_id, ex.index)] = rec

    _protocol_versions(exchanges, by_exchange, config)
    return by_exchange, sessions


def _endpoint(addr: tuple[str, int]) -> str:
    ip, port = addr
    return f"[{ip}]:{port}" if ":" in ip else f"{ip}:{port}"


def _protocol_versions(
    exchanges: list[Exchange], by_exchange: dict[ExchangeKey, SessionRecord], config: AnalysisConfig
) -> None:
    """Session era from ``initialize`` (request params / result) or the version header."""
    for ex in exchanges:
        rec = by_exchange.get((ex.connection_id, ex.index))
        if rec is None or rec.protocol_version:
            continue
        # The server's answer is the negotiated version (it may downgrade the client's
        # proposal), whether it came as a JSON body or as an event of an SSE response.
        answers = [sse.data for sse in ex.events if sse.data] if ex.is_event_stream else []
        version = None
        for body in (bytes(ex.response_body), *answers, bytes(ex.request_body)):
            messages = parse_messages(body) if body else None
            if messages:
                version = protocol_version(messages)
                if version:
                    break
        if version is None:
            version = header(ex.request_headers, config.protocol_version_header)
        if version:
            rec.protocol_version = version.strip()
