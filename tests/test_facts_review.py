"""Adversarial review of the fact layer against docs/profile.md: servers that follow the wire
contract must not be judged silent_corruption, and ones that break it must be."""

from __future__ import annotations

import random
import uuid

from sse_forensics.engine.registry import load_rules
from sse_forensics.evidence.from_capture import CaptureEvidence
from sse_forensics.evidence.store import EvidenceStore
from sse_forensics.facts.config import AnalysisConfig
from sse_forensics.facts.signals import parse_signal
from sse_forensics.pipeline import analyze_store
from sse_forensics.provenance import Origin
from sse_forensics.reassembly.exchange import Exchange
from sse_forensics.reassembly.flows import Connection
from sse_forensics.reassembly.http_events import RequestHead, ResponseHead
from sse_forensics.sse import SSEParser
from sse_forensics.verdicts import EVIDENCE_KINDS

T0 = 1767225600.0
_INIT_2026 = (
    b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2026-07-28"}}'
)


def _data(event_id: str) -> str:
    note = '{"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":1}}'
    return f"id: {event_id}\ndata: {note}\n\n"


class _Capture:
    """Exchanges built by hand, one connection each, one second apart."""

    def __init__(self) -> None:
        self.connections: dict[int, Connection] = {}
        self.exchanges: list[Exchange] = []

    def add(
        self,
        body: str,
        *,
        method: str = "GET",
        session: str | None = "S1",
        leid: str | None = None,
        status: int = 200,
        ctype: str = "text/event-stream",
        request_body: bytes = b"",
    ) -> Exchange:
        n = len(self.exchanges) + 1
        o = Origin("cap", n * 100, T0 + n)
        conn = Connection(n, ("10.0.0.1", 40000 + n), ("10.0.0.2", 80), f"1:c{n}", o, o)
        self.connections[n] = conn
        headers = [("Mcp-Session-Id", session)] if session else []
        if leid is not None:
            headers.append(("Last-Event-ID", leid))
        ex = Exchange(n, 0)
        ex.request = RequestHead(0, method, "/mcp", "HTTP/1.1", headers, o)
        ex.request_body = bytearray(request_body)
        ex.response = ResponseHead(0, status, "OK", "HTTP/1.1", [("Content-Type", ctype)], o)
        raw = body.encode()
        ex.response_body = bytearray(raw)
        ex.events = SSEParser().feed(raw, Origin("cap", n * 100 + 1, T0 + n + 0.5))
        ex.response_complete, ex.response_end_reason = True, "complete"
        ex.last_body_origin = o
        self.exchanges.append(ex)
        return ex

    def findings(self) -> tuple[object, set[tuple]]:
        """Judged the way a scan judges a capture: evidence rows, then one partition."""
        config = AnalysisConfig()
        with EvidenceStore() as store:
            writer = CaptureEvidence(store, config)
            for ex in self.exchanges:
                writer(self.connections[ex.connection_id], [ex])
            writer.flush()
            (result,) = analyze_store(
                store, config, load_rules(), EVIDENCE_KINDS, keep_records=True
            )
        facts, found = result.facts, result.findings
        return facts, {
            (f.rule, f.classification, f.gap.get("first"), f.gap.get("last")) for f in found
        }


def _silent(found: set[tuple]) -> set[tuple]:
    return {f for f in found if f[1] == "silent_corruption"}


def test_stream_gap_that_carries_its_own_id_is_no_loss() -> None:
    """A server numbering every event it writes gives the stream-gap event the next counter
    value: 7, [id 8: stream-gap 9-12], 13 lost only 9..12, and said so."""
    cap = _Capture()
    body = "".join(_data(str(i)) for i in (5, 6, 7))
    body += 'id: 8\nevent: stream-gap\ndata: {"first": 9, "last": 12}\n\n'
    body += _data("13") + _data("14")
    cap.add(body, method="POST")
    _, found = cap.findings()
    assert not _silent(found)
    assert ("stream-gap-signalled", "expected_gap", "9", "12") in found


def test_stream_gap_numbered_after_the_range_is_no_loss() -> None:
    cap = _Capture()
    body = "".join(_data(str(i)) for i in (5, 6, 7))
    body += "id: 13\nevent: stream-gap\ndata: 8-12\n\n" + _data("14")
    cap.add(body, method="POST")
    _, found = cap.findings()
    assert not _silent(found)
    assert ("stream-gap-signalled", "expected_gap", "8", "12") in found


def test_signal_text_range_in_a_json_string() -> None:
    assert parse_signal("stream-gap", '"8-12"').first == "8"
    assert parse_signal("stream-gap", '"8-12"').last == "12"


def _uuids(n: int) -> list[str]:
    rng = random.Random(7)
    return [str(uuid.UUID(int=rng.getrandbits(128), version=4)) for _ in range(n)]


def test_uuid_range_in_text_form_splits_between_the_two_ids() -> None:
    a, b = "550e8400-e29b-41d4-a716-446655440000", "a1b2c3d4-0000-41d4-a716-44665544ffff"
    payload = parse_signal("resume-gap", f"{a}-{b}")
    assert (payload.first, payload.last, payload.valid) == (a, b, True)


def test_uuid_resume_gap_in_text_form_is_an_expected_gap() -> None:
    """docs/profile.md, "Gap signalling": plain text `F-L` must be accepted; the Python SDK's
    IDs are UUIDs."""
    ids = _uuids(7)
    cap = _Capture()
    cap.add("".join(_data(i) for i in ids[:5]), method="POST")
    replay = f"event: resume-gap\ndata: {ids[1]}-{ids[4]}\n\n" + _data(ids[4]) + _data(ids[5])
    cap.add(replay, leid=ids[1])
    facts, found = cap.findings()
    assert facts.tables["sessions"]["id_scheme"].to_list() == ["opaque"]
    assert not _silent(found)
    assert {f[0] for f in found} == {"resume-gap-signalled"}


