"""Which response each server event-log record describes (docs/logs.md, "The events
table"), decided with polars expressions over one partition's records (whole sessions).

A record's **role** follows from its ``kind`` and its (canonical) ``control_type``:

- ``written`` records are what went on the wire: a data event, a priming event (``data``
  logged as ``""``), or, when the event's name is a signal (``stream-gap``, ``resume-gap``,
  ``backpressure-disconnect``) or ``close``, that signal as delivered;
- ``control`` records are the server's decisions: a signal or a close (``decision``: the
  written record of the same signal, when the log has both, is the better evidence and
  wins), a keep-alive comment (``keepalive``), the negotiated protocol version
  (``initialize``), a resume refused with ``410`` (``refused``); any other type is
  ``ignored`` (counted by the reader, used for nothing).

Records are then grouped into responses, one group per (session, stream, exchange):

1. written records by their ``request`` (else the resume's ``last_event_id``, else the
   live stream);
2. decisions, keep-alives and closes that name their ``request``: into the written
   group of the same session and request, whatever stream they name; a request no written
   record names is a response of its own (a replay that only sent keep-alives);
3. those that name no request (and written signals that name neither request nor
   stream): into the group of their session (and stream, when they name one) whose time
   span holds them or, between two groups, the nearer one — a ``Last-Event-ID`` they name
   picks among the groups that resumed from it. None is ever a response of its own: a
   record logged with nothing to attach it to is dropped;
4. each ``refused`` record is a ``410`` answer of its own (unless an access line of the
   same resume already shows it, :mod:`.from_logs`).
"""

from __future__ import annotations

import polars as pl

from sse_forensics.ingest.logs.model import (
    CLOSE,
    INITIALIZE,
    KEEPALIVE,
    RESUME_REFUSED,
    SIGNAL_TYPES,
    control_type,
)

GROUP_KEYS = ["session", "stream", "exchange_key"]

# The order of event-log groups across the whole scan: by the time of their first record
# (a record without a time as 0.0), then by that record's place in the records sorted by
# (ts, source, line) — nulls last, as the rows are.
GROUP_ORDER = ["order_ts", "first_untimed", "first_ts", "first_src", "first_line"]

RECORD_COLUMNS = [
    "source", "line", "ts", "session", "stream", "kind", "control_type", "request",
    "last_event_id", "requested",
]  # fmt: skip
"""The event-log columns that decide the groups (:func:`group_order` reads only these)."""

WIRE_TYPES = (*SIGNAL_TYPES, CLOSE)
STREAM_CONTROLS = (*SIGNAL_TYPES, CLOSE, KEEPALIVE)
REFUSED_KEY = "refused:"
_NO_SESSION = "\x00"


def role() -> pl.Expr:
    ctype = pl.col("ctype")
    written = pl.col("kind") == "written"
    control = pl.col("kind") == "control"
    return (
        pl.when(written & ctype.is_in(WIRE_TYPES))
        .then(pl.lit("wire-signal"))
        .when(written)
        .then(pl.lit("wire"))
        .when(control & ctype.is_in(WIRE_TYPES))
        .then(pl.lit("decision"))
        .when(control & (ctype == KEEPALIVE))
        .then(pl.lit("keepalive"))
        .when(control & (ctype == INITIALIZE))
        .then(pl.lit("initialize"))
        .when(control & (ctype == RESUME_REFUSED))
        .then(pl.lit("refused"))
        .when(control)
        .then(pl.lit("ignored"))
    )


RECORD_ORDER = ["ts", "source", "line"]


def in_record_order(events: pl.DataFrame) -> bool:
    """``events`` are in (ts, source, line) order already, each after the one before (as
    a log file is read, its times rising): sorting them would give them back as they are,
    as a copy of every column (issue 16: a stream of a million records copied twice)."""
    keys = [pl.col(c) for c in RECORD_ORDER]
    ts, src, line = keys[0], keys[1].cast(pl.String), keys[2]  # a category's text order
    after = (ts > ts.shift(1)) | (
        (ts == ts.shift(1))
        & ((src > src.shift(1)) | ((src == src.shift(1)) & (line > line.shift(1))))
    )
    return bool(
        events.select(
            pl.all_horizontal(k.is_not_null().all() for k in keys) & after.slice(1).all()
        ).item()
    )


