"""Incremental content-coding decoders for HTTP response bodies (RFC 9110 §8.4).

A body arrives frame by frame, so each decoder is a ``decompressobj``-style object:
``decode(piece)`` returns what that piece produced, ``flush()`` what is left at the end.
A decoder that cannot go on raises :class:`DecodeError`; the HTTP parser turns that into a
``ProtocolError`` value and passes the rest of the body through undecoded.

Decoding is bounded (issue 16, docs/limits.md): a body decodes to at most ``body_bytes``,
and past :data:`RATIO_FLOOR` to at most ``expansion_ratio`` times its coded bytes; more
than ``coding_depth`` stacked codings are not decoded at all. Every stage asks its
decompressor for no more than the room left (zlib ``max_length``, brotli
``output_buffer_limit``, a zstd writer that stops), so a bomb never expands in memory past
the cap: :class:`DecodeCapped` carries what was decoded up to it.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from typing import Protocol

import brotli
import zstandard

from sse_forensics.limits import DEFAULT_LIMITS, Limits, MiB, describe

_GZIP_MAGIC = b"\x1f\x8b"
# zlib.decompressobj wbits: 16+MAX_WBITS reads a gzip wrapper (RFC 1952), MAX_WBITS a zlib
# wrapper (RFC 1950), -MAX_WBITS raw DEFLATE (RFC 1951).
_GZIP_WBITS = 16 + zlib.MAX_WBITS
_ZLIB_WBITS = zlib.MAX_WBITS
_RAW_WBITS = -zlib.MAX_WBITS
RATIO_FLOOR = 1 * MiB
"""Decoded bytes a body may reach whatever its expansion ratio (a short body of a highly
repetitive stream compresses far better than 1000:1)."""
_ZSTD_WRITE = 1 << 16  # zstd output handed over in pieces this size
CODING_CAPPED = "decoding stopped at a cap"
"""Start of the ``ProtocolError`` (with ``cap`` set) the HTTP parsers give when a body's
decoding stopped at a cap: its later bytes are passed on still coded."""


class DecodeError(Exception):
    """The coded bytes are not valid for their content-coding."""


class DecodeCapped(DecodeError):
    """Decoding stopped at cap ``cap`` (a :class:`~sse_forensics.limits.Limits` field):
    ``data`` is the decoded output up to it (not yet returned), ``cut`` what was not
    decoded."""

    def __init__(self, cap: str, cut: str, data: bytes = b"") -> None:
        super().__init__(cut)
        self.cap = cap
        self.cut = cut
        self.data = data


class Decoder(Protocol):
    def decode(self, data: bytes) -> bytes: ...

    def flush(self) -> bytes: ...


class _Stage(Protocol):
    """One content-coding: ``decode`` returns at most ``room`` bytes, or more than ``room``
    (the caller then stops: the decoder's state after that is undefined)."""

    def decode(self, data: bytes, room: int) -> bytes: ...

    def flush(self) -> bytes: ...


class _GzipDecoder:
    """``gzip`` / ``x-gzip`` (RFC 9110 §8.4.1.3). Several members in a row are one body
    (RFC 1952 §2.2); bytes after the last member that are not a new member are ignored, as
    browsers do."""

    def __init__(self) -> None:
        self._inflate = zlib.decompressobj(_GZIP_WBITS)
        self._done = False
        # A member ended: the next bytes, perhaps in a later frame, say whether another
        # member follows. Held here while fewer than the two magic bytes have come.
        self._between = b""
        self._after_member = False

    def decode(self, data: bytes, room: int) -> bytes:
        out = []
        made = 0
        while data and not self._done:
            if self._after_member:
                data = self._between + data
                if len(data) < 2 and data == _GZIP_MAGIC[:1]:
                    self._between = data
                    break
                self._after_member, self._between = False, b""
                if data[:2] != _GZIP_MAGIC:
                    self._done = True
                    break
                self._inflate = zlib.decompressobj(_GZIP_WBITS)
            try:
                piece = self._inflate.decompress(data, room - made + 1)
            except zlib.error as exc:
                raise DecodeError(f"gzip: {exc}") from None
            out.append(piece)
            made += len(piece)
            if made > room:
                break  # over the room: the caller stops here
            if not self._inflate.eof:
                break
            data = self._inflate.unused_data
            self._after_member = True
        return b"".join(out)

    def flush(self) -> bytes:
        return b"" if self._done or self._after_member else self._inflate.flush()


class _DeflateDecoder:
    """``deflate`` (RFC 9110 §8.4.1.2): a zlib stream (RFC 1950). Some servers send raw
    DEFLATE without the zlib header (seen in zeek's ``missing-zlib-header`` trace), so when
    the first bytes are not a zlib header the decoder falls back to raw inflate."""

    def __init__(self) -> None:
        self._inflate = zlib.decompressobj(_ZLIB_WBITS)
        self._head = b""  # first bytes, kept until the wrapper is known
        self._wrapper_known = False

    def decode(self, data: bytes, room: int) -> bytes:
        if not self._wrapper_known:
            self._head += data
            if len(self._head) < 2:
                return b""
            data, self._head = self._head, b""
            self._wrapper_known = True
            if not _is_zlib_header(data[:2]):
                self._inflate = zlib.decompressobj(_RAW_WBITS)
        if self._inflate.eof:
            return b""
        try:
            return self._inflate.decompress(data, room + 1)
        except zlib.error as exc:
            raise DecodeError(f"deflate: {exc}") from None

    def flush(self) -> bytes:
        if not self._wrapper_known:
            # A body shorter than a zlib header can only be raw DEFLATE.
            self._wrapper_known = True
            self._inflate = zlib.decompressobj(_RAW_WBITS)
            data, self._head = self._head, b""
            try:
                return self._inflate.decompress(data) + self._inflate.flush()
            except zlib.error as exc:
                raise DecodeError(f"deflate: {exc}") from None
        return self._inflate.flush()


def _is_zlib_header(two: bytes) -> bool:
    """RFC 1950 §2.2: CM = 8 (deflate), CINFO <= 7, and CMF*256 + FLG a multiple of 31."""
    cmf, flg = two[0], two[1]
    return cmf & 0x0F == 8 and cmf >> 4 <= 7 and (cmf << 8 | flg) % 31 == 0


class _BrotliDecoder:
    """``br`` (RFC 7932)."""

    def __init__(self) -> None:
        self._decompressor = brotli.Decompressor()

    def decode(self, data: bytes, room: int) -> bytes:
        if self._decompressor.is_finished():
            return b""
        try:
            out: bytes = self._decompressor.process(data, output_buffer_limit=room + 1)
            return out
        except brotli.error as exc:
            raise DecodeError(f"br: {exc}") from None

    def flush(self) -> bytes:
        return b""


class _Overflow(Exception):
    """The zstd writer went past its room."""


class _RoomSink:
    """Where the zstd writer puts its output: up to ``room`` bytes, then it stops it."""

    def __init__(self) -> None:
        self.parts: list[bytes] = []
        self.room = 0
        self.made = 0

    def write(self, data: bytes) -> int:
        self.parts.append(bytes(data))
        self.made += len(data)
        if self.made > self.room:
            raise _Overflow
        return len(data)


class _ZstdDecoder:
    """``zstd`` (RFC 8878); several frames in a row are one body. Decoded through a writer
    that hands its output over in :data:`_ZSTD_WRITE`-byte pieces, so a frame that expands
    without bound is stopped at the room left."""

    def __init__(self) -> None:
        self._sink = _RoomSink()
        self._writer = zstandard.ZstdDecompressor().stream_writer(
            # zstandard's stubs ask for IO[bytes]; the writer only calls write() on it.
            self._sink,  # type: ignore[arg-type]
            write_size=_ZSTD_WRITE,
            write_return_read=True,
        )

    def decode(self, data: bytes, room: int) -> bytes:
        sink = self._sink
        sink.parts, sink.room, sink.made = [], room, 0
        try:
            self._writer.write(data)
        except _Overflow:
            pass  # more than ``room`` is in sink.parts: the caller stops
        except zstandard.ZstdError as exc:
            raise DecodeError(f"zstd: {exc}") from None
        out = b"".join(sink.parts)
        sink.parts = []
        return out

    def flush(self) -> bytes:
        return b""


class _Unsupported:
    """A content-coding this tool does not know (``compress``, ``exi``, …)."""

    def __init__(self, coding: str) -> None:
        self.coding = coding

    def decode(self, data: bytes, room: int) -> bytes:
        raise DecodeError(f"unsupported content-coding {self.coding!r}")

    def flush(self) -> bytes:
        return b""


class _Bounded:
    """Stacked codings under the caps. RFC 9110 §8.4 lists codings in the order applied, so
    they are undone last first; each stage's output counts against the same room (a stage
    that expands past it is a bomb whatever the stages after it would make of it)."""

    def __init__(self, stages: list[_Stage], names: str, limits: Limits) -> None:
        self._stages = stages
        self._names = names
        self._limits = limits
        self._made = [0] * len(stages)  # decoded bytes out of each stage so far
        self._coded = 0  # coded bytes in

    def _allowed(self) -> tuple[int, str]:
        """Decoded bytes the body may reach now, and the cap that sets it."""
        limits = self._limits
        by_ratio = max(RATIO_FLOOR, int(self._coded * limits.expansion_ratio))
        if by_ratio < limits.body_bytes:
            return by_ratio, "expansion_ratio"
        return limits.body_bytes, "body_bytes"

    def _capped(self, cap: str, data: bytes) -> DecodeCapped:
        if cap == "body_bytes":
            cut = f"a {self._names} body decoding past {describe(cap, self._limits.body_bytes)}"
        else:
            cut = (
                f"a {self._names} body expanding over {self._limits.expansion_ratio:g} times "
                f"its {self._coded} coded bytes"
            )
        return DecodeCapped(cap, cut, data)

    def _run(self, data: bytes, start: int, flush: bool) -> bytes:
        allowed, cap = self._allowed()
        last = len(self._stages) - 1
        for i in range(start, last + 1):
            stage = self._stages[i]
            room = allowed - self._made[i]
            data = stage.decode(data, room) if data else b""
            if flush:
                data += stage.flush()
            if len(data) > room:
                # What fits goes on through the stages after this one, then decoding stops.
                data = self._run(data[:room], i + 1, flush=False) if i < last else data[:room]
                raise self._capped(cap, data)
            self._made[i] += len(data)
        return data

    def decode(self, data: bytes) -> bytes:
        self._coded += len(data)
        return self._run(data, 0, flush=False)

    def flush(self) -> bytes:
        return self._run(b"", 0, flush=True)


class _TooDeep:
    """More codings stacked than ``coding_depth``: the body is not decoded at all."""

    def __init__(self, names: str, depth: int) -> None:
        self._cut = f"a body with {depth} stacked content codings ({names})"

    def decode(self, data: bytes) -> bytes:
        raise DecodeCapped("coding_depth", self._cut)

    def flush(self) -> bytes:
        return b""


_DECODERS: dict[str, Callable[[], _Stage]] = {
    "gzip": _GzipDecoder,
    "x-gzip": _GzipDecoder,
    "deflate": _DeflateDecoder,
    "br": _BrotliDecoder,
    "zstd": _ZstdDecoder,
}


def make_decoder(content_encoding: str | None, limits: Limits = DEFAULT_LIMITS) -> Decoder | None:
    """A decoder for a ``Content-Encoding`` field value, or ``None`` when the body is not
    coded (absent, empty, or only ``identity``). Coding names are case-insensitive
    (RFC 9110 §8.4.1). The decoder raises :class:`DecodeCapped` at the ``limits``."""
    if not content_encoding:
        return None
    codings = [c.strip().lower() for c in content_encoding.split(",")]
    codings = [c for c in codings if c and c != "identity"]
    if not codings:
        return None
    names = ", ".join(codings)
    if len(codings) > limits.coding_depth:
        return _TooDeep(names, len(codings))
    stages: list[_Stage] = [
        _DECODERS[c]() if c in _DECODERS else _Unsupported(c) for c in reversed(codings)
    ]
    return _Bounded(stages, names, limits)


__all__ = ["CODING_CAPPED", "RATIO_FLOOR", "DecodeCapped", "DecodeError", "Decoder", "make_decoder"]
