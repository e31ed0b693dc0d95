"""Caps on the work one input may cost (issue 16: "no single record can abort a scan").

Evidence may come from a network under attack: one crafted request must not blind the scan,
and a pathological capture must not take the machine down. Every cap here has a default
that real traffic never reaches, can be changed (``--limit NAME=VALUE``, docs/limits.md),
and is reported when it fires: a :class:`CapHit` (an input problem that says which cap, its
value, where, what was cut and what that costs the verdicts) travels with the scan's
:class:`~sse_forensics.errors.ReadError` values and is listed under ``caps``.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, fields, replace

from sse_forensics.errors import ReadError

KiB = 1 << 10
MiB = 1 << 20
GiB = 1 << 30


@dataclass(frozen=True, slots=True)
class Limits:
    """Every cap of a scan, with its default. Sizes are bytes; counts are items."""

    # Decoded bytes of one response body (all content codings undone); beyond it decoding
    # stops and the rest of that stream is indeterminate.
    body_bytes: int = 64 * MiB
    # Decoded bytes per encoded byte of one body, once it has decoded past 1 MiB (a gzip
    # bomb reaches ~1000, brotli and zstd far more; JSON text rarely 50).
    expansion_ratio: float = 1000.0
    # Content codings stacked on one body (``gzip, gzip, gzip``); one is usual.
    coding_depth: int = 2
    # Bytes of one SSE event (its data lines joined).
    event_bytes: int = 16 * MiB
    # Digits of a numeric event ID, Last-Event-ID or prefixed counter read as a number; a
    # longer one (or one past 2**63 - 1: counters are 64-bit) is an opaque ID.
    id_digits: int = 19
    # TCP connections tracked at once (the oldest idle one is evicted, with a capture-loss
    # note, like Zeek's and Suricata's memcaps).
    flows: int = 100_000
    # Event streams (HTTP/2 streams included) open at once.
    streams: int = 100_000
    # Bytes of one log line (or one JSON event-log record); a longer one is skipped.
    log_line_bytes: int = 16 * MiB
    # Nesting of one JSON value in an event log or a field map.
    json_depth: int = 128
    # Decoded bytes of one compressed (gzip, zstd) log file.
    log_decoded_bytes: int = 64 * GiB
    # ID jumps of one response judged one by one (each a live gap with its evidence); the
    # jumps past them are counted. Real incidents show a handful per stream. Apart, the
    # same number of its stream-gap signals that no jump explains (each a gap of its own).
    gaps_per_stream: int = 1000


LIMIT_NAMES: tuple[str, ...] = tuple(f.name for f in fields(Limits))
DEFAULT_LIMITS = Limits()

_SIZE = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*([kmgt]i?b?|b)?\s*$", re.IGNORECASE)
_UNIT = {"": 1, "b": 1, "k": KiB, "m": MiB, "g": GiB, "t": 1 << 40}


def parse_value(name: str, text: str) -> int | float:
    """The value of cap ``name`` written as ``text``: a count, or a size with an optional
    binary unit (``64MiB``, ``16m``, ``1G``), or a ratio (``expansion_ratio``). Raises
    ``ValueError`` with a sentence a user can act on."""
    if name == "expansion_ratio":
        try:
            value = float(text)
        except ValueError:
            raise ValueError(f"{name}: {text!r} is not a number") from None
        if not math.isfinite(value) or value < 1:
            raise ValueError(f"{name}: must be a finite number of at least 1, not {text!r}")
        return value
    m = _SIZE.match(text)
    if m is None:
        raise ValueError(f"{name}: {text!r} is not a count or a size such as 64MiB")
    unit = (m.group(2) or "").lower()[:1]
    value = float(m.group(1)) * _UNIT[unit]
    if value < 1 or (not value.is_integer() and unit == ""):
        raise ValueError(f"{name}: must be a whole number of at least 1, not {text!r}")
    return int(value)


def parse_limits(assignments: list[str], base: Limits = DEFAULT_LIMITS) -> Limits:
    """``base`` with each ``NAME=VALUE`` of ``assignments`` applied (``-`` or ``_`` in NAME).
    Raises ``ValueError`` naming the bad assignment and the known caps."""
    changes: dict[str, int | float] = {}
    for item in assignments:
        name, sep, text = item.partition("=")
        name = name.strip().replace("-", "_")
        if not sep or name not in LIMIT_NAMES:
            known = ", ".join(LIMIT_NAMES)
            raise ValueError(f"--limit {item!r}: expected NAME=VALUE with NAME one of {known}")
        changes[name] = parse_value(name, text)
    # mypy checks replace()'s keywords against the fields' types and cannot see that each
    # name is a field whose value parse_value typed (int or float, as LIMIT_NAMES says).
    return replace(base, **changes)  # type: ignore[arg-type]


def describe(name: str, value: int | float) -> str:
    """``value`` of cap ``name`` as a person reads it (``64 MiB``, ``1000``)."""
    if name.endswith("_bytes") and isinstance(value, int):
        for unit, size in (("GiB", GiB), ("MiB", MiB), ("KiB", KiB)):
            if value >= size and value % size == 0:
                return f"{value // size} {unit}"
        return f"{value} bytes"
    return f"{value:g}" if isinstance(value, float) else str(value)


@dataclass(frozen=True, slots=True)
class CapHit(ReadError):
    """A cap fired: ``cap`` (a :class:`Limits` field) at ``limit``, in ``source`` at
    ``frame``/``line``; ``cut`` says what was not read, ``consequence`` what that costs the
    verdicts. ``count``: how often it fired in that source (:func:`fold_caps`). An input
    problem like any other (exit code 3); ``what`` is its one-line wording."""

    cap: str = ""
    limit: int | float = 0
    cut: str = ""
    consequence: str = ""
    count: int = 1

    @classmethod
    def of(
        cls,
        cap: str,
        limits: Limits,
        source: str,
        cut: str,
        consequence: str,
        *,
        frame: int | None = None,
        line: int | None = None,
        ts: float | None = None,
    ) -> CapHit:
        limit = getattr(limits, cap)
        what = f"{cut} (over the {cap} cap of {describe(cap, limit)}): {consequence}"
        return cls(source, what, frame, line, ts, cap, limit, cut, consequence)

    def as_dict(self) -> dict[str, object]:
        out = ReadError.as_dict(self)
        out["cap"] = self.cap
        return out

    def cap_dict(self) -> dict[str, object]:
        """The entry of the scan document's ``caps`` list."""
        out: dict[str, object] = {"cap": self.cap, "limit": self.limit, "source": self.source}
        if self.frame is not None:
            out["frame"] = self.frame
        if self.line is not None:
            out["line"] = self.line
        out["cut"] = self.cut
        out["consequence"] = self.consequence
        out["count"] = self.count
        return out


def fold_caps(errors: list[ReadError]) -> list[ReadError]:
    """``errors`` with the hits of one cap in one source folded into the first (its
    ``count`` the total): a cap that fires on every record is listed once per file."""
    first: dict[tuple[str, str], int] = {}
    out: list[ReadError] = []
    for err in errors:
        if not isinstance(err, CapHit):
            out.append(err)
            continue
        key = (err.cap, err.source)
        at = first.get(key)
        if at is None:
            first[key] = len(out)
            out.append(err)
        else:
            held = out[at]
            assert isinstance(held, CapHit)
            out[at] = replace(held, count=held.count + err.count)
    return out


def cap_hits(errors: list[ReadError]) -> list[CapHit]:
    """The caps that fired, among a scan's input problems."""
    return [e for e in errors if isinstance(e, CapHit)]
