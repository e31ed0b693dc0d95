"""How ``sse-forensics scan`` scales with its input, end to end, beside real peers.

One run answers, for logs and for captures: how wall time and peak RSS grow when the input
doubles (1x, 2x, 4x, 8x), how fast the scan reads (MB/s of logs, packets/s of captures)
next to ``grep -c ''`` (logs) or ``tcpflow``/``tshark`` (captures) on the same files in the
same run, and whether the planted incidents were found. ``--big`` adds the issue's size
(a 1 GB access log and a 200 MB event log).

    python benchmarks/scale.py               # logs: 2,000 sessions at 1x; captures: 50,000 packets
    python benchmarks/scale.py --log-base 300 --cap-base 20000 --sizes 1,2   # a quick check
    python benchmarks/scale.py --only logs --big --repeat 3 --jobs 1 --jobs 2

Every tool is a child process, timed from exec until it has exited and its stdout has been
read to the last byte (best of ``--repeat``); peak RSS is that very child's ``ru_maxrss``
from ``os.wait4`` (the maximum over ``--repeat``). Inputs are generated once into
``benchmarks/out/scale/`` (git-ignored), named after the generator's content hash, and
reused by later runs.

Log inputs: ``/work/shared/bench/gen_mcp_logs.py`` (``--gen-mcp-logs``), also for ``--big``
(run in chunks: see :func:`big_inputs`). Captures: ``make_capture.write_capture``.
``--timeout S`` stops a scan that runs longer and reports it as not finished.

Exit status: 0, or 1 if a tool or a generator crashed (a finding count that differs from
what was planted is printed, not an error).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import itertools
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter, deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path

from rich.console import Console
from rich.table import Table

HERE = Path(__file__).resolve().parent
OUT = HERE / "out" / "scale"
sys.path.insert(0, str(HERE))

from make_capture import SERVER_PORT, write_capture  # noqa: E402
from run import flat_finding, gap_key, machine, sse_forensics_cmd, tool_version  # noqa: E402

GEN_MCP_LOGS = Path("/work/shared/bench/gen_mcp_logs.py")
# gen_mcp_logs.py writes combined + "$http_last_event_id" "$sent_http_mcp_session_id"
# $request_time: the `mcp` preset without "$http_mcp_session_id".
LOG_FORMAT = (
    'nginx:$remote_addr - $remote_user [$time_local] "$request" $status $body_bytes_sent '
    '"$http_referer" "$http_user_agent" "$http_last_event_id" "$sent_http_mcp_session_id" '
    "$request_time"
)
MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")

# Targets of the verdict block.
GROWTH_MAX = 2.2  # wall-time ratio per doubling of the input
RSS_GROWTH_MAX = 1.3  # peak RSS at the largest size / at the smallest
LOGS_MBPS_MIN = 300.0
CAP_PPS_MIN = 150_000.0
TCPFLOW_X_MAX = 4.5

SSE_OK = (0, 1)  # scan exits 1 when it reports silent corruption (--fail-on's default)


# -- measuring ---------------------------------------------------------------------------


@dataclass(slots=True)
class Measure:
    """Best wall time and maximum peak RSS of one command over ``--repeat`` runs."""

    seconds: float = math.inf
    rss_mb: float = 0.0
    stdout: bytes = b""
    returncode: int = 0
    crashed: bool = False
    stderr_tail: str = ""
    timed_out: float = 0.0  # the --timeout a run hit (then no time, no rate)

    @property
    def finished(self) -> bool:
        return not self.crashed and not self.timed_out


def run_timed(
    cmd: list[str], timeout: float = 0
) -> tuple[float, float, float, bytes, int, bytes, bool]:
    """Wall time from exec until the child has exited and its stdout is read to the end;
    peak RSS (MB) of that child from ``os.wait4`` (``ru_maxrss`` is KiB on Linux). stderr
    goes to a temporary file so a chatty child cannot block on a full pipe. With a
    ``timeout``, the child is killed when it runs longer (last value True). The second value
    is the child's CPU seconds (user + system), also from ``os.wait4``."""
    with tempfile.TemporaryFile() as err:
        started = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err)
        killed = threading.Event()

        def kill() -> None:
            killed.set()
            proc.kill()

        timer = threading.Timer(timeout, kill) if timeout > 0 else None
        if timer:
            timer.start()
        assert proc.stdout is not None
        out = proc.stdout.read()
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.perf_counter() - started
        if timer:
            timer.cancel()
        proc.stdout.close()
        proc.returncode = os.waitstatus_to_exitcode(status)  # reaped: Popen must not wait
        err.seek(0)
        stderr = err.read()
    cpu = usage.ru_utime + usage.ru_stime
    return seconds, cpu, usage.ru_maxrss / 1024, out, proc.returncode, stderr, killed.is_set()


def run_once(cmd: list[str], timeout: float = 0) -> tuple[float, float, bytes, int, bytes, bool]:
    """:func:`run_timed` without the CPU seconds."""
    seconds, _cpu, rss, out, code, stderr, killed = run_timed(cmd, timeout)
    return seconds, rss, out, code, stderr, killed


