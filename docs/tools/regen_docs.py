"""Regenerate the docs pages that paste live tool output.

Run ``python docs/tools/regen_docs.py`` (from any directory) after changing a rule in
``rules/``, the CLI's output or a bundled sample, then review ``git diff docs/``. With
``--check`` it writes nothing and exits 1 when a page is stale.

Each page is a Markdown template beside this file whose placeholders (``FINDING_JSON``,
``SCAN`` …) are replaced by what ``sse-forensics`` (and ``tshark`` for the worked example)
print today:

- ``docs/rules.md``: ``rules_head.md`` + an index and a reference built from ``rules/*.toml``
  + ``rules_tail.md`` (the custom-rule walkthrough, run against its own TOML block);
- ``docs/findings.md``: ``findings_tmpl.md``;
- ``docs/worked-example.md``: ``worked_tmpl.md``;
- ``docs/tickets.md``: ``tickets_tmpl.md``.

The pages show ``… | jq …`` command lines; the selection itself is done here in Python and
printed the way ``jq`` 1.6 prints it, so jq is not needed.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import tomllib
from collections.abc import Callable
from pathlib import Path

from sse_forensics.report.jsonout import SESSION_SUMMARY

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
DOCS = REPO / "docs"
# Tables wrap at the terminal width; pin it so the pasted output does not depend on who runs it.
ENV = {**os.environ, "COLUMNS": "100"}

# The rule reference's sections, in reading order; a rule not listed lands in "Other rules".
GROUPS: list[tuple[str, list[str]]] = [
    (
        "Server: live streams",
        ["missing-stream-gap", "gap-signal-late", "non-monotonic-id", "resumable-while-evicting"],
    ),
    ("Evidence sources", ["sources-disagree"]),
    (
        "Server: resumes and replays",
        [
            "silent-resume-jump",
            "resume-in-gap-2xx",
            "empty-replay-2xx",
            "replay-from-oldest",
            "replay-duplicate",
            "replay-crossed-streams",
            "replay-crossed-sessions",
            "backpressure-disconnect-resume-mismatch",
        ],
    ),
    (
        "Contract violations (nothing lost, no gap)",
        ["resume-in-stateless-era", "id-scheme-outlier"],
    ),
    (
        "Client behaviour",
        [
            "client-accepted-gap",
            "client-adjusted-resume",
            "no-reissue-after-410",
            "resume-lost-cursor",
            "resume-storm",
        ],
    ),
    (
        "Signalled or recovered losses (expected gaps)",
        [
            "stream-gap-signalled",
            "resume-gap-signalled",
            "resume-refused-410",
            "gap-client-reissued",
        ],
    ),
]
SAMPLES_SHOWN = 3  # per rule; the rest are counted ("and N more")

LIVE_JUMP = "samples/live-jump-unsignalled.pcap"
RESUME_JUMP = "samples/resume-jump-unsignalled.pcap"
GARBAGE_CHUNK = "samples/crafted-garbage-chunk.pcap"
LOG_410 = "samples/logs/resume-410/"
LIVE_GAP = "samples/live-gap-signalled.pcap"
PROXY = "samples/crafted-proxy-two-legs.pcap"


# -- running the tools ---------------------------------------------------------------------


def _run(args: list[str], cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    """Run a tool; its exit code is not checked (``scan`` exits 1 when it finds something)."""
    if shutil.which(args[0]) is None:
        raise SystemExit(f"regen_docs: {args[0]} is not on PATH (pip install -e . / apt tshark)")
    return subprocess.run(args, cwd=cwd, env=ENV, capture_output=True, encoding="utf-8")


def _cli(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    return _run(["sse-forensics", *args], cwd=cwd)


def _jsonl(text: str) -> list[dict]:
    return [json.loads(line) for line in text.split("\n") if line.strip()]


def _tidy(text: str) -> str:
    """Output as pasted: trailing blanks dropped (Markdown linters and diffs hate them)."""
    return "\n".join(line.rstrip() for line in text.rstrip().splitlines())


def _shown(command: str, output: str) -> str:
    """A terminal transcript: the command line, then its output."""
    return f"$ {command}\n{_tidy(output)}"


def _head(text: str, n: int) -> str:
    """The first ``n`` lines, as ``head -n`` keeps them."""
    lines = text.split("\n")
    return "\n".join(lines[:n]) + ("\n" if len(lines) > n else "")


def _jq(value: object, depth: int = 0) -> str:
    """``value`` as ``jq .`` (1.6) prints it: two-space indent, integral floats without ``.0``,
    DEL escaped."""
    indent = "  " * (depth + 1)
    if isinstance(value, dict) and value:
        members = [f"{indent}{_jq(k)}: {_jq(v, depth + 1)}" for k, v in value.items()]
        return "{\n" + ",\n".join(members) + "\n" + "  " * depth + "}"
    if isinstance(value, list) and value:
        items = [indent + _jq(v, depth + 1) for v in value]
        return "[\n" + ",\n".join(items) + "\n" + "  " * depth + "]"
    if isinstance(value, float):
        return repr(value).removesuffix(".0")
    return json.dumps(value, ensure_ascii=False).replace("\x7f", "\\u007f")


def _jq_compact(value: object) -> str:
    """``value`` as ``jq -c`` prints it: no blanks between tokens."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).replace("\x7f", "\\u007f")


