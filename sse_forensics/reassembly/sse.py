"""WHATWG ``text/event-stream`` parser, sans-I/O, every event keeping its provenance.

Implements HTML Living Standard §9.2.6 "Event stream interpretation"
(https://html.spec.whatwg.org/multipage/server-sent-events.html#event-stream-interpretation):
``feed()`` decoded HTTP body bytes (transfer- and content-coding already removed), get back
the events a browser's ``EventSource`` would dispatch, each with the byte offsets of its
block and the frames those bytes came from.

Forensic additions, all outside the default WHATWG result (see ``docs/sse-parser.md``):

- ``report_empty=True`` also returns data-less blocks that carried an ``id``, ``event`` or
  ``retry`` field (``dispatched=False``), e.g. the PROFILE's priming event ``id: 7\\n\\n``
  which WHATWG never dispatches but which occupies an event ID.
- ``take_comments()``: comment lines (keep-alives), ``take_anomalies()``: bytes that are not
  valid UTF-8 and fields WHATWG ignores (``id`` with NUL, non-digit ``retry``).
- ``skip(length)``: a hole in the capture. The block it cuts is never dispatched; it is
  returned by ``take_partial_blocks()`` as evidence for an *indeterminate* verdict.
- ``max_event_bytes`` (the ``event_bytes`` cap of :mod:`sse_forensics.limits`): a block (or
  a line) that grows past it is not kept: it is noted (``event-over-cap``), returned as a
  partial block, and the bytes up to the blank line that ends it are only scanned for that
  blank line, so one endless event costs no memory.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Literal

from sse_forensics.provenance import Origin
from sse_forensics.reassembly.receive_buffer import Marks, origin_at, origins_in

UTF8_BOM = b"\xef\xbb\xbf"
"""WHATWG "UTF-8 decode" strips one leading byte order mark, at the start of the stream only."""

DEFAULT_EVENT_TYPE = "message"
"""WHATWG dispatch step 5: the type of an event whose block set no non-empty ``event``."""

# A retry value past 64 bits is kept as the largest one (sse_columns.RETRY_MAX).
RETRY_MAX = (1 << 63) - 1
RETRY_DIGITS = 19
_COLON = 0x3A  # b":"; a line starting with it is a comment

# The line grammar of WHATWG §9.2.6, shared with the HTTP parser's event-stream pickup.
FIELD_NAMES = rb"data|id|event|retry"
"""The field names the format gives a meaning to (any other field is ignored)."""
FIELD_START = re.compile(rb"(?::|(?:" + FIELD_NAMES + rb"):)")
"""A line that can only be the start of a line: a comment, or a known field name and colon."""
FIELD_OR_COMMENT = re.compile(rb"(" + FIELD_NAMES + rb")(?::|\Z)|:")
"""A line's content that is a known field (a bare name is one, with an empty value) or a
comment; group 1 is the field name."""
LINE = re.compile(rb"([^\r\n]*)(\r\n|\n|\r)")
"""One line and its end: CRLF, LF or CR alone ends a line."""


def _span_ts(origins: tuple[Origin, ...], pick: Callable[[Iterable[float]], float]) -> float | None:
    return pick(o.ts for o in origins) if origins else None


# Not frozen: a frozen dataclass's __init__ costs ~7x more (object.__setattr__ per field),
# paid once per event on the hot path. Treat instances as immutable; they stay hashable.
@dataclass(slots=True, unsafe_hash=True)
class SSEEvent:
    """One event block, terminated by a blank line.

    ``id`` is the last-event-ID buffer at dispatch (WHATWG: ``""`` until an ``id`` field sets
    it, then inherited by later events). ``id_field`` is the value an ``id`` field of *this*
    block set (``None`` if none did, or only ones containing NUL). ``retry`` is the valid
    ``retry`` value of this block. ``start`` is the offset of the block's first field line
    (comment lines before it are not part of the event), ``end`` the offset just after the
    blank line that ended it; offsets count every body byte fed, BOM and line ends included.
    ``origins``: the distinct frames/lines holding ``[start, end)``, in stream order.
    ``dispatched`` is False only for the data-less blocks ``report_empty=True`` adds.
    """

    id: str
    event: str
    data: str
    retry: int | None
    id_field: str | None
    start: int
    end: int
    origins: tuple[Origin, ...] = ()
    dispatched: bool = True

    @property
    def first_ts(self) -> float | None:
        """Earliest capture timestamp of the event's bytes."""
        return _span_ts(self.origins, min)

    @property
    def last_ts(self) -> float | None:
        """Latest capture timestamp of the event's bytes: when the event was complete."""
        return _span_ts(self.origins, max)


