"""``sse-forensics timeline``: what was reassembled."""

from __future__ import annotations

import sys
from typing import Annotated

import typer
from rich.console import Console

from sse_forensics.cli.common import (
    DEFAULTS,
    EXIT_OK,
    EXIT_READ_ERRORS,
    EXIT_USAGE,
    IdSchemeOpt,
    LimitOpt,
    LogFormatOpt,
    LogMapOpt,
    PathRegex,
    Paths,
    PrefixedRegex,
    Scheme,
    SessionHeader,
    TimelineFormat,
    TLSKeylogOpt,
    analysis_config,
    log_options,
    usage_error,
)
from sse_forensics.errors import UnreadableInput
from sse_forensics.report.escape import find_session, printable


def timeline(
    paths: Paths,
    format: Annotated[
        TimelineFormat, typer.Option("--format", "-f", help="Output format.")
    ] = TimelineFormat.table,
    session: Annotated[str | None, typer.Option(help="Only this session ID.")] = None,
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
    from sse_forensics.pipeline import scan_paths
    from sse_forensics.report.timeline import render_timeline, timeline_jsonl, timeline_records

    config = analysis_config(
        session_header, session_path_regex, id_scheme, prefixed_regex, tls_keylog, limit
    )
    logs = log_options(log_format, log_map)
    try:
        result = scan_paths(paths, config, logs=logs, keep_records=True)
    except UnreadableInput as exc:  # a log format or map that does not compile: log_options
        usage_error(f"{printable(exc.source, 300)}: {printable(exc.reason, 300)}")
    facts = result.facts
    assert facts is not None  # keep_records
    if session is not None:
        found = find_session(session, facts.sessions)
        if found is None:  # the table says which sessions there are
            render_timeline(Console(highlight=False), facts, session, all_events)
            raise typer.Exit(EXIT_USAGE)
        session = found
    if format is TimelineFormat.jsonl:
        sys.stdout.buffer.write(timeline_jsonl(timeline_records(facts, session)))
    else:
        render_timeline(Console(highlight=False), facts, session, all_events)
    raise typer.Exit(EXIT_READ_ERRORS if result.errors else EXIT_OK)
