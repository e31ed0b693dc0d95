"""The three verdicts (PROFILE.md, "What counts as what") and rule severities."""

from __future__ import annotations

EXPECTED_GAP = "expected_gap"
"""The server signalled the loss (stream-gap, resume-gap, 410, backpressure-disconnect)."""
INDETERMINATE = "indeterminate"
"""The evidence itself is incomplete: capture loss is never server loss."""
SILENT_CORRUPTION = "silent_corruption"
"""Events were lost and nothing signalled it: the reassembled payload is corrupt."""

CLASSIFICATIONS = (EXPECTED_GAP, INDETERMINATE, SILENT_CORRUPTION)
"""Ordered from least to most alarming (``--fail-on`` compares by this order)."""

SEVERITIES = ("info", "low", "medium", "high", "critical")


def classification_rank(classification: str) -> int:
    return CLASSIFICATIONS.index(classification) if classification in CLASSIFICATIONS else -1


# What a rule may need from the evidence (its ``needs``), and which inputs provide it.
EVIDENCE_KINDS = (
    "event-ids",  # the IDs of the events each response carried, in order
    "event-payloads",  # the events' data (to recognise the same event on two streams)
    "requests",  # request lines, Last-Event-ID, statuses
    "request-bodies",  # JSON-RPC request bodies (re-issued calls, protocol version)
    "response-headers",  # response headers such as Cache-Control
)
PROVIDED_BY = {
    "capture": frozenset(EVIDENCE_KINDS),
    "event-log": frozenset({"event-ids"}),
    "access-log": frozenset({"requests"}),
}
