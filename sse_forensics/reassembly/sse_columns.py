"""Whole-body, columnar WHATWG ``text/event-stream`` parser (HTML Living Standard §9.2.6).

Implements "Event stream interpretation"
(https://html.spec.whatwg.org/multipage/server-sent-events.html#event-stream-interpretation)
for ONE decoded response body at once, returning events, comments and anomalies as polars
columns. The result is exactly what :class:`~sse_forensics.reassembly.sse.SSEParser`
(``report_empty=True``) gives for one ``feed()`` of the same bytes followed by ``close()``,
including its forensic choices (``docs/sse-parser.md``); capture holes are the caller's job
(split the body at each hole, pass ``start_offset`` / ``initial_last_id`` / ``stream_start``).

Design (why hand-written, why this shape). ``SSEParser`` builds Python objects per line and
per event (~50 MB/s). No library parses SSE into columns, and the grammar is a handful of
byte-prefix rules, so it is written here as numpy/polars array code over the whole body, with
no Python step per line, per event or per byte when the body is valid UTF-8:

1. Line ends: numpy ``flatnonzero`` of LF, and of CR only when the body has one (CRLF is one
   line end; a CR that is the last byte is one too, as ``close()`` makes it).
2. Each line is classified from the 8 bytes at its start, gathered as one unaligned
   ``uint64`` and masked to the line's length: its first byte picks the only candidate
   (``:`` comment, ``data``, ``id``, ``event``, ``retry``), one compare checks ``name:``,
   one the bare ``name`` (every name that matters fits in the word); else "other field".
3. Blocks are the runs of lines between blank lines (a cumulative sum); a block's fields are
   reduced with "first/last line of the block" masks over sorted line indices, and the
   last-event-ID buffer at each blank line is a ``searchsorted`` over the valid ``id`` lines.
4. Strings: polars slices every value out of the body at once (``bin.slice`` of one
   ``Binary`` value repeated per row, sharing its buffer; the cast to ``String`` checks
   UTF-8), and each string column is a ``gather`` from that pool (views, not copies). Blocks
   with several ``data`` lines are joined per line count: a (blocks x count) ``Array``
   column, ``arr.join("\n")``.
5. UTF-8 is validated once per body, by polars. A body that is not valid takes the fallback:
   runs of whole lines are decoded strictly (C speed), each failure names one bad line, and
   only the bad lines are decoded in Python (with U+FFFD, as ``SSEParser._decode``) and
   checked for the reason the anomaly reports.

Decoding line by line (``SSEParser``) and decoding runs of lines give the same text: CR and LF
are ASCII and never sit inside a maximal invalid subsequence. Bodies over ``SEGMENT_BYTES``
are sliced from several buffers cut at line ends; one line over 4 GiB exceeds polars' binary
value limit. Memory: about 60 bytes per line on top of the body and the result.
"""

from __future__ import annotations

import codecs
import itertools
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import polars as pl

from sse_forensics.reassembly.sse import DEFAULT_EVENT_TYPE, UTF8_BOM

if TYPE_CHECKING:
    from polars._typing import PolarsDataType  # a dtype class (pl.String) or instance

__all__ = [
    "ANOMALY_SCHEMA",
    "COMMENT_SCHEMA",
    "EVENT_SCHEMA",
    "RETRY_MAX",
    "SEGMENT_BYTES",
    "SSEColumns",
    "byte_positions",
    "parse_body",
]

EVENT_SCHEMA: dict[str, PolarsDataType] = {
    "start": pl.Int64(),
    "end": pl.Int64(),
    "id": pl.String(),
    "id_field": pl.String(),
    "event": pl.String(),
    "data": pl.String(),
    "retry": pl.Int64(),
    "dispatched": pl.Boolean(),
}
COMMENT_SCHEMA: dict[str, PolarsDataType] = {
    "start": pl.Int64(),
    "end": pl.Int64(),
    "text": pl.String(),
}
ANOMALY_SCHEMA: dict[str, PolarsDataType] = {
    "kind": pl.String(),
    "start": pl.Int64(),
    "end": pl.Int64(),
    "detail": pl.String(),
}

