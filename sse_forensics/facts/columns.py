"""The per-event facts of a partition as polars expressions: the ``events`` and ``signals``
tables, each stream's counts, and which streams need their events judged one by one.

Most streams of a capture are contiguous and unremarkable; their events never become Python
objects. Only the streams this module flags (an ID jump, a ``stream-gap`` signal, opaque IDs
with a producer order to check) and the resumes are judged record by record
(:mod:`.gaps`, :mod:`.replays`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import orjson
import polars as pl

from sse_forensics.evidence.store import compact, with_scalars
from sse_forensics.evidence.tables import single_response
from sse_forensics.facts.front import event_keys
from sse_forensics.facts.ids import IdCodec
from sse_forensics.facts.model import StreamRecord
from sse_forensics.facts.signals import STREAM_GAP
from sse_forensics.facts.streams import opened_by
from sse_forensics.facts.tables import EVIDENCE, TABLE_SCHEMAS
from sse_forensics.provenance import Origin

Key = tuple[int, int]


def stream_frame(streams: list[StreamRecord]) -> pl.DataFrame:
    """One row per stream, in time order (``rank``), with the columns every row about it
    carries (``_common`` in :mod:`.build`)."""
    cols: dict[str, list[Any]] = {
        "conn_id": [],
        "ex_index": [],
        "rank": [],
        "session_id": [],
        "stream": [],
        "response_stream": [],
        "session_inferred": [],
        "stream_label": [],
        "opened_by": [],
        "response_label": [],
        "id_scheme": [],
        "counter_scope": [],
        "community_id": [],
        "client_ip": [],
        "client_port": [],
        "server_ip": [],
        "server_port": [],
        "root_conn": [],
        "root_index": [],
    }
    for n, s in enumerate(streams):
        conn = s.connection
        root = s.logical
        cols["conn_id"].append(s.exchange.connection_id)
        cols["ex_index"].append(s.exchange.index)
        cols["rank"].append(n)
        cols["session_id"].append(s.session.session_id)
        cols["stream"].append(root.key)
        cols["response_stream"].append(s.key)
        cols["session_inferred"].append(s.session.inferred)
        cols["stream_label"].append(root.label)
        cols["opened_by"].append(opened_by(s))
        cols["response_label"].append(s.label)
        cols["id_scheme"].append(s.codec.scheme if s.codec is not None else s.session.id_scheme)
        cols["counter_scope"].append(s.session.counter_scope)
        cols["community_id"].append(conn.community_id)
        cols["client_ip"].append(conn.client[0])
        cols["client_port"].append(conn.client[1])
        cols["server_ip"].append(conn.server[0])
        cols["server_port"].append(conn.server[1])
        cols["root_conn"].append(root.exchange.connection_id)
        cols["root_index"].append(root.exchange.index)
    return pl.DataFrame(
        cols,
        schema={
            "conn_id": pl.Int64,
            "ex_index": pl.Int64,
            "rank": pl.Int64,
            "session_id": pl.String,
            "stream": pl.String,
            "response_stream": pl.String,
            "session_inferred": pl.Boolean,
            "stream_label": pl.String,
            "opened_by": pl.String,
            "response_label": pl.String,
            "id_scheme": pl.String,
            "counter_scope": pl.String,
            "community_id": pl.String,
            "client_ip": pl.String,
            "client_port": pl.Int64,
            "server_ip": pl.String,
            "server_port": pl.Int64,
            "root_conn": pl.Int64,
            "root_index": pl.Int64,
        },
    )


@dataclass(slots=True)
class StreamCounts:
    events: int = 0
    data: int = 0
    first_id: str | None = None
    last_id: str | None = None
    # IDs that do not fit the stream's arithmetic scheme (facts.ids, "outliers"), and the
    # first of them with where it was seen.
    outliers: int = 0
    first_outlier: str | None = None
    first_outlier_at: Origin | None = None


@dataclass(slots=True)
class EventColumns:
    """What :func:`event_columns` computes for one partition."""

    events: pl.DataFrame  # the partition's stream events, keyed, in stream time order
    counts: dict[Key, StreamCounts]
    to_judge: set[Key]  # streams whose events need judging one by one (live gaps)


def event_columns(
    events: pl.DataFrame,
    frame: pl.DataFrame,
    codecs: dict[Key, IdCodec],
    logged: set[Key],
) -> EventColumns:
    """``events``: the partition's evidence events; ``frame``: :func:`stream_frame`;
    ``codecs``: each response's ID scheme; ``logged``: streams an event log describes
    (producer order to check)."""
    # The order (stream time, position) is found on the key columns; every column is then
    # gathered once (a partition of one long stream holds one copy of its events, not one
    # per step).
    one = single_response(events)
    if one is not None:
        # One response in position order (a partition of one long stream): its rank and
        # session as scalar columns, nothing joined or sorted.
        mine = frame.filter((pl.col("conn_id") == one[0]) & (pl.col("ex_index") == one[1])).select(
            "rank", pl.col("session_id").alias("session")
        )
        if mine.height == 1:
            rank, session = mine.row(0)
            return _keyed_columns(
                with_scalars(
                    events.drop("session"),
                    [
                        pl.lit(rank, pl.Int64).alias("rank"),
                        pl.lit(session, pl.String).alias("session"),
                    ],
                ),
                frame,
                codecs,
                logged,
            )
    order = (
        events.select("conn_id", "ex_index", "position")
        .with_row_index("row")
        .join(
            frame.select("conn_id", "ex_index", "rank", pl.col("session_id").alias("session")),
            on=["conn_id", "ex_index"],
            how="inner",
        )
        .sort("rank", "position")
    )
    rows = order.get_column("row")
    in_place = rows.len() == events.height and bool(
        (rows.to_numpy() == np.arange(events.height)).all()
    )
    # The columns added here hold one value per stream: one stream, one scalar column
    # (the branch above sets them as scalars; reading a scalar column materialises it).
    stream_events = compact(
        (events.drop("session") if in_place else events.drop("session").gather(rows)).hstack(
            [order.get_column("rank"), order.get_column("session")]
        ),
        ("rank", "session"),
    )
    del order, rows
    return _keyed_columns(stream_events, frame, codecs, logged)


def _keyed_columns(
    stream_events: pl.DataFrame,
    frame: pl.DataFrame,
    codecs: dict[Key, IdCodec],
    logged: set[Key],
) -> EventColumns:
    """:func:`event_columns` from the partition's stream events in stream time order, with
    their ``rank`` and ``session``."""
    # Key columns holding one value throughout come back scalar (``front.event_keys``).
    keyed = event_keys(stream_events, codecs)
    counts_df = _stream_counts(keyed)
    counts = {
        (c, i): StreamCounts(
            n,
            d,
            f,
            la,
            o,
            oid,
            Origin(src, num, ts, kind) if o and src is not None else None,
        )
        for c, i, n, d, f, la, o, oid, src, num, ts, kind in counts_df.iter_rows()
    }
    to_judge = _to_judge(keyed, frame, codecs, logged)
    return EventColumns(keyed, counts, to_judge)


# Events counted at a time by _stream_counts (slices of the keyed frame, no copy).
COUNT_SLICE = 1 << 19


def _stream_counts(keyed: pl.DataFrame, size: int | None = None) -> pl.DataFrame:
    """Per stream (``conn_id, ex_index``): its events (``n``), data events, first and last
    ID carried, the outliers (IDs that do not fit an arithmetic scheme) and where the first
    one was seen; counted ``size`` events at a time (default :data:`COUNT_SLICE`) and added
    up (issue 16: the filtered columns of one slice are held, not of a stream of millions)."""
    size = size or COUNT_SLICE
    carries = pl.col("id_field").fill_null("") != ""
    outlier = (
        carries & (pl.col("kind") != "signal") & pl.col("arithmetic") & pl.col("seq").is_null()
    )
    origin = ("o_id", "o_src", "o_num", "o_ts", "o_kind")
    parts = [
        keyed.slice(k, size)
        .group_by("conn_id", "ex_index", maintain_order=True)
        .agg(
            pl.len().alias("n"),
            (pl.col("kind") == "data").sum().alias("data"),
            pl.col("id_field").filter(carries).first().alias("first_id"),
            pl.col("id_field").filter(carries).last().alias("last_id"),
            outlier.sum().alias("outliers"),
            pl.col("id_field").filter(outlier).first().alias("o_id"),
            pl.col("first_src").filter(outlier).first().alias("o_src"),
            pl.col("first_num").filter(outlier).first().alias("o_num"),
            pl.col("first_ts").filter(outlier).first().alias("o_ts"),
            pl.col("first_kind").filter(outlier).first().alias("o_kind"),
        )
        for k in range(0, max(keyed.height, 1), size)
    ]
    if len(parts) == 1:
        return parts[0]
    found = pl.col("outliers") > 0
    return (
        pl.concat(parts, how="vertical_relaxed")
        .group_by("conn_id", "ex_index", maintain_order=True)
        .agg(
            pl.col("n").sum(),
            pl.col("data").sum(),
            pl.col("first_id").drop_nulls().first(),
            pl.col("last_id").drop_nulls().last(),
            pl.col("outliers").sum(),
            *(pl.col(c).filter(found).first() for c in origin),
        )
    )


def _to_judge(
    keyed: pl.DataFrame,
    frame: pl.DataFrame,
    codecs: dict[Key, IdCodec],
    logged: set[Key],
    size: int | None = None,
) -> set[Key]:
    """Streams :func:`~.gaps.live_gaps` could find a gap in: a counter that jumps past its
    high-water mark within a run of one prefix (``gaps._advances``), a ``stream-gap``
    signal, or opaque IDs with an event log's producer order. Judged ``size`` events at a
    time (default :data:`ORDER_SLICE`), the run in progress handed on from slice to slice
    (its stream, prefix and high-water mark): a stream of ten million events holds one
    slice's narrow columns (issue 16)."""
    size = size or ORDER_SLICE
    out: set[Key] = set()
    carried: pl.DataFrame | None = None  # the run in progress: its last row, seq = its max
    for k in range(0, keyed.height, size):
        part = keyed.slice(k, size)
        numbered = _numbered(part)
        out.update(
            part.select("conn_id", "ex_index", "kind", "event")
            .filter((pl.col("kind") == "signal") & (pl.col("event") == STREAM_GAP))
            .select("conn_id", "ex_index")
            .unique()
            .iter_rows()
        )
        if not numbered.height:
            continue
        if carried is not None:
            numbered = pl.concat([carried, numbered], how="vertical_relaxed")
        numbered = numbered.with_columns(_RUN_STARTS.fill_null(True).cum_sum().alias("run"))
        high = pl.col("seq").cum_max().shift(1).over("run")
        jumps = numbered.filter(pl.col("seq") > high + 1).select("conn_id", "ex_index").unique()
        out.update(jumps.iter_rows())
        carried = numbered.filter(pl.col("run") == pl.col("run").last()).select(
            pl.col("rank", "conn_id", "ex_index", "prefix").last(), pl.col("seq").max()
        )
    out.update(k for k in logged if k in codecs and not codecs[k].arithmetic)
    return out


