"""Logs as evidence rows: server event-log records and access-log lines become the same
``exchanges`` and ``events`` rows a capture gives, so one fact builder and one rule set judge
both — built with polars expressions over the log tables, never one object per line.

- An **event log** describes each response's events: the records of one stream and one
  HTTP exchange (``request``, else the resume's ``last_event_id``, else the live stream)
  become one event-stream exchange; ``written`` records are its data events, ``control``
  records its signals. ``emitted`` and ``evicted`` records are what no capture can show:
  the producer's order and the events dropped before the socket (``log_info``).
- An **access log** line is one request and its status. A line that describes an exchange
  the event log already gives is merged into it (same session, same ``Last-Event-ID``, the
  line's request interval covering the stream's first record); the rest stand alone, so
  resumes, 410s and storms are still seen with access logs only.

Each exchange sits on a pseudo-connection whose Community ID field reads ``log:…``: stable
across runs, and never mistaken for a TCP flow.
"""

from __future__ import annotations

from dataclasses import dataclass

import orjson
import polars as pl

from sse_forensics.evidence.sessions import explicit_session, inferred_session
from sse_forensics.evidence.tables import (
    ConnectionColumns,
    EventColumns,
    ExchangeColumns,
    put_origin,
)
from sse_forensics.facts.config import AnalysisConfig
from sse_forensics.facts.signals import SIGNAL_EVENT_TYPES, parse_signal
from sse_forensics.provenance import Origin

# An access line is written when the response ends; its request began request_time before.
# Without request_time, a line matches records up to this long before it.
UNTIMED_WINDOW = 3600.0
# $time_local has one-second resolution: a stream may start a second either side of it.
CLOCK_SLACK = 1.0
EVENT_STREAM = "text/event-stream"
LOG_HOST = "log"


def _line_origin(prefix: str) -> list[pl.Expr]:
    """The four origin columns of a log record: its file, line, time (0.0 when unknown)."""
    return [
        pl.col("source").alias(f"{prefix}_src"),
        pl.col("line").alias(f"{prefix}_num"),
        pl.col("ts").fill_null(0.0).alias(f"{prefix}_ts"),
        pl.lit("line").alias(f"{prefix}_kind"),
    ]


def _signal_data() -> pl.Expr:
    """The JSON payload of a control record, as the PROFILE's signal event would carry it."""
    gap = pl.struct(pl.col("first"), pl.col("last")).struct.json_encode()
    resume = pl.struct(pl.col("requested"), pl.col("oldest_retained")).struct.json_encode()
    other = pl.struct(pl.col("last_written_id")).struct.json_encode()
    kind = pl.col("control_type")
    return (
        pl.when(kind == "stream-gap")
        .then(gap)
        .when(kind == "resume-gap")
        .then(resume)
        .otherwise(other)
    )


EVENT_LOG_COLUMNS = [
    "source", "line", "ts", "session", "stream", "event_id", "kind", "control_type",
    "first", "last", "requested", "oldest_retained", "last_written_id", "reason", "where",
    "request", "last_event_id",
]  # fmt: skip
"""The event-log columns evidence is built from (``extra`` is not)."""

ACCESS_LOG_COLUMNS = [
    "source", "line", "ts", "client_ip", "method", "target", "protocol", "status",
    "request_time", "last_event_id", "session_id", "sent_session_id", "content_type",
]  # fmt: skip
"""The access-log columns evidence is built from (plus ``file_no``, the file's place in the
reading order, which orders lines that share a time as the files were given)."""

GROUP_KEYS = ["session", "stream", "exchange_key"]

# The order of event-log groups across the whole scan: by the time of their first record
# (a record without a time as 0.0), then by that record's place in the records sorted by
# (ts, source, line) — nulls last, as the rows are.
GROUP_ORDER = ["order_ts", "first_untimed", "first_ts", "first_src", "first_line"]

# The order of access lines across the whole scan: by time (a line without one last), then
# as the files were read.
LINE_ORDER = ["ts", "file_no", "line"]


def _sorted(events: pl.DataFrame) -> pl.DataFrame:
    """The records in (ts, source, line) order, numbered (``order``)."""
    return events.sort(["ts", "source", "line"], nulls_last=True).with_row_index("order")


