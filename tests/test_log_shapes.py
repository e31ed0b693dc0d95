"""Event-log records in the shapes real servers write them (issue 11): a signal logged as a
decision (``control``), as the event written (``written`` named after the signal), or
both; decisions without ``request`` or ``stream``; control types no rule knows. Each
shape of the same run gives the findings of the capture of that run, alone and joined with
the capture, with no ``sources-disagree`` and no response made up for a decision."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import SAMPLES
from test_log_samples import LOGS, _event_log, _expected, _got

from sse_forensics.pipeline import scan_paths

Records = list[dict]

# Samples whose server sent a signal, and the signal.
SIGNALLED = {
    "live-gap-signalled": "stream-gap",
    "gap-signal-late": "stream-gap",
    "resume-gap-signalled": "resume-gap",
    "backpressure-disconnect-resume": "backpressure-disconnect",
    "backpressure-disconnect-resume-mismatch": "backpressure-disconnect",
}


def _payload(record: dict) -> dict:
    return {k: v for k, v in record["event"].items() if k != "type"}


def _as_written(record: dict) -> dict:
    """The written record of the signal a decision record decided: the event name and the
    data the client got, as a server that logs what it writes logs it."""
    event = {"type": record["event"]["type"], "data": json.dumps(_payload(record))}
    return {**record, "kind": "written", "event": event, "ts": record["ts"] + 1e-6}


def _strip(record: dict, *keys: str) -> dict:
    return {k: v for k, v in record.items() if k not in keys}


def decision_only(records: Records) -> Records:
    return records


def written_only(records: Records) -> Records:
    return [_as_written(r) if r["kind"] == "control" else r for r in records]


def both(records: Records) -> Records:
    out = []
    for r in records:
        out.append(r)
        if r["kind"] == "control":
            out.append(_as_written(r))
    return out


def decision_without_request(records: Records) -> Records:
    return [_strip(r, "request") if r["kind"] == "control" else r for r in records]


def decision_without_request_or_stream(records: Records) -> Records:
    return [
        _strip(r, "request", "stream", "last_event_id") if r["kind"] == "control" else r
        for r in records
    ]


def both_decision_bare(records: Records) -> Records:
    """Both records, the decision with nothing but its session and time."""
    out = []
    for r in records:
        if r["kind"] == "control":
            out.append(_strip(r, "request", "stream", "last_event_id"))
            out.append(_as_written(r))
        else:
            out.append(r)
    return out


SHAPES: dict[str, Callable[[Records], Records]] = {
    f.__name__: f
    for f in (
        decision_only,
        written_only,
        both,
        decision_without_request,
        decision_without_request_or_stream,
        both_decision_bare,
    )
}


def _logs_in_shape(tmp_path: Path, name: str, shape: Callable[[Records], Records]) -> Path:
    folder = tmp_path / name
    folder.mkdir(parents=True)
    _, records = _event_log(LOGS / name)
    (folder / "events.jsonl").write_text("".join(json.dumps(r) + "\n" for r in shape(records)))
    (folder / "access.log").write_bytes((LOGS / name / "access.log").read_bytes())
    return folder


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("name", SIGNALLED)
def test_every_shape_of_a_signal_gives_the_same_findings(
    tmp_path: Path, name: str, shape: str
) -> None:
    folder = _logs_in_shape(tmp_path, name, SHAPES[shape])
    reference = _got(scan_paths([str(LOGS / name)]))
    alone = scan_paths([str(folder)])
    assert not alone.errors
    assert _got(alone) == reference
    # Never a response made up for a decision: as many streams as the original shape.
    original = scan_paths([str(LOGS / name)])
    assert alone.tables["streams"].height == original.tables["streams"].height
    joined = scan_paths([str(SAMPLES / f"{name}.pcap"), str(folder)])
    assert _got(joined) == _expected(name)  # no sources-disagree


def _records_of(name: str) -> Records:
    return _event_log(LOGS / name)[1]


def test_a_signal_logged_only_as_written_is_that_signal(tmp_path: Path) -> None:
    """Read as a data event, a written stream-gap would leave 8-12 unsignalled."""
    folder = _logs_in_shape(tmp_path, "live-gap-signalled", written_only)
    found = _got(scan_paths([str(folder / "events.jsonl")]))
    assert found == Counter([("stream-gap-signalled", "expected_gap", "8", "12")])


def test_the_written_signal_is_the_evidence_when_both_are_logged(tmp_path: Path) -> None:
    folder = _logs_in_shape(tmp_path, "live-gap-signalled", both)
    result = scan_paths([str(folder / "events.jsonl")], keep_records=True)
    assert result.facts is not None
    signals = [e for s in result.facts.streams for e in s.events if e.kind == "signal"]
    assert len(signals) == 1  # the decision is not a second signal
    (written,) = [
        n + 1
        for n, line in enumerate((folder / "events.jsonl").read_text().splitlines())
        if '"written"' in line and "stream-gap" in line
    ]
    assert signals[0].origin is not None and signals[0].origin.number == written


def test_a_written_signal_without_payload_takes_the_decisions(tmp_path: Path) -> None:
    def shape(records: Records) -> Records:
        out = []
        for r in records:
            out.append(r)
            if r["kind"] == "control":
                bare = _as_written(r)
                bare["event"] = {"type": r["event"]["type"]}
                out.append(bare)
        return out

    folder = _logs_in_shape(tmp_path, "live-gap-signalled", shape)
    found = _got(scan_paths([str(folder / "events.jsonl")]))
    assert found == Counter([("stream-gap-signalled", "expected_gap", "8", "12")])


def test_a_resume_gap_record_covering_the_gap_makes_it_expected_from_logs_alone(
    tmp_path: Path,
) -> None:
    for shape in (decision_without_request_or_stream, written_only):
        folder = _logs_in_shape(tmp_path / shape.__name__, "resume-gap-signalled", shape)
        found = _got(scan_paths([str(folder / "events.jsonl")]))
        assert found == Counter([("resume-gap-signalled", "expected_gap", "8", "12")])


def test_a_decision_with_no_response_to_attach_to_is_dropped(tmp_path: Path) -> None:
    records = _records_of("clean-live-int")
    session = records[0]["session"]
    lonely = [
        {"ts": records[0]["ts"], "session": "other", "kind": "control", "event": e}
        for e in ({"type": "stream-gap", "first": 3, "last": 4}, {"type": "keepalive"})
    ]
    lonely.append({"ts": None, "session": session, "kind": "control", "event": {"type": "close"}})
    path = tmp_path / "events.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records + lonely))
    result = scan_paths([str(path)])
    assert not result.findings and not result.errors
    assert result.tables["streams"].height == 1  # no response invented for them
    assert result.log_stats["event_rows"] == len(records) + 3  # kept as rows


UNKNOWN = [
    {"type": "session-created", "client": "x"},
    {"type": "retry-scheduled", "in_ms": 100},
    {"type": "retry-scheduled", "in_ms": 200},
    {"no_type": True},
    {"type": ["not", "a", "string"]},
]


def test_control_records_of_any_type_never_stop_a_scan(tmp_path: Path) -> None:
    records = _records_of("live-gap-signalled")
    base = {k: records[5][k] for k in ("ts", "session", "stream", "request")}
    extra = [{**base, "kind": "control", "event": e} for e in UNKNOWN]
    extra.append({**base, "kind": "control", "event": "stream-gap"})  # not even an object
    extra.append({**base, "kind": "written", "event": {"type": "stream-gap", "data": "{oops"}})
    path = tmp_path / "events.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records[:6] + extra + records[6:]))
    result = scan_paths([str(path)])
    assert not result.errors or all("unusable" in e.what for e in result.errors)
    assert ("stream-gap-signalled", "expected_gap", "8", "12") in _got(result)
    stats = result.log_stats
    assert stats["ignored_control_types"]["retry-scheduled"] == 2
    assert stats["ignored_control_types"]["session-created"] == 1
    assert stats["control_types"]["stream-gap"] >= 1
    assert "stream-gap" not in stats["ignored_control_types"]
    (file_stats,) = stats["files"]
    assert file_stats["control_types"]["retry-scheduled"] == 2


def test_control_types_are_listed_in_the_json_document(tmp_path: Path) -> None:
    from sse_forensics.report.jsonout import scan_document

    records = _records_of("clean-live-int")
    base = {k: records[2][k] for k in ("ts", "session", "stream", "request")}
    extra = [{**base, "kind": "control", "event": {"type": "Retry_Scheduled"}}]
    path = tmp_path / "events.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records + extra))
    doc = json.loads(scan_document(scan_paths([str(path)])))
    assert doc["logs"]["ignored_control_types"] == {"Retry_Scheduled": 1}
    assert doc["logs"]["files"][0]["control_types"] == {"Retry_Scheduled": 1}


def test_a_signal_type_no_rule_knows_is_read_as_invalid_not_raised() -> None:
    from sse_forensics.facts.signals import parse_signal

    assert not parse_signal("retry-scheduled", '{"first": 1}').valid
    assert not parse_signal("stream-gap", None).valid
    assert parse_signal("stream-gap", '{"first": 8, "last": 12}').last == "12"
