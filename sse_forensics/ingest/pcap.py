"""Capture file readers: classic pcap and pcapng, one frame at a time.

Formats: classic pcap per draft-ietf-opsawg-pcap (magic ``a1b2c3d4`` µs, ``a1b23c4d`` ns,
``a1b2cd34`` Kuznetzov's modified pcap, either byte order) and pcapng per
draft-ietf-opsawg-pcapng (SHB, IDB, EPB, SPB, OPB, ISB; other blocks are skipped).

Why not ``dpkt.pcap.Reader``: on a file cut mid-record it silently yields the partial
record as a complete frame (checked on ``derived__http-browsing-bro.org-cut-mid-record``:
frame 501, 700 of 1474 bytes, no error), and it builds a header object per record. Here
records are parsed with ``struct.unpack_from`` over an ``mmap`` of the file, copying only
the frame bytes: reading alone is about 1.4x faster than dpkt's reader (870k vs 620k
records/s), and a cut or corrupt record becomes a :class:`ReadError` naming the frame and
byte offset.

Frame numbers are 1-based per file and count every packet record (EPB, SPB, OPB), as
Wireshark numbers them, including frames skipped for an unknown link type.
"""

from __future__ import annotations

import mmap
import os
import struct
from collections.abc import Iterator
from dataclasses import dataclass, field

from sse_forensics.errors import ReadError, UnreadableInput
from sse_forensics.ingest.linklayer import SUPPORTED_LINKTYPES
from sse_forensics.ingest.packets import Frame
from sse_forensics.provenance import Origin, in_epoch

# Classic pcap magic numbers, as read little-endian from the first 4 bytes.
PCAP_MAGIC_US = 0xA1B2C3D4
PCAP_MAGIC_NS = 0xA1B23C4D
PCAP_MAGIC_KUZNETZOV = 0xA1B2CD34  # modified pcap: 24-byte record headers, µs
PCAPNG_SHB = 0x0A0D0D0A  # palindromic: same value in both byte orders
PCAPNG_BYTE_ORDER_MAGIC = 0x1A2B3C4D

# pcapng block types (draft-ietf-opsawg-pcapng §4, §11.1).
BT_IDB = 0x00000001
BT_OPB = 0x00000002  # obsolete Packet Block
BT_SPB = 0x00000003
BT_ISB = 0x00000005
BT_EPB = 0x00000006
BT_DSB = 0x0000000A  # Decryption Secrets Block (§4.7)

# Option codes (§4.2 IDB, §4.6 ISB).
OPT_ENDOFOPT = 0
IF_TSRESOL = 9
IF_TSOFFSET = 14
ISB_IFDROP = 5
ISB_OSDROP = 7

# A caplen above this (and above the file's snaplen) means the record header is garbage.
# 256 KiB is libpcap's MAXIMUM_SNAPLEN; GRO super-segments (64 KiB) stay well below it.
MAX_SANE_CAPLEN = 262144
# pcapng blocks are bounded the same way; 16 MiB is Wireshark's limit for a block.
MAX_SANE_BLOCK = 16 * 1024 * 1024

# IDB link type for "unknown" slots (interface referenced but not described).
_NO_INTERFACE = -1


@dataclass(slots=True)
class CaptureStats:
    """What the capture says about its own completeness.

    ``interface_drops``: the latest ``isb_ifdrop`` per interface (pcapng ISB counters are
    cumulative, so the last block wins). ``os_drops`` likewise for ``isb_osdrop``.
    """

    frames: int = 0
    interface_drops: dict[int, int] = field(default_factory=dict)
    os_drops: dict[int, int] = field(default_factory=dict)
    linktypes: dict[int, int] = field(default_factory=dict)
    # Decryption Secrets Blocks: (secrets type, secrets data), in file order.
    secrets: list[tuple[int, bytes]] = field(default_factory=list)

    @property
    def drops(self) -> int:
        """Packets the capturing interfaces reported as dropped (0 when unknown)."""
        return sum(self.interface_drops.values()) + sum(self.os_drops.values())


def _open_bytes(path: str) -> tuple[bytes | mmap.mmap, int]:
    try:
        with open(path, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            if size == 0:
                return b"", 0
            try:
                return mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ), size
            except (OSError, ValueError):  # not mmap-able (pipe, special file)
                data = fh.read()
                return data, len(data)
    except OSError as exc:
        raise UnreadableInput(path, f"cannot open: {exc.strerror or exc}") from exc


def _magic(buf: bytes | mmap.mmap) -> int | None:
    return struct.unpack_from("<I", buf, 0)[0] if len(buf) >= 4 else None


