"""WHATWG text/event-stream interpretation (HTML §9.2.6), rule by rule, plus provenance,
capture holes and split invariance."""

from __future__ import annotations

import re
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.budget import DEEP

from sse_forensics.provenance import Origin
from sse_forensics.sse import SSEComment, SSEEvent, SSEParser


def parse(body: bytes, **kwargs: bool) -> list[SSEEvent]:
    parser = SSEParser(**kwargs)
    return parser.feed(body) + parser.close()


def datas(body: bytes) -> list[str]:
    return [e.data for e in parse(body)]


def frame(n: int) -> Origin:
    return Origin("cap.pcap", n, 100.0 + n)


# -- the spec's own examples -------------------------------------------------------------


def test_spec_multiline_data_joined_with_lf():
    assert datas(b"data: YHOO\ndata: +2\ndata: 10\n\n") == ["YHOO\n+2\n10"]
    assert datas(b"data: first\ndata: second\n\n") == ["first\nsecond"]


def test_spec_example_ids_and_discarded_last_block():
    body = (
        b": test stream\n\n"
        b"data: first event\nid: 1\n\n"
        b"data:second event\nid\n\n"
        b"data:  third event\n"
    )
    events = parse(body)
    assert [(e.data, e.id) for e in events] == [("first event", "1"), ("second event", "")]


def test_spec_example_empty_data_fields():
    # "data\n\ndata\ndata\n\ndata:" -> "", "\n"; the last block has no blank line: discarded.
    parser = SSEParser()
    events = parser.feed(b"data\n\ndata\ndata\n\ndata:") + parser.close()
    assert [e.data for e in events] == ["", "\n"]
    assert parser.trailing == b"data:"


def test_spec_example_one_leading_space_removed():
    assert datas(b"data:test\n\ndata: test\n\n") == ["test", "test"]
    assert datas(b"data:  two spaces\n\n") == [" two spaces"]


# -- lines -------------------------------------------------------------------------------


@pytest.mark.parametrize("eol", [b"\n", b"\r\n", b"\r"])
def test_each_line_end(eol: bytes):
    events = parse(b"data: a" + eol + b"data: b" + eol + eol + b"data: c" + eol + eol)
    assert [e.data for e in events] == ["a\nb", "c"]


def test_mixed_line_ends_and_cr_cr_is_a_blank_line():
    assert datas(b"data: a\r\ndata: b\rdata: c\n\r\n") == ["a\nb\nc"]
    assert datas(b"data: a\r\rdata: b\n\n") == ["a", "b"]
    assert datas(b"data: a\n\r\n") == ["a"]


def test_cr_lf_split_across_feeds_is_one_line_end():
    parser = SSEParser()
    assert parser.feed(b"data: a\r") == []
    assert parser.feed(b"\n") == []
    assert parser.feed(b"\r") == []  # could be the first half of a blank CRLF
    events = parser.feed(b"\ndata: b\n\n")
    assert [(e.data, e.start, e.end) for e in events] == [("a", 0, 11), ("b", 11, 20)]


def test_cr_at_feed_end_followed_by_other_byte_is_a_line_end():
    parser = SSEParser()
    assert parser.feed(b"data: a\r") == []
    events = parser.feed(b"\rdata: b\n")
    assert [(e.data, e.end) for e in events] == [("a", 9)]


def test_close_turns_held_cr_into_line_end_and_dispatches():
    parser = SSEParser()
    assert parser.feed(b"data: a\n\r") == []
    events = parser.close()
    assert [(e.data, e.start, e.end) for e in events] == [("a", 0, 9)]
    assert parser.trailing == b""


def test_close_never_dispatches_unterminated_block():
    parser = SSEParser()
    parser.feed(b"data: a\n\nid: 9\n", frame(1))
    parser.feed(b"data: lost", frame(2))
    assert parser.close() == []
    assert parser.trailing == b"id: 9\ndata: lost"
    assert parser.trailing_origins == (frame(1), frame(2))
    assert parser.last_event_id == ""  # the id was never committed by a blank line


# -- BOM ---------------------------------------------------------------------------------


def test_bom_stripped_at_start_even_split_across_feeds():
    parser = SSEParser()
    events = []
    for byte in b"\xef\xbb\xbfdata: x\n\n":
        events += parser.feed(bytes([byte]))
    assert [(e.data, e.start, e.end) for e in events] == [("x", 3, 12)]
    assert parser.invalid_utf8 == 0


