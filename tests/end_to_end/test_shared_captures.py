"""Third-party HTTP captures (../shared/captures): read without a traceback, and agree with
what their README says they contain. None carries text/event-stream, so none has findings."""

from __future__ import annotations

from pathlib import Path

import pytest

from sse_forensics.pipeline import reassemble_paths, scan_paths

# capture → (HTTP requests seen, final responses seen), from ../shared/captures/README.md
EXPECTED_EXCHANGES = {
    "suricata__http-pipelined-40req.pcap": (40, 40),
    "zeek__http-keepalive-5req-gzip.pcap": (5, 5),
    "zeek__http-browsing-bro.org-31req-8conn.pcap": (31, None),
    "zeek__http-wikipedia-mixed-dns-mdns-nbns.pcap": (15, 15),
    "suricata__http-vlan-port8000-keepalive-11req-gzip.pcap": (11, 11),
    "suricata__http-plaintext-port443-chunked-gzip-json.pcap": (11, 11),
    "suricata__http-chunked-gzip-keepalive-3req.pcap": (3, 3),
    "arkime__http-port4000-chunked-retransmissions.pcap": (4, 4),
    "suricata__http-ipv6-null-loopback-port8065-json.pcap": (3, 3),
    "zeek__http-port9000-gap-10req.pcap": (10, None),
    "zeek__http-qinq-vlan.pcap": (1, 1),
    "zeek__http-on-port22.pcap": (1, 1),
    "suricata__http-multiple-100-continue-port1551.pcap": (1, 1),
}


def _all(shared: Path) -> list[Path]:
    return sorted(p for p in shared.iterdir() if p.suffix in (".pcap", ".pcapng"))


def test_every_shared_capture_scans_cleanly(shared_captures: Path) -> None:
    for capture in _all(shared_captures):
        result = scan_paths(keep_records=True, paths=[str(capture)])
        assert result.stats.frames > 0, capture.name
        assert result.findings == [], capture.name
        assert result.tables["streams"].height == 0, capture.name


@pytest.mark.parametrize("name", sorted(EXPECTED_EXCHANGES))
def test_http_exchanges_agree_with_readme(shared_captures: Path, name: str) -> None:
    requests, responses = EXPECTED_EXCHANGES[name]
    result = scan_paths(keep_records=True, paths=[str(shared_captures / name)])
    exchanges = result.facts.exchanges
    assert sum(1 for ex in exchanges if ex.request is not None) == requests
    if responses is not None:
        assert sum(1 for ex in exchanges if ex.response is not None) == responses


def test_two_interim_100_continue_then_200(shared_captures: Path) -> None:
    result = reassemble_paths(
        [str(shared_captures / "suricata__http-multiple-100-continue-port1551.pcap")]
    )
    (ex,) = result.exchanges
    assert [h.status for h in ex.interim] == [100, 100]
    assert ex.response.status == 200


def test_cut_mid_record_reports_where_and_keeps_the_rest(shared_captures: Path) -> None:
    result = scan_paths(
        keep_records=True,
        paths=[str(shared_captures / "derived__http-browsing-bro.org-cut-mid-record.pcap")],
    )
    assert result.stats.frames == 500
    (error,) = [e for e in result.errors if e.frame == 501]
    assert error.source.endswith("cut-mid-record.pcap")
    assert sum(1 for ex in result.facts.exchanges if ex.request is not None) >= 20


def _split_pcap(src: Path, at_frame: int, out_a: Path, out_b: Path) -> None:
    """Cut a classic little-endian pcap into two files at a frame boundary (a ring buffer)."""
    import struct

    data = src.read_bytes()
    header, pos, frame = data[:24], 24, 0
    while frame < at_frame:
        (incl,) = struct.unpack_from("<I", data, pos + 8)
        pos += 16 + incl
        frame += 1
    out_a.write_bytes(data[:pos])
    out_b.write_bytes(header + data[pos:])


def test_ring_buffer_directory_is_one_capture(shared_captures: Path, tmp_path: Path) -> None:
    """A flow cut across two ring-buffer files stays one flow (mergecap semantics)."""
    src = shared_captures / "zeek__http-keepalive-5req-gzip.pcap"
    whole = scan_paths(keep_records=True, paths=[str(src)])
    _split_pcap(src, 20, tmp_path / "ring_00001.pcap", tmp_path / "ring_00002.pcap")
    merged = scan_paths(keep_records=True, paths=[str(tmp_path)])
    assert len(merged.inputs) == 2
    assert merged.stats.frames == whole.stats.frames
    assert len(merged.connections) == len(whole.connections) == 1
    bodies = [(ex.request.target, ex.body_bytes) for ex in merged.facts.exchanges]
    assert bodies == [(ex.request.target, ex.body_bytes) for ex in whole.facts.exchanges]
    sources = {ex.response.origin.source for ex in merged.facts.exchanges}
    assert len(sources) == 2  # provenance names the file each response came from
