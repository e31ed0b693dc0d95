"""Caps on the work one input may cost (sse_forensics.limits, docs/limits.md): each one
configurable with ``--limit NAME=VALUE``, and reported when it fires."""

from __future__ import annotations

import pytest

from sse_forensics.errors import ReadError
from sse_forensics.limits import (
    DEFAULT_LIMITS,
    LIMIT_NAMES,
    CapHit,
    MiB,
    cap_hits,
    fold_caps,
    parse_limits,
)


def test_limit_values_take_units_and_reject_nonsense() -> None:
    limits = parse_limits(["body_bytes=256MiB", "id-digits=40", "expansion_ratio=50"])
    assert limits.body_bytes == 256 * MiB
    assert limits.id_digits == 40
    assert limits.expansion_ratio == 50.0
    assert limits.event_bytes == DEFAULT_LIMITS.event_bytes  # the others keep their default
    assert parse_limits(["log_line_bytes=1k"]).log_line_bytes == 1024
    for bad in (
        "nope=1",
        "body_bytes",
        "body_bytes=-1",
        "body_bytes=0",
        "flows=1.5",
        "expansion_ratio=inf",
    ):
        with pytest.raises(ValueError):
            parse_limits([bad])


def test_every_cap_has_a_positive_default() -> None:
    assert all(getattr(DEFAULT_LIMITS, name) >= 1 for name in LIMIT_NAMES)


def test_hits_of_one_cap_in_one_source_fold_into_one() -> None:
    def hit(source: str, line: int) -> CapHit:
        return CapHit.of(
            "log_line_bytes", DEFAULT_LIMITS, source, "a line of 20 MiB", "skipped", line=line
        )

    plain = ReadError("a.log", "unreadable line", line=3)
    folded = fold_caps([hit("a.log", 7), plain, hit("a.log", 9), hit("b.log", 1)])
    assert folded[1] is plain
    caps = cap_hits(folded)
    assert [(c.source, c.line, c.count) for c in caps] == [("a.log", 7, 2), ("b.log", 1, 1)]
    assert "log_line_bytes cap of 16 MiB" in caps[0].what
    assert caps[0].as_dict()["cap"] == "log_line_bytes"
    assert caps[0].cap_dict()["count"] == 2
