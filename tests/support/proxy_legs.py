"""A capture as a proxy host records it: the client's leg and the upstream leg."""

from __future__ import annotations

from pathlib import Path


def two_legs(capture: Path, out: Path) -> Path:
    """``capture`` plus a copy of it on other ports half a millisecond later: what a capture
    on a proxy host shows (the client's leg and the upstream leg carry the same session, the
    same streams and event IDs, on two connections). Written to ``out``."""
    from scapy.layers.inet import TCP
    from scapy.layers.l2 import Ether  # noqa: F401 (read as Ethernet: the layer binds here)
    from scapy.utils import rdpcap, wrpcap

    packets = rdpcap(str(capture))
    leg = []
    for packet in packets:
        copy = packet.copy()
        copy[TCP].sport += 7
        copy[TCP].dport += 7
        del copy[TCP].chksum
        copy.time = packet.time + 0.0005
        leg.append(copy)
    wrpcap(str(out), sorted([*packets, *leg], key=lambda p: p.time))
    return out
