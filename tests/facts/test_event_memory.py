"""The narrow representations issue 16 needs for one stream of millions of events keep every
value and every judgement: the row-by-row integer keys agree with the codec, events read
back from the store (categoricals, constant columns stored once) hold the values written,
the hashed search for shared counter values agrees with counting, and the ``events`` table
left a lazy query gives the findings the materialised one gives."""

from __future__ import annotations

import itertools
import random
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import polars as pl
import pytest
from conftest import SAMPLES
from support.id_corpus import id_corpus

from sse_forensics.evidence import store as store_module
from sse_forensics.evidence.store import EvidenceStore, compact
from sse_forensics.evidence.tables import (
    ConnectionColumns,
    EventColumns,
    ExchangeColumns,
    split_by,
)
from sse_forensics.facts import columns, front
from sse_forensics.facts.ids import IdCodec
from sse_forensics.pipeline import scan_paths
from sse_forensics.report.jsonout import findings_jsonl


@pytest.mark.parametrize("max_digits", [19, 3])
def test_row_int_keys_agree_with_the_codec(max_digits: int) -> None:
    ids = id_corpus()
    got = front._with_int_keys(pl.DataFrame({"id_field": ids}), max_digits)
    codec = IdCodec("int", max_digits=max_digits)
    for value, ok, seq in got.select("id_field", "int_ok", "iseq").iter_rows():
        key = codec.key(value)
        assert (ok, seq) == (key is not None, key.seq if key else None), repr(value)


def _events(n: int) -> pl.DataFrame:
    """One stream's events: constant columns (connection, session, file, kinds, the
    all-null JSON-RPC and signal columns) beside varying ones (IDs, offsets, frames)."""
    rows = EventColumns.buffer()
    for k in range(n):
        row = {name: None for name in rows}
        row.update(
            conn_id=3,
            ex_index=0,
            session="s-1",
            position=k,
            id=str(k),
            id_field=str(k) if k % 5 else None,
            event="message" if k % 7 else "other-type",
            data="x" * (k % 3),
            start=10 * k,
            end=10 * k + 9,
            dispatched=True,
            kind="data",
            first_src="/captures/a-long-capture-file-name.pcap",
            first_num=k // 4 + 1,
            first_ts=1.5 + k,
            first_kind="frame",
            last_src="/captures/a-long-capture-file-name.pcap",
            last_num=k // 4 + 1,
            last_ts=1.5 + k,
            last_kind="frame",
        )
        for name, value in row.items():
            rows[name].append(value)
    return EventColumns.frame(rows)


def _as_strings(df: pl.DataFrame) -> pl.DataFrame:
    return df.with_columns(pl.col(pl.Categorical).cast(pl.String))


@pytest.mark.parametrize("spill", [False, True])
def test_store_reads_events_back_unchanged(spill: bool) -> None:
    events = _events(50)
    with EvidenceStore(1, memory_budget=0 if spill else 1 << 30) as store:
        store.add(ConnectionColumns.frame(), ExchangeColumns.frame(), events)
        assert store.spilled is spill
        _, _, loaded = store.load(0)
    assert loaded.schema["session"] == pl.Categorical
    assert loaded.schema["event"] == pl.String  # a sender's choice: not interned
    assert _as_strings(loaded).equals(events)
    # Filters, gathers and concatenations of the compacted frame keep the values.
    picked = loaded.filter(pl.col("position") % 3 == 0).gather([0, 2, 4])
    assert _as_strings(pl.concat([picked, picked])).equals(
        pl.concat([events.filter(pl.col("position") % 3 == 0).gather([0, 2, 4])] * 2)
    )


def test_compact_keeps_values_and_varying_columns() -> None:
    df = pl.DataFrame(
        {
            "same": ["a"] * 4,
            "nulls": pl.Series([None] * 4, dtype=pl.Int64),
            "flag": [True] * 4,
            "varies": ["a", "a", "b", "a"],
            "partly_null": [1, None, 1, 1],
        }
    )
    assert compact(df).equals(df)
    assert compact(df, ["varies"]).equals(df)
    assert compact(df.clear()).equals(df.clear())


