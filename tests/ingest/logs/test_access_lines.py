"""Access lines as real servers write them (issue 11): nginx writes a line when the response
ends (a long stream's line comes after those of later requests), the session may be only
in the response header column, a proxy logs ``$upstream_http_mcp_session_id``, formats and
names come from a ``--log-map``; and access lines alone never claim more than they show."""

from __future__ import annotations

import re
import time
from collections import Counter
from pathlib import Path

import pytest
from conftest import SAMPLES
from support.log_samples import LOGS, expected_findings, got_findings

from sse_forensics.ingest.logs import read_logs
from sse_forensics.pipeline import LogOptions, scan_paths

# The samples' access.log: nginx's `mcp` preset, or `combined-mcp` (no request session).
MCP_LINE = re.compile(
    r'^(?P<head>.*?"[^"]*" \d{3} \d+ "[^"]*" "[^"]*") "(?P<leid>[^"]*)" (?:"(?P<sid>[^"]*)" )?'
    r'"(?P<sent>[^"]*)" (?P<rt>\S+)$'
)
COMBINED_MCP = (
    'nginx:$remote_addr - $remote_user [$time_local] "$request" $status $body_bytes_sent '
    '"$http_referer" "$http_user_agent" "$http_last_event_id" "$sent_http_mcp_session_id" '
    "$request_time"
)
UPSTREAM = COMBINED_MCP.replace("$sent_http_mcp_session_id", "$upstream_http_mcp_session_id")


def _rewrite(name: str, folder: Path, line: str, events: bool = True) -> Path:
    """The logs of sample ``name`` in ``folder``, each access line rewritten by ``line``
    (a format string over the `mcp` line's groups)."""
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for text in (LOGS / name / "access.log").read_text().splitlines():
        m = MCP_LINE.match(text)
        assert m is not None, text
        out.append(line.format(**m.groupdict(default="-")))
    (folder / "access.log").write_text("\n".join(out) + "\n")
    if events:
        (folder / "events.jsonl").write_bytes((LOGS / name / "events.jsonl").read_bytes())
    return folder


def _response_header_only(name: str, folder: Path, events: bool = True) -> Path:
    """combined + "$http_last_event_id" "$sent_http_mcp_session_id" $request_time: the
    session only as the server sent it (on every response)."""
    return _rewrite(name, folder, '{head} "{leid}" "{sent}" {rt}', events)


def _judged(name: str, result) -> Counter:
    not_judged = {item["rule"] for item in result.not_judged}
    return Counter({f: n for f, n in expected_findings(name).items() if f[0] not in not_judged})


RESUMES = [
    "clean-resume-int",
    "resume-gap-signalled",
    "resume-jump-unsignalled",
    "empty-replay-2xx-ends",
    "resume-410",
    "replay-from-oldest",
    "opaque-resume-jump",
]


@pytest.mark.parametrize("name", RESUMES)
def test_the_response_session_header_alone_attaches_lines(tmp_path: Path, name: str) -> None:
    """No request session column: the lines still describe the event log's streams, so a
    clean resume is no empty replay, and the findings are those of the `mcp` format."""
    if not (LOGS / name / "events.jsonl").exists():
        pytest.skip("rotated sample")
    folder = _response_header_only(name, tmp_path / name)
    result = scan_paths([str(folder)])
    assert result.log_stats["files"][0]["format"] == "combined-mcp"  # sniffed
    assert got_findings(result) == got_findings(scan_paths([str(LOGS / name)]))
    assert got_findings(result) == _judged(name, result)
    joined = scan_paths([str(SAMPLES / f"{name}.pcap"), str(folder)])
    assert got_findings(joined) == expected_findings(name)


def test_upstream_session_header_is_a_response_session_column(tmp_path: Path) -> None:
    name = "clean-resume-int"
    folder = _response_header_only(name, tmp_path / name)
    result = scan_paths([str(folder)], logs=LogOptions(access_format="nginx:" + UPSTREAM[6:]))
    assert not result.findings
    access = read_logs([str(folder / "access.log")], access_format=UPSTREAM).access
    assert access["sent_session_id"].drop_nulls().unique().to_list() == [f"{name}-0001"]


def _clf(ts: float) -> str:
    return time.strftime("%d/%b/%Y:%H:%M:%S +0000", time.gmtime(ts))


