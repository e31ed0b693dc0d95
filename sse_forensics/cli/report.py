"""``sse-forensics report``: the findings as one self-contained HTML file for a ticket."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.text import Text

from sse_forensics.cli.common import (
    DEFAULTS,
    FailOn,
    IdSchemeOpt,
    PathRegex,
    Paths,
    PrefixedRegex,
    Scheme,
    SessionHeader,
    analysis_config,
    usage_error,
)
from sse_forensics.cli.scan import _exit_code
from sse_forensics.errors import UnreadableInput
from sse_forensics.report.escape import printable


def report(
    paths: Paths,
    output: Annotated[
        Path, typer.Option("--output", "-o", help="The HTML file to write, e.g. incident.html.")
    ],
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
        bool, typer.Option("--quiet", "-q", help="No progress bar and no closing line.")
    ] = False,
) -> None:
    """Write one self-contained HTML report (summary, findings with rationale and
    remediation, a plot per affected session); it makes no network fetch when opened."""
    from sse_forensics.engine.registry import load_rules
    from sse_forensics.pipeline import scan_paths
    from sse_forensics.report.html import render_report
    from sse_forensics.report.terminal import scan_progress

    config = analysis_config(session_header, session_path_regex, id_scheme, prefixed_regex)
    ruleset = load_rules(rules)
    err = Console(stderr=True, highlight=False, soft_wrap=True)
    try:
        with scan_progress(err, not quiet and sys.stderr.isatty()) as progress:
            result = scan_paths(paths, config, rules=ruleset, progress=progress)
    except UnreadableInput as exc:
        usage_error(f"{printable(exc.source, 300)}: {printable(exc.reason, 300)}")
    try:
        output.write_text(render_report(result, ruleset), encoding="utf-8")
    except OSError as exc:
        usage_error(f"{printable(output, 300)}: cannot write the report: {exc.strerror}")
    if not quiet:
        sessions = len({f.session_id for f in result.findings if f.session_id})
        err.print(
            Text(
                f"wrote {printable(output, 300)}: {len(result.findings)} finding(s) in "
                f"{sessions} session(s), {len(result.errors)} input problem(s)"
            )
        )
    raise typer.Exit(_exit_code(result, fail_on))
