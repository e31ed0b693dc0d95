"""A passive TLS observer of one TCP connection: both directions' records in, the
application data out as pieces that keep the frame of every byte (sans-I/O, like h11).

:class:`TLSSession` reads the record layer (RFC 8446 §5, RFC 5246 §6.2), the hellos (client
random, version, cipher suite, SNI, ALPN), looks the session's secrets up by client random
and decrypts. What it cannot decrypt — no key for the session, a cipher suite it does not
know, a record that does not authenticate, the handshake missing from the capture, bytes
after a capture hole whose record boundaries it cannot find again — becomes a
:class:`TLSGap` (the application layer sees missing bytes, so what they touch is
indeterminate) and is counted in :class:`TLSInfo`, with the reason.

After a capture hole the record stream is found again by trial: a plausible record header
whose record authenticates under the next sequence numbers (an AEAD tag does not verify by
chance), bounded by :data:`MAX_SEQUENCE_SEARCH`.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass, field

from sse_forensics.provenance import Origin
from sse_forensics.reassembly.receive_buffer import Pieces, ReceiveBuffer, spread_spans
from sse_forensics.reassembly.stream import Direction, MissingSpan
from sse_forensics.reassembly.tls import handshake as hs
from sse_forensics.reassembly.tls.crypto import (
    SUITES,
    Decryptor,
    Suite,
    TLS13Decryptor,
    tls12_decryptors,
)
from sse_forensics.reassembly.tls.keylog import (
    CLIENT_EARLY,
    CLIENT_HANDSHAKE,
    CLIENT_RANDOM,
    CLIENT_TRAFFIC_0,
    SERVER_HANDSHAKE,
    SERVER_TRAFFIC_0,
)

CHANGE_CIPHER_SPEC = 20
ALERT = 21
HANDSHAKE = 22
APPLICATION_DATA = 23
HEARTBEAT = 24
RECORD_HEADER = 5
# RFC 5246 §6.2.3: TLSCiphertext.length <= 2^14 + 2048 (RFC 8446 §5.2 allows 2^14 + 256).
MAX_RECORD = (1 << 14) + 2048
# Sequence numbers tried past a capture hole (records lost in it), and how far ahead of the
# hole a record start is looked for before the rest of the direction is given up.
MAX_SEQUENCE_SEARCH = 1 << 14
MAX_RESYNC_SCAN = 1 << 20
SMALLEST_RECORD = RECORD_HEADER + 1 + 16  # a TLS 1.3 record: content type + tag
# Sequence numbers tried for a record after records that did not authenticate (each is
# a trial decryption: a wrong key must not make every later record cost more and more).
MAX_FAILED_RECORDS = 16
# 0-RTT (RFC 8446 §4.2.10): client records sent under the early traffic secret before the
# server answered; held until its EncryptedExtensions say whether it read them.
MAX_EARLY_RECORDS = 256
EARLY_DATA = "0-RTT early data (TLS 1.3): not decrypted"
EARLY_NO_KEY = (
    f"{EARLY_DATA}: the key log has no CLIENT_EARLY_TRAFFIC_SECRET of the right length for "
    "this session"
)
EARLY_UNREAD = f"{EARLY_DATA}: a record did not authenticate under CLIENT_EARLY_TRAFFIC_SECRET"
EARLY_UNANSWERED = f"{EARLY_DATA}: the server's answer to it is not in what was read"

KeyLookup = Callable[[bytes], "dict[str, bytes] | None"]
"""Secrets of a session by client random (``None``: the key log does not have it)."""

VERSION_NAMES = {0x0301: "TLS 1.0", 0x0302: "TLS 1.1", 0x0303: "TLS 1.2", 0x0304: "TLS 1.3"}


@dataclass(slots=True)
class TLSData:
    """Decrypted application data of one record, laid over the frames that carried it.

    ``offset``: where in the direction's TCP byte stream the ciphertext of the first
    plaintext byte lies (plaintext byte *i* travelled at ``offset + i``); ``end``: the stream
    offset just past the record (its last byte completes it)."""

    direction: Direction
    pieces: Pieces
    offset: int = -1
    end: int = -1


@dataclass(slots=True)
class TLSGap:
    """Application data that is missing (capture hole) or could not be decrypted."""

    direction: Direction
    span: MissingSpan


@dataclass(slots=True)
class TLSProblem:
    """Something the record layer could not read; ``what`` says what and why."""

    direction: Direction
    what: str
    origin: Origin | None


TLSEvent = TLSData | TLSGap | TLSProblem


@dataclass(slots=True)
class DirectionCounts:
    records: int = 0  # records read
    decrypted_records: int = 0
    plaintext_bytes: int = 0  # application data out
    undecryptable_records: int = 0
    undecryptable_bytes: int = 0  # record bytes (header included) that could not be read


@dataclass(slots=True)
class TLSInfo:
    """What a connection's TLS showed: version, suite, SNI, ALPN, and whether (and why not)
    its records could be decrypted."""

    version: str | None = None
    cipher_suite: str | None = None
    server_name: str | None = None
    alpn_offered: list[str] = field(default_factory=list)
    alpn: str | None = None
    client_random: str | None = None  # hex, as in the key log
    key_found: bool = False
    reasons: list[str] = field(default_factory=list)  # why bytes could not be decrypted
    key_updates: int = 0
    # 0-RTT (RFC 8446 §4.2.10): the client offered early data; the server accepted it.
    early_data: bool = False
    early_data_accepted: bool = False
    counts: dict[str, DirectionCounts] = field(
        default_factory=lambda: {"client": DirectionCounts(), "server": DirectionCounts()}
    )

    @property
    def undecryptable_bytes(self) -> int:
        return sum(c.undecryptable_bytes for c in self.counts.values())

    @property
    def decrypted_bytes(self) -> int:
        """Application data read, both directions."""
        return sum(c.plaintext_bytes for c in self.counts.values())

    @property
    def decrypted(self) -> bool:
        """Every record of the connection was read (its keys found, nothing undecryptable)."""
        return self.key_found and not self.undecryptable_bytes

    def as_dict(self) -> dict[str, object]:
        return {
            "version": self.version,
            "cipher_suite": self.cipher_suite,
            "server_name": self.server_name,
            "alpn": self.alpn,
            "alpn_offered": list(self.alpn_offered),
            "client_random": self.client_random,
            "key_found": self.key_found,
            "decrypted": self.decrypted,
            "decrypted_bytes": self.decrypted_bytes,
            "undecryptable_bytes": self.undecryptable_bytes,
            "key_updates": self.key_updates,
            "early_data": self.early_data,
            "early_data_accepted": self.early_data_accepted,
            "reasons": list(self.reasons),
        }


class _Direction:
    """Record-layer state of one direction."""

    __slots__ = (
        "buf",
        "dead",
        "decryptor",
        "encrypted",
        "failed",
        "handshake",
        "in_gap",
        "lost",
        "lost_bytes",
        "next_decryptor",
        "offset",
        "search",
        "seq",
        "stages",
    )

    def __init__(self) -> None:
        self.buf = ReceiveBuffer()
        self.offset = 0  # stream offset of buf[0]
        self.encrypted = False  # records are protected from here on
        self.decryptor: Decryptor | None = None
        self.stages: list[Decryptor] = []  # later key stages to try (TLS 1.3)
        self.next_decryptor: Decryptor | None = None  # after a KeyUpdate or Finished
        self.seq = 0
        self.failed = 0  # records in a row that did not authenticate
        self.handshake = hs.HandshakeReader()
        self.lost = False  # past a capture hole: record boundaries unknown
        self.in_gap = False  # a gap was reported and no plaintext has come since
        self.lost_bytes = 0  # bytes scanned since then
        self.dead: str | None = None  # nothing more can be read in this direction: why
        self.search = 0  # sequence numbers to try past the holes since the last record


class TLSSession:
    """Both directions of one TLS connection (see the module docstring)."""

    def __init__(self, keys: KeyLookup, why_no_key: Callable[[], str] | None = None) -> None:
        self.keys = keys
        self.why_no_key = why_no_key  # what to say when the key log lacks the session
        self.info = TLSInfo()
        self.dirs: dict[Direction, _Direction] = {"client": _Direction(), "server": _Direction()}
        self.client_hello: hs.ClientHello | None = None
        self.server_hello: hs.ServerHello | None = None
        self.suite: Suite | None = None
        self.tls13 = False
        self.keys_ready = False
        self.no_keys: str | None = None  # why the keys are not available
        self.out: list[TLSEvent] = []
        # 0-RTT: client records held until the server's answer (header, fragment, spans,
        # stream offset past the record), the early key, whether the server read them
        # (None: not known yet), and whether the client is past its early data.
        self.early_held: list[tuple[bytes, bytes, list[tuple[int, Origin]], int]] = []
        self.early_key: Decryptor | None = None
        self.early_seq = 0
        self.early_answer: bool | None = None
        self.early_over = False

    # -- input -------------------------------------------------------------------------------

    def feed(self, direction: Direction, data: bytes, origin: Origin) -> list[TLSEvent]:
        d = self.dirs[direction]
        self.out = []
        if d.dead is not None:
            self._undecryptable(direction, len(data), None, origin, count_record=False)
            return self.out
        d.buf.append(data, origin)
        self._records(direction)
        return self.out

    def missing(self, span: MissingSpan) -> list[TLSEvent]:
        """A capture hole: the record in progress is lost, and where the next one starts is
        unknown until a record authenticates again."""
        direction = span.direction
        d = self.dirs[direction]
        # The application data's length is unknown: record overhead was lost with it.
        plain = MissingSpan(direction, span.offset, None, span.reason, span.after, span.before)
        self.out = []
        if not d.in_gap:  # else: already missing from an earlier point, the same gap
            self.out.append(TLSGap(direction, plain))
            d.in_gap = True
        if d.dead is not None:
            return self.out
        lost = len(d.buf) + (span.length or 0)
        d.offset += len(d.buf) + (span.length or 0)
        d.buf.clear()
        if not d.encrypted and not self.keys_ready:
            # Before encryption starts a hole cuts the handshake: the hellos may be lost.
            d.handshake.reset()
        d.lost = True
        d.lost_bytes = 0
        d.search = min(d.search + lost // SMALLEST_RECORD + 2, MAX_SEQUENCE_SEARCH)
        return self.out

    def end(self) -> list[TLSEvent]:
        """End of the connection: a record cut short is counted as undecryptable, and so is
        0-RTT data the server's answer to which never came."""
        self.out = []
        if self.early_held:
            self._early_unreadable(EARLY_UNANSWERED)
        for direction, d in self.dirs.items():
            if len(d.buf) and d.dead is None:
                origin = d.buf.origin_at(0)
                self._undecryptable(
                    direction,
                    len(d.buf),
                    "record cut short by the end of the connection",
                    origin,
                    count_record=True,
                )
                d.buf.clear()
        return self.out

    # -- records -----------------------------------------------------------------------------

    def _records(self, direction: Direction) -> None:
        d = self.dirs[direction]
        buf = d.buf
        while True:
            if d.lost and not self._resync(direction):
                return
            if len(buf) < RECORD_HEADER:
                return
            header = bytes(buf.data[:RECORD_HEADER])
            kind, major, length = header[0], header[1], struct.unpack_from("!H", header, 3)[0]
            if not (CHANGE_CIPHER_SPEC <= kind <= HEARTBEAT and major == 3) or length > MAX_RECORD:
                self._die(
                    direction,
                    f"bytes at stream offset {d.offset} are not a TLS record "
                    f"(type {kind}, version {major}.{header[2]}, length {length})",
                    buf.origin_at(0),
                )
                return
            if len(buf) < RECORD_HEADER + length:
                return
            fragment = bytes(buf.data[RECORD_HEADER : RECORD_HEADER + length])
            spans = buf.take_spans(RECORD_HEADER + length)
            d.offset += RECORD_HEADER + length
            self.info.counts[direction].records += 1
            self._record(direction, header, fragment, spans)
            if d.dead is not None:
                return

    def _record(
        self, direction: Direction, header: bytes, fragment: bytes, spans: list[tuple[int, Origin]]
    ) -> None:
        """One whole record (``spans``: how many of its bytes each frame carried)."""
        d = self.dirs[direction]
        kind = header[0]
        if not d.encrypted:
            if kind == HANDSHAKE:
                self._handshake(direction, fragment)
                return
            if kind == CHANGE_CIPHER_SPEC:
                if self.server_hello is not None and not self.tls13:
                    d.encrypted = True  # RFC 5246 §7.1: the next record is protected
                    d.seq = 0
                return  # TLS 1.3: middlebox compatibility, ignored (RFC 8446 §D.4)
            if kind == ALERT:
                return
            if kind == APPLICATION_DATA and not self.tls13 and self._early(direction):
                self._early_record(header, fragment, spans, d.offset)  # held: suite unknown
                return
            if kind == APPLICATION_DATA and self.tls13:
                d.encrypted = True  # TLS 1.3: every protected record is type 23
            elif kind == APPLICATION_DATA:
                self._undecryptable(
                    direction,
                    len(header) + len(fragment),
                    "application data before the handshake was seen (capture started "
                    "mid-connection): no client random to find the keys by",
                    spans[0][1],
                )
                return
            else:
                return
        if kind == CHANGE_CIPHER_SPEC and self.tls13:
            return
        if not self.keys_ready:
            self._undecryptable(
                direction, len(header) + len(fragment), self._no_key_reason(), spans[0][1]
            )
            return
        early = self._early(direction)
        # Before EndOfEarlyData the client's records are under the early key.
        if (
            early
            and self.early_answer is not False
            and self._early_record(header, fragment, spans, d.offset)
        ):
            return
        failed = d.failed
        plain = self._open(direction, header, fragment)
        if plain is None and early:
            # Under the early key, with sequence numbers of its own: no count against the
            # handshake key's. Early data the server did not read is skipped, as it did.
            d.failed = failed
            if self.early_answer:
                reason = EARLY_NO_KEY if self.early_key is None else EARLY_UNREAD
                self._undecryptable(direction, len(header) + len(fragment), reason, spans[0][1])
            return
        if early:
            self.early_over = True  # the client's handshake key took over
        if plain is None:
            self._undecryptable(
                direction,
                len(header) + len(fragment),
                "a record did not authenticate (wrong key in the key log, or corrupt bytes)",
                spans[0][1],
            )
            if d.failed >= MAX_FAILED_RECORDS:
                self._die(
                    direction,
                    f"{MAX_FAILED_RECORDS} records in a row did not authenticate: the rest "
                    "of this direction is not tried",
                    spans[0][1],
                )
            return
        counts = self.info.counts[direction]
        counts.decrypted_records += 1
        if self.tls13:
            end = len(plain)
            while end and plain[end - 1] == 0:
                end -= 1
            if not end:
                return  # all padding: RFC 8446 §5.4 makes this an error; nothing to read
            kind = plain[end - 1]
            plain = plain[: end - 1]
        if kind == APPLICATION_DATA:
            if plain:
                counts.plaintext_bytes += len(plain)
                d.in_gap = False
                overhead = RECORD_HEADER + (d.decryptor.overhead if d.decryptor else 0)
                start = d.offset - len(header) - len(fragment)  # d.offset: past the record
                pieces = spread_spans(plain, spans, overhead)
                self.out.append(TLSData(direction, pieces, start + overhead, d.offset))
        elif kind == HANDSHAKE:
            self._handshake(direction, plain)
        if d.next_decryptor is not None:
            d.decryptor, d.next_decryptor = d.next_decryptor, None
            d.seq = 0

    def _open(self, direction: Direction, header: bytes, fragment: bytes) -> bytes | None:
        """Decrypt under the current key. Records that did not authenticate still took a
        sequence number each (their framing was intact): the next one is tried under every
        number they may have taken. In TLS 1.3 a record the current stage does not open may
        be the first of the next stage (the Finished that switches was not read)."""
        d = self.dirs[direction]
        if d.decryptor is not None:
            for seq in range(d.seq, d.seq + d.failed + 1):
                plain = d.decryptor.open(header, fragment, seq)
                if plain is not None:
                    d.seq = seq + 1
                    d.failed = 0
                    return plain
        for k, stage in enumerate(d.stages):
            for seq in range(d.failed + 1):
                plain = stage.open(header, fragment, seq)
                if plain is not None:
                    d.decryptor = stage
                    d.stages = d.stages[k + 1 :]
                    d.seq = seq + 1
                    d.failed = 0
                    return plain
        d.failed = min(d.failed + 1, MAX_FAILED_RECORDS)
        return None

    def _early(self, direction: Direction) -> bool:
        """Whether a client record may be 0-RTT data: the ClientHello announced early data
        and neither EndOfEarlyData nor a record under the client's handshake key has come
        since (RFC 8446 §4.2.10, §4.5)."""
        return (
            direction == "client"
            and self.client_hello is not None
            and self.client_hello.early_data
            and not self.early_over
        )

    # -- 0-RTT -------------------------------------------------------------------------------

    def _early_record(
        self, header: bytes, fragment: bytes, spans: list[tuple[int, Origin]], end: int
    ) -> bool:
        """A client record of the early-data phase (``end``: stream offset past it): held
        until the server's answer is known, decrypted under the early key if the server
        read early data. ``False``: not read here (the handshake key's to try)."""
        size = len(header) + len(fragment)
        if self.early_answer is None:
            if len(self.early_held) < MAX_EARLY_RECORDS:
                self.early_held.append((header, fragment, spans, end))
            else:
                self._undecryptable("client", size, EARLY_UNANSWERED, spans[0][1])
            return True
        if not self.early_answer or self.early_key is None:
            return False
        plain = self.early_key.open(header, fragment, self.early_seq)
        if plain is None:
            return False
        self.early_seq += 1
        counts = self.info.counts["client"]
        counts.decrypted_records += 1
        body = len(plain)
        while body and plain[body - 1] == 0:
            body -= 1
        if not body:
            return True
        kind, plain = plain[body - 1], plain[: body - 1]
        if kind == APPLICATION_DATA and plain:
            counts.plaintext_bytes += len(plain)
            self.dirs["client"].in_gap = False
            overhead = RECORD_HEADER + self.early_key.overhead
            start = end - size
            pieces = spread_spans(plain, spans, overhead)
            self.out.append(TLSData("client", pieces, start + overhead, end))
        elif kind == HANDSHAKE:
            for message, _body in self.dirs["client"].handshake.feed(plain):
                if message == hs.END_OF_EARLY_DATA:
                    self.early_over = True
        return True

    def _early_answered(self, accepted: bool) -> None:
        """The server's EncryptedExtensions: the held early records are read (accepted) or
        dropped (the server skipped them: nothing was lost to it)."""
        self.early_answer = accepted
        held, self.early_held = self.early_held, []
        for header, fragment, spans, end in held:
            if accepted and not self._early_record(header, fragment, spans, end):
                reason = EARLY_NO_KEY if self.early_key is None else EARLY_UNREAD
                self._undecryptable("client", len(header) + len(fragment), reason, spans[0][1])

    def _early_unreadable(self, reason: str) -> None:
        """The early records held can never be read (no keys, not TLS 1.3)."""
        held, self.early_held = self.early_held, []
        for header, fragment, spans, _end in held:
            self._undecryptable("client", len(header) + len(fragment), reason, spans[0][1])

    # -- after a hole --------------------------------------------------------------------

    def _resync(self, direction: Direction) -> bool:
        """Find the next record that authenticates; ``True`` once the stream is read again."""
        d = self.dirs[direction]
        buf = d.buf
        if not d.encrypted or not self.keys_ready or d.decryptor is None:
            # Without keys (or before encryption) nothing can confirm a boundary: give up on
            # the direction rather than guess.
            self._die(
                direction,
                "capture hole in the TLS stream before its keys were known: the rest of "
                "this direction cannot be decrypted",
                buf.origin_at(0),
            )
            return False
        data = bytes(buf.data)
        limit = d.search
        start = 0
        while True:
            at = _next_header(data, start)
            if at < 0 or at + RECORD_HEADER > len(data):
                break
            length = struct.unpack_from("!H", data, at + 3)[0]
            if at + RECORD_HEADER + length > len(data):
                # A plausible header whose record is not all here yet: wait for it.
                self._drop_scanned(direction, at)
                return False
            header = data[at : at + RECORD_HEADER]
            fragment = data[at + RECORD_HEADER : at + RECORD_HEADER + length]
            found = self._find_sequence(d, header, fragment, limit)
            if found is not None:
                buf.skip(at)
                d.offset += at
                d.seq = found
                d.lost = False
                d.search = 0
                return True
            start = at + 1
        self._drop_scanned(direction, max(len(data) - RECORD_HEADER, 0))
        return False

    def _find_sequence(
        self, d: _Direction, header: bytes, fragment: bytes, limit: int
    ) -> int | None:
        assert d.decryptor is not None
        for seq in range(d.seq, d.seq + limit + 1):
            if d.decryptor.open(header, fragment, seq) is not None:
                return seq
        return None

    def _drop_scanned(self, direction: Direction, n: int) -> None:
        d = self.dirs[direction]
        if n <= 0:
            return
        d.buf.skip(n)
        d.offset += n
        d.lost_bytes += n
        if d.lost_bytes > MAX_RESYNC_SCAN:
            self._die(
                direction,
                f"no TLS record authenticated in the {d.lost_bytes} bytes after a capture "
                "hole: the rest of this direction cannot be decrypted",
                None,
            )

    # -- handshake ---------------------------------------------------------------------------

    def _handshake(self, direction: Direction, data: bytes) -> None:
        d = self.dirs[direction]
        for kind, body in d.handshake.feed(data):
            if kind == hs.CLIENT_HELLO and direction == "client":
                hello = hs.parse_client_hello(body)
                if hello is not None:
                    self.client_hello = hello
                    self.info.client_random = hello.random.hex()
                    self.info.server_name = hello.server_name
                    self.info.alpn_offered = hello.alpn
                    if not hello.early_data:
                        # A second ClientHello (after a HelloRetryRequest) has none: the
                        # server skipped the early data sent after the first (RFC 8446 §4.1.2).
                        self.early_held = []
                    self.info.early_data = self.info.early_data or hello.early_data
            elif kind == hs.SERVER_HELLO and direction == "server":
                server_hello = hs.parse_server_hello(body)
                if server_hello is not None and not server_hello.retry:
                    self.server_hello = server_hello
                    self._server_hello(server_hello)
                    if self.early_held and not (self.keys_ready and self.tls13):
                        self._early_unreadable(self._no_key_reason())
            elif kind == hs.ENCRYPTED_EXTENSIONS and direction == "server":
                self.info.alpn, self.info.early_data_accepted = hs.parse_encrypted_extensions(body)
                if self.info.early_data:
                    self._early_answered(self.info.early_data_accepted)
            elif kind == hs.FINISHED and self.tls13 and d.stages:
                # RFC 8446 §7.1: after its Finished a side sends under its traffic secret.
                d.next_decryptor = d.stages.pop(0)
            elif kind == hs.KEY_UPDATE and self.tls13 and isinstance(d.decryptor, TLS13Decryptor):
                d.next_decryptor = d.decryptor.updated()
                self.info.key_updates += 1

    def _server_hello(self, hello: hs.ServerHello) -> None:
        info = self.info
        info.version = VERSION_NAMES.get(hello.version, f"0x{hello.version:04x}")
        suite = SUITES.get(hello.suite)
        info.cipher_suite = suite.name if suite else f"0x{hello.suite:04x}"
        self.tls13 = hello.version == hs.TLS13
        if hello.alpn is not None:
            info.alpn = hello.alpn
        client = self.client_hello
        if client is None:
            self.no_keys = "the ClientHello is not in the capture: no client random to find "
            self.no_keys += "the keys by"
            return
        if hello.version not in (hs.TLS12, hs.TLS13):
            self.no_keys = f"{info.version} is not supported (TLS 1.2 and 1.3 are)"
            return
        if suite is None or suite.tls13 != self.tls13:
            self.no_keys = f"cipher suite {info.cipher_suite} is not supported"
            return
        secrets = self.keys(client.random)
        if secrets is None:
            why = self.why_no_key() if self.why_no_key is not None else ""
            self.no_keys = why or (
                f"no key for this session in the key log (client random "
                f"{client.random.hex()[:16]}…)"
            )
            return
        self.suite = suite
        c, s = self.dirs["client"], self.dirs["server"]
        if self.tls13:
            c.stages = [
                TLS13Decryptor(suite, secrets[label])
                for label in (CLIENT_HANDSHAKE, CLIENT_TRAFFIC_0)
                if label in secrets and len(secrets[label]) == _hash_len(suite.hash)
            ]
            s.stages = [
                TLS13Decryptor(suite, secrets[label])
                for label in (SERVER_HANDSHAKE, SERVER_TRAFFIC_0)
                if label in secrets and len(secrets[label]) == _hash_len(suite.hash)
            ]
            if not c.stages and not s.stages:
                self.no_keys = "the key log has this session but no TLS 1.3 traffic secret "
                self.no_keys += f"of the right length for {suite.name}"
                return
            for d in (c, s):
                if d.stages:
                    d.decryptor = d.stages.pop(0)
            early = secrets.get(CLIENT_EARLY)
            if early is not None and len(early) == _hash_len(suite.hash):
                # Accepted early data is under the PSK's suite, which is the one chosen.
                self.early_key = TLS13Decryptor(suite, early)
        else:
            master = secrets.get(CLIENT_RANDOM)
            if master is None:
                self.no_keys = "the key log has this session but no CLIENT_RANDOM master "
                self.no_keys += "secret (TLS 1.2)"
                return
            etm = client.encrypt_then_mac and hello.encrypt_then_mac
            c.decryptor, s.decryptor = tls12_decryptors(
                suite, master, client.random, hello.random, etm
            )
        info.key_found = True
        self.keys_ready = True

    def _no_key_reason(self) -> str:
        if self.no_keys is not None:
            return self.no_keys
        if self.server_hello is None:
            return "the ServerHello is not in the capture: cipher suite and keys unknown"
        return "keys unknown"

    # -- problems ----------------------------------------------------------------------------

    def _undecryptable(
        self,
        direction: Direction,
        nbytes: int,
        reason: str | None,
        origin: Origin | None,
        count_record: bool = True,
    ) -> None:
        counts = self.info.counts[direction]
        counts.undecryptable_bytes += nbytes
        if count_record:
            counts.undecryptable_records += 1
        d = self.dirs[direction]
        if not d.in_gap:  # one gap stands for consecutive unreadable records
            d.in_gap = True
            span = MissingSpan(direction, d.offset, None, "undecryptable", after=origin)
            self.out.append(TLSGap(direction, span))
        if reason is not None and reason not in self.info.reasons:
            self.info.reasons.append(reason)
            self.out.append(TLSProblem(direction, reason, origin))

    def _die(self, direction: Direction, reason: str, origin: Origin | None) -> None:
        d = self.dirs[direction]
        d.dead = reason
        rest = len(d.buf)
        d.buf.clear()
        self._undecryptable(direction, rest, reason, origin, count_record=False)


def _hash_len(name: str) -> int:
    return {"sha256": 32, "sha384": 48}[name]


def _next_header(data: bytes, start: int) -> int:
    """The next offset that starts like a protected record header (type 23, TLS 1.2 on the
    wire, a length the record layer allows)."""
    while True:
        at = data.find(b"\x17\x03\x03", start)
        if at < 0 or at + RECORD_HEADER > len(data):
            return -1 if at < 0 else at
        length = struct.unpack_from("!H", data, at + 3)[0]
        if SMALLEST_RECORD - RECORD_HEADER <= length <= MAX_RECORD:
            return at
        start = at + 1


__all__ = [
    "KeyLookup",
    "TLSData",
    "TLSEvent",
    "TLSGap",
    "TLSInfo",
    "TLSProblem",
    "TLSSession",
]
