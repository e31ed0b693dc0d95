"""``sse-forensics report``: one self-contained HTML file to attach to a ticket.

It opens on an air-gapped laptop: plotly.js, the figures and the styles are inline, and a
Content-Security-Policy forbids every remote load (``default-src 'none'``); scripts run
only if their SHA-256 is listed in the policy, so even markup that slipped through escaping
could not execute. Every captured string (session IDs, targets, event IDs and data, file
names) is escaped with :func:`text` before it enters the page; the figures travel as JSON
in a non-executed ``<script type="application/json">`` with ``<``, ``>`` and ``&`` escaped.
"""

from __future__ import annotations

import base64
import hashlib
import html
import re
from collections import Counter
from datetime import UTC, datetime
from functools import cache
from typing import TYPE_CHECKING

import orjson

from sse_forensics import __version__
from sse_forensics.coverage import coverage
from sse_forensics.coverage import summary as unjudged_summary
from sse_forensics.engine.finding import Finding
from sse_forensics.engine.incidents import Incident, group_incidents, incident_of, summarize
from sse_forensics.report.escape import html_text
from sse_forensics.report.html_plot import VERDICT_COLOUR, session_figure
from sse_forensics.report.ladder import SessionLadder, session_ladders
from sse_forensics.result import ScanResult
from sse_forensics.verdicts import CLASSIFICATIONS

if TYPE_CHECKING:
    from sse_forensics.engine.registry import RuleSet
    from sse_forensics.facts.build import Facts
    from sse_forensics.facts.gaps import GapRecord
    from sse_forensics.facts.model import SessionRecord, StreamRecord

# Reads the figures from the JSON block and draws them; a fixed text, so its hash is too.
PLOT_BOOTSTRAP = """
(function () {
  var figures = JSON.parse(document.getElementById("figures").textContent);
  var config = {responsive: true, displaylogo: false, scrollZoom: false};
  Object.keys(figures).forEach(function (id) {
    Plotly.newPlot(id, figures[id].data, figures[id].layout, config);
  });
})();
"""

STYLE = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 0 auto; max-width: 1200px;
       padding: 1em 2em; color: #222; }
