"""The decrypted route of the fast path: a candidate whose client opens with a TLS handshake
is decrypted here, over its joined ciphertext, and its plaintext replaces the ciphertext in
the batch's buffers, so HTTP/1.1 framing and the columnar SSE parser read it as they read
a plaintext connection.

A connection stays on the route only where the exact path (``_ConnectionAnalyzer`` with a
:class:`~sse_forensics.reassembly.tls.TLSSession`) would read every byte of it: the session's
keys found, every record decrypted (no gap, no problem, no record cut at the end). Its
application protocol is decided as the exact path decides it (ALPN, else the client's first
bytes): HTTP/1.1 is framed like plaintext, HTTP/2 read by :mod:`.h2`. Anything else is a
fallback reason: the exact path reads it and reports what it could not.

The same :class:`TLSSession` decrypts on both paths; here it is fed whole runs of one
direction (the segments between two of the other direction's, in capture order: the
handshake needs the interleaving, the records do not need the frames). Where each plaintext
byte came from is computed afterwards from the record's stream offset
(:attr:`TLSData.offset`): it is cited to the frame that carried its ciphertext, as
:func:`~sse_forensics.reassembly.receive_buffer.spread` cites it on the exact path. The frame
that completed its record (:attr:`TLSData.end`) is when the exact path's HTTP parser saw the
byte: kept as ``deliver`` for the request-before-response check.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sse_forensics.provenance import Origin
from sse_forensics.reassembly.capture import foreign_protocol
from sse_forensics.reassembly.h2 import PREFACE as H2_PREFACE
from sse_forensics.reassembly.stream import Direction
from sse_forensics.reassembly.tls import TLSData, TLSInfo, TLSKeys, TLSSession

R_TLS_UNREAD = "tls: not every record decrypted (read by the exact path)"
R_TLS_EARLY = "tls: 0-RTT early data (read by the exact path)"

FEED_BYTES = 1 << 16
"""Ciphertext handed to the record layer at a time (bounds its receive buffer)."""

_NOWHERE = Origin("", 0, 0.0)  # the record layer's origins are not used on this route


@dataclass(slots=True)
class Side:
    """One direction of a batch: its connections' bytes joined, where each segment starts
    in them, the segment's row, and the row at which its bytes reach HTTP (``deliver``: the
    segment's own row unless it is decrypted plaintext)."""

    buf: bytes
    start: np.ndarray
    rows: np.ndarray
    deliver: np.ndarray

    def segments(self, lo: int, hi: int) -> tuple[int, int]:
        """Segments ``[k0, k1)`` holding bytes ``[lo, hi)``."""
        if hi <= lo:
            k = int(np.searchsorted(self.start, lo, side="left"))
            return k, k
        k0 = int(np.searchsorted(self.start, lo, side="right")) - 1
        k1 = int(np.searchsorted(self.start, hi, side="left"))
        return k0, k1


@dataclass(slots=True)
class Decrypted:
    """A connection on the route: its TLS record of what was seen, its application
    protocol, and its plaintext per direction (bytes, segment starts, rows, deliver rows)."""

    info: TLSInfo
    application: str
    client: tuple[bytes, np.ndarray, np.ndarray, np.ndarray]
    server: tuple[bytes, np.ndarray, np.ndarray, np.ndarray]


def sniff(side: Side, lo: int, hi: int) -> str | None:
    """What the connection's client bytes ``[lo, hi)`` open as, as the exact path sniffs it
    from their first segment: ``"TLS"``, ``"HTTP/2"`` or ``None``."""
    if hi <= lo:
        return None
    k0, _k1 = side.segments(lo, hi)
    end = int(side.start[k0 + 1]) if k0 + 1 < len(side.start) else len(side.buf)
    return foreign_protocol(side.buf[lo : min(end, hi)])


def decrypt_connection(
    keys: TLSKeys,
    client: Side,
    c_range: tuple[int, int],
    server: Side,
    s_range: tuple[int, int],
) -> Decrypted | str:
    """The plaintext of one TLS connection, or why it leaves the route."""
    session = TLSSession(keys.lookup, keys.why_none)
    sides: dict[Direction, tuple[Side, int, int]] = {
        "client": (client, *c_range),
        "server": (server, *s_range),
    }
    spans = {name: side.segments(lo, hi) for name, (side, lo, hi) in sides.items()}
    # Runs of one direction in capture order: the record layer's interleaving.
    c0, c1 = spans["client"]
    s0, s1 = spans["server"]
    rows = np.concatenate([client.rows[c0:c1], server.rows[s0:s1]])
    is_server = np.concatenate([np.zeros(c1 - c0, dtype=bool), np.ones(s1 - s0, dtype=bool)])
    order = np.argsort(rows, kind="stable")
    kinds = is_server[order]
    at = np.concatenate([[0], np.flatnonzero(np.diff(kinds.astype(np.int8))) + 1, [len(kinds)]])
    done = {"client": 0, "server": 0}  # segments of each direction fed so far
    plain: dict[str, list[TLSData]] = {"client": [], "server": []}
    application: str | None = None
    for a, b in zip(at[:-1].tolist(), at[1:].tolist(), strict=True):
        name: Direction = "server" if kinds[a] else "client"
        side, lo, hi = sides[name]
        k0 = spans[name][0] + done[name]
        k1 = k0 + (b - a)
        done[name] += b - a
        first = max(int(side.start[k0]), lo)
        last = int(side.start[k1]) if k1 < len(side.start) else len(side.buf)
        last = min(last, hi)
        for x in range(first, last, FEED_BYTES):
            events = session.feed(name, side.buf[x : min(x + FEED_BYTES, last)], _NOWHERE)
            for ev in events:
                if not isinstance(ev, TLSData):
                    return R_TLS_UNREAD
                plain[name].append(ev)
            if application is None and (plain["client"] or plain["server"]):
                application = _application(session.info, plain["client"])
    if session.end():
        return R_TLS_UNREAD
    info = session.info
    if not info.key_found or info.undecryptable_bytes:
        return R_TLS_UNREAD
    if info.early_data:  # its records reach HTTP when the server's answer is read
        return R_TLS_EARLY
    application = application or _application(info, plain["client"]) or "http/1.1"
    out = {}
    for name, (side, lo, _hi) in sides.items():
        k0, k1 = spans[name]
        out[name] = _plaintext(plain[name], side.start[k0:k1] - lo, side.rows[k0:k1])
    return Decrypted(info, application, out["client"], out["server"])