# A run of counters starts where the stream (``rank``) or the prefix changes: ``keyed``
# holds each stream's events together (rank, position order), so runs are numbered over the
# frame (no window per stream; one group per run).
_RUN_STARTS = (pl.col("rank") != pl.col("rank").shift(1)) | (
    pl.col("prefix") != pl.col("prefix").shift(1)
)


def _numbered(part: pl.DataFrame) -> pl.DataFrame:
    """``rank, conn_id, ex_index, prefix, seq`` of the events of ``part`` whose counter
    :func:`_to_judge` follows (an ID with a key, not a signal). The few columns read are
    selected before any filter: a filter copies every column it keeps."""
    return (
        part.lazy()
        .filter(
            (pl.col("id_field").fill_null("") != "")
            & (pl.col("kind") != "signal")
            & pl.col("seq").is_not_null()
        )
        .select("rank", "conn_id", "ex_index", "prefix", "seq")
        .collect()
    )


def keyed_roots(cols: EventColumns, frame: pl.DataFrame) -> pl.DataFrame:
    """``session_id, root_conn, root_index, prefix, seq`` of every keyed ID-carrying event
    (signals included), distinct: what each logical stream's counter took, under the
    session of the logical stream (its root)."""
    root_session = frame.select(
        pl.col("conn_id").alias("root_conn"),
        pl.col("ex_index").alias("root_index"),
        "session_id",
    )
    return (
        cols.events.filter((pl.col("id_field").fill_null("") != "") & pl.col("seq").is_not_null())
        .join(
            frame.select("conn_id", "ex_index", "root_conn", "root_index"),
            on=["conn_id", "ex_index"],
            how="inner",
        )
        .join(root_session, on=["root_conn", "root_index"], how="left")
        .select("session_id", "root_conn", "root_index", "prefix", "seq")
        .unique()
    )


