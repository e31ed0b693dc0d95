"""The TLS observer (sse_forensics/reassembly/tls/), bytes in, events out, on sessions built
here with known secrets: a TLS 1.3 KeyUpdate, TLS 1.2 AES-CBC with MAC-then-encrypt, the
key log parser, and hostile records (oversized, garbage) reported without an exception."""

from __future__ import annotations

import hmac
import os
import struct

from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from sse_forensics.provenance import Origin
from sse_forensics.reassembly.tls import KeyLog, TLSData, TLSGap, TLSProblem, TLSSession
from sse_forensics.reassembly.tls.crypto import (
    SUITES,
    hkdf_expand_label,
    next_traffic_secret,
    prf,
)
from sse_forensics.reassembly.tls.keylog import parse_keylog

CLIENT_RANDOM = bytes(range(32))
SERVER_RANDOM = bytes(range(32, 64))


def at(n: int) -> Origin:
    return Origin("t.pcap", n, float(n))


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


def test_tls13_key_update_and_provenance() -> None:
    hs_secret, app_secret = os.urandom(32), os.urandom(32)
    keys = {
        CLIENT_RANDOM: {
            "SERVER_HANDSHAKE_TRAFFIC_SECRET": hs_secret,
            "SERVER_TRAFFIC_SECRET_0": app_secret,
        }
    }
    tls = TLSSession(keys.get)
    assert tls.feed("client", client_hello(b"\x02\x03\x04", b"h2"), at(1)) == []
    tls.feed("server", server_hello(0x1301, True), at(2))
    ee = handshake(8, extensions((16, b"\x00\x03\x02h2")))
    flight = tls13_record(hs_secret, 0, 22, ee + handshake(20, b"\x00" * 32))
    assert tls.feed("server", flight, at(3)) == []
    first = tls13_record(app_secret, 0, 23, b"data: one\n\n")
    # The record over two frames: each plaintext byte is cited to its ciphertext's frame.
    out = tls.feed("server", first[:10], at(4)) + tls.feed("server", first[10:], at(5))
    (data,) = out
    assert isinstance(data, TLSData)
    assert [(p, o.number) for p, o in data.pieces] == [(b"data:", 4), (b" one\n\n", 5)]
    update = tls13_record(app_secret, 1, 22, handshake(24, b"\x00"))
    after = tls13_record(next_traffic_secret(app_secret, "sha256"), 0, 23, b"data: two\n\n")
    out = tls.feed("server", update + after, at(6))
    assert [b"".join(p for p, _ in e.pieces) for e in out] == [b"data: two\n\n"]
    info = tls.info
    assert info.version == "TLS 1.3" and info.cipher_suite == "TLS_AES_128_GCM_SHA256"
    assert info.alpn == "h2" and info.alpn_offered == ["h2"] and info.key_updates == 1
    # No client secrets in the key log: the client's records are reported, never guessed.
    out = tls.feed("client", tls13_record(os.urandom(32), 0, 23, b"GET"), at(7))
    assert any(isinstance(e, TLSGap) for e in out) and any(isinstance(e, TLSProblem) for e in out)


def test_tls12_cbc_mac_then_encrypt() -> None:
    suite = SUITES[0xC013]  # TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA
    master = os.urandom(48)
    block = prf(master, b"key expansion", SERVER_RANDOM + CLIENT_RANDOM, 2 * (20 + 16), "sha256")
    s_mac, s_key = block[20:40], block[56:72]
    tls = TLSSession({CLIENT_RANDOM: {"CLIENT_RANDOM": master}}.get)
    tls.feed("client", client_hello(b"\x02\x03\x03"), at(1))
    tls.feed("server", server_hello(0xC013, False) + record(20, b"\x01"), at(2))

    def protect(seq: int, kind: int, content: bytes) -> bytes:
        aad = struct.pack("!Q", seq) + bytes([kind, 3, 3]) + struct.pack("!H", len(content))
        plain = content + hmac.digest(s_mac, aad + content, "sha1")
        pad = 15 - len(plain) % 16
        plain += bytes([pad]) * (pad + 1)
        iv = os.urandom(16)
        enc = Cipher(algorithms.AES(s_key), modes.CBC(iv)).encryptor()
        return record(kind, iv + enc.update(plain) + enc.finalize())

    finished = protect(0, 22, handshake(20, b"\x00" * 12))
    out = tls.feed("server", finished + protect(1, 23, b"HTTP/1.1 200 OK\r\n"), at(3))
    assert [b"".join(p for p, _ in e.pieces) for e in out] == [b"HTTP/1.1 200 OK\r\n"]
    assert tls.info.cipher_suite == suite.name and tls.info.undecryptable_bytes == 0


def test_hostile_records_are_reported() -> None:
    tls = TLSSession(lambda _r: None)
    tls.feed("client", client_hello(b"\x02\x03\x04"), at(1))
    out = tls.feed("server", b"\x17\x03\x03\xff\xff" + b"\x00" * 10, at(2))
    assert any(isinstance(e, TLSProblem) and "not a TLS record" in e.what for e in out)
    tls.feed("server", os.urandom(5000), at(3))  # the same gap: counted, not repeated
    assert tls.info.counts["server"].undecryptable_bytes >= 5000
    for blob in (b"\x16\x03\x01\x00\x05\x01\x00\x00\x01", os.urandom(300), b""):
        TLSSession(lambda _r: None).feed("client", blob, at(1))


def test_key_log_lines() -> None:
    cr = CLIENT_RANDOM.hex().encode()
    lines = [
        b"# comment",
        b"CLIENT_RANDOM " + cr + b" " + b"ab" * 48,
        b"SERVER_TRAFFIC_SECRET_0 " + cr + b" " + b"cd" * 32,
        b"CLIENT_RANDOM " + b"00" * 31 + b" " + b"ab" * 48,  # short client random
        b"CLIENT_RANDOM " + cr + b" " + b"ab" * 47,  # short master secret
        b"RSA " + b"00" * 8 + b" " + b"00" * 48,  # known, not needed
        b"x" * 2000,
    ]
    text = b"\n".join(lines) + b"\n"
    log, problems, bad = parse_keylog(text)
    assert isinstance(log, KeyLog) and len(log) == 1
    assert set(log.get(CLIENT_RANDOM) or {}) == {"CLIENT_RANDOM", "SERVER_TRAFFIC_SECRET_0"}
    assert [p.line for p in problems] == [4, 5, 7] and bad == 3
