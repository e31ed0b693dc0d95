"""The facts that cross sessions, computed once over the whole scan with polars expressions,
before the per-partition judges run (the issue's exception to "every finding needs only its
own session": resumes without a session header, server-wide counters, replays that leak
another session's events).

- **Folds** (``facts.join``): an event-log stream that a captured response also carries, and
  an access-log line a captured exchange also shows, are not counted twice.
- **Stream order**: streams in time order (``facts.streams._time_order``), as a rank.
- **Links** (docs/profile.md, "Sessions and streams"): a resume continues the latest earlier
  stream of its session on which its ``Last-Event-ID`` was seen; of any session only when
  its own session is inferred (no ``Mcp-Session-Id``). The *root* of a stream is the
  original stream a chain of resumes continues.
- **ID schemes** (``facts.ids.detect_scheme``'s rule, per logical stream, outliers
  tolerated; a session's default for streams that carried no ID) and each ID's key.
- **Counter scope** (docs/profile.md, "Event IDs"): whether a counter is shared by the streams of
  a session or of a whole server, decided on every root of the session or server; the
  server's values (for the partitions to exclude from gaps).
- **First sightings** of replayed events: a resume that replays an event first sent in
  another session's stream (``replay-crossed-sessions``).
- **Tasks**: partitions a cross-session link joins are judged together.
"""

from __future__ import annotations

import io
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import polars as pl

from sse_forensics.evidence.store import (
    bucket_expr,
    buckets_of,
    chunk_counts,
    compact,
    constant_value,
)
from sse_forensics.evidence.tables import single_response, split_by
from sse_forensics.facts.config import AnalysisConfig
from sse_forensics.facts.ids import (
    COUNTER_FIRST,
    DEFAULT_PREFIXED,
    MIN_FITTING,
    OUTLIER_SHARE,
    IdCodec,
)
from sse_forensics.facts.runs import expanded, normalised, runs_of, shares
from sse_forensics.facts.taken import CounterGroup
from sse_forensics.ingest.logs.files import rotation_key
from sse_forensics.limits import DEFAULT_LIMITS, Limits
from sse_forensics.provenance import Origin

if TYPE_CHECKING:
    from polars.expr.whenthen import ChainedThen, Then

Key = tuple[int, int]  # (connection, exchange index)
A = TypeVar("A")
R = TypeVar("R")
Server = tuple[str, int]
# A stream with fewer ID-carrying events says nothing about whether its counter is shared.
MIN_VALUES_TO_JUDGE = 2
# A log line's clock and the capture's may differ a little even on one host.
CLOCK_TOLERANCE = 2.0
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")

EXCHANGE_COLUMNS = [
    "conn_id",
    "index",
    "session",
    "session_inferred",
    "from_log",
    "req_method",
    "req_target",
    "last_event_id",
    "req_src",
    "req_num",
    "req_ts",
    "req_kind",
    "resp_status",
    "resp_ts",
    "body_ts",
    "event_stream",
]
EVENT_COLUMNS = [
    "conn_id",
    "ex_index",
    "session",
    "position",
    "id_field",
    "kind",
    "first_src",
    "first_num",
    "first_ts",
    "first_kind",
]


def label_of(conn_id: int, index: int, method: str | None, target: str | None) -> str:
    """A stream's label (``conn 3 #0 POST /mcp``)."""
    if method is None:
        what = "(request not captured)"
    else:
        what = f"{method} {_CONTROL.sub('?', target or '')[:80]}"
    return f"conn {conn_id} #{index} {what}"


@dataclass(frozen=True, slots=True)
class ForeignEvent:
    """The first sighting of a replayed event, in a stream another task judges."""

    origin: Origin | None
    label: str
    session: str

    def __reduce__(self) -> tuple[type[ForeignEvent], tuple[Origin | None, str, str]]:
        """Pickled as its fields, as :meth:`Origin.__reduce__`."""
        return (ForeignEvent, (self.origin, self.label, self.session))


@dataclass(slots=True)
class Front:
    """What the partitions are told. Keys are (connection, exchange index)."""

    dropped: set[Key] = field(default_factory=set)  # log exchanges a capture already holds
    folds: dict[Key, Key] = field(default_factory=dict)  # event-log → captured, in key order
    links: dict[Key, tuple[Key, int]] = field(default_factory=dict)  # resume → (stream, pos)
    codecs: dict[str, IdCodec] = field(default_factory=dict)  # a session's default reading
    stream_codecs: dict[Key, IdCodec] = field(default_factory=dict)  # root stream → its scheme
    scopes: dict[str, str] = field(default_factory=dict)
    shared_session: set[str] = field(default_factory=set)  # session-wide counters
    shared_server: dict[Server, bool] = field(default_factory=dict)  # server-wide: many sessions?
    server_groups: dict[Server, CounterGroup] = field(default_factory=dict)
    # Per replaying stream, its events' positions → where each was first seen.
    foreign: dict[Key, dict[int, ForeignEvent]] = field(default_factory=dict)
    tasks: list[list[int]] = field(default_factory=list)
    # The scan's caps, for the judging of each task (``gaps_per_stream``).
    limits: Limits = DEFAULT_LIMITS

    # Every key of the keyed tables above with the task that judges its exchange
    # (``conn_id, index, task``), and the scan's partitions: what :meth:`split` cuts by.
    key_tasks: pl.DataFrame | None = None
    buckets: int = 1

    def split(self) -> list[Front]:
        """Each task's share of the front (small to hand to a worker process), in the order
        of :attr:`tasks`: what the exchanges, sessions and keys of its partitions key. Each
        table is walked once for the whole scan (a key's task is its session's partition's:
        the store routes an exchange by its session), folds staying in key order."""
        shares = [
            Front(
                shared_server=dict(self.shared_server),
                server_groups=dict(self.server_groups),
                limits=self.limits,
            )
            for _ in self.tasks
        ]
        task_of = {b: n for n, task in enumerate(self.tasks) for b in task}
        keyed = self.key_tasks if self.key_tasks is not None else _KEY_TASKS
        for key, n in zip(self.dropped, _key_tasks(list(self.dropped), keyed), strict=True):
            shares[n].dropped.add(key)
        for attr in ("folds", "links", "stream_codecs", "foreign"):
            table: dict[Key, Any] = getattr(self, attr)
            for (key, value), n in zip(table.items(), _key_tasks(list(table), keyed), strict=True):
                getattr(shares[n], attr)[key] = value
        for attr in ("codecs", "scopes"):
            by_session: dict[str, Any] = getattr(self, attr)
            tasks = _session_tasks(list(by_session), self.buckets, task_of)
            for (session, value), n in zip(by_session.items(), tasks, strict=True):
                getattr(shares[n], attr)[session] = value
        shared = list(self.shared_session)
        for session, n in zip(shared, _session_tasks(shared, self.buckets, task_of), strict=True):
            shares[n].shared_session.add(session)
        return shares


_KEY_TASKS = pl.DataFrame(schema={"conn_id": pl.Int64, "index": pl.Int64, "task": pl.Int64})


def _key_tasks(keys: list[Key], key_tasks: pl.DataFrame) -> list[int]:
    """The task of each of ``keys``, from ``key_tasks`` (``conn_id, index, task``)."""
    if not keys:
        return []
    frame = pl.DataFrame(keys, schema={"conn_id": pl.Int64, "index": pl.Int64}, orient="row")
    tasks = frame.join(key_tasks, on=["conn_id", "index"], how="left", maintain_order="left")
    column = tasks.get_column("task")
    if column.null_count():
        raise ValueError("front: a key of no task's exchange")
    return column.to_list()


def _session_tasks(sessions: list[str], buckets: int, task_of: dict[int, int]) -> list[int]:
    """The task of each of ``sessions``: its partition's (:func:`bucket_expr`)."""
    if not sessions:
        return []
    frame = pl.DataFrame({"session": sessions}, schema={"session": pl.String})
    bucket = bucket_expr(buckets).replace_strict(task_of, return_dtype=pl.Int64)
    return frame.select(bucket).to_series().to_list()


def _rank(streams: pl.DataFrame) -> pl.DataFrame:
    """Streams sorted in time order (then where the request is recorded: a rotated log set
    oldest file first, then line; then connection and index), with their ``rank``."""
    rot = {
        s: (rotation_key(s) if kind == "line" else (s, 0, ""))
        for s, kind in streams.filter(pl.col("req_src").is_not_null())
        .select("req_src", "req_kind")
        .unique()
        .iter_rows()
    }
    keys = list(rot)
    mapping = pl.DataFrame(
        {
            "req_src": keys,
            "rot_a": [rot[k][0] for k in keys],
            "rot_b": [rot[k][1] for k in keys],
            "rot_c": [rot[k][2] for k in keys],
        },
        schema={"req_src": pl.String, "rot_a": pl.String, "rot_b": pl.Int64, "rot_c": pl.String},
    )
    return (
        streams.join(mapping, on="req_src", how="left")
        .with_columns(
            pl.coalesce("req_ts", "resp_ts").fill_null(0.0).alias("first_ts"),
            pl.col("rot_a").fill_null(""),
            pl.col("rot_b").fill_null(0),
            pl.col("rot_c").fill_null(""),
            pl.col("req_num").fill_null(0).alias("where_num"),
        )
        .sort(["first_ts", "rot_a", "rot_b", "rot_c", "where_num", "conn_id", "index"])
        .with_row_index("rank")
    )


