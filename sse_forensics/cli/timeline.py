"""``sse-forensics timeline``: what was reassembled."""

from __future__ import annotations

from typing import Annotated

import typer

from sse_forensics.cli.common import (
    DEFAULTS,
    EXIT_OK,
    EXIT_READ_ERRORS,
    FILE_WIDTH,
    HostOpt,
    IdSchemeOpt,
    LimitOpt,
    LogFormatOpt,
    LogMapOpt,
    OutputOpt,
    PathRegex,
    Paths,
    PortOpt,
    PrefixedRegex,
    Scheme,
    SessionHeader,
    SessionOpt,
    SinceOpt,
    TimelineFormat,
    TLSKeylogOpt,
    UntilOpt,
    analysis_config,
    log_options,
    option_warnings,
    output_stream,
    parse_selection,
    select_session,
    usage_error,
)
from sse_forensics.errors import UnreadableInput
from sse_forensics.report.escape import printable


def timeline(
    paths: Paths,
    format: Annotated[
        TimelineFormat, typer.Option("--format", "-f", help="Output format.")
    ] = TimelineFormat.table,
    output: OutputOpt = None,
    session: SessionOpt = None,
    since: SinceOpt = None,
    until: UntilOpt = None,
    host: HostOpt = None,
    port: PortOpt = None,
    all_events: Annotated[
        bool,
        typer.Option(
            "--all-events", help="One line per SSE event and exchange instead of ID runs."
        ),
    ] = False,
    session_header: SessionHeader = DEFAULTS.session_header,
    session_path_regex: PathRegex = DEFAULTS.session_path_regex,
    id_scheme: IdSchemeOpt = Scheme.auto,
    prefixed_regex: PrefixedRegex = DEFAULTS.prefixed_regex,
    tls_keylog: TLSKeylogOpt = None,
    limit: LimitOpt = None,
    log_format: LogFormatOpt = None,
    log_map: LogMapOpt = None,
) -> None:
    """Show what happened per session, in time order: requests and Last-Event-ID, statuses,
    SSE events as ID runs, gaps with their verdicts, signals, missing bytes, FIN/RST."""
    from rich.console import Console

    from sse_forensics.pipeline import scan_paths
    from sse_forensics.report.timeline import render_timeline
    from sse_forensics.report.timeline_records import timeline_jsonl, timeline_records

    config = analysis_config(
        session_header, session_path_regex, id_scheme, prefixed_regex, tls_keylog, limit
    )
    selection = parse_selection(since, until, host, port)
    logs = log_options(log_format, log_map)
    try:
        result = scan_paths(paths, config, logs=logs, keep_records=True)
    except UnreadableInput as exc:  # a log format or map that does not compile: log_options
        usage_error(f"{printable(exc.source, 300)}: {printable(exc.reason, 300)}")
    except ValueError as exc:  # a log format string or field map that does not compile
        usage_error(printable(str(exc), 400))
    option_warnings(result, id_scheme, log_format)
    facts = result.facts
    assert facts is not None  # keep_records
    selection = select_session(selection, session, facts.sessions)
    if format is TimelineFormat.jsonl:
        with output_stream(output) as out:
            out.write(timeline_jsonl(timeline_records(facts, selection=selection)))
    else:
        with output_stream(output, binary=False) as out:
            console = (
                Console(highlight=False)
                if output is None
                else Console(file=out, width=FILE_WIDTH, highlight=False)
            )
            render_timeline(console, facts, all_events=all_events, selection=selection)
    raise typer.Exit(EXIT_READ_ERRORS if result.errors else EXIT_OK)
