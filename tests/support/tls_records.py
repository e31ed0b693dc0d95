"""TLS handshake and record bytes built by hand (RFC 8446, RFC 5246)."""

from __future__ import annotations

import struct

from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from sse_forensics.reassembly.tls.crypto import (
    hkdf_expand_label,
)

CLIENT_RANDOM = bytes(range(32))


SERVER_RANDOM = bytes(range(32, 64))


def record(kind: int, payload: bytes) -> bytes:
    return bytes([kind, 3, 3]) + struct.pack("!H", len(payload)) + payload


def handshake(kind: int, body: bytes) -> bytes:
    return bytes([kind]) + len(body).to_bytes(3, "big") + body


def extensions(*items: tuple[int, bytes]) -> bytes:
    body = b"".join(struct.pack("!HH", k, len(v)) + v for k, v in items)
    return struct.pack("!H", len(body)) + body


def client_hello(versions: bytes, alpn: bytes = b"") -> bytes:
    ext = [(43, versions)]
    if alpn:
        ext.append((16, struct.pack("!H", len(alpn) + 1) + bytes([len(alpn)]) + alpn))
    body = b"\x03\x03" + CLIENT_RANDOM + b"\x00" + b"\x00\x02\x13\x01" + b"\x01\x00"
    return record(22, handshake(1, body + extensions(*ext)))


def server_hello(suite: int, tls13: bool) -> bytes:
    body = b"\x03\x03" + SERVER_RANDOM + b"\x00" + struct.pack("!H", suite) + b"\x00"
    body += extensions((43, b"\x03\x04")) if tls13 else b""
    return record(22, handshake(2, body))


def tls13_record(secret: bytes, seq: int, inner: int, plain: bytes) -> bytes:
    key = hkdf_expand_label(secret, b"key", b"", 16, "sha256")
    iv = int.from_bytes(hkdf_expand_label(secret, b"iv", b"", 12, "sha256"), "big")
    header = bytes([23, 3, 3]) + struct.pack("!H", len(plain) + 1 + 16)
    body = AESGCM(key).encrypt((iv ^ seq).to_bytes(12, "big"), plain + bytes([inner]), header)
    return header + body
