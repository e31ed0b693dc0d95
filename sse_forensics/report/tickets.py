"""``scan --format tickets``: one JSON object per incident, ready to open a ticket
(``docs/tickets.md``): ``title`` (one line: verdict, session, range, server), ``body``
(Markdown: what happened, the connections, an evidence table of frames and log lines, the
exact ``timeline`` command, remediation from the rules), ``labels``, ``severity`` and
``fingerprint`` — the incident's id, stable across runs, so a re-scan updates a ticket and
never opens a second one.

Everything captured (session IDs, targets, event IDs, messages that quote them) is escaped
for the tracker: control characters as ``\\xNN`` (:func:`~sse_forensics.report.escape.
printable`), Markdown punctuation with a backslash, so no captured byte can become markup,
a link, a table cell or a line of its own.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import orjson

from sse_forensics import __version__
from sse_forensics.engine.incidents import Incident, group_incidents
from sse_forensics.report.escape import printable
from sse_forensics.report.siem import ip_or_none, port_or_none, rule_reference
from sse_forensics.report.terminal import shell_word
from sse_forensics.result import ScanResult
from sse_forensics.verdicts import CONTRACT_VIOLATION, EXPECTED_GAP, INDETERMINATE

if TYPE_CHECKING:
    from sse_forensics.facts.config import AnalysisConfig

LABEL = "sse-forensics"
MAX_EVIDENCE_ROWS = 50  # a ticket cites this many; --format json has them all
MAX_TITLE_SESSION = 64
# CommonMark: any ASCII punctuation may be backslash-escaped. These are the ones that can
# start markup inside a line (code, emphasis, links, HTML, GFM tables and strikethrough).
_MARKDOWN = re.compile(r"([\\`*_\[\]<>|~])")
_WHAT = {
    "silent_corruption": "were lost and nothing signalled it",
    INDETERMINATE: "are missing from what the capture holds: the capture lacks bytes of this "
    "stretch, so whether the server sent them cannot be told",
    EXPECTED_GAP: "were lost, and the server signalled it (or the client re-issued)",
}


def md(value: object, limit: int | None = 300) -> str:
    """A captured string as Markdown text: escaped for a terminal, then for Markdown."""
    return _MARKDOWN.sub(r"\\\1", printable(value, limit))


def _fence(content: str) -> str:
    """A code fence longer than any run of backticks in ``content``."""
    longest = max((len(m) for m in re.findall(r"`+", content)), default=0)
    return "`" * max(3, longest + 1)


def _when(ts: object) -> str:
    if not isinstance(ts, int | float) or ts <= 0:
        return ""
    return datetime.fromtimestamp(ts, UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


def _endpoint(end: tuple[str | None, int | None]) -> str | None:
    """``ip:port`` (``[v6]:port``) as observed; ``None`` for a log's placeholder."""
    ip, port = ip_or_none(end[0]), port_or_none(end[1])
    if ip is None:
        return None
    host = f"[{ip}]" if ":" in ip else ip
    return f"{host}:{port}" if port is not None else ip


def range_text(gap: dict[str, object]) -> str:
    """``8–12 (5)``, ``8`` or ``8 onwards``: the incident's range as the findings name it."""
    first, last, count = gap.get("first"), gap.get("last"), gap.get("count")
    if first is None:
        return ""
    if last is None:
        return f"{printable(first, 80)} onwards"
    span = printable(first, 80)
    if last != first:
        span += f"–{printable(last, 80)}"
    return span + (f" ({count})" if count is not None else "")