def _records(rows: pl.DataFrame) -> pl.DataFrame:
    """The written and control records of :func:`_sorted` rows, with the
    ``exchange_key`` that, with session and stream, names their group."""
    exchange_key = pl.coalesce(
        pl.col("request"),
        pl.lit("resume:") + pl.col("last_event_id"),
        pl.lit("live"),
    )
    return rows.filter(pl.col("kind").is_in(["written", "control"])).with_columns(
        exchange_key.alias("exchange_key")
    )


def _groups(records: pl.DataFrame) -> pl.DataFrame:
    """One row per (session, stream, exchange) group, in :data:`GROUP_ORDER`."""
    return (
        records.group_by(GROUP_KEYS, maintain_order=True)
        .agg(
            pl.col("order").first().alias("first_order"),
            pl.col("ts").first().alias("first_ts"),
            pl.col("source").first().alias("first_src"),
            pl.col("line").first().alias("first_line"),
            pl.col("source").last().alias("last_src"),
            pl.col("line").last().alias("last_line"),
            pl.col("ts").last().alias("last_ts"),
            pl.col("last_event_id").drop_nulls().first().alias("leid"),
        )
        .with_columns(
            pl.col("first_ts").fill_null(0.0).alias("order_ts"),
            pl.col("first_ts").is_null().alias("first_untimed"),
        )
        .sort(GROUP_ORDER, nulls_last=True)
        .with_row_index("group")
    )


def group_order(events: pl.DataFrame) -> pl.DataFrame:
    """The event-log groups of ``events`` (whole sessions) with the columns that place
    them in the scan's order (:data:`GROUP_ORDER`): what numbers their pseudo-connections."""
    if not events.height:
        return pl.DataFrame()
    return _groups(_records(_sorted(events))).select(*GROUP_KEYS, *GROUP_ORDER)


