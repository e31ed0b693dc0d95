"""Capture readers, link-layer decoding and input expansion, on hand-built bytes and on
the shared third-party captures."""

from __future__ import annotations

import socket
import struct
from pathlib import Path

import pytest
from support.pcapng import block, epb, idb, option, shb

from sse_forensics.errors import ReadError, UnreadableInput
from sse_forensics.ingest.inputs import classify_inputs, merged_frames
from sse_forensics.ingest.linklayer import decode_tcp
from sse_forensics.ingest.packets import TCP_ACK, TCP_PSH, TCP_SYN, Frame, TCPSegment
from sse_forensics.ingest.pcap import read_frames, sniff_capture
from sse_forensics.provenance import Origin

# -- packet builders --------------------------------------------------------------------


def tcp_header(sport=40000, dport=80, seq=1, ack=0, flags=TCP_ACK, options=b"") -> bytes:
    doff = (20 + len(options)) // 4
    return struct.pack("!HHIIBBHHH", sport, dport, seq, ack, doff << 4, flags, 65535, 0, 0) + (
        options
    )


def ipv4(
    payload: bytes,
    proto=6,
    src="10.0.0.1",
    dst="10.0.0.2",
    frag=0,
    options=b"",
    total: int | None = None,
) -> bytes:
    ihl = (20 + len(options)) // 4
    length = 20 + len(options) + len(payload) if total is None else total
    head = struct.pack(
        "!BBHHHBBH4s4s",
        0x40 | ihl,
        0,
        length,
        1,
        frag,
        64,
        proto,
        0,
        socket.inet_aton(src),
        socket.inet_aton(dst),
    )
    return head + options + payload


def ipv6(payload: bytes, next_header=6, src="::1", dst="::1") -> bytes:
    return (
        struct.pack(
            "!IHBB16s16s",
            6 << 28,
            len(payload),
            next_header,
            64,
            socket.inet_pton(socket.AF_INET6, src),
            socket.inet_pton(socket.AF_INET6, dst),
        )
        + payload
    )


def ethernet(packet: bytes, ethertype=0x0800, tags: tuple[int, ...] = ()) -> bytes:
    head = b"\x02" * 6 + b"\x04" * 6
    for tpid in tags:
        head += struct.pack("!HH", tpid, 7)
    return head + struct.pack("!H", ethertype) + packet


def frame(data: bytes, linktype=1, wirelen: int | None = None) -> Frame:
    return Frame(
        Origin("x.pcap", 1, 0.0), linktype, data, len(data) if wirelen is None else wirelen
    )


SEGMENT = tcp_header(seq=7, flags=TCP_PSH | TCP_ACK) + b"GET / HTTP/1.1\r\n\r\n"


# -- pcap / pcapng writers (hand-built, so byte order and resolution are explicit) --------


def pcap_bytes(records, endian="<", nanos=False, linktype=1, snaplen=65535) -> bytes:
    magic = 0xA1B23C4D if nanos else 0xA1B2C3D4
    out = struct.pack(endian + "IHHiIII", magic, 2, 4, 0, 0, snaplen, linktype)
    for sec, frac, data in records:
        out += struct.pack(endian + "IIII", sec, frac, len(data), len(data)) + data
    return out


def write(tmp_path: Path, name: str, content: bytes) -> str:
    path = tmp_path / name
    path.write_bytes(content)
    return str(path)


# -- classic pcap -------------------------------------------------------------------------


@pytest.mark.parametrize("endian", ["<", ">"])
def test_pcap_microseconds_both_byte_orders(tmp_path, endian):
    eth = ethernet(ipv4(SEGMENT))
    path = write(
        tmp_path,
        "a.pcap",
        pcap_bytes([(1700000000, 123456, eth), (1700000001, 999999, eth[:30])], endian),
    )
    frames = list(read_frames(path))
    assert [fr.origin.number for fr in frames] == [1, 2]
    assert frames[0].origin.ts == pytest.approx(1700000000.123456, abs=1e-7)
    assert frames[1].origin.ts == pytest.approx(1700000001.999999, abs=1e-7)
    assert frames[0].data == eth and frames[0].linktype == 1
    assert frames[0].origin.source == path


@pytest.mark.parametrize("endian", ["<", ">"])
def test_pcap_nanoseconds(tmp_path, endian):
    path = write(
        tmp_path,
        "n.pcap",
        pcap_bytes([(1, 1, b"\0" * 14), (1, 999_999_999, b"\0" * 14)], endian, nanos=True),
    )
    assert [fr.origin.ts for fr in read_frames(path)] == [1.000000001, 1.999999999]


