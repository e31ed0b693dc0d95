"""A columnar index of the frames of pcap/pcapng captures and of their TCP headers.

:func:`index_capture` (one file) and :func:`index_captures` (several files or a ring buffer,
merged into one timeline exactly as :func:`~sse_forensics.ingest.inputs.merged_frames` merges
them) return a :class:`PacketIndex`: one numpy element per frame that
:func:`~sse_forensics.ingest.pcap.read_frames` yields, with the same frame numbers and
timestamps, and for the frames that decode to TCP the fields a
:class:`~sse_forensics.ingest.packets.TCPSegment` carries. Payloads are not copied: the index
keeps each file mapped and stores byte offsets into it.

How: the record (or pcapng block) headers are walked in one tight ``struct.unpack_from``
loop over the mmap, collecting offsets; every further step gathers header bytes at those
offsets with numpy fancy indexing and decodes them vectorized (Ethernet with stacked
802.1Q/802.1ad/QinQ tags, Linux SLL and SLL2, BSD NULL/LOOP, raw IPv4/IPv6; IPv4 with or
without options; IPv6 whose next header is TCP; the TCP header). A frame the vectorized path
cannot decode *identically* goes to the per-frame
:func:`~sse_forensics.ingest.linklayer.decode_tcp`, which is the definition of the result:

- IPv6 with extension headers (hop-by-hop, routing, fragment, AH, destination options);
- every frame for which ``decode_tcp`` reports a :class:`ReadError` (IP header cut short,
  wrong IP version, invalid IPv4 header or total length, IPv4 options or TCP header/options
  cut by the snap length, TCP header outside the IP packet, invalid TCP data offset): the
  vectorized path detects the condition and lets ``decode_tcp`` word the error.

Frames the vectorized path proves carry no first-fragment TCP (non-IP, other IP protocols,
later IPv4 fragments, empty network layer) are decided there, as ``decode_tcp`` decides them.
Reading errors (truncation, corrupt records or blocks, unknown link types, undescribed
interfaces) are the ones :class:`~sse_forensics.ingest.pcap.CaptureReader` reports, with the
same wording, frame numbers and timestamps, and the :class:`CaptureStats` are the same.
"""

from __future__ import annotations

import array
import contextlib
import heapq
import itertools
import math
import mmap
import os
import socket
import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np

from sse_forensics.errors import ReadError, UnreadableInput
from sse_forensics.ingest.linklayer import (
    AF_INET,
    AF_INET6_VALUES,
    ETHERTYPE_IPV4,
    ETHERTYPE_IPV6,
    IPPROTO_TCP,
    IPV6_AH,
    IPV6_FRAGMENT,
    IPV6_SKIPPED,
    LINKTYPE_ETHERNET,
    LINKTYPE_IPV4,
    LINKTYPE_IPV6,
    LINKTYPE_LINUX_SLL,
    LINKTYPE_LINUX_SLL2,
    LINKTYPE_LOOP,
    LINKTYPE_NULL,
    LINKTYPE_RAW,
    LINKTYPE_RAW_BSDOS,
    LINKTYPE_RAW_OPENBSD,
    SUPPORTED_LINKTYPES,
    VLAN_TPIDS,
    _network_start,
    decode_tcp,
)
from sse_forensics.ingest.packets import TCP_SYN, Frame, TCPSegment
from sse_forensics.ingest.pcap import (
    BT_DSB,
    BT_EPB,
    BT_IDB,
    BT_ISB,
    BT_OPB,
    BT_SPB,
    IF_TSOFFSET,
    IF_TSRESOL,
    ISB_IFDROP,
    ISB_OSDROP,
    MAX_SANE_BLOCK,
    MAX_SANE_CAPLEN,
    OPT_ENDOFOPT,
    PCAP_MAGIC_KUZNETZOV,
    PCAP_MAGIC_NS,
    PCAP_MAGIC_US,
    PCAPNG_BYTE_ORDER_MAGIC,
    PCAPNG_SHB,
    CaptureStats,
    _is_capture_magic,
    _magic,
    _open_bytes,
    decryption_secrets,
    time_out_of_range,
)
from sse_forensics.provenance import EPOCH_MAX, Origin
from sse_forensics.reassembly.tcp_analysis import window_scale_offer

Buffer = bytes | mmap.mmap

_RAW_LINKTYPES = (LINKTYPE_RAW, LINKTYPE_RAW_OPENBSD, LINKTYPE_RAW_BSDOS)
_SUPPORTED = np.array(sorted(SUPPORTED_LINKTYPES), dtype=np.int64)
_VLAN = np.array(sorted(VLAN_TPIDS), dtype=np.int64)
_AF6 = np.array(sorted(AF_INET6_VALUES), dtype=np.int64)
# Next headers that decode_tcp walks past (the frame goes to the fallback); any other
# non-TCP next header means "no TCP here", as in decode_tcp.
_IPV6_WALKED = np.array(sorted({*IPV6_SKIPPED, IPV6_FRAGMENT, IPV6_AH}), dtype=np.int64)
_PACKET_BLOCKS = frozenset({BT_EPB, BT_SPB, BT_OPB})
# pcapng interfaces whose timestamps numpy computes exactly like the reader's Python ints:
# units up to 2**53 (the fraction and the divisor are exact doubles), at least 4 (whole
# seconds of a 64-bit tick count fit in an int64), and an if_tsoffset well inside int64.
_FAST_UNITS = (4, 1 << 53)
_FAST_TSOFFSET = 1 << 62

# Bytes gathered at the start of every frame: Ethernet (with a VLAN tag) or SLL2, IPv6 and
# a TCP header fit, so the usual frame needs no further gather.
_HEAD = 80

_u32le = struct.Struct("<I").unpack_from
_u16be = struct.Struct("!H").unpack_from


# -- the result -----------------------------------------------------------------------------


class Addresses:
    """The distinct IP addresses of an index, kept packed (16 bytes each, an IPv4 address in
    the last 4) and formatted as ``decode_tcp`` formats them when one is asked for (issue 16:
    a flood from a million addresses must not hold a million strings). A read-only sequence
    of ``str``."""

    __slots__ = ("_cache", "_flags", "_raw")
    _CACHE = 1 << 16  # formatted addresses remembered (cleared when full)

    def __init__(self, packed: np.ndarray | None = None, v6: np.ndarray | None = None) -> None:
        # Kept as bytes: slicing them is the cheapest read per address.
        self._raw = b"" if packed is None else np.ascontiguousarray(packed, np.uint8).tobytes()
        self._flags = b"" if v6 is None else np.ascontiguousarray(v6, np.uint8).tobytes()
        self._cache: dict[int, str] = {}

    @property
    def packed(self) -> np.ndarray:
        """uint8 [n, 16] (read-only)."""
        return np.frombuffer(self._raw, dtype=np.uint8).reshape(-1, 16)

    @property
    def v6(self) -> np.ndarray:
        """bool [n]: an IPv6 address (read-only)."""
        return np.frombuffer(self._flags, dtype=np.bool_)

    @classmethod
    def from_ipv4(cls, values: np.ndarray) -> Addresses:
        """IPv4 addresses given as integers (network order read big-endian)."""
        packed = np.zeros((len(values), 16), dtype=np.uint8)
        packed[:, 12:] = values.astype(">u4").view(np.uint8).reshape(-1, 4)
        return cls(packed, np.zeros(len(values), dtype=bool))

    @classmethod
    def from_ipv6(cls, values: np.ndarray) -> Addresses:
        """IPv6 addresses given as 16-byte rows (uint8 [n, 16] or 16-byte voids)."""
        packed = np.ascontiguousarray(values).view(np.uint8).reshape(-1, 16)
        return cls(packed, np.ones(len(packed), dtype=bool))

    @classmethod
    def from_text(cls, texts: Sequence[str]) -> Addresses:
        """Addresses as ``decode_tcp`` writes them."""
        packed = np.zeros((len(texts), 16), dtype=np.uint8)
        v6 = np.zeros(len(texts), dtype=bool)
        for k, text in enumerate(texts):
            six = ":" in text
            raw = socket.inet_pton(socket.AF_INET6 if six else socket.AF_INET, text)
            packed[k, 16 - len(raw) :] = np.frombuffer(raw, dtype=np.uint8)
            v6[k] = six
        return cls(packed, v6)

    def keys(self) -> np.ndarray:
        """One 17-byte value per address (version flag and bytes): equal keys, equal
        addresses."""
        both = np.concatenate([self.v6[:, None].astype(np.uint8), self.packed], axis=1)
        return np.ascontiguousarray(both).view(np.dtype((np.void, 17)))[:, 0]

    def __len__(self) -> int:
        return len(self._flags)

    def __getitem__(self, i: int) -> str:
        got = self._cache.get(i)
        if got is None:
            if i < 0:
                i += len(self)
            if self._flags[i]:
                got = socket.inet_ntop(socket.AF_INET6, self._raw[16 * i : 16 * i + 16])
            else:
                got = socket.inet_ntoa(self._raw[16 * i + 12 : 16 * i + 16])
            if len(self._cache) >= self._CACHE:
                self._cache.clear()
            self._cache[i] = got
        return got

    def __iter__(self) -> Iterator[str]:
        return (self[i] for i in range(len(self)))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Addresses):
            return bool(np.array_equal(self.keys(), other.keys()))
        if isinstance(other, list):
            return list(self) == other
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Addresses({list(self)[:8]!r}{'...' if len(self) > 8 else ''})"

    def __reduce__(self) -> tuple[type[Addresses], tuple[np.ndarray, np.ndarray]]:
        return (Addresses, (self.packed, self.v6))