def _jq_raw(value: object) -> str:
    """``value`` as ``jq -r`` prints it (and as ``\\(…)`` interpolates a scalar)."""
    return value if isinstance(value, str) else _jq(value)


def _fill(template: str, values: dict[str, str]) -> str:
    """Replace each placeholder word in one pass, so pasted output is never rescanned."""
    pattern = re.compile(r"\b(" + "|".join(map(re.escape, values)) + r")\b")
    return pattern.sub(lambda m: values[m.group(1)], template)


def _template(name: str) -> str:
    return (HERE / name).read_text(encoding="utf-8")


# -- docs/rules.md -------------------------------------------------------------------------


def _packaged_rules() -> dict[str, dict]:
    rules = [
        tomllib.loads(p.read_text(encoding="utf-8")) for p in sorted(REPO.glob("rules/*.toml"))
    ]
    return {rule["id"]: rule for rule in rules}


def _fired() -> dict[str, list[tuple[str, str]]]:
    """Per rule, the bundled samples it fires on, each with the verdict it gave there."""
    fired: dict[str, list[tuple[str, str]]] = {}
    for pcap in sorted(REPO.glob("samples/*.pcap*")):
        sample = pcap.relative_to(REPO).as_posix()
        scan = _cli("scan", sample, "-f", "jsonl", "--fail-on", "never")
        for finding in _jsonl(scan.stdout):
            seen = fired.setdefault(finding["rule"]["id"], [])
            verdict = finding["sse_forensics"]["classification"]
            if (sample, verdict) not in seen:
                seen.append((sample, verdict))
    return fired


def _prose(text: str) -> str:
    """A rule's rationale or remediation as doc prose: its ruff-style "What it does:" and
    "Why is this bad?" lead-ins in bold, each followed by a capital."""
    text = re.sub(
        r"What it does: (\w)", lambda m: "**What it detects.** " + m.group(1).upper(), text
    )
    text = re.sub(
        r"(?:Why is this bad\?|Why it matters:) (\S)",
        lambda m: "**Why it matters.** " + m.group(1).upper(),
        text,
    )
    return text.strip()


def _rule_section(rule: dict, samples: list[tuple[str, str]]) -> list[str]:
    verdict = (
        f"`{rule['classification']}`"
        if "classification" in rule
        else "`silent_corruption`, or `indeterminate` when capture bytes are missing"
    )
    parts = [
        f"### `{rule['id']}`\n",
        f"*{rule['title']}.*\n",
        f"Severity `{rule['severity']}` · verdict {verdict} · table `{rule['table']}` · "
        f"fires when `{rule['where']}`\n",
        _prose(rule["rationale"]) + "\n",
        "**How to fix.** " + _prose(rule["remediation"]) + "\n",
    ]
    if "indeterminate_message" in rule:
        worded = f"`{rule['indeterminate_message']}`"
        parts.append(
            "When the capture lacks bytes of the stretch the finding is `indeterminate`, "
            f"severity at most `low`, worded as capture loss ({worded}) and its remediation "
            "is capture advice ([capturing.md](capturing.md)).\n"
        )
    if rule.get("example", "").strip():
        parts.append("```text\n" + rule["example"].strip("\n") + "\n```\n")
    # The sample named after the rule first, then alphabetical.
    samples = sorted(samples, key=lambda s: (Path(s[0]).stem != rule["id"], s))
    if samples:
        shown = ", ".join(f"`{name}` ({verdict})" for name, verdict in samples[:SAMPLES_SHOWN])
        rest = len(samples) - SAMPLES_SHOWN
        more = f" and {rest} more" if rest > 0 else ""
        parts.append(f"Bundled samples: {shown}{more}.\n")
    return parts


