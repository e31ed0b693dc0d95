"""The crafted samples are reproducible and say on the wire what their names promise.

Determinism: regenerating them must give the committed bytes (tests rely on frame numbers).
Then tshark, an independent dissector, checks link layer, addresses, timestamps, the SSE IDs
carried by each TCP stream, and that no frame is malformed unless the sample intends it.
Separate incidents: ``scan samples/`` merges a directory into one capture, so each sample has
its own hour, client port and session ID; merged, their connections and findings stay apart.
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
import shutil
import subprocess
from pathlib import Path
from types import ModuleType

import pytest
from support.scripts import load_script

from sse_forensics.engine.registry import load_rules
from sse_forensics.pipeline import scan_paths

SAMPLES_DIR = Path(__file__).resolve().parents[2] / "samples"
TSHARK = shutil.which("tshark")
MERGECAP = shutil.which("mergecap")
needs_tshark = pytest.mark.skipif(TSHARK is None, reason="tshark not installed")


def _load_crafted() -> ModuleType:
    return load_script("samples/crafted.py", "samples_crafted")


crafted = _load_crafted()


def _capture(name: str) -> Path:
    pcap = SAMPLES_DIR / f"{name}.pcap"
    return pcap if pcap.exists() else SAMPLES_DIR / f"{name}.pcapng"


def _ints(*ranges: range) -> list[bytes]:
    return [b"%d" % n for r in ranges for n in r]


# The `id:` values on the wire, all TCP streams in order, as built (not as analyzed).
WIRE_IDS = {
    "crafted-reorder-retransmit": _ints(range(1, 21)),
    "crafted-capture-loss": _ints(range(1, 8), range(10, 21)),
    "crafted-snaplen": _ints(range(1, 21)),  # event 8's id line survives the cut
    "crafted-seq-wraparound": _ints(range(1, 41)),
    "crafted-midstream-pickup": _ints(range(6, 21)),  # event 5's id line predates the capture
    "crafted-vlan-ipv6-live-jump": _ints(range(1, 8), range(13, 21)),
    "crafted-sll2-resume-jump": _ints(range(1, 8), range(13, 21)),
    "crafted-pcapng-ns-nullloop-prefixed": [b"s1:" + n for n in _ints(range(1, 8), range(13, 21))],
    "crafted-hostile-bytes": [
        *_ints(range(1, 5)),
        b"5\x00" + crafted.HOSTILE_MARKUP,
        *_ints(range(7, 9)),
    ],
    "crafted-garbage-chunk": _ints(range(1, 13)),
    "crafted-odd-id-live-jump": [crafted.ODD_ID, *_ints(range(1, 8), range(13, 21))],
    # The client's leg, then the upstream leg: the proxy relays every event it gets.
    "crafted-proxy-two-legs": _ints(range(1, 8), range(13, 21)) * 2,
    "crafted-replay-handoff": _ints(range(1, 8), range(8, 11), range(12, 21)),
    # The first copy of 8-9 (keep-alive comments) is what reassembly keeps; the second
    # connection jumps 7 -> 13.
    "crafted-inconsistent-retransmission": _ints(
        range(1, 8), range(10, 21), range(1, 8), range(13, 21)
    ),
}

# frame.protocols and source address of frame 1.
FIRST_FRAME = {
    "crafted-midstream-pickup": ("eth:ethertype:ip:tcp:data", "10.0.0.2"),
    "crafted-vlan-ipv6-live-jump": ("eth:ethertype:vlan:ethertype:ipv6:tcp", "2001:db8:120::11"),
    "crafted-sll2-resume-jump": ("sll:ethertype:ip:tcp", "10.0.0.11"),
    "crafted-pcapng-ns-nullloop-prefixed": ("null:ip:tcp", "127.0.0.1"),
}

# Frames tshark is meant to call short or malformed; every other frame must be clean.
INTENDED_BAD_FRAMES = {"crafted-snaplen": {"28"}}


def test_sample_set_matches_the_brief() -> None:
    assert [s.name for s in crafted.SAMPLES] == list(WIRE_IDS)


def test_regenerated_samples_are_byte_identical(tmp_path: Path) -> None:
    written = crafted.main(tmp_path)
    assert len(written) == 2 * len(crafted.SAMPLES)
    for path in written:
        committed = SAMPLES_DIR / path.name
        assert committed.exists(), f"{path.name} is not committed in samples/"
        assert path.read_bytes() == committed.read_bytes(), f"{path.name} differs"


def _tshark(capture: Path, *args: str) -> str:
    assert TSHARK is not None
    done = subprocess.run(
        [TSHARK, "-n", "-r", str(capture), "-o", "tcp.reassemble_out_of_order:TRUE", *args],
        capture_output=True,
        check=True,
    )
    return done.stdout.decode("utf-8", "replace")


FRAME_FIELDS = ("frame.time_epoch", "tcp.srcport", "tcp.dstport", "tcp.stream")
# What the other tests read of each frame, in the same tshark run (one run costs ~0.3 CPU s,
# most of it tshark starting): the link layer and addresses, what marks a frame bad, the
# SLL direction and interface, the VLAN, and the absolute sequence number and length.
CHECK_FIELDS = (
    "frame.number",
    "frame.protocols",
    "ip.src",
    "ipv6.src",
    "_ws.malformed",
    "_ws.short",
    "_ws.expert.severity",
    "sll.pkttype",
    "sll.ifindex",
    "vlan.id",
    "tcp.seq_raw",
    "tcp.len",
)
PI_ERROR = 8388608  # expert severity "error" and above: a frame tshark calls bad
# TCP streams followed in that run (by number: which exist is only known from its fields);
# a sample with more fails _read below rather than lose a stream.
FOLLOWED_STREAMS = 4


@functools.cache  # several tests read each committed sample's frames and streams
def _read(capture: Path) -> tuple[list[dict[str, str]], bytes]:
    """One tshark run over ``capture``: :data:`FRAME_FIELDS` and :data:`CHECK_FIELDS` of
    every frame, and both directions of every TCP stream as tshark reassembles them,
    stream after stream."""
    names = FRAME_FIELDS + CHECK_FIELDS
    follow = [a for n in range(FOLLOWED_STREAMS) for a in ("-z", f"follow,tcp,raw,{n}")]
    out = _tshark(capture, "-T", "fields", *(x for f in names for x in ("-e", f)), *follow)
    # The frames' lines, then one block per ``-z follow``, in no set order.
    lines, _, blocks_text = out.partition("\n\n===")
    frames = [dict(zip(names, line.split("\t"), strict=True)) for line in lines.splitlines()]
    streams = sorted({int(f["tcp.stream"]) for f in frames if f["tcp.stream"]})
    assert streams == list(range(len(streams))) and len(streams) <= FOLLOWED_STREAMS
    blocks = re.findall(
        r"^Filter: tcp\.stream eq (\d+)\n(.*?)^=+$", "===" + blocks_text, re.M | re.S
    )
    assert sorted(int(n) for n, _ in blocks) == list(range(FOLLOWED_STREAMS))
    data = b""
    for n, block in sorted(blocks, key=lambda b: int(b[0])):
        hex_lines = re.findall(r"^\s*([0-9a-f]+)\s*$", block, re.MULTILINE)
        assert int(n) in streams or not hex_lines
        data += b"".join(bytes.fromhex(line) for line in hex_lines)
    return frames, data


def _frames(capture: Path) -> list[dict[str, str]]:
    """:data:`FRAME_FIELDS` and :data:`CHECK_FIELDS` of every frame, as tshark reads them."""
    return _read(capture)[0]


def _frame_fields(capture: Path) -> list[list[str]]:
    """:data:`FRAME_FIELDS` of every frame."""
    return [[frame[f] for f in FRAME_FIELDS] for frame in _frames(capture)]


def _followed_bytes(capture: Path) -> bytes:
    """Both directions of every TCP stream as tshark reassembles them, stream after stream."""
    return _read(capture)[1]


@needs_tshark
@pytest.mark.parametrize("name", list(WIRE_IDS))
def test_wire_carries_the_constructed_event_ids(name: str) -> None:
    ids = re.findall(rb"^id: ([^\n]*)$", _followed_bytes(_capture(name)), re.MULTILINE)
    assert ids == WIRE_IDS[name]


@needs_tshark
@pytest.mark.parametrize("name", list(WIRE_IDS))
def test_no_malformed_frames_except_intended(name: str) -> None:
    """The frames tshark's ``_ws.malformed || _ws.short || _ws.expert.severity >= PI_ERROR``
    selects (the fields read with every frame's)."""
    bad = {
        frame["frame.number"]
        for frame in _frames(_capture(name))
        if frame["_ws.malformed"]
        or frame["_ws.short"]
        or any(int(v) >= PI_ERROR for v in frame["_ws.expert.severity"].split(",") if v)
    }
    assert bad == INTENDED_BAD_FRAMES.get(name, set())


@needs_tshark
@pytest.mark.parametrize("name", list(FIRST_FRAME))
def test_link_layer_and_addresses(name: str) -> None:
    first = _frames(_capture(name))[0]
    assert (first["frame.protocols"], first["ip.src"] + first["ipv6.src"]) == FIRST_FRAME[name]


@needs_tshark
def test_sll2_marks_direction_and_vlan_is_120() -> None:
    sll = _frames(_capture("crafted-sll2-resume-jump"))[:2]
    # To us (client), sent by us (server), on interface 2.
    assert [(f["sll.pkttype"], f["sll.ifindex"]) for f in sll] == [("0", "2"), ("4", "2")]
    vlan = {f["vlan.id"] for f in _frames(_capture("crafted-vlan-ipv6-live-jump"))}
    assert vlan == {"120"}


@needs_tshark
def test_pcapng_keeps_nanoseconds() -> None:
    frame = _frames(_capture("crafted-pcapng-ns-nullloop-prefixed"))[7]
    assert frame["frame.number"] == "8"
    assert frame["frame.time_epoch"] == "1767250800.004140123"  # 2026-01-01T07:00:00Z: the 8th


@needs_tshark
def test_server_sequence_numbers_wrap() -> None:
    segments = [
        (int(f["tcp.seq_raw"]), int(f["tcp.len"]))
        for f in _frames(_capture("crafted-seq-wraparound"))
        if f["tcp.srcport"] == "8000" and int(f["tcp.len"] or 0) > 0
    ]
    assert segments[0][0] == crafted.WRAP_ISN + 1
    assert any(seq + length > 1 << 32 for seq, length in segments), "one segment crosses 2**32"


# --- separate incidents ---------------------------------------------------------------------

BASE_EPOCH_S = 1_767_225_600  # 2026-01-01T00:00:00Z
HOUR_S = 3_600
# TCP connections per sample; the SLL2 sample's resume is a second connection.
CONNECTIONS = {name: 1 for name in WIRE_IDS} | {
    "crafted-sll2-resume-jump": 2,
    "crafted-proxy-two-legs": 2,  # client → proxy:8080, proxy → server:8000
    "crafted-replay-handoff": 2,
    "crafted-inconsistent-retransmission": 2,
}
SERVER_PORTS = {8000, 8080}
# Live jumps right after a replay that began at the successor: a handoff race, not eviction.
REPLAY_HANDOFF = {
    "crafted-replay-handoff"
}  # the server's, and the proxy's in crafted-proxy-two-legs
# The midstream pickup starts after the request and response heads: no session ID is captured.
SESSION_VISIBLE = set(WIRE_IDS) - {"crafted-midstream-pickup"}


def _expected_session(name: str) -> bytes:
    if name == "crafted-hostile-bytes":
        return crafted.HOSTILE_SESSION
    return hashlib.sha256(name.encode()).hexdigest()[:32].encode()


@needs_tshark
@pytest.mark.parametrize(("index", "name"), list(enumerate(WIRE_IDS)))
def test_each_sample_is_its_own_incident(index: int, name: str) -> None:
    capture = _capture(name)
    rows = [row[:3] for row in _frame_fields(capture)]
    times = [float(t) for t, _, _ in rows]
    slot = BASE_EPOCH_S + index * HOUR_S
    assert slot <= min(times) and max(times) < slot + 60, "within the first minute of its hour"
    client_ports = {int(p) for _, src, dst in rows for p in (src, dst)} - SERVER_PORTS
    assert client_ports == {50_000 + index * 10 + k for k in range(CONNECTIONS[name])}
    heads = _followed_bytes(capture)
    sessions = set(re.findall(rb"(?im)^mcp-session-id: ([^\r\n]*)\r$", heads))
    assert sessions == ({_expected_session(name)} if name in SESSION_VISIBLE else set())


def test_incidents_share_no_session_or_port() -> None:
    incidents = [crafted.Incident.of(i, s.name) for i, s in enumerate(crafted.SAMPLES)]
    assert len({i.session for i in incidents}) == len(incidents)
    assert len({i.start_ns for i in incidents}) == len(incidents)
    ports = [i.client_port + k for i in incidents for k in range(crafted.PORTS_PER_SAMPLE)]
    assert len(set(ports)) == len(ports)


@needs_tshark
@pytest.mark.skipif(MERGECAP is None, reason="mergecap not installed")
def test_merged_samples_keep_every_connection_apart(tmp_path: Path) -> None:
    merged = tmp_path / "merged.pcapng"
    captures = [str(_capture(name)) for name in WIRE_IDS]
    subprocess.run([MERGECAP, "-w", str(merged), *captures], check=True)  # time order
    streams = set(_tshark(merged, "-T", "fields", "-e", "tcp.stream").split())
    assert len(streams) == sum(CONNECTIONS.values())


def _findings(doc_findings: list[dict]) -> list[tuple]:
    return sorted(
        (f["rule"], f["classification"], f["gap"]["first"], f["gap"]["last"]) for f in doc_findings
    )


def test_merged_scan_reports_the_union_of_expected_findings() -> None:
    """Merged, the crafted samples report exactly what each reports alone: nothing collides."""
    captures = [_capture(name) for name in WIRE_IDS]
    expected = []
    for capture in captures:
        doc = json.loads((SAMPLES_DIR / f"{capture.stem}.expected.json").read_text())
        expected += doc["findings"]
    result = scan_paths([str(c) for c in captures])
    got = [(f.rule, f.classification, f.gap["first"], f.gap["last"]) for f in result.findings]
    assert sorted(got) == _findings(expected)


# --- ground truth under the full rule set (issue 4), every sample --------------------------

# Rules that judge server logs against a capture or need them alone: their positive samples
# are the log samples (test_log_samples.py, and the test below), not a capture.
LOG_ONLY_RULES = {"sources-disagree", "gap-reissue-unknown"}
# Every packaged rule: a new rule without a positive sample fails the test below.
ALL_RULES = {rule.id for rule in load_rules().rules} - LOG_ONLY_RULES
CLASSIFICATIONS = {"expected_gap", "contract_violation", "silent_corruption", "indeterminate"}
CLEAN = [
    "clean-live-int",
    "clean-resume-int",
    "shared-counter-two-streams",
    "mcp-sdk-clean",
    "mcp-sdk-resume",
    "crafted-reorder-retransmit",
    "crafted-seq-wraparound",
    "crafted-midstream-pickup",
]


def _expected_docs() -> dict[str, dict]:
    return {
        p.name.removesuffix(".expected.json"): json.loads(p.read_text())
        for p in sorted(SAMPLES_DIR.glob("*.expected.json"))
    }


def _spans(findings: list[dict], *rules: str) -> list[tuple]:
    return sorted(
        (f["classification"], f["gap"]["first"], f["gap"]["last"])
        for f in findings
        if f["rule"] in rules
    )


# The positive sample of each rule of issue 4 (named after it where it is new).
POSITIVE = {rule: rule for rule in ALL_RULES} | {
    "missing-stream-gap": "live-jump-unsignalled",
    "stream-gap-signalled": "live-gap-signalled",
    "resume-gap-signalled": "resume-gap-signalled",
    "resume-refused-410": "resume-410",
    "no-reissue-after-410": "resume-410",
    "id-scheme-outlier": "crafted-odd-id-live-jump",
    "silent-resume-jump": "resume-jump-unsignalled",
    "resume-in-gap-2xx": "resume-jump-unsignalled",
    "empty-replay-2xx": "empty-replay-2xx-ends",
    "resumable-while-evicting": "live-jump-unsignalled",
    "client-accepted-gap": "live-jump-unsignalled",
}


def test_log_only_rules_fire_on_the_log_samples() -> None:
    """The rules no capture alone can fire have their positive samples among the logs."""
    logs = SAMPLES_DIR / "logs"
    assert {rule.id for rule in load_rules().rules} >= LOG_ONLY_RULES
    fired = {f.rule for f in scan_paths([str(logs / "gap-client-reissued")]).findings}
    assert "gap-reissue-unknown" in fired
    # sources-disagree: an edited event log joined with its capture
    # (test_log_samples.py::test_an_added_written_record_is_a_disagreement and its siblings).


def test_every_rule_has_a_positive_sample_and_clean_ones_stay_clean() -> None:
    docs = _expected_docs()
    assert {f["rule"] for doc in docs.values() for f in doc["findings"]} == ALL_RULES
    for rule, sample in POSITIVE.items():
        assert rule in {f["rule"] for f in docs[sample]["findings"]}, (rule, sample)
    assert "empty-replay-2xx" in {f["rule"] for f in docs["empty-replay-2xx-keepalive"]["findings"]}
    for name in CLEAN:
        assert docs[name]["findings"] == [], name


@pytest.mark.parametrize("name", sorted(_expected_docs()))
def test_expected_findings_follow_the_conventions(name: str) -> None:
    """Rules that follow from others (README.md, "What `gap` holds") say the same gap."""
    findings = _expected_docs()[name]["findings"]
    for f in findings:
        assert f["rule"] in ALL_RULES and f["classification"] in CLASSIFICATIONS
        if f["classification"] == "contract_violation":  # lost nothing: names no gap
            assert f["gap"] == {"first": None, "last": None}
            continue
        assert isinstance(f["gap"]["first"], str)
        assert f["gap"]["last"] is None or isinstance(f["gap"]["last"], str)
    # In every sample the client reads on after an unsignalled gap and never re-issues.
    unsignalled = ("missing-stream-gap", "gap-signal-late", "silent-resume-jump")
    assert _spans(findings, "client-accepted-gap") == _spans(findings, *unsignalled)
    # One resumable-while-evicting per session with a silent live gap; capture loss is none,
    # and neither is a jump between a whole replay and the live tail (nothing was evicted).
    live = _spans(findings, "missing-stream-gap", "gap-signal-late")
    silent_live = [s for s in live if s[0] == "silent_corruption"]
    evicting = [] if name in REPLAY_HANDOFF else silent_live[:1]
    assert _spans(findings, "resumable-while-evicting") == evicting
    # No client in the samples re-issues after a 410.
    refused = _spans(findings, "resume-refused-410")
    assert _spans(findings, "no-reissue-after-410") == [
        ("silent_corruption", first, last) for _, first, last in refused
    ]
