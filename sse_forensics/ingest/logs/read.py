"""Reading a set of log files into a :class:`~.model.LogSet`: detection, chunking, and
the per-file bookkeeping (line numbers, error samples, stats).

Memory stays bounded by the chunk size, not the file size: each file is decompressed and
parsed :data:`~.files.CHUNK_BYTES` at a time (the next chunk is read while polars, which
releases the GIL and uses both cores, parses the last one), and only the parsed columns
are kept. The tables themselves
grow with the number of requests; :func:`iter_log_chunks` hands them over chunk by chunk
for a caller that aggregates instead of keeping every row.
"""

from __future__ import annotations

import re
import time
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

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
)
from sse_forensics.ingest.logs.model import (
    ACCESS_SCHEMA,
    EVENTS_SCHEMA,
    FileStats,
    LogKind,
    LogSet,
    empty_access,
    empty_events,
)

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


def detect(
    path: str, *, access_format: str | F.AccessFormat | None = None, log_map: LogMap | None = None
) -> Detected | str:
    """How to read ``path``, or a sentence saying why it cannot be (for the user)."""
    head = read_head(path)
    if head[:4] in _PCAP_MAGICS or head[:4] == b"\x0a\x0d\x0d\x0a":
        return "a packet capture, not a log"
    if head.startswith((GZIP_MAGIC, ZSTD_MAGIC)):
        return "compressed data that does not decompress"
    lines = _first_lines(head)
    if not lines:
        return "empty (no line to tell the format from)"
    log_map = log_map or LogMap()
    if lines[0].startswith("{"):
        try:
            record = orjson.loads(lines[0])
        except orjson.JSONDecodeError:
            record = None
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
    formats = [c if isinstance(c, F.AccessFormat) else F.compile_format(c) for c in candidates]
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


def _has_kind(fmap: FieldMap, record: dict) -> bool:
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
class ChunkRows:
    """What one chunk of one file gave: rows for the ``access`` or ``events`` table."""

    source: str
    kind: LogKind
    rows: pl.DataFrame
    lines: int
    unreadable: int
    samples: list[ReadError]


def _parse_json_chunk(chunk: Chunk, source: str, found: Detected, max_samples: int) -> ChunkRows:
    decoded = decode_json_lines(chunk.data, chunk.first_line, _rows(chunk))
    schema = EVENTS_SCHEMA if found.kind == "event-log" else ACCESS_SCHEMA
    assert found.field_map is not None
    mapped, checks = apply_map(decoded.records, found.field_map, schema)
    bad = [(chunk.first_line + i, why) for i, why in decoded.bad]
    if checks:
        failing = mapped.filter(pl.any_horizontal(checks))
        for line, *flags in failing.select("line", *checks).iter_rows():
            names = [c.removeprefix("__bad_") for c, f in zip(checks, flags, strict=True) if f]
            bad.append((line, f"unreadable {', '.join(names)}"))
        mapped = mapped.filter(~pl.any_horizontal(checks))
    rows = mapped.select(
        pl.lit(source, pl.String).alias("source"),
        *(
            (pl.col(n) if n in mapped.columns else pl.lit(None)).cast(t).alias(n)
            for n, t in schema.items()
            if n != "source"
        ),
    )
    bad.sort()
    samples = []
    if bad and max_samples > 0:
        lines = chunk.data.split(b"\n")
        for line, why in bad[:max_samples]:
            raw = lines[line - chunk.first_line].rstrip(b"\r")
            samples.append(ReadError(source, f"{why}: {escape_sample(raw)}", line=line))
    return ChunkRows(source, found.kind, rows, decoded.lines, len(bad), samples)


def _rows(chunk: Chunk) -> int | None:
    return chunk.rows if chunk.rows >= 0 else None


def _parse_chunk(chunk: Chunk, source: str, found: Detected, max_samples: int) -> ChunkRows:
    if found.kind != "access-text":
        return _parse_json_chunk(chunk, source, found, max_samples)
    assert found.access_format is not None
    fmt = found.access_format
    parsed = parse_access_chunk(
        fmt,
        chunk.data,
        source=source,
        first_line=chunk.first_line,
        max_samples=max_samples,
        rows=_rows(chunk),
    )
    samples = [
        ReadError(source, f"does not match {fmt.name}: {why}: {text}", line=line)
        for line, why, text in parsed.samples
    ]
    return ChunkRows(source, found.kind, parsed.rows, parsed.lines, parsed.unreadable, samples)


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
    workers: int = 1,
) -> Iterator[ChunkRows]:
    """Parsed chunks of every file, in file order (rotated sets oldest first) and line
    order. ``errors`` and ``stats`` are filled in as files are read; ``progress`` gets the
    decompressed bytes of each chunk.

    Raises :class:`UnreadableInput` for a file that is no log this reader knows, or whose
    first chunk has lines but none matching its format (a wrong ``--log-format`` fails
    at once, naming the field where the first line stops matching).
    """
    errors = errors if errors is not None else []
    stats = stats if stats is not None else []
    lmap = load_log_map(log_map) if isinstance(log_map, str) else log_map
    files = expand_log_paths(paths)
    plans: list[Detected] = []
    for path in files:  # all detected first: a wrong file fails before any work
        found = detect(path, access_format=access_format, log_map=lmap)
        if isinstance(found, str):
            raise UnreadableInput(path, found)
        plans.append(found)
    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        for path, found in zip(files, plans, strict=True):
            file_stats = FileStats(path, found.kind, found.format_name)
            stats.append(file_stats)
            yield from _read_file(
                pool,
                path,
                found,
                file_stats,
                errors,
                in_flight=max(1, workers),
                chunk_bytes=chunk_bytes,
                max_samples=max_samples,
                progress=progress,
            )


