"""Text access logs (nginx ``log_format``, Apache ``LogFormat``) → the ``access`` table.

Sans-I/O: :func:`parse_access_chunk` takes the bytes of whole lines and returns rows; the
caller (:mod:`.read`) owns the files.

Two ways to read a chunk, with the same result:

- **Fields** (the fast path, for formats whose quoted values are whole fields separated
  by single spaces, as all the presets): polars reads the chunk as CSV with ``' '`` as the
  separator and ``"`` as the quote, so every variable is a column of its own after one
  multi-threaded pass, with no splitting afterwards. CSV quoting is only trusted once the
  lines are proven to be laid out as the format says (:func:`_laid_out`, numpy, on a
  thread while polars converts the fields): from the columns' lengths follow each line's
  width and the place of each of its quotes, and the chunk's bytes must hold a newline
  and quotes exactly there and no other quote. ``$time_local`` is parsed without its
  zone (strptime's cache parses each distinct second once) and shifted by the zone,
  computed once. A chunk where the proof or any field's check fails for a single line
  (a quote out of place, two spaces, a ``\\r``, a time strptime refuses) is read by the
  other path, whole: results never depend on the path.
- **Segments** (every format, every line): polars reads the chunk as CSV with ``"`` as the
  *separator* and no quote character, so each line becomes one row whatever it holds (no
  quote can swallow a newline, no escape can fail the read) and each quoted value lands in
  its own column. Segments holding several variables (``$remote_addr - $remote_user
  [$time_local]``) are split at spaces when their shape allows, else matched with a regex
  on that short column. A line holds exactly ``format.quotes`` quotes; the chunk's total
  is checked with one ``bytes.count`` and, only when it is off, per line with numpy.

Apache's ``\\"`` escapes are rewritten to nginx's ``\\x22`` before either read, so both
dialects split the same way. Values are converted by the same expressions on both paths.
"""

from __future__ import annotations

import functools
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

import numpy as np
import polars as pl

from sse_forensics.ingest.logs import formats as F
from sse_forensics.ingest.logs.lines import read_as_compressed, split_lines
from sse_forensics.ingest.logs.model import ACCESS_SCHEMA, valid_epoch

SAMPLE_BYTES = 200
"""How much of an unreadable line an error quotes."""

T = TypeVar("T")

_CLF_TIME = "%d/%b/%Y:%H:%M:%S %z"
_ISO_TIME = "%Y-%m-%dT%H:%M:%S%.f%:z"
_UTC_US = pl.Datetime("us", "UTC")


@dataclass(slots=True)
class ParsedChunk:
    """Rows of :data:`ACCESS_SCHEMA` for the readable lines of a chunk, how many non-blank
    lines it had, how many could not be read, and ``(line, reason, text)`` for the first
    few of those."""

    rows: pl.DataFrame
    lines: int
    unreadable: int
    samples: list[tuple[int, str, str]] = field(default_factory=list)


def escape_sample(raw: bytes) -> str:
    """The first :data:`SAMPLE_BYTES` of a line, printable: non-ASCII and control bytes
    as ``\\xHH``."""
    return (
        raw[:SAMPLE_BYTES]
        .decode("ascii", "backslashreplace")
        .encode("unicode_escape")
        .decode("ascii")
        .replace("\\\\x", "\\x")
    )


def _quote_counts(data: bytes, rows: int) -> np.ndarray:
    """``"`` per line, vectorised: each quote's line is the number of newlines before it."""
    buf = np.frombuffer(data, dtype=np.uint8)
    newlines = np.flatnonzero(buf == ord("\n"))
    quotes = np.flatnonzero(buf == ord('"'))
    return np.bincount(np.searchsorted(newlines, quotes), minlength=rows)[:rows]


def _line_bytes(data: bytes, indices: list[int]) -> list[bytes]:
    buf = np.frombuffer(data, dtype=np.uint8)
    starts = np.concatenate(([0], np.flatnonzero(buf == ord("\n")) + 1))
    out = []
    for i in indices:
        end = data.find(b"\n", int(starts[i]))
        out.append(data[int(starts[i]) : end if end >= 0 else len(data)].rstrip(b"\r"))
    return out


