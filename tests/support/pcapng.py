"""pcapng blocks built by hand (the pcapng draft, draft-ietf-opsawg-pcapng): section and
interface headers, enhanced, obsolete and simple packet blocks, statistics, options."""

from __future__ import annotations

import struct


def block(endian: str, btype: int, body: bytes) -> bytes:
    body += b"\0" * (-len(body) % 4)
    total = len(body) + 12
    return struct.pack(endian + "II", btype, total) + body + struct.pack(endian + "I", total)


def option(endian: str, code: int, value: bytes) -> bytes:
    return struct.pack(endian + "HH", code, len(value)) + value + b"\0" * (-len(value) % 4)


def shb(endian: str) -> bytes:
    return block(endian, 0x0A0D0D0A, struct.pack(endian + "IHHq", 0x1A2B3C4D, 1, 0, -1))


def idb(endian: str, linktype: int, options: bytes = b"", snaplen: int = 0) -> bytes:
    if options:
        options += struct.pack(endian + "HH", 0, 0)
    return block(endian, 1, struct.pack(endian + "HHI", linktype, 0, snaplen) + options)


def epb(endian: str, ifid: int, ticks: int, data: bytes, wirelen: int | None = None) -> bytes:
    wire = len(data) if wirelen is None else wirelen
    head = struct.pack(endian + "IIIII", ifid, ticks >> 32, ticks & 0xFFFFFFFF, len(data), wire)
    return block(endian, 6, head + data)


def opb(endian: str, ifid: int, ticks: int, data: bytes) -> bytes:
    head = struct.pack(
        endian + "HHIIII", ifid, 0, ticks >> 32, ticks & 0xFFFFFFFF, len(data), len(data)
    )
    return block(endian, 2, head + data)


def spb(endian: str, data: bytes, wirelen: int | None = None) -> bytes:
    wire = len(data) if wirelen is None else wirelen
    return block(endian, 3, struct.pack(endian + "I", wire) + data)


def isb(endian: str, ifid: int, ifdrop: int, osdrop: int) -> bytes:
    return block(
        endian,
        5,
        struct.pack(endian + "III", ifid, 0, 0)
        + option(endian, 5, struct.pack(endian + "Q", ifdrop))
        + option(endian, 7, struct.pack(endian + "Q", osdrop))
        + b"\0\0\0\0",
    )
