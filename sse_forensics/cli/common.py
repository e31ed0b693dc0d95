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
import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from enum import StrEnum
from pathlib import Path
from typing import IO, TYPE_CHECKING, Annotated, Any, NoReturn

import typer

from sse_forensics.errors import UnreadableInput
from sse_forensics.facts.config import AnalysisConfig
from sse_forensics.facts.ids import DEFAULT_PREFIXED, IdScheme
from sse_forensics.report.escape import printable
from sse_forensics.verdicts import classification_rank

if TYPE_CHECKING:
    from concurrent.futures import Executor

    from sse_forensics.engine.registry import RuleSet
    from sse_forensics.pipeline import LogOptions
    from sse_forensics.report.selection import Selection
    from sse_forensics.result import ScanProgress, ScanResult

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
    tickets = "tickets"


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


# What each choice asks of the analysis (None: detect per session).
_ID_SCHEMES: dict[Scheme, IdScheme | None] = {
    Scheme.auto: None,
    Scheme.int: "int",
    Scheme.prefixed: "prefixed",
    Scheme.opaque: "opaque",
}


Paths = Annotated[
    list[str],
    typer.Argument(
        metavar="PATH",
        show_default=False,
        help="Captures (pcap/pcapng, plain or .gz/.zst/.xz/.bz2), logs (access logs, server "
        "event logs; plain, .gz, .zst), directories or globs of them, or - (standard input); "
        "captures are merged in time order.",
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
    typer.Option("--rules", metavar="DIR", help="Extra directory of rule files (repeatable)."),
]
QuietOpt = Annotated[
    bool, typer.Option("--quiet", "-q", help="No progress bar, even on a terminal.")
]
LogFormatOpt = Annotated[
    str | None,
    typer.Option(
        metavar="FORMAT",
        help="Access-log format: 'nginx:<log_format>', 'apache:<LogFormat>' or a preset "
        "(common, combined, mcp, apache-mcp); detected when omitted.",
    ),
]
LogMapOpt = Annotated[
    Path | None,
    typer.Option(
        metavar="FILE", help="TOML file mapping your JSON log fields to the canonical ones."
    ),
]
JobsOpt = Annotated[
    int | None,
    typer.Option(
        "--jobs",
        "-j",
        min=1,
        metavar="N",
        help="Worker processes for the per-session analysis (default: the machine's cores).",
    ),
]
ClusterOpt = Annotated[
    str | None,
    typer.Option(
        metavar="WHERE",
        help="Run on Dask: 'local' or 'local:N' (a LocalCluster of N workers here) or a "
        "scheduler address such as tcp://scheduler:8786 (needs the cluster extra; "
        "docs/cluster.md). PATHS may then be fsspec URLs (s3://, gs://, file://).",
    ),
]
ScratchOpt = Annotated[
    str | None,
    typer.Option(
        metavar="DIR|URL",
        help="With --cluster: where the partition files go: a directory shared by this "
        "machine and every worker, or an object-store URL they all reach (s3://bucket/prefix) "
        "(default: the temp directory).",
    ),
]
SessionHeader = Annotated[
    str, typer.Option(metavar="NAME", help="Header that carries the session ID.")
]
PathRegex = Annotated[
    str,
    typer.Option(
        metavar="REGEX", help="Regex with a named group 'session' matched on the request path."
    ),
]
IdSchemeOpt = Annotated[Scheme, typer.Option(help="Event-ID scheme; 'auto' detects per session.")]
PrefixedRegex = Annotated[
    str,
    typer.Option(
        metavar="REGEX", help="Regex for prefixed IDs with named groups 'stream' and 'seq'."
    ),
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


SessionOpt = Annotated[
    str | None,
    typer.Option(
        "--session", metavar="ID", help="Only this session: its ID or any unique prefix of it."
    ),
]
SinceOpt = Annotated[
    str | None,
    typer.Option(
        metavar="TIME",
        help="Only what happened at or after TIME: seconds since the epoch or ISO 8601 "
        "(2026-11-30T03:42:41Z; UTC when no offset is given).",
    ),
]
UntilOpt = Annotated[
    str | None, typer.Option(metavar="TIME", help="Only what happened at or before TIME.")
]
HostOpt = Annotated[
    str | None,
    typer.Option(metavar="IP", help="Only connections with this address at either end."),
]
PortOpt = Annotated[
    int | None,
    typer.Option(
        metavar="PORT", min=0, max=65535, help="Only connections with this port at either end."
    ),
]
OutputOpt = Annotated[
    Path | None,
    typer.Option("--output", "-o", metavar="FILE", help="Write to FILE, not standard output."),
]
# The width a table written to a file (-o) is laid out for.
FILE_WIDTH = 120


TLSKeylogOpt = Annotated[
    list[Path] | None,
    typer.Option(
        "--tls-keylog",
        metavar="FILE",
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
    for name, pattern, groups in (
        ("--session-path-regex", session_path_regex, ("session",)),
        # Without `stream`, every prefix would share one counter: IDs of two streams would
        # read as one stream's gaps (docs/profile.md, "Event IDs").
        ("--prefixed-regex", prefixed_regex, ("stream", "seq")),
    ):
        try:
            compiled = re.compile(pattern)
        except re.error as exc:
            usage_error(f"{name}: invalid regular expression: {exc}")
        missing = [g for g in groups if g not in compiled.groupindex]
        if missing:
            needed = " and ".join(f"(?P<{g}>...)" for g in groups)
            usage_error(
                f"{name}: the pattern needs the named group{'s' * (len(groups) > 1)} {needed}"
            )
    if prefixed_regex != DEFAULT_PREFIXED and id_scheme in (Scheme.int, Scheme.opaque):
        warn(f"--prefixed-regex has no effect with --id-scheme {id_scheme.value}")
    return AnalysisConfig(
        session_header=session_header,
        session_path_regex=session_path_regex,
        id_scheme=_ID_SCHEMES[id_scheme],
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
    pool: Executor | None = None,
    unjudged_listed: int | None = None,
) -> tuple[ScanResult, RuleSet]:
    """Load the rules and scan, with a progress bar on stderr when asked; input that cannot
    be read at all (or a log format that does not fit) is a usage error, exit 2. With
    ``cluster``, on Dask: a cluster that cannot be used is exit 2 as well. ``pool``: the
    scan's worker processes, started early (:func:`early_workers`); shut down here.
    ``unjudged_listed``: how many could-not-judge items the output lists (None: all)."""
    from rich.console import Console

    from sse_forensics.cluster import ClusterUnavailable
    from sse_forensics.engine.registry import load_rules
    from sse_forensics.pipeline import scan_paths
    from sse_forensics.report.terminal import scan_progress

    try:
        if scratch is not None and cluster is None:
            usage_error("--scratch is for --cluster scans")
        ruleset = load_rules(rule_dirs)
        with scan_progress(Console(stderr=True), show_progress) as progress:
            if cluster is not None:
                return _scan_on_cluster(
                    paths,
                    cluster,
                    scratch,
                    config,
                    ruleset,
                    logs,
                    progress,
                    quiet,
                    unjudged_listed,
                ), ruleset
            result = scan_paths(
                paths,
                config,
                rules=ruleset,
                progress=progress,
                logs=logs,
                keep_records=keep_records,
                keep_tables=keep_records,  # a scan reports counts and the sessions table
                jobs=scan_jobs(jobs),
                pool=pool,
                unjudged_listed=unjudged_listed,
            )
    # A log format or field map that does not compile was refused before (log_options):
    # any other exception is a bug, never to be passed off as the user's mistake.
    except UnreadableInput as exc:
        usage_error(f"{printable(exc.source, 300)}: {printable(exc.reason, 300)}")
    except ClusterUnavailable as exc:
        usage_error(printable(str(exc), 400))
    finally:
        if pool is not None:
            pool.shutdown(wait=False)
    return result, ruleset


def scan_jobs(jobs: int | None) -> int:
    """``--jobs``, by default the machine's cores."""
    return jobs or os.cpu_count() or 1


def early_workers(paths: list[str], jobs: int | None, cluster: str | None) -> Executor | None:
    """The worker processes a local scan of ``paths`` starts at once, started before the
    command imports the analyzer (:func:`sse_forensics.workers.early_workers`); None on a
    cluster."""
    if cluster is not None:
        return None
    from sse_forensics.workers import early_workers as start

    return start(paths, scan_jobs(jobs))


def _scan_on_cluster(
    paths: list[str],
    cluster: str,
    scratch: str | None,
    config: AnalysisConfig,
    ruleset: RuleSet,
    logs: LogOptions,
    progress: ScanProgress | None,
    quiet: bool,
    unjudged_listed: int | None = None,
) -> ScanResult:
    from rich.console import Console
    from rich.text import Text

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
        unjudged_listed=unjudged_listed,
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


def warn(message: str) -> None:
    """One line on stderr about an option that cannot apply; the scan goes on."""
    from rich.console import Console
    from rich.text import Text

    Console(stderr=True, soft_wrap=True, highlight=False).print(
        Text(f"sse-forensics: warning: {message}", style="yellow")
    )


def option_warnings(result: ScanResult, id_scheme: Scheme, log_format: str | None) -> None:
    """Options the inputs turned out not to fit: a forced ``--id-scheme`` that the IDs do
    not follow, a log format with no log to read."""
    if id_scheme in (Scheme.int, Scheme.prefixed):
        streams = {f.stream for f in result.findings if f.rule == "id-scheme-outlier"}
        if streams:
            warn(
                f"--id-scheme {id_scheme.value}: {len(streams)} stream(s) carry event IDs that "
                "are not of that scheme (see the id-scheme-outlier findings); --id-scheme auto "
                "reads each stream by the scheme its IDs follow"
            )
    if log_format is not None and not result.log_stats:
        warn("--log-format: no log among the inputs, it was not used")


def parse_selection(
    since: str | None, until: str | None, host: str | None, port: int | None
) -> Selection:
    """The ``--since``/``--until``/``--host``/``--port`` filters, checked before the scan."""
    import ipaddress

    from sse_forensics.report.selection import Selection, parse_time

    times: list[float | None] = []
    for name, text in (("--since", since), ("--until", until)):
        try:
            times.append(parse_time(text) if text is not None else None)
        except ValueError as exc:
            usage_error(f"{name}: {exc}")
    start, end = times
    if start is not None and end is not None and start > end:
        usage_error("--since is later than --until")
    if host is not None:
        try:
            host = str(ipaddress.ip_address(host))
        except ValueError:
            usage_error(f"--host: {printable(host, 80)!r} is not an IP address")
    return Selection(None, start, end, host, port)


def select_session(selection: Selection, prefix: str | None, sessions: Iterable[str]) -> Selection:
    """``selection`` with ``--session`` resolved to one whole session ID (usage error when
    the prefix names none or several)."""
    import dataclasses

    from sse_forensics.report.escape import find_session
    from sse_forensics.report.selection import SelectionError, resolve_session

    if prefix is None:
        return selection
    known = list(sessions)
    # A session ID holding NUL is named by the escaped form the summary prints.
    prefix = find_session(prefix, known) or prefix
    try:
        return dataclasses.replace(selection, session=resolve_session(prefix, known))
    except SelectionError as exc:
        usage_error(printable(str(exc), 600))


@contextmanager
def output_stream(path: Path | None, binary: bool = True) -> Iterator[IO[Any]]:
    """Standard output, or ``path`` (``-o FILE``) opened for writing; a file that cannot be
    written is a usage error."""
    if path is None:
        out = sys.stdout.buffer if binary else sys.stdout
        yield out
        out.flush()
        return
    try:
        fh = open(path, "wb" if binary else "w", encoding=None if binary else "utf-8")  # noqa: SIM115
    except OSError as exc:
        usage_error(f"{printable(path, 300)}: cannot write: {exc.strerror or exc}")
    with fh:  # opened apart: a file that cannot be written is a usage error, not a traceback
        yield fh


def usage_error(message: str) -> NoReturn:
    from rich.console import Console
    from rich.text import Text

    Console(stderr=True, soft_wrap=True).print(Text(f"sse-forensics: {message}", style="red"))
    raise typer.Exit(EXIT_USAGE)


DEFAULTS = AnalysisConfig()