def _application(info: TLSInfo, client: list[TLSData]) -> str | None:
    """The exact path's choice once application data flows: ALPN, else the client's first
    decrypted bytes (``None``: not known until the client sends)."""
    if info.alpn in ("h2", "http/1.1"):
        return info.alpn
    if not client:
        return None
    return "h2" if _bytes(client[0]).startswith(H2_PREFACE[:16]) else "http/1.1"


def _bytes(ev: TLSData) -> bytes:
    pieces = ev.pieces
    return pieces[0][0] if len(pieces) == 1 else b"".join(p for p, _ in pieces)


def _plaintext(
    records: list[TLSData], seg_start: np.ndarray, seg_rows: np.ndarray
) -> tuple[bytes, np.ndarray, np.ndarray, np.ndarray]:
    """One direction's plaintext as segments: a record's bytes split where its ciphertext
    crosses from one frame to the next (``seg_start``: stream offsets of the ciphertext
    segments, ``seg_rows`` their rows)."""
    empty = np.zeros(0, dtype=np.int64)
    if not records:
        return b"", empty, empty, empty
    data = [_bytes(ev) for ev in records]
    length = np.fromiter((len(d) for d in data), dtype=np.int64, count=len(data))
    cipher = np.fromiter((ev.offset for ev in records), dtype=np.int64, count=len(records))
    end = np.fromiter((ev.end for ev in records), dtype=np.int64, count=len(records))
    plain_at = np.zeros(len(records), dtype=np.int64)
    np.cumsum(length[:-1], out=plain_at[1:])
    k0 = np.searchsorted(seg_start, cipher, side="right") - 1
    k1 = np.searchsorted(seg_start, cipher + length - 1, side="right") - 1
    count = k1 - k0 + 1
    rec = np.repeat(np.arange(len(records)), count)
    first_piece = np.repeat(np.cumsum(count) - count, count)
    k = k0[rec] + (np.arange(len(rec)) - first_piece)
    start = plain_at[rec] + np.maximum(seg_start[k] - cipher[rec], 0)
    deliver = seg_rows[np.searchsorted(seg_start, end - 1, side="right") - 1]
    return b"".join(data), start, seg_rows[k], deliver[rec]


def splice(
    keys: TLSKeys,
    client: Side,
    server: Side,
    ranges: list[tuple[int, int, int, int]],
) -> tuple[Side, Side, list[tuple[int, int, int, int]], dict[int, Decrypted | str]]:
    """The batch's sides with each TLS connection's ciphertext replaced by its plaintext
    (``ranges``: each connection's ``(c_lo, c_hi, s_lo, s_hi)``), the new ranges, and per
    TLS connection (by position in ``ranges``) its :class:`Decrypted` or fallback reason.
    Without a TLS connection the sides come back as they are."""
    found = [i for i, (lo, hi, _a, _b) in enumerate(ranges) if sniff(client, lo, hi) == "TLS"]
    if not found:
        return client, server, ranges, {}
    results: dict[int, Decrypted | str] = {}
    for i in found:
        c_lo, c_hi, s_lo, s_hi = ranges[i]
        results[i] = decrypt_connection(keys, client, (c_lo, c_hi), server, (s_lo, s_hi))
    new_ranges: list[tuple[int, int, int, int]] = []
    parts: dict[str, list[tuple[bytes, np.ndarray, np.ndarray, np.ndarray]]] = {
        "client": [],
        "server": [],
    }
    size = {"client": 0, "server": 0}
    for i, rng in enumerate(ranges):
        got = results.get(i)
        bounds = []
        for name, side, lo, hi in (
            ("client", client, rng[0], rng[1]),
            ("server", server, rng[2], rng[3]),
        ):
            if isinstance(got, Decrypted):
                buf, start, rows, deliver = got.client if name == "client" else got.server
            else:
                k0, k1 = side.segments(lo, hi)
                buf = side.buf[lo:hi]
                start = side.start[k0:k1] - lo
                rows, deliver = side.rows[k0:k1], side.deliver[k0:k1]
            parts[name].append((buf, start + size[name], rows, deliver))
            bounds.append((size[name], size[name] + len(buf)))
            size[name] += len(buf)
        new_ranges.append((*bounds[0], *bounds[1]))
    return _side(parts["client"]), _side(parts["server"]), new_ranges, results


def _side(parts: list[tuple[bytes, np.ndarray, np.ndarray, np.ndarray]]) -> Side:
    empty = np.zeros(0, dtype=np.int64)

    def cat(k: int) -> np.ndarray:
        return np.concatenate([p[k] for p in parts]).astype(np.int64) if parts else empty

    return Side(b"".join(p[0] for p in parts), cat(1), cat(2), cat(3))


__all__ = ["R_TLS_EARLY", "R_TLS_UNREAD", "Decrypted", "Side", "sniff", "splice"]