def _present(value: pl.Expr) -> pl.Expr:
    """Both servers write ``-`` for "no value"."""
    return pl.when(value != "-").then(value)


def _unescape(value: pl.Expr) -> pl.Expr:
    # nginx escape=default writes '"' and '\' as \x22 and \x5C (Apache's \" and \\ were
    # rewritten to the same before the read). Other \xHH bytes stay as logged.
    return value.str.replace_many([r"\x22", r"\x5C"], ['"', "\\"])


def _convert(raw: pl.Expr, convert: str) -> pl.Expr:
    if convert == F.INT:
        return raw.cast(pl.Int64, strict=False)
    if convert in (F.SECONDS, F.EPOCH):
        return raw.cast(pl.Float64, strict=False)
    if convert == F.MILLISECONDS:
        return raw.cast(pl.Float64, strict=False) / 1e3
    if convert == F.MICROSECONDS:
        return raw.cast(pl.Float64, strict=False) / 1e6
    if convert in (F.TIME_LOCAL, F.TIME_CLF_BRACKETED):
        text = raw.str.strip_chars("[]") if convert == F.TIME_CLF_BRACKETED else raw
        return text.str.strptime(_UTC_US, _CLF_TIME, strict=False).dt.epoch("us") / 1e6
    if convert == F.TIME_ISO8601:
        text = raw.str.replace(r"Z$", "+00:00")
        return text.str.strptime(_UTC_US, _ISO_TIME, strict=False).dt.epoch("us") / 1e6
    return raw


def parse_access_chunk(
    fmt: F.AccessFormat,
    data: bytes,
    *,
    source: str,
    first_line: int = 1,
    max_samples: int = 20,
    rows: int | None = None,
) -> ParsedChunk:
    """Parse whole lines of an access log written with ``fmt``.

    A line that does not fit the format (wrong number of quotes, a segment that does not
    match, a status or time that is not one) is counted and, up to ``max_samples``,
    returned with the reason :meth:`~.formats.AccessFormat.explain` gives. ``rows``: the
    number of lines in ``data``, when the caller has counted them.
    """
    if not data:
        return ParsedChunk(pl.DataFrame(schema=ACCESS_SCHEMA), 0, 0)
    if fmt.dialect == "apache" and b"\\" in data:
        data = data.replace(b"\\\\", b"\\x5C").replace(b'\\"', b"\\x22")
    if rows is None:
        rows = data.count(b"\n") + (not data.endswith(b"\n"))
    plan = field_plan(fmt)
    if plan is not None:
        parsed = _read_fields(plan, fmt, data, source=source, first_line=first_line, rows=rows)
        if parsed is not None:
            return parsed
    return _read_segments(
        fmt, data, source=source, first_line=first_line, max_samples=max_samples, rows=rows
    )


def _escaped(data: bytes) -> bool:
    # memchr for one byte is far faster than a two-byte substring search.
    return b"\\" in data and b"\\x" in data


