"""JSON-lines logs: field maps from a record's own names to the canonical columns.

A :class:`FieldMap` says, for each canonical column, where its value sits in a record: a
dotted path (``request.headers.Last-Event-Id.0``: keys, and list indexes as numbers),
alternatives tried in order, a ``scale`` (Envoy logs milliseconds, Traefik nanoseconds),
``values`` renaming (``{sent = "written"}``) and ``strip_port`` (``10.0.0.1:5123``).
Presets cover Caddy's default access log, nginx ``escape=json`` formats named after the
variables, Envoy and Traefik; a user's ``--log-map`` TOML file overrides or extends them::

    [access]
    preset = "caddy"                      # optional starting point
    session_id = "request.headers.X-Session.0"
    request_time = { path = "latency_ms", scale = 0.001 }

    [events]
    session = "sid"
    kind = { path = "what", values = { sent = "written", dropped = "evicted" } }

Decoding is vectorised: polars decodes a chunk of lines into one struct column and each
map entry becomes an expression over it. A chunk of *plain* records (the map's keys only,
each once and in one order, strings without escapes, small integers, numbers for number
columns: what a server writing the canonical schema with ``json.dumps`` gives) is decoded
with a schema of the map's keys, after one regex pass proves every line plain
(:func:`_decode_plain`); any other chunk with the union schema of its records, as
inferred (``str.json_decode``), which costs more than the decoding itself. Both give the
same rows. Only a chunk holding a line that is not JSON goes through orjson line by line,
to find which.
"""

from __future__ import annotations

import itertools
import math
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import orjson
import polars as pl

from sse_forensics.ingest.logs.lines import split_lines
from sse_forensics.ingest.logs.model import valid_epoch

if TYPE_CHECKING:
    from polars._typing import PolarsDataType  # a dtype class (pl.String) or instance

Path = tuple[str | int, ...]

# A byte no JSON line holds raw (RFC 8259 §7: control characters are escaped in strings).
_NO_SEPARATOR = "\x1f"
_UTC_US = pl.Datetime("us", "UTC")


@dataclass(frozen=True, slots=True)
class FieldRule:
    """Where one canonical value is found: the first non-null of ``paths``."""

    paths: tuple[Path, ...]
    scale: float | None = None
    values: Mapping[str, str] = field(default_factory=dict)
    strip_port: bool = False


@dataclass(frozen=True, slots=True)
class FieldMap:
    name: str
    fields: Mapping[str, FieldRule]

    def updated(self, name: str, fields: Mapping[str, FieldRule]) -> FieldMap:
        return FieldMap(name, {**self.fields, **fields})


# A list index in a path: more digits than any log's list has items is a typo (and int()
# refuses more than 4,300 digits).
MAX_INDEX_DIGITS = 9


def parse_path(text: str, where: str = "log map") -> Path:
    """``"request.headers.Last-Event-Id.0"`` → ``("request", "headers", "Last-Event-Id", 0)``.
    Raises ``ValueError`` naming ``where`` for an index of more than 9 digits."""
    steps: list[str | int] = []
    for part in text.split("."):
        if not (part.isascii() and part.isdigit()):
            steps.append(part)
        elif len(part) > MAX_INDEX_DIGITS:
            raise ValueError(f"{where}: list index of {len(part)} digits in a path")
        else:
            steps.append(int(part))
    return tuple(steps)


def parse_rule(spec: object, where: str) -> FieldRule:
    """A rule from TOML: a path, a list of alternative paths, or a table with ``path``
    (or ``paths``), ``scale``, ``values``, ``strip_port``."""
    if isinstance(spec, str):
        return FieldRule((parse_path(spec, where),))
    if isinstance(spec, list) and spec and all(isinstance(p, str) for p in spec):
        return FieldRule(tuple(parse_path(p, where) for p in spec))
    if isinstance(spec, dict):
        unknown = set(spec) - {"path", "paths", "scale", "values", "strip_port"}
        paths = spec.get("paths", spec.get("path"))
        if unknown or paths is None:
            raise ValueError(
                f"{where}: expected keys path/paths, scale, values, strip_port; got {sorted(spec)}"
            )
        base = parse_rule(paths, where)
        values = spec.get("values", {})
        if not isinstance(values, dict):
            raise ValueError(f"{where}: values must be a table")
        scale = spec.get("scale")
        if scale is not None and (
            not isinstance(scale, int | float)
            or isinstance(scale, bool)
            or not math.isfinite(scale)
            or scale <= 0
        ):
            raise ValueError(f"{where}: scale must be a finite positive number, not {scale!r}")
        return replace(
            base,
            scale=float(scale) if scale is not None else None,
            values={str(k): str(v) for k, v in values.items()},
            strip_port=bool(spec.get("strip_port", False)),
        )
    raise ValueError(f"{where}: expected a path, a list of paths or a table, got {spec!r}")


