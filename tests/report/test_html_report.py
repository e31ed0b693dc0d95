"""The HTML report: self-contained, locked down by its Content-Security-Policy, every captured
string escaped; and opened in a real browser (headless Chromium, skipped when absent), where
it must render its plots and findings without one console message."""

from __future__ import annotations

import base64
import hashlib
import re
import subprocess
from pathlib import Path

import pytest
from conftest import SAMPLES
from support.cli import run_text

from sse_forensics.engine.registry import load_rules
from sse_forensics.pipeline import scan_paths
from sse_forensics.report.html import render_report

CHROMIUM = Path("/usr/bin/chromium")
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
HOSTILE = SAMPLES / "crafted-hostile-bytes.pcap"
INCIDENT = [
    SAMPLES / name
    for name in (
        "live-jump-unsignalled.pcap",
        "resume-410.pcap",
        "backpressure-disconnect-resume.pcap",
        "opaque-resume-jump.pcap",
        "crafted-capture-loss.pcap",
        "clean-resume-int.pcap",
    )
]
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--enable-logging=stderr",
    "--v=0",
    # Let scripts (plotly drawing the figures) finish before the DOM is dumped.
    "--virtual-time-budget=10000",
]
SCRIPT = re.compile(r"<script(?P<attrs>[^>]*)>(?P<body>.*?)</script>", re.S)


def report_html(paths: list[Path]) -> tuple[str, object]:
    rules = load_rules()
    result = scan_paths([str(p) for p in paths], rules=rules, keep_records=True)
    return render_report(result, rules), result


def sha256(source: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(source.encode()).digest()).decode() + "'"


def csp_of(page: str) -> str:
    m = re.search(r'<meta http-equiv="Content-Security-Policy" content="([^"]+)">', page)
    assert m is not None
    return m.group(1)


@pytest.fixture(scope="module")
def incident() -> tuple[str, object]:
    return report_html(INCIDENT)


@pytest.fixture(scope="module")
def hostile() -> tuple[str, object]:
    return report_html([HOSTILE])


def test_csp_forbids_remote_loads_and_allows_only_the_scripts_it_hashes(incident) -> None:
    page, _ = incident
    csp = csp_of(page)
    assert "default-src 'none'" in csp and "unsafe-eval" not in csp
    script_src = re.search(r"script-src ([^;]+)", csp).group(1).split()
    executable = [m["body"] for m in SCRIPT.finditer(page) if "application/json" not in m["attrs"]]
    assert len(executable) == 2  # plotly.js and the bootstrap that draws the figures
    assert sorted(script_src) == sorted(sha256(body) for body in executable)
    assert "unsafe-inline" not in script_src
    # The markup loads nothing from anywhere: no src/href to a URL, no <link>, no @import
    # (plotly.js mentions URLs in its source; the CSP is what keeps it from using them).
    markup = SCRIPT.sub("", page)
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", markup, re.I)
    assert "<link" not in markup and "@import" not in markup


def test_one_plot_per_affected_session_with_findings_and_rule_text(incident) -> None:
    page, result = incident
    affected = {f.session_id for f in result.findings if f.session_id}
    assert len(re.findall(r'<div class="plot" id="plot-\d+">', page)) == len(affected) == 5
    assert "clean-resume" not in "".join(re.findall(r"<h2>Session.*?</h2>", page))
    rules = load_rules()
    for n, f in enumerate(result.findings, 1):
        assert f'id="finding-{n}"' in page
        rule = rules.get(f.rule)
        first_words = " ".join(rule.remediation.split()[:4]).replace("`", "")
        assert first_words.split()[0] in page
    assert page.count("<h4>How to fix it</h4>") == len(result.findings)
    figures = re.search(r'id="figures">(.*?)</script>', page, re.S).group(1)
    assert "dropped: silent_corruption" in figures and "410 Gone" in figures
    assert "dropped: expected_gap" in figures and "missing capture bytes" in figures


def test_hostile_capture_strings_are_escaped_everywhere(hostile) -> None:
    page, result = hostile
    session = next(f.session_id for f in result.findings)
    assert "<script>alert(1)" in session  # the capture really carries markup
    assert "<script>alert(1)" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "\x1b" not in page and "\\x1b[31m[bold red]sess[/]" in page
    assert len(SCRIPT.findall(page)) == 3  # the figures' JSON, plotly.js, the bootstrap
    figures = re.search(r'id="figures">(.*?)</script>', page, re.S).group(1)
    assert "<" not in figures and ">" not in figures


def test_report_command_writes_the_file_and_exits_like_scan(tmp_path: Path) -> None:
    out = tmp_path / "incident.html"
    # In this process (support.cli: an exception escaping the command fails the test).
    proc = run_text("report", str(INCIDENT[0]), "-o", str(out))
    assert proc.returncode == 1  # a silent_corruption finding, as `scan` would exit
    assert "wrote" in proc.stderr and out.stat().st_size > 1_000_000  # plotly.js is inline
    bad = run_text("report", str(INCIDENT[0]), "-o", str(tmp_path))
    assert bad.returncode == 2 and "cannot write the report" in bad.stderr
    assert "Traceback" not in bad.stderr


# --- in a real browser --------------------------------------------------------------------


def chromium(page: Path, profile: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(CHROMIUM), *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *extra, page.as_uri()],
        capture_output=True,
        text=True,
        timeout=120,
    )


needs_chromium = pytest.mark.skipif(not CHROMIUM.exists(), reason="no /usr/bin/chromium")


def _render(
    page: str, tmp_path: Path, name: str, height: int
) -> tuple[subprocess.CompletedProcess[str], Path]:
    """``page`` opened in Chromium: its DOM (the process's stdout) and a screenshot under
    ARTIFACTS, from one launch (a launch costs seconds of CPU)."""
    html_file = tmp_path / f"{name}.html"
    html_file.write_text(page, encoding="utf-8")
    ARTIFACTS.mkdir(exist_ok=True)
    shot = ARTIFACTS / f"{name}-report.png"
    shot.unlink(missing_ok=True)
    proc = chromium(
        html_file,
        tmp_path / "profile",
        "--dump-dom",
        f"--window-size=1280,{height}",
        f"--screenshot={shot}",
    )
    return proc, shot


@needs_chromium
def test_report_renders_in_headless_chromium(tmp_path: Path, incident) -> None:
    page, result = incident
    proc, shot = _render(page, tmp_path, "incident", 3000)
    console = [line for line in proc.stderr.splitlines() if ":CONSOLE" in line]
    assert console == []  # no script error, no CSP violation, no failed load
    dom = proc.stdout
    plots = re.findall(r'<div class="plot js-plotly-plot" id="plot-\d+"', dom)
    assert len(plots) == 5  # plotly drew every figure
    assert dom.count('class="main-svg"') >= 2 * len(plots)
    assert dom.count('class="scatterlayer') >= len(plots)
    assert "dropped: silent_corruption" in dom  # legend text rendered in the SVG
    assert all(f'id="finding-{n}"' in dom for n in range(1, len(result.findings) + 1))

    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 50_000


@needs_chromium
def test_hostile_bytes_show_as_text_in_the_browser(tmp_path: Path, hostile) -> None:
    page, _ = hostile
    proc, shot = _render(page, tmp_path, "hostile", 1600)
    assert [line for line in proc.stderr.splitlines() if ":CONSOLE" in line] == []
    dom = proc.stdout
    # The DOM serialiser escapes text nodes: the markup is text, not an element.
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in dom
    assert "<script>alert(1)" not in dom
    assert len(re.findall(r"<script\b", dom)) == 3
    assert 'class="plot js-plotly-plot"' in dom
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