def _read_file(
    pool: ThreadPoolExecutor,
    path: str,
    found: Detected,
    file_stats: FileStats,
    errors: list[ReadError],
    *,
    in_flight: int,
    chunk_bytes: int,
    max_samples: int,
    progress: Callable[[int], None] | None,
) -> Iterator[ChunkRows]:
    """Chunks of one file parsed ``in_flight`` at a time, yielded in order. The first
    chunk is awaited alone: if none of its lines match, the format is wrong."""
    file_errors: list[ReadError] = []
    pending: deque[Future[ChunkRows]] = deque()
    chunks = iter_chunks(path, file_errors, chunk_bytes=chunk_bytes)
    budget = max_samples
    checked = False
    while True:
        chunk = next(chunks, None)
        if chunk is not None:
            file_stats.bytes += len(chunk.data)
            pending.append(pool.submit(_parse_chunk, chunk, path, found, budget))
            if progress is not None:
                progress(len(chunk.data))
            if checked and len(pending) <= in_flight:
                continue
        if not pending:
            break
        result = pending.popleft().result()
        file_stats.lines += result.lines
        file_stats.rows += result.rows.height
        file_stats.unreadable += result.unreadable
        if not checked and result.lines and not result.rows.height:
            why = result.samples[0].what if result.samples else "no line matches"
            raise UnreadableInput(path, f"no line is {found.format_name}: {why}")
        checked = True
        kept = result.samples[:budget]
        budget -= len(kept)
        errors.extend(kept)
        yield result
    file_stats.truncated = bool(file_errors)
    errors.extend(file_errors)


def _attach_sessions(events: pl.DataFrame) -> pl.DataFrame:
    """A record written before its session existed has ``session`` null: it takes the
    session of its stream, as the other records of that stream name it."""
    if events.is_empty() or events["session"].null_count() == 0:
        return events
    known = (
        events.filter(pl.col("session").is_not_null() & pl.col("stream").is_not_null())
        .group_by("stream")
        .agg(pl.col("session").first().alias("__session"))
    )
    return (
        events.join(known, on="stream", how="left", maintain_order="left")
        .with_columns(pl.coalesce("session", "__session").alias("session"))
        .drop("__session")
    )


def read_logs(
    paths: list[str],
    *,
    access_format: str | F.AccessFormat | None = None,
    log_map: str | LogMap | None = None,
    chunk_bytes: int = CHUNK_BYTES,
    max_samples: int = MAX_SAMPLES_PER_FILE,
    progress: Callable[[int], None] | None = None,
) -> LogSet:
    """Read access logs and server event logs into the normalised tables.

    ``paths``: files, directories or globs; every file is detected on its own (text access
    log in ``access_format`` or a preset, JSON access log, event log) and may be plain,
    ``.gz`` or ``.zst``. ``access_format``: ``'nginx:<log_format>'``, ``'apache:<LogFormat>'``
    or a preset name (raises ``ValueError`` when it cannot be compiled). ``log_map``: a
    ``--log-map`` TOML path or a :class:`~.jsonmap.LogMap`.
    """
    started = time.perf_counter()
    errors: list[ReadError] = []
    stats: list[FileStats] = []
    if isinstance(access_format, str):
        access_format = F.compile_format(access_format)
    access: list[pl.DataFrame] = []
    events: list[pl.DataFrame] = []
    for part in iter_log_chunks(
        paths,
        access_format=access_format,
        log_map=log_map,
        errors=errors,
        stats=stats,
        chunk_bytes=chunk_bytes,
        max_samples=max_samples,
        progress=progress,
    ):
        (events if part.kind == "event-log" else access).append(part.rows)
    access_table = pl.concat(access, rechunk=False) if access else empty_access()
    events_table = _attach_sessions(pl.concat(events)) if events else empty_events()
    total = {
        "files": [s.as_dict() for s in stats],
        "bytes": sum(s.bytes for s in stats),
        "lines": sum(s.lines for s in stats),
        "access_rows": access_table.height,
        "event_rows": events_table.height,
        "unreadable_lines": sum(s.unreadable for s in stats),
        "seconds": round(time.perf_counter() - started, 3),
    }
    return LogSet(access_table, events_table, errors, total)