def _folds(
    logged: pl.DataFrame, captured: pl.DataFrame, ids: pl.DataFrame
) -> tuple[dict[Key, Key], set[Key]]:
    """Event-log streams a captured stream of the same session also carries (most shared
    IDs; the first such stream on ties) and access lines (and event-log responses with no
    event ID) a captured exchange also shows (same session, method, ``Last-Event-ID`` and
    status, within the clock tolerance).
    ``logged``/``captured``: exchanges of the sessions both kinds of evidence hold;
    ``ids``: ``conn_id, ex_index, session, id_field`` of their ID-carrying events."""
    if not logged.height or not captured.height:
        return {}, set()
    log_streams = logged.filter(pl.col("log_stream")).select(
        pl.col("conn_id").alias("l_conn"), pl.col("index").alias("l_index"), "session"
    )
    cap_streams = captured.filter(pl.col("event_stream")).select(
        pl.col("conn_id").alias("c_conn"), pl.col("index").alias("c_index"), "session"
    )
    folds: dict[Key, Key] = {}
    if log_streams.height and cap_streams.height:
        log_ids = (
            ids.join(
                log_streams,
                left_on=["conn_id", "ex_index", "session"],
                right_on=["l_conn", "l_index", "session"],
                how="inner",
            )
            .select(
                pl.col("conn_id").alias("l_conn"),
                pl.col("ex_index").alias("l_index"),
                "session",
                "id_field",
            )
            .unique()
        )
        cap_ids = (
            ids.join(
                cap_streams,
                left_on=["conn_id", "ex_index", "session"],
                right_on=["c_conn", "c_index", "session"],
                how="inner",
            )
            .select(
                pl.col("conn_id").alias("c_conn"),
                pl.col("ex_index").alias("c_index"),
                "session",
                "id_field",
            )
            .unique()
        )
        best = (
            log_ids.join(cap_ids, on=["session", "id_field"], how="inner")
            .group_by(["l_conn", "l_index", "c_conn", "c_index"])
            .agg(pl.len().alias("overlap"))
            .sort(
                ["l_conn", "l_index", "overlap", "c_conn", "c_index"],
                descending=[False, False, True, False, False],
            )
            .unique(["l_conn", "l_index"], keep="first", maintain_order=True)
        )
        for lc, li, cc, ci in best.select("l_conn", "l_index", "c_conn", "c_index").iter_rows():
            folds[(lc, li)] = (cc, ci)
    dropped = set(folds)
    # An event-log response without any event ID (a replay that sent only keep-alives)
    # shares no ID to fold by: like an access line, the captured exchange shows it.
    with_ids = ids.select(pl.col("conn_id"), pl.col("ex_index").alias("index")).unique()
    idless = logged.filter(pl.col("log_stream")).join(with_ids, on=["conn_id", "index"], how="anti")
    access = pl.concat([logged.filter(~pl.col("log_stream")), idless]).filter(
        pl.col("req_method").is_not_null() & (pl.col("req_method") != "")
    )
    cap_req = captured.filter(pl.col("req_method").is_not_null())
    if access.height and cap_req.height:
        a = access.select(
            pl.col("conn_id").alias("a_conn"),
            pl.col("index").alias("a_index"),
            "session",
            pl.col("req_method").str.to_uppercase().alias("method"),
            pl.col("last_event_id").alias("leid"),
            pl.col("resp_status").alias("a_status"),
            pl.col("req_ts").alias("a_ts"),
        )
        c = cap_req.select(
            "session",
            pl.col("req_method").str.to_uppercase().alias("method"),
            pl.col("last_event_id").alias("leid"),
            pl.col("resp_status").alias("c_status"),
            pl.col("req_ts").alias("c_ts"),
            pl.col("body_ts").alias("c_body"),
        )
        hits = (
            a.join(c, on=["session", "method", "leid"], how="inner", nulls_equal=True)
            .filter(
                (pl.col("c_status").is_null() | (pl.col("c_status") == pl.col("a_status")))
                & (
                    ((pl.col("c_ts") - pl.col("a_ts")).abs() <= CLOCK_TOLERANCE)
                    | ((pl.col("c_body") - pl.col("a_ts")).abs() <= CLOCK_TOLERANCE).fill_null(
                        False
                    )
                )
            )
            .select("a_conn", "a_index")
            .unique()
        )
        dropped.update(hits.iter_rows())
    return folds, dropped


# The separators the packaged prefixed patterns need (DEFAULT_PREFIXED, COUNTER_FIRST): an
# ID without any of them matches neither, and is not handed to Python's ``re``.
_PACKAGED_PATTERNS = (DEFAULT_PREFIXED, COUNTER_FIRST)
_SEPARATOR = r"[_:/-]"


def _match_prefixed(ids: pl.Series, pattern: str, max_digits: int) -> pl.DataFrame:
    """For each distinct ID: does ``pattern`` match it (``re.match``) with a counter
    ``facts.ids.counter`` can read (``max_digits``), its ``stream`` group and ``seq`` — with
    Python's ``re``, so a user's pattern means what it means elsewhere (a packaged pattern
    only sees the IDs holding one of its separators: the others cannot match it)."""
    schema = {"id_field": pl.String, "m": pl.Boolean, "prefix": pl.String, "seq": pl.Int64}
    distinct = ids.unique()
    if pattern in _PACKAGED_PATTERNS:
        hopeless = distinct.filter(~distinct.str.contains(_SEPARATOR).fill_null(False))
        distinct = distinct.filter(distinct.str.contains(_SEPARATOR).fill_null(True))
    else:
        hopeless = distinct.clear()
    codec = IdCodec("prefixed", re.compile(pattern), max_digits)
    values = distinct.to_list()
    keys = [codec.key(v) for v in values]
    tried = pl.DataFrame(
        {
            "id_field": values,
            "m": [k is not None for k in keys],
            "prefix": [None if k is None else k.prefix for k in keys],
            "seq": [None if k is None else k.seq for k in keys],
        },
        schema=schema,
    )
    if not hopeless.len():
        return tried
    rest = pl.DataFrame({"id_field": hopeless}).with_columns(
        pl.lit(False).alias("m"),
        pl.lit(None, pl.String).alias("prefix"),
        pl.lit(None, pl.Int64).alias("seq"),
    )
    return pl.concat([tried, rest.select(list(schema))])


# A decimal integer as ``facts.ids.INT_ID`` reads one, in ASCII: the IDs Python's ``re``
# would read differently (a digit of another script, a final newline before ``$``) are
# read by ``IdCodec.key`` itself.
_ASCII_INT = r"^(?:0|[1-9][0-9]*)$"
_NOT_PLAIN = r"[^\x00-\x7f]|\n$"


def _int_keys(ids: pl.Series, max_digits: int) -> pl.DataFrame:
    """For each distinct ID: is it a decimal integer ``facts.ids.counter`` can read
    (``int_ok``; an over-long one is opaque), and its value (``iseq``). Vectorised for
    ASCII IDs (no leading zero, at most ``max_digits`` digits, within 64 bits, as
    ``counter`` has it); the rare others go through ``IdCodec.key``."""
    schema = {"id_field": pl.String, "int_ok": pl.Boolean, "iseq": pl.Int64}
    distinct = pl.DataFrame({"id_field": ids.unique()}, schema={"id_field": pl.String})
    value = pl.col("id_field")
    odd = value.str.contains(_NOT_PLAIN).fill_null(False)
    plain = distinct.filter(~odd).with_columns(
        pl.when(value.str.contains(_ASCII_INT) & (value.str.len_bytes() <= max_digits))
        .then(value.cast(pl.Int64, strict=False))
        .alias("iseq")
    )
    plain = plain.with_columns(pl.col("iseq").is_not_null().alias("int_ok")).select(list(schema))
    others = distinct.filter(odd).get_column("id_field").to_list()
    if not others:
        return plain
    codec = IdCodec("int", max_digits=max_digits)
    seq = [None if k is None else k.seq for k in (codec.key(v) for v in others)]
    slow = pl.DataFrame(
        {"id_field": others, "int_ok": [q is not None for q in seq], "iseq": seq}, schema=schema
    )
    return pl.concat([plain, slow])


def _with_int_keys(df: pl.DataFrame, max_digits: int) -> pl.DataFrame:
    """``df`` (with ``id_field``) plus :func:`_int_keys`' ``int_ok`` and ``iseq``, row by
    row: computed on the rows with expressions, not joined from a table of distinct IDs (a
    stream of ten million distinct IDs then costs no hash table of them). ``int_ok`` is
    false, not null, where there is no ID; readers treat both alike."""
    value = pl.col("id_field")
    odd = value.str.contains(_NOT_PLAIN).fill_null(False)
    iseq = (
        pl.when(~odd & value.str.contains(_ASCII_INT) & (value.str.len_bytes() <= max_digits))
        .then(value.cast(pl.Int64, strict=False))
        .alias("iseq")
    )
    df = df.with_columns(iseq).with_columns(pl.col("iseq").is_not_null().alias("int_ok"))
    others = df.filter(odd).get_column("id_field")
    if not others.len():
        return df
    # The rare IDs Python's ``re`` reads differently: IdCodec.key, once per distinct one.
    slow = _int_keys(others, max_digits).rename({"int_ok": "s_ok", "iseq": "s_seq"})
    return (
        df.join(slow, on="id_field", how="left", maintain_order="left")
        .with_columns(
            pl.when(odd).then(pl.col("s_ok")).otherwise(pl.col("int_ok")).alias("int_ok"),
            pl.when(odd).then(pl.col("s_seq")).otherwise(pl.col("iseq")).alias("iseq"),
        )
        .drop("s_ok", "s_seq")
    )