SEGMENT_BYTES = 1 << 30
"""Largest buffer handed to polars as one value (its binary values are limited to 4 GiB)."""

RETRY_MAX = (1 << 63) - 1
"""``retry`` values beyond Int64 are stored as this (``SSEParser`` keeps a Python int)."""

_SCAN_CHUNK = 1 << 16
"""Bytes compared per numpy pass of :func:`byte_positions`: the temporary bool array stays
under glibc's mmap threshold (128 KB, pinned by ``sse_forensics.memory``), so it is heap
memory used again, not a fresh mapping faulted in page by page (issue 9: a 4 MB piece of
heads cost ~1,000 page faults for its line ends; a 64 KB pass costs ~3 µs)."""
_CHECK_BYTES = 1 << 16  # the UTF-8 fallback decodes runs of whole lines of about this size

# Line kinds, from the line's first bytes.
_BLANK, _COMMENT, _DATA, _ID, _EVENT, _RETRY, _OTHER = range(7)
_NAMES = ((b"", _COMMENT), (b"data", _DATA), (b"id", _ID), (b"event", _EVENT), (b"retry", _RETRY))
_MASKS = np.array([(1 << (8 * j)) - 1 for j in range(9)], dtype=np.uint64)
_SPACE, _LF, _CR = 0x20, 0x0A, 0x0D


def _name_tables() -> tuple[np.ndarray, ...]:
    """Per first byte: the line kind it may start, the masked ``name:`` and bare ``name`` as
    little-endian words, the name's length. Other bytes never match (key 1 under mask 0)."""
    kind = np.full(256, _OTHER, dtype=np.uint8)
    colon_mask = np.zeros(256, dtype=np.uint64)
    colon_key = np.ones(256, dtype=np.uint64)
    bare_key = np.ones(256, dtype=np.uint64)
    size = np.full(256, 6, dtype=np.int64)
    for name, code in _NAMES:
        head = (name + b":")[0]
        kind[head] = code
        colon_mask[head] = _MASKS[len(name) + 1]
        colon_key[head] = int.from_bytes(name + b":", "little")
        if name:  # a bare ":" is a comment, matched as "name:" with the empty name
            bare_key[head] = int.from_bytes(name, "little")
        size[head] = len(name)
    return kind, colon_mask, colon_key, bare_key, size


_NAME_KIND, _COLON_MASK, _COLON_KEY, _BARE_KEY, _NAME_SIZE = _name_tables()


@dataclass(frozen=True, slots=True)
class SSEColumns:
    """One body's parse, as columns (offsets are body offsets plus ``start_offset``).

    ``events`` (:data:`EVENT_SCHEMA`), one row per block ``SSEParser(report_empty=True)``
    returns, in stream order: ``start``/``end`` (first field line … just after the blank
    line), ``id`` (last-event-ID buffer at dispatch), ``id_field`` (value an ``id`` field of
    the block set, null if none), ``event`` (``"message"`` unless set), ``data``, ``retry``
    (valid value of the block, null if none; capped at :data:`RETRY_MAX`), ``dispatched``
    (False for data-less blocks, which WHATWG does not dispatch).
    ``comments`` (:data:`COMMENT_SCHEMA`): ``start``, ``end`` (after the line end), ``text``
    (one leading space removed). ``anomalies`` (:data:`ANOMALY_SCHEMA`): ``kind``
    (``invalid-utf8``, ``id-contains-nul``, ``invalid-retry``), ``start``, ``end``, ``detail``,
    as ``take_anomalies()`` lists them.
    ``trailing``: the unterminated last block (``SSEParser.trailing`` after ``close()``),
    starting at offset ``trailing_start``. ``last_event_id``: the ID buffer as of the last
    blank line (``SSEParser.last_event_id``); ``id_buffer``: the ID buffer after every
    complete line, the trailing block's included (pass it as ``initial_last_id`` to continue
    after a hole); ``reconnection_time``: the last valid ``retry`` (or None).
    """

    events: pl.DataFrame
    comments: pl.DataFrame
    anomalies: pl.DataFrame
    trailing: bytes
    trailing_start: int
    last_event_id: str
    id_buffer: str
    reconnection_time: int | None
    end: int
    """Offset just after the body."""

    @property
    def invalid_utf8(self) -> int:
        """Lines that were not valid UTF-8 (``SSEParser.invalid_utf8``)."""
        return int((self.anomalies["kind"] == "invalid-utf8").sum())


