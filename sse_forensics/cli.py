"""Command line: ``scan`` (findings), ``timeline`` (what was reassembled), ``rules``.

Exit codes (``docs/exit-codes.md``): 0 nothing at or above ``--fail-on``; 1 findings at or
above it; 2 usage error or an input that is not a capture at all; 3 no such finding, but
part of the input could not be read (listed under ``errors``).
"""

from __future__ import annotations

import sys
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markdown import Markdown
from rich.text import Text

from sse_forensics import __version__
from sse_forensics.engine.registry import load_rules
from sse_forensics.errors import UnreadableInput
from sse_forensics.facts.config import AnalysisConfig
from sse_forensics.report.escape import printable
from sse_forensics.verdicts import classification_rank

EXIT_OK = 0
EXIT_FINDINGS = 1
EXIT_USAGE = 2
EXIT_READ_ERRORS = 3

app = typer.Typer(
    name="sse-forensics",
    help=(
        "Find lost Server-Sent Events in packet captures of MCP streamable-HTTP traffic and "
        "say, per session, whether each loss was signalled (expected_gap), silent "
        "(silent_corruption) or unknowable from the capture (indeterminate)."
    ),
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
)
rules_app = typer.Typer(help="List the detection rules and explain one.", no_args_is_help=True)
app.add_typer(rules_app, name="rules")


class ScanFormat(StrEnum):
    table = "table"
    json = "json"
    jsonl = "jsonl"


class TimelineFormat(StrEnum):
    table = "table"
    jsonl = "jsonl"


class FailOn(StrEnum):
    expected_gap = "expected_gap"
    indeterminate = "indeterminate"
    silent_corruption = "silent_corruption"
    never = "never"


class Scheme(StrEnum):
    auto = "auto"
    int = "int"
    prefixed = "prefixed"
    opaque = "opaque"


def _version(value: bool) -> None:
    if value:
        print(f"sse-forensics {__version__}")
        raise typer.Exit(EXIT_OK)


@app.callback()
def main_callback(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version.")
    ] = False,
) -> None:
    """sse-forensics: offline forensics for resumable SSE streams."""


Paths = Annotated[
    list[str],
    typer.Argument(help="Capture files (pcap/pcapng) or directories; merged in time order."),
]
SessionHeader = Annotated[str, typer.Option(help="Header that carries the session ID.")]
PathRegex = Annotated[
    str, typer.Option(help="Regex with a named group 'session' matched on the request path.")
]
IdSchemeOpt = Annotated[Scheme, typer.Option(help="Event-ID scheme; 'auto' detects per session.")]
PrefixedRegex = Annotated[
    str, typer.Option(help="Regex for prefixed IDs with named groups 'stream' and 'seq'.")
]


def _config(
    session_header: str, session_path_regex: str, id_scheme: Scheme, prefixed_regex: str
) -> AnalysisConfig:
    import re

    for name, pattern, group in (
        ("--session-path-regex", session_path_regex, "session"),
        ("--prefixed-regex", prefixed_regex, "seq"),
    ):
        try:
            compiled = re.compile(pattern)
        except re.error as exc:
            _usage_error(f"{name}: invalid regular expression: {exc}")
        if group not in compiled.groupindex:
            _usage_error(f"{name}: the pattern needs a named group (?P<{group}>...)")
    return AnalysisConfig(
        session_header=session_header,
        session_path_regex=session_path_regex,
        id_scheme=None if id_scheme is Scheme.auto else id_scheme.value,
        prefixed_regex=prefixed_regex,
    )


def _usage_error(message: str) -> None:
    Console(stderr=True, soft_wrap=True).print(Text(f"sse-forensics: {message}", style="red"))
    raise typer.Exit(EXIT_USAGE)


_DEFAULTS = AnalysisConfig()


@app.command()
def scan(
    paths: Paths,
    format: Annotated[
        ScanFormat, typer.Option("--format", "-f", help="Output format.")
    ] = ScanFormat.table,
    fail_on: Annotated[
        FailOn, typer.Option(help="Exit 1 if a finding at or above this verdict exists.")
    ] = FailOn.silent_corruption,
    rules: Annotated[
        list[Path] | None,
        typer.Option("--rules", help="Extra directory of rule files (repeatable)."),
    ] = None,
    session_header: SessionHeader = _DEFAULTS.session_header,
    session_path_regex: PathRegex = _DEFAULTS.session_path_regex,
    id_scheme: IdSchemeOpt = Scheme.auto,
    prefixed_regex: PrefixedRegex = _DEFAULTS.prefixed_regex,
) -> None:
    """Scan captures and report lost events as findings (table, JSON or JSON lines)."""
    from sse_forensics.engine.registry import load_rules as _load
    from sse_forensics.pipeline import scan_paths
    from sse_forensics.report.jsonout import findings_jsonl, scan_document
    from sse_forensics.report.terminal import render_scan

    config = _config(session_header, session_path_regex, id_scheme, prefixed_regex)
    ruleset = _load(rules)
    try:
        result = scan_paths(paths, config, rules=ruleset)
    except UnreadableInput as exc:
        _usage_error(f"{printable(exc.source, 300)}: {printable(exc.reason, 300)}")
    if format is ScanFormat.jsonl:
        sys.stdout.buffer.write(findings_jsonl(result))
        _report_errors_to_stderr(result)
    elif format is ScanFormat.json:
        sys.stdout.buffer.write(scan_document(result))
    else:
        render_scan(Console(highlight=False), result)
    sys.stdout.flush()
    raise typer.Exit(_exit_code(result, fail_on))


