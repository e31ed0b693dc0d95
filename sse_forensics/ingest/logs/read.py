"""Reading a set of log files: detection, chunking, and the per-file bookkeeping (line
numbers, error samples, stats).

:func:`iter_log_batches` is the primitive: one :class:`LogBatch` per chunk of each file
(rows of the ``access`` or ``events`` table, with their errors), in reading order, the
per-file stats complete once a file's last batch is out. :func:`read_logs` concatenates
the batches into a :class:`~.model.LogSet` (and attaches null event-log sessions,
:class:`StreamSessions`).

Memory stays bounded by the chunk size, not the file size: each file is decompressed
:data:`~.files.CHUNK_BYTES` at a time and only the parsed columns are kept. Chunks are
parsed ``workers`` at a time on threads (polars and numpy release the GIL) while the next
one is read, and handed over in order. A caller that consumes the batches as they come
(aggregates, writes partitions) holds a few chunks at once; :func:`read_logs` holds the
whole tables.
"""

from __future__ import annotations

import re
import time
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Literal

import orjson
import polars as pl

from sse_forensics.errors import ReadError, UnreadableInput
from sse_forensics.ingest.logs import formats as F
from sse_forensics.ingest.logs.access import escape_sample, parse_access_chunk
from sse_forensics.ingest.logs.files import (
    CHUNK_BYTES,
    GZIP_MAGIC,
    ZSTD_MAGIC,
    Chunk,
    expand_log_paths,
    iter_chunks,
    read_head,
)
from sse_forensics.ingest.logs.jsonmap import (
    FieldMap,
    LogMap,
    apply_map,
    choose_access_map,
    decode_json_lines,
    load_log_map,
    match_score,
    too_deep,
)
from sse_forensics.ingest.logs.model import (
    ACCESS_SCHEMA,
    EVENTS_SCHEMA,
    FileStats,
    LogKind,
    LogSet,
    control_type_totals,
    empty_access,
    empty_events,
    own_strings,
    with_start,
)
from sse_forensics.ingest.logs.ranges import LineRange
from sse_forensics.limits import DEFAULT_LIMITS, CapHit, Limits

DEEP = "nested deeper than the json_depth cap"
MAX_SAMPLES_PER_FILE = 20
"""Unreadable lines quoted in ``errors`` per file; all of them are counted."""

_SNIFF_LINES = 20
_PCAP_MAGICS = (b"\xd4\xc3\xb2\xa1", b"\xa1\xb2\xc3\xd4", b"\x4d\x3c\xb2\xa1", b"\xa1\xb2\x3c\x4d")


@dataclass(frozen=True, slots=True)
class Detected:
    """How a file will be read: its kind and the text format or JSON field map."""

    kind: LogKind
    access_format: F.AccessFormat | None = None
    field_map: FieldMap | None = None

    @property
    def format_name(self) -> str:
        if self.access_format is not None:
            return self.access_format.name
        return self.field_map.name if self.field_map is not None else ""


def _first_lines(head: bytes) -> list[str]:
    lines = head.split(b"\n")
    if len(lines) > 1:
        lines.pop()  # probably cut by the head's size
    text = [ln.decode("utf-8", "replace").strip() for ln in lines[: _SNIFF_LINES * 5]]
    return [t for t in text if t][:_SNIFF_LINES]


_HEAD_BYTES = 64 * 1024


def _lines_head(path: str) -> bytes:
    """The first whole lines of ``path``, at least one unless the file has none: a first
    line longer than the head is read whole, one past the ``log_line_bytes`` cap skipped."""
    out = b""
    for chunk in iter_chunks(path, [], chunk_bytes=_HEAD_BYTES):
        out += chunk.data
        if out.count(b"\n") >= _SNIFF_LINES or len(out) >= _HEAD_BYTES:
            break
    return out


