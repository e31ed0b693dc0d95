"""The per-event facts of a partition as polars expressions: the ``events`` table (the
``signals`` one is a query of :mod:`.signal_table`), each stream's counts, and which
streams need their events judged one by one.

Most streams of a capture are contiguous and unremarkable; their events never become Python
objects. Only the streams this module flags (an ID jump, a ``stream-gap`` signal, opaque IDs
with a producer order to check) and the resumes are judged record by record
(:mod:`.gaps`, :mod:`.replays`).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import orjson
import polars as pl

from sse_forensics.evidence.pieces import EventPieces
from sse_forensics.evidence.store import compact, with_scalars
from sse_forensics.evidence.tables import single_response
from sse_forensics.facts.event_slices import Jumps, Order, Tally
from sse_forensics.facts.front import event_keys
from sse_forensics.facts.ids import IdCodec
from sse_forensics.facts.model import StreamRecord
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


# The raw event columns the one pass over the keyed events reads (:func:`_judged`).
_PASS_COLUMNS = (
    "conn_id", "ex_index", "id_field", "kind", "event",
    "first_src", "first_num", "first_ts", "first_kind", "position",
)  # fmt: skip


# What answered_by_root reads of the events it filters (the signals table is a query of
# its own: .signal_table).
_FILTERED_COLUMNS = ("rpc_kind", "rpc_id", "rpc_more")
_ANSWER = pl.col("rpc_kind").is_in(["response", "error"]) | pl.col("rpc_more").is_not_null()


@dataclass(slots=True)
class _Streamed:
    """A partition's events left in their pieces, in stream time order (each exchange one
    run, the runs in rank order): each slice read is given its stream's ``rank`` and
    ``session``, and its ID keys when asked (issue 16)."""

    pieces: EventPieces
    ranks: pl.DataFrame  # conn_id, ex_index, rank, session
    codecs: dict[Key, IdCodec]

    def slices(
        self, size: int, keys: bool, columns: Sequence[str]
    ) -> Iterator[tuple[int, pl.DataFrame]]:
        raw = list(dict.fromkeys(c for c in columns if c not in ("rank", "session")))
        for offset, part in self.pieces.slices(size, raw):
            ranked = part.join(
                self.ranks, on=["conn_id", "ex_index"], how="left", maintain_order="left"
            )
            yield offset, event_keys(ranked, self.codecs) if keys else ranked


@dataclass(slots=True)
class EventColumns:
    """What :func:`event_columns` computes for one partition."""

    # The partition's stream events, keyed, in stream time order; None when they are read
    # slice by slice from their pieces (``streamed``).
    events: pl.DataFrame | None
    counts: dict[Key, StreamCounts]
    to_judge: set[Key]  # streams whose events need judging one by one (live gaps)
    flags: pl.DataFrame  # row, id_order, prev_row: IDs that repeat or go back (event_slices.Order)
    height: int
    streamed: _Streamed | None = None
    # Read from the pieces: the events answered_by_root filters, found in the one pass
    # (:func:`_judged`) rather than in a pass of their own.
    answer_events: pl.DataFrame | None = None
    # What judging a stream's live gaps reads (event_slices.Jumps): its ID jumps under the
    # gaps_per_stream cap (conn_id, ex_index, a_pos, b_pos), those past it counted (conn_id,
    # ex_index, over, first), and the positions of its signal events.
    jump_pairs: pl.DataFrame | None = None
    past_cap: pl.DataFrame | None = None
    signal_at: pl.DataFrame | None = None

    def slices(
        self, size: int, keys: bool = True, columns: Sequence[str] = _PASS_COLUMNS
    ) -> Iterator[tuple[int, pl.DataFrame]]:
        """``(offset, rows)``, ``size`` rows at a time in stream time order, with ``rank`` and
        ``session`` (and the ID keys, if ``keys``): slices of the held frame (all its
        columns), or ``columns`` read from the pieces."""
        if self.streamed is not None:
            yield from self.streamed.slices(size, keys, [*columns, "conn_id", "ex_index"])
            return
        assert self.events is not None
        for k in range(0, self.events.height, size):
            yield k, self.events.slice(k, size)

    def parts(self, columns: Sequence[str], keys: bool = False) -> Iterator[pl.DataFrame]:
        """The events with ``rank`` and ``session`` (and ID keys, if ``keys``) to filter:
        the held frame whole, or ``columns`` of the pieces :data:`ORDER_SLICE` rows at a
        time."""
        if self.events is not None:
            yield self.events
            return
        for _offset, part in self.slices(ORDER_SLICE, keys, columns):
            yield part

    def take(self, rows: pl.Series, columns: Sequence[str]) -> pl.DataFrame:
        """``columns`` of the events numbered ``rows`` (ascending) in stream time order."""
        if self.streamed is not None:
            return self.streamed.pieces.take(rows, columns)
        assert self.events is not None
        return self.events.select(columns).gather(rows)

    def lazies(self) -> list[tuple[range, pl.LazyFrame]]:
        """``(rows, query)``: every event in stream time order, as one query over the
        held frame or one per :data:`ORDER_SLICE` rows of the pieces (each read when it
        runs)."""
        if self.streamed is not None:
            return [
                (range(offset, offset + n), lazy)
                for offset, n, lazy in self.streamed.pieces.lazies(ORDER_SLICE)
            ]
        assert self.events is not None
        return [(range(self.events.height), self.events.lazy())]


def event_columns(
    events: pl.DataFrame | EventPieces,
    frame: pl.DataFrame,
    codecs: dict[Key, IdCodec],
    logged: set[Key],
    cap: int | None = None,
) -> EventColumns:
    """``events``: the partition's evidence events (held, or left in their pieces);
    ``frame``: :func:`stream_frame`; ``codecs``: each response's ID scheme; ``logged``:
    streams an event log describes (producer order to check); ``cap``: the ID jumps of a
    stream kept as pairs (``gaps_per_stream``; :class:`.event_slices.Jumps`)."""
    if isinstance(events, EventPieces):
        streamed = _in_stream_order(events, frame, codecs)
        if streamed is not None:
            return _judged(None, events.height, streamed, codecs, logged, cap)
        events = events.frame()  # not in stream time order: read whole and sorted
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
                codecs,
                logged,
                cap,
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
    return _keyed_columns(stream_events, codecs, logged, cap)


def _in_stream_order(
    pieces: EventPieces, frame: pl.DataFrame, codecs: dict[Key, IdCodec]
) -> _Streamed | None:
    """``pieces`` to be read slice by slice, when their rows are already in stream time
    order (every exchange one run of rising positions, the runs in ``rank`` order, each
    a stream of ``frame``); else None."""
    runs = pieces.runs()
    if runs is None:
        return None
    ranks = runs.select("conn_id", "ex_index").join(
        frame.select("conn_id", "ex_index", "rank", pl.col("session_id").alias("session")),
        on=["conn_id", "ex_index"],
        how="left",
        maintain_order="left",
    )
    rank = ranks.get_column("rank")
    if rank.null_count() or not bool((rank.diff().drop_nulls() > 0).all()):
        return None
    return _Streamed(pieces, ranks, codecs)


def _keyed_columns(
    stream_events: pl.DataFrame,
    codecs: dict[Key, IdCodec],
    logged: set[Key],
    cap: int | None = None,
) -> EventColumns:
    """:func:`event_columns` from the partition's stream events in stream time order, with
    their ``rank`` and ``session``."""
    # Key columns holding one value throughout come back scalar (``front.event_keys``).
    keyed = event_keys(stream_events, codecs)
    return _judged(keyed, keyed.height, None, codecs, logged, cap)


def _judged(
    keyed: pl.DataFrame | None,
    height: int,
    streamed: _Streamed | None,
    codecs: dict[Key, IdCodec],
    logged: set[Key],
    cap: int | None = None,
) -> EventColumns:
    """The counts, the streams to judge and the ID order of the keyed events (held, or read
    from ``streamed``), in one pass over them :data:`ORDER_SLICE` events at a time."""
    cols = EventColumns(keyed, {}, set(), pl.DataFrame(), height, streamed)
    tally, jumps, order = Tally(), Jumps(cap), Order()
    size = ORDER_SLICE
    answers: list[pl.DataFrame] = []
    for offset, part in cols.slices(size, columns=(*_PASS_COLUMNS, *_FILTERED_COLUMNS)):
        tally.feed(part)
        jumps.feed(part)
        order.feed(part, offset)
        if streamed is not None:
            answers.append(part.filter(_ANSWER))
    if streamed is not None and height:
        cols.answer_events = pl.concat(answers)
    if height:
        cols.counts = _counts(tally.result())
    cols.to_judge = jumps.found | {k for k in logged if k in codecs and not codecs[k].arithmetic}
    cols.jump_pairs, cols.past_cap = jumps.jump_pairs(), jumps.past_cap()
    cols.signal_at = jumps.signal_positions()
    cols.flags = order.result(lambda: cols.slices(size, False, ("id_field", "kind")))
    return cols


def _counts(counts_df: pl.DataFrame) -> dict[Key, StreamCounts]:
    return {
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


def keyed_roots(cols: EventColumns, frame: pl.DataFrame) -> pl.DataFrame:
    """``session_id, root_conn, root_index, prefix, seq`` of every keyed ID-carrying event
    (signals included), distinct: what each logical stream's counter took, under the
    session of the logical stream (its root)."""
    root_session = frame.select(
        pl.col("conn_id").alias("root_conn"),
        pl.col("ex_index").alias("root_index"),
        "session_id",
    )
    carried = (pl.col("id_field").fill_null("") != "") & pl.col("seq").is_not_null()
    took = pl.concat(
        part.filter(carried).select("conn_id", "ex_index", "prefix", "seq").unique()
        for part in cols.parts(("id_field",), keys=True)
    )
    return (
        took.join(
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


# Events judged at a time by the one pass over a partition's keyed events (:func:`_judged`):
# a stream of ten million events holds one slice's narrow columns, not the whole stream's
# (issue 16).
ORDER_SLICE = 1 << 19


def events_table(cols: EventColumns, frame: pl.DataFrame) -> pl.DataFrame:
    """The ``events`` fact table (:func:`events_plan`), materialised."""
    return pl.concat([part.collect() for part in events_plan(cols, frame)])


def events_plan(cols: EventColumns, frame: pl.DataFrame) -> list[pl.LazyFrame]:
    """The ``events`` fact table as lazy queries, its rows in order: one row per SSE event,
    with whether its ID repeats or goes backwards within the response (``id_order``; WHATWG
    IDs are a cursor: a client resuming from a repeated or older ID asks for events again).

    The order is judged on a few narrow columns, a slice at a time (:func:`_judged`); the
    wide rows (each stream's columns beside each event) exist only when a query runs, so a
    rule's filter over a partition of one stream of millions of events holds one query's
    rows at a time: one query over the held events (run streamed, ``engine="streaming"``),
    or one per slice of the pieces they were left in (issue 16: memory bounded, not per
    event)."""
    flagged = cols.flags
    # The evidence of the few out-of-order events, cited the way every finding cites.
    prev_rows = flagged.get_column("prev_row").drop_nulls().unique().sort()
    cited = ("id_field", "first_src", "first_num", "first_ts", "first_kind")
    prev = (
        cols.take(prev_rows, cited)
        .select(
            pl.col("id_field").alias("previous_id"),
            pl.col("first_src").alias("p_src"),
            pl.col("first_num").alias("p_num"),
            pl.col("first_ts").alias("p_ts"),
            pl.col("first_kind").alias("p_kind"),
        )
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
    return [_plan(lazy, rows, flagged, evidence_col, frame) for rows, lazy in cols.lazies()]


def _plan(
    events: pl.LazyFrame,
    rows: range,
    flagged: pl.DataFrame,
    evidence_col: pl.Expr,
    frame: pl.DataFrame,
) -> pl.LazyFrame:
    """:func:`events_plan`'s query over ``events``, the table's ``rows``. Where none of
    them is flagged, the flags' columns are constants, not joined on a row number (a join
    of ten million rows to none costs as much as reading them)."""
    numbered = events.with_row_index("row", offset=rows.start)
    mine = flagged.filter(pl.col("row").is_between(rows.start, rows.stop - 1))
    if mine.height:
        marked = numbered.join(mine.lazy(), on="row", how="left", maintain_order="left")
    else:
        nulls = (pl.lit(None, t).alias(c) for c, t in flagged.schema.items() if c != "row")
        marked = numbered.with_columns(*nulls)
    out = marked.with_columns(pl.col("id_order").fill_null("ok")).join(
        frame.drop("rank", "root_conn", "root_index").lazy(),
        on=["conn_id", "ex_index"],
        how="left",
        maintain_order="left",
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


def answered_by_root(cols: EventColumns, frame: pl.DataFrame) -> dict[Key, set[str | None]]:
    """JSON-RPC ids answered (response or error) on each logical stream, by its root's
    exchange."""
    answers = cols.answer_events
    if answers is None:
        answers = pl.concat(part.filter(_ANSWER) for part in cols.parts(_FILTERED_COLUMNS))
    answers = answers.join(
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
