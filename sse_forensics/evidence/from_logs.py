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

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson
import polars as pl

from sse_forensics.evidence import log_records as R
from sse_forensics.evidence.sessions import explicit_session, inferred_session
from sse_forensics.evidence.tables import (
    ConnectionColumns,
    EventColumns,
    ExchangeColumns,
)
from sse_forensics.facts.config import AnalysisConfig
from sse_forensics.facts.signals import SIGNAL_EVENT_TYPES, parse_signal

# An access line is written when the response ends; its request began request_time before.
# Without request_time, a line matches records up to this long before it.
UNTIMED_WINDOW = 3600.0
# $time_local has one-second resolution: a stream may start a second either side of it.
CLOCK_SLACK = 1.0
# $request_time has millisecond resolution, and the server's clock and the proxy's may
# differ a little: a response's records may spread this much more than its duration.
DURATION_SLACK = 0.01
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
    """The payload of a signal record: the ``data`` it wrote (a written record), else the
    JSON a PROFILE signal event would carry, from the record's own fields."""
    gap = pl.struct(pl.col("first"), pl.col("last")).struct.json_encode()
    resume = pl.struct(pl.col("requested"), pl.col("oldest_retained")).struct.json_encode()
    other = pl.struct(pl.col("last_written_id")).struct.json_encode()
    kind = pl.col("ctype")
    fields = (
        pl.when(kind == "stream-gap")
        .then(pl.when(pl.col("first").is_not_null() | pl.col("last").is_not_null()).then(gap))
        .when(kind == "resume-gap")
        .then(
            pl.when(
                pl.col("requested").is_not_null() | pl.col("oldest_retained").is_not_null()
            ).then(resume)
        )
        .when(kind == "backpressure-disconnect")
        .then(pl.when(pl.col("last_written_id").is_not_null()).then(other))
    )
    return pl.coalesce(pl.when(pl.col("data") != "").then(pl.col("data")), fields)


EVENT_LOG_COLUMNS = [
    "source", "line", "ts", "session", "stream", "event_id", "kind", "control_type",
    "first", "last", "requested", "oldest_retained", "last_written_id", "data",
    "protocol_version", "reason", "where", "request", "last_event_id",
]  # fmt: skip
"""The event-log columns evidence is built from (``extra`` is not)."""

ACCESS_LOG_COLUMNS = [
    "source", "line", "ts", "client_ip", "method", "target", "protocol", "status",
    "bytes_sent", "request_time", "start", "last_event_id", "session_id", "sent_session_id",
    "content_type",
]  # fmt: skip
"""The access-log columns evidence is built from (plus ``file_no``, the file's place in the
reading order, which orders lines that share a time as the files were given)."""

GROUP_KEYS = R.GROUP_KEYS
GROUP_ORDER = R.GROUP_ORDER
group_order = R.group_order

# The order of access lines across the whole scan: by when the request began (a line
# without a time last), then as the files were read. An access line is written when the
# response ends, so a long stream's line comes after those of later requests: its place
# in the file says nothing of when it began.
LINE_ORDER = ["t0", "file_no", "line"]


def line_times() -> list[pl.Expr]:
    """``t0`` and ``t1``: when an access line's request began and its response ended, as
    far as the line tells (:func:`_refine_times` narrows them with the event log)."""
    _, end = _line_span()
    return [
        pl.coalesce("start", "ts").alias("t0"),
        pl.when(pl.col("ts").is_not_null()).then(end).alias("t1"),
    ]


@dataclass(slots=True)
class EventLog:
    """What :func:`_event_log_streams` gives for the records of whole sessions."""

    groups: pl.DataFrame  # one row per response (groups_of), with comments and version
    records: pl.DataFrame  # the records that are SSE events, with their group
    info: pl.DataFrame  # per (session, stream): producer order, evictions


def _event_log_streams(events: pl.DataFrame) -> EventLog:
    """The responses the event log describes, the records that are their SSE events (a
    decision the written record of the same signal also shows is left out), and per
    (session, stream) what the log adds beyond them."""
    rows = R.sorted_records(events)
    # What is read of every record (the emitted ones too) first; then only the records
    # that describe a response are held (issue 16: a long stream's records held twice).
    info = _log_info(rows)
    held = [rows]
    del rows
    return streams_of(held, info, ("wire", "wire-signal", "decision"))