def _custom_rule_walkthrough(tail: str) -> str:
    """Run the tail's TOML rule example as a site rule, and a broken copy of it, in a scratch
    directory, so the commands shown use the short relative paths a reader would type."""
    toml_block = re.search(r"```toml\n(.*?)```", tail, re.S)
    if toml_block is None:
        raise SystemExit("regen_docs: rules_tail.md has no ```toml block")
    rule_toml = toml_block.group(1)
    with tempfile.TemporaryDirectory() as scratch:
        work = Path(scratch)
        (work / "site-rules").mkdir()
        (work / "bad-rules").mkdir()
        (work / "site-rules" / "large-signalled-gap.toml").write_text(rule_toml, encoding="utf-8")
        broken = rule_toml.replace("count >= 5", "cnt >= 5")
        (work / "bad-rules" / "large-signalled-gap.toml").write_text(broken, encoding="utf-8")
        (work / "samples").symlink_to(REPO / "samples")

        show = _cli("rules", "show", "large-signalled-gap", "--rules", "site-rules/", cwd=work)
        table = _cli("scan", LIVE_GAP, "--rules", "site-rules/", cwd=work)
        jsonl = _cli("scan", LIVE_GAP, "--rules", "site-rules/", "-f", "jsonl", cwd=work)
        bad = _cli("scan", LIVE_GAP, "--rules", "bad-rules/", "-f", "json", cwd=work)

    messages = "".join(
        f["message"] + "\n"
        for f in _jsonl(jsonl.stdout)
        if f["rule"]["id"] == "large-signalled-gap"
    )
    rule_errors = "".join(_jq_raw(e) + "\n" for e in json.loads(bad.stdout)["rule_errors"])
    return _fill(
        tail,
        {
            "RULES_LIST_OUTPUT": _shown(
                "sse-forensics rules show large-signalled-gap --rules site-rules/ | head -6",
                _head(show.stdout, 6) + show.stderr,
            ),
            "SCAN_OUTPUT": _shown(
                f"sse-forensics scan {LIVE_GAP} --rules site-rules/", table.stdout + table.stderr
            )
            + "\n\n"
            + _shown(
                f"sse-forensics scan {LIVE_GAP} --rules site-rules/ -f jsonl"
                " | jq -r 'select(.rule.id == \"large-signalled-gap\") | .message'",
                messages + jsonl.stderr,
            ),
            "BAD_RULE_OUTPUT": _shown(
                f"sse-forensics scan {LIVE_GAP} --rules bad-rules/ -f json"
                " | jq -r '.rule_errors[]'",
                rule_errors + bad.stderr,
            ),
        },
    )


def render_rules() -> str:
    """docs/rules.md: head, index table, one section per packaged rule, custom-rule tail."""
    rules = _packaged_rules()
    fired = _fired()
    unplaced = sorted(set(rules) - {rid for _, ids in GROUPS for rid in ids})
    groups = GROUPS + ([("Other rules", unplaced)] if unplaced else [])
    index = ["| rule | severity | verdict | detects |", "|---|---|---|---|"]
    reference: list[str] = []
    for title, ids in groups:
        present = [rid for rid in ids if rid in rules]
        if not present:
            continue
        reference.append(f"## {title}\n")
        for rid in present:
            rule = rules[rid]
            verdict = rule.get("classification") or "from data"
            index.append(
                f"| [`{rid}`](#{rid}) | {rule['severity']} | {verdict} | {rule['title']} |"
            )
            reference += _rule_section(rule, fired.get(rid, []))
    return (
        _template("rules_head.md")
        + "\n".join(index)
        + "\n\n"
        + "\n".join(reference)
        + "\n"
        + _custom_rule_walkthrough(_template("rules_tail.md"))
    )


