"""Captures of the official MCP TypeScript SDK (samples/ts_sdk, made by
samples/ts_sdk_capture.py): a second real server, whose wire differs from the Python SDK's
(LF line endings, IDs ``<streamId>_<ms>_<random>`` from the SDK's example InMemoryEventStore,
no priming event on a resume). Clean by construction: the analyzer must reassemble every
data event the client read, link the resume to its stream and report nothing."""

from __future__ import annotations

import json
from functools import cache

import polars as pl
import pytest
from conftest import SAMPLES
from support import sample_scans

from sse_forensics.result import ScanResult

NAMES = ["ts-sdk-clean", "ts-sdk-resume"]
STEPS = 8  # samples/ts_sdk/server.js: progress notifications per tools/call
INTERRUPT_AT = 3  # samples/ts_sdk/client.js: the resume run drops the stream after progress 3


@cache
def scanned(name: str) -> ScanResult:
    return sample_scans.scan([SAMPLES / f"{name}.pcap"])


def expected(name: str) -> dict:
    return json.loads((SAMPLES / f"{name}.expected.json").read_text())


def call_events(name: str) -> pl.DataFrame:
    """The data events of the tools/call's logical stream (live part and replay), in wire order."""
    events = scanned(name).tables["events"]
    first_id = expected(name)["client_events"][0]["id"]
    (stream,) = events.filter(pl.col("id") == first_id)["stream"].to_list()
    return events.filter((pl.col("stream") == stream) & (pl.col("kind") == "data")).sort(
        "ts_first", "position"
    )


@pytest.mark.parametrize("name", NAMES)
def test_scans_with_exactly_the_expected_findings(name: str) -> None:
    result = scanned(name)
    got = [(f.rule, f.classification, f.gap["first"], f.gap["last"]) for f in result.findings]
    want = [
        (f["rule"], f["classification"], f["gap"]["first"], f["gap"]["last"])
        for f in expected(name)["findings"]
    ]
    assert got == want == []


@pytest.mark.parametrize("name", NAMES)
def test_every_event_the_client_read_is_reassembled_once_in_order(name: str) -> None:
    doc = expected(name)
    client = doc["client_events"]
    assert doc["client_saw"] == list(range(1, STEPS + 1))
    assert [e["progress"] for e in client[:-1]] == doc["client_saw"]
    events = call_events(name)
    # The same events, in the same order, each once: no replayed duplicate, nothing extra.
    assert events["id"].to_list() == [e["id"] for e in client]
    assert events["rpc_method"].to_list() == ["notifications/progress"] * STEPS + [None]
    assert events["rpc_id"].to_list()[-1] == str(client[-1]["result"])


@pytest.mark.parametrize("name", NAMES)
def test_id_scheme_is_opaque_and_posts_are_primed(name: str) -> None:
    result = scanned(name)
    assert result.tables["sessions"]["id_scheme"].to_list() == ["opaque"]
    streams = result.tables["streams"]
    events = result.tables["events"]
    # The SDK primes every POST stream (id + retry + empty data), the GET stream never.
    for row in streams.filter(pl.col("kind") == "post").iter_rows(named=True):
        first = events.filter(pl.col("response_stream") == row["response_stream"]).sort("position")
        assert first["kind"].to_list()[0] == "priming"
    assert events.filter(pl.col("kind") == "priming").height == 3  # initialize, call, list


def test_resume_is_linked_to_the_dropped_stream() -> None:
    doc = expected("ts-sdk-resume")
    client = doc["client_events"]
    result = scanned("ts-sdk-resume")
    (resume,) = result.tables["resumes"].iter_rows(named=True)
    assert resume["last_event_id"] == doc["resumed_with"] == client[INTERRUPT_AT - 1]["id"]
    assert resume["status"] == 200
    assert resume["first_event_id"] == client[INTERRUPT_AT]["id"]  # progress 4, replayed
    assert resume["data_events"] == len(client) - INTERRUPT_AT
    # The resume continues the POST stream that carried progress 1-3.
    (stream,) = result.tables["events"].filter(pl.col("id") == client[0]["id"])["stream"].to_list()
    assert resume["resumes_stream"] == stream
    replay = call_events("ts-sdk-resume").filter(pl.col("response_stream") != stream)
    assert replay["id"].to_list() == [e["id"] for e in client[INTERRUPT_AT:]]


def test_clean_run_has_no_resume() -> None:
    assert scanned("ts-sdk-clean").tables["resumes"].height == 0


@pytest.mark.parametrize("name", NAMES)
def test_capture_is_small(name: str) -> None:
    assert (SAMPLES / f"{name}.pcap").stat().st_size < 100_000
