"""Where each resume's Last-Event-ID sits in its observed order is found for every resume of a
partition in one query (facts.observed, issue 9): no resume asks its logical stream's
columns again unless its judgement compares the IDs themselves, and the query gives each
resume what reading its order alone gives."""

from __future__ import annotations

import cProfile
import pstats
from pathlib import Path

import pytest
from conftest import SAMPLES
from support.log_sets import write_log_set

from sse_forensics.facts import observed
from sse_forensics.facts.earlier import observed_ids
from sse_forensics.facts.model import StreamRecord
from sse_forensics.pipeline import LogOptions, scan_paths

ACCESS_FORMAT = (
    'nginx:$remote_addr - $remote_user [$time_local] "$request" $status $body_bytes_sent '
    '"$http_referer" "$http_user_agent" "$http_last_event_id" "$sent_http_mcp_session_id" '
    "$request_time"
)


def _calls_named(stats: pstats.Stats, name: str) -> int:
    table = stats.stats  # type: ignore[attr-defined]
    return sum(calls for (_file, _line, fn), (calls, *_rest) in table.items() if fn == name)


def test_resumes_ask_no_observed_order_one_by_one(tmp_path: Path) -> None:
    """Counter IDs: the successor, the replay's start and its duplicates come from the
    keys, and where Last-Event-ID sits in the order from the partition's one query. Reading
    each resume's order (two polars calls a resume) was most of the judging of a log set
    whose resumes have no events before them."""
    profile = cProfile.Profile()
    profile.enable()
    result = scan_paths(write_log_set(tmp_path, 40), logs=LogOptions(ACCESS_FORMAT))
    profile.disable()
    assert result.stats.resumes >= 10 and result.findings
    assert _calls_named(pstats.Stats(profile), "observed_ids") == 0


RESUMED = [
    "opaque-resume-jump.pcap",
    "replay-duplicate.pcap",
    "replay-from-oldest.pcap",
    "resume-storm.pcap",
    "backpressure-disconnect-resume.pcap",
    "logs/opaque-resume-jump",
    "logs/replay-crossed-streams",
]


@pytest.mark.parametrize("sample", RESUMED)
@pytest.mark.parametrize("slice_events", [None, 1, 3])
def test_each_resume_gets_what_its_order_alone_gives(
    sample: str, slice_events: int | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Also read a few events at a time: a logical stream's IDs then span slices, and the
    ID after Last-Event-ID is often the first of the next slice."""
    if slice_events is not None:
        monkeypatch.setattr(observed, "ORDER_SLICE", slice_events)
    asked = observed.ObservedOrders.of
    seen: list[tuple[tuple[int, int | None, str | None], tuple[int, int | None, str | None]]] = []

    def checked(self: observed.ObservedOrders, r: StreamRecord) -> observed.ResumeOrder:
        got = asked(self, r)
        order = observed_ids(r, self.index)
        last = order.last(r.last_event_id or "")
        following = order[last + 1] if last is not None and last + 1 < len(order) else None
        seen.append(((got.length, got.last, got.following), (len(order), last, following)))
        return got

    monkeypatch.setattr(observed.ObservedOrders, "of", checked)
    scan_paths([str(SAMPLES / sample)])
    assert seen, "the sample's resumes were judged"
    assert all(got == alone for got, alone in seen), seen
    # Some resume's Last-Event-ID was found in its order, with an ID after it.
    assert any(got[1] is not None for got, _ in seen) or sample == "resume-storm.pcap"
