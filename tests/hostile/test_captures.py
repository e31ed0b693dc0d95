"""Hostile captures (issue 16, capture side): decompression bombs, stacked codings, SYN
floods, evicted streams and inconsistent retransmissions cost bounded work, every cap that
fires is reported, and the ordinary silent gap each input also holds is still found.

The big inputs come from ``samples/hostile.py`` at test time, sized down, with a cap lowered
through ``Limits`` (``--limit``) where the default would need gigabytes to fire."""

from __future__ import annotations

import json
import tracemalloc
from pathlib import Path

import pytest
from conftest import SAMPLES
from support.scripts import load_script

from sse_forensics.facts.config import AnalysisConfig
from sse_forensics.ingest.packet_index import index_captures
from sse_forensics.ingest.packets import TCP_SYN, TCPSegment
from sse_forensics.limits import Limits, MiB
from sse_forensics.pipeline import scan_paths
from sse_forensics.provenance import Origin
from sse_forensics.reassembly.content_coding import DecodeCapped, make_decoder
from sse_forensics.reassembly.fast import reassemble_fast
from sse_forensics.reassembly.fast.tcp import R_INCONSISTENT
from sse_forensics.reassembly.flows import ConnectionTracker
from sse_forensics.reassembly.sse import SSEParser
from sse_forensics.result import ScanResult


def _load_hostile():
    return load_script("samples/hostile.py", "samples_hostile")


hostile = _load_hostile()
ORDINARY = ("missing-stream-gap", "silent_corruption", "8", "12")
ORDINARY_EVENTS = len(hostile.ORDINARY_IDS)


def _scan(path: Path, **caps: int | float) -> ScanResult:
    return scan_paths([str(path)], AnalysisConfig(limits=Limits(**caps)), jobs=1)


def _findings(result: ScanResult) -> set[tuple]:
    return {(f.rule, f.classification, f.gap["first"], f.gap["last"]) for f in result.findings}


def _caps(result: ScanResult) -> dict[str, int]:
    return {c.cap: c.count for c in result.caps}


# -- decompression bombs -------------------------------------------------------------------


@pytest.mark.parametrize("framing", ["length", "chunked", "close"])
@pytest.mark.parametrize("coding", ["gzip", "deflate", "zstd"])
def test_bomb_decoding_stops_at_body_bytes(tmp_path: Path, coding: str, framing: str) -> None:
    """Issue row: a gzip / deflate / zstd body expanding to 4 GB, in every framing. Sized
    down: 4 MiB decoded against a 512 KiB cap."""
    path = tmp_path / "bomb.pcap"
    hostile.write(path, lambda w: hostile.bomb(w, coding, 4 * MiB, framing))
    result = _scan(path, body_bytes=512 << 10)
    assert _caps(result) == {"body_bytes": 1}
    assert ORDINARY in _findings(result)
    # Its two events sit before the cap; the rest of the stream is not read as events.
    assert result.stats.events == ORDINARY_EVENTS + 2
    (cap,) = result.caps
    assert cap.frame is not None and "decoding past 512 KiB" in cap.what
    sessions = result.tables["sessions"]
    unjudged = [json.loads(u) for u in sessions["unjudged"].drop_nulls().to_list()]
    assert any("after event 2" in item["why"] for items in unjudged for item in items)


@pytest.mark.parametrize(("coding", "decoded"), [("gzip", 64 * MiB), ("zstd", 256 * MiB)])
def test_bomb_decoding_memory_is_bounded_by_the_cap(coding: str, decoded: int) -> None:
    """The decompressor is asked for no more than the room left: decoding a bomb never
    holds much more than the cap, whatever it would expand to."""
    body = hostile.bomb_body(coding, decoded)
    decoder = make_decoder(coding, Limits(body_bytes=4 * MiB, expansion_ratio=1e9))
    assert decoder is not None
    out = 0
    tracemalloc.start()
    try:
        with pytest.raises(DecodeCapped) as capped:
            for at in range(0, len(body), 1448):
                out += len(decoder.decode(body[at : at + 1448]))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert out + len(capped.value.data) == 4 * MiB
    assert peak < 12 * MiB, peak


@pytest.mark.parametrize(
    ("coding", "cap"),
    [("br", "expansion_ratio"), ("gzip, gzip", "expansion_ratio"), ("zstd", "expansion_ratio")],
)
def test_high_ratio_bombs_stop_at_the_expansion_ratio(
    tmp_path: Path, coding: str, cap: str
) -> None:
    """Issue row: brotli to 4 GB, stacked gzip: with the default caps a body expanding more
    than 1000 times past 1 MiB stops there (here 64 MiB decoded)."""
    path = tmp_path / "bomb.pcap"
    hostile.write(path, lambda w: hostile.bomb(w, coding, 64 * MiB))
    result = _scan(path)
    assert _caps(result) == {cap: 1}
    assert ORDINARY in _findings(result)
    assert result.stats.events == ORDINARY_EVENTS + 2


