"""Capture-loss accounting, after Zeek's ``capture_loss`` (policy/misc/capture-loss.zeek):
how much of what the endpoints exchanged the capture does not hold, per direction of a
connection and for the whole capture.

Zeek counts "ACKed unseen" bytes — the peer acknowledged them, so they were on the wire,
but the capture never saw them. Here every :class:`~.stream.MissingSpan` is counted by its
reason: ``acked-unseen``, ``hole`` (never filled by the end of the capture or past the
reassembly buffer), ``snaplen`` (cut by the capture's snap length); a ``mid-stream`` pickup
has no length and is only flagged. pcapng Interface Statistics Blocks add what the capturing
interface itself admitted dropping (``isb_ifdrop``, ``isb_osdrop``).

Beside loss, what the capture holds in two versions: inconsistent retransmissions (bytes
captured twice with different contents, :class:`~.stream.Inconsistency`), counted apart, and
connections evicted from the flow table (``flows`` cap, :mod:`sse_forensics.limits`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sse_forensics.reassembly.stream import Direction, MissingSpan


@dataclass(slots=True)
class DirectionLoss:
    """Loss in one direction of one connection. ``bytes_seen``: stream bytes captured."""

    bytes_seen: int = 0
    acked_unseen: int = 0  # bytes
    acked_unseen_spans: int = 0
    holes: int = 0
    hole_bytes: int = 0
    snaplen_bytes: int = 0
    mid_stream: bool = False  # picked up without its start: bytes before it unknown
    inconsistent: int = 0  # retransmissions or overlaps that differ from the first copy
    inconsistent_bytes: int = 0  # bytes of their differing stretches

    def count(self, span: MissingSpan) -> None:
        length = span.length or 0
        reason = span.reason
        if reason == "acked-unseen":
            self.acked_unseen += length
            self.acked_unseen_spans += 1
        elif reason == "hole":
            self.holes += 1
            self.hole_bytes += length
        elif reason == "snaplen":
            self.snaplen_bytes += length
        else:
            self.mid_stream = True

    @property
    def missing_bytes(self) -> int:
        return self.acked_unseen + self.hole_bytes + self.snaplen_bytes


@dataclass(slots=True)
class CaptureLoss:
    """Totals over a capture, for the scan's JSON output.

    ``interface_drops``/``os_drops``: packets the capturing interfaces reported dropped
    (pcapng ISB counters, summed over files and interfaces; 0 when no ISB was written).
    ``connections_with_loss``: connections with at least one missing byte (mid-stream
    pickups are not loss: the capture simply started later).
    """

    bytes_seen: int = 0
    acked_unseen: int = 0
    acked_unseen_spans: int = 0
    holes: int = 0
    hole_bytes: int = 0
    snaplen_bytes: int = 0
    mid_stream_directions: int = 0
    connections_with_loss: int = 0
    inconsistent_retransmissions: int = 0
    inconsistent_bytes: int = 0
    connections_with_inconsistencies: int = 0
    evicted_connections: int = 0  # evicted from the flow table (flows cap) while open
    interface_drops: int = 0
    os_drops: int = 0
    per_file_drops: dict[str, int] = field(default_factory=dict)

    @property
    def missing_bytes(self) -> int:
        return self.acked_unseen + self.hole_bytes + self.snaplen_bytes

    @property
    def percent_lost(self) -> float:
        """Missing bytes as a share of all stream bytes (seen + missing), like Zeek's
        ``percent_lost`` but by bytes rather than ACK events."""
        total = self.bytes_seen + self.missing_bytes
        return 100.0 * self.missing_bytes / total if total else 0.0

    def add_connection(self, directions: dict[Direction, DirectionLoss]) -> None:
        lost = False
        inconsistent = False
        for loss in directions.values():
            self.inconsistent_retransmissions += loss.inconsistent
            self.inconsistent_bytes += loss.inconsistent_bytes
            inconsistent = inconsistent or loss.inconsistent > 0
            self.bytes_seen += loss.bytes_seen
            self.acked_unseen += loss.acked_unseen
            self.acked_unseen_spans += loss.acked_unseen_spans
            self.holes += loss.holes
            self.hole_bytes += loss.hole_bytes
            self.snaplen_bytes += loss.snaplen_bytes
            self.mid_stream_directions += loss.mid_stream
            lost = lost or loss.missing_bytes > 0
        self.connections_with_loss += lost
        self.connections_with_inconsistencies += inconsistent

    def merge(self, other: CaptureLoss) -> None:
        """Add ``other``'s totals (another shard's connections; its file drops too)."""
        for name in (
            "bytes_seen",
            "acked_unseen",
            "acked_unseen_spans",
            "holes",
            "hole_bytes",
            "snaplen_bytes",
            "mid_stream_directions",
            "connections_with_loss",
            "inconsistent_retransmissions",
            "inconsistent_bytes",
            "connections_with_inconsistencies",
            "evicted_connections",
            "interface_drops",
            "os_drops",
        ):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.per_file_drops.update(other.per_file_drops)

    def as_dict(self) -> dict[str, object]:
        return {
            "bytes_seen": self.bytes_seen,
            "missing_bytes": self.missing_bytes,
            "percent_lost": round(self.percent_lost, 6),
            "acked_unseen": self.acked_unseen,
            "acked_unseen_spans": self.acked_unseen_spans,
            "holes": self.holes,
            "hole_bytes": self.hole_bytes,
            "snaplen_bytes": self.snaplen_bytes,
            "mid_stream_directions": self.mid_stream_directions,
            "connections_with_loss": self.connections_with_loss,
            "inconsistent_retransmissions": self.inconsistent_retransmissions,
            "inconsistent_bytes": self.inconsistent_bytes,
            "connections_with_inconsistencies": self.connections_with_inconsistencies,
            "evicted_connections": self.evicted_connections,
            "interface_drops": self.interface_drops,
            "os_drops": self.os_drops,
            "per_file_drops": dict(self.per_file_drops),
        }
