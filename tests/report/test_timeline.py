"""The terminal views: the per-session ladder (``timeline``), the scan summary and its
progress bar. Rendered through a recording rich console, so the assertions read what a
person sees."""

from __future__ import annotations

import io
import subprocess
from pathlib import Path

import pytest
from conftest import SAMPLES, sample_captures
from rich.console import Console
from support.cli import run_text as _in_process

from sse_forensics.facts.build import Facts
from sse_forensics.pipeline import scan_paths
from sse_forensics.provenance import Origin
from sse_forensics.report import ladder, terminal
from sse_forensics.report.ladder import (
    Line,
    Rung,
    ZeroWindowPeriod,
    _collapse_plain,
    gap_label,
    session_ladders,
)
from sse_forensics.report.selection import Selection
from sse_forensics.report.terminal import render_scan, scan_progress, shell_word
from sse_forensics.report.timeline import render_timeline
from sse_forensics.report.timeline_records import timeline_records

LIVE_JUMP = SAMPLES / "live-jump-unsignalled.pcap"
RESUME_410 = SAMPLES / "resume-410.pcap"
HOSTILE = SAMPLES / "crafted-hostile-bytes.pcap"
CAPTURE_LOSS = SAMPLES / "crafted-capture-loss.pcap"


def records(paths: list[str]) -> Facts:
    facts = scan_paths(paths, keep_records=True).facts
    assert facts is not None
    return facts


def ladder_text(*paths, session=None, all_events=False) -> str:
    facts = records([str(p) for p in paths])
    console = Console(record=True, width=200, file=io.StringIO(), highlight=False)
    render_timeline(console, facts, session, all_events)
    return console.export_text()


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return _in_process(*args, columns=200)


def test_unsignalled_live_gap_sits_between_its_runs() -> None:
    lines = ladder_text(LIVE_JUMP).splitlines()
    gap = next(i for i, line in enumerate(lines) if "✗ 8–12 dropped, unsignalled" in line)
    before = next(i for i, line in enumerate(lines) if "1–7  (7 events)" in line)
    after = next(i for i, line in enumerate(lines) if "13–20  (8 events)" in line)
    assert before < gap < after
    assert "silent_corruption" in lines[gap]
    assert lines[gap].split()[2] == "32"  # frame of the first event after the gap
    assert any("→ POST /mcp" in line for line in lines[:before])
    assert any("FIN from server" in line for line in lines[after:])


def test_410_resume_shows_last_event_id_status_and_signal() -> None:
    text = ladder_text(RESUME_410)
    lines = text.splitlines()
    request = next(i for i, line in enumerate(lines) if "Last-Event-ID: 7" in line)
    assert "GET /mcp" in lines[request] and "(resume)" in lines[request]
    assert "← 410 Gone" in lines[request + 1]
    assert "✗ 8… not replayed, signalled by 410 → expected_gap" in lines[request + 2]


@pytest.mark.parametrize("capture", sample_captures(), ids=lambda p: p.name)
def test_every_gap_the_facts_found_is_on_the_ladder(capture) -> None:
    facts = records([str(capture)])
    rungs = [r for lad in session_ladders(facts) for r in lad.rungs]
    shown = [r.text.plain for r in rungs if r.kind == "gap"]
    assert sorted(shown) == sorted(gap_label(g) for g in facts.gaps)
    times = [r.ts for r in rungs if r.ts is not None]
    assert times  # every sample has traffic


def test_capture_loss_shows_missing_bytes_and_indeterminate_gap() -> None:
    text = ladder_text(CAPTURE_LOSS)
    assert "server bytes missing from the capture" in text
    assert "capture lacks bytes in between → indeterminate" in text


def test_all_events_expands_runs_into_one_line_per_event() -> None:
    facts = records([str(LIVE_JUMP)])
    collapsed = ladder_text(LIVE_JUMP)
    expanded = ladder_text(LIVE_JUMP, all_events=True)
    assert "13–20  (8 events)" in collapsed and "13–20" not in expanded
    ids = [line.split("id ", 1)[1].split()[0] for line in expanded.splitlines() if " id " in line]
    events = [e.sse.id_field for s in facts.streams for e in s.events if e.carries_id]
    assert ids == events
    assert "✗ 8–12 dropped, unsignalled" in expanded  # gaps stay in place
    proc = cli("timeline", str(LIVE_JUMP), "--all-events")
    assert proc.returncode == 0 and "id 13" in proc.stdout and "(8 events)" not in proc.stdout


