"""Event-ID schemes (PROFILE.md, "Event IDs").

``int`` IDs are decimal integers; ``prefixed`` IDs are a stream/epoch prefix plus a counter
(matched by a regex with a named group ``seq``); ``opaque`` IDs allow no arithmetic, so
continuity is judged against the order in which IDs were observed.
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
    ids_by_stream: Iterable[list[str]],
    prefixed_pattern: str = DEFAULT_PREFIXED,
    forced: IdScheme | None = None,
) -> IdCodec:
    """Auto-detect the scheme from the IDs a session's streams carried (PROFILE.md: "chosen
    per session (auto-detected, overridable)")."""
    streams = [ids for ids in ids_by_stream if ids]
    all_ids = [i for ids in streams for i in ids]
    if forced == "opaque":
        return IdCodec("opaque")
    if forced == "int" or (forced is None and all_ids and all(INT_ID.match(i) for i in all_ids)):
        return IdCodec("int")
    if forced == "prefixed" or forced is None:
        for candidate in (prefixed_pattern, COUNTER_FIRST):
            pattern = re.compile(candidate)
            if forced == "prefixed" and candidate != prefixed_pattern:
                break
            if (
                all_ids
                and all(pattern.match(i) for i in all_ids)
                and _counter_moves(streams, pattern)
            ):
                return IdCodec("prefixed", pattern)
            if forced == "prefixed":
                return IdCodec("prefixed", pattern)
    return IdCodec("opaque")


def _counter_moves(streams: list[list[str]], pattern: re.Pattern[str]) -> bool:
    """A prefixed reading is plausible when, within a stream, the counter changes while the
    prefix mostly stays put (one epoch change per stream is tolerated)."""
    moved = False
    for ids in streams:
        matches = [pattern.match(i) for i in ids]
        prefixes = {m.groupdict().get("stream") for m in matches if m}
        seqs = [int(m.group("seq")) for m in matches if m]
        if len(prefixes) > max(2, len(ids) // 2):
            return False
        if len(set(seqs)) > 1:
            moved = True
    return moved or all(len(ids) <= 1 for ids in streams)
