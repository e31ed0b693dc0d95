"""``sse-forensics scan``: findings."""

from __future__ import annotations

import sys
from typing import Annotated

import typer
from rich.console import Console
from rich.text import Text

from sse_forensics.cli.common import (
    DEFAULTS,
    ClusterOpt,
    FailOn,
    FailOnOpt,
    IdSchemeOpt,
    JobsOpt,
    LimitOpt,
    LogFormatOpt,
    LogMapOpt,
    PathRegex,
    Paths,
    PrefixedRegex,
    QuietOpt,
    RulesOpt,
    ScanFormat,
    Scheme,
    ScratchOpt,
    SessionHeader,
    TLSKeylogOpt,
    analysis_config,
    exit_code,
    log_options,
    run_scan,
)
from sse_forensics.report.escape import printable


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
    fail_on: FailOnOpt = FailOn.silent_corruption,
    rules: RulesOpt = None,
    session_header: SessionHeader = DEFAULTS.session_header,
    session_path_regex: PathRegex = DEFAULTS.session_path_regex,
    id_scheme: IdSchemeOpt = Scheme.auto,
    prefixed_regex: PrefixedRegex = DEFAULTS.prefixed_regex,
    tls_keylog: TLSKeylogOpt = None,
    limit: LimitOpt = None,
    log_format: LogFormatOpt = None,
    log_map: LogMapOpt = None,
    quiet: QuietOpt = False,
    jobs: JobsOpt = None,
    cluster: ClusterOpt = None,
    scratch: ScratchOpt = None,
) -> None:
    """Scan captures and logs and report lost events as findings (table, JSON, JSON lines
    or OCSF)."""
    from sse_forensics.report.jsonout import findings_jsonl, scan_document
    from sse_forensics.report.ocsf import findings_ocsf
    from sse_forensics.report.terminal import render_scan

    config = analysis_config(
        session_header, session_path_regex, id_scheme, prefixed_regex, tls_keylog, limit
    )
    # The bar goes to stderr, and only when stdout is a terminal too: a pipe gets no noise.
    show_progress = not quiet and sys.stdout.isatty()
    result, _ = run_scan(
        paths,
        config,
        rules,
        log_options(log_format, log_map),
        show_progress,
        jobs=jobs,
        cluster=cluster,
        scratch=scratch,
        quiet=quiet,
    )
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
    raise typer.Exit(exit_code(result, fail_on))


def _report_errors_to_stderr(result) -> None:
    if result.errors or result.rule_errors:
        err = Console(stderr=True, highlight=False, soft_wrap=True)
        for e in result.errors:
            where = f" frame {e.frame}" if e.frame is not None else ""
            where = f" line {e.line}" if e.line is not None else where
            err.print(
                Text(f"input problem: {printable(e.source, 200)}{where}: {printable(e.what, 200)}")
            )
        for msg in result.rule_errors:
            err.print(Text(f"rule not loaded: {printable(msg, 300)}"))
    from sse_forensics.coverage import coverage

    for item in coverage(result).items:  # never a silent "all clear" on stdout's behalf
        Console(stderr=True, highlight=False, soft_wrap=True).print(
            Text(f"could not judge: {printable(item.line(), 400)}")
        )
