"""The TLS observer (sse_forensics/reassembly/tls/), bytes in, events out, on sessions built
here with known secrets: a TLS 1.3 KeyUpdate, TLS 1.2 AES-CBC with MAC-then-encrypt, the
key log parser, and hostile records (oversized, garbage) reported without an exception."""

from __future__ import annotations

import hmac
import os
import struct
import subprocess
import sys

from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from support.tls_records import (
    CLIENT_RANDOM,
    SERVER_RANDOM,
    client_hello,
    extensions,
    handshake,
    record,
    server_hello,
    tls13_record,
)

from sse_forensics.provenance import Origin
from sse_forensics.reassembly.tls import KeyLog, TLSData, TLSGap, TLSProblem, TLSSession
from sse_forensics.reassembly.tls.crypto import (
    SUITES,
    next_traffic_secret,
    prf,
)
from sse_forensics.reassembly.tls.keylog import parse_keylog


def at(n: int) -> Origin:
    return Origin("t.pcap", n, float(n))


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


def _early_session(accepted: bool, early_secret: bool = True) -> tuple[TLSSession, list]:
    """A TLS 1.3 resumption with 0-RTT: the ClientHello announces early data, a request
    follows under the early key before the ServerHello, the server's EncryptedExtensions
    accept it or not, the client ends its early data (EndOfEarlyData, only if accepted),
    finishes under its handshake key and sends again under its traffic key."""
    early, c_hs, s_hs, c_app = (os.urandom(32) for _ in range(4))
    secrets = {
        "CLIENT_HANDSHAKE_TRAFFIC_SECRET": c_hs,
        "SERVER_HANDSHAKE_TRAFFIC_SECRET": s_hs,
        "CLIENT_TRAFFIC_SECRET_0": c_app,
    }
    if early_secret:
        secrets["CLIENT_EARLY_TRAFFIC_SECRET"] = early
    tls = TLSSession({CLIENT_RANDOM: secrets}.get)
    hello = b"\x03\x03" + CLIENT_RANDOM + b"\x00" + b"\x00\x02\x13\x01" + b"\x01\x00"
    hello += extensions((43, b"\x02\x03\x04"), (42, b""))
    out = tls.feed("client", record(22, handshake(1, hello)), at(1))
    out += tls.feed("client", tls13_record(early, 0, 23, b"GET /early"), at(2))
    out += tls.feed("server", server_hello(0x1301, True), at(3))
    ee = handshake(8, extensions((42, b"")) if accepted else extensions())
    out += tls.feed("server", tls13_record(s_hs, 0, 22, ee + handshake(20, b"\0" * 32)), at(4))
    if accepted:
        out += tls.feed("client", tls13_record(early, 1, 22, handshake(5, b"")), at(5))
    else:  # rejected: what the client still sent under the early key is skipped
        out += tls.feed("client", tls13_record(early, 1, 23, b" HTTP/1.1"), at(5))
    out += tls.feed("client", tls13_record(c_hs, 0, 22, handshake(20, b"\0" * 32)), at(6))
    out += tls.feed("client", tls13_record(c_app, 0, 23, b"GET /late"), at(7))
    return tls, out


def _data(events: list) -> list[tuple[bytes, int]]:
    return [(b"".join(p for p, _ in e.pieces), e.pieces[0][1].number) for e in events]


def test_early_data_accepted_is_decrypted_under_the_early_key() -> None:
    """RFC 8446 §4.2.10: held until the server's answer, then read, cited to its frame."""
    tls, out = _early_session(accepted=True)
    assert all(isinstance(e, TLSData) for e in out)
    assert _data(out) == [(b"GET /early", 2), (b"GET /late", 7)]
    assert tls.info.early_data and tls.info.early_data_accepted and tls.info.decrypted


def test_early_data_rejected_is_skipped_as_the_server_skipped_it() -> None:
    tls, out = _early_session(accepted=False)
    assert all(isinstance(e, TLSData) for e in out)
    assert _data(out) == [(b"GET /late", 7)]
    assert tls.info.early_data and not tls.info.early_data_accepted and tls.info.decrypted


def test_early_data_without_its_secret_is_named() -> None:
    tls, out = _early_session(accepted=True, early_secret=False)
    problems = [e for e in out if isinstance(e, TLSProblem)]
    assert len(problems) == 1 and "CLIENT_EARLY_TRAFFIC_SECRET" in problems[0].what
    assert any(isinstance(e, TLSGap) for e in out)
    assert (b"GET /late", 7) in _data([e for e in out if isinstance(e, TLSData)])
    assert not tls.info.decrypted and tls.info.key_found


def test_a_scan_without_tls_does_not_import_cryptography() -> None:
    """Issue 9: ``cryptography`` (~20 ms of CPU per process) is imported only when a record
    is decrypted; the scan's modules load without it."""
    code = (
        "import sys, sse_forensics.pipeline, sse_forensics.reassembly.fast.capture;"
        "print('cryptography' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"