# -- the parser -------------------------------------------------------------------------------


def parse_body(
    body: bytes | bytearray | memoryview,
    *,
    report_empty: bool = True,
    start_offset: int = 0,
    initial_last_id: str = "",
    stream_start: bool | None = None,
) -> SSEColumns:
    """Parse one whole decoded ``text/event-stream`` body into columns (WHATWG §9.2.6).

    Same result as ``SSEParser(report_empty=report_empty)`` fed ``body`` in one ``feed()``
    then ``close()``, with offsets shifted by ``start_offset`` and the ID buffer starting as
    ``initial_last_id``. ``stream_start``: the body is the start of the stream, so one
    leading UTF-8 BOM is stripped (offsets still count it); default ``start_offset == 0``.
    Never raises on any input bytes.
    """
    body = bytes(body)  # no copy for bytes
    if stream_start is None:
        stream_start = start_offset == 0
    bom = len(UTF8_BOM) if stream_start and body.startswith(UTF8_BOM) else 0

    lines = _lines(body, bom)
    bounds = _segments(body, lines.end)
    segments = _binary_segments(body, bounds)
    valid = _valid_utf8(segments)

    kind = lines.kind
    n_lines = len(kind)
    blank = kind == _BLANK
    blank_lines = np.flatnonzero(blank)
    n_terminated = len(blank_lines)  # blocks ended by a blank line; one more is trailing
    n_blocks = n_terminated + 1
    block = np.cumsum(blank, dtype=np.int64)
    block -= blank

    # One pool of strings: every value sliced once, then gathered into the columns. Lines
    # holding invalid UTF-8 (the fallback) are decoded one by one, with U+FFFD replacements.
    valued = np.flatnonzero((kind != _BLANK) & (kind != _OTHER))
    bad_lines = np.empty(0, dtype=np.int64)
    repaired = bad_lines
    if not valid:
        bad_lines = _invalid_lines(body, lines)  # the unterminated tail is never decoded
        is_bad = np.zeros(n_lines, dtype=bool)
        is_bad[bad_lines] = True
        repaired = valued[is_bad[valued]]
        valued = valued[~is_bad[valued]]
    values = _slice(segments, bounds, lines.value_start[valued], lines.content_end[valued])
    if len(repaired):
        # The value follows an ASCII name and colon: decoding it alone gives the same text.
        texts = [
            body[lines.value_start[i] : lines.content_end[i]].decode("utf-8", "replace")
            for i in repaired.tolist()
        ]
        values = pl.concat([values, pl.Series(texts, dtype=pl.String)])
    row = np.full(n_lines, -1, dtype=np.int64)
    row[valued] = np.arange(len(valued))
    row[repaired] = len(valued) + np.arange(len(repaired))
    base = len(values)
    empty_row, message_row, initial_row, null_row = base, base + 1, base + 2, base + 3
    pool = [
        values,
        pl.Series(["", DEFAULT_EVENT_TYPE, initial_last_id, None], dtype=pl.String),
    ]
    base += 4

    # id: a value containing NUL is ignored (noted).
    id_lines = np.flatnonzero(kind == _ID)
    id_has_nul = np.zeros(len(id_lines), dtype=bool)
    if len(id_lines) and b"\0" in body:
        nul = byte_positions(np.frombuffer(body, dtype=np.uint8), 0)
        id_has_nul = np.searchsorted(nul, lines.content_end[id_lines]) > np.searchsorted(
            nul, lines.value_start[id_lines]
        )
    valid_ids = id_lines[~id_has_nul]

    # retry: only ASCII digits, at least one.
    retry_lines = np.flatnonzero(kind == _RETRY)
    retry_valid = np.zeros(len(retry_lines), dtype=bool)
    retry_value = np.zeros(len(retry_lines), dtype=np.int64)
    if len(retry_lines):
        retry_texts = values.gather(row[retry_lines])
        retry_valid = retry_texts.str.contains(r"^[0-9]+$").to_numpy()
        ints = retry_texts.str.to_integer(base=10, strict=False)
        retry_value = ints.fill_null(RETRY_MAX).to_numpy()  # digits beyond Int64
    valid_retries = retry_lines[retry_valid]
    retry_of_line = np.zeros(n_lines, dtype=np.int64)
    retry_of_line[valid_retries] = retry_value[retry_valid]

    data_lines = np.flatnonzero(kind == _DATA)
    data_block = block[data_lines]
    data_count = np.bincount(data_block, minlength=n_blocks)
    first_data = _first_per_block(data_lines, data_block, n_blocks)
    last_id = _last_per_block(valid_ids, block[valid_ids], n_blocks)
    event_lines = np.flatnonzero(kind == _EVENT)
    last_event = _last_per_block(event_lines, block[event_lines], n_blocks)
    last_retry = _last_per_block(valid_retries, block[valid_retries], n_blocks)
    field_lines = np.flatnonzero(kind >= _DATA)
    first_field = _first_per_block(field_lines, block[field_lines], n_blocks)

    # Which blocks become events (SSEParser._dispatch).
    done = slice(0, n_terminated)
    emit = data_count[done] > 0
    if report_empty:
        emit = emit | (last_id[done] >= 0) | (last_event[done] >= 0) | (last_retry[done] >= 0)
    emitted = np.flatnonzero(emit)
    blank_of = blank_lines[emitted]
    count = data_count[emitted]

    data_rows = np.full(len(emitted), empty_row, dtype=np.int64)
    single = count == 1
    data_rows[single] = row[first_data[emitted[single]]]
    multi = np.flatnonzero(count > 1)
    if len(multi):
        # Data lines of a block are consecutive in data_lines: for each line count, a
        # (blocks x count) matrix of values joined row-wise with LF.
        first_pos = np.searchsorted(data_block, emitted[multi])
        multi_count = count[multi]
        for width in np.unique(multi_count):
            group = np.flatnonzero(multi_count == width)
            at = first_pos[group][:, None] + np.arange(width)
            joined = values.gather(row[data_lines[at.ravel()]])
            pool.append(joined.reshape((len(group), int(width))).arr.join("\n"))
            data_rows[multi[group]] = base + np.arange(len(group))
            base += len(group)

    # The ID buffer at a blank line: the last valid id line before it (-1: the initial one).
    id_buffer_rows = np.append(row[valid_ids], initial_row)
    id_rows = id_buffer_rows[np.searchsorted(valid_ids, blank_of) - 1]
    own_id = last_id[emitted]
    id_field_rows = np.where(own_id >= 0, row[own_id], null_row)
    own_event = last_event[emitted]
    event_set = own_event >= 0
    event_set[event_set] = (
        lines.content_end[own_event[event_set]] > lines.value_start[own_event[event_set]]
    )
    event_rows = np.where(event_set, row[own_event], message_row)
    own_retry = last_retry[emitted]

    strings = pl.concat(pool, rechunk=True)  # one chunk: gathers are ~2x faster
    events = pl.DataFrame(
        {
            "start": lines.start[first_field[emitted]] + start_offset,
            "end": lines.end[blank_of] + start_offset,
            "id": strings.gather(id_rows),
            "id_field": strings.gather(id_field_rows),
            "event": strings.gather(event_rows),
            "data": strings.gather(data_rows),
            "retry": pl.Series(retry_of_line[own_retry], dtype=pl.Int64).scatter(
                np.flatnonzero(own_retry < 0), None
            ),
            "dispatched": count > 0,
        },
        schema=EVENT_SCHEMA,
    )

    comment_lines = np.flatnonzero(kind == _COMMENT)
    comments = pl.DataFrame(
        {
            "start": lines.start[comment_lines] + start_offset,
            "end": lines.end[comment_lines] + start_offset,
            "text": values.gather(row[comment_lines]),
        },
        schema=COMMENT_SCHEMA,
    )

    anomalies = _anomalies(
        body, lines, values, row, bad_lines, id_lines[id_has_nul], retry_lines[~retry_valid]
    )
    if len(anomalies):
        anomalies = anomalies.with_columns(pl.col("start", "end") + start_offset)

    # What close() leaves: the block after the last blank line, from its first field line,
    # else from the line not yet ended.
    if first_field[n_terminated] >= 0:
        keep_from = int(lines.start[first_field[n_terminated]])
    else:
        keep_from = int(lines.end[-1]) if n_lines else bom
    committed = np.searchsorted(valid_ids, blank_lines[-1]) - 1 if n_terminated else -1
    strings_at = strings.gather([id_buffer_rows[committed], id_buffer_rows[len(valid_ids) - 1]])
    return SSEColumns(
        events=events,
        comments=comments,
        anomalies=anomalies,
        trailing=body[keep_from:],
        trailing_start=keep_from + start_offset,
        last_event_id=strings_at[0],
        id_buffer=strings_at[1],
        reconnection_time=int(retry_of_line[valid_retries[-1]]) if len(valid_retries) else None,
        end=len(body) + start_offset,
    )