def test_bom_only_at_stream_start():
    # A BOM later (or a second one) is content: the field name becomes "\ufeffdata".
    assert datas(b"data: x\n\n\xef\xbb\xbfdata: y\n\n") == ["x"]
    assert datas(b"\xef\xbb\xbf\xef\xbb\xbfdata: y\n\n") == []


def test_partial_bom_prefix_is_content():
    parser = SSEParser()
    assert parser.feed(b"\xef\xbb") == []
    events = parser.feed(b"data: x\n\ndata: y\n\n")
    assert [e.data for e in events] == ["y"]  # first field name was "\ufffddata"
    assert parser.invalid_utf8 == 1
    parser2 = SSEParser()
    parser2.feed(b"\xef")
    assert parser2.close() == []
    assert parser2.trailing == b"\xef"


# -- fields ------------------------------------------------------------------------------


def test_comment_lines_are_ignored_and_reported():
    parser = SSEParser()
    events = parser.feed(b": ping\n:\ndata: x\n:keep alive\n\n", frame(4))
    assert [e.data for e in events] == ["x"]
    assert parser.take_comments() == [
        SSEComment("ping", 0, 7, frame(4)),
        SSEComment("", 7, 9, frame(4)),
        SSEComment("keep alive", 17, 29, frame(4)),
    ]
    assert parser.take_comments() == []
    # Leading comments are not part of the event; an inner one is.
    assert (events[0].start, events[0].end) == (9, 30)


def test_line_without_colon_is_field_with_empty_value():
    assert datas(b"data\n\n") == [""]
    events = parse(b"event\ndata: x\n\n")
    assert events[0].event == "message"


def test_value_keeps_later_colons_and_field_names_are_case_sensitive():
    assert datas(b"data: a: b:c\n\n") == ["a: b:c"]
    assert datas(b"Data: x\n\nDATA: y\n\n") == []
    assert datas(b"foo: bar\ndata: x\n\n") == ["x"]


def test_event_type_defaults_to_message_and_resets_after_dispatch():
    events = parse(b"event: add\ndata: 1\n\ndata: 2\n\nevent:\ndata: 3\n\n")
    assert [(e.event, e.data) for e in events] == [("add", "1"), ("message", "2"), ("message", "3")]


def test_event_type_of_dataless_block_does_not_leak_into_next():
    events = parse(b"event: prime\n\ndata: x\n\n")
    assert [(e.event, e.data) for e in events] == [("message", "x")]


def test_id_inherited_by_later_events():
    events = parse(b"id: 7\ndata: a\n\ndata: b\n\nid: 8\ndata: c\n\n")
    assert [(e.id, e.id_field) for e in events] == [("7", "7"), ("7", None), ("8", "8")]


def test_id_set_after_data_in_same_block_applies_to_it():
    assert [e.id for e in parse(b"data: a\nid: 3\n\n")] == ["3"]


def test_id_with_nul_is_ignored_and_noted():
    parser = SSEParser()
    events = parser.feed(b"id: 5\ndata: a\n\nid: 6\x007\ndata: b\n\n")
    assert [(e.id, e.id_field) for e in events] == [("5", "5"), ("5", None)]
    assert [(a.kind, a.start, a.end) for a in parser.take_anomalies()] == [
        ("id-contains-nul", 15, 23)
    ]


@pytest.mark.parametrize("line", [b"id", b"id:", b"id: "])
def test_empty_id_resets_last_event_id(line: bytes):
    parser = SSEParser()
    events = parser.feed(b"id: 5\ndata: a\n\n" + line + b"\ndata: b\n\n")
    assert [(e.id, e.id_field) for e in events] == [("5", "5"), ("", "")]
    assert parser.last_event_id == ""


@pytest.mark.parametrize(
    ("line", "retry"),
    [
        (b"retry: 3000", 3000),
        (b"retry:0", 0),
        (b"retry: 1a", None),
        (b"retry:", None),
        (b"retry", None),
        (b"retry:  3000", None),  # the second space stays in the value
        (b"retry: -1", None),
        (b"retry: 3.5", None),
        ("retry: ٣".encode(), None),  # a digit, but not an ASCII one
    ],
)
def test_retry_only_ascii_digits(line: bytes, retry: int | None):
    parser = SSEParser()
    events = parser.feed(line + b"\ndata: x\n\n")
    assert events[0].retry == retry
    assert parser.reconnection_time == retry
    assert bool(parser.take_anomalies()) == (retry is None)


