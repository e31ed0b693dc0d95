"""The layers stay in their lane (CONTRIBUTING.md, "Layout"): the renderers in ``report/``
import what they show (the scan's result, findings, incidents), never the layers that
produced it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
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