def test_truncated_pcap_yields_frames_then_one_error(tmp_path):
    eth = ethernet(ipv4(SEGMENT))
    content = pcap_bytes([(10, 0, eth)] * 3)
    cut = len(content) - 5
    items = list(read_frames(write(tmp_path, "cut.pcap", content[:cut])))
    assert [type(i) for i in items] == [Frame, Frame, ReadError]
    err = items[-1]
    assert err.frame == 3
    assert f"byte offset {24 + 2 * (16 + len(eth))}" in err.what


def test_pcap_cut_inside_record_header(tmp_path):
    content = pcap_bytes([(10, 0, b"\0" * 20)] * 2)
    items = list(read_frames(write(tmp_path, "cut.pcap", content[: 24 + 36 + 7])))
    assert isinstance(items[-1], ReadError) and items[-1].frame == 2
    assert "record header" in items[-1].what


def test_absurd_caplen_stops_the_file(tmp_path):
    content = pcap_bytes([(10, 0, b"\0" * 20)])
    content += struct.pack("<IIII", 11, 0, 0x7FFFFFF0, 60) + b"\0" * 100
    content += pcap_bytes([(12, 0, b"\0" * 20)])[24:]
    items = list(read_frames(write(tmp_path, "bad.pcap", content)))
    assert len(items) == 2 and isinstance(items[1], ReadError)
    assert items[1].frame == 2 and "corrupt record header" in items[1].what


def test_unknown_linktype_is_one_error_and_frames_are_skipped(tmp_path):
    path = write(tmp_path, "u.pcap", pcap_bytes([(1, 0, b"ab")] * 5, linktype=147))
    items = list(read_frames(path))
    assert len(items) == 1 and isinstance(items[0], ReadError)
    assert "147" in items[0].what


def test_not_a_capture_raises_before_any_frame(tmp_path):
    path = write(tmp_path, "notes.txt", b"GET / HTTP/1.1\r\n")
    with pytest.raises(UnreadableInput, match="not a pcap or pcapng file"):
        read_frames(path)
    with pytest.raises(UnreadableInput):
        read_frames(write(tmp_path, "empty.pcap", b""))
    assert not sniff_capture(path)
    assert sniff_capture(write(tmp_path, "ok.pcap", pcap_bytes([])))


# -- pcapng -------------------------------------------------------------------------------


@pytest.mark.parametrize("endian", ["<", ">"])
def test_pcapng_interfaces_resolutions_offset_and_drops(tmp_path, endian):
    eth = ethernet(ipv4(SEGMENT))
    raw = ipv4(SEGMENT)
    content = (
        shb(endian)
        + idb(endian, 1, option(endian, 9, b"\x09"))  # ns
        + idb(
            endian,
            101,
            option(endian, 9, b"\x94") + option(endian, 14, struct.pack(endian + "q", 1000)),
        )  # 2^-20 s, +1000 s
        + epb(endian, 0, 1_700_000_000_000_000_001, eth)
        + block(endian, 0x0BAD, b"custom")  # unknown block: skipped
        + epb(endian, 1, (5 << 20) + (1 << 19), raw)  # 5.5 s + 1000
        + block(endian, 3, struct.pack(endian + "I", len(eth)) + eth)  # SPB, interface 0
        + block(
            endian,
            5,
            struct.pack(endian + "III", 1, 0, 0)
            + option(endian, 5, struct.pack(endian + "Q", 42))
            + option(endian, 7, struct.pack(endian + "Q", 3))
            + b"\0\0\0\0",
        )
    )
    reader = read_frames(write(tmp_path, "x.pcapng", content))
    frames = list(reader)
    assert [(fr.origin.number, fr.interface, fr.linktype) for fr in frames] == [
        (1, 0, 1),
        (2, 1, 101),
        (3, 0, 1),
    ]
    assert frames[0].origin.ts == pytest.approx(1_700_000_000.000000001, abs=1e-6)
    assert frames[1].origin.ts == 1005.5
    assert frames[2].origin.ts == frames[1].origin.ts  # SPB: no timestamp of its own
    assert frames[1].data == raw and frames[2].data == eth
    assert reader.stats.interface_drops == {1: 42} and reader.drops == 45
    assert all(isinstance(decode_tcp(fr), TCPSegment) for fr in frames)


def test_pcapng_sections_switch_byte_order_and_reset_interfaces(tmp_path):
    eth = ethernet(ipv4(SEGMENT))
    content = (
        shb("<")
        + idb("<", 1)
        + epb("<", 0, 1_000_000, eth)
        + shb(">")
        + idb(">", 101)
        + epb(">", 0, 2_000_000, ipv4(SEGMENT))
    )
    frames = list(read_frames(write(tmp_path, "s.pcapng", content)))
    assert [(fr.origin.number, fr.linktype, fr.origin.ts) for fr in frames] == [
        (1, 1, 1.0),
        (2, 101, 2.0),
    ]


