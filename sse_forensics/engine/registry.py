"""Where rules come from: the packaged ``rules/`` and any ``--rules DIR`` a user adds. A bad
file is reported with its path and reason; the other rules still run."""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from pathlib import Path

from sse_forensics.engine.rule import Rule, RuleError, load_rule


def packaged_rules_dir() -> Path:
    """``rules/`` inside the installed wheel, or at the top of a source checkout."""
    package = Path(__file__).resolve().parents[1]
    for candidate in (package / "_rules", package.parent / "rules"):
        if candidate.is_dir():
            return candidate
    return package / "_rules"


@dataclass(slots=True)
class RuleSet:
    rules: list[Rule] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def get(self, rule_id: str) -> Rule | None:
        return next((r for r in self.rules if r.id == rule_id), None)


def load_rules(extra_dirs: list[Path] | None = None) -> RuleSet:
    """Load packaged rules then each extra directory; a later rule with the same id replaces
    an earlier one (so a user can override a packaged rule)."""
    out = RuleSet()
    by_id: dict[str, Rule] = {}
    for directory in [packaged_rules_dir(), *(extra_dirs or [])]:
        if not directory.is_dir():
            out.errors.append(f"{directory}: not a directory of rule files")
            continue
        for path in sorted(directory.glob("*.toml")):
            try:
                rule = _load_rule_file(path)
            except RuleError as exc:
                out.errors.append(str(exc))
                continue
            by_id[rule.id] = rule
    out.rules = sorted(by_id.values(), key=lambda r: r.id)
    return out


def _load_rule_file(path: Path) -> Rule:
    """:func:`load_rule`, parsed once per process for a file that has not changed since
    (a ``Rule`` is frozen). Reading and checking the 25 packaged rules costs ~0.05 s, a
    third of a small capture's whole scan, and a library caller or a worker process scans
    many times."""
    try:
        stat = path.stat()
    except OSError:
        return load_rule(path)  # gone since it was listed: load_rule says so
    return _parsed(path, stat.st_mtime_ns, stat.st_size)


@functools.lru_cache(maxsize=1024)
def _parsed(path: Path, mtime_ns: int, size: int) -> Rule:
    return load_rule(path)
