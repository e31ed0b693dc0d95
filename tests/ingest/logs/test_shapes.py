"""Event-log records in the shapes real servers write them (issue 11): a signal logged as a
decision (``control``), as the event written (``written`` named after the signal), or
both; decisions without ``request`` or ``stream``; control types no rule knows. Each
shape of the same run gives the findings of the capture of that run, alone and joined with
the capture, with no ``sources-disagree`` and no response made up for a decision."""

from __future__ import annotations

import functools
import json
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import SAMPLES
from support.log_samples import LOGS, Finding, event_log_of, expected_findings, got_findings

from sse_forensics.ingest.logs.model import canonical_control_type
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


SIGNAL_TYPES = ("stream-gap", "resume-gap", "backpressure-disconnect")


def _is_signal(record: dict, kind: str) -> bool:
    event = record.get("event")
    return record["kind"] == kind and isinstance(event, dict) and event.get("type") in SIGNAL_TYPES


def _payload(record: dict) -> dict:
    event = record["event"]
    if "data" in event:
        return json.loads(event["data"])
    return {k: v for k, v in event.items() if k != "type"}


def decision_base(records: Records) -> Records:
    """The sample's records with each signal logged once, as the server's decision naming
    its request and stream (taken from the written record when the sample has one)."""
    wrote = [r for r in records if _is_signal(r, "written")]
    decided = [r for r in records if _is_signal(r, "control")]
    out = [r for r in records if r not in wrote and r not in decided]
    if wrote:
        for r in wrote:
            event = {"type": r["event"]["type"], **_payload(r)}
            out.append({**r, "kind": "control", "event": event, "ts": r["ts"] - 2e-6})
    else:
        out.extend(decided)
    return sorted(out, key=lambda r: r["ts"])


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
    return [_as_written(r) if _is_signal(r, "control") else r for r in records]


def both(records: Records) -> Records:
    out = []
    for r in records:
        out.append(r)
        if _is_signal(r, "control"):
            out.append(_as_written(r))
    return out


def decision_without_request(records: Records) -> Records:
    return [_strip(r, "request") if _is_signal(r, "control") else r for r in records]


def decision_without_request_or_stream(records: Records) -> Records:
    return [
        _strip(r, "request", "stream", "last_event_id") if _is_signal(r, "control") else r
        for r in records
    ]


def both_decision_bare(records: Records) -> Records:
    """Both records, the decision with nothing but its session and time."""
    out = []
    for r in records:
        if _is_signal(r, "control"):
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
    _, records = event_log_of(LOGS / name)
    shaped = shape(decision_base(records))
    (folder / "events.jsonl").write_text("".join(json.dumps(r) + "\n" for r in shaped))
    (folder / "access.log").write_bytes((LOGS / name / "access.log").read_bytes())
    return folder


@functools.cache  # six shapes compare with each sample's own logs: one scan of them
def _sample_logs_scan(name: str) -> tuple[Counter[Finding], int]:
    """The findings and the number of streams of the sample's logs as written."""
    original = scan_paths([str(LOGS / name)])
    return got_findings(original), original.tables["streams"].height


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("name", SIGNALLED)
def test_every_shape_of_a_signal_gives_the_same_findings(
    tmp_path: Path, name: str, shape: str
) -> None:
    folder = _logs_in_shape(tmp_path, name, SHAPES[shape])
    reference, streams = _sample_logs_scan(name)
    alone = scan_paths([str(folder)])
    assert not alone.errors
    assert got_findings(alone) == reference
    # Never a response made up for a decision: as many streams as the original shape.
    assert alone.tables["streams"].height == streams
    joined = scan_paths([str(SAMPLES / f"{name}.pcap"), str(folder)])
    assert got_findings(joined) == expected_findings(name)  # no sources-disagree


def _records_of(name: str) -> Records:
    return event_log_of(LOGS / name)[1]


def test_a_signal_logged_only_as_written_is_that_signal(tmp_path: Path) -> None:
    """Read as a data event, a written stream-gap would leave 8-12 unsignalled."""
    folder = _logs_in_shape(tmp_path, "live-gap-signalled", written_only)
    found = got_findings(scan_paths([str(folder / "events.jsonl")]))
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
            if _is_signal(r, "control"):
                bare = _as_written(r)
                bare["event"] = {"type": r["event"]["type"]}
                out.append(bare)
        return out

    folder = _logs_in_shape(tmp_path, "live-gap-signalled", shape)
    found = got_findings(scan_paths([str(folder / "events.jsonl")]))
    assert found == Counter([("stream-gap-signalled", "expected_gap", "8", "12")])


def test_a_resume_gap_record_covering_the_gap_makes_it_expected_from_logs_alone(
    tmp_path: Path,
) -> None:
    for shape in (decision_without_request_or_stream, written_only):
        folder = _logs_in_shape(tmp_path / shape.__name__, "resume-gap-signalled", shape)
        found = got_findings(scan_paths([str(folder / "events.jsonl")]))
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
    assert ("stream-gap-signalled", "expected_gap", "8", "12") in got_findings(result)
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


# --- the control types a rule uses ------------------------------------------------------