def streams_of(held: list[pl.DataFrame], info: pl.DataFrame, roles: tuple[str, ...]) -> EventLog:
    """:func:`_event_log_streams` of the records ``held`` (:func:`.log_records.sorted_records`;
    taken from the list, so that they are let go here) and their ``info``: the records of
    ``roles`` are the SSE events. :mod:`.log_slices` gives a partition's records less its
    written data records, all but those that decide its groups' ends, and hands the
    written ones on itself."""
    rows = held.pop()
    versions = (
        rows.filter((pl.col("role") == "initialize") & pl.col("protocol_version").is_not_null())
        .group_by("session", maintain_order=True)
        .agg(pl.col("protocol_version").first())
    )
    records = R.assign_groups(rows)
    del rows
    groups = R.groups_of(records)
    records = records.join(
        groups.select([*GROUP_KEYS, "group"]), on=GROUP_KEYS, how="left", nulls_equal=True
    )
    # Sorted, and filtered below, only when that changes them: else each a copy of every
    # column of every record (a stream of a million records: issue 16).
    if not _rising(records, "group", "order"):
        records = records.sort(["group", "order"])
    extras = records.group_by("group").agg(
        (pl.col("role") == "keepalive").sum().cast(pl.Int64).alias("comments"),
        pl.col("role").is_in(["wire", "wire-signal"]).any().alias("wrote"),
    )
    groups = groups.join(extras, on="group", how="left").join(
        versions, on="session", how="left", nulls_equal=True
    )
    events_of = pl.col("role").is_in(list(roles)).fill_null(False)
    sse = records if records.select(events_of.all()).item() else records.filter(events_of)
    del records
    sse = _drop_echoed_decisions(sse.with_columns(_signal_data().alias("payload")))
    return EventLog(groups.sort("group"), sse, info)


def _rising(df: pl.DataFrame, major: str, minor: str) -> bool:
    """Each row of ``df`` after the one before in (``major``, ``minor``) order, no value
    null: what sorting it by them would give back unchanged."""
    a, b = pl.col(major), pl.col(minor)
    after = (a > a.shift(1)) | ((a == a.shift(1)) & (b > b.shift(1)))
    return bool(
        df.select(a.is_not_null().all() & b.is_not_null().all() & after.slice(1).all()).item()
    )


def _drop_echoed_decisions(records: pl.DataFrame) -> pl.DataFrame:
    """Signal records with their payload read (``sig_*``), less each decision record
    that a written record of the same signal in the same response also shows — the
    written one is what the client got. A written signal logged without its payload
    takes the decision's."""
    signals = records.with_row_index("i").filter(pl.col("role") != "wire")
    if not signals.height:  # data events only: nothing to read, no record joined (issue 16)
        return records.with_columns(
            pl.lit(None, pl.String).alias("sig_first"),
            pl.lit(None, pl.String).alias("sig_last"),
            pl.lit(None, pl.Boolean).alias("sig_valid"),
        )
    first: list[str | None] = []
    last: list[str | None] = []
    valid: list[bool | None] = []
    for ctype, payload in signals.select("ctype", "payload").iter_rows():
        sig = parse_signal(ctype, payload)
        ok = ctype in SIGNAL_EVENT_TYPES
        first.append(sig.first if ok else None)
        last.append(sig.last if ok else None)
        valid.append(sig.valid if ok else None)
    read = signals.select("i", "group", "ctype", "role", "payload").with_columns(
        pl.Series("sig_first", first, dtype=pl.String),
        pl.Series("sig_last", last, dtype=pl.String),
        pl.Series("sig_valid", valid, dtype=pl.Boolean),
    )
    wire = read.filter(pl.col("role") == "wire-signal")
    decisions = read.filter(pl.col("role") == "decision")
    # A written signal without a readable payload: the first decision of the same kind in
    # its response says what it carried.
    lent = (
        decisions.filter(pl.col("sig_valid").fill_null(False))
        .unique(["group", "ctype"], keep="first", maintain_order=True)
        .select("group", "ctype", "payload", "sig_first", "sig_last", "sig_valid")
    )
    wire = (
        wire.join(lent, on=["group", "ctype"], how="left", suffix="_d")
        .with_columns(
            pl.when(pl.col("sig_valid").fill_null(False) | pl.col("sig_valid_d").is_null())
            .then(pl.col(c))
            .otherwise(pl.col(f"{c}_d"))
            .alias(c)
            for c in ("payload", "sig_first", "sig_last", "sig_valid")
        )
        .select(read.columns)
    )
    # (A close carries no payload: any written close shows a decided one.)
    shown = wire.select("group", "ctype", "sig_first", "sig_last")
    kept = decisions.join(
        shown, on=["group", "ctype", "sig_first", "sig_last"], how="anti", nulls_equal=True
    )
    read = pl.concat([wire, kept]).select(
        "i", "payload", "sig_first", "sig_last", "sig_valid", pl.lit(True).alias("kept")
    )
    return (
        records.with_row_index("i")
        .join(read, on="i", how="left", suffix="_read")
        .filter((pl.col("role") == "wire") | pl.col("kept").fill_null(False))
        .with_columns(pl.coalesce("payload_read", "payload").alias("payload"))
        .drop("i", "payload_read", "kept")
    )