def test_codings_stacked_past_the_depth_are_not_decoded(tmp_path: Path) -> None:
    """Issue row: ``gzip, gzip, gzip`` to 10 GB: three codings, over ``coding_depth`` 2."""
    path = tmp_path / "bomb.pcap"
    hostile.write(path, lambda w: hostile.bomb(w, "gzip, gzip, gzip", 64 * MiB))
    result = _scan(path)
    assert _caps(result) == {"coding_depth": 1}
    assert ORDINARY in _findings(result)
    assert result.stats.events == ORDINARY_EVENTS
    (cap,) = result.caps
    assert "3 stacked content codings" in cap.what


# -- one event too big ---------------------------------------------------------------------


def test_an_event_over_the_cap_is_not_read_and_its_gap_is_indeterminate(tmp_path: Path) -> None:
    """An event of 3 MiB against an ``event_bytes`` cap of 1 MiB: not read, reported, and
    the IDs around it (3, then 5) are a gap the capture cannot judge."""
    path = tmp_path / "big.pcap"
    hostile.write(path, lambda w: hostile.big_event(w, 3 * MiB))
    result = _scan(path, event_bytes=1 * MiB)
    assert _caps(result) == {"event_bytes": 1}
    found = _findings(result)
    assert ("missing-stream-gap", "indeterminate", "4", "4") in found
    assert ORDINARY in found
    assert result.stats.events == ORDINARY_EVENTS + 5
    (gap,) = [
        f for f in result.findings if f.gap["first"] == "4" and f.rule == "missing-stream-gap"
    ]
    assert gap.cause == "capped" and "a cap stopped the reading" in gap.message
    # Under the default cap the same event is read whole, and nothing is missing.
    assert _findings(_scan(path)) == _findings(_scan(path, event_bytes=4 * MiB))
    assert ("missing-stream-gap", "indeterminate", "4", "4") not in _findings(_scan(path))


def test_sse_parser_memory_is_bounded_by_the_event_cap() -> None:
    """One endless event (64 MiB, fed in 64 KiB pieces) costs the parser no memory past the
    cap: its bytes are only scanned for the blank line that ends it."""
    parser = SSEParser(report_empty=True, max_event_bytes=1 * MiB)
    piece = b"y" * (64 << 10)
    tracemalloc.start()
    try:
        assert parser.feed(b"id: 1\ndata: a\n\nid: 2\ndata: ") == [parser_event(1)]
        for _ in range(1024):
            assert parser.feed(piece) == []
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    events = parser.feed(b"\n\nid: 3\ndata: c\n\n")
    assert [e.id for e in events] == ["3"]
    (anomaly,) = [a for a in parser.take_anomalies() if a.kind == "event-over-cap"]
    assert anomaly.start == 15  # where block 2 starts
    (partial,) = parser.take_partial_blocks()
    assert partial.id_field == "2" and not partial.terminated
    assert peak < 4 * MiB, peak


def parser_event(n: int):
    first = SSEParser(report_empty=True)
    (event,) = first.feed(b"id: %d\ndata: a\n\n" % n)
    return event


# -- flows and streams tracked at once -----------------------------------------------------


def test_flow_table_never_holds_more_than_the_cap() -> None:
    tracker = ConnectionTracker(max_flows=100)
    most = 0
    for n in range(2000):
        origin = Origin("flood.pcap", n + 1, float(n))
        ip = f"10.1.{n >> 8}.{n & 0xFF}"
        tracker.feed(TCPSegment(origin, ip, 40000, "10.9.0.2", 8000, n, 0, TCP_SYN, 65535, b""))
        most = max(most, tracker.tracked)
    assert most == 100
    assert tracker.evicted == 1900 and tracker.first_eviction.number == 101
    assert len(tracker.take_finished()) == 1900  # evicted connections are finalised


@pytest.mark.parametrize("payload", [False, True], ids=["syn-only", "syn-plus-1-byte"])
def test_syn_flood_is_bounded_by_the_flows_cap(tmp_path: Path, payload: bool) -> None:
    """Issue row: 1,000,000 SYN-only connections / SYN + 1 byte. Sized down: 3,000 SYNs
    against a table of 200 flows."""
    path = tmp_path / "flood.pcap"
    hostile.write(path, lambda w: hostile.syn_flood(w, 3000, payload=payload))
    result = _scan(path, flows=200)
    assert _caps(result) == {"flows": 1}
    # 3,001 flows through a table of 200: the ordinary connection (finished, forgotten) and
    # 2,800 open ones made room; the last 200 stay to the end.
    assert result.loss.evicted_connections == 3000 - 200
    assert result.stats.tcp_connections == 3001
    assert ORDINARY in _findings(result)
    if payload:
        # One broken request head per connection: the first 100 of each kind are listed,
        # the rest counted in one line (the output does not grow with the flood).
        summaries = [e.what for e in result.errors if "more input problem(s)" in e.what]
        assert len(result.errors) == 1 + 2 * 100 + len(summaries)
        assert sorted(int(w.split()[0]) for w in summaries) == [100, 2700]