def test_split_by_one_group_and_many() -> None:
    df = pl.DataFrame({"b": [2, 2, 2], "v": [1, 2, 3]})
    assert list(split_by(df, "b")) == [2]
    assert split_by(df, "b", keep_key=False)[2].equals(df.drop("b"))
    many = pl.DataFrame({"b": [2, 1, 2], "v": [1, 2, 3]})
    parts = split_by(many, "b", keep_key=False)
    assert list(parts) == [2, 1]
    assert parts[2].get_column("v").to_list() == [1, 3]


def _naive_per_root(parts: list[pl.DataFrame]) -> dict[tuple[int, int], tuple[int, int]]:
    """(g, root) → (values, values another root of g carries), by counting."""
    rows = [r for p in parts for r in p.select("g", "root", "prefix", "seq").iter_rows()]
    holders = Counter((g, prefix, seq) for g, _root, prefix, seq in rows)
    out: dict[tuple[int, int], tuple[int, int]] = {}
    for g, root, prefix, seq in rows:
        n, shared = out.get((g, root), (0, 0))
        out[(g, root)] = (n + 1, shared + (holders[(g, prefix, seq)] > 1))
    return out


def _random_tasks(
    seed: int, tasks: int, seq: Callable[[random.Random, int, int], int]
) -> tuple[list[pl.DataFrame], int]:
    """Each task's distinct ``root, prefix, seq`` keys (2-5 roots of 1-40 values, roots
    numbered from 1 across the tasks; ``seq(rng, task, root)`` draws a value), and the
    number of roots."""
    rng = random.Random(seed)
    out: list[pl.DataFrame] = []
    root = 0
    for task in range(tasks):
        keys = set()
        for _ in range(rng.randint(2, 5)):
            root += 1
            prefix = rng.choice(["", "a_", "b_"])
            for _ in range(rng.randint(1, 40)):
                keys.add((root, prefix, seq(rng, task, root)))
        schema = {"root": pl.Int64, "prefix": pl.String, "seq": pl.Int64}
        out.append(pl.DataFrame(sorted(keys), schema=schema, orient="row"))
    return out, root


def test_shared_values_agree_with_counting() -> None:
    tasks, roots = _random_tasks(9, 3, lambda rng, _task, _root: rng.randint(0, 30))
    groups = pl.DataFrame(
        {"root": list(range(1, roots + 1)), "g": [r % 3 for r in range(1, roots + 1)]}
    )
    parts = [front._grouped(keys, groups) for keys in tasks]
    reads = []

    def each_part() -> Iterator[pl.DataFrame]:  # one part at a time, as a scan's tasks
        reads.append(1)
        yield from parts

    shared = front._shared_values(each_part)
    assert len(reads) == 2  # hashes, then the candidates: no part kept between the passes
    got = {
        (g, r): (n, s)
        for p in parts
        for g, r, n, s in front._per_root(p, shared).select("g", "root", "n", "shared").iter_rows()
    }
    assert got == _naive_per_root(parts)
    assert any(s for _n, s in got.values()) and any(not s for _n, s in got.values())


