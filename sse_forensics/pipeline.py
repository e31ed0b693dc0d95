"""One scan, top to bottom: ingest → reassembly → facts → rules. The CLI and the tests both
call :func:`scan_paths`; nothing here prints."""

from __future__ import annotations

import gc
import os
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from sse_forensics.engine.evaluate import evaluate
from sse_forensics.engine.finding import Finding
from sse_forensics.engine.registry import RuleSet, load_rules
from sse_forensics.errors import ReadError
from sse_forensics.facts.build import Facts, build_facts
from sse_forensics.facts.config import AnalysisConfig
from sse_forensics.ingest.inputs import classify_inputs, merged_frames
from sse_forensics.ingest.packets import Frame
from sse_forensics.reassembly.capture import Reassembly, reassemble
from sse_forensics.reassembly.from_logs import exchanges_from_logs
from sse_forensics.verdicts import PROVIDED_BY

ScanProgress = Callable[[str, int, int], None]
"""``progress(stage, done, total)``: stage ``"read"`` counts capture bytes (estimated from the
frames read), ``"logs"`` log bytes, then ``"facts"`` and ``"rules"`` report 0 of 1 when they
start."""
# pcap record header (16 bytes); pcapng blocks carry more, so the estimate ends a little short
# of the file size and the last call reports ``total``.
_RECORD_OVERHEAD = 16


def _reading(
    items: Iterable[Frame | ReadError], total: int, progress: ScanProgress
) -> Iterator[Frame | ReadError]:
    done = 0
    for item in items:
        if isinstance(item, Frame):
            done += len(item.data) + _RECORD_OVERHEAD
            progress("read", min(done, total), total)
        yield item
    progress("read", total, total)


# A scan builds millions of long-lived objects (segments' origins, events, rows) and frees
# few: the cyclic collector's default young-generation threshold (700) makes it re-walk them
# thousands of times for nothing (about 30% of the CPU time of a 200k-packet scan). Raised
# for the scan only; reference counting still frees everything acyclic at once.
SCAN_GC_THRESHOLD = (200_000, 50, 1000)


@contextmanager
def _scan_gc() -> Iterator[None]:
    previous = gc.get_threshold()
    gc.set_threshold(*SCAN_GC_THRESHOLD)
    try:
        yield
    finally:
        gc.set_threshold(*previous)


@dataclass(slots=True)
class ScanResult:
    paths: list[str]  # as the user gave them
    inputs: list[str]  # the capture and log files they expanded to
    reassembly: Reassembly
    facts: Facts
    findings: list[Finding] = field(default_factory=list)
    rule_errors: list[str] = field(default_factory=list)
    not_judged: list[dict[str, object]] = field(default_factory=list)

    @property
    def errors(self) -> list[ReadError]:
        return self.reassembly.errors


@dataclass(frozen=True, slots=True)
class LogOptions:
    """How to read logs: ``access_format`` (``nginx:<log_format>``, ``apache:<LogFormat>``
    or a preset name) and ``log_map`` (a TOML field map), as in docs/logs.md."""

    access_format: str | None = None
    log_map: str | None = None


def _add_logs(
    reassembly: Reassembly,
    logs: list[str],
    options: LogOptions,
    progress: ScanProgress | None = None,
) -> None:
    """Read the logs and append what they describe as exchanges on pseudo-connections."""
    from sse_forensics.ingest.logs import read_logs  # only scans with logs pay for it

    on_chunk = None
    if progress is not None:
        # Sizes on disk: compressed files finish early, which only makes the bar jump.
        total = sum(os.path.getsize(p) for p in logs)
        done = [0]

        def on_chunk(nbytes: int) -> None:
            done[0] += nbytes
            progress("logs", min(done[0], total), total)

    log_set = read_logs(
        logs, access_format=options.access_format, log_map=options.log_map, progress=on_chunk
    )
    first_id = max((c.id for c in reassembly.connections), default=0) + 1
    connections, exchanges = exchanges_from_logs(log_set, first_id)
    reassembly.connections.extend(connections)
    reassembly.exchanges.extend(exchanges)
    reassembly.errors.extend(log_set.errors)
    reassembly.log_stats = log_set.stats


def reassemble_paths(
    paths: list[str],
    config: AnalysisConfig | None = None,
    progress: ScanProgress | None = None,
    logs: LogOptions | None = None,
) -> tuple[list[str], Facts, Reassembly]:
    """Read the captures and logs at ``paths`` (files or directories; captures merged in time
    order) and build the fact tables. Raises ``UnreadableInput`` for a path that is neither
    a capture nor a log, or a log format that does not fit."""
    logs = logs or LogOptions()
    inputs, log_files = classify_inputs(paths, logs.access_format)
    capture = merged_frames(inputs)
    frames: Iterable[Frame | ReadError] = capture
    if progress is not None:
        total = sum(os.path.getsize(p) for p in inputs)
        frames = _reading(frames, total, progress)
    with _scan_gc():
        reassembly = reassemble(frames, capture.stats)
        if log_files:
            _add_logs(reassembly, log_files, logs, progress)
        if progress is not None:
            progress("facts", 0, 1)
        facts = build_facts(reassembly, config)
    return inputs + log_files, facts, reassembly


def scan_paths(
    paths: list[str],
    config: AnalysisConfig | None = None,
    rule_dirs: list[Path] | None = None,
    rules: RuleSet | None = None,
    progress: ScanProgress | None = None,
    logs: LogOptions | None = None,
) -> ScanResult:
    inputs, facts, reassembly = reassemble_paths(paths, config, progress, logs)
    rules = rules or load_rules(rule_dirs)
    if progress is not None:
        progress("rules", 0, 1)
    with _scan_gc():
        findings, not_judged = evaluate(rules, facts.tables, evidence_provided(reassembly))
    return ScanResult(
        list(paths), inputs, reassembly, facts, findings, list(rules.errors), not_judged
    )


def evidence_provided(reassembly: Reassembly) -> frozenset[str]:
    """The kinds of evidence the inputs give (``verdicts.PROVIDED_BY``)."""
    provided: set[str] = set()
    if reassembly.frames:
        provided |= PROVIDED_BY["capture"]
    for file in reassembly.log_stats.get("files", []):  # type: ignore[union-attr]
        kind = file.get("kind", "")
        provided |= PROVIDED_BY["event-log" if kind == "event-log" else "access-log"]
    return frozenset(provided) if provided else PROVIDED_BY["capture"]
