"""Options, enums and exit codes shared by the commands.

Exit codes (``docs/exit-codes.md``): 0 nothing at or above ``--fail-on``; 1 findings at or
above it; 2 usage error or an input that is not a capture at all; 3 no such finding, but
part of the input could not be read (listed under ``errors``).
"""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Annotated, NoReturn

import typer
from rich.console import Console
from rich.text import Text

from sse_forensics.facts.config import AnalysisConfig

EXIT_OK = 0
EXIT_FINDINGS = 1
EXIT_USAGE = 2
EXIT_READ_ERRORS = 3


class ScanFormat(StrEnum):
    table = "table"
    json = "json"
    jsonl = "jsonl"
    ocsf = "ocsf"


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


def analysis_config(
    session_header: str, session_path_regex: str, id_scheme: Scheme, prefixed_regex: str
) -> AnalysisConfig:
    for name, pattern, group in (
        ("--session-path-regex", session_path_regex, "session"),
        ("--prefixed-regex", prefixed_regex, "seq"),
    ):
        try:
            compiled = re.compile(pattern)
        except re.error as exc:
            usage_error(f"{name}: invalid regular expression: {exc}")
        if group not in compiled.groupindex:
            usage_error(f"{name}: the pattern needs a named group (?P<{group}>...)")
    return AnalysisConfig(
        session_header=session_header,
        session_path_regex=session_path_regex,
        id_scheme=None if id_scheme is Scheme.auto else id_scheme.value,
        prefixed_regex=prefixed_regex,
    )


def usage_error(message: str) -> NoReturn:
    Console(stderr=True, soft_wrap=True).print(Text(f"sse-forensics: {message}", style="red"))
    raise typer.Exit(EXIT_USAGE)


DEFAULTS = AnalysisConfig()
