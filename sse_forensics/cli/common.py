"""Options, enums and exit codes shared by the commands.

Exit codes (``docs/exit-codes.md``): 0 nothing at or above ``--fail-on``; 1 findings at or
above it; 2 usage error or an input that is not a capture at all; 3 no such finding, but
part of the input could not be read (listed under ``errors``); 4 no such finding, but part
or all of the input could not be judged (``sse_forensics.coverage``: no HTTP, no event
stream, or streams whose bytes the capture lacks).
"""

from __future__ import annotations

import os
import re
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, NoReturn

import typer
from rich.console import Console
from rich.text import Text

from sse_forensics.errors import UnreadableInput
from sse_forensics.facts.config import AnalysisConfig
from sse_forensics.report.escape import printable
from sse_forensics.verdicts import classification_rank

if TYPE_CHECKING:
    from sse_forensics.engine.registry import RuleSet
    from sse_forensics.pipeline import LogOptions, ScanProgress, ScanResult

EXIT_OK = 0
EXIT_FINDINGS = 1
EXIT_USAGE = 2
EXIT_READ_ERRORS = 3
EXIT_NOT_JUDGED = 4


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
    contract_violation = "contract_violation"
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
    typer.Argument(
        help="Captures (pcap/pcapng), logs (access logs, server event logs; plain, .gz, .zst) "
        "or directories of them; captures are merged in time order."
    ),
]
FailOnOpt = Annotated[
    FailOn,
    typer.Option(
        help="Exit 1 if a finding at or above this classification exists (expected_gap < "
        "contract_violation < indeterminate < silent_corruption)."
    ),
]
RulesOpt = Annotated[
    list[Path] | None,
    typer.Option("--rules", help="Extra directory of rule files (repeatable)."),
]
QuietOpt = Annotated[
    bool, typer.Option("--quiet", "-q", help="No progress bar, even on a terminal.")
]
LogFormatOpt = Annotated[
    str | None,
    typer.Option(
        help="Access-log format: 'nginx:<log_format>', 'apache:<LogFormat>' or a preset "
        "(common, combined, mcp, apache-mcp); detected when omitted."
    ),
]
LogMapOpt = Annotated[
    Path | None,
    typer.Option(help="TOML file mapping your JSON log fields to the canonical ones."),
]
JobsOpt = Annotated[
    int | None,
    typer.Option(
        "--jobs",
        "-j",
        min=1,
        help="Worker processes for the per-session analysis (default: the machine's cores).",
    ),
]
ClusterOpt = Annotated[
    str | None,
    typer.Option(
        help="Run on Dask: 'local' or 'local:N' (a LocalCluster of N workers here) or a "
        "scheduler address such as tcp://scheduler:8786 (needs the cluster extra; "
        "docs/cluster.md). PATHS may then be fsspec URLs (s3://, gs://, file://).",
    ),
]
ScratchOpt = Annotated[
    str | None,
    typer.Option(
        help="With --cluster: directory for the partition files, shared by this machine and "
        "every worker (default: the temp directory).",
    ),
]
SessionHeader = Annotated[str, typer.Option(help="Header that carries the session ID.")]
PathRegex = Annotated[
    str, typer.Option(help="Regex with a named group 'session' matched on the request path.")
]
IdSchemeOpt = Annotated[Scheme, typer.Option(help="Event-ID scheme; 'auto' detects per session.")]
PrefixedRegex = Annotated[
    str, typer.Option(help="Regex for prefixed IDs with named groups 'stream' and 'seq'.")
]
LimitOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--limit",
        metavar="NAME=VALUE",
        help="Change a cap on the work one input may cost, e.g. body_bytes=256MiB "
        "(repeatable; every cap, its default and what it cuts: docs/limits.md).",
    ),
]


TLSKeylogOpt = Annotated[
    list[Path] | None,
    typer.Option(
        "--tls-keylog",
        help="NSS key log (SSLKEYLOGFILE) to decrypt TLS with (repeatable); pcapng "
        "Decryption Secrets Blocks are read without it.",
    ),
]


def analysis_config(
    session_header: str,
    session_path_regex: str,
    id_scheme: Scheme,
    prefixed_regex: str,
    tls_keylog: list[Path] | None = None,
    limits: list[str] | None = None,
) -> AnalysisConfig:
    from sse_forensics.limits import parse_limits

    try:
        caps = parse_limits(limits or [])
    except ValueError as exc:
        usage_error(printable(str(exc), 400))
    for path in tls_keylog or []:
        if not path.is_file():
            usage_error(f"--tls-keylog: no such file: {printable(path, 300)}")
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
        tls_keylog=tuple(str(p) for p in tls_keylog or []),
        limits=caps,
    )


