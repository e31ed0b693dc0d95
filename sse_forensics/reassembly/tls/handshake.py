"""The few TLS handshake messages a passive decryptor reads (RFC 8446 §4, RFC 5246 §7.4):
ClientHello (client random, SNI, ALPN offer, 0-RTT), ServerHello (server random, cipher
suite, version, ALPN in TLS 1.2), EncryptedExtensions (ALPN and 0-RTT accepted in TLS 1.3),
Finished and KeyUpdate
(where the keys change). Every parser takes bytes and returns a value or ``None``: a
malformed message is never an exception."""

from __future__ import annotations

import hashlib
import struct
from dataclasses import dataclass, field

CLIENT_HELLO = 1
SERVER_HELLO = 2
NEW_SESSION_TICKET = 4
END_OF_EARLY_DATA = 5  # RFC 8446 §4.5: the client's last message under the early key
ENCRYPTED_EXTENSIONS = 8
FINISHED = 20
KEY_UPDATE = 24
READ_TYPES = frozenset({CLIENT_HELLO, SERVER_HELLO, ENCRYPTED_EXTENSIONS, FINISHED, KEY_UPDATE})

EXT_SERVER_NAME = 0
EXT_ALPN = 16
EXT_ENCRYPT_THEN_MAC = 22
EXT_EARLY_DATA = 42  # RFC 8446 §4.2.10: 0-RTT data follows the ClientHello
EXT_SUPPORTED_VERSIONS = 43
TLS13 = 0x0304
TLS12 = 0x0303
# RFC 8446 §4.1.3: a ServerHello with this random is a HelloRetryRequest.
HELLO_RETRY_RANDOM = hashlib.sha256(b"HelloRetryRequest").digest()
# Messages this reader keeps are small; a longer one (a certificate chain) is skipped.
MAX_KEPT_MESSAGE = 1 << 16


@dataclass(slots=True)
class ClientHello:
    random: bytes
    server_name: str | None = None
    alpn: list[str] = field(default_factory=list)
    versions: list[int] = field(default_factory=list)
    encrypt_then_mac: bool = False
    early_data: bool = False  # the client sends 0-RTT data after this hello


@dataclass(slots=True)
class ServerHello:
    random: bytes
    suite: int
    version: int
    alpn: str | None = None
    retry: bool = False  # HelloRetryRequest
    encrypt_then_mac: bool = False


class _Reader:
    __slots__ = ("at", "data")

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.at = 0

    def take(self, n: int) -> bytes:
        if self.at + n > len(self.data):
            raise ValueError("short")
        self.at += n
        return self.data[self.at - n : self.at]

    def u8(self) -> int:
        return self.take(1)[0]

    def u16(self) -> int:
        value: int = struct.unpack("!H", self.take(2))[0]
        return value

    def vec8(self) -> bytes:
        return self.take(self.u8())

    def vec16(self) -> bytes:
        return self.take(self.u16())


def _extensions(r: _Reader) -> dict[int, bytes]:
    out: dict[int, bytes] = {}
    if r.at >= len(r.data):
        return out
    ext = _Reader(r.vec16())
    while ext.at < len(ext.data):
        kind = ext.u16()
        out.setdefault(kind, ext.vec16())
    return out


def _alpn_list(data: bytes) -> list[str]:
    r = _Reader(data)
    names = _Reader(r.vec16())
    out = []
    while names.at < len(names.data):
        out.append(names.vec8().decode("ascii", "replace"))
    return out


def parse_client_hello(body: bytes) -> ClientHello | None:
    """RFC 8446 §4.1.2 (the same layout as RFC 5246 §7.4.1.2)."""
    try:
        r = _Reader(body)
        r.take(2)  # legacy_version
        hello = ClientHello(random=r.take(32))
        r.vec8()  # legacy_session_id
        r.vec16()  # cipher_suites
        r.vec8()  # legacy_compression_methods
        ext = _extensions(r)
        if EXT_SERVER_NAME in ext:
            names = _Reader(_Reader(ext[EXT_SERVER_NAME]).vec16())
            while names.at < len(names.data):
                kind, name = names.u8(), names.vec16()
                if kind == 0:
                    hello.server_name = name.decode("ascii", "replace")
                    break
        if EXT_ALPN in ext:
            hello.alpn = _alpn_list(ext[EXT_ALPN])
        if EXT_SUPPORTED_VERSIONS in ext:
            versions = _Reader(ext[EXT_SUPPORTED_VERSIONS]).vec8()
            hello.versions = [
                struct.unpack_from("!H", versions, i)[0] for i in range(0, len(versions) - 1, 2)
            ]
        hello.encrypt_then_mac = EXT_ENCRYPT_THEN_MAC in ext
        hello.early_data = EXT_EARLY_DATA in ext
        return hello
    except (ValueError, UnicodeError):
        return None