def sorted_records(events: pl.DataFrame) -> pl.DataFrame:
    """The records in (ts, source, line) order, numbered (``order``), with ``ctype``
    (:func:`~sse_forensics.ingest.logs.model.control_type`) and ``role``."""
    ordered = events if in_record_order(events) else events.sort(RECORD_ORDER, nulls_last=True)
    return numbered_records(ordered)


def numbered_records(ordered: pl.DataFrame, offset: int = 0) -> pl.DataFrame:
    """:func:`sorted_records` of records in order already, the first numbered ``offset``
    (a slice of a partition's records: :mod:`.log_slices`)."""
    return (
        ordered.with_row_index("order", offset=offset)
        .with_columns(control_type().alias("ctype"))
        .with_columns(role().alias("role"))
    )


def resume_of() -> pl.Expr:
    """The ``Last-Event-ID`` a record names: its request's, or what a resume-gap or a
    refusal says was requested."""
    asked = pl.when(pl.col("ctype").is_in(["resume-gap", RESUME_REFUSED])).then(pl.col("requested"))
    return pl.coalesce(pl.col("last_event_id"), asked)


def wire_key() -> pl.Expr:
    """A written record's ``exchange_key`` (step 1): its ``request``, else the resume's
    ``last_event_id``, else the live stream."""
    return pl.coalesce(
        pl.col("request"), pl.lit("resume:") + pl.col("last_event_id"), pl.lit("live")
    )


def assign_groups(rows: pl.DataFrame) -> pl.DataFrame:
    """The records of :func:`sorted_records` that describe a response (wire records,
    decisions, keep-alives, closes, refusals), each with the ``exchange_key`` that, with
    its ``session`` and ``stream``, names its group (:data:`GROUP_KEYS`). Decisions with
    nothing to attach them to are left out."""
    # A written signal that names neither its request nor its stream is placed like a
    # decision (step 3): alone it would be a response of its own.
    unplaced = (
        (pl.col("role") == "wire-signal") & pl.col("request").is_null() & pl.col("stream").is_null()
    )
    wire = rows.filter(pl.col("role").is_in(["wire", "wire-signal"]) & ~unplaced).with_columns(
        wire_key().alias("exchange_key")
    )
    controls = rows.filter(pl.col("role").is_in(["decision", "keepalive"]))
    # 2. Controls naming their request: the written group of that request, else their own.
    by_request = wire.filter(pl.col("request").is_not_null()).unique(
        ["session", "request"], keep="first", maintain_order=True
    )
    named = controls.filter(pl.col("request").is_not_null())
    joined = named.join(
        by_request.select(
            "session",
            "request",
            pl.col("stream").alias("w_stream"),
            pl.col("exchange_key").alias("w_key"),
        ),
        on=["session", "request"],
        how="left",
        nulls_equal=True,
    )
    named = joined.with_columns(
        pl.when(pl.col("w_key").is_not_null())
        .then(pl.col("w_stream"))
        .otherwise(pl.col("stream"))
        .alias("stream"),
        pl.coalesce("w_key", "request").alias("exchange_key"),
    ).drop("w_stream", "w_key")
    keyed = pl.concat([wire, named], how="vertical_relaxed")
    # 3. Controls naming no request: attached by session, stream and time.
    loose = pl.concat([controls.filter(pl.col("request").is_null()), rows.filter(unplaced)])
    attached = _attach(loose, keyed)
    # 4. Refusals: a 410 answer each.
    refused = rows.filter(pl.col("role") == "refused").with_columns(
        (pl.lit(REFUSED_KEY) + pl.col("order").cast(pl.String)).alias("exchange_key")
    )
    out = pl.concat([keyed, attached, refused], how="vertical_relaxed")
    # Written records only (a long stream's): in order already, not copied by a sort.
    rising = (pl.col("order") > pl.col("order").shift(1)).slice(1).all()
    return out if out.select(rising).item() else out.sort("order")