def join_addresses(tables: Sequence[Addresses]) -> tuple[Addresses, list[np.ndarray]]:
    """The union of ``tables`` (each address once, in order of first appearance) and, per
    table, where each of its entries went (int32, with a trailing -1 so that -1, "no
    address", stays -1 when used as an index)."""
    if len(tables) == 1:
        (only,) = tables
        return only, [np.arange(-1, len(only), dtype=np.int32)[np.r_[1 : len(only) + 1, 0]]]
    keys = np.concatenate([t.keys() for t in tables]) if tables else np.zeros(0, "V17")
    if not len(keys):
        return Addresses(), [np.full(1, -1, dtype=np.int32) for _ in tables]
    _unique, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")
    rank = np.empty(len(first), dtype=np.int32)
    rank[order] = np.arange(len(first), dtype=np.int32)
    where = rank[inverse.reshape(-1)]
    packed = np.concatenate([t.packed for t in tables])[first[order]]
    v6 = np.concatenate([t.v6 for t in tables])[first[order]]
    remaps = []
    at = 0
    for t in tables:
        remaps.append(np.append(where[at : at + len(t)], np.int32(-1)).astype(np.int32))
        at += len(t)
    return Addresses(packed, v6), remaps


@dataclass(eq=False)
class PacketIndex:
    """Columns (numpy arrays, one element per frame, in the order the readers yield frames)
    and what the readers reported.

    Frame columns: ``file`` (index into :attr:`sources`), ``frame`` (1-based per file, as
    ``Origin.number``), ``ts`` (float64 seconds, the reader's exact value), ``caplen``,
    ``wirelen``, ``data_offset`` (the frame's first byte in its file), ``linktype`` and
    ``interface`` (as :class:`Frame` has them).

    TCP columns, meaningful where ``is_tcp`` (zero or -1 elsewhere): ``ip_version`` (4/6),
    ``src``/``dst`` (indexes into :attr:`addresses`, formatted like ``TCPSegment.src``),
    ``sport``, ``dport``, ``seq``, ``ack``, ``flags`` (with NS/AE as bit 8, as
    ``TCPSegment.flags``), ``window`` (unscaled), ``options_at``/``options_len`` (the raw
    TCP options, ``TCPSegment.options``, start ``options_at`` bytes into the frame: see
    :meth:`options_start`), ``payload_len`` (the captured payload, ``TCPSegment.payload``,
    which follows the options: :meth:`payload_start`, :meth:`payload_offsets`),
    ``claimed_len`` (the payload length the IP header announces: ``claimed_len -
    payload_len`` is ``TCPSegment.missing_tail``), ``wscale`` (the Window Scale shift a SYN
    offers, as ``window_scale_offer``; -1 for no offer and for segments without SYN).

    Each column is held in the smallest dtype its values need (issue 9: the index lives for
    the whole scan, one element per frame): ``file``, ``frame``, the lengths, ``data_offset``
    (64-bit only for a file past 4 GiB), ``linktype``, ``interface``, ``src``/``dst`` and
    ``options_at`` as narrow as the capture allows; ``seq``/``ack`` uint32, ports, flags and
    window uint16. Widen before arithmetic that can leave the dtype (``astype(np.int64)``).

    ``errors``: the ReadErrors of the readers and of ``decode_tcp``, in the order
    :func:`~sse_forensics.reassembly.capture.reassemble` would collect them. ``stats``: per
    file, the :class:`CaptureStats` its reader would leave. ``fallback_frames``: how many
    frames were decoded by ``decode_tcp`` instead of the vectorized path.

    The files stay mapped until :meth:`close` (or the end of a ``with`` block): the byte
    accessors (:meth:`data`, :meth:`payload`, :meth:`options`, :meth:`segment`) read them.
    """

    sources: list[str]
    addresses: Addresses
    file: np.ndarray
    frame: np.ndarray
    ts: np.ndarray
    caplen: np.ndarray
    # ``wirelen``, ``data_offset`` and ``claimed_len`` are held as what they add to columns
    # the index has anyway (issue 9: in a clean capture of 5 GB that is some 8 bytes a
    # frame less): ``uncaptured`` = wirelen - caplen and ``tail`` = claimed_len -
    # payload_len (one zero-stride value unless frames were cut), and ``data_offset`` as
    # its low 32 bits past 4 GiB, the high ones in runs (``high_at``/``high``: the rows
    # where a run starts, its value). The properties give the whole columns.
    uncaptured: np.ndarray
    data_low: np.ndarray
    linktype: np.ndarray
    interface: np.ndarray
    is_tcp: np.ndarray
    ip_version: np.ndarray
    src: np.ndarray
    dst: np.ndarray
    sport: np.ndarray
    dport: np.ndarray
    seq: np.ndarray
    ack: np.ndarray
    flags: np.ndarray
    window: np.ndarray
    options_at: np.ndarray
    options_len: np.ndarray
    payload_len: np.ndarray
    tail: np.ndarray
    wscale: np.ndarray
    high_at: np.ndarray = field(default_factory=lambda: np.zeros(1, dtype=np.int64))
    high: np.ndarray = field(default_factory=lambda: np.zeros(1, dtype=np.int64))
    errors: list[ReadError] = field(default_factory=list)
    stats: dict[str, CaptureStats] = field(default_factory=dict)
    fallback_frames: int = 0
    buffers: list[Buffer] = field(default_factory=list, repr=False)
    # Per file, a descriptor the byte accessors read with (None: read ``buffers``).
    fds: list[int | None] = field(default_factory=list, repr=False)

    def __len__(self) -> int:
        return len(self.frame)

    def __enter__(self) -> PacketIndex:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def release(self) -> None:
        """Let the pages of the mapped files read so far leave this process's memory (they
        stay in the page cache; a later read maps them again). A multi-GB capture read
        front to back then costs the pages in use, not the file's size."""
        for buf in self.buffers:
            if isinstance(buf, mmap.mmap) and len(buf):
                with contextlib.suppress(OSError, ValueError):
                    buf.madvise(mmap.MADV_DONTNEED)

    def close(self) -> None:
        """Unmap the files; the columns stay usable, the byte accessors do not."""
        for buf in self.buffers:
            if isinstance(buf, mmap.mmap):
                buf.close()
        for fd in self.fds:
            if fd is not None:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self.buffers = []
        self.fds = []

    @property
    def missing_tail(self) -> np.ndarray:
        """Payload bytes on the wire but not captured, per frame (``TCPSegment.missing_tail``)."""
        out: np.ndarray = self.tail.astype(np.int64)
        return out

    @property
    def claimed_len(self) -> np.ndarray:
        """The payload length the IP header announces, per frame (int64)."""
        out: np.ndarray = self.payload_len.astype(np.int64) + self.tail
        return out

    @property
    def wirelen(self) -> np.ndarray:
        """Each frame's length on the wire (int64)."""
        out: np.ndarray = self.caplen.astype(np.int64) + self.uncaptured
        return out

    @property
    def data_offset(self) -> np.ndarray:
        """Each frame's first byte in its file (:meth:`offsets` of every row; the stored
        column itself below 4 GiB)."""
        if not self._past_4gib:
            return self.data_low
        return self.offsets(np.arange(len(self.data_low)))

    @property
    def _past_4gib(self) -> bool:
        """Some frame starts 4 GiB or more into its file: ``data_low`` needs ``high``."""
        return len(self.high_at) > 1 or bool(self.high[0])

    def offsets(self, rows: np.ndarray) -> np.ndarray:
        """Where the frames ``rows`` start in their files (int64)."""
        out: np.ndarray = self.data_low[rows].astype(np.int64)
        if self._past_4gib:
            out += self.high[np.searchsorted(self.high_at, rows, side="right") - 1] << 32
        return out

    def _offset(self, i: int) -> int:
        k = int(np.searchsorted(self.high_at, i, side="right")) - 1
        return int(self.data_low[i]) + (int(self.high[k]) << 32)

    @property
    def tcp_segments(self) -> int:
        return int(np.count_nonzero(self.is_tcp))

    def _bytes(self, i: int, offset: int, length: int) -> bytes:
        return self._read(int(self.file[i]), offset, length)

    def gather(self, rows: np.ndarray, offsets: np.ndarray, lengths: np.ndarray) -> bytes:
        """``lengths[k]`` bytes at ``offsets[k]`` of row ``rows[k]``'s file, concatenated
        (read with ``pread``, like :meth:`payload`)."""
        if not len(rows):
            return b""
        ends = (offsets + lengths).tolist()
        starts = offsets.tolist()
        sizes = lengths.tolist()
        if len(self.sources) == 1:
            fd = self.fds[0] if self.fds else None
            if fd is not None:
                return b"".join(map(os.pread, itertools.repeat(fd), sizes, starts))
            view = memoryview(self.buffers[0])
            try:
                return b"".join(map(view.__getitem__, map(slice, starts, ends)))
            finally:
                view.release()
        files = self.file[rows].tolist()
        return b"".join([self._read(f, o, n) for f, o, n in zip(files, starts, sizes, strict=True)])

    def _read(self, f: int, offset: int, length: int) -> bytes:
        fd = self.fds[f] if f < len(self.fds) else None
        if fd is not None:
            # pread, not the mapping: scattered reads through a map would keep 64 KB
            # around each one resident, and a long capture whole.
            return os.pread(fd, length, offset)
        return bytes(self.buffers[f][offset : offset + length])

    def data(self, i: int) -> bytes:
        """The captured bytes of frame ``i`` (``Frame.data``)."""
        return self._bytes(i, self._offset(i), int(self.caplen[i]))

    def payload(self, i: int) -> bytes:
        """The captured TCP payload of frame ``i`` (``TCPSegment.payload``)."""
        return self._bytes(i, self.payload_start(i), int(self.payload_len[i]))

    def options(self, i: int) -> bytes:
        """The raw TCP options of frame ``i`` (``TCPSegment.options``)."""
        return self._bytes(i, self.options_start(i), int(self.options_len[i]))

    def options_start(self, i: int) -> int:
        """Where the TCP options of frame ``i`` start in its file."""
        return self._offset(i) + int(self.options_at[i])

    def payload_start(self, i: int) -> int:
        """Where the TCP payload of frame ``i`` starts in its file."""
        return self.options_start(i) + int(self.options_len[i])

    def payload_offsets(self, rows: np.ndarray) -> np.ndarray:
        """Where the TCP payload of each of ``rows`` (TCP rows) starts in its file (int64)."""
        out: np.ndarray = (
            self.offsets(rows)
            + self.options_at[rows].astype(np.int64)
            + self.options_len[rows].astype(np.int64)
        )
        return out

    def origin(self, i: int) -> Origin:
        return Origin(self.sources[int(self.file[i])], int(self.frame[i]), float(self.ts[i]))

    def frame_record(self, i: int) -> Frame:
        """Frame ``i`` as the reader yields it."""
        return Frame(
            self.origin(i),
            int(self.linktype[i]),
            self.data(i),
            int(self.caplen[i]) + int(self.uncaptured[i]),
            int(self.interface[i]),
        )

    def segment(self, i: int) -> TCPSegment | None:
        """Frame ``i`` as ``decode_tcp`` decodes it; None if it is not TCP (or did not
        decode: its ReadError is in :attr:`errors`)."""
        if not self.is_tcp[i]:
            return None
        return TCPSegment(
            self.origin(i),
            self.addresses[int(self.src[i])],
            int(self.sport[i]),
            self.addresses[int(self.dst[i])],
            int(self.dport[i]),
            int(self.seq[i]),
            int(self.ack[i]),
            int(self.flags[i]),
            int(self.window[i]),
            self.payload(i),
            int(self.tail[i]),
            self.options(i),
        )