def _cite(prefix: str, what: pl.Expr) -> pl.Expr:
    """An ``evidence`` entry (:func:`sse_forensics.facts.model.evidence`) of the event whose
    origin is in the ``{prefix}_src``/``_num``/``_ts``/``_kind`` columns."""
    src, num, kind = pl.col(f"{prefix}_src"), pl.col(f"{prefix}_num"), pl.col(f"{prefix}_kind")
    known = src.is_not_null()
    return pl.struct(
        src.cast(pl.String).alias("source"),
        pl.when(known & (kind == "frame")).then(num).alias("frame"),
        pl.when(known & (kind == "line")).then(num).alias("line"),
        pl.when(known).then(pl.col(f"{prefix}_ts")).alias("ts"),
        what.alias("what"),
    )


# Events judged for ID order at a time (:func:`_order_flags`): a stream of ten million
# events holds one slice's narrow columns, not the whole stream's (issue 16).
ORDER_SLICE = 1 << 19

_CONSIDERED = (pl.col("id_field").fill_null("") != "") & (pl.col("kind") != "signal")


def _considered(events: pl.DataFrame, offset: int, length: int) -> pl.DataFrame:
    """``row, rank, id_field, prefix, seq`` of the events of one slice whose ID order is
    judged (an ID, not a signal); ``row`` counts over the whole frame."""
    return (
        events.slice(offset, length)
        .lazy()
        .with_row_index("row", offset=offset)
        .filter(_CONSIDERED)
        .select("row", "rank", "id_field", "prefix", "seq")
        .collect()
    )


