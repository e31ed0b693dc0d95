"""The evidence tables: what reassembly (captures) and the log readers hand to the fact layer,
as columnar batches, each column declared where it is filled.

Each table's row is declared once, as a class of annotated columns; its polars schema is
derived from that declaration and a batch built from anything else (a misspelled column, a
missing one) is refused, instead of silently becoming a column of nulls.

- ``connections``: one row per TCP connection (or per log pseudo-connection);
- ``exchanges``: one row per HTTP exchange (request and final response), carrying the
  session it belongs to — the key the scan is partitioned by;
- ``events``: one row per SSE event block, with its provenance (first and last frame or
  log line).

Origins (``Origin``: file, frame or line number, timestamp) are stored as four flat columns
with a common prefix (``req_src``, ``req_num``, ``req_ts``, ``req_kind``).
"""

from __future__ import annotations

import types
import typing
from collections.abc import Iterable, Mapping
from typing import Any, ClassVar

import polars as pl

from sse_forensics.provenance import Origin

_DTYPES: dict[type, pl.DataType] = {
    str: pl.String(),
    int: pl.Int64(),
    float: pl.Float64(),
    bool: pl.Boolean(),
    bytes: pl.Binary(),
}


def _dtype(annotation: object) -> pl.DataType:
    """``int`` → Int64, ``str | None`` → String (every column is nullable in polars)."""
    if typing.get_origin(annotation) in (types.UnionType, typing.Union):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(args) == 1:
            return _dtype(args[0])
    if isinstance(annotation, type) and annotation in _DTYPES:
        return _DTYPES[annotation]
    raise TypeError(f"no polars type for column annotation {annotation!r}")


class Columns:
    """Base of a table declaration: subclasses list their columns as annotations.

    ``schema()`` is the polars schema in declaration order; ``frame(columns)`` builds a
    DataFrame from a mapping of equally long lists and refuses any other set of names."""

    name: ClassVar[str] = ""
    _schema: ClassVar[dict[str, pl.DataType] | None] = None

    @classmethod
    def schema(cls) -> dict[str, pl.DataType]:
        schema: dict[str, pl.DataType] | None = cls.__dict__.get("_schema")  # this class's own
        if schema is None:
            hints = typing.get_type_hints(cls)
            schema = cls._schema = {
                name: _dtype(hint)
                for name, hint in hints.items()
                if not name.startswith("_") and typing.get_origin(hint) is not ClassVar
            }
        return schema

    @classmethod
    def names(cls) -> list[str]:
        return list(cls.schema())

    @classmethod
    def buffer(cls) -> dict[str, list[Any]]:
        """Empty column lists to append rows to."""
        return {name: [] for name in cls.schema()}

    @classmethod
    def frame(cls, columns: Mapping[str, list[Any]] | None = None) -> pl.DataFrame:
        schema = cls.schema()
        if columns is None:
            return pl.DataFrame(schema=schema)
        if set(columns) != set(schema):
            extra, missing = set(columns) - set(schema), set(schema) - set(columns)
            raise ValueError(
                f"{cls.name}: columns {sorted(extra)} unknown, {sorted(missing)} missing"
            )
        return pl.DataFrame({name: columns[name] for name in schema}, schema=schema)

    @classmethod
    def conform(cls, df: pl.DataFrame) -> pl.DataFrame:
        """``df`` with exactly this table's columns, in order and type (for batches built
        with polars expressions rather than row lists)."""
        schema = cls.schema()
        missing = [n for n in schema if n not in df.columns]
        if missing:
            raise ValueError(f"{cls.name}: batch lacks columns {missing}")
        return df.select([pl.col(n).cast(t) for n, t in schema.items()])


ORIGIN_FIELDS = ("src", "num", "ts", "kind")


def origin_columns(prefix: str) -> list[str]:
    return [f"{prefix}_{f}" for f in ORIGIN_FIELDS]


def put_origin(buf: dict[str, list[Any]], prefix: str, origin: Origin | None) -> None:
    """Append ``origin`` (or nulls) to the four ``prefix_*`` columns of ``buf``."""
    if origin is None:
        for f in ORIGIN_FIELDS:
            buf[f"{prefix}_{f}"].append(None)
        return
    buf[f"{prefix}_src"].append(origin.source)
    buf[f"{prefix}_num"].append(origin.number)
    buf[f"{prefix}_ts"].append(origin.ts)
    buf[f"{prefix}_kind"].append(origin.kind)


def get_origin(row: Mapping[str, Any], prefix: str) -> Origin | None:
    source = row[f"{prefix}_src"]
    if source is None:
        return None
    return Origin(source, row[f"{prefix}_num"], row[f"{prefix}_ts"], row[f"{prefix}_kind"])


class ConnectionColumns(Columns):
    """One TCP connection (or log pseudo-connection) and its first and last frame. ``state``
    holds what only the per-connection views and cause attribution read of a TCP connection
    (expert analysis, FIN/RST origins, missing spans): a serialised
    :class:`~sse_forensics.reassembly.flows.Connection`."""

    name: ClassVar[str] = "connections"
    conn_id: int
    community_id: str
    client_ip: str
    client_port: int
    server_ip: str
    server_port: int
    from_log: bool
    first_src: str
    first_num: int
    first_ts: float
    first_kind: str
    last_src: str
    last_num: int
    last_ts: float
    last_kind: str
    state: bytes | None  # None for a log pseudo-connection: the columns say it all