def _attach(loose: pl.DataFrame, keyed: pl.DataFrame) -> pl.DataFrame:
    """``loose`` control records with the group keys of the ``keyed`` group each belongs
    to (module doc, step 3); those with none are dropped."""
    candidates = loose.filter(
        pl.col("ts").is_not_null()
        & (pl.col("session").is_not_null() | pl.col("stream").is_not_null())
    )
    if not candidates.height or not keyed.height:
        return keyed.clear().select(keyed.columns)
    spans = (
        keyed.with_columns(pl.col("session").fill_null(_NO_SESSION).alias("s_key"))
        .group_by([*GROUP_KEYS, "s_key"], maintain_order=True)
        .agg(
            pl.col("ts").min().alias("g_start"),
            pl.col("ts").max().alias("g_end"),
            pl.col("last_event_id").drop_nulls().first().alias("g_leid"),
        )
        .filter(pl.col("g_start").is_not_null())
        .with_row_index("gid")
        .with_columns(pl.col("stream").alias("g_stream"))
    )
    candidates = candidates.with_columns(
        pl.col("session").fill_null(_NO_SESSION).alias("s_key"),
        resume_of().alias("leid"),
    )
    picks = []
    for with_stream in (True, False):
        part = candidates.filter(pl.col("stream").is_not_null() == with_stream)
        by = ["s_key", "g_stream"] if with_stream else ["s_key"]
        if with_stream:
            part = part.with_columns(pl.col("stream").alias("g_stream"))
        resumed = part.filter(pl.col("leid").is_not_null())
        first = _nearest(
            resumed.with_columns(pl.col("leid").alias("g_leid")), spans, [*by, "g_leid"]
        )
        found = first.filter(pl.col("gid").is_not_null())
        rest = part.join(found.select("order"), on="order", how="anti")
        picks.append(found.select("order", "gid"))
        picks.append(_nearest(rest, spans, by).select("order", "gid"))
    chosen = pl.concat(picks).filter(pl.col("gid").is_not_null())
    names = spans.select("gid", *GROUP_KEYS)
    return (
        loose.join(chosen, on="order", how="inner")
        .drop(["session", "stream"])
        .join(names, on="gid", how="left")
        .drop("gid")
        .select(keyed.columns)
    )


def _nearest(rows: pl.DataFrame, spans: pl.DataFrame, by: list[str]) -> pl.DataFrame:
    """``rows`` with the ``gid`` of the group among ``spans`` (same ``by`` values) whose
    time span holds each row's ``ts`` or, between two, the nearer one (the later on a
    tie); null where the ``by`` values match no group."""
    if not rows.height:
        return rows.with_columns(pl.lit(None, pl.UInt32).alias("gid"))
    left = rows.select("order", "ts", *by).sort("ts")
    right = spans.select("gid", "g_start", "g_end", *by).sort("g_start")
    back = left.join_asof(
        right, left_on="ts", right_on="g_start", by=by, strategy="backward", check_sortedness=False
    ).select("order", pl.col("gid").alias("b_gid"), pl.col("g_end").alias("b_end"), "ts")
    ahead = left.join_asof(
        right, left_on="ts", right_on="g_start", by=by, strategy="forward", check_sortedness=False
    ).select("order", pl.col("gid").alias("f_gid"), pl.col("g_start").alias("f_start"))
    both = back.join(ahead, on="order", how="left")
    behind = (pl.col("ts") - pl.col("b_end")).clip(lower_bound=0.0)
    before = pl.col("f_start") - pl.col("ts")
    gid = (
        pl.when(pl.col("b_gid").is_null())
        .then(pl.col("f_gid"))
        .when(pl.col("f_gid").is_null() | (behind <= before))
        .then(pl.col("b_gid"))
        .otherwise(pl.col("f_gid"))
    )
    return rows.join(both.select("order", gid.alias("gid")), on="order", how="left")


def groups_of(records: pl.DataFrame) -> pl.DataFrame:
    """One row per group of :func:`assign_groups` records, in :data:`GROUP_ORDER`, numbered
    (``group``): where its first and last record are, the ``Last-Event-ID`` it resumed
    from, and whether it is a refusal (a 410 answer, no event stream)."""
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
            resume_of().drop_nulls().first().alias("leid"),
            (pl.col("role") == "refused").any().alias("refused"),
        )
        .with_columns(
            pl.col("first_ts").fill_null(0.0).alias("order_ts"),
            pl.col("first_ts").is_null().alias("first_untimed"),
        )
        .sort(GROUP_ORDER, nulls_last=True)
        .with_row_index("group")
    )


def group_order(events: pl.DataFrame) -> pl.DataFrame:
    """The event-log groups of ``events`` (whole sessions; :data:`RECORD_COLUMNS` suffice)
    with the columns that place them in the scan's order (:data:`GROUP_ORDER`): what
    numbers their pseudo-connections."""
    if not events.height:
        return pl.DataFrame()
    records = assign_groups(sorted_records(events))
    if not records.height:
        return pl.DataFrame()
    return groups_of(records).select(*GROUP_KEYS, *GROUP_ORDER)