def test_retry_is_per_block_but_reconnection_time_persists():
    parser = SSEParser()
    events = parser.feed(b"retry: 10\ndata: a\n\ndata: b\n\n")
    assert [e.retry for e in events] == [10, None]
    assert parser.reconnection_time == 10


# -- decoding ----------------------------------------------------------------------------


def test_invalid_utf8_replaced_counted_never_raises():
    parser = SSEParser()
    events = parser.feed(b"data: \xff\xfe ok\ndata: fine \xc3\xa9\n: \xc3\n\n", frame(1))
    assert [e.data for e in events] == ["\ufffd\ufffd ok\nfine é"]
    assert parser.invalid_utf8 == 2
    assert [(a.kind, a.start, a.origin) for a in parser.take_anomalies()] == [
        ("invalid-utf8", 0, frame(1)),
        ("invalid-utf8", 26, frame(1)),
    ]


def test_multibyte_char_split_across_feeds_is_valid():
    body = "data: héllo €\n\n".encode()
    parser = SSEParser()
    events = [e for i in range(len(body)) for e in parser.feed(body[i : i + 1])]
    assert [e.data for e in events] == ["héllo €"]
    assert parser.invalid_utf8 == 0


# -- dispatch of data-less blocks (priming events) ---------------------------------------


def test_id_only_block_not_dispatched_by_default_but_commits_last_event_id():
    parser = SSEParser()
    assert parser.feed(b"id: 0\nretry: 3000\n\n") == []
    assert parser.last_event_id == "0"
    events = parser.feed(b"data: x\n\n")
    assert [(e.id, e.id_field) for e in events] == [("0", None)]


def test_report_empty_returns_dataless_blocks_marked_not_dispatched():
    parser = SSEParser(report_empty=True)
    events = parser.feed(b"id: 0\nretry: 3000\n\n: ping\n\nevent: prime\n\nfoo\n\n\n")
    assert [(e.id, e.event, e.data, e.retry, e.id_field, e.dispatched) for e in events] == [
        ("0", "message", "", 3000, "0", False),
        ("0", "prime", "", None, None, False),
    ]
    # A "data:" line makes a non-empty data buffer ("\n"): dispatched per WHATWG.
    assert [e.dispatched for e in parser.feed(b"id: 1\ndata:\n\n")] == [True]


def test_mcp_sdk_crlf_stream_and_priming_event():
    body = (
        b"id: 0\r\ndata: \r\n\r\n"
        b": ping - 2025-01-01\r\n\r\n"
        b'id: abc\r\nevent: message\r\ndata: {"jsonrpc":"2.0","id":1,"result":{}}\r\n\r\n'
        b"id: x\nretry: 3000\ndata:\n\n"
    )
    parser = SSEParser()
    events = parser.feed(body) + parser.close()
    # "data: " gives the data buffer "\n": WHATWG dispatches the priming event, data "".
    assert [(e.id, e.event, e.data, e.retry) for e in events] == [
        ("0", "message", "", None),
        ("abc", "message", '{"jsonrpc":"2.0","id":1,"result":{}}', None),
        ("x", "message", "", 3000),
    ]
    assert [(e.start, e.end) for e in events] == [(0, 17), (40, 111), (111, 136)]
    assert [c.text for c in parser.take_comments()] == ["ping - 2025-01-01"]


# -- provenance --------------------------------------------------------------------------


def test_event_spanning_three_feeds_has_three_origins_and_exact_offsets():
    parser = SSEParser()
    assert parser.feed(b"data: a\n\nid: 4", frame(1)) == [
        SSEEvent("", "message", "a", None, None, 0, 9, (frame(1),))
    ]
    assert parser.feed(b"\ndata: long", frame(2)) == []
    assert parser.feed(b"\n", frame(2)) == []  # same frame twice (two chunks): one origin
    events = parser.feed(b"\n: after\ndata", frame(3))
    assert events == [
        SSEEvent("4", "message", "long", None, "4", 9, 27, (frame(1), frame(2), frame(3)))
    ]
    assert (events[0].first_ts, events[0].last_ts) == (101.0, 103.0)
    assert parser.offset == 39
    assert parser.trailing == b"data"
    assert parser.trailing_origins == (frame(3),)


def test_event_not_touching_a_frame_does_not_cite_it():
    parser = SSEParser()
    parser.feed(b"data: a\n\n", frame(1))
    events = parser.feed(b"data: b\n\n", frame(2))
    assert events[0].origins == (frame(2),)