def codec_frame(codecs: Mapping[Key, IdCodec]) -> tuple[pl.DataFrame, dict[str, str]]:
    """``conn_id, ex_index, scheme`` for each response in ``codecs`` (a scheme name per
    distinct codec: ``int``, ``opaque`` or ``p0``, ``p1``… for prefixed patterns), and the
    patterns by name."""
    patterns: dict[str, str] = {}
    names: list[str] = []
    for codec in codecs.values():
        if codec.scheme == "prefixed" and codec.pattern is not None:
            patterns.setdefault(codec.pattern.pattern, f"p{len(patterns)}")
            names.append(patterns[codec.pattern.pattern])
        else:
            names.append(codec.scheme)
    keys = list(codecs)
    frame = pl.DataFrame(
        {
            "conn_id": [k[0] for k in keys],
            "ex_index": [k[1] for k in keys],
            "scheme": names,
        },
        schema={"conn_id": pl.Int64, "ex_index": pl.Int64, "scheme": pl.String},
    )
    return frame, {name: pattern for pattern, name in patterns.items()}


def event_keys(events: pl.DataFrame, codecs: Mapping[Key, IdCodec]) -> pl.DataFrame:
    """``events`` (with ``conn_id``, ``ex_index`` and ``id_field``) plus ``prefix`` and
    ``seq``, each ID's arithmetic key under the scheme of its stream (``codecs``, by
    response; ``IdCodec.key``), null where it has none, and ``arithmetic``: the stream's
    scheme allows arithmetic (an ID-carrying event of such a stream without a key is an
    outlier). Patterns run with Python's ``re`` once per distinct ID."""
    scheme, patterns = codec_frame(codecs)
    # The id_digits cap every codec of a scan shares (AnalysisConfig.limits).
    max_digits = next((c.max_digits for c in codecs.values()), DEFAULT_LIMITS.id_digits)
    # Computed slice by slice (at most KEY_SLICE events, cut where ``events`` is cut into
    # chunks, so the keys go beside them as they are), each key column stored once when it
    # holds one value throughout (one stream of int IDs: its prefix and scheme), so a
    # partition of one stream of millions of events holds no full-length transient beside
    # ``events``, nor a second copy of its keys.
    pieces: list[list[pl.DataFrame]] = []  # per chunk of ``events``, its slices' keys
    same: dict[str, set[tuple[bool, object]]] = {}  # per key column: each slice's constant
    at = 0
    for length in _chunk_lengths(events):
        pieces.append([])
        for k in range(at, at + max(length, 1), KEY_SLICE):
            keys = _slice_keys(
                events.slice(k, min(KEY_SLICE, at + length - k)), scheme, patterns, max_digits
            )
            for name in keys.columns:  # asked while the slice's columns are series
                same.setdefault(name, set()).add(constant_value(keys.get_column(name)))
            pieces[-1].append(compact(keys))
        at += length
    return _beside(events, pieces, same)


def _chunk_lengths(events: pl.DataFrame) -> list[int]:
    """The rows of each chunk of ``events``' most-cut column (``evidence.store.aligned``)."""
    counts = chunk_counts(events)
    most = max(counts, default=1)
    if most <= 1:
        return [events.height]
    column = events.get_column(events.columns[counts.index(most)])
    return [c.len() for c in column.get_chunks()]


KEY_SLICE = 1 << 19


def _beside(
    events: pl.DataFrame,
    pieces: list[list[pl.DataFrame]],
    same: dict[str, set[tuple[bool, object]]],
) -> pl.DataFrame:
    """``events`` with the key columns of ``pieces`` (per chunk of ``events``, its slices'
    keys, let go chunk by chunk) beside them, cut as ``events`` is: a column every slice of
    which holds one and the same value (``same``) as one scalar (``evidence.store.compact``).
    One ``select``
    puts them in place: a frame made by ``evidence.store.with_scalars`` and then reordered
    was copied whole, every column of ``events`` included (polars 2.1: +222 MB for ten
    million events)."""
    schema = pieces[0][0].schema
    placed: list[pl.Expr] = []
    varying: dict[str, list[pl.Series]] = {}
    for name, dtype in schema.items():
        checks = same[name]
        if len(checks) == 1 and next(iter(checks))[0]:
            placed.append(pl.lit(next(iter(checks))[1], dtype=dtype).alias(name))
        else:
            varying[name] = []
            placed.append(pl.col(name))
    for n in range(len(pieces)):  # a chunk's slices let go once put together
        chunk, pieces[n] = pieces[n], []
        for name, chunks in varying.items():
            chunks.append(pl.concat([p.get_column(name) for p in chunk]).rechunk())
        del chunk
    series = [pl.concat(chunks, rechunk=False) for chunks in varying.values()]
    out = events.hstack(series) if series else events
    return out.select(*events.columns, *placed)


def _slice_keys(
    events: pl.DataFrame, scheme: pl.DataFrame, patterns: dict[str, str], max_digits: int
) -> pl.DataFrame:
    """``prefix, seq, arithmetic`` of each row of ``events`` (:func:`event_keys`)."""
    # The keys are computed on the three columns they need and put beside ``events``: a
    # partition holding one stream of millions of events is not copied whole per join.
    one = single_response(events, ordered=False)
    if one is not None:  # one response: its scheme as a scalar column, nothing joined
        named = scheme.filter((pl.col("conn_id") == one[0]) & (pl.col("ex_index") == one[1]))
        df = events.select("conn_id", "ex_index", "id_field").with_columns(
            pl.lit(named.item(0, "scheme") if named.height else None, pl.String).alias("scheme")
        )
    else:
        df = events.select("conn_id", "ex_index", "id_field").join(
            scheme, on=["conn_id", "ex_index"], how="left", maintain_order="left"
        )
    df = _with_int_keys(df, max_digits)
    # when/then chains, one branch per scheme (polars' Then, then ChainedThen).
    prefix: Then | ChainedThen = pl.when(pl.col("scheme") == "int").then(
        pl.when(pl.col("int_ok")).then(pl.lit(""))
    )
    seq: Then | ChainedThen = pl.when(pl.col("scheme") == "int").then(pl.col("iseq"))
    extra: list[str] = ["int_ok", "iseq", "scheme"]
    for name, pattern in patterns.items():
        own = df.filter(pl.col("scheme") == name).get_column("id_field").drop_nulls()
        table = _match_prefixed(own, pattern, max_digits).rename(
            {"m": f"m_{name}", "prefix": f"x_{name}", "seq": f"s_{name}"}
        )
        df = df.join(table, on="id_field", how="left", maintain_order="left")
        matched = pl.col(f"m_{name}").fill_null(False)
        prefix = prefix.when(pl.col("scheme") == name).then(
            pl.when(matched).then(pl.col(f"x_{name}").fill_null(""))
        )
        seq = seq.when(pl.col("scheme") == name).then(pl.when(matched).then(pl.col(f"s_{name}")))
        extra += [f"m_{name}", f"x_{name}", f"s_{name}"]
    df = df.with_columns(
        prefix.alias("prefix"),
        seq.alias("seq"),
        (pl.col("scheme").fill_null("opaque") != "opaque").alias("arithmetic"),
    )
    keys = df.select(
        pl.when(pl.col("seq").is_not_null()).then(pl.col("prefix")).alias("prefix"),
        "seq",
        "arithmetic",
    )
    return keys


