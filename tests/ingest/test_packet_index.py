"""The columnar packet index (ingest/packet_index.py) against its definition: frame for
frame, what read_frames / merged_frames + decode_tcp give, with the same ReadErrors (source,
frame, wording, timestamp; in the order reassemble collects them) and the same CaptureStats.
"""

from __future__ import annotations

import random
import socket
import struct
from pathlib import Path

import numpy as np
import pytest
from support.pcapng import block, epb, idb, isb, opb, option, shb, spb
from support.scripts import load_script

from sse_forensics.errors import ReadError, UnreadableInput
from sse_forensics.ingest import packet_index
from sse_forensics.ingest.inputs import merged_frames
from sse_forensics.ingest.linklayer import decode_tcp
from sse_forensics.ingest.packet_index import PacketIndex, index_capture, index_captures
from sse_forensics.ingest.packets import TCP_ACK, TCP_PSH, TCP_SYN, Frame, TCPSegment
from sse_forensics.ingest.pcap import read_frames
from sse_forensics.reassembly.tcp_analysis import window_scale_offer

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "samples"
SHARED = ROOT.parent / "shared" / "captures"


def _captures(folder: Path) -> list[Path]:
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.glob("*.pcap*") if p.is_file())


# -- the reference: read_frames / merged_frames + decode_tcp ----------------------------------


def reference(paths: list[str]):
    """(frame, segment or None) per frame, errors in reassemble's order, stats per file."""
    items = merged_frames(paths) if len(paths) > 1 else read_frames(paths[0])
    rows: list[tuple[Frame, TCPSegment | None]] = []
    errors: list[ReadError] = []
    for item in items:
        if isinstance(item, ReadError):
            errors.append(item)
            continue
        seg = decode_tcp(item)
        if isinstance(seg, ReadError):
            errors.append(seg)
            seg = None
        rows.append((item, seg))
    stats = items.stats if len(paths) > 1 else {paths[0]: items.stats}
    return rows, errors, stats


def assert_same(paths: list[str], index: PacketIndex | None = None) -> PacketIndex:
    rows, errors, stats = reference(paths)
    index = index or (index_captures(paths) if len(paths) > 1 else index_capture(paths[0]))
    with index:
        assert index.sources == paths
        assert len(index) == len(rows)
        for i, (frame, seg) in enumerate(rows):
            where = (frame.origin.source, frame.origin.number)
            assert index.sources[index.file[i]] == frame.origin.source, where
            got = index.frame_record(i)
            assert got == frame, where
            # Bit-identical timestamps, not only equal ones.
            assert np.float64(frame.origin.ts).tobytes() == index.ts[i].tobytes(), where
            assert index.caplen[i] == len(frame.data), where
            assert bool(index.is_tcp[i]) == (seg is not None), where
            assert index.segment(i) == seg, where
            if seg is None:
                assert index.src[i] == -1 and index.dst[i] == -1 and index.wscale[i] == -1
                continue
            assert index.ip_version[i] == (6 if ":" in seg.src else 4), where
            assert index.payload(i) == seg.payload and index.options(i) == seg.options, where
            assert index.claimed_len[i] == len(seg.payload) + seg.missing_tail, where
            assert index.missing_tail[i] == seg.missing_tail, where
            offer = window_scale_offer(seg.options) if seg.flags & TCP_SYN else None
            assert index.wscale[i] == (-1 if offer is None else offer), where
            start = int(index.data_offset[i])
            assert start <= index.options_start(i) <= index.payload_start(i), where
            assert index.payload_start(i) + int(index.payload_len[i]) <= start + len(frame.data)
        assert index.errors == errors
        assert index.stats == stats
        assert index.tcp_segments == sum(seg is not None for _, seg in rows)
    return index


# -- the captures in the repository and beside it ---------------------------------------------


@pytest.mark.parametrize("path", _captures(SAMPLES), ids=lambda p: p.name)
def test_sample_captures(path: Path) -> None:
    assert_same([str(path)])


@pytest.mark.parametrize("path", _captures(SHARED), ids=lambda p: p.name)
def test_shared_captures(path: Path) -> None:
    assert_same([str(path)])


def test_shared_cut_capture() -> None:
    path = SHARED / "derived__http-browsing-bro.org-cut-mid-record.pcap"
    if not path.exists():
        pytest.skip("shared captures absent")
    index = assert_same([str(path)])
    assert len(index) == 500 and index.errors[-1].frame == 501
    assert "700 of" in index.errors[-1].what


def _make_capture_module():
    return load_script("benchmarks/make_capture.py", "make_capture")