def _first_rows(events: pl.DataFrame, size: int) -> pl.DataFrame:
    """``row, first``: for each judged event whose (stream, ID) was seen before in its stream
    (``rank``), the ``row`` of the first such event. Only the rows whose (stream, ID) hash
    repeats are grouped exactly; the hashes are found repeated by sorting them (one hash per
    event, no table of ten million distinct IDs), slice by slice."""
    key = pl.struct("rank", "id_field").hash(seed=0)
    hashes = pl.concat(
        [
            _considered(events, k, size).select(key.alias("h")).get_column("h")
            for k in range(0, events.height, size)
        ]
        or [pl.Series("h", [], pl.UInt64)]
    ).sort()
    repeated = hashes.filter(hashes == hashes.shift(1)).unique()
    del hashes
    schema = {"row": pl.UInt32, "first": pl.UInt32}
    if not repeated.len():
        return pl.DataFrame(schema=schema)
    wanted = repeated.implode()
    sub = pl.concat(
        [
            _considered(events, k, size).filter(key.is_in(wanted)).select("row", "rank", "id_field")
            for k in range(0, events.height, size)
        ]
    )
    return (
        sub.select("row", pl.col("row").first().over("rank", "id_field").alias("first"))
        .filter(pl.col("first") != pl.col("row"))
        .select(pl.col(n).cast(t) for n, t in schema.items())
    )