# (name, dtype computed in, fill value for rows without TCP)
_COLUMNS: tuple[tuple[str, type, int], ...] = (
    ("frame", np.int64, 0),
    ("ts", np.float64, 0),
    ("caplen", np.int64, 0),
    ("wirelen", np.int64, 0),
    ("data_offset", np.int64, 0),
    ("linktype", np.int64, 0),
    ("interface", np.int64, 0),
    ("is_tcp", np.bool_, 0),
    ("ip_version", np.int8, 0),
    ("src", np.int32, -1),
    ("dst", np.int32, -1),
    ("sport", np.uint16, 0),
    ("dport", np.uint16, 0),
    ("seq", np.uint32, 0),
    ("ack", np.uint32, 0),
    ("flags", np.uint16, 0),
    ("window", np.uint16, 0),
    ("options_offset", np.int64, 0),
    ("options_len", np.int64, 0),
    ("payload_offset", np.int64, 0),
    ("payload_len", np.int64, 0),
    ("claimed_len", np.int64, 0),
    ("wscale", np.int8, -1),
)
_FRAME_COLUMNS = ("frame", "ts", "caplen", "wirelen", "data_offset", "linktype", "interface")
# The absolute offsets the decode computes; the index keeps ``options_at`` instead (the
# options' place in the frame: options_offset - data_offset), and the payload follows the
# options (payload_offset = options_offset + options_len, as decode_tcp slices them).
_DERIVED = ("options_offset", "payload_offset")
# The columns of a file's index and of the finished one, with the dtype a file's index holds
# them in while it is built (every value fits: a captured length is at most
# MAX_SANE_CAPLEN or the file's 32-bit snaplen, an original length is a 32-bit field, TCP
# options at most 40 bytes, a payload within a frame). The columns of varying width are
# narrowed to the smallest dtype that holds their values (:func:`narrowest`) once filled.
_STORED_DTYPES: dict[str, type] = {
    **{name: dtype for name, dtype, _ in _COLUMNS if name not in _DERIVED},
    "caplen": np.uint32,
    "wirelen": np.uint32,
    "linktype": np.uint32,
    "interface": np.uint32,
    "options_at": np.uint32,
    "options_len": np.uint8,
    "payload_len": np.uint32,
    "claimed_len": np.uint32,
}
_FILLS: dict[str, int] = {name: fill for name, _, fill in _COLUMNS} | {"options_at": 0}
# Columns stored as narrow as their values allow (issue 9: the index is held for the whole
# scan, one element per frame; a 5 GB capture has some 11 million). Readers widen what they
# compute with (``astype(np.int64)``).
_NARROWED = (
    "file",
    "frame",
    "caplen",
    "wirelen",
    "data_offset",
    "linktype",
    "interface",
    "src",
    "dst",
    "options_at",
    "payload_len",
    "claimed_len",
)
_WIDTHS = (np.uint8, np.uint16, np.uint32, np.int8, np.int16, np.int32)


def narrowest(col: np.ndarray) -> np.ndarray:
    """``col`` in the smallest integer dtype that holds its values (unsigned unless one is
    negative; int64 past 32 bits): the same values, each column as wide as its data needs
    (a frame number, or a byte offset into a capture past 4 GiB, stays 64-bit)."""
    if not len(col):
        return col.astype(np.uint8)
    lo, hi = int(col.min()), int(col.max())
    for dtype in _WIDTHS:
        info = np.iinfo(dtype)
        if info.min <= lo and hi <= info.max:
            return col.astype(dtype, copy=False)
    return col.astype(np.int64, copy=False)


def held_once(col: np.ndarray) -> np.ndarray:
    """``col`` as a read-only view of its one value when every element is equal (an integer
    or bool column): the same values in no memory per element (issue 9: a capture of one
    file, one link type, one window and no options has some ten bytes a frame of such
    columns, 115 MB in a 5 GB capture)."""
    if len(col) < 2 or col.dtype.kind not in "biu" or col.strides == (0,):
        return col
    if col.dtype.kind == "b":
        same = bool(col.all()) or not bool(col.any())
    else:
        same = col.min() == col.max()
    return np.broadcast_to(col[:1].copy(), col.shape) if same else col


def _holding(value: int) -> type:
    """The smallest unsigned dtype (int64 past 32 bits) that holds 0..``value``."""
    for dtype in _WIDTHS[:3]:
        if value <= np.iinfo(dtype).max:
            return dtype
    return np.int64


# -- byte gathering ---------------------------------------------------------------------------


# Bytes a gather may map before it lets them go (see _Bytes.rows).
_RELEASE_SPAN = 32 << 20
# Positions gathered at once: a window of a file's frames.
_GATHER_ROWS = 1 << 16


def _release(buf: Buffer, lo: int, hi: int) -> None:
    """Let the pages of ``buf[lo:hi]`` (an mmap) leave this process's memory: they stay in
    the page cache, and a later read maps them again. Without it a file read through a
    mapping costs its whole size in resident memory — the kernel maps 64 KB around every
    byte touched — whatever the reader keeps."""
    if not isinstance(buf, mmap.mmap) or hi <= lo:
        return
    start = lo - lo % mmap.PAGESIZE
    with contextlib.suppress(OSError, ValueError):
        buf.madvise(mmap.MADV_DONTNEED, start, min(hi, len(buf)) - start)


class _Bytes:
    """Fixed-width gathers from one file's bytes, as (n, width) uint8 arrays (copies)."""

    def __init__(self, buf: Buffer, size: int) -> None:
        self.buf = buf
        self.u8 = np.frombuffer(buf, dtype=np.uint8) if size else np.zeros(1, np.uint8)
        self.size = size

    def rows(self, pos: np.ndarray, width: int) -> np.ndarray:
        """``width`` bytes at each of ``pos`` (>= 0). Bytes past the end of the file read as
        its last byte: callers only use bytes they have checked are inside the frame.

        Gathered a window of positions at a time, each window's pages released after it
        (positions come in file order), so a gather over a multi-GB capture maps a window,
        not the file."""
        if len(pos) <= _GATHER_ROWS:
            out = self._rows(pos, width)
            self._drop(pos, width)
            return out
        out = np.empty((len(pos), width), dtype=np.uint8)
        for lo in range(0, len(pos), _GATHER_ROWS):
            part = pos[lo : lo + _GATHER_ROWS]
            out[lo : lo + len(part)] = self._rows(part, width)
            self._drop(part, width)
        return out

    def _drop(self, pos: np.ndarray, width: int) -> None:
        """Release the pages a gather at ``pos`` mapped, when they are a window of the file
        (positions in file order; a gather of a decode window, too: issue 9)."""
        if len(pos):
            first, last = int(pos.min()), int(pos.max())
            if last - first <= 4 * _RELEASE_SPAN:  # file order: drop what was mapped
                _release(self.buf, first, last + width)

    def _rows(self, pos: np.ndarray, width: int) -> np.ndarray:
        limit = self.size - width
        if limit < 0:
            return np.take(self.u8, pos[:, None] + np.arange(width), mode="clip")
        # One ``width``-byte item starting at every byte of the file: a gather copies whole
        # items (several times faster than gathering bytes).
        items = np.ndarray(
            (limit + 1,), dtype=np.dtype((np.void, width)), buffer=self.u8, strides=(1,)
        )
        inside = pos <= limit
        if bool(inside.all()):
            rows: np.ndarray = items[pos].view(np.uint8).reshape(-1, width)
            return rows
        out = np.empty((len(pos), width), dtype=np.uint8)
        out[inside] = items[pos[inside]].view(np.uint8).reshape(-1, width)
        near_end = pos[~inside]
        out[~inside] = np.take(self.u8, near_end[:, None] + np.arange(width), mode="clip")
        return out


def _be16(b: np.ndarray, k: int) -> np.ndarray:
    out: np.ndarray = (b[:, k].astype(np.int64) << 8) | b[:, k + 1]
    return out


