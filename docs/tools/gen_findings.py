import os
import subprocess
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
env = {**os.environ, "COLUMNS": "100"}


def sh(cmd):
    return subprocess.run(
        cmd, shell=True, cwd=REPO, capture_output=True, text=True, env=env
    ).stdout.rstrip()


t = (HERE / "findings_tmpl.md").read_text()
t = t.replace(
    "FINDING_JSON",
    sh("sse-forensics scan samples/live-jump-unsignalled.pcap -f jsonl | head -1 | jq ."),
)
t = t.replace(
    "DOC_JSON",
    sh(
        """sse-forensics scan samples/live-jump-unsignalled.pcap -f json | jq '{tool, inputs, stats, verdicts, sessions: [.sessions[] | {session_id, session_source, protocol_version, id_scheme, counter_scope, streams, resumes, data_events, verdicts}], findings: ["…"], errors, rule_errors}'"""
    ),
)
t = t.replace(
    "ERROR_JSON", sh("sse-forensics scan samples/crafted-garbage-chunk.pcap -f json | jq '.errors'")
)
t = t.replace(
    "TICKET_BODY",
    sh(
        """sse-forensics scan samples/resume-jump-unsignalled.pcap -f jsonl | head -1 | jq -r '.message, "", (.evidence[] | "- \\(.source) frame \\(.frame): \\(.what)")'"""
    ),
)
(REPO / "docs" / "findings.md").write_text(t)