def log_options(log_format: str | None, log_map: Path | None) -> LogOptions:
    from sse_forensics.pipeline import LogOptions

    if log_map is not None and not log_map.is_file():
        usage_error(f"--log-map: no such file: {printable(log_map, 300)}")
    if log_format is not None:
        from sse_forensics.ingest.logs import compile_format

        try:  # fail fast, naming the field, before any file is read
            compile_format(log_format)
        except ValueError as exc:
            usage_error(f"--log-format: {printable(str(exc), 400)}")
    if log_map is not None:
        from sse_forensics.ingest.logs import compile_format, load_log_map

        try:  # the map and the format it names, before any file is read
            fmt = load_log_map(str(log_map)).access_format
            if fmt is not None:
                compile_format(fmt)
        except ValueError as exc:
            usage_error(f"--log-map: {printable(str(exc), 400)}")
    return LogOptions(log_format, str(log_map) if log_map is not None else None)


def run_scan(
    paths: list[str],
    config: AnalysisConfig,
    rule_dirs: list[Path] | None,
    logs: LogOptions,
    show_progress: bool,
    keep_records: bool = False,
    jobs: int | None = None,
    cluster: str | None = None,
    scratch: str | None = None,
    quiet: bool = False,
) -> tuple[ScanResult, RuleSet]:
    """Load the rules and scan, with a progress bar on stderr when asked; input that cannot
    be read at all (or a log format that does not fit) is a usage error, exit 2. With
    ``cluster``, on Dask: a cluster that cannot be used is exit 2 as well."""
    from sse_forensics.cluster import ClusterUnavailable
    from sse_forensics.engine.registry import load_rules
    from sse_forensics.pipeline import scan_paths
    from sse_forensics.report.terminal import scan_progress

    if scratch is not None and cluster is None:
        usage_error("--scratch is for --cluster scans")
    ruleset = load_rules(rule_dirs)
    try:
        with scan_progress(Console(stderr=True), show_progress) as progress:
            if cluster is not None:
                return _scan_on_cluster(
                    paths, cluster, scratch, config, ruleset, logs, progress, quiet
                ), ruleset
            result = scan_paths(
                paths,
                config,
                rules=ruleset,
                progress=progress,
                logs=logs,
                keep_records=keep_records,
                keep_tables=keep_records,  # a scan reports counts and the sessions table
                jobs=jobs or os.cpu_count() or 1,
            )
    # A log format or field map that does not compile was refused before (log_options):
    # any other exception is a bug, never to be passed off as the user's mistake.
    except UnreadableInput as exc:
        usage_error(f"{printable(exc.source, 300)}: {printable(exc.reason, 300)}")
    except ClusterUnavailable as exc:
        usage_error(printable(str(exc), 400))
    return result, ruleset


def _scan_on_cluster(
    paths: list[str],
    cluster: str,
    scratch: str | None,
    config: AnalysisConfig,
    ruleset: RuleSet,
    logs: LogOptions,
    progress: ScanProgress | None,
    quiet: bool,
) -> ScanResult:
    from sse_forensics.cluster import scan_on_cluster

    def announce(link: str) -> None:
        if not quiet:
            Console(stderr=True, soft_wrap=True).print(Text(f"Dask dashboard: {link}"))

    return scan_on_cluster(
        paths,
        cluster,
        config=config,
        rules=ruleset,
        logs=logs,
        progress=progress,
        keep_tables=False,  # a scan reports counts and the sessions table
        scratch=scratch,
        on_dashboard=announce,
    )


def exit_code(result: ScanResult, fail_on: FailOn) -> int:
    from sse_forensics.coverage import coverage

    if fail_on is not FailOn.never:
        threshold = classification_rank(fail_on.value)
        if any(classification_rank(f.classification) >= threshold for f in result.findings):
            return EXIT_FINDINGS
    # Never "all clear" about what could not be seen: it wins over unreadable input.
    if not coverage(result).complete:
        return EXIT_NOT_JUDGED
    if result.errors:
        return EXIT_READ_ERRORS
    return EXIT_OK


def usage_error(message: str) -> NoReturn:
    Console(stderr=True, soft_wrap=True).print(Text(f"sse-forensics: {message}", style="red"))
    raise typer.Exit(EXIT_USAGE)


DEFAULTS = AnalysisConfig()