def _u32(b: np.ndarray, k: int, order: str = ">") -> np.ndarray:
    return b[:, k : k + 4].view(order + "u4")[:, 0].astype(np.int64)


def _u32_either(b: np.ndarray, k: int, big: np.ndarray) -> np.ndarray:
    return np.where(big, _u32(b, k, ">"), _u32(b, k, "<"))


# -- reading ----------------------------------------------------------------------------------


@dataclass(slots=True)
class _Frames:
    """The frames of one file that the reader yields, and its reading errors."""

    cols: dict[str, np.ndarray]
    # (frames yielded before the error, error), in the reader's order
    errors: list[tuple[int, ReadError]]


def _empty_frames() -> dict[str, np.ndarray]:
    return {name: np.zeros(0, dtype) for name, dtype, _ in _COLUMNS if name in _FRAME_COLUMNS}


def _walk_pcap(
    buf: Buffer, size: int, endian: str, rec_len: int, max_caplen: int
) -> array.array[int]:
    """Offsets of the complete, sane records; stops at the first one that is not. (An
    ``array``: 8 bytes per frame where a list of ints costs 36.)"""
    unpack = struct.Struct(endian + "I").unpack_from
    offsets: array.array[int] = array.array("q")
    append = offsets.append
    offset = 24
    last = size - rec_len
    released, mark = 0, _RELEASE_SPAN
    while offset <= last:
        caplen = unpack(buf, offset + 8)[0]
        end = offset + rec_len + caplen
        if caplen > max_caplen or end > size:
            break
        append(offset)
        offset = end
        if offset >= mark:
            _release(buf, released, offset)
            released, mark = offset, offset + _RELEASE_SPAN
    _release(buf, released, offset)
    return offsets


def _read_pcap(path: str, buf: Buffer, size: int, data: _Bytes, stats: CaptureStats) -> _Frames:
    errors: list[tuple[int, ReadError]] = []
    if size < 24:
        errors.append((0, ReadError(path, f"pcap file header cut short ({size} of 24 bytes)")))
        return _Frames(_empty_frames(), errors)
    magic = _u32le(buf, 0)[0]
    endian = "<" if magic in (PCAP_MAGIC_US, PCAP_MAGIC_NS, PCAP_MAGIC_KUZNETZOV) else ">"
    magic = struct.unpack_from(endian + "I", buf, 0)[0]
    snaplen, network = struct.unpack_from(endian + "II", buf, 16)
    linktype = network & 0x03FFFFFF
    stats.linktypes[0] = linktype
    per_second = 1_000_000_000 if magic == PCAP_MAGIC_NS else 1_000_000
    rec_len = 24 if magic == PCAP_MAGIC_KUZNETZOV else 16
    max_caplen = max(snaplen, MAX_SANE_CAPLEN)
    skip = linktype not in SUPPORTED_LINKTYPES
    if skip:
        errors.append(
            (
                0,
                ReadError(
                    path, f"unsupported link type {linktype} (file header): its frames are skipped"
                ),
            )
        )
    offsets = _walk_pcap(buf, size, endian, rec_len, max_caplen)
    count = len(offsets)
    # Where the walk stopped: the end of the file, or the first bad record.
    offset = 24
    if offsets:
        offset = offsets[-1] + rec_len + struct.unpack_from(endian + "I", buf, offsets[-1] + 8)[0]
    number = count + 1
    if offset >= size:
        stats.frames = count
    elif offset + rec_len > size:
        errors.append(
            (
                0 if skip else count,
                ReadError(
                    path,
                    f"file ends inside the record header of frame {number} "
                    f"(byte offset {offset}: {size - offset} of {rec_len} bytes)",
                    frame=number,
                ),
            )
        )
    else:
        sec, frac, caplen = struct.unpack_from(endian + "III", buf, offset)
        ts = sec + frac / per_second
        start = offset + rec_len
        if caplen > max_caplen:
            what = (
                f"corrupt record header for frame {number} at byte offset {offset} "
                f"(captured length {caplen} exceeds {max_caplen}); rest of file skipped"
            )
        else:
            what = (
                f"file ends inside frame {number} (record at byte offset {offset}: "
                f"{size - start} of {caplen} captured bytes present)"
            )
        errors.append((0 if skip else count, ReadError(path, what, frame=number, ts=ts)))
    if skip or not count:
        return _Frames(_empty_frames(), errors)
    at = np.frombuffer(offsets, dtype=np.int64)  # a view: the array lives as long as it
    del offsets
    # Record headers only (the decode gathers each window's frame heads), a window of
    # records at a time: the temporaries are a window's, not the file's (issue 9).
    ts = np.empty(count, dtype=np.float64)
    caplen = np.empty(count, dtype=np.uint32)
    wirelen = np.empty(count, dtype=np.uint32)
    for lo in range(0, count, DECODE_WINDOW):
        hi = min(count, lo + DECODE_WINDOW)
        head = data.rows(at[lo:hi], 16).view(endian + "u4")
        # sec + frac / per_second as the reader computes it: frac and per_second are exact
        # doubles, so the division is the correctly rounded one Python's int / int gives.
        ts[lo:hi] = head[:, 0].astype(np.float64) + head[:, 1].astype(np.float64) / float(
            per_second
        )
        caplen[lo:hi] = head[:, 2]
        wirelen[lo:hi] = head[:, 3]
    cols = {
        "frame": np.arange(1, count + 1, dtype=_holding(count)),
        "ts": ts,
        "caplen": narrowest(caplen),
        "wirelen": narrowest(wirelen),
        "data_offset": (at + rec_len).astype(_holding(size)),
        "linktype": np.full(count, linktype, dtype=_holding(linktype)),
        "interface": np.zeros(count, dtype=np.uint8),
    }
    return _Frames(cols, errors)


def _options(buf: Buffer, pos: int, end: int, endian: str) -> Iterator[tuple[int, int, int]]:
    """(code, value offset, value length) of each pcapng option, as the reader walks them."""
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
    buf: Buffer, body: int, end: int, endian: str, ifid: int, stats: CaptureStats
) -> tuple[int, int, int, int]:
    """(linktype, units per second, if_tsoffset, snaplen) of an IDB, as the reader reads it."""
    if body + 8 > end:
        return (-1, 1_000_000, 0, 0)
    linktype, _reserved, snaplen = struct.unpack_from(endian + "HHI", buf, body)
    units = 1_000_000
    tsoffset = 0
    for code, value, length in _options(buf, body + 8, end, endian):
        if code == IF_TSRESOL and length >= 1:
            resol = buf[value]
            units = 2 ** (resol & 0x7F) if resol & 0x80 else 10**resol
        elif code == IF_TSOFFSET and length >= 8:
            tsoffset = struct.unpack_from(endian + "q", buf, value)[0]
    stats.linktypes[ifid] = linktype
    return (linktype, units, tsoffset, snaplen)


def _statistics(buf: Buffer, body: int, end: int, endian: str, stats: CaptureStats) -> None:
    if body + 12 > end:
        return
    (ifid,) = struct.unpack_from(endian + "I", buf, body)
    for code, value, length in _options(buf, body + 12, end, endian):
        if length < 8:
            continue
        if code == ISB_IFDROP:
            stats.interface_drops[ifid] = struct.unpack_from(endian + "Q", buf, value)[0]
        elif code == ISB_OSDROP:
            stats.os_drops[ifid] = struct.unpack_from(endian + "Q", buf, value)[0]


@dataclass(slots=True)
class _Walk:
    """What the pcapng block walk collects."""

    # offsets of packet blocks (8 bytes each, not a list's 36)
    packets: array.array[int] = field(default_factory=lambda: array.array("q"))
    # Context changes: (first packet index, big endian, first interface, interfaces, section)
    contexts: list[tuple[int, bool, int, int, int]] = field(default_factory=list)
    interfaces: list[tuple[int, int, int, int]] = field(default_factory=list)
    terminal: ReadError | None = None


def _walk_pcapng(path: str, buf: Buffer, size: int, stats: CaptureStats) -> _Walk:
    walk = _Walk()
    packets = walk.packets
    append = packets.append
    interfaces = walk.interfaces
    little = struct.Struct("<II").unpack_from
    big = struct.Struct(">II").unpack_from
    header = little
    endian = "<"
    section = -1
    first_iface = 0
    offset = 0
    released, mark = 0, _RELEASE_SPAN
    while offset < size:
        if offset >= mark:  # the walk maps the file as it goes: let the pages behind go
            _release(buf, released, offset)
            released, mark = offset, offset + _RELEASE_SPAN
        if offset + 12 > size:
            walk.terminal = ReadError(
                path,
                f"file ends inside a block header (byte offset {offset}: "
                f"{size - offset} of at least 12 bytes)",
                frame=len(packets) + 1,
            )
            return walk
        block_type, block_len = header(buf, offset)
        if block_type == PCAPNG_SHB:
            bom = _u32le(buf, offset + 8)[0]
            if bom == PCAPNG_BYTE_ORDER_MAGIC:
                endian, header = "<", little
            elif bom == 0x4D3C2B1A:
                endian, header = ">", big
            else:
                walk.terminal = ReadError(
                    path,
                    f"corrupt section header at byte offset {offset} "
                    f"(byte-order magic {bom:08x}); rest of file skipped",
                    frame=len(packets) + 1,
                )
                return walk
            block_len = header(buf, offset)[1]
            section += 1
            first_iface = len(interfaces)
            walk.contexts.append((len(packets), endian == ">", first_iface, 0, section))
        if block_len < 12 or block_len % 4 or block_len > MAX_SANE_BLOCK:
            walk.terminal = ReadError(
                path,
                f"corrupt block at byte offset {offset} (block type {block_type:#x}, "
                f"length {block_len}); rest of file skipped",
                frame=len(packets) + 1,
            )
            return walk
        end = offset + block_len
        if block_type in _PACKET_BLOCKS:
            if end > size:
                number = len(packets) + 1
                walk.terminal = ReadError(
                    path,
                    f"file ends inside frame {number} (block at byte offset {offset}: "
                    f"{size - offset} of {block_len} bytes present)",
                    frame=number,
                )
                return walk
            append(offset)
        else:
            if end > size:
                walk.terminal = ReadError(
                    path,
                    f"file ends inside block type {block_type:#x} (block at byte offset "
                    f"{offset}: {size - offset} of {block_len} bytes present)",
                )
                return walk
            if block_type == BT_IDB:
                ifid = len(interfaces) - first_iface
                interfaces.append(_interface(buf, offset + 8, end - 4, endian, ifid, stats))
                walk.contexts.append((len(packets), endian == ">", first_iface, ifid + 1, section))
            elif block_type == BT_ISB:
                _statistics(buf, offset + 8, end - 4, endian, stats)
            elif block_type == BT_DSB:
                decryption_secrets(buf, offset + 8, end - 4, endian, stats)
        offset = end
    stats.frames = len(packets)
    return walk