def _event_log_streams(events: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """(groups, records, log_info): one group per (session, stream, exchange) in the order
    of their first record; the written/control records of each; per (session, stream) what
    the log adds beyond them."""
    rows = _sorted(events)
    records = _records(rows)
    groups = _groups(records)
    records = records.join(
        groups.select([*GROUP_KEYS, "group"]), on=GROUP_KEYS, how="left", nulls_equal=True
    ).sort(["group", "order"])
    info = _log_info(rows)
    return groups, records, info


def _log_info(rows: pl.DataFrame) -> pl.DataFrame:
    """Per (session, stream): the producer's order of IDs and the evicted IDs with the
    record that says so and why."""
    keys = ["session", "stream"]
    emitted = (
        rows.filter((pl.col("kind") == "emitted") & pl.col("event_id").is_not_null())
        .group_by(keys, maintain_order=True)
        .agg(pl.col("event_id").alias("emitted"))
    )
    evicted = (
        rows.filter((pl.col("kind") == "evicted") & pl.col("event_id").is_not_null())
        .with_columns(
            pl.concat_str(
                [
                    pl.when(pl.col("reason") != "").then(pl.col("reason")),
                    pl.when(pl.col("where") != "").then(pl.col("where")),
                ],
                separator=" ",
                ignore_nulls=True,
            )
            .fill_null("")
            .alias("why")
        )
        .group_by(keys, maintain_order=True)
        .agg(
            pl.col("event_id").alias("evicted_ids"),
            pl.col("source").alias("evicted_src"),
            pl.col("line").alias("evicted_line"),
            pl.col("ts").fill_null(0.0).alias("evicted_ts"),
            pl.col("why").alias("evicted_why"),
        )
    )
    return emitted.join(evicted, on=keys, how="full", coalesce=True, nulls_equal=True)


def _info_json(row: dict | None, group: dict) -> str:
    evicted: dict[str, list] = {}
    why: dict[str, str] = {}
    row = row or {}
    for eid, src, line, ts, reason in zip(
        row.get("evicted_ids") or [],
        row.get("evicted_src") or [],
        row.get("evicted_line") or [],
        row.get("evicted_ts") or [],
        row.get("evicted_why") or [],
        strict=True,
    ):
        evicted[eid] = [src, line, ts, "line"]  # a later record of the same ID wins
        why[eid] = reason
    return orjson.dumps(
        {
            "emitted": row.get("emitted") or [],
            "evicted": evicted,
            "evicted_why": why,
            "stream": group["stream"] or "",
        }
    ).decode()


def _content_type() -> pl.Expr:
    return (
        pl.col("content_type")
        .fill_null(EVENT_STREAM)
        .str.split(";")
        .list.first()
        .str.strip_chars()
        .str.to_lowercase()
    )


def matchable() -> pl.Expr:
    """Access lines that may describe an event-log stream (:func:`_match_access`): an
    event-stream 200 naming its session in the request header. Only these need the
    session's event-log records; the others are judged by client address alone."""
    return (
        pl.col("session_id").is_not_null()
        & (pl.col("status") == 200)
        & (_content_type() == EVENT_STREAM)
    ).fill_null(False)


def client_expr() -> pl.Expr:
    """The pseudo-connection an unmatched access line sits on: its client address."""
    client = pl.when(pl.col("client_ip").fill_null("") != "").then(pl.col("client_ip"))
    return client.fill_null("-")


def _match_access(access: pl.DataFrame, groups: pl.DataFrame) -> dict[int, int]:
    """access row (``arow``) → event-log group it describes: same session (the request's
    own header: an ``initialize`` line only *sets* it), same ``Last-Event-ID``, an
    event-stream 200, and the line's request start closest to the stream's first record;
    lines in time order, each group taken at most once."""
    end = pl.col("ts").fill_null(0.0)
    start = end - pl.col("request_time").fill_null(UNTIMED_WINDOW)
    lines = access.filter(matchable()).select(
        "arow",
        pl.col("session_id").alias("session"),
        pl.col("last_event_id").alias("leid"),
        start.alias("start"),
        end.alias("end"),
    )
    if not lines.height or not groups.height:
        return {}
    candidates = (
        lines.join(
            groups.select("group", "session", "leid", pl.col("first_ts").fill_null(0.0)),
            on=["session", "leid"],
            how="inner",
            nulls_equal=True,
        )
        .filter(
            (pl.col("first_ts") >= pl.col("start") - CLOCK_SLACK)
            & (pl.col("first_ts") <= pl.col("end") + CLOCK_SLACK)
        )
        .with_columns((pl.col("first_ts") - pl.col("start")).abs().alias("distance"))
        .sort(["arow", "distance", "group"])
    )
    matched: dict[int, int] = {}
    taken: set[int] = set()
    # Greedy in line order over the (few) candidate pairs: a later line cannot take a
    # stream an earlier one matched.
    for arow, group in candidates.select("arow", "group").iter_rows():
        if arow in matched or group in taken:
            continue
        matched[arow] = group
        taken.add(group)
    return matched


@dataclass(slots=True)
class SessionPart:
    """What :func:`session_part` gives for a set of whole sessions."""

    connections: pl.DataFrame
    exchanges: pl.DataFrame
    events: pl.DataFrame
    unmatched: pl.DataFrame  # the access lines no event-log stream took


def session_part(
    events: pl.DataFrame, access: pl.DataFrame, conn_ids: pl.DataFrame
) -> SessionPart:
    """Evidence rows for the event-log records of whole sessions, and the access lines of
    the same sessions that describe them (merged into the stream's exchange). ``conn_ids``
    gives each group (:data:`GROUP_KEYS`) its pseudo-connection, numbered over the whole
    scan (:func:`group_order`); ``access`` carries ``file_no``."""
    access = access.sort(LINE_ORDER, nulls_last=True, maintain_order=True).with_row_index(
        "arow"
    )
    empty = SessionPart(
        ConnectionColumns.frame(),
        ExchangeColumns.frame(),
        EventColumns.frame(),
        access.drop("arow"),
    )
    if not events.height:
        return empty
    groups, records, info = _event_log_streams(events)
    if not groups.height:  # no record was written or a signal (a map read `kind` wrongly)
        return empty
    matched = _match_access(access, groups)
    line_of = {g: a for a, g in matched.items()}
    groups = groups.join(
        conn_ids.select(*GROUP_KEYS, "conn_id"), on=GROUP_KEYS, how="left", nulls_equal=True
    ).sort("group")
    label = (
        pl.col("session").fill_null("None")
        + "/"
        + pl.col("stream").fill_null("None")
        + "/"
        + pl.col("exchange_key")
    )
    info_rows = {(r["session"], r["stream"]): r for r in info.iter_rows(named=True)}
    conn_rows = ConnectionColumns.buffer()
    log_info = []
    for row in groups.with_columns(label.alias("label")).iter_rows(named=True):
        first = Origin(row["first_src"], row["first_line"], row["first_ts"] or 0.0, "line")
        last = Origin(row["last_src"], row["last_line"], row["last_ts"] or 0.0, "line")
        arow = line_of.get(row["group"])  # the access line of this stream names its client
        client = (access["client_ip"][arow] if arow is not None else None) or LOG_HOST
        _append_connection(conn_rows, row["conn_id"], row["label"], client, first, last)
        log_info.append(_info_json(info_rows.get((row["session"], row["stream"])), row))
    groups = groups.with_columns(pl.Series("log_info", log_info, dtype=pl.String))
    return SessionPart(
        ConnectionColumns.frame(conn_rows),
        _event_log_exchanges(groups, access, line_of),
        _event_log_events(records, groups),
        access.filter(~pl.col("arow").is_in(list(matched))).drop("arow"),
    )


def client_order(unmatched: pl.DataFrame) -> pl.DataFrame:
    """Each client address of ``unmatched`` access lines with its first line's place in
    the scan's :data:`LINE_ORDER`: what numbers the access pseudo-connections."""
    return (
        unmatched.with_columns(client_expr().alias("client"))
        .sort(LINE_ORDER, nulls_last=True, maintain_order=True)
        .group_by("client", maintain_order=True)
        .agg(pl.col(c).first() for c in LINE_ORDER)
    )


def client_part(
    unmatched: pl.DataFrame, conn_ids: pl.DataFrame, config: AnalysisConfig
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(connections, exchanges) of access lines that stand alone, every line of each of
    their clients together; ``conn_ids`` numbers the clients over the whole scan
    (:func:`client_order`)."""
    unmatched = unmatched.with_columns(client_expr().alias("client")).sort(
        LINE_ORDER, nulls_last=True, maintain_order=True
    )
    clients = (
        unmatched.group_by("client", maintain_order=True)
        .agg(
            pl.col("source").first().alias("first_src"),
            pl.col("line").first().alias("first_line"),
            pl.col("ts").first().alias("first_ts"),
            pl.col("source").last().alias("last_src"),
            pl.col("line").last().alias("last_line"),
            pl.col("ts").last().alias("last_ts"),
        )
        .join(conn_ids.select("client", "conn_id"), on="client", how="left")
        .sort("conn_id")
    )
    conn_rows = ConnectionColumns.buffer()
    for row in clients.iter_rows(named=True):
        first = Origin(row["first_src"], row["first_line"], row["first_ts"] or 0.0, "line")
        last = Origin(row["last_src"], row["last_line"], row["last_ts"] or 0.0, "line")
        _append_connection(
            conn_rows, row["conn_id"], f"access/{row['client']}", row["client"], first, last
        )
    return ConnectionColumns.frame(conn_rows), _access_exchanges(unmatched, clients, config)


def _append_connection(
    buf: dict[str, list], conn_id: int, label: str, client: str, first: Origin, last: Origin
) -> None:
    buf["conn_id"].append(conn_id)
    buf["community_id"].append(f"log:{label}")
    buf["client_ip"].append(client)
    buf["client_port"].append(0)
    buf["server_ip"].append(LOG_HOST)
    buf["server_port"].append(0)
    buf["from_log"].append(True)
    put_origin(buf, "first", first)
    put_origin(buf, "last", last)
    buf["state"].append(None)


def _event_log_exchanges(
    groups: pl.DataFrame, access: pl.DataFrame, line_of: dict[int, int]
) -> pl.DataFrame:
    """One event-stream exchange per group; the access line that matched it, if any, gives
    the request line, status and where both were logged."""
    line = pl.DataFrame(
        {"group": list(line_of), "arow": list(line_of.values())},
        schema={"group": pl.UInt32, "arow": pl.UInt32},
    ).join(access, on="arow", how="left")
    g = groups.join(line, on="group", how="left", suffix="_line")
    has_line = pl.col("arow").is_not_null()
    first_origin = [
        pl.when(has_line).then(pl.col("source")).otherwise(pl.col("first_src")),
        pl.when(has_line).then(pl.col("line")).otherwise(pl.col("first_line")),
        pl.when(has_line)
        .then(pl.col("ts").fill_null(0.0))
        .otherwise(pl.col("first_ts").fill_null(0.0)),
    ]
    session = pl.col("session")
    session_named = session.is_not_null() & (session.str.strip_chars() != "")
    method_default = pl.when(pl.col("leid").is_not_null()).then(pl.lit("GET")).otherwise(pl.lit(""))
    df = g.select(
        pl.col("conn_id").cast(pl.Int64),
        pl.lit(0, pl.Int64).alias("index"),
        pl.when(session_named)
        .then(session.str.strip_chars())
        .otherwise(pl.lit(inferred_session(LOG_HOST, LOG_HOST, 0)))
        .alias("session"),
        pl.when(session_named)
        .then(pl.lit("header"))
        .otherwise(pl.lit("connection"))
        .alias("session_how"),
        (~session_named).alias("session_inferred"),
        pl.lit(True).alias("from_log"),
        pl.when(has_line & (pl.col("method").fill_null("") != ""))
        .then(pl.col("method"))
        .otherwise(method_default)
        .alias("req_method"),
        pl.when(has_line)
        .then(pl.col("target").fill_null(""))
        .otherwise(pl.lit(""))
        .alias("req_target"),
        pl.when(has_line)
        .then(pl.col("protocol").fill_null(""))
        .otherwise(pl.lit(""))
        .alias("req_version"),
        pl.col("leid").alias("last_event_id"),
        first_origin[0].alias("req_src"),
        first_origin[1].alias("req_num"),
        first_origin[2].alias("req_ts"),
        pl.lit("line").alias("req_kind"),
        pl.lit(False).alias("request_complete"),
        pl.lit(None, pl.String).alias("req_rpc"),
        pl.lit(None, pl.String).alias("protocol_version"),
        pl.when(has_line)
        .then(pl.col("status").fill_null(200))
        .otherwise(pl.lit(200))
        .alias("resp_status"),
        pl.when(has_line)
        .then(pl.lit("(from access log)"))
        .otherwise(pl.lit("(from event log)"))
        .alias("resp_reason"),
        pl.lit("").alias("resp_version"),
        pl.lit(EVENT_STREAM).alias("content_type"),
        pl.lit(None, pl.String).alias("cache_control"),
        pl.lit(True).alias("event_stream"),
        first_origin[0].alias("resp_src"),
        first_origin[1].alias("resp_num"),
        first_origin[2].alias("resp_ts"),
        pl.lit("line").alias("resp_kind"),
        pl.lit(False).alias("head_captured"),
        pl.lit(None, pl.String).alias("json_answers"),
        pl.lit(False).alias("response_complete"),
        pl.lit("log").alias("end_reason"),
        pl.lit(None, pl.String).alias("end_src"),
        pl.lit(None, pl.Int64).alias("end_num"),
        pl.lit(None, pl.Float64).alias("end_ts"),
        pl.lit(None, pl.String).alias("end_kind"),
        pl.col("last_src").alias("body_src"),
        pl.col("last_line").alias("body_num"),
        pl.col("last_ts").fill_null(0.0).alias("body_ts"),
        pl.lit("line").alias("body_kind"),
        pl.lit(0, pl.Int64).alias("body_bytes"),
        pl.lit(b"", pl.Binary).alias("trailing"),
        pl.lit(0, pl.Int64).alias("comments"),
        pl.lit(None, pl.String).alias("holes"),
        pl.col("log_info"),
    )
    return ExchangeColumns.conform(df)


def _event_log_events(records: pl.DataFrame, groups: pl.DataFrame) -> pl.DataFrame:
    """The written and control records of each group as its SSE events: a ``written``
    record is a data event, a ``control`` record a signal; the last-event-ID buffer follows
    the written IDs (WHATWG: an event without ``id`` inherits it)."""
    written = pl.col("kind") == "written"
    sessions = groups.select("group", "conn_id", pl.col("session").alias("group_session"))
    df = records.join(sessions, on="group", how="left").with_columns(
        pl.int_range(pl.len()).over("group").alias("position")
    )
    session_named = pl.col("group_session").is_not_null() & (
        pl.col("group_session").str.strip_chars() != ""
    )
    out = df.select(
        pl.col("conn_id").cast(pl.Int64),
        pl.lit(0, pl.Int64).alias("ex_index"),
        pl.when(session_named)
        .then(pl.col("group_session").str.strip_chars())
        .otherwise(pl.lit(inferred_session(LOG_HOST, LOG_HOST, 0)))
        .alias("session"),
        pl.col("position").cast(pl.Int64),
        pl.when(written & (pl.col("event_id") != ""))
        .then(pl.col("event_id"))
        .otherwise(None)
        .forward_fill()
        .over("group")
        .fill_null("")
        .alias("id"),
        pl.col("event_id").alias("id_field"),
        pl.when(written)
        .then(pl.lit("message"))
        .when(pl.col("control_type").fill_null("") != "")
        .then(pl.col("control_type"))
        .otherwise(pl.lit("control"))
        .alias("event"),
        pl.when(written).then(pl.lit("")).otherwise(_signal_data()).alias("data"),
        pl.lit(None, pl.Int64).alias("retry"),
        pl.col("position").cast(pl.Int64).alias("start"),
        (pl.col("position") + 1).cast(pl.Int64).alias("end"),
        pl.lit(True).alias("dispatched"),
        pl.when(written).then(pl.lit("data")).otherwise(pl.lit("signal")).alias("kind"),
        pl.lit(None, pl.String).alias("rpc_kind"),
        pl.lit(None, pl.String).alias("rpc_method"),
        pl.lit(None, pl.String).alias("rpc_id"),
        pl.lit(None, pl.String).alias("rpc_more"),
        *_line_origin("first"),
        *_line_origin("last"),
    )
    return EventColumns.conform(out.with_columns(_signal_payloads(out)))


def _signal_payloads(events: pl.DataFrame) -> list[pl.Series]:
    """``sig_first``/``sig_last``/``sig_valid`` of the control records that are gap signals,
    read exactly as a signal event on the wire is read (:func:`parse_signal`)."""
    n = events.height
    first: list[str | None] = [None] * n
    last: list[str | None] = [None] * n
    valid: list[bool | None] = [None] * n
    signals = events.with_row_index("i").filter(
        (pl.col("kind") == "signal") & pl.col("event").is_in(list(SIGNAL_EVENT_TYPES))
    )
    for i, event, data in signals.select("i", "event", "data").iter_rows():
        sig = parse_signal(event, data)
        first[i], last[i], valid[i] = sig.first, sig.last, sig.valid
    return [
        pl.Series("sig_first", first, dtype=pl.String),
        pl.Series("sig_last", last, dtype=pl.String),
        pl.Series("sig_valid", valid, dtype=pl.Boolean),
    ]


def _access_exchanges(
    unmatched: pl.DataFrame, clients: pl.DataFrame, config: AnalysisConfig
) -> pl.DataFrame:
    """Access lines that stand alone, on one pseudo-connection per client address (in line
    time order); their sessions attributed as a capture's would be (:mod:`.sessions`)."""
    df = unmatched.join(clients.select("client", "conn_id"), on="client", how="left").with_columns(
        pl.int_range(pl.len()).over("client").alias("index")
    )
    status = pl.col("status").fill_null(0)
    content_type = (
        pl.when(
            pl.col("content_type").is_null()
            & pl.col("last_event_id").is_not_null()
            & (status >= 200)
            & (status < 300)
        )
        .then(pl.lit(EVENT_STREAM))  # a 2xx to Last-Event-ID is an event stream
        .when(pl.col("content_type") != "")
        .then(pl.col("content_type"))
    )
    df = df.with_columns(content_type.alias("ctype"))
    df = df.with_columns(_explicit_sessions(df, config))
    df = df.sort(["conn_id", "index"]).with_columns(
        pl.col("explicit").forward_fill().over("conn_id").alias("ffill"),
        pl.col("explicit").backward_fill().over("conn_id").alias("bfill"),
        pl.col("explicit_how").forward_fill().over("conn_id").alias("ffill_how"),
        pl.col("explicit_how").backward_fill().over("conn_id").alias("bfill_how"),
    )
    named = pl.coalesce("explicit", "ffill", "bfill")
    how = pl.coalesce("explicit_how", "ffill_how", "bfill_how")
    fallback = pl.lit("inferred:") + pl.col("client") + pl.lit(f"->{LOG_HOST}:0")
    line = _line_origin("x")
    out = df.select(
        pl.col("conn_id").cast(pl.Int64),
        pl.col("index").cast(pl.Int64),
        pl.coalesce(named, fallback).alias("session"),
        pl.coalesce(how, pl.lit("connection")).alias("session_how"),
        named.is_null().alias("session_inferred"),
        pl.lit(True).alias("from_log"),
        pl.col("method").fill_null("").alias("req_method"),
        pl.col("target").fill_null("").alias("req_target"),
        pl.col("protocol").fill_null("").alias("req_version"),
        pl.col("last_event_id"),
        line[0].alias("req_src"),
        line[1].alias("req_num"),
        line[2].alias("req_ts"),
        line[3].alias("req_kind"),
        pl.lit(False).alias("request_complete"),
        pl.lit(None, pl.String).alias("req_rpc"),
        pl.lit(None, pl.String).alias("protocol_version"),
        status.alias("resp_status"),
        pl.lit("(from access log)").alias("resp_reason"),
        pl.lit("").alias("resp_version"),
        pl.col("ctype").alias("content_type"),
        pl.lit(None, pl.String).alias("cache_control"),
        (
            pl.col("ctype").str.split(";").list.first().str.strip_chars().str.to_lowercase()
            == EVENT_STREAM
        )
        .fill_null(False)
        .alias("event_stream"),
        line[0].alias("resp_src"),
        line[1].alias("resp_num"),
        line[2].alias("resp_ts"),
        line[3].alias("resp_kind"),
        pl.lit(False).alias("head_captured"),
        pl.lit(None, pl.String).alias("json_answers"),
        pl.lit(False).alias("response_complete"),
        pl.lit("log").alias("end_reason"),
        pl.lit(None, pl.String).alias("end_src"),
        pl.lit(None, pl.Int64).alias("end_num"),
        pl.lit(None, pl.Float64).alias("end_ts"),
        pl.lit(None, pl.String).alias("end_kind"),
        line[0].alias("body_src"),
        line[1].alias("body_num"),
        line[2].alias("body_ts"),
        line[3].alias("body_kind"),
        pl.lit(0, pl.Int64).alias("body_bytes"),
        pl.lit(b"", pl.Binary).alias("trailing"),
        pl.lit(0, pl.Int64).alias("comments"),
        pl.lit(None, pl.String).alias("holes"),
        pl.lit(None, pl.String).alias("log_info"),
    )
    return ExchangeColumns.conform(out)


def _explicit_sessions(df: pl.DataFrame, config: AnalysisConfig) -> list[pl.Expr]:
    """(explicit, explicit_how): the session a line names itself — request header, else
    response header, else the path regex or a query parameter of the target."""
    header = pl.coalesce(
        pl.when(pl.col("session_id").str.strip_chars() != "").then(pl.col("session_id")),
        pl.when(pl.col("sent_session_id").str.strip_chars() != "").then(pl.col("sent_session_id")),
    )
    # The path regex and query parameters are applied with Python's `re` on the distinct
    # targets only (a log repeats a handful of targets millions of times), so the user's
    # pattern means exactly what it means on a capture.
    targets = df.get_column("target").drop_nulls().unique().to_list()
    by_target: dict[str, tuple[str, str]] = {}
    for target in targets:
        found = explicit_session(None, target, (), config)
        if found[0]:
            by_target[target] = found
    if by_target:
        mapping = pl.DataFrame(
            {
                "target": list(by_target),
                "t_session": [v[0] for v in by_target.values()],
                "t_how": [v[1] for v in by_target.values()],
            }
        )
        t_session = pl.col("target").replace_strict(
            mapping["target"], mapping["t_session"], default=None, return_dtype=pl.String
        )
        t_how = pl.col("target").replace_strict(
            mapping["target"], mapping["t_how"], default=None, return_dtype=pl.String
        )
    else:
        t_session = pl.lit(None, pl.String)
        t_how = pl.lit(None, pl.String)
    explicit = pl.coalesce(header.str.strip_chars(), t_session)
    how = pl.when(header.is_not_null()).then(pl.lit("header")).otherwise(t_how)
    return [explicit.alias("explicit"), how.alias("explicit_how")]
