"""Text access logs: format compilation, presets, tricky lines (sans-I/O parser)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from polars.testing import assert_frame_equal
from support.budget import examples

from sse_forensics.ingest.logs.access import (
    _read_fields,
    _read_segments,
    field_plan,
    parse_access_chunk,
)
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
        "combined-mcp": '1.1.1.1 - - [01/Jan/2024:00:00:00 +0000] "GET / HTTP/1.1" 200 1 "-" "ua" '
        '"7" "s1" 0.250',
        "apache-mcp": '1.1.1.1 - - [01/Jan/2024:00:00:00 +0000] "GET / HTTP/1.1" 200 1 "-" "s" "-"',
    }
    assert set(lines) == set(PRESETS)
    for name, line in lines.items():
        assert parse(name, line).rows.height == 1, name


@settings(max_examples=examples(50, 500), deadline=None)
@given(st.lists(st.text(alphabet=st.characters(codec="utf-8"), max_size=80), max_size=8))
def test_random_lines_never_raise(lines):
    for spec in ("mcp", "apache-mcp"):
        out = parse_access_chunk(
            compile_format(spec), "\n".join(lines).encode("utf-8", "surrogatepass"), source="x"
        )
        assert out.rows.height + out.unreadable == out.lines


@pytest.mark.parametrize(
    "head", [b"x^0", b"x\x01", b"x\x9c", b"x\xda", b"\x1f\x8b", b"\x28\xb5\x2f\xfd"]
)
def test_a_first_line_that_looks_compressed_costs_only_itself(head: bytes) -> None:
    """A chunk whose first line starts like a gzip, zlib or zstd stream (polars' CSV reader
    took ``x^0...`` for one: ``OSError: corrupt deflate stream``, found by the fuzz test
    above): that line is unreadable, the next one is read."""
    data = head + b"aaaa\n" + MCP_LINE.encode() + b"\n"
    out = parse_access_chunk(compile_format("mcp"), data, source="x")
    assert (out.lines, out.unreadable, out.rows.height) == (2, 1, 1)
    assert out.rows.get_column("line").to_list() == [2]


# The fields path (space-separated CSV, proven laid out) and the segments path must give
# the same rows, line numbers, counts and samples; every line the fields path cannot prove
# sends its whole chunk to the segments path.


def both_paths(spec: str, text: str | bytes, *, max_samples: int = 20):
    """(what parse_access_chunk gives, what the segments path alone gives, whether the
    fields path read the chunk)."""
    fmt = compile_format(spec)
    raw = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text
    data = raw
    if fmt.dialect == "apache" and b"\\" in data:  # as parse_access_chunk does first
        data = data.replace(b"\\\\", b"\\x5C").replace(b'\\"', b"\\x22")
    rows = data.count(b"\n") + (not data.endswith(b"\n"))
    plan = field_plan(fmt)
    fast = plan is not None and bool(data)
    if fast:
        fast = _read_fields(plan, fmt, data, source="a", first_line=7, rows=rows) is not None
    got = parse_access_chunk(fmt, raw, source="a", first_line=7, max_samples=max_samples)
    slow = _read_segments(fmt, data, source="a", first_line=7, max_samples=max_samples, rows=rows)
    return got, slow, fast


def assert_same(got, slow) -> None:
    assert_frame_equal(got.rows, slow.rows, check_exact=True)
    assert (got.lines, got.unreadable, got.samples) == (slow.lines, slow.unreadable, slow.samples)


GOOD = [
    MCP_LINE,
    '2001:db8::1 - - [01/Dec/2026:00:04:51 +0000] "POST /mcp?x=1 HTTP/2.0" 202 0 "-" '
    '"curl/8 \\x22q\\x22 \\x5Cpath" "-" "abc" "abc" 0.001',
    '10.0.0.1 - bob [29/Feb/2024:23:59:59 -0800] "DELETE /mcp HTTP/1.1" 410 5 '
    '"https://x.example/a b" "" "s1_9" "-" "-" 12',
]


def test_fields_path_reads_clean_chunks_as_the_segments_path():
    got, slow, fast = both_paths("mcp", "\n".join(GOOD * 50) + "\n")
    assert fast
    assert got.rows.height == 150 and got.rows["line"].to_list() == list(range(7, 157))
    assert_same(got, slow)
    row = got.rows.row(1, named=True)
    assert row["user_agent"] == 'curl/8 "q" \\path'
    assert got.rows.row(2, named=True)["user_agent"] is None  # "" reads as no value


@pytest.mark.parametrize(
    "zone", ["+0000", "-0000", "+0530", "-0800", "+2359", "-2359", "+1400", "-1200"]
)
def test_time_zones_read_alike(zone):
    text = "\n".join(line.replace("+0100", zone) for line in [MCP_LINE] * 3)
    got, slow, fast = both_paths("mcp", text)
    assert fast
    assert_same(got, slow)


def test_two_zones_in_a_chunk_and_zones_strptime_refuses():
    lines = [MCP_LINE, MCP_LINE.replace("+0100", "-0330")] * 5
    got, slow, fast = both_paths("mcp", "\n".join(lines))
    assert fast and got.rows["ts"].n_unique() == 2
    assert_same(got, slow)
    # Zones other than ±hhmm take strptime itself: what it refuses is unreadable.
    for zone in ("+2400", "+0060", "+00:00", "0000", "Z", "−0100", "+01"):
        text = "\n".join([MCP_LINE, MCP_LINE.replace("+0100", zone)])
        got, slow, fast = both_paths("mcp", text)
        assert_same(got, slow)
        assert fast == (got.unreadable == 0), zone


BAD = [
    "",  # blank
    "garbage",
    MCP_LINE.replace('"-"', '"x\\"y"', 1),  # a raw quote escaped Apache-style, in nginx
    MCP_LINE.replace('" 200', " 200", 1),  # unbalanced quotes
    MCP_LINE + ' "extra"',
    MCP_LINE.replace('"-"', '"a""b"', 1),
    '"' + MCP_LINE.replace(' "-" ', " - ", 1),  # quotes moved, count unchanged
    MCP_LINE.replace(" - ", "  - ", 1),  # two spaces
    MCP_LINE.replace(" - alice", " - -", 1).replace(" - ", " -\t", 1),
    MCP_LINE.rsplit(" ", 1)[0],  # no $request_time
    MCP_LINE.replace(" 200 ", " OK ", 1),
    MCP_LINE.replace("[", "", 1),
    MCP_LINE.replace("14/Nov", "31/Feb", 1),
    MCP_LINE + "\r",
]
ODD_BUT_FINE = [MCP_LINE.replace("14/Nov", "1/Nov", 1), MCP_LINE.replace("alice", "al\u00e9ce")]


@pytest.mark.parametrize("bad", BAD + ODD_BUT_FINE)
def test_a_line_the_fields_path_cannot_prove_sends_its_chunk_to_the_segments_path(bad):
    text = "\n".join([MCP_LINE, bad, MCP_LINE, GOOD[1]])
    got, slow, fast = both_paths("mcp", text)
    assert_same(got, slow)
    assert fast == (bad in ODD_BUT_FINE)
    # ... and the chunk as a whole, or line by line, reads the same.
    alone = [both_paths("mcp", line)[0] for line in text.split("\n")]
    assert sum(p.unreadable for p in alone) == got.unreadable
    assert sum(p.rows.height for p in alone) == got.rows.height


def test_invalid_utf8_and_a_last_line_without_newline():
    data = (MCP_LINE + "\n").encode() + MCP_LINE.replace("alice", "al\xe9ce").encode("latin-1")
    got, slow, fast = both_paths("mcp", data)
    assert_same(got, slow)
    got, slow, fast = both_paths("mcp", "\n".join([MCP_LINE] * 3))
    assert fast and got.rows["line"].to_list() == [7, 8, 9]


def test_apache_escapes_and_other_formats():
    apache = 'apache:%h %l %u %t \\"%r\\" %>s %b \\"%{User-Agent}i\\" \\"%{Last-Event-ID}i\\" %D'
    line = (
        '192.0.2.1 - - [10/Oct/2000:13:55:36 -0700] "GET /mcp HTTP/1.1" 200 2326 '
        '"agent \\"x\\" \\\\ y" "17" 1500000'
    )
    got, slow, fast = both_paths(apache, "\n".join([line] * 4))
    assert fast and got.rows["user_agent"][0] == 'agent "x" \\ y'
    assert_same(got, slow)
    for spec, text in [
        ("combined", '::1 - - [01/Jan/2024:00:00:00 +0000] "POST /mcp HTTP/1.1" 202 0 "-" "node"'),
        ("common", '10.0.0.1 - - [01/Jan/2024:00:00:01 +0000] "GET / HTTP/1.0" 404 -'),
        (
            "apache-mcp",
            '1.1.1.1 - - [01/Jan/2024:00:00:00 +0000] "GET / HTTP/1.1" 200 1 "-" "s" "-"',
        ),
        (
            'nginx:"$request" $status [$time_local] $remote_addr',
            '"GET / H" 200 [01/Jan/2024:00:00:00 +0000] ::1',
        ),
        (
            'nginx:$remote_addr $msec "$request" rt=$request_time $bytes_sent',
            '::1 1700000000.5 "GET / H" rt=0.5 9',
        ),
        (
            'nginx:$remote_addr [$time_iso8601] "$request" $status',
            '::1 [2024-03-01T10:00:00+00:00] "GET / H" 200',
        ),
    ]:
        got, slow, fast = both_paths(spec, "\n".join([text] * 3))
        assert fast, spec
        assert got.rows.height == 3, spec
        assert_same(got, slow)


def test_formats_the_fields_path_does_not_take():
    for spec in (
        "apache:%h %U%q %>s",  # %U needs its regex
        'nginx:$remote_addr "$request_method $uri" $status',  # two variables in quotes
        'nginx:$remote_addr"$request" $status',  # text glued to a quote
        "nginx:$remote_addr  $status",  # two spaces
    ):
        assert field_plan(compile_format(spec)) is None, spec


_LINE_PARTS = st.sampled_from(
    [" ", '"', "-", "\\", "\\x22", "[", "]", "\t", "\r", "a", "/", ":", "+0000", "é", "\x00"]
)


@settings(max_examples=examples(100, 1000), deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, len(MCP_LINE)), st.integers(0, 3), _LINE_PARTS),
        max_size=3,
    ),
    st.integers(1, 4),
)
def test_mutated_lines_read_alike_on_both_paths(edits, copies):
    line = MCP_LINE
    for at, cut, piece in edits:
        line = line[:at] + piece + line[at + cut :]
    text = "\n".join([MCP_LINE, line] * copies + [GOOD[1]])
    got, slow, _ = both_paths("mcp", text)
    assert_same(got, slow)
