"""The user documentation stays true to the code: every rule and fact column is documented,
every link resolves, and the examples pasted into the docs are what the tool does today."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

import pytest

from sse_forensics.engine.registry import load_rules
from sse_forensics.engine.rule import load_rule
from sse_forensics.facts.tables import TABLE_SCHEMAS
from sse_forensics.pipeline import scan_paths

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs"
SAMPLES = REPO / "samples"
RULE_FILES = sorted((REPO / "rules").glob("*.toml"))
MARKDOWN = [*sorted(DOCS.glob("*.md")), REPO / "README.md"]

_FENCE = re.compile(r"^```.*?^```", re.S | re.M)
_CODE_SPAN = re.compile(r"`[^`\n]*`")
_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
_HEADING = re.compile(r"^#{1,6} +(.+?) *$", re.M)


def _text(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def _prose(text: str) -> str:
    """Markdown without code blocks and code spans (their brackets are not links)."""
    return _CODE_SPAN.sub("", _FENCE.sub("", text))


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    return {_slug(h) for h in _HEADING.findall(_FENCE.sub("", _text(path)))}


def _section(text: str, heading: str) -> str:
    """The body under ``heading`` up to the next heading of the same or a higher level."""
    level = len(heading) - len(heading.lstrip("#"))
    start = text.index(heading + "\n")
    rest = text[start + len(heading) + 1 :]
    end = re.search(rf"^#{{1,{level}}} ", rest, re.M)
    return rest[: end.start()] if end else rest


def _squash(text: str) -> str:
    return " ".join(text.split())


def _fenced(text: str, lang: str) -> list[str]:
    return re.findall(rf"^```{lang}\n(.*?)^```", text, re.S | re.M)


# -- rules.md ------------------------------------------------------------------------------


@pytest.mark.parametrize("path", RULE_FILES, ids=lambda p: p.stem)
def test_every_rule_has_a_section_with_its_verdict_and_severity(path: Path) -> None:
    rule = tomllib.loads(_text(path))
    text = _text(DOCS / "rules.md")
    heading = f"### `{rule['id']}`"
    assert heading + "\n" in text, f"docs/rules.md has no section {heading}"
    body = _section(text, heading)
    assert f"`{rule['severity']}`" in body
    verdict = rule.get("classification") or "indeterminate"
    assert f"`{verdict}`" in body
    assert f"`{rule['table']}`" in body


def test_rules_index_lists_exactly_the_packaged_rules() -> None:
    text = _text(DOCS / "rules.md")
    listed = set(re.findall(r"^\| \[`([a-z0-9-]+)`\]\(#", text, re.M))
    assert listed == {tomllib.loads(_text(p))["id"] for p in RULE_FILES}


def _custom_rule(tmp_path: Path) -> Path:
    blocks = _fenced(_text(DOCS / "rules.md"), "toml")
    assert len(blocks) == 1, "docs/rules.md should hold exactly one ```toml rule example"
    rule_dir = tmp_path / "site-rules"
    rule_dir.mkdir()
    path = rule_dir / "custom.toml"
    path.write_text(blocks[0], encoding="utf-8")
    return path


def test_custom_rule_example_loads(tmp_path: Path) -> None:
    rule = load_rule(_custom_rule(tmp_path))
    assert rule.id == "large-signalled-gap"
    assert rule.table == "gaps" and rule.classification == "expected_gap"


def test_custom_rule_example_fires_as_documented(tmp_path: Path) -> None:
    """The rule finds the signalled gap in live-gap-signalled and nothing in the 410 sample
    (a 410 gap has no count), as rules.md says; the message pasted there is the real one."""
    rule_dir = _custom_rule(tmp_path).parent
    ruleset = load_rules([rule_dir])
    assert not ruleset.errors
    signalled = scan_paths([str(SAMPLES / "live-gap-signalled.pcap")], rules=ruleset)
    custom = [f for f in signalled.findings if f.rule == "large-signalled-gap"]
    assert [(f.gap["first"], f.gap["last"], f.gap["count"]) for f in custom] == [("8", "12", 5)]
    assert _squash(custom[0].message) in _squash(_text(DOCS / "rules.md"))
    refused = scan_paths([str(SAMPLES / "resume-410.pcap")], rules=ruleset)
    assert not [f for f in refused.findings if f.rule == "large-signalled-gap"]


# -- facts.md ------------------------------------------------------------------------------


@pytest.mark.parametrize("table", list(TABLE_SCHEMAS))
def test_every_fact_column_is_documented_under_its_table(table: str) -> None:
    text = _text(DOCS / "facts.md")
    heading = f"## `{table}`"
    assert heading + "\n" in text, f"docs/facts.md has no section {heading}"
    body = _section(text, heading)
    missing = [c for c in TABLE_SCHEMAS[table] if f"`{c}`" not in body]
    assert not missing, f"docs/facts.md, table {table}: undocumented column(s) {missing}"


def test_facts_md_documents_no_column_that_does_not_exist() -> None:
    """A column row (``| `name` | type | …``) for a column no table has is stale."""
    text = _text(DOCS / "facts.md")
    for table, columns in TABLE_SCHEMAS.items():
        body = _section(text, f"## `{table}`")
        for cell in re.findall(r"^\| (`[^|]+`) \|", body, re.M):
            for name in re.findall(r"`([a-z_]+)`", cell):
                assert name in columns, f"docs/facts.md, table {table}: no column {name!r}"


# -- links ---------------------------------------------------------------------------------


@pytest.mark.parametrize("path", MARKDOWN, ids=lambda p: str(p.relative_to(REPO)))
def test_relative_links_resolve(path: Path) -> None:
    broken = []
    for target in _LINK.findall(_prose(_text(path))):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
            continue
        file_part, _, anchor = target.partition("#")
        dest = (path.parent / file_part).resolve() if file_part else path
        missing_anchor = anchor and dest.suffix == ".md" and anchor not in _anchors(dest)
        if not dest.exists() or missing_anchor:
            broken.append(target)
    assert not broken, f"{path.relative_to(REPO)}: broken link(s) {broken}"


def test_index_links_every_page() -> None:
    index = _text(DOCS / "README.md")
    pages = {p.name for p in DOCS.glob("*.md")} - {"README.md"}
    assert {p for p in pages if f"]({p})" not in index} == set()


# -- pasted output -------------------------------------------------------------------------


def test_findings_md_example_is_a_current_finding() -> None:
    """The ECS and OCSF JSON pasted in findings.md have exactly today's fields and values
    (except the capture's own times and ports, which change when the sample is re-recorded)."""
    from sse_forensics.engine.incidents import group_incidents, incident_of
    from sse_forensics.report.jsonout import ecs_finding
    from sse_forensics.report.ocsf import ocsf_record

    fenced = _fenced(_text(DOCS / "findings.md"), "json")
    pasted, pasted_ocsf = json.loads(fenced[0]), json.loads(fenced[1])
    result = scan_paths([str(SAMPLES / "live-jump-unsignalled.pcap")])
    finding = next(f for f in result.findings if f.rule == pasted["rule"]["id"])
    incident = incident_of(group_incidents(result.findings))[finding.fingerprint]
    current = ecs_finding(finding, incident)
    assert list(pasted) == list(current)
    assert pasted["rule"] == current["rule"] and pasted["message"] == current["message"]
    ours, now = pasted["sse_forensics"], current["sse_forensics"]
    assert list(ours) == list(now)
    for key in ("classification", "severity", "session_id", "gap", "location"):
        assert ours[key] == now[key], key
    assert [e["what"] for e in ours["evidence"]] == [e["what"] for e in now["evidence"]]
    assert ours["incident_id"] == incident
    record = ocsf_record(finding, incident)
    assert list(pasted_ocsf) == list(record)
    assert pasted_ocsf["metadata"] == record["metadata"] | {
        "product": pasted_ocsf["metadata"]["product"]
    }
    assert pasted_ocsf["finding_info"]["analytic"] == record["finding_info"]["analytic"]
    assert pasted_ocsf["unmapped"]["sse_forensics"]["gap"] == finding.gap


def test_worked_example_matches_a_scan_of_its_sample() -> None:
    """Every finding of the sample is discussed, and the pasted JSON finding and the
    fingerprints quoted in the ticket are today's."""
    text = _squash(_text(DOCS / "worked-example.md"))
    result = scan_paths([str(SAMPLES / "resume-jump-unsignalled.pcap")])
    by_rule = {f.rule: f for f in result.findings}
    assert {"silent-resume-jump", "resume-in-gap-2xx"} <= set(by_rule)
    for rule in by_rule:
        assert f"`{rule}`" in text, f"worked-example.md does not discuss {rule}"
    assert _squash(by_rule["silent-resume-jump"].message) in text
    frames = {e["frame"] for e in by_rule["silent-resume-jump"].evidence}
    assert all(f"frame.number == {n}" in text or f"frame {n}" in text for n in frames)
    for rule in ("silent-resume-jump", "resume-in-gap-2xx"):
        assert by_rule[rule].fingerprint in text, f"stale fingerprint for {rule}"
