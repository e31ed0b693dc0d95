"""Link layer → IP → TCP, with ``struct`` offsets into the frame bytes.

This is the per-packet hot path, so no per-layer objects are built (dpkt's object per
layer costs several times more): each function returns the offset of the next layer.
Only the TCP payload is copied out.

Not reassembled: IP fragments. A first fragment is decoded (its TCP header is there);
later fragments yield ``None``, so their bytes show up as a hole in the TCP stream —
reported as missing, never silently skipped.
"""

from __future__ import annotations

import socket
import struct

from sse_forensics.errors import ReadError
from sse_forensics.ingest.packets import Frame, TCPSegment

# Link types (https://www.tcpdump.org/linktypes.html).
LINKTYPE_NULL = 0  # BSD loopback: 4-byte AF_ value in the capturing host's byte order
LINKTYPE_ETHERNET = 1
LINKTYPE_RAW_OPENBSD = 12  # DLT_RAW on some BSDs
LINKTYPE_RAW_BSDOS = 14
LINKTYPE_RAW = 101
LINKTYPE_LOOP = 108  # OpenBSD loopback: AF_ value in network byte order
LINKTYPE_LINUX_SLL = 113
LINKTYPE_IPV4 = 228
LINKTYPE_IPV6 = 229
LINKTYPE_LINUX_SLL2 = 276

SUPPORTED_LINKTYPES = frozenset(
    {
        LINKTYPE_NULL,
        LINKTYPE_ETHERNET,
        LINKTYPE_RAW_OPENBSD,
        LINKTYPE_RAW_BSDOS,
        LINKTYPE_RAW,
        LINKTYPE_LOOP,
        LINKTYPE_LINUX_SLL,
        LINKTYPE_IPV4,
        LINKTYPE_IPV6,
        LINKTYPE_LINUX_SLL2,
    }
)

ETHERTYPE_IPV4 = 0x0800
ETHERTYPE_IPV6 = 0x86DD
# 802.1Q C-tag, 802.1ad S-tag, and the pre-standard QinQ tag 0x9100: each adds 4 bytes.
VLAN_TPIDS = frozenset({0x8100, 0x88A8, 0x9100})

# AF_INET is 2 everywhere; AF_INET6 is 10 (Linux), 24 (NetBSD/OpenBSD), 28 (FreeBSD),
# 30 (macOS/Darwin) — a loopback capture keeps the value of the host that wrote it.
AF_INET = 2
AF_INET6_VALUES = frozenset({10, 24, 28, 30})

IPPROTO_TCP = 6
# IPv6 extension headers skipped on the way to TCP (RFC 8200 §4).
IPV6_HOP_BY_HOP = 0
IPV6_ROUTING = 43
IPV6_FRAGMENT = 44
IPV6_AH = 51
IPV6_DEST_OPTS = 60
IPV6_SKIPPED = frozenset({IPV6_HOP_BY_HOP, IPV6_ROUTING, IPV6_DEST_OPTS})

_u16 = struct.Struct("!H").unpack_from
_ipv4 = struct.Struct("!BBHHHBB").unpack_from  # ver/ihl, tos, total, id, frag, ttl, proto
_tcp = struct.Struct("!HHIIBBH").unpack_from  # ports, seq, ack, offset, flags, window
_ntoa = socket.inet_ntoa
_ntop = socket.inet_ntop
_AF6 = socket.AF_INET6

# Printable (src, dst) per raw address pair: a capture has few distinct pairs, and a dict
# hit is several times cheaper than two inet_ntoa/inet_ntop calls. Cleared when it grows
# past this bound (a scan with many hosts must not grow memory without limit).
_ADDRESS_CACHE_MAX = 1 << 16
_address_cache: dict[bytes, tuple[str, str]] = {}


def _addresses(raw: bytes) -> tuple[str, str]:
    half = len(raw) // 2
    if half == 4:
        pair = (_ntoa(raw[:4]), _ntoa(raw[4:]))
    else:
        pair = (_ntop(_AF6, raw[:half]), _ntop(_AF6, raw[half:]))
    if len(_address_cache) >= _ADDRESS_CACHE_MAX:
        _address_cache.clear()
    _address_cache[raw] = pair
    return pair


def _ethertype_ip(data: bytes, pos: int, ethertype: int) -> tuple[int, int] | None:
    """Skip stacked VLAN tags; (IP version, offset) or None if not IP."""
    while ethertype in VLAN_TPIDS:
        if pos + 4 > len(data):
            return None
        ethertype = _u16(data, pos + 2)[0]
        pos += 4
    if ethertype == ETHERTYPE_IPV4:
        return 4, pos
    if ethertype == ETHERTYPE_IPV6:
        return 6, pos
    return None  # ARP, LLDP, 802.3 length field, MPLS, PPPoE...: not ours


