"""The layers stay in their lane (CONTRIBUTING.md, "Layout"): the renderers in ``report/``
import what they show (the scan's result, findings, incidents), never the layers that
produced it."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
REPORT_MODULES = sorted(
    f"sse_forensics.report.{p.stem}"
    for p in (ROOT / "sse_forensics" / "report").glob("*.py")
    if p.stem != "__init__"
)
# What a renderer must not pull in: the orchestration, and the layers behind the result.
NOT_FOR_RENDERERS = (
    "sse_forensics.pipeline",
    "sse_forensics.reassembly",
    "sse_forensics.facts",
    "sse_forensics.evidence",
    "sse_forensics.ingest",
)


@pytest.mark.parametrize("module", [*REPORT_MODULES, "sse_forensics.result"])
def test_report_modules_do_not_import_the_layers_they_render(module: str) -> None:
    probe = (
        f"import sys, {module}\n"
        f"bad = sorted(m for m in sys.modules if m.startswith({NOT_FOR_RENDERERS!r}))\n"
        "print('\\n'.join(bad))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
        check=True,
    )
    assert out.stdout.split() == []


# A file a docstring or comment names: `docs/limits.md`, `CONTRIBUTING.md`, `report/siem.py`,
# `docs/schemas/finding.schema.json`; a Markdown one maybe with an anchor or a quoted section.
CITED_DOC = re.compile(r'(?<![\w/.-])((?:[\w.-]+/)*[\w-]+\.md)(#[\w-]+)?(?:,\s+"([^"]+)")?')
CITED_PATH = re.compile(r"(?<![\w/.-])((?:[\w-]+/)+[\w.-]+\.(?:py|toml|json))\b")


def _slug(heading: str) -> str:
    """GitHub's anchor for a Markdown heading."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _found(name: str) -> Path | None:
    """``name`` from the repository root, ``docs/`` or the package (module-relative)."""
    for base in (ROOT, ROOT / "docs", ROOT / "sse_forensics"):
        if (base / name).is_file():
            return base / name
    return None


def test_modules_cite_only_files_and_sections_the_repository_has() -> None:
    wrong: list[str] = []
    for module in sorted((ROOT / "sse_forensics").rglob("*.py")):
        # Citations span lines, of a docstring or of a comment.
        source = re.sub(r"\n\s*#\s*", " ", module.read_text(encoding="utf-8"))
        text = " ".join(source.split())
        where = module.relative_to(ROOT)
        for m in CITED_PATH.finditer(text):
            if _found(m.group(1)) is None:
                wrong.append(f"{where}: {m.group(1)}")
        for m in CITED_DOC.finditer(text):
            doc = _found(m.group(1))
            if doc is None:
                wrong.append(f"{where}: {m.group(1)}")
                continue
            headings = [
                line.lstrip("#").strip()
                for line in doc.read_text(encoding="utf-8").splitlines()
                if line.startswith("#")
            ]
            anchor, section = m.group(2), m.group(3)
            if anchor and anchor[1:] not in {_slug(h) for h in headings}:
                wrong.append(f"{where}: {m.group(1)}{anchor}")
            # A quoted section after the file ("Gap signalling") starts one of its headings;
            # a quote that is no heading's start is a quoted sentence, checked in the text.
            if section and m.group(1) == "docs/profile.md":
                body = " ".join(doc.read_text(encoding="utf-8").split()).lower()
                if not any(h.startswith(section) for h in headings) and section.lower() not in body:
                    wrong.append(f'{where}: {m.group(1)}, "{section}"')
    assert wrong == []
