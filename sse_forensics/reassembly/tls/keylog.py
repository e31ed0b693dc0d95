"""The NSS key log format (``SSLKEYLOGFILE``): what curl, Firefox, Chrome, Node's
``--tls-keylog``, Python's ``ssl`` ``keylog_filename`` and httpx write, and what a pcapng
Decryption Secrets Block of type ``TLSK`` holds (draft-ietf-opsawg-pcapng §4.7).

Sans-I/O: :func:`parse_keylog` takes the text and returns the secrets by client random plus
what it could not read; the readers in :mod:`sse_forensics.ingest.keylog` open files.

Each line is ``<label> <client random, 64 hex> <secret, hex>`` (NSS "Key Log Format",
draft-ietf-tls-keylogfile §3); ``#`` starts a comment. ``CLIENT_RANDOM`` carries a TLS 1.2
master secret (48 bytes); the TLS 1.3 labels carry traffic secrets (the hash's length).
"""

from __future__ import annotations

import binascii
from dataclasses import dataclass, field

CLIENT_RANDOM = "CLIENT_RANDOM"  # TLS <= 1.2: the master secret
CLIENT_EARLY = "CLIENT_EARLY_TRAFFIC_SECRET"  # TLS 1.3 0-RTT data
CLIENT_HANDSHAKE = "CLIENT_HANDSHAKE_TRAFFIC_SECRET"
SERVER_HANDSHAKE = "SERVER_HANDSHAKE_TRAFFIC_SECRET"
CLIENT_TRAFFIC_0 = "CLIENT_TRAFFIC_SECRET_0"
SERVER_TRAFFIC_0 = "SERVER_TRAFFIC_SECRET_0"
LABELS = frozenset(
    {
        CLIENT_RANDOM,
        CLIENT_HANDSHAKE,
        SERVER_HANDSHAKE,
        CLIENT_TRAFFIC_0,
        SERVER_TRAFFIC_0,
        CLIENT_EARLY,
        "EARLY_EXPORTER_SECRET",
        "EXPORTER_SECRET",
    }
)
# Labels this tool recognises but never needs (RSA pre-master lines are keyed by the
# encrypted pre-master, not the client random: a CLIENT_RANDOM line is needed instead).
IGNORED_LABELS = frozenset({"RSA"})
RANDOM_BYTES = 32
MASTER_SECRET_BYTES = 48  # RFC 5246 §8.1
MAX_SECRET_BYTES = 64  # SHA-512 output: no TLS 1.3 suite hashes longer
MAX_LINE = 512  # a valid line is under 200 characters; longer ones are not key log lines
MAX_REPORTED = 5  # bad lines named one by one; the rest are counted


@dataclass(slots=True)
class KeyLogProblem:
    """A line that is not a key log line: ``line`` is 1-based within its source."""

    line: int
    what: str


@dataclass(slots=True)
class KeyLog:
    """Secrets by client random (32 bytes) and label."""

    secrets: dict[bytes, dict[str, bytes]] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.secrets)

    def get(self, client_random: bytes) -> dict[str, bytes] | None:
        return self.secrets.get(client_random)

    def update(self, other: KeyLog) -> None:
        for random, labels in other.secrets.items():
            self.secrets.setdefault(random, {}).update(labels)


def parse_keylog(text: bytes) -> tuple[KeyLog, list[KeyLogProblem], int]:
    """Secrets of every valid line of ``text``; the first :data:`MAX_REPORTED` bad lines
    and the number of bad lines in all. Never raises."""
    log = KeyLog()
    problems: list[KeyLogProblem] = []
    bad = 0
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith(b"#"):
            continue
        what = _line(line, log)
        if what is not None:
            bad += 1
            if len(problems) < MAX_REPORTED:
                problems.append(KeyLogProblem(number, what))
    return log, problems, bad


def _line(line: bytes, log: KeyLog) -> str | None:
    if len(line) > MAX_LINE:
        return f"line longer than {MAX_LINE} characters"
    parts = line.split()
    if len(parts) != 3:
        return f"{len(parts)} fields, want 3 (label, client random, secret)"
    try:
        label = parts[0].decode("ascii")
    except UnicodeDecodeError:
        return "label is not ASCII"
    if label in IGNORED_LABELS:
        return None
    if label not in LABELS:
        return f"unknown label {label[:40]!r}"
    try:
        random = binascii.unhexlify(parts[1])
        secret = binascii.unhexlify(parts[2])
    except (binascii.Error, ValueError):
        return f"{label}: client random or secret is not hex"
    if len(random) != RANDOM_BYTES:
        return f"{label}: client random of {len(random)} bytes, want {RANDOM_BYTES}"
    if label == CLIENT_RANDOM and len(secret) != MASTER_SECRET_BYTES:
        return f"{label}: master secret of {len(secret)} bytes, want {MASTER_SECRET_BYTES}"
    if not 16 <= len(secret) <= MAX_SECRET_BYTES:
        return f"{label}: secret of {len(secret)} bytes"
    log.secrets.setdefault(random, {})[label] = secret
    return None


__all__ = ["KeyLog", "KeyLogProblem", "parse_keylog"]
