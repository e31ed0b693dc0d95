"""The log samples' expected findings and a scan's findings in the same comparable form."""

from __future__ import annotations

import gzip
import json
from collections import Counter
from pathlib import Path

from conftest import SAMPLES

from sse_forensics.result import ScanResult

LOGS = SAMPLES / "logs"


Finding = tuple[str, str, str | None, str | None]


def expected_findings(name: str) -> Counter[Finding]:
    doc = json.loads((SAMPLES / f"{name}.expected.json").read_text())
    return Counter(
        (f["rule"], f["classification"], f["gap"]["first"], f["gap"]["last"])
        for f in doc["findings"]
    )


def got_findings(result: ScanResult) -> Counter[Finding]:
    return Counter(
        (f.rule, f.classification, f.gap["first"], f.gap["last"]) for f in result.findings
    )


def event_log_of(folder: Path) -> tuple[Path, list[dict]]:
    (path,) = folder.glob("events.jsonl*")
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as handle:
        return path, [json.loads(line) for line in handle]