class ExchangeColumns(Columns):
    """One HTTP exchange. ``session`` is the MCP session it belongs to (docs/profile.md,
    "Sessions and streams"), attributed once at ingest; the partition key."""

    name: ClassVar[str] = "exchanges"
    conn_id: int
    index: int
    session: str
    session_how: str  # header | path | query | connection
    session_inferred: bool
    from_log: bool
    req_method: str | None  # None: the request was not captured
    req_target: str | None
    req_version: str | None
    last_event_id: str | None  # the request's Last-Event-ID header, as sent
    req_src: str | None
    req_num: int | None
    req_ts: float | None
    req_kind: str | None
    request_complete: bool
    req_rpc: str | None  # JSON [[kind, method, rpc_id, signature], ...] of the body's messages
    protocol_version: str | None  # from initialize (body or SSE answer) or the version header
    resp_status: int | None  # None: no final response
    resp_reason: str | None
    resp_version: str | None
    content_type: str | None
    cache_control: str | None
    event_stream: bool  # Content-Type text/event-stream (RFC 9110 §8.3: parameters ignored)
    resp_src: str | None
    resp_num: int | None
    resp_ts: float | None
    resp_kind: str | None
    head_captured: bool
    json_answers: str | None  # JSON list of JSON-RPC ids a plain JSON body answered
    response_complete: bool
    end_reason: str | None
    end_src: str | None
    end_num: int | None
    end_ts: float | None
    end_kind: str | None
    body_src: str | None  # origin of the last response body bytes
    body_num: int | None
    body_ts: float | None
    body_kind: str | None
    body_bytes: int
    trailing: bytes
    comments: int  # SSE comment lines (keep-alives)
    holes: str | None  # JSON list of missing-bytes spans inside the response body
    log_info: str | None  # JSON: what a server event log adds (producer order, evictions)


class EventColumns(Columns):
    """One SSE event block (WHATWG §9.2.6) of an event-stream response, with the frames (or
    log lines) that carried its first and last byte."""

    name: ClassVar[str] = "events"
    conn_id: int
    ex_index: int
    session: str
    position: int
    id: str
    id_field: str | None
    event: str
    data: str
    retry: int | None
    start: int
    end: int
    dispatched: bool
    # data | priming | signal | close | other (docs/profile.md, "Events that are not data")
    kind: str
    rpc_kind: str | None  # the first JSON-RPC message of a data event: request | ... | error
    rpc_method: str | None
    rpc_id: str | None
    rpc_more: str | None  # JSON [[kind, method, id], ...] of further messages of a batch
    sig_first: str | None  # what a signal event says (facts.signals.parse_signal)
    sig_last: str | None
    sig_valid: bool | None
    first_src: str | None
    first_num: int | None
    first_ts: float | None
    first_kind: str | None
    last_src: str | None
    last_num: int | None
    last_ts: float | None
    last_kind: str | None


EVIDENCE_TABLES: tuple[type[Columns], ...] = (ConnectionColumns, ExchangeColumns, EventColumns)


def concat(frames: Iterable[pl.DataFrame], table: type[Columns]) -> pl.DataFrame:
    frames = [f for f in frames if f.height]
    return pl.concat(frames, how="vertical") if frames else table.frame()


def split_by(df: pl.DataFrame, column: str, keep_key: bool = True) -> dict[Any, pl.DataFrame]:
    """``df``'s rows grouped by the value of ``column`` (groups in order of first
    appearance, rows in their order; without the column unless ``keep_key``): one query for
    all groups, where polars' ``partition_by(as_dict=True)`` runs one more per group to read
    its key (and a ``drop`` per group one more again)."""
    if not df.height:
        return {}
    key = df.get_column(column)
    if key.null_count() == 0 and key.dtype.is_integer() and key.min() == key.max():
        # One group (a batch of one long stream): the rows as they are, not a copy.
        return {key[0]: df if keep_key else df.drop(column)}
    if keep_key:
        return {part.get_column(column)[0]: part for part in df.partition_by(column)}
    keys = df.get_column(column).unique(maintain_order=True).to_list()
    parts = df.partition_by(column, maintain_order=True, include_key=False)
    return dict(zip(keys, parts, strict=True))


def single_response(events: pl.DataFrame, ordered: bool = True) -> tuple[int, int] | None:
    """The (``conn_id``, ``ex_index``) every row of ``events`` belongs to, when there is one
    (and, if ``ordered``, the rows are in ``position`` order): a partition of one long
    stream. Read with expressions, so constant columns stay scalar; else None."""
    if not events.height:
        return None
    row = events.select(
        pl.col("conn_id").min().alias("c0"),
        pl.col("conn_id").max().alias("c1"),
        pl.col("ex_index").min().alias("x0"),
        pl.col("ex_index").max().alias("x1"),
        (pl.col("conn_id").null_count() + pl.col("ex_index").null_count()).alias("nulls"),
    ).row(0)
    c0, c1, x0, x1, nulls = row
    if nulls or c0 != c1 or x0 != x1 or (ordered and not _in_position_order(events)):
        return None
    return int(c0), int(x0)


# Rows :func:`_in_position_order` reads at a time; read when called (a test lowers it).
ORDER_CHECK_ROWS = 1 << 19


def _in_position_order(events: pl.DataFrame) -> bool:
    """Whether ``position`` strictly rises row by row, read :data:`ORDER_CHECK_ROWS` rows
    at a time, each slice from the last row of the one before (issue 16: a stream of ten
    million events holds one slice's differences, not three columns as long as it)."""
    step = ORDER_CHECK_ROWS
    rising = (pl.col("position").diff().fill_null(1) > 0).all()
    for k in range(0, events.height, step):
        at = max(k - 1, 0)
        if not events.slice(at, k + step - at).select(rising).item():
            return False
    return True
