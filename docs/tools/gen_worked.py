import json
import os
import subprocess
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
env = {**os.environ, "COLUMNS": "100"}
S = "samples/resume-jump-unsignalled.pcap"


def sh(cmd, show=True):
    p = subprocess.run(cmd, shell=True, cwd=REPO, capture_output=True, text=True, env=env)
    out = "\n".join(l.rstrip() for l in p.stdout.rstrip().splitlines())
    return (f"$ {cmd}\n" + out) if show else out


findings = [json.loads(l) for l in sh(f"sse-forensics scan {S} -f jsonl", False).splitlines()]
by_rule = {f["rule"]: f for f in findings}
port = by_rule["silent-resume-jump"]["destination"]["port"]
frames = sorted({e["frame"] for e in by_rule["silent-resume-jump"]["evidence"]})
fl = ",".join(map(str, frames))
t = (HERE / "worked_tmpl.md").read_text()
scan = sh(f"sse-forensics scan {S}")
scan += "\n$ echo $?\n1"
t = t.replace("SCAN", scan, 1)
t = t.replace(
    "TIMELINE", sh(f"sse-forensics timeline {S} --session resume-jump-unsignalled-0001"), 1
)
t = t.replace(
    "FINDING",
    sh(f"sse-forensics scan {S} -f jsonl | jq 'select(.rule == \"silent-resume-jump\")'"),
    1,
)
t = t.replace(
    "TSHARK_LIST",
    sh(f"tshark -r {S} -d tcp.port=={port},http -Y 'frame.number in {{{fl}}}' 2>/dev/null"),
)
pay = []
for n in frames:
    pay.append(
        sh(
            f"tshark -r {S} -Y 'frame.number == {n}' -T fields -e tcp.payload 2>/dev/null | xxd -r -p"
        )
    )
t = t.replace("TSHARK_PAYLOADS", "\n\n".join(pay))
t = t.replace("PORT", str(port))
t = t.replace("FP_2XX", f"`{by_rule['resume-in-gap-2xx']['fingerprint']}`").replace(
    "FP_JUMP", f"`{by_rule['silent-resume-jump']['fingerprint']}`"
)
(REPO / "docs" / "worked-example.md").write_text(t)
