"""Generate the rule reference part of docs/rules.md from rules/*.toml (one-off helper)."""

import json
import re
import subprocess
import sys
import tomllib
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
GROUPS = [
    (
        "Server: live streams",
        ["missing-stream-gap", "gap-signal-late", "non-monotonic-id", "resumable-while-evicting"],
    ),
    (
        "Server: resumes and replays",
        [
            "silent-resume-jump",
            "resume-in-gap-2xx",
            "empty-replay-2xx",
            "replay-from-oldest",
            "replay-duplicate",
            "replay-crossed-streams",
            "replay-crossed-sessions",
            "backpressure-disconnect-resume-mismatch",
            "resume-in-stateless-era",
        ],
    ),
    (
        "Client behaviour",
        [
            "client-accepted-gap",
            "client-adjusted-resume",
            "no-reissue-after-410",
            "resume-lost-cursor",
            "resume-storm",
        ],
    ),
    (
        "Signalled or recovered losses (expected gaps)",
        [
            "stream-gap-signalled",
            "resume-gap-signalled",
            "resume-refused-410",
            "backpressure-gap-signalled",
            "gap-client-reissued",
        ],
    ),
]


def fired() -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for pcap in sorted(REPO.glob("samples/*.pcap*")):
        proc = subprocess.run(
            [
                "sse-forensics",
                "scan",
                str(pcap.relative_to(REPO)),
                "-f",
                "jsonl",
                "--fail-on",
                "never",
            ],
            cwd=REPO,
            capture_output=True,
        )
        for line in proc.stdout.splitlines():
            f = json.loads(line)
            out.setdefault(f["rule"], [])
            name = str(pcap.relative_to(REPO))
            if name not in out[f["rule"]]:
                out[f["rule"]].append(f"{name} ({f['classification']})")
    return out


def prose(text: str) -> str:
    text = re.sub(r"(^|[.!?]\s+)PROFILE\.md", r"\1The wire profile", text)
    text = text.replace("PROFILE.md", "the wire profile")
    text = re.sub(
        r"What it does: (\w)", lambda m: "**What it detects.** " + m.group(1).upper(), text
    )
    text = text.replace("Why is this bad?", "**Why it matters.**")
    text = text.replace("Why it matters:", "**Why it matters.**")
    return text.strip()


rules = {}
for p in sorted((REPO / "rules").glob("*.toml")):
    r = tomllib.loads(p.read_text())
    rules[r["id"]] = r
seen = fired()
placed = {i for _, ids in GROUPS for i in ids}
groups = GROUPS + ([("Other rules", sorted(set(rules) - placed))] if set(rules) - placed else [])
lines = []
for title, ids in groups:
    ids = [i for i in ids if i in rules]
    if not ids:
        continue
    lines.append(f"## {title}\n")
    for rid in ids:
        r = rules[rid]
        verdict = (
            f"`{r['classification']}`"
            if "classification" in r
            else "`silent_corruption`, or `indeterminate` when capture bytes are missing"
        )
        lines.append(f"### `{rid}`\n")
        lines.append(f"*{r['title']}.*\n")
        lines.append(
            f"Severity `{r['severity']}` · verdict {verdict} · table `{r['table']}` · "
            f"fires when `{r['where']}`\n"
        )
        lines.append(prose(r["rationale"]) + "\n")
        lines.append("**How to fix.** " + prose(r["remediation"]) + "\n")
        if r.get("example", "").strip():
            lines.append("```text\n" + r["example"].strip("\n") + "\n```\n")
        samples = sorted(seen.get(rid, []), key=lambda x: (Path(x.split(" ")[0]).stem != rid, x))
        if samples:
            shown = ", ".join(f"`{s.split(' ')[0]}` {s.split(' ', 1)[1]}" for s in samples[:3])
            more = f" and {len(samples) - 3} more" if len(samples) > 3 else ""
            lines.append(f"Bundled samples: {shown}{more}.\n")
print("\n".join(lines))

# ---- assemble docs/rules.md ----------------------------------------------------------
import os
import shutil
import tempfile

reference = "\n".join(lines)
head = (HERE / "rules_head.md").read_text()
tail = (HERE / "rules_tail.md").read_text()
index = ["| rule | severity | verdict | detects |", "|---|---|---|---|"]
for title, ids in groups:
    for rid in [i for i in ids if i in rules]:
        r = rules[rid]
        v = r.get("classification") or "from data"
        index.append(f"| [`{rid}`](#{rid}) | {r['severity']} | {v} | {r['title']} |")
toml_block = re.search(r"```toml\n(.*?)```", tail, re.S).group(1)
work = Path(tempfile.mkdtemp())
shutil.rmtree(work, ignore_errors=True)
(work / "site-rules").mkdir(parents=True)
(work / "bad-rules").mkdir()
(work / "site-rules" / "large-signalled-gap.toml").write_text(toml_block)
(work / "bad-rules" / "large-signalled-gap.toml").write_text(
    toml_block.replace("count >= 5", "cnt >= 5")
)
os.symlink(REPO / "samples", work / "samples")
env = {**os.environ, "COLUMNS": "100"}


def run(cmd: str) -> str:
    p = subprocess.run(cmd, shell=True, cwd=work, capture_output=True, text=True, env=env)
    return f"$ {cmd}\n" + "\n".join(l.rstrip() for l in (p.stdout + p.stderr).rstrip().splitlines())


tail = tail.replace(
    "RULES_LIST_OUTPUT",
    run("sse-forensics rules show large-signalled-gap --rules site-rules/ | head -6"),
)
tail = tail.replace(
    "SCAN_OUTPUT",
    run("sse-forensics scan samples/live-gap-signalled.pcap --rules site-rules/")
    + "\n\n"
    + run(
        "sse-forensics scan samples/live-gap-signalled.pcap --rules site-rules/ -f jsonl | jq -r 'select(.rule == \"large-signalled-gap\") | .message'"
    ),
)
bad = run(
    "sse-forensics scan samples/live-gap-signalled.pcap --rules bad-rules/ -f json | jq -r '.rule_errors[]'"
)
tail = tail.replace("BAD_RULE_OUTPUT", bad)
out = head + "\n".join(index) + "\n\n" + reference + "\n" + tail
Path(REPO / "docs" / "rules.md").write_text(out)
print("written", len(out), file=sys.stderr)