def _with_records(
    tmp_path: Path, name: str, extra: Records, access: bool = True, drop: tuple[str, ...] = ()
) -> Path:
    """The logs of ``name`` in ``tmp_path``, the event log with ``extra`` records (kept in
    time order) instead of the sample's control records of the same types (and ``drop``)."""
    folder = tmp_path / name
    folder.mkdir(parents=True)
    types = {canonical_control_type(t) for t in drop}
    types |= {canonical_control_type(r["event"]["type"]) for r in extra if r["kind"] == "control"}
    kept = [
        r
        for r in _records_of(name)
        if r["kind"] != "control" or canonical_control_type(r["event"]["type"]) not in types
    ]
    records = sorted(kept + extra, key=lambda r: r["ts"] or 0.0)
    (folder / "events.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    if access:
        (folder / "access.log").write_bytes((LOGS / name / "access.log").read_bytes())
    return folder


def _last_written(name: str) -> dict:
    return [r for r in _records_of(name) if r["kind"] == "written"][-1]


def test_a_410_decision_is_the_refused_resume_never_a_second_one(tmp_path: Path) -> None:
    name = "resume-410"
    after = _last_written(name)
    refusal = {
        "ts": after["ts"] + 0.05,
        "session": after["session"],
        "kind": "control",
        "event": {"type": "410", "requested": "7"},
    }
    events_only = _with_records(tmp_path / "e", name, [refusal], access=False)
    resumes = scan_paths([str(events_only)]).tables["resumes"]
    assert resumes.select("status", "last_event_id").rows() == [(410, "7")]
    both_logs = _with_records(tmp_path / "b", name, [refusal])
    result = scan_paths([str(both_logs)])
    assert result.tables["resumes"].height == 1  # the access line and the record are one
    assert got_findings(result) == got_findings(scan_paths([str(LOGS / name)]))
    joined = scan_paths([str(SAMPLES / f"{name}.pcap"), str(both_logs)])
    assert got_findings(joined) == expected_findings(name) and joined.tables["resumes"].height == 1


def test_keepalive_records_show_a_keepalive_only_replay(tmp_path: Path) -> None:
    """The replay that sent only `: ping` comments (request x0004) is a response of the
    event log too, and what it did is known: it stayed open, it did not end."""
    name = "empty-replay-2xx-keepalive"
    after = _last_written(name)
    pings = [
        {
            "ts": after["ts"] + 0.5 * (k + 1),
            "session": after["session"],
            "stream": after["stream"],
            "request": "x0004",
            "last_event_id": "7",
            "kind": "control",
            "event": {"type": "keepalive"},
        }
        for k in range(4)
    ]
    folder = _with_records(tmp_path, name, pings)
    result = scan_paths([str(folder)])
    assert got_findings(result) == expected_findings(name)
    resumes = result.tables["resumes"]
    assert resumes.select("empty_how").rows() == [("keep-alive only",)]
    plain = scan_paths([str(_with_records(tmp_path / "plain", name, [], drop=("keepalive",)))])
    assert plain.tables["resumes"].select("empty_how").rows() == [("ended (access log)",)]


def test_an_initialize_record_sets_the_sessions_protocol_era(tmp_path: Path) -> None:
    name = "resume-in-stateless-era"
    first = _records_of(name)[0]
    init = {
        "ts": first["ts"] - 0.01,
        "session": first["session"],
        "kind": "control",
        "event": {"type": "initialize", "protocol_version": "2026-07-28"},
    }
    plain = scan_paths([str(_with_records(tmp_path / "plain", name, [], drop=("initialize",)))])
    assert "resume-in-stateless-era" in {i["rule"] for i in plain.not_judged}
    result = scan_paths([str(_with_records(tmp_path, name, [init]))])
    assert result.tables["sessions"]["protocol_version"].to_list() == ["2026-07-28"]
    assert "resume-in-stateless-era" not in {i["rule"] for i in result.not_judged}
    assert got_findings(result) == expected_findings(name)


def test_a_close_record_is_a_close_event(tmp_path: Path) -> None:
    name = "clean-live-int"
    last = _last_written(name)
    close = {**last, "ts": last["ts"] + 0.001, "event_id": None, "event": {"type": "close"}}
    for shape, record in (("written", close), ("decision", {**close, "kind": "control"})):
        folder = _with_records(tmp_path / shape, name, [record])
        result = scan_paths([str(folder)], keep_records=True)
        assert not result.findings
        assert result.facts is not None
        kinds = [e.kind for s in result.facts.streams for e in s.events]
        assert kinds[-1] == "close" and kinds.count("close") == 1


def test_opaque_ids_a_gap_in_producer_order_never_names_a_priming_event(tmp_path: Path) -> None:
    """An event store's log (UUIDs, priming events stored with empty data): e3 and e4 were
    stored and never written between e2 and e5; a priming event minted between them for a
    replay nobody read is no lost message."""
    ids = {n: f"{n}-{'%08x' % (n * 2654435761 % 2**32)}-uuid" for n in range(7)}
    p1, p2 = "a1b2c3d4-prime-one", "e5f6a7b8-prime-two"
    base = {"session": "S-opaque", "stream": "2"}
    records: Records = []
    t = 1796010000.0

    def add(kind: str, event_id: str, data: str | None = None) -> None:
        nonlocal t
        t += 0.01
        event = {} if data is None else {"event": {"data": data}}
        records.append({"ts": t, **base, "event_id": event_id, "kind": kind, **event})

    add("emitted", p1, "")
    add("written", p1, "")
    for n in (1, 2):
        add("emitted", ids[n], '{"jsonrpc":"2.0"}')
        add("written", ids[n])
    add("emitted", p2, "")
    for n in (3, 4, 5):
        add("emitted", ids[n], '{"jsonrpc":"2.0"}')
    add("written", ids[5])
    path = tmp_path / "events.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    result = scan_paths([str(path)])
    assert got_findings(result) == Counter(
        [("missing-stream-gap", "silent_corruption", ids[3], ids[4])]
    )