def _is_capture_magic(magic: int | None) -> bool:
    if magic is None:
        return False
    if magic == PCAPNG_SHB:
        return True
    swapped = int.from_bytes(magic.to_bytes(4, "little"), "big")
    known = (PCAP_MAGIC_US, PCAP_MAGIC_NS, PCAP_MAGIC_KUZNETZOV)
    return magic in known or swapped in known


def sniff_capture(path: str) -> bool:
    """True when ``path`` starts with a pcap or pcapng magic number."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(4)
    except OSError:
        return False
    return _is_capture_magic(_magic(head))


class CaptureReader:
    """Iterator over the frames of one capture file, with :attr:`stats` as it reads.

    Opening validates the magic number and raises :class:`UnreadableInput` for anything
    that is not a capture; everything after that is a value (``ReadError``) in the stream.
    """

    def __init__(self, path: str) -> None:
        self.path = path
        self.stats = CaptureStats()
        self._reported_ifaces: set[int] = set()
        self._bad_time_ifaces: set[int] = set()
        self._buf, self._size = _open_bytes(path)
        magic = _magic(self._buf)
        if not _is_capture_magic(magic):
            shown = "none, file shorter than 4 bytes" if magic is None else f"{magic:08x}"
            self.close()
            raise UnreadableInput(path, f"not a pcap or pcapng file (magic {shown})")
        if magic == PCAPNG_SHB:
            self._it: Iterator[Frame | ReadError] = self._read_pcapng()
        else:
            self._it = self._read_pcap()

    @property
    def drops(self) -> int:
        return self.stats.drops

    def __iter__(self) -> CaptureReader:
        return self

    def __next__(self) -> Frame | ReadError:
        return next(self._it)

    def close(self) -> None:
        if isinstance(self._buf, mmap.mmap):
            self._buf.close()
        self._buf = b""

    def _error(self, what: str, frame: int | None = None, ts: float | None = None) -> ReadError:
        return ReadError(self.path, what, frame=frame, ts=ts)

    def _timed(self, frame: Frame, last_ts: float) -> Iterator[Frame | ReadError]:
        """``frame``, or — when its time is outside 1970–9999 (a huge or negative
        ``if_tsoffset``, a resolution or tick count past the year 9999) — the error
        :func:`time_out_of_range` (once per interface) and the frame with ``last_ts``."""
        if in_epoch(frame.origin.ts):
            yield frame
            return
        if frame.interface not in self._bad_time_ifaces:
            self._bad_time_ifaces.add(frame.interface)
            yield time_out_of_range(self.path, frame.origin.number, frame.interface)
        frame.origin = Origin(self.path, frame.origin.number, last_ts)
        yield frame

    def _unknown_linktype(self, linktype: int, where: str) -> ReadError:
        return self._error(f"unsupported link type {linktype} ({where}): its frames are skipped")

    # -- classic pcap ---------------------------------------------------------------------

    def _read_pcap(self) -> Iterator[Frame | ReadError]:
        buf, size, path = self._buf, self._size, self.path
        try:
            if size < 24:
                yield self._error(f"pcap file header cut short ({size} of 24 bytes)")
                return
            magic = struct.unpack_from("<I", buf, 0)[0]
            endian = "<" if magic in (PCAP_MAGIC_US, PCAP_MAGIC_NS, PCAP_MAGIC_KUZNETZOV) else ">"
            magic = struct.unpack_from(endian + "I", buf, 0)[0]
            snaplen, network = struct.unpack_from(endian + "II", buf, 16)
            # Bits 26-31 of the link-type field carry FCS information (pcap draft §4).
            linktype = network & 0x03FFFFFF
            self.stats.linktypes[0] = linktype
            per_second = 1_000_000_000 if magic == PCAP_MAGIC_NS else 1_000_000
            rec_len = 24 if magic == PCAP_MAGIC_KUZNETZOV else 16
            max_caplen = max(snaplen, MAX_SANE_CAPLEN)
            skip = linktype not in SUPPORTED_LINKTYPES
            if skip:
                yield self._unknown_linktype(linktype, "file header")
            rec = struct.Struct(endian + "IIII")
            unpack_rec = rec.unpack_from
            offset = 24
            number = 0
            while offset < size:
                number += 1
                if offset + rec_len > size:
                    yield self._error(
                        f"file ends inside the record header of frame {number} "
                        f"(byte offset {offset}: {size - offset} of {rec_len} bytes)",
                        frame=number,
                    )
                    return
                sec, frac, caplen, wirelen = unpack_rec(buf, offset)
                ts = sec + frac / per_second
                if caplen > max_caplen:
                    yield self._error(
                        f"corrupt record header for frame {number} at byte offset {offset} "
                        f"(captured length {caplen} exceeds {max_caplen}); rest of file skipped",
                        frame=number,
                        ts=ts,
                    )
                    return
                start = offset + rec_len
                end = start + caplen
                if end > size:
                    yield self._error(
                        f"file ends inside frame {number} (record at byte offset {offset}: "
                        f"{size - start} of {caplen} captured bytes present)",
                        frame=number,
                        ts=ts,
                    )
                    return
                offset = end
                if skip:
                    continue
                yield Frame(Origin(path, number, ts), linktype, buf[start:end], wirelen)
            self.stats.frames = number
        finally:
            self.close()

    # -- pcapng ---------------------------------------------------------------------------

    def _read_pcapng(self) -> Iterator[Frame | ReadError]:
        buf, size = self._buf, self._size
        endian = "<"
        # Per section: interface id -> (linktype, units per second, offset seconds, snaplen)
        interfaces: list[tuple[int, int, int, int]] = []
        number = 0
        offset = 0
        last_ts = 0.0
        try:
            while offset < size:
                if offset + 12 > size:
                    yield self._error(
                        f"file ends inside a block header (byte offset {offset}: "
                        f"{size - offset} of at least 12 bytes)",
                        frame=number + 1,
                    )
                    return
                block_type = struct.unpack_from(endian + "I", buf, offset)[0]
                if block_type == PCAPNG_SHB:
                    # A new section may switch byte order (§4.1); interfaces restart at 0.
                    bom = struct.unpack_from("<I", buf, offset + 8)[0]
                    if bom == PCAPNG_BYTE_ORDER_MAGIC:
                        endian = "<"
                    elif bom == 0x4D3C2B1A:
                        endian = ">"
                    else:
                        yield self._error(
                            f"corrupt section header at byte offset {offset} "
                            f"(byte-order magic {bom:08x}); rest of file skipped",
                            frame=number + 1,
                        )
                        return
                    interfaces = []
                    self._reported_ifaces = set()
                    self._bad_time_ifaces = set()
                block_len = struct.unpack_from(endian + "I", buf, offset + 4)[0]
                if block_len < 12 or block_len % 4 or block_len > MAX_SANE_BLOCK:
                    yield self._error(
                        f"corrupt block at byte offset {offset} (block type {block_type:#x}, "
                        f"length {block_len}); rest of file skipped",
                        frame=number + 1,
                    )
                    return
                end = offset + block_len
                is_packet = block_type in (BT_EPB, BT_SPB, BT_OPB)
                if end > size:
                    where = f"frame {number + 1}" if is_packet else f"block type {block_type:#x}"
                    yield self._error(
                        f"file ends inside {where} (block at byte offset {offset}: "
                        f"{size - offset} of {block_len} bytes present)",
                        frame=number + 1 if is_packet else None,
                    )
                    return
                body = offset + 8
                body_end = end - 4
                if block_type == BT_IDB:
                    interfaces.append(self._interface(buf, body, body_end, endian, len(interfaces)))
                elif is_packet:
                    number += 1
                    got = self._packet(
                        buf, block_type, body, body_end, endian, interfaces, number, last_ts
                    )
                    if isinstance(got, Frame):
                        yield from self._timed(got, last_ts)
                        last_ts = got.origin.ts
                    elif got is not None:
                        yield got
                elif block_type == BT_ISB:
                    self._statistics(buf, body, body_end, endian)
                elif block_type == BT_DSB:
                    decryption_secrets(buf, body, body_end, endian, self.stats)
                offset = end
            self.stats.frames = number
        finally:
            self.close()

    def _options(
        self, buf: bytes | mmap.mmap, pos: int, end: int, endian: str
    ) -> Iterator[tuple[int, int, int]]:
        """(code, value offset, value length) of each option in ``buf[pos:end]``."""
        while pos + 4 <= end:
            code, length = struct.unpack_from(endian + "HH", buf, pos)
            if code == OPT_ENDOFOPT:
                return
            value = pos + 4
            if value + length > end:
                return
            yield code, value, length
            pos = value + ((length + 3) & ~3)

    def _interface(
        self, buf: bytes | mmap.mmap, body: int, end: int, endian: str, ifid: int
    ) -> tuple[int, int, int, int]:
        if body + 8 > end:
            return (_NO_INTERFACE, 1_000_000, 0, 0)
        linktype, _reserved, snaplen = struct.unpack_from(endian + "HHI", buf, body)
        units = 1_000_000  # default if_tsresol: 10^-6 (§4.2)
        tsoffset = 0
        for code, value, length in self._options(buf, body + 8, end, endian):
            if code == IF_TSRESOL and length >= 1:
                resol = buf[value]
                # MSB clear: negative power of 10; set: negative power of 2 (§4.2).
                units = 2 ** (resol & 0x7F) if resol & 0x80 else 10**resol
            elif code == IF_TSOFFSET and length >= 8:
                tsoffset = struct.unpack_from(endian + "q", buf, value)[0]
        self.stats.linktypes[ifid] = linktype
        return (linktype, units, tsoffset, snaplen)

    def _packet(
        self,
        buf: bytes | mmap.mmap,
        block_type: int,
        body: int,
        end: int,
        endian: str,
        interfaces: list[tuple[int, int, int, int]],
        number: int,
        last_ts: float,
    ) -> Frame | ReadError | None:
        """One packet block; an SPB, which has no timestamp, gets the previous frame's
        (Wireshark shows none; reusing the last one keeps the merge order stable)."""
        if block_type == BT_SPB:
            # Simple Packet Block (§4.4): interface 0, no timestamp, caplen from block length.
            if body + 4 > end:
                return self._error(f"simple packet block of frame {number} too short", number)
            ifid = 0
            (wirelen,) = struct.unpack_from(endian + "I", buf, body)
            data_at = body + 4
            caplen = min(wirelen, end - data_at)
            ts_high = ts_low = None
        else:
            head = "IIIII" if block_type == BT_EPB else "HHIIII"
            need = 20
            if body + need > end:
                return self._error(f"packet block of frame {number} too short", number)
            if block_type == BT_EPB:
                ifid, ts_high, ts_low, caplen, wirelen = struct.unpack_from(
                    endian + head, buf, body
                )
            else:
                ifid, _drops, ts_high, ts_low, caplen, wirelen = struct.unpack_from(
                    endian + head, buf, body
                )
            data_at = body + need
        if ifid >= len(interfaces):
            return self._error(f"frame {number} names undescribed interface {ifid}", number)
        linktype, units, tsoffset, snaplen = interfaces[ifid]
        if block_type == BT_SPB and snaplen:
            caplen = min(caplen, snaplen)
        ts = last_ts
        if ts_high is not None and ts_low is not None:
            whole, part = divmod((ts_high << 32) | ts_low, units)
            ts = whole + tsoffset + part / units
        if data_at + caplen > end:
            return self._error(
                f"corrupt packet block for frame {number} (captured length {caplen} exceeds "
                f"the block)",
                number,
                ts,
            )
        if linktype not in SUPPORTED_LINKTYPES:
            return self._note_unknown(linktype, ifid)
        return Frame(
            Origin(self.path, number, ts), linktype, buf[data_at : data_at + caplen], wirelen, ifid
        )

    def _note_unknown(self, linktype: int, ifid: int) -> ReadError | None:
        """One ReadError per interface with an unsupported link type, not one per frame."""
        if ifid in self._reported_ifaces:
            return None
        self._reported_ifaces.add(ifid)
        return self._unknown_linktype(linktype, f"interface {ifid}")

    def _statistics(self, buf: bytes | mmap.mmap, body: int, end: int, endian: str) -> None:
        if body + 12 > end:
            return
        (ifid,) = struct.unpack_from(endian + "I", buf, body)
        for code, value, length in self._options(buf, body + 12, end, endian):
            if length < 8:
                continue
            if code == ISB_IFDROP:
                self.stats.interface_drops[ifid] = struct.unpack_from(endian + "Q", buf, value)[0]
            elif code == ISB_OSDROP:
                self.stats.os_drops[ifid] = struct.unpack_from(endian + "Q", buf, value)[0]


def decryption_secrets(
    buf: bytes | mmap.mmap, body: int, end: int, endian: str, stats: CaptureStats
) -> None:
    """A Decryption Secrets Block's secrets into ``stats.secrets`` (§4.7: type, length,
    data); a block whose length field overruns it is ignored."""
    if body + 8 > end:
        return
    kind, length = struct.unpack_from(endian + "II", buf, body)
    if body + 8 + length <= end:
        stats.secrets.append((kind, bytes(buf[body + 8 : body + 8 + length])))


def time_out_of_range(path: str, number: int, interface: int) -> ReadError:
    """The first frame of an interface whose time cannot be a capture's (outside the
    years 1970–9999): it, and every later such frame of that interface, is read with the
    time of the frame before it (the packet index does the same)."""
    return ReadError(
        path,
        f"time outside the years 1970-9999 (interface {interface}: its if_tsoffset, "
        "if_tsresol or the frame's timestamp); this frame and any later such frame of that "
        "interface take the time of the frame before",
        frame=number,
    )


def read_frames(path: str) -> CaptureReader:
    """Frames of ``path`` (pcap or pcapng), then a ``ReadError`` if the file is cut short.

    Raises :class:`UnreadableInput` at once (before any frame) if ``path`` is not a capture.
    """
    return CaptureReader(path)