def measure(
    cmd: list[str] | Callable[[Path], list[str]],
    repeat: int,
    ok: tuple[int, ...] = (0,),
    timeout: float = 0,
) -> Measure:
    """Run ``cmd`` ``repeat`` times. A callable gets a fresh scratch directory per run
    (removed after the run, untimed). A run crashed if its exit status is not in ``ok`` or
    its stderr holds a Python traceback; a run killed at ``timeout`` stops the repeats."""
    m = Measure()
    for _ in range(repeat):
        if callable(cmd):
            with tempfile.TemporaryDirectory(dir=OUT, prefix="scratch-") as scratch:
                seconds, rss, out, rc, stderr, killed = run_once(cmd(Path(scratch)), timeout)
        else:
            seconds, rss, out, rc, stderr, killed = run_once(cmd, timeout)
        m.rss_mb = max(m.rss_mb, rss)
        if killed:
            m.timed_out, m.seconds, m.stdout = timeout, math.nan, b""
            break
        if seconds < m.seconds:
            m.seconds, m.stdout = seconds, out
        if rc not in ok or b"Traceback (most recent call last)" in stderr:
            m.crashed, m.returncode = True, rc
            lines = stderr.decode(errors="replace").strip().splitlines()
            m.stderr_tail = lines[-1][:160] if lines else f"exit {rc}"
        elif not m.crashed:
            m.returncode = rc
    if m.crashed:  # no time, no rate, no ratio from a run that did not finish its job
        m.seconds = m.rss_mb = math.nan
    return m


def per_doubling(t0: float, t1: float, w0: float, w1: float) -> float:
    """Wall-time ratio per doubling of the work ``w`` (input bytes or packets): t1/t0 when
    w1 = 2 w0, normalised otherwise (sizes that are not powers of 2 apart, generators whose
    output is not exactly proportional)."""
    if t0 <= 0 or w1 <= w0:
        return math.nan
    return (t1 / t0) ** (1 / math.log2(w1 / w0))


def file_tag(path: Path) -> str:
    """Short content hash of a generator: cached inputs are regenerated when it changes."""
    return hashlib.sha256(path.read_bytes()).hexdigest()[:8]


def findings_of(stdout: bytes) -> list[dict]:
    out = []
    for line in stdout.splitlines():
        if line.strip():
            try:
                out.append(flat_finding(line))
            except (json.JSONDecodeError, KeyError, TypeError):
                out.append({"rule": "<unparseable line>", "classification": "?"})
    return out


def same_findings(a: bytes, b: bytes) -> str:
    if a == b:
        return "identical"
    if sorted(a.splitlines()) == sorted(b.splitlines()):
        return "same, other order"
    return "DIFFERENT"


# -- inputs --------------------------------------------------------------------------------


@dataclass(slots=True)
class LogInput:
    sessions: int
    access: Path
    events: Path
    summary: dict
    jumps: set[tuple[str, str]]  # (session, Last-Event-ID) of each planted silent jump
    note: str

    @property
    def mb(self) -> float:
        return (self.access.stat().st_size + self.events.stat().st_size) / 1e6


def planted_jumps(events: Path) -> set[tuple[str, str]]:
    """The silent resume jumps, read back from the event log: a replay (``written`` records
    with ``last_event_id``) whose first event is not the successor of the cursor. The
    generator's summary only counts them; this names them, so findings can be matched."""
    first: dict[tuple[str, str], tuple[str, str]] = {}
    with events.open("rb") as fh:
        for line in fh:
            if b'"last_event_id"' not in line:
                continue
            rec = json.loads(line)
            key = (rec["session"], rec["request"])
            if key not in first:  # the file is in time order
                first[key] = (rec["last_event_id"], rec["event_id"])
    return {
        (session, lei) for (session, _), (lei, eid) in first.items() if int(eid) != int(lei) + 1
    }


def log_input(gen: Path, sessions: int, seed: int) -> LogInput:
    prefix = OUT / f"mcplogs-{sessions}-seed{seed}-{file_tag(gen)}"
    access = prefix.with_name(prefix.name + ".access.log")
    events = prefix.with_name(prefix.name + ".events.jsonl")
    summary_path = prefix.with_name(prefix.name + ".summary.json")
    note = "cached"
    if not (summary_path.exists() and access.exists() and events.exists()):
        summary_path.unlink(missing_ok=True)  # written last: its presence means complete
        started = time.perf_counter()
        done = subprocess.run(
            [sys.executable, str(gen), str(prefix), str(sessions), str(seed)],
            capture_output=True,
            text=True,
            check=True,
        )
        summary = json.loads(done.stdout)
        summary["planted_jump_keys"] = sorted(planted_jumps(events))
        summary_path.write_text(json.dumps(summary))
        note = f"generated in {time.perf_counter() - started:.1f} s"
    summary = json.loads(summary_path.read_text())
    jumps = {(s, lei) for s, lei in summary.pop("planted_jump_keys")}
    return LogInput(sessions, access, events, summary, jumps, note)


@dataclass(slots=True)
class CaptureInput:
    pcap: Path
    truth: dict
    note: str

    @property
    def packets(self) -> int:
        return self.truth["packets"]

    @property
    def mb(self) -> float:
        return self.pcap.stat().st_size / 1e6


