"""Regenerate the sample captures: ``python samples/make_samples.py [--only NAME...] [--out DIR]``.

Each loopback scenario runs a real server (samples/profile_server.py, or the official MCP
Python SDK) and a real client on 127.0.0.1 while tcpdump records ``lo``, then writes
``<name>.pcap`` and ``<name>.expected.json`` (findings by construction, see
/work/notes/samples.md). For the scenarios of :data:`LOG_SAMPLES` the PROFILE server also
writes its own logs during that same run, kept in ``logs/<name>/`` (``access.log``, nginx
``mcp`` format, and ``events.jsonl``, the server event log of docs/logs.md). The
scapy-crafted samples come from samples/crafted.py when it exists. README.md's table is
rebuilt from every ``*.expected.json`` in the output folder. Needs root (tcpdump on ``lo``).
"""

from __future__ import annotations

import argparse
import gzip
import importlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TypeVar

SAMPLES_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(SAMPLES_DIR))  # samples/ is not a package: import the siblings

import dpkt  # noqa: E402
from profile_client import ClientPlan, SlowConsumer, run_plan  # noqa: E402
from profile_server import (  # noqa: E402
    LogStyle,
    ProfileServer,
    ServerKnobs,
    ServerLog,
    expected_event_id,
    gzip_file,
    rotate,
    running_server,
)

LOOPBACK = "loopback (uvicorn+httpx, tcpdump)"
LOOPBACK_SDK = "loopback (official MCP Python SDK)"
FIRST_PORT = 38101  # scenario i listens on FIRST_PORT + i: captures never mix
EVICTED = (8, 12)


@dataclass(frozen=True)
class Scenario:
    """One capture: what runs, what the wire must show, and the ground-truth findings."""

    name: str
    description: str
    # (port, log folder or None) -> anything (the traffic happens inside)
    run: Callable[..., object]
    findings: list[dict] = field(default_factory=list)
    wire_ids: list[str] | None = None  # every SSE `id:` the server must put on the wire
    made_by: str = LOOPBACK
    # The HTTP exchanges in request order, as `summarize` writes them (None: not checked).
    exchanges: list[str] | None = None
    verify: Callable[[list[Exchange]], list[str]] | None = None  # more wire checks
    verify_tcp: Callable[[Path, int], list[str]] | None = None  # checks on the TCP segments


def finding(rule: str, classification: str, first: str | None, last: str | None) -> dict:
    return {"rule": rule, "classification": classification, "gap": {"first": first, "last": last}}


def ints(first: int, last: int) -> list[str]:
    return [str(n) for n in range(first, last + 1)]


def prefixed(stream: int, first: int, last: int) -> list[str]:
    return [f"s{stream}_{n}" for n in range(first, last + 1)]


def profile(knobs: ServerKnobs, plan: ClientPlan) -> Callable[..., object]:
    def run(port: int, log_dir: Path | None = None) -> object:
        """Serve and drive the scenario; with ``log_dir`` the server writes its logs there."""
        buffers = (knobs.send_buffer, knobs.write_high_water)
        style = LOG_STYLES.get(knobs.session_prefix)
        log = ServerLog(log_dir, style) if log_dir is not None else None
        try:
            with running_server(ProfileServer(knobs, log).app(), port, *buffers) as url:
                return run_plan(url, plan)
        finally:  # the server has stopped: every response ended, every line is written
            if log is not None:
                log.close()

    return run


def sdk(resume: bool, seed: str) -> Callable[..., object]:
    def run(port: int, log_dir: Path | None = None) -> object:
        import mcp_sdk_capture  # imported late: the SDK is only needed for these two

        return mcp_sdk_capture.run(port, resume=resume, seed=seed, log_dir=log_dir)

    return run


# The exchanges every PROFILE session starts and ends with.
OPEN = ["POST initialize -> 200", "POST notifications/initialized -> 202"]
CLOSE = ["DELETE -> 200"]


def session(*exchanges: str) -> list[str]:
    return [*OPEN, *exchanges, *CLOSE]


def call(request_id: int, data_events: int) -> str:
    return f"POST tools/call id={request_id} -> 200 sse data={data_events}"


def resume(last_event_id: str, status: int, data_events: int | None) -> str:
    answer = f"{status}" if data_events is None else f"{status} sse data={data_events}"
    return f"GET last-event-id={last_event_id} -> {answer}"


