"""The columnar whole-body parser gives exactly what ``SSEParser(report_empty=True)`` gives for
one ``feed()`` of the same body followed by ``close()``: differential tests, hand-written edge
cases and a hypothesis property over SSE-ish bodies.

``SSE_FORENSICS_FUZZ_EXAMPLES=N`` runs N property examples instead of the default few hundred.
"""

from __future__ import annotations

import os
import random
from contextlib import contextmanager
from typing import Any
from unittest import mock

import numpy as np
import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sse_forensics.reassembly import sse_columns
from sse_forensics.reassembly.sse import SSEParser
from sse_forensics.reassembly.sse_columns import (
    ANOMALY_SCHEMA,
    COMMENT_SCHEMA,
    EVENT_SCHEMA,
    RETRY_MAX,
    parse_body,
)

EXAMPLES = int(os.environ.get("SSE_FORENSICS_FUZZ_EXAMPLES", "300"))
PROPERTY = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    derandomize="SSE_FORENSICS_FUZZ_EXAMPLES" not in os.environ,
)


def reference(body: bytes, *, report_empty: bool = True) -> dict[str, Any]:
    parser = SSEParser(report_empty=report_empty)
    events = parser.feed(body) + parser.close()
    return {
        "events": [
            (
                e.start,
                e.end,
                e.id,
                e.id_field,
                e.event,
                e.data,
                None if e.retry is None else min(e.retry, RETRY_MAX),
                e.dispatched,
            )
            for e in events
        ],
        "comments": [(c.start, c.end, c.text) for c in parser.take_comments()],
        "anomalies": [(a.kind, a.start, a.end, a.detail) for a in parser.take_anomalies()],
        "trailing": parser.trailing,
        "last_event_id": parser.last_event_id,
        "id_buffer": parser._id_buffer,  # the buffer a parse continuing after a hole starts from
        "reconnection_time": (
            None if parser.reconnection_time is None else min(parser.reconnection_time, RETRY_MAX)
        ),
        "invalid_utf8": parser.invalid_utf8,
        "end": parser.offset,
    }


def columnar(body: bytes, **kwargs: Any) -> dict[str, Any]:
    result = parse_body(body, **kwargs)
    assert result.events.schema == pl.Schema(EVENT_SCHEMA)
    assert result.comments.schema == pl.Schema(COMMENT_SCHEMA)
    assert result.anomalies.schema == pl.Schema(ANOMALY_SCHEMA)
    assert result.trailing_start == result.end - len(result.trailing)
    return {
        "events": result.events.rows(),
        "comments": result.comments.rows(),
        "anomalies": result.anomalies.rows(),
        "trailing": result.trailing,
        "last_event_id": result.last_event_id,
        "id_buffer": result.id_buffer,
        "reconnection_time": result.reconnection_time,
        "invalid_utf8": result.invalid_utf8,
        "end": result.end,
    }


@contextmanager
def small_buffers():
    """Exercise the multi-segment slicing and chunked scanning paths on small bodies."""
    with (
        mock.patch.object(sse_columns, "SEGMENT_BYTES", 8),
        mock.patch.object(sse_columns, "_SCAN_CHUNK", 5),
        mock.patch.object(sse_columns, "_CHECK_BYTES", 6),
    ):
        yield


def assert_same(body: bytes) -> dict[str, Any]:
    expected = reference(body)
    assert columnar(body) == expected
    with small_buffers():
        assert columnar(body) == expected
    expected_dispatched = reference(body, report_empty=False)
    assert columnar(body, report_empty=False) == expected_dispatched
    return expected


# -- hand-written edge cases ---------------------------------------------------------------

