"""The counter keys as runs (``facts.runs``, issue 16) give what one row per key gave: the
runs a partition's chunks are cut into and merged back are the distinct values of each
root and prefix (runs broken across chunks, a repeat inside a run, a step back, prefixed
IDs, several roots), and each root's values and the values it shares with another root of
its group are what counting every value finds, within one task and over the tasks'
tallies; a stream counting up costs one run."""

from __future__ import annotations

import itertools
import random
from collections import Counter
from collections.abc import Callable

import polars as pl
import pytest

from sse_forensics.evidence.store import compact
from sse_forensics.facts import front, runs
from sse_forensics.facts.ids import INT64_MAX, IdCodec

KEYS = {"root": pl.UInt32, "prefix": pl.String, "seq": pl.Int64}
Row = tuple[int, str, int]


def _keys(rows: list[Row]) -> pl.DataFrame:
    return pl.DataFrame(rows, schema=KEYS, orient="row")


def _runs(chunks: list[list[Row]]) -> pl.DataFrame:
    """The runs of ``chunks`` (one partition's keys, read in those chunks), merged."""
    parts = [runs.runs_of(_keys(c)) for c in chunks if c]
    return runs.normalised(pl.concat(parts))


def _values(merged: pl.DataFrame) -> set[Row]:
    grouped = merged.with_columns(pl.col("root").cast(pl.Int64).alias("g"))
    back = runs.expanded(grouped.select("g", "prefix", "first", "last"))
    return set(back.select("g", "prefix", "seq").iter_rows())


def _cuts(rows: list[Row]) -> list[list[list[Row]]]:
    """``rows`` whole, then cut in two at every place, then into chunks of one row."""
    return [
        [rows],
        *([rows[:k], rows[k:]] for k in range(1, len(rows))),
        [[r] for r in rows],
    ]


@pytest.mark.parametrize(
    ("seqs", "want"),
    [
        ([1, 2, 3, 4, 5, 6, 7, 8], [(1, 8)]),  # one run, whatever the chunks
        ([1, 2, 3, 3, 4, 5], [(1, 5)]),  # a repeat inside a run
        ([1, 2, 3, 2, 4, 5], [(1, 5)]),  # a step back, then on
        ([5, 6, 7, 1, 2, 3], [(1, 3), (5, 7)]),  # back to before the run
        ([1, 2, 3, 5, 6], [(1, 3), (5, 6)]),  # a gap stays a gap
        ([4, 3, 2, 1], [(1, 4)]),  # counting down: touching values merge
        ([0, INT64_MAX - 1, INT64_MAX, 2], [(0, 0), (2, 2), (INT64_MAX - 1, INT64_MAX)]),
    ],
)
def test_runs_merge_across_chunks_to_the_distinct_values(
    seqs: list[int], want: list[tuple[int, int]]
) -> None:
    rows = [(1, "", q) for q in seqs]
    for chunks in _cuts(rows):
        merged = _runs(chunks)
        assert sorted(merged.select("first", "last").rows()) == want, chunks
        assert _values(merged) == {(1, "", q) for q in seqs}


def test_runs_keep_roots_and_prefixes_apart() -> None:
    """Prefixed IDs switching prefix, two roots counting alike: one run per root and
    prefix, never merged across them."""
    rows = [
        *((1, "a_", q) for q in (1, 2, 3)),
        *((1, "b_", q) for q in (4, 5)),
        (1, "a_", 4),
        *((2, "a_", q) for q in (1, 2, 3, 4)),
        (1, "", 6),
    ]
    for chunks in _cuts(rows):
        merged = _runs(chunks)
        assert sorted(merged.rows()) == [
            (1, "", 6, 6),
            (1, "a_", 1, 4),
            (1, "b_", 4, 5),
            (2, "a_", 1, 4),
        ], chunks


def test_a_stream_counting_up_is_one_run() -> None:
    keys = compact(pl.DataFrame({"root": 7, "prefix": "", "seq": range(100_000)}, schema=KEYS))
    assert runs.runs_of(keys).rows() == [(7, "", 0, 99_999)]