def capture_input(packets: int, seed: int) -> CaptureInput:
    pcap = OUT / f"mcp-{packets}-seed{seed}-{file_tag(HERE / 'make_capture.py')}.pcap"
    truth_path = pcap.with_name(pcap.name + ".truth.json")
    note = "cached"
    if not (truth_path.exists() and pcap.exists()):
        truth_path.unlink(missing_ok=True)  # written after the pcap: presence means complete
        started = time.perf_counter()
        write_capture(pcap, packets, seed)
        note = f"generated in {time.perf_counter() - started:.1f} s"
    return CaptureInput(pcap, json.loads(truth_path.read_text()), note)


def big_inputs(
    gen: Path, access_mb: int, events_mb: int, seed: int, chunk_sessions: int
) -> tuple[Path, Path, dict, str]:
    """A ``access_mb`` access log and a ``events_mb`` event log from gen_mcp_logs.py.

    The generator keeps everything in memory and writes ~30x more event log than access log,
    so it runs in chunks of ``chunk_sessions`` sessions (two at a time), chunk k's day moved
    k days on. The access log is every chunk's, one after the other (in time order); the
    event log is the first ``events_mb`` of them, cut at a line: a server event log that
    covers the first hours only, so the planted jumps that can be found are the ones whose
    replay it holds. The event logs of later chunks go to /dev/null (a symlink). Cached,
    written under temporary names, summary last."""
    stem = OUT / f"big-{access_mb}MB-{events_mb}MB-seed{seed}-{chunk_sessions}-{file_tag(gen)}"
    access = stem.with_name(stem.name + ".access.log")
    events = stem.with_name(stem.name + ".events.jsonl")
    summary_path = stem.with_name(stem.name + ".summary.json")
    if summary_path.exists() and access.exists() and events.exists():
        return access, events, json.loads(summary_path.read_text()), "cached"
    started = time.perf_counter()
    partial_a = access.with_name(access.name + ".partial")
    partial_e = events.with_name(events.name + ".partial")
    a_target, e_target = access_mb * 1_000_000, events_mb * 1_000_000
    totals: Counter[str] = Counter()
    chunks = 0
    pending: deque[tuple[int, Path, Future]] = deque()
    per_chunk = 0  # access bytes of one chunk, known after the first
    workers = max(1, min(2, os.cpu_count() or 1))
    with (
        ThreadPoolExecutor(workers) as pool,
        partial_a.open("wb") as fa,
        partial_e.open("wb") as fe,
    ):
        try:
            while fa.tell() < a_target:
                while len(pending) < workers and (
                    not per_chunk or fa.tell() + len(pending) * per_chunk < a_target
                ):
                    k = chunks + len(pending)
                    prefix = stem.with_name(f"{stem.name}.chunk{k}")
                    if fe.tell() >= e_target:  # its event log is not needed: not on disk
                        null = prefix.with_name(prefix.name + ".events.jsonl")
                        null.unlink(missing_ok=True)
                        null.symlink_to(os.devnull)
                    cmd = [sys.executable, str(gen), str(prefix), str(chunk_sessions)]
                    cmd.append(str(seed * 100_000 + k))
                    run = partial(subprocess.run, cmd, capture_output=True, text=True, check=True)
                    pending.append((k, prefix, pool.submit(run)))
                k, prefix, fut = pending[0]
                totals.update(json.loads(fut.result().stdout))
                chunk_a = prefix.with_name(prefix.name + ".access.log")
                chunk_e = prefix.with_name(prefix.name + ".events.jsonl")
                fa.write(shift_access(chunk_a.read_bytes(), k))
                per_chunk = per_chunk or fa.tell()
                if fe.tell() < e_target:
                    with chunk_e.open("rb") as fh:
                        data = fh.read(e_target - fe.tell())
                        data += fh.readline()  # to the end of the line
                    fe.write(shift_events(data, k))
                chunk_a.unlink()
                chunk_e.unlink()
                pending.popleft()
                chunks += 1
        finally:
            for _, prefix, fut in pending:  # chunks not needed, or an error: discard
                fut.cancel()
                with contextlib.suppress(Exception):
                    fut.result()
                for suffix in (".access.log", ".events.jsonl"):
                    prefix.with_name(prefix.name + suffix).unlink(missing_ok=True)
    partial_a.rename(access)
    partial_e.rename(events)
    summary = {"chunks": chunks, "chunk_sessions": chunk_sessions, **totals}
    summary["planted_jump_keys"] = sorted(planted_jumps(events))
    summary_path.write_text(json.dumps(summary))
    return access, events, summary, f"generated in {time.perf_counter() - started:.0f} s"


_CLF_DATE = re.compile(rb"\[(\d\d/[A-Z][a-z][a-z]/\d{4}):")
_EVENT_TS = re.compile(rb'^\{"ts":(\d+)', re.MULTILINE)