def test_era_is_the_version_the_server_answered_on_an_event_stream() -> None:
    """The client proposes 2026-07-28, the server answers initialize on an SSE stream with
    2025-11-25: resumption exists in that session, a 200 replay is no stateless-era fault."""
    init = _INIT_2026
    answer = (
        'event: message\ndata: {"jsonrpc":"2.0","id":1,'
        '"result":{"protocolVersion":"2025-11-25"}}\n\n'
    )
    cap = _Capture()
    cap.add(answer, method="POST", request_body=init)
    cap.add("".join(_data(str(i)) for i in (1, 2, 3)), method="POST")
    cap.add(_data("4") + _data("5"), leid="3")
    facts, found = cap.findings()
    assert facts.tables["sessions"]["protocol_version"].to_list() == ["2025-11-25"]
    assert not _silent(found)


def test_stateless_era_resume_answered_200_is_still_flagged() -> None:
    init = _INIT_2026
    answer = '{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2026-07-28"}}'
    cap = _Capture()
    ex = cap.add("", method="POST", request_body=init, ctype="application/json")
    ex.response_body = bytearray(answer.encode())
    cap.add("".join(_data(str(i)) for i in (1, 2, 3)), method="POST")
    cap.add(_data("4"), leid="3")
    _, found = cap.findings()
    # The replay continues at the successor: a contract violation that lost nothing, no gap.
    assert ("resume-in-stateless-era", "contract_violation", None, None) in found
    assert not _silent(found)


def test_polling_stream_closed_after_priming_is_no_empty_replay_fault() -> None:
    """2025-11-25 polling (SEP-1699): the server primes, closes, and the client resumes until
    the answer comes. An ended resume carrying only a priming event lost nothing: the answer
    it later delivers did not exist yet."""
    call = b'{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"slow"}}'
    answer = '{"jsonrpc":"2.0","id":7,"result":{"content":[]}}'
    cap = _Capture()
    cap.add("id: 1\nretry: 1000\ndata: \n\n", method="POST", request_body=call)
    cap.add("id: 2\nretry: 1000\ndata: \n\n", leid="1")
    cap.add(f"id: 3\ndata: {answer}\n\n", leid="2")
    facts, found = cap.findings()
    assert facts.tables["resumes"]["later_events_known"].to_list() == [False, False]
    assert not _silent(found)


def test_empty_replay_while_events_waited_is_still_flagged() -> None:
    """The live stream carried 3..5 after the client's cursor 2 before it resumed: a 200
    that ends with no event is a silent answer (docs/profile.md, "Gap signalling")."""
    cap = _Capture()
    cap.add("".join(_data(str(i)) for i in range(1, 6)), method="POST")
    cap.add(": ping\n\n", leid="2")
    _, found = cap.findings()
    assert ("empty-replay-2xx", "silent_corruption", "3", None) in found


def test_cursor_moved_past_a_declared_gap_is_no_client_adjustment() -> None:
    """After `stream-gap` 8-12 the client resumes from 12: it skips only what the server
    declared dropped, nothing the server still held."""
    cap = _Capture()
    body = "".join(_data(str(i)) for i in (5, 6, 7)) + "event: stream-gap\ndata: 8-12\n\n"
    cap.add(body, method="POST")
    cap.add(_data("13") + _data("14"), leid="12")
    _, found = cap.findings()
    assert not _silent(found)


def test_cursor_moved_past_what_the_stream_carried_is_still_flagged() -> None:
    cap = _Capture()
    cap.add("".join(_data(str(i)) for i in (5, 6, 7)), method="POST")
    cap.add(_data("13") + _data("14"), leid="12")
    _, found = cap.findings()
    assert ("client-adjusted-resume", "silent_corruption", "8", "12") in found


def test_resume_past_a_range_the_live_stream_declared_dropped_is_expected() -> None:
    """`stream-gap` 8-12 reached the wire, then the stream broke; the resume from 7 goes on
    at 13. The server signalled exactly that range (docs/profile.md, "What counts as what")."""
    cap = _Capture()
    body = "".join(_data(str(i)) for i in (5, 6, 7)) + "event: stream-gap\ndata: 8-12\n\n"
    cap.add(body, method="POST")
    cap.add(_data("13") + _data("14"), leid="7")
    facts, found = cap.findings()
    assert not _silent(found)
    resume_gaps = facts.tables["gaps"].filter(location="resume")
    assert resume_gaps.select("signal", "verdict").rows() == [("stream-gap", "expected_gap")]


def test_resume_past_an_undeclared_range_is_still_silent() -> None:
    cap = _Capture()
    body = "".join(_data(str(i)) for i in (5, 6, 7)) + "event: stream-gap\ndata: 8-9\n\n"
    cap.add(body, method="POST")
    cap.add(_data("13"), leid="7")
    _, found = cap.findings()
    assert ("silent-resume-jump", "silent_corruption", "8", "12") in found


def test_resume_from_inside_a_declared_range_answered_200_is_silent() -> None:
    """docs/profile.md, "What counts as what": a 2xx answer to a resume whose Last-Event-ID
    lies inside a dropped range is silent corruption, whatever the live stream declared."""
    cap = _Capture()
    body = "".join(_data(str(i)) for i in (5, 6, 7)) + "event: stream-gap\ndata: 8-12\n\n"
    cap.add(body, method="POST")
    cap.add(_data("13"), leid="10")
    _, found = cap.findings()
    assert any(f[0] == "resume-in-gap-2xx" and f[1] == "silent_corruption" for f in found)