# -- lines ------------------------------------------------------------------------------------


def byte_positions(arr: np.ndarray, byte: int) -> np.ndarray:
    """Offsets of ``byte`` in ``arr``, in order (int64), :data:`_SCAN_CHUNK` bytes a pass."""
    if len(arr) <= _SCAN_CHUNK:
        return np.flatnonzero(arr == byte)
    parts = [
        np.flatnonzero(arr[i : i + _SCAN_CHUNK] == byte) + i
        for i in range(0, len(arr), _SCAN_CHUNK)
    ]
    return np.concatenate(parts)


def _line_ends(buf: bytes, arr: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(content_end, line_end)`` of every terminated line: CRLF, LF, or CR alone.

    A CR that is the last byte of the body ends its line (what ``SSEParser.close()`` does
    with a CR held back at the end of a feed).
    """
    lf = byte_positions(arr, _LF)
    if b"\r" not in buf:
        return lf, lf + 1
    n = len(arr)
    cr = byte_positions(arr, _CR)
    after = np.minimum(cr + 1, n - 1)
    lone = cr[(cr + 1 >= n) | (arr[after] != _LF)]
    lf_content_end = lf - (arr[np.maximum(lf - 1, 0)] == _CR) * (lf > 0)
    if not len(lone):
        return lf_content_end, lf + 1
    # Merge the lone CRs into the (sorted) LF positions.
    total = len(lf) + len(lone)
    at = np.searchsorted(lf, lone) + np.arange(len(lone))
    is_lf = np.ones(total, dtype=bool)
    is_lf[at] = False
    term = np.empty(total, dtype=np.int64)
    content_end = np.empty(total, dtype=np.int64)
    term[at] = lone
    content_end[at] = lone
    term[is_lf] = lf
    content_end[is_lf] = lf_content_end
    return content_end, term + 1


def _words(buf: bytes, pos: np.ndarray) -> np.ndarray:
    """The 8 bytes at each of ``pos`` as a little-endian uint64 (zero past the body end)."""
    n = len(buf)
    if n < 8:
        buf = buf + bytes(8 - n)
    # Every byte offset as the start of an (unaligned) uint64: one 1-D gather.
    windows = np.ndarray(shape=(len(buf) - 7,), dtype="<u8", buffer=buf, strides=(1,))
    last = len(buf) - 8
    words = windows[np.minimum(pos, last)]
    late = pos > last
    if late.any():  # the last 7 lines' starts at most: shift the last word, zero-filled
        shift = (pos[late] - last) * 8
        words[late] = np.where(shift < 64, windows[last] >> shift.astype(np.uint64), 0)
    out: np.ndarray = words
    return out


@dataclass(slots=True)
class _Lines:
    """The terminated lines of one buffer: offsets, kind, where the value starts."""

    start: np.ndarray  # first content byte (after a stripped BOM for line 0)
    content_end: np.ndarray
    end: np.ndarray  # just after the line end
    kind: np.ndarray  # uint8, one of _BLANK.._OTHER
    value_start: np.ndarray  # field value (one space after the colon skipped); comment text


def _lines(buf: bytes, bom: int) -> _Lines:
    arr = np.frombuffer(buf, dtype=np.uint8)
    content_end, end = _line_ends(buf, arr)
    start = np.empty_like(end)
    if len(end):
        start[0] = bom
        start[1:] = end[:-1]
    length = content_end - start
    word = _words(buf, start) & _MASKS[np.minimum(length, 8)]  # bytes past the line: 0
    # The first byte picks the only name the line can start with; one masked compare checks
    # "name:" (a comment is the empty name before ":"), one more the bare name.
    first = (word & np.uint64(0xFF)).astype(np.intp)
    colon = (word & _COLON_MASK[first]) == _COLON_KEY[first]
    bare = (word == _BARE_KEY[first]) & (length == _NAME_SIZE[first])
    kind = np.where(colon | bare, _NAME_KIND[first], np.uint8(_OTHER))
    kind[length == 0] = _BLANK
    # The value starts after the colon and one space, or at the end of a bare name's line.
    after = _NAME_SIZE[first] + 1
    space = ((word >> (after.astype(np.uint64) * np.uint64(8))) & np.uint64(0xFF)) == _SPACE
    rel = np.where(colon, after + space, length)
    return _Lines(start, content_end, end, kind, start + rel)


# -- UTF-8 fallback: which lines hold bad bytes ---------------------------------------------


def _invalid_lines(body: bytes, lines: _Lines) -> np.ndarray:
    """Indices of the terminated lines that are not valid UTF-8, in order.

    Runs of whole lines are decoded strictly at C speed; a failure names the first bad line
    (line ends are ASCII: the decoder's state restarts at each line), and decoding resumes
    at the next line. Cost: one pass over the bytes plus one Python step per bad line.
    """
    ends = lines.end
    n_lines = len(ends)
    if not n_lines:
        return np.empty(0, dtype=np.int64)
    view = memoryview(body)
    cuts = np.searchsorted(ends, np.arange(_CHECK_BYTES, int(ends[-1]), _CHECK_BYTES))
    bounds = [0, *np.unique(cuts[(cuts > 0) & (cuts < n_lines)]).tolist(), n_lines]
    bad: list[int] = []
    for first, stop in itertools.pairwise(bounds):
        pos, limit = int(lines.start[first]), int(ends[stop - 1])
        while pos < limit:
            try:
                codecs.utf_8_decode(view[pos:limit], "strict", True)
                break
            except UnicodeDecodeError as exc:
                line = int(np.searchsorted(ends, pos + exc.start, "right"))
                bad.append(line)
                pos = int(ends[line])
    return np.asarray(bad, dtype=np.int64)


def _reason(raw: bytes) -> str:
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return exc.reason
    return ""  # pragma: no cover - only called for lines holding a bad byte


# -- strings and blocks -----------------------------------------------------------------------


def _segments(buf: bytes, line_end: np.ndarray) -> list[int]:
    """Cut points ``[0, …, len(buf)]`` at line ends, ``SEGMENT_BYTES`` apart at most (a
    longer line gets a segment of its own)."""
    n = len(buf)
    bounds = [0]
    while n - bounds[-1] > SEGMENT_BYTES:
        limit = bounds[-1] + SEGMENT_BYTES
        i = int(np.searchsorted(line_end, limit, side="right"))
        if i and line_end[i - 1] > bounds[-1]:
            cut = int(line_end[i - 1])
        else:
            cut = int(line_end[i]) if i < len(line_end) else n
        bounds.append(cut)
    if bounds[-1] != n:
        bounds.append(n)
    return bounds


def _binary_segments(buf: bytes, bounds: list[int]) -> list[pl.Series]:
    if len(bounds) == 2:
        return [pl.Series([buf], dtype=pl.Binary)]
    return [pl.Series([buf[a:b]], dtype=pl.Binary) for a, b in itertools.pairwise(bounds)]


def _valid_utf8(segments: list[pl.Series]) -> bool:
    try:
        for segment in segments:
            segment.cast(pl.String)
    except pl.exceptions.PolarsError:
        return False
    return True


def _slice(
    segments: list[pl.Series], bounds: list[int], start: np.ndarray, end: np.ndarray
) -> pl.Series:
    """``buf[start:end]`` for each row, as a String Series sharing the segments' buffers."""
    if not len(start):
        return pl.Series(dtype=pl.String)
    if len(segments) == 1:
        repeated = segments[0].new_from_index(0, len(start))
        offset = start
    else:
        seg = np.searchsorted(np.asarray(bounds), start, side="right") - 1
        counts = np.bincount(seg, minlength=len(segments))
        repeated = pl.concat(
            [s.new_from_index(0, int(c)) for s, c in zip(segments, counts, strict=True) if c]
        )
        offset = start - np.asarray(bounds)[seg]
    frame = pl.DataFrame({"b": repeated, "o": offset, "n": end - start})
    return frame.select(pl.col("b").bin.slice("o", "n").cast(pl.String)).to_series()


def _last_per_block(lines: np.ndarray, blocks: np.ndarray, n_blocks: int) -> np.ndarray:
    """For each block, the last of ``lines`` (sorted) in it, or -1."""
    out = np.full(n_blocks, -1, dtype=np.int64)
    if len(lines):
        last = np.empty(len(lines), dtype=bool)
        last[-1] = True
        np.not_equal(blocks[1:], blocks[:-1], out=last[:-1])
        out[blocks[last]] = lines[last]
    return out


def _first_per_block(lines: np.ndarray, blocks: np.ndarray, n_blocks: int) -> np.ndarray:
    """For each block, the first of ``lines`` (sorted) in it, or -1."""
    out = np.full(n_blocks, -1, dtype=np.int64)
    if len(lines):
        first = np.empty(len(lines), dtype=bool)
        first[0] = True
        np.not_equal(blocks[1:], blocks[:-1], out=first[1:])
        out[blocks[first]] = lines[first]
    return out


# -- anomalies ------------------------------------------------------------------------------


def _anomalies(
    body: bytes,
    lines: _Lines,
    values: pl.Series,
    row: np.ndarray,
    bad_lines: np.ndarray,
    nul_ids: np.ndarray,
    bad_retries: np.ndarray,
) -> pl.DataFrame:
    """Anomalies in ``take_anomalies()`` order: by line, invalid UTF-8 first on a line."""
    if not (len(bad_lines) or len(nul_ids) or len(bad_retries)):
        return pl.DataFrame(schema=ANOMALY_SCHEMA)
    # Decode each bad line again, as SSEParser does (a comment without its colon), for the
    # reason of its first error.
    skip = (lines.kind[bad_lines] == _COMMENT).astype(np.int64)
    reasons = [
        _reason(body[start:end])
        for start, end in zip(
            (lines.start[bad_lines] + skip).tolist(),
            lines.content_end[bad_lines].tolist(),
            strict=True,
        )
    ]
    field_lines = np.concatenate([nul_ids, bad_retries])
    line = np.concatenate([bad_lines, field_lines])
    frame = pl.DataFrame(
        {
            "kind": ["invalid-utf8"] * len(bad_lines)
            + ["id-contains-nul"] * len(nul_ids)
            + ["invalid-retry"] * len(bad_retries),
            "start": lines.start[line],
            "end": lines.end[line],
            "detail": pl.concat(
                [pl.Series(reasons, dtype=pl.String), values.gather(row[field_lines])]
            ),
            "order": line * 2 + np.repeat([0, 1], [len(bad_lines), len(field_lines)]),
        }
    )
    return frame.sort("order").drop("order").cast(pl.Schema(ANOMALY_SCHEMA))