def _first_record(lines: list[str]) -> object:
    """The first of ``lines`` that decodes as a JSON object: one record too deep or too
    long to decode (issue 16) does not hide the format of the rest."""
    for line in lines:
        if not line.startswith("{"):
            continue
        try:
            record = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue
        if isinstance(record, dict):
            return record
    return None


def detect(
    path: str, *, access_format: str | F.AccessFormat | None = None, log_map: LogMap | None = None
) -> Detected | str:
    """How to read ``path``, or a sentence saying why it cannot be (for the user)."""
    head = read_head(path)
    if head[:4] in _PCAP_MAGICS or head[:4] == b"\x0a\x0d\x0d\x0a":
        return "a packet capture, not a log"
    if head.startswith((GZIP_MAGIC, ZSTD_MAGIC)):
        return "compressed data that does not decompress"
    if b"\n" not in head and len(head) >= _HEAD_BYTES:
        head = _lines_head(path)  # the first line is longer than the head
    lines = _first_lines(head)
    if not lines:
        return "empty (no line to tell the format from)"
    log_map = log_map or LogMap()
    if lines[0].startswith("{"):
        record = _first_record(lines)
        if isinstance(record, dict):
            if _has_kind(log_map.events, record) and match_score(log_map.events, record) >= 3:
                return Detected("event-log", field_map=log_map.events)
            fmap = log_map.access or choose_access_map(record)
            if fmap is None:
                keys = ", ".join(list(record)[:8])
                return (
                    "JSON lines of no known access or event log (keys: "
                    f"{keys}); map them with --log-map"
                )
            return Detected("access-json", field_map=fmap)
    spec = access_format or log_map.access_format
    candidates = [spec] if spec is not None else list(F.SNIFF_ORDER)
    names = variable_names(log_map)
    formats = [
        c if isinstance(c, F.AccessFormat) else F.compile_format(c, names, strict=spec is not None)
        for c in candidates
    ]
    # The format matching most of the first lines (garbage lines may come first).
    hits = [sum(bool(re.match(f.line_regex(), line)) for line in lines) for f in formats]
    if max(hits) > 0:
        return Detected("access-text", access_format=formats[hits.index(max(hits))])
    if spec is not None:
        return f"line 1 does not match the access format {formats[0].name}: " + formats[0].explain(
            lines[0]
        )
    return (
        "not a known log: the first lines are neither JSON objects nor access-log lines "
        f"of the presets {', '.join(F.SNIFF_ORDER)} (give the format with --log-format)"
    )


def variable_names(log_map: LogMap) -> tuple[F.VariableName, ...]:
    """The ``--log-map`` ``[access]`` entries that can name a text format's variable (a
    single name, not a JSON path): ``session_id = "http_x_session"``."""
    out = []
    for column, rule in log_map.access_names.items():
        if column in ("source", "line", "extra") or column not in ACCESS_SCHEMA:
            continue
        if len(rule.paths) == 1 and len(rule.paths[0]) == 1:
            out.append(F.VariableName(column, str(rule.paths[0][0]), rule.scale))
    return tuple(out)


def _has_kind(fmap: FieldMap, record: dict[str, Any]) -> bool:
    rule = fmap.fields.get("kind")
    return rule is not None and match_score(FieldMap("kind", {"kind": rule}), record) == 1


def sniff_log(path: str, *, access_format: str | None = None) -> LogKind | None:
    """``"access-text"``, ``"access-json"``, ``"event-log"`` or None (not a log this reader
    knows; a capture is told by :func:`sse_forensics.ingest.pcap.sniff_capture`)."""
    try:
        found = detect(path, access_format=access_format)
    except (UnreadableInput, ValueError):
        return None
    return found.kind if isinstance(found, Detected) else None


