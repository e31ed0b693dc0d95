"""A capture as a proxy host records it: the client's leg and the upstream leg."""

from __future__ import annotations

from pathlib import Path


def two_legs(capture: Path, out: Path) -> Path:
    """``capture`` plus a copy of it on other ports half a millisecond later: what a capture
    on a proxy host shows (the client's leg and the upstream leg carry the same session, the
    same streams and event IDs, on two connections). Written to ``out``."""
    import scapy.all as scapy

    packets = scapy.rdpcap(str(capture))
    leg = []
    for packet in packets:
        copy = packet.copy()
        copy[scapy.TCP].sport += 7
        copy[scapy.TCP].dport += 7
        del copy[scapy.TCP].chksum
        copy.time = packet.time + 0.0005
        leg.append(copy)
    scapy.wrpcap(str(out), sorted([*packets, *leg], key=lambda p: p.time))
    return out
