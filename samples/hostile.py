"""Hostile captures too big to keep in the repository, written at test or benchmark time.

Issue 16: a capture crafted to exhaust the analyzer (a decompression bomb, a million SYNs,
a hundred thousand concurrent streams, ten million events in one stream) must cost bounded
memory and linear time, and must not hide the ordinary incident elsewhere in the same
capture. Every capture written here therefore also holds :func:`ordinary_gap`: one
``tools/call`` stream whose IDs jump from 7 to 13 with no ``stream-gap`` event (a
``missing-stream-gap`` ``silent_corruption``, gap 8-12, that a scan must still report).

Frames are packed with ``struct`` (Ethernet, IPv4, TCP; checksums left zero, which the
analyzer does not check), about a million frames a second, so the tests can build their
inputs in a second or two. Nothing depends on the clock or on randomness.

Run: ``python samples/hostile.py KIND N OUT.pcap`` (see ``KINDS``).
"""

from __future__ import annotations

import argparse
import gzip
import struct
import zlib
from collections.abc import Callable, Iterable
from pathlib import Path

import brotli
import zstandard

LINKTYPE_ETHERNET = 1
SERVER_IP = bytes((10, 9, 0, 2))
SERVER_PORT = 8000
START_S = 1_767_225_600  # 2026-01-01T00:00:00Z
FIN, SYN, RST, PSH, ACK = 0x01, 0x02, 0x04, 0x08, 0x10
MSS = 1448
SEQ_MOD = 1 << 32

_PCAP_HEADER = struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 262_144, LINKTYPE_ETHERNET)
_RECORD = struct.Struct("<IIII")
_ETH_C2S = b"\x02\x00\x00\x00\x00\x02" + b"\x02\x00\x00\x00\x00\x01" + b"\x08\x00"
_ETH_S2C = b"\x02\x00\x00\x00\x00\x01" + b"\x02\x00\x00\x00\x00\x02" + b"\x08\x00"
_IP = struct.Struct("!BBHHHBBH4s4s")
_TCP = struct.Struct("!HHIIBBHHH")


class PcapWriter:
    """A classic pcap written as frames come, with a clock that moves 10 µs per frame."""

    def __init__(self, path: Path) -> None:
        self._out = open(path, "wb")  # noqa: SIM115 - closed by close()
        self._out.write(_PCAP_HEADER)
        self._buf: list[bytes] = []
        self.usec = 0
        self.frames = 0

    def write(self, frame: bytes) -> None:
        self.usec += 10
        sec, usec = divmod(self.usec, 1_000_000)
        self._buf.append(_RECORD.pack(START_S + sec, usec, len(frame), len(frame)))
        self._buf.append(frame)
        self.frames += 1
        if len(self._buf) >= 16_384:
            self.flush()

    def flush(self) -> None:
        self._out.write(b"".join(self._buf))
        self._buf.clear()

    def close(self) -> None:
        self.flush()
        self._out.close()

    def __enter__(self) -> PcapWriter:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()


def client_ip(n: int) -> bytes:
    """A distinct client address per ``n`` (10.0.0.0/8 minus the server's 10.9/16)."""
    return bytes((10, 10 + (n >> 16) % 200, (n >> 8) & 0xFF, n & 0xFF))