def test_evicted_streams_end_where_they_were_evicted(tmp_path: Path) -> None:
    """Open event streams pushed out of the flow table end in a ``cap`` span: nothing
    past it is judged on them, and their later packets are new connections."""
    path = tmp_path / "streams.pcap"
    # No handshake captured: the exact path (the fast one keeps no flow table).
    hostile.write(path, lambda w: hostile.concurrent_streams(w, 300, events=3, handshake=False))
    result = _scan(path, flows=100)
    assert _caps(result) == {"flows": 1}
    ends = result.tables["streams"]["end_reason"].to_list()
    assert ends.count("evicted") == 300 and ends.count("complete") == 1  # the ordinary one
    unjudged = [json.loads(u) for u in result.tables["sessions"]["unjudged"].drop_nulls()]
    assert sum("(cap)" in item["why"] for items in unjudged for item in items) == 300
    assert _findings(result) == {
        ORDINARY,
        ("client-accepted-gap", "silent_corruption", "8", "12"),
        ("resumable-while-evicting", "silent_corruption", "8", "12"),
    }


def test_the_streams_cap_evicts_the_stream_idle_the_longest(tmp_path: Path) -> None:
    """Issue 16: ``streams`` bounds the event streams parsed at once. 300 open streams read
    on the exact path (no handshake captured) through a table of 100: the first 200 are
    ended where they stood (their events after it not read, their streams not judged past
    it), the cap is reported once, and the ordinary gap is still found."""
    path = tmp_path / "streams.pcap"
    hostile.write(path, lambda w: hostile.concurrent_streams(w, 300, events=3, handshake=False))
    result = _scan(path, streams=100)
    assert _caps(result) == {"streams": 1}
    (cap,) = result.caps
    assert cap.what.startswith("200 open event stream(s) evicted")
    assert result.loss.evicted_connections == 0  # streams, not connections, went
    # Heads first, then the events round-robin: only the last 100 streams' events are read.
    assert result.stats.events == ORDINARY_EVENTS + 100 * 3
    unjudged = [json.loads(u) for u in result.tables["sessions"]["unjudged"].drop_nulls()]
    assert sum("(cap)" in item["why"] for items in unjudged for item in items) == 200
    assert ORDINARY in _findings(result)
    assert _scan(path).caps == []  # under the default cap nothing is evicted


def test_a_gap_past_a_stream_eviction_is_not_judged(tmp_path: Path) -> None:
    """A jump on a stream after the ``streams`` cap evicted it is not reported as a silent
    gap (its bytes were not parsed): the stream is listed as not judged past the cut."""
    path = tmp_path / "evicted-jump.pcap"
    hostile.write(path, hostile.evicted_jump)
    jump = ("missing-stream-gap", "silent_corruption", "105", "107")
    assert {ORDINARY, jump} <= _findings(_scan(path))
    result = _scan(path, streams=1)
    assert _caps(result) == {"streams": 1}
    assert ORDINARY in _findings(result)
    assert not any(f[2:] == ("105", "107") for f in _findings(result))
    (items,) = [json.loads(u) for u in result.tables["sessions"]["unjudged"].drop_nulls()]
    (item,) = items
    assert "after event 103: what was sent after it could not be seen" in item["why"]


# -- inconsistent retransmissions ----------------------------------------------------------

INCONSISTENT = SAMPLES / "crafted-inconsistent-retransmission.pcap"


def test_inconsistent_retransmission_is_reported_per_connection() -> None:
    """Issue: retransmissions whose bytes differ from the first copy are reported with the
    frames, offsets and both versions' first bytes (Zeek's inconsistent retransmission)."""
    result = scan_paths([str(INCONSISTENT)], jobs=1)
    (error,) = result.errors
    assert error.frame == 23
    assert "inconsistent retransmission on connection 1" in error.what
    assert "server bytes 1247-1516" in error.what and "frame 22" in error.what
    assert "b': keep-alive    '" in error.what and "b'id: 8\\nevent: mes'" in error.what
    loss = result.loss
    assert (loss.inconsistent_retransmissions, loss.inconsistent_bytes) == (1, 270)
    assert loss.connections_with_inconsistencies == 1
    (conn,) = [c for c in result.connections if c.inconsistencies]
    (report,) = conn.inconsistencies
    assert (report.first.number, report.second.number) == (22, 23)


def test_a_gap_an_inconsistent_retransmission_touches_is_indeterminate() -> None:
    result = scan_paths([str(INCONSISTENT)], jobs=1)
    (gap,) = [
        f
        for f in result.findings
        if f.rule == "missing-stream-gap" and f.classification == "indeterminate"
    ]
    assert (gap.gap["first"], gap.gap["last"]) == ("8", "9")
    assert gap.cause == "inconsistent-retransmission"
    assert "captured twice with different contents" in gap.message
    frames = {e["frame"] for e in gap.evidence}
    assert {22, 23} <= frames
    assert ORDINARY in _findings(result)  # the other connection's ordinary gap


def test_fast_path_hands_inconsistent_copies_to_the_exact_path() -> None:
    with index_captures([str(INCONSISTENT)]) as index:
        summary = reassemble_fast(index, lambda *_rows: None)
    assert summary.fallbacks == {R_INCONSISTENT: 1}
    assert summary.fast == 1  # the other connection's copies agree