def shift_access(data: bytes, days: int) -> bytes:
    """Move every ``$time_local`` ``days`` on (UTC: only the date part changes)."""
    if not days:
        return data
    moved: dict[bytes, bytes] = {}

    def sub(m: re.Match[bytes]) -> bytes:
        date = m.group(1)
        if date not in moved:
            day = datetime.strptime(date.decode(), "%d/%b/%Y") + timedelta(days=days)
            moved[date] = f"{day.day:02d}/{MONTHS[day.month - 1]}/{day.year}".encode()
        return b"[" + moved[date] + b":"

    return _CLF_DATE.sub(sub, data)


def shift_events(data: bytes, days: int) -> bytes:
    """Move every event record's ``ts`` ``days`` on (the integer part; the fraction stays)."""
    if not days:
        return data
    return _EVENT_TS.sub(lambda m: b'{"ts":%d' % (int(m.group(1)) + days * 86400), data)


# -- series ---------------------------------------------------------------------------------


@dataclass(slots=True)
class Row:
    """One sse-forensics measurement (one size, one --jobs value) and its peers."""

    label: str
    jobs: int | None
    work: float  # input bytes (logs) or packets (captures): what "doubling" refers to
    mb: float
    sse: Measure
    peers: dict[str, Measure] = field(default_factory=dict)
    check: str = ""
    check_ok: bool = True
    extra: dict[str, str] = field(default_factory=dict)


def jobs_args(jobs: int | None) -> list[str]:
    return [] if jobs is None else ["--jobs", str(jobs)]


def fmt_s(m: Measure | None) -> str:
    if m is None:
        return "—"
    if m.crashed:
        return "CRASH"
    if m.timed_out:
        return f"> {m.timed_out:g} (timeout)"
    return f"{m.seconds:.3f}" if m.seconds < 1 else f"{m.seconds:.2f}"


def rss_cell(m: Measure) -> str:
    """Peak RSS; of a run killed at --timeout, the peak until then (a lower bound)."""
    return (">= " if m.timed_out else "") + num(m.rss_mb, "{:.0f}")


def num(value: float, fmt: str) -> str:
    return fmt.format(value) if math.isfinite(value) else "—"


def ratio(a: float, b: float, suffix: str = "x") -> str:
    return f"{a / b:.2f}{suffix}" if b and math.isfinite(a) and math.isfinite(b) else "—"


def growth_columns(rows: list[Row]) -> dict[int, tuple[str, str]]:
    """Per row: (time ratio per doubling vs the previous size, RSS vs the smallest size),
    within the same --jobs value."""
    out: dict[int, tuple[str, str]] = {}
    for jobs in dict.fromkeys(r.jobs for r in rows):
        series = [r for r in rows if r.jobs == jobs]
        for i, r in enumerate(series):
            if not r.sse.finished:
                out[id(r)] = ("—", "—")
                continue
            if i == 0:
                out[id(r)] = ("—", "1.00x")
                continue
            p = series[i - 1]
            g = per_doubling(p.sse.seconds, r.sse.seconds, p.work, r.work)
            out[id(r)] = (
                f"{g:.2f}x" if math.isfinite(g) else "—",
                ratio(r.sse.rss_mb, series[0].sse.rss_mb),
            )
    return out


def jobs_ratio(rows: list[Row], r: Row) -> str:
    """Throughput of jobs=N over jobs=1 at the same size (= time at 1 / time at N)."""
    base = next((b for b in rows if b.label == r.label and b.jobs == 1), None)
    return ratio(base.sse.seconds, r.sse.seconds) if base else "—"


def rule_table(title: str, labels: list[str], findings: dict[str, list[dict] | None]) -> Table:
    """Findings per rule and size (of the first --jobs value); "—": the scan did not finish."""
    counts = {
        label: Counter(f"{f['rule']} ({f['classification']})" for f in findings[label])
        for label in labels
        if findings[label] is not None
    }
    rules = sorted(set().union(*counts.values())) if counts else []
    table = Table(title=title, title_justify="left")
    table.add_column("rule (classification)")
    for label in labels:
        table.add_column(label, justify="right")
    for rule in rules:
        table.add_row(
            rule, *(str(counts[label][rule]) if label in counts else "—" for label in labels)
        )
    return table


def jump_check(found: list[dict], planted: int, keys: set[tuple[str, str]]) -> tuple[str, bool]:
    """``silent-resume-jump`` findings against the planted jumps: count, and which ones
    (session, Last-Event-ID)."""
    jumps = [f for f in found if f["rule"] == "silent-resume-jump"]
    named = {(f.get("session_id"), f.get("last_event_id")) for f in jumps}
    text = f"{len(jumps)}/{planted}"
    if len(jumps) == planted and named == keys:
        return text, True
    return (
        text + f" MISMATCH ({len(named & keys)} of the planted, {len(named - keys)} elsewhere)",
        False,
    )