def _rules(spec: Mapping[str, object], where: str) -> dict[str, FieldRule]:
    return {k: parse_rule(v, f"{where}.{k}") for k, v in spec.items()}


ACCESS_PRESETS: dict[str, FieldMap] = {
    "caddy": FieldMap(
        "caddy",
        _rules(
            {
                "ts": "ts",
                "client_ip": ["request.client_ip", "request.remote_ip"],
                "method": "request.method",
                "target": "request.uri",
                "protocol": "request.proto",
                "status": "status",
                "bytes_sent": "size",
                "request_time": "duration",
                "last_event_id": [
                    "request.headers.Last-Event-Id.0",
                    "request.headers.Last-Event-ID.0",
                ],
                "session_id": "request.headers.Mcp-Session-Id.0",
                "sent_session_id": "resp_headers.Mcp-Session-Id.0",
                "content_type": "resp_headers.Content-Type.0",
                "user_agent": "request.headers.User-Agent.0",
            },
            "caddy",
        ),
    ),
    "nginx-json": FieldMap(
        "nginx-json",
        _rules(
            {
                "ts": ["time_iso8601", "msec", "time_local"],
                "client_ip": "remote_addr",
                "method": "request_method",
                "target": "request_uri",
                "protocol": "server_protocol",
                "status": "status",
                "bytes_sent": ["body_bytes_sent", "bytes_sent"],
                "request_time": "request_time",
                "last_event_id": "http_last_event_id",
                "session_id": "http_mcp_session_id",
                "sent_session_id": "sent_http_mcp_session_id",
                "content_type": "sent_http_content_type",
                "user_agent": "http_user_agent",
            },
            "nginx-json",
        ),
    ),
    "envoy": FieldMap(
        "envoy",
        _rules(
            {
                "ts": "start_time",
                "start": "start_time",
                "client_ip": {"path": "downstream_remote_address", "strip_port": True},
                "method": "method",
                "target": "path",
                "protocol": "protocol",
                "status": "response_code",
                "bytes_sent": "bytes_sent",
                "request_time": {"path": "duration", "scale": 0.001},
                "last_event_id": "last_event_id",
                "session_id": "mcp_session_id",
                "sent_session_id": "resp_mcp_session_id",
                "content_type": "resp_content_type",
                "user_agent": "user_agent",
            },
            "envoy",
        ),
    ),
    "traefik": FieldMap(
        "traefik",
        _rules(
            {
                "ts": ["StartUTC", "time"],
                "start": "StartUTC",
                "client_ip": "ClientHost",
                "method": "RequestMethod",
                "target": "RequestPath",
                "protocol": "RequestProtocol",
                "status": "DownstreamStatus",
                "bytes_sent": "DownstreamContentSize",
                "request_time": {"path": "Duration", "scale": 1e-9},
                "last_event_id": ["request_Last-Event-Id", "request_Last-Event-ID"],
                "session_id": "request_Mcp-Session-Id",
                "sent_session_id": "downstream_Mcp-Session-Id",
                "content_type": "downstream_Content-Type",
                "user_agent": "request_User-Agent",
            },
            "traefik",
        ),
    ),
}
"""Access-log JSON presets. Envoy and nginx have no fixed JSON format: these use the
names of the variables / command operators (docs/logs.md shows the matching config)."""

