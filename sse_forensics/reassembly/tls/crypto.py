"""Cipher suites, key derivation and record decryption (the ``cryptography`` package).

- TLS 1.3 (RFC 8446 §7): traffic keys from a traffic secret by HKDF-Expand-Label; the
  per-record nonce is the IV XOR the 64-bit sequence number (§5.3); the additional data is
  the record header (§5.2); a KeyUpdate moves to ``HKDF-Expand-Label(secret, "traffic upd",
  "", Hash.length)`` (§7.2).
- TLS 1.2 (RFC 5246 §6.3): the key block is ``PRF(master, "key expansion", server_random +
  client_random)``; AES-GCM (RFC 5288: 4-byte salt + 8-byte explicit nonce), ChaCha20-Poly1305
  (RFC 7905: IV XOR sequence number) and AES-CBC with HMAC (MAC-then-encrypt, RFC 5246
  §6.2.3.2; encrypt-then-MAC when RFC 7366 was negotiated).
"""

from __future__ import annotations

import hmac
import struct
from dataclasses import dataclass
from typing import TYPE_CHECKING

# ``cryptography`` is imported by the functions that use it: a scan without TLS secrets
# never does, and its import is ~20 ms of CPU in every process (issue 9: start-up counts).
if TYPE_CHECKING:
    from cryptography.hazmat.primitives.ciphers.aead import AESCCM, AESGCM, ChaCha20Poly1305

AEAD_TAG = 16


@dataclass(frozen=True, slots=True)
class Suite:
    """What decrypting a cipher suite needs. ``kind``: ``gcm``, ``chacha``, ``ccm`` or
    ``cbc``; ``hash``: the PRF/HKDF hash (``sha256``/``sha384``); ``mac``: the HMAC hash of
    a CBC suite."""

    code: int
    name: str
    kind: str
    key_len: int
    hash: str
    tls13: bool = False
    mac: str | None = None

    @property
    def mac_len(self) -> int:
        return {"sha1": 20, "sha256": 32, "sha384": 48}[self.mac] if self.mac else 0


def _suites() -> dict[int, Suite]:
    table = [
        # TLS 1.3 (RFC 8446 §B.4)
        Suite(0x1301, "TLS_AES_128_GCM_SHA256", "gcm", 16, "sha256", True),
        Suite(0x1302, "TLS_AES_256_GCM_SHA384", "gcm", 32, "sha384", True),
        Suite(0x1303, "TLS_CHACHA20_POLY1305_SHA256", "chacha", 32, "sha256", True),
        Suite(0x1304, "TLS_AES_128_CCM_SHA256", "ccm", 16, "sha256", True),
        # TLS 1.2 AEAD (RFC 5288, 5289, 7905)
        Suite(0x009C, "TLS_RSA_WITH_AES_128_GCM_SHA256", "gcm", 16, "sha256"),
        Suite(0x009D, "TLS_RSA_WITH_AES_256_GCM_SHA384", "gcm", 32, "sha384"),
        Suite(0x009E, "TLS_DHE_RSA_WITH_AES_128_GCM_SHA256", "gcm", 16, "sha256"),
        Suite(0x009F, "TLS_DHE_RSA_WITH_AES_256_GCM_SHA384", "gcm", 32, "sha384"),
        Suite(0xC02B, "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256", "gcm", 16, "sha256"),
        Suite(0xC02C, "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384", "gcm", 32, "sha384"),
        Suite(0xC02F, "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256", "gcm", 16, "sha256"),
        Suite(0xC030, "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384", "gcm", 32, "sha384"),
        Suite(0xCCA8, "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256", "chacha", 32, "sha256"),
        Suite(0xCCA9, "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256", "chacha", 32, "sha256"),
        Suite(0xCCAA, "TLS_DHE_RSA_WITH_CHACHA20_POLY1305_SHA256", "chacha", 32, "sha256"),
        # TLS 1.2 CBC (RFC 5246 §A.5, RFC 5289)
        Suite(0x002F, "TLS_RSA_WITH_AES_128_CBC_SHA", "cbc", 16, "sha256", mac="sha1"),
        Suite(0x0035, "TLS_RSA_WITH_AES_256_CBC_SHA", "cbc", 32, "sha256", mac="sha1"),
        Suite(0x003C, "TLS_RSA_WITH_AES_128_CBC_SHA256", "cbc", 16, "sha256", mac="sha256"),
        Suite(0x003D, "TLS_RSA_WITH_AES_256_CBC_SHA256", "cbc", 32, "sha256", mac="sha256"),
        Suite(0xC009, "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA", "cbc", 16, "sha256", mac="sha1"),
        Suite(0xC00A, "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA", "cbc", 32, "sha256", mac="sha1"),
        Suite(0xC013, "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA", "cbc", 16, "sha256", mac="sha1"),
        Suite(0xC014, "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA", "cbc", 32, "sha256", mac="sha1"),
        Suite(0xC023, "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256", "cbc", 16, "sha256", mac="sha256"),
        Suite(0xC024, "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA384", "cbc", 32, "sha384", mac="sha384"),
        Suite(0xC027, "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256", "cbc", 16, "sha256", mac="sha256"),
        Suite(0xC028, "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA384", "cbc", 32, "sha384", mac="sha384"),
    ]
    return {s.code: s for s in table}


