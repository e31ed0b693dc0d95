"""Fuzz per input kind (issue 16: no single record can abort a scan): captures (pcap and
pcapng), access logs, event logs and ``--log-map`` files whose fields hold hostile values
— numbers past any integer, times past the year 9999, NUL, CR, invalid UTF-8, values of
the wrong JSON type — are scanned and rendered (JSON, JSON lines, OCSF, the table, the
timeline, the HTML report) without an exception. Only a file that is no input at all may
be refused (``UnreadableInput``), and a log map that does not compile (``ValueError``,
before the scan). Each input also holds the ordinary 8-12 gap, found unless the hostile
value is in the log map that reads it.

``SSE_FORENSICS_FUZZ_EXAMPLES=N`` runs N examples per kind (default a few: each is a scan).
"""

from __future__ import annotations

import io
import json
import os
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from conftest import SAMPLES
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rich.console import Console

from sse_forensics.engine.registry import load_rules
from sse_forensics.errors import UnreadableInput
from sse_forensics.ingest.logs import load_log_map
from sse_forensics.pipeline import LogOptions, scan_paths
from sse_forensics.report.html import render_report
from sse_forensics.report.jsonout import findings_jsonl, scan_document
from sse_forensics.report.ocsf import findings_ocsf
from sse_forensics.report.terminal import render_scan
from sse_forensics.report.timeline import render_timeline
from sse_forensics.report.timeline_records import timeline_jsonl, timeline_records
from sse_forensics.result import ScanResult

sys.path.insert(0, str(SAMPLES))  # samples/ is not a package
import crafted as c
import hostile_records as hostile

EXAMPLES = int(os.environ.get("SSE_FORENSICS_FUZZ_EXAMPLES", "6"))
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    derandomize="SSE_FORENSICS_FUZZ_EXAMPLES" not in os.environ,
)
RULES = load_rules()

HOSTILE_TEXT = st.one_of(
    st.sampled_from(
        [
            "9" * 5000,
            "9" * 25,
            "s_" + "9" * 5000,
            "9" * 5000 + "/x",
            "-1",
            "1e999",
            "NaN",
            "7\r\nX: y",
            "\x00",
            "a\x00b",
            "\u202e\u0663\u0664",
            "\x1b[31m",
            "",
            "10000-01-01T00:00:00Z",
            "99999-12-31T23:59:59Z",
            "0000-00-00T00:00:00Z",
            "[31/Dec/99999:23:59:59 +0000]",
        ]
    ),
    st.text(max_size=40),
)
HOSTILE_BYTES = st.one_of(
    HOSTILE_TEXT.map(lambda t: t.encode("utf-8", "surrogatepass")), st.binary(max_size=40)
)
JSON_VALUE = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(min_value=-(10**30), max_value=10**30),
        st.floats(allow_nan=False, allow_infinity=False),
        st.sampled_from([1e300, -1e300, 2.6e11, 253402300800.0, -1.0]),
        HOSTILE_TEXT,
    ),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=6,
)


def exercise(result: ScanResult) -> None:
    """Every rendering of ``result``: none may raise."""
    scan_document(result)
    findings_jsonl(result)
    findings_ocsf(result.findings)
    render_scan(Console(file=io.StringIO(), width=120), result)
    render_report(result, RULES)


def scan_and_render(paths: list[Path], log_map: Path | None = None) -> ScanResult | None:
    try:
        result = scan_paths(
            [str(p) for p in paths], logs=LogOptions(log_map=str(log_map) if log_map else None)
        )
    except UnreadableInput:
        return None
    exercise(result)
    timeline = scan_paths(
        [str(p) for p in paths],
        logs=LogOptions(log_map=str(log_map) if log_map else None),
        keep_records=True,
    )
    assert timeline.facts is not None
    render_timeline(Console(file=io.StringIO(), width=120), timeline.facts)
    timeline_jsonl(timeline_records(timeline.facts))
    return result


def ordinary_gap(result: ScanResult, session: str) -> bool:
    return any(
        f.rule == "missing-stream-gap"
        and f.session_id == session
        and (f.gap.get("first"), f.gap.get("last")) == ("8", "12")
        for f in result.findings
    )


@st.composite
def hostile_capture(draw) -> c.Capture:
    """The ordinary gap, then a session whose ID, event IDs, retry and a resume's
    Last-Event-ID are drawn from hostile values."""
    session = draw(HOSTILE_BYTES.filter(lambda b: b"\r" not in b and b"\n" not in b))
    ids = draw(
        st.lists(
            HOSTILE_BYTES.filter(lambda b: b"\n" not in b and b"\r" not in b),
            min_size=1,
            max_size=4,
        )
    )
    retry = draw(
        st.sampled_from([b"", b"retry: " + b"9" * 5000 + b"\n", b"retry: 99999999999999999999\n"])
    )
    blocks = [retry + c.sse_event(i, c.progress(n, 9)) for n, i in enumerate(ids, 1)]
    incident = replace(c.Incident.of(1, "fuzz"), session=session or b"x")
    last_event_id = draw(HOSTILE_BYTES.filter(lambda b: b"\n" not in b))
    capture = hostile.ordinary_gap(c.Incident.of(0, "ordinary-gap"))
    capture.records += hostile.stream_of(blocks)(incident).records
    capture.records += hostile.resume_with(last_event_id, None)(
        c.Incident.of(2, "fuzz-resume")
    ).records
    return capture


