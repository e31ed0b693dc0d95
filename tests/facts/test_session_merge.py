"""The scan's sessions table, merged from its partitions' (issue 9): the columns that hold
one value on every session are stored once, from the partitions to the scan's result, and
the table holds the values and order of one built whole."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
from support.log_sets import write_log_set

from sse_forensics import pipeline
from sse_forensics.evidence.store import constant_value
from sse_forensics.pipeline import LogOptions, _in_order, scan_paths
from sse_forensics.result import SCAN_SESSION_COLUMNS

_FORMAT = LogOptions(
    'nginx:$remote_addr - $remote_user [$time_local] "$request" $status '
    '$body_bytes_sent "$http_referer" "$http_user_agent" "$http_last_event_id" '
    '"$sent_http_mcp_session_id" $request_time'
)


def _stored_once(df: pl.DataFrame, name: str) -> bool:
    """Column ``name`` of ``df`` is a scalar column: under a bit per row."""
    return df.select(name).estimated_size() * 8 < df.height


def test_constant_session_columns_are_stored_once(tmp_path: Path) -> None:
    paths = write_log_set(tmp_path, 80)
    whole = scan_paths(paths, logs=_FORMAT, buckets=4, keep_tables=True).tables["sessions"]
    merged = scan_paths(paths, logs=_FORMAT, buckets=4, keep_tables=False).tables["sessions"]
    assert merged.height > 64
    shown = whole.select(SCAN_SESSION_COLUMNS)
    constant = [c.name for c in shown.get_columns() if constant_value(c)[0]]
    # A non-null constant (the session's source) and an all-null column (every stream
    # could be judged).
    assert {"session_source", "unjudged"} <= set(constant)
    # Told before any value is read: reading a scalar column materialises it.
    assert [name for name in constant if not _stored_once(merged, name)] == []
    assert not _stored_once(whole, "session_source")
    varying = [c for c in shown.columns if c not in constant]
    assert "session_id" in varying and not any(_stored_once(merged, c) for c in varying)
    # A scan keeps the columns it shows: those, and only those, as the fact table has them.
    assert merged.columns == SCAN_SESSION_COLUMNS
    assert merged.equals(shown)


def test_sessions_in_the_order_of_their_first_exchange(tmp_path: Path) -> None:
    """The merged table lists the sessions by their first exchange (connection, index),
    found by each partition on its own exchanges (issue 9: the scan joins no table of every
    session's ID to the store's exchanges)."""
    paths = write_log_set(tmp_path, 80)
    facts = scan_paths(paths, logs=_FORMAT, keep_records=True).facts
    assert facts is not None
    first: dict[str, tuple[int, int]] = {}
    for ex in facts.exchanges:
        key = (ex.connection_id, ex.index)
        first[ex.session] = min(first.get(ex.session, key), key)
    merged = scan_paths(paths, logs=_FORMAT, buckets=4, keep_tables=False).tables["sessions"]
    assert merged.get_column("session_id").to_list() == sorted(first, key=first.__getitem__)


@pytest.mark.parametrize("at_once", [0, 1 << 16])
def test_sparse_string_columns_follow_their_rows(
    at_once: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A string column holding a few short values among nulls or empty strings estimates
    at under a bit per row, as a column stored once does: the merge still puts its values
    in order with their sessions', and keeps a column stored once as it is, column by
    column (a large table) or in one query (a small one)."""
    monkeypatch.setattr(pipeline, "_GATHER_AT_ONCE", at_once)
    rows = 1000
    sessions = pl.DataFrame(
        {
            "session_id": [f"s{i:04d}" for i in range(rows)],
            "sparse": [None] * (rows - 1) + ["x"],
            "empty": [""] * (rows - 1) + ["abc"],
        }
    ).with_columns(pl.lit("log", pl.String).alias("source"))
    order = pl.Series("row", list(range(rows - 1, -1, -1)), pl.UInt32)
    want = sessions.select(pl.all().gather(order))
    got = _in_order(sessions.clone(), order)
    assert got.equals(want)
    assert got.get_column("sparse")[0] == "x" and got.get_column("empty")[0] == "abc"