SUITES = _suites()
_HASH_LEN = {"sha256": 32, "sha384": 48}


# -- key derivation --------------------------------------------------------------------------


def hkdf_expand_label(secret: bytes, label: bytes, context: bytes, length: int, hash: str) -> bytes:
    """RFC 8446 §7.1: ``HKDF-Expand(Secret, HkdfLabel, Length)``."""
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.kdf.hkdf import HKDFExpand

    full = b"tls13 " + label
    info = struct.pack("!HB", length, len(full)) + full + struct.pack("!B", len(context)) + context
    algorithm = {"sha256": hashes.SHA256, "sha384": hashes.SHA384}[hash]()
    return HKDFExpand(algorithm, length, info).derive(secret)


def next_traffic_secret(secret: bytes, hash: str) -> bytes:
    """RFC 8446 §7.2: the secret after a KeyUpdate."""
    return hkdf_expand_label(secret, b"traffic upd", b"", _HASH_LEN[hash], hash)


def prf(secret: bytes, label: bytes, seed: bytes, length: int, hash: str) -> bytes:
    """RFC 5246 §5: ``PRF(secret, label, seed) = P_<hash>(secret, label + seed)``."""
    seed = label + seed
    out = b""
    a = seed
    while len(out) < length:
        a = hmac.digest(secret, a, hash)
        out += hmac.digest(secret, a + seed, hash)
    return out[:length]


# -- record protection -------------------------------------------------------------------------


class Decryptor:
    """One direction's record protection; :meth:`open` returns the plaintext or ``None``
    when the record does not authenticate (wrong key, wrong sequence number, corrupt).

    ``overhead``: bytes of the record fragment before the first plaintext byte (explicit
    nonce or CBC IV): plaintext byte *i* travelled in fragment byte ``overhead + i``.
    """

    overhead = 0

    def open(self, header: bytes, fragment: bytes, seq: int) -> bytes | None:
        raise NotImplementedError


def _aead(kind: str, key: bytes) -> AESGCM | ChaCha20Poly1305 | AESCCM:
    from cryptography.hazmat.primitives.ciphers.aead import AESCCM, AESGCM, ChaCha20Poly1305

    if kind == "gcm":
        return AESGCM(key)
    if kind == "chacha":
        return ChaCha20Poly1305(key)
    return AESCCM(key)


def _invalid_tag() -> type[Exception]:
    """``cryptography``'s InvalidTag (an ``except`` clause evaluates it only on an error)."""
    from cryptography.exceptions import InvalidTag

    return InvalidTag


class TLS13Decryptor(Decryptor):
    """RFC 8446 §5.2-5.3. The plaintext returned still ends with its content type and
    padding (``TLSInnerPlaintext``)."""

    __slots__ = ("aead", "iv", "secret", "suite")

    def __init__(self, suite: Suite, secret: bytes) -> None:
        self.suite = suite
        self.secret = secret
        key = hkdf_expand_label(secret, b"key", b"", suite.key_len, suite.hash)
        self.iv = int.from_bytes(hkdf_expand_label(secret, b"iv", b"", 12, suite.hash), "big")
        self.aead = _aead(suite.kind, key)

    def open(self, header: bytes, fragment: bytes, seq: int) -> bytes | None:
        nonce = (self.iv ^ seq).to_bytes(12, "big")
        try:
            return self.aead.decrypt(nonce, fragment, header)
        except _invalid_tag():
            return None

    def updated(self) -> TLS13Decryptor:
        return TLS13Decryptor(self.suite, next_traffic_secret(self.secret, self.suite.hash))