EVENTS_MAP = FieldMap(
    "canonical",
    _rules(
        {
            "ts": "ts",
            "session": "session",
            "stream": "stream",
            "event_id": "event_id",
            "kind": "kind",
            "control_type": ["event.type", "event.event"],
            "first": "event.first",
            "last": "event.last",
            "requested": "event.requested",
            "oldest_retained": "event.oldest_retained",
            "last_written_id": "event.last_written_id",
            "data": "event.data",
            "protocol_version": ["event.protocol_version", "event.protocolVersion"],
            "reason": "reason",
            "where": "where",
            "request": "request",
            "last_event_id": "last_event_id",
        },
        "events",
    ),
)
"""The canonical server event-log schema (docs/logs.md), as a field map."""


@dataclass(frozen=True, slots=True)
class LogMap:
    """What a ``--log-map`` file says: the access-log field map (None: pick a preset per
    file), the event-log map, and optionally the text access format."""

    access: FieldMap | None = None
    events: FieldMap = EVENTS_MAP
    access_format: str | None = None
    access_names: Mapping[str, FieldRule] = field(default_factory=dict)  # [access] as given


def load_log_map(path: str) -> LogMap:
    """Read a ``--log-map`` TOML file. Raises ``ValueError`` naming the file and key."""
    try:
        with open(path, "rb") as fh:
            doc = tomllib.load(fh)
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ValueError(f"{path}: {exc}") from exc
    return log_map_from_dict(doc, path)


def log_map_from_dict(doc: Mapping[str, object], where: str = "log map") -> LogMap:
    unknown = set(doc) - {"access", "events"}
    if unknown:
        raise ValueError(f"{where}: unknown section(s) {sorted(unknown)}; use [access], [events]")
    access = None
    access_format = None
    names: dict[str, FieldRule] = {}
    section = doc.get("access")
    if isinstance(section, dict):
        section = dict(section)
        preset = section.pop("preset", None)
        access_format = section.pop("format", None)
        if preset is not None and preset not in ACCESS_PRESETS:
            raise ValueError(
                f"{where}: unknown access preset {preset!r} ({', '.join(ACCESS_PRESETS)})"
            )
        if access_format is not None and not isinstance(access_format, str):
            raise ValueError(f"{where} [access].format: expected a string")
        base = ACCESS_PRESETS[preset] if preset else FieldMap("custom", {})
        names = _rules(section, f"{where} [access]")
        if section or preset:
            access = base.updated(f"{where}", names)
    events = EVENTS_MAP
    section = doc.get("events")
    if isinstance(section, dict):
        events = EVENTS_MAP.updated(where, _rules(section, f"{where} [events]"))
    return LogMap(access, events, access_format, names)


def _has_path(record: object, path: Path) -> bool:
    for step in path:
        if isinstance(step, int) and isinstance(record, list) and step < len(record):
            record = record[step]  # a list item
            continue
        if isinstance(step, str) and isinstance(record, dict) and step in record:
            record = record[step]  # an object member
            continue
        return False
    return record is not None


def match_score(fmap: FieldMap, record: Mapping[str, object]) -> int:
    """How many of ``fmap``'s fields ``record`` has (to pick a preset, or tell an event
    log from an access log)."""
    return sum(any(_has_path(record, p) for p in r.paths) for r in fmap.fields.values())


def choose_access_map(record: Mapping[str, object]) -> FieldMap | None:
    """The preset that finds the most fields in ``record``; None when none finds three."""
    best = max(ACCESS_PRESETS.values(), key=lambda m: match_score(m, record))
    return best if match_score(best, record) >= 3 else None


@dataclass(slots=True)
class DecodedChunk:
    """``records``: the readable lines, with ``line`` and ``__rec`` (a struct column);
    ``lines``: non-blank lines; ``bad``: (row index, reason) of every unreadable one."""

    records: pl.DataFrame
    lines: int
    bad: list[tuple[int, str]]


