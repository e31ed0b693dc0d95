"""Text access logs (nginx ``log_format``, Apache ``LogFormat``) → the ``access`` table.

Sans-I/O: :func:`parse_access_chunk` takes the bytes of whole lines and returns rows; the
caller (:mod:`.read`) owns the files.

How it is fast: polars reads the chunk as CSV with ``"`` as the *separator* and no quote
character, so each line becomes one row whatever it holds (no quote can swallow a newline,
no escape can fail the read) and each quoted value lands in its own column in one
multi-threaded pass. Only segments holding several variables (``$remote_addr - $remote_user
[$time_local]``) go through a regex, on that short column. A line holds exactly
``format.quotes`` quotes; the chunk's total is checked with one ``bytes.count`` and, only
when it is off, per line with numpy. Apache's ``\\"`` escapes are rewritten to nginx's
``\\x22`` before the read, so both dialects split the same way.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import polars as pl

from sse_forensics.ingest.logs import formats as F
from sse_forensics.ingest.logs.lines import split_lines
from sse_forensics.ingest.logs.model import ACCESS_SCHEMA

SAMPLE_BYTES = 200
"""How much of an unreadable line an error quotes."""

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
    return value.str.replace_all(r"\x22", '"', literal=True).str.replace_all(
        r"\x5C", "\\", literal=True
    )


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
    # memchr for one byte is far faster than a two-byte substring search.
    escaped = b"\\" in data and b"\\x" in data
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
    columns: dict[str, pl.Expr] = {}
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
            parts = raw.str.splitn(" ", 3)
            columns["__request"] = parts
            continue
        value = _convert(raw, var.convert)
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
    frame = frame.with_columns(
        pl.all_horizontal(checks).alias("__ok"),
        (pl.int_range(pl.len()) + first_line).alias("line"),
        *(expr.alias(n) for n, expr in columns.items()),
    )
    if "__request" in frame.columns:
        frame = frame.with_columns(
            pl.col("__request").struct.field(f"field_{k}").alias(part)
            for k, part in enumerate(("method", "target", "protocol"))
            if part not in columns
        )
    if "query" in (v.column for v in fmt.variables) and "target" in frame.columns:
        # Apache %U%q: the path and its "?query" are logged apart.
        frame = frame.with_columns(pl.col("target") + _present(pl.col("v:query")).fill_null(""))

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
            text = raw_line.decode("utf-8", "replace")
            samples.append((first_line + i, fmt.explain(text), escape_sample(raw_line)))
    rows = good.select(
        pl.lit(source, pl.String).alias("source"),
        *(
            (pl.col(n) if n in good.columns else pl.lit(None)).cast(t).alias(n)
            for n, t in ACCESS_SCHEMA.items()
            if n != "source"
        ),
    )
    return ParsedChunk(rows, lines, len(bad_index), samples)
