"""The narrow representations issue 16 needs for one stream of millions of events keep every
value and every judgement: the row-by-row integer keys agree with the codec, events read
back from the store (categoricals, constant columns stored once) hold the values written,
and the ``events`` table left a lazy query gives the findings the materialised one gives
(the counter keys as runs: ``test_counter_runs``)."""

from __future__ import annotations

import itertools
import random

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
from sse_forensics.facts import event_slices, front
from sse_forensics.facts.event_slices import Order, Tally
from sse_forensics.facts.ids import IdCodec
from sse_forensics.pipeline import scan_paths
from sse_forensics.report.jsonout import findings_jsonl


def _stream_counts(keyed: pl.DataFrame, size: int) -> pl.DataFrame:
    """Per stream: :class:`Tally` of ``keyed`` fed ``size`` events at a time."""
    tally = Tally()
    for k in range(0, max(keyed.height, 1), size):
        tally.feed(keyed.slice(k, size))
    return tally.result()


def _order_flags(events: pl.DataFrame, size: int) -> pl.DataFrame:
    """``row, id_order, prev_row`` of :class:`Order` fed ``events`` ``size`` at a time."""
    order = Order()
    for k in range(0, events.height, size):
        order.feed(events.slice(k, size), k)
    return order.result(lambda: ((k, events.slice(k, size)) for k in range(0, events.height, size)))


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
    events = _random_rows(size)
    got = {r: (o, p) for r, o, p in _order_flags(events, size).iter_rows()}
    want = _naive_order(events.rows())
    assert got == want
    assert {o for o, _ in want.values()} == {"repeat", "backwards"}


def _random_rows(seed: int) -> pl.DataFrame:
    """Four streams' events (``rank, id_field, kind, prefix, seq``), the last one opaque:
    IDs repeated, missing, empty, signals among them."""
    rng = random.Random(seed)
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
    return pl.DataFrame(rows, schema=schema, orient="row")


@pytest.mark.parametrize("size", [1, 3, 1000])
def test_id_order_agrees_when_ids_share_a_hash(monkeypatch: pytest.MonkeyPatch, size: int) -> None:
    """Issue 16: an ID is looked up among the earlier ones by its hash; two IDs of one
    hash are told apart by the IDs themselves (a hash of the ID's length: 1..9 collide)."""
    monkeypatch.setattr(
        event_slices, "_ID_HASH", pl.col("id_field").str.len_bytes().cast(pl.UInt64).alias("h")
    )
    events = _random_rows(size)
    got = {r: (o, p) for r, o, p in _order_flags(events, size).iter_rows()}
    assert got == _naive_order(events.rows())


def test_id_order_holds_a_hash_per_opaque_id_not_the_id() -> None:
    """Issue 16: of an opaque stream's events, :class:`Order` holds until its pass ends a
    row number, a stream rank and a 64-bit hash each (it held each ID, 24 bytes here, and
    looked all of them up again as strings), and finds no repeat among distinct IDs."""
    n = 20_000
    events = pl.DataFrame(
        {
            "rank": pl.Series([0] * n, dtype=pl.Int64),
            "id_field": [f"opaque-{k:016x}" for k in range(n)],
            "kind": ["data"] * n,
            "prefix": pl.Series([None] * n, dtype=pl.String),
            "seq": pl.Series([None] * n, dtype=pl.Int64),
        }
    )
    order = Order()
    for k in range(0, n, 4096):
        order.feed(events.slice(k, 4096), k)
    held = sum(part.estimated_size() for part in order.unkeyed)
    assert held <= 20 * n, held
    assert order.result(lambda: ((k, events.slice(k, 4096)) for k in range(0, n, 4096))).is_empty()


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
    whole = _stream_counts(keyed, keyed.height)
    got = _stream_counts(keyed, size)
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


def _pointers(column: pl.Series) -> list[int]:
    """Where each chunk of an integer ``column`` without nulls holds its values."""
    return [c.to_numpy().__array_interface__["data"][0] for c in column.get_chunks()]


@pytest.mark.parametrize("key_slice", [64, 100, 1000])
def test_event_keys_go_beside_chunked_events_without_copying_them(
    key_slice: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 16: ``event_keys`` of events read back in chunks (longer and shorter than a
    key slice) gives the keys computed on the whole, cut where the events are, a
    key column that holds one value stored once, and the events' own columns as they were
    (a frame of ten million events was copied whole: +222 MB)."""
    lengths = [150, 70, 200]
    frames = []
    at = 0
    for n in lengths:
        frames.append(
            compact(
                pl.DataFrame(
                    {
                        "conn_id": [3] * n,
                        "ex_index": [0] * n,
                        "position": list(range(at, at + n)),
                        "id_field": [str(k % 97) for k in range(at, at + n)],
                    },
                    schema={
                        "conn_id": pl.Int64,
                        "ex_index": pl.Int64,
                        "position": pl.Int64,
                        "id_field": pl.String,
                    },
                )
            )
        )
        at += n
    events = pl.concat(frames, rechunk=False)
    codecs = {(3, 0): IdCodec("int")}
    whole = front.event_keys(events.rechunk(), codecs)
    monkeypatch.setattr(front, "KEY_SLICE", key_slice)
    got = front.event_keys(events, codecs)
    assert got.equals(whole)
    assert got.get_column("seq").to_list() == [k % 97 for k in range(at)]
    assert [c.len() for c in got.get_column("seq").get_chunks()] == [150, 70, 200]
    assert _pointers(got.get_column("position")) == _pointers(events.get_column("position"))
    assert store_module.stored_once(got, "prefix") and store_module.stored_once(got, "arithmetic")