class Flow:
    """One TCP connection client → server:8000; ``seq`` is each side's next sequence number."""

    def __init__(self, w: PcapWriter, client: bytes, port: int, isn: int = 1000) -> None:
        self.w = w
        self.client, self.port = client, port
        self.seq = {True: isn, False: (isn * 7919 + 12345) % SEQ_MOD}  # True: the client

    def frame(
        self,
        from_client: bool,
        flags: int,
        payload: bytes = b"",
        seq: int | None = None,
        window: int = 65535,
    ) -> bytes:
        src, dst = (self.client, SERVER_IP) if from_client else (SERVER_IP, self.client)
        sport, dport = (self.port, SERVER_PORT) if from_client else (SERVER_PORT, self.port)
        own = self.seq[from_client] if seq is None else seq
        ack = self.seq[not from_client] if flags & ACK else 0
        tcp = _TCP.pack(sport, dport, own % SEQ_MOD, ack % SEQ_MOD, 5 << 4, flags, window, 0, 0)
        ip = _IP.pack(0x45, 0, 40 + len(payload), 0, 0x4000, 64, 6, 0, src, dst)
        if seq is None:
            self.seq[from_client] += len(payload) + (1 if flags & (SYN | FIN) else 0)
        return (_ETH_C2S if from_client else _ETH_S2C) + ip + tcp + payload

    def send(
        self,
        from_client: bool,
        flags: int,
        payload: bytes = b"",
        seq: int | None = None,
        window: int = 65535,
    ):
        self.w.write(self.frame(from_client, flags, payload, seq, window))

    def handshake(self) -> None:
        self.send(True, SYN)
        self.send(False, SYN | ACK)
        self.send(True, ACK)

    def data(self, from_client: bool, payload: bytes, ack_every: int = 8) -> None:
        """``payload`` in MSS-sized segments; the peer ACKs every ``ack_every`` of them."""
        for k, start in enumerate(range(0, len(payload), MSS)):
            self.send(from_client, PSH | ACK, payload[start : start + MSS])
            if (k + 1) % ack_every == 0:
                self.send(not from_client, ACK)
        self.send(not from_client, ACK)

    def close(self) -> None:
        self.send(True, FIN | ACK)
        self.send(False, FIN | ACK)
        self.send(True, ACK)


# -- HTTP and SSE --------------------------------------------------------------------------

CALL = b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"scan"}}'


def session_of(n: int) -> bytes:
    return b"%032x" % (0x5E55_0000_0000 + n)


def _session_field(session: bytes | None) -> bytes:
    return b"" if session is None else b"Mcp-Session-Id: " + session + b"\r\n"


def post(session: bytes | None) -> bytes:
    return (
        b"POST /mcp HTTP/1.1\r\nHost: mcp.example.test\r\nContent-Type: application/json\r\n"
        b"Accept: application/json, text/event-stream\r\n"
        + _session_field(session)
        + b"Content-Length: %d\r\n\r\n" % len(CALL)
    ) + CALL


def response_head(session: bytes | None, extra: bytes = b"", chunked: bool = True) -> bytes:
    framing = b"Transfer-Encoding: chunked\r\n" if chunked else b""
    return (
        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
        + _session_field(session)
        + extra
        + framing
        + b"\r\n"
    )


def event(n: int, pad: int = 0) -> bytes:
    data = b'{"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":%d%s}}' % (
        n,
        b',"m":"' + b"x" * pad + b'"' if pad else b"",
    )
    return b"id: %d\ndata: %s\n\n" % (n, data)


def chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


ORDINARY_IDS = [*range(1, 8), *range(13, 21)]
"""The ordinary incident's event IDs: 8-12 dropped with no ``stream-gap`` event."""
ORDINARY_PORT = 9_999
ORDINARY_CLIENT = bytes((10, 8, 0, 1))


def ordinary_gap(w: PcapWriter) -> None:
    """One ordinary silent gap: a chunked ``tools/call`` stream that jumps from 7 to 13."""
    flow = Flow(w, ORDINARY_CLIENT, ORDINARY_PORT, isn=77_000)
    session = session_of(0xFFFF_FFFF)
    flow.handshake()
    flow.data(True, post(session))
    body = b"".join(chunk(event(n)) for n in ORDINARY_IDS) + b"0\r\n\r\n"
    flow.data(False, response_head(session) + body)
    flow.close()


# -- the hostile shapes --------------------------------------------------------------------


def syn_flood(w: PcapWriter, n: int, payload: bool = False) -> None:
    """``n`` connections that send a SYN (and, with ``payload``, one byte after it) and
    nothing else: no SYN+ACK, no FIN."""
    for k in range(n):
        flow = Flow(w, client_ip(k), 1024 + k % 60_000, isn=k)
        flow.send(True, SYN)
        if payload:
            flow.send(True, PSH | ACK, b"G")