def _log_info(rows: pl.DataFrame) -> pl.DataFrame:
    """Per (session, stream): the producer's order of IDs (priming events left out: they
    carry no message, so no gap is named after one) and the evicted IDs with the record
    that says so and why."""
    keys = ["session", "stream"]
    # Each filter on the few columns it keeps, not on copies of every column of a
    # million records (issue 16).
    ided = rows.select(*keys, "event_id", "kind", "data").filter(pl.col("event_id").is_not_null())
    priming = (
        ided.filter(pl.col("kind").is_in(["emitted", "written"]) & (pl.col("data") == ""))
        .select(*keys, "event_id")
        .unique()
    )
    emitted = ided.filter(pl.col("kind") == "emitted").select(*keys, "event_id")
    if priming.height:
        emitted = emitted.join(priming, on=[*keys, "event_id"], how="anti", nulls_equal=True)
    emitted = emitted.group_by(keys, maintain_order=True).agg(pl.col("event_id").alias("emitted"))
    del ided
    return info_table(emitted, rows.filter(evicted_record()))


def evicted_record() -> pl.Expr:
    """The records :func:`info_table` reads evictions from."""
    return (pl.col("kind") == "evicted") & pl.col("event_id").is_not_null()


def info_table(emitted: pl.DataFrame, evicted_rows: pl.DataFrame) -> pl.DataFrame:
    """:func:`_log_info` of the ``emitted`` IDs per (session, stream) and the eviction
    records."""
    keys = ["session", "stream"]
    evicted = (
        evicted_rows.with_columns(
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


def _group_connections(
    groups: pl.DataFrame, access: pl.DataFrame, line_of: dict[int, int]
) -> pl.DataFrame:
    """One pseudo-connection per event-log group (``label``led), from its first to its
    last record; its client is the address of the access line that describes the stream
    (``line_of``: group → access row), else :data:`LOG_HOST`."""
    lines = pl.DataFrame(
        {"group": list(line_of), "arow": list(line_of.values())},
        schema={"group": groups.schema["group"], "arow": access.schema["arow"]},
    ).join(access.select("arow", "client_ip"), on="arow", how="left")
    client = pl.col("client_ip")

    def origin(prefix: str) -> list[pl.Expr]:
        return [
            pl.col(f"{prefix}_src"),
            pl.col(f"{prefix}_line").alias(f"{prefix}_num"),
            pl.col(f"{prefix}_ts").fill_null(0.0),
            pl.lit("line").alias(f"{prefix}_kind"),
        ]

    return ConnectionColumns.conform(
        groups.join(lines, on="group", how="left", maintain_order="left").select(
            "conn_id",
            (pl.lit("log:") + pl.col("label")).alias("community_id"),
            pl.when(client.is_null() | (client == ""))
            .then(pl.lit(LOG_HOST))
            .otherwise(client)
            .alias("client_ip"),
            pl.lit(0).alias("client_port"),
            pl.lit(LOG_HOST).alias("server_ip"),
            pl.lit(0).alias("server_port"),
            pl.lit(True).alias("from_log"),
            *origin("first"),
            *origin("last"),
            pl.lit(None, pl.Binary).alias("state"),
        )
    )


_EVICTED = ["evicted_ids", "evicted_src", "evicted_line", "evicted_ts", "evicted_why"]


def _log_infos(groups: pl.DataFrame, info: pl.DataFrame) -> pl.Series:
    """``log_info`` of each group (none for a refusal): the JSON of its stream's ``info``
    (:class:`~sse_forensics.facts.model.LogStreamInfo`), the emitted IDs written by polars
    (issue 16: a stream's million IDs were a million Python strings); the evictions, few,
    by :func:`_evicted_json`."""
    keys = ["session", "stream"]
    rows = (
        groups.select(*keys, "refused")
        .with_row_index("__g")
        .join(info, on=keys, how="left", nulls_equal=True)
        .sort("__g")
    )
    evicted = rows.filter(pl.col("evicted_ids").is_not_null()).select("__g", *_EVICTED)
    middle = pl.DataFrame(
        {
            "__g": evicted.get_column("__g"),
            "__evicted": [_evicted_json(*row) for row in evicted.drop("__g").iter_rows()],
        },
        schema={"__g": rows.schema["__g"], "__evicted": pl.String},
    )
    emitted = pl.col("emitted")
    head = (  # {"emitted":[...]  as orjson writes it
        pl.when(emitted.is_null())
        .then(pl.lit('{"emitted":[]'))
        .otherwise(pl.struct(emitted).struct.json_encode().str.strip_suffix("}"))
    )
    tail = pl.struct(pl.col("stream").fill_null("")).struct.json_encode().str.strip_prefix("{")
    text = pl.concat_str(
        head,
        pl.lit(',"evicted":'),
        pl.col("__evicted").fill_null('{},"evicted_why":{}'),
        pl.lit(","),
        tail,
    )
    return (
        rows.join(middle, on="__g", how="left")
        .sort("__g")
        .select(pl.when(~pl.col("refused")).then(text).alias("log_info"))
        .get_column("log_info")
    )


def _evicted_json(
    ids: list[str], srcs: list[str], lines: list[int], tss: list[float], whys: list[str]
) -> str:
    """``"evicted"``'s object, then ``"evicted_why"`` and its object: each ID's eviction
    record (a later record of the same ID wins) and why."""
    evicted: dict[str, list[Any]] = {}
    why: dict[str, str] = {}
    for eid, src, line, ts, reason in zip(ids, srcs, lines, tss, whys, strict=True):
        evicted[eid] = [src, line, ts, "line"]
        why[eid] = reason
    return f'{orjson.dumps(evicted).decode()},"evicted_why":{orjson.dumps(why).decode()}'


def _content_type() -> pl.Expr:
    return (
        pl.col("content_type")
        .fill_null(EVENT_STREAM)
        .str.split(";")
        .list.first()
        .str.strip_chars()
        .str.to_lowercase()
    )


def access_session() -> pl.Expr:
    """The session an access line names: the request's ``Mcp-Session-Id``, else the
    response's (``$sent_http_…``/``$upstream_http_…``: many servers send it on every
    response, and an ``initialize`` answer is where it is set)."""
    named = [
        pl.when(pl.col(c).str.strip_chars() != "").then(pl.col(c).str.strip_chars())
        for c in ("session_id", "sent_session_id")
    ]
    return pl.coalesce(named)


def matchable() -> pl.Expr:
    """Access lines that may describe what the event log also describes
    (:func:`_match_access`): an event-stream 200, or a 410 to a resume, naming its
    session. Only these need the session's event-log records; the others are judged by
    client address alone."""
    stream = (pl.col("status") == 200) & (_content_type() == EVENT_STREAM)
    refusal = (pl.col("status") == 410) & pl.col("last_event_id").is_not_null()
    return (access_session().is_not_null() & (stream | refusal)).fill_null(False)


def client_expr() -> pl.Expr:
    """The pseudo-connection an unmatched access line sits on: its client address."""
    client = pl.when(pl.col("client_ip").fill_null("") != "").then(pl.col("client_ip"))
    return client.fill_null("-")


def _line_span() -> tuple[pl.Expr, pl.Expr]:
    """(start, end) of an access line's request: logged or derived from ``request_time``
    (docs/logs.md, the ``start`` column); a line with no duration spans
    :data:`UNTIMED_WINDOW` before its time."""
    end = pl.coalesce(pl.col("start") + pl.col("request_time"), pl.col("ts")).fill_null(0.0)
    start = pl.coalesce(pl.col("start"), end - UNTIMED_WINDOW)
    return start, end


def _match_access(access: pl.DataFrame, groups: pl.DataFrame) -> dict[int, int]:
    """access row (``arow``) → event-log group it describes: same session, same
    ``Last-Event-ID``, an event-stream 200 for a stream (a 410 for a refusal), the group's
    records inside the line's span and no longer apart than its ``request_time``; closest
    fits first (duration less the records' spread, then start), each line and each group
    taken at most once. A line that sent no body bytes takes no group that wrote events."""
    start, end = _line_span()
    lines = access.filter(matchable()).select(
        "arow",
        access_session().alias("session"),
        pl.col("last_event_id").alias("leid"),
        (pl.col("status") == 410).alias("refused"),
        start.alias("start"),
        end.alias("end"),
        (pl.col("bytes_sent") == 0).fill_null(False).alias("empty"),
        pl.col("request_time").alias("took"),
    )
    if not lines.height or not groups.height:
        return {}
    candidates = (
        lines.join(
            groups.select(
                "group",
                "session",
                "leid",
                "refused",
                pl.col("first_ts").fill_null(0.0),
                pl.col("wrote").fill_null(False),
                pl.col("last_ts").fill_null(0.0),
                (pl.col("last_ts") - pl.col("first_ts")).alias("span"),
            ),
            on=["session", "leid", "refused"],
            how="inner",
            nulls_equal=True,
        )
        .filter(_fits() & ~(pl.col("empty") & pl.col("wrote")))
        .with_columns(
            (pl.col("took") - pl.col("span")).alias("fit"),
            (pl.col("first_ts") - pl.col("start")).abs().alias("distance"),
        )
        .sort(["fit", "distance", "arow", "group"], nulls_last=True)
    )
    matched: dict[int, int] = {}
    taken: set[int] = set()
    # Closest fits first over the (few) candidates: an event stream ends soon after its
    # last event, so its records span most of its request's duration; with one-second
    # times, a line's start alone cannot tell two requests of the same second apart.
    for arow, group in candidates.select("arow", "group").iter_rows():
        if arow in matched or group in taken:
            continue
        matched[arow] = group
        taken.add(group)
    return matched


def _fits() -> pl.Expr:
    """Whether a line's request could have carried a group's records: they all fall in
    it. The line's logged time is the response's end to the second (``end`` ≤ true end <
    ``end`` + 1 s), so with ``request_time`` (``took``) the end lies in
    [max(last record, end), min(first record + took, end + 1 s)]: not empty. Without a
    duration, the first record falls within the line's (untimed) span."""
    lower = pl.max_horizontal("last_ts", "end")
    upper = pl.min_horizontal(pl.col("first_ts") + pl.col("took"), pl.col("end") + CLOCK_SLACK)
    timed = lower <= upper + DURATION_SLACK
    untimed = (pl.col("first_ts") >= pl.col("start") - CLOCK_SLACK) & (
        pl.col("first_ts") <= pl.col("end") + CLOCK_SLACK
    )
    return pl.when(pl.col("took").is_not_null()).then(timed).otherwise(untimed)


@dataclass(slots=True)
class SessionPart:
    """What :func:`session_part` gives for a set of whole sessions."""

    connections: pl.DataFrame
    exchanges: pl.DataFrame
    events: pl.DataFrame
    unmatched: pl.DataFrame  # the access lines no event-log stream took


def session_part(events: pl.DataFrame, access: pl.DataFrame, conn_ids: pl.DataFrame) -> SessionPart:
    """Evidence rows for the event-log records of whole sessions, and the access lines of
    the same sessions that describe them: a stream's line is merged into the stream's
    exchange; a refusal an access line also shows is that line's alone (it stays with the
    unmatched lines). ``conn_ids`` gives each group (:data:`GROUP_KEYS`) its
    pseudo-connection, numbered over the whole scan (:func:`group_order`); ``access``
    carries ``file_no``."""
    access = numbered_access(access)
    if not events.height:
        return lines_only(access)
    log = _event_log_streams(events)
    records = log.records
    return log_part(
        log, access, conn_ids, first_sent(records), lambda g: _event_log_events(records, g)
    )


def numbered_access(access: pl.DataFrame) -> pl.DataFrame:
    """A partition's access lines in :data:`LINE_ORDER`, numbered (``arow``)."""
    return access.sort(LINE_ORDER, nulls_last=True, maintain_order=True).with_row_index("arow")


def lines_only(access: pl.DataFrame) -> SessionPart:
    """:func:`session_part` of access lines (:func:`numbered_access`) and no event-log
    response: every line stands alone."""
    return SessionPart(
        ConnectionColumns.frame(),
        ExchangeColumns.frame(),
        EventColumns.frame(),
        access.drop("arow"),
    )


def log_part(
    log: EventLog,
    access: pl.DataFrame,
    conn_ids: pl.DataFrame,
    sent: pl.DataFrame,
    events_of: Callable[[pl.DataFrame], pl.DataFrame],
) -> SessionPart:
    """:func:`session_part` of the responses ``log`` describes and the access lines
    (:func:`numbered_access`); ``sent``: :func:`first_sent` of the written records (of those
    the lines resume from, at least); ``events_of``: the events rows of the groups kept."""
    if not log.groups.height:  # no record was written or a signal (a map read `kind` wrongly)
        return lines_only(access)
    matched = _match_access(access, log.groups)
    refused = set(log.groups.filter(pl.col("refused")).get_column("group").to_list())
    merged = {a: g for a, g in matched.items() if g not in refused}
    line_of = {g: a for a, g in merged.items()}
    access = _refine_times(access, log.groups, sent, merged)
    groups = (
        log.groups.filter(~pl.col("group").is_in(list(set(matched.values()) & refused)))
        .join(conn_ids.select(*GROUP_KEYS, "conn_id"), on=GROUP_KEYS, how="left", nulls_equal=True)
        .sort("group")
    )
    label = (
        pl.col("session").fill_null("None")
        + "/"
        + pl.col("stream").fill_null("None")
        + "/"
        + pl.col("exchange_key")
    )
    groups = groups.with_columns(_log_infos(groups, log.info))
    return SessionPart(
        _group_connections(groups.with_columns(label.alias("label")), access, line_of),
        _event_log_exchanges(groups, access, line_of),
        events_of(groups),
        access.filter(~pl.col("arow").is_in(list(merged))).drop("arow"),
    )


def _refine_times(
    access: pl.DataFrame, groups: pl.DataFrame, sent: pl.DataFrame, merged: dict[int, int]
) -> pl.DataFrame:
    """``access`` with ``t0``/``t1`` refined by what the event log and the file's order
    tell: ``$time_local`` has one-second resolution, but a line is written when its
    response ends, after the event log's last record of that response and after the lines
    above it ended: its end is at least the latest of those (in its file), its start that
    end less ``request_time``. And a resume began after the event it names was written.
    So a resume refused or answered within the same second as the stream it resumes comes
    after it, whatever the durations."""
    if not access.height:
        return access
    last = pl.DataFrame(
        {"arow": list(merged), "group": list(merged.values())},
        schema={"arow": pl.UInt32, "group": pl.UInt32},
    ).join(groups.select("group", pl.col("last_ts").alias("g_last")), on="group", how="left")
    timed = pl.col("request_time").is_not_null() & pl.col("ts").is_not_null()
    refined = (
        access.join(last.select("arow", "g_last"), on="arow", how="left")
        .with_columns(access_session().alias("session"))
        .join(sent, on=["session", "last_event_id"], how="left")
        .sort("file_no", "line")
        .with_columns(pl.max_horizontal("t1", "g_last").cum_max().over("file_no").alias("ended"))
        .with_columns(
            pl.when(pl.col("ts").is_not_null()).then(pl.col("ended")).alias("t1"),
            pl.max_horizontal(
                "t0", pl.when(timed).then(pl.col("ended") - pl.col("request_time")), "sent"
            ).alias("t0"),
        )
        .select("arow", "t0", "t1")
    )
    return access.drop("t0", "t1").join(refined, on="arow", how="left").select(access.columns)


def first_sent(records: pl.DataFrame) -> pl.DataFrame:
    """When each (session, event ID) was first written (a resume that names it began
    after): what :func:`_refine_times` reads of the written records."""
    return (
        records.filter((pl.col("role") == "wire") & pl.col("event_id").is_not_null())
        .group_by("session", pl.col("event_id").alias("last_event_id"))
        .agg(pl.col("ts").min().alias("sent"))
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
    conns = clients.select(
        "conn_id",
        (pl.lit("log:access/") + pl.col("client")).alias("community_id"),
        pl.col("client").alias("client_ip"),
        pl.lit(0).alias("client_port"),
        pl.lit(LOG_HOST).alias("server_ip"),
        pl.lit(0).alias("server_port"),
        pl.lit(True).alias("from_log"),
        *(
            expr
            for end in ("first", "last")
            for expr in (
                pl.col(f"{end}_src"),
                pl.col(f"{end}_line").alias(f"{end}_num"),
                pl.col(f"{end}_ts").fill_null(0.0),
                pl.lit("line").alias(f"{end}_kind"),
            )
        ),
        pl.lit(None, pl.Binary).alias("state"),
    )
    return ConnectionColumns.conform(conns), _access_exchanges(unmatched, clients, config)


def _event_log_exchanges(
    groups: pl.DataFrame, access: pl.DataFrame, line_of: dict[int, int]
) -> pl.DataFrame:
    """One exchange per group: an event stream, or the 410 a refusal record says was
    answered; the access line that matched it, if any, gives the request line, status and
    where both were logged (the request at the line's start)."""
    line = pl.DataFrame(
        {"group": list(line_of), "arow": list(line_of.values())},
        schema={"group": pl.UInt32, "arow": pl.UInt32},
    ).join(access, on="arow", how="left")
    g = groups.join(line, on="group", how="left", suffix="_line")
    has_line = pl.col("arow").is_not_null()
    first_origin = [
        pl.when(has_line).then(pl.col("source")).otherwise(pl.col("first_src")),
        pl.when(has_line).then(pl.col("line")).otherwise(pl.col("first_line")),
        # The request began before the response's first record: no later than either.
        pl.when(has_line)
        .then(pl.min_horizontal("t0", "first_ts").fill_null(0.0))
        .otherwise(pl.col("first_ts").fill_null(0.0)),
    ]
    refused = pl.col("refused")
    stream = ~refused
    kept_open = (pl.col("comments") > 0) & ~pl.col("wrote")  # keep-alives, nothing written
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
        pl.col("protocol_version"),
        pl.when(has_line)
        .then(pl.col("status").fill_null(200))
        .when(refused)
        .then(pl.lit(410))
        .otherwise(pl.lit(200))
        .alias("resp_status"),
        pl.when(has_line)
        .then(pl.lit("(from access log)"))
        .otherwise(pl.lit("(from event log)"))
        .alias("resp_reason"),
        pl.lit("").alias("resp_version"),
        pl.when(stream).then(pl.lit(EVENT_STREAM)).alias("content_type"),
        pl.lit(None, pl.String).alias("cache_control"),
        stream.alias("event_stream"),
        first_origin[0].alias("resp_src"),
        first_origin[1].alias("resp_num"),
        first_origin[2].alias("resp_ts"),
        pl.lit("line").alias("resp_kind"),
        pl.lit(False).alias("head_captured"),
        pl.lit(None, pl.String).alias("json_answers"),
        pl.lit(False).alias("response_complete"),
        # A response the log shows sending only keep-alives did not visibly end.
        pl.when(~kept_open).then(pl.lit("log")).alias("end_reason"),
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
        pl.col("comments").fill_null(0),
        pl.lit(None, pl.String).alias("holes"),
        pl.col("log_info"),
    )
    return ExchangeColumns.conform(df)


def _event_log_events(
    records: pl.DataFrame, groups: pl.DataFrame, start: int = 0, carry: str | None = None
) -> pl.DataFrame:
    """The SSE events of each group (:func:`_event_log_streams`' records, in time order):
    a written record is the event it wrote (a data event, a priming event, a signal, a
    close), a decision record the signal or close it decided; the last-event-ID buffer
    follows the written IDs (WHATWG: an event without ``id`` inherits it). ``records`` of
    one group may be a later slice of it: ``start`` its first row's position, ``carry`` the
    buffer's value before it (:mod:`.log_slices`)."""
    wire = pl.col("role").is_in(["wire", "wire-signal"])
    ctype = pl.col("ctype")
    sessions = groups.select("group", "conn_id", pl.col("session").alias("group_session"))
    # The columns read below only, joined (not a copy of every record column: issue 16).
    read = records.select(
        "group", "role", "ctype", "event_id", "data", "payload", "sig_first", "sig_last",
        "sig_valid", "source", "line", "ts",
    )  # fmt: skip
    df = read.join(sessions, on="group", how="inner").with_columns(
        (pl.int_range(pl.len()).over("group") + start).alias("position")
    )
    session_named = pl.col("group_session").is_not_null() & (
        pl.col("group_session").str.strip_chars() != ""
    )
    kind = (
        pl.when(ctype == "close")
        .then(pl.lit("close"))
        .when(ctype.is_in(list(SIGNAL_EVENT_TYPES)))
        .then(pl.lit("signal"))
        .when(pl.col("data") == "")
        .then(pl.lit("priming"))
        .otherwise(pl.lit("data"))
    )
    carries_id = wire & pl.col("event_id").is_not_null()
    out = df.select(
        pl.col("conn_id").cast(pl.Int64),
        pl.lit(0, pl.Int64).alias("ex_index"),
        pl.when(session_named)
        .then(pl.col("group_session").str.strip_chars())
        .otherwise(pl.lit(inferred_session(LOG_HOST, LOG_HOST, 0)))
        .alias("session"),
        pl.col("position").cast(pl.Int64),
        pl.when(carries_id & (pl.col("event_id") != ""))
        .then(pl.col("event_id"))
        .otherwise(None)
        .forward_fill()
        .over("group")
        .fill_null(pl.lit(carry, pl.String))
        .fill_null("")
        .alias("id"),
        pl.when(carries_id).then(pl.col("event_id")).alias("id_field"),
        pl.when(pl.col("role") == "wire").then(pl.lit("message")).otherwise(ctype).alias("event"),
        pl.when(pl.col("role") == "wire")
        .then(pl.lit(""))
        .otherwise(pl.col("payload").fill_null(""))
        .alias("data"),
        pl.lit(None, pl.Int64).alias("retry"),
        pl.col("position").cast(pl.Int64).alias("start"),
        (pl.col("position") + 1).cast(pl.Int64).alias("end"),
        pl.lit(True).alias("dispatched"),
        kind.alias("kind"),
        pl.lit(None, pl.String).alias("rpc_kind"),
        pl.lit(None, pl.String).alias("rpc_method"),
        pl.lit(None, pl.String).alias("rpc_id"),
        pl.lit(None, pl.String).alias("rpc_more"),
        pl.col("sig_first"),
        pl.col("sig_last"),
        pl.col("sig_valid"),
        *_line_origin("first"),
        *_line_origin("last"),
    )
    return EventColumns.conform(out)


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
    began = pl.col("t0").fill_null(0.0)  # the request's start, else the line's time
    end = pl.col("t1").fill_null(0.0)  # when the response ended
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
        began.alias("req_ts"),
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
        began.alias("resp_ts"),
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
        end.alias("body_ts"),  # when the response ended
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