def test_start_is_time_local_less_request_time(tmp_path: Path) -> None:
    path = tmp_path / "access.log"
    t = 1796010153
    path.write_text(
        f'10.0.0.1 - - [{_clf(t + 30)}] "POST /mcp HTTP/1.1" 200 9 "-" "c" "-" "-" "S" 30.500\n'
        f'10.0.0.1 - - [{_clf(t + 31)}] "DELETE /mcp HTTP/1.1" 200 0 "-" "c" "-" "S" "S" -\n'
    )
    access = read_logs([str(path)], access_format="mcp").access
    assert access["start"].to_list() == [pytest.approx(t - 0.5), None]
    assert access["ts"].to_list() == [t + 30, t + 31]


def test_a_long_streams_line_after_its_resume_does_not_reorder_them(tmp_path: Path) -> None:
    """The tools/call stream's response ends 20 s late (the server noticed the lost client
    only then): its line comes after the resume's. The resume still follows the stream it
    resumes, and the clean resume stays clean."""
    name = "clean-resume-int"
    folder = tmp_path / name
    folder.mkdir()
    lines = (LOGS / name / "access.log").read_text().splitlines()
    stream = next(
        i
        for i, line in enumerate(lines)
        if " 200 " in line and '"POST' in line and "0.0" in line.split()[-1] and i > 0
    )
    m = MCP_LINE.match(lines[stream])
    assert m is not None
    when = re.search(r"\[(.*?)\]", lines[stream])
    assert when is not None
    logged = time.mktime(time.strptime(when.group(1)[:-6], "%d/%b/%Y:%H:%M:%S")) - time.timezone
    late = lines[stream].replace(when.group(1), _clf(logged + 20)).rsplit(" ", 1)[0]
    late += f" {float(m['rt']) + 20:.3f}"
    reordered = [line for i, line in enumerate(lines) if i != stream]
    resume = next(i for i, line in enumerate(reordered) if '"GET' in line)
    reordered.insert(resume + 1, late)
    (folder / "access.log").write_text("\n".join(reordered) + "\n")
    (folder / "events.jsonl").write_bytes((LOGS / name / "events.jsonl").read_bytes())
    result = scan_paths([str(folder)])
    assert not result.findings
    resumes = result.tables["resumes"]
    assert resumes.height == 1 and resumes["resumes_stream"][0] is not None


FULL_LINE = re.compile(
    r'^(?P<addr>\S+) - \S+ \[(?P<time>[^\]]+)\] "(?P<request>[^"]*)" (?P<status>\d{3}) \d+ '
    r'"[^"]*" "[^"]*" "(?P<leid>[^"]*)" (?:"[^"]*" )?"(?P<sent>[^"]*)" (?P<rt>\S+)$'
)


def test_a_log_map_gives_the_text_format_and_names_its_variables(tmp_path: Path) -> None:
    """A format with its own names (`$http_x_session`, `$upstream_ms` in milliseconds),
    given only in the --log-map: the files are recognised and the names used."""
    name = "clean-resume-int"
    fmt = (
        'nginx:$remote_addr [$time_local] "$request" $status "$http_last_event_id" '
        '"$http_x_session" $upstream_ms'
    )
    folder = tmp_path / "logs"
    folder.mkdir()
    out, durations = [], []
    for text in (LOGS / name / "access.log").read_text().splitlines():
        m = FULL_LINE.match(text)
        assert m is not None, text
        ms = round(float(m["rt"]) * 1000)
        durations.append(ms / 1000)
        out.append(
            f'{m["addr"]} [{m["time"]}] "{m["request"]}" {m["status"]} "{m["leid"]}" '
            f'"{m["sent"]}" {ms}'
        )
    (folder / "access.log").write_text("\n".join(out) + "\n")
    (folder / "events.jsonl").write_bytes((LOGS / name / "events.jsonl").read_bytes())
    log_map = tmp_path / "map.toml"
    log_map.write_text(
        "[access]\n"
        f"format = '{fmt}'\n"
        'session_id = "http_x_session"\n'
        'request_time = { path = "$upstream_ms", scale = 0.001 }\n'
    )
    result = scan_paths([str(folder)], logs=LogOptions(log_map=str(log_map)))
    assert not result.errors and not result.findings
    assert result.tables["resumes"].height == 1
    access = read_logs([str(folder / "access.log")], log_map=str(log_map)).access
    assert access["session_id"].drop_nulls().unique().to_list() == [f"{name}-0001"]
    assert access["request_time"].to_list() == pytest.approx(durations)


