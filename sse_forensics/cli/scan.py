"""``sse-forensics scan``: findings."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.text import Text

from sse_forensics.cli.common import (
    DEFAULTS,
    EXIT_FINDINGS,
    EXIT_OK,
    EXIT_READ_ERRORS,
    FailOn,
    IdSchemeOpt,
    PathRegex,
    Paths,
    PrefixedRegex,
    ScanFormat,
    Scheme,
    SessionHeader,
    analysis_config,
    usage_error,
)
from sse_forensics.errors import UnreadableInput
from sse_forensics.report.escape import printable
from sse_forensics.verdicts import classification_rank


def scan(
    paths: Paths,
    format: Annotated[
        ScanFormat,
        typer.Option(
            "--format",
            "-f",
            help="Output format: table, json, jsonl (one finding per line) or ocsf.",
        ),
    ] = ScanFormat.table,
    fail_on: Annotated[
        FailOn, typer.Option(help="Exit 1 if a finding at or above this verdict exists.")
    ] = FailOn.silent_corruption,
    rules: Annotated[
        list[Path] | None,
        typer.Option("--rules", help="Extra directory of rule files (repeatable)."),
    ] = None,
    session_header: SessionHeader = DEFAULTS.session_header,
    session_path_regex: PathRegex = DEFAULTS.session_path_regex,
    id_scheme: IdSchemeOpt = Scheme.auto,
    prefixed_regex: PrefixedRegex = DEFAULTS.prefixed_regex,
    quiet: Annotated[
        bool, typer.Option("--quiet", "-q", help="No progress bar, even on a terminal.")
    ] = False,
) -> None:
    """Scan captures and report lost events as findings (table, JSON or JSON lines)."""
    from sse_forensics.engine.registry import load_rules as _load
    from sse_forensics.pipeline import scan_paths
    from sse_forensics.report.jsonout import findings_jsonl, scan_document
    from sse_forensics.report.ocsf import findings_ocsf
    from sse_forensics.report.terminal import render_scan, scan_progress

    config = analysis_config(session_header, session_path_regex, id_scheme, prefixed_regex)
    ruleset = _load(rules)
    # The bar goes to stderr, and only when stdout is a terminal too: a pipe gets no noise.
    bar_console = Console(stderr=True)
    try:
        with scan_progress(bar_console, not quiet and sys.stdout.isatty()) as progress:
            result = scan_paths(paths, config, rules=ruleset, progress=progress)
    except UnreadableInput as exc:
        usage_error(f"{printable(exc.source, 300)}: {printable(exc.reason, 300)}")
    if format is ScanFormat.jsonl:
        sys.stdout.buffer.write(findings_jsonl(result))
        _report_errors_to_stderr(result)
    elif format is ScanFormat.ocsf:
        sys.stdout.buffer.write(findings_ocsf(result.findings))
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