def _follows(n: pl.Expr, fitting: pl.Expr) -> pl.Expr:
    """``facts.ids.follows`` as an expression."""
    outliers = n - fitting
    return ((n > 0) & (fitting == n)) | (
        (fitting >= MIN_FITTING) & (outliers <= pl.max_horizontal(pl.lit(1), n // OUTLIER_SHARE))
    )


def _patterns(config: AnalysisConfig) -> list[str]:
    """The prefixed-ID patterns tried, in order: the user's, then counter-first."""
    return [config.prefixed_regex, COUNTER_FIRST]


def _response_stats(id_events: pl.DataFrame, patterns: list[str], max_digits: int) -> pl.DataFrame:
    """Per response of ``id_events`` (``conn_id, ex_index, session``), what deciding its
    logical stream's scheme needs (:func:`_stream_codecs`), in sums a stream spread over
    several partitions adds up: the IDs judged (``n``, signals left out), how many are
    decimal integers (``int_fit``) and, per pattern, how many fit it (``fit0``…) with the
    number of distinct prefixes and counter values among those.

    Grouped by response (its session is one per response: the first), integer keys
    computed row by row on every row (signals counted out), and a packaged pattern tried
    only on the IDs holding one of its separators: a stream of ten million integer IDs
    costs no table of distinct IDs, nor a copy of its IDs."""
    response = ["conn_id", "ex_index"]
    keyed = _with_int_keys(id_events.select(*response, "session", "id_field", "kind"), max_digits)
    judge = pl.col("kind") != "signal"
    out = (
        keyed.group_by(response)
        .agg(
            pl.col("session").first(),
            judge.sum().alias("n"),
            (pl.col("int_ok") & judge).sum().alias("int_fit"),
            # Whether any judged ID holds a separator (a packaged pattern needs one).
            (pl.col("id_field").str.contains(_SEPARATOR).fill_null(True) & judge)
            .any()
            .alias("_sep"),
        )
        .filter(pl.col("n") > 0)
    )
    separated = bool(out.get_column("_sep").any())
    out = out.drop("_sep")
    judged: pl.DataFrame | None = None
    for k, pattern in enumerate(patterns):
        names = [f"fit{k}", f"prefixes{k}", f"seqs{k}"]
        if pattern in _PACKAGED_PATTERNS and not separated:  # none fits: no table to join
            out = out.with_columns(pl.lit(0, pl.UInt32).alias(n) for n in names)
            continue
        if judged is None:
            judged = id_events.select(*response, "id_field", "kind").filter(judge).drop("kind")
        tried = (
            judged.filter(pl.col("id_field").str.contains(_SEPARATOR).fill_null(True))
            if pattern in _PACKAGED_PATTERNS
            else judged
        )
        table = _match_prefixed(tried.get_column("id_field"), pattern, max_digits)
        per = (
            tried.join(table.filter(pl.col("m")), on="id_field", how="inner")
            .group_by(response)
            .agg(
                pl.len().alias(f"fit{k}"),
                pl.col("prefix").n_unique().alias(f"prefixes{k}"),
                pl.col("seq").n_unique().alias(f"seqs{k}"),
            )
        )
        out = out.join(per, on=response, how="left").with_columns(
            pl.col(n).fill_null(0) for n in names
        )
    return out


_RESPONSE = ["conn_id", "ex_index"]


def _chunk_stats(
    id_events: pl.DataFrame, patterns: list[str], max_digits: int
) -> tuple[pl.DataFrame, list[tuple[pl.DataFrame, pl.DataFrame]]]:
    """One chunk's share of :func:`_response_stats`: per response its sums (``n``,
    ``int_fit``, and per pattern ``fit0``… the judged IDs it matched), and per pattern the
    distinct (response, ``prefix``) and (response, ``seq``) pairs of its matches (counted
    once over every chunk)."""
    keyed = _with_int_keys(id_events.select(*_RESPONSE, "session", "id_field", "kind"), max_digits)
    judge = pl.col("kind") != "signal"
    sums = keyed.group_by(_RESPONSE, maintain_order=True).agg(
        pl.col("session").first(),
        judge.sum().cast(pl.UInt32).alias("n"),
        (pl.col("int_ok") & judge).sum().cast(pl.UInt32).alias("int_fit"),
    )
    del keyed
    pairs: list[tuple[pl.DataFrame, pl.DataFrame]] = []
    judged = id_events.select(*_RESPONSE, "id_field", "kind").filter(judge).drop("kind")
    for k, pattern in enumerate(patterns):
        tried = (
            judged.filter(pl.col("id_field").str.contains(_SEPARATOR).fill_null(True))
            if pattern in _PACKAGED_PATTERNS
            else judged
        )
        fit = f"fit{k}"
        if not tried.height:  # plain integer IDs: a packaged pattern fits none of them
            sums = sums.with_columns(pl.lit(0, pl.UInt32).alias(fit))
            pairs.append((pl.DataFrame(), pl.DataFrame()))
            continue
        table = _match_prefixed(tried.get_column("id_field"), pattern, max_digits)
        hits = tried.join(table.filter(pl.col("m")), on="id_field", how="inner")
        fits = hits.group_by(_RESPONSE).agg(pl.len().cast(pl.UInt32).alias(fit))
        sums = sums.join(fits, on=_RESPONSE, how="left", maintain_order="left").with_columns(
            pl.col(fit).fill_null(0)
        )
        pairs.append(
            (
                hits.select(*_RESPONSE, "prefix").unique(),
                hits.select(*_RESPONSE, "seq").unique(),
            )
        )
    return sums, pairs


def _chunked_response_stats(
    chunks: Iterable[pl.DataFrame], patterns: list[str], max_digits: int
) -> pl.DataFrame | None:
    """:func:`_response_stats` of the concatenation of ``chunks`` (one partition's events
    with their ``rank``, in order), computed chunk by chunk: sums added, the first session
    kept, distinct prefixes and counter values counted over every chunk (issue 16: a
    partition of one stream of millions of events is not held whole). None without rows."""
    sums: list[pl.DataFrame] = []
    prefixes: list[list[pl.DataFrame]] = [[] for _ in patterns]
    seqs: list[list[pl.DataFrame]] = [[] for _ in patterns]
    for chunk in chunks:
        got, pairs = _chunk_stats(chunk, patterns, max_digits)
        sums.append(got)
        for k, (p, q) in enumerate(pairs):
            if p.height:
                prefixes[k].append(p)
                seqs[k].append(q)
    if not sums:
        return None
    fits = [f"fit{k}" for k in range(len(patterns))]
    out = (
        pl.concat(sums)
        .group_by(_RESPONSE, maintain_order=True)
        .agg(
            pl.col("session").first(),
            *(pl.col(c).sum().cast(pl.UInt32) for c in ("n", "int_fit", *fits)),
        )
        .filter(pl.col("n") > 0)
    )
    for k in range(len(patterns)):
        names = [f"prefixes{k}", f"seqs{k}"]
        if not prefixes[k]:
            out = out.with_columns(pl.lit(0, pl.UInt32).alias(n) for n in names)
            continue
        counted = [
            pl.concat(parts).unique().group_by(_RESPONSE).agg(pl.len().cast(pl.UInt32).alias(n))
            for parts, n in ((prefixes[k], names[0]), (seqs[k], names[1]))
        ]
        for per in counted:
            out = out.join(per, on=_RESPONSE, how="left", maintain_order="left")
        out = out.with_columns(pl.col(n).fill_null(0) for n in names)
    return out.select(
        *_RESPONSE,
        "session",
        "n",
        "int_fit",
        *(c for k in range(len(patterns)) for c in (f"fit{k}", f"prefixes{k}", f"seqs{k}")),
    )


def _stream_codecs(
    stats: pl.DataFrame, root_of: pl.DataFrame, sessions: list[str], config: AnalysisConfig
) -> tuple[dict[str, IdCodec], dict[Key, IdCodec], CodecCodes]:
    """Per logical stream (``root_of``: ``conn_id, ex_index, root_conn, root_index`` of every
    stream), its ID scheme (``facts.ids.detect_scheme``: int when the IDs are decimal
    integers, outliers tolerated; prefixed when they fit the pattern and the counter moves
    within a response while the prefix mostly stays put; else opaque), from the responses'
    :func:`_response_stats`. Per session, the scheme of its logical stream with the most
    IDs: the reading of a stream that carried none (a resume the inputs never linked, seen
    in an access log); ``sessions``: those of the streams, each given one."""
    forced = config.id_scheme
    digits = config.limits.id_digits
    compiled = [re.compile(p) for p in _patterns(config)]
    root = ["root_conn", "root_index"]
    per_response = stats.join(root_of, on=["conn_id", "ex_index"], how="inner")
    per_root = (
        per_response.group_by([*root, "session"])
        .agg(pl.col("n").sum(), pl.col("int_fit").sum())
        .with_columns(_follows(pl.col("n"), pl.col("int_fit")).alias("int"))
    )
    for k in range(len(compiled)):
        fit, prefixes, seqs = pl.col(f"fit{k}"), pl.col(f"prefixes{k}"), pl.col(f"seqs{k}")
        if not per_response.select(fit.sum()).item():  # no ID fits: fewer than MIN_FITTING
            per_root = per_root.with_columns(pl.lit(False).alias(f"p{k}"))
            continue
        ok = per_response.group_by(root).agg(
            pl.col("n").sum().alias("n_all"),
            fit.sum().alias("fit_all"),
            (prefixes > pl.max_horizontal(pl.lit(2), fit // 2)).any().alias("too_many"),
            (seqs > 1).any().alias("moved"),
            (pl.col("n") <= 1).all().alias("short"),
        )
        ok = ok.select(
            *root,
            (
                _follows(pl.col("n_all"), pl.col("fit_all"))
                & ~pl.col("too_many")
                & (pl.col("moved") | pl.col("short"))
            ).alias(f"p{k}"),
        )
        per_root = per_root.join(ok, on=root, how="left")

    # Eight readings at most: one codec each, shared by the streams that read so (a
    # codec is a frozen value; 161k streams on the mid log set built one each).
    decided: dict[tuple[bool, bool, bool], IdCodec] = {}

    def decide(is_int: bool, p0: bool, p1: bool) -> IdCodec:
        codec = decided.get((is_int, p0, p1))
        if codec is None:
            codec = decided[(is_int, p0, p1)] = _decide(is_int, p0, p1)
        return codec

    def _decide(is_int: bool, p0: bool, p1: bool) -> IdCodec:
        if forced == "opaque":
            return IdCodec("opaque")
        if forced == "int" or (forced is None and is_int):
            return IdCodec("int", max_digits=digits)
        if forced == "prefixed" or p0:
            return IdCodec("prefixed", compiled[0], digits)
        if p1:
            return IdCodec("prefixed", compiled[1], digits)
        return IdCodec("opaque")

    # Each reading's number (its place in ``codes.codecs``), beside the codecs themselves:
    # what the partitions' tasks are told (:class:`KeysAsk`).
    codes = CodecCodes()
    numbers: dict[tuple[bool, bool, bool], int] = {}

    def number(is_int: bool, p0: bool, p1: bool) -> int:
        k = numbers.get((is_int, p0, p1))
        if k is None:
            k = numbers[(is_int, p0, p1)] = len(codes.codecs)
            codes.codecs.append(decide(is_int, p0, p1))
        return k

    stream_codecs: dict[Key, IdCodec] = {}
    session_codecs: dict[str, IdCodec] = {}
    root_numbers: dict[Key, int] = {}
    session_numbers: dict[str, int] = {}
    best: dict[str, int] = {}
    for rc, ri, session, n, is_int, p0, p1 in (
        per_root.sort(root).select(*root, "session", "n", "int", "p0", "p1").iter_rows()
    ):
        k = number(bool(is_int), bool(p0), bool(p1))
        codec = codes.codecs[k]
        stream_codecs[(rc, ri)] = codec
        root_numbers[(rc, ri)] = k
        if n > best.get(session, 0):
            best[session], session_codecs[session] = n, codec
            session_numbers[session] = k
    for session in sessions:
        if session not in session_codecs:  # no ID in the session: only a forced scheme
            session_numbers[session] = k = number(False, False, False)
            session_codecs[session] = codes.codecs[k]
    codes.roots = pl.DataFrame(
        {
            "root_conn": [key[0] for key in root_numbers],
            "root_index": [key[1] for key in root_numbers],
            "r": list(root_numbers.values()),
        },
        schema={"root_conn": pl.Int64, "root_index": pl.Int64, "r": pl.Int64},
    )
    codes.sessions = pl.DataFrame(
        {"session": list(session_numbers), "s": list(session_numbers.values())},
        schema={"session": pl.String, "s": pl.Int64},
    )
    return session_codecs, stream_codecs, codes


@dataclass(slots=True)
class CodecCodes:
    """The scan's distinct readings (``codecs``), and each root's and session's by number
    (``roots``: ``root_conn, root_index, r``; ``sessions``: ``session, s``)."""

    codecs: list[IdCodec] = field(default_factory=list)
    roots: pl.DataFrame = field(default_factory=pl.DataFrame)
    sessions: pl.DataFrame = field(default_factory=pl.DataFrame)


def _group_codes(roots: pl.DataFrame, group: str) -> tuple[pl.DataFrame, dict[int, str]]:
    """Each root's ``group`` (server or session) as a small integer ``g`` (the keys are
    many, the groups few), and the group of each ``g``: computed once per scan."""
    codes = roots.select("root", group).with_columns(
        pl.col(group).rank("dense").cast(pl.Int64).alias("g")
    )
    return codes.select("root", "g"), dict(codes.select("g", group).unique().iter_rows())


def _grouped(keys: pl.DataFrame, root_group: pl.DataFrame) -> pl.DataFrame:
    """``keys`` (``root, prefix, first, last``: runs) with each root's group ``g`` (roots
    without one left out), as ``g, root, prefix, first, last``: looked up, not joined (a
    join gathers every column of millions of runs)."""
    g = pl.col("root").replace_strict(
        root_group.get_column("root"), root_group.get_column("g"), default=None
    )
    out = keys.select(g.alias("g"), "root", "prefix", "first", "last")
    return out.filter(pl.col("g").is_not_null()) if out.get_column("g").null_count() else out


@dataclass(frozen=True, slots=True)
class ServerTally:
    """One task's counter runs under its roots' servers (``g, root, prefix, first, last``,
    normalised per root and prefix; packed by :func:`_packed` or not), as the per-server
    counter judgement merges them (:func:`_server_shares`: a root is in one task)."""

    runs: bytes | pl.DataFrame


def server_tally(keys: pl.DataFrame, root_group: pl.DataFrame, pack: bool) -> ServerTally:
    """:class:`ServerTally` of one task's ``keys`` (runs, normalised), its roots' servers
    ``root_group`` (:func:`_group_codes`); packed with ``pack``."""
    grouped = _grouped(keys, root_group)
    return ServerTally(_packed(grouped) if pack else grouped)


def _server_shares(tallies: list[ServerTally]) -> pl.DataFrame:
    """``g, root, n, shared`` (:func:`facts.runs.shares`) over every task's roots."""
    return shares(pl.concat([_unpacked(t.runs) for t in tallies]))


def _server_values(tallies: list[ServerTally], groups: list[int]) -> pl.DataFrame:
    """``g, prefix, seq``: the distinct values of the groups ``groups`` over ``tallies``."""
    wanted = pl.col("g").is_in(groups)
    found = [_unpacked(t.runs).filter(wanted) for t in tallies]
    return expanded(normalised(pl.concat(found), ("g", "prefix")))


def _repeats(keys: pl.DataFrame, codes: tuple[pl.DataFrame, dict[int, str]]) -> dict[Any, bool]:
    """Per group (server or session): do most roots carry mostly values other roots of
    the group carry too (per-stream counters, each starting again)? Streams with fewer than
    :data:`MIN_VALUES_TO_JUDGE` values are left out (``facts.streams.counter_scopes``).
    ``keys``: runs (``root, prefix, first, last``, normalised); ``codes``:
    :func:`_group_codes`."""
    if not keys.height:
        return {}
    root_group, names = codes
    return _judge_groups(shares(_grouped(keys, root_group)), names)


def _judge_groups(per_root: pl.DataFrame, names: dict[int, str]) -> dict[Any, bool]:
    per_group = per_root.group_by("g").agg(
        (pl.col("n") >= MIN_VALUES_TO_JUDGE).sum().alias("judged"),
        ((pl.col("n") >= MIN_VALUES_TO_JUDGE) & (pl.col("shared") * 2 > pl.col("n")))
        .sum()
        .alias("mostly"),
    )
    return {
        names[g]: bool(j > 0 and m * 2 >= j)
        for g, j, m in per_group.select("g", "judged", "mostly").iter_rows()
    }


def _packed(df: pl.DataFrame) -> bytes:
    """``df`` compressed in memory (Parquet): the keys of a whole scan, one task's read
    back at a time."""
    buf = io.BytesIO()
    df.write_parquet(buf, compression="lz4", statistics=False)
    return buf.getvalue()


def _unpacked(part: bytes | pl.DataFrame) -> pl.DataFrame:
    return part if isinstance(part, pl.DataFrame) else pl.read_parquet(io.BytesIO(part))


def _task_keys(parts: list[bytes | pl.DataFrame]) -> pl.DataFrame:
    """One task's runs, normalised (each part already is: one part needs no other pass)."""
    if len(parts) == 1:
        return _unpacked(parts[0])
    return normalised(pl.concat([_unpacked(p) for p in parts]))


class FrontSource(Protocol):
    """Where the cross-session pass reads the scan's evidence: whole-scan reads narrowed by
    a filter, and the events partition by partition (so that no more than one
    partition's events are held at once)."""

    @property
    def buckets(self) -> int: ...

    def exchanges(
        self, columns: Sequence[str | pl.Expr], where: pl.Expr | None = None
    ) -> pl.DataFrame: ...

    def events(
        self, columns: Sequence[str | pl.Expr], where: pl.Expr | None = None
    ) -> pl.DataFrame: ...

    def bucket_exchanges(
        self, columns: Sequence[str | pl.Expr], where: pl.Expr | None = None
    ) -> Iterator[tuple[int, pl.DataFrame]]:
        """(partition, its exchanges), partition by partition in order."""
        ...

    def servers(self, conn_ids: pl.Series) -> pl.DataFrame:
        """``conn_id, server_ip, server_port`` of the connections ``conn_ids`` names."""
        ...

    def map_events(
        self,
        task: Callable[[Iterator[pl.DataFrame], A], R | None],
        columns: Sequence[str | pl.Expr],
        where: pl.Expr | None,
        asks: Sequence[tuple[int, A]],
        chunked: bool,
    ) -> Iterator[tuple[int, R]]:
        """``task(events, ask)`` for each (partition, ask) of ``asks``: the partition's
        events (``columns`` of the rows ``where`` selects; in chunks, in order, with
        ``chunked``, else in one frame), in the scan's worker processes when it has them
        (the same task functions a cluster runs). (partition, result) in the order of
        ``asks``, each as it comes back; partitions without such events, or whose task gave
        None, left out."""
        ...


_STREAM_COLUMNS: list[str | pl.Expr] = [
    *EXCHANGE_COLUMNS,
    pl.col("log_info").is_not_null().alias("log_stream"),
]
_HAS_ID = pl.col("id_field").fill_null("") != ""
# What the streams of the scan are read with: what :func:`_rank` orders them by, and
# what the links and schemes read of them (not the request line, status, folds' columns).
_RANKED_COLUMNS = [
    "conn_id", "index", "session", "session_inferred", "last_event_id",
    "req_src", "req_num", "req_ts", "req_kind", "resp_ts",
]  # fmt: skip


def _fold_inputs(source: FrontSource) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """(logged, captured, ids) of the sessions both captures and logs hold: the only ones
    :func:`_folds` can fold."""
    from_log = pl.col("from_log")
    # A session's exchanges are all in its partition: judged partition by partition, so
    # that one partition's sessions are held at a time, not every exchange's (issue 9).
    parts = [
        exchanges.group_by("session")
        .agg(pl.col("from_log").n_unique().alias("n"))
        .filter(pl.col("n") > 1)
        .get_column("session")
        for _, exchanges in source.bucket_exchanges(["session", "from_log"])
    ]
    both = pl.concat(parts) if parts else pl.Series("session", [], pl.String)
    cols = _STREAM_COLUMNS
    if not both.len():
        empty = source.exchanges(cols, pl.lit(False))
        return empty, empty, pl.DataFrame()
    mine = pl.col("session").is_in(both.implode())
    logged = source.exchanges(cols, from_log & mine)
    captured = source.exchanges(cols, ~from_log & mine)
    ids = source.events(["conn_id", "ex_index", "session", "id_field"], _HAS_ID & mine)
    return logged, captured, ids


def compute_front(source: FrontSource, config: AnalysisConfig) -> Front:
    """The cross-session facts of the scan whose evidence ``source`` reads."""
    buckets = source.buckets
    front = Front(buckets=buckets, limits=config.limits)
    logged, captured, ids = _fold_inputs(source)
    front.folds, front.dropped = _folds(logged, captured, ids)
    # Whose exchange each key of the front is (Front.split): log exchanges, streams.
    key_sessions = [logged.select("conn_id", "index", "session")]
    del logged, captured, ids
    streams = source.exchanges(
        _RANKED_COLUMNS,
        pl.col("event_stream") | pl.col("last_event_id").is_not_null(),
    )
    if front.dropped:
        dropped = pl.DataFrame(
            list(front.dropped), schema={"conn_id": pl.Int64, "index": pl.Int64}, orient="row"
        )
        streams = streams.join(dropped, on=["conn_id", "index"], how="anti")
    streams = _rank(streams).select(
        "rank",
        "conn_id",
        "index",
        "session",
        "session_inferred",
        pl.col("last_event_id").str.strip_chars().alias("leid"),
    )
    rank_of = streams.select("conn_id", pl.col("index").alias("ex_index"), "rank")
    id_columns = ["conn_id", "ex_index", "session", "position", "id_field", "kind"]

    # Links: the latest earlier stream carrying the Last-Event-ID (its last such event).
    # The IDs resumed from and the scheme statistics, one partition at a time.
    resumes = streams.filter(pl.col("leid").fill_null("") != "").select(
        "rank", "conn_id", "index", "session", "session_inferred", "leid"
    )
    # Only the sightings a link can pick: the ID in the resume's own session, or any
    # session's for a resume whose session was inferred (or is unknown). Per-stream
    # counters repeat every ID in every stream: filtering by ID alone kept every event.
    wanted = resumes.select("session", pl.col("leid").alias("id_field"), pl.lit(True).alias("_w"))
    wanted = wanted.unique(["session", "id_field"])
    wanted_any = (
        resumes.filter(pl.col("session_inferred") | pl.col("session").is_null())
        .get_column("leid")
        .unique()
        .implode()
    )
    patterns = _patterns(config)
    # Each partition's streams (a response's events are all in its session's partition):
    # what its task joins its events to.
    stream_bucket = streams.select(
        "conn_id", pl.col("index").alias("ex_index"), bucket_expr(buckets).alias("_b")
    )
    ranks = split_by(
        streams.select(
            "conn_id", pl.col("index").alias("ex_index"), "rank", bucket_expr(buckets).alias("_b")
        ),
        "_b",
        keep_key=False,
    )
    no_rank = rank_of.clear()
    wanted_by = (
        split_by(wanted.with_columns(bucket_expr(buckets).alias("_b")), "_b", keep_key=False)
        if resumes.height
        else {}
    )
    asks = [
        (
            b,
            IdsAsk(
                ranks.get(b, no_rank),
                wanted_by.get(b, wanted.clear()) if resumes.height else None,
                wanted_any,
                patterns,
                config.limits.id_digits,
            ),
        )
        for b in range(buckets)
    ]
    # A response's events are all in its session's partition: its sums are its own.
    got = list(source.map_events(partition_ids, id_columns, _HAS_ID, asks, chunked=True))
    del asks, wanted_by
    seen_parts = [seen for _, (seen, _stats) in got if seen is not None]
    stat_parts = [stats for _, (_seen, stats) in got if stats is not None]
    del got
    if len(seen_parts) > 1:  # the partitions' sightings as one table
        seen_parts = [_sightings(seen_parts)]
    seen = (
        pl.concat(seen_parts).sort("rank")
        if seen_parts
        else pl.DataFrame(
            schema={
                "rank": pl.UInt32,
                "session": pl.String,
                "id_field": pl.String,
                "pos": pl.Int64,
                "p_conn": pl.Int64,
                "p_index": pl.Int64,
            }
        )
    )
    del seen_parts
    picks: dict[int, tuple[int, int, int, int]] = {}  # resume rank → (rank, conn, index, pos)
    if resumes.height and seen.height:
        r = resumes.sort("rank").rename({"leid": "id_field"})
        same = r.join_asof(
            seen.rename({"rank": "p_rank"}),
            left_on="rank",
            right_on="p_rank",
            by=["session", "id_field"],
            strategy="backward",
            allow_exact_matches=False,
            check_sortedness=False,
        )
        for row in same.filter(pl.col("p_rank").is_not_null()).iter_rows(named=True):
            picks[row["rank"]] = (row["p_rank"], row["p_conn"], row["p_index"], row["pos"])
        if r.get_column("session_inferred").any():  # of any session: inferred ones only
            anyone = r.join_asof(
                seen.drop("session").rename({"rank": "p_rank"}),
                left_on="rank",
                right_on="p_rank",
                by=["id_field"],
                strategy="backward",
                allow_exact_matches=False,
                check_sortedness=False,
            )
            for row in anyone.filter(
                pl.col("p_rank").is_not_null() & pl.col("session_inferred")
            ).iter_rows(named=True):
                picks.setdefault(
                    row["rank"], (row["p_rank"], row["p_conn"], row["p_index"], row["pos"])
                )
    # The key and session of the linked streams only (a dict over every stream held two
    # Python objects per stream: 3.2 M streams on the --big log set, issue 9).
    linked = streams.filter(
        pl.col("rank").is_in(list({*picks, *(p[0] for p in picks.values())}))
    ).select("rank", "conn_id", "index", "session")
    key_of_rank = {rk: (c, i) for rk, c, i, _ in linked.iter_rows()}
    session_of_rank = {rk: s for rk, _, _, s in linked.iter_rows()}
    del linked
    root: dict[int, int] = {}
    for rk in sorted(picks):
        p_rank, pc, pi, pos = picks[rk]
        front.links[key_of_rank[rk]] = ((pc, pi), pos)
        root[rk] = root.get(p_rank, p_rank)
    roots = streams.select(
        "rank",
        "conn_id",
        "index",
        pl.col("rank")
        .replace_strict(list(root), list(root.values()), default=pl.col("rank"))
        .alias("root"),
    )

    # Tasks: a link between partitions joins them.
    parent = list(range(buckets))

    def find(b: int) -> int:
        while parent[b] != b:
            parent[b] = parent[parent[b]]
            b = parent[b]
        return b

    bucket = buckets_of(list(set(session_of_rank.values())), buckets)
    for rk, (p_rank, *_rest) in picks.items():
        a = find(bucket[session_of_rank[rk]])
        b = find(bucket[session_of_rank[p_rank]])
        if a != b:
            parent[max(a, b)] = min(a, b)
    groups: dict[int, list[int]] = {}
    for b in range(buckets):
        groups.setdefault(find(b), []).append(b)
    front.tasks = list(groups.values())
    task_of = {b: n for n, task in enumerate(front.tasks) for b in task}
    key_sessions.append(streams.select("conn_id", "index", "session"))
    front.key_tasks = (
        pl.concat(key_sessions)
        .unique(["conn_id", "index"])
        .select(
            "conn_id",
            "index",
            bucket_expr(buckets).replace_strict(task_of, return_dtype=pl.Int64).alias("task"),
        )
    )
    del key_sessions

    # ID schemes per logical stream (responses' statistics summed over its root), then
    # every ID's key, partition by partition.
    rank_key = streams.select(
        pl.col("rank").alias("root"),
        pl.col("conn_id").alias("root_conn"),
        pl.col("index").alias("root_index"),
    )
    root_of = roots.join(rank_key, on="root", how="left").select(
        "conn_id", pl.col("index").alias("ex_index"), "root_conn", "root_index"
    )
    stats = (
        pl.concat(stat_parts)
        if stat_parts
        else _response_stats(
            pl.DataFrame(
                schema={
                    c: pl.Int64 if c in ("conn_id", "ex_index", "position") else pl.String
                    for c in id_columns
                }
            ),
            patterns,
            config.limits.id_digits,
        )
    )
    del stat_parts
    # A session's reading is asked for its streams only (facts.streams.assign_ids): the
    # sessions of the streams, not every session of the scan (1.28M on the --big log set,
    # nearly all of them an access log's sessions that only POSTed).
    stream_sessions = streams.get_column("session").unique(maintain_order=True).to_list()
    front.codecs, front.stream_codecs, codes = _stream_codecs(
        stats, root_of, stream_sessions, config
    )
    del stream_sessions

    # Counter scopes over roots: the keys each root's streams carried.
    root_info = (
        roots.join(
            streams.select(
                pl.col("rank").alias("root"),
                pl.col("session").alias("r_session"),
                pl.col("conn_id").alias("r_conn"),
            ),
            on="root",
            how="left",
        )
        .join(
            # The streams' connections only: an access log's every client address is a
            # connection (on the 2.45 GB log set, reading them all was ~300 MB of the
            # client's peak in this pass).
            source.servers(streams.get_column("conn_id").unique()).rename({"conn_id": "r_conn"}),
            on="r_conn",
            how="left",
        )
        .with_columns(
            pl.concat_str(
                [pl.col("server_ip").fill_null(""), pl.col("server_port").cast(pl.String)],
                separator="\x00",
            ).alias("server")
        )
    )
    by_stream = root_info.select(
        pl.col("conn_id"), pl.col("index").alias("ex_index"), "root", "r_session", "server"
    )
    resumed = pl.DataFrame(
        [key_of_rank[rk] for rk in picks],
        schema={"conn_id": pl.Int64, "ex_index": pl.Int64},
        orient="row",
    )
    all_roots = root_info.select("root", pl.col("r_session").alias("session"), "server").unique()
    # Packed while the other partitions are read; a scan of one partition holds its keys
    # as they are (there is no other partition to read). Only the keys of a task of
    # several partitions come back: a task of its own tallies them (ServerTally).
    key_parts: dict[int, list[bytes | pl.DataFrame]] = {}
    stream_session = streams.select("conn_id", pl.col("index").alias("ex_index"), "session")
    responses = _response_codecs(codes, stream_session, root_of, buckets)
    by_bucket = split_by(
        by_stream.select("conn_id", "ex_index", "root").join(
            stream_bucket, on=["conn_id", "ex_index"], how="inner"
        ),
        "_b",
        keep_key=False,
    )
    no_codec = pl.DataFrame(schema={"conn_id": pl.Int64, "ex_index": pl.Int64, "codec": pl.Int64})
    no_stream = by_stream.select("conn_id", "ex_index", "root").clear()
    session_codes = _group_codes(all_roots, "session")
    server_roots, server_names = _group_codes(all_roots, "server")

    def sessions_of(b: int, streams_of: pl.DataFrame) -> tuple[pl.DataFrame, dict[int, str]] | None:
        """A partition judged alone (a task of its own): its roots' sessions, for its task
        to judge their counters (:func:`_repeats`); else None (judged here, task by task)."""
        if front.tasks[task_of[b]] != [b]:
            return None
        mine = session_codes[0].join(streams_of.select("root").unique(), on="root", how="semi")
        names = session_codes[1]
        return mine, {g: names[g] for g in mine.get_column("g").unique().to_list()}

    def servers_of(b: int, streams_of: pl.DataFrame) -> pl.DataFrame | None:
        """A partition judged alone: its roots' server codes, for its task to tally its
        keys by server (:func:`server_tally`); else None (tallied here, task by task)."""
        if front.tasks[task_of[b]] != [b]:
            return None
        return server_roots.join(streams_of.select("root").unique(), on="root", how="semi")

    key_asks = []
    for b in range(buckets):
        streams_of = by_bucket.get(b, no_stream)
        key_asks.append(
            (
                b,
                KeysAsk(
                    responses[0],
                    responses[1].get(b, no_codec),
                    streams_of,
                    buckets > 1,
                    sessions_of(b, streams_of),
                    servers_of(b, streams_of),
                ),
            )
        )
    del responses, by_bucket
    # Each response read under its logical stream's scheme, else its session's (only the
    # three columns keys need are read), in its partition's task.
    keys_of = source.map_events(
        partition_keys, ["conn_id", "ex_index", "id_field"], _HAS_ID, key_asks, chunked=True
    )
    session_repeats: dict[Any, bool] = {}
    tallies: dict[int, ServerTally] = {}  # each task's runs by server
    for part, (keys, repeats, tally) in keys_of:
        if tally is not None:  # a task of its own: judged and tallied in its task
            session_repeats.update(repeats or {})
            tallies[task_of[part]] = tally
        elif keys is not None:
            key_parts.setdefault(task_of[part], []).append(keys)
    del key_asks, keys_of
    # Runs (root, prefix, first, last), task by task: a root and every stream it roots are
    # judged in one task, and a root's session and server are the root's own (root_info).
    # Per session within the task; per server over every task's runs.
    for task, parts in key_parts.items():  # tasks of several partitions: judged here
        keys = _task_keys(parts)
        session_repeats.update(_repeats(keys, session_codes))
        tallies[task] = server_tally(keys, server_roots, buckets > 1)
        del keys
    del key_parts
    tallied = list(tallies.values())
    del tallies
    server_repeats: dict[Any, bool] = {}
    if tallied:
        server_repeats = _judge_groups(_server_shares(tallied), server_names)
    roots_per_server = dict(all_roots.group_by("server").agg(pl.len()).iter_rows())
    roots_per_session = dict(all_roots.group_by("session").agg(pl.len()).iter_rows())
    sessions_per_server = dict(
        all_roots.group_by("server").agg(pl.col("session").n_unique()).iter_rows()
    )
    shared_servers = {
        s for s, n in roots_per_server.items() if n > 1 and not server_repeats.get(s, False)
    }
    front.shared_session = {
        s for s, n in roots_per_session.items() if n > 1 and not session_repeats.get(s, False)
    }
    if shared_servers:  # every value of a shared counter: one group per server
        code = {name: g for g, name in server_names.items()}
        shared_codes = [code[server] for server in shared_servers]
        found = _server_values(tallied, shared_codes) if tallied else pl.DataFrame()
        values = (
            {server_names[g]: v for g, v in split_by(found, "g").items()} if found.height else {}
        )
        for server in shared_servers:
            ip, port = server.split("\x00")
            key = (ip, int(port))
            front.shared_server[key] = sessions_per_server[server] > 1
            mine = values.get(server, pl.DataFrame(schema={"prefix": pl.String, "seq": pl.Int64}))
            front.server_groups[key] = CounterGroup.from_arrays(
                mine.get_column("prefix").to_list(), mine.get_column("seq").to_numpy()
            )
    del tallied
    # Scope per session: the last root of the session (server by server) decides.
    order = all_roots.sort("root")
    for server_key, session in order.select("server", "session").iter_rows():
        if server_key in shared_servers:
            scope = "server" if sessions_per_server[server_key] > 1 else "session"
        elif session in front.shared_session:
            scope = "session"
        elif roots_per_session.get(session, 0) > 1 or roots_per_server.get(server_key, 0) > 1:
            scope = "per-stream"
        else:
            scope = "unknown"
        front.scopes[session] = scope

    # The per-stream tables of the scan are done with: not held while the events are read
    # again below.
    del streams, seen, roots, root_info, by_stream, all_roots, order, stats, root_of
    del key_of_rank, session_of_rank
    # First sightings of replayed data events, when another task holds them.
    front.foreign = _foreign(source, ranks, no_rank, resumed, front)
    return front


def _foreign(
    source: FrontSource,
    ranks: dict[Any, pl.DataFrame],
    no_rank: pl.DataFrame,
    resumed: pl.DataFrame,
    front: Front,
) -> dict[Key, dict[int, ForeignEvent]]:
    """The first sighting of each replayed event (same ID, same data) when it lies in a
    stream another task judges. ``resumed``: the resumes' streams; ``ranks``: each
    partition's streams' ``conn_id, ex_index, rank``."""
    if not resumed.height or len(front.tasks) < 2:  # one task holds every first sighting
        return {}
    data_hash = pl.col("data").hash().alias("h")
    is_data = (pl.col("kind") == "data") & _HAS_ID
    in_resumes = is_data & pl.col("conn_id").is_in(resumed.get_column("conn_id").unique().implode())
    # What the resumes replayed, an event as one hash of its (ID, data) pair. Only an event
    # a second task holds can be first sighted in another task than its replay's: the
    # others are left out before their sightings are read, and before their IDs are held
    # as text (issue 16: a resume's replay of a million events was looked up whole, each
    # sighting with its origin, to find none elsewhere; its IDs and pairs as strings were
    # the scan's peak, and on the 6.13 GB log set the scan's process's).
    hashed = source.events(
        ["conn_id", "ex_index", pair_hash().alias("p"), pl.col("id_field").hash().alias("i")],
        in_resumes,
    ).join(resumed, on=["conn_id", "ex_index"], how="semi")
    if not hashed.height:
        return {}
    id_hashes = hashed.get_column("i").unique().implode()
    shared = _in_two_tasks(
        source,
        hashed.get_column("p").unique(),
        is_data & pl.col("id_field").hash().is_in(id_hashes),
        front,
    )
    del hashed, id_hashes
    if not shared.len():
        return {}
    # Those events as text: a hash that collides keeps a pair, never drops one.
    replayed = source.events(
        ["conn_id", "ex_index", "session", "position", "id_field", data_hash],
        in_resumes & pair_hash().is_in(shared.implode()),
    ).join(resumed, on=["conn_id", "ex_index"], how="semi")
    pairs_wanted = replayed.select("id_field", "h").unique()
    ids = pairs_wanted.get_column("id_field").unique().implode()
    # Every sighting of those events, one partition at a time (only the IDs' rows are read;
    # their data only as a hash).
    columns: list[str | pl.Expr] = [
        "conn_id", "ex_index", "session", "position", "id_field",
        "first_src", "first_num", "first_ts", "first_kind", data_hash,
    ]  # fmt: skip

    # The first sighting of each: in every partition its first (its task's), then the first
    # of those and the earlier partitions' (a stream, so a (rank, position), lies in one
    # partition). Folded as the partitions come back: identical events recur in every one.
    asks = [(b, FirstAsk(pairs_wanted, ranks.get(b, no_rank))) for b in range(source.buckets)]
    found: pl.DataFrame | None = None
    for _, mine in source.map_events(
        partition_first, columns, is_data & pl.col("id_field").is_in(ids), asks, chunked=False
    ):
        found = mine if found is None else _earliest([found, mine])
    if found is None:  # cannot be: the replayed events themselves are among them
        return {}
    first = found.select(
        "id_field",
        "h",
        pl.col("session").alias("f_session"),
        pl.col("conn_id").alias("f_conn"),
        pl.col("ex_index").alias("f_index"),
        pl.col("first_src").alias("f_src"),
        pl.col("first_num").alias("f_num"),
        pl.col("first_ts").alias("f_ts"),
        pl.col("first_kind").alias("f_kind"),
    )
    buckets = source.buckets
    exchanges = source.exchanges(
        ["conn_id", "index", "req_method", "req_target"],
        pl.col("conn_id").is_in(first.get_column("f_conn").unique().implode()),
    )
    task_of = {b: n for n, task in enumerate(front.tasks) for b in task}
    labels = {
        (c, i): label_of(c, i, m, t)
        for c, i, m, t in exchanges.select("conn_id", "index", "req_method", "req_target")
        .join(
            first.select(pl.col("f_conn").alias("conn_id"), pl.col("f_index").alias("index")),
            on=["conn_id", "index"],
            how="semi",
        )
        .iter_rows()
    }
    out: dict[Key, dict[int, ForeignEvent]] = {}

    # A task that holds the first sighting itself needs nothing: only the others are read.
    def task(session: str) -> pl.Expr:
        return bucket_expr(buckets, session).replace_strict(task_of, return_dtype=pl.Int64)

    wanted: list[str] = [
        "conn_id", "ex_index", "position", "f_session", "f_src", "f_num", "f_ts", "f_kind",
        "f_conn", "f_index",
    ]  # fmt: skip
    pairs = (
        replayed.join(first, on=["id_field", "h"], how="inner")
        .filter(task("session") != task("f_session"))
        .select(wanted)
    )
    for row in pairs.iter_rows(named=True):
        origin = (
            Origin(row["f_src"], row["f_num"], row["f_ts"], row["f_kind"])
            if row["f_src"] is not None
            else None
        )
        out.setdefault((row["conn_id"], row["ex_index"]), {})[row["position"]] = ForeignEvent(
            origin, labels[(row["f_conn"], row["f_index"])], row["f_session"]
        )
    return out


# -- the partitions' tasks (run where the scan's partition tasks run: FrontSource.map_events)


@dataclass(frozen=True, slots=True)
class IdsAsk:
    """What :func:`partition_ids` needs of the whole scan for one partition: its streams'
    ``rank`` (``conn_id, ex_index, rank``), the sightings a link can pick (``wanted``:
    ``session, id_field, _w`` of its sessions' resumes, None without any resume;
    ``wanted_any``: IDs resumed from by a resume of inferred session), the prefixed
    patterns tried and the ``id_digits`` cap."""

    rank_of: pl.DataFrame
    wanted: pl.DataFrame | None
    wanted_any: pl.Series
    patterns: list[str]
    max_digits: int


_SIGHTING_KEY = ["rank", "session", "id_field"]


def _sightings(found: list[pl.DataFrame]) -> pl.DataFrame:
    """Sightings read in several chunks (or partitions) as one per (stream, ID)."""
    return (
        pl.concat(found)
        .group_by(_SIGHTING_KEY, maintain_order=True)
        .agg(pl.col("pos").max(), pl.col("p_conn").first(), pl.col("p_index").first())
    )


def partition_ids(
    chunks: Iterator[pl.DataFrame], ask: IdsAsk
) -> tuple[pl.DataFrame | None, pl.DataFrame | None]:
    """One partition's share of the links and ID schemes (:func:`compute_front`): the
    sightings a link can pick (per stream and ID: its last position) and its responses'
    :func:`_response_stats`, over its ID-carrying events read chunk by chunk."""
    found: list[pl.DataFrame] = []
    wanted = ask.wanted
    sighting = [
        pl.col("position").max().alias("pos"),
        pl.col("conn_id").first().alias("p_conn"),
        pl.col("ex_index").first().alias("p_index"),
    ]

    def id_chunks() -> Iterator[pl.DataFrame]:
        if wanted is not None:
            # Only an event carrying one of these IDs can be picked: those few rows first,
            # then the exact conditions.
            leids = pl.concat(
                [wanted.get_column("id_field"), ask.wanted_any.explode().drop_nulls()]
            ).implode()
            any_session = ask.wanted_any
        for events in chunks:
            id_events = events.join(ask.rank_of, on=["conn_id", "ex_index"], how="inner")
            del events
            if wanted is not None:
                found.append(
                    id_events.filter(pl.col("id_field").is_in(leids))
                    .join(wanted, on=["session", "id_field"], how="left")
                    .filter(pl.col("_w").is_not_null() | pl.col("id_field").is_in(any_session))
                    .group_by(_SIGHTING_KEY)
                    .agg(sighting)
                )
            yield id_events

    stats = _chunked_response_stats(id_chunks(), ask.patterns, ask.max_digits)
    seen = (_sightings(found) if len(found) > 1 else found[0]) if found else None
    return seen, stats


@dataclass(frozen=True, slots=True)
class KeysAsk:
    """What :func:`partition_keys` needs for one partition: the scan's distinct codecs,
    each of its streams' codec among them (``conn_id, ex_index, codec``), each stream's
    root (``conn_id, ex_index, root``), whether to pack the keys (:func:`_packed`), and
    its roots' session and server codes when it is a task of its own
    (:func:`_group_codes`)."""

    codecs: list[IdCodec]
    responses: pl.DataFrame
    by_stream: pl.DataFrame
    pack: bool
    sessions: tuple[pl.DataFrame, dict[int, str]] | None = None
    servers: pl.DataFrame | None = None


def partition_keys(
    events: Iterator[pl.DataFrame], ask: KeysAsk
) -> tuple[bytes | pl.DataFrame | None, dict[Any, bool] | None, ServerTally | None] | None:
    """One partition's counter keys as runs (``root, prefix, first, last``, normalised:
    :mod:`facts.runs`): each ID-carrying event's key under its response's codec
    (:func:`event_keys`), by root; or, when the partition is a task of its own
    (``ask.sessions``, ``ask.servers``: its roots' session and server codes), what its keys
    tell the merge instead: whether each of its sessions' counters repeat
    (:func:`_repeats`) and their :func:`server_tally`. The events are read chunk by chunk
    and each chunk's keys kept as runs only (issue 16: one stream of ten million IDs
    counting up holds a few rows)."""
    parts = [
        compact(runs_of(keys))
        for keys in (_chunk_keys(frame, ask) for frame in events)
        if keys.height
    ]
    if not parts:
        return None
    keys = normalised(pl.concat(parts) if len(parts) > 1 else parts[0])
    del parts
    if ask.sessions is not None and ask.servers is not None:
        return None, _repeats(keys, ask.sessions), server_tally(keys, ask.servers, ask.pack)
    return (_packed(keys) if ask.pack else keys), None, None


def _chunk_keys(frame: pl.DataFrame, ask: KeysAsk) -> pl.DataFrame:
    """``root, prefix, seq`` of the keyed events of one chunk (:func:`partition_keys`)."""
    by_response = {
        (c, i): IdCodec("opaque") if k is None else ask.codecs[k]
        for c, i, k in frame.select("conn_id", "ex_index")
        .unique()
        .join(ask.responses, on=["conn_id", "ex_index"], how="inner")
        .iter_rows()
    }
    keyed = (
        event_keys(frame, by_response)
        .lazy()
        .filter(pl.col("seq").is_not_null())
        .select("conn_id", "ex_index", "prefix", "seq")
        .collect()
    )
    del frame
    return compact(
        keyed.join(ask.by_stream, on=["conn_id", "ex_index"], how="inner").select(
            "root", "prefix", "seq"
        )
    )


def _response_codecs(
    codes: CodecCodes, stream_session: pl.DataFrame, root_of: pl.DataFrame, buckets: int
) -> tuple[list[IdCodec], dict[Any, pl.DataFrame]]:
    """The scan's distinct codecs, and per partition each stream's among them
    (``conn_id, ex_index, codec``): its logical stream's (``Front.stream_codecs``), else its
    session's (``Front.codecs``: every session has one)."""
    frame = (
        stream_session.join(root_of, on=["conn_id", "ex_index"], how="inner")
        .join(codes.roots, on=["root_conn", "root_index"], how="left")
        .join(codes.sessions, on="session", how="left", nulls_equal=True)
        .select(
            "conn_id",
            "ex_index",
            pl.coalesce("r", "s").alias("codec"),
            bucket_expr(buckets).alias("_b"),
        )
    )
    return codes.codecs, split_by(frame, "_b", keep_key=False)


def pair_hash() -> pl.Expr:
    """A 64-bit hash of an event's (ID, data) pair: screens pairs before they are compared
    (:func:`partition_pairs` returns it; :mod:`.replay_columns` screens a long replay's)."""
    return pl.struct("id_field", "data").hash(seed=0)


def _in_two_tasks(source: FrontSource, pairs: pl.Series, where: pl.Expr, front: Front) -> pl.Series:
    """Those of the replayed events' pair hashes ``pairs`` (:func:`pair_hash`) that
    partitions of more than one of ``front``'s tasks hold (a collision keeps a pair,
    never drops one)."""
    task_of = {b: n for n, task in enumerate(front.tasks) for b in task}
    asks = [(b, pairs) for b in range(source.buckets)]
    columns: list[str | pl.Expr] = [pair_hash().alias("p")]
    held = [
        mine.with_columns(task=pl.lit(task_of.get(b, -1 - b), pl.Int64))
        for b, mine in source.map_events(partition_pairs, columns, where, asks, chunked=False)
    ]
    if not held:
        return pairs.clear()
    return pl.concat(held).unique().group_by("p").len().filter(pl.col("len") > 1).get_column("p")


def partition_pairs(events: Iterator[pl.DataFrame], pairs: pl.Series) -> pl.DataFrame | None:
    """The pair hashes (``p``) of the replayed events ``pairs`` one partition holds
    (:func:`_in_two_tasks`)."""
    for frame in events:  # the partition's events in one frame
        return frame.filter(pl.col("p").is_in(pairs.implode())).unique()
    return None


@dataclass(frozen=True, slots=True)
class FirstAsk:
    """What :func:`partition_first` needs for one partition: the replayed events sought
    (``id_field, h``) and its streams' ``rank``."""

    pairs: pl.DataFrame
    rank_of: pl.DataFrame


def _earliest(frames: list[pl.DataFrame]) -> pl.DataFrame:
    return pl.concat(frames).sort(["rank", "position"]).unique(["id_field", "h"], keep="first")


def partition_first(events: Iterator[pl.DataFrame], ask: FirstAsk) -> pl.DataFrame | None:
    """One partition's first sighting of each replayed event (:func:`_foreign`)."""
    for frame in events:  # the partition's events in one frame
        return _earliest(
            [
                frame.join(ask.pairs, on=["id_field", "h"], how="semi").join(
                    ask.rank_of, on=["conn_id", "ex_index"], how="inner"
                )
            ]
        )
    return None