@dataclass(slots=True)
class LogBatch:
    """One parsed chunk of one file: ``rows`` of the ``access`` table
    (:data:`~.model.ACCESS_SCHEMA`; kinds ``access-text`` and ``access-json``) or of the
    ``events`` table (:data:`~.model.EVENTS_SCHEMA`; kind ``event-log``), in line order.

    ``lines``: the chunk's non-blank lines, ``unreadable`` of them could not be read;
    ``errors``: the sample of those the file's budget still allowed (``max_samples`` per
    file) and, on the file's ``last`` batch, what went wrong with the file itself (a
    truncated ``.gz``). Event rows come as read: a record written before its session
    existed still has ``session`` null (:class:`StreamSessions` attaches it).
    """

    source: str
    kind: LogKind
    rows: pl.DataFrame
    lines: int
    unreadable: int
    errors: list[ReadError]
    first_line: int = 1
    last: bool = False

    @property
    def table(self) -> Literal["access", "events"]:
        """``"access"`` or ``"events"``: the table the rows belong to."""
        return "events" if self.kind == "event-log" else "access"


@dataclass(slots=True)
class _Parsed:
    """What parsing one chunk gave, before the file's bookkeeping: ``samples`` are the
    first ``max_samples`` unreadable lines of the chunk (the file's budget cuts them)."""

    rows: pl.DataFrame
    lines: int
    unreadable: int
    samples: list[ReadError]


def _parse_json_chunk(
    chunk: Chunk,
    source: str,
    found: Detected,
    max_samples: int,
    limits: Limits = DEFAULT_LIMITS,
) -> _Parsed:
    """The chunk's records mapped to rows. When polars cannot put them in one schema
    (a field that is an object in one record and a string in another), each half of the
    chunk is read on its own, down to single lines: a line polars refuses even alone is
    unreadable ("unusable JSON object")."""
    try:
        return _parse_json_lines(chunk, source, found, max_samples, limits)
    except pl.exceptions.PolarsError as exc:
        lines = chunk.rows if chunk.rows >= 0 else len(chunk.data.splitlines())
        if lines <= 1:
            raw = chunk.data.split(b"\n", 1)[0].rstrip(b"\r")
            why = f"unusable JSON object: {str(exc).splitlines()[0][:120]}"
            error = ReadError(source, f"{why}: {escape_sample(raw)}", line=chunk.first_line)
            empty = _empty(found.kind)
            return _Parsed(empty, 1, 1, [error][:max_samples])
    parts = chunk.data.split(b"\n")
    half = len(parts) // 2
    first = Chunk(b"\n".join(parts[:half]) + b"\n", chunk.first_line, half)
    rest = b"\n".join(parts[half:])
    second = Chunk(rest, chunk.first_line + half, rest.count(b"\n") + (not rest.endswith(b"\n")))
    a = _parse_json_chunk(first, source, found, max_samples, limits)
    b = _parse_json_chunk(second, source, found, max_samples, limits)
    samples = sorted(a.samples + b.samples, key=lambda e: e.line or 0)[:max_samples]
    rows = pl.concat([a.rows, b.rows])
    return _Parsed(rows, a.lines + b.lines, a.unreadable + b.unreadable, samples)


