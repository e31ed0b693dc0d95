"""The fast reassembly path beside the exact one: conversations built by hand, and the
equivalence check between the two paths' results."""

from __future__ import annotations

import pickle
import random
import struct
from pathlib import Path
from typing import Any

import polars as pl

from sse_forensics.evidence.from_capture import CaptureEvidence
from sse_forensics.evidence.tables import ConnectionColumns, EventColumns, ExchangeColumns, concat
from sse_forensics.facts.config import AnalysisConfig
from sse_forensics.ingest.inputs import merged_frames
from sse_forensics.ingest.packet_index import index_captures
from sse_forensics.reassembly.capture import reassemble
from sse_forensics.reassembly.fast import combine, reassemble_fast
from sse_forensics.reassembly.fast.capture import tls_keys_for
from support.scripts import load_script

ROOT = Path(__file__).resolve().parents[2]


class _Rows:
    """A sink for either path: the batches it is given."""

    def __init__(self) -> None:
        self.batches: list[tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]] = []

    def add(self, conns: pl.DataFrame, exchanges: pl.DataFrame, events: pl.DataFrame) -> None:
        self.batches.append((conns, exchanges, events))

    def tables(self) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame, list[dict[str, Any]]]:
        conns = concat([b[0] for b in self.batches], ConnectionColumns).sort("conn_id")
        exchanges = concat([b[1] for b in self.batches], ExchangeColumns)
        events = concat([b[2] for b in self.batches], EventColumns)
        states = [_fields(pickle.loads(s)) for s in conns["state"].to_list()]
        return (
            conns.drop("state"),
            exchanges.sort("conn_id", "index"),
            events.sort("conn_id", "ex_index", "position"),
            states,
        )


_CONN_FIELDS = (
    "id",
    "client",
    "server",
    "community_id",
    "first",
    "last",
    "handshake_seen",
    "mid_stream",
    "fin",
    "rst",
    "rst_by",
    "missing",
    "packets",
    "tcp",
    "loss",
    "application",
    "tls",
)


def _fields(conn: Any) -> dict[str, Any]:
    return {name: getattr(conn, name) for name in _CONN_FIELDS}


def exact(paths: list[str], config: AnalysisConfig | None = None):
    config = config or AnalysisConfig()
    rows = _Rows()
    frames = merged_frames(paths)
    sink = CaptureEvidence(rows, config)  # type: ignore[arg-type]
    keys, _problems = tls_keys_for(config, frames.stats)
    result = reassemble(frames, frames.stats, sink=sink, tls_keys=keys)
    sink.flush()
    return result, rows


def fast(paths: list[str], shards: int = 1, config: AnalysisConfig | None = None):
    rows = _Rows()
    parts = []
    for k in range(shards):
        with index_captures(paths) as index:
            parts.append(
                reassemble_fast(index, rows.add, config or AnalysisConfig(), shard=(k, shards))
            )
    return (parts[0] if shards == 1 else combine(parts)), rows


def assert_equivalent(
    paths: list[str], shards: tuple[int, ...] = (1, 2), config: AnalysisConfig | None = None
):
    """The fast path equals the exact one on ``paths`` (with ``config``: TLS key logs);
    returns the unsharded fast result."""
    want, want_rows = exact(paths, config)
    want_tables = want_rows.tables()
    first = None
    for n in shards:
        got, got_rows = fast(paths, n, config)
        first = first or got
        where = f"{paths} with {n} shard(s)"
        assert got.frames == want.frames, where
        assert got.tcp_segments == want.tcp_segments, where
        assert got.errors == want.errors, where
        assert got.loss == want.loss, where
        assert [_fields(c) for c in got.connections] == [_fields(c) for c in want.connections], (
            where
        )
        got_tables = got_rows.tables()
        for name, a, b in zip(
            ("connections", "exchanges", "events"), want_tables[:3], got_tables[:3], strict=True
        ):
            if isinstance(a, pl.DataFrame):
                assert a.schema == b.schema, f"{where}: {name}"
                assert a.equals(b), f"{where}: {name} differ\n{_first_difference(a, b)}"
        assert want_tables[3] == got_tables[3], f"{where}: pickled connection states"
    return first


def _first_difference(a: pl.DataFrame, b: pl.DataFrame) -> str:
    if a.height != b.height:
        return f"{a.height} rows vs {b.height}"
    for col in a.columns:
        if not a[col].equals(b[col]):
            differ = (a[col] != b[col]).fill_null(True) | (a[col].is_null() != b[col].is_null())
            return f"column {col}:\n{a.filter(differ).head(3)}\n{b.filter(differ).head(3)}"
    return "?"


def make_capture_module():
    return load_script("benchmarks/make_capture.py", "make_capture")


FIN, SYN, RST, PSH, ACK = 0x01, 0x02, 0x04, 0x08, 0x10


SEQ_MOD = 1 << 32


class _Peer:
    def __init__(self, ip: bytes, port: int, isn: int) -> None:
        self.ip, self.port, self.nxt = ip, port, isn


