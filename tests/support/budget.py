"""How many examples a property test draws: a per-commit number, or a deeper one when
``HYPOTHESIS_PROFILE=deep`` (the profile tests/conftest.py loads from that variable).

Only for properties whose examples are redundant at the per-commit count (random inputs
from a small alphabet, drawn afresh each run, so the runs add up); a derandomized fuzzer
keeps its own count."""

from __future__ import annotations

import os

DEEP = os.environ.get("HYPOTHESIS_PROFILE") == "deep"


def examples(per_commit: int, deep: int) -> int:
    """``deep`` under ``HYPOTHESIS_PROFILE=deep``, else ``per_commit``."""
    return deep if DEEP else per_commit