def _read_pcapng(path: str, buf: Buffer, size: int, data: _Bytes, stats: CaptureStats) -> _Frames:
    walk = _walk_pcapng(path, buf, size, stats)
    count = len(walk.packets)
    errors: list[tuple[int, ReadError]] = []
    if not count:
        if walk.terminal is not None:
            errors.append((0, walk.terminal))
        return _Frames(_empty_frames(), errors)
    at = np.frombuffer(walk.packets, dtype=np.int64).copy()
    index = np.arange(count, dtype=np.int64)
    starts = np.array([c[0] for c in walk.contexts], dtype=np.int64)
    ctx = np.searchsorted(starts, index, side="right") - 1
    ctx_big = np.array([c[1] for c in walk.contexts], dtype=bool)[ctx]
    ctx_first = np.array([c[2] for c in walk.contexts], dtype=np.int64)[ctx]
    ctx_count = np.array([c[3] for c in walk.contexts], dtype=np.int64)[ctx]

    # Block header, packet block header (EPB/OPB: 28 bytes in all) and the frame's start.
    head = data.rows(at, 28)  # the decode gathers each window's frame heads (issue 9)
    block_type = _u32_either(head, 0, ctx_big)
    block_len = _u32_either(head, 4, ctx_big)
    body = at + 8
    end = at + block_len - 4
    spb = block_type == BT_SPB
    opb = block_type == BT_OPB
    first = _u32_either(head, 8, ctx_big)  # EPB interface id; SPB original length
    opb_ifid = np.where(ctx_big, _be16(head, 8), (head[:, 9].astype(np.int64) << 8) | head[:, 8])
    ts_high = _u32_either(head, 12, ctx_big)
    ts_low = _u32_either(head, 16, ctx_big)
    short = np.where(spb, body + 4 > end, body + 20 > end)
    ifid = np.where(spb, 0, np.where(opb, opb_ifid, first))
    data_at = np.where(spb, body + 4, body + 20)
    wirelen = np.where(spb, first, _u32_either(head, 24, ctx_big))
    caplen = np.where(spb, np.minimum(first, end - data_at), _u32_either(head, 20, ctx_big))
    undescribed = ~short & (ifid >= ctx_count)
    valid = ~short & ~undescribed
    iface = np.where(valid, ctx_first + ifid, 0)

    ifaces = walk.interfaces or [(-1, 1_000_000, 0, 0)]
    if_linktype = np.array([i[0] for i in ifaces], dtype=np.int64)
    if_snaplen = np.array([i[3] for i in ifaces], dtype=np.int64)
    linktype = if_linktype[iface]
    snaplen = if_snaplen[iface]
    caplen = np.where(spb & (snaplen > 0), np.minimum(caplen, snaplen), caplen)

    ts = _pcapng_timestamps(ifaces, iface, ts_high, ts_low, valid & ~spb)
    overflow = valid & (data_at + caplen > end)
    supported = np.isin(linktype, _SUPPORTED)
    good = valid & ~overflow & supported
    # A time outside 1970-9999 (pcap.time_out_of_range) is replaced like an SPB's.
    untimed = good & ~spb & ~((ts >= 0.0) & (ts <= EPOCH_MAX))
    # A Simple Packet Block has no timestamp: it gets the one of the last frame yielded
    # before it (0.0 before any); the last one yielded that is not itself an SPB has it.
    if spb.any() or untimed.any():
        with_ts = np.where(good & ~spb & ~untimed, index, -1)
        before = np.maximum.accumulate(with_ts)
        spb_ts = np.where(before >= 0, ts[np.maximum(before, 0)], 0.0)
        ts = np.where(spb | untimed, spb_ts, ts)
    if untimed.any():
        # One error per (section, interface): its first such frame.
        _, first_rows = np.unique(np.where(untimed, iface, -1), return_index=True)
        first_untimed = np.zeros(count, dtype=bool)
        first_untimed[first_rows] = True
        untimed &= first_untimed

    # Per-frame errors, one at most per frame, in frame order.
    unknown = valid & ~overflow & ~supported
    if unknown.any():
        # One error per (section, interface): its first frame.
        _, first_rows = np.unique(np.where(unknown, iface, -1), return_index=True)
        first_unknown = np.zeros(count, dtype=bool)
        first_unknown[first_rows] = True
        unknown &= first_unknown
    problem = short | undescribed | overflow | unknown | untimed
    if problem.any():
        yielded_before = np.cumsum(good) - good
        for row in np.flatnonzero(problem).tolist():
            number = row + 1
            if short[row]:
                what = (
                    f"simple packet block of frame {number} too short"
                    if spb[row]
                    else f"packet block of frame {number} too short"
                )
                err = ReadError(path, what, frame=number)
            elif undescribed[row]:
                err = ReadError(
                    path, f"frame {number} names undescribed interface {int(ifid[row])}", number
                )
            elif untimed[row]:
                err = time_out_of_range(path, number, int(ifid[row]))
            elif overflow[row]:
                err = ReadError(
                    path,
                    f"corrupt packet block for frame {number} (captured length "
                    f"{int(caplen[row])} exceeds the block)",
                    number,
                    ts=float(ts[row]),
                )
            else:
                err = ReadError(
                    path,
                    f"unsupported link type {int(linktype[row])} (interface {int(ifid[row])}): "
                    "its frames are skipped",
                )
            errors.append((int(yielded_before[row]), err))
    if walk.terminal is not None:
        errors.append((int(np.count_nonzero(good)), walk.terminal))

    rows = np.flatnonzero(good)
    cols = {
        "frame": (rows + 1).astype(_holding(count)),
        "ts": ts[rows],
        "caplen": narrowest(caplen[rows]),
        "wirelen": narrowest(wirelen[rows]),
        "data_offset": data_at[rows].astype(_holding(size)),
        "linktype": narrowest(linktype[rows]),
        "interface": narrowest(ifid[rows]),
    }
    return _Frames(cols, errors)