def _parse_json_lines(
    chunk: Chunk,
    source: str,
    found: Detected,
    max_samples: int,
    limits: Limits = DEFAULT_LIMITS,
) -> _Parsed:
    assert found.field_map is not None
    schema = EVENTS_SCHEMA if found.kind == "event-log" else ACCESS_SCHEMA
    decoded = decode_json_lines(chunk.data, chunk.first_line, _rows(chunk), found.field_map, schema)
    records, deep = too_deep(decoded.records, chunk.data, chunk.first_line, limits.json_depth)
    mapped, checks = apply_map(records, found.field_map, schema)
    bad = [(chunk.first_line + i, why) for i, why in decoded.bad]
    bad += [(line, DEEP) for line in deep]
    if checks:
        failing = mapped.filter(pl.any_horizontal(checks))
        for line, *flags in failing.select("line", *checks).iter_rows():
            names = [c.removeprefix("__bad_") for c, f in zip(checks, flags, strict=True) if f]
            bad.append((line, f"unreadable {', '.join(names)}"))
        mapped = mapped.filter(~pl.any_horizontal(checks))
    # A column with no value in this chunk leaves as a literal null (one value, not 16
    # bytes a row: a plain chunk decodes every key of the map, present or not).
    # (Not with no row at all: a select of literals only gives one row.)
    present = {n for n in mapped.columns if mapped[n].null_count() < mapped.height}
    present.add("line")
    rows = mapped.select(
        pl.lit(source, pl.String).alias("source"),
        *(
            (pl.col(n) if n in present else pl.lit(None)).cast(t).alias(n)
            for n, t in schema.items()
            if n != "source"
        ),
    ).rechunk()  # `line` is one chunk, the decoded columns are not
    bad.sort()
    samples: list[ReadError] = []
    if bad and max_samples > 0:
        lines = chunk.data.split(b"\n")
        for line, why in bad[:max_samples]:
            raw = lines[line - chunk.first_line].rstrip(b"\r")
            if why == DEEP:
                cut = f"a JSON record nested deeper: {escape_sample(raw)}"
                samples.append(CapHit.of("json_depth", limits, source, cut, "skipped", line=line))
                continue
            samples.append(ReadError(source, f"{why}: {escape_sample(raw)}", line=line))
    return _Parsed(rows, decoded.lines, len(bad), samples)


def _rows(chunk: Chunk) -> int | None:
    return chunk.rows if chunk.rows >= 0 else None


def _parse_chunk(
    chunk: Chunk,
    source: str,
    found: Detected,
    max_samples: int,
    limits: Limits = DEFAULT_LIMITS,
) -> _Parsed:
    """The rows of one chunk, all columns chunked alike (polars copies every column of a
    frame whose columns are chunked apart at its next select: in the caller's hands, or
    when read_logs attaches sessions)."""
    if found.kind != "access-text":
        parsed = _parse_json_chunk(chunk, source, found, max_samples, limits)
        if found.kind == "access-json":
            parsed.rows = with_start(parsed.rows, time_is_start=False)
        return parsed
    assert found.access_format is not None
    fmt = found.access_format
    access = parse_access_chunk(
        fmt,
        chunk.data,
        source=source,
        first_line=chunk.first_line,
        max_samples=max_samples,
        rows=_rows(chunk),
    )
    samples = [
        ReadError(source, f"does not match {fmt.name}: {why}: {text}", line=line)
        for line, why, text in access.samples
    ]
    rows = with_start(access.rows, fmt.time_is_start)
    return _Parsed(rows, access.lines, access.unreadable, samples)


WORKERS = 1
"""Chunks parsed at once by :func:`iter_log_batches` (a batch reader wants bounded memory:
each chunk in flight holds ~6x its size at its peak). One chunk already keeps both cores
busy most of the time (polars splits its work; an access chunk's layout proof runs on a
thread beside its conversions). :func:`read_logs`, whose tables dwarf that, parses
:data:`READ_LOGS_WORKERS` at once to fill the rest."""
READ_LOGS_WORKERS = 2
READ_LOGS_CHUNK_BYTES = 2 * CHUNK_BYTES
""":func:`read_logs`'s chunks: larger, as its tables dwarf them (a little faster)."""


class LogBatches(Iterator[LogBatch]):
    """The batches of :func:`iter_log_batches`, with the bookkeeping of the files read so
    far: ``files`` has one :class:`~.model.FileStats` per file begun (a file's entry is
    final once its ``last`` batch is out; all are final once the iteration ends) and
    ``errors`` every error of the batches out, in order (``read_logs``'s ``errors``)."""

    def __init__(self, batches: Iterator[LogBatch], files: list[FileStats]) -> None:
        self._batches = batches
        self.files = files
        self.errors: list[ReadError] = []

    def __iter__(self) -> LogBatches:
        return self

    def __next__(self) -> LogBatch:
        batch = next(self._batches)
        self.errors.extend(batch.errors)
        return batch

    def close(self) -> None:
        """Stop reading (the files are closed and the parsing threads end)."""
        close = getattr(self._batches, "close", None)
        if close is not None:
            close()