def test_server_shares_agree_with_counting(monkeypatch: pytest.MonkeyPatch) -> None:
    """The per-server judgement merged from the tasks' tallies (each value once per task,
    with its holders) counts what counting every root's values gives, and reads back the
    values one root of a task carries only for the tasks holding a hash another task's
    value has: here not those of the last task, whose values no other root carries."""
    tasks, root = _random_tasks(  # the last task's values: its own roots' only
        11,
        4,
        lambda rng, task, root: (
            rng.randint(0, 30) if task < 3 else 1000 * root + rng.randint(0, 999)
        ),
    )
    groups = pl.DataFrame({"root": list(range(1, root + 1)), "g": [r % 3 for r in range(root)]})
    tallies = [front.server_tally(keys, groups, pack=True) for keys in tasks]
    assert all(t.many.height < keys.height for t, keys in zip(tallies, tasks[:3], strict=False))
    packed = [t.one for t in tallies]
    read: list[int] = []
    unpacked = front._unpacked

    def recorded(part: bytes | pl.DataFrame) -> pl.DataFrame:
        read.append(next(k for k, p in enumerate(packed) if p is part))
        return unpacked(part)

    monkeypatch.setattr(front, "_unpacked", recorded)
    shares = front._server_shares(tallies)
    got = {(g, r): (n, s) for g, r, n, s in shares.select("g", "root", "n", "shared").iter_rows()}
    assert got == _naive_per_root([front._grouped(t, groups) for t in tasks])
    assert any(s for _n, s in got.values()) and any(not s for _n, s in got.values())
    assert 3 not in read and len(read) == len(set(read))  # the fourth task's not at all
    values = front._server_values(tallies, [0, 2]).unique()
    naive = {
        (g, p, q)
        for t in tasks
        for g, p, q in front._grouped(t, groups).select("g", "prefix", "seq").iter_rows()
        if g in (0, 2)
    }
    assert set(values.iter_rows()) == naive and values.height == len(naive)


