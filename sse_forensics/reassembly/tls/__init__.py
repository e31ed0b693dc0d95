"""TLS decryption for a passive observer: the NSS key log (:mod:`.keylog`), handshake
messages (:mod:`.handshake`), cipher suites and record protection (:mod:`.crypto`) and the
per-connection record layer (:mod:`.session`). :class:`TLSKeys` is where a scan's secrets
come from: key log files the user gave, and the Decryption Secrets Blocks of pcapng inputs.
"""

from __future__ import annotations

from collections.abc import Mapping

from sse_forensics.reassembly.tls.keylog import KeyLog, parse_keylog
from sse_forensics.reassembly.tls.session import TLSData, TLSGap, TLSInfo, TLSProblem, TLSSession

# pcapng Decryption Secrets Block, secrets type "TLSK": NSS key log lines
# (draft-ietf-opsawg-pcapng §4.7).
DSB_TLS_KEYLOG = 0x544C534B


class TLSKeys:
    """Secrets by client random from the key logs given (``keylog``) and from the pcapng
    Decryption Secrets Blocks the capture readers collect into ``stats`` (read when a
    session is looked up, so blocks read after the scan started count too).

    ``given``: whether the user gave a key log (for the reason a session has no key)."""

    def __init__(
        self,
        keylog: KeyLog | None = None,
        stats: Mapping[str, object] | None = None,
        given: bool = False,
    ) -> None:
        self.keylog = keylog or KeyLog()
        self.stats = stats if stats is not None else {}
        self.given = given
        self._read: dict[str, int] = {}  # per capture file: secrets blocks already parsed
        self.dsb_sessions = 0

    def _pull(self) -> None:
        for path, st in self.stats.items():
            blocks = getattr(st, "secrets", None) or []
            done = self._read.get(path, 0)
            for kind, data in blocks[done:]:
                if kind == DSB_TLS_KEYLOG:
                    log, _problems, _bad = parse_keylog(data)
                    self.dsb_sessions += len(log)
                    self.keylog.update(log)
            self._read[path] = len(blocks)

    def lookup(self, client_random: bytes) -> dict[str, bytes] | None:
        found = self.keylog.get(client_random)
        if found is None:
            self._pull()
            found = self.keylog.get(client_random)
        return found

    def why_none(self) -> str:
        """What to say when a session has no key."""
        self._pull()
        if not self.given and not len(self.keylog):
            return (
                "no key log given (--tls-keylog FILE) and the capture has no Decryption "
                "Secrets Block"
            )
        return ""


__all__ = [
    "DSB_TLS_KEYLOG",
    "KeyLog",
    "TLSData",
    "TLSGap",
    "TLSInfo",
    "TLSKeys",
    "TLSProblem",
    "TLSSession",
    "parse_keylog",
]
