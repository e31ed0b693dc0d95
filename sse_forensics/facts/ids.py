"""Event-ID schemes (PROFILE.md, "Event IDs").

``int`` IDs are decimal integers; ``prefixed`` IDs are a stream/epoch prefix plus a counter
(matched by a regex with a named group ``seq``); ``opaque`` IDs allow no arithmetic, so
continuity is judged against the order in which IDs were observed.

The scheme is chosen per logical stream (an original response and the resumes that continue
it), not per session: two streams of one session may number their events differently. A
few IDs that do not fit the scheme the rest of the stream follows (a priming event named
``prime``, one UUID among counters) are *outliers*: they are reported, they get no counter,
and continuity is judged on the IDs around them — they never make the stream opaque.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

IdScheme = Literal["int", "prefixed", "opaque"]

INT_ID = re.compile(r"^(?:0|[1-9]\d*)$")
DEFAULT_PREFIXED = r"^(?P<stream>.*?)[_:/-](?P<seq>\d+)$"
# Rust's SDK writes `<n>/<request>`: the counter comes first. Tried when the default
# pattern leaves the counter constant within a stream.
COUNTER_FIRST = r"^(?P<seq>\d+)[_:/-](?P<stream>.+)$"
# A stream follows an arithmetic scheme when at least two of its IDs fit it and at most one
# in OUTLIER_SHARE of them (or a single one) does not. Random opaque IDs that happen to be
# all digits are rarer than that by far, so an opaque stream is never read as a counter.
OUTLIER_SHARE = 4
MIN_FITTING = 2


def follows(ids: int, fitting: int) -> bool:
    """Do ``fitting`` of a stream's ``ids`` IDs make the stream follow a scheme, the rest
    being outliers? All of them always do (a stream of one ID included)."""
    if ids and fitting == ids:
        return True
    outliers = ids - fitting
    return fitting >= MIN_FITTING and outliers <= max(1, ids // OUTLIER_SHARE)


@dataclass(frozen=True, slots=True)
class IdKey:
    """An ID reduced to what arithmetic needs: the prefix (``""`` for int) and the counter."""

    prefix: str
    seq: int


@dataclass(frozen=True, slots=True)
class IdCodec:
    """How a session's IDs are read. ``pattern`` is set for ``prefixed``."""

    scheme: IdScheme
    pattern: re.Pattern[str] | None = None

    def key(self, event_id: str) -> IdKey | None:
        """The arithmetic key of ``event_id``, or ``None`` if it does not fit the scheme."""
        if self.scheme == "int":
            return IdKey("", int(event_id)) if INT_ID.match(event_id) else None
        if self.scheme == "prefixed" and self.pattern is not None:
            m = self.pattern.match(event_id)
            if m is None:
                return None
            return IdKey(m.groupdict().get("stream") or "", int(m.group("seq")))
        return None

    def render(self, key: IdKey, like: str) -> str:
        """Spell ``key`` the way ``like`` (an ID of the same stream) is spelled on the wire."""
        if self.scheme == "int":
            return str(key.seq)
        if self.pattern is not None:
            m = self.pattern.match(like)
            if m is not None:
                start, end = m.span("seq")
                return like[:start] + str(key.seq) + like[end:]
        return str(key.seq)

    @property
    def arithmetic(self) -> bool:
        return self.scheme != "opaque"


def detect_scheme(
    ids_by_response: Iterable[list[str]],
    prefixed_pattern: str = DEFAULT_PREFIXED,
    forced: IdScheme | None = None,
) -> IdCodec:
    """The scheme of one logical stream from the IDs its responses carried (the original and
    its resumes), outliers tolerated (:func:`follows`). The reference for the vectorised
    detection in :func:`sse_forensics.facts.front._schemes`, which must agree with it."""
    responses = [ids for ids in ids_by_response if ids]
    all_ids = [i for ids in responses for i in ids]
    if forced == "opaque":
        return IdCodec("opaque")
    if forced == "int":
        return IdCodec("int")
    if forced is None and follows(len(all_ids), sum(bool(INT_ID.match(i)) for i in all_ids)):
        return IdCodec("int")
    for candidate in (prefixed_pattern, COUNTER_FIRST):
        pattern = re.compile(candidate)
        if forced == "prefixed":
            return IdCodec("prefixed", pattern)
        fitting = sum(bool(pattern.match(i)) for i in all_ids)
        if follows(len(all_ids), fitting) and _counter_moves(responses, pattern):
            return IdCodec("prefixed", pattern)
    return IdCodec("opaque")


def _counter_moves(responses: list[list[str]], pattern: re.Pattern[str]) -> bool:
    """A prefixed reading is plausible when, within a response, the counter changes while
    the prefix mostly stays put (one epoch change per response is tolerated). Judged on the
    IDs that fit the pattern."""
    moved = False
    for ids in responses:
        matches = [m for m in (pattern.match(i) for i in ids) if m]
        prefixes = {m.groupdict().get("stream") for m in matches}
        seqs = [int(m.group("seq")) for m in matches]
        if len(prefixes) > max(2, len(matches) // 2):
            return False
        if len(set(seqs)) > 1:
            moved = True
    return moved or all(len(ids) <= 1 for ids in responses)