def iter_log_batches(
    paths: list[str],
    *,
    access_format: str | F.AccessFormat | None = None,
    log_map: str | LogMap | None = None,
    chunk_bytes: int = CHUNK_BYTES,
    max_samples: int = MAX_SAMPLES_PER_FILE,
    progress: Callable[[int], None] | None = None,
    workers: int = WORKERS,
    limits: Limits = DEFAULT_LIMITS,
    span: LineRange | None = None,
) -> LogBatches:
    """The logs at ``paths`` chunk by chunk: one :class:`LogBatch` per chunk of each file,
    files in :func:`read_logs`'s order (as given; a directory's or glob's rotated sets
    oldest first) and chunks in line order. ``progress`` gets the decompressed bytes of each
    chunk as it is read. Arguments as :func:`read_logs`'s. ``span``: only those lines of
    the one plain file ``paths`` names (:mod:`.ranges`); its stats and errors are the
    range's (a range that is not the file's first is not checked against the format).

    Every file is detected before anything is read: a file that is no log this reader
    knows raises :class:`UnreadableInput` here. A file whose first chunk has lines but none
    in its format raises it when that chunk is reached (a wrong ``--log-format`` names the
    field where the first line stops matching). A batch's rows are final; only event-log
    ``session`` nulls are left for the caller to fill (:class:`StreamSessions`), since the
    record naming a stream's session may come later. Batches are parsed on threads while
    the caller holds the last one; :meth:`LogBatches.close` stops early.
    """
    files: list[FileStats] = []
    lmap = load_log_map(log_map) if isinstance(log_map, str) else log_map
    if isinstance(access_format, str):
        access_format = F.compile_format(access_format, variable_names(lmap or LogMap()))
    plans: list[tuple[str, Detected]] = []
    for path in expand_log_paths(paths):  # all detected first: a wrong file fails at once
        found = detect(path, access_format=access_format, log_map=lmap)
        if isinstance(found, str):
            raise UnreadableInput(path, found)
        plans.append((path, found))
    batches = _batches(
        plans,
        files,
        chunk_bytes=chunk_bytes,
        max_samples=max_samples,
        progress=progress,
        workers=max(1, workers),
        limits=limits,
        span=span,
    )
    return LogBatches(batches, files)


def iter_log_chunks(
    paths: list[str],
    *,
    access_format: str | F.AccessFormat | None = None,
    log_map: str | LogMap | None = None,
    errors: list[ReadError] | None = None,
    stats: list[FileStats] | None = None,
    chunk_bytes: int = CHUNK_BYTES,
    max_samples: int = MAX_SAMPLES_PER_FILE,
    progress: Callable[[int], None] | None = None,
    workers: int = WORKERS,
) -> Iterator[LogBatch]:
    """:func:`iter_log_batches`, filling ``errors`` and ``stats`` (lists) as it goes."""
    batches = iter_log_batches(
        paths,
        access_format=access_format,
        log_map=log_map,
        chunk_bytes=chunk_bytes,
        max_samples=max_samples,
        progress=progress,
        workers=workers,
    )
    seen = 0
    for batch in batches:
        if errors is not None:
            errors.extend(batch.errors)
        if stats is not None:
            stats.extend(batches.files[seen:])
            seen = len(batches.files)
        yield batch