h1 { font-size: 1.6em; margin-bottom: .2em; } h2 { border-bottom: 1px solid #ddd; }
table { border-collapse: collapse; margin: .5em 0; }
th, td { border: 1px solid #ddd; padding: 3px 8px; text-align: left; vertical-align: top; }
th { background: #f5f5f5; }
code, .mono { font-family: ui-monospace, monospace; font-size: 12.5px;
              overflow-wrap: anywhere; }
.verdict { color: #fff; border-radius: 3px; padding: 1px 6px; white-space: nowrap; }
.finding { border: 1px solid #ddd; border-left-width: 6px; padding: .4em 1em; margin: 1em 0; }
.prose { white-space: pre-wrap; }
.plot { width: 100%; min-height: 440px; }
.meta { color: #666; }
details > summary { cursor: pointer; font-weight: 600; }
"""


def text(value: object, limit: int | None = 300) -> str:
    """A captured string for HTML: control characters escaped, then HTML-escaped."""
    return html_text(value, limit)


def _inline(value: str) -> str:
    return re.sub(r"`([^`\n]+)`", r"<code>\1</code>", html.escape(value, quote=True))


def prose(value: str) -> str:
    """Rule text (rationale, remediation), escaped: blank lines part paragraphs, ``- `` lines
    make a list, wrapped lines are joined, Markdown code spans become ``<code>``."""
    out: list[str] = []
    for block in re.split(r"\n\s*\n", value.strip()):
        lines = [line.strip() for line in block.splitlines() if line.strip()]
        if lines and all(line.startswith(("- ", "* ")) for line in lines):
            items = "".join(f"<li>{_inline(line[2:])}</li>" for line in lines)
            out.append(f"<ul>{items}</ul>")
        elif lines:
            out.append(f"<p>{_inline(' '.join(lines))}</p>")
    return "".join(out)


def script_json(value: object) -> str:
    """JSON that cannot end its ``<script>`` element or open a comment inside it."""
    raw = orjson.dumps(value, option=orjson.OPT_SERIALIZE_NUMPY).decode()
    return raw.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _sha256(source: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(source.encode()).digest()).decode() + "'"


@cache
def plotly_js() -> str:
    from plotly.offline import get_plotlyjs

    return get_plotlyjs()


def content_security_policy(scripts: list[str]) -> str:
    hashes = " ".join(_sha256(s) for s in scripts)
    return (
        f"default-src 'none'; script-src {hashes}; style-src 'unsafe-inline'; "
        "img-src data:; base-uri 'none'; form-action 'none'"
    )


def _badge(verdict: str) -> str:
    colour = VERDICT_COLOUR.get(verdict, "#777")
    return f'<span class="verdict" style="background:{colour}">{html.escape(verdict)}</span>'


def _when(ts: object) -> str:
    if not isinstance(ts, int | float):
        return ""
    return datetime.fromtimestamp(ts, UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


def _gap_text(f: Finding | Incident) -> str:
    first, last, count = f.gap.get("first"), f.gap.get("last"), f.gap.get("count")
    if first is None and last is None:
        return ""
    span = text(first, 80) if last in (None, first) else f"{text(first, 80)} – {text(last, 80)}"
    return span + (f" ({count} events)" if count is not None else "")


def _evidence_table(f: Finding) -> str:
    rows = "".join(
        "<tr>"
        f"<td class=mono>{text(e.get('source'), 120)}</td>"
        f"<td>{text(e.get('frame') if e.get('frame') is not None else e.get('line'), 20)}</td>"
        f"<td class=mono>{_when(e.get('ts'))}</td>"
        f"<td class=mono>{text(e.get('what'), 400)}</td>"
        "</tr>"
        for e in f.evidence
    )
    return (
        "<table class=evidence><tr><th>file</th><th>frame</th><th>capture time (UTC)</th>"
        f"<th>what</th></tr>{rows}</table>"
    )


def _finding(n: int, f: Finding, rules: RuleSet, incident: str | None) -> str:
    rule = rules.get(f.rule)
    colour = VERDICT_COLOUR.get(f.classification, "#777")
    parts = [
        f'<article class="finding" id="finding-{n}" style="border-left-color:{colour}">',
        f"<h3>{n}. {text(f.title, 200)}</h3>",
        f"<p>{_badge(f.classification)} severity <b>{text(f.severity, 20)}</b> · rule "
        f"<code>{text(f.rule, 80)}</code> · {text(f.location or '', 20)} gap "
        f"<span class=mono>{_gap_text(f)}</span> · stream "
        f"<span class=mono>{text(f.stream_label, 120)}</span></p>",
        f"<p class=prose>{text(f.message, 2000)}</p>",
        _evidence_table(f),
    ]
    if rule is not None:
        parts.append(f"<h4>Why it matters</h4>{prose(rule.rationale)}")
        parts.append(f"<h4>How to fix it</h4>{prose(rule.remediation_for(f.classification))}")
        if rule.references:
            refs = "".join(f"<li class=mono>{text(r, 300)}</li>" for r in rule.references)
            parts.append(f"<h4>References</h4><ul>{refs}</ul>")
    meta = f"fingerprint <span class=mono>{text(f.fingerprint, 80)}</span>"
    if incident is not None:
        meta += f" · incident <span class=mono>{text(incident, 80)}</span>"
    parts.append(f"<p class=meta>{meta}</p>")
    parts.append("</article>")
    return "\n".join(parts)


def _incidents(incidents: list[Incident], findings: list[Finding], numbers: dict[str, int]) -> str:
    """One row per incident: its verdict, session, range, cause, the rules that fired (with
    how many findings each) and links to those findings."""
    if not incidents:
        return ""
    index = {f.fingerprint: n for n, f in enumerate(findings, 1)}
    rows = []
    for n, incident in enumerate(incidents, 1):
        session = numbers.get(incident.session_id or "")
        where = (
            f'<a href="#session-{session}">{text(incident.session_id, 60)}</a>'
            if session is not None
            else text(incident.session_id, 60)
        )
        rules = "<br>".join(
            f"<code>{text(r.rule, 80)}</code>" + (f" ×{r.count}" if r.count > 1 else "")
            for r in incident.rules
        )
        links = " ".join(
            f"<a href='#finding-{index[f.fingerprint]}'>{index[f.fingerprint]}</a>"
            for f in incident.findings
            if f.fingerprint in index
        )
        rows.append(
            f"<tr><td>{n}</td><td>{_badge(incident.classification)}</td>"
            f"<td>{text(incident.severity, 20)}</td><td class=mono>{where}</td>"
            f"<td class=mono>{_gap_text(incident)}</td><td>{text(incident.cause or '', 40)}</td>"
            f"<td>{rules}</td><td>{links}</td>"
            f"<td class=mono>{text(incident.fingerprint, 40)}</td></tr>"
        )
    return (
        "<h3>Incidents, most severe first</h3>"
        "<table><tr><th>#</th><th>verdict</th><th>severity</th><th>session</th><th>gap</th>"
        "<th>cause</th><th>rules</th><th>findings</th><th>incident id</th></tr>"
        f"{''.join(rows)}</table>"
    )


def _summary(result: ScanResult, numbers: dict[str, int], incidents: list[Incident]) -> str:
    counts = Counter(i.classification for i in incidents)  # verdicts of incidents
    verdicts = " ".join(f"{_badge(v)} {counts.get(v, 0)}" for v in reversed(CLASSIFICATIONS))
    inputs = "".join(f"<li class=mono>{text(p, 300)}</li>" for p in result.inputs)
    rows = []
    for n, f in enumerate(result.findings, 1):
        session = numbers.get(f.session_id or "")
        where = (
            f'<a href="#session-{session}">{text(f.session_id, 60)}</a>'
            if session is not None
            else text(f.session_id, 60)
        )
        rows.append(
            f"<tr><td><a href='#finding-{n}'>{n}</a></td>"
            f"<td>{_badge(f.classification)}</td><td>{text(f.severity, 20)}</td>"
            f"<td><code>{text(f.rule, 80)}</code></td><td class=mono>{where}</td>"
            f"<td class=mono>{_gap_text(f)}</td></tr>"
        )
    cov = coverage(result)
    if rows:
        findings = (
            "<table><tr><th>#</th><th>verdict</th><th>severity</th><th>rule</th><th>session</th>"
            f"<th>gap</th></tr>{''.join(rows)}</table>"
        )
    elif cov.complete:
        findings = "<p>No findings: no lost events were detected.</p>"
    elif cov.nothing_judged:
        findings = "<p>No findings, but nothing could be judged (below).</p>"
    else:
        findings = "<p>No lost events were detected in what could be judged (below).</p>"
    if not cov.complete:  # never an "all clear" for what the inputs did not show
        items = "".join(f"<li>{text(item.sentence(), 600)}</li>" for item in cov.items())
        findings += f"<h3>Could not judge</h3><p>{text(unjudged_summary(cov), 200)}</p>"
        findings += f"<ul>{items}</ul>"
    return (
        '<section id="summary"><h2>Summary</h2>'
        f"<p>{len(result.inputs)} file(s), {result.stats.frames} frames, "
        f"{result.stats.tcp_connections} TCP connections, {result.stats.sessions} "
        f"session(s), {result.stats.streams} event stream(s), {result.stats.events} "
        f"SSE events, {result.stats.resumes} resume(s).</p>"
        + (f"<p>Incidents: {text(summarize(incidents).text(), 200)}</p>" if incidents else "")
        + f"<p>Verdicts: {verdicts}</p><details><summary>Inputs</summary><ul>{inputs}</ul>"
        f"</details>{_incidents(incidents, result.findings, numbers)}"
        f"<h3>Findings, most severe first</h3>{findings}</section>"
    )


def _ladder_table(ladder: SessionLadder | None) -> str:
    if ladder is None:
        return ""
    t0 = ladder.start or 0.0
    rows = "".join(
        f"<tr><td>{'' if r.ts is None else f'+{r.ts - t0:.3f}s'}</td><td>{r.connection}</td>"
        f"<td>{'' if r.origin is None else r.origin.number}</td>"
        f"<td class=mono>{html_text(r.text.plain)}</td></tr>"
        for r in ladder.rungs
    )
    return (
        "<details><summary>Timeline (as <code>sse-forensics timeline</code> shows it)</summary>"
        f"<table><tr><th>time</th><th>conn</th><th>frame</th><th></th></tr>{rows}</table>"
        "</details>"
    )


def _errors(result: ScanResult) -> str:
    if not result.errors and not result.rule_errors:
        return ""
    items = "".join(
        f"<li class=mono>{text(e.source, 200)} "
        f"{'frame ' + str(e.frame) if e.frame is not None else ''}: {text(e.what, 400)}</li>"
        for e in result.errors
    )
    items += "".join(
        f"<li class=mono>rule not loaded: {text(m, 400)}</li>" for m in result.rule_errors
    )
    return (
        f'<section id="errors"><h2>Input problems ({len(result.errors)})</h2>'
        f"<p>The scan went on past these; gaps near them may be <em>indeterminate</em>.</p>"
        f"<ul>{items}</ul></section>"
    )


def _records_of(
    facts: Facts | None, session_id: str
) -> tuple[list[StreamRecord], list[GapRecord], SessionRecord | None]:
    """A session's streams, gaps and record (none when the scan kept no records)."""
    if facts is None:
        return [], [], None
    streams = [s for s in facts.streams if s.session.session_id == session_id]
    gaps = [g for g in facts.gaps if g.stream.session.session_id == session_id]
    return streams, gaps, facts.sessions.get(session_id)


def render_report(result: ScanResult, rules: RuleSet) -> str:
    """The whole report as one HTML document (deterministic: no wall-clock time in it)."""
    affected = list(dict.fromkeys(f.session_id for f in result.findings if f.session_id))
    numbers = {sid: n for n, sid in enumerate(affected, 1)}
    facts = result.facts  # None: a scan that kept no records shows no plots and no ladders
    connections = facts.connections if facts is not None else {}
    ladders = (
        {lad.session.session_id: lad for lad in session_ladders(facts)} if facts is not None else {}
    )
    figures: dict[str, dict] = {}
    sections: list[str] = []
    # Numbered most severe first; a fingerprint names one finding (engine.finding).
    index = {f.fingerprint: n for n, f in enumerate(result.findings, 1)}
    incidents = group_incidents(result.findings)
    incident = incident_of(incidents)
    groups: list[tuple[str | None, list[Finding]]] = [
        (sid, [f for f in result.findings if f.session_id == sid]) for sid in affected
    ]
    orphans = [f for f in result.findings if not f.session_id]
    if orphans:
        groups.append((None, orphans))
    for session_id, findings in groups:
        body: list[str] = []
        if session_id is not None:
            number = numbers[session_id]
            streams, gaps, record = _records_of(facts, session_id)
            conns = sorted({s.connection.id for s in streams})
            if streams:
                plot_id = f"plot-{number}"
                figures[plot_id] = session_figure(
                    streams, gaps, [connections[c] for c in conns if c in connections]
                )
                body.append(f'<div class="plot" id="{plot_id}"></div>')
            detail = (
                f"{record.id_scheme} IDs, {record.counter_scope} counter"
                + (", inferred from the TCP connections" if record.inferred else "")
                if record is not None
                else ""
            )
            head = (
                f'<section class="session" id="session-{number}">'
                f"<h2>Session <span class=mono>{text(session_id, 200)}</span></h2>"
                f"<p class=meta>{text(detail, 200)}</p>"
            )
            body.append(_ladder_table(ladders.get(session_id)))
        else:
            head = '<section class="session" id="session-none"><h2>Other findings</h2>'
        body.extend(
            _finding(index[f.fingerprint], f, rules, incident.get(f.fingerprint)) for f in findings
        )
        sections.append(head + "\n".join(body) + "</section>")

    scripts = [plotly_js(), PLOT_BOOTSTRAP] if figures else []
    csp = (
        content_security_policy(scripts)
        if scripts
        else ("default-src 'none'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'")
    )
    script_tags = (
        f'<script type="application/json" id="figures">{script_json(figures)}</script>'
        f"<script>{plotly_js()}</script><script>{PLOT_BOOTSTRAP}</script>"
        if figures
        else ""
    )
    title = f"sse-forensics report: {len(incidents)} incident(s), {len(result.findings)} finding(s)"
    return (
        "<!DOCTYPE html>\n<html lang=en><head><meta charset=utf-8>"
        f'<meta http-equiv="Content-Security-Policy" content="{csp}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{html.escape(title)}</title><style>{STYLE}</style></head><body>"
        f"<h1>SSE forensics incident report</h1>"
        f"<p class=meta>sse-forensics {html.escape(__version__)} · every time below is "
        "capture time (UTC) · hover a plot for IDs and frames, drag to zoom, double-click to "
        "reset</p>"
        + _summary(result, numbers, incidents)
        + "\n".join(sections)
        + _errors(result)
        + script_tags
        + "</body></html>\n"
    )
