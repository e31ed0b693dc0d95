"""TCPStreamReassembler: segments in, in-order data and missing spans out."""

from __future__ import annotations

from sse_forensics.provenance import Origin
from sse_forensics.reassembly.stream import Inconsistency, MissingSpan, StreamData
from sse_forensics.reassembly.tcp import TCPStreamReassembler

ISN = 1000


def f(n: int) -> Origin:
    return Origin("t.pcap", n, float(n))


def pieces(out: list) -> list[tuple]:
    """(kind, offset, data-or-length, frame) for compact comparisons."""
    rows = []
    for p in out:
        if isinstance(p, StreamData):
            rows.append(("data", p.offset, p.data, p.origin.number))
        else:
            rows.append(
                (
                    p.reason,
                    p.offset,
                    p.length,
                    p.after.number if p.after else None,
                    p.before.number if p.before else None,
                )
            )
    return rows


def opened(isn: int = ISN) -> TCPStreamReassembler:
    r = TCPStreamReassembler("server")
    assert r.segment(isn, b"", f(1), syn=True) == []
    return r


def test_in_order_data_is_emitted_at_once_with_its_frame():
    r = opened()
    assert pieces(r.segment(ISN + 1, b"HTTP/1.1 ", f(2))) == [("data", 0, b"HTTP/1.1 ", 2)]
    assert pieces(r.segment(ISN + 10, b"200 OK", f(3))) == [("data", 9, b"200 OK", 3)]
    assert r.syn_seen and not r.mid_stream
    assert r.close() == []


def test_out_of_order_segment_is_held_until_the_hole_fills():
    r = opened()
    assert r.segment(ISN + 4, b"def", f(2)) == []
    assert r.buffered == 3
    assert pieces(r.segment(ISN + 1, b"abc", f(3))) == [
        ("data", 0, b"abc", 3),
        ("data", 3, b"def", 2),
    ]
    assert r.buffered == 0


def test_exact_retransmission_is_dropped():
    r = opened()
    r.segment(ISN + 1, b"abc", f(2))
    assert r.segment(ISN + 1, b"abc", f(3)) == []


def test_differing_retransmission_is_reported_and_the_first_copy_kept():
    """Issue 16: Zeek's "inconsistent retransmission": the first copy wins, but the
    receiver may have kept the other, so the capture says so (stretch, both frames, both
    versions' bytes)."""
    r = opened()
    r.segment(ISN + 1, b"abcdef", f(2))
    (report,) = r.segment(ISN + 1, b"abXYeZ", f(3))
    assert isinstance(report, Inconsistency)
    assert (report.offset, report.length) == (2, 4)  # bytes 2..5: "cdef" against "XYeZ"
    assert (report.first.number, report.second.number) == (2, 3)
    assert (report.first_bytes, report.second_bytes) == (b"cdef", b"XYeZ")
    # Partly new bytes: the report, then only the new bytes.
    out = r.segment(ISN + 5, b"EFgh", f(4))
    assert isinstance(out[0], Inconsistency) and (out[0].offset, out[0].length) == (4, 2)
    assert pieces(out[1:]) == [("data", 6, b"gh", 4)]


def test_acknowledged_bytes_are_not_compared():
    """A receiver drops a retransmission of bytes it acknowledged: no two versions."""
    r = opened()
    r.segment(ISN + 1, b"abcdef", f(2))
    r.acknowledged(ISN + 7, f(3))
    assert r.segment(ISN + 1, b"XXXXXX", f(4)) == []


def test_partial_overlap_emits_only_new_bytes():
    r = opened()
    r.segment(ISN + 1, b"0123456789", f(2))
    assert pieces(r.segment(ISN + 6, b"56789abcde", f(3))) == [("data", 10, b"abcde", 3)]


def test_overlapping_held_segments_first_copy_wins():
    r = opened()
    assert r.segment(ISN + 11, b"AAAAAAAAAA", f(2)) == []  # [10, 20)
    (report,) = r.segment(ISN + 6, b"BBBBBBBBBBBBBBBBBBBB", f(3))  # [5, 25)
    assert isinstance(report, Inconsistency)
    assert (report.offset, report.length, report.first.number) == (10, 10, 2)
    out = pieces(r.segment(ISN + 1, b"ccccc", f(4)))
    assert out == [
        ("data", 0, b"ccccc", 4),
        ("data", 5, b"BBBBB", 3),
        ("data", 10, b"AAAAAAAAAA", 2),
        ("data", 20, b"BBBBB", 3),
    ]
    assert r.buffered == 0


def test_hole_filled_late_releases_everything_in_order():
    r = opened()
    for i in range(1, 6):
        assert r.segment(ISN + 1 + 10 * i, bytes([65 + i]) * 10, f(10 + i)) == []
    out = r.segment(ISN + 1, b"A" * 10, f(20))
    assert [p.offset for p in out] == [0, 10, 20, 30, 40, 50]
    assert b"".join(p.data for p in out) == b"".join(bytes([65 + i]) * 10 for i in range(6))
    assert [p.origin.number for p in out] == [20, 11, 12, 13, 14, 15]