def test_session_filter_shows_only_that_session() -> None:
    both = ladder_text(LIVE_JUMP, RESUME_410)
    assert "session live-jump-unsignalled-0001" in both and "session resume-410-0001" in both
    one = ladder_text(LIVE_JUMP, RESUME_410, session="resume-410-0001")
    assert "session resume-410-0001" in one and "live-jump-unsignalled" not in one
    none = ladder_text(LIVE_JUMP, session="no-such-session")
    assert "No session no-such-session" in none and "live-jump-unsignalled-0001" in none


def test_zero_window_hook_is_empty_and_drawn_when_filled(monkeypatch) -> None:
    facts = records([str(LIVE_JUMP)])
    assert all(ladder.zero_window_periods(c) == [] for c in facts.connections.values())
    start = Origin(str(LIVE_JUMP), 25, facts.streams[0].first_ts + 0.01)
    period = ZeroWindowPeriod(1, "client", start, None)
    monkeypatch.setattr(ladder, "zero_window_periods", lambda conn: [period])
    assert "⏸ zero window on the client side until the capture ended" in ladder_text(LIVE_JUMP)


def test_long_stretches_of_plain_exchanges_fold() -> None:
    def plain(n: int) -> Rung:
        return Rung("exchange", float(n), 1, None, Line.of(f"→ POST /mcp {n}  ← 202 Accepted"))

    gap = Rung("gap", 9.0, 1, None, Line.of("✗ 8–12 dropped"))
    short = [plain(n) for n in range(ladder.MAX_PLAIN_EXCHANGES_SHOWN)]
    assert _collapse_plain([*short, gap]) == [*short, gap]
    long = [plain(n) for n in range(ladder.MAX_PLAIN_EXCHANGES_SHOWN + 3)]
    folded = _collapse_plain([*long, gap, *long])
    kinds = [r.kind for r in folded]
    assert kinds == [
        "exchange",
        "collapsed",
        "exchange",
        "gap",
        "exchange",
        "collapsed",
        "exchange",
    ]
    hidden = ladder.MAX_PLAIN_EXCHANGES_SHOWN + 1
    assert folded[1].text.plain == f"… {hidden} more plain exchanges (--all-events shows them)"
    assert folded[0] is long[0] and folded[2] is long[-1]


def test_hostile_session_id_is_escaped_on_the_ladder() -> None:
    text = ladder_text(HOSTILE)
    assert "\x1b" not in text
    assert "session \\x1b[31m[bold red]sess[/]<script>alert(1)</script>" in text


@pytest.mark.parametrize(
    "value", ["plain-id", "with space", "it's", "\x1b[31m<script>x</script>", "a\nb\\c\u202e"]
)
def test_shell_word_is_printable_and_names_the_exact_string(value: str) -> None:
    word = shell_word(value)
    assert all(ch.isprintable() for ch in word)
    out = subprocess.run(["bash", "-c", f"printf %s {word}"], capture_output=True, text=True)
    assert out.stdout == value


def test_scan_summary_lists_verdicts_findings_errors_and_drill_commands() -> None:
    result = scan_paths([str(LIVE_JUMP), str(RESUME_410), str(HOSTILE)])
    console = Console(record=True, width=500, file=io.StringIO(), highlight=False)
    render_scan(console, result)
    text = console.export_text()
    assert "3 session(s)" in text and "Verdicts: silent_corruption" in text
    rows = [line for line in text.splitlines() if line.strip()[:3].strip().isdigit()]
    verdicts = [row.split()[1] for row in rows]
    assert verdicts == sorted(
        verdicts, key=["silent_corruption", "indeterminate", "expected_gap"].index
    )
    assert "input problem(s)" in text
    hostile = shell_word(next(f.session_id for f in result.findings if "\x1b" in f.session_id))
    assert f"--session {hostile}" in text
    assert f"sse-forensics timeline {LIVE_JUMP} {RESUME_410} {HOSTILE} --session live-jump" in text