def concurrent_streams(
    w: PcapWriter,
    n: int,
    events: int = 3,
    sessions: int = 0,
    close: bool = True,
    one_client: bool = False,
    handshake: bool = True,
) -> None:
    """``n`` connections, each a ``tools/call`` answered by a chunked event stream, all open
    at once: every handshake, then every request and head, then the events round-robin,
    then every close (unless not ``close``: then they are all open when the capture ends).
    ``sessions``: how many sessions share them (0: one each; -1: no ``Mcp-Session-Id``);
    ``one_client``: all from one client address; without ``handshake`` no SYN is sent (the
    capture starts after it: each connection is read from its request, on the exact path)."""
    flows = [
        Flow(w, client_ip(0 if one_client else k), 1024 + k % 60_000, isn=k * 1000)
        for k in range(n)
    ]
    for flow in flows if handshake else ():
        flow.handshake()
    for k, flow in enumerate(flows):
        session = session_of(k % sessions if sessions > 0 else k) if sessions >= 0 else None
        flow.data(True, post(session))
        flow.data(False, response_head(session))
    for e in range(1, events + 1):
        for flow in flows:
            flow.send(False, PSH | ACK, chunk(event(e)))
    for flow in flows if close else ():
        flow.send(False, PSH | ACK, b"0\r\n\r\n")
        flow.send(True, ACK)
        flow.close()


def evicted_jump(w: PcapWriter) -> None:
    """Two event streams open at once, no handshake captured (the exact path, which holds a
    parser per open stream): stream A sends 101-103, stream B opens, then A sends 104 and
    jumps to 108 (105-107 dropped, a ``missing-stream-gap``) and ends. With a table of one
    stream (``--limit streams=1``) B's opening evicts A after 103: the jump lies past the
    cut and is not judged."""
    a = Flow(w, client_ip(5), 42_001, isn=5_000)
    b = Flow(w, client_ip(6), 42_002, isn=6_000)
    a.data(True, post(session_of(5)))
    a.data(False, response_head(session_of(5)))
    a.send(False, PSH | ACK, b"".join(chunk(event(n)) for n in (101, 102, 103)))
    b.data(True, post(session_of(6)))
    b.data(False, response_head(session_of(6)))
    b.send(False, PSH | ACK, chunk(event(201)))
    a.send(False, PSH | ACK, b"".join(chunk(event(n)) for n in (104, 108)) + b"0\r\n\r\n")
    a.close()
    b.send(False, PSH | ACK, chunk(event(202)) + b"0\r\n\r\n")
    b.close()