@pytest.fixture(scope="module")
def generated(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("gen") / "gen-5000.pcap"
    _make_capture_module().write_capture(path, 5000, 7)
    return path


def test_generated_capture(generated: Path) -> None:
    index = assert_same([str(generated)])
    assert len(index) >= 5000 and index.fallback_frames == 0


def test_generated_capture_as_a_ring_buffer(generated: Path, tmp_path: Path) -> None:
    content = generated.read_bytes()
    offsets = _pcap_records(content)
    cuts = [24, offsets[len(offsets) // 3], offsets[2 * len(offsets) // 3], len(content)]
    parts = []
    for i in range(3):
        part = tmp_path / f"ring_{i}.pcap"
        part.write_bytes(content[:24] + content[cuts[i] : cuts[i + 1]])
        parts.append(str(part))
    # Out of order on purpose: the merge puts the frames back in time order.
    assert_same([parts[2], parts[0], parts[1]])


# -- cut and corrupt files ------------------------------------------------------------------


def _pcap_records(content: bytes, rec_len: int = 16) -> list[int]:
    offsets, offset = [], 24
    while offset + rec_len <= len(content):
        offsets.append(offset)
        offset += rec_len + struct.unpack_from("<I", content, offset + 8)[0]
    return offsets


def _write(tmp_path: Path, name: str, content: bytes) -> str:
    path = tmp_path / name
    path.write_bytes(content)
    return str(path)


@pytest.mark.parametrize("name", ["clean-live-int.pcap", "crafted-snaplen.pcap"])
def test_cut_pcap_everywhere_that_matters(tmp_path: Path, name: str) -> None:
    content = (SAMPLES / name).read_bytes()
    offsets = _pcap_records(content)
    cuts = {0, 4, 10, 23, 24, 25, len(content) - 1}
    for offset in offsets[1:6] + offsets[-3:]:
        cuts |= {offset + 3, offset + 15, offset + 16, offset + 30, offset + 70}
    for cut in sorted(c for c in cuts if 4 <= c < len(content)):
        assert_same([_write(tmp_path, f"cut{cut}.pcap", content[:cut])])


def test_corrupt_pcap_record_headers(tmp_path: Path) -> None:
    content = bytearray((SAMPLES / "clean-live-int.pcap").read_bytes())
    offsets = _pcap_records(bytes(content))
    absurd = bytearray(content)
    struct.pack_into("<I", absurd, offsets[5] + 8, 0x7FFFFFF0)  # caplen beyond any snaplen
    assert_same([_write(tmp_path, "absurd.pcap", bytes(absurd))])
    long = bytearray(content)
    struct.pack_into("<I", long, offsets[-2] + 8, 5000)  # runs past the end of the file
    assert_same([_write(tmp_path, "long.pcap", bytes(long))])


def test_pcapng_cut_everywhere(tmp_path: Path) -> None:
    """Cut at every byte of the first block of each type (section header, interface
    description, enhanced packet), and in every later block at each field it reads: type,
    length, interface, timestamp, lengths, the data, the trailing length: 708 cuts (every
    fifth byte: 1,278, which missed a field's first byte in four blocks of five)."""
    content = (SAMPLES / "crafted-pcapng-ns-nullloop-prefixed.pcapng").read_bytes()
    blocks = _pcapng_blocks(content)
    first_of_type = {btype: offset for offset, btype in reversed(blocks)}
    cuts = set()
    ends = [o for o, _ in blocks[1:]] + [len(content)]
    for (offset, btype), end in zip(blocks, ends, strict=True):
        if first_of_type[btype] == offset:
            cuts |= set(range(offset, end))
        else:
            cuts |= {offset, offset + 3, offset + 4, offset + 8, offset + 12, offset + 16}
            cuts |= {offset + 20, offset + 24, offset + 28, (offset + end) // 2, end - 4, end - 1}
    for cut in sorted(c for c in cuts if 4 <= c < len(content)):
        assert_same([_write(tmp_path, f"cut{cut}.pcapng", content[:cut])])


def _pcapng_blocks(content: bytes) -> list[tuple[int, int]]:
    blocks, offset = [], 0
    while offset + 12 <= len(content):
        btype, blen = struct.unpack_from("<II", content, offset)
        blocks.append((offset, btype))
        offset += blen
    return blocks


def test_pcapng_garbage_blocks(tmp_path: Path) -> None:
    content = (SAMPLES / "crafted-pcapng-ns-nullloop-prefixed.pcapng").read_bytes()
    blocks = _pcapng_blocks(content)
    packet = next(off for off, btype in blocks if btype == 6)
    cases = {
        "type": (packet, struct.pack("<I", 0xDEADBEEF)),  # unknown type: skipped, frame gone
        "len-odd": (packet + 4, struct.pack("<I", 13)),
        "len-huge": (packet + 4, struct.pack("<I", 0x7FFFFFF0)),
        "len-tiny": (packet + 4, struct.pack("<I", 8)),
        "caplen": (packet + 20, struct.pack("<I", 60000)),  # exceeds its block
        "ifid": (packet + 8, struct.pack("<I", 9)),  # undescribed interface
        "bom": (8, b"\x00\x11\x22\x33"),  # corrupt section header
    }
    for name, (at, patch) in cases.items():
        broken = bytearray(content)
        broken[at : at + len(patch)] = patch
        assert_same([_write(tmp_path, f"{name}.pcapng", bytes(broken))])


def test_mutated_headers_agree(tmp_path: Path) -> None:
    """Random bytes in link, IP and TCP headers: every decode branch, errors included."""
    rng = random.Random(1234)
    sources = [
        SAMPLES / "crafted-vlan-ipv6-live-jump.pcap",
        SAMPLES / "crafted-sll2-resume-jump.pcap",
        SAMPLES / "crafted-snaplen.pcap",
    ]
    for source in sources:
        content = source.read_bytes()
        offsets = _pcap_records(content)
        for round_ in range(25):
            broken = bytearray(content)
            for offset in rng.sample(offsets, min(len(offsets), 12)):
                for _ in range(rng.randint(1, 3)):
                    at = offset + 16 + rng.randrange(80)
                    if at < len(broken):
                        broken[at] = rng.randrange(256)
            assert_same([_write(tmp_path, f"{source.stem}-{round_}.pcap", bytes(broken))])


def test_not_a_capture_raises_like_the_reader(tmp_path: Path) -> None:
    for name, content in (("notes.txt", b"GET / HTTP/1.1\r\n"), ("e.pcap", b""), ("s", b"ab")):
        path = _write(tmp_path, name, content)
        with pytest.raises(UnreadableInput) as expected:
            read_frames(path)
        with pytest.raises(UnreadableInput) as got:
            index_capture(path)
        assert str(got.value) == str(expected.value)


# -- hand-built pcap: every link layer and decode branch -----------------------------------


def tcp(sport=40000, dport=80, seq=1, ack=0, flags=TCP_ACK, options=b"", doff=None) -> bytes:
    doff = (20 + len(options)) // 4 if doff is None else doff
    return struct.pack("!HHIIBBHHH", sport, dport, seq, ack, doff << 4, flags, 512, 0, 0) + options


def ipv4(payload: bytes, proto=6, src="10.0.0.1", dst="10.0.0.2", frag=0, options=b"", **kw):
    ihl = kw.get("ihl", (20 + len(options)) // 4)
    total = kw.get("total", 20 + len(options) + len(payload))
    version = kw.get("version", 4)
    head = struct.pack(
        "!BBHHHBBH4s4s",
        version << 4 | ihl,
        0,
        total,
        1,
        frag,
        64,
        proto,
        0,
        socket.inet_aton(src),
        socket.inet_aton(dst),
    )
    return head + options + payload


def ipv6(payload: bytes, next_header=6, src="2001:db8::1", dst="::1", length=None, version=6):
    return (
        struct.pack(
            "!IHBB16s16s",
            version << 28,
            len(payload) if length is None else length,
            next_header,
            64,
            socket.inet_pton(socket.AF_INET6, src),
            socket.inet_pton(socket.AF_INET6, dst),
        )
        + payload
    )


def ether(packet: bytes, ethertype=0x0800, tags=()) -> bytes:
    head = b"\x02" * 6 + b"\x04" * 6
    for tpid in tags:
        head += struct.pack("!HH", tpid, 7)
    return head + struct.pack("!H", ethertype) + packet


GET = tcp(seq=7, flags=TCP_PSH | TCP_ACK) + b"GET / HTTP/1.1\r\n\r\n"
WSCALE = b"\x02\x04\x05\xb4\x01\x03\x03\x07"


def ip_packets() -> list[tuple[bytes, int | None]]:
    """(IP packet, wire length or None) for the IP/TCP branches of decode_tcp."""
    frag = struct.pack("!BBHI", 6, 0, 0x0001, 9)
    later = struct.pack("!BBHI", 6, 0, 185 << 3, 9)
    hop = bytes([60, 0]) + b"\0" * 6
    dest = bytes([44, 0]) + b"\0" * 6
    ah = bytes([6, 1]) + b"\0" * 10
    routing = bytes([6, 0]) + b"\0" * 6
    ns_flag = bytearray(GET)
    ns_flag[12] |= 1
    full = ipv4(tcp() + b"x" * 400)
    out: list[tuple[bytes, int | None]] = [
        (ipv4(GET), None),
        (ipv4(GET, src="192.168.7.9", dst="8.8.8.8"), None),
        (ipv4(tcp(flags=TCP_SYN, options=WSCALE)), None),
        (ipv4(tcp(flags=TCP_SYN, options=b"\x03\x03\x0f\x00")), None),  # shift > 14
        (ipv4(tcp(flags=TCP_SYN, options=b"\x01\x05\x01\x00")), None),  # malformed option
        (ipv4(tcp(flags=TCP_SYN | TCP_ACK, options=WSCALE) + b"tfo data"), None),
        (ipv4(tcp(flags=TCP_ACK, options=WSCALE)), None),  # not a SYN: no offer
        (ipv4(bytes(ns_flag)), None),
        (ipv4(GET, options=b"\x01\x01\x01\x00"), None),
        (ipv4(GET, total=0), None),  # TSO
        (ipv4(GET) + b"\0" * 6, None),  # link padding
        (full[:150], len(full)),  # snap length
        (full[:30], len(full)),  # TCP header cut by the snap length
        (full[:10], len(full)),  # IPv4 header cut short
        (ipv4(GET, frag=100), None),
        (ipv4(GET, frag=0x2000), None),  # first fragment
        (ipv4(GET, frag=0x4000), None),  # don't fragment
        (ipv4(GET, frag=0x1000), None),  # offset's top bit
        (ipv4(b"\0" * 8, proto=17), None),
        (ipv4(GET, version=5), None),
        (ipv4(GET, ihl=4), None),
        (ipv4(GET, total=30), None),
        (ipv4(GET, options=b"\x01" * 8)[:26], 200),  # options cut
        (ipv4(b"\0" * 8), None),  # TCP header beyond the packet
        (ipv4(tcp(doff=3)), None),
        (ipv4(tcp(doff=15)), None),
        (ipv4(tcp(options=b"\x01" * 8))[:44], 200),  # TCP options cut
        (ipv6(GET), None),
        (ipv6(GET, length=0), None),  # jumbogram / offload
        (ipv6(GET)[:30], 200),
        (ipv6(GET, version=4), None),
        (ipv6(hop + dest + frag + GET, next_header=0), None),
        (ipv6(later + GET, next_header=44), None),
        (ipv6(ah + GET, next_header=51), None),
        (ipv6(routing + GET, next_header=43), None),
        (ipv6(hop, next_header=0), None),  # extension header, then nothing
        (ipv6(b"\0" * 8, next_header=58), None),  # ICMPv6
        (ipv6(b"", next_header=59), None),
        (ipv6(tcp(doff=2)), None),
        (ipv6(GET)[:50], 200),
        (b"", None),
    ]
    return out


def pcap(records: list[tuple[bytes, int | None]], linktype: int, endian="<") -> bytes:
    out = struct.pack(endian + "IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, linktype)
    for i, (data, wirelen) in enumerate(records):
        wire = len(data) if wirelen is None else wirelen
        out += struct.pack(endian + "IIII", 1_700_000_000 + i, i * 1013, len(data), wire) + data
    return out


def _link_layers() -> dict[str, tuple[int, list[tuple[bytes, int | None]]]]:
    packets = ip_packets()

    def over(wrap, pkts):
        return [(wrap(p), None if w is None else w + len(wrap(b""))) for p, w in pkts]

    v4 = [(p, w) for p, w in packets if p[:1] != b"\x60"]
    v6 = [(p, w) for p, w in packets if p[:1] == b"\x60"]
    sll = struct.pack("!HHH8s", 0, 772, 6, b"\0" * 8)
    sll2 = struct.pack("!HHIHBB8s", 0, 0, 1, 772, 0, 6, b"\0" * 8)
    return {
        "ethernet": (
            1,
            over(ether, v4)
            + over(lambda p: ether(p, 0x86DD), v6)
            + over(lambda p: ether(p, tags=(0x8100,)), v4[:6])
            + over(lambda p: ether(p, tags=(0x88A8, 0x8100)), v4[:6])
            + over(lambda p: ether(p, 0x86DD, tags=(0x9100, 0x8100, 0x8100)), v6[:3])
            + [
                (ether(b"\0" * 28, 0x0806), None),
                (ether(b"", tags=(0x8100,))[:16], None),  # tag cut
                (ether(b"", tags=(0x8100, 0x8100))[:20], None),
                (b"\x02" * 13, None),
            ],
        ),
        "sll": (
            113,
            over(lambda p: sll + struct.pack("!H", 0x0800) + p, v4)
            + over(
                lambda p: sll + struct.pack("!H", 0x8100) + struct.pack("!HH", 7, 0x86DD) + p, v6
            )
            + [(sll[:10], None)],
        ),
        "sll2": (
            276,
            over(lambda p: struct.pack("!H", 0x86DD) + sll2[2:] + p, v6)
            + over(lambda p: struct.pack("!H", 0x0800) + sll2[2:] + p, v4[:8])
            + [(sll2[:12], None)],
        ),
        "null": (
            0,
            over(lambda p: (2).to_bytes(4, "little") + p, v4[:10])
            + over(lambda p: (30).to_bytes(4, "little") + p, v6[:8])
            + over(lambda p: (24).to_bytes(4, "big") + p, v6[:4])
            + over(lambda p: (10).to_bytes(4, "big") + p, v6[:2])
            + [((7).to_bytes(4, "little") + v4[0][0], None), (b"\x02\0", None)],
        ),
        "loop": (108, over(lambda p: (2).to_bytes(4, "big") + p, v4[:6])),
        "raw": (101, [*packets, (b"\x50" + b"\0" * 30, None)]),
        "raw12": (12, v4[:4] + v6[:2]),
        "raw14": (14, v4[:4]),
        "ipv4": (228, v4),
        "ipv6": (229, v6),
        "unsupported": (147, v4[:3]),
    }


@pytest.mark.parametrize("layer", list(_link_layers()))
@pytest.mark.parametrize("endian", ["<", ">"])
def test_every_link_layer_and_decode_branch(tmp_path: Path, layer: str, endian: str) -> None:
    linktype, records = _link_layers()[layer]
    path = _write(tmp_path, f"{layer}.pcap", pcap(records, linktype, endian))
    index = assert_same([path])
    decoded = [decode_tcp(fr) for fr in read_frames(path) if isinstance(fr, Frame)]
    assert index.tcp_segments == sum(isinstance(s, TCPSegment) for s in decoded)


def test_fcs_bits_in_the_link_type_and_nanosecond_and_modified_pcap(tmp_path: Path) -> None:
    records = [(ether(ipv4(GET)), None), (ether(ipv6(GET), 0x86DD), None)]
    content = bytearray(pcap(records, 1))
    struct.pack_into("<I", content, 20, 1 | 0x14000000)  # FCS length bits
    assert_same([_write(tmp_path, "fcs.pcap", bytes(content))])
    content[0:4] = struct.pack("<I", 0xA1B23C4D)
    assert_same([_write(tmp_path, "ns.pcap", bytes(content))])
    modified = struct.pack("<IHHiIII", 0xA1B2CD34, 2, 4, 0, 0, 65535, 1)
    for i, (data, _) in enumerate(records * 3):
        head = struct.pack("<IIIIIHBB", 10 + i, 999_999, len(data), len(data), 1, 2, 3, 0)
        modified += head + data
    assert_same([_write(tmp_path, "kuz.pcap", modified)])
    assert_same([_write(tmp_path, "kuz-cut.pcap", modified[:-30])])


def test_fallback_counts_only_frames_that_need_it(tmp_path: Path) -> None:
    frag = struct.pack("!BBHI", 6, 0, 0x0001, 9)
    records = [(ether(ipv4(GET)), None)] * 5 + [(ether(ipv6(frag + GET, 44), 0x86DD), None)]
    index = assert_same([_write(tmp_path, "fb.pcap", pcap(records, 1))])
    assert index.fallback_frames == 1 and index.tcp_segments == 6


# -- hand-built pcapng ----------------------------------------------------------------------


def pcapng_variety(endian: str) -> bytes:
    e = endian
    eth = ether(ipv4(GET))
    raw6 = ipv6(GET)
    resol = {
        "ns": option(e, 9, b"\x09"),
        "pow2": option(e, 9, b"\x94") + option(e, 14, struct.pack(e + "q", 1000)),
        "seconds": option(e, 9, b"\x00"),  # units of 1 s: Python timestamps
        "huge": option(e, 9, b"\x7f"),  # 10^-127 s
        "pow2-huge": option(e, 9, b"\xff"),
        "offset-huge": option(e, 14, struct.pack(e + "q", -(1 << 63))),
    }
    out = shb(e) + spb(e, eth)  # a packet before any interface: undescribed
    out += idb(e, 1, resol["ns"]) + idb(e, 101, resol["pow2"]) + idb(e, 147)
    out += spb(e, eth)  # SPB before any timestamped frame: ts 0.0
    out += epb(e, 0, 1_700_000_000_123_456_789, eth)
    out += block(e, 0x0BAD, b"custom")  # unknown block type: skipped
    out += epb(e, 1, (5 << 20) + (1 << 19), ipv4(GET))
    out += spb(e, eth)  # SPB: the previous frame's time
    out += epb(e, 2, 5, b"zz") + epb(e, 2, 6, b"zz")  # unsupported link type, once
    out += spb(e, eth, wirelen=len(eth) + 500)  # SPB cut by its block
    out += opb(e, 0, 1_700_000_001_000_000_000, eth)
    out += epb(e, 7, 9, eth)  # undescribed interface
    out += block(e, 6, struct.pack(e + "III", 0, 0, 0))  # packet block too short
    out += block(e, 3, b"")  # simple packet block too short
    out += block(e, 6, struct.pack(e + "IIIII", 0, 0, 10, 500, 500) + eth)  # caplen > block
    out += spb(e, eth)  # after errors: still the last good frame's time
    out += isb(e, 0, 42, 3) + isb(e, 1, 7, 0) + isb(e, 0, 43, 4)
    out += idb(e, 1, resol["seconds"]) + epb(e, 3, 1_700_000_002, eth)
    out += idb(e, 1, resol["huge"]) + epb(e, 4, (1 << 64) - 1, eth)
    out += idb(e, 229, resol["pow2-huge"]) + epb(e, 5, 12345, raw6)
    out += idb(e, 1, resol["offset-huge"]) + epb(e, 6, 99, eth)
    out += idb(e, 1, snaplen=40) + spb(e, eth)  # SPB clipped to the snap length
    out += block(e, 1, b"\0\0")  # IDB too short: interface of unknown link type
    out += epb(e, 8, 1, eth)
    return out


@pytest.mark.parametrize("endian", ["<", ">"])
def test_pcapng_blocks_resolutions_and_errors(tmp_path: Path, endian: str) -> None:
    content = pcapng_variety(endian)
    index = assert_same([_write(tmp_path, "v.pcapng", content)])
    assert index.stats[index.sources[0]].interface_drops == {0: 43, 1: 7}
    other = "<" if endian == ">" else ">"
    # A second section in the other byte order: interfaces and reported link types restart.
    two = content + shb(other) + idb(other, 147) + epb(other, 0, 1, b"zz")
    two += idb(other, 276) + epb(other, 1, 2, struct.pack("!H", 0x86DD) + b"\0" * 18 + ipv6(GET))
    assert_same([_write(tmp_path, "two.pcapng", two)])
    for cut in range(len(content) - 40, len(two), 9):
        assert_same([_write(tmp_path, f"two{cut}.pcapng", two[:cut])])


# -- several files --------------------------------------------------------------------------


def test_merge_with_errors_ties_and_out_of_order_files(tmp_path: Path) -> None:
    a = [(ether(ipv4(GET, src="10.1.0.1")), None)] * 4
    one = _write(tmp_path, "1.pcap", pcap(a, 1))
    two = _write(tmp_path, "2.pcap", pcap([(ether(ipv6(GET), 0x86DD), None)] * 3, 1)[:-9])
    three = _write(tmp_path, "3.pcap", pcap([(ipv4(GET, src="10.9.9.9"), None)] * 2, 101))
    unknown = _write(tmp_path, "4.pcap", pcap(a[:2], 147))
    # Out of time order inside one file (heapq.merge, not a sort).
    backwards = bytearray(pcap([*a[:3], (ether(ipv4(tcp(doff=3))), None)], 1))
    struct.pack_into("<I", backwards, 24, 1_700_000_009)
    late = _write(tmp_path, "5.pcap", bytes(backwards))
    ng = _write(tmp_path, "6.pcapng", pcapng_variety("<"))
    assert_same([one, two, three])
    assert_same([two, one, unknown, three])
    assert_same([late, one, two])
    assert_same([ng, one, late, two])
    with pytest.raises(UnreadableInput):
        index_captures([one, _write(tmp_path, "x.txt", b"nope")])


def test_index_unmaps_on_close(generated: Path) -> None:
    index = index_capture(str(generated))
    payload = index.payload(int(np.flatnonzero(index.payload_len)[0]))
    assert payload
    index.close()
    assert index.buffers == [] and len(index.ts) == len(index)


def test_windowed_gathers_and_released_pages_change_nothing(
    generated: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The index pass gathers a window of frames at a time and lets each window's pages go
    (a multi-GB capture must not stay mapped whole): with windows of a few frames and
    releases every page, every column, byte accessor and error is still the readers'."""
    from sse_forensics.ingest import packet_index

    monkeypatch.setattr(packet_index, "_GATHER_ROWS", 7)
    monkeypatch.setattr(packet_index, "_RELEASE_SPAN", 4096)
    for path in [generated, SAMPLES / "crafted-pcapng-ns-nullloop-prefixed.pcapng"]:
        assert_same([str(path)])


def test_every_gather_lets_its_pages_go(generated: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each gather of the index pass releases the pages it mapped, a window shorter than
    ``_GATHER_ROWS`` too (issue 9: a capture decoded in such windows stayed mapped whole)."""
    from sse_forensics.ingest import packet_index

    monkeypatch.setattr(packet_index, "DECODE_WINDOW", 50)
    events: list[tuple[str, int, int]] = []
    gather, release = packet_index._Bytes._rows, packet_index._release

    def spy_gather(self, pos: np.ndarray, width: int) -> np.ndarray:
        if len(pos):
            events.append(("gather", int(pos.min()), int(pos.max()) + width))
        return gather(self, pos, width)

    def spy_release(buf, lo: int, hi: int) -> None:
        events.append(("release", lo, hi))
        release(buf, lo, hi)

    monkeypatch.setattr(packet_index._Bytes, "_rows", spy_gather)
    monkeypatch.setattr(packet_index, "_release", spy_release)
    index_capture(str(generated)).close()
    gathers = [k for k, e in enumerate(events) if e[0] == "gather"]
    assert len(gathers) > 10
    for k in gathers:
        _, lo, hi = events[k]
        kind, r_lo, r_hi = events[k + 1]
        assert kind == "release" and r_lo <= lo and hi <= r_hi, events[k : k + 2]


def test_gather_reads_payloads_like_the_accessor(generated: Path) -> None:
    """``gather`` (pread, the fast path's payload join) returns the bytes ``payload`` does."""
    with index_capture(str(generated)) as index:
        rows = np.flatnonzero(index.payload_len > 0)[::3]
        joined = index.gather(rows, index.payload_offsets(rows), index.payload_len[rows])
        assert joined == b"".join(index.payload(int(i)) for i in rows)
        assert index.fds and index.fds[0] is not None
    assert index.fds == []


def test_columns_of_one_value_held_once(generated: Path) -> None:
    """A column whose every value is one value is a read-only view of it (no memory per
    frame: issue 9), with the values it had; the other columns are arrays of their own."""
    with index_capture(str(generated)) as index:
        flat = {"file", "linktype", "interface", "is_tcp", "ip_version", "options_len"}
        for name in flat:
            col = getattr(index, name)
            assert col.strides == (0,) and not col.flags.writeable, name
            assert len(col) == len(index) and len(np.unique(col)) == 1, name
        assert index.frame.strides != (0,) and index.seq.strides != (0,)
        assert index.frame.tolist() == list(range(1, len(index) + 1))


@pytest.mark.parametrize(
    "name",
    [
        "crafted-pcapng-ns-nullloop-prefixed.pcapng",
        "crafted-vlan-ipv6-live-jump.pcap",
        "crafted-snaplen.pcap",
        "crafted-proxy-two-legs.pcap",
    ],
)
def test_decoded_in_windows(name: str, monkeypatch) -> None:
    """Frames decoded a few at a time (issue 9: the decode's temporaries are held for a
    window, not the file) give the same index, errors and address per row."""
    from sse_forensics.ingest import packet_index

    monkeypatch.setattr(packet_index, "DECODE_WINDOW", 3)
    index = assert_same([str(SAMPLES / name)])
    assert len(index) > 3 and len(set(index.addresses)) == len(index.addresses)


@pytest.mark.parametrize("window", [2, 1 << 18])
def test_address_table_across_windows_and_fallback_frames(
    tmp_path: Path, window: int, monkeypatch
) -> None:
    """Addresses kept packed (issue 16) read as decode_tcp writes them, each listed once,
    whether a window or a fallback frame (IPv6 fragment header) saw it first."""
    from sse_forensics.ingest import packet_index

    monkeypatch.setattr(packet_index, "DECODE_WINDOW", window)
    frag = struct.pack("!BBHI", 6, 0, 0x0001, 9)
    records = [
        (ether(ipv6(frag + GET, 44, src="2001:db8::7"), 0x86DD), None),  # fallback first
        (ether(ipv4(GET, src="10.0.0.9")), None),
        (ether(ipv6(GET, src="2001:db8::7"), 0x86DD), None),
        (ether(ipv6(frag + GET, 44, dst="::ffff:10.0.0.9"), 0x86DD), None),
        (ether(ipv4(GET, src="10.0.0.1", dst="10.0.0.9")), None),
        (ether(ipv6(GET, src="2001:db8::1"), 0x86DD), None),
    ]
    index = assert_same([_write(tmp_path, "mixed.pcap", pcap(records, 1))])
    listed = list(index.addresses)
    assert len(listed) == len(set(listed)) == 7 and index.fallback_frames == 2


# -- the index's widths (issue 9: one element per frame, held for the whole scan) ---------------


def _index_bytes(index: PacketIndex) -> int:
    return sum(v.nbytes for v in vars(index).values() if isinstance(v, np.ndarray))


def test_columns_as_narrow_as_their_values(generated: Path) -> None:
    """An ordinary capture (one file under 4 GiB, Ethernet, MTU-sized frames, a few
    addresses) costs at most 52 bytes per frame, and every column reads as decode_tcp
    decodes it (:func:`assert_same`)."""
    index = assert_same([str(generated)])
    n = len(index)
    assert n > 1000 and _index_bytes(index) <= 52 * n
    assert index.data_offset.dtype == np.uint32 and index.file.dtype == np.uint8
    assert index.seq.dtype == index.ack.dtype == np.uint32  # seq.py's 32-bit arithmetic


def test_offsets_past_4_gib_and_tso_frames(tmp_path: Path) -> None:
    """A file past 4 GiB keeps 64-bit offsets, a payload past 64 KiB (a TSO/GRO frame: IPv4
    total length 0) and addresses past 255 widen their columns: the bytes past 4 GiB read
    back as written, the segment as decode_tcp decodes it. (The file is sparse: 16,385
    frames of holes, then the frames that matter.)"""
    big = 262144  # MAX_SANE_CAPLEN
    payload = bytes(range(256)) * 300  # 76,800 bytes
    tso = ether(ipv4(tcp(seq=0xFFFFFF00, flags=TCP_PSH | TCP_ACK) + payload, total=0))
    path = tmp_path / "past-4-gib.pcap"
    with open(path, "wb") as fh:
        fh.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, big, 1))
        for i in range(16385):  # 16,385 * (16 + 262,144) bytes > 4 GiB
            fh.write(struct.pack("<IIII", 1_700_000_000, i, big, big))
            fh.seek(big, 1)
        records = [tso] + [ether(ipv4(GET, src=f"10.1.{k // 256}.{k % 256}")) for k in range(300)]
        for k, data in enumerate(records):
            fh.write(struct.pack("<IIII", 1_700_000_001, k, len(data), len(data)) + data)
    with index_capture(str(path)) as index:
        first = 16385
        assert len(index) == first + 301 and index.data_offset.dtype == np.int64
        assert int(index.data_offset[first]) > 1 << 32
        assert index.payload_len.dtype == np.uint32 and int(index.payload_len[first]) == 76800
        assert index.src.dtype == np.int16  # 301 addresses and -1 (no TCP)
        for i in (first, first + 1, len(index) - 1):
            frame = index.frame_record(i)
            assert frame.data == records[i - first] and index.segment(i) == decode_tcp(frame)
        assert index.payload(first) == payload and int(index.seq[first]) == 0xFFFFFF00
        rows = np.arange(first, len(index))
        joined = index.gather(rows, index.payload_offsets(rows), index.payload_len[rows])
        assert joined == payload + GET[20:] * 300


@pytest.mark.parametrize("rows", [1 << 20, 1, 7])
def test_offsets_past_4_gib_merged_with_another_file(tmp_path: Path, monkeypatch, rows) -> None:
    """Past 4 GiB an offset is held as its low 32 bits and runs of high ones (issue 9):
    merged in time with a small file whose frames fall before, between and after the
    large one's, every row's offset (holes below and past 4 GiB included) is its own file's,
    and the frames past 4 GiB, the wire lengths and the cut payloads read back, whatever
    the slices they are compacted in."""
    big = 262144
    path = tmp_path / "past-4-gib.pcap"
    head = struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, big, 1)
    holes = 16385  # 16,385 * (16 + 262,144) bytes > 4 GiB
    records = [ether(ipv4(GET, src=f"10.1.0.{k}")) for k in range(5)]
    want_big = [24 + 16 + i * (16 + big) for i in range(holes)]
    with open(path, "wb") as fh:
        fh.write(head)
        for i in range(holes):
            fh.write(struct.pack("<IIII", 1_700_000_000, i, big, big))
            fh.seek(big, 1)
        for k, data in enumerate(records):  # the last one cut: 10 bytes captured of it
            kept = data if k < 4 else data[:-10]
            want_big.append(fh.tell() + 16)
            fh.write(struct.pack("<IIII", 1_700_000_001, k, len(kept), len(data)) + kept)
    small = tmp_path / "small.pcap"
    frames = [ether(ipv4(GET, src="10.2.0.1"))] * 3
    with open(small, "wb") as fh:
        fh.write(head)
        for k, (sec, usec) in enumerate(
            ((1_699_999_999, 0), (1_700_000_000, 999_999), (1_700_000_002, 0))
        ):
            fh.write(struct.pack("<IIII", sec, usec, len(frames[k]), len(frames[k])) + frames[k])
    want_small = [24 + 16 + k * (16 + len(frames[0])) for k in range(3)]
    monkeypatch.setattr(packet_index, "COMPACT_ROWS", rows)  # runs cut at slice ends too
    index = index_captures([str(path), str(small)])
    try:
        want = [want_small[0], *want_big[:holes], want_small[1], *want_big[holes:], want_small[2]]
        assert index.data_offset.tolist() == want
        assert len(index.high) > 2  # runs: below 4 GiB, past it, the small file's, ...
        rows = np.arange(len(index))
        assert index.offsets(rows[::-1]).tolist() == want[::-1]
        for i in range(holes + 2, holes + 7):  # the large file's frames past 4 GiB
            frame = index.frame_record(i)
            k = i - holes - 2
            assert frame.data == records[k][: None if k < 4 else -10]
            assert frame.wirelen == len(records[k]) and index.segment(i) == decode_tcp(frame)
        assert index.frame_record(len(index) - 1).data == frames[2]
        assert int(index.missing_tail[holes + 6]) == 10 == int(index.tail[holes + 6])
    finally:
        index.close()


def test_a_value_past_its_column_widens_it() -> None:
    """A decoded value that does not fit the width a column was built in (none should:
    the widths follow from the frames' lengths) widens the column, never wraps."""
    from sse_forensics.ingest.packet_index import _store, narrowest

    cols = {"payload_len": np.zeros(4, dtype=np.uint16)}
    _store(cols, "payload_len", 0, np.array([7, 65535], dtype=np.int64))
    assert cols["payload_len"].dtype == np.uint16
    _store(cols, "payload_len", 2, np.array([70000, -1], dtype=np.int64))
    assert cols["payload_len"].tolist() == [7, 65535, 70000, -1]
    assert narrowest(cols["payload_len"]).dtype == np.int32
    assert narrowest(np.array([0, 255])).dtype == np.uint8
    assert narrowest(np.array([-1, 127])).dtype == np.int8
    assert narrowest(np.array([0, 1 << 32])).dtype == np.int64
