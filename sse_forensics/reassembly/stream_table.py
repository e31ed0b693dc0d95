"""The event streams being parsed at once, bounded by the ``streams`` cap (issue 16,
docs/limits.md).

Every open ``text/event-stream`` response of the exact path holds an SSE parser (HTTP/2
streams of one connection included). Like the flow table (``flows``, Zeek's and Suricata's
memcaps), the table of those parsers has a size: when a new stream would exceed it, the
stream idle the longest (the one whose body moved last the longest ago) is evicted: its
parser is closed where it stands with a ``cap`` span from there on (a gap whose stretch
reaches past that point is ``indeterminate``), and the rest of its body is counted, not
parsed. Connections read on the columnar fast path hold no parser and are not counted.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Protocol

from sse_forensics.limits import CapHit, Limits
from sse_forensics.provenance import Origin


class StreamHolder(Protocol):
    """What holds an open stream (``capture._ConnectionAnalyzer``)."""

    def evict_stream(self, index: int, origin: Origin | None) -> None:
        """End the parsing of exchange ``index``'s event stream here (the cap fired)."""
        ...


class StreamTable:
    """The open event streams of one reassembly, the one idle the longest first.

    ``open`` when a response's head says ``text/event-stream``, ``touch`` on each piece of
    its body, ``close`` when its parser ends; ``evicted`` counts the streams the cap ended
    and ``first_eviction`` is the frame that made the first one go."""

    __slots__ = ("_open", "evicted", "first_eviction", "limit")

    def __init__(self, limit: int | None) -> None:
        self.limit = limit
        self._open: OrderedDict[tuple[int, int], StreamHolder] = OrderedDict()
        self.evicted = 0
        self.first_eviction: Origin | None = None

    def __len__(self) -> int:
        return len(self._open)

    def open(self, holder: StreamHolder, index: int, origin: Origin | None) -> None:
        """A new stream (``holder``'s exchange ``index``): room is made first."""
        if self.limit is not None:
            while len(self._open) >= self.limit:
                (_key, oldest_index), oldest = self._open.popitem(last=False)
                self.evicted += 1
                if self.first_eviction is None:
                    self.first_eviction = origin
                oldest.evict_stream(oldest_index, origin)
        self._open[(id(holder), index)] = holder

    def touch(self, holder: StreamHolder, index: int) -> None:
        key = (id(holder), index)
        if key in self._open:
            self._open.move_to_end(key)

    def close(self, holder: StreamHolder, index: int) -> None:
        self._open.pop((id(holder), index), None)


def streams_capped(table: StreamTable, limits: Limits, source: str = "") -> CapHit:
    """The ``streams`` cap fired: how often, where first, and what it cost."""
    first = table.first_eviction
    return CapHit.of(
        "streams",
        limits,
        first.source if first is not None else source,
        f"{table.evicted} open event stream(s) evicted from the table of streams being "
        "parsed, the one idle the longest first",
        "each was read up to where it stood: the rest of its body is not parsed, and a gap "
        "past that point on it is indeterminate",
        frame=first.number if first is not None else None,
        ts=first.ts if first is not None else None,
    )
