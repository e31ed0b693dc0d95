"""TLS and HTTP/2 captures (samples/tls/, made by samples/make_tls_samples.py with hypercorn,
httpx ``http2=True`` and tcpdump) go through the same SSE pipeline as plaintext HTTP/1.1:

- every sample gives the findings it was built to produce, the same as its plaintext
  HTTP/1.1 twin (the same scenario, the same server knobs) — TLS 1.3 and 1.2, AES-GCM,
  ChaCha20-Poly1305 and AES-CBC, HTTP/2 after ALPN, h2c, and keys from a pcapng Decryption
  Secrets Block;
- tshark decrypting with the same key log counts the same HTTP requests and responses;
- what cannot be decrypted (no key log, a key log for other sessions, a wrong key, a corrupt
  record, bytes lost from the capture) is an error value per connection, and the gaps it
  touches are indeterminate, never silent corruption; no traceback.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections import Counter
from pathlib import Path

import dpkt
import pytest
from conftest import SAMPLES
from support import sample_scans

from sse_forensics.facts.config import AnalysisConfig
from sse_forensics.ingest.inputs import merged_frames
from sse_forensics.ingest.keylog import read_keylogs
from sse_forensics.pipeline import scan_paths
from sse_forensics.reassembly.capture import reassemble
from sse_forensics.reassembly.fast.http import R_TUNNEL
from sse_forensics.reassembly.fast.tls import R_TLS_EARLY, R_TLS_UNREAD
from sse_forensics.reassembly.tls import TLSKeys

TLS_SAMPLES = SAMPLES / "tls"
EXPECTED = sorted(TLS_SAMPLES.glob("*.expected.json"))
# The scenarios of a plaintext HTTP/1.1 sample (all but the 0-RTT one).
TWINNED = [p for p in EXPECTED if json.loads(p.read_text())["twin"]]
EARLY_DATA = TLS_SAMPLES / "nginx-tls13-early-data.pcap"


def _capture(expected: Path) -> Path:
    stem = expected.name.removesuffix(".expected.json")
    for ext in (".pcap", ".pcapng"):
        path = TLS_SAMPLES / f"{stem}{ext}"
        if path.exists():
            return path
    raise FileNotFoundError(stem)


def _keys(capture: Path) -> tuple[str, ...]:
    keys = capture.with_suffix(".keys")
    return (str(keys),) if keys.exists() else ()


def _got(findings) -> Counter:
    return Counter((f.rule, f.classification, f.gap["first"], f.gap["last"]) for f in findings)


def _want(doc: dict) -> Counter:
    return Counter(
        (f["rule"], f["classification"], f["gap"]["first"], f["gap"]["last"])
        for f in doc["findings"]
    )


def test_tls_samples_cover_the_matrix() -> None:
    docs = [json.loads(p.read_text()) for p in EXPECTED]
    assert {d["tls"] for d in docs} == {"1.2", "1.3", None}
    assert {d["http2"] for d in docs} == {True, False, "upgrade"}
    assert any(_capture(p).suffix == ".pcapng" and not _keys(_capture(p)) for p in EXPECTED)
    assert {"clean-resume-int.pcap", "resume-jump-unsignalled.pcap"} <= {d["twin"] for d in docs}
    # nginx in front of uvicorn, TLS 1.2 and 1.3, a clean resume and a silent jump each
    nginx = {(d["tls"], bool(d["findings"])) for d in docs if "nginx in front" in d["made_by"]}
    assert nginx == {("1.2", True), ("1.2", False), ("1.3", True), ("1.3", False)}


@pytest.mark.parametrize("expected", TWINNED, ids=[p.name.split(".")[0] for p in TWINNED])
def test_same_findings_as_the_plaintext_twin(expected: Path) -> None:
    doc = json.loads(expected.read_text())
    capture = _capture(expected)
    result = scan_paths([str(capture)], AnalysisConfig(tls_keylog=_keys(capture)))
    assert result.errors == []
    assert _got(result.findings) == _want(doc)
    twin = sample_scans.scan([SAMPLES / doc["twin"]])  # test_samples.py scans it too
    assert _got(result.findings) == _got(twin.findings)
    assert result.stats.http_exchanges == twin.stats.http_exchanges
    assert result.stats.events == twin.stats.events
    # Findings cite the frames of this capture (the TLS records that carried the events).
    for f in result.findings:
        frames = [e for e in f.evidence if e.get("frame")]
        assert frames and all(e["source"] == str(capture) for e in frames)
    want_app = "h2" if doc["http2"] else "http/1.1"
    if doc["http2"] == "upgrade":  # HTTP/1.1 connections, and the one upgraded to h2c
        apps = [c.application for c in result.connections]
        assert apps.count("h2") == 1 and set(apps) == {"http/1.1", "h2"}
        (upgraded,) = [ex for ex in _exchanges(capture) if ex.interim]
        assert [h.status for h in upgraded.interim] == [101] and upgraded.response.status == 200
        assert upgraded.response.version == "HTTP/2" and upgraded.request.version == "HTTP/1.1"
        assert upgraded.is_event_stream and upgraded.response_complete
        return
    for conn in result.connections:
        if doc["tls"] is None:
            assert conn.tls is None
        else:
            assert conn.tls.version == f"TLS {doc['tls']}" and conn.tls.key_found
            assert conn.tls.alpn == want_app and conn.tls.undecryptable_bytes == 0


def _exchanges(capture: Path):
    keylog, errors = read_keylogs(_keys(capture))
    assert errors == []
    frames = merged_frames([str(capture)])
    return reassemble(frames, frames.stats, tls_keys=TLSKeys(keylog, frames.stats)).exchanges


def _tshark_columns(capture: Path, wanted: list[tuple[str, str]], *options: str) -> list[list[str]]:
    """For each (display filter, field): the field's values in the frames the filter
    matches, read in one tshark run (a field is only present in the frames its filter
    matches, so one run over the union reads what one run per filter would)."""
    display = " || ".join(f"({d})" for d, _ in wanted)
    command = ["tshark", "-r", str(capture), *options, "-Y", display, "-T", "fields"]
    for _, field in wanted:
        command += ["-e", field]
    command += ["-E", "occurrence=a"]
    keys = _keys(capture)
    if keys:
        command += ["-o", f"tls.keylog_file:{keys[0]}"]
    out = subprocess.run(command, capture_output=True, text=True, timeout=60, check=True).stdout
    rows = [line.split("\t") for line in out.splitlines()]
    return [
        [v for row in rows if n < len(row) for v in row[n].split(",") if v]
        for n in range(len(wanted))
    ]


def _tshark_fields(capture: Path, display: str, field: str, *options: str) -> list[str]:
    (values,) = _tshark_columns(capture, [(display, field)], *options)
    return values


@pytest.mark.skipif(shutil.which("tshark") is None, reason="tshark not installed")
@pytest.mark.parametrize("expected", TWINNED, ids=[p.name.split(".")[0] for p in TWINNED])
def test_tshark_counts_the_same_requests_and_responses(expected: Path) -> None:
    doc = json.loads(expected.read_text())
    capture = _capture(expected)
    exchanges = _exchanges(capture)
    requests = sum(ex.request is not None for ex in exchanges)
    if doc["http2"] == "upgrade":
        # HTTP/1.1 requests (the upgraded one too); HTTP/1.1 responses tshark completed
        # (the 101, not the dropped stream) and the upgraded request's answer on stream 1.
        methods, statuses, h2_statuses = _tshark_columns(
            capture,
            [
                ("http.request", "http.request.method"),
                ("http.response", "http.response.code"),
                ("http2.headers.status", "http2.headers.status"),
            ],
        )
        statuses += h2_statuses
        responses = sum(len(ex.interim) for ex in exchanges)
        responses += sum(ex.response is not None and ex.response_complete for ex in exchanges)
    elif doc["http2"]:
        # tshark: one :method per request HEADERS, one :status per response HEADERS.
        decode = [] if doc["tls"] else ["-d", f"tcp.port=={doc['port']},http2"]
        methods, statuses = _tshark_columns(
            capture,
            [
                ("http2.headers.method", "http2.headers.method"),
                ("http2.headers.status", "http2.headers.status"),
            ],
            *decode,
        )
        responses = sum(ex.response is not None for ex in exchanges)
    else:
        # tshark dissects an HTTP/1.1 response once its body is complete: the stream the
        # client dropped has no http.response there.
        methods, statuses = _tshark_columns(
            capture,
            [("http.request", "http.request.method"), ("http.response", "http.response.code")],
        )
        responses = sum(ex.response is not None and ex.response_complete for ex in exchanges)
    assert requests == len(methods) > 0
    assert responses == len(statuses) > 0


# -- what cannot be decrypted ---------------------------------------------------------------

JUMP = TLS_SAMPLES / "h2-tls13-resume-jump.pcap"
CLEAN = TLS_SAMPLES / "h2-tls13-clean-resume.pcap"


def test_no_key_log_is_one_error_per_connection() -> None:
    result = scan_paths([str(JUMP)])
    (error,) = result.errors
    assert "is TLS-encrypted and was not decrypted" in error.what
    assert "--tls-keylog" in error.what and error.frame is not None
    assert result.findings == [] and result.stats.http_exchanges == 0
    (conn,) = result.connections
    assert conn.tls.version == "TLS 1.3" and not conn.tls.key_found


def test_key_log_of_other_sessions(tmp_path: Path) -> None:
    result = scan_paths([str(JUMP)], AnalysisConfig(tls_keylog=(str(CLEAN.with_suffix(".keys")),)))
    (error,) = result.errors
    assert "no key for this session in the key log" in error.what
    assert result.findings == []


def test_wrong_key_is_reported_not_decrypted(tmp_path: Path) -> None:
    keys = tmp_path / "wrong.keys"
    lines = []
    for line in JUMP.with_suffix(".keys").read_text().splitlines():
        if line.startswith("SERVER_TRAFFIC_SECRET_0"):
            label, random, secret = line.split()
            secret = ("0" if secret[0] != "0" else "1") + secret[1:]
            line = f"{label} {random} {secret}"
        lines.append(line)
    keys.write_text("\n".join(lines) + "\n")
    result = scan_paths([str(JUMP)], AnalysisConfig(tls_keylog=(str(keys),)))
    (error,) = result.errors
    assert "could not be decrypted" in error.what and "did not authenticate" in error.what
    # The server's answers are unreadable: no event, so no finding is made up.
    assert result.findings == [] and result.stats.events == 0


def test_bad_and_truncated_key_log_lines(tmp_path: Path) -> None:
    good = JUMP.with_suffix(".keys").read_text()
    keys = tmp_path / "mixed.keys"
    keys.write_text(
        "not a key log line\n"
        "CLIENT_RANDOM zz 00\n"
        "UNKNOWN_LABEL "
        + "00" * 32
        + " "
        + "00" * 32
        + "\n"
        + good
        + "CLIENT_TRAFFIC_SECRET_0 "
        + "ab" * 32
        + " 12"  # cut mid-line, no newline
    )
    result = scan_paths([str(JUMP)], AnalysisConfig(tls_keylog=(str(keys),)))
    bad = [e for e in result.errors if e.source == str(keys)]
    assert [e.line for e in bad] == [1, 2, 3, len(good.splitlines()) + 4]
    assert all(e.source == str(keys) for e in result.errors)
    assert _got(result.findings) == _want(
        json.loads(JUMP.with_suffix(".expected.json").read_text())
    )


def _event_frame(capture: Path, event_id: str) -> int:
    result = scan_paths(
        [str(capture)], AnalysisConfig(tls_keylog=_keys(capture)), keep_records=True
    )
    events = result.facts.tables["events"]
    (frame,) = events.filter(events["id"] == event_id)["frame_first"].to_list()
    return frame


def _rewrite(src: Path, dst: Path, edit) -> None:
    with src.open("rb") as fh:
        reader = dpkt.pcap.Reader(fh)
        packets = list(reader)
        linktype = reader.datalink()
    with dst.open("wb") as out:
        writer = dpkt.pcap.Writer(out, linktype=linktype)
        for number, (ts, buf) in enumerate(packets, 1):
            buf = edit(number, buf)
            if buf is not None:
                writer.writepkt(buf, ts)


def test_capture_hole_in_tls_is_indeterminate(tmp_path: Path) -> None:
    """The frame carrying event 4 is missing: the record stream is found again after it
    (the next record authenticates under a later sequence number); the gap is capture
    loss, and the HPACK state the hole may have cut is reported, not guessed."""
    frame = _event_frame(CLEAN, "4")
    holed = tmp_path / "holed.pcap"
    _rewrite(CLEAN, holed, lambda n, buf: None if n == frame else buf)
    result = scan_paths([str(holed)], AnalysisConfig(tls_keylog=_keys(CLEAN)))
    assert {f.classification for f in result.findings} == {"indeterminate"}
    assert ("missing-stream-gap", "indeterminate", "4", "4") in _got(result.findings)
    hpack = [e for e in result.errors if "header block could not be decoded" in e.what]
    assert hpack and all("indeterminate" in e.what for e in hpack)
    # 0-3 and, after the hole, 5-7 were decrypted; the resume's replay (8-20) follows
    # response headers that refer to dynamic-table entries the hole may have cut.
    assert result.stats.events == 7


def test_corrupt_record_is_undecryptable_and_indeterminate(tmp_path: Path) -> None:
    frame = _event_frame(CLEAN, "4")
    corrupt = tmp_path / "corrupt.pcap"

    def flip(number: int, buf: bytes) -> bytes:
        if number != frame:
            return buf
        return buf[:-20] + bytes([buf[-20] ^ 0xFF]) + buf[-19:]  # inside the record

    _rewrite(CLEAN, corrupt, flip)
    result = scan_paths([str(corrupt)], AnalysisConfig(tls_keylog=_keys(CLEAN)))
    tls_errors = [e for e in result.errors if "could not be decrypted" in e.what]
    assert len(tls_errors) == 1 and "did not authenticate" in tls_errors[0].what
    assert tls_errors[0].frame == frame
    assert {f.classification for f in result.findings} == {"indeterminate"}
    assert ("missing-stream-gap", "indeterminate", "4", "4") in _got(result.findings)


def test_cli_tls_keylog(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from sse_forensics.cli import app

    runner = CliRunner()
    keys = str(JUMP.with_suffix(".keys"))
    out = runner.invoke(app, ["scan", str(JUMP), "--tls-keylog", keys, "-f", "json", "-q"])
    assert out.exit_code == 1, out.output  # silent corruption found
    doc = json.loads(out.stdout)
    assert doc["findings"] and "silent-resume-jump" in out.stdout
    missing = runner.invoke(app, ["scan", str(JUMP), "--tls-keylog", str(tmp_path / "nope")])
    assert missing.exit_code == 2
    for command in (["timeline", str(JUMP)], ["report", str(JUMP), "-o", str(tmp_path / "r.html")]):
        done = runner.invoke(app, [*command, "--tls-keylog", keys])
        assert done.exception is None or isinstance(done.exception, SystemExit), done.output


@pytest.mark.parametrize("expected", EXPECTED, ids=[p.name.split(".")[0] for p in EXPECTED])
def test_fast_path_equals_the_exact_path(expected: Path) -> None:
    """Rows, errors and connections (TLS record included) equal the exact path's, with the
    key log (or the pcapng's Decryption Secrets Block); TLS is decrypted on the fast path,
    HTTP/2 (h2c and h2 over TLS) read by its HTTP/2 route."""
    from support.fast_path import assert_equivalent

    doc = json.loads(expected.read_text())
    capture = _capture(expected)
    got = assert_equivalent([str(capture)], config=AnalysisConfig(tls_keylog=_keys(capture)))
    if doc["http2"] == "upgrade":  # the upgraded connection is read by the exact path
        assert got.fast == len(got.connections) - 1 and got.fallbacks == {R_TUNNEL: 1}
    elif capture == EARLY_DATA:  # the 0-RTT connection is read by the exact path
        assert got.fast == 1 and got.fallbacks == {R_TLS_EARLY: 1}
    else:
        assert got.fast == len(got.connections) > 0 and not got.fallbacks
        app = "h2" if doc["http2"] else "http/1.1"
        assert all(c.application == app for c in got.connections)
        assert all(c.tls.decrypted for c in got.connections if doc["tls"])


def _resegment(src: Path, dst: Path, size: int) -> None:
    """``src`` with every TCP payload cut into segments of ``size`` bytes (sequence numbers
    kept consistent): TLS records then span many frames."""
    with src.open("rb") as fh:
        reader = dpkt.pcap.Reader(fh)
        packets = list(reader)
        linktype = reader.datalink()
    assert linktype == dpkt.pcap.DLT_EN10MB
    with dst.open("wb") as out:
        writer = dpkt.pcap.Writer(out, linktype=linktype)
        for ts, buf in packets:
            eth = dpkt.ethernet.Ethernet(buf)
            ip, tcp = eth.data, eth.data.data
            payload = bytes(tcp.data)
            if len(payload) <= size:
                writer.writepkt(buf, ts)
                continue
            for at in range(0, len(payload), size):
                tcp.data = payload[at : at + size]
                tcp.seq = (tcp.seq + (at and size)) % (1 << 32)
                tcp.sum = ip.sum = 0
                ip.len = 0
                ip.data = tcp
                eth.data = ip
                writer.writepkt(bytes(eth), ts)


@pytest.mark.parametrize(
    "name",
    [
        "h1-tls13-resume-jump",
        "h1-tls12-cbc-resume-jump",
        "h2-tls13-resume-jump",
        "nginx-h2-tls12-aes256gcm-resume-jump",
    ],
)
def test_records_across_many_frames(tmp_path: Path, name: str) -> None:
    """Records cut over 97-byte segments: the decrypted route cites, for every plaintext
    byte, the frame of its ciphertext, as the exact path does, and HTTP/2 frames are read
    when the records holding their last byte are; findings unchanged."""
    from support.fast_path import assert_equivalent

    capture = TLS_SAMPLES / f"{name}.pcap"
    small = tmp_path / "small.pcap"
    _resegment(capture, small, 97)
    config = AnalysisConfig(tls_keylog=_keys(capture))
    got = assert_equivalent([str(small)], config=config)
    assert got.fast == len(got.connections)
    assert got.frames > sum(1 for _ in merged_frames([str(capture)])) + 20  # records cut
    doc = json.loads(capture.with_suffix(".expected.json").read_text())
    assert _got(scan_paths([str(small)], config).findings) == _want(doc)


def test_a_corrupt_record_sends_the_connection_to_the_exact_path(tmp_path: Path) -> None:
    from support.fast_path import assert_equivalent

    capture = TLS_SAMPLES / "h1-tls13-resume-jump.pcap"
    frame = _event_frame(capture, "4")
    corrupt = tmp_path / "corrupt.pcap"
    _rewrite(capture, corrupt, lambda n, b: b if n != frame else b[:-20] + b"\0" + b[-19:])
    config = AnalysisConfig(tls_keylog=_keys(capture))
    got = assert_equivalent([str(corrupt)], config=config)
    assert got.fallbacks == {R_TLS_UNREAD: 1} and got.fast == 1
    assert any("did not authenticate" in e.what for e in got.errors)


# -- TLS in the JSON output --------------------------------------------------------------------


@pytest.mark.parametrize("keys", [True, False], ids=["with-keys", "without"])
def test_json_names_each_tls_connection_and_whether_it_was_decrypted(keys: bool) -> None:
    from support.schemas import ecs_errors, schema_validator

    from sse_forensics.report.jsonout import findings_jsonl, scan_document

    capture = TLS_SAMPLES / "h1-tls12-cbc-resume-jump.pcap"
    result = scan_paths([str(capture)], AnalysisConfig(tls_keylog=_keys(capture) if keys else ()))
    doc = json.loads(scan_document(result))
    schema_validator("scan-document.schema.json").validate(doc)
    assert len(doc["tls"]) == len(result.connections) == 2  # the stream and the resume
    keylog = capture.with_suffix(".keys").read_text()
    for tls in doc["tls"]:
        assert tls["version"] == "TLS 1.2" and tls["application"] == "http/1.1"
        assert tls["cipher_suite"] == "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA"
        assert tls["alpn_offered"] and tls["source"] == str(capture)
        assert tls["client_random"] in keylog
        if keys:
            assert tls["key_found"] and tls["decrypted"] and tls["decrypted_bytes"] > 0
            assert tls["reasons"] == [] and tls["undecryptable_bytes"] == 0
        else:
            assert not tls["key_found"] and not tls["decrypted"] and not tls["decrypted_bytes"]
            assert "--tls-keylog" in tls["reasons"][0] and tls["undecryptable_bytes"] > 0
    if not keys:
        assert doc["findings"] == []
        return
    lines = [json.loads(line) for line in findings_jsonl(result).splitlines()]
    assert lines and lines == doc["findings"]
    for finding in lines:
        assert not ecs_errors(finding), ecs_errors(finding)
        assert finding["tls"] == {
            "version": "1.2",
            "version_protocol": "tls",
            "cipher": "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA",
            "next_protocol": "http/1.1",
        }
        assert finding["sse_forensics"]["tls"]["decrypted"] is True


def test_plaintext_findings_carry_no_tls() -> None:
    from sse_forensics.report.jsonout import scan_document

    doc = json.loads(scan_document(scan_paths([str(SAMPLES / "resume-jump-unsignalled.pcap")])))
    assert doc["tls"] == [] and doc["findings"]
    assert all("tls" not in f and "tls" not in f["sse_forensics"] for f in doc["findings"])


# -- 0-RTT -------------------------------------------------------------------------------------


def test_early_data_is_decrypted() -> None:
    """nginx (ssl_early_data on) and openssl s_client: a full handshake, then a resumption
    whose request travels as 0-RTT early data, which nginx accepts: read under the key
    log's CLIENT_EARLY_TRAFFIC_SECRET, the request is there, answered, nothing reported."""
    result = scan_paths([str(EARLY_DATA)], AnalysisConfig(tls_keylog=_keys(EARLY_DATA)))
    assert result.errors == []
    first, second = (c.tls for c in result.connections)
    assert first.decrypted and not first.early_data and first.server_name == "localhost"
    assert second.early_data and second.early_data_accepted and second.decrypted
    assert second.decrypted_bytes == first.decrypted_bytes  # the same request and answer
    for ex in _exchanges(EARLY_DATA):
        assert ex.request.target == "/early" and ex.response.status == 200


def test_early_data_without_its_secret_is_named(tmp_path: Path) -> None:
    keys = tmp_path / "no-early.keys"
    lines = _keys(EARLY_DATA)[0]
    kept = [ln for ln in Path(lines).read_text().splitlines() if "EARLY_TRAFFIC" not in ln]
    keys.write_text("\n".join(kept) + "\n")
    result = scan_paths([str(EARLY_DATA)], AnalysisConfig(tls_keylog=(str(keys),)))
    (error,) = result.errors
    assert "connection 2" in error.what and "0-RTT early data (TLS 1.3)" in error.what
    assert "no CLIENT_EARLY_TRAFFIC_SECRET" in error.what
    second = result.connections[1].tls
    assert second.key_found and not second.decrypted and second.early_data_accepted


@pytest.mark.skipif(shutil.which("tshark") is None, reason="tshark not installed")
def test_tshark_and_this_tool_read_the_early_request() -> None:
    methods = _tshark_fields(EARLY_DATA, "http.request", "http.request.method")
    ours = [ex.request.method for ex in _exchanges(EARLY_DATA) if ex.request is not None]
    assert methods == ours == ["GET", "GET"]