@FUZZ
@given(hostile_capture())
def test_pcap_with_hostile_values(tmp_path_factory, capture) -> None:
    path = tmp_path_factory.mktemp("fuzz") / "h.pcap"
    c.write_pcap(path, capture)
    result = scan_and_render([path])
    assert result is not None and ordinary_gap(result, hostile.ORDINARY_SESSION)


@FUZZ
@given(
    hostile_capture(),
    st.sampled_from([b"", b"\x00", b"\x09", b"\x7f", b"\x80", b"\xff", b"\x94"]),
    st.sampled_from([0, 1 << 62, -(1 << 62), -1, (1 << 63) - 1, -(1 << 63)]),
)
def test_pcapng_with_hostile_values_and_interface_options(
    tmp_path_factory, capture, resol, offset
) -> None:
    options = hostile.tsoffset(offset)
    if resol:
        options += c._pcapng_option(c.OPT_IF_TSRESOL, resol)
    ordinary = hostile.ordinary_gap(c.Incident.of(0, "ordinary-gap"))
    path = tmp_path_factory.mktemp("fuzz") / "h.pcapng"
    path.write_bytes(hostile.pcapng_two_interfaces(ordinary, capture, options))
    result = scan_and_render([path])
    assert result is not None and ordinary_gap(result, hostile.ORDINARY_SESSION)


ACCESS_FIELDS = 11  # the mcp preset's fields, as the ordinary access log writes them


@FUZZ
@given(st.lists(st.tuples(st.integers(0, ACCESS_FIELDS - 1), HOSTILE_TEXT), min_size=1, max_size=6))
def test_access_log_with_hostile_fields(tmp_path_factory, edits) -> None:
    """Lines of the ordinary access log with fields replaced (status, bytes, time, IDs…)."""
    lines = hostile.ORDINARY_ACCESS_LOG.read_bytes().decode().splitlines()
    line = lines[2]
    for field, value in edits:
        parts = line.split('"')
        at = min(field, len(parts) - 1)
        parts[at] = value.replace('"', "'").replace("\n", " ")
        line = '"'.join(parts)
    folder = tmp_path_factory.mktemp("fuzz")
    (folder / "access.log").write_text(
        "\n".join([*lines, line, *lines]) + "\n", "utf-8", "surrogatepass"
    )
    (folder / "events.jsonl").write_bytes(hostile.ORDINARY_EVENT_LOG.read_bytes())
    result = scan_and_render([folder])
    assert result is not None and ordinary_gap(result, hostile.LOG_SESSION)


EVENT_FIELDS = [
    "ts",
    "session",
    "stream",
    "event_id",
    "kind",
    "event",
    "request",
    "last_event_id",
    "other",
]


@FUZZ
@given(
    st.lists(
        st.dictionaries(st.sampled_from(EVENT_FIELDS), JSON_VALUE, max_size=5),
        min_size=1,
        max_size=5,
    )
)
def test_event_log_with_hostile_records(tmp_path_factory, records) -> None:
    """Records of the ordinary event log's kind with fields of any JSON type and value."""
    path = tmp_path_factory.mktemp("fuzz") / "events.jsonl"
    lines = [hostile.event_record(**record) for record in records]
    path.write_bytes(hostile.ORDINARY_EVENT_LOG.read_bytes() + b"\n".join(lines) + b"\n")
    result = scan_and_render([path])
    assert result is not None and ordinary_gap(result, hostile.LOG_SESSION)


MAP_VALUE = st.one_of(
    HOSTILE_TEXT,
    st.sampled_from(["ts", "sid", "a.0", "a." + "9" * 5000, "..", "request.headers.X.99999"]),
    st.lists(HOSTILE_TEXT, max_size=2),
    st.fixed_dictionaries(
        {"path": st.sampled_from(["ts", "event_id", "x"])},
        optional={
            "scale": st.floats(allow_nan=True, allow_infinity=True)
            | st.sampled_from([1e300, 0, -1]),
            "values": st.dictionaries(st.text(max_size=4), st.text(max_size=4), max_size=2),
            "strip_port": st.booleans(),
        },
    ),
)


def _toml(value: object) -> str:
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{json.dumps(k)} = {_toml(v)}" for k, v in value.items()) + " }"
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return {"inf": "inf", "-inf": "-inf", "nan": "nan"}.get(repr(value), repr(value))
    if isinstance(value, int):
        return str(value)
    return json.dumps(value, ensure_ascii=True)


@FUZZ
@given(st.dictionaries(st.sampled_from(EVENT_FIELDS[:5]), MAP_VALUE, min_size=1, max_size=3))
def test_log_map_with_hostile_rules(tmp_path_factory, rules) -> None:
    """A map is either refused before the scan (``ValueError``, exit 2) or scanned."""
    folder = tmp_path_factory.mktemp("fuzz")
    log_map = folder / "map.toml"
    log_map.write_text("[events]\n" + "".join(f"{k} = {_toml(v)}\n" for k, v in rules.items()))
    try:
        load_log_map(str(log_map))
    except ValueError:
        return
    scan_and_render([hostile.ORDINARY_EVENT_LOG], log_map)


def test_the_fuzz_inputs_hold_the_ordinary_gap(tmp_path: Path) -> None:
    """The baseline the fuzz tests start from: without hostile values, the gap is found."""
    path = tmp_path / "ordinary.pcap"
    c.write_pcap(path, hostile.ordinary_gap(c.Incident.of(0, "ordinary-gap")))
    result = scan_and_render([path])
    assert result is not None and ordinary_gap(result, hostile.ORDINARY_SESSION)
    with pytest.raises(UnreadableInput):
        scan_paths([str(tmp_path / "missing.pcap")])