def logs_series(args, console: Console, jobs_values: list[int | None]) -> list[Row]:
    gen = args.gen_mcp_logs
    if not gen.exists():
        console.print(f"[bold]logs skipped[/]: {gen} not found (--gen-mcp-logs)")
        return []
    rows: list[Row] = []
    findings: dict[str, list[dict] | None] = {}
    labels: list[str] = []
    for size in args.sizes:
        sessions = args.log_base * size
        label = f"{size}x"
        inp = log_input(gen, sessions, args.seed)
        s = inp.summary
        console.print(
            f"logs {label}: {inp.access.name} + .events.jsonl, {inp.mb:.1f} MB ({inp.note}); "
            f"planted: {s['sessions']} sessions, {s['streams']} streams, {s['resumes']} resumes, "
            f"{s['silent_resume_jumps']} silent_resume_jumps, {s['signalled_gaps']} signalled_gaps"
        )
        if len(inp.jumps) != s["silent_resume_jumps"]:
            console.print(
                f"  [bold]note[/]: the event log shows {len(inp.jumps)} jumped replays, the "
                f"generator's summary {s['silent_resume_jumps']}"
            )
        grep = measure(["grep", "-c", "", str(inp.access), str(inp.events)], args.repeat, (0, 1))
        first_out: bytes | None = None
        for jobs in jobs_values:
            cmd = [
                *sse_forensics_cmd(),
                "scan",
                str(inp.access),
                str(inp.events),
                "--log-format",
                LOG_FORMAT,
                "--format",
                "jsonl",
                *jobs_args(jobs),
            ]
            sse = measure(cmd, args.repeat, SSE_OK, args.timeout)
            row = Row(label, jobs, inp.mb * 1e6, inp.mb, sse, {"grep": grep})
            found = findings_of(sse.stdout)
            if first_out is None:
                first_out, findings[label] = sse.stdout, found if sse.finished else None
                labels.append(label)
            elif sse.finished:
                row.extra["findings vs first jobs"] = same_findings(first_out, sse.stdout)
            row.check, row.check_ok = jump_check(found, s["silent_resume_jumps"], inp.jumps)
            if not sse.finished:
                row.check, row.check_ok = "— (scan did not finish)", False
            row.extra["findings"] = str(len(found)) if sse.finished else "—"
            rows.append(row)
    growth = growth_columns(rows)
    with_jobs = jobs_values != [None]
    table = Table(
        title=f"Logs, growth: gen_mcp_logs.py, base {args.log_base} sessions, seed {args.seed}, "
        f"best of {args.repeat}",
        title_justify="left",
    )
    cols = [
        "size",
        "sessions",
        *(["jobs"] if with_jobs else []),
        "input MB",
        "seconds",
        "MB/s",
        "peak RSS MB",
        "time/prev per 2x",
        "RSS / 1x",
        "grep -c s",
        "x grep",
        *(["thru vs j1", "out vs j1"] if with_jobs else []),
        "findings",
        "silent-resume-jump found/planted",
    ]
    for col in cols:
        table.add_column(col, justify="left" if col in ("size", cols[-1]) else "right")
    for r in rows:
        g, rss = growth[id(r)]
        grep = r.peers["grep"]
        table.add_row(
            r.label,
            str(args.log_base * int(r.label[:-1])),
            *([str(r.jobs)] if with_jobs else []),
            f"{r.mb:.1f}",
            fmt_s(r.sse),
            ratio(r.mb, r.sse.seconds, ""),
            rss_cell(r.sse),
            g,
            rss,
            fmt_s(grep),
            ratio(r.sse.seconds, grep.seconds),
            *(
                [jobs_ratio(rows, r), r.extra.get("findings vs first jobs", "—")]
                if with_jobs
                else []
            ),
            r.extra["findings"],
            r.check,
        )
    console.print(table)
    console.print(rule_table("Logs: findings per rule", labels, findings))
    return rows