def parse_server_hello(body: bytes) -> ServerHello | None:
    """RFC 8446 §4.1.3: TLS 1.3 is the ``supported_versions`` extension's choice."""
    try:
        r = _Reader(body)
        version = r.u16()
        random = r.take(32)
        r.vec8()  # legacy_session_id_echo
        suite = r.u16()
        r.u8()  # legacy_compression_method
        ext = _extensions(r)
        if EXT_SUPPORTED_VERSIONS in ext and len(ext[EXT_SUPPORTED_VERSIONS]) == 2:
            version = struct.unpack("!H", ext[EXT_SUPPORTED_VERSIONS])[0]
        hello = ServerHello(random, suite, version, retry=random == HELLO_RETRY_RANDOM)
        if EXT_ALPN in ext:
            names = _alpn_list(ext[EXT_ALPN])
            hello.alpn = names[0] if names else None
        hello.encrypt_then_mac = EXT_ENCRYPT_THEN_MAC in ext
        return hello
    except (ValueError, UnicodeError):
        return None


def parse_encrypted_extensions(body: bytes) -> tuple[str | None, bool]:
    """RFC 8446 §4.3.1: the ALPN protocol the server chose, if any, and whether it accepted
    the client's 0-RTT data (§4.2.10: ``early_data`` in EncryptedExtensions)."""
    try:
        ext = _extensions(_Reader(body))
        alpn = None
        if EXT_ALPN in ext:
            names = _alpn_list(ext[EXT_ALPN])
            alpn = names[0] if names else None
        return alpn, EXT_EARLY_DATA in ext
    except (ValueError, UnicodeError):
        return None, False


class HandshakeReader:
    """Handshake messages out of the handshake records of one direction (a message may span
    records, and a record hold several). Messages not in :data:`READ_TYPES`, or longer than
    :data:`MAX_KEPT_MESSAGE`, come out with an empty body (only where they end matters)."""

    __slots__ = ("buf", "skipping")

    def __init__(self) -> None:
        self.buf = bytearray()
        self.skipping: tuple[int, int] | None = None  # (type, bytes of the body still to skip)

    def feed(self, data: bytes) -> list[tuple[int, bytes]]:
        out: list[tuple[int, bytes]] = []
        view = memoryview(data)
        while view:
            if self.skipping is not None:
                kind, left = self.skipping
                n = min(left, len(view))
                view = view[n:]
                left -= n
                if left:
                    self.skipping = (kind, left)
                    break
                self.skipping = None
                out.append((kind, b""))
                continue
            self.buf += view
            view = memoryview(b"")
            while len(self.buf) >= 4:
                kind = self.buf[0]
                length = int.from_bytes(self.buf[1:4], "big")
                if kind not in READ_TYPES or length > MAX_KEPT_MESSAGE:
                    have = min(len(self.buf) - 4, length)
                    rest = bytes(self.buf[4 + have :])
                    self.buf.clear()
                    if have == length:
                        out.append((kind, b""))
                        self.buf += rest
                        continue
                    self.skipping = (kind, length - have)
                    break
                if len(self.buf) < 4 + length:
                    break
                out.append((kind, bytes(self.buf[4 : 4 + length])))
                del self.buf[: 4 + length]
        return out

    def reset(self) -> None:
        self.buf.clear()
        self.skipping = None


__all__ = [
    "ClientHello",
    "HandshakeReader",
    "ServerHello",
    "parse_client_hello",
    "parse_encrypted_extensions",
    "parse_server_hello",
]