def decode_json_lines(
    data: bytes,
    first_line: int,
    rows: int | None = None,
    fmap: FieldMap | None = None,
    schema: Mapping[str, PolarsDataType] | None = None,
) -> DecodedChunk:
    """Decode every line of ``data`` that is a JSON object. ``rows``: the number of lines
    in ``data`` (blank ones and a last one without newline included), when known.
    ``fmap`` and ``schema``: the map the records are for and the table it fills; when
    every line is a plain record of the map's keys (:func:`_decode_plain`), the lines are
    decoded with a schema of those keys, else with the union schema of the chunk, as
    inferred (the same rows either way, as :func:`apply_map` makes them)."""
    frame = split_lines(data, _NO_SEPARATOR, 1, rows=rows)
    lines = pl.int_range(first_line, first_line + frame.height, eager=True)
    if fmap is not None and schema is not None and frame["s1"].null_count() == frame.height:
        # Every line plain (blank ones are null here): nothing to strip, nothing to drop.
        records = _decode_plain(frame["s0"], fmap, schema)
        if records is not None:
            out = pl.DataFrame({"line": lines, "__rec": records})
            if records.null_count():
                out = out.filter(pl.col("__rec").is_not_null())
            return DecodedChunk(out, out.height, [])
    text = frame["s0"].str.strip_chars()
    blank = text.is_null() | (text == "")
    candidate = ~blank & text.str.starts_with("{") & frame["s1"].is_null()
    bad: list[tuple[int, str]] = [
        (i, "not a JSON object") for i in (~blank & ~candidate).arg_true().to_list()
    ]
    records, candidate = _decode_inferred(text, candidate, bad)
    out = pl.DataFrame({"line": lines, "__rec": records}).filter(candidate)
    if not isinstance(records.dtype, pl.Struct):
        out = out.clear()
    return DecodedChunk(out, int((~blank).sum()), sorted(bad))


def dtype_depth(dtype: PolarsDataType) -> int:
    """Nesting of a decoded JSON value's type: 0 for a scalar, 1 + its deepest member's
    for a struct or list."""
    if isinstance(dtype, pl.Struct):
        return 1 + max((dtype_depth(f.dtype) for f in dtype.fields), default=0)
    if isinstance(dtype, pl.List | pl.Array):
        return 1 + dtype_depth(dtype.inner)
    return 0