def _values(
    fmt: F.AccessFormat, frame: pl.DataFrame, escaped: bool
) -> tuple[dict[str, pl.Expr], list[pl.Expr]]:
    """Stage 2, shared by both paths: each variable's text (column ``v:<column>``) with
    ``-`` as null, escapes undone, converted; and the checks on what must parse."""
    columns: dict[str, pl.Expr] = {}
    checks: list[pl.Expr] = []
    extra: list[pl.Expr] = []
    text_columns = [f"v:{v.column}" for v in fmt.variables if v.convert in (F.STR, F.REQUEST_LINE)]
    if escaped and text_columns:
        # Undo escapes only in the columns that hold some (one cheap pass for all).
        found = frame.select(pl.col(c).str.contains("\\", literal=True).any() for c in text_columns)
        needs_unescape = {c for c in text_columns if found[c][0]}
    else:
        needs_unescape = set()
    for var in fmt.variables:
        raw = _present(pl.col(f"v:{var.column}"))
        if f"v:{var.column}" in needs_unescape:
            raw = _unescape(raw)
        if var.convert == F.REQUEST_LINE:
            columns["__request"] = raw.str.splitn(" ", 3)
            continue
        value = _convert(raw, var.convert)
        if var.column == "ts":
            value = valid_epoch(value)
        if var.column in ("ts", "status") and var.convert != F.STR:
            checks.append(raw.is_null() | value.is_not_null())
        if var.column in ACCESS_SCHEMA:
            columns[var.column] = value
        else:
            extra.append(raw.alias(var.column))
    if extra:
        encoded = pl.struct(extra).struct.json_encode()
        present = pl.any_horizontal(e.is_not_null() for e in extra)
        columns["extra"] = pl.when(present).then(encoded)
    return columns, checks


def _request_parts(frame: pl.DataFrame, columns: dict[str, pl.Expr]) -> pl.DataFrame:
    """``$request`` split into method, target and protocol; Apache's ``%U%q`` joined."""
    if "__request" in frame.columns:
        frame = frame.with_columns(
            pl.col("__request").struct.field(f"field_{k}").alias(part)
            for k, part in enumerate(("method", "target", "protocol"))
            if part not in columns
        )
    return frame


def _with_query(fmt: F.AccessFormat, frame: pl.DataFrame) -> pl.DataFrame:
    if "query" in (v.column for v in fmt.variables) and "target" in frame.columns:
        # Apache %U%q: the path and its "?query" are logged apart.
        frame = frame.with_columns(pl.col("target") + _present(pl.col("v:query")).fill_null(""))
    return frame


def _access_rows(frame: pl.DataFrame, source: str) -> pl.DataFrame:
    return frame.select(
        pl.lit(source, pl.String).alias("source"),
        *(
            (pl.col(n) if n in frame.columns else pl.lit(None)).cast(t).alias(n)
            for n, t in ACCESS_SCHEMA.items()
            if n != "source"
        ),
    )


