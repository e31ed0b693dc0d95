"""Shared fixtures. ``shared_captures``: the third-party captures beside the repo."""

from __future__ import annotations

from pathlib import Path

import pytest

SHARED_CAPTURES = Path(__file__).resolve().parents[2] / "shared" / "captures"


@pytest.fixture
def shared_captures() -> Path:
    """/work/shared/captures (see its README.md); the test is skipped when it is absent."""
    if not SHARED_CAPTURES.is_dir():
        pytest.skip(f"shared captures not found at {SHARED_CAPTURES}")
    return SHARED_CAPTURES
