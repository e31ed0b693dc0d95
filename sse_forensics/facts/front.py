"""The facts that cross sessions, computed once over the whole scan with polars expressions,
before the per-partition judges run (the issue's exception to "every finding needs only its
own session": resumes without a session header, server-wide counters, replays that leak
another session's events).

- **Folds** (``facts.join``): an event-log stream that a captured response also carries, and
  an access-log line a captured exchange also shows, are not counted twice.
- **Stream order**: streams in time order (``facts.streams._time_order``), as a rank.
- **Links** (PROFILE.md, "Sessions and streams"): a resume continues the latest earlier
  stream of its session on which its ``Last-Event-ID`` was seen; of any session only when
  its own session is inferred (no ``Mcp-Session-Id``). The *root* of a stream is the
  original stream a chain of resumes continues.
- **ID schemes** (``facts.ids.detect_scheme``'s rule, per logical stream, outliers
  tolerated; a session's default for streams that carried no ID) and each ID's key.
- **Counter scope** (PROFILE.md, "Event IDs"): whether a counter is shared by the streams of
  a session or of a whole server, decided on every root of the session or server; the
  server's values (for the partitions to exclude from gaps).
- **First sightings** of replayed events: a resume that replays an event first sent in
  another session's stream (``replay-crossed-sessions``).
- **Tasks**: partitions a cross-session link joins are judged together.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import polars as pl

from sse_forensics.evidence.store import buckets_of
from sse_forensics.facts.config import AnalysisConfig
from sse_forensics.facts.ids import (
    COUNTER_FIRST,
    INT_ID,
    MIN_FITTING,
    OUTLIER_SHARE,
    IdCodec,
)
from sse_forensics.facts.taken import CounterGroup
from sse_forensics.ingest.logs.files import rotation_key
from sse_forensics.provenance import Origin

Key = tuple[int, int]  # (connection, exchange index)
DataOf = Callable[[list[str]], pl.DataFrame]
"""Reads back ``conn_id, ex_index, position, data`` of the events with the given IDs."""
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
    "log_info",
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


@dataclass(slots=True)
class Front:
    """What the partitions are told. Keys are (connection, exchange index)."""

    dropped: set[Key] = field(default_factory=set)  # log exchanges a capture already holds
    folds: dict[Key, Key] = field(default_factory=dict)  # event-log exchange → captured one
    links: dict[Key, tuple[Key, int]] = field(default_factory=dict)  # resume → (stream, pos)
    codecs: dict[str, IdCodec] = field(default_factory=dict)  # a session's default reading
    stream_codecs: dict[Key, IdCodec] = field(default_factory=dict)  # root stream → its scheme
    scopes: dict[str, str] = field(default_factory=dict)
    shared_session: set[str] = field(default_factory=set)  # session-wide counters
    shared_server: dict[Server, bool] = field(default_factory=dict)  # server-wide: many sessions?
    server_groups: dict[Server, CounterGroup] = field(default_factory=dict)
    foreign: dict[tuple[Key, int], ForeignEvent] = field(default_factory=dict)
    tasks: list[list[int]] = field(default_factory=list)

    def for_sessions(self, sessions: set[str], keys: set[Key]) -> Front:
        """The part one task needs (small to hand to a worker process)."""
        servers = set(self.server_groups)
        return Front(
            dropped={k for k in self.dropped if k in keys},
            folds={k: v for k, v in self.folds.items() if k in keys},
            links={k: v for k, v in self.links.items() if k in keys},
            codecs={s: c for s, c in self.codecs.items() if s in sessions},
            stream_codecs={k: c for k, c in self.stream_codecs.items() if k in keys},
            scopes={s: c for s, c in self.scopes.items() if s in sessions},
            shared_session=self.shared_session & sessions,
            shared_server=dict(self.shared_server),
            server_groups={s: self.server_groups[s] for s in servers},
            foreign={k: v for k, v in self.foreign.items() if k[0] in keys},
        )


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


def _folds(exchanges: pl.DataFrame, events: pl.DataFrame) -> tuple[dict[Key, Key], set[Key]]:
    """Event-log streams a captured stream of the same session also carries (most shared
    IDs; the first such stream on ties) and access lines a captured exchange also shows
    (same session, method, ``Last-Event-ID`` and status, within the clock tolerance)."""
    logged = exchanges.filter(pl.col("from_log"))
    captured = exchanges.filter(~pl.col("from_log"))
    if not logged.height or not captured.height:
        return {}, set()
    ids = events.filter(pl.col("id_field").fill_null("") != "").select(
        "conn_id", "ex_index", "session", "id_field"
    )
    log_streams = logged.filter(pl.col("log_info").is_not_null()).select(
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
            .unique(["l_conn", "l_index"], keep="first")
        )
        for lc, li, cc, ci in best.select("l_conn", "l_index", "c_conn", "c_index").iter_rows():
            folds[(lc, li)] = (cc, ci)
    dropped = set(folds)
    access = logged.filter(pl.col("log_info").is_null() & pl.col("req_method").is_not_null())
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


def _match_prefixed(ids: pl.Series, pattern: str) -> pl.DataFrame:
    """For each distinct ID: does ``pattern`` match it (``re.match``), its ``stream`` group
    and ``seq`` — with Python's ``re``, so a user's pattern means what it means elsewhere."""
    compiled = re.compile(pattern)
    values = ids.unique().to_list()
    matched, prefix, seq = [], [], []
    for value in values:
        m = compiled.match(value)
        if m is None:
            matched.append(False)
            prefix.append(None)
            seq.append(None)
            continue
        matched.append(True)
        prefix.append(m.groupdict().get("stream"))
        try:
            seq.append(int(m.group("seq")))
        except (ValueError, OverflowError):
            seq.append(None)
    return pl.DataFrame(
        {"id_field": values, "m": matched, "prefix": prefix, "seq": seq},
        schema={"id_field": pl.String, "m": pl.Boolean, "prefix": pl.String, "seq": pl.Int64},
    )


def _int_keys(ids: pl.Series) -> pl.DataFrame:
    values = ids.unique().to_list()
    seq: list[int | None] = []
    for v in values:
        if INT_ID.match(v):
            try:
                seq.append(int(v))
            except (ValueError, OverflowError):
                seq.append(None)
        else:
            seq.append(None)
    # Python's int has no upper bound; an ID beyond 64 bits reads as no counter at all.
    seq = [s if s is not None and s < (1 << 63) else None for s in seq]
    return pl.DataFrame(
        {"id_field": values, "int_ok": [INT_ID.match(v) is not None for v in values], "iseq": seq},
        schema={"id_field": pl.String, "int_ok": pl.Boolean, "iseq": pl.Int64},
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
    df = events.join(scheme, on=["conn_id", "ex_index"], how="left")
    ids = df.filter(pl.col("id_field").fill_null("") != "").get_column("id_field")
    df = df.join(_int_keys(ids), on="id_field", how="left")
    prefix = pl.when(pl.col("scheme") == "int").then(pl.when(pl.col("int_ok")).then(pl.lit("")))
    seq = pl.when(pl.col("scheme") == "int").then(pl.col("iseq"))
    extra: list[str] = ["int_ok", "iseq", "scheme"]
    for name, pattern in patterns.items():
        own = df.filter(pl.col("scheme") == name).get_column("id_field").drop_nulls()
        table = _match_prefixed(own, pattern).rename(
            {"m": f"m_{name}", "prefix": f"x_{name}", "seq": f"s_{name}"}
        )
        df = df.join(table, on="id_field", how="left")
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
    df = df.with_columns(
        pl.when(pl.col("seq").is_not_null()).then(pl.col("prefix")).alias("prefix")
    )
    return df.drop(extra)


def _follows(n: pl.Expr, fitting: pl.Expr) -> pl.Expr:
    """``facts.ids.follows`` as an expression."""
    outliers = n - fitting
    return ((n > 0) & (fitting == n)) | (
        (fitting >= MIN_FITTING) & (outliers <= pl.max_horizontal(pl.lit(1), n // OUTLIER_SHARE))
    )


def _schemes(
    id_events: pl.DataFrame, roots: pl.DataFrame, sessions: list[str], config: AnalysisConfig
) -> tuple[dict[str, IdCodec], dict[Key, IdCodec], pl.DataFrame]:
    """Per logical stream (``roots``: ``conn_id, ex_index, root_conn, root_index`` of every
    stream), its ID scheme (``facts.ids.detect_scheme``: int when the IDs are decimal
    integers, outliers tolerated; prefixed when they fit the pattern and the counter moves
    within a response while the prefix mostly stays put; else opaque). Per session, the
    scheme of its logical stream with the most IDs: the reading of a stream that carried
    none (a resume the inputs never linked, seen in an access log). And every ID's key."""
    forced = config.id_scheme
    patterns = [config.prefixed_regex, COUNTER_FIRST]
    compiled = [re.compile(p) for p in patterns]
    ids = id_events.get_column("id_field")
    ints = _int_keys(ids)
    matches = [_match_prefixed(ids, p) for p in patterns]
    root = ["root_conn", "root_index"]
    judged = (
        id_events.filter(pl.col("kind") != "signal")
        .join(roots, on=["conn_id", "ex_index"], how="inner")
        .join(ints, on="id_field", how="left")
    )
    per_root = judged.group_by([*root, "session"]).agg(
        pl.len().alias("n"), pl.col("int_ok").sum().alias("int_fit")
    )
    per_root = per_root.with_columns(_follows(pl.col("n"), pl.col("int_fit")).alias("int"))
    for k, m in enumerate(matches):
        j = judged.join(m, on="id_field", how="left").with_columns(pl.col("m").fill_null(False))
        per_response = j.group_by([*root, "conn_id", "ex_index"]).agg(
            pl.len().alias("n"),
            pl.col("m").sum().alias("fit"),
            pl.col("prefix").filter(pl.col("m")).n_unique().alias("prefixes"),
            pl.col("seq").filter(pl.col("m")).n_unique().alias("seqs"),
        )
        ok = per_response.group_by(root).agg(
            pl.col("n").sum().alias("n_all"),
            pl.col("fit").sum().alias("fit_all"),
            (pl.col("prefixes") > pl.max_horizontal(pl.lit(2), pl.col("fit") // 2))
            .any()
            .alias("too_many"),
            (pl.col("seqs") > 1).any().alias("moved"),
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

    def decide(is_int: bool, p0: bool, p1: bool) -> IdCodec:
        if forced == "opaque":
            return IdCodec("opaque")
        if forced == "int" or (forced is None and is_int):
            return IdCodec("int")
        if forced == "prefixed" or p0:
            return IdCodec("prefixed", compiled[0])
        if p1:
            return IdCodec("prefixed", compiled[1])
        return IdCodec("opaque")

    stream_codecs: dict[Key, IdCodec] = {}
    session_codecs: dict[str, IdCodec] = {}
    best: dict[str, int] = {}
    for rc, ri, session, n, is_int, p0, p1 in (
        per_root.sort(root).select(*root, "session", "n", "int", "p0", "p1").iter_rows()
    ):
        codec = decide(bool(is_int), bool(p0), bool(p1))
        stream_codecs[(rc, ri)] = codec
        if n > best.get(session, 0):
            best[session], session_codecs[session] = n, codec
    for session in sessions:
        if session not in session_codecs:  # no ID in the session: only a forced scheme
            session_codecs[session] = decide(False, False, False)
    # Keys of every ID-carrying event (signals included) under its stream's scheme.
    by_response = {
        (c, i): stream_codecs.get((rc, ri)) or session_codecs.get(session) or IdCodec("opaque")
        for c, i, rc, ri, session in id_events.join(roots, on=["conn_id", "ex_index"], how="inner")
        .select("conn_id", "ex_index", *root, "session")
        .unique()
        .iter_rows()
    }
    keyed = (
        event_keys(id_events, by_response)
        .filter(pl.col("seq").is_not_null())
        .select("conn_id", "ex_index", "position", "session", "prefix", "seq")
    )
    return session_codecs, stream_codecs, keyed


def _repeats(keys: pl.DataFrame, group: str) -> dict:
    """Per ``group`` (server or session): do most roots carry mostly values other roots of
    the group carry too (per-stream counters, each starting again)? Streams with fewer than
    :data:`MIN_VALUES_TO_JUDGE` values are left out (``facts.streams.counter_scopes``)."""
    if not keys.height:
        return {}
    holders = keys.group_by([group, "prefix", "seq"]).agg(pl.len().alias("holders"))
    per_root = (
        keys.join(holders, on=[group, "prefix", "seq"], how="left")
        .group_by([group, "root"])
        .agg(pl.len().alias("n"), (pl.col("holders") > 1).sum().alias("shared"))
    )
    per_group = per_root.group_by(group).agg(
        (pl.col("n") >= MIN_VALUES_TO_JUDGE).sum().alias("judged"),
        ((pl.col("n") >= MIN_VALUES_TO_JUDGE) & (pl.col("shared") * 2 > pl.col("n")))
        .sum()
        .alias("mostly"),
    )
    return {
        g: bool(j > 0 and m * 2 >= j)
        for g, j, m in per_group.select(group, "judged", "mostly").iter_rows()
    }


def compute_front(
    exchanges: pl.DataFrame,
    events: pl.DataFrame,
    servers: pl.DataFrame,
    config: AnalysisConfig,
    buckets: int,
    data_of: DataOf,
) -> Front:
    """``exchanges``/``events``: every partition's rows (:data:`EXCHANGE_COLUMNS`,
    :data:`EVENT_COLUMNS`); ``servers``: ``conn_id, server_ip, server_port``."""
    front = Front()
    front.folds, front.dropped = _folds(exchanges, events)
    dropped = pl.DataFrame(
        list(front.dropped), schema={"conn_id": pl.Int64, "index": pl.Int64}, orient="row"
    )
    streams = exchanges.join(dropped, on=["conn_id", "index"], how="anti").filter(
        pl.col("event_stream") | pl.col("last_event_id").is_not_null()
    )
    streams = _rank(streams).with_columns(pl.col("last_event_id").str.strip_chars().alias("leid"))
    rank_of = streams.select("conn_id", "index", "rank", "session", "session_inferred")
    stream_events = events.join(
        rank_of.select("conn_id", pl.col("index").alias("ex_index"), "rank"),
        on=["conn_id", "ex_index"],
        how="inner",
    )
    id_events = stream_events.filter(pl.col("id_field").fill_null("") != "")

    # Links: the latest earlier stream carrying the Last-Event-ID (its last such event).
    resumes = streams.filter(pl.col("leid").fill_null("") != "").select(
        "rank", "conn_id", "index", "session", "session_inferred", "leid"
    )
    wanted = resumes.get_column("leid").unique()
    seen = (
        id_events.filter(pl.col("id_field").is_in(wanted.implode()))
        .group_by(["rank", "session", "id_field"])
        .agg(
            pl.col("position").max().alias("pos"),
            pl.col("conn_id").first().alias("p_conn"),
            pl.col("ex_index").first().alias("p_index"),
        )
        .sort("rank")
    )
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
        anyone = r.join_asof(
            seen.drop("session").rename({"rank": "p_rank"}),
            left_on="rank",
            right_on="p_rank",
            by=["id_field"],
            strategy="backward",
            allow_exact_matches=False,
            check_sortedness=False,
        )
        for row in same.filter(pl.col("p_rank").is_not_null()).iter_rows(named=True):
            picks[row["rank"]] = (row["p_rank"], row["p_conn"], row["p_index"], row["pos"])
        for row in anyone.filter(
            pl.col("p_rank").is_not_null() & pl.col("session_inferred")
        ).iter_rows(named=True):
            picks.setdefault(
                row["rank"], (row["p_rank"], row["p_conn"], row["p_index"], row["pos"])
            )
    key_of_rank = {
        rk: (c, i) for rk, c, i in streams.select("rank", "conn_id", "index").iter_rows()
    }
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
    session_of_rank = dict(streams.select("rank", "session").iter_rows())
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

    # ID schemes (per logical stream) and keys.
    sessions = exchanges.get_column("session").unique().sort().to_list()
    rank_key = streams.select(
        pl.col("rank").alias("root"),
        pl.col("conn_id").alias("root_conn"),
        pl.col("index").alias("root_index"),
    )
    root_of = roots.join(rank_key, on="root", how="left").select(
        "conn_id", pl.col("index").alias("ex_index"), "root_conn", "root_index"
    )
    front.codecs, front.stream_codecs, keyed = _schemes(id_events, root_of, sessions, config)

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
        .join(servers.rename({"conn_id": "r_conn"}), on="r_conn", how="left")
        .with_columns(
            pl.concat_str(
                [pl.col("server_ip").fill_null(""), pl.col("server_port").cast(pl.String)],
                separator="\x00",
            ).alias("server")
        )
    )
    root_keys = (
        keyed.join(
            root_info.select(
                pl.col("conn_id"), pl.col("index").alias("ex_index"), "root", "r_session", "server"
            ),
            on=["conn_id", "ex_index"],
            how="inner",
        )
        .select("root", pl.col("r_session").alias("session"), "server", "prefix", "seq")
        .unique()
    )
    all_roots = root_info.select("root", pl.col("r_session").alias("session"), "server").unique()
    roots_per_server = dict(all_roots.group_by("server").agg(pl.len()).iter_rows())
    roots_per_session = dict(all_roots.group_by("session").agg(pl.len()).iter_rows())
    sessions_per_server = dict(
        all_roots.group_by("server").agg(pl.col("session").n_unique()).iter_rows()
    )
    server_repeats = _repeats(root_keys, "server")
    session_repeats = _repeats(root_keys, "session")
    shared_servers = {
        s for s, n in roots_per_server.items() if n > 1 and not server_repeats.get(s, False)
    }
    front.shared_session = {
        s for s, n in roots_per_session.items() if n > 1 and not session_repeats.get(s, False)
    }
    for server in shared_servers:
        ip, port = server.split("\x00")
        key = (ip, int(port))
        front.shared_server[key] = sessions_per_server[server] > 1
        values = root_keys.filter(pl.col("server") == server).select("prefix", "seq")
        front.server_groups[key] = CounterGroup.from_arrays(
            values.get_column("prefix").to_list(), values.get_column("seq").to_numpy()
        )
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

    # First sightings of replayed data events, when another task holds them.
    front.foreign = _foreign(stream_events, exchanges, picks, key_of_rank, front, buckets, data_of)
    return front


def _foreign(
    stream_events: pl.DataFrame,
    exchanges: pl.DataFrame,
    picks: dict,
    key_of_rank: dict,
    front: Front,
    buckets: int,
    data_of: DataOf,
) -> dict[tuple[Key, int], ForeignEvent]:
    linked = [key_of_rank[rk] for rk in picks]
    if not linked:
        return {}
    resumed = pl.DataFrame(linked, schema={"conn_id": pl.Int64, "ex_index": pl.Int64}, orient="row")
    data = stream_events.filter(
        (pl.col("kind") == "data") & (pl.col("id_field").fill_null("") != "")
    )
    # The data of the replayed events and of every event with one of their IDs: read back
    # for those rows only (an event's data is the bulk of a capture).
    ids = data.join(resumed, on=["conn_id", "ex_index"], how="semi").get_column("id_field")
    if not ids.len():
        return {}
    payloads = data_of(ids.unique().to_list()).with_columns(pl.col("data").hash().alias("h"))
    data = data.join(
        payloads.select("conn_id", "ex_index", "position", "h"),
        on=["conn_id", "ex_index", "position"],
        how="inner",
    )
    replayed = data.join(resumed, on=["conn_id", "ex_index"], how="inner")
    if not replayed.height:
        return {}
    first = (
        data.join(replayed.select("id_field", "h").unique(), on=["id_field", "h"], how="semi")
        .sort(["rank", "position"])
        .unique(["id_field", "h"], keep="first")
        .select(
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
    out: dict[tuple[Key, int], ForeignEvent] = {}
    pairs = replayed.join(first, on=["id_field", "h"], how="inner")
    bucket = buckets_of(
        pairs.get_column("session").to_list() + pairs.get_column("f_session").to_list(), buckets
    )
    for row in pairs.iter_rows(named=True):
        mine = task_of[bucket[row["session"]]]
        theirs = task_of[bucket[row["f_session"]]]
        if mine == theirs:
            continue  # the task sees the first sighting itself
        origin = (
            Origin(row["f_src"], row["f_num"], row["f_ts"], row["f_kind"])
            if row["f_src"] is not None
            else None
        )
        out[((row["conn_id"], row["ex_index"]), row["position"])] = ForeignEvent(
            origin, labels[(row["f_conn"], row["f_index"])], row["f_session"]
        )
    return out