def _network_start(linktype: int, data: bytes) -> tuple[int, int] | None:
    """Where the IP header starts: (IP version, offset), or None for non-IP traffic."""
    if linktype == LINKTYPE_ETHERNET:
        if len(data) < 14:
            return None
        return _ethertype_ip(data, 14, _u16(data, 12)[0])
    if linktype == LINKTYPE_LINUX_SLL:
        # SLL: packet type, ARPHRD, addr len, 8-byte addr, protocol (16 bytes).
        if len(data) < 16:
            return None
        return _ethertype_ip(data, 16, _u16(data, 14)[0])
    if linktype == LINKTYPE_LINUX_SLL2:
        # SLL2: protocol, reserved, ifindex, ARPHRD, packet type, addr len, addr (20 bytes).
        if len(data) < 20:
            return None
        return _ethertype_ip(data, 20, _u16(data, 0)[0])
    if linktype in (LINKTYPE_NULL, LINKTYPE_LOOP):
        if len(data) < 4:
            return None
        # The AF value is small, so whichever byte order gives a value < 256 is the right one
        # (NULL uses the writer's host order, LOOP network order; accept both for both).
        family = int.from_bytes(data[0:4], "little")
        if family > 0xFF:
            family = int.from_bytes(data[0:4], "big")
        if family == AF_INET:
            return 4, 4
        if family in AF_INET6_VALUES:
            return 6, 4
        return None
    if linktype in (LINKTYPE_RAW, LINKTYPE_RAW_OPENBSD, LINKTYPE_RAW_BSDOS):
        if not data:
            return None
        version = data[0] >> 4
        return (version, 0) if version in (4, 6) else None
    if linktype == LINKTYPE_IPV4:
        return 4, 0
    if linktype == LINKTYPE_IPV6:
        return 6, 0
    return None


def _malformed(frame: Frame, what: str) -> ReadError:
    o = frame.origin
    return ReadError(o.source, what, frame=o.number, ts=o.ts)


def decode_tcp(frame: Frame) -> TCPSegment | ReadError | None:
    """The TCP segment in ``frame``; None if it carries no (first-fragment) TCP over IP;
    a ReadError if an IP or TCP header that claims TCP is malformed or cut by the snap length.

    ``missing_tail`` counts TCP payload bytes the IP length announces but the capture lacks
    (snap length). Ethernet padding beyond the IP length is dropped.
    """
    data = frame.data
    start = _network_start(frame.linktype, data)
    if start is None:
        return None
    version, ip = start
    captured = len(data) - ip
    if version == 4:
        if captured < 20:
            return None if captured <= 0 else _malformed(frame, "IPv4 header cut short")
        vihl, _tos, total, _ident, frag, _ttl, proto = _ipv4(data, ip)
        if proto != IPPROTO_TCP:
            return None
        if vihl >> 4 != 4:
            return _malformed(frame, f"IP version {vihl >> 4} where IPv4 was announced")
        ihl = (vihl & 0x0F) * 4
        if frag & 0x1FFF:
            return None  # non-first fragment: no TCP header here (see module docstring)
        if total == 0:
            # TCP segmentation offload: the sending host captured before the NIC filled the
            # length in; the wire length is the best evidence (Wireshark does the same).
            total = frame.wirelen - ip
        if ihl < 20 or total < ihl:
            return _malformed(frame, f"IPv4 header length {ihl} / total length {total} invalid")
        if captured < ihl:
            return _malformed(frame, "IPv4 options cut by the snap length")
        raw = data[ip + 12 : ip + 20]
        tcp = ip + ihl
    else:
        if captured < 40:
            return None if captured <= 0 else _malformed(frame, "IPv6 header cut short")
        if data[ip] >> 4 != 6:
            return _malformed(frame, f"IP version {data[ip] >> 4} where IPv6 was announced")
        payload_len = _u16(data, ip + 4)[0]
        # Jumbogram (RFC 2675) or offloaded length 0: fall back to the wire length.
        total = payload_len + 40 if payload_len else frame.wirelen - ip
        proto = data[ip + 6]
        tcp = ip + 40
        end_hdrs = ip + min(total, captured)
        while proto != IPPROTO_TCP:
            if tcp + 8 > end_hdrs:
                return None
            if proto in IPV6_SKIPPED:
                hdr_len = (data[tcp + 1] + 1) * 8
            elif proto == IPV6_FRAGMENT:
                if _u16(data, tcp + 2)[0] & 0xFFF8:
                    return None  # non-first fragment
                hdr_len = 8
            elif proto == IPV6_AH:
                hdr_len = (data[tcp + 1] + 2) * 4
            else:
                return None  # no next header (59), ESP, ICMPv6, UDP, ...
            proto = data[tcp]
            tcp += hdr_len
        raw = data[ip + 8 : ip + 40]
    addresses = _address_cache.get(raw)
    src, dst = addresses if addresses is not None else _addresses(raw)
    ip_end = ip + total  # end of the IP packet on the wire; beyond it is link padding
    if tcp + 20 > ip_end:
        return _malformed(frame, "TCP header does not fit in the IP packet")
    if tcp + 20 > len(data):
        return _malformed(frame, "TCP header cut by the snap length")
    sport, dport, seq, ack, offset_byte, flags, window = _tcp(data, tcp)
    # RFC 9293 §3.1: data offset in 32-bit words; the low bit of that byte is the NS/AE flag.
    doff = (offset_byte >> 4) * 4
    if doff < 20 or tcp + doff > ip_end:
        return _malformed(frame, f"TCP data offset {doff} invalid")
    if tcp + doff > len(data):
        return _malformed(frame, "TCP options cut by the snap length")
    payload_at = tcp + doff
    cap_end = len(data)
    if cap_end >= ip_end:
        cap_end = ip_end
        missing_tail = 0
    else:
        missing_tail = ip_end - cap_end
    return TCPSegment(
        frame.origin,
        src,
        sport,
        dst,
        dport,
        seq,
        ack,
        flags | ((offset_byte & 1) << 8),
        window,
        data[payload_at:cap_end],
        missing_tail,
        data[tcp + 20 : payload_at],
    )