def _read_segments(
    fmt: F.AccessFormat,
    data: bytes,
    *,
    source: str,
    first_line: int,
    max_samples: int,
    rows: int | None,
) -> ParsedChunk:
    """The segments path (module docstring): every line of any format."""
    escaped = _escaped(data)
    ncols = len(fmt.segments)
    split = split_lines(data, '"', ncols, rows=rows)
    names = split.columns

    # Stage 1: every variable's text in a column "v:<column>". A segment of several
    # variables is split at spaces when its words allow (formats.Segment.words), else
    # matched with its regex; either way a line that does not fit fails a check.
    stage1: list[pl.Expr] = [pl.all_horizontal(pl.col(n).is_null() for n in names).alias("__blank")]
    checks: list[pl.Expr] = [~pl.col("__blank")]
    from_words: list[pl.Expr] = []
    last = ncols - 1
    for i, segment in enumerate(fmt.segments):
        variables = segment.variables
        if not variables:
            continue
        col = pl.col(names[i])
        if segment.direct:
            stage1.append(col.alias(f"v:{variables[0].column}"))
            continue
        words = segment.words()
        if words is None:
            rename = [f"v:{v.column}" for v in variables]
            groups = col.str.extract_groups(segment.regex(last_in_line=i == last))
            stage1.append(groups.struct.rename_fields(rename).alias(f"__seg{i}"))
            checks.append(pl.col(rename[0]).is_not_null())
            continue
        count = sum(w.count for w in words)
        fields = [f"__w{i}_{k}" for k in range(count)]
        stage1.append(col.str.splitn(" ", count).struct.rename_fields(fields).alias(f"__seg{i}"))
        stage1.append((col.str.count_matches(" ", literal=True) == count - 1).alias(f"__wok{i}"))
        checks.append(pl.col(f"__wok{i}"))
        k = 0
        for word in words:
            span = [pl.col(f) for f in fields[k : k + word.count]]
            k += word.count
            if word.variable is None:
                continue
            text = span[0] if len(span) == 1 else pl.concat_str(span, separator=" ")
            if word.prefix:
                checks.append(text.str.starts_with(word.prefix))
                text = text.str.strip_prefix(word.prefix)
            if word.suffix:
                checks.append(text.str.ends_with(word.suffix))
                text = text.str.strip_suffix(word.suffix)
            from_words.append(text.alias(f"v:{word.variable.column}"))
    frame = split.with_columns(stage1)
    frame = frame.unnest([c for c in frame.columns if c.startswith("__seg")])
    if from_words:
        frame = frame.with_columns(from_words)

    # Stage 2: "-" → null, escapes undone, converted; checks on what must parse.
    columns, value_checks = _values(fmt, frame, escaped)
    checks.extend(value_checks)
    frame = frame.with_columns(
        # A check on a segment the line lacks is null: the line does not fit (kept or
        # dropped unreported before, depending on the other lines of its chunk).
        pl.all_horizontal(checks).fill_null(False).alias("__ok"),
        (pl.int_range(pl.len()) + first_line).alias("line"),
        *(expr.alias(n) for n, expr in columns.items()),
    )
    frame = _with_query(fmt, _request_parts(frame, columns))

    blank_count = int(frame["__blank"].sum())
    lines = frame.height - blank_count
    ok = frame["__ok"]
    total_quotes = data.count(b'"')
    sentinel = frame[names[-1]]
    if total_quotes != fmt.quotes * lines or sentinel.null_count() != frame.height:
        counts = _quote_counts(data, frame.height)
        ok = ok & pl.Series(counts == fmt.quotes)
    good = frame if ok.all() else frame.filter(ok)
    bad_index = (~ok & ~frame["__blank"]).arg_true()
    samples: list[tuple[int, str, str]] = []
    if len(bad_index) and max_samples > 0:
        picked = bad_index.head(max_samples).to_list()
        for i, raw_line in zip(picked, _line_bytes(data, picked), strict=True):
            line_text = raw_line.decode("utf-8", "replace")
            samples.append((first_line + i, fmt.explain(line_text), escape_sample(raw_line)))
    table = _access_rows(good, source).rechunk()  # `line` is one chunk, the others are not
    return ParsedChunk(table, lines, len(bad_index), samples)


@dataclass(frozen=True, slots=True)
class FieldPlan:
    """A format as the fields path reads it: ``fields`` space-separated fields per line,
    those at ``quoted`` between quotes; ``direct`` (variable, field) for the quoted values
    and ``words`` (word, its fields) for the variables of the unquoted segments
    (a ``$time_local`` spans two fields)."""

    fields: int
    quoted: tuple[int, ...]
    direct: tuple[tuple[F.Variable, int], ...]
    words: tuple[tuple[F.Word, tuple[int, ...]], ...]


def _is_space(word: F.Word) -> bool:
    """The empty word a segment has where it starts or ends with a space."""
    return word.variable is None and not word.prefix and not word.suffix and word.count == 1


@functools.lru_cache(maxsize=64)
def field_plan(fmt: F.AccessFormat) -> FieldPlan | None:
    """How the fields path reads ``fmt``, or None when it cannot: a quoted segment that is
    more than one variable, text glued to a quote, two spaces in a row, a segment that
    needs its regex (:meth:`~.formats.Segment.words` is None)."""
    last = len(fmt.segments) - 1
    if fmt.quotes % 2:
        return None
    fields = 0
    quoted: list[int] = []
    direct: list[tuple[F.Variable, int]] = []
    words: list[tuple[F.Word, tuple[int, ...]]] = []
    for i, segment in enumerate(fmt.segments):
        if i % 2:  # between quotes: one field, whatever it holds
            if len(segment.tokens) > 1:
                return None
            if segment.variables:
                direct.append((segment.variables[0], fields))
            quoted.append(fields)
            fields += 1
            continue
        if not segment.tokens:  # the line starts or ends with a quote
            if 0 < i < last:
                return None
            continue
        found = segment.words() if not segment.direct else None
        if found is None:
            return None
        parts = list(found)
        if i > 0 and not _is_space(parts.pop(0)):  # a space must follow the quote
            return None
        if i < last and (not parts or not _is_space(parts.pop())):  # ... and precede one
            return None
        for word in parts:
            if _is_space(word):  # an empty word: two spaces in a row
                return None
            span = tuple(range(fields, fields + word.count))
            fields += word.count
            if word.variable is not None:
                words.append((word, span))
    if not fields:
        return None
    return FieldPlan(fields, tuple(quoted), tuple(direct), tuple(words))


