"""Event-ID schemes (docs/profile.md, "Event IDs").

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
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Literal

from sse_forensics.limits import DEFAULT_LIMITS, CapHit, Limits

if TYPE_CHECKING:  # the CLI imports this module for its defaults: polars only when used
    import polars as pl

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
# A counter is a 64-bit integer wherever it is stored (fact columns are Int64).
INT64_MAX = (1 << 63) - 1


def counter(digits: str, max_digits: int = DEFAULT_LIMITS.id_digits) -> int | None:
    """The value of the decimal counter ``digits`` (an int ID, a prefixed ID's ``seq``), or
    ``None`` when it has more than ``max_digits`` significant digits (the ``id_digits``
    cap) or does not fit 64 bits: the ID is then opaque (issue 16: a number the tool cannot
    hold costs that ID its arithmetic, never the scan). ``int()`` never sees an unbounded
    string (Python refuses more than 4,300 digits)."""
    if len(digits.lstrip("0")) > max_digits:
        return None
    value = int(digits)
    return value if value <= INT64_MAX else None


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
    max_digits: int = DEFAULT_LIMITS.id_digits  # the id_digits cap (:func:`counter`)

    def __reduce__(self) -> tuple[type[IdCodec], tuple[IdScheme, re.Pattern[str] | None, int]]:
        """Pickled as its fields (``provenance.Origin.__reduce__``)."""
        return (IdCodec, (self.scheme, self.pattern, self.max_digits))

    def key(self, event_id: str) -> IdKey | None:
        """The arithmetic key of ``event_id``, or ``None`` if it does not fit the scheme
        (an over-long counter does not: :func:`counter`)."""
        if self.scheme == "int":
            if not INT_ID.match(event_id):
                return None
            seq = counter(event_id, self.max_digits)
            return None if seq is None else IdKey("", seq)
        if self.scheme == "prefixed" and self.pattern is not None:
            m = self.pattern.match(event_id)
            if m is None:
                return None
            seq = counter(m.group("seq"), self.max_digits)
            return None if seq is None else IdKey(m.groupdict().get("stream") or "", seq)
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
    max_digits: int = DEFAULT_LIMITS.id_digits,
) -> IdCodec:
    """The scheme of one logical stream from the IDs its responses carried (the original and
    its resumes), outliers tolerated (:func:`follows`; an over-long counter does not fit).
    The reference for the vectorised detection in
    :func:`sse_forensics.facts.front._stream_codecs`, which must agree with it."""
    responses = [ids for ids in ids_by_response if ids]
    all_ids = [i for ids in responses for i in ids]
    if forced == "opaque":
        return IdCodec("opaque")
    if forced == "int":
        return IdCodec("int", max_digits=max_digits)
    int_codec = IdCodec("int", max_digits=max_digits)
    if forced is None and follows(len(all_ids), sum(int_codec.key(i) is not None for i in all_ids)):
        return int_codec
    for candidate in (prefixed_pattern, COUNTER_FIRST):
        codec = IdCodec("prefixed", re.compile(candidate), max_digits)
        if forced == "prefixed":
            return codec
        fitting = sum(codec.key(i) is not None for i in all_ids)
        if follows(len(all_ids), fitting) and _counter_moves(responses, codec):
            return codec
    return IdCodec("opaque")


def _counter_moves(responses: list[list[str]], codec: IdCodec) -> bool:
    """A prefixed reading is plausible when, within a response, the counter changes while
    the prefix mostly stays put (one epoch change per response is tolerated). Judged on the
    IDs that fit the pattern."""
    moved = False
    for ids in responses:
        matches = [k for k in (codec.key(i) for i in ids) if k is not None]
        prefixes = {k.prefix for k in matches}
        seqs = [k.seq for k in matches]
        if len(prefixes) > max(2, len(matches) // 2):
            return False
        if len(set(seqs)) > 1:
            moved = True
    return moved or all(len(ids) <= 1 for ids in responses)


def _long_counter(value: str, patterns: list[re.Pattern[str]], max_digits: int) -> bool:
    """Does ``value`` read as an int ID, or a prefixed one under one of ``patterns``, whose
    counter :func:`counter` refuses (over ``max_digits``, or past 64 bits)?"""
    if INT_ID.match(value) and counter(value, max_digits) is None:
        return True
    for pattern in patterns:
        m = pattern.match(value)
        if (
            m is not None
            and "seq" in m.re.groupindex
            and counter(m.group("seq"), max_digits) is None
        ):
            return True
    return False


def over_long_counters(
    ids: pl.DataFrame, prefixed_regex: str, limits: Limits = DEFAULT_LIMITS
) -> list[CapHit]:
    """The ``id_digits`` cap hits among ``ids`` (columns ``value``, ``what`` — "event ID",
    "Last-Event-ID" —, ``src``, ``num``, ``ts``, ``kind``: the ID and the frame or log line
    that carried it; only IDs of at least ``id_digits`` characters need be given): one per
    source and kind of ID, at its first occurrence, ``count`` the rest. Such an ID is read
    as opaque (:func:`counter`); this says so, with where."""
    import polars as pl

    if not ids.height:
        return []
    patterns = [re.compile(prefixed_regex), re.compile(COUNTER_FIRST)]
    values = ids.get_column("value").unique().to_list()
    long = [v for v in values if _long_counter(v, patterns, limits.id_digits)]
    if not long:
        return []
    hits = (
        ids.filter(pl.col("value").is_in(long) & pl.col("src").is_not_null())
        .with_row_index("order")
        .group_by("src", "what")
        .agg(pl.all().sort_by("num").first(), pl.len().alias("count"))
        .sort("order")
    )
    out = []
    for row in hits.iter_rows(named=True):
        where = {"frame" if row["kind"] == "frame" else "line": row["num"], "ts": row["ts"]}
        hit = CapHit.of(
            "id_digits",
            limits,
            row["src"],
            f"{row['what']} of {len(row['value'])} characters whose counter has more "
            "digits than the cap allows or exceeds 64 bits",
            "read as an opaque ID: continuity around it is judged by observed order",
            **where,
        )
        out.append(replace(hit, count=row["count"]))
    return out