class Conversation:
    """One TCP connection's frames, with the odd capture anomaly."""

    def __init__(self, rng: random.Random, n: int, port: int | None = None) -> None:
        self.rng = rng
        wraps = rng.random() < 0.2
        self.c = _Peer(bytes((10, 1, 0, n + 2)), port or 40000 + n, rng.getrandbits(32))
        isn = SEQ_MOD - rng.randint(1, 3000) if wraps else rng.getrandbits(32)
        self.s = _Peer(bytes((10, 1, 255, 1)), 8000, isn)
        self.frames: list[tuple[float, bytes]] = []  # (gap before it, frame)
        self.unacked = 0

    def send(self, client: bool, flags: int, payload: bytes = b"", **kw: Any) -> None:
        me, peer = (self.c, self.s) if client else (self.s, self.c)
        seq = kw.get("seq", me.nxt)
        ack = peer.nxt if flags & ACK else 0
        window = kw.get("window", 65535)
        options = kw.get("options", b"")
        tcp = struct.pack(
            "!HHIIBBHHH",
            me.port,
            peer.port,
            seq,
            ack,
            (5 + len(options) // 4) << 4,
            flags,
            window,
            0,
            0,
        )
        ip = struct.pack(
            "!BBHHHBBH4s4s",
            0x45,
            0,
            20 + len(tcp) + len(options) + len(payload),
            0,
            0x4000,
            64,
            6,
            0,
            me.ip,
            peer.ip,
        )
        eth = b"\x02\x00\x00\x00\x00\x01\x02\x00\x00\x00\x00\x02\x08\x00"
        self.frames.append((kw.get("gap", 0.0), eth + ip + tcp + options + payload))
        if "seq" not in kw:
            me.nxt = (me.nxt + len(payload) + (1 if flags & (SYN | FIN) else 0)) % SEQ_MOD

    def handshake(self) -> None:
        rng = self.rng
        if rng.random() < 0.05:
            return  # picked up mid-stream
        c_opt = b"\x01\x03\x03" + bytes([rng.randint(0, 9)]) if rng.random() < 0.5 else b""
        s_opt = b"\x01\x03\x03" + bytes([rng.randint(0, 9)]) if rng.random() < 0.5 else b""
        self.send(True, SYN, options=c_opt)
        self.send(False, SYN | ACK, options=s_opt)
        self.send(True, ACK)

    def stream(self, client: bool, data: bytes) -> None:
        """``data`` in random segments, ACKed by the peer now and then."""
        rng = self.rng
        pos = 0
        while pos < len(data):
            size = rng.choice([1, 7, 40, 300, 536, 1448, 1448])
            piece = data[pos : pos + size]
            pos += len(piece)
            gap = 1.6 if rng.random() < 0.03 else rng.uniform(1e-5, 2e-3)
            r = rng.random()
            me = self.c if client else self.s
            if r < 0.02:  # retransmission
                self.send(client, PSH | ACK, piece, gap=gap)
                self.send(client, PSH | ACK, piece, seq=(me.nxt - len(piece)) % SEQ_MOD)
            elif r < 0.04 and pos > len(piece) + 3:  # overlaps bytes already sent
                back = rng.randint(1, 3)
                start = pos - len(piece) - back
                self.send(client, PSH | ACK, data[start:pos], seq=(me.nxt - back) % SEQ_MOD)
                me.nxt = (me.nxt + len(piece)) % SEQ_MOD
            elif r < 0.045:  # lost: the peer acknowledges bytes the capture lacks
                me.nxt = (me.nxt + len(piece)) % SEQ_MOD
            elif r < 0.05 and pos < len(data):  # the next segment overtakes this one
                nxt = data[pos : pos + size]
                self.send(client, PSH | ACK, nxt, seq=(me.nxt + len(piece)) % SEQ_MOD)
                self.send(client, PSH | ACK, piece, gap=gap)
                me.nxt = (me.nxt + len(nxt)) % SEQ_MOD
                pos += len(nxt)
            else:
                self.send(client, PSH | ACK, piece, gap=gap)
            self.unacked += 1
            if self.unacked >= rng.choice([1, 2, 3]):
                window = 0 if rng.random() < 0.02 else 65535
                self.send(not client, ACK, window=window, gap=rng.uniform(1e-5, 1e-3))
                self.unacked = 0

    def close(self) -> None:
        rng = self.rng
        r = rng.random()
        if r < 0.45:
            self.send(True, FIN | ACK)
            self.send(False, FIN | ACK)
            self.send(True, ACK)
        elif r < 0.55:
            self.send(False, FIN | ACK)
            self.send(True, FIN | ACK)
            if rng.random() < 0.5:
                self.send(False, ACK)
        elif r < 0.7:
            pass  # the capture ends first
        elif r < 0.8:
            self.send(False, FIN | ACK)
        elif r < 0.84:
            self.send(True, RST | ACK)
        elif r < 0.86:  # FIN and RST in one segment
            self.send(rng.random() < 0.5, FIN | RST | ACK)
        elif r < 0.88:  # an RST far from the sender's bytes: ignored; then a normal close
            far = (self.s.nxt + (1 << 30)) % SEQ_MOD
            if rng.random() < 0.5:
                self.send(False, RST | ACK, seq=far)
                self.send(True, FIN | ACK)
            else:  # ... even when it carries the FIN that would have ended the connection
                self.send(True, FIN | ACK)
                self.send(False, FIN | RST | ACK, seq=far)
            self.send(False, FIN | ACK)
        elif r < 0.9:  # closed, then a late RST and a stray segment
            self.send(True, FIN | ACK)
            self.send(False, FIN | ACK)
            self.send(True, RST | ACK, gap=0.5)
            self.send(False, PSH | ACK, b"late")
        else:
            self.send(True, FIN | ACK, gap=1.5)


def pcap_records(path: Path) -> tuple[bytes, list[bytes]]:
    """A little-endian classic pcap file (the generator's) as its 24-byte file header and
    its records (16-byte record header and frame), to cut into a ring of files."""
    content = path.read_bytes()
    header, offset, records = content[:24], 24, []
    while offset < len(content):
        caplen = struct.unpack_from("<I", content, offset + 8)[0]
        records.append(content[offset : offset + 16 + caplen])
        offset += 16 + caplen
    return header, records
