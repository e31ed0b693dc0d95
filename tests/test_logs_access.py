"""Text access logs: format compilation, presets, tricky lines (sans-I/O parser)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sse_forensics.ingest.logs.access import parse_access_chunk
from sse_forensics.ingest.logs.formats import PRESETS, compile_format

MCP_LINE = (
    '203.0.113.7 - alice [14/Nov/2023:22:13:20 +0100] "GET /mcp HTTP/1.1" 200 512 "-" '
    '"python-httpx/0.27.0" "41" "sess-1" "-" 12.004'
)


def parse(spec: str, text: str):
    return parse_access_chunk(compile_format(spec), text.encode(), source="access.log")


def test_mcp_preset_maps_every_field():
    out = parse("mcp", MCP_LINE + "\n")
    row = out.rows.row(0, named=True)
    assert row["ts"] == 1699996400.0  # 22:13:20 +01:00 is 21:13:20 UTC
    assert (row["method"], row["target"], row["protocol"]) == ("GET", "/mcp", "HTTP/1.1")
    assert (row["status"], row["bytes_sent"], row["request_time"]) == (200, 512, 12.004)
    assert (row["last_event_id"], row["session_id"], row["sent_session_id"]) == (
        "41",
        "sess-1",
        None,
    )
    assert row["user_agent"] == "python-httpx/0.27.0"
    assert row["extra"] == '{"remote_user":"alice","http_referer":null}'
    assert (row["line"], row["source"]) == (1, "access.log")


def test_combined_and_common_presets():
    combined = '::1 - - [01/Jan/2024:00:00:00 +0000] "POST /mcp HTTP/1.1" 202 0 "-" "node"'
    row = parse("combined", combined).rows.row(0, named=True)
    assert (row["client_ip"], row["status"], row["user_agent"]) == ("::1", 202, "node")
    assert row["last_event_id"] is None and row["request_time"] is None
    row = parse("common", '10.0.0.1 - - [01/Jan/2024:00:00:01 +0000] "GET / HTTP/1.0" 404 -')
    assert row.rows.row(0, named=True)["bytes_sent"] is None
    assert row.rows["ts"][0] == 1704067201.0


def test_user_format_with_iso_time_ipv6_and_nginx_escapes():
    spec = (
        'nginx:$remote_addr [$time_iso8601] "$request" $status "$http_user_agent" '
        '"$http_last_event_id" $request_time'
    )
    line = (
        '2001:db8::5 [2024-03-01T10:00:00+00:00] "GET /mcp?x=1 HTTP/1.1" 200 '
        '"Mozilla \\x22quoted\\x22 \\x5Cpath" "s7_141" 0.5'
    )
    row = parse(spec, line).rows.row(0, named=True)
    assert row["client_ip"] == "2001:db8::5"
    assert row["ts"] == 1709287200.0
    assert row["target"] == "/mcp?x=1"
    assert row["user_agent"] == 'Mozilla "quoted" \\path'
    assert row["last_event_id"] == "s7_141"


def test_nginx_config_quoting_is_accepted():
    spec = "nginx:'$remote_addr [$time_local] '\n    '\"$request\" $status';"
    fmt = compile_format(spec)
    assert [v.shown for v in fmt.variables] == [
        "$remote_addr",
        "$time_local",
        "$request",
        "$status",
    ]


def test_apache_format_with_escaped_quotes_and_headers():
    spec = (
        'apache:%h %l %u %t \\"%r\\" %>s %b \\"%{User-Agent}i\\" \\"%{Last-Event-ID}i\\" '
        '\\"%{Mcp-Session-Id}i\\" \\"%{Mcp-Session-Id}o\\" %D'
    )
    line = (
        '192.0.2.1 - - [10/Oct/2000:13:55:36 -0700] "GET /mcp HTTP/1.1" 200 2326 '
        '"agent \\"x\\" \\\\ y" "17" "abc" "-" 1500000'
    )
    row = parse(spec, line).rows.row(0, named=True)
    assert row["user_agent"] == 'agent "x" \\ y'
    assert (row["last_event_id"], row["session_id"], row["sent_session_id"]) == ("17", "abc", None)
    assert row["request_time"] == 1.5
    assert row["ts"] == 971211336.0


def test_apache_mcp_preset_and_query_directive():
    line = '192.0.2.1 - - [10/Oct/2000:13:55:36 -0700] "GET /mcp HTTP/1.1" 410 - "9" "s" "-"'
    row = parse("apache-mcp", line).rows.row(0, named=True)
    assert (row["status"], row["last_event_id"]) == (410, "9")
    row = parse("apache:%h %U%q %>s", "1.2.3.4 /mcp?a=b 200").rows.row(0, named=True)
    assert row["target"] == "/mcp?a=b"


def test_garbage_lines_are_counted_sampled_and_explained():
    text = "\n".join(
        [MCP_LINE, "garbage", "", MCP_LINE.replace(" 200 ", " OK "), 'half "line', MCP_LINE]
    )
    out = parse("mcp", text)
    assert out.rows["line"].to_list() == [1, 6]
    assert out.lines == 5 and out.unreadable == 3
    lines = [s[0] for s in out.samples]
    assert lines == [2, 4, 5]
    assert "$status" in out.samples[1][1]


def test_samples_escape_and_cap():
    text = "\n".join(["\x01bad \xe9" + "x" * 300] * 30)
    out = parse_access_chunk(
        compile_format("mcp"), text.encode("latin-1"), source="a", max_samples=20
    )
    assert out.unreadable == 30 and len(out.samples) == 20
    assert out.samples[0][2].startswith("\\x01bad \\xe9")
    assert len(out.samples[0][2]) <= 210


@pytest.mark.parametrize(
    ("spec", "needle"),
    [
        ("nginx:$status$body_bytes_sent", "$status"),
        ("apache:%h %Z", "%Z"),
        ("nosuchpreset", "nosuchpreset"),
        ("nginx:no variables here", "no variables"),
    ],
)
def test_wrong_format_fails_fast_naming_the_field(spec, needle):
    with pytest.raises(ValueError, match=needle.replace("$", r"\$")):
        compile_format(spec)


def test_every_preset_compiles_and_reads_its_own_line():
    lines = {
        "common": '1.1.1.1 - - [01/Jan/2024:00:00:00 +0000] "GET / HTTP/1.1" 200 1',
        "combined": '1.1.1.1 - - [01/Jan/2024:00:00:00 +0000] "GET / HTTP/1.1" 200 1 "-" "ua"',
        "mcp": MCP_LINE,
        "apache-mcp": '1.1.1.1 - - [01/Jan/2024:00:00:00 +0000] "GET / HTTP/1.1" 200 1 "-" "s" "-"',
    }
    assert set(lines) == set(PRESETS)
    for name, line in lines.items():
        assert parse(name, line).rows.height == 1, name


@settings(max_examples=150, deadline=None)
@given(st.lists(st.text(alphabet=st.characters(codec="utf-8"), max_size=80), max_size=8))
def test_random_lines_never_raise(lines):
    for spec in ("mcp", "apache-mcp"):
        out = parse_access_chunk(
            compile_format(spec), "\n".join(lines).encode("utf-8", "surrogatepass"), source="x"
        )
        assert out.rows.height + out.unreadable == out.lines
