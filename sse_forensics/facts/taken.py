"""Counter values other streams took (docs/profile.md, "Event IDs": with a shared counter a
value is missing only if it appears on no stream of the capture).

One index per counter group (a session or a server), shared by its streams: each stream
asks for the values in a range that *other* streams carried. Sorted per prefix and queried
with bisect, so a capture with thousands of streams on one shared counter stays linear.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections import defaultdict
from collections.abc import Container, Iterable
from typing import SupportsInt

from sse_forensics.facts.ids import IdKey


class CounterGroup:
    """Every value the streams of one counter group carried, sorted per prefix."""

    def __init__(self, keys: Iterable[IdKey]) -> None:
        by_prefix: dict[str, set[int]] = defaultdict(set)
        for k in keys:
            by_prefix[k.prefix].add(k.seq)
        self.sorted = {p: sorted(seqs) for p, seqs in by_prefix.items()}

    @classmethod
    def from_arrays(cls, prefixes: list[str], seqs: Iterable[SupportsInt]) -> CounterGroup:
        """From parallel columns (a prefix and a counter value per key)."""
        group = cls(())
        by_prefix: dict[str, set[int]] = defaultdict(set)
        for p, s in zip(prefixes, seqs, strict=True):
            by_prefix[p].add(int(s))
        group.sorted = {p: sorted(v) for p, v in by_prefix.items()}
        return group

    @classmethod
    def from_sets(cls, by_prefix: dict[str, set[int]]) -> CounterGroup:
        """From the counter values of each prefix."""
        group = cls(())
        group.sorted = {p: sorted(v) for p, v in by_prefix.items()}
        return group

    @classmethod
    def from_sorted(cls, by_prefix: dict[str, list[int]]) -> CounterGroup:
        """From the distinct counter values of each prefix, already sorted."""
        group = cls(())
        group.sorted = by_prefix
        return group

    def __contains__(self, key: object) -> bool:
        return isinstance(key, IdKey) and bool(self.between(key.prefix, key.seq, key.seq))

    def between(self, prefix: str, start: int, end: int) -> list[int]:
        seqs = self.sorted.get(prefix, [])
        return seqs[bisect_left(seqs, start) : bisect_right(seqs, end)]


class TakenKeys:
    """The values of a group that streams *other than* ``own`` (the keys a logical stream
    carried itself) carried (plus ``extra``)."""

    __slots__ = ("extra", "group", "own")

    def __init__(
        self,
        group: CounterGroup | None = None,
        own: Container[IdKey] = frozenset(),
        extra: frozenset[IdKey] = frozenset(),
    ) -> None:
        self.group = group
        self.own = own
        self.extra = extra

    def with_extra(self, keys: Iterable[IdKey]) -> TakenKeys:
        return TakenKeys(self.group, self.own, self.extra | frozenset(keys))

    def __contains__(self, key: IdKey) -> bool:
        if key in self.extra:
            return True
        if self.group is None or key in self.own:
            return False
        return bool(self.group.between(key.prefix, key.seq, key.seq))

    def between(self, prefix: str, start: int, end: int) -> list[int]:
        """Sorted taken values of ``prefix`` in ``[start, end]``."""
        found: set[int] = set()
        if self.group is not None:
            found.update(
                s
                for s in self.group.between(prefix, start, end)
                if IdKey(prefix, s) not in self.own
            )
        found.update(k.seq for k in self.extra if k.prefix == prefix and start <= k.seq <= end)
        return sorted(found)


NOTHING_TAKEN = TakenKeys()
NO_KEYS = CounterGroup(())