# -- docs/findings.md ----------------------------------------------------------------------


def render_findings() -> str:
    """docs/findings.md: a finding as ECS and as OCSF, the flow of a finding from logs alone,
    a trimmed scan document, input errors, a ticket body."""
    live_jump = json.loads(_cli("scan", LIVE_JUMP, "-f", "json").stdout)
    session_keys = (*SESSION_SUMMARY, "verdicts")
    trimmed = {
        **{
            key: live_jump.get(key)
            for key in ("tool", "inputs", "stats", "capture_loss", "verdicts")
        },
        "sessions": [{k: s.get(k) for k in session_keys} for s in live_jump["sessions"]],
        "findings": ["…"],
        **{key: live_jump.get(key) for key in ("errors", "rule_errors")},
    }
    garbage = json.loads(_cli("scan", GARBAGE_CHUNK, "-f", "json").stdout)
    ticket = _jsonl(_cli("scan", RESUME_JUMP, "-f", "jsonl").stdout)[0]
    evidence = [
        f"- {_jq_raw(e.get('source'))} frame {_jq_raw(e.get('frame'))}: {_jq_raw(e.get('what'))}"
        for e in ticket["sse_forensics"]["evidence"]
    ]
    finding = _jsonl(_cli("scan", LIVE_JUMP, "-f", "jsonl").stdout)[0]
    record = next(
        r
        for r in _jsonl(_cli("scan", LIVE_JUMP, "-f", "ocsf").stdout)
        if r["finding_info"]["uid"] == finding["event"]["id"]
    )
    proxy = json.loads(_cli("scan", PROXY, "-f", "json").stdout)
    (incident,) = proxy["incidents"]
    summary = next(
        line for line in _cli("scan", PROXY).stdout.splitlines() if line.startswith("Incidents:")
    )
    from_log = _jsonl(_cli("scan", LOG_410, "-f", "jsonl").stdout)[0]
    flow = {key: from_log.get(key) for key in ("network", "source", "destination")}
    return _fill(
        _template("findings_tmpl.md"),
        {
            "FINDING_JSON": _jq(finding),
            "LOG_FLOW": _shown(
                f"sse-forensics scan {LOG_410} -f jsonl"
                " | head -1 | jq -c '{network, source, destination}'",
                _jq_compact(flow),
            ),
            "OCSF_JSON": _jq(record),
            "INCIDENT_SUMMARY": _shown(f"sse-forensics scan {PROXY} | grep Incidents", summary),
            "INCIDENT_JSON": _jq(incident),
            "DOC_JSON": _jq(trimmed),
            "ERROR_JSON": _jq(garbage.get("errors")),
            "TICKET_BODY": "\n".join([ticket["message"], "", *evidence]).rstrip(),
        },
    )


# -- docs/worked-example.md ----------------------------------------------------------------


def _tshark(*args: str) -> str:
    """tshark's output on the worked example's capture (its warnings are not shown)."""
    return _run(["tshark", "-r", RESUME_JUMP, *args]).stdout


def _frame_payload(frame: int) -> str:
    """The TCP payload of one frame as text, as ``tshark … -e tcp.payload | xxd -r -p`` shows it."""
    hex_payload = _tshark("-Y", f"frame.number == {frame}", "-T", "fields", "-e", "tcp.payload")
    raw = bytes.fromhex(re.sub(r"[^0-9a-fA-F]", "", hex_payload))
    # Decoded like a text-mode pipe: universal newlines turn the wire's CRLF into LF.
    return raw.decode("utf-8", "replace").replace("\r\n", "\n").replace("\r", "\n")


