"""The three verdicts on a gap (docs/profile.md, "What counts as what"), the classification of
findings that broke the contract but lost nothing, and rule severities."""

from __future__ import annotations

EXPECTED_GAP = "expected_gap"
"""The server signalled the loss (stream-gap or resume-gap covering it, 410 on the resume), or
the client re-issued the request. A ``backpressure-disconnect`` is no such signal."""
CONTRACT_VIOLATION = "contract_violation"
"""Not a gap verdict: the contract was broken but no event was lost (a resume in a
2026-07-28 session answered with the correct continuation). Never carries a gap."""
INDETERMINATE = "indeterminate"
"""The evidence itself is incomplete: capture loss is never server loss."""
SILENT_CORRUPTION = "silent_corruption"
"""Events were lost and nothing signalled it: the reassembled payload is corrupt."""

GAP_VERDICTS = (EXPECTED_GAP, INDETERMINATE, SILENT_CORRUPTION)
CLASSIFICATIONS = (EXPECTED_GAP, CONTRACT_VIOLATION, INDETERMINATE, SILENT_CORRUPTION)
"""Ordered from least to most alarming (``--fail-on`` compares by this order): a signalled
loss the client knows of; a broken rule that cost no event; a loss the capture cannot
confirm or rule out; a loss nobody was told of."""

SEVERITIES = ("info", "low", "medium", "high", "critical")
INDETERMINATE_SEVERITY = "low"
"""The most an ``indeterminate`` finding is rated: what it shows is a gap in the capture, and
the rule's severity is that of the server fault it would be if the capture were complete."""

CAPTURE_ADVICE = """
The capture lacks bytes of this stretch, so it cannot tell whether the server sent the
events: capture loss is never server loss. Capture again with whole packets and room to
keep up: `tcpdump -s 0 -B 16384 --immediate-mode -w FILE` on the server host (or the proxy
in front of it), and check the capture's drop counters (`capinfos`, pcapng statistics) —
see docs/capturing.md. If the server writes an event log, scan it with the capture: it says
what was written.
""".strip()
"""The remediation of every ``indeterminate`` finding (``Rule.remediation_for``)."""


def classification_rank(classification: str) -> int:
    return CLASSIFICATIONS.index(classification) if classification in CLASSIFICATIONS else -1


def severity_for(rule_severity: str, classification: str) -> str:
    """A finding's severity: the rule's, except that an ``indeterminate`` one is at most
    :data:`INDETERMINATE_SEVERITY` (the fault it would show is not established)."""
    if classification == INDETERMINATE and rule_severity in SEVERITIES:
        cap = SEVERITIES.index(INDETERMINATE_SEVERITY)
        return SEVERITIES[min(SEVERITIES.index(rule_severity), cap)]
    return rule_severity


# What a rule may need from the evidence (its ``needs``), and which inputs provide it.
EVIDENCE_KINDS = (
    "event-ids",  # the IDs of the events each response carried, in order
    "event-payloads",  # the events' data (to recognise the same event on two streams)
    "requests",  # request lines, Last-Event-ID, statuses
    "request-bodies",  # JSON-RPC request bodies (re-issued calls)
    "protocol-version",  # the session's negotiated protocol version (initialize, header)
    "response-headers",  # response headers such as Cache-Control
)
PROVIDED_BY = {
    "capture": frozenset(EVIDENCE_KINDS),
    "event-log": frozenset({"event-ids"}),
    "access-log": frozenset({"requests"}),
    # An event log whose `initialize` records name the negotiated version (docs/logs.md).
    "event-log-initialize": frozenset({"protocol-version"}),
}
