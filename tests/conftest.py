"""Shared fixtures. ``shared_captures``: the third-party captures beside the repo."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import settings

# Property tests judge behaviour, not speed: a loaded CI machine must not fail them on
# Hypothesis' per-example deadline (speed is measured in benchmarks/).
# HYPOTHESIS_PROFILE=deep draws more examples: where a test draws its count from
# support.budget.examples, its deep count; elsewhere the default count of 1,000.
settings.register_profile("sse-forensics", deadline=None)
settings.register_profile("deep", deadline=None, max_examples=1000)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "sse-forensics"))

SHARED_CAPTURES = Path(__file__).resolve().parents[2] / "shared" / "captures"


@pytest.fixture
def shared_captures() -> Path:
    """/work/shared/captures (see its README.md); the test is skipped when it is absent."""
    if not SHARED_CAPTURES.is_dir():
        pytest.skip(f"shared captures not found at {SHARED_CAPTURES}")
    return SHARED_CAPTURES


SAMPLES = Path(__file__).resolve().parents[1] / "samples"


def sample_captures() -> list[Path]:
    """Every bundled sample capture that has an ``.expected.json`` beside it."""
    return sorted(
        p
        for p in SAMPLES.iterdir()
        if p.suffix in (".pcap", ".pcapng") and p.with_suffix(".expected.json").exists()
    )


@pytest.fixture(scope="session", autouse=True)
def _shared_sample_scans(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> None:
    """support.sample_scans keeps its scans where every xdist worker of this run finds
    them: the run's temporary directory, above each worker's own."""
    from support import sample_scans

    base = tmp_path_factory.getbasetemp()
    sample_scans.share_under(base if worker_id == "master" else base.parent)