def render_worked_example() -> str:
    """docs/worked-example.md: one resume-jump incident from scan to Wireshark to ticket."""
    findings = _jsonl(_cli("scan", RESUME_JUMP, "-f", "jsonl").stdout)
    by_rule = {f["rule"]["id"]: f for f in findings}
    jump = by_rule["silent-resume-jump"]
    port = jump["destination"]["port"]
    frames = sorted({e["frame"] for e in jump["sse_forensics"]["evidence"]})
    frame_set = ",".join(map(str, frames))

    # `scan` exits 1 on a silent_corruption finding; the page shows that.
    scan = _shown(f"sse-forensics scan {RESUME_JUMP}", _cli("scan", RESUME_JUMP).stdout)
    session = "resume-jump-unsignalled-0001"
    timeline = _cli("timeline", RESUME_JUMP, "--session", session).stdout
    selected = "\n".join(_jq(f) for f in findings if f["rule"]["id"] == "silent-resume-jump")
    tshark_list = _tshark("-d", f"tcp.port=={port},http", "-Y", f"frame.number in {{{frame_set}}}")
    payloads = [
        _shown(
            f"tshark -r {RESUME_JUMP} -Y 'frame.number == {n}' -T fields -e tcp.payload"
            " 2>/dev/null | xxd -r -p",
            _frame_payload(n),
        )
        for n in frames
    ]
    return _fill(
        _template("worked_tmpl.md"),
        {
            "SCAN": scan + "\n$ echo $?\n1",
            "TIMELINE": _shown(
                f"sse-forensics timeline {RESUME_JUMP} --session {session}", timeline
            ),
            "FINDING": _shown(
                f"sse-forensics scan {RESUME_JUMP} -f jsonl"
                " | jq 'select(.rule.id == \"silent-resume-jump\")'",
                selected,
            ),
            "TSHARK_LIST": _shown(
                f"tshark -r {RESUME_JUMP} -d tcp.port=={port},http"
                f" -Y 'frame.number in {{{frame_set}}}' 2>/dev/null",
                tshark_list,
            ),
            "TSHARK_PAYLOADS": "\n\n".join(payloads),
            "PORT": str(port),
            "FP_2XX": f"`{by_rule['resume-in-gap-2xx']['event']['id']}`",
            "FP_JUMP": f"`{jump['event']['id']}`",
        },
    )


# -- docs/tickets.md -----------------------------------------------------------------------


def render_tickets() -> str:
    """docs/tickets.md: one ticket of the proxy sample, its fields and its rendered body."""
    (ticket,) = _jsonl(_cli("scan", PROXY, "-f", "tickets").stdout)
    shown = {k: ticket[k] for k in ("title", "labels", "severity", "fingerprint", "finding_ids")}
    body = ticket["body"].rstrip("\n")
    fence = "`" * (max(len(r) for r in re.findall(r"`+", body)) + 1)
    return _fill(
        _template("tickets_tmpl.md"),
        {
            "TICKET_JSON": _shown(
                f"sse-forensics scan {PROXY} -f tickets"
                " | jq '{title, labels, severity, fingerprint, finding_ids}'",
                _jq(shown),
            ),
            "TICKET_BODY": f"{fence}markdown\n{body}\n{fence}",
        },
    )


# -- entry point ---------------------------------------------------------------------------

PAGES: dict[str, Callable[[], str]] = {
    "rules.md": render_rules,
    "findings.md": render_findings,
    "worked-example.md": render_worked_example,
    "tickets.md": render_tickets,
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--check", action="store_true", help="write nothing; exit 1 if a page is out of date"
    )
    parser.add_argument("pages", nargs="*", metavar="PAGE", help=f"one of {', '.join(PAGES)}")
    args = parser.parse_args(argv)
    if unknown := sorted(set(args.pages) - set(PAGES)):
        parser.error(f"no generated page {', '.join(unknown)}")
    stale = []
    for name in args.pages or PAGES:
        page = DOCS / name
        text = PAGES[name]()
        if page.exists() and page.read_text(encoding="utf-8") == text:
            continue
        stale.append(name)
        if not args.check:
            page.write_text(text, encoding="utf-8")
    verb = "out of date" if args.check else "rewritten"
    for name in stale:
        print(f"docs/{name}: {verb}", file=sys.stderr)
    return 1 if args.check and stale else 0


if __name__ == "__main__":
    sys.exit(main())