_FIELD = "f{}"


@dataclass(frozen=True, slots=True)
class _Layout:
    """What :func:`_laid_out` proved and found on the way: the quoted fields holding a
    backslash somewhere in the chunk, and whether an unquoted one does."""

    escaped: frozenset[int]
    escaped_words: bool


def _laid_out(plan: FieldPlan, frame: pl.DataFrame, data: bytes) -> _Layout | None:
    """Whether every line of ``data`` is exactly its fields in ``frame``, one space apart,
    the quoted ones between quotes, and no other quote anywhere: the CSV reader then split
    each line where the segments path would. Each line's width and the places of its
    quotes follow from the fields' lengths: the newlines must be at those widths, quotes
    at those places, and the chunk must hold no other quote. None when not."""
    buf = np.frombuffer(data, dtype=np.uint8)
    rows = frame.height
    if not rows:
        return None
    sizes = frame.select(pl.col(_FIELD.format(j)).str.len_bytes() for j in range(plan.fields))
    quoted = set(plan.quoted)
    # intp throughout: numpy indexes with it, any other type is converted first (a copy)
    width = np.zeros(rows, dtype=np.intp)
    marks = np.empty((2 * len(plan.quoted), rows), dtype=np.intp)  # each quote's place
    k = 0
    for j in range(plan.fields):
        size = sizes.to_series(j).to_numpy()
        if j in quoted:
            marks[k] = width
            width += size
            width += 1
            marks[k + 1] = width
            width += 1
            k += 2
        else:
            width += size
        width += 1  # the space after the field, or the newline
    starts = np.empty_like(width)
    starts[0] = 0
    np.cumsum(width[:-1], out=starts[1:])
    newlines = starts + width - 1
    if not data.endswith(b"\n"):
        if newlines[-1] != len(data):
            return None
        newlines = newlines[:-1]
    elif newlines[-1] != len(data) - 1:
        return None
    if not np.all(buf[newlines] == ord("\n")):
        return None
    marks += starts
    # Quotes at every expected place, and as many in the chunk as expected: no other.
    # (np.take through the transpose visits the places in the buffer's order: fast.)
    if not np.all(np.take(buf, marks.T) == ord('"')):
        return None
    quotes, at = _scan(buf, backslashes=_escaped(data))
    if quotes != marks.size:
        return None
    if not at.size:
        return _Layout(frozenset(), False)
    # Which fields hold a backslash: its line, then its place among the line's quotes
    # (after an odd number of them: inside a quoted field).
    line = np.searchsorted(starts, at, side="right") - 1
    before = np.count_nonzero(marks[:, line] < at, axis=0)
    inside = before % 2 == 1
    fields = np.unique(before[inside] // 2)
    return _Layout(frozenset(plan.quoted[i] for i in fields), bool((~inside).any()))


_BLOCK = 1 << 18  # numpy temporaries a block at a time, never as large as the chunk


def _scan(buf: np.ndarray, *, backslashes: bool) -> tuple[int, np.ndarray]:
    """The quotes in ``buf`` and (when asked) the places of its backslashes, in one pass
    a block at a time (each block is compared twice while it is in the cache)."""
    quotes = 0
    found = []
    for at in range(0, len(buf), _BLOCK):
        block = buf[at : at + _BLOCK]
        quotes += int(np.count_nonzero(block == ord('"')))
        if backslashes:
            found.append(np.flatnonzero(block == ord("\\")) + at)
    return quotes, np.concatenate(found) if found else np.empty(0, dtype=np.intp)


def _read_fields(
    plan: FieldPlan,
    fmt: F.AccessFormat,
    data: bytes,
    *,
    source: str,
    first_line: int,
    rows: int,
) -> ParsedChunk | None:
    """The fields path (module docstring), or None when a line of the chunk needs the
    segments path (then no line is taken from here)."""
    if b"\r" in data:  # polars reads a \r at a field's end as nothing, in one read only
        return None
    if read_as_compressed(data):  # polars would inflate it: the segments path splits it
        return None
    names = [_FIELD.format(j) for j in range(plan.fields + 1)]
    try:
        frame = pl.read_csv(
            data,
            separator=" ",
            quote_char='"',
            has_header=False,
            schema=dict.fromkeys(names, pl.String),
            truncate_ragged_lines=True,
            missing_columns="insert",
            extra_columns="ignore",
            raise_if_empty=False,
        )
    except pl.exceptions.PolarsError:  # invalid UTF-8, a quote the CSV reader refuses
        return None
    # One row per line, exactly the plan's fields in each (an empty one reads as null, as
    # a blank line does: the segments path reads those).
    if frame.height != rows or frame[names[-1]].null_count() != rows:
        return None
    if any(frame[n].null_count() for n in names[:-1]):
        return None
    # The layout is proven (numpy, on a thread: it releases the GIL) while polars
    # converts the fields; escapes are undone once it tells which fields hold some.
    layout = _Background(_laid_out, plan, frame, data)
    # Every expression below keeps the reader's chunks: polars would otherwise copy every
    # column into one chunk for each select on a frame whose columns are chunked apart.
    zones: dict[str, dict[str, int] | None] = {}
    columns, checks = _field_values(plan, fmt, frame, frozenset(), zones)
    frame = frame.with_columns(expr.alias(n) for n, expr in columns.items())
    # The checks read the fields and the converted columns (``ts`` must have parsed).
    passed = not checks or frame.select(pl.all_horizontal(checks).all()).item()
    found = layout.result()
    if found is None or not passed:
        return None
    escaped = _escaped_columns(plan, found) if _escaped(data) else frozenset()
    if escaped:
        redone, _ = _field_values(plan, fmt, frame, escaped, zones)
        frame = frame.with_columns(redone[n].alias(n) for n in _outputs(fmt, escaped))
    # The rows, in one select: a column with no value in this chunk leaves as a literal
    # null (polars keeps one value, not 16 bytes a row).
    outputs: dict[str, pl.Expr] = {
        n: pl.col(n) for n in columns if frame[n].null_count() < frame.height
    }
    if "__request" in outputs:
        for k, part in enumerate(("method", "target", "protocol")):
            outputs.setdefault(part, pl.col("__request").struct.field(f"field_{k}"))
    if "v:query" in columns and "target" in outputs:
        # Apache %U%q: the path and its "?query" are logged apart.
        outputs["target"] = outputs["target"] + pl.col("v:query").fill_null("")
    outputs["line"] = pl.lit(_line_numbers(frame, first_line))
    table = frame.select(
        pl.lit(source, pl.String).alias("source"),
        *(
            (outputs[n] if n in outputs else pl.lit(None)).cast(t).alias(n)
            for n, t in ACCESS_SCHEMA.items()
            if n != "source"
        ),
    )
    return ParsedChunk(table, table.height, 0)


def _line_numbers(frame: pl.DataFrame, first_line: int) -> pl.Series:
    """``line`` for the rows of ``frame``, in chunks as long as its columns': the rows
    leave in the reader's chunks, all columns alike (no copy into one chunk, and no copy
    at the caller's next select, which aligns columns chunked apart)."""
    numbers = np.arange(first_line, first_line + frame.height, dtype=np.int64)
    chunks, at = [], 0
    for chunk in frame.to_series(0).get_chunks():
        chunks.append(pl.Series("line", numbers[at : at + len(chunk)]))
        at += len(chunk)
    return pl.concat(chunks, rechunk=False)


class _Background(threading.Thread, Generic[T]):
    """``function(*args)`` run on a thread of its own, its result (or exception) handed
    over by :meth:`result`."""

    def __init__(self, function: Callable[..., T], *args: object) -> None:
        super().__init__(daemon=True)
        self._call = (function, args)
        self._value: T | None = None
        self._error: BaseException | None = None
        self.start()

    def run(self) -> None:
        function, args = self._call
        try:
            self._value = function(*args)
        except BaseException as exc:
            self._error = exc

    def result(self) -> T | None:
        self.join()
        if self._error is not None:
            raise self._error
        return self._value


def _outputs(fmt: F.AccessFormat, variables: frozenset[str]) -> set[str]:
    """The columns of :func:`_field_values` that text ``variables`` go into."""
    out = set()
    for var in fmt.variables:
        if var.column in variables and var.convert in (F.STR, F.REQUEST_LINE):
            if var.convert == F.REQUEST_LINE:
                out.add("__request")
            else:
                out.add(var.column if var.column in ACCESS_SCHEMA else "extra")
    return out


def _escaped_columns(plan: FieldPlan, layout: _Layout) -> frozenset[str]:
    """The text variables whose fields hold a backslash: the quoted ones the layout
    names, and every unquoted one when an unquoted field holds one."""
    found = {var.column for var, j in plan.direct if j in layout.escaped}
    if layout.escaped_words:
        found |= {word.variable.column for word, _ in plan.words if word.variable is not None}
    return frozenset(found)


_TZ = re.compile(r"([+-])([01][0-9]|2[0-3])([0-5][0-9])")
_NAIVE_CLF = "%d/%b/%Y:%H:%M:%S"


def _tz_offsets(zones: pl.Series) -> dict[str, int] | None:
    """Microseconds east of UTC of each ``%z`` text, when every one is ``±hhmm`` within
    what ``strptime`` takes (hours below 24, minutes below 60); else None."""
    if zones.len() > 64:
        return None
    offsets = {}
    for zone in zones.to_list():
        m = _TZ.fullmatch(zone) if zone is not None else None
        if m is None:
            return None
        seconds = int(m[2]) * 3600 + int(m[3]) * 60
        offsets[zone] = (seconds if m[1] == "+" else -seconds) * 1_000_000
    return offsets


def _clf_time(
    var: F.Variable,
    word: F.Word,
    date: pl.Expr,
    zone: pl.Expr,
    frame: pl.DataFrame,
    zones: dict[str, dict[str, int] | None],
) -> pl.Expr:
    """``$time_local`` / ``%t`` from its two fields (``[01/Dec/2026:00:04:51`` and
    ``+0000]``) as epoch seconds: the date parsed without its zone (each distinct text once,
    by strptime's cache) minus the zone's offset, computed once per distinct zone (a log
    has one or two). The same value as :func:`_convert` of the joined text; a zone other
    than ``±hhmm`` takes that expression itself. ``zones``: the offsets found, by column."""
    if var.convert == F.TIME_CLF_BRACKETED:  # strip_chars("[]") of the whole text
        date, zone = date.str.strip_chars_start("[]"), zone.str.strip_chars_end("[]")
    else:
        date, zone = date.str.strip_prefix(word.prefix), zone.str.strip_suffix(word.suffix)
    if var.column not in zones:  # (``zones`` keeps them for a second call)
        first = frame.select(zone.first().alias("z"), (zone == zone.first()).all().alias("one"))
        found = first.select("z").to_series()
        if not first["one"][0]:
            found = frame.select(zone.unique()).to_series()  # rarely: a log with two zones
        zones[var.column] = _tz_offsets(found)
    offsets = zones[var.column]
    if offsets is None:
        return _convert(pl.concat_str([date, zone], separator=" "), var.convert)
    naive = date.str.strptime(pl.Datetime("us"), _NAIVE_CLF, strict=False).dt.epoch("us")
    if len(offsets) == 1:
        shift: pl.Expr = pl.lit(next(iter(offsets.values())), pl.Int64)
    else:
        shift = zone.replace_strict(offsets, return_dtype=pl.Int64)
    return (naive - shift) / 1e6


def _field_values(
    plan: FieldPlan,
    fmt: F.AccessFormat,
    frame: pl.DataFrame,
    unescape: frozenset[str],
    zones: dict[str, dict[str, int] | None],
) -> tuple[dict[str, pl.Expr], list[pl.Expr]]:
    """:func:`_values` for the fields path: the same expressions on the same texts, with
    ``$time_local`` parsed from its two fields (:func:`_clf_time`), escapes undone in the
    text variables ``unescape`` names (identity elsewhere, as in :func:`_values`). Returns
    the columns and the checks, named ``__check<k>``, to compute beside them; a check
    reads converted columns rather than converting again (eager selects do not share
    subexpressions)."""
    texts: dict[str, pl.Expr] = {}
    checks: list[pl.Expr] = []
    times: dict[str, tuple[F.Variable, F.Word, pl.Expr, pl.Expr]] = {}
    for var, j in plan.direct:
        texts[var.column] = pl.col(_FIELD.format(j)).replace("", None)  # as the segments path
    for word, span in plan.words:
        variable = word.variable
        assert variable is not None
        parts = [pl.col(_FIELD.format(j)) for j in span]
        if word.prefix:
            checks.append(parts[0].str.starts_with(word.prefix))
        if word.suffix:
            checks.append(parts[-1].str.ends_with(word.suffix))
        if len(parts) == 2 and variable.convert in (F.TIME_LOCAL, F.TIME_CLF_BRACKETED):
            times[variable.column] = (variable, word, parts[0], parts[1])
            continue
        text = parts[0] if len(parts) == 1 else pl.concat_str(parts, separator=" ")
        if word.prefix:
            text = text.str.strip_prefix(word.prefix)
        if word.suffix:
            text = text.str.strip_suffix(word.suffix)
        texts[variable.column] = text
    columns: dict[str, pl.Expr] = {}
    extra: list[pl.Expr] = []
    for var in fmt.variables:
        if var.column in times:
            value = _clf_time(*times[var.column], frame, zones)
            columns[var.column] = valid_epoch(value) if var.column == "ts" else value
            checks.append(pl.col(var.column).is_not_null())
            continue
        raw = texts[var.column].replace("-", None)  # _present, keeping the chunks
        if var.column in unescape and var.convert in (F.STR, F.REQUEST_LINE):
            raw = _unescape(raw)
        if var.convert == F.REQUEST_LINE:
            columns["__request"] = raw.str.splitn(" ", 3)
            continue
        value = _convert(raw, var.convert)
        if var.column == "ts":
            value = valid_epoch(value)
        if var.column in ("ts", "status") and var.convert != F.STR:
            if var.column in ACCESS_SCHEMA:  # the converted column is at hand
                no_value = texts[var.column].replace("-", None).is_null()
                checks.append(no_value | pl.col(var.column).is_not_null())
            else:
                checks.append(raw.is_null() | value.is_not_null())
        if var.column == "query":  # joined to the target as logged (_with_query)
            columns["v:query"] = texts[var.column].replace("-", None)
        if var.column in ACCESS_SCHEMA:
            columns[var.column] = value
        else:
            extra.append(raw.alias(var.column))
    if extra:
        encoded = pl.struct(extra).struct.json_encode()
        present = pl.any_horizontal(e.is_not_null() for e in extra)
        columns["extra"] = pl.when(present).then(encoded)
    return columns, [c.alias(f"__check{k}") for k, c in enumerate(checks)]