def _pcapng_timestamps(
    ifaces: list[tuple[int, int, int, int]],
    iface: np.ndarray,
    ts_high: np.ndarray,
    ts_low: np.ndarray,
    timed: np.ndarray,
) -> np.ndarray:
    """``whole + tsoffset + part / units`` with ``whole, part = divmod(ticks, units)``, as
    the reader computes it; numpy for the usual resolutions, Python ints otherwise."""
    ts = np.zeros(len(iface), dtype=np.float64)
    fast_if = np.array(
        [
            _FAST_UNITS[0] <= units <= _FAST_UNITS[1] and abs(tsoffset) < _FAST_TSOFFSET
            for _lt, units, tsoffset, _snap in ifaces
        ],
        dtype=bool,
    )
    fast = timed & fast_if[iface]
    if fast.any():
        units = np.array([min(i[1], _FAST_UNITS[1]) for i in ifaces], dtype=np.uint64)[iface]
        offsets = np.array(
            [i[2] if abs(i[2]) < _FAST_TSOFFSET else 0 for i in ifaces], dtype=np.int64
        )[iface]
        ticks = (ts_high.astype(np.uint64) << np.uint64(32)) | ts_low.astype(np.uint64)
        units, offsets, ticks = units[fast], offsets[fast], ticks[fast]
        whole = (ticks // units).astype(np.int64) + offsets
        part = ticks % units
        ts[fast] = whole.astype(np.float64) + part.astype(np.float64) / units.astype(np.float64)
    for row in np.flatnonzero(timed & ~fast).tolist():
        _lt, units, tsoffset, _snap = ifaces[int(iface[row])]
        whole, part = divmod((int(ts_high[row]) << 32) | int(ts_low[row]), units)
        ts[row] = whole + tsoffset + part / units
    return ts


# -- decoding ---------------------------------------------------------------------------------


@dataclass(slots=True)
class _Decoded:
    cols: dict[str, np.ndarray]
    addresses: Addresses
    errors: list[tuple[int, ReadError]]  # (row, error of decode_tcp)
    fallback: int


def _keep(mask: np.ndarray, *arrays: np.ndarray) -> tuple[np.ndarray, ...]:
    """``arrays`` restricted to ``mask`` (no copy when it keeps everything: the usual case)."""
    if bool(mask.all()):
        return arrays
    return tuple(a[mask] for a in arrays)


def _put(col: np.ndarray, rows: np.ndarray | slice, values: np.ndarray | int) -> None:
    col[rows] = values


def _unique_inverse(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(values, return_inverse=True)`` for IPv4 addresses. A capture has few
    distinct ones, so a lookup table (addresses in a narrow range) or the candidates from a
    sample usually replace the sort."""
    lo, hi = int(values.min()), int(values.max())
    if hi - lo < 1 << 20:
        present = np.zeros(hi - lo + 1, dtype=bool)
        present[values - lo] = True
        return np.flatnonzero(present) + lo, (np.cumsum(present) - 1)[values - lo]
    candidates = np.unique(values[:: max(1, len(values) // 4096)])
    at = np.minimum(np.searchsorted(candidates, values), len(candidates) - 1)
    if bool(np.all(candidates[at] == values)):
        return candidates, at
    unique, inverse = np.unique(values, return_inverse=True)
    return unique, inverse.reshape(-1)


def _decode(
    path: str,
    buf: Buffer,
    data: _Bytes,
    frames: dict[str, np.ndarray],
    head: np.ndarray | None,
) -> _Decoded:
    n = len(frames["frame"])
    cols: dict[str, np.ndarray] = {
        name: np.zeros(n, dtype=dtype) if fill == 0 else np.full(n, fill, dtype=dtype)
        for name, dtype, fill in _COLUMNS
        if name not in _FRAME_COLUMNS
    }
    if not n:
        return _Decoded(cols, Addresses(), [], 0)
    off = frames["data_offset"]
    cap = frames["caplen"]
    wirelen = frames["wirelen"]
    lt = frames["linktype"]
    every = np.arange(n, dtype=np.int64)
    if head is None:
        head = data.rows(off, _HEAD)

    def window(rows: np.ndarray, at: np.ndarray, width: int) -> np.ndarray:
        """``width`` bytes at ``at`` in the frames ``rows``: from ``head`` when they are at
        the same place in every frame, else gathered from the file."""
        if rows.size:
            lo = int(at.min())
            if lo == int(at.max()) and lo + width <= _HEAD:
                if rows is every:
                    return head[:, lo : lo + width]
                return head[rows, lo : lo + width]
        return data.rows(off[rows] + at, width)

    # Link layer: where the IP header starts, and which version the link layer announces.
    version = np.zeros(n, dtype=np.int64)  # 0: not IP (decode_tcp returns None)
    ip = np.zeros(n, dtype=np.int64)
    ethertype = np.full(n, -1, dtype=np.int64)
    pos = np.zeros(n, dtype=np.int64)
    for linktype, type_at, start in (
        (LINKTYPE_ETHERNET, 12, 14),
        (LINKTYPE_LINUX_SLL, 14, 16),
        (LINKTYPE_LINUX_SLL2, 0, 20),
    ):
        m = (lt == linktype) & (cap >= start)
        if bool(m.all()):
            ethertype = _be16(head, type_at)
            pos[:] = start
        elif m.any():
            ethertype[m] = _be16(head[m], type_at)
            pos[m] = start
    tagged = np.flatnonzero(np.isin(ethertype, _VLAN))
    while tagged.size:
        cut = pos[tagged] + 4 > cap[tagged]
        ethertype[tagged[cut]] = -1
        tagged = tagged[~cut]
        ethertype[tagged] = _be16(window(tagged, pos[tagged], 4), 2)
        pos[tagged] += 4
        tagged = tagged[np.isin(ethertype[tagged], _VLAN)]
    for et, v in ((ETHERTYPE_IPV4, 4), (ETHERTYPE_IPV6, 6)):
        m = ethertype == et
        version[m] = v
        ip[m] = pos[m]
    m = np.isin(lt, (LINKTYPE_NULL, LINKTYPE_LOOP)) & (cap >= 4)
    if m.any():
        h = head[m]
        family = _u32(h, 0, "<")
        family = np.where(family > 0xFF, _u32(h, 0, ">"), family)
        version[m] = np.where(family == AF_INET, 4, np.where(np.isin(family, _AF6), 6, 0))
        ip[m] = 4
    m = np.isin(lt, _RAW_LINKTYPES) & (cap >= 1)
    if m.any():
        v = head[m, 0].astype(np.int64) >> 4
        version[m] = np.where((v == 4) | (v == 6), v, 0)
    version[lt == LINKTYPE_IPV4] = 4
    version[lt == LINKTYPE_IPV6] = 6
    captured = cap - ip

    fallback = np.zeros(n, dtype=bool)
    empty = np.zeros(0, dtype=np.int64)
    # rows, tcp, ip end, src, dst, hdr
    v4: tuple[np.ndarray, ...] = (empty, empty, empty, empty, empty, empty)
    v6 = v4

    # IPv4 (with or without options)
    rows = every if bool((version == 4).all()) else np.flatnonzero(version == 4)
    if rows.size:
        c = captured[rows]
        fallback[rows[(c > 0) & (c < 20)]] = True  # "IPv4 header cut short"
        (rows,) = _keep(c >= 20, rows)
        at = ip[rows]
        h = window(rows, at, 20)
        rows, at, h = _keep(h[:, 9] == IPPROTO_TCP, rows, at, h)
        bad_version = (h[:, 0] >> 4) != 4
        fallback[rows[bad_version]] = True
        rows, at, h = _keep(~bad_version, rows, at, h)
        # A later fragment has no TCP header.
        rows, at, h = _keep((_be16(h, 6) & 0x1FFF) == 0, rows, at, h)
        ihl = (h[:, 0].astype(np.int64) & 0x0F) * 4
        total = _be16(h, 2)
        zero = total == 0
        if zero.any():  # TSO: the wire length stands for the missing total length
            total = np.where(zero, wirelen[rows] - at, total)
        bad = (ihl < 20) | (total < ihl) | (captured[rows] < ihl)
        fallback[rows[bad]] = True
        rows, at, h, ihl, total = _keep(~bad, rows, at, h, ihl, total)
        v4 = (rows, at + ihl, at + total, _u32(h, 12), _u32(h, 16), h)

    # IPv6 whose next header is TCP (extension headers: fallback)
    rows = np.flatnonzero(version == 6)
    if rows.size:
        c = captured[rows]
        fallback[rows[(c > 0) & (c < 40)]] = True  # "IPv6 header cut short"
        (rows,) = _keep(c >= 40, rows)
        at = ip[rows]
        h = window(rows, at, 40)
        bad_version = (h[:, 0] >> 4) != 6
        fallback[rows[bad_version]] = True
        rows, at, h = _keep(~bad_version, rows, at, h)
        next_header = h[:, 6].astype(np.int64)
        fallback[rows[np.isin(next_header, _IPV6_WALKED)]] = True
        rows, at, h = _keep(next_header == IPPROTO_TCP, rows, at, h)
        payload_len = _be16(h, 4)
        total = np.where(payload_len != 0, payload_len + 40, wirelen[rows] - at)
        v6 = (rows, at + 40, at + total, h[:, 8:24], h[:, 24:40], h)

    # TCP
    if v6[0].size:
        rows = np.concatenate([v4[0], v6[0]])
        tcp = np.concatenate([v4[1], v6[1]])
        end = np.concatenate([v4[2], v6[2]])
    else:
        rows, tcp, end = v4[0], v4[1], v4[2]
    bad = (tcp + 20 > end) | (tcp + 20 > cap[rows])
    fallback[rows[bad]] = True
    rows, tcp, end = _keep(~bad, rows, tcp, end)
    h = window(rows, tcp, 20)
    doff = (h[:, 12].astype(np.int64) >> 4) * 4
    payload_at = tcp + doff
    cap_rows = cap[rows]
    bad = (doff < 20) | (payload_at > end) | (payload_at > cap_rows)
    fallback[rows[bad]] = True
    rows, tcp, end, h, doff, payload_at, cap_rows = _keep(
        ~bad, rows, tcp, end, h, doff, payload_at, cap_rows
    )
    where: np.ndarray | slice = slice(None) if rows.size == n and not v6[0].size else rows
    base = off[rows]
    _put(cols["is_tcp"], where, True)
    _put(cols["sport"], where, _be16(h, 0))
    _put(cols["dport"], where, _be16(h, 2))
    _put(cols["seq"], where, _u32(h, 4))
    _put(cols["ack"], where, _u32(h, 8))
    _put(cols["flags"], where, h[:, 13] | ((h[:, 12].astype(np.int64) & 1) << 8))
    _put(cols["window"], where, _be16(h, 14))
    _put(cols["options_offset"], where, base + tcp + 20)
    _put(cols["options_len"], where, doff - 20)
    _put(cols["payload_offset"], where, base + payload_at)
    _put(cols["payload_len"], where, np.minimum(cap_rows, end) - payload_at)
    _put(cols["claimed_len"], where, end - payload_at)

    # Addresses: a table of the distinct ones, formatted as decode_tcp formats them.
    tables: list[Addresses] = []
    decoded = np.zeros(n, dtype=bool)
    decoded[rows] = True
    v4_rows, _, _, v4_src, v4_dst, _ = v4
    v4_rows, v4_src, v4_dst = _keep(decoded[v4_rows], v4_rows, v4_src, v4_dst)
    if v4_rows.size:
        unique, inverse = _unique_inverse(np.concatenate([v4_src, v4_dst]))
        tables.append(Addresses.from_ipv4(unique))
        inverse = inverse.astype(np.int32)
        k = v4_rows.size
        where = slice(None) if k == n else v4_rows
        _put(cols["src"], where, inverse[:k])
        _put(cols["dst"], where, inverse[k:])
        _put(cols["ip_version"], where, 4)
    v6_rows, _, _, v6_src, v6_dst, _ = v6
    v6_rows, v6_src, v6_dst = _keep(decoded[v6_rows], v6_rows, v6_src, v6_dst)
    if v6_rows.size:
        both = np.ascontiguousarray(np.concatenate([v6_src, v6_dst]))
        unique, inverse = np.unique(both.view(np.dtype((np.void, 16)))[:, 0], return_inverse=True)
        first = sum(len(t) for t in tables)
        tables.append(Addresses.from_ipv6(unique))
        inverse = inverse.reshape(-1).astype(np.int32) + first
        k = v6_rows.size
        cols["src"][v6_rows] = inverse[:k]
        cols["dst"][v6_rows] = inverse[k:]
        cols["ip_version"][v6_rows] = 6

    # (The v4 and v6 tables are disjoint: joined, their indexes stay as they are.)
    addresses = join_addresses(tables)[0] if tables else Addresses()
    errors, addresses = _fallback(path, buf, frames, cols, addresses, np.flatnonzero(fallback))
    _window_scale(buf, cols)
    return _Decoded(cols, addresses, errors, int(np.count_nonzero(fallback)))


DECODE_WINDOW = 1 << 16
"""Frames decoded at once. The decode's temporaries (frame heads, offsets, masks: a few
hundred bytes per frame) are held for one window, not for the whole file (issue 9: a
capture of ten million frames must not cost gigabytes while it is indexed; at 2**18 a
window's were ~110 MB, the index pass's peak over the index, at 2**16 ~30 MB, and the
pass is no slower)."""
# Frame columns the decode computes with as int64 (they are stored narrower).
_WIDE = ("frame", "caplen", "wirelen", "data_offset", "linktype", "interface")


def _store(cols: dict[str, np.ndarray], name: str, lo: int, values: np.ndarray) -> None:
    """``cols[name][lo:lo + len(values)] = values``, the column widened first (to the
    dtype it is computed in) if a value does not fit its dtype."""
    col = cols[name]
    if col.dtype.kind in "iu" and len(values) and values.dtype != col.dtype:
        info = np.iinfo(col.dtype)
        if int(values.min()) < info.min or int(values.max()) > info.max:
            col = cols[name] = col.astype(np.int64)
    col[lo : lo + len(values)] = values


def _decode_windows(
    path: str, buf: Buffer, data: _Bytes, frames: dict[str, np.ndarray]
) -> _Decoded:
    """:func:`_decode` over windows of :data:`DECODE_WINDOW` frames, into columns of their
    stored widths: the same columns (``options_at`` for the absolute offsets), errors
    (rows of the file) and fallback count; the address table lists each address once, in
    order of first window."""
    n = len(frames["frame"])
    # Built as narrow as the frames allow (a payload and the options' place are within the
    # captured bytes; the claimed length is at most an IP length or the original length):
    # a value that does not fit widens its column (_store).
    caplen = int(frames["caplen"].max()) if n else 0
    wirelen = int(frames["wirelen"].max()) if n else 0
    widths = {
        "options_at": _holding(caplen),
        "payload_len": _holding(caplen),
        "claimed_len": _holding(max(wirelen, 0xFFFF)),
    }
    cols: dict[str, np.ndarray] = {
        name: np.full(n, _FILLS[name], dtype=widths.get(name, dtype))
        for name, dtype in _STORED_DTYPES.items()
        if name not in _FRAME_COLUMNS
    }
    tables: list[Addresses] = []
    errors: list[tuple[int, ReadError]] = []
    fallback = 0
    base = 0  # the window's first entry in the concatenation of the windows' tables
    for lo in range(0, n, DECODE_WINDOW):
        hi = min(n, lo + DECODE_WINDOW)
        window = {
            name: col[lo:hi].astype(np.int64) if name in _WIDE else col[lo:hi]
            for name, col in frames.items()
        }
        part = _decode(path, buf, data, window, None)
        start = window["data_offset"]
        del window
        tcp = part.cols["is_tcp"]
        options = part.cols.pop("options_offset")
        payload = part.cols.pop("payload_offset")
        if not np.array_equal(payload[tcp], (options + part.cols["options_len"])[tcp]):
            raise AssertionError(f"{path}: payload offsets not after the options")
        _store(cols, "options_at", lo, np.where(tcp, options - start, 0))
        del options, payload, start
        for name, col in part.cols.items():
            _store(
                cols,
                name,
                lo,
                np.where(col >= 0, col + base, -1) if name in ("src", "dst") else col,
            )
        tables.append(part.addresses)
        base += len(part.addresses)
        errors.extend((row + lo, err) for row, err in part.errors)
        fallback += part.fallback
    if len(tables) <= 1:
        return _Decoded(cols, tables[0] if tables else Addresses(), errors, fallback)
    addresses, remaps = join_addresses(tables)
    where = np.concatenate([r[:-1] for r in remaps] + [np.full(1, -1, dtype=np.int32)])
    for name in ("src", "dst"):
        cols[name] = where[cols[name]]  # -1 reads the trailing -1
    return _Decoded(cols, addresses, errors, fallback)


def _tcp_offsets(linktype: int, data: bytes, wirelen: int) -> tuple[int, int, int, int]:
    """(IP version, TCP header, payload start, captured payload end) of a frame that
    ``decode_tcp`` decoded to a segment: its offsets, walked the same way."""
    start = _network_start(linktype, data)
    assert start is not None
    version, ip = start
    if version == 4:
        ihl = (data[ip] & 0x0F) * 4
        total = _u16be(data, ip + 2)[0] or wirelen - ip
        tcp = ip + ihl
    else:
        payload_len = _u16be(data, ip + 4)[0]
        total = payload_len + 40 if payload_len else wirelen - ip
        proto = data[ip + 6]
        tcp = ip + 40
        while proto != IPPROTO_TCP:
            if proto in IPV6_SKIPPED:
                hdr_len = (data[tcp + 1] + 1) * 8
            elif proto == IPV6_FRAGMENT:
                hdr_len = 8
            else:  # AH
                hdr_len = (data[tcp + 1] + 2) * 4
            proto = data[tcp]
            tcp += hdr_len
    payload_at = tcp + (data[tcp + 12] >> 4) * 4
    return version, tcp, payload_at, min(len(data), ip + total)


def _fallback(
    path: str,
    buf: Buffer,
    frames: dict[str, np.ndarray],
    cols: dict[str, np.ndarray],
    addresses: Addresses,
    rows: np.ndarray,
) -> tuple[list[tuple[int, ReadError]], Addresses]:
    """Decode ``rows`` one by one with decode_tcp; fill their columns. Returns the errors
    and ``addresses`` with the ones only these rows have."""
    errors: list[tuple[int, ReadError]] = []
    if not rows.size:
        return errors, addresses
    known: dict[str, int] = {}
    added: list[str] = []

    def address(text: str) -> int:
        got = known.get(text)
        if got is None:
            got = known[text] = len(addresses) + len(added)
            added.append(text)
        return got

    for row in rows.tolist():
        start = int(frames["data_offset"][row])
        data = bytes(buf[start : start + int(frames["caplen"][row])])
        wirelen = int(frames["wirelen"][row])
        linktype = int(frames["linktype"][row])
        frame = Frame(
            Origin(path, int(frames["frame"][row]), float(frames["ts"][row])),
            linktype,
            data,
            wirelen,
            int(frames["interface"][row]),
        )
        seg = decode_tcp(frame)
        if seg is None:
            continue
        if isinstance(seg, ReadError):
            errors.append((row, seg))
            continue
        version, tcp, payload_at, cap_end = _tcp_offsets(linktype, data, wirelen)
        if data[payload_at:cap_end] != seg.payload or data[tcp + 20 : payload_at] != seg.options:
            raise AssertionError(f"{path} frame {frame.origin.number}: offsets out of step")
        cols["is_tcp"][row] = True
        cols["ip_version"][row] = version
        cols["src"][row] = address(seg.src)
        cols["dst"][row] = address(seg.dst)
        cols["sport"][row] = seg.sport
        cols["dport"][row] = seg.dport
        cols["seq"][row] = seg.seq
        cols["ack"][row] = seg.ack
        cols["flags"][row] = seg.flags
        cols["window"][row] = seg.window
        cols["options_offset"][row] = start + tcp + 20
        cols["options_len"][row] = len(seg.options)
        cols["payload_offset"][row] = start + payload_at
        cols["payload_len"][row] = len(seg.payload)
        cols["claimed_len"][row] = len(seg.payload) + seg.missing_tail
    if not added:
        return errors, addresses
    # The table's own entries keep their places; an added one goes to its first copy.
    joined, (_, remap) = join_addresses([addresses, Addresses.from_text(added)])
    for name in ("src", "dst"):
        col = cols[name]
        mine = rows[col[rows] >= len(addresses)]
        col[mine] = remap[col[mine] - len(addresses)]
    return errors, joined


def _window_scale(buf: Buffer, cols: dict[str, np.ndarray]) -> None:
    """The Window Scale offer of every SYN with options (few per capture)."""
    syn = cols["is_tcp"] & ((cols["flags"] & TCP_SYN) != 0) & (cols["options_len"] > 0)
    for row in np.flatnonzero(syn).tolist():
        start = int(cols["options_offset"][row])
        offer = window_scale_offer(bytes(buf[start : start + int(cols["options_len"][row])]))
        if offer is not None:
            cols["wscale"][row] = offer


# -- one file, several files ------------------------------------------------------------------


@dataclass(slots=True)
class _FileIndex:
    path: str
    buf: Buffer
    cols: dict[str, np.ndarray]
    addresses: Addresses
    read_errors: list[tuple[int, ReadError]]  # (frames yielded before it, error)
    decode_errors: list[tuple[int, ReadError]]  # (row, error)
    stats: CaptureStats
    fallback: int
    fd: int | None = None


def _index_file(path: str) -> _FileIndex:
    buf, size = _open_bytes(path)
    magic = _magic(buf)
    if not _is_capture_magic(magic):
        shown = "none, file shorter than 4 bytes" if magic is None else f"{magic:08x}"
        if isinstance(buf, mmap.mmap):
            buf.close()
        raise UnreadableInput(path, f"not a pcap or pcapng file (magic {shown})")
    stats = CaptureStats()
    data = _Bytes(buf, size)
    try:
        read = _read_pcapng if magic == PCAPNG_SHB else _read_pcap
        frames = read(path, buf, size, data, stats)
        decoded = _decode_windows(path, buf, data, frames.cols)
    except BaseException:
        del data  # release the numpy view of the map before closing it
        if isinstance(buf, mmap.mmap):
            with contextlib.suppress(BufferError):  # a traceback may still hold a view
                buf.close()
        raise
    del data
    cols = {**frames.cols, **decoded.cols}
    fd = None
    if isinstance(buf, mmap.mmap):
        with contextlib.suppress(OSError):  # without it the accessors read the map
            fd = os.open(path, os.O_RDONLY)
    return _FileIndex(
        path,
        buf,
        cols,
        decoded.addresses,
        frames.errors,
        decoded.errors,
        stats,
        decoded.fallback,
        fd,
    )


def index_capture(path: str) -> PacketIndex:
    """Index the frames of one pcap/pcapng file (see :class:`PacketIndex`).

    Raises :class:`UnreadableInput` if ``path`` is not a capture, like ``read_frames``.
    """
    return index_captures([path])


def index_captures(paths: Sequence[str]) -> PacketIndex:
    """Index several files as one capture, rows in the order
    :func:`~sse_forensics.ingest.inputs.merged_frames` yields their frames (time order,
    ties in the order of ``paths``); ``file`` says which file each row is from."""
    files: list[_FileIndex] = []
    try:
        for path in paths:
            files.append(_index_file(path))
    except BaseException:
        for f in files:
            if isinstance(f.buf, mmap.mmap):
                f.buf.close()
            if f.fd is not None:
                os.close(f.fd)
        raise
    return _merge(files)


def _stream_positions(f: _FileIndex) -> tuple[np.ndarray, np.ndarray]:
    """Where each row and each reading error of a file is in its reader's stream: an error
    comes after the frames yielded before it (and after the errors before it)."""
    rows = np.arange(len(f.cols["frame"]), dtype=np.int64)
    before = np.array([p for p, _ in f.read_errors], dtype=np.int64)  # non-decreasing
    error_at = before + np.arange(len(before), dtype=np.int64)
    row_at = rows + np.searchsorted(before, rows, side="right")
    return row_at, error_at


def _merge(files: list[_FileIndex]) -> PacketIndex:
    positions = [_stream_positions(f) for f in files]
    placed: list[tuple[float, ReadError]] = []
    if not files:
        cols: dict[str, np.ndarray] = {
            name: np.zeros(0, dtype) for name, dtype in _STORED_DTYPES.items()
        }
        cols["file"] = np.zeros(0, dtype=np.uint8)
        addresses = Addresses()
    elif len(files) == 1:
        (f,) = files
        row_at, error_at = positions[0]
        cols = dict(f.cols)
        cols["file"] = np.zeros(len(f.cols["frame"]), dtype=np.uint8)
        addresses = f.addresses
        placed.extend(
            (float(at), err) for at, (_, err) in zip(error_at, f.read_errors, strict=True)
        )
        placed.extend((float(row_at[row]) + 0.5, err) for row, err in f.decode_errors)
    else:
        cols, addresses = _merge_rows(files, positions, placed)
    placed.sort(key=lambda p: p[0])  # stable: errors at one place keep their order
    for name in _NARROWED:
        cols[name] = narrowest(cols[name])
    cols.update(_compact(cols))
    for name, col in cols.items():
        cols[name] = held_once(col)
    return PacketIndex(
        sources=[f.path for f in files],
        addresses=addresses,
        errors=[err for _, err in placed],
        stats={f.path: f.stats for f in files},
        fallback_frames=sum(f.fallback for f in files),
        buffers=[f.buf for f in files],
        fds=[f.fd for f in files],
        **cols,
    )


def _compact(cols: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """``wirelen``, ``claimed_len`` and ``data_offset`` of ``cols`` (popped) as
    :class:`PacketIndex` holds them: what they add to ``caplen`` and ``payload_len``
    (narrowest), and the offsets' low 32 bits with their high ones in runs. Computed
    :data:`COMPACT_ROWS` rows at a time: no temporary of 8 bytes a frame."""
    out = {
        "uncaptured": _excess(cols.pop("wirelen"), cols["caplen"]),
        "tail": _excess(cols.pop("claimed_len"), cols["payload_len"]),
    }
    offset = cols.pop("data_offset")
    if offset.dtype.itemsize <= 4:  # narrowed: below 4 GiB
        out["data_low"] = offset
        return out
    out["data_low"] = offset.astype(np.uint32)  # the low 32 bits (a C cast wraps)
    starts, values, last = [np.zeros(0, dtype=np.int64)], [np.zeros(0, dtype=np.int64)], -1
    for lo in range(0, len(offset), COMPACT_ROWS):
        high = offset[lo : lo + COMPACT_ROWS] >> 32
        step = np.flatnonzero(np.diff(high, prepend=np.int64(last)) != 0)
        starts.append(step + lo)
        values.append(high[step])
        last = int(high[-1])
    out["high_at"], out["high"] = np.concatenate(starts), np.concatenate(values)
    return out


COMPACT_ROWS = 1 << 20
"""Rows :func:`_compact` and :func:`_excess` compute at once (read at call time)."""


def _excess(value: np.ndarray, base: np.ndarray) -> np.ndarray:
    """``value - base`` in the narrowest dtype that holds it (a read-only zero where they
    are equal: :func:`held_once`), computed a slice of rows at a time."""
    lo_hi = [0, 0]
    for lo in range(0, len(value), COMPACT_ROWS):
        part = value[lo : lo + COMPACT_ROWS].astype(np.int64) - base[lo : lo + COMPACT_ROWS]
        lo_hi = [min(lo_hi[0], int(part.min())), max(lo_hi[1], int(part.max()))]
    if lo_hi == [0, 0]:
        return np.broadcast_to(np.zeros(1, dtype=np.uint8), value.shape)
    out = np.empty(len(value), dtype=narrowest(np.array(lo_hi, dtype=np.int64)).dtype)
    for lo in range(0, len(value), COMPACT_ROWS):
        part = value[lo : lo + COMPACT_ROWS].astype(np.int64) - base[lo : lo + COMPACT_ROWS]
        out[lo : lo + len(part)] = part
    return out


def _merge_rows(
    files: list[_FileIndex],
    positions: list[tuple[np.ndarray, np.ndarray]],
    placed: list[tuple[float, ReadError]],
) -> tuple[dict[str, np.ndarray], Addresses]:
    """Several files: rows in merged order, as ``inputs.merged_frames`` merges the readers'
    streams (``heapq.merge`` keyed like ``inputs._keyed``); errors appended to ``placed``
    with their merged stream position."""
    keys_parts, file_parts, error_parts, which_parts = [], [], [], []
    for i, (f, (row_at, error_at)) in enumerate(zip(files, positions, strict=True)):
        n, e = len(row_at), len(error_at)
        ts = f.cols["ts"]
        keys = np.empty(n + e, dtype=np.float64)
        keys[row_at] = ts
        keys[error_at] = [
            err.ts if err.ts is not None else (float(ts[before - 1]) if before else -math.inf)
            for before, err in f.read_errors
        ]
        is_error = np.zeros(n + e, dtype=bool)
        is_error[error_at] = True
        which = np.empty(n + e, dtype=np.int64)
        which[row_at] = np.arange(n)
        which[error_at] = np.arange(e)
        keys_parts.append(keys)
        file_parts.append(np.full(n + e, i, dtype=np.int64))
        error_parts.append(is_error)
        which_parts.append(which)
    if all(bool(np.all(keys[1:] >= keys[:-1])) for keys in keys_parts):
        # Each stream in time order: heapq.merge is a stable sort of their concatenation.
        order = np.argsort(np.concatenate(keys_parts), kind="stable")
    else:
        # A stream out of time order: merge exactly as heapq.merge does.
        runs = []
        first = 0
        for keys in keys_parts:
            runs.append(zip(keys.tolist(), range(first, first + len(keys)), strict=True))
            first += len(keys)
        merged = heapq.merge(*runs, key=lambda p: p[0])
        order = np.array([i for _key, i in merged], dtype=np.int64)
    file_of = np.concatenate(file_parts)[order]
    is_error = np.concatenate(error_parts)[order]
    which = np.concatenate(which_parts)[order]

    row_file = file_of[~is_error]
    row_base = np.cumsum([0] + [len(f.cols["frame"]) for f in files])
    row_global = row_base[row_file] + which[~is_error]  # concatenated row of each merged row

    addresses, remaps = join_addresses([f.addresses for f in files])  # -1 stays -1
    cols: dict[str, np.ndarray] = {}
    for name in _STORED_DTYPES:
        parts = [f.cols[name] for f in files]
        if name in ("src", "dst"):
            parts = [remaps[i][p] for i, p in enumerate(parts)]
        cols[name] = np.concatenate(parts)[row_global]  # narrowed by _merge
    cols["file"] = row_file

    merged_at = np.flatnonzero(is_error)
    for at in merged_at.tolist():
        placed.append((float(at), files[int(file_of[at])].read_errors[int(which[at])][1]))
    if any(f.decode_errors for f in files):
        stream_at = np.empty(len(row_global), dtype=np.int64)
        stream_at[row_global] = np.flatnonzero(~is_error)
        for i, f in enumerate(files):
            for row, err in f.decode_errors:
                placed.append((float(stream_at[row_base[i] + row]) + 0.5, err))
    return cols, addresses
