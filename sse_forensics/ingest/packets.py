"""What the capture readers hand to the reassembly layer."""

from __future__ import annotations

from dataclasses import dataclass

from sse_forensics.provenance import Origin


@dataclass(slots=True)
class Frame:
    """One captured record, still in its link-layer encapsulation.

    ``caplen`` bytes were captured of a ``wirelen``-byte packet (snap-length truncation
    when ``caplen < wirelen``).
    """

    origin: Origin
    linktype: int
    data: bytes
    wirelen: int
    interface: int = 0


@dataclass(slots=True)
class TCPSegment:
    """A decoded TCP segment. Addresses are printable strings (``"10.0.0.1"``, ``"::1"``).

    ``missing_tail`` counts payload bytes that were on the wire but not captured
    (snap length): the reassembler records them as a missing-bytes span.
    """

    origin: Origin
    src: str
    sport: int
    dst: str
    dport: int
    seq: int
    ack: int
    flags: int
    window: int
    payload: bytes
    missing_tail: int = 0
    options: bytes = b""

    @property
    def syn(self) -> bool:
        return bool(self.flags & TCP_SYN)

    @property
    def fin(self) -> bool:
        return bool(self.flags & TCP_FIN)

    @property
    def rst(self) -> bool:
        return bool(self.flags & TCP_RST)


# RFC 9293 §3.1 control bits.
TCP_FIN = 0x01
TCP_SYN = 0x02
TCP_RST = 0x04
TCP_PSH = 0x08
TCP_ACK = 0x10