def _value_depth(value: object) -> int:
    """Nesting of one decoded JSON value (iterative: orjson holds at most 1024 levels)."""
    deepest, stack = 0, [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            stack.extend((v, depth + 1) for v in item.values())
        elif isinstance(item, list):
            stack.extend((v, depth + 1) for v in item)
        else:
            deepest = max(deepest, depth)
            continue
        deepest = max(deepest, depth + 1)
    return deepest


def too_deep(
    records: pl.DataFrame, data: bytes, first_line: int, max_depth: int
) -> tuple[pl.DataFrame, list[int]]:
    """``records`` (``line``, ``__rec``) of the chunk ``data`` (its first line numbered
    ``first_line``) without those nested more than ``max_depth`` (the ``json_depth``
    cap), and their line numbers. The chunk's union type says at once whether any record
    can be that deep; only then are its lines measured (orjson)."""
    dtype = records.schema.get("__rec")
    if dtype is None or not records.height or dtype_depth(dtype) <= max_depth:
        return records, []
    lines = data.split(b"\n")
    deep = []
    for line in records.get_column("line").to_list():
        try:
            value = orjson.loads(lines[line - first_line])
        except orjson.JSONDecodeError:
            continue
        if _value_depth(value) > max_depth:
            deep.append(line)
    return records.filter(~pl.col("line").is_in(deep)), deep


def _decode_inferred(
    text: pl.Series, candidate: pl.Series, bad: list[tuple[int, str]]
) -> tuple[pl.Series, pl.Series]:
    """The candidate lines decoded with the union schema of the chunk; a line polars
    cannot decode is found (orjson, only for this chunk), added to ``bad`` and dropped
    from ``candidate``."""
    try:
        records = text.set(~candidate, None).str.json_decode(infer_schema_length=None)
    except pl.exceptions.PolarsError:
        # Some line is not JSON: find which (orjson, only for this chunk), then retry.
        rows = candidate.arg_true().to_list()
        values = text.to_list()
        broken = []
        for i in rows:
            try:
                if not isinstance(orjson.loads(values[i]), dict):
                    broken.append(i)
            except orjson.JSONDecodeError as exc:
                bad.append((i, f"invalid JSON: {exc}"))
                broken.append(i)
        candidate = candidate.scatter(broken, False) if broken else candidate
        try:
            records = text.set(~candidate, None).str.json_decode(infer_schema_length=None)
        except pl.exceptions.PolarsError:
            # Valid JSON polars still refuses (a duplicate key, say): find those lines.
            refused = []
            for i in candidate.arg_true().to_list():
                try:
                    pl.Series([values[i]]).str.json_decode(infer_schema_length=None)
                except pl.exceptions.PolarsError as exc:
                    bad.append((i, f"unusable JSON object: {str(exc).splitlines()[0][:120]}"))
                    refused.append(i)
            candidate = candidate.scatter(refused, False) if refused else candidate
            records = text.set(~candidate, None).str.json_decode(infer_schema_length=None)
    return records, candidate


# The plain decoding (_decode_plain). A record is "plain" when its text matches the
# grammar below: the map's keys, each at most once and in one order, a string without
# escapes (its text is its value), an integer small enough to be exact as a float, null,
# a number for a numeric column, or an object of the map's subkeys, plain too; between
# tokens nothing or one space, as json.dumps writes with either separator setting.
_STR = r'"[^"\\]*"'
_INT = r"(?:0|-?[1-9][0-9]{0,14})"
_NUM = r"-?(?:0|[1-9][0-9]{0,14})(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?"
_SAMPLE = 2000
"""Lines whose key order is learned (orjson) before a chunk is checked against it."""


@dataclass(frozen=True, slots=True)
class _PlainShape:
    """What a map reads from a plain record: ``leaves`` (top-level key → True when it is
    a number column) and ``objects`` (key → its subkeys, one level down)."""

    leaves: dict[str, bool]
    objects: dict[str, tuple[str, ...]]

    def dtype(self) -> pl.Struct:
        fields: dict[str, PolarsDataType] = {}
        for key, number in self.leaves.items():
            fields[key] = pl.Float64 if number else pl.String
        for key, subkeys in self.objects.items():
            fields[key] = pl.Struct(dict.fromkeys(subkeys, pl.String))
        return pl.Struct(fields)


def _plain_shape(fmap: FieldMap, schema: Mapping[str, PolarsDataType]) -> _PlainShape | None:
    leaves: dict[str, bool] = {}
    objects: dict[str, list[str]] = {}
    for column, rule in fmap.fields.items():
        if column not in schema:
            continue
        for path in rule.paths:
            if not all(isinstance(step, str) for step in path) or len(path) > 2:
                return None
            key = str(path[0])
            if len(path) == 1:
                number = schema[column] != pl.String
                if key in objects or leaves.get(key, number) != number:
                    return None
                leaves[key] = number
            else:
                if key in leaves or schema[column] != pl.String:
                    return None
                objects.setdefault(key, []).append(str(path[1]))
    return _PlainShape(leaves, {k: tuple(dict.fromkeys(v)) for k, v in objects.items()})


def _merged_order(sequences: list[list[str]], default: list[str]) -> list[str] | None:
    """One order of ``default``'s keys that every sequence follows (keys no sequence has
    come last, in ``default``'s order); None when the sequences disagree."""
    after: dict[str, set[str]] = {k: set() for k in default}
    before = dict.fromkeys(default, 0)
    seen: set[str] = set()
    for sequence in sequences:
        seen.update(sequence)
        for a, b in itertools.pairwise(sequence):
            if b not in after[a]:
                after[a].add(b)
                before[b] += 1
    rank = {k: i for i, k in enumerate(default)}
    ready = sorted((k for k in seen if not before[k]), key=rank.__getitem__)
    order: list[str] = []
    while ready:
        key = ready.pop(0)
        order.append(key)
        for b in after[key]:
            before[b] -= 1
            if not before[b]:
                ready.append(b)
                ready.sort(key=rank.__getitem__)
    if len(order) != len(seen):  # a cycle: two orders
        return None
    return order + [k for k in default if k not in seen]


def _object_regex(items: list[tuple[str, str]]) -> str:
    """``{`` any of ``items`` (key, value regex), each at most once and in this order,
    ``}``."""
    pairs = [f'"{re.escape(key)}": ?(?:{value})' for key, value in items]
    branches = [
        pairs[i] + "".join(f"(?:, ?{p})?" for p in pairs[i + 1 :]) for i in range(len(pairs))
    ]
    return r"\{(?:" + "|".join(branches) + r")?\}"


def _plain_regex(shape: _PlainShape, top: list[str], subs: dict[str, list[str]]) -> str:
    items = []
    for key in top:
        if key in shape.objects:
            inner = _object_regex([(k, f"{_STR}|{_INT}|null") for k in subs[key]])
            items.append((key, f"{inner}|null"))
        else:
            items.append((key, f"{_NUM}|null" if shape.leaves[key] else f"{_STR}|{_INT}|null"))
    return "^" + _object_regex(items) + "$"


def _decode_plain(
    text: pl.Series, fmap: FieldMap, schema: Mapping[str, PolarsDataType]
) -> pl.Series | None:
    """The lines of ``text`` (nulls: blank lines) decoded with the schema of ``fmap``'s
    keys, when every line is a plain record (see above): the result is then, field by
    field, what :func:`apply_map` makes of the inferred decoding (strings are their
    text, an integer in a string column reads as its decimal text whatever else the
    column holds, numbers in a number column as floats). None otherwise. Several times
    faster than inferring the schema, which costs more than the decoding itself."""
    shape = _plain_shape(fmap, schema)
    if shape is None or not shape.leaves:
        return None
    # Learn the writer's key order from the first lines; keys they lack go last.
    top_seqs: list[list[str]] = []
    sub_seqs: dict[str, list[list[str]]] = {k: [] for k in shape.objects}
    known = set(shape.leaves) | set(shape.objects)
    for line in text.drop_nulls().head(_SAMPLE).to_list():
        try:
            record = orjson.loads(line)
        except orjson.JSONDecodeError:
            return None
        if not isinstance(record, dict) or not known.issuperset(record):
            return None
        top_seqs.append(list(record))
        for key, subkeys in shape.objects.items():
            value = record.get(key)
            if isinstance(value, dict):
                if not set(subkeys).issuperset(value):
                    return None
                sub_seqs[key].append(list(value))
    top = _merged_order(top_seqs, [*shape.leaves, *shape.objects])
    merged = {k: _merged_order(sub_seqs[k], list(v)) for k, v in shape.objects.items()}
    subs = {k: v for k, v in merged.items() if v is not None}
    if top is None or len(subs) != len(merged):
        return None
    # Blanks around a record are JSON whitespace: the inferred path strips them.
    record_regex = _plain_regex(shape, top, subs)
    regex = f"^[ \\t\\r]*{record_regex[1:-1]}[ \\t\\r]*$"
    # Two selects: decoded beside another expression (or as a Series), polars takes the
    # column whole and needs ~3x the memory it needs for it alone, chunk by chunk.
    frame = text.to_frame("t")
    if not frame.select((pl.col("t").str.contains(regex) | pl.col("t").is_null()).all()).item():
        return None
    try:
        return frame.select(pl.col("t").str.json_decode(shape.dtype())).to_series()
    except pl.exceptions.PolarsError:
        return None


def _path_expr(dtype: PolarsDataType, path: Path) -> tuple[pl.Expr, PolarsDataType] | None:
    """``__rec``'s value at ``path``, or None when the chunk's schema has no such path."""
    expr = pl.col("__rec")
    for step in path:
        if isinstance(step, str) and isinstance(dtype, pl.Struct):
            fields = {f.name: f.dtype for f in dtype.fields}
            if step not in fields:
                return None
            expr, dtype = expr.struct.field(step), fields[step]
        elif isinstance(step, int) and isinstance(dtype, pl.List):
            expr, dtype = expr.list.get(step, null_on_oob=True), dtype.inner
        else:
            return None
    return expr, dtype


def _as_string(expr: pl.Expr, dtype: PolarsDataType) -> pl.Expr:
    if isinstance(dtype, pl.Struct | pl.List):
        return (
            expr.struct.json_encode()
            if isinstance(dtype, pl.Struct)
            else expr.cast(pl.String, strict=False)
        )
    if dtype == pl.Float64:
        # A JSON integer too large for i64 decodes as a float; show integers without ".0".
        return (
            pl.when(expr == expr.floor())
            .then(expr.cast(pl.Int64, strict=False).cast(pl.String))
            .otherwise(expr.cast(pl.String))
        )
    return expr.cast(pl.String)


def timestamp(text: pl.Expr) -> pl.Expr:
    """Epoch seconds from a number, a numeric string, RFC 3339 (``Z`` or offset, ``T`` or
    space, any fraction; no offset means UTC) or CLF time."""
    iso = text.str.replace(r"[Zz]$", "+00:00").str.replace(r"^(\S{10}) ", "${1}T")
    parsed = pl.coalesce(
        iso.str.strptime(_UTC_US, "%Y-%m-%dT%H:%M:%S%.f%:z", strict=False),
        iso.str.strptime(
            pl.Datetime("us"), "%Y-%m-%dT%H:%M:%S%.f", strict=False
        ).dt.replace_time_zone("UTC"),
        text.str.strptime(_UTC_US, "%d/%b/%Y:%H:%M:%S %z", strict=False),
    )
    return pl.coalesce(text.cast(pl.Float64, strict=False), parsed.dt.epoch("us") / 1e6)


_TEXT_AS_IS = frozenset({"data"})
"""Columns whose empty text is a value (a priming event's data is ``""``)."""


def apply_map(
    records: pl.DataFrame, fmap: FieldMap, schema: Mapping[str, PolarsDataType]
) -> tuple[pl.DataFrame, list[str]]:
    """The canonical columns of ``schema`` that ``fmap`` maps, plus ``extra`` (the JSON of
    the top-level fields no used path reaches into). Returns the frame and the canonical
    columns that must parse but did not, as ``__bad_<column>`` booleans' names."""
    rec_dtype = records.schema["__rec"]
    exprs: list[pl.Expr] = []
    used_top: set[str] = set()
    checks: list[str] = []
    for column, rule in fmap.fields.items():
        if column not in schema:
            continue
        found = []
        for path in rule.paths:
            hit = _path_expr(rec_dtype, path)
            if hit is not None:
                found.append(hit)
                used_top.add(str(path[0]))
        if not found:
            continue
        target = schema[column]
        if target != pl.String and all(d.is_numeric() for _, d in found):
            # Numbers stay numbers (epoch ts, status, sizes): no detour through text.
            number = pl.coalesce([e.cast(pl.Float64) for e, _ in found])
            scaled = number * rule.scale if rule.scale is not None else number
            # A value the column cannot hold (a status of 1e300) is null, like bad text.
            value = scaled.cast(target, strict=False)
            if column == "ts":
                value = valid_epoch(value)
            exprs.append(value.alias(column))
            if column in ("ts", "status"):
                exprs.append((number.is_not_null() & value.is_null()).alias(f"__bad_{column}"))
                checks.append(f"__bad_{column}")
            continue
        text = pl.coalesce([_as_string(e, d) for e, d in found])
        if column not in _TEXT_AS_IS:
            text = pl.when(~text.is_in(["", "-"])).then(text)
        if rule.strip_port:
            text = text.str.replace(r"^\[(.*)\]:\d+$", "$1").str.replace(r"^([^:]*):\d+$", "$1")
        if rule.values:
            text = text.replace(dict(rule.values))
        if column == "ts":
            value = valid_epoch(timestamp(text))
        elif target == pl.String:
            value = text
        else:
            value = text.cast(pl.Float64, strict=False)
            if rule.scale is not None:
                value = value * rule.scale
            value = value.cast(target, strict=False)
        exprs.append(value.alias(column))
        if column in ("ts", "status"):
            exprs.append((text.is_not_null() & value.is_null()).alias(f"__bad_{column}"))
            checks.append(f"__bad_{column}")
    rest = (
        [f.name for f in rec_dtype.fields if f.name not in used_top]
        if isinstance(rec_dtype, pl.Struct)
        else []
    )
    if rest:
        fields = [pl.col("__rec").struct.field(n) for n in rest]
        encoded = pl.struct(fields).struct.json_encode()
        exprs.append(
            pl.when(pl.any_horizontal(f.is_not_null() for f in fields)).then(encoded).alias("extra")
        )
    return records.with_columns(exprs), checks
