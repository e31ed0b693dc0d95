"""A TLS connection the tool cannot decrypt (no key log) is named once, clearly, in
``errors``; HTTP/2 with prior knowledge is read
(tests/end_to_end/test_tls_samples.py, test_h2.py)."""

from __future__ import annotations

from pathlib import Path

from sse_forensics.pipeline import scan_paths

CLIENT_HELLO = bytes.fromhex("1603010200010001fc") + b"\x00" * 64  # TLS handshake record
H2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\x00\x00\x12\x04\x00\x00\x00\x00\x00"


def _capture(path: Path, sport: int, payload: bytes, reply: bytes) -> None:
    # scapy's layers as used, not scapy.all (every layer, and the routing table read: ~0.8
    # CPU s more), and here, not as the module is collected by every test process.
    from scapy.layers.inet import IP, TCP
    from scapy.layers.l2 import Ether
    from scapy.utils import wrpcap

    ip = IP(src="10.0.0.1", dst="10.0.0.2")
    packets = [
        Ether() / ip / TCP(sport=sport, dport=443, flags="S", seq=100),
        Ether()
        / IP(src="10.0.0.2", dst="10.0.0.1")
        / TCP(sport=443, dport=sport, flags="SA", seq=500, ack=101),
        Ether() / ip / TCP(sport=sport, dport=443, flags="PA", seq=101, ack=501) / payload,
        Ether()
        / IP(src="10.0.0.2", dst="10.0.0.1")
        / TCP(sport=443, dport=sport, flags="PA", seq=501, ack=101 + len(payload))
        / reply,
    ]
    for n, p in enumerate(packets):
        p.time = 1767225600 + n * 0.01
    wrpcap(str(path), packets)


def test_undecryptable_tls_is_named_once(tmp_path: Path):
    pcap = tmp_path / "foreign.pcap"
    _capture(pcap, 40001, CLIENT_HELLO, b"\x16\x03\x03\x00\x10" + b"\x02" * 16)
    result = scan_paths([str(pcap)])
    (error,) = result.errors
    assert "TLS-encrypted" in error.what and error.frame == 3 and "10.0.0.2:443" in error.what
    assert result.findings == [] and result.stats.http_exchanges == 0


def test_h2_prior_knowledge_is_read_not_refused(tmp_path: Path):
    pcap = tmp_path / "h2c.pcap"
    _capture(pcap, 40001, H2_PREFACE, b"\x00\x00\x00\x04\x00\x00\x00\x00\x00")
    result = scan_paths([str(pcap)])
    assert result.errors == [] and result.findings == []
    assert [c.application for c in result.connections] == ["h2"]