EDGE_CASES = {
    "empty": b"",
    "mcp": (
        b'id: 17\nevent: message\ndata: {"jsonrpc":"2.0","method":"notifications/progress"}\n\n'
        b"id: 18\nevent: message\ndata: {}\n\n"
    ),
    "spec example": (
        b": test stream\n\ndata: first event\nid: 1\n\ndata:second event\nid\n\n"
        b"data:  third event\n"
    ),
    "spec empty data": b"data\n\ndata\ndata\n\ndata:",
    "bom": b"\xef\xbb\xbfdata: x\n\n",
    "bom only": b"\xef\xbb\xbf",
    "bom comment first": b"\xef\xbb\xbf: hi\ndata: x\n\n",
    "bom twice": b"\xef\xbb\xbf\xef\xbb\xbfdata: y\n\n",
    "bom later": b"data: x\n\n\xef\xbb\xbfdata: y\n\n",
    "bom prefix only": b"\xef\xbb",
    "bom prefix then data": b"\xef\xbbdata: x\n\ndata: y\n\n",
    "crlf": b"id: 0\r\ndata: \r\n\r\n: ping\r\n\r\nid: abc\r\nevent: message\r\ndata: {}\r\n\r\n",
    "cr only": b"data: a\rdata: b\r\rdata: c\r\r",
    "mixed": b"data: a\r\ndata: b\rdata: c\n\r\ndata: a\r\rdata: b\n\ndata: z\n\r\n",
    "lone cr at end": b"data: a\n\r",
    "cr at end of line": b"data: a\r",
    "cr cr at end": b"data: a\r\r",
    "crlf at end": b"data: a\r\n\r\n",
    "cr first": b"\rdata: x\n\n",
    "lf first": b"\n\ndata: x\n\n",
    "nul in id": b"id: 5\ndata: a\n\nid: 6\x007\ndata: b\n\nid: \x00\n\n",
    "nul elsewhere": b"data: a\x00b\n\nevent: \x00\n\n:\x00\n\n",
    "empty id resets": b"id: 5\ndata: a\n\nid\ndata: b\n\nid: 6\n\nid:\ndata: c\n\nid: \n\n",
    "id space kept": b"id:  7\ndata: a\n\nid: 8 \ndata: b\n\n",
    "retry junk": (
        b"retry: 3000\ndata: x\n\nretry: 1a\ndata: y\n\nretry:\nretry\nretry:  30\n\n"
        b"retry: -1\nretry: 3.5\nretry: \xd9\xa3\ndata: z\n\nretry: 10\nretry: x\n\n"
    ),
    "retry huge": b"retry: 99999999999999999999999\ndata: x\n\nretry: 9223372036854775807\n\n",
    "retry leading zeros": b"retry:0007\n\n",
    "comments": b": ping\n:\ndata: x\n:keep alive\n\n:  two\n:x\r\n",
    "unterminated block": b"data: a\n\nid: 9\ndata: lost",
    "unterminated after comment": b"data: a\n\n: c\nid: 9",
    "trailing comment only": b"data: a\n\n: c",
    "trailing complete lines": b"data: a\n\nid: 4\nretry: 7\nevent: e\n",
    "invalid utf8": b"data: \xff\xfe ok\ndata: fine \xc3\xa9\n: \xc3\n\n",
    "invalid utf8 everywhere": (
        b"\xffdata: a\n\nid: \xc3\ndata: b\n\nevent: \xe2\x82\ndata: c\n\nretry: \xff\n\n"
        b"x\xed\xa0\x80y: z\n\ndata: \xf0\x9f\x98\n\ndata: tail \xff"
    ),
    "invalid utf8 before lone cr": b"data: \xc3\rdata: \xe2\x82\r\n\r\n",
    "invalid with bom": b"\xef\xbb\xbfdata: \xff\n\n",
    "unicode": "data: héllo € 😀\nevent: ünï\nid: ид\n\n".encode(),
    "unicode separators are content": "data: a\u2028b\x85c\x1cd\x0be\x0cf\n\n".encode(),
    "dataless blocks": b"id: 0\nretry: 3000\n\n: ping\n\nevent: prime\n\nfoo\n\n\nid: 1\ndata:\n\n",
    "fields without colon": b"data\nid\nevent\nretry\nfoo\n\nevent\ndata: x\n\n",
    "case sensitive": b"Data: x\n\nDATA: y\n\nID: 3\n\nfoo: bar\ndata: x\n\n",
    "colons in value": b"data: a: b:c\n\ndata:: x\n\n",
    "one space removed": b"data:test\n\ndata: test\n\ndata:  two spaces\n\n",
    "prefix names": b"dat: a\ndatas: b\nids: 1\nevents: x\nretrys: 1\n\n",
    "short lines": b"d\ni\ne\nr\n:\nda\ndat\neve\nretr\n\n",
    "event then dataless": b"event: add\ndata: 1\n\ndata: 2\n\nevent:\ndata: 3\n\nevent: p\n\n",
    "multi data": b"data: YHOO\ndata: +2\ndata: 10\n\ndata:\ndata:\n\ndata: a\n: c\ndata: b\n\n",
    "id after data": b"data: a\nid: 3\n\n",
    "many blanks": b"\n\n\n\ndata: x\n\n\n\n",
    "very long lines": b"data: " + b"x" * 100_000 + b"\nid: " + b"7" * 5_000 + b"\n\n",
    "long comment": b":" + b"k" * 70_000 + b"\n\n",
}