def _server(incident: Incident) -> str | None:
    """``server S``, ``server S via proxy P`` when the capture shows both legs of a proxy
    (P's address is also a client of the incident), else ``servers A, B``."""
    clients = {c.client[0] for c in incident.connections if c.client[0]}
    servers = list(dict.fromkeys(end for end in incident.servers if _endpoint(end)))
    if not servers:
        return None
    upstream = [s for s in servers if s[0] not in clients]
    proxies = [s for s in servers if s[0] in clients]
    if len(upstream) == 1:
        via = ", ".join(_endpoint(p) or "" for p in proxies)
        return f"server {_endpoint(upstream[0])}" + (f" via proxy {via}" if via else "")
    shown = ", ".join(_endpoint(s) or "" for s in servers)
    return f"server {shown}" if len(servers) == 1 else f"servers {shown}"


def title(incident: Incident) -> str:
    """One line: verdict, session, range (or rule), server."""
    session = printable(incident.session_id, MAX_TITLE_SESSION)
    parts = [incident.classification, f"session {session}"]
    if incident.has_range:
        parts.append(f"events {range_text(incident.gap)}")
    else:
        parts.append(incident.lead.rule)
    server = _server(incident)
    if server:
        parts.append(server)
    return " · ".join(parts)


def timeline_command(paths: Sequence[str], session: str | None, options: Sequence[str]) -> str:
    """The ``timeline`` command that shows this incident's session, with the options the
    scan was given that change what it reads."""
    words = ["sse-forensics", "timeline", *(shell_word(p) for p in paths), *options]
    if session is not None:
        words += ["--session", shell_word(session)]
    return " ".join(words)


def scan_options(
    config: AnalysisConfig, log_format: str | None = None, log_map: object | None = None
) -> list[str]:
    """The scan's options that ``timeline`` must repeat to see the same sessions and IDs
    (those that differ from their defaults), as shell words."""
    default = type(config)()  # the defaults, without importing the facts layer
    out: list[str] = []
    for option, value, usual in (
        ("--session-header", config.session_header, default.session_header),
        ("--session-path-regex", config.session_path_regex, default.session_path_regex),
        ("--id-scheme", config.id_scheme, default.id_scheme),
        ("--prefixed-regex", config.prefixed_regex, default.prefixed_regex),
    ):
        if value != usual and value is not None:
            out += [option, shell_word(str(value))]
    for keylog in config.tls_keylog:
        out += ["--tls-keylog", shell_word(keylog)]
    if log_format is not None:
        out += ["--log-format", shell_word(log_format)]
    if log_map is not None:
        out += ["--log-map", shell_word(str(log_map))]
    return out


def _happened(incident: Incident) -> str:
    lead = incident.lead
    session = md(incident.session_id, 200)
    stream = md(lead.stream_label, 200)
    opened = f" ({md(lead.opened_by, 200)})" if lead.opened_by else ""
    if not incident.has_range:
        what = (
            "broke the contract but lost no event"
            if incident.classification == CONTRACT_VIOLATION
            else "shows a fault that names no range of events"
        )
        return f"Session {session}, stream {stream}{opened}, {what}."
    where = {"live": "on the live stream", "resume": "at a resume of the stream"}.get(
        incident.location or "", "on the stream"
    )
    what = _WHAT.get(incident.classification, "were lost")
    text = (
        f"Events {md(range_text(incident.gap), 200)} of session {session} {what}: "
        f"{where} {stream}{opened}."
    )
    if incident.cause and incident.cause != "unknown":
        text += f" Cause, from the evidence: {md(incident.cause, 60)}."
    return text


def _rules_section(incident: Incident) -> list[str]:
    out = ["### Rules that fired", ""]
    for r in incident.rules:
        times = f" ×{r.count}" if r.count > 1 else ""
        out.append(f"- `{r.rule}`{times} ({r.classification}, {r.severity}): {md(r.message, 1000)}")
    return out


def _connections_section(incident: Incident) -> list[str]:
    rows = []
    for c in incident.connections:
        client, server = _endpoint(c.client), _endpoint(c.server)
        if client or server:
            cells = (md(client or "", 80), md(server or "", 80), md(c.community_id or "", 80))
            rows.append("| " + " | ".join(cells) + " |")
    if not rows:
        return []
    heading = "### Seen on" + (f" ({len(rows)} connections)" if len(rows) > 1 else "")
    return [heading, "", "| client | server | Community ID |", "|---|---|---|", *rows]