def test_truncated_pcapng_yields_frames_then_one_error(tmp_path):
    eth = ethernet(ipv4(SEGMENT))
    content = shb("<") + idb("<", 1) + epb("<", 0, 1, eth) + epb("<", 0, 2, eth)
    items = list(read_frames(write(tmp_path, "c.pcapng", content[:-10])))
    assert [type(i) for i in items] == [Frame, ReadError]
    assert items[1].frame == 2 and "byte offset" in items[1].what


def test_pcapng_unknown_linktype_reported_once_per_interface(tmp_path):
    eth = ethernet(ipv4(SEGMENT))
    content = shb("<") + idb("<", 147) + idb("<", 1)
    content += epb("<", 0, 1, b"zz") + epb("<", 0, 2, b"zz") + epb("<", 1, 3, eth)
    items = list(read_frames(write(tmp_path, "u.pcapng", content)))
    assert [type(i) for i in items] == [ReadError, Frame]
    assert items[1].origin.number == 3  # skipped frames still count, as in Wireshark


# -- link layer ---------------------------------------------------------------------------


def test_ethernet_ipv4_tcp_fields_and_options():
    opts = b"\x02\x04\x05\xb4\x01\x03\x03\x07"  # MSS, NOP, window scale 7
    tcp = tcp_header(sport=51000, dport=8080, seq=123, ack=456, flags=TCP_SYN, options=opts)
    seg = decode_tcp(frame(ethernet(ipv4(tcp + b"hi", options=b"\x01\x01\x01\x00"))))
    assert isinstance(seg, TCPSegment)
    assert (seg.src, seg.sport, seg.dst, seg.dport) == ("10.0.0.1", 51000, "10.0.0.2", 8080)
    assert (seg.seq, seg.ack, seg.syn, seg.payload, seg.options) == (123, 456, True, b"hi", opts)
    assert seg.missing_tail == 0


@pytest.mark.parametrize("tags", [(0x8100,), (0x88A8, 0x8100), (0x8100, 0x8100), (0x9100,)])
def test_vlan_tags_are_skipped(tags):
    seg = decode_tcp(frame(ethernet(ipv4(SEGMENT), tags=tags)))
    assert isinstance(seg, TCPSegment) and seg.payload.startswith(b"GET ")


def test_ethernet_padding_is_stripped_and_snaplen_tail_counted():
    packet = ipv4(tcp_header() + b"ab")
    seg = decode_tcp(frame(ethernet(packet) + b"\0" * 6))
    assert seg.payload == b"ab" and seg.missing_tail == 0
    full = ethernet(ipv4(tcp_header() + b"x" * 1000))
    seg = decode_tcp(frame(full[: 14 + 20 + 20 + 100], wirelen=len(full)))
    assert seg.payload == b"x" * 100 and seg.missing_tail == 900


def test_tso_zero_total_length_uses_wire_length():
    packet = ipv4(tcp_header() + b"y" * 50, total=0)
    seg = decode_tcp(frame(ethernet(packet)))
    assert seg.payload == b"y" * 50


def test_sll_and_sll2():
    sll = struct.pack("!HHH8sH", 0, 772, 6, b"\0" * 8, 0x0800) + ipv4(SEGMENT)
    sll2 = struct.pack("!HHIHBB8s", 0x86DD, 0, 1, 772, 0, 6, b"\0" * 8) + ipv6(SEGMENT)
    assert decode_tcp(frame(sll, linktype=113)).dst == "10.0.0.2"
    assert decode_tcp(frame(sll2, linktype=276)).dst == "::1"


@pytest.mark.parametrize("af", [24, 28, 30, 10])
@pytest.mark.parametrize("order", ["little", "big"])
def test_null_loopback_ipv6_any_bsd_value_either_order(af, order):
    seg = decode_tcp(frame(af.to_bytes(4, order) + ipv6(SEGMENT), linktype=0))
    assert isinstance(seg, TCPSegment) and seg.src == "::1"
    assert decode_tcp(frame((2).to_bytes(4, order) + ipv4(SEGMENT), linktype=108)).sport == 40000


@pytest.mark.parametrize("linktype", [101, 12, 14, 228])
def test_raw_ipv4(linktype):
    assert decode_tcp(frame(ipv4(SEGMENT), linktype=linktype)).payload.startswith(b"GET")


def test_raw_ipv6_with_extension_headers():
    hop = bytes([60, 0]) + b"\0" * 6  # hop-by-hop → destination options
    dest = bytes([44, 0]) + b"\0" * 6  # → fragment
    first_frag = struct.pack("!BBHI", 6, 0, 0x0001, 9)  # offset 0, more fragments
    seg = decode_tcp(frame(ipv6(hop + dest + first_frag + SEGMENT, next_header=0), 229))
    assert isinstance(seg, TCPSegment) and seg.seq == 7
    later_frag = struct.pack("!BBHI", 6, 0, 185 << 3, 9)
    assert decode_tcp(frame(ipv6(later_frag + SEGMENT, next_header=44), 229)) is None