def _naive_per_root(rows: list[tuple[int, int, str, int]]) -> dict[tuple[int, int], tuple]:
    """(g, root) → (values, values another root of g carries), by counting."""
    values = set(rows)
    holders = Counter((g, prefix, seq) for g, _root, prefix, seq in values)
    out: dict[tuple[int, int], tuple[int, int]] = {}
    for g, root, prefix, seq in values:
        n, shared = out.get((g, root), (0, 0))
        out[(g, root)] = (n + 1, shared + (holders[(g, prefix, seq)] > 1))
    return out


def _random_tasks(
    seed: int, tasks: int, step: Callable[[random.Random, int], int]
) -> tuple[list[list[Row]], dict[int, int]]:
    """Each task's keys in event order (2-5 roots numbered across the tasks, 1-60 IDs each
    that move by ``step(rng, task)``, the prefix switching now and then), and each root's
    group (``root % 3``)."""
    rng = random.Random(seed)
    out: list[list[Row]] = []
    group: dict[int, int] = {}
    root = 0
    for task in range(tasks):
        rows: list[Row] = []
        for _ in range(rng.randint(2, 5)):
            root += 1
            group[root] = root % 3
            prefix, seq = rng.choice(["", "a_"]), rng.randint(0, 20) + 1000 * (task == tasks - 1)
            for _ in range(rng.randint(1, 60)):
                rows.append((root, prefix, seq))
                seq = max(0, seq + step(rng, task))
                if rng.random() < 0.05:
                    prefix = rng.choice(["", "a_"])
        out.append(rows)
    return out, group


def _step(rng: random.Random, _task: int) -> int:
    return rng.choice([1, 1, 1, 1, 0, -1, 2, -5, 3])


def _with_groups(rows: list[Row], group: dict[int, int]) -> list[tuple[int, int, str, int]]:
    return [(group[r], r, p, q) for r, p, q in rows]


def _groups(group: dict[int, int]) -> pl.DataFrame:
    return pl.DataFrame(
        {"root": list(group), "g": list(group.values())},
        schema={"root": pl.UInt32, "g": pl.Int64},
    )


@pytest.mark.parametrize("seed", range(8))
def test_shares_agree_with_counting(seed: int) -> None:
    tasks, group = _random_tasks(seed, 1, _step)
    rows = tasks[0]
    rng = random.Random(seed)
    cuts = sorted(rng.sample(range(1, len(rows)), min(3, len(rows) - 1)))
    chunks = [rows[a:b] for a, b in itertools.pairwise([0, *cuts, len(rows)])]
    merged = _runs(chunks)
    got = {
        (g, r): (n, s)
        for g, r, n, s in runs.shares(front._grouped(merged, _groups(group)))
        .select("g", "root", "n", "shared")
        .iter_rows()
    }
    assert got == _naive_per_root(_with_groups(rows, group))


def test_server_shares_and_values_over_the_tasks_agree_with_counting() -> None:
    """The per-server judgement over every task's tally counts what counting every root's
    values gives (a root is in one task; a value another task's root carries is shared),
    and a shared server's values are each of its values once."""
    tasks, group = _random_tasks(11, 4, _step)
    groups = _groups(group)
    tallies = [front.server_tally(_runs([rows]), groups, pack=True) for rows in tasks]
    assert all(isinstance(t.runs, bytes) for t in tallies)
    shares = front._server_shares(tallies)
    got = {(g, r): (n, s) for g, r, n, s in shares.select("g", "root", "n", "shared").iter_rows()}
    every = [row for rows in tasks for row in _with_groups(rows, group)]
    assert got == _naive_per_root(every)
    assert any(s for _n, s in got.values()) and any(not s for _n, s in got.values())
    values = front._server_values(tallies, [0, 2])
    naive = {(g, p, q) for g, _r, p, q in every if g in (0, 2)}
    assert set(values.iter_rows()) == naive and values.height == len(naive)