def test_scan_reports_progress_in_stages() -> None:
    calls: list[tuple[str, int, int]] = []
    scan_paths([str(LIVE_JUMP), str(RESUME_410)], progress=lambda *a: calls.append(a))
    stages = [c[0] for c in calls]
    assert stages[-2:] == ["facts", "rules"] and set(stages[:-2]) == {"read"}
    reads = [done for stage, done, _ in calls if stage == "read"]
    total = calls[0][2]
    assert (
        reads == sorted(reads)
        and reads[-1] == total == LIVE_JUMP.stat().st_size + RESUME_410.stat().st_size
    )


def test_progress_bar_waits_a_second_and_stays_off_pipes(monkeypatch) -> None:
    pipe = Console(file=io.StringIO())
    with scan_progress(pipe, enabled=True) as progress:
        assert progress is None  # not a terminal
    tty = Console(file=io.StringIO(), force_terminal=True)
    with scan_progress(tty, enabled=False) as progress:
        assert progress is None  # --quiet
    with scan_progress(tty, enabled=True) as progress:
        progress("read", 10, 100)
        assert progress.progress is None  # a short scan shows nothing
    monkeypatch.setattr(terminal, "PROGRESS_DELAY_S", 0.0)
    with scan_progress(tty, enabled=True) as progress:
        progress("read", 10, 100)
        assert progress.progress is not None
        task = progress.progress.tasks[0]
        assert (task.completed, task.total, task.description) == (10, 100, "reading captures")


# -- marks, methods, folding, columns (issue: "Timeline and terminal") ---------------------

EMPTY_KEEPALIVE = SAMPLES / "empty-replay-2xx-keepalive.pcap"
EMPTY_ENDS = SAMPLES / "empty-replay-2xx-ends.pcap"
STORM = SAMPLES / "resume-storm.pcap"
CROSSED_SESSIONS = SAMPLES / "replay-crossed-sessions.pcap"
CROSSED_STREAMS = SAMPLES / "replay-crossed-streams.pcap"


def test_empty_replays_are_marked_with_how_they_were_empty() -> None:
    keepalive = ladder_text(EMPTY_KEEPALIVE)
    assert "∅ empty replay after Last-Event-ID 7: keep-alives only" in keepalive
    ended = ladder_text(EMPTY_ENDS)
    assert "∅ empty replay after Last-Event-ID 7: the stream ended without an event" in ended
    assert "∅" not in ladder_text(LIVE_JUMP)


def test_resume_storm_is_marked_from_the_attempt_that_makes_it_one() -> None:
    lines = ladder_text(STORM).splitlines()
    marks = [line for line in lines if "↻ resume storm" in line]
    assert marks and "attempt 3 from Last-Event-ID 7" in marks[0]
    resumes = [line for line in lines if "(resume)" in line]
    assert len(marks) == len(resumes) - 2  # attempts 1 and 2 are not a storm yet


def test_cross_session_leak_names_the_session_the_events_were_first_sent_to() -> None:
    text = ladder_text(CROSSED_SESSIONS)
    assert (
        "⇄ cross-session leak: 1 replayed event first sent to session "
        "replay-crossed-sessions-0001 (first: s1_31)" in text
    )
    assert "first sent on another stream of this session" in ladder_text(CROSSED_STREAMS)


def test_the_request_that_opened_a_stream_shows_its_json_rpc_method() -> None:
    text = ladder_text(LIVE_JUMP)
    assert "→ POST /mcp  tools/call" in text and "→ POST /mcp  initialize" in text
    facts = records([str(LIVE_JUMP)])
    methods = [r.get("rpc_methods") for r in timeline_records(facts)]
    assert ["tools/call"] in methods and ["initialize"] in methods


def snap(src: Path, dst: Path, snaplen: int) -> Path:
    """``src`` (classic little-endian pcap) as tcpdump -s ``snaplen`` would have kept it."""
    data = src.read_bytes()
    out = bytearray(data[:24])
    out[16:20] = snaplen.to_bytes(4, "little")
    pos = 24
    while pos + 16 <= len(data):
        incl = int.from_bytes(data[pos + 8 : pos + 12], "little")
        kept = data[pos + 16 : pos + 16 + incl][:snaplen]
        out += data[pos : pos + 8] + len(kept).to_bytes(4, "little") + data[pos + 12 : pos + 16]
        out += kept
        pos += 16 + incl
    dst.write_bytes(bytes(out))
    return dst