def _batches(
    plans: list[tuple[str, Detected]],
    files: list[FileStats],
    *,
    chunk_bytes: int,
    max_samples: int,
    progress: Callable[[int], None] | None,
    workers: int,
    limits: Limits = DEFAULT_LIMITS,
    span: LineRange | None = None,
) -> Iterator[LogBatch]:
    with ThreadPoolExecutor(max_workers=workers) as pool:
        for path, found in plans:
            file_stats = FileStats(path, found.kind, found.format_name)
            files.append(file_stats)
            yield from _read_file(
                pool,
                path,
                found,
                file_stats,
                in_flight=workers,
                chunk_bytes=chunk_bytes,
                max_samples=max_samples,
                progress=progress,
                limits=limits,
                span=span,
            )


def _read_file(
    pool: ThreadPoolExecutor,
    path: str,
    found: Detected,
    file_stats: FileStats,
    *,
    in_flight: int,
    chunk_bytes: int,
    max_samples: int,
    progress: Callable[[int], None] | None,
    limits: Limits = DEFAULT_LIMITS,
    span: LineRange | None = None,
) -> Iterator[LogBatch]:
    """Batches of one file (of ``span`` of it), its chunks parsed ``in_flight`` at a time
    while the next one is read, yielded in order. The file's first chunk is awaited alone:
    if none of its lines match, the format is wrong (and nothing more is read)."""
    file_errors: list[ReadError] = []
    pending: deque[tuple[Chunk, Future[_Parsed]]] = deque()
    chunks = iter_chunks(path, file_errors, chunk_bytes=chunk_bytes, limits=limits, span=span)
    budget = max_samples
    checked = span is not None and span.lo > 0
    ended = False
    done = 0

    def read_one() -> None:
        nonlocal ended
        chunk = next(chunks, None)
        if chunk is None:
            ended = True
            return
        file_stats.bytes += len(chunk.data)
        pending.append((chunk, pool.submit(_parse_chunk, chunk, path, found, budget, limits)))
        if progress is not None:
            progress(len(chunk.data))

    try:
        while True:
            while not ended and (not pending or (checked and len(pending) <= in_flight)):
                read_one()
            if not pending:
                break
            chunk, future = pending.popleft()
            result = future.result()
            file_stats.lines += result.lines
            file_stats.rows += result.rows.height
            file_stats.unreadable += result.unreadable
            if found.kind == "event-log":
                file_stats.count_controls(result.rows)
            if not checked and result.lines and not result.rows.height:
                why = result.samples[0].what if result.samples else "no line matches"
                raise UnreadableInput(path, f"no line is {found.format_name}: {why}")
            checked = True
            if not pending and not ended:
                read_one()  # to know whether this batch is the file's last
            kept = result.samples[:budget]
            budget -= len(kept)
            last = ended and not pending
            if last:
                file_stats.truncated = _truncated(file_errors)
                kept = kept + file_errors
            done += 1
            yield LogBatch(
                path,
                found.kind,
                result.rows,
                result.lines,
                result.unreadable,
                kept,
                chunk.first_line,
                last,
            )
        if not done:  # nothing decompressed at all: the file's errors still count
            file_stats.truncated = _truncated(file_errors)
            first = 1 if span is None else span.first_line
            yield LogBatch(path, found.kind, _empty(found.kind), 0, 0, file_errors, first, True)
    finally:
        for _, future in pending:
            future.cancel()


def _truncated(file_errors: list[ReadError]) -> bool:
    """Did the file end before its end (a skipped over-long line is not that)?"""
    return any(getattr(e, "cap", None) != "log_line_bytes" for e in file_errors)


def _empty(kind: LogKind) -> pl.DataFrame:
    return empty_events() if kind == "event-log" else empty_access()