def _report_errors_to_stderr(result) -> None:
    if result.errors or result.rule_errors:
        err = Console(stderr=True, highlight=False, soft_wrap=True)
        for e in result.errors:
            where = f" frame {e.frame}" if e.frame is not None else ""
            err.print(
                Text(f"input problem: {printable(e.source, 200)}{where}: {printable(e.what, 200)}")
            )
        for msg in result.rule_errors:
            err.print(Text(f"rule not loaded: {printable(msg, 300)}"))


def _exit_code(result, fail_on: FailOn) -> int:
    if fail_on is not FailOn.never:
        threshold = classification_rank(fail_on.value)
        if any(classification_rank(f.classification) >= threshold for f in result.findings):
            return EXIT_FINDINGS
    if result.errors:
        return EXIT_READ_ERRORS
    return EXIT_OK


@app.command()
def timeline(
    paths: Paths,
    format: Annotated[
        TimelineFormat, typer.Option("--format", "-f", help="Output format.")
    ] = TimelineFormat.table,
    session: Annotated[str | None, typer.Option(help="Only this session ID.")] = None,
    session_header: SessionHeader = _DEFAULTS.session_header,
    session_path_regex: PathRegex = _DEFAULTS.session_path_regex,
    id_scheme: IdSchemeOpt = Scheme.auto,
    prefixed_regex: PrefixedRegex = _DEFAULTS.prefixed_regex,
) -> None:
    """Show what was reassembled: requests, responses and SSE events in time order."""
    from sse_forensics.pipeline import reassemble_paths
    from sse_forensics.report.timeline import render_timeline, timeline_jsonl, timeline_records

    config = _config(session_header, session_path_regex, id_scheme, prefixed_regex)
    try:
        _, facts, reassembly = reassemble_paths(paths, config)
    except UnreadableInput as exc:
        _usage_error(f"{printable(exc.source, 300)}: {printable(exc.reason, 300)}")
    if format is TimelineFormat.jsonl:
        sys.stdout.buffer.write(timeline_jsonl(timeline_records(reassembly, facts, session)))
    else:
        render_timeline(Console(highlight=False), facts, session)
    raise typer.Exit(EXIT_READ_ERRORS if reassembly.errors else EXIT_OK)


@rules_app.command("list")
def rules_list(
    rules: Annotated[
        list[Path] | None, typer.Option("--rules", help="Extra rule directory.")
    ] = None,
) -> None:
    """List every rule with its severity and what it detects."""
    from rich.table import Table

    ruleset = load_rules(rules)
    table = Table()
    for col in ("id", "severity", "verdict", "table", "title"):
        table.add_column(col)
    for r in ruleset.rules:
        table.add_row(
            r.id, r.severity, r.classification or f"from {r.classification_from}", r.table, r.title
        )
    console = Console(highlight=False)
    console.print(table)
    for msg in ruleset.errors:
        console.print(Text(f"rule not loaded: {msg}", style="red"))


@rules_app.command("show")
def rules_show(
    rule_id: Annotated[str, typer.Argument(help="Rule id, e.g. missing-stream-gap.")],
    rules: Annotated[
        list[Path] | None, typer.Option("--rules", help="Extra rule directory.")
    ] = None,
) -> None:
    """Print a rule's rationale, remediation, example and predicate."""
    ruleset = load_rules(rules)
    rule = ruleset.get(rule_id)
    if rule is None:
        _usage_error(f"no rule {rule_id!r}; `sse-forensics rules list` shows them")
    verdict = rule.classification or f"from column `{rule.classification_from}`"
    text = (
        f"# {rule.id}: {rule.title}\n\n"
        f"**Severity:** {rule.severity} · **Verdict:** {verdict} · **Table:** `{rule.table}`\n\n"
        f"**Predicate:** `{rule.where}`\n\n## Rationale\n\n{rule.rationale}\n\n"
        f"## Remediation\n\n{rule.remediation}\n\n"
    )
    if rule.example:
        text += f"## Example\n\n```\n{rule.example}\n```\n\n"
    if rule.references:
        text += "## References\n\n" + "\n".join(f"- {r}" for r in rule.references) + "\n"
    Console().print(Markdown(text))


def main() -> None:
    try:
        app()
    except KeyboardInterrupt:
        sys.exit(130)