def _order_flags(events: pl.DataFrame, size: int) -> pl.DataFrame:
    """``row, id_order, prev_row`` of the events whose ID repeats or goes backwards within
    their stream (:func:`events_plan`), judged ``size`` events at a time: each slice carries
    the previous judged event over from the one before."""
    firsts = _first_rows(events, size)
    same = pl.col("rank") == pl.col("rank").shift(1)
    keyed_pair = pl.col("seq").is_not_null() & pl.col("p_seq").is_not_null()
    same_prefix = pl.col("prefix") == pl.col("p_prefix")
    back = keyed_pair & same_prefix & (pl.col("seq") <= pl.col("p_seq"))
    repeat_or_back = (
        pl.when(pl.col("seq") == pl.col("p_seq"))
        .then(pl.lit("repeat"))
        .otherwise(pl.lit("backwards"))
    )
    seen_before = pl.col("p_row").is_not_null() & pl.col("first_row").is_not_null()
    flags = [pl.DataFrame(schema={"row": pl.UInt32, "id_order": pl.String, "prev_row": pl.UInt32})]
    carried: pl.DataFrame | None = None  # the last judged event of the slices before
    for k in range(0, events.height, size):
        c = _considered(events, k, size)
        if not c.height:
            continue
        last = c.tail(1)
        if carried is not None:
            c = pl.concat([carried, c], how="vertical_relaxed")
        c = c.with_columns(
            pl.when(same).then(pl.col("prefix").shift(1)).alias("p_prefix"),
            pl.when(same).then(pl.col("seq").shift(1)).alias("p_seq"),
            pl.when(same).then(pl.col("row").shift(1)).alias("p_row"),
        )
        if carried is not None:
            c = c.slice(1)
        carried = last
        if firsts.height:
            c = c.join(
                firsts.rename({"first": "first_row"}), on="row", how="left", maintain_order="left"
            )
        else:
            c = c.with_columns(pl.lit(None, pl.UInt32).alias("first_row"))
        flags.append(
            c.select(
                "row",
                pl.when(back)
                .then(repeat_or_back)
                .when(~keyed_pair & seen_before)
                .then(pl.lit("repeat"))
                .alias("id_order"),
                pl.when(back)
                .then(pl.col("p_row"))
                .when(~keyed_pair & seen_before)
                .then(pl.col("first_row"))
                .alias("prev_row"),
            ).filter(pl.col("id_order").is_not_null())
        )
    return pl.concat(flags, how="vertical_relaxed")


def events_table(cols: EventColumns, frame: pl.DataFrame) -> pl.DataFrame:
    """The ``events`` fact table (:func:`events_plan`), materialised."""
    return events_plan(cols, frame).collect()


