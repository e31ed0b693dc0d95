"""One scan, top to bottom: ingest → reassembly → facts → rules. The CLI and the tests both
call :func:`scan_paths`; nothing here prints."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from sse_forensics.engine.evaluate import evaluate
from sse_forensics.engine.finding import Finding
from sse_forensics.engine.registry import RuleSet, load_rules
from sse_forensics.errors import ReadError
from sse_forensics.facts.build import Facts, build_facts
from sse_forensics.facts.config import AnalysisConfig
from sse_forensics.ingest.inputs import expand_inputs, merged_frames
from sse_forensics.reassembly.capture import Reassembly, reassemble


@dataclass(slots=True)
class ScanResult:
    paths: list[str]  # as the user gave them
    inputs: list[str]  # the capture files they expanded to
    reassembly: Reassembly
    facts: Facts
    findings: list[Finding] = field(default_factory=list)
    rule_errors: list[str] = field(default_factory=list)

    @property
    def errors(self) -> list[ReadError]:
        return self.reassembly.errors


def reassemble_paths(
    paths: list[str], config: AnalysisConfig | None = None
) -> tuple[list[str], Facts, Reassembly]:
    """Read the captures at ``paths`` (files or directories, merged in time order) and build
    the fact tables. Raises ``UnreadableInput`` for a path that is not a capture at all."""
    inputs = expand_inputs(paths)
    reassembly = reassemble(merged_frames(inputs))
    return inputs, build_facts(reassembly, config), reassembly


def scan_paths(
    paths: list[str],
    config: AnalysisConfig | None = None,
    rule_dirs: list[Path] | None = None,
    rules: RuleSet | None = None,
) -> ScanResult:
    inputs, facts, reassembly = reassemble_paths(paths, config)
    rules = rules or load_rules(rule_dirs)
    findings = evaluate(rules, facts.tables)
    return ScanResult(list(paths), inputs, reassembly, facts, findings, list(rules.errors))