def _evidence_section(incident: Incident) -> list[str]:
    evidence = incident.evidence
    out = ["### Evidence", "", "| file | frame / line | time (UTC) | what |", "|---|---|---|---|"]
    for e in evidence[:MAX_EVIDENCE_ROWS]:
        if e.get("frame") is not None:
            where = f"frame {e['frame']}"
        elif e.get("line") is not None:
            where = f"line {e['line']}"
        else:
            where = ""
        out.append(
            f"| {md(e.get('source') or '', 200)} | {where} | {_when(e.get('ts'))} "
            f"| {md(e.get('what'), 400)} |"
        )
    if len(evidence) > MAX_EVIDENCE_ROWS:
        out += ["", f"… and {len(evidence) - MAX_EVIDENCE_ROWS} more (`--format json`)."]
    return out


def _fix_section(incident: Incident) -> list[str]:
    out = ["### How to fix it", ""]
    seen: set[str] = set()
    references: list[str] = []
    for r in incident.rules:
        if r.remediation and r.remediation not in seen:
            seen.add(r.remediation)
            out += [f"From `{r.rule}`:", "", r.remediation.strip(), ""]
    for f in incident.findings:
        references += [x for x in (rule_reference(f), *f.references) if x]
    references = list(dict.fromkeys(references))
    if references:
        out.append("References: " + ", ".join(md(x, 300) for x in references))
    return out


def body(incident: Incident, paths: Sequence[str], options: Sequence[str] = ()) -> str:
    """The ticket's Markdown body."""
    command = timeline_command(paths, incident.session_id, options)
    fence = _fence(command)
    lines = [
        f"**{incident.classification}**, severity **{incident.severity}**: {_happened(incident)}",
        "",
        *_rules_section(incident),
        "",
        *_connections_section(incident),
        "",
        *_evidence_section(incident),
        "",
        "### Timeline",
        "",
        f"{fence}sh",
        command,
        fence,
        "",
        *_fix_section(incident),
        "",
        "---",
        f"sse-forensics {__version__} incident `{incident.fingerprint}` · "
        f"{len(incident.findings)} finding(s): "
        + ", ".join(f"`{f.fingerprint}`" for f in incident.findings),
    ]
    return "\n".join(_squeeze(lines)) + "\n"


def _squeeze(lines: list[str]) -> list[str]:
    """No two blank lines in a row (a section with nothing to say leaves none)."""
    out: list[str] = []
    for line in lines:
        if line == "" and (not out or out[-1] == ""):
            continue
        out.append(line)
    return out


def labels(incident: Incident) -> list[str]:
    out = [LABEL, incident.classification, f"severity:{incident.severity}"]
    out += [f"rule:{r.rule}" for r in incident.rules]
    if incident.cause and incident.cause != "unknown":
        out.append(f"cause:{incident.cause}")
    return list(dict.fromkeys(out))


def ticket(incident: Incident, paths: Sequence[str], options: Sequence[str] = ()) -> dict[str, Any]:
    return {
        "title": title(incident),
        "body": body(incident, paths, options),
        "labels": labels(incident),
        "severity": incident.severity,
        "fingerprint": incident.fingerprint,
        "classification": incident.classification,
        "session_id": incident.session_id,
        "gap": incident.gap,
        "finding_ids": [f.fingerprint for f in incident.findings],
    }


def tickets_jsonl(result: ScanResult, options: Sequence[str] = ()) -> bytes:
    """One ticket per incident, most alarming first, one JSON object per line."""
    return b"".join(
        orjson.dumps(ticket(i, result.paths, options)) + b"\n"
        for i in group_incidents(result.findings)
    )