class TLS12AEADDecryptor(Decryptor):
    """RFC 5246 §6.2.3.3 with RFC 5288 (GCM) or RFC 7905 (ChaCha20-Poly1305)."""

    __slots__ = ("aead", "chacha", "iv", "overhead")

    def __init__(self, suite: Suite, key: bytes, iv: bytes) -> None:
        self.aead = _aead(suite.kind, key)
        self.chacha = suite.kind == "chacha"
        self.iv = iv
        self.overhead = 0 if self.chacha else 8

    def open(self, header: bytes, fragment: bytes, seq: int) -> bytes | None:
        if self.chacha:
            nonce = (int.from_bytes(self.iv, "big") ^ seq).to_bytes(12, "big")
            body = fragment
        else:
            nonce, body = self.iv + fragment[:8], fragment[8:]
        length = len(body) - AEAD_TAG
        if length < 0:
            return None
        aad = struct.pack("!Q", seq) + header[:3] + struct.pack("!H", length)
        try:
            return self.aead.decrypt(nonce, body, aad)
        except _invalid_tag():
            return None


class TLS12CBCDecryptor(Decryptor):
    """RFC 5246 §6.2.3.2 (TLS 1.1+: an explicit IV per record), HMAC checked in constant
    time; ``encrypt_then_mac`` for RFC 7366."""

    __slots__ = ("encrypt_then_mac", "key", "mac", "mac_key", "mac_len")

    overhead = 16  # the explicit IV

    def __init__(self, suite: Suite, mac_key: bytes, key: bytes, encrypt_then_mac: bool) -> None:
        self.key = key
        self.mac_key = mac_key
        self.mac = suite.mac or "sha1"
        self.mac_len = suite.mac_len
        self.encrypt_then_mac = encrypt_then_mac

    def _mac(self, seq: int, header: bytes, content: bytes) -> bytes:
        aad = struct.pack("!Q", seq) + header[:3] + struct.pack("!H", len(content))
        return hmac.digest(self.mac_key, aad + content, self.mac)

    def open(self, header: bytes, fragment: bytes, seq: int) -> bytes | None:
        if self.encrypt_then_mac:
            body, tag = fragment[: -self.mac_len], fragment[-self.mac_len :]
            if len(body) < 32 or not hmac.compare_digest(self._mac(seq, header, body), tag):
                return None
            plain = self._decrypt(body)
            return _unpad(plain) if plain is not None else None
        plain = self._decrypt(fragment)
        if plain is None:
            return None
        content = _unpad(plain)
        if content is None or len(content) < self.mac_len:
            return None
        data, tag = content[: -self.mac_len], content[-self.mac_len :]
        return data if hmac.compare_digest(self._mac(seq, header, data), tag) else None

    def _decrypt(self, fragment: bytes) -> bytes | None:
        if len(fragment) < 32 or len(fragment) % 16:
            return None
        from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

        decryptor = Cipher(algorithms.AES(self.key), modes.CBC(fragment[:16])).decryptor()
        return decryptor.update(fragment[16:]) + decryptor.finalize()


def _unpad(plain: bytes) -> bytes | None:
    pad = plain[-1] if plain else 0
    if pad + 1 > len(plain) or plain[-pad - 1 :] != bytes([pad]) * (pad + 1):
        return None
    return plain[: -pad - 1]


def tls12_decryptors(
    suite: Suite,
    master: bytes,
    client_random: bytes,
    server_random: bytes,
    encrypt_then_mac: bool = False,
) -> tuple[Decryptor, Decryptor]:
    """(client's, server's) record protection from the master secret (RFC 5246 §6.3)."""
    if suite.kind == "cbc":
        mac_len, iv_len = suite.mac_len, 0  # TLS 1.1+: no fixed IV in the key block
    else:
        mac_len, iv_len = 0, 12 if suite.kind == "chacha" else 4
    size = 2 * (mac_len + suite.key_len + iv_len)
    block = prf(master, b"key expansion", server_random + client_random, size, suite.hash)
    at = 0

    def take(n: int) -> bytes:
        nonlocal at
        at += n
        return block[at - n : at]

    c_mac, s_mac = take(mac_len), take(mac_len)
    c_key, s_key = take(suite.key_len), take(suite.key_len)
    c_iv, s_iv = take(iv_len), take(iv_len)
    if suite.kind == "cbc":
        return (
            TLS12CBCDecryptor(suite, c_mac, c_key, encrypt_then_mac),
            TLS12CBCDecryptor(suite, s_mac, s_key, encrypt_then_mac),
        )
    return TLS12AEADDecryptor(suite, c_key, c_iv), TLS12AEADDecryptor(suite, s_key, s_iv)


__all__ = [
    "SUITES",
    "Decryptor",
    "Suite",
    "TLS12AEADDecryptor",
    "TLS12CBCDecryptor",
    "TLS13Decryptor",
    "hkdf_expand_label",
    "next_traffic_secret",
    "prf",
    "tls12_decryptors",
]
