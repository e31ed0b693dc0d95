"""What a scan could not judge (``sse_forensics.coverage``) is kept as the sessions table's
columns: one item per unjudged stream or resume, decoded a slice of sessions at a time and
built as an object only where a renderer reads it (issue 10: a cluster scan's 2.45 GB log
set has 509k of them, and decoding them at once was the client's peak at the end)."""

from __future__ import annotations

from pathlib import Path

import orjson
import polars as pl
import pytest

from sse_forensics import coverage as coverage_module
from sse_forensics.coverage import Coverage, StreamItems, Unjudged, coverage
from sse_forensics.pipeline import LogOptions, scan_paths

ACCESS_FORMAT = (
    'nginx:$remote_addr - $remote_user [$time_local] "$request" $status $body_bytes_sent '
    '"$http_referer" "$http_user_agent" "$http_last_event_id" "$sent_http_mcp_session_id" '
    "$request_time"
)


def _resumes_only(tmp_path: Path, n: int) -> Path:
    """An access log alone: every resume is unjudged (no event ID is seen); the session IDs
    out of the lines' order, which is the scan's."""
    log = tmp_path / "access.log"
    log.write_text(
        "".join(
            f'10.0.0.{k % 250} - - [01/Dec/2026:00:00:{k % 60:02d} +0000] "GET /mcp HTTP/1.1" '
            f'200 4680 "-" "node" "{10 + k}" "session{(k * 17) % n:04d}" 0.036\n'
            for k in range(n)
        )
    )
    return log


def _old_items(sessions: pl.DataFrame) -> list[dict[str, object]]:
    """The items as the sessions table's JSON entries spell them, decoded one by one."""
    out = []
    for session_id, text in (
        sessions.filter(pl.col("unjudged").is_not_null())
        .select("session_id", "unjudged")
        .iter_rows()
    ):
        for item in orjson.loads(text):
            out.append(
                Unjudged(
                    "stream",
                    f"stream {item['stream']}",
                    item["why"],
                    session_id=session_id,
                    missing_bytes=item.get("missing_bytes"),
                    source=item.get("source"),
                    frame=item.get("frame"),
                    line=item.get("line"),
                ).as_dict()
            )
    return out


def test_unjudged_resumes_stay_columns_and_read_back_as_their_entries(tmp_path: Path) -> None:
    log = _resumes_only(tmp_path, 40)
    result = scan_paths([str(log)], logs=LogOptions(access_format=ACCESS_FORMAT))
    cov = coverage(result)
    assert cov.head == [] and cov.streams is not None and cov.streams.count == 40
    assert cov.count == 40 and not cov.complete and not cov.nothing_judged
    expected = _old_items(result.tables["sessions"])
    assert len(expected) == 40
    assert cov.as_dict()["items"] == expected
    assert [u.as_dict() for u in cov.items()] == expected
    # A renderer that lists the first few builds only those.
    assert [u.as_dict() for u in cov.items(3)] == expected[:3]
    # An access log's resumes lack no capture bytes.
    assert cov.missing_bytes() == (False, False)


def test_missing_bytes_reads_the_head_and_the_rows() -> None:
    """Any/all items about bytes the capture lacks: the terminal's capture advice and the
    summary sentence ("the capture lacks bytes of them") read it."""

    def rows(*missing: int | None) -> pl.DataFrame:
        n = len(missing)
        return pl.DataFrame(
            {
                "scope": ["stream"] * n,
                "what": [f"stream s{k}" for k in range(n)],
                "why": ["w"] * n,
                "session_id": ["a"] * n,
                "missing_bytes": list(missing),
                "source": [None] * n,
                "frame": [None] * n,
                "line": [None] * n,
            },
            schema_overrides={"missing_bytes": pl.Int64, "frame": pl.Int64, "line": pl.Int64},
        )

    def items(*missing: int | None) -> StreamItems:
        return StreamItems.of_rows(rows(*missing))

    lossy = Unjudged("input", "capture", "lost", missing_bytes=10)
    assert Coverage(False).missing_bytes() == (False, True)
    assert Coverage(False, streams=items(5, 7)).missing_bytes() == (True, True)
    assert Coverage(False, streams=items(5, None)).missing_bytes() == (True, False)
    assert Coverage(False, streams=items(0, None)).missing_bytes() == (False, False)
    assert Coverage(True, [lossy], items(5)).missing_bytes() == (True, True)
    assert Coverage(True, [lossy], items(None)).missing_bytes() == (True, False)
    both = Coverage(True, [lossy], items(3, None))
    assert [u.what for u in both.items()] == ["capture", "stream s0", "stream s1"]
    assert [u.what for u in both.items(2)] == ["capture", "stream s0"]
    assert [u.what for u in both.items(1)] == ["capture"]
    assert both.count == 3 and both.as_dict()["items"][1]["missing_bytes"] == 3


def test_items_are_decoded_a_slice_of_sessions_at_a_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """However many sessions hold unjudged entries, at most one slice of them is decoded
    at once; the items, their order and a limit crossing slices are unchanged."""
    log = _resumes_only(tmp_path, 40)
    result = scan_paths([str(log)], logs=LogOptions(access_format=ACCESS_FORMAT))
    expected = _old_items(result.tables["sessions"])
    monkeypatch.setattr(coverage_module, "SLICE_ROWS", 7)
    cov = coverage(result)
    assert cov.streams is not None and cov.count == 40
    assert max(rows.height for rows in cov.streams.batches()) <= 7
    assert len(list(cov.streams.batches())) == 6
    assert [u.as_dict() for u in cov.items()] == expected
    assert [u.as_dict() for u in cov.items(10)] == expected[:10]
    assert [u.as_dict() for u in cov.items(14)] == expected[:14]
    assert cov.as_dict()["items"] == expected


@pytest.mark.parametrize("buckets", [1, 4])
def test_a_scan_that_lists_a_few_keeps_those_and_the_totals(tmp_path: Path, buckets: int) -> None:
    """Told how many items its output lists, a scan keeps those — the same first items, in
    the same order, whatever partition holds them — and the totals of the rest, not their
    text (issue 10: the client's end peak); listing past them is refused."""
    log = _resumes_only(tmp_path, 40)
    options = LogOptions(access_format=ACCESS_FORMAT)
    full = scan_paths([str(log)], logs=options, keep_tables=False, buckets=buckets)
    listed = scan_paths(
        [str(log)], logs=options, keep_tables=False, buckets=buckets, unjudged_listed=3
    )
    assert listed.stats.partitions == full.stats.partitions == buckets
    everything = [u.as_dict() for u in coverage(full).items()]
    assert len(everything) == 40
    cov = coverage(listed)
    assert cov.count == 40 and not cov.complete and not cov.nothing_judged
    assert [u.as_dict() for u in cov.items(3)] == everything[:3]
    assert [u.as_dict() for u in cov.items(2)] == everything[:2]
    assert cov.missing_bytes() == coverage(full).missing_bytes()
    kept = listed.tables["sessions"].get_column("unjudged").drop_nulls()
    assert 3 <= kept.len() <= 3 * buckets  # each partition's first three at most
    # Only the rows of the kept items go on; the sessions are counted, all of them.
    assert listed.tables["sessions"].height == kept.len()
    assert listed.stats.sessions == full.stats.sessions == full.tables["sessions"].height == 40
    with pytest.raises(ValueError):
        list(cov.items(4))
    with pytest.raises(ValueError):
        cov.as_dict()
    assert listed.findings == full.findings