def test_hole_never_filled_becomes_a_missing_span_at_close():
    r = opened()
    r.segment(ISN + 1, b"a" * 100, f(2))
    assert r.segment(ISN + 1 + 250, b"z" * 50, f(5)) == []
    out = r.close()
    assert pieces(out) == [("hole", 100, 150, 2, 5), ("data", 250, b"z" * 50, 5)]
    assert isinstance(out[0], MissingSpan) and out[0].direction == "server"


def test_acked_unseen_hole_is_reported_and_held_data_released():
    r = opened()
    r.segment(ISN + 1, b"a" * 100, f(2))
    r.segment(ISN + 201, b"c" * 100, f(4))  # [200, 300); [100, 200) never captured
    assert r.acknowledged(ISN + 101, f(3)) == []  # below the hole: nothing to say
    out = r.acknowledged(ISN + 351, f(6))  # peer has everything up to 350
    assert pieces(out) == [
        ("acked-unseen", 100, 100, 2, 4),
        ("data", 200, b"c" * 100, 4),
        ("acked-unseen", 300, 50, 4, 6),
    ]
    # The bytes arriving late are duplicates of what was declared missing.
    assert r.segment(ISN + 101, b"b" * 100, f(7)) == []


def test_ack_of_fin_does_not_count_as_missing_byte():
    r = opened()
    r.segment(ISN + 1, b"abc", f(2), fin=True)
    assert r.acknowledged(ISN + 5, f(3)) == []  # ISN+1+3 data, +1 for the FIN


def test_sequence_wraparound_across_2_to_the_32():
    isn = (1 << 32) - 3
    r = opened(isn)
    out = r.segment((isn + 1) % (1 << 32), b"abcd", f(2))  # crosses 0
    out += r.segment((isn + 5) % (1 << 32), b"efgh", f(3))
    assert pieces(out) == [("data", 0, b"abcd", 2), ("data", 4, b"efgh", 3)]
    assert r.segment((isn + 1) % (1 << 32), b"abcd", f(4)) == []  # retransmit
    assert r.acknowledged((isn + 9) % (1 << 32), f(5)) == []


def test_syn_less_pickup_starts_at_first_data_not_at_a_bare_ack():
    r = TCPStreamReassembler("client")
    # A keep-alive probe carries SND.NXT-1: it must not become offset 0.
    assert r.segment(4999, b"", f(1)) == []
    assert not r.started
    assert pieces(r.segment(5000, b"GET / HTTP/1.1\r\n", f(2))) == [
        ("mid-stream", 0, None, None, 2),
        ("data", 0, b"GET / HTTP/1.1\r\n", 2),
    ]
    assert r.mid_stream and not r.syn_seen


def test_snaplen_tail_is_a_missing_span_at_the_right_offset():
    r = opened()
    out = r.segment(ISN + 1, b"x" * 60, f(2), missing_tail=1400)
    assert pieces(out) == [("data", 0, b"x" * 60, 2), ("snaplen", 60, 1400, 2, 2)]
    assert pieces(r.segment(ISN + 1461, b"y" * 60, f(3), missing_tail=10)) == [
        ("data", 1460, b"y" * 60, 3),
        ("snaplen", 1520, 10, 3, 3),
    ]


def test_snaplen_tail_held_out_of_order():
    r = opened()
    assert r.segment(ISN + 11, b"yy", f(3), missing_tail=8) == []
    assert pieces(r.segment(ISN + 1, b"x" * 10, f(2))) == [
        ("data", 0, b"x" * 10, 2),
        ("data", 10, b"yy", 3),
        ("snaplen", 12, 8, 3, 3),
    ]


def test_buffer_limit_gives_up_on_the_hole():
    r = TCPStreamReassembler("server", max_buffered=100)
    r.segment(ISN, b"", f(1), syn=True)
    assert r.segment(ISN + 11, b"a" * 60, f(2)) == []
    out = r.segment(ISN + 71, b"b" * 60, f(3))  # 120 bytes held > 100
    assert pieces(out) == [
        ("hole", 0, 10, None, 2),
        ("data", 10, b"a" * 60, 2),
        ("data", 70, b"b" * 60, 3),
    ]
    assert r.buffered == 0


def test_data_after_fin_is_ignored_and_missing_bytes_before_fin_reported():
    r = opened()
    r.segment(ISN + 1, b"abc", f(2))
    assert r.segment(ISN + 11, b"end", f(4), fin=True) == []  # FIN at offset 13
    assert r.segment(ISN + 14, b"after", f(5)) == []
    out = r.close()
    assert pieces(out) == [("hole", 3, 7, 2, 4), ("data", 10, b"end", 4)]


def test_data_after_rst_is_ignored():
    r = opened()
    r.segment(ISN + 1, b"abc", f(2))
    assert r.segment(ISN + 4, b"", f(3), rst=True) == []
    assert r.segment(ISN + 4, b"more", f(4)) == []
    assert r.close() == []
