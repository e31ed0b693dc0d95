"""``sse-forensics report``: one self-contained HTML file for a ticket."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from sse_forensics.cli.common import (
    DEFAULTS,
    FailOn,
    FailOnOpt,
    HostOpt,
    IdSchemeOpt,
    LimitOpt,
    LogFormatOpt,
    LogMapOpt,
    PathRegex,
    Paths,
    PortOpt,
    PrefixedRegex,
    RulesOpt,
    Scheme,
    SessionHeader,
    SessionOpt,
    SinceOpt,
    TLSKeylogOpt,
    UntilOpt,
    analysis_config,
    exit_code,
    log_options,
    option_warnings,
    parse_selection,
    run_scan,
    select_session,
    usage_error,
)
from sse_forensics.report.escape import printable


def report(
    paths: Paths,
    output: Annotated[
        Path,
        typer.Option(
            "--output", "-o", metavar="FILE", help="The HTML file to write, e.g. incident.html."
        ),
    ],
    fail_on: FailOnOpt = FailOn.silent_corruption,
    session: SessionOpt = None,
    since: SinceOpt = None,
    until: UntilOpt = None,
    host: HostOpt = None,
    port: PortOpt = None,
    rules: RulesOpt = None,
    session_header: SessionHeader = DEFAULTS.session_header,
    session_path_regex: PathRegex = DEFAULTS.session_path_regex,
    id_scheme: IdSchemeOpt = Scheme.auto,
    prefixed_regex: PrefixedRegex = DEFAULTS.prefixed_regex,
    tls_keylog: TLSKeylogOpt = None,
    limit: LimitOpt = None,
    log_format: LogFormatOpt = None,
    log_map: LogMapOpt = None,
    quiet: Annotated[
        bool, typer.Option("--quiet", "-q", help="No progress bar and no closing line.")
    ] = False,
) -> None:
    """Write one self-contained HTML report (summary, findings with rationale and
    remediation, a plot per affected session); it makes no network fetch when opened."""
    from rich.console import Console
    from rich.text import Text

    from sse_forensics.report.html import render_report

    config = analysis_config(
        session_header, session_path_regex, id_scheme, prefixed_regex, tls_keylog, limit
    )
    selection = parse_selection(since, until, host, port)
    show_progress = not quiet and sys.stderr.isatty()
    result, ruleset = run_scan(
        paths, config, rules, log_options(log_format, log_map), show_progress, keep_records=True
    )
    option_warnings(result, id_scheme, log_format)
    sessions = result.tables["sessions"].get_column("session_id").to_list()
    result = select_session(selection, session, sessions).apply(result)
    try:
        output.write_text(render_report(result, ruleset), encoding="utf-8")
    except OSError as exc:
        usage_error(f"{printable(output, 300)}: cannot write the report: {exc.strerror}")
    if not quiet:
        n_sessions = len({f.session_id for f in result.findings if f.session_id})
        Console(stderr=True, highlight=False, soft_wrap=True).print(
            Text(
                f"wrote {printable(output, 300)}: {len(result.findings)} finding(s) in "
                f"{n_sessions} session(s), {len(result.errors)} input problem(s)"
            )
        )
    raise typer.Exit(exit_code(result, fail_on))