def test_identical_consecutive_lines_fold_with_a_count_and_a_frame_range(tmp_path) -> None:
    cut = snap(STORM, tmp_path / "snap.pcap", 100)
    text = ladder_text(cut)
    folded = [line for line in text.splitlines() if "×" in line]
    assert folded and "server bytes missing from the capture (snaplen) ×" in folded[0]
    count = int(folded[0].rsplit("×", 1)[1])
    first, last = folded[0].split()[2].split("–")
    assert int(last) - int(first) >= count - 1 > 0


def test_fold_repeats_keeps_different_lines_and_connections_apart() -> None:
    def rung(text: str, frame: int, conn: int = 1) -> Rung:
        return Rung(
            "missing-bytes", float(frame), conn, Origin("x", frame, float(frame)), Line.of(text)
        )

    same = [rung("⚠ 441 server bytes missing (snaplen)", n) for n in range(10, 70)]
    (one,) = ladder.fold_repeats(same)
    assert one.text.plain.endswith(" ×60") and ladder.frame_label(one, False) == "10–69"
    mixed = [rung("a", 1), rung("a", 2, conn=2), rung("b", 3), rung("b", 4)]
    assert [r.text.plain for r in ladder.fold_repeats(mixed)] == ["a", "a", "b ×2"]
    assert same[0].text.plain == "⚠ 441 server bytes missing (snaplen)"  # inputs untouched


def test_the_middle_of_a_resume_storm_folds_into_one_line() -> None:
    rungs = []
    for n in range(8):
        key = (n + 2, 0)
        rungs.append(Rung("request", float(n), n + 2, None, Line.of(f"→ GET {n}"), key))
        rungs.append(Rung("response", float(n), n + 2, None, Line.of("← 200 OK"), key))
        rungs.append(Rung("disconnect", float(n) + 0.5, n + 2, None, Line.of("⏏ FIN from client")))
    storm = [(n + 2, 0) for n in range(8)]
    folded = ladder._collapse_storms(rungs, [storm])
    shown = [r.text.plain for r in folded if r.kind == "request"]
    assert shown == ["→ GET 0", "→ GET 1", "→ GET 2", "→ GET 7"]
    (line,) = [r.text.plain for r in folded if r.kind == "collapsed"]
    assert line.startswith("… ↻ 4 more resumes of this storm")
    assert sum(r.kind == "disconnect" for r in folded) == 4  # their connections fold too


def test_frame_numbers_are_never_broken_and_the_column_is_labelled() -> None:
    facts = records([str(LIVE_JUMP)])
    console = Console(record=True, width=44, file=io.StringIO(), highlight=False)
    render_timeline(console, facts)
    text = console.export_text()
    header = next(line for line in text.splitlines() if "time" in line and "conn" in line)
    assert "frame" in header
    frames = {str(r.origin.number) for lad in session_ladders(facts) for r in lad.rungs if r.origin}
    cells = {line[15:22].strip() for line in text.splitlines()}
    assert frames <= {c for c in cells if c}


def test_timeline_selection_by_time_and_port() -> None:
    facts = records([str(LIVE_JUMP)])
    (ladder,) = session_ladders(facts)
    t0 = ladder.start
    later = Selection(since=t0 + 0.005)
    (cut,) = session_ladders(facts, selection=later)
    assert cut.rungs and all(r.ts is None or r.ts >= t0 + 0.005 for r in cut.rungs)
    assert len(cut.rungs) < len(ladder.rungs)
    assert session_ladders(facts, selection=Selection(port=1)) == []
    recs = list(timeline_records(facts, selection=later))
    assert recs and all(r["ts"] >= t0 + 0.005 for r in recs)


def test_scan_table_shows_whole_session_ids_when_the_terminal_has_room() -> None:
    result = scan_paths([str(SAMPLES / "crafted-snaplen.pcap")])
    (session,) = {f.session_id for f in result.findings}
    assert len(session) > terminal.MIN_SESSION_WIDTH

    def table(width: int) -> str:
        console = Console(record=True, width=width, file=io.StringIO(), highlight=False)
        render_scan(console, result)
        return console.export_text()

    wide = table(200)
    assert session in [w for line in wide.splitlines() for w in line.split()]
    # Too little room beside the other columns: cut to the minimum, never narrower.
    assert terminal._session_width(result.findings, 80) == terminal.MIN_SESSION_WIDTH
    assert terminal._session_width(result.findings, 200) == len(session)