def test_a_log_map_name_the_format_lacks_is_an_error(tmp_path: Path) -> None:
    log_map = tmp_path / "map.toml"
    log_map.write_text("[access]\nformat = 'mcp'\nsession_id = \"http_x_sesion\"\n")
    path = _rewrite(
        "resume-410", tmp_path / "logs", '{head} "{leid}" "{sid}" "{sent}" {rt}', events=False
    )
    with pytest.raises(ValueError, match="http_x_sesion"):
        scan_paths([str(path)], logs=LogOptions(log_map=str(log_map)))


def _access_410(tmp_path: Path, reissue: bool) -> Path:
    """resume-410's access log alone, the client re-issuing its tools/call (a new POST
    stream within the same second) after the 410 or not."""
    lines = (LOGS / "resume-410" / "access.log").read_text().splitlines()
    refused = next(i for i, line in enumerate(lines) if " 410 " in line)
    if reissue:
        again = lines[refused - 1].replace(" 984 ", " 1904 ")
        again = again.rsplit(" ", 1)[0] + " 0.081"
        lines.insert(refused + 1, again)
    path = tmp_path / f"access-{reissue}.log"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_no_reissue_after_410_not_when_a_later_post_exists(tmp_path: Path) -> None:
    found = {f.rule for f in scan_paths([str(_access_410(tmp_path, reissue=True))]).findings}
    assert found == {"resume-refused-410"}
    found = {f.rule for f in scan_paths([str(_access_410(tmp_path, reissue=False))]).findings}
    assert found == {"resume-refused-410", "no-reissue-after-410"}


def test_messages_about_logs_name_no_unknown_id_and_no_capture(tmp_path: Path) -> None:
    result = scan_paths([str(_access_410(tmp_path, reissue=False))])
    for finding in result.findings:
        assert "?" not in finding.message and "capture" not in finding.message


@pytest.mark.parametrize(
    "name",
    [
        "live-gap-signalled",
        "resume-gap-signalled",
        "mcp-sdk-resume",
        "ts-sdk-stream-gap",
        "ts-sdk-clean",
    ],
)
def test_the_initialize_line_never_takes_the_tools_call_stream(name: str) -> None:
    """With the session in the response header column, the initialize line (a 200 within
    the same second) is a candidate too: the stream's records, spread over longer than
    that request took, cannot be its answer."""
    result = scan_paths([str(LOGS / name)], keep_records=True)
    assert result.facts is not None
    lines = (LOGS / name / "access.log").read_text().splitlines()
    posts = [n for n, line in enumerate(lines, 1) if '"POST' in line and " 200 " in line]
    call = max(posts, key=lambda n: int(lines[n - 1].split('" 200 ')[1].split()[0]))
    posts = [s for s in result.facts.streams if s.kind == "post"]
    live = max(posts, key=lambda s: len(s.events))
    assert live.request_origin is not None and live.request_origin.number == call
    # Every response the event log shows found its own line.
    numbers = [s.request_origin.number for s in posts if s.request_origin is not None]
    assert all(
        s.request_origin is not None and s.request_origin.source.endswith("access.log")
        for s in posts
    )
    assert len(set(numbers)) == len(numbers)


def test_a_gap_the_client_read_past_stays_silent_whatever_posts_follow(tmp_path: Path) -> None:
    """Logs show no request body: a later POST may be the re-issue of a call the client
    left with events pending (gap-client-reissued's logs: no silent_corruption), but not of
    one it read to the end."""
    name = "live-jump-unsignalled"
    folder = tmp_path / name
    folder.mkdir()
    lines = (LOGS / name / "access.log").read_text().splitlines()
    call = next(
        line for line in lines if '"POST' in line and " 200 " in line and '"-" "-"' not in line
    )
    lines.insert(len(lines) - 1, call.replace(" 200 ", " 200 ").rsplit(" ", 1)[0] + " 0.002")
    (folder / "access.log").write_text("\n".join(lines) + "\n")
    (folder / "events.jsonl").write_bytes((LOGS / name / "events.jsonl").read_bytes())
    found = got_findings(scan_paths([str(folder)]))
    assert ("missing-stream-gap", "silent_corruption", "8", "12") in found
    reissued = scan_paths([str(LOGS / "gap-client-reissued")])
    assert not [f for f in reissued.findings if f.classification == "silent_corruption"]