@dataclass(slots=True, frozen=True)
class SSEComment:
    """A line starting with ``:`` (WHATWG: ignored; servers use it for keep-alives).

    ``text`` is what follows the colon, one leading space removed (as for field values).
    ``end`` is just after the line end; ``origin`` holds the line's first byte.
    """

    text: str
    start: int
    end: int
    origin: Origin | None


AnomalyKind = Literal["invalid-utf8", "id-contains-nul", "invalid-retry", "event-over-cap"]


@dataclass(slots=True, frozen=True)
class SSEAnomaly:
    """A line WHATWG handles silently but an analyst should know about.

    ``invalid-utf8``: decoded with U+FFFD replacements. ``id-contains-nul``: the ``id`` field
    was ignored. ``invalid-retry``: the ``retry`` value was not only ASCII digits, ignored.
    ``event-over-cap``: a block longer than ``max_event_bytes`` from ``start``; not read.
    """

    kind: AnomalyKind
    start: int
    end: int
    origin: Origin | None
    detail: str = ""


@dataclass(slots=True, frozen=True)
class SSEPartialBlock:
    """A block the capture does not hold entirely (``skip()`` was called inside it).

    Never dispatched: its lines may be fragments. ``start`` is where the visible part
    began, ``end`` just after the blank line where parsing resynchronised (or the end of
    the stream when ``terminated`` is False). ``holes`` are ``(offset, length)`` pairs,
    ``length`` ``None`` when unknown. ``id_field``/``event``/``data_lines`` describe the
    complete lines that were seen, for evidence only.
    """

    start: int
    end: int
    holes: tuple[tuple[int, int | None], ...]
    id_field: str | None
    event: str
    data_lines: int
    origins: tuple[Origin, ...]
    terminated: bool = True


Chunk = tuple[int, bytes]
"""``(offset, bytes)`` of one ``feed()``, kept until its bytes' block is done."""