def test_shared_values_hold_the_distinct_values_not_every_key(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Per-stream counters (every root 1, 2, 3…) make every value a candidate: they are
    counted part by part, so no table of every candidate is built (issue 9: 170 MB on the
    8x log set), and the counts summed across parts still find what counting finds."""
    schema = {"root": pl.Int64, "prefix": pl.String, "seq": pl.Int64}
    parts = []
    for task in range(20):
        rows = [(task * 5 + r, "", seq) for r in range(5) for seq in range(50)]
        keys = pl.DataFrame(rows, schema=schema, orient="row")
        parts.append(keys.with_columns(pl.lit(1, pl.Int64).alias("g")))
    parts.append(
        pl.DataFrame([(999, "", 1000)], schema=schema, orient="row").with_columns(
            pl.lit(1, pl.Int64).alias("g")
        )
    )
    largest = [0]
    concat = pl.concat

    def spied(frames: Any, *args: Any, **kwargs: Any) -> Any:
        out = concat(frames, *args, **kwargs)
        if isinstance(out, pl.DataFrame) and "seq" in out.columns:
            largest[0] = max(largest[0], out.height)
        return out

    monkeypatch.setattr(pl, "concat", spied)
    shared = front._shared_values(lambda: iter(parts))
    assert sorted(shared.get_column("seq").to_list()) == list(range(50))
    assert largest[0] <= 20 * 50  # each part's distinct values, never its 250 keys
    got = {
        (g, r): (n, s)
        for p in parts
        for g, r, n, s in front._per_root(p, shared).select("g", "root", "n", "shared").iter_rows()
    }
    assert got == _naive_per_root(parts)
    # The counts summed part by part as they come: the same values.
    monkeypatch.setattr(front, "_HOLDERS_MERGE", 0)
    again = front._shared_values(lambda: iter(parts))
    assert sorted(again.rows()) == sorted(shared.rows())


@pytest.mark.parametrize(
    "sample", ["non-monotonic-id.pcap", "prefixed-live-jump.pcap", "replay-duplicate.pcap"]
)
def test_lazy_events_table_gives_the_same_findings(sample: str) -> None:
    path = str(SAMPLES / sample)
    eager = scan_paths([path], keep_tables=True)
    lazy = scan_paths([path], keep_tables=False)
    assert findings_jsonl(lazy) == findings_jsonl(eager)
    assert lazy.stats.events == eager.stats.events == eager.tables["events"].height
    if sample == "non-monotonic-id.pcap":  # the rule over the events table fired
        assert any(f.rule == "non-monotonic-id" for f in lazy.findings)


def test_distinct_keys_drop_repeats_only() -> None:
    schema = {"root": pl.Int64, "prefix": pl.String, "seq": pl.Int64}
    fresh = pl.DataFrame(
        [(1, "", 1), (1, "", 2), (2, "", 1), (1, "a_", 1)], schema=schema, orient="row"
    )
    assert front._distinct(fresh).equals(fresh)
    repeated = pl.concat([fresh, fresh.head(2)])
    assert sorted(front._distinct(repeated).rows()) == sorted(fresh.rows())


@pytest.mark.parametrize("size", [1, 2, 3, 1000])
def test_one_root_counting_up_is_distinct_as_it_is(
    size: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One root whose seq only rises is taken as it is (no hash per row), read
    ``KEY_SLICE`` rows at a time: a repeat or a step back anywhere, a slice's first row
    included, sends it to the exact path."""
    monkeypatch.setattr(front, "KEY_SLICE", size)
    schema = {"root": pl.Int64, "prefix": pl.String, "seq": pl.Int64}

    def keys(seqs: list[int], root: int = 1) -> pl.DataFrame:
        return compact(pl.DataFrame({"root": root, "prefix": "", "seq": seqs}, schema=schema))

    rising = keys([1, 2, 3, 5, 8, 9])
    assert front._counting_up(rising) and front._distinct(rising).equals(rising)
    for at in range(1, 6):  # a repeat of the row before, at every position
        seqs = [1, 2, 3, 5, 8, 9]
        seqs.insert(at, seqs[at - 1])
        repeated = keys(seqs)
        assert not front._counting_up(repeated), at
        assert sorted(front._distinct(repeated).rows()) == sorted(rising.rows()), at
    assert not front._counting_up(keys([1, 2, 3, 2, 4, 5]))  # back, then on
    two = pl.concat([keys([1, 2, 3]), keys([1, 2, 3], root=2)])
    assert not front._counting_up(two) and front._distinct(two).equals(two)


def _naive_order(rows: list[tuple[int, str | None, str, str | None, int | None]]) -> dict:
    """``row -> (id_order, prev_row)`` of the flagged events, walked event by event (the
    rule of ``facts.columns.events_plan``)."""
    out: dict[int, tuple[str, int | None]] = {}
    last: dict[int, tuple[int, str | None, int | None]] = {}  # rank -> previous judged event
    first: dict[tuple[int, str], int] = {}
    for row, (rank, id_field, kind, prefix, seq) in enumerate(rows):
        if not id_field or kind == "signal":
            continue
        prev = last.get(rank)
        seen = first.setdefault((rank, id_field), row)
        if prev is not None:
            p_row, p_prefix, p_seq = prev
            keyed = seq is not None and p_seq is not None
            if keyed and prefix == p_prefix and seq <= p_seq:
                out[row] = ("repeat" if seq == p_seq else "backwards", p_row)
            elif not keyed and seen != row:
                out[row] = ("repeat", seen)
        last[rank] = (row, prefix, seq)
    return out


@pytest.mark.parametrize("size", [1, 2, 3, 7, 1000])
def test_id_order_judged_in_slices_agrees_with_walking(size: int) -> None:
    rng = random.Random(size)
    rows = []
    for rank in range(4):
        opaque = rank == 3
        for _ in range(rng.randrange(5, 40)):
            n = rng.choice([1, 2, 3, 3, 4, 5, 9])
            id_field = rng.choice([str(n), None, ""]) if rng.random() < 0.2 else str(n)
            prefix = None if opaque or not id_field else rng.choice(["", "", "a_"])
            seq = None if prefix is None else n
            kind = "signal" if rng.random() < 0.1 else "data"
            rows.append((rank, id_field, kind, prefix, seq))
    schema = {
        "rank": pl.Int64,
        "id_field": pl.String,
        "kind": pl.String,
        "prefix": pl.String,
        "seq": pl.Int64,
    }
    events = pl.DataFrame(rows, schema=schema, orient="row")
    got = {r: (o, p) for r, o, p in columns._order_flags(events, size).iter_rows()}
    want = _naive_order(rows)
    assert got == want
    assert {o for o, _ in want.values()} == {"repeat", "backwards"}


@pytest.mark.parametrize("cuts", [[], [1], [3, 17], [5, 6, 40, 90]])
def test_response_stats_in_chunks_agree_with_the_whole(cuts: list[int]) -> None:
    rng = random.Random(len(cuts))
    rows = []
    for response in range(5):
        style = response % 3  # integers, prefixed, a mix with opaque IDs
        for k in range(rng.randrange(3, 30)):
            if style == 0:
                id_field = str(k + 1)
            elif style == 1:
                id_field = f"s{rng.choice([1, 1, 2])}_{k}"
            else:
                id_field = rng.choice([str(k), f"x:{k}", "opaque-id", "a/b"])
            kind = "signal" if rng.random() < 0.1 else "data"
            rows.append((response, 0, f"sess-{response % 2}", k, id_field, kind, response))
    schema = {
        "conn_id": pl.Int64,
        "ex_index": pl.Int64,
        "session": pl.String,
        "position": pl.Int64,
        "id_field": pl.String,
        "kind": pl.String,
        "rank": pl.UInt32,
    }
    whole = pl.DataFrame(rows, schema=schema, orient="row")
    bounds = [0, *cuts, whole.height]
    chunks = [whole.slice(a, b - a) for a, b in itertools.pairwise(bounds) if b > a]
    patterns = [*front._patterns(front.AnalysisConfig()), r"^(?P<stream>s\d)_(?P<seq>\d+)$"]
    want = front._response_stats(whole, patterns, 19).sort("conn_id")
    got = front._chunked_response_stats(chunks, patterns, 19)
    assert got is not None
    assert got.sort("conn_id").equals(want), (got.sort("conn_id"), want)
    assert want.get_column("fit0").sum() > 0 and want.get_column("int_fit").sum() > 0


@pytest.mark.parametrize("size", [1, 2, 5, 13])
def test_stream_counts_in_slices_agree_with_the_whole(size: int) -> None:
    rng = random.Random(size)
    rows = []
    for conn in (1, 2, 3):
        for k in range(rng.randrange(4, 25)):
            id_field = rng.choice([str(k), None, "", "x7"])
            seq = int(id_field) if id_field and id_field.isdigit() else None
            kind = rng.choice(["data", "data", "signal", "priming"])
            rows.append((conn, 0, id_field, kind, conn != 3, seq, "f.pcap", k + 1, k / 2, "frame"))
    schema = {
        "conn_id": pl.Int64,
        "ex_index": pl.Int64,
        "id_field": pl.String,
        "kind": pl.String,
        "arithmetic": pl.Boolean,
        "seq": pl.Int64,
        "first_src": pl.String,
        "first_num": pl.Int64,
        "first_ts": pl.Float64,
        "first_kind": pl.String,
    }
    keyed = pl.DataFrame(rows, schema=schema, orient="row")
    whole = columns._stream_counts(keyed, keyed.height)
    got = columns._stream_counts(keyed, size)
    assert got.cast(whole.schema).rows() == whole.rows()
    assert whole.get_column("outliers").sum() > 0


@pytest.mark.parametrize("chunk_rows", [1, 25, 60, 1000])
def test_bucket_chunks_give_the_bucket_in_order(chunk_rows: int, monkeypatch) -> None:
    monkeypatch.setattr(store_module, "CHUNK_ROWS", chunk_rows)  # read when called
    events = _events(120)
    columns = ["position", "id_field", "kind"]
    has_id = pl.col("id_field").is_not_null()
    with EvidenceStore(1, memory_budget=0) as store:
        for k in range(0, 100, 20):  # five spilled files of 20 rows, then 20 rows held
            store.add(ConnectionColumns.frame(), ExchangeColumns.frame(), events.slice(k, 20))
        store.memory_budget = 1 << 30
        store.add(ConnectionColumns.frame(), ExchangeColumns.frame(), events.slice(100, 20))
        whole = store.columns(EventColumns, columns, has_id)
        chunks = list(store.bucket_rows(0, EventColumns, columns, has_id, chunked=True))
        one = list(store.bucket_rows(0, EventColumns, columns, has_id))
    assert pl.concat(chunks).equals(whole)
    assert len(one) == 1 and one[0].equals(whole)
    assert whole.height == events.filter(has_id).height
    # Files grouped up to chunk_rows rows (or one file each), the held batch on its own.
    assert len(chunks) == {1: 6, 25: 6, 60: 3, 1000: 2}[chunk_rows]
