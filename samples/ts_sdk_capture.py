"""Capture the official MCP TypeScript SDK: ``python samples/ts_sdk_capture.py [--only clean
resume] [--out DIR]`` (as root: tcpdump records ``lo``).

Runs ``samples/ts_sdk/server.js`` (the SDK's StreamableHTTPServerTransport with its example
InMemoryEventStore) on a free loopback port and ``samples/ts_sdk/client.js`` (the SDK's
Client over StreamableHTTPClientTransport) against it while tcpdump records the port, then
writes ``ts-sdk-<mode>.pcap``, ``ts-sdk-<mode>.expected.json`` and the server's logs of
that run in ``logs/ts-sdk-<mode>/`` (``log-middleware.js``: an nginx ``combined-mcp``
access log and the event log a middleware in front of the SDK writes). ``clean`` and
``resume`` are clean by construction (``findings: []``); in ``stream-gap`` the middleware
sheds progress 4 and 5 and announces them with a ``stream-gap`` event before progress 6
(``stream-gap-signalled``, expected_gap, their IDs: read from the middleware's eviction
records, since the IDs are the SDK's random ones). The JSON also keeps what the client saw
(``client_saw``: the progress values, ``client_events``: the tools/call data events with
their SSE IDs), so tests can check the analyzer reassembled every one. ``npm ci`` runs first when
``ts_sdk/node_modules`` is missing. Event and session IDs are random and time-based (the
SDK's own generators), so they differ on every run.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

SAMPLES_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(SAMPLES_DIR))  # the capture helpers live beside this script
from make_samples import check_logs, record_until_complete, tcpdump  # noqa: E402

SDK_DIR = SAMPLES_DIR / "ts_sdk"
MADE_BY = "loopback (official MCP TypeScript SDK)"
STEPS = 8  # server.js: progress notifications per tools/call
INTERRUPT_AT = 3  # client.js: the resume run drops the stream after this progress value
SHED = (4, 5)  # stream-gap run: the progress notifications the middleware drops
CLIENT_MODE = {"clean": "clean", "resume": "resume", "stream-gap": "clean"}

DESCRIPTIONS = {
    "clean": (
        "Official MCP TypeScript SDK server (StreamableHTTPServerTransport, example "
        "InMemoryEventStore, IDs <stream>_<ms>_<random>, retry 100) and client: initialize, "
        f"tools/call with {STEPS} progress notifications, tools/list, DELETE."
    ),
    "resume": (
        f"As ts-sdk-clean, but the client aborts the tools/call stream after progress "
        f"{INTERRUPT_AT}, reconnects with a new transport and resumes through the SDK "
        f"(request with resumptionToken: GET + last-event-id of progress {INTERRUPT_AT}); "
        "the server replays the stored progress and streams the rest and the result."
    ),
    "stream-gap": (
        "As ts-sdk-clean, behind a middleware that sheds progress notifications 4 and 5 "
        "(logged as evicted) and announces them with event: stream-gap {first, last} before "
        "progress 6; the client reads on to the result."
    ),
}


def ensure_node_modules() -> None:
    """Install the pinned SDK (package-lock.json) unless it is installed already."""
    if not (SDK_DIR / "node_modules" / "@modelcontextprotocol" / "sdk").is_dir():
        subprocess.run(["npm", "ci", "--no-audit", "--no-fund"], cwd=SDK_DIR, check=True)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextmanager
def node_server(
    port: int, log_dir: Path | None = None, drop: tuple[int, ...] = ()
) -> Iterator[str]:
    """Run server.js on ``port`` until the block ends; yield the /mcp URL. With
    ``log_dir`` it writes its logs there, shedding the progress values ``drop``."""
    args = ["node", "server.js", str(port)]
    if log_dir is not None:
        args += [str(log_dir.resolve()), ",".join(map(str, drop))]
    process = subprocess.Popen(args, cwd=SDK_DIR, stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None
    try:
        line = process.stdout.readline()  # "listening PORT" once it accepts connections
        if not line.startswith("listening"):
            raise RuntimeError(f"server.js did not start: {line.strip()!r}")
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def run_client(url: str, mode: str) -> dict:
    """Run client.js; return what it printed (see its header)."""
    done = subprocess.run(
        ["node", "client.js", url, mode],
        cwd=SDK_DIR,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    if done.returncode != 0 or done.stderr.strip():
        raise RuntimeError(f"client.js {mode} failed ({done.returncode}): {done.stderr.strip()}")
    return json.loads(done.stdout)


def check_run(mode: str, saw: dict, pcap: Path) -> list[str]:
    """Problems with the run: the client missed progress, an event lacks an ID, the resume
    did not start from progress INTERRUPT_AT, or an ID the client read is not in the capture."""
    problems = []
    wanted = [n for n in range(1, STEPS + 1) if mode != "stream-gap" or n not in SHED]
    if saw["progress"] != wanted:
        problems.append(f"client saw progress {saw['progress']}, designed {wanted}")
    events = saw["events"]
    ids = [e["id"] for e in events]
    if [e.get("progress") for e in events[:-1]] != wanted or "result" not in events[-1]:
        problems.append(f"tools/call data events {events}")
    if None in ids or len(set(ids)) != len(ids):
        problems.append(f"event IDs missing or repeated: {ids}")
    if mode == "resume" and saw["resumedWith"] != ids[INTERRUPT_AT - 1]:
        problems.append(f"resumed with {saw['resumedWith']}, not the ID of progress 3")
    # Each SSE event is one small chunk written at once: its `id:` line is in one segment.
    raw = pcap.read_bytes()
    problems += [f"id {i} not in the capture" for i in ids if f"id: {i}\n".encode() not in raw]
    return problems


def capture(mode: str, out_dir: Path) -> tuple[Path, dict, int]:
    """Capture one run (and its logs); a capture the kernel dropped packets from is made
    again."""
    pcap = out_dir / f"ts-sdk-{mode}.pcap"
    log_dir = out_dir / "logs" / f"ts-sdk-{mode}"
    drop = SHED if mode == "stream-gap" else ()

    def record() -> tuple[dict, int]:
        port = free_port()  # a fresh server (and port) for every attempt
        shutil.rmtree(log_dir, ignore_errors=True)
        with node_server(port, log_dir, drop) as url, tcpdump(pcap, port):
            return run_client(url, CLIENT_MODE[mode]), port

    saw, port = record_until_complete(f"ts-sdk-{mode}", record)
    problems = check_run(mode, saw, pcap) + check_logs(log_dir, pcap, port)
    if problems:
        raise RuntimeError(f"ts-sdk-{mode}: " + "; ".join(problems))
    return pcap, saw, port


def make(mode: str, out_dir: Path) -> None:
    pcap, saw, port = capture(mode, out_dir)
    findings = []
    if mode == "stream-gap":
        records = (out_dir / "logs" / "ts-sdk-stream-gap" / "events.jsonl").read_text()
        shed = [
            r["event_id"] for r in map(json.loads, records.splitlines()) if r["kind"] == "evicted"
        ]
        gap = {"first": shed[0], "last": shed[-1]}
        findings.append(
            {"rule": "stream-gap-signalled", "classification": "expected_gap", "gap": gap}
        )
    expected = {
        "description": DESCRIPTIONS[mode],
        "made_by": MADE_BY,
        "findings": findings,
        "client_saw": saw["progress"],
        "client_events": saw["events"],
    }
    if saw["resumedWith"] is not None:
        expected["resumed_with"] = saw["resumedWith"]
    expected_path = out_dir / f"ts-sdk-{mode}.expected.json"
    expected_path.write_text(json.dumps(expected, indent=2) + "\n")
    print(f"ts-sdk-{mode:26} {pcap.stat().st_size:>7} bytes  port {port}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="+", choices=sorted(DESCRIPTIONS), help="runs to make")
    parser.add_argument("--out", type=Path, default=SAMPLES_DIR, help="output folder")
    args = parser.parse_args(argv)
    if os.geteuid() != 0:
        print("ts_sdk_capture.py needs root: tcpdump captures on lo", file=sys.stderr)
        return 2
    for tool in ("node", "npm", "tcpdump"):
        if shutil.which(tool) is None:
            print(f"ts_sdk_capture.py needs {tool} on PATH", file=sys.stderr)
            return 2
    ensure_node_modules()
    args.out.mkdir(parents=True, exist_ok=True)
    for mode in args.only or sorted(DESCRIPTIONS):
        make(mode, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
