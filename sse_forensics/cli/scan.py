"""``sse-forensics scan``: findings."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from sse_forensics.cli.common import (
    DEFAULTS,
    FILE_WIDTH,
    ClusterOpt,
    FailOn,
    FailOnOpt,
    HostOpt,
    IdSchemeOpt,
    JobsOpt,
    LimitOpt,
    LogFormatOpt,
    LogMapOpt,
    OutputOpt,
    PathRegex,
    Paths,
    PortOpt,
    PrefixedRegex,
    QuietOpt,
    RulesOpt,
    ScanFormat,
    Scheme,
    ScratchOpt,
    SessionHeader,
    SessionOpt,
    SinceOpt,
    TLSKeylogOpt,
    UntilOpt,
    analysis_config,
    early_workers,
    exit_code,
    log_options,
    option_warnings,
    output_stream,
    parse_selection,
    run_scan,
    select_session,
)
from sse_forensics.report.escape import printable


def scan(
    paths: Paths,
    format: Annotated[
        ScanFormat,
        typer.Option(
            "--format",
            "-f",
            help="Output format: table, json, jsonl (one finding per line), ocsf, or "
            "tickets (one incident per line, ready for a tracker: docs/tickets.md).",
        ),
    ] = ScanFormat.table,
    output: OutputOpt = None,
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
    quiet: QuietOpt = False,
    jobs: JobsOpt = None,
    cluster: ClusterOpt = None,
    scratch: ScratchOpt = None,
) -> None:
    """Scan captures and logs and report lost events as findings (table, JSON, JSON lines
    or OCSF) or as tickets, one per incident. PATH may be - (standard input), a pipe or a
    compressed capture."""
    # Started first: their imports overlap this process's (run_scan shuts them down).
    pool = early_workers(paths, jobs, cluster)
    try:
        config = analysis_config(
            session_header, session_path_regex, id_scheme, prefixed_regex, tls_keylog, limit
        )
        selection = parse_selection(since, until, host, port)
        logs = log_options(log_format, log_map)
    except BaseException:
        if pool is not None:
            pool.shutdown(wait=False)
        raise
    from rich.console import Console
    from rich.text import Text

    from sse_forensics.report.jsonout import findings_jsonl, scan_document
    from sse_forensics.report.ocsf import findings_ocsf
    from sse_forensics.report.terminal import MAX_UNJUDGED_SHOWN, render_scan

    # The bar goes to stderr, and only when stdout is a terminal too: a pipe gets no noise.
    show_progress = not quiet and sys.stdout.isatty() and output is None
    result, _ = run_scan(
        paths,
        config,
        rules,
        logs,
        show_progress,
        jobs=jobs,
        cluster=cluster,
        scratch=scratch,
        quiet=quiet,
        pool=pool,
        # The JSON document lists every session and every item it could not judge; the
        # terminal (and stderr beside JSON lines, OCSF or tickets) counts the sessions and
        # lists the first few items: the scan keeps those only — unless --session must
        # find its session among them all.
        unjudged_listed=(
            None if format is ScanFormat.json or session is not None else MAX_UNJUDGED_SHOWN
        ),
    )
    option_warnings(result, id_scheme, log_format)
    # The IDs as a column, read as Python strings only if --session asks (1.28M sessions:
    # ~110 MB of str objects beside the table).
    sessions = result.tables["sessions"].get_column("session_id")
    selection = select_session(selection, session, sessions)
    shown = selection.apply(result)
    if format is ScanFormat.table:
        with output_stream(output, binary=False) as out:
            console = (
                Console(highlight=False)
                if output is None
                else Console(file=out, width=FILE_WIDTH, highlight=False)
            )
            if not selection.everything:
                console.print(
                    Text(
                        f"Showing {printable(selection.describe(), 300)} only: "
                        f"{len(shown.findings)} of {len(result.findings)} finding(s).",
                        style="bold",
                    )
                )
            render_scan(console, shown)
    else:
        with output_stream(output) as out:
            if format is ScanFormat.jsonl:
                out.write(findings_jsonl(shown))
            elif format is ScanFormat.ocsf:
                out.write(findings_ocsf(shown.findings))
            elif format is ScanFormat.tickets:
                from sse_forensics.report.tickets import scan_options, tickets_jsonl

                out.write(tickets_jsonl(shown, scan_options(config, log_format, log_map)))
            else:
                out.write(scan_document(shown))
        if format is not ScanFormat.json:
            _report_errors_to_stderr(shown)
    raise typer.Exit(exit_code(shown, fail_on))


def _report_errors_to_stderr(result) -> None:
    """Input problems and what could not be judged, on stderr for the machine formats: their
    stdout carries findings only, and an empty stdout must never read as "all clear"
    (docs/exit-codes.md). As on the terminal report, the first ``MAX_ERRORS_SHOWN`` problems
    and ``MAX_UNJUDGED_SHOWN`` unjudged streams are listed and the rest counted: a 1.2 GB log
    set has ~250,000 unjudged resumes, which ``--format json`` lists one by one."""
    from rich.console import Console
    from rich.text import Text

    from sse_forensics.coverage import coverage
    from sse_forensics.report.terminal import MAX_ERRORS_SHOWN, fold_errors, print_unjudged

    err = Console(stderr=True, highlight=False, soft_wrap=True)
    lines = fold_errors(result.errors)
    for line in lines[:MAX_ERRORS_SHOWN]:
        err.print(Text(f"input problem: {line}"))
    if len(lines) > MAX_ERRORS_SHOWN:
        err.print(f"input problem: … and {len(lines) - MAX_ERRORS_SHOWN} more (see --format json)")
    for msg in result.rule_errors:
        err.print(Text(f"rule not loaded: {printable(msg, 300)}"))
    cov = coverage(result)
    if not cov.complete:
        print_unjudged(err, cov)