def big_series(args, console: Console, jobs_values: list[int | None]) -> list[Row]:
    gen = args.gen_mcp_logs
    if not gen.exists():
        console.print(f"[bold]logs, big: skipped[/]: {gen} not found (--gen-mcp-logs)")
        return []
    access, events, summary, note = big_inputs(
        gen, args.big_access_mb, args.big_events_mb, args.seed, args.big_chunk_sessions
    )
    planted = {(a, b) for a, b in summary["planted_jump_keys"]}
    a_mb, e_mb = access.stat().st_size / 1e6, events.stat().st_size / 1e6
    console.print(
        f"logs, big: {access.name} {a_mb:.0f} MB + .events.jsonl {e_mb:.0f} MB ({note}): "
        f"gen_mcp_logs.py in {summary['chunks']} chunks of {summary['chunk_sessions']} "
        f"sessions, one day each; the access log has all {summary['sessions']} sessions "
        f"({summary['silent_resume_jumps']} silent_resume_jumps), the event log the first "
        f"{e_mb:.0f} MB of them ({len(planted)} of those jumps replayed in it)"
    )
    grep = measure(["grep", "-c", "", str(access), str(events)], args.repeat, (0, 1))
    rows = []
    findings: dict[str, list[dict] | None] = {}
    for jobs in jobs_values:
        cmd = [
            *sse_forensics_cmd(),
            "scan",
            str(access),
            str(events),
            "--log-format",
            LOG_FORMAT,
            "--format",
            "jsonl",
            *jobs_args(jobs),
        ]
        sse = measure(cmd, args.repeat, SSE_OK, args.timeout)
        row = Row("big", jobs, (a_mb + e_mb) * 1e6, a_mb + e_mb, sse, {"grep": grep})
        found = findings_of(sse.stdout)
        if not findings:
            findings["big"] = found if sse.finished else None
        row.check, row.check_ok = jump_check(found, len(planted), planted)
        if not sse.finished:
            row.check, row.check_ok = "— (scan did not finish)", False
        row.extra["findings"] = str(len(found)) if sse.finished else "—"
        rows.append(row)
    with_jobs = jobs_values != [None]
    table = Table(
        title=f"Logs, the issue's size: {a_mb:.0f} MB access + {e_mb:.0f} MB events, "
        f"best of {args.repeat}",
        title_justify="left",
    )
    cols = [
        *(["jobs"] if with_jobs else []),
        "input MB",
        "seconds",
        "MB/s",
        "peak RSS MB",
        "grep -c s",
        "x grep",
        *(["thru vs j1"] if with_jobs else []),
        "findings",
        "silent-resume-jump found/planted",
    ]
    for col in cols:
        table.add_column(col, justify="left" if col == cols[-1] else "right")
    for r in rows:
        table.add_row(
            *([str(r.jobs)] if with_jobs else []),
            f"{r.mb:.0f}",
            fmt_s(r.sse),
            ratio(r.mb, r.sse.seconds, ""),
            rss_cell(r.sse),
            fmt_s(grep),
            ratio(r.sse.seconds, grep.seconds),
            *([jobs_ratio(rows, r)] if with_jobs else []),
            r.extra["findings"],
            r.check,
        )
    console.print(table)
    console.print(rule_table("Logs, big: findings per rule", ["big"], findings))
    return rows


def tshark_cmd(pcap: Path) -> list[str]:
    return [
        "tshark",
        "-r",
        str(pcap),
        "-Y",
        "http.response",
        "-T",
        "fields",
        "-e",
        "http.response.code",
        "-d",
        f"tcp.port=={SERVER_PORT},http",
    ]


def capture_series(args, console: Console, jobs_values: list[int | None]) -> list[Row]:
    have_tcpflow, have_tshark = bool(shutil.which("tcpflow")), bool(shutil.which("tshark"))
    if not have_tcpflow:
        console.print("tcpflow not found: its columns are skipped (apt-get install tcpflow)")
    if not have_tshark:
        console.print("tshark not found: its columns are skipped")
    rows: list[Row] = []
    findings: dict[str, list[dict] | None] = {}
    labels: list[str] = []
    tshark_found: list[str] = []
    for size in args.sizes:
        label = f"{size}x"
        inp = capture_input(args.cap_base * size, args.seed)
        t = inp.truth
        console.print(
            f"captures {label}: {inp.pcap.name}, {t['packets']} packets, {inp.mb:.1f} MB "
            f"({inp.note}); {t['connections']} connections, {t['events']} SSE events, "
            f"{t['http_responses']} complete responses, {len(t['planted_gaps'])} planted gaps"
        )
        peers: dict[str, Measure] = {}
        if have_tcpflow:
            peers["tcpflow"] = measure(
                lambda d, p=inp.pcap: ["tcpflow", "-r", str(p), "-o", str(d)], args.repeat
            )
        if have_tshark:
            peers["tshark"] = measure(tshark_cmd(inp.pcap), args.repeat)
            tshark_found.append(
                f"{label} {len(peers['tshark'].stdout.split())} of {t['http_responses']}"
            )
        planted = {(g["session_id"], g["first"], g["last"]) for g in t["planted_gaps"]}
        first_out: bytes | None = None
        for jobs in jobs_values:
            cmd = [
                *sse_forensics_cmd(),
                "scan",
                str(inp.pcap),
                "--format",
                "jsonl",
                *jobs_args(jobs),
            ]
            sse = measure(cmd, args.repeat, SSE_OK, args.timeout)
            row = Row(label, jobs, t["packets"], inp.mb, sse, peers)
            found = findings_of(sse.stdout)
            if first_out is None:
                first_out, findings[label] = sse.stdout, found if sse.finished else None
                labels.append(label)
            elif sse.finished:
                row.extra["findings vs first jobs"] = same_findings(first_out, sse.stdout)
            gaps = [
                gap_key(f)
                for f in found
                if f["rule"] == "missing-stream-gap" and f["classification"] == "silent_corruption"
            ]
            unplanted = [f for f in found if gap_key(f) not in planted]
            hit = set(gaps) & planted
            row.check = f"{len(hit)}/{len(planted)}"
            row.check_ok = hit == planted and len(gaps) == len(planted) and not unplanted
            if not row.check_ok:
                row.check += (
                    f" MISMATCH ({len(gaps)} missing-stream-gap findings, "
                    f"{len(unplanted)} findings on no planted gap)"
                )
            if not sse.finished:
                row.check, row.check_ok = "— (scan did not finish)", False
            row.extra["findings"] = str(len(found)) if sse.finished else "—"
            rows.append(row)
    growth = growth_columns(rows)
    with_jobs = jobs_values != [None]
    table = Table(
        title=f"Captures, growth: make_capture.py, base {args.cap_base} packets, seed "
        f"{args.seed}, best of {args.repeat}",
        title_justify="left",
    )
    cols = [
        "size",
        "packets",
        *(["jobs"] if with_jobs else []),
        "MB",
        "seconds",
        "packets/s",
        "peak RSS MB",
        "time/prev per 2x",
        "RSS / 1x",
        *(["tcpflow s", "x tcpflow"] if have_tcpflow else []),
        *(["tshark s", "x tshark"] if have_tshark else []),
        *(["thru vs j1", "out vs j1"] if with_jobs else []),
        "findings",
        "gaps found/planted",
    ]
    for col in cols:
        table.add_column(col, justify="left" if col in ("size", cols[-1]) else "right")
    for r in rows:
        g, rss = growth[id(r)]
        peer_cells = []
        for name in ("tcpflow", "tshark"):
            if name in r.peers:
                m = r.peers[name]
                peer_cells += [fmt_s(m), ratio(r.sse.seconds, m.seconds)]
        table.add_row(
            r.label,
            f"{r.work:.0f}",
            *([str(r.jobs)] if with_jobs else []),
            f"{r.mb:.1f}",
            fmt_s(r.sse),
            num(r.work / r.sse.seconds, "{:,.0f}"),
            rss_cell(r.sse),
            g,
            rss,
            *peer_cells,
            *(
                [jobs_ratio(rows, r), r.extra.get("findings vs first jobs", "—")]
                if with_jobs
                else []
            ),
            r.extra["findings"],
            r.check,
        )
    console.print(table)
    if tshark_found:
        console.print("HTTP responses tshark found, of those complete: " + ", ".join(tshark_found))
    console.print(rule_table("Captures: findings per rule", labels, findings))
    return rows