def events_plan(
    cols: EventColumns, frame: pl.DataFrame, slice_size: int | None = None
) -> pl.LazyFrame:
    """The ``events`` fact table as a lazy query: one row per SSE event, with whether its ID
    repeats or goes backwards within the response (``id_order``; WHATWG IDs are a cursor: a
    client resuming from a repeated or older ID asks for events again).

    The order is judged on a few narrow columns, ``slice_size`` events at a time
    (:func:`_order_flags`); the wide rows (each stream's columns beside each event) exist
    only when the query runs, so a rule's filter over a partition of one stream of millions
    of events can run streamed (``engine="streaming"``) instead of holding the whole table
    (issue 16: memory bounded, not per event)."""
    flagged = _order_flags(cols.events, slice_size or ORDER_SLICE)
    # The evidence of the few out-of-order events, cited the way every finding cites.
    prev_rows = flagged.get_column("prev_row").drop_nulls().unique().sort()
    prev = (
        cols.events.select(
            pl.col("id_field").alias("previous_id"),
            pl.col("first_src").alias("p_src"),
            pl.col("first_num").alias("p_num"),
            pl.col("first_ts").alias("p_ts"),
            pl.col("first_kind").alias("p_kind"),
        )
        .gather(prev_rows)
        .hstack([prev_rows])
    )
    flagged = flagged.join(prev, on="prev_row", how="left", maintain_order="left")
    evidence_col = (
        pl.when(pl.col("prev_row").is_not_null())
        .then(
            pl.concat_list(
                _cite("p", pl.format("earlier event id {}", pl.col("previous_id"))),
                _cite(
                    "first",
                    pl.format("then id {} ({})", pl.col("id_field"), pl.col("id_order")),
                ),
            )
        )
        .otherwise(pl.lit([], dtype=EVIDENCE))
    )
    out = (
        cols.events.lazy()
        .with_row_index("row")
        .join(flagged.lazy(), on="row", how="left", maintain_order="left")
        .with_columns(pl.col("id_order").fill_null("ok"))
        .join(
            frame.drop("rank", "root_conn", "root_index").lazy(),
            on=["conn_id", "ex_index"],
            how="left",
            maintain_order="left",
        )
    )
    return out.select(
        pl.col("session_id"),
        pl.col("stream"),
        pl.col("response_stream"),
        pl.col("position"),
        pl.col("id"),
        pl.col("id_field"),
        pl.col("event"),
        pl.col("kind"),
        pl.col("data").str.len_chars().cast(pl.Int64).alias("data_bytes"),
        pl.col("rpc_method"),
        pl.col("rpc_id"),
        pl.col("first_src").alias("source"),
        pl.col("first_num").alias("frame_first"),
        pl.col("last_num").alias("frame_last"),
        pl.col("first_ts").alias("ts_first"),
        pl.col("last_ts").alias("ts_last"),
        pl.col("start").alias("offset_start"),
        pl.col("end").alias("offset_end"),
        pl.col("id_order"),
        pl.col("previous_id"),
        pl.col("session_inferred"),
        pl.col("stream_label"),
        pl.col("opened_by"),
        pl.col("response_label"),
        pl.col("id_scheme"),
        pl.col("counter_scope"),
        evidence_col.alias("evidence"),
        pl.col("community_id"),
        pl.col("client_ip"),
        pl.col("client_port"),
        pl.col("server_ip"),
        pl.col("server_port"),
    ).select(pl.col(name).cast(dtype) for name, dtype in TABLE_SCHEMAS["events"].items())


def signal_rows(cols: EventColumns, frame: pl.DataFrame) -> pl.DataFrame:
    """The signal events (``signals`` table rows other than 410 and no-store)."""
    sig = cols.events.filter((pl.col("kind") == "signal") & pl.col("sig_valid").is_not_null())
    return sig.join(
        frame.select("conn_id", "ex_index", "session_id", "stream", "response_stream"),
        on=["conn_id", "ex_index"],
        how="left",
    ).select(
        "session_id",
        "stream",
        "response_stream",
        pl.col("event").alias("kind"),
        pl.col("sig_first").alias("first"),
        pl.col("sig_last").alias("last"),
        pl.col("sig_valid").alias("valid"),
        "position",
        pl.col("first_src").alias("source"),
        pl.col("first_num").alias("frame"),
        pl.col("first_ts").alias("ts"),
        "rank",
    )


def answered_by_root(cols: EventColumns, frame: pl.DataFrame) -> dict[Key, set[str | None]]:
    """JSON-RPC ids answered (response or error) on each logical stream, by its root's
    exchange."""
    answers = cols.events.filter(
        pl.col("rpc_kind").is_in(["response", "error"]) | pl.col("rpc_more").is_not_null()
    ).join(
        frame.select("conn_id", "ex_index", "root_conn", "root_index"),
        on=["conn_id", "ex_index"],
        how="inner",
    )
    out: dict[Key, set[str | None]] = {}
    for kind, rpc_id, more, rc, ri in answers.select(
        "rpc_kind", "rpc_id", "rpc_more", "root_conn", "root_index"
    ).iter_rows():
        ids = out.setdefault((rc, ri), set())
        if kind in ("response", "error"):
            ids.add(rpc_id)
        if more:
            ids.update(i for k, _m, i in orjson.loads(more) if k in ("response", "error"))
    return out