def test_offsets_count_bom_and_line_ends():
    events = parse(b"\xef\xbb\xbfdata: a\r\n\r\ndata: b\r\r")
    assert [(e.start, e.end) for e in events] == [(3, 14), (14, 23)]


def test_large_block_in_small_feeds_keeps_only_its_own_bytes():
    payload = b"x" * 3_000_000
    body = b"data: a\n\n" * 1000 + b"id: big\ndata: " + payload + b"\n\n" + b"data: tail"
    parser = SSEParser()
    events = []
    for i in range(0, len(body), 1460):
        events += parser.feed(body[i : i + 1460], frame(i // 1460))
    assert len(events) == 1001
    big = events[-1]
    assert (big.id, len(big.data), big.start) == ("big", len(payload), 9000)
    assert big.origins[0] == frame(9000 // 1460) and big.origins[-1] == frame((big.end - 1) // 1460)
    assert len(big.origins) == (big.end - 1) // 1460 - 9000 // 1460 + 1
    assert parser.trailing == b"data: tail"


# -- capture holes -----------------------------------------------------------------------


def test_skip_discards_cut_block_and_resyncs_at_next_blank_line():
    parser = SSEParser()
    events = parser.feed(b"id: 1\ndata: a\n\nid: 2\ndata: b", frame(1))
    assert [e.id for e in events] == ["1"]
    assert parser.skip(100) == []
    assert parser.offset == 128
    # "rest\n" closes the cut line; "data: c\n" is a full line of the cut block.
    events = parser.feed(b"rest\ndata: c\nid: 3\n\nid: 4\ndata: d\n\n", frame(2))
    assert [(e.id, e.data, e.start, e.end) for e in events] == [("4", "d", 148, 163)]
    [partial] = parser.take_partial_blocks()
    assert (partial.start, partial.end, partial.holes) == (15, 148, ((28, 100),))
    assert (partial.id_field, partial.data_lines, partial.terminated) == (
        "3",
        1,
        True,
    )  # "data: b" was cut by the hole
    assert partial.origins == (frame(1), frame(2))
    assert parser.last_event_id == "4"


def test_skip_line_end_right_after_hole_is_not_a_blank_line():
    # The hole may have ended mid-line: its first line end only closes that line.
    parser = SSEParser()
    parser.feed(b"data: a\n\n")
    parser.skip(10)
    assert parser.feed(b"\ndata: b\n\ndata: c\n\n") == [
        SSEEvent("", "message", "c", None, None, 29, 38)
    ]
    [partial] = parser.take_partial_blocks()
    assert (partial.start, partial.end, partial.data_lines) == (9, 29, 1)


def test_skip_after_held_cr_completes_the_line_first():
    parser = SSEParser()
    assert parser.feed(b"data: a\n\r") == []
    events = parser.skip(5)
    assert [(e.data, e.end) for e in events] == [("a", 9)]


def test_skip_unknown_length_marks_offsets_inexact_and_close_reports_unterminated():
    parser = SSEParser()
    parser.feed(b"data: a")
    parser.skip(None)
    assert not parser.offsets_exact
    parser.feed(b"xx\ndata: b\n")
    assert parser.close() == []
    [partial] = parser.take_partial_blocks()
    assert (partial.start, partial.holes, partial.terminated) == (0, ((7, None),), False)


# -- split invariance and robustness (hypothesis) ----------------------------------------

EOLS = st.sampled_from([b"\n", b"\r\n", b"\r"])
TEXT = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\r\n"), max_size=12
)
FIELD_LINE = st.one_of(
    st.builds(lambda v: b"data:" + v.encode(), TEXT),
    st.builds(lambda v: b"data: " + v.encode(), TEXT),
    st.just(b"data"),
    st.builds(lambda v: b"id: " + v.encode(), TEXT),
    st.builds(lambda v: b"id:" + v.encode(), st.sampled_from(["", "1", "a\x00b", "s7_12"])),
    st.builds(lambda v: b"event: " + v.encode(), TEXT),
    st.builds(lambda v: b"retry: " + v.encode(), st.sampled_from(["", "10", "1a", "007"])),
    st.builds(lambda v: b":" + v.encode(), TEXT),
    st.builds(lambda v: v.encode(), TEXT),
    st.binary(max_size=6).map(lambda b: b.replace(b"\r", b"").replace(b"\n", b"")),
    st.just(b""),  # blank line: dispatch
)


@st.composite
def streams(draw: st.DrawFn) -> bytes:
    lines = draw(st.lists(st.tuples(FIELD_LINE, EOLS), max_size=30))
    body = b"".join(line + eol for line, eol in lines)
    if draw(st.booleans()):
        body = b"\xef\xbb\xbf" + body
    return body + draw(st.sampled_from([b"", b"data: tail", b"\r", b"\xef"]))


def split(body: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(body) + 1) for c in cuts})
    return [body[a:b] for a, b in zip([0, *points], [*points, len(body)], strict=True)]