@pytest.mark.parametrize("body", EDGE_CASES.values(), ids=EDGE_CASES.keys())
def test_edge_cases_match_sse_parser(body: bytes):
    assert_same(body)


def test_results_that_matter_explicitly():
    # Not only "same as SSEParser": the WHATWG points the edge cases are about.
    r = parse_body(b"\xef\xbb\xbfid: 1\ndata: a\ndata: b\n\n: hi\r\nretry: 12\r\n\r\ndata: c\r")
    assert r.events.rows() == [
        (3, 26, "1", "1", "message", "a\nb", None, True),
        (32, 45, "1", None, "message", "", 12, False),
    ]
    assert r.comments.rows() == [(26, 32, "hi")]
    assert (r.trailing, r.trailing_start, r.end) == (b"data: c\r", 45, 53)
    # The final CR is a line end at close(): a blank line after it would have dispatched.
    assert parse_body(b"data: c\r\r").events.rows() == [
        (0, 9, "", None, "message", "c", None, True)
    ]


def test_anomalies_in_parser_order():
    r = parse_body(b"id: \xff\x00\nretry: \xff\n:\xfe\n\n")
    assert r.anomalies.rows() == [
        ("invalid-utf8", 0, 7, "invalid start byte"),
        ("id-contains-nul", 0, 7, "\ufffd\x00"),
        ("invalid-utf8", 7, 16, "invalid start byte"),
        ("invalid-retry", 7, 16, "\ufffd"),
        ("invalid-utf8", 16, 19, "invalid start byte"),
    ]
    assert r.invalid_utf8 == 3
    assert_same(b"id: \xff\x00\nretry: \xff\n:\xfe\n\n")


def test_huge_retry_is_capped():
    r = parse_body(b"retry: 99999999999999999999999\ndata: x\n\n")
    assert r.events["retry"].to_list() == [RETRY_MAX]
    assert r.reconnection_time == RETRY_MAX
    # SSEParser raises ValueError here (int() of over 4300 digits); parse_body does not.
    r = parse_body(b"retry: " + b"1" * 5000 + b"\ndata: x\n\n")
    assert (r.events["retry"].to_list(), r.anomalies.height) == ([RETRY_MAX], 0)


def test_random_bytes_take_the_fallback_and_match():
    rng = random.Random(7)
    body = bytes(rng.getrandbits(8) for _ in range(50_000)) + b"\n\ndata: \xff\n\n"
    expected = assert_same(body)
    assert expected["invalid_utf8"] > 10


def test_start_offset_initial_id_continue_a_parse():
    """A body parsed in two pieces continues the state (what a caller does around a hole)."""
    first = b"id: 7\ndata: a\n\nid: 8\n: c\n"
    second = b"data: b\n\n: d\ndata: c\n\n"
    whole = reference(first + second)
    r1 = parse_body(first)
    assert (r1.last_event_id, r1.id_buffer, r1.trailing) == ("7", "8", b"id: 8\n: c\n")
    # Re-parse the unterminated block with what follows, from the committed ID.
    r2 = parse_body(
        r1.trailing + second, start_offset=r1.trailing_start, initial_last_id=r1.last_event_id
    )
    assert r1.events.rows() + r2.events.rows() == whole["events"]
    assert r2.end == whole["end"]
    # Or cut at a blank line and carry the ID buffer.
    cut = len(b"id: 7\ndata: a\n\n")
    r1 = parse_body((first + second)[:cut])
    r2 = parse_body((first + second)[cut:], start_offset=cut, initial_last_id=r1.id_buffer)
    assert r1.events.rows() + r2.events.rows() == whole["events"]
    assert r1.comments.rows() + r2.comments.rows() == whole["comments"]