def test_non_tcp_and_non_first_fragments_are_none():
    assert decode_tcp(frame(ethernet(b"\0" * 28, ethertype=0x0806))) is None  # ARP
    assert decode_tcp(frame(ethernet(ipv4(b"\0" * 8, proto=17)))) is None  # UDP
    assert decode_tcp(frame(ethernet(ipv4(SEGMENT, frag=100)))) is None


def test_malformed_tcp_header_is_a_read_error():
    bad = bytearray(tcp_header())
    bad[12] = 3 << 4  # data offset 12 bytes < 20
    err = decode_tcp(frame(ethernet(ipv4(bytes(bad)))))
    assert isinstance(err, ReadError) and "data offset" in err.what and err.frame == 1
    err = decode_tcp(frame(ethernet(ipv4(b"\0" * 8))))  # TCP header longer than the packet
    assert isinstance(err, ReadError)


# -- inputs -------------------------------------------------------------------------------


def test_classify_inputs_directory_sniffs_and_sorts(tmp_path):
    write(tmp_path, "b.pcap", pcap_bytes([]))
    write(tmp_path, "a.cap", shb("<"))
    write(tmp_path, "readme.txt", b"hello")
    captures, logs = classify_inputs([str(tmp_path)])
    assert captures == [str(tmp_path / "a.cap"), str(tmp_path / "b.pcap")] and logs == []
    with pytest.raises(UnreadableInput):
        classify_inputs([str(tmp_path / "nope.pcap")])


def test_merged_frames_in_time_order_keeping_file_and_number(tmp_path):
    one = write(tmp_path, "1.pcap", pcap_bytes([(1, 0, b"a"), (3, 0, b"c"), (5, 0, b"e")]))
    two = write(tmp_path, "2.pcap", pcap_bytes([(2, 0, b"b"), (3, 0, b"d")]))
    got = [(Path(f.origin.source).name, f.origin.number, f.data) for f in merged_frames([one, two])]
    assert got == [
        ("1.pcap", 1, b"a"),
        ("2.pcap", 1, b"b"),
        ("1.pcap", 2, b"c"),
        ("2.pcap", 2, b"d"),
        ("1.pcap", 3, b"e"),
    ]
    with pytest.raises(UnreadableInput):
        merged_frames([one, write(tmp_path, "x.txt", b"nope")])


# -- shared third-party captures ----------------------------------------------------------


def test_every_shared_capture_reads_and_decodes(shared_captures):
    paths = sorted(p for p in shared_captures.iterdir() if sniff_capture(str(p)))
    assert len(paths) >= 20
    for path in paths:
        tcp = 0
        for item in read_frames(str(path)):
            if isinstance(item, Frame):
                seg = decode_tcp(item)
                assert not isinstance(seg, ReadError), (path.name, seg)
                tcp += seg is not None
        assert tcp > 0, path.name


def test_cut_mid_record_capture(shared_captures):
    items = list(
        read_frames(str(shared_captures / "derived__http-browsing-bro.org-cut-mid-record.pcap"))
    )
    assert sum(isinstance(i, Frame) for i in items) == 500
    assert isinstance(items[-1], ReadError) and items[-1].frame == 501
    assert "700 of" in items[-1].what
    assert [i.origin.number for i in items[:-1]] == list(range(1, 501))


def test_two_interface_pcapng_reads_both(shared_captures):
    frames = list(
        read_frames(str(shared_captures / "ndpi__http-pcapng-2-interfaces-asymmetric.pcapng"))
    )
    assert {f.interface for f in frames} == {0, 1}
    assert all(isinstance(decode_tcp(f), TCPSegment) for f in frames)


def test_sll2_capture_decodes_tcp(shared_captures):
    frames = list(read_frames(str(shared_captures / "suricata__http10-sll2-gro-download.pcap")))
    segs = [decode_tcp(f) for f in frames]
    assert frames[0].linktype == 276
    assert all(isinstance(s, TCPSegment) for s in segs)
    assert max(len(s.payload) for s in segs) > 60000  # GRO super-segments


def test_kuznetzov_modified_pcap_has_24_byte_records(tmp_path):
    head = struct.pack("<IHHiIII", 0xA1B2CD34, 2, 4, 0, 0, 65535, 1)
    rec = struct.pack("<IIII", 5, 250000, 3, 3) + b"\0" * 8 + b"abc"
    frames = list(read_frames(write(tmp_path, "k.pcap", head + rec + rec)))
    assert [(f.origin.number, f.origin.ts, f.data) for f in frames] == [
        (1, 5.25, b"abc"),
        (2, 5.25, b"abc"),
    ]
