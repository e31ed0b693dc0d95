"""The output of TCP reassembly for one direction of a connection: in-order data pieces
and the spans the capture does not hold."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from sse_forensics.provenance import Origin

Direction = Literal["client", "server"]
"""``client`` = bytes sent by the client (requests); ``server`` = responses."""

MissingReason = Literal[
    "hole", "snaplen", "acked-unseen", "mid-stream", "undecryptable", "cap", "inconsistent"
]
"""``undecryptable``: TLS records the capture holds but that could not be decrypted (no key,
or no record boundary after a hole): to the layers above, bytes they do not have.
``cap``: bytes of a body a cap of :mod:`sse_forensics.limits` stopped reading (the rest of a
body past ``body_bytes``, an event over ``event_bytes``, a connection evicted by ``flows``).
``inconsistent``: bytes the capture holds twice with different contents (an inconsistent
retransmission or overlap): which copy the receiver kept cannot be known."""


@dataclass(slots=True)
class StreamData:
    """``data`` sits at ``offset`` (bytes since the first byte seen in this direction)."""

    offset: int
    data: bytes
    origin: Origin


@dataclass(slots=True)
class MissingSpan:
    """Bytes the capture does not hold: evidence for ``indeterminate``, never skipped.

    ``length`` is ``None`` when it cannot be known. ``after``/``before`` are the frames
    that bound the hole (``None`` at the edges of the capture).
    """

    direction: Direction
    offset: int
    length: int | None
    reason: MissingReason
    after: Origin | None = None
    before: Origin | None = None

    def describe(self) -> str:
        size = "unknown number of" if self.length is None else str(self.length)
        if self.reason == "undecryptable":
            return f"{size} {self.direction} bytes could not be decrypted (TLS)"
        if self.reason == "cap":
            return f"{size} {self.direction} bytes not read: a cap stopped the reading"
        if self.reason == "inconsistent":
            return (
                f"{size} {self.direction} bytes captured twice with different contents "
                "(inconsistent retransmission)"
            )
        return f"{size} {self.direction} bytes missing from the capture ({self.reason})"


INCONSISTENT_SHOWN = 16
"""Bytes of each version an :class:`Inconsistency` quotes."""


@dataclass(slots=True)
class Inconsistency:
    """Bytes the capture holds twice with different contents: a retransmission or an
    overlapping segment that disagrees with the first copy (Zeek's ``inconsistent
    retransmission`` weird, Suricata's stream overlap event). The reassembler keeps the first
    copy; the receiver may have kept the other (an attacker's way to make a monitor and an
    endpoint see different streams), so the stretch is evidence of nothing.

    ``offset``/``length``: the differing stretch (first to last differing byte) in the
    direction's stream; ``first``/``second``: the frames of the two copies (``first`` holds
    the first differing byte of the kept one); ``first_bytes``/``second_bytes``: up to
    :data:`INCONSISTENT_SHOWN` bytes of each from there.
    """

    direction: Direction
    offset: int
    length: int
    first: Origin
    second: Origin
    first_bytes: bytes
    second_bytes: bytes

    def describe(self) -> str:
        return (
            f"{self.direction} bytes {self.offset}-{self.offset + self.length - 1} differ "
            f"between frame {self.first.number} ({self.first_bytes!r}) and frame "
            f"{self.second.number} ({self.second_bytes!r})"
        )