def test_bom_only_at_stream_start():
    body = b"\xef\xbb\xbfdata: x\n\n"
    assert parse_body(body).events["data"].to_list() == ["x"]
    assert parse_body(body, start_offset=10).events.height == 0  # not the stream start
    assert parse_body(body, start_offset=10, stream_start=True).events["start"].to_list() == [13]
    assert parse_body(body, stream_start=False).events.height == 0


def test_accepts_bytes_like():
    body = b"data: x\n\n"
    assert parse_body(memoryview(body)).events.rows() == parse_body(body).events.rows()
    assert parse_body(bytearray(body)).events.rows() == parse_body(body).events.rows()


def test_byte_scans_stay_under_the_mmap_threshold():
    """Line ends (and chunk-size lines, :class:`~sse_forensics.reassembly.fast.http.ChunkIndex`)
    are found a pass of at most 128 KB at a time: a larger bool temporary is a fresh mapping
    each time, faulted in 4 KB at a time (issue 9); the positions are those of one pass."""
    from sse_forensics.memory import MMAP_THRESHOLD
    from sse_forensics.reassembly.fast.http import ChunkIndex

    rng = random.Random(3)
    body = bytes(rng.choice(b"ab\r\n0:") for _ in range(600_000))
    arr = np.frombuffer(body, dtype=np.uint8)
    widest: list[int] = []
    real = np.flatnonzero

    def spy(a: Any) -> Any:
        widest.append(np.asarray(a).size)
        return real(a)

    with mock.patch.object(sse_columns.np, "flatnonzero", spy):
        got = sse_columns.byte_positions(arr, 10)
        ChunkIndex(body)
    assert max(widest) <= MMAP_THRESHOLD
    assert np.array_equal(got, real(arr == 10))


# -- hypothesis: random SSE-ish bodies -----------------------------------------------------

FRAGMENTS = [
    b"data",
    b"data:",
    b"data: ",
    b"id",
    b"id:",
    b"id: ",
    b"event",
    b"event:",
    b"event: ",
    b"retry",
    b"retry:",
    b"retry: ",
    b":",
    b": ",
    b" ",
    b"\n",
    b"\r",
    b"\r\n",
    b"\n\n",
    b"\r\n\r\n",
    b"\r\r",
    b"x",
    b"message",
    b"7",
    b"123",
    b"-1",
    b"\x00",
    b"\xff",
    b"\xc3",
    b"\xc3\xa9",
    b"\xe2\x82",
    b"\xef\xbb\xbf",
    b"\xef\xbb",
    "€😀".encode(),
    "\u2028".encode(),
    b"\x85",
    b"\x1c",
    b"foo:",
    b"Data:",
    b'{"jsonrpc":"2.0","method":"notifications/progress"}',
]

bodies = st.lists(st.one_of(st.sampled_from(FRAGMENTS), st.binary(max_size=4)), max_size=40).map(
    b"".join
)


@PROPERTY
@given(bodies)
def test_property_matches_sse_parser(body: bytes):
    assert_same(body)


@PROPERTY
@given(bodies, st.sampled_from(["", "41", "é"]))
def test_property_continuation_matches_one_parse(body: bytes, initial: str):
    """``initial_last_id``/``start_offset``/``stream_start`` behave as a parser that already
    read ``id: <initial>`` and a blank line."""
    prefix = b"id: " + initial.encode() + b"\n\n"
    whole = reference(prefix + body)
    prefix_event, *expected_events = whole["events"]
    assert prefix_event[3] == initial  # the id-only block, reported as not dispatched
    r = parse_body(body, start_offset=len(prefix), initial_last_id=initial, stream_start=False)
    assert r.events.rows() == expected_events
    assert r.comments.rows() == whole["comments"]
    assert r.anomalies.rows() == whole["anomalies"]
    assert (r.trailing, r.last_event_id, r.id_buffer, r.end) == (
        whole["trailing"],
        whole["last_event_id"],
        whole["id_buffer"],
        whole["end"],
    )
