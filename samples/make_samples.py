"""Regenerate the sample captures: ``python samples/make_samples.py [--only NAME...] [--out DIR]``.

Each loopback scenario runs a real server (samples/profile_server.py, or the official MCP
Python SDK) and a real client on 127.0.0.1 while tcpdump records ``lo``, then writes
``<name>.pcap`` and ``<name>.expected.json`` (findings by construction, see
/work/notes/samples.md). The scapy-crafted samples come from samples/crafted.py when it
exists. README.md's table is rebuilt from every ``*.expected.json`` in the output folder.
Needs root (tcpdump on ``lo``).
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

SAMPLES_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(SAMPLES_DIR))  # samples/ is not a package: import the siblings

import dpkt  # noqa: E402
from profile_client import ClientPlan, run_plan  # noqa: E402
from profile_server import ProfileServer, ServerKnobs, expected_event_id, running_server  # noqa: E402

LOOPBACK = "loopback (uvicorn+httpx, tcpdump)"
LOOPBACK_SDK = "loopback (official MCP Python SDK)"
FIRST_PORT = 38101  # scenario i listens on FIRST_PORT + i: captures never mix
EVICTED = (8, 12)


@dataclass(frozen=True)
class Scenario:
    """One capture: what runs, what the wire must show, and the ground-truth findings."""

    name: str
    description: str
    run: Callable[[int], object]  # port -> anything (the traffic happens inside)
    findings: list[dict] = field(default_factory=list)
    wire_ids: list[str] | None = None  # every SSE `id:` the server must put on the wire
    made_by: str = LOOPBACK


def finding(rule: str, classification: str, first: str, last: str | None) -> dict:
    return {"rule": rule, "classification": classification, "gap": {"first": first, "last": last}}


def ints(first: int, last: int) -> list[str]:
    return [str(n) for n in range(first, last + 1)]


def profile(knobs: ServerKnobs, plan: ClientPlan) -> Callable[[int], object]:
    def run(port: int) -> object:
        with running_server(ProfileServer(knobs).app(), port) as url:
            return run_plan(url, plan)

    return run


def sdk(resume: bool, seed: str) -> Callable[[int], object]:
    def run(port: int) -> object:
        import mcp_sdk_capture  # imported late: the SDK is only needed for these two

        return mcp_sdk_capture.run(port, resume=resume, seed=seed)

    return run


def scenarios() -> list[Scenario]:
    def knobs(name: str, **kw: object) -> ServerKnobs:
        return ServerKnobs(session_id=f"{name}-0001", seed=name, **kw)  # type: ignore[arg-type]

    drop7 = ClientPlan(disconnect_after=7, resume=True)
    opaque = knobs(
        "opaque-resume-jump", id_scheme="opaque", live_stop_after=10, replay_evicted=(8, 10)
    )
    opaque_ids = [expected_event_id(opaque, 1, n) for n in range(0, 21)]
    silent_8_12 = [
        finding("silent-resume-jump", "silent_corruption", "8", "12"),
        finding("resume-in-gap-2xx", "silent_corruption", "8", "12"),
    ]
    return [
        Scenario(
            "clean-live-int",
            "tools/call answered with a priming event, 19 progress notifications and the "
            "result (int IDs 0-20), `: ping` keep-alive comments every 5 events.",
            profile(knobs("clean-live-int", keepalive_every=5), ClientPlan()),
            wire_ids=ints(0, 20),
        ),
        Scenario(
            "clean-resume-int",
            "The client drops the tools/call stream after event 7 and resumes with "
            "Last-Event-ID 7; the server replays 8-20.",
            profile(knobs("clean-resume-int", live_stop_after=7), drop7),
            wire_ids=ints(0, 20),
        ),
        Scenario(
            "live-jump-unsignalled",
            "The server evicts events 8-12 (IDs assigned, never written) and keeps counting; "
            "no stream-gap event.",
            profile(knobs("live-jump-unsignalled", live_evicted=EVICTED), ClientPlan()),
            [finding("missing-stream-gap", "silent_corruption", "8", "12")],
            wire_ids=ints(0, 7) + ints(13, 20),
        ),
        Scenario(
            "live-gap-signalled",
            "Events 8-12 evicted as in live-jump-unsignalled, announced by "
            'event: stream-gap {"first": 8, "last": 12} before event 13.',
            profile(
                knobs("live-gap-signalled", live_evicted=EVICTED, signal_stream_gap=True),
                ClientPlan(),
            ),
            [finding("stream-gap-signalled", "expected_gap", "8", "12")],
            wire_ids=ints(0, 7) + ints(13, 20),
        ),
        Scenario(
            "resume-jump-unsignalled",
            "The client drops the stream after event 7; the server's replay buffer lost "
            "8-12; the resume (Last-Event-ID 7) is answered 200 replaying 13-20.",
            profile(
                knobs("resume-jump-unsignalled", live_stop_after=7, replay_evicted=EVICTED),
                drop7,
            ),
            silent_8_12,
            wire_ids=ints(0, 7) + ints(13, 20),
        ),
        Scenario(
            "resume-410",
            "The client drops the stream after event 7; the resume (Last-Event-ID 7) is "
            "answered 410 Gone.",
            profile(knobs("resume-410", live_stop_after=7, resume_status=410), drop7),
            [finding("resume-refused-410", "expected_gap", "8", None)],
            wire_ids=ints(0, 7),
        ),
        Scenario(
            "resume-gap-signalled",
            "The client drops the stream after event 7; the replay buffer lost 8-12; the "
            'resume is answered 200 with event: resume-gap {"requested": 7, '
            '"oldest_retained": 13}, then 13-20.',
            profile(
                knobs(
                    "resume-gap-signalled",
                    live_stop_after=7,
                    replay_evicted=EVICTED,
                    signal_resume_gap=True,
                ),
                drop7,
            ),
            [finding("resume-gap-signalled", "expected_gap", "8", "12")],
            wire_ids=ints(0, 7) + ints(13, 20),
        ),
        Scenario(
            "shared-counter-two-streams",
            "One session, two concurrent tools/call streams taking turns on one shared "
            "counter (A: 1,3,...,21; B: 2,4,...,22) and a standalone GET stream (23-25).",
            profile(
                knobs(
                    "shared-counter-two-streams",
                    shared_counter=True,
                    interleaved_calls=2,
                    events_per_call=10,
                    standalone_events=2,
                ),
                ClientPlan(concurrent_calls=2, standalone_stream=True),
            ),
            wire_ids=ints(1, 25),
        ),
        Scenario(
            "prefixed-live-jump",
            "Prefixed IDs s1_0...s1_20; the server evicts s1_8-s1_12 and keeps counting, "
            "no stream-gap event.",
            profile(
                knobs("prefixed-live-jump", id_scheme="prefixed", live_evicted=EVICTED),
                ClientPlan(),
            ),
            [finding("missing-stream-gap", "silent_corruption", "s1_8", "s1_12")],
            wire_ids=[f"s1_{n}" for n in [*range(0, 8), *range(13, 21)]],
        ),
        Scenario(
            "opaque-resume-jump",
            "UUID IDs. The server writes events 1-10, the client stops reading after event 7 "
            "and hangs up (8-10 are on the wire); it resumes with the ID of event 7 and the "
            "replay starts at event 11.",
            profile(opaque, ClientPlan(disconnect_after=7, linger=0.3, resume=True)),
            [
                finding("silent-resume-jump", "silent_corruption", opaque_ids[8], opaque_ids[10]),
                finding("resume-in-gap-2xx", "silent_corruption", opaque_ids[8], opaque_ids[10]),
            ],
            wire_ids=opaque_ids,
        ),
        Scenario(
            "backpressure-disconnect-resume",
            "After event 7 the server sends event: backpressure-disconnect "
            '{"last_written_id": 7} and closes; 8-12 were discarded; the client resumes '
            "with Last-Event-ID 7 and the replay starts at 13.",
            profile(
                knobs(
                    "backpressure-disconnect-resume", backpressure_after=7, replay_evicted=EVICTED
                ),
                ClientPlan(resume=True),
            ),
            [finding("backpressure-gap-signalled", "expected_gap", "8", "12")],
            wire_ids=ints(0, 7) + ints(13, 20),
        ),
        Scenario(
            "mcp-sdk-clean",
            "Official MCP Python SDK server (in-memory EventStore, UUID IDs, retry 100) and "
            "client: initialize, tools/call with 8 progress notifications, tools/list, DELETE.",
            sdk(resume=False, seed="mcp-sdk-clean"),
            made_by=LOOPBACK_SDK,
        ),
        Scenario(
            "mcp-sdk-resume",
            "As mcp-sdk-clean, but the tool calls ctx.close_sse_stream() after progress 3; "
            "the SDK client reconnects by itself with Last-Event-ID, the server replays the "
            "stored event, re-primes and streams the rest.",
            sdk(resume=True, seed="mcp-sdk-resume"),
            made_by=LOOPBACK_SDK,
        ),
    ]


# --- capture ---------------------------------------------------------------------------
# With --immediate-mode libpcap uses fixed-size ring slots of snaplen bytes each: at -s 0
# (256 KiB) the default 2 MiB buffer holds ~8 packets and a burst overflows it. -B is in KiB.
CAPTURE_BUFFER_KIB = 65536
ATTEMPTS = 3  # a capture the kernel dropped packets from is made again


class CaptureDropped(Exception):
    """tcpdump reports packets dropped by the kernel: the capture is incomplete."""


@contextmanager
def tcpdump(pcap: Path, port: int) -> Iterator[None]:
    """Record ``tcp port PORT`` on ``lo`` for the duration of the block (-U: flush per packet)."""
    # --immediate-mode: without it, packets still in the kernel ring's open block when
    # SIGINT arrives are lost. -Z root: keep the file owned by the user who made it.
    command = ["tcpdump", "-i", "lo", "-s", "0", "-B", str(CAPTURE_BUFFER_KIB), "-U"]
    command += ["--immediate-mode", "-Z", "root", "-w", str(pcap), f"tcp port {port}"]
    process = subprocess.Popen(command, stderr=subprocess.PIPE, text=True)
    assert process.stderr is not None
    first_line = process.stderr.readline()  # "listening on lo, ..." once the filter is live
    if "listening on" not in first_line:
        process.wait(timeout=5)
        raise RuntimeError(f"tcpdump failed: {first_line.strip()}")
    time.sleep(0.1)
    try:
        yield
    finally:
        time.sleep(0.3)  # let the last FIN/ACKs through the filter
        process.send_signal(signal.SIGINT)
        report = process.communicate(timeout=10)[1]
    if "packets captured" not in report:
        raise RuntimeError(f"tcpdump did not report its count: {report.strip()}")
    dropped = re.search(r"(\d+) packets? dropped by kernel", report)
    if dropped and int(dropped.group(1)):
        raise CaptureDropped(f"{dropped.group(1)} packets dropped by the kernel")


def port_is_free(port: int) -> bool:
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


ID_LINE = re.compile(rb"^id: ?([^\r\n]*)\r?$", re.MULTILINE)


def wire_event_ids(pcap: Path, port: int) -> list[str]:
    """Every SSE ``id:`` line the server sent, from the capture (TCP payloads by sequence)."""
    segments: dict[tuple[int, int], bytes] = {}
    with pcap.open("rb") as handle:
        for _, buf in dpkt.pcap.Reader(handle):
            ip = dpkt.ethernet.Ethernet(buf).data
            tcp = ip.data
            if isinstance(tcp, dpkt.tcp.TCP) and tcp.sport == port and tcp.data:
                segments[(tcp.dport, tcp.seq)] = bytes(tcp.data)
    connections: dict[int, bytes] = {}
    for (client_port, _), payload in sorted(segments.items()):
        connections[client_port] = connections.get(client_port, b"") + payload
    return [m.decode() for body in connections.values() for m in ID_LINE.findall(body)]


def check_capture(scenario: Scenario, pcap: Path, port: int) -> list[str]:
    """Problems with the capture: wrong IDs on the wire, duplicates where none belong."""
    seen = wire_event_ids(pcap, port)
    if not seen:
        return ["no SSE event IDs on the wire"]
    if scenario.wire_ids is None:
        duplicates = [i for i, n in Counter(seen).items() if n > 1]
        return [f"IDs sent twice: {duplicates}"] if duplicates else []
    if Counter(seen) != Counter(scenario.wire_ids):
        return [f"wire IDs {seen} != designed {scenario.wire_ids}"]
    return []


def capture(scenario: Scenario, port: int, out_dir: Path) -> tuple[Path, object]:
    """Run ``scenario`` on ``port`` while tcpdump writes ``out_dir/<name>.pcap``; a capture the
    kernel dropped packets from is made again. Returns the pcap and what ``scenario.run``
    returned (the client's view of the traffic). Raises RuntimeError if the wire is wrong."""
    if not port_is_free(port):
        raise RuntimeError(f"port {port} for {scenario.name} is in use")
    pcap = out_dir / f"{scenario.name}.pcap"
    for attempt in range(1, ATTEMPTS + 1):
        try:
            with tcpdump(pcap, port):
                seen = scenario.run(port)
            break
        except CaptureDropped as dropped:
            if attempt == ATTEMPTS:
                raise RuntimeError(f"{scenario.name}: {dropped}") from dropped
            print(f"{scenario.name}: {dropped}, capturing again")
    problems = check_capture(scenario, pcap, port)
    if problems:
        raise RuntimeError(f"{scenario.name}: " + "; ".join(problems))
    return pcap, seen


def make(scenario: Scenario, port: int, out_dir: Path) -> None:
    pcap, _ = capture(scenario, port, out_dir)
    expected = {
        "description": scenario.description,
        "made_by": scenario.made_by,
        "findings": scenario.findings,
    }
    expected_path = out_dir / f"{scenario.name}.expected.json"
    expected_path.write_text(json.dumps(expected, indent=2) + "\n")
    print(f"{scenario.name:32} {pcap.stat().st_size:>7} bytes  port {port}")


# --- README ----------------------------------------------------------------------------
README_HEAD = """# Sample captures

Every sample is `<name>.pcap` (or `.pcapng`) plus `<name>.expected.json`, whose `findings`
are the ground truth *by construction* (what the scenario was built to produce), not the
analyzer's output. Regenerate everything (as root: tcpdump records `lo`) with

    python samples/make_samples.py            # all samples, about 15 s
    python samples/make_samples.py --only resume-410 mcp-sdk-resume

Loopback samples come from real servers and clients over 127.0.0.1: `profile_server.py`
(Starlette on uvicorn, speaking shared/PROFILE.md, each misbehaviour a knob),
`profile_client.py` (httpx) and `mcp_sdk_capture.py` (the official MCP Python SDK, server
and client). Crafted samples are built packet by packet by `crafted.py` (scapy; see
CRAFTED.md). Content is the same on every run (seeded session and event IDs); timestamps,
`date:` headers and client ports differ. Each loopback capture holds one server port (printed
by make_samples.py): `tshark -r samples/NAME.pcap -Y http -d tcp.port==PORT,http`.

What the official Python SDK (mcp 2.3.0, sse-starlette) writes, as seen in `mcp-sdk-*`:
- CRLF line endings; every event is its own HTTP chunk; data events carry `event: message`.
- Priming events are `id: <uuid>` + `data: ` (a trailing space) + `retry: 100`, no `event:`;
  every POST stream is primed, `initialize` included (its answer is an event stream, not JSON).
- After a replay the server mints a *new* priming event (fresh ID) before the live tail.
- Event IDs are whatever the plugged-in EventStore returns (here seeded UUIDs, like the
  SDK's example store); the standalone GET stream carries no priming event.
- The client resumes on the same keep-alive connection the POST stream ended on, with
  `last-event-id` lowercase and `Cache-Control: no-store` on its GET requests.

| sample | what happened | expected findings | how made |
|---|---|---|---|
"""


def describe_findings(findings: list[dict]) -> str:
    if not findings:
        return "none"
    rows = []
    for f in findings:
        first, last = f["gap"]["first"], f["gap"]["last"]
        span = first if last == first else f"{first}–{'?' if last is None else last}"
        rows.append(f"`{f['rule']}` ({f['classification']}) {span}")
    return "<br>".join(rows)


def write_readme(out_dir: Path) -> None:
    rows = []
    for expected_path in sorted(out_dir.glob("*.expected.json")):
        expected = json.loads(expected_path.read_text())
        name = expected_path.name.removesuffix(".expected.json")
        description = expected.get("description", "").replace("|", "\\|")
        findings = describe_findings(expected.get("findings", []))
        rows.append(f"| `{name}` | {description} | {findings} | {expected.get('made_by', '')} |")
    (out_dir / "README.md").write_text(README_HEAD + "\n".join(rows) + "\n")


def run_crafted(out_dir: Path) -> None:
    """samples/crafted.py (written separately) makes the scapy-crafted captures."""
    if not (SAMPLES_DIR / "crafted.py").exists():
        print("crafted.py not found: skipping the crafted samples")
        return
    importlib.import_module("crafted").main(out_dir)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="+", metavar="NAME", help="scenarios to make")
    parser.add_argument("--out", type=Path, default=SAMPLES_DIR, help="output folder")
    args = parser.parse_args(argv)
    if os.geteuid() != 0:
        print("make_samples.py needs root: tcpdump captures on lo", file=sys.stderr)
        return 2
    table = scenarios()
    known = {s.name for s in table} | {"crafted"}
    unknown = set(args.only or ()) - known
    if unknown:
        print(f"unknown sample(s): {', '.join(sorted(unknown))}", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    for index, scenario in enumerate(table):
        if args.only is None or scenario.name in args.only:
            make(scenario, FIRST_PORT + index, args.out)
    if args.only is None or "crafted" in args.only:
        run_crafted(args.out)
    write_readme(args.out)
    print(f"done in {time.monotonic() - started:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
