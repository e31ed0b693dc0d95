"""Adversarial review of the fact layer against docs/profile.md: servers that follow the wire
contract must not be judged silent_corruption, and ones that break it must be."""

from __future__ import annotations

from support.hand_capture import HandCapture, progress_event, silent_only, uuids

from sse_forensics.facts.signals import parse_signal

_INIT_2026 = (
    b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2026-07-28"}}'
)


def test_stream_gap_that_carries_its_own_id_is_no_loss() -> None:
    """A server numbering every event it writes gives the stream-gap event the next counter
    value: 7, [id 8: stream-gap 9-12], 13 lost only 9..12, and said so."""
    cap = HandCapture()
    body = "".join(progress_event(str(i)) for i in (5, 6, 7))
    body += 'id: 8\nevent: stream-gap\ndata: {"first": 9, "last": 12}\n\n'
    body += progress_event("13") + progress_event("14")
    cap.add(body, method="POST")
    _, found = cap.findings()
    assert not silent_only(found)
    assert ("stream-gap-signalled", "expected_gap", "9", "12") in found


def test_stream_gap_numbered_after_the_range_is_no_loss() -> None:
    cap = HandCapture()
    body = "".join(progress_event(str(i)) for i in (5, 6, 7))
    body += "id: 13\nevent: stream-gap\ndata: 8-12\n\n" + progress_event("14")
    cap.add(body, method="POST")
    _, found = cap.findings()
    assert not silent_only(found)
    assert ("stream-gap-signalled", "expected_gap", "8", "12") in found


def test_signal_text_range_in_a_json_string() -> None:
    assert parse_signal("stream-gap", '"8-12"').first == "8"
    assert parse_signal("stream-gap", '"8-12"').last == "12"


def test_uuid_range_in_text_form_splits_between_the_two_ids() -> None:
    a, b = "550e8400-e29b-41d4-a716-446655440000", "a1b2c3d4-0000-41d4-a716-44665544ffff"
    payload = parse_signal("resume-gap", f"{a}-{b}")
    assert (payload.first, payload.last, payload.valid) == (a, b, True)


def test_uuid_resume_gap_in_text_form_is_an_expected_gap() -> None:
    """docs/profile.md, "Gap signalling": plain text `F-L` must be accepted; the Python SDK's
    IDs are UUIDs."""
    ids = uuids(7)
    cap = HandCapture()
    cap.add("".join(progress_event(i) for i in ids[:5]), method="POST")
    replay = (
        f"event: resume-gap\ndata: {ids[1]}-{ids[4]}\n\n"
        + progress_event(ids[4])
        + progress_event(ids[5])
    )
    cap.add(replay, leid=ids[1])
    facts, found = cap.findings()
    assert facts.tables["sessions"]["id_scheme"].to_list() == ["opaque"]
    assert not silent_only(found)
    assert {f[0] for f in found} == {"resume-gap-signalled"}


def test_era_is_the_version_the_server_answered_on_an_event_stream() -> None:
    """The client proposes 2026-07-28, the server answers initialize on an SSE stream with
    2025-11-25: resumption exists in that session, a 200 replay is no stateless-era fault."""
    init = _INIT_2026
    answer = (
        'event: message\ndata: {"jsonrpc":"2.0","id":1,'
        '"result":{"protocolVersion":"2025-11-25"}}\n\n'
    )
    cap = HandCapture()
    cap.add(answer, method="POST", request_body=init)
    cap.add("".join(progress_event(str(i)) for i in (1, 2, 3)), method="POST")
    cap.add(progress_event("4") + progress_event("5"), leid="3")
    facts, found = cap.findings()
    assert facts.tables["sessions"]["protocol_version"].to_list() == ["2025-11-25"]
    assert not silent_only(found)


def test_stateless_era_resume_answered_200_is_still_flagged() -> None:
    init = _INIT_2026
    answer = '{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2026-07-28"}}'
    cap = HandCapture()
    ex = cap.add("", method="POST", request_body=init, ctype="application/json")
    ex.response_body = bytearray(answer.encode())
    cap.add("".join(progress_event(str(i)) for i in (1, 2, 3)), method="POST")
    cap.add(progress_event("4"), leid="3")
    _, found = cap.findings()
    # The replay continues at the successor: a contract violation that lost nothing, no gap.
    assert ("resume-in-stateless-era", "contract_violation", None, None) in found
    assert not silent_only(found)


