"""TCP state of one connection, read the way Wireshark's expert analysis reads it
(``tcp.analysis.*``): receive windows, zero-window and window-full periods, probes,
keep-alives, FIN/RST, and the sender's stalls. Sans-I/O: segments in, plain records out.

Sequence arithmetic is modulo 2**32 (RFC 9293 §3.4; :mod:`.seq`): "a after b" means
``0 < a - b < 2**31``.

Window scale (RFC 7323 §2.2-2.3): the shift a side applies to the windows it advertises is
the one it offered in its SYN, and only when *both* SYNs carried the option; windows in SYN
segments are never scaled. When either SYN was not captured the shift is unknown (``None``):
zero windows are still exact (0 scaled is 0), but window-full needs the window in bytes and
is not judged.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from sse_forensics.ingest.packets import TCP_ACK, TCP_FIN, TCP_RST, TCP_SYN, TCPSegment
from sse_forensics.provenance import Origin
from sse_forensics.reassembly.seq import seq_add, seq_after
from sse_forensics.reassembly.stream import Direction

TCPOPT_EOL = 0
TCPOPT_NOP = 1
TCPOPT_WSCALE = 3  # RFC 7323 §2.2: kind 3, length 3, shift.cnt
MAX_WINDOW_SHIFT = 14  # RFC 7323 §2.3: a larger shift is treated as 14

STALL_SECONDS = 1.0
"""A sender silent this long with work it could not finish is stalled (see :class:`Stall`).
One second is the RFC 6298 §2.4 minimum retransmission timeout: a healthy sender with bytes
unacknowledged retransmits within it."""

WindowKind = Literal["zero-window", "window-full"]
NoteKind = Literal["zero-window-probe", "keep-alive", "fin", "rst"]
StallReason = Literal["zero-window", "window-full", "unacknowledged"]


def window_scale_offer(options: bytes) -> int | None:
    """The shift count of a Window Scale option in raw TCP ``options``, else None."""
    pos, end = 0, len(options)
    while pos < end:
        kind = options[pos]
        if kind == TCPOPT_EOL:
            return None
        if kind == TCPOPT_NOP:
            pos += 1
            continue
        if pos + 1 >= end:
            return None
        length = options[pos + 1]
        if length < 2:
            return None  # malformed: the option list cannot be walked further
        if kind == TCPOPT_WSCALE and length == 3 and pos + 2 < end:
            return min(options[pos + 2], MAX_WINDOW_SHIFT)
        pos += length
    return None


@dataclass(slots=True)
class WindowPeriod:
    """A period in which ``receiver`` would take no more data.

    ``zero-window``: from the first segment of ``receiver`` advertising a window of 0 to the
    first one advertising more (``end``; None if the capture ends first).
    ``window-full``: from a data segment of the sender that reached the right edge of the
    receiver's advertised window (``tcp.analysis.window_full``: seq + len = ack + window) to
    the first segment of ``receiver`` whose ack + window lies beyond what the sender had sent.
    ``probes``: zero-window probes the sender sent during the period.
    """

    receiver: Direction
    kind: WindowKind
    start: Origin
    end: Origin | None = None
    probes: int = 0


@dataclass(frozen=True, slots=True)
class TCPNote:
    """One segment worth a note (Wireshark expert info).

    ``zero-window-probe``: while the peer's window was 0, one byte at the next sequence
    number, or a bare segment at next-1 (Linux probes that way). ``keep-alive``: otherwise a
    segment of at most one byte at next-1 (RFC 9293 §3.8.4). ``fin``/``rst``: the first FIN
    and the first RST of ``direction``.
    """

    kind: NoteKind
    direction: Direction
    origin: Origin


@dataclass(slots=True)
class Stall:
    """``sender`` sent no payload for at least :data:`STALL_SECONDS` while it could not
    finish: measured from its last payload segment (``start``), the state
    :data:`STALL_SECONDS` later had bytes of it unacknowledged (``unacknowledged``: it is
    waiting for a retransmission timeout or its peer), or the peer's window zero or full
    (``zero-window``/``window-full``: backpressure; these win over ``unacknowledged``).
    ``end`` is its next payload segment (None: the connection or capture ended first);
    ``retransmission``: that segment resent bytes already sent — the sender was waiting
    out a retransmission timeout (loss), not only a slow reader.
    A sender merely idle — everything acknowledged, window open — is not stalled.
    """

    sender: Direction
    reason: StallReason
    start: Origin
    end: Origin | None = None
    retransmission: bool = False

    @property
    def seconds(self) -> float | None:
        return None if self.end is None else self.end.ts - self.start.ts


class _Side:
    """What one endpoint sent and advertised (it is the sender of its segments and the
    receiver whose window its ACKs carry)."""

    __slots__ = (
        "ack",
        "checked",
        "fin_noted",
        "full",
        "last_data",
        "nxt",
        "offer",
        "rst_noted",
        "shift",
        "stall",
        "syn_seen",
        "window",
        "zero",
    )

    def __init__(self) -> None:
        self.syn_seen = False
        self.offer: int | None = None  # Window Scale shift offered in its SYN
        self.nxt: int | None = None  # highest seq + len it sent
        self.ack: int | None = None  # last ack it sent
        self.shift: int | None = None  # Window Scale shift of its windows; None: unknown
        self.window: int | None = None  # last window it advertised, in bytes; None: unknown
        self.zero: WindowPeriod | None = None  # open period with this side as receiver
        self.full: WindowPeriod | None = None
        self.last_data: Origin | None = None  # its last payload segment
        self.checked = True  # its current silence was already judged for a stall
        self.stall: Stall | None = None  # open stall of this side as sender
        self.fin_noted = False
        self.rst_noted = False

    def silent_at(self, ts: float) -> bool:
        """Its silence is not judged yet and has lasted STALL_SECONDS at ``ts`` (unjudged
        means it sent payload: ``last_data`` is set with ``checked`` cleared)."""
        last = self.last_data
        return not self.checked and last is not None and ts - last.ts >= STALL_SECONDS


@dataclass(slots=True)
class TCPState:
    """The expert-analysis records of one connection; see the module docstring."""

    window_scale: dict[Direction, int | None] = field(
        default_factory=lambda: {"client": None, "server": None}
    )
    windows: list[WindowPeriod] = field(default_factory=list)
    tcp_notes: list[TCPNote] = field(default_factory=list)
    stalls: list[Stall] = field(default_factory=list)


class TCPAnalyzer:
    """Feed every segment of one connection in capture order with its direction."""

    __slots__ = ("_client", "_server", "state")

    def __init__(self) -> None:
        self.state = TCPState()
        # Two attributes, not a dict of the two: a SYN flood tracks 100,000 of these.
        self._client = _Side()
        self._server = _Side()

    def _handshake(self) -> None:
        """Both SYNs seen: fix each side's window shift (RFC 7323 §2.2)."""
        client, server = self._client, self._server
        if client.offer is None or server.offer is None:
            client.shift = server.shift = 0  # scaling is on only if both sides offered it
        else:
            client.shift, server.shift = client.offer, server.offer
        self.state.window_scale = {"client": client.shift, "server": server.shift}

    def segment(self, direction: Direction, seg: TCPSegment) -> None:
        peer_dir: Direction
        if direction == "client":
            me, peer, peer_dir = self._client, self._server, "server"
        else:
            me, peer, peer_dir = self._server, self._client, "client"
        origin = seg.origin
        flags = seg.flags
        state = self.state
        # Stalls are judged before this segment changes anything: the state as it stood
        # STALL_SECONDS after each side's last payload segment.
        if me.silent_at(origin.ts):
            self._judge_stall(direction, me, peer)
        if peer.silent_at(origin.ts):
            self._judge_stall(peer_dir, peer, me)

        seq = seg.seq
        length = len(seg.payload) + seg.missing_tail
        syn = flags & TCP_SYN
        nxt = me.nxt
        if flags & (TCP_SYN | TCP_FIN | TCP_RST):
            end = self._control(direction, me, seg, length)
            if flags & TCP_RST:
                return  # RFC 9293 §3.10.7: an RST's window and ack say nothing
        else:
            end = seq_add(seq, length)
            if nxt is not None and length <= 1:
                # Probes and keep-alives, judged against what this side had sent before.
                if peer.zero is not None and (
                    (length == 1 and seq == nxt) or (length == 0 and seq == seq_add(nxt, -1))
                ):
                    peer.zero.probes += 1
                    state.tcp_notes.append(TCPNote("zero-window-probe", direction, origin))
                elif seq == seq_add(nxt, -1):
                    state.tcp_notes.append(TCPNote("keep-alive", direction, origin))
        if nxt is None or seq_after(end, nxt):
            me.nxt = end

        # This side as receiver: its window and ack.
        if flags & TCP_ACK:
            window = seg.window
            me.ack = seg.ack
            shift = me.shift
            # Windows in SYN segments are never scaled (RFC 7323 §2.2).
            me.window = window if syn else (None if shift is None else window << shift)
            if window == 0 and not flags & (TCP_SYN | TCP_FIN):
                if me.zero is None:
                    me.zero = WindowPeriod(direction, "zero-window", origin)
                    state.windows.append(me.zero)
                if me.full is not None:
                    me.full.end, me.full = origin, None
            elif window:
                if me.zero is not None:
                    me.zero.end, me.zero = origin, None
                full = me.full
                if (
                    full is not None
                    and peer.nxt is not None
                    and me.window is not None
                    and seq_after(seq_add(seg.ack, me.window), peer.nxt)
                ):
                    full.end, me.full = origin, None

        # This side as sender: did this segment fill the peer's window?
        if length and not syn:
            if (
                peer.window
                and peer.full is None
                and peer.ack is not None
                and not seq_after(seq_add(peer.ack, peer.window), end)
            ):
                peer.full = WindowPeriod(peer_dir, "window-full", origin)
                state.windows.append(peer.full)
            if me.stall is not None:
                me.stall.end = origin
                me.stall.retransmission = nxt is not None and seq_after(nxt, seq)
                me.stall = None
            me.last_data = origin
            me.checked = False

    def _control(self, direction: Direction, me: _Side, seg: TCPSegment, length: int) -> int:
        """SYN, FIN and RST bookkeeping; returns the sequence number after the segment."""
        flags = seg.flags
        notes = self.state.tcp_notes
        if flags & TCP_SYN:
            if not me.syn_seen:
                me.syn_seen = True
                me.offer = window_scale_offer(seg.options)
                if self._client.syn_seen and self._server.syn_seen:
                    self._handshake()
            length += 1  # RFC 9293 §3.4: SYN and FIN occupy a sequence number each
        if flags & TCP_FIN:
            length += 1
            if not me.fin_noted:
                me.fin_noted = True
                notes.append(TCPNote("fin", direction, seg.origin))
        if flags & TCP_RST and not me.rst_noted:
            me.rst_noted = True
            notes.append(TCPNote("rst", direction, seg.origin))
        return seq_add(seg.seq, length)

    def close(self, end_ts: float) -> None:
        """The connection (or the capture) ended at ``end_ts``: judge silences up to it."""
        pairs: tuple[tuple[Direction, _Side, _Side], ...] = (
            ("client", self._client, self._server),
            ("server", self._server, self._client),
        )
        for direction, side, peer in pairs:
            if side.silent_at(end_ts):
                self._judge_stall(direction, side, peer)

    def _judge_stall(self, sender: Direction, side: _Side, receiver: _Side) -> None:
        side.checked = True
        reason: StallReason | None = None
        if receiver.zero is not None:
            reason = "zero-window"
        elif receiver.full is not None:
            reason = "window-full"
        elif (
            side.nxt is not None and receiver.ack is not None and seq_after(side.nxt, receiver.ack)
        ):
            reason = "unacknowledged"
        if reason is not None:
            assert side.last_data is not None
            side.stall = Stall(sender, reason, side.last_data)
            self.state.stalls.append(side.stall)