class StreamSessions:
    """Which session each event-log stream belongs to, learned batch by batch: a record
    written before its session existed has ``session`` null and takes the session of its
    stream, as the stream's first record naming one (in reading order) says.

    :func:`read_logs` does this on the whole ``events`` table. A caller of
    :func:`iter_log_batches` that keeps batches apart calls :meth:`learn` on every event
    batch, then :meth:`attach` on each (the naming record may come after a null one)."""

    def __init__(self) -> None:
        self.known = pl.DataFrame(schema={"stream": pl.String, "__session": pl.String})

    def learn(self, events: pl.DataFrame) -> None:
        found = (
            events.select("stream", "session")  # (a filter of all the columns copies them)
            .filter(pl.col("session").is_not_null() & pl.col("stream").is_not_null())
            .group_by("stream", maintain_order=True)
            .agg(pl.col("session").first().alias("__session"))
        )
        if found.height:
            # Its own copy: the batch's strings are let go (:func:`~.model.own_strings`).
            found = own_strings(found.join(self.known, on="stream", how="anti"))
            self.known = pl.concat([self.known, found])

    def attach(self, events: pl.DataFrame) -> pl.DataFrame:
        """``events`` with each null ``session`` taken from its stream, when known."""
        if events.is_empty() or events["session"].null_count() == 0:
            return events
        # A lookup rather than a join: only the session column is new (a join copies all).
        session = pl.col("stream").replace_strict(
            self.known["stream"], self.known["__session"], default=None, return_dtype=pl.String
        )
        return events.with_columns(pl.coalesce("session", session).alias("session"))


def attach_sessions(events: pl.DataFrame) -> pl.DataFrame:
    """A whole ``events`` table with null sessions attached (:class:`StreamSessions`)."""
    if events.is_empty() or events["session"].null_count() == 0:
        return events
    sessions = StreamSessions()
    sessions.learn(events)
    return sessions.attach(events)


def read_logs(
    paths: list[str],
    *,
    access_format: str | F.AccessFormat | None = None,
    log_map: str | LogMap | None = None,
    chunk_bytes: int = READ_LOGS_CHUNK_BYTES,
    max_samples: int = MAX_SAMPLES_PER_FILE,
    progress: Callable[[int], None] | None = None,
) -> LogSet:
    """Read access logs and server event logs into the normalised tables.

    ``paths``: files, directories or globs; every file is detected on its own (text access
    log in ``access_format`` or a preset, JSON access log, event log) and may be plain,
    ``.gz`` or ``.zst``. ``access_format``: ``'nginx:<log_format>'``, ``'apache:<LogFormat>'``
    or a preset name (raises ``ValueError`` when it cannot be compiled). ``log_map``: a
    ``--log-map`` TOML path or a :class:`~.jsonmap.LogMap`. The concatenation of
    :func:`iter_log_batches`.
    """
    started = time.perf_counter()
    batches = iter_log_batches(
        paths,
        access_format=access_format,
        log_map=log_map,
        chunk_bytes=chunk_bytes,
        max_samples=max_samples,
        progress=progress,
        workers=READ_LOGS_WORKERS,
    )
    access: list[pl.DataFrame] = []
    events: list[pl.DataFrame] = []
    for batch in batches:
        (events if batch.table == "events" else access).append(batch.rows)
    access_table = pl.concat(access, rechunk=False) if access else empty_access()
    events_table = attach_sessions(pl.concat(events)) if events else empty_events()
    total = log_stats(batches.files, access_table.height, events_table.height, started)
    return LogSet(access_table, events_table, batches.errors, total)


def log_stats(
    files: list[FileStats], access_rows: int, event_rows: int, started: float
) -> dict[str, object]:
    """The ``stats`` of a log read (:attr:`LogSet.stats`): per file and in total, since
    ``started`` (a ``time.perf_counter()``)."""
    controls, ignored = control_type_totals(files)
    return {
        "files": [s.as_dict() for s in files],
        "bytes": sum(s.bytes for s in files),
        "lines": sum(s.lines for s in files),
        "access_rows": access_rows,
        "event_rows": event_rows,
        "unreadable_lines": sum(s.unreadable for s in files),
        "control_types": controls,
        "ignored_control_types": ignored,
        "seconds": round(time.perf_counter() - started, 3),
    }