def facts(events: list[SSEEvent]) -> list[tuple[object, ...]]:
    return [
        (e.id, e.event, e.data, e.retry, e.id_field, e.start, e.end, e.dispatched) for e in events
    ]


def reference(body: bytes) -> list[tuple[str, str, str]]:
    """A literal transcription of §9.2.6 over the decoded text, for cross-checking."""
    text = body.decode("utf-8", "replace").removeprefix("\ufeff")
    lines = re.split(r"\r\n|\r(?!\n)|\n", text)[:-1]  # the last piece has no line end
    data, event_type, last_id, out = "", "", "", []
    for line in lines:
        if line == "":
            if data:
                out.append((last_id, event_type or "message", data.removesuffix("\n")))
            data, event_type = "", ""
            continue
        if line.startswith(":"):
            continue
        field, colon, value = line.partition(":")
        value = value.removeprefix(" ") if colon else ""
        if field == "data":
            data += value + "\n"
        elif field == "event":
            event_type = value
        elif field == "id" and "\x00" not in value:
            last_id = value
    return out


@settings(max_examples=300, deadline=None)
@given(streams(), st.lists(st.integers(min_value=0), max_size=8), st.booleans())
def test_any_split_gives_the_same_events(body: bytes, cuts: list[int], report_empty: bool):
    whole = parse(body, report_empty=report_empty)
    parser = SSEParser(report_empty=report_empty)
    pieces = [e for piece in split(body, cuts) for e in parser.feed(piece)] + parser.close()
    assert facts(pieces) == facts(whole)
    assert [(e.id, e.event, e.data) for e in parse(body)] == reference(body)
    assert parser.offset == len(body)


@settings(max_examples=300, deadline=None)
@given(
    st.binary(max_size=200),
    st.lists(st.integers(min_value=0), max_size=6),
    st.lists(st.one_of(st.none(), st.integers(0, 50)), max_size=3),
)
def test_random_bytes_and_holes_never_raise(body: bytes, cuts: list[int], holes: list[int | None]):
    parser = SSEParser(report_empty=True)
    for i, piece in enumerate(split(body, cuts)):
        parser.feed(piece, frame(i))
        if holes and i % 2:
            parser.skip(holes.pop())
    parser.close()
    parser.take_comments(), parser.take_anomalies(), parser.take_partial_blocks()
    assert isinstance(parser.trailing, bytes)


# -- throughput (printed, not asserted) --------------------------------------------------


def test_throughput_typical_mcp_events(capsys: pytest.CaptureFixture[str]):
    event = (
        b"id: s7_{n}\r\nevent: message\r\n"
        b'data: {"jsonrpc":"2.0","method":"notifications/progress","params":'
        b'{"progressToken":"tok-1","progress":{n},"total":100000,"message":"working"}}'
        b"\r\n\r\n"
    )
    parts, size, n = [], 0, 0
    # Every event of a body in 1460-byte feeds; the MB/s printed is a figure for 50 MB bodies
    # under HYPOTHESIS_PROFILE=deep (and benchmarks/sse_parse_bench.py), 4 MB per commit.
    while size < (50 if DEEP else 4) * 1024 * 1024:
        chunk = event.replace(b"{n}", str(n).encode())
        parts.append(chunk)
        size += len(chunk)
        n += 1
        if n % 20 == 0:
            parts.append(b": ping\r\n\r\n")
            size += 10
    body = b"".join(parts)
    feeds = [body[i : i + 1460] for i in range(0, len(body), 1460)]
    origins = [frame(i) for i in range(len(feeds))]
    parser = SSEParser()
    count = 0
    began = time.perf_counter()
    for piece, origin in zip(feeds, origins, strict=True):
        count += len(parser.feed(piece, origin))
    count += len(parser.close())
    elapsed = time.perf_counter() - began
    assert count == n
    with capsys.disabled():
        print(f"\nSSEParser: {len(body) / 1e6 / elapsed:.1f} MB/s ({n} events, {len(body)} bytes)")