# -- verdict ----------------------------------------------------------------------------------


NOT_MET = "[bold]NOT met[/]"


def verdict(console: Console, logs: list[Row], big: list[Row], caps: list[Row]) -> None:
    """Per series (and --jobs value): the targets, as measured; rates at the largest size."""
    table = Table(title="Verdict (as measured in this run)", title_justify="left")
    for col in ("series", "measure", "value", "target", ""):
        table.add_column(col, justify="right" if col in ("value", "target") else "left")

    def add(series: str, what: str, value: float, fmt: str, target: str = "", met=None) -> None:
        mark = "—" if met is None or not math.isfinite(value) else ("met" if met else NOT_MET)
        table.add_row(series, what, num(value, fmt), target, mark)

    for jobs in dict.fromkeys(r.jobs for r in [*logs, *big, *caps]):
        for kind, all_rows in (("logs", logs), ("logs big", big), ("captures", caps)):
            series = [r for r in all_rows if r.jobs == jobs]
            if not series:
                continue
            name = kind + ("" if jobs is None else f" jobs={jobs}")
            done = [r for r in series if r.sse.finished]
            if len(done) >= 2:
                worst = max(
                    per_doubling(a.sse.seconds, b.sse.seconds, a.work, b.work)
                    for a, b in itertools.pairwise(done)
                )
                add(
                    name,
                    "worst time ratio per doubling",
                    worst,
                    "{:.2f}x",
                    f"<= {GROWTH_MAX}",
                    worst <= GROWTH_MAX,
                )
                rss = done[-1].sse.rss_mb / done[0].sse.rss_mb
                add(
                    name,
                    f"peak RSS {done[-1].label} / {done[0].label}",
                    rss,
                    "{:.2f}x",
                    f"<= {RSS_GROWTH_MAX}",
                    rss <= RSS_GROWTH_MAX,
                )
            if done:
                last = done[-1]
                at = "" if kind == "logs big" else f" at {last.label}"
                if kind == "captures":
                    pps = last.work / last.sse.seconds
                    add(
                        name,
                        "packets/s" + at,
                        pps,
                        "{:,.0f}",
                        f">= {CAP_PPS_MIN:,.0f}",
                        pps >= CAP_PPS_MIN,
                    )
                    if "tcpflow" in last.peers:
                        x = last.sse.seconds / last.peers["tcpflow"].seconds
                        add(
                            name,
                            "x tcpflow" + at,
                            x,
                            "{:.1f}x",
                            f"<= {TCPFLOW_X_MAX}",
                            x <= TCPFLOW_X_MAX,
                        )
                else:
                    mbps = last.mb / last.sse.seconds
                    add(
                        name,
                        "MB/s" + at,
                        mbps,
                        "{:.0f}",
                        f">= {LOGS_MBPS_MIN:.0f}",
                        mbps >= LOGS_MBPS_MIN,
                    )
                    add(
                        name,
                        "x grep -c" + at,
                        last.sse.seconds / last.peers["grep"].seconds,
                        "{:.1f}x",
                    )
            what = "planted gaps found" if kind == "captures" else "silent-resume-jump found"
            ok = all(r.check_ok for r in series)
            what += "" if kind == "logs big" else " (all sizes)"
            table.add_row(name, what, "", "= planted", "met" if ok else NOT_MET)
            crashed = [r.label for r in series if r.sse.crashed]
            if crashed:
                table.add_row(name, "scan crashed at", ", ".join(crashed), "", NOT_MET)
            slow = [r.label for r in series if r.sse.timed_out]
            if slow:
                table.add_row(name, "scan timed out at", ", ".join(slow), "", NOT_MET)
    console.print(table)


