"""Incremental content-coding decoders for HTTP response bodies (RFC 9110 §8.4).

A body arrives frame by frame, so each decoder is a ``decompressobj``-style object:
``decode(piece)`` returns what that piece produced, ``flush()`` what is left at the end.
A decoder that cannot go on raises :class:`DecodeError`; the HTTP parser turns that into a
``ProtocolError`` value and passes the rest of the body through undecoded.
"""

from __future__ import annotations

import zlib
from typing import Protocol

import brotli
import zstandard

_GZIP_MAGIC = b"\x1f\x8b"
# zlib.decompressobj wbits: 16+MAX_WBITS reads a gzip wrapper (RFC 1952), MAX_WBITS a zlib
# wrapper (RFC 1950), -MAX_WBITS raw DEFLATE (RFC 1951).
_GZIP_WBITS = 16 + zlib.MAX_WBITS
_ZLIB_WBITS = zlib.MAX_WBITS
_RAW_WBITS = -zlib.MAX_WBITS


class DecodeError(Exception):
    """The coded bytes are not valid for their content-coding."""


class Decoder(Protocol):
    def decode(self, data: bytes) -> bytes: ...

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

    def decode(self, data: bytes) -> bytes:
        out = []
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
                out.append(self._inflate.decompress(data))
            except zlib.error as exc:
                raise DecodeError(f"gzip: {exc}") from None
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

    def decode(self, data: bytes) -> bytes:
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
            return self._inflate.decompress(data)
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

    def decode(self, data: bytes) -> bytes:
        if self._decompressor.is_finished():
            return b""
        try:
            return self._decompressor.process(data)
        except brotli.error as exc:
            raise DecodeError(f"br: {exc}") from None

    def flush(self) -> bytes:
        return b""


class _ZstdDecoder:
    """``zstd`` (RFC 8878); several frames in a row are one body."""

    def __init__(self) -> None:
        self._decompressor = zstandard.ZstdDecompressor().decompressobj(read_across_frames=True)

    def decode(self, data: bytes) -> bytes:
        try:
            return self._decompressor.decompress(data)
        except zstandard.ZstdError as exc:
            raise DecodeError(f"zstd: {exc}") from None

    def flush(self) -> bytes:
        return b""


class _Unsupported:
    """A content-coding this tool does not know (``compress``, ``exi``, …)."""

    def __init__(self, coding: str) -> None:
        self.coding = coding

    def decode(self, data: bytes) -> bytes:
        raise DecodeError(f"unsupported content-coding {self.coding!r}")

    def flush(self) -> bytes:
        return b""


class _Chain:
    """Stacked codings: RFC 9110 §8.4 lists them in the order applied, so they are undone
    last first."""

    def __init__(self, decoders: list[Decoder]) -> None:
        self._decoders = decoders

    def decode(self, data: bytes) -> bytes:
        for decoder in self._decoders:
            data = decoder.decode(data)
        return data

    def flush(self) -> bytes:
        data = b""
        for decoder in self._decoders:
            data = (decoder.decode(data) if data else b"") + decoder.flush()
        return data


_DECODERS = {
    "gzip": _GzipDecoder,
    "x-gzip": _GzipDecoder,
    "deflate": _DeflateDecoder,
    "br": _BrotliDecoder,
    "zstd": _ZstdDecoder,
}


def make_decoder(content_encoding: str | None) -> Decoder | None:
    """A decoder for a ``Content-Encoding`` field value, or ``None`` when the body is not
    coded (absent, empty, or only ``identity``). Coding names are case-insensitive
    (RFC 9110 §8.4.1)."""
    if not content_encoding:
        return None
    codings = [c.strip().lower() for c in content_encoding.split(",")]
    codings = [c for c in codings if c and c != "identity"]
    if not codings:
        return None
    decoders: list[Decoder] = [
        _DECODERS[c]() if c in _DECODERS else _Unsupported(c) for c in reversed(codings)
    ]
    return decoders[0] if len(decoders) == 1 else _Chain(decoders)


__all__ = ["DecodeError", "Decoder", "make_decoder"]