def test_polling_stream_closed_after_priming_is_no_empty_replay_fault() -> None:
    """2025-11-25 polling (SEP-1699): the server primes, closes, and the client resumes until
    the answer comes. An ended resume carrying only a priming event lost nothing: the answer
    it later delivers did not exist yet."""
    call = b'{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"slow"}}'
    answer = '{"jsonrpc":"2.0","id":7,"result":{"content":[]}}'
    cap = HandCapture()
    cap.add("id: 1\nretry: 1000\ndata: \n\n", method="POST", request_body=call)
    cap.add("id: 2\nretry: 1000\ndata: \n\n", leid="1")
    cap.add(f"id: 3\ndata: {answer}\n\n", leid="2")
    facts, found = cap.findings()
    assert facts.tables["resumes"]["later_events_known"].to_list() == [False, False]
    assert not silent_only(found)


def test_empty_replay_while_events_waited_is_still_flagged() -> None:
    """The live stream carried 3..5 after the client's cursor 2 before it resumed: a 200
    that ends with no event is a silent answer (docs/profile.md, "Gap signalling")."""
    cap = HandCapture()
    cap.add("".join(progress_event(str(i)) for i in range(1, 6)), method="POST")
    cap.add(": ping\n\n", leid="2")
    _, found = cap.findings()
    assert ("empty-replay-2xx", "silent_corruption", "3", None) in found


def test_cursor_moved_past_a_declared_gap_is_no_client_adjustment() -> None:
    """After `stream-gap` 8-12 the client resumes from 12: it skips only what the server
    declared dropped, nothing the server still held."""
    cap = HandCapture()
    body = "".join(progress_event(str(i)) for i in (5, 6, 7)) + "event: stream-gap\ndata: 8-12\n\n"
    cap.add(body, method="POST")
    cap.add(progress_event("13") + progress_event("14"), leid="12")
    _, found = cap.findings()
    assert not silent_only(found)


def test_cursor_moved_past_what_the_stream_carried_is_still_flagged() -> None:
    cap = HandCapture()
    cap.add("".join(progress_event(str(i)) for i in (5, 6, 7)), method="POST")
    cap.add(progress_event("13") + progress_event("14"), leid="12")
    _, found = cap.findings()
    assert ("client-adjusted-resume", "silent_corruption", "8", "12") in found


def test_resume_past_a_range_the_live_stream_declared_dropped_is_expected() -> None:
    """`stream-gap` 8-12 reached the wire, then the stream broke; the resume from 7 goes on
    at 13. The server signalled exactly that range (docs/profile.md, "What counts as what")."""
    cap = HandCapture()
    body = "".join(progress_event(str(i)) for i in (5, 6, 7)) + "event: stream-gap\ndata: 8-12\n\n"
    cap.add(body, method="POST")
    cap.add(progress_event("13") + progress_event("14"), leid="7")
    facts, found = cap.findings()
    assert not silent_only(found)
    resume_gaps = facts.tables["gaps"].filter(location="resume")
    assert resume_gaps.select("signal", "verdict").rows() == [("stream-gap", "expected_gap")]


def test_resume_past_an_undeclared_range_is_still_silent() -> None:
    cap = HandCapture()
    body = "".join(progress_event(str(i)) for i in (5, 6, 7)) + "event: stream-gap\ndata: 8-9\n\n"
    cap.add(body, method="POST")
    cap.add(progress_event("13"), leid="7")
    _, found = cap.findings()
    assert ("silent-resume-jump", "silent_corruption", "8", "12") in found


def test_resume_from_inside_a_declared_range_answered_200_is_silent() -> None:
    """docs/profile.md, "What counts as what": a 2xx answer to a resume whose Last-Event-ID
    lies inside a dropped range is silent corruption, whatever the live stream declared."""
    cap = HandCapture()
    body = "".join(progress_event(str(i)) for i in (5, 6, 7)) + "event: stream-gap\ndata: 8-12\n\n"
    cap.add(body, method="POST")
    cap.add(progress_event("13"), leid="10")
    _, found = cap.findings()
    assert any(f[0] == "resume-in-gap-2xx" and f[1] == "silent_corruption" for f in found)
