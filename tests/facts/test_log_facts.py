"""Logs as evidence: event logs and access logs go through the same facts and rules as
captures, and join with a capture of the same incident."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
from conftest import SAMPLES

from sse_forensics.pipeline import LogOptions, scan_paths

T0 = 1767225600.0


def _write_jsonl(path: Path, records: list[dict]) -> str:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return str(path)


def _stream(session, stream, ids, *, evicted=(), request="r1", leid=None, t=T0, why="queue full"):
    out = []
    for n, event_id in enumerate(ids):
        base = {
            "ts": t + n * 0.1,
            "session": session,
            "stream": stream,
            "event_id": event_id,
            "request": request,
        }
        if leid is not None:
            base["last_event_id"] = leid
        out.append({**base, "kind": "emitted"})
        if event_id in evicted:
            out.append({**base, "kind": "evicted", "reason": why, "where": "send buffer"})
        else:
            out.append({**base, "kind": "written"})
    return out


def _found(result) -> set[tuple]:
    return {(f.rule, f.classification, f.gap["first"], f.gap["last"]) for f in result.findings}


def test_event_log_alone_names_evicted_ids_and_cause(tmp_path: Path) -> None:
    ids = [str(i) for i in range(1, 16)]
    log = _write_jsonl(tmp_path / "events.jsonl", _stream("S1", "st", ids, evicted={"8", "9"}))
    result = scan_paths([log])
    assert ("missing-stream-gap", "silent_corruption", "8", "9") in _found(result)
    (finding,) = [f for f in result.findings if f.rule == "missing-stream-gap"]
    assert finding.cause == "backpressure-eviction"
    cited = [e["line"] for e in finding.evidence if "evicted" in e["what"]]
    assert len(cited) == 2 and all(isinstance(n, int) for n in cited)
    # Rules that need what an event log cannot give are listed, not silently skipped.
    not_judged = {item["rule"] for item in result.not_judged}
    assert {"resumable-while-evicting", "replay-crossed-sessions"} <= not_judged
    assert "missing-stream-gap" not in not_judged


def test_event_log_gives_opaque_ids_a_producer_order(tmp_path: Path) -> None:
    ids = [f"u-{c}" for c in "qwertyuiopas"]  # no arithmetic possible
    records = _stream("S2", "st", ids, evicted={"u-y", "u-u"})
    result = scan_paths([_write_jsonl(tmp_path / "events.jsonl", records)])
    gaps = result.tables["gaps"]
    assert gaps.select("detected_by", "first", "last", "count").rows() == [
        ("producer-order", "u-y", "u-u", 2)
    ]
    assert result.tables["sessions"]["id_scheme"].to_list() == ["opaque"]


def test_event_log_resume_jump_and_signalled_gap(tmp_path: Path) -> None:
    live = _stream("S3", "st", [str(i) for i in range(1, 8)])
    replay = _stream("S3", "st", [str(i) for i in range(13, 16)], request="r2", leid="7", t=T0 + 5)
    signal = {
        "ts": T0 + 6,
        "session": "S3",
        "stream": "st",
        "kind": "control",
        "request": "r3",
        "event": {"type": "stream-gap", "first": 20, "last": 22},
    }
    result = scan_paths([_write_jsonl(tmp_path / "ev.jsonl", live + replay + [signal])])
    found = _found(result)
    assert ("silent-resume-jump", "silent_corruption", "8", "12") in found
    assert ("stream-gap-signalled", "expected_gap", "20", "22") in found


def test_access_log_alone_sees_storms_and_410s(tmp_path: Path) -> None:
    line = (
        '10.0.0.9 - - [01/Jan/2026:00:00:{s:02d} +0000] "GET /mcp HTTP/1.1" {status} 0 "-" '
        '"client" "{leid}" "S4" "-" 0.010\n'
    )
    lines = [line.format(s=n, status=200, leid="7") for n in range(1, 5)]
    lines.append(line.format(s=9, status=410, leid="30"))
    path = tmp_path / "access.log"
    path.write_text("".join(lines))
    result = scan_paths([str(path)], logs=LogOptions(access_format="mcp"))
    rules = {f.rule for f in result.findings}
    assert {"resume-storm", "no-reissue-after-410", "resume-refused-410"} <= rules
    assert "silent-resume-jump" in {item["rule"] for item in result.not_judged}
    # Evidence points at log lines, not frames.
    storm = next(f for f in result.findings if f.rule == "resume-storm")
    assert storm.evidence and all("line" in e and "frame" not in e for e in storm.evidence)


def test_capture_and_event_log_join_with_disagreement(tmp_path: Path) -> None:
    capture = SAMPLES / "live-jump-unsignalled.pcap"
    alone = scan_paths([str(capture)])
    events = alone.tables["events"].filter(pl.col("kind") == "data")
    session = events["session_id"][0]
    records = []
    for row in events.iter_rows(named=True):
        records.append(
            {
                "ts": row["ts_first"],
                "session": session,
                "stream": "s",
                "request": "r",
                "event_id": row["id_field"],
                "kind": "written",
            }
        )
    records += [
        {
            "ts": T0,
            "session": session,
            "stream": "s",
            "request": "r",
            "event_id": str(i),
            "kind": "evicted",
            "reason": "replay store full",
        }
        for i in range(8, 13)
    ]
    records.append(
        {
            "ts": T0,
            "session": session,
            "stream": "s",
            "request": "r",
            "event_id": "99",
            "kind": "written",
        }
    )
    log = _write_jsonl(tmp_path / "events.jsonl", records)
    joined = scan_paths([str(capture), log])
    # One stream, not two: the log's copy folds into the captured response.
    assert joined.tables["streams"].height == alone.tables["streams"].height
    gap_finding = next(f for f in joined.findings if f.rule == "missing-stream-gap")
    assert {"frame", "line"} <= {k for e in gap_finding.evidence for k in e}
    assert (
        gap_finding.fingerprint
        == next(f for f in alone.findings if f.rule == "missing-stream-gap").fingerprint
    )
    (disagree,) = [f for f in joined.findings if f.rule == "sources-disagree"]
    assert disagree.gap["first"] == "99" and disagree.classification == "indeterminate"


def test_legacy_sse_transport_session_from_query_and_endpoint_event() -> None:
    """2024-11-05 HTTP+SSE: the session is a query parameter of the POST endpoint, which the
    GET stream announces in its first event."""
    from sse_forensics.evidence.from_capture import exchange_rows
    from sse_forensics.evidence.tables import EventColumns, ExchangeColumns
    from sse_forensics.facts.config import AnalysisConfig
    from sse_forensics.provenance import Origin
    from sse_forensics.reassembly.exchange import Exchange
    from sse_forensics.reassembly.flows import Connection
    from sse_forensics.reassembly.http_events import RequestHead
    from sse_forensics.sse import SSEParser

    o = Origin("cap", 1, T0)
    stream = Exchange(1, 0)
    stream.request = RequestHead(0, "GET", "/sse", "HTTP/1.1", [], o)
    stream.events = SSEParser().feed(b"event: endpoint\ndata: /messages/?session_id=ab12\n\n")
    post = Exchange(2, 0)
    post.request = RequestHead(0, "POST", "/messages/?session_id=ab12", "HTTP/1.1", [], o)
    conns = {
        n: Connection(n, ("10.0.0.1", 40000 + n), ("10.0.0.2", 80), f"1:c{n}", o, o) for n in (1, 2)
    }
    rows, events = ExchangeColumns.buffer(), EventColumns.buffer()
    for ex in (stream, post):
        exchange_rows(conns[ex.connection_id], [ex], AnalysisConfig(), rows, events)
    assert rows["session"] == ["ab12", "ab12"]
    assert rows["session_how"] == ["query", "query"] and rows["session_inferred"] == [False] * 2


def test_log_reading_reports_progress_in_bytes(tmp_path: Path) -> None:
    ids = [str(i) for i in range(1, 50)]
    log = _write_jsonl(tmp_path / "events.jsonl", _stream("S9", "st", ids))
    calls: list[tuple] = []
    scan_paths([log], progress=lambda *a: calls.append(a))
    logs = [c for c in calls if c[0] == "logs"]
    size = Path(log).stat().st_size
    assert logs and logs[-1] == ("logs", size, size)
    assert [c[0] for c in calls][-2:] == ["facts", "rules"]


def test_shared_counter_survives_a_stray_repeated_value(tmp_path: Path) -> None:
    """A server-wide counter (the Python SDK's test store): two sessions interleave, and a
    third stream after a restart repeats value 1. One stray repeat does not turn the counter
    per-stream, so the interleaved streams' skips are no gaps."""
    a = _stream("SA", "a", [str(i) for i in range(1, 40, 2)])
    b = _stream("SB", "b", [str(i) for i in range(2, 41, 2)], t=T0 + 0.05)
    restart = _stream("SC", "c", ["1"], t=T0 + 10)
    result = scan_paths([_write_jsonl(tmp_path / "events.jsonl", a + b + restart)])
    assert result.findings == []
    scopes = dict(result.tables["sessions"].select("session_id", "counter_scope").rows())
    assert scopes["SA"] == scopes["SB"] == "server"
