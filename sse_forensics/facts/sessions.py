"""The sessions of a partition (PROFILE.md, "Sessions and streams"): each exchange names its
session at ingest (:mod:`sse_forensics.evidence.sessions`); here they become one
:class:`~.model.SessionRecord` each, with the protocol era the session negotiated."""

from __future__ import annotations

from sse_forensics.facts.model import ExchangeRecord, SessionRecord

ExchangeKey = tuple[int, int]


def session_records(
    exchanges: list[ExchangeRecord],
) -> tuple[dict[ExchangeKey, SessionRecord], dict[str, SessionRecord]]:
    """Map every exchange to its :class:`SessionRecord`; returns (by exchange, by session id).

    A session is described by its first exchange in (connection, index) order; its era by
    the first exchange that showed one (an ``initialize`` answer or request, or the
    ``MCP-Protocol-Version`` header)."""
    sessions: dict[str, SessionRecord] = {}
    by_exchange: dict[ExchangeKey, SessionRecord] = {}
    for ex in sorted(exchanges, key=lambda e: (e.connection_id, e.index)):
        rec = sessions.get(ex.session)
        if rec is None:
            rec = sessions[ex.session] = SessionRecord(
                ex.session, ex.session_inferred, ex.session_how
            )
        if not rec.protocol_version and ex.protocol_version:
            rec.protocol_version = ex.protocol_version
        by_exchange[(ex.connection_id, ex.index)] = rec
    return by_exchange, sessions