def long_stream(
    w: PcapWriter,
    n: int,
    chunked: bool = True,
    gap: bool = False,
    step: int = 1,
    late_signal: bool = False,
    lose: int | None = None,
    zero_window: int | None = None,
) -> None:
    """One stream of ``n`` events, many events per segment: one chunk per segment, or
    (not ``chunked``) a close-delimited body; with ``gap``, its IDs jump by 5 halfway
    (a second silent gap, in the long stream itself), and with ``late_signal`` data
    events and a ``stream-gap`` event covering that jump three events after it (a late
    signal); IDs ``step`` apart (2: every one a jump); ``lose``: the segment that holds
    that event (0-based) is missing from the capture (capture loss inside the stream);
    ``zero_window``: after the segment holding that event the client advertises a zero
    window, then opens it again (a zero-window episode: the exact TCP analysis)."""
    # With a late signal, data events (a JSON-RPC notification each): the signal is late
    # when it comes after the jump's next data event.
    payload = b'{"jsonrpc":"2.0","method":"notifications/message"}' if late_signal else b"{}"

    def events() -> Iterable[bytes]:
        for e in range(1, n + 1):
            ev = b"id: %d\ndata: %s\n\n" % (e * step + 5 * (gap and e > n // 2), payload)
            if gap and late_signal and e == n // 2 + 4:
                half = n // 2 * step
                ev += b'event: stream-gap\ndata: {"first":"%d","last":"%d"}\n\n' % (
                    half + 1,
                    half + 5,
                )
            yield ev

    _one_stream(w, events(), chunked, lose_at=lose, zero_at=zero_window)


SIGNALS = (
    b'event: backpressure-disconnect\ndata: {"last_written_id":"%d"}\n\n',
    b'event: resume-gap\ndata: {"requested":"%d","oldest_retained":"%d"}\n\n',
)
"""Signal events that declare no dropped range on a live stream: no gap is made of them."""


def signal_flood(w: PcapWriter, n: int, stream_gap: bool = False) -> None:
    """One stream of ``n`` events, fifteen in sixteen of them signal events (no ``id``),
    the others data events numbered 1, 2, 3 … whose IDs jump by 5 halfway (a silent gap,
    so the stream is judged): with ``stream_gap`` each signal a ``stream-gap`` that names
    a range of no gap of this stream (IDs past its last), else a ``backpressure-disconnect``
    or a ``resume-gap`` in turn."""
    data = b'{"jsonrpc":"2.0","method":"notifications/message"}'
    far = n + 1_000

    def events() -> Iterable[bytes]:
        seq = 0
        for e in range(1, n + 1):
            if e % 16 == 0:
                seq += 1 + 5 * (seq == n // 32)
                yield b"id: %d\ndata: %s\n\n" % (seq, data)
            elif stream_gap:
                yield b'event: stream-gap\ndata: {"first":"%d","last":"%d"}\n\n' % (
                    far + e,
                    far + e,
                )
            elif e % 2:
                yield SIGNALS[0] % seq
            else:
                yield SIGNALS[1] % (seq, seq + 1)

    _one_stream(w, events(), chunked=True)


def _one_stream(
    w: PcapWriter,
    events: Iterable[bytes],
    chunked: bool,
    lose_at: int | None = None,
    hang_up: bool = False,
    zero_at: int | None = None,
) -> None:
    """A ``tools/call`` answered by ``events``, many per segment; ``lose_at``: the
    segment holding that event (0-based) is left out of the capture; ``hang_up``: the
    client closes the connection after the last event, before the body ends; ``zero_at``:
    after the segment holding that event, the client's window closes (an ACK of window 0)
    and opens again."""
    flow = Flow(w, client_ip(1), 40_000)
    session = session_of(1)
    flow.handshake()
    flow.data(True, post(session))
    flow.data(False, response_head(session, chunked=chunked))
    buf: list[bytes] = []
    size = 0
    segments = 0
    count = 0
    lost = zeroed = False

    def send() -> None:
        nonlocal segments, lost, zeroed
        data = b"".join(buf)
        payload = chunk(data) if chunked else data
        if lose_at is not None and not lost and count > lose_at:  # the segment holds it
            flow.frame(False, PSH | ACK, payload)  # its sequence numbers, never its frame
            lost = True
        else:
            flow.send(False, PSH | ACK, payload)
        segments += 1
        if zero_at is not None and not zeroed and count > zero_at:
            flow.send(True, ACK, window=0)  # the receiver's buffer is full
            flow.send(True, ACK)  # a window update: it opens again
            zeroed = True
        if segments % 16 == 0:
            flow.send(True, ACK)

    for ev in events:
        buf.append(ev)
        size += len(ev)
        count += 1
        if size >= MSS - 48:
            send()
            buf, size = [], 0
    if buf:
        send()
    if chunked and not hang_up:
        flow.send(False, PSH | ACK, b"0\r\n\r\n")
    flow.send(True, ACK)
    flow.close()


def resume_request(last_event_id: bytes, session: bytes) -> bytes:
    return (
        b"GET /mcp HTTP/1.1\r\nHost: mcp.example.test\r\nAccept: text/event-stream\r\n"
        + _session_field(session)
        + b"Last-Event-ID: %s\r\n\r\n" % last_event_id
    )


def opaque_id(n: int) -> bytes:
    """A distinct opaque event ID per ``n`` (no counter in it)."""
    return b"op%010xz" % ((n * 0x9E37_79B1) & 0xFF_FFFF_FFFF)


def long_stream_resume(
    w: PcapWriter,
    n: int,
    skip: int = 0,
    leid: int = 0,
    opaque: bool = False,
    closing: bytes = b"",
    replay: int = 20,
) -> None:
    """One stream of ``n`` events (IDs 1 … n, or ``opaque``) the client hangs up on, then
    its resume (a GET with Last-Event-ID the ID of event ``n + leid``, on a new connection)
    answered 200 with ``replay`` events from event ``n + 1 + skip`` (5: a silent resume
    jump over five events; below 0: events the client had): the replay is judged against
    a long earlier stream (issue 16), or is itself long. ``closing``: ``bd`` ends the
    stream with a ``backpressure-disconnect`` for event n; ``declared`` with a
    ``stream-gap`` for the ``skip`` events the replay leaves out."""
    payload = b'{"jsonrpc":"2.0","method":"notifications/message"}'

    def id_of(e: int) -> bytes:
        return opaque_id(e) if opaque else b"%d" % e

    def events() -> Iterable[bytes]:
        for e in range(1, n + 1):
            yield b"id: %s\ndata: %s\n\n" % (id_of(e), payload)
        if closing == b"bd":
            yield b'event: backpressure-disconnect\ndata: {"last_written_id":"%s"}\n\n' % id_of(n)
        elif closing == b"declared":
            yield b'event: stream-gap\ndata: {"first":"%s","last":"%s"}\n\n' % (
                id_of(n + 1),
                id_of(n + skip),
            )

    _one_stream(w, events(), chunked=True, hang_up=True)
    flow = Flow(w, client_ip(1), 40_001, isn=2_000)
    session = session_of(1)
    flow.handshake()
    flow.data(True, resume_request(id_of(n + leid), session))
    first = n + 1 + skip
    body = b"".join(
        chunk(b"id: %s\ndata: %s\n\n" % (id_of(e), payload)) for e in range(first, first + replay)
    )
    flow.data(False, response_head(session) + body + b"0\r\n\r\n")
    flow.close()


def big_event(w: PcapWriter, size: int) -> None:
    """A chunked stream 1, 2, 3, then event 4 whose one data line is ``size`` bytes, then
    5 and 6: an event over the ``event_bytes`` cap when ``size`` is."""
    flow = Flow(w, client_ip(2), 40_500)
    session = session_of(2)
    flow.handshake()
    flow.data(True, post(session))
    flow.data(False, response_head(session))
    for n in (1, 2, 3):
        flow.send(False, PSH | ACK, chunk(event(n)))
    body = b"id: 4\ndata: " + b"y" * size + b"\n\n"
    for at in range(0, len(body), 60_000):
        flow.data(False, chunk(body[at : at + 60_000]), ack_every=64)
    for n in (5, 6):
        flow.send(False, PSH | ACK, chunk(event(n)))
    flow.send(False, PSH | ACK, b"0\r\n\r\n")
    flow.send(True, ACK)
    flow.close()


# -- decompression bombs -------------------------------------------------------------------

BOMB_FILL = b": " + b"z" * 1021 + b"\n"  # a 1 KiB SSE comment line, endlessly repeated


def bomb_body(coding: str, decoded: int) -> bytes:
    """An event stream (two events, then ``decoded`` bytes of comment lines) coded with
    ``coding`` (``gzip``, ``deflate``, ``br``, ``zstd``, or several, comma-separated, in the
    order applied), written without ever holding the decoded bytes."""
    head = event(1) + event(2)
    data = _stream_coded(head, decoded, coding.split(",")[0].strip())
    for later in coding.split(",")[1:]:
        data = _code_all(data, later.strip())
    return data


_FILL_BLOCK = BOMB_FILL * 1024  # 1 MiB


def _stream_coded(head: bytes, decoded: int, coding: str) -> bytes:
    blocks = decoded // len(_FILL_BLOCK)
    if coding in ("gzip", "deflate"):
        wbits = 16 + zlib.MAX_WBITS if coding == "gzip" else zlib.MAX_WBITS
        z = zlib.compressobj(9, zlib.DEFLATED, wbits)
        parts = [z.compress(head)]
        parts += [z.compress(_FILL_BLOCK) for _ in range(blocks)]
        return b"".join(parts) + z.flush()
    if coding == "br":
        b = brotli.Compressor(quality=5)
        parts = [b.process(head)]
        parts += [b.process(_FILL_BLOCK) for _ in range(blocks)]
        return b"".join(parts) + b.finish()
    if coding == "zstd":
        c = zstandard.ZstdCompressor(level=3).compressobj()
        parts = [c.compress(head)]
        parts += [c.compress(_FILL_BLOCK) for _ in range(blocks)]
        return b"".join(parts) + c.flush()
    raise ValueError(f"unknown coding {coding!r}")


def _code_all(data: bytes, coding: str) -> bytes:
    if coding == "gzip":
        return gzip.compress(data, 9, mtime=0)
    if coding == "deflate":
        return zlib.compress(data, 9)
    if coding == "br":
        return brotli.compress(data)
    if coding == "zstd":
        return zstandard.ZstdCompressor().compress(data)
    raise ValueError(f"unknown coding {coding!r}")


def bomb(w: PcapWriter, coding: str, decoded: int, framing: str = "chunked") -> None:
    """One event-stream response whose body, ``coding``-coded, decodes to about ``decoded``
    bytes; ``framing``: ``chunked``, ``length`` (Content-Length) or ``close``."""
    flow = Flow(w, client_ip(3), 41_000)
    session = session_of(3)
    flow.handshake()
    flow.data(True, post(session))
    body = bomb_body(coding, decoded)
    extra = b"Content-Encoding: " + coding.encode() + b"\r\n"
    if framing == "length":
        extra += b"Content-Length: %d\r\n" % len(body)
    elif framing == "chunked":
        body = b"".join(chunk(body[i : i + 4000]) for i in range(0, len(body), 4000))
        body += b"0\r\n\r\n"
    head = response_head(session, extra, chunked=framing == "chunked")
    flow.data(False, head + body, ack_every=64)
    flow.close()


# -- whole captures ------------------------------------------------------------------------


def write(path: Path, build: Callable[[PcapWriter], None]) -> int:
    """A capture holding :func:`ordinary_gap` first, then what ``build`` writes; returns
    the number of frames."""
    with PcapWriter(path) as w:
        ordinary_gap(w)
        build(w)
        return w.frames


KINDS: dict[str, Callable[[PcapWriter, int], None]] = {
    "syn-flood": lambda w, n: syn_flood(w, n),
    "syn-plus-one": lambda w, n: syn_flood(w, n, payload=True),
    "streams": lambda w, n: concurrent_streams(w, n),
    "streams-one-session": lambda w, n: concurrent_streams(w, n, sessions=1),
    "streams-open": lambda w, n: concurrent_streams(w, n, close=False),
    "streams-inferred": lambda w, n: concurrent_streams(w, n, sessions=-1, one_client=True),
    "streams-midstream": lambda w, n: concurrent_streams(w, n, handshake=False),
    "events": lambda w, n: long_stream(w, n),
    "events-close": lambda w, n: long_stream(w, n, chunked=False),
    "events-gap": lambda w, n: long_stream(w, n, gap=True),
    "events-every-jump": lambda w, n: long_stream(w, n, step=2),
    "events-lost": lambda w, n: long_stream(w, n, lose=n // 2),
    "events-resume": lambda w, n: long_stream_resume(w, n),
    "events-resume-jump": lambda w, n: long_stream_resume(w, n, skip=5),
    "events-resume-opaque": lambda w, n: long_stream_resume(w, n, -4, -10, opaque=True),
    # A short stream, then a resume answered with n events after a silent jump of five.
    "events-long-replay": lambda w, n: long_stream_resume(w, 20, 5, replay=n),
    "events-long-replay-opaque": lambda w, n: long_stream_resume(w, 20, 5, opaque=True, replay=n),
    "events-zero-window": lambda w, n: long_stream(w, n, zero_window=n // 2),
    "signals": lambda w, n: signal_flood(w, n),
    "signals-stream-gap": lambda w, n: signal_flood(w, n, stream_gap=True),
    "big-event": lambda w, n: big_event(w, n),
    "gzip-bomb": lambda w, n: bomb(w, "gzip", n),
    "br-bomb": lambda w, n: bomb(w, "br", n),
    "zstd-bomb": lambda w, n: bomb(w, "zstd", n),
    "gzip3-bomb": lambda w, n: bomb(w, "gzip, gzip, gzip", n),
}


# -- event logs -----------------------------------------------------------------------------


def _log_records(
    session: str,
    request: str,
    ids: Iterable[int],
    t0: float,
    id_of: Callable[[int], bytes] = b"%d".__mod__,
    unwritten: range = range(0),
) -> Iterable[bytes]:
    """An event log's ``emitted`` and ``written`` records of one stream, one ID after the
    other, 10 µs apart (``id_of``: each ID as written; those in ``unwritten`` emitted only)."""
    head = b'{"session":"%s","stream":"stream-1","request":"%s",' % (
        session.encode(),
        request.encode(),
    )
    for k, n in enumerate(ids):
        for kind in (b"emitted", b"written") if n not in unwritten else (b"emitted",):
            yield head + b'"ts":%.5f,"event_id":"%s","kind":"%s"}\n' % (
                t0 + k * 1e-5,
                id_of(n),
                kind,
            )


ORDINARY_LOG_SESSION = "ordinary-gap-0001"


def write_event_log(path: Path, n: int, gap: bool = True, opaque: bool = False) -> int:
    """An event log (JSON lines) holding the ordinary gap (a stream that writes 1-7 then
    13-20: 8-12 emitted, never written, nor evicted, nor signalled), then one stream of
    ``n`` events whose IDs jump by 5 halfway (unless not ``gap``), every one emitted and
    written (issue 16: whether the client left a long stream with events pending is told
    from its last written event, not from every one); ``opaque``: its IDs are opaque, and
    the five events after the middle one are emitted, never written (a gap told by the
    producer's order). Returns the number of records."""
    count = 0
    with open(path, "wb") as out:
        ordinary = [*range(1, 21)]
        written = set(ORDINARY_IDS)
        for rec in _log_records(ORDINARY_LOG_SESSION, "x1", ordinary, START_S):
            if (
                b'"written"' in rec
                and int(rec.split(b'"event_id":"')[1].split(b'"')[0]) not in written
            ):
                continue
            out.write(rec)
            count += 1
        ids = (e + 5 * (gap and not opaque and e > n // 2) for e in range(1, n + 1))
        records = (
            _log_records(
                "hostile-long-0001",
                "x2",
                ids,
                START_S + 1,
                opaque_id,
                range(n // 2 + 1, n // 2 + 6),
            )
            if opaque
            else _log_records("hostile-long-0001", "x2", ids, START_S + 1)
        )
        buf: list[bytes] = []
        for rec in records:
            buf.append(rec)
            if len(buf) >= 65_536:
                out.write(b"".join(buf))
                count += len(buf)
                buf.clear()
        out.write(b"".join(buf))
        count += len(buf)
    return count


def write_logged_capture(folder: Path, n: int) -> int:
    """A capture (``capture.pcap``: the ordinary gap, then :func:`long_stream` of ``n``
    events) and the server's event log of that long stream (``events.jsonl``), which the
    scan joins (issue 16: a stream both hold was read as an object per event on each
    side). The two disagree: the log never records writing three events the capture
    shows (emitted only, halfway) and writes three past the capture's last. Returns the
    number of frames."""
    folder.mkdir(parents=True, exist_ok=True)
    frames = write(folder / "capture.pcap", lambda w: long_stream(w, n))
    half = n // 2
    records = _log_records(
        session_of(1).decode(), "x1", range(1, n + 4), START_S, unwritten=range(half, half + 3)
    )
    with open(folder / "events.jsonl", "wb") as out:
        buf: list[bytes] = []
        for rec in records:
            buf.append(rec)
            if len(buf) >= 65_536:
                out.write(b"".join(buf))
                buf.clear()
        out.write(b"".join(buf))
    return frames


# Kinds written as a folder of a capture and an event log, scanned together.
PAIR_KINDS: dict[str, Callable[[Path, int], int]] = {"events-logged": write_logged_capture}

LOG_KINDS: dict[str, Callable[[Path, int], int]] = {
    "log-events": lambda path, n: write_event_log(path, n, gap=False),
    "log-events-gap": write_event_log,
    "log-events-opaque": lambda path, n: write_event_log(path, n, opaque=True),
}


def main(argv: Iterable[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("kind", choices=sorted([*KINDS, *LOG_KINDS, *PAIR_KINDS]))
    parser.add_argument("n", type=int, help="connections, streams, events or decoded bytes")
    parser.add_argument("out", type=Path)
    args = parser.parse_args(list(argv) if argv is not None else None)
    if args.kind in LOG_KINDS:
        print(f"{args.out}: {LOG_KINDS[args.kind](args.out, args.n)} records")
        return
    if args.kind in PAIR_KINDS:  # a folder
        print(f"{args.out}: {PAIR_KINDS[args.kind](args.out, args.n)} frames")
        return
    frames = write(args.out, lambda w: KINDS[args.kind](w, args.n))
    print(f"{args.out}: {frames} frames")


if __name__ == "__main__":
    main()
