"""What a scan could not judge (``sse_forensics.coverage``) is kept as columns: one row per
unjudged stream or resume, built as an object only where a renderer reads it (issue 10: a
cluster scan's 2.45 GB log set has 509k of them, and one object each was the client's peak
at the end)."""

from __future__ import annotations

from pathlib import Path

import orjson
import polars as pl

from sse_forensics.coverage import Coverage, Unjudged, coverage
from sse_forensics.pipeline import LogOptions, scan_paths

ACCESS_FORMAT = (
    'nginx:$remote_addr - $remote_user [$time_local] "$request" $status $body_bytes_sent '
    '"$http_referer" "$http_user_agent" "$http_last_event_id" "$sent_http_mcp_session_id" '
    "$request_time"
)


def _resumes_only(tmp_path: Path, n: int) -> Path:
    """An access log alone: every resume is unjudged (no event ID is seen)."""
    log = tmp_path / "access.log"
    log.write_text(
        "".join(
            f'10.0.0.{k % 250} - - [01/Dec/2026:00:00:{k % 60:02d} +0000] "GET /mcp HTTP/1.1" '
            f'200 4680 "-" "node" "{10 + k}" "session{k:04d}" 0.036\n'
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
    assert cov.head == [] and cov.streams is not None and cov.streams.height == 40
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

    lossy = Unjudged("input", "capture", "lost", missing_bytes=10)
    assert Coverage(False).missing_bytes() == (False, True)
    assert Coverage(False, streams=rows(5, 7)).missing_bytes() == (True, True)
    assert Coverage(False, streams=rows(5, None)).missing_bytes() == (True, False)
    assert Coverage(False, streams=rows(0, None)).missing_bytes() == (False, False)
    assert Coverage(True, [lossy], rows(5)).missing_bytes() == (True, True)
    assert Coverage(True, [lossy], rows(None)).missing_bytes() == (True, False)
    both = Coverage(True, [lossy], rows(3, None))
    assert [u.what for u in both.items()] == ["capture", "stream s0", "stream s1"]
    assert [u.what for u in both.items(2)] == ["capture", "stream s0"]
    assert [u.what for u in both.items(1)] == ["capture"]
    assert both.count == 3 and both.as_dict()["items"][1]["missing_bytes"] == 3
