"""The ``sessions`` table (facts/session_rows.py) is built as columns: a session without a
stream (an access log's POST-only session, most sessions of a production log) costs no
Python work of its own, and its row says so — no stream, no resume, nothing unjudged."""

from __future__ import annotations

import cProfile
import pstats
from pathlib import Path
from typing import Any

import polars as pl

import sse_forensics.facts.build as facts_build
from sse_forensics.pipeline import LogOptions, scan_paths

ACCESS_FORMAT = (
    'nginx:$remote_addr - $remote_user [$time_local] "$request" $status $body_bytes_sent '
    '"$http_referer" "$http_user_agent" "$http_last_event_id" "$sent_http_mcp_session_id" '
    "$request_time"
)


def _line(n: int, session: str, method: str, status: int, leid: str = "-") -> str:
    stamp = f"01/Dec/2026:00:{n // 60 % 60:02d}:{n % 60:02d} +0000"
    return (
        f'10.0.0.{n % 250 + 1} - - [{stamp}] "{method} /mcp HTTP/1.1" {status} 120 "-" '
        f'"client/1.0" "{leid}" "{session}" 0.010'
    )


def _access_log(tmp: Path, quiet: int) -> str:
    """One session with a stream and a resume whose Last-Event-ID no input shows, then
    ``quiet`` sessions that only POST."""
    lines = [
        _line(0, "s-streams", "GET", 200),
        _line(1, "s-streams", "GET", 200, leid="41"),
    ]
    lines += [_line(2 + n, f"s-quiet-{n:05d}", "POST", 202) for n in range(quiet)]
    path = tmp / f"access-{quiet}.log"
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def _sessions_table_calls(path: str) -> tuple[int, dict[str, dict[str, Any]]]:
    """Python calls made while the sessions table was built (the scan's one partition),
    and its rows by session."""
    profile = cProfile.Profile()
    build = facts_build.sessions_table

    def profiled(*args: Any) -> pl.DataFrame:
        table: pl.DataFrame = profile.runcall(build, *args)
        return table

    facts_build.sessions_table = profiled
    try:
        result = scan_paths([path], logs=LogOptions(ACCESS_FORMAT))
    finally:
        facts_build.sessions_table = build
    rows = {r["session_id"]: r for r in result.tables["sessions"].to_dicts()}
    return pstats.Stats(profile).total_calls, rows  # type: ignore[attr-defined]


def test_sessions_without_streams_cost_no_python_each(tmp_path: Path) -> None:
    small, rows_small = _sessions_table_calls(_access_log(tmp_path, 200))
    large, rows_large = _sessions_table_calls(_access_log(tmp_path, 1600))
    assert len(rows_small) == 201 and len(rows_large) == 1601
    # A row built per session (a dict, a list comprehension over its streams) adds tens of
    # calls per session: 1,400 more sessions would add tens of thousands.
    assert large - small < 200, (small, large)


def test_rows_of_sessions_with_and_without_streams(tmp_path: Path) -> None:
    _, rows = _sessions_table_calls(_access_log(tmp_path, 3))
    quiet = rows["s-quiet-00001"]
    assert quiet["streams"] == quiet["resumes"] == quiet["data_events"] == 0
    assert quiet["unjudged_streams"] == quiet["silent_live_gaps"] == 0
    assert quiet["unjudged"] is None and quiet["evidence"] == []
    assert (quiet["id_scheme"], quiet["counter_scope"]) == ("opaque", "unknown")
    assert quiet["client_ip"] is None  # no stream: no connection to name
    busy = rows["s-streams"]
    # The resume is its one stream: an access line alone does not show that a plain GET
    # was answered with an event stream, a resume's 200 is one.
    assert (busy["streams"], busy["resumes"]) == (1, 1)
    # The resume names an ID no input shows: its replay could not be judged.
    assert busy["unjudged_streams"] == 1
    assert "Last-Event-ID '41'" in busy["unjudged"]
    assert busy["client_ip"] == "10.0.0.2"  # the resume's: its one stream