def test_partition_keys_cut_into_chunks_give_the_runs_of_the_whole() -> None:
    """Two sessions' streams read in chunks cut anywhere, IDs under each response's
    codec (int, prefixed, an outlier that has no key), a resume repeating part of its
    root's IDs: the runs of each root, and the judgement of a task of its own, whatever
    the chunks."""
    prefixed = IdCodec("prefixed", front.re.compile(r"^(?P<stream>s\d)_(?P<seq>\d+)$"))
    rows = [
        *((1, 0, str(k)) for k in (1, 2, 3, 4, 5)),
        (1, 0, "prime"),
        *((1, 0, str(k)) for k in (6, 7, 9)),
        *((2, 0, str(k)) for k in (4, 5, 6, 7, 8)),  # a resume of conn 1 #0: fills in 8
        *((3, 0, f"s1_{k}") for k in (1, 2, 3)),
        *((3, 0, f"s2_{k}") for k in (1, 2)),
        *((4, 0, str(k)) for k in (1, 2, 3)),  # another session's stream: 1..3 again
    ]
    schema = {"conn_id": pl.Int64, "ex_index": pl.Int64, "id_field": pl.String}
    events = pl.DataFrame(rows, schema=schema, orient="row")
    codes = {"conn_id": pl.Int64, "ex_index": pl.Int64}
    responses = pl.DataFrame(
        {"conn_id": [1, 2, 3, 4], "ex_index": [0] * 4, "codec": [0, 0, 1, 0]},
        schema={**codes, "codec": pl.Int64},
    )
    by_stream = pl.DataFrame(
        {"conn_id": [1, 2, 3, 4], "ex_index": [0] * 4, "root": [0, 0, 2, 3]},
        schema={**codes, "root": pl.UInt32},
    )
    sessions = pl.DataFrame(
        {"root": [0, 2, 3], "g": [1, 1, 2]}, schema={"root": pl.UInt32, "g": pl.Int64}
    )
    servers = pl.DataFrame(
        {"root": [0, 2, 3], "g": [1, 1, 1]}, schema={"root": pl.UInt32, "g": pl.Int64}
    )
    ask = front.KeysAsk([IdCodec("int"), prefixed], responses, by_stream, pack=False)
    alone = front.KeysAsk(
        [IdCodec("int"), prefixed],
        responses,
        by_stream,
        pack=False,
        sessions=(sessions, {1: "one", 2: "two"}),
        servers=servers,
    )
    want = [(0, "", 1, 9), (2, "s1", 1, 3), (2, "s2", 1, 2), (3, "", 1, 3)]
    for cut in range(events.height + 1):
        chunks = [events.slice(0, cut), events.slice(cut)]
        got = front.partition_keys(iter(chunks), ask)
        assert got is not None
        keys, _, _ = got
        assert isinstance(keys, pl.DataFrame)
        assert sorted(keys.select("root", "prefix", "first", "last").rows()) == want, cut
        judged = front.partition_keys(iter(chunks), alone)
        assert judged is not None
        _, repeats, tally = judged
        assert repeats == {"one": False, "two": False}
        assert tally is not None
        shares = front._server_shares([tally]).sort("root")
        # One server: root 3's 1..3 are root 0's too; root 2's prefixes are its own.
        assert shares.select("root", "n", "shared").rows() == [(0, 9, 3), (2, 5, 0), (3, 3, 3)]


def test_only_runs_near_another_root_are_searched() -> None:
    """A stream of values that never count up one by one (every value a run) beside a
    short stream of its group: only the runs within the other roots' span are sorted and
    searched, a root alone in its group not at all, and the counts are still exact."""
    big = [(0, 1, "", 2 * k, 2 * k) for k in range(1000)]
    small = [(0, 2, "", k, k) for k in range(5, 10)]
    alone = [(1, 3, "", k, k) for k in range(50)]
    schema = {"g": pl.Int64, "root": pl.UInt32, "prefix": pl.String, "first": pl.Int64}
    frame = pl.DataFrame(
        [(*r[:4], r[4]) for r in (*big, *small, *alone)],
        schema={**schema, "last": pl.Int64},
        orient="row",
    )
    near = runs._near_others(frame)
    assert sorted(near.select("root", "first").rows()) == [
        *((1, q) for q in (6, 8)),
        *((2, q) for q in range(5, 10)),
    ]
    got = runs.shares(frame).sort("root").rows()
    assert got == [(0, 1, 1000, 2), (0, 2, 5, 2), (1, 3, 50, 0)]
