"""Small generated log sets (the scale benchmark's generator, sized down)."""

from __future__ import annotations

import json
import random
from pathlib import Path


def write_log_set(tmp: Path, sessions: int) -> list[str]:
    """Production-shaped server logs: each session opens tool-call streams with a counter
    shared by the session; some streams are cut and resumed, some resumes jump."""
    rnd = random.Random(7)
    events, access = [], []
    t0 = 1796083200.0
    for n in range(sessions):
        sid = f"{rnd.getrandbits(64):016x}"
        t = t0 + n * 10.0
        counter = 0
        for c in range(3):
            stream, request = f"{sid}-{c}", f"r{n}-{c}"
            written = []
            for _ in range(20):
                counter += 1
                t += 0.01
                for kind in ("emitted", "written"):
                    events.append(
                        {
                            "ts": t,
                            "session": sid,
                            "stream": stream,
                            "event_id": str(counter),
                            "kind": kind,
                            "request": request,
                        }
                    )
                written.append(counter)
            if c == 1:  # cut after 10, resumed; every fourth resume skips five events
                cut = written[9]
                events = [
                    e
                    for e in events
                    if not (
                        e["stream"] == stream
                        and e["kind"] == "written"
                        and int(e["event_id"]) > cut
                    )
                ]
                start = cut + (6 if n % 4 == 0 else 1)
                for eid in range(start, written[-1] + 1):
                    t += 0.001
                    events.append(
                        {
                            "ts": t,
                            "session": sid,
                            "stream": stream,
                            "event_id": str(eid),
                            "kind": "written",
                            "request": f"{request}-resume",
                            "last_event_id": str(cut),
                        }
                    )
                stamp = "01/Dec/2026:00:00:00 +0000"
                access.append(
                    f'10.0.0.{n % 250} - - [{stamp}] "GET /mcp HTTP/1.1" 200 900 "-" "x" '
                    f'"{cut}" "{sid}" 0.5\n'
                )
    events.sort(key=lambda e: e["ts"])
    ev = tmp / f"events-{sessions}.jsonl"
    ev.write_text("".join(json.dumps(e) + "\n" for e in events))
    ac = tmp / f"access-{sessions}.log"
    ac.write_text("".join(access))
    return [str(ac), str(ev)]