def scenarios() -> list[Scenario]:
    def knobs(name: str, **kw: object) -> ServerKnobs:
        return ServerKnobs(session_prefix=name, seed=name, **kw)  # type: ignore[arg-type]

    drop7 = ClientPlan(disconnect_after=7, resume=True)
    opaque = knobs(
        "opaque-resume-jump", id_scheme="opaque", live_stop_after=10, replay_evicted=(8, 10)
    )
    opaque_ids = [expected_event_id(opaque, 1, n) for n in range(0, 21)]
    silent_8_12 = [
        finding("silent-resume-jump", "silent_corruption", "8", "12"),
        finding("resume-in-gap-2xx", "silent_corruption", "8", "12"),
        finding("client-accepted-gap", "silent_corruption", "8", "12"),
    ]
    # A live jump over 8-12 nothing signalled, on a stream without Cache-Control: no-store,
    # that the client read on to the end.
    evicted_8_12 = [
        finding("resumable-while-evicting", "silent_corruption", "8", "12"),
        finding("client-accepted-gap", "silent_corruption", "8", "12"),
    ]
    dropped_at_7 = [call(2, 7), resume("7", 200, 13)]  # a clean drop-and-resume
    return [
        Scenario(
            "clean-live-int",
            "tools/call answered with a priming event, 19 progress notifications and the "
            "result (int IDs 0-20), `: ping` keep-alive comments every 5 events.",
            profile(knobs("clean-live-int", keepalive_every=5), ClientPlan()),
            wire_ids=ints(0, 20),
            exchanges=session(call(2, 20)),
        ),
        Scenario(
            "clean-resume-int",
            "The client drops the tools/call stream after event 7 and resumes with "
            "Last-Event-ID 7; the server replays 8-20.",
            profile(knobs("clean-resume-int", live_stop_after=7), drop7),
            wire_ids=ints(0, 20),
            exchanges=session(*dropped_at_7),
        ),
        Scenario(
            "live-jump-unsignalled",
            "The server evicts events 8-12 (IDs assigned, never written) and keeps counting; "
            "no stream-gap event; its streams carry no Cache-Control: no-store and the client "
            "reads on to the result.",
            profile(knobs("live-jump-unsignalled", live_evicted=EVICTED), ClientPlan()),
            [finding("missing-stream-gap", "silent_corruption", "8", "12"), *evicted_8_12],
            wire_ids=ints(0, 7) + ints(13, 20),
            exchanges=session(call(2, 15)),
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
            exchanges=session(call(2, 15)),
            verify=stream_gap_between("7", "13"),
        ),
        Scenario(
            "resume-jump-unsignalled",
            "The client drops the stream after event 7; the server's replay buffer lost "
            "8-12; the resume (Last-Event-ID 7) is answered 200 replaying 13-20, which the "
            "client reads to the result.",
            profile(
                knobs("resume-jump-unsignalled", live_stop_after=7, replay_evicted=EVICTED),
                drop7,
            ),
            silent_8_12,
            wire_ids=ints(0, 7) + ints(13, 20),
            exchanges=session(call(2, 7), resume("7", 200, 8)),
        ),
        Scenario(
            "resume-410",
            "The client drops the stream after event 7; the resume (Last-Event-ID 7) is "
            "answered 410 Gone; the client never re-issues the tools/call and ends the session.",
            profile(knobs("resume-410", live_stop_after=7, resume_status=410), drop7),
            [
                finding("resume-refused-410", "expected_gap", "8", None),
                finding("no-reissue-after-410", "silent_corruption", "8", None),
            ],
            wire_ids=ints(0, 7),
            exchanges=session(call(2, 7), resume("7", 410, None)),
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
            exchanges=session(call(2, 7), resume("7", 200, 8)),
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
            "no stream-gap event, no Cache-Control: no-store; the client reads on.",
            profile(
                knobs("prefixed-live-jump", id_scheme="prefixed", live_evicted=EVICTED),
                ClientPlan(),
            ),
            [
                finding(rule, "silent_corruption", "s1_8", "s1_12")
                for rule in (
                    "missing-stream-gap",
                    "resumable-while-evicting",
                    "client-accepted-gap",
                )
            ],
            wire_ids=prefixed(1, 0, 7) + prefixed(1, 13, 20),
            exchanges=session(call(2, 15)),
        ),
        Scenario(
            "opaque-resume-jump",
            "UUID IDs. The server writes events 1-10, the client stops reading after event 7 "
            "and hangs up (8-10 are on the wire); it resumes with the ID of event 7 and the "
            "replay starts at event 11; the client reads it to the result.",
            profile(opaque, ClientPlan(disconnect_after=7, linger=0.3, resume=True)),
            [
                finding(rule, "silent_corruption", opaque_ids[8], opaque_ids[10])
                for rule in ("silent-resume-jump", "resume-in-gap-2xx", "client-accepted-gap")
            ],
            wire_ids=opaque_ids,
            exchanges=session(call(2, 10), resume(opaque_ids[7], 200, 10)),
        ),
        Scenario(
            "backpressure-disconnect-resume",
            "After event 7 the server sends event: backpressure-disconnect "
            '{"last_written_id": 7} and closes; 8-12 were discarded; the client resumes '
            "with Last-Event-ID 7 and the replay starts at 13, with no resume-gap and no 410. "
            "A backpressure-disconnect signals no gap (it promises that a resume from W "
            "continues at W's successor): the jump is silent.",
            profile(
                knobs(
                    "backpressure-disconnect-resume", backpressure_after=7, replay_evicted=EVICTED
                ),
                ClientPlan(resume=True),
            ),
            [
                finding(rule, "silent_corruption", "8", "12")
                for rule in ("silent-resume-jump", "resume-in-gap-2xx", "client-accepted-gap")
            ],
            wire_ids=ints(0, 7) + ints(13, 20),
            exchanges=session(call(2, 7), resume("7", 200, 8)),
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
        *new_rule_scenarios(knobs, drop7),
        *backpressure_scenarios(knobs),
    ]


def new_rule_scenarios(knobs: Callable[..., ServerKnobs], drop7: ClientPlan) -> list[Scenario]:
    """One positive sample per rule of issue 4 (/work/notes/rules4.md)."""
    after_7 = "8"  # the successor of Last-Event-ID 7: where resume-level findings start
    return [
        Scenario(
            "gap-signal-late",
            "The server evicts 8-12 and announces them with event: stream-gap "
            '{"first": 8, "last": 12}, but only after data event 13; no Cache-Control: '
            "no-store; the client reads on to the result.",
            profile(
                knobs(
                    "gap-signal-late",
                    live_evicted=EVICTED,
                    signal_stream_gap=True,
                    stream_gap_late=True,
                ),
                ClientPlan(),
            ),
            [
                finding("gap-signal-late", "silent_corruption", "8", "12"),
                finding("resumable-while-evicting", "silent_corruption", "8", "12"),
                finding("client-accepted-gap", "silent_corruption", "8", "12"),
            ],
            wire_ids=ints(0, 7) + ints(13, 20),
            exchanges=session(call(2, 15)),
            verify=stream_gap_between("13", "14"),
        ),
        Scenario(
            "gap-client-reissued",
            "Streams carry Cache-Control: no-store. The first tools/call (id 2) jumps from 7 "
            "to 13 unsignalled (8-12 evicted); the client hangs up, sends "
            "notifications/cancelled and re-issues tools/call with the same params as id 3, "
            "which completes cleanly (0-20).",
            profile(
                knobs(
                    "gap-client-reissued",
                    live_evicted=EVICTED,
                    live_stop_after=13,
                    no_store=True,
                    faulty_streams=(1,),
                ),
                ClientPlan(reissue_on_jump=True),
            ),
            [finding("gap-client-reissued", "expected_gap", "8", "12")],
            wire_ids=[*ints(0, 7), "13", *ints(0, 20)],
            exchanges=session(call(2, 8), "POST notifications/cancelled -> 202", call(3, 20)),
            verify=all_of(streams_carry("cache-control", "no-store"), reissued_same_params),
        ),
        Scenario(
            "empty-replay-2xx-ends",
            "The client drops the tools/call stream after event 7 (the result never came); "
            "its resume (Last-Event-ID 7) is answered 200 text/event-stream that ends at once "
            "with no event; the client gives up and ends the session.",
            profile(knobs("empty-replay-2xx-ends", live_stop_after=7, empty_replay="ends"), drop7),
            [finding("empty-replay-2xx", "silent_corruption", after_7, None)],
            wire_ids=ints(0, 7),
            exchanges=session(call(2, 7), resume("7", 200, 0)),
            verify=resume_bodies(lambda body: body == b"", "empty"),
        ),
        Scenario(
            "empty-replay-2xx-keepalive",
            "As empty-replay-2xx-ends, but the 200 answer to the resume sends only `: ping` "
            "comments (every 0.5 s); the client gives up after the fourth (about 2 s).",
            profile(
                knobs("empty-replay-2xx-keepalive", live_stop_after=7, empty_replay="keepalive"),
                ClientPlan(disconnect_after=7, resume=True, give_up_after_comments=4),
            ),
            [finding("empty-replay-2xx", "silent_corruption", after_7, None)],
            wire_ids=ints(0, 7),
            exchanges=session(call(2, 7), resume("7", 200, 0)),
            verify=resume_bodies(
                lambda body: (
                    body.count(b": ping\n\n") >= 4 and not body.replace(b": ping\n\n", b"")
                ),
                "only >= 4 `: ping` comments",
            ),
        ),
        Scenario(
            "replay-from-oldest",
            "The replay buffer has aged out events 1-2; the client drops the stream after "
            "event 7 and resumes with Last-Event-ID 7; the server replays its whole buffer, "
            "3-20, instead of 8-20.",
            profile(
                knobs(
                    "replay-from-oldest",
                    live_stop_after=7,
                    replay_evicted=(1, 2),
                    replay_from_oldest=True,
                ),
                drop7,
            ),
            [finding("replay-from-oldest", "silent_corruption", after_7, None)],
            wire_ids=ints(0, 7) + ints(3, 20),
            exchanges=session(call(2, 7), resume("7", 200, 18)),
        ),
        Scenario(
            "replay-duplicate",
            "Off by one: the client drops the stream after event 7 and resumes with "
            "Last-Event-ID 7; the replay starts at 7 itself (7, 8, ..., 20).",
            profile(knobs("replay-duplicate", live_stop_after=7, replay_inclusive=True), drop7),
            [finding("replay-duplicate", "silent_corruption", after_7, None)],
            wire_ids=ints(0, 7) + ints(7, 20),
            exchanges=session(call(2, 7), resume("7", 200, 14)),
        ),
        Scenario(
            "non-monotonic-id",
            "A live stream that sends event 6 a second time (same ID and data) after event 8: "
            "IDs 0, ..., 7, 8, 6, 9, ..., 20; nothing is missing.",
            profile(knobs("non-monotonic-id", resend=(8, 6)), ClientPlan()),
            [finding("non-monotonic-id", "silent_corruption", "6", "6")],
            wire_ids=[*ints(0, 8), "6", *ints(9, 20)],
            exchanges=session(call(2, 21)),
            verify=same_event_twice("6"),
        ),
        Scenario(
            "replay-crossed-streams",
            "One session, prefixed per-stream IDs. tools/call A (id 2) is dropped after s1_7; "
            "tools/call B (id 3, 30 steps) runs to its result s2_31; the resume of A "
            "(Last-Event-ID s1_7) replays s1_8-s1_20 and then B's event s2_25 (same ID and data).",
            profile(
                knobs(
                    "replay-crossed-streams",
                    id_scheme="prefixed",
                    live_stop_after=7,
                    faulty_streams=(1,),
                    replay_foreign="s2_25",
                ),
                ClientPlan(disconnect_after=7, resume=True, second_call_steps=30),
            ),
            [finding("replay-crossed-streams", "silent_corruption", "s1_8", None)],
            wire_ids=prefixed(1, 0, 20) + prefixed(2, 0, 31) + ["s2_25"],
            exchanges=session(call(2, 7), call(3, 31), resume("s1_7", 200, 14)),
            verify=same_event_twice("s2_25"),
        ),
        Scenario(
            "replay-crossed-sessions",
            "Two sessions, prefixed IDs unique server-wide. Session 1 reads a whole tools/call "
            "(30 steps, s1_0-s1_31, the result being s1_31); session 2's tools/call is dropped "
            "after s2_7 and its resume (Last-Event-ID s2_7) replays s2_8-s2_20 and then "
            "session 1's JSON-RPC result s1_31 (same ID and data).",
            profile(
                knobs(
                    "replay-crossed-sessions",
                    id_scheme="prefixed",
                    live_stop_after=7,
                    faulty_streams=(2,),
                    replay_foreign="s1_31",
                ),
                ClientPlan(disconnect_after=7, resume=True, prior_session_steps=30),
            ),
            [finding("replay-crossed-sessions", "silent_corruption", "s2_8", None)],
            wire_ids=prefixed(1, 0, 31) + prefixed(2, 0, 20) + ["s1_31"],
            # Session 2 opens after session 1's call and ends first.
            exchanges=[*OPEN, call(2, 31), *session(call(2, 7), resume("s2_7", 200, 14)), *CLOSE],
            verify=all_of(same_event_twice("s1_31"), sessions_are(2)),
        ),
        Scenario(
            "backpressure-disconnect-resume-mismatch",
            "The server writes events 1-6, queues 7, then drops its queue and sends "
            'event: backpressure-disconnect {"last_written_id": 7}: 7 never reached the '
            "socket, and its replay buffer lost 7-9. The client resumes with the last ID it "
            "received, 6 (not W = 7), and the replay starts at 10, the successor of neither; "
            "the client reads it to the result.",
            profile(
                knobs(
                    "backpressure-disconnect-resume-mismatch",
                    backpressure_after=7,
                    backpressure_unflushed=True,
                    replay_evicted=(7, 9),
                ),
                ClientPlan(resume=True),
            ),
            [
                finding(rule, "silent_corruption", "7", "9")
                for rule in (
                    "backpressure-disconnect-resume-mismatch",
                    "silent-resume-jump",
                    "resume-in-gap-2xx",
                    "client-accepted-gap",
                )
            ],
            wire_ids=ints(0, 6) + ints(10, 20),
            exchanges=session(call(2, 6), resume("6", 200, 11)),
        ),
        Scenario(
            "resume-in-stateless-era",
            'initialize negotiates protocolVersion "2026-07-28" (no resumption in that '
            "revision); the client still drops the stream after event 7 and resumes with "
            "Last-Event-ID 7, and the server answers 200 text/event-stream replaying 8-20.",
            profile(
                knobs("resume-in-stateless-era", live_stop_after=7),
                ClientPlan(disconnect_after=7, resume=True, protocol_version="2026-07-28"),
            ),
            # A contract violation, not a loss: the replay continues at 8, no gap is named.
            [finding("resume-in-stateless-era", "contract_violation", None, None)],
            wire_ids=ints(0, 20),
            exchanges=session(call(2, 7), resume("7", 200, 13)),
            verify=negotiated("2026-07-28"),
        ),
        Scenario(
            "client-adjusted-resume",
            "The client drops the stream after event 7 (8 and 9 never reach the wire) but "
            "resumes with Last-Event-ID 9; the server honours it and replays 10-20.",
            profile(
                knobs("client-adjusted-resume", live_stop_after=7),
                ClientPlan(disconnect_after=7, resume=True, resume_from="9"),
            ),
            [finding("client-adjusted-resume", "silent_corruption", "8", "9")],
            wire_ids=ints(0, 7) + ints(10, 20),
            exchanges=session(call(2, 7), resume("9", 200, 11)),
        ),
        Scenario(
            "resume-storm",
            "The client drops the stream after event 7 and resumes with Last-Event-ID 7 four "
            "times; each resume is answered 200 text/event-stream that ends with no event.",
            profile(
                knobs("resume-storm", live_stop_after=7, empty_replay="ends"),
                ClientPlan(disconnect_after=7, resume=True, resume_attempts=4),
            ),
            [
                finding("resume-storm", "silent_corruption", after_7, None),
                *[finding("empty-replay-2xx", "silent_corruption", after_7, None)] * 4,
            ],
            wire_ids=ints(0, 7),
            exchanges=session(call(2, 7), *[resume("7", 200, 0)] * 4),
            verify=resume_bodies(lambda body: body == b"", "empty"),
        ),
        Scenario(
            "resume-lost-cursor",
            "The client drops the stream after event 7; its resume (Last-Event-ID 7) is "
            "answered 500; the client then opens GET /mcp without Last-Event-ID and gets a new "
            "notification stream (0-2): the tools/call result never arrives.",
            profile(
                knobs(
                    "resume-lost-cursor", live_stop_after=7, resume_status=500, standalone_events=2
                ),
                ClientPlan(disconnect_after=7, resume=True, reopen_without_cursor=True),
            ),
            [finding("resume-lost-cursor", "silent_corruption", after_7, None)],
            wire_ids=ints(0, 7) + ints(0, 2),
            exchanges=session(call(2, 7), resume("7", 500, None), "GET -> 200 sse data=2"),
        ),
    ]


def backpressure_scenarios(knobs: Callable[..., ServerKnobs]) -> list[Scenario]:
    """Real slow-consumer backpressure over loopback: a zero window, then eviction."""
    # 3 KB events; the burst (8-17, ~30 KB in one send) overfills the client's window, the
    # server's send buffer (SO_SNDBUF 4096: 8 KB) and a 4 KB transport high-water mark, so
    # the send of 18 waits; 19-33 are produced while it does: 19-23 are evicted by 24-33.
    evicting = knobs(
        "backpressure-eviction",
        events_per_call=40,
        payload_bytes=3000,
        send_queue=10,
        burst=(8, 17),
        blocked_burst=(19, 33),
        send_buffer=4096,
        write_high_water=4096,
    )
    slow = SlowConsumer(receive_buffer=4096, pause_after=7, pause_seconds=2.0)
    return [
        Scenario(
            "backpressure-eviction",
            "A slow consumer (4 KB SO_RCVBUF, reads 2 KB every 5 ms) stops reading after "
            "event 7 for 2 s: its window closes and the server's writer blocks in send. The "
            "server's bounded send queue (10 events of 3 KB) overflows and it evicts the "
            "oldest queued events, 19-23, keeps counting and sends no stream-gap; the client "
            "reads on to the result (40).",
            profile(evicting, ClientPlan(slow_consumer=slow)),
            [
                finding(rule, "silent_corruption", "19", "23")
                for rule in (
                    "missing-stream-gap",
                    "resumable-while-evicting",
                    "client-accepted-gap",
                )
            ],
            wire_ids=ints(0, 18) + ints(24, 40),
            exchanges=session(call(2, 35)),
            verify_tcp=client_window_closed,
        ),
    ]


# --- logs ------------------------------------------------------------------------------
# Scenarios whose run also leaves the server's logs in logs/<name>/, and how they are kept:
# "plain"; "rotated" (logrotate moved the first half of access.log to access.log.1.gz);
# "gzip" (events.jsonl.gz).
LOG_SAMPLES = {
    "clean-live-int": "plain",
    "clean-resume-int": "plain",
    "live-jump-unsignalled": "plain",
    "live-gap-signalled": "plain",
    "resume-jump-unsignalled": "plain",
    "resume-410": "plain",
    "resume-gap-signalled": "plain",
    "opaque-resume-jump": "plain",
    "backpressure-eviction": "gzip",
    "resume-storm": "rotated",
    "shared-counter-two-streams": "plain",
    "prefixed-live-jump": "plain",
    "backpressure-disconnect-resume": "plain",
    "gap-signal-late": "plain",
    "gap-client-reissued": "plain",
    "empty-replay-2xx-ends": "plain",
    "empty-replay-2xx-keepalive": "plain",
    "replay-from-oldest": "plain",
    "replay-duplicate": "plain",
    "non-monotonic-id": "plain",
    "replay-crossed-streams": "plain",
    "replay-crossed-sessions": "plain",
    "backpressure-disconnect-resume-mismatch": "plain",
    "resume-in-stateless-era": "plain",
    "client-adjusted-resume": "plain",
    "resume-lost-cursor": "plain",
    "mcp-sdk-clean": "plain",
    "mcp-sdk-resume": "plain",
}
# How each sample's server writes its logs (profile_server.LogStyle; default: access log in
# the `mcp` format, each signal as a control record naming its request and stream). The
# others are the shapes real servers write: the session only in the response header
# column, a signal logged as the event written or as both records, decisions logged with
# no request or stream, the negotiated version, keep-alives and refusals as records.
RECORDS_ALL = LogStyle(initialize=True, keepalives=True, refusals=True)
LOG_STYLES = {
    "live-gap-signalled": replace(RECORDS_ALL, signals="both", bare_decisions=True),
    "gap-signal-late": replace(RECORDS_ALL, signals="written"),
    "resume-gap-signalled": replace(RECORDS_ALL, access_format="combined-mcp", signals="written"),
    "backpressure-disconnect-resume": replace(RECORDS_ALL, signals="both"),
    "backpressure-disconnect-resume-mismatch": replace(RECORDS_ALL, bare_decisions=True),
    "resume-410": replace(RECORDS_ALL, access_format="combined-mcp", bare_decisions=True),
    "empty-replay-2xx-keepalive": replace(RECORDS_ALL, access_format="combined-mcp"),
    "resume-in-stateless-era": RECORDS_ALL,
}
ACCESS_LINE = re.compile(
    r'^\S+ - \S+ \[[^]]+\] "(\S+) [^"]*" (\d{3}) \d+ "[^"]*" "[^"]*" "([^"]*)"'
)
SIGNALS = ("stream-gap", "resume-gap", "backpressure-disconnect")


def check_logs(log_dir: Path, pcap: Path, port: int) -> list[str]:
    """Problems with the logs of a run, against its capture: the event log's ``written`` IDs
    must be the SSE IDs on the wire, its signal records (decisions, written events or both)
    the signals on the wire, and the access log's (method, Last-Event-ID, status) the HTTP
    exchanges of the capture."""
    records = [json.loads(line) for line in (log_dir / "events.jsonl").read_text().splitlines()]
    written = Counter(
        r["event_id"] for r in records if r["kind"] == "written" and r["event_id"] is not None
    )
    problems = []
    if written != Counter(wire_event_ids(pcap, port)):
        problems.append(f"written {sorted(written)} != wire IDs")
    exchanges = http_exchanges(pcap, port)
    signals = Counter(
        event
        for stream in event_streams(exchanges)
        for _, event, _ in sse_events(stream.body)
        if event in SIGNALS
    )
    for kind in ("control", "written"):
        logged = Counter(
            r["event"]["type"]
            for r in records
            if r["kind"] == kind
            and isinstance(r.get("event"), dict)
            and r["event"].get("type") in SIGNALS
        )
        if logged and logged != signals:
            problems.append(f"{kind} records {dict(logged)} != signals on the wire {dict(signals)}")
    recorded = any(
        isinstance(r.get("event"), dict) and r["event"].get("type") in SIGNALS for r in records
    )
    if signals and not recorded:
        problems.append(f"no record of the signals on the wire {dict(signals)}")
    logged = Counter()
    for line in (log_dir / "access.log").read_text().splitlines():
        match = ACCESS_LINE.match(line)
        if match is None:
            return [*problems, f"access.log line not in the mcp format: {line!r}"]
        method, status, last_event_id = match.groups()
        logged[(method, None if last_event_id == "-" else last_event_id, int(status))] += 1
    on_wire = Counter(
        (
            e.request.start_line.split()[0],
            e.request.headers.get("last-event-id"),
            int(e.response.start_line.split()[1]) if e.response else 499,
        )
        for e in exchanges
    )
    if logged != on_wire:
        problems.append(f"access lines {dict(logged)} != exchanges {dict(on_wire)}")
    return problems


def package_logs(log_dir: Path, how: str) -> None:
    """Keep the logs as :data:`LOG_SAMPLES` says: rotate the access log or gzip the event log."""
    if how == "rotated":
        access = log_dir / "access.log"
        rotate(access, len(access.read_text().splitlines()) // 2)
    elif how == "gzip":
        gzip_file(log_dir / "events.jsonl")


# --- capture ---------------------------------------------------------------------------
# With --immediate-mode libpcap uses fixed-size ring slots of snaplen bytes each: at -s 0
# (256 KiB) the default 2 MiB buffer holds ~8 packets and a burst overflows it. -B is in KiB.
CAPTURE_BUFFER_KIB = 65536
ATTEMPTS = 3  # a capture the kernel dropped packets from is made again


class CaptureDropped(Exception):
    """tcpdump reports packets dropped by the kernel: the capture is incomplete."""


T = TypeVar("T")


def record_until_complete(name: str, record: Callable[[], T]) -> T:
    """Run ``record`` (traffic under :func:`tcpdump`) again while the kernel reports dropped
    packets, at most :data:`ATTEMPTS` times."""
    for attempt in range(1, ATTEMPTS + 1):
        try:
            return record()
        except CaptureDropped as dropped:
            if attempt == ATTEMPTS:
                raise RuntimeError(f"{name}: {dropped}") from dropped
            print(f"{name}: {dropped}, capturing again")
    raise AssertionError("unreachable")


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
    streams = tcp_streams(pcap, port)
    bodies = [b"".join(d for _, _, d in segs) for (_, sent), segs in streams.items() if sent]
    return [m.decode() for body in bodies for m in ID_LINE.findall(body)]


def check_capture(scenario: Scenario, pcap: Path, port: int) -> list[str]:
    """Problems with the capture: wrong IDs on the wire, duplicates where none belong, HTTP
    exchanges (methods, Last-Event-ID, statuses, data events) other than designed."""
    seen = wire_event_ids(pcap, port)
    if not seen:
        return ["no SSE event IDs on the wire"]
    problems = []
    if scenario.wire_ids is None:
        duplicates = [i for i, n in Counter(seen).items() if n > 1]
        if duplicates:
            problems.append(f"IDs sent twice: {duplicates}")
    elif Counter(seen) != Counter(scenario.wire_ids):
        problems.append(f"wire IDs {seen} != designed {scenario.wire_ids}")
    exchanges = http_exchanges(pcap, port)
    summary = [summarize(e) for e in exchanges]
    if scenario.exchanges is not None and summary != scenario.exchanges:
        problems.append(f"exchanges {summary} != designed {scenario.exchanges}")
    if scenario.verify is not None:
        problems += scenario.verify(exchanges)
    if scenario.verify_tcp is not None:
        problems += scenario.verify_tcp(pcap, port)
    return problems


def client_window_closed(pcap: Path, port: int) -> list[str]:
    """A client advertised a zero receive window (``tcp.analysis.zero_window``): a
    segment to the server, neither SYN, FIN nor RST, with window 0 (0 at any scale)."""
    control = dpkt.tcp.TH_SYN | dpkt.tcp.TH_FIN | dpkt.tcp.TH_RST
    with pcap.open("rb") as handle:
        for _, buf in dpkt.pcap.Reader(handle):
            tcp = dpkt.ethernet.Ethernet(buf).data.data
            to_server = isinstance(tcp, dpkt.tcp.TCP) and tcp.dport == port
            if to_server and tcp.win == 0 and not tcp.flags & control:
                return []
    return ["the client never advertised a zero window"]


# --- HTTP on the wire (dpkt), for check_capture -----------------------------------------------
@dataclass
class Message:
    """One HTTP/1.1 request or response as the capture carries it (body de-chunked)."""

    start_line: str
    headers: dict[str, str]  # names lowercased; a repeated name keeps its last value
    body: bytes


@dataclass
class Exchange:
    request: Message
    response: Message | None
    ts: float  # when the request's first byte was captured


def tcp_streams(pcap: Path, port: int) -> dict[tuple[int, bool], list[tuple[int, float, bytes]]]:
    """(client port, from server?) -> its payload segments (seq, ts, bytes) in sequence order,
    each byte once: a retransmission keeps only bytes not seen before (Linux resends the
    tail of a segment a full receive buffer dropped, starting inside the original)."""
    streams: dict[tuple[int, bool], list[tuple[int, float, bytes]]] = {}
    with pcap.open("rb") as handle:
        for ts, buf in dpkt.pcap.Reader(handle):
            tcp = dpkt.ethernet.Ethernet(buf).data.data
            if not isinstance(tcp, dpkt.tcp.TCP) or not tcp.data:
                continue
            key = (tcp.dport, True) if tcp.sport == port else (tcp.sport, False)
            streams.setdefault(key, []).append((tcp.seq, ts, bytes(tcp.data)))
    return {key: without_overlaps(segments) for key, segments in streams.items()}


def without_overlaps(segments: list[tuple[int, float, bytes]]) -> list[tuple[int, float, bytes]]:
    """``segments`` by sequence number (first capture first), trimmed to bytes not yet covered.
    Raw sequence numbers: fine for captures far shorter than 2**31 bytes from one ISN."""
    kept: list[tuple[int, float, bytes]] = []
    covered = None  # sequence number after the last byte kept
    for seq, ts, data in sorted(segments, key=lambda s: (s[0], s[1])):
        if covered is not None and seq < covered:
            data, seq = data[covered - seq :], covered
        if data:
            kept.append((seq, ts, data))
            covered = seq + len(data)
    return kept


def parse_messages(data: bytes) -> list[tuple[int, Message]]:
    """Consecutive HTTP/1.1 messages in ``data`` with their offsets (RFC 9112 §6: chunked,
    Content-Length, or to the end of the connection); a truncated last body is kept as is."""
    messages = []
    offset = 0
    while offset < len(data):
        head_end = data.find(b"\r\n\r\n", offset)
        if head_end < 0:
            break
        start_line, *lines = data[offset:head_end].decode("latin-1").split("\r\n")
        headers = {k.strip().lower(): v.strip() for k, _, v in (x.partition(":") for x in lines)}
        position = head_end + 4
        if headers.get("transfer-encoding", "").lower() == "chunked":
            body, position = dechunk(data, position)
        elif "content-length" in headers:
            length = int(headers["content-length"])
            body, position = data[position : position + length], position + length
        elif start_line.startswith("HTTP/"):
            body, position = data[position:], len(data)
        else:
            body = b""
        messages.append((offset, Message(start_line, headers, body)))
        offset = position
    return messages


def dechunk(data: bytes, position: int) -> tuple[bytes, int]:
    body = b""
    while True:
        line_end = data.find(b"\r\n", position)
        if line_end < 0:
            return body, len(data)
        size = int(data[position:line_end].split(b";")[0], 16)
        position = line_end + 2
        if size == 0:
            return body, data.find(b"\r\n", position) + 2
        body += data[position : position + size]
        position += size + 2


def http_exchanges(pcap: Path, port: int) -> list[Exchange]:
    """Every request with its response, in the order the requests were captured."""
    streams = tcp_streams(pcap, port)
    exchanges = []
    for (client_port, from_server), segments in streams.items():
        if from_server:
            continue
        data = b"".join(d for _, _, d in segments)
        starts = []  # (offset in data, ts) of each segment
        offset = 0
        for _, ts, payload in segments:
            starts.append((offset, ts))
            offset += len(payload)
        answer = streams.get((client_port, True), [])
        responses = [m for _, m in parse_messages(b"".join(d for _, _, d in answer))]
        for index, (at, request) in enumerate(parse_messages(data)):
            ts = max(t for o, t in starts if o <= at)
            response = responses[index] if index < len(responses) else None
            exchanges.append(Exchange(request, response, ts))
    return sorted(exchanges, key=lambda e: e.ts)


SseEvent = tuple[str | None, str | None, str]  # (id, event type, data)


def sse_events(body: bytes) -> list[SseEvent]:
    """The events of an event-stream body, without WHATWG's id inheritance (enough here)."""
    events = []
    for block in body.replace(b"\r\n", b"\n").split(b"\n\n"):
        fields: dict[str, list[str]] = {}
        for line in block.decode().split("\n"):
            if line and not line.startswith(":"):
                name, _, value = line.partition(":")
                fields.setdefault(name, []).append(value.removeprefix(" "))
        if fields:
            event_id = fields.get("id", [None])[-1]
            event = fields.get("event", [None])[-1]
            events.append((event_id, event, "\n".join(fields.get("data", []))))
    return events


def is_jsonrpc(data: str) -> bool:
    try:
        return isinstance(message := json.loads(data), dict) and "jsonrpc" in message
    except ValueError:
        return False


def summarize(exchange: Exchange) -> str:
    """``METHOD what -> status [sse data=N]``: what is the JSON-RPC method (and id of a
    tools/call) of a POST, the Last-Event-ID of a GET; N counts JSON-RPC data events."""
    request, response = exchange.request, exchange.response
    method = request.start_line.split()[0]
    what = ""
    if method == "POST":
        message = json.loads(request.body)
        what = f" {message['method']}"
        what += f" id={message['id']}" if message["method"] == "tools/call" else ""
    elif "last-event-id" in request.headers:
        what = f" last-event-id={request.headers['last-event-id']}"
    if response is None:
        return f"{method}{what} -> (no response)"
    answer = response.start_line.split()[1]
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        data = sum(is_jsonrpc(d) for _, _, d in sse_events(response.body))
        answer += f" sse data={data}"
    return f"{method}{what} -> {answer}"


# --- scenario-specific wire checks ------------------------------------------------------------
Check = Callable[[list[Exchange]], list[str]]


def all_of(*checks: Check) -> Check:
    return lambda exchanges: [p for check in checks for p in check(exchanges)]


def event_streams(exchanges: list[Exchange]) -> list[Message]:
    responses = [e.response for e in exchanges if e.response is not None]
    return [r for r in responses if r.headers.get("content-type", "").startswith("text/event")]


def stream_gap_between(before: str, after: str) -> Check:
    """The stream-gap event comes right after data event ``before``, right before ``after``."""

    def check(exchanges: list[Exchange]) -> list[str]:
        for stream in event_streams(exchanges):
            kinds = [(i, e) for i, e, _ in sse_events(stream.body)]
            if (None, "stream-gap") in kinds:
                k = kinds.index((None, "stream-gap"))
                if kinds[k - 1][0] == before and kinds[k + 1][0] == after:
                    return []
        return [f"no stream-gap event between {before} and {after}"]

    return check


def streams_carry(header: str, value: str) -> Check:
    def check(exchanges: list[Exchange]) -> list[str]:
        wrong = [s.headers.get(header) for s in event_streams(exchanges)]
        return [f"{header} {wrong} on event streams, not {value}"] if set(wrong) != {value} else []

    return check


def reissued_same_params(exchanges: list[Exchange]) -> list[str]:
    calls = [json.loads(e.request.body) for e in exchanges if e.request.body]
    calls = [c for c in calls if c.get("method") == "tools/call"]
    same = len(calls) == 2 and calls[0]["params"] == calls[1]["params"]
    return [] if same and calls[0]["id"] != calls[1]["id"] else [f"not a re-issue: {calls}"]


def resume_bodies(accept: Callable[[bytes], bool], what: str) -> Check:
    def check(exchanges: list[Exchange]) -> list[str]:
        bodies = [
            e.response.body
            for e in exchanges
            if "last-event-id" in e.request.headers and e.response is not None
        ]
        bad = [b for b in bodies if not accept(b)]
        return [f"resume bodies not {what}: {bad}"] if bad or not bodies else []

    return check


def same_event_twice(event_id: str) -> Check:
    """``event_id`` is on the wire twice with the same data (a repeat, not a new event)."""

    def check(exchanges: list[Exchange]) -> list[str]:
        data = [
            d for s in event_streams(exchanges) for i, _, d in sse_events(s.body) if i == event_id
        ]
        ok = len(data) == 2 and data[0] == data[1]
        return [] if ok else [f"{event_id} not sent twice with the same data: {data}"]

    return check


def sessions_are(count: int) -> Check:
    def check(exchanges: list[Exchange]) -> list[str]:
        responses = [e.response for e in exchanges if e.response is not None]
        sessions = {r.headers["mcp-session-id"] for r in responses}
        return [] if len(sessions) == count else [f"sessions {sessions}, designed {count}"]

    return check


def negotiated(version: str) -> Check:
    """initialize asks for and is answered ``version``; every later request says it too."""

    def check(exchanges: list[Exchange]) -> list[str]:
        first = exchanges[0]
        assert first.response is not None
        asked = json.loads(first.request.body)["params"]["protocolVersion"]
        answered = json.loads(first.response.body)["result"]["protocolVersion"]
        headers = {e.request.headers.get("mcp-protocol-version") for e in exchanges}
        ok = asked == answered == version and headers == {version}
        return [] if ok else [f"protocol {asked}/{answered}/{headers}, designed {version}"]

    return check


def capture(
    scenario: Scenario, port: int, out_dir: Path, log_dir: Path | None = None
) -> tuple[Path, object]:
    """Run ``scenario`` on ``port`` while tcpdump writes ``out_dir/<name>.pcap``; a capture the
    kernel dropped packets from is made again. Returns the pcap and what ``scenario.run``
    returned (the client's view of the traffic). Raises RuntimeError if the wire is wrong.
    With ``log_dir`` the server writes its logs of that same run there (each attempt
    starts them afresh)."""
    if not port_is_free(port):
        raise RuntimeError(f"port {port} for {scenario.name} is in use")
    pcap = out_dir / f"{scenario.name}.pcap"

    def record() -> object:
        with tcpdump(pcap, port):
            return scenario.run(port) if log_dir is None else scenario.run(port, log_dir)

    seen = record_until_complete(scenario.name, record)
    problems = check_capture(scenario, pcap, port)
    if problems:
        raise RuntimeError(f"{scenario.name}: " + "; ".join(problems))
    return pcap, seen


def write_expected(scenario: Scenario, out_dir: Path) -> Path:
    """``<name>.expected.json``: the scenario's description and its findings by construction."""
    expected = {
        "description": scenario.description,
        "made_by": scenario.made_by,
        "findings": scenario.findings,
    }
    expected_path = out_dir / f"{scenario.name}.expected.json"
    expected_path.write_text(json.dumps(expected, indent=2) + "\n")
    return expected_path


def make(scenario: Scenario, port: int, out_dir: Path) -> None:
    log_dir = out_dir / "logs" / scenario.name if scenario.name in LOG_SAMPLES else None
    if log_dir is not None:
        shutil.rmtree(log_dir, ignore_errors=True)  # no file of an older run stays
    pcap, _ = capture(scenario, port, out_dir, log_dir)
    if log_dir is not None:
        problems = check_logs(log_dir, pcap, port)
        if problems:
            raise RuntimeError(f"{scenario.name} logs: " + "; ".join(problems))
        package_logs(log_dir, LOG_SAMPLES[scenario.name])
    write_expected(scenario, out_dir)
    print(f"{scenario.name:32} {pcap.stat().st_size:>7} bytes  port {port}")


# --- README ----------------------------------------------------------------------------
README_HEAD = """# Sample captures

Every sample is `<name>.pcap` (or `.pcapng`) plus `<name>.expected.json`, whose `findings`
are the ground truth *by construction* (what the scenario was built to produce), not the
analyzer's output, under the full rule set of issue 4 (/work/notes/rules4.md). Regenerate
everything (as root: tcpdump records `lo`) with

    python samples/make_samples.py            # all samples, about 30 s
    python samples/make_samples.py --only resume-410 mcp-sdk-resume
    python samples/make_samples.py --expected-only    # expectations and this README only

Loopback samples come from real servers and clients over 127.0.0.1: `profile_server.py`
(Starlette on uvicorn, speaking the wire profile of docs/profile.md, each misbehaviour a knob),
`profile_client.py` (httpx) and `mcp_sdk_capture.py` (the official MCP Python SDK, server
and client). Crafted samples are built packet by packet by `crafted.py` (scapy; see
CRAFTED.md). Content is the same on every run (seeded session and event IDs); timestamps,
`date:` headers and client ports differ. Each loopback capture holds one server port (printed
by make_samples.py): `tshark -r samples/NAME.pcap -Y http -d tcp.port==PORT,http`.
make_samples.py refuses a capture whose wire differs from the design: the SSE `id:` values,
the HTTP exchanges in order (method, JSON-RPC method and id, `Last-Event-ID`, status, number
of JSON-RPC data events) and per-scenario details (where the `stream-gap` sits, the
`Cache-Control` of the streams, equal params of a re-issued call, the negotiated protocol
version, an event sent twice with the same data, the body of an empty replay).

## What `gap` holds, rule by rule
`gap.first`/`gap.last` are event IDs as on the wire; `null` where unknowable. The analyzer is
matched on (rule, classification, gap.first, gap.last); a rule that fires several times in a
sample is listed several times. In the table below `?` stands for a null `last`.
- Gap rules (`missing-stream-gap`, `stream-gap-signalled`, `gap-signal-late`,
  `silent-resume-jump`, `resume-in-gap-2xx`, `resume-gap-signalled`): the first and last
  missing ID.
- `gap-client-reissued`, `client-accepted-gap`: the gap of the unsignalled gap they judge
  (the same first/last as its `missing-stream-gap` / `gap-signal-late` /
  `silent-resume-jump` / `backpressure-disconnect-resume-mismatch` finding), classification
  `indeterminate` when that gap is (capture loss).
- `resumable-while-evicting` (one per session): the gap of the session's first unsignalled
  live gap (`missing-stream-gap` or `gap-signal-late`, never an indeterminate one: capture
  loss is no proof of eviction).
- `backpressure-disconnect-resume-mismatch`: like `silent-resume-jump`, first = the successor
  of the resume's Last-Event-ID, last = the ID before the replay's first data event.
- `client-adjusted-resume`: the IDs the client skipped: first = the successor of the last ID
  seen on the logical stream, last = the resume's Last-Event-ID.
- `non-monotonic-id`: first = last = the ID that repeated or went backwards.
- Every other resume-level rule (`resume-refused-410`, `no-reissue-after-410`,
  `empty-replay-2xx`, `replay-from-oldest`, `replay-duplicate`, `replay-crossed-streams`,
  `replay-crossed-sessions`, `resume-storm`, `resume-lost-cursor`): first = the successor of
  the resume's Last-Event-ID (of the failed resume for `resume-lost-cursor`), last = null.
- A `contract_violation` (`resume-in-stateless-era`, `id-scheme-outlier`) lost nothing and
  names no gap: first = last = null.

What the official Python SDK (mcp 2.3.0, sse-starlette) writes, as seen in `mcp-sdk-*`:
- CRLF line endings; every event is its own HTTP chunk; data events carry `event: message`.
- Priming events are `id: <uuid>` + `data: ` (a trailing space) + `retry: 100`, no `event:`;
  every POST stream is primed, `initialize` included (its answer is an event stream, not JSON).
- After a replay the server mints a *new* priming event (fresh ID) before the live tail.
- Event IDs are whatever the plugged-in EventStore returns (here seeded UUIDs, like the
  SDK's example store); the standalone GET stream carries no priming event.
- The client resumes on the same keep-alive connection the POST stream ended on, with
  `last-event-id` lowercase (the last ID it received) and `Cache-Control: no-store` on its GET
  requests; the server's streams say `Cache-Control: no-cache, no-transform`.

| sample | what happened | expected findings | how made |
|---|---|---|---|
"""


def describe_findings(findings: list[dict]) -> str:
    if not findings:
        return "none"
    rows = []
    for f in findings:
        first, last = f["gap"]["first"], f["gap"]["last"]
        if first is None and last is None:
            span = "(no gap)"
        else:
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
    text = README_HEAD + "\n".join(rows) + "\n"
    (out_dir / "README.md").write_text(text + logs_section(out_dir))


LOGS_HEAD = """
## Logs of the same runs: `logs/<name>/`

For the samples below the server also wrote its own logs while tcpdump recorded it, so each
folder and `<name>.pcap` describe the same run (same sessions, event IDs and clock; the
capture's `expected.json` is the truth for both). Three server shapes write them, as real
deployments do (docs/logs.md, "Record shapes"):

- **PROFILE server** (`profile_server.py`, Starlette): `access.log` in nginx's `mcp` preset
  (or `combined-mcp`: the session only in the response header column), one line per
  request written by an ASGI middleware when the response ended (`$time_local` is that
  moment, 1 s resolution; `$request_time` the seconds since the request began;
  `$body_bytes_sent` the body bytes sent). `events.jsonl`, one record per thing that
  happened to an event, written where it happened: `emitted` when the producer creates it,
  `written` when it is handed to the ASGI send, `evicted` when it is dropped (`where`:
  `live-queue`, never written on the live stream, or `replay-buffer`, lost to resumes).
  `stream` is the server's stream (a replay names the stream it continues), `request` the
  HTTP exchange, `last_event_id` that exchange's `Last-Event-ID` if it was a resume. A
  signal sent is recorded as the server's decision (`control`), as the event written
  (`written` named after the signal), or both; some samples log decisions with no
  `request` or `stream`, and `control` records for `initialize` (the negotiated
  `protocol_version`), each keep-alive comment and each resume refused with 410.
- **Official Python SDK** (`mcp_sdk_capture.py`): `access.log` in `combined-mcp`;
  `events.jsonl` from a logging EventStore (`emitted` when the SDK stores an event, its
  `stream` the SDK's stream ID; priming events stored with `data` `""`; no `request`, and
  `session` null until the session exists) and an ASGI middleware tapping the event stream
  (`written`).
- **Official TypeScript SDK** (`ts_sdk/log-middleware.js`, a node:http middleware in front
  of the SDK's transport): `access.log` in `combined-mcp`; `events.jsonl` with `emitted`
  for every event the SDK wrote, `written` for what it passed on; in `ts-sdk-stream-gap` it
  sheds progress 4-5 (`evicted`) and writes a `stream-gap`, logged only as written.

| sample | server | access log | signals recorded as | other records |
|---|---|---|---|---|
"""


def _shape_row(folder: Path) -> str:
    """One README row: who wrote the folder's logs and in which shape."""
    name = folder.name
    records = []
    for events in folder.glob("events.jsonl*"):
        opener = gzip.open if events.suffix == ".gz" else open
        with opener(events, "rt") as handle:
            records = [json.loads(line) for line in handle]
    access = sorted(f.name for f in folder.glob("access.log*"))
    head = (folder / "access.log").read_text().split("\n", 1)[0]
    quoted = head.count('"') // 2
    fmt = "mcp" if quoted == 6 else "combined-mcp" if quoted == 5 else "?"
    server = (
        "TypeScript SDK + middleware"
        if name.startswith("ts-sdk")
        else "Python SDK (event store + tap)"
        if name.startswith("mcp-sdk")
        else "PROFILE server"
    )
    ways = []
    decided = [
        r for r in records if r["kind"] == "control" and r.get("event", {}).get("type") in SIGNALS
    ]
    wrote = [
        r
        for r in records
        if r["kind"] == "written"
        and isinstance(r.get("event"), dict)
        and r["event"].get("type") in SIGNALS
    ]
    if decided:
        bare = all("request" not in r for r in decided)
        ways.append("decision" + (" (no request)" if bare else ""))
    if wrote:
        ways.append("written")
    others = sorted(
        {
            r["event"]["type"]
            for r in records
            if r["kind"] == "control" and r["event"].get("type") not in SIGNALS
        }
    )
    files = ", ".join(f"`{f}`" for f in access)
    return (
        f"| `{name}` | {server} | {fmt} ({files}) | {' + '.join(ways) or '-'} | "
        f"{', '.join(f'`{o}`' for o in others) or '-'} |"
    )


def logs_section(out_dir: Path) -> str:
    """README rows for the log folders present in ``out_dir/logs``."""
    folders = sorted(p for p in (out_dir / "logs").glob("*") if p.is_dir())
    if not folders:
        return ""
    tail = """
make_samples.py (and ts_sdk_capture.py) refuse logs that differ from the capture of the run:
the `written` IDs must be the SSE IDs on the wire, the signal records the signals on the
wire, the access lines the HTTP exchanges (method, `Last-Event-ID`, status). Scan them alone
(`sse-forensics scan samples/logs/NAME/`) or with the capture
(`sse-forensics scan samples/NAME.pcap samples/logs/NAME/`);
tests/end_to_end/test_log_samples.py checks both against `expected.json`,
and says which findings logs alone cannot give.
"""
    return LOGS_HEAD + "\n".join(_shape_row(f) for f in folders) + "\n" + tail


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
    parser.add_argument(
        "--expected-only",
        action="store_true",
        help="rewrite the loopback scenarios' expected.json and README.md from the table "
        "above, capturing nothing (when the ground truth changes, not the traffic)",
    )
    args = parser.parse_args(argv)
    if args.expected_only:
        for scenario in scenarios():
            if args.only is None or scenario.name in args.only:
                write_expected(scenario, args.out)
        write_readme(args.out)
        return 0
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