# -- main -------------------------------------------------------------------------------------


def versions() -> str:
    try:
        import polars

        polars_v = f"polars {polars.__version__}"
    except ImportError:
        polars_v = "polars ?"
    head = (
        subprocess.run(
            ["git", "-C", str(HERE.parent), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=False,
        ).stdout.strip()
        or "?"
    )
    dirty = subprocess.run(
        ["git", "-C", str(HERE.parent), "status", "--porcelain", "--untracked-files=no"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    parts = [
        f"{tool_version([*sse_forensics_cmd(), '--version'])} (git {head}"
        + (", uncommitted changes)" if dirty else ")"),
        polars_v,
        tool_version(["grep", "--version"]),
    ]
    if shutil.which("tcpflow"):
        parts.append(tool_version(["tcpflow", "-V"]))
    if shutil.which("tshark"):
        parts.append(tool_version(["tshark", "--version"]).split(" (Git")[0])
    return ", ".join(parts)


def scan_has_jobs() -> bool:
    done = subprocess.run(
        [*sse_forensics_cmd(), "scan", "--help"], capture_output=True, text=True, check=False
    )
    return re.search(r"--jobs(?![\w-])", done.stdout) is not None


def parse_sizes(text: str) -> list[int]:
    try:
        sizes = sorted({int(s) for s in text.split(",") if s.strip()})
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a list of integers: {text!r}") from None
    if not sizes or sizes[0] < 1:
        raise argparse.ArgumentTypeError("sizes must be positive integers")
    return sizes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--log-base", type=int, default=2000, help="sessions at 1x (2000)")
    parser.add_argument("--cap-base", type=int, default=50_000, help="packets at 1x (50000)")
    parser.add_argument(
        "--sizes", type=parse_sizes, default=[1, 2, 4, 8], help="multiples of the base (1,2,4,8)"
    )
    parser.add_argument("--only", choices=("logs", "captures"), help="run one series only")
    parser.add_argument("--big", action="store_true", help="add the 1 GB + 200 MB log case")
    parser.add_argument("--big-access-mb", type=int, default=1024, help=argparse.SUPPRESS)
    parser.add_argument("--big-events-mb", type=int, default=200, help=argparse.SUPPRESS)
    parser.add_argument("--big-chunk-sessions", type=int, default=20_000, help=argparse.SUPPRESS)
    parser.add_argument(
        "--timeout",
        type=float,
        default=0,
        help="stop a scan after this many seconds and report it as not finished (0: none)",
    )
    parser.add_argument(
        "--jobs", type=int, action="append", default=[], help="scan --jobs value (repeatable)"
    )
    parser.add_argument("--repeat", type=int, default=1, help="best of K wall times (1)")
    parser.add_argument("--seed", type=int, default=1, help="generators' seed (1)")
    parser.add_argument("--gen-mcp-logs", type=Path, default=GEN_MCP_LOGS)
    args = parser.parse_args(argv)
    if args.repeat < 1 or args.log_base < 1 or args.cap_base < 1:
        parser.error("--repeat, --log-base and --cap-base must be positive")
    console = Console(highlight=False, width=200)
    OUT.mkdir(parents=True, exist_ok=True)

    console.print(
        f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC · {machine()} · load average "
        f"{os.getloadavg()[0]:.1f}\n{versions()}"
    )
    jobs_values: list[int | None] = [None]
    if args.jobs:
        if scan_has_jobs():
            jobs_values = sorted(set(args.jobs) | {1})
            if 1 not in args.jobs:
                console.print("note: jobs=1 added as the baseline of the `thru vs j1` column")
        else:
            console.print(
                "note: `sse-forensics scan --help` lists no --jobs option yet: every scan runs "
                f"once without it (asked for --jobs {', '.join(map(str, args.jobs))})"
            )

    logs: list[Row] = []
    big: list[Row] = []
    caps: list[Row] = []
    failed = False
    try:
        if args.only != "captures":
            logs = logs_series(args, console, jobs_values)
            if args.big:
                big = big_series(args, console, jobs_values)
        if args.only != "logs":
            caps = capture_series(args, console, jobs_values)
    except subprocess.CalledProcessError as exc:  # a generator crashed
        console.print(f"[bold]generator failed[/]: {exc.cmd[:3]} exit {exc.returncode}")
        console.print((exc.stderr or "").strip()[-2000:])
        failed = True

    crashes = []
    for r in [*logs, *big, *caps]:
        for name, m in (("sse-forensics", r.sse), *r.peers.items()):
            if m.crashed:
                crashes.append(f"{name} at {r.label} (jobs {r.jobs}): {m.stderr_tail}")
    for line in dict.fromkeys(crashes):
        console.print(f"[bold]CRASH[/] {line}")
    verdict(console, logs, big, caps)
    return 1 if failed or crashes else 0


if __name__ == "__main__":
    sys.exit(main())