class SSEParser:
    """Sans-I/O ``text/event-stream`` parser for one response body (WHATWG §9.2.6).

    Feed it body bytes in any split; the events are the same as for one ``feed()`` of the
    whole body. Never raises on any input bytes.
    """

    def __init__(self, *, report_empty: bool = False, max_event_bytes: int | None = None) -> None:
        self.report_empty = report_empty
        self.max_event_bytes = max_event_bytes
        # Over the cap: lines are only scanned for the blank line that ends the block.
        self._discarding = False
        self._discard_line_empty = True  # the discarded line so far has no byte
        self.invalid_utf8 = 0
        """Lines that were not valid UTF-8 (decoded with U+FFFD replacements)."""
        self.reconnection_time: int | None = None
        """The last valid ``retry`` value (WHATWG "reconnection time"), ms."""
        # WHATWG buffers (§9.2.6): all start as the empty string.
        self._data: list[str] = []  # data buffer as its lines; "\n".join() drops the final LF
        self._event_type = ""
        self._id_buffer = ""
        self._last_event_id = ""  # the "last event ID string", committed at each dispatch
        # What the current block's own fields set.
        self._block_start: int | None = None
        self._block_id: str | None = None
        self._block_retry: int | None = None
        self._block_event_seen = False
        # Line splitting.
        self._end = 0  # offset just after the last byte fed (known holes included)
        self._line_start = 0  # offset of the line being collected
        self._pending: list[bytes] = []  # that line's bytes so far
        self._held_cr = False  # the line ended in CR at the end of a feed: is LF next?
        self._bom_head: bytes | None = b""  # stream-start bytes that may still be a BOM
        # Provenance (receive_buffer marks: the frame of each run of bytes, None for a
        # hole) and the bytes still needed for ``trailing``.
        self._marks: Marks[Origin | None] = []
        self._chunks: list[Chunk] = []
        self._comments: list[SSEComment] = []
        self._anomalies: list[SSEAnomaly] = []
        self._partials: list[SSEPartialBlock] = []
        self._partial_start: int | None = None  # set from a hole until the next blank line
        self._holes: list[tuple[int, int | None]] = []
        self._after_hole = False  # the next line end closes a line the hole cut
        self._offsets_exact = True
        self._closed = False

    # -- public API --------------------------------------------------------------------

    def feed(self, data: bytes, origin: Origin | None = None) -> list[SSEEvent]:
        """Parse the next body bytes (from ``origin``); return the events they complete."""
        if self._closed:
            raise RuntimeError("SSEParser.feed() after close()")
        if not data:
            return []
        data = bytes(data)
        self._chunks.append((self._end, data))
        self._marks.append((self._end, origin))
        self._end += len(data)
        if self._bom_head is not None:
            stripped = self._strip_bom(data)
            if stripped is None:
                return []
            data = stripped
        events: list[SSEEvent] = []
        self._scan(data, events)
        if self.max_event_bytes is not None and not self._discarding:
            self._check_size()
        self._trim_chunks()
        return events

    def _check_size(self) -> None:
        """A block (or a line before its first field) longer than ``max_event_bytes``: note
        it, keep it as a partial block, and drop its bytes up to its blank line."""
        cap = self.max_event_bytes
        open_at = [
            at
            for at in (
                self._partial_start,
                self._block_start,
                self._line_start if self._pending else None,
            )
            if at is not None
        ]
        if cap is None or not open_at:
            return
        start = min(open_at)
        if self._end - start <= cap:
            return
        self._note("event-over-cap", start, self._end, f"{self._end - start} bytes so far")
        if self._partial_start is None:
            self._partial_start = start
        self._record_partial(self._end, terminated=False)
        self._discard_line_empty = not self._pending
        self._pending.clear()
        self._reset_block()
        self._discarding = True
        self._line_start = self._end

    def close(self) -> list[SSEEvent]:
        """End of stream: a held-back final CR ends its line; return what that completes.

        WHATWG: "Once the end of the file is reached, any pending data must be discarded" —
        an unterminated final block is never dispatched; see :attr:`trailing`.
        """
        if self._closed:
            return []
        self._closed = True
        events: list[SSEEvent] = []
        if self._bom_head:  # fewer than 3 bytes, a BOM prefix: they were content after all
            self._pending.append(self._bom_head)
        self._bom_head = None
        if self._held_cr:
            self._held_cr = False
            self._end_line(self._end, events)
        if self._partial_start is not None:
            self._record_partial(self._end, terminated=False)
        return events

    def skip(self, length: int | None) -> list[SSEEvent]:
        """The body has a hole of ``length`` bytes here (capture loss; ``None``: unknown).

        The block in progress (or, if none, the one the hole starts inside) is never
        dispatched: it is recorded as an :class:`SSEPartialBlock` once parsing resyncs at
        the next blank line. The first line end after the hole only closes the line the
        hole cut — it is not taken as a blank line, since the line's start is unknown —
        unless that line reads as a line start (a comment or ``data:``/``id:``/``event:``/
        ``retry:``), which then begins a new block.
        Offsets advance by ``length``; with ``None`` they stop matching body offsets
        (:attr:`offsets_exact` turns False). Returns events a held-back CR completes.
        """
        if self._closed:
            raise RuntimeError("SSEParser.skip() after close()")
        events: list[SSEEvent] = []
        self._discarding = False  # the hole's own resynchronisation takes over
        if self._bom_head is not None:
            self._pending.append(self._bom_head)
            self._bom_head = None
        if self._held_cr:  # the CR ended its line whatever byte the hole starts with
            self._held_cr = False
            self._end_line(self._end, events)
        if self._partial_start is None:
            self._partial_start = self._keep_from()
        self._pending.clear()
        self._holes.append((self._end, length))
        self._marks.append((self._end, None))  # no frame carried the hole's bytes
        if length is None:
            self._offsets_exact = False
        else:
            self._end += length
        self._line_start = self._end
        self._after_hole = True
        self._trim_chunks()
        return events

    def take_comments(self) -> list[SSEComment]:
        """Comment lines seen since the last call."""
        out, self._comments = self._comments, []
        return out

    def take_anomalies(self) -> list[SSEAnomaly]:
        """Anomalies (invalid UTF-8, ignored ``id``/``retry`` fields) since the last call."""
        out, self._anomalies = self._anomalies, []
        return out

    @property
    def has_partial_blocks(self) -> bool:
        return bool(self._partials)

    def take_partial_blocks(self) -> list[SSEPartialBlock]:
        """Blocks cut by a ``skip()`` hole, completed since the last call."""
        out, self._partials = self._partials, []
        return out

    @property
    def last_event_id(self) -> str:
        """WHATWG "last event ID string": the ID buffer as of the last blank line.

        What a reconnecting client sends as ``Last-Event-ID``. An id-only block (priming
        event) updates it although it dispatches no event.
        """
        return self._last_event_id

    @property
    def offset(self) -> int:
        """Bytes consumed so far (including held-back bytes and known hole lengths)."""
        return self._end

    @property
    def offsets_exact(self) -> bool:
        """False once a hole of unknown length was skipped."""
        return self._offsets_exact

    @property
    def trailing(self) -> bytes:
        """Bytes of the block not yet ended by a blank line (after close: the discarded one).

        Starts at the block's first field line, or at the current line when the block has
        none yet. Bytes of a skipped hole are absent.
        """
        keep_from = self._keep_from()
        return b"".join(d[max(0, keep_from - off) :] for off, d in self._chunks)

    @property
    def trailing_origins(self) -> tuple[Origin, ...]:
        """Distinct origins of :attr:`trailing`."""
        return self._origins(self._keep_from(), self._end)

    # -- line splitting ----------------------------------------------------------------

    def _strip_bom(self, data: bytes) -> bytes | None:
        """Drop a leading UTF-8 BOM, even split across feeds; None while undecided."""
        head = (self._bom_head or b"") + data
        if len(head) < len(UTF8_BOM) and UTF8_BOM.startswith(head):
            self._bom_head = head
            return None
        self._bom_head = None
        if head.startswith(UTF8_BOM):
            self._line_start = len(UTF8_BOM)
            return head[len(UTF8_BOM) :]
        return head

    def _scan(self, data: bytes, events: list[SSEEvent]) -> None:
        """Split ``data`` into lines: CRLF, LF, or CR alone end a line (WHATWG §9.2.6)."""
        if not data:
            return
        pos = self._end - len(data)  # offset of data[0]
        if self._held_cr:
            self._held_cr = False
            if data[:1] == b"\n":  # CR|LF split across feeds is one line end
                data = data[1:]
                pos += 1
            self._end_line(pos, events)
            if not data:
                return
        # bytes.splitlines splits on exactly CRLF, LF and CR (unlike str.splitlines).
        lines = data.splitlines(keepends=True)
        tail = lines[-1]
        if tail[-1:] == b"\n":
            tail = b""
        else:
            lines.pop()
        pending = self._pending
        for piece in lines:
            pos += len(piece)
            content = piece[:-2] if piece[-2:] == b"\r\n" else piece[:-1]
            if pending:
                pending.append(content)
                content = b"".join(pending)
                pending.clear()
            self._line(content, pos, events)
        if self._discarding:  # over the cap: only whether the line has a byte counts
            if tail[:-1] if tail[-1:] == b"\r" else tail:
                self._discard_line_empty = False
            self._held_cr = tail[-1:] == b"\r"
        elif tail[-1:] == b"\r":  # a lone CR, or the first half of a CRLF: wait and see
            pending.append(tail[:-1])
            self._held_cr = True
        elif tail:
            pending.append(tail)

    def _end_line(self, end: int, events: list[SSEEvent]) -> None:
        content = b"".join(self._pending)
        self._pending.clear()
        self._line(content, end, events)

    # -- line interpretation -----------------------------------------------------------

    def _line(self, content: bytes, end: int, events: list[SSEEvent]) -> None:
        """Interpret one line (without its line end) spanning ``[_line_start, end)``."""
        start = self._line_start
        self._line_start = end
        if self._discarding:
            if not content and self._discard_line_empty:  # the blank line: the block ends
                self._discarding = False
            self._discard_line_empty = True
            return
        if self._after_hole:
            self._after_hole = False
            if not FIELD_START.match(content):
                return  # the tail of a line whose start is in the hole: unreadable
            # The hole ended at a line start (a chunked body resynchronises at a chunk
            # header, and servers write one event per chunk): the cut block ends here and
            # this line starts the next one, so events after the hole are not lost with it.
            if self._partial_start is not None:
                self._record_partial(start, terminated=True)
            self._reset_block()
        if not content:
            self._dispatch(end, events)
            return
        if content[0] == _COLON:
            text = self._decode(content[1:], start, end)
            self._comments.append(
                SSEComment(
                    text[1:] if text[:1] == " " else text, start, end, self._origin_at(start)
                )
            )
            return
        if self._block_start is None:
            self._block_start = start
        field, _, value = self._decode(content, start, end).partition(":")
        if value[:1] == " ":
            value = value[1:]
        if field == "data":
            self._data.append(value)
        elif field == "event":
            self._event_type = value
            self._block_event_seen = True
        elif field == "id":
            if "\0" in value:
                self._note("id-contains-nul", start, end, value)
            else:
                self._id_buffer = value
                self._block_id = value
        elif field == "retry":
            # str.isdigit() alone would accept non-ASCII digits such as "٣".
            if value.isascii() and value.isdigit():
                # Any number of digits is valid; past 64 bits it is "forever" (RETRY_MAX,
                # as sse_columns stores it) — and int() refuses more than 4,300 digits.
                retry = int(value) if len(value.lstrip("0")) <= RETRY_DIGITS else RETRY_MAX
                self.reconnection_time = self._block_retry = min(retry, RETRY_MAX)
            else:
                self._note("invalid-retry", start, end, value)
        # Any other field name is ignored (WHATWG), including "" from a bare line.

    def _dispatch(self, end: int, events: list[SSEEvent]) -> None:
        """A blank line: WHATWG "dispatch the event" steps 1-7."""
        self._last_event_id = self._id_buffer  # step 1: the buffer itself is kept
        start = self._block_start
        if self._partial_start is not None:
            self._record_partial(end, terminated=True)
        elif start is not None and (
            self._data
            or (
                self.report_empty
                and (
                    self._block_id is not None
                    or self._block_event_seen
                    or self._block_retry is not None
                )
            )
        ):
            events.append(
                SSEEvent(
                    id=self._last_event_id,
                    event=self._event_type or DEFAULT_EVENT_TYPE,
                    data="\n".join(self._data),  # step 3: without the final LF
                    retry=self._block_retry,
                    id_field=self._block_id,
                    start=start,
                    end=end,
                    origins=self._origins(start, end),
                    dispatched=bool(self._data),  # step 2: no data, no event
                )
            )
        self._reset_block()
        self._prune(end)

    def _reset_block(self) -> None:
        self._data = []
        self._event_type = ""
        self._block_start = None
        self._block_id = None
        self._block_retry = None
        self._block_event_seen = False

    def _record_partial(self, end: int, *, terminated: bool) -> None:
        start = self._partial_start
        assert start is not None
        self._partials.append(
            SSEPartialBlock(
                start=start,
                end=end,
                holes=tuple(self._holes),
                id_field=self._block_id,
                event=self._event_type or DEFAULT_EVENT_TYPE,
                data_lines=len(self._data),
                origins=self._origins(start, end),
                terminated=terminated,
            )
        )
        self._partial_start = None
        self._holes = []

    def _decode(self, raw: bytes, start: int, end: int) -> str:
        """UTF-8 decode with replacement; never raises, counts and notes bad lines.

        Decoding line by line gives the same text as decoding the whole stream: CR and LF
        are ASCII, so they never sit inside a valid multi-byte sequence.
        """
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            self.invalid_utf8 += 1
            self._note("invalid-utf8", start, end, exc.reason)
            return raw.decode("utf-8", "replace")

    def _note(self, kind: AnomalyKind, start: int, end: int, detail: str) -> None:
        self._anomalies.append(SSEAnomaly(kind, start, end, self._origin_at(start), detail))

    # -- provenance --------------------------------------------------------------------

    def _keep_from(self) -> int:
        """Offset of the earliest byte still needed for an event, partial block or trailing."""
        if self._partial_start is not None:
            return self._partial_start
        if self._block_start is not None:
            return self._block_start
        return self._line_start

    def _origins(self, start: int, end: int) -> tuple[Origin, ...]:
        marks = self._marks
        if len(marks) == 1:
            # The common case: the block sits in one feed (marks before it are pruned,
            # and the last one reaches the current end).
            origin = marks[0][1]
            return () if origin is None or start >= end else (origin,)
        return origins_in(marks, start, end)

    def _origin_at(self, offset: int) -> Origin | None:
        return origin_at(self._marks, offset) if offset < self._end else None

    def _prune(self, keep_from: int) -> None:
        """Forget bytes (and their marks) that end before ``keep_from``: their blocks are
        done."""
        chunks, marks = self._chunks, self._marks
        done = 0
        while done < len(chunks) and chunks[done][0] + len(chunks[done][1]) <= keep_from:
            done += 1
        if len(marks) == len(chunks):
            # No hole marks: one mark per chunk, each run ending where its chunk ends.
            if done:
                del chunks[:done]
                del marks[:done]
            return
        if done:
            del chunks[:done]
        last = len(marks) - 1
        done = 0
        while done <= last and (marks[done + 1][0] if done < last else self._end) <= keep_from:
            done += 1
        if done:
            del marks[:done]

    def _trim_chunks(self) -> None:
        """After a feed, keep only the bytes still needed (a feed may be megabytes)."""
        keep_from = self._keep_from()
        self._prune(keep_from)
        if self._chunks and self._chunks[0][0] < keep_from:
            off, d = self._chunks[0]
            self._chunks[0] = (keep_from, d[keep_from - off :])
        if self._marks and self._marks[0][0] < keep_from:
            self._marks[0] = (keep_from, self._marks[0][1])
