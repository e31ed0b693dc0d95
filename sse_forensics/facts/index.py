"""Look-ups over one partition's streams, built once: by logical stream (a stream and the
resumes that continue it) and by session, each in time order. Every judgement that looks at
"the other streams" looks only at these, so a partition's cost grows with its streams, not
with their square (issue: "a loop over all rows inside a loop over rows is a bug")."""

from __future__ import annotations

from bisect import bisect_left
from collections import defaultdict

from sse_forensics.facts.model import StreamRecord


class StreamIndex:
    """``streams`` in time order, after resumes were linked (``logical`` is final)."""

    def __init__(self, streams: list[StreamRecord]) -> None:
        self.streams = streams
        self._rank = {s: n for n, s in enumerate(streams)}
        self._logical: dict[StreamRecord, list[StreamRecord]] = defaultdict(list)  # by root
        self._session: dict[str, list[StreamRecord]] = defaultdict(list)
        for s in streams:
            self._logical[s.logical].append(s)
            self._session[s.session.session_id].append(s)
        # The ranks of each group, by root (logical streams) or session ID (sessions).
        self._ranks: dict[StreamRecord | str, list[int]] = {}
        for table in (self._logical, self._session):
            for key, group in table.items():
                self._ranks[key] = [self._rank[s] for s in group]

    def rank(self, s: StreamRecord) -> int:
        return self._rank[s]

    def logical(self, s: StreamRecord) -> list[StreamRecord]:
        """Every stream of ``s``'s logical stream (``s`` included), in time order."""
        return self._logical[s.logical]

    def of_root(self, root: StreamRecord) -> list[StreamRecord]:
        return self._logical[root]

    def of_session(self, session_id: str) -> list[StreamRecord]:
        return self._session.get(session_id, [])

    def session(self, s: StreamRecord) -> list[StreamRecord]:
        return self._session[s.session.session_id]

    def _split(self, group: list[StreamRecord], key: StreamRecord | str, s: StreamRecord) -> int:
        return bisect_left(self._ranks[key], self._rank[s])

    def logical_before(self, s: StreamRecord) -> list[StreamRecord]:
        """The streams of ``s``'s logical stream that come before ``s``."""
        group = self.logical(s)
        return group[: self._split(group, s.logical, s)]

    def root_before(self, root: StreamRecord, s: StreamRecord) -> list[StreamRecord]:
        """The streams of logical stream ``root`` that come before ``s``."""
        group = self._logical.get(root, [])
        return group[: bisect_left(self._ranks.get(root, []), self._rank[s])]

    def session_before(self, s: StreamRecord) -> list[StreamRecord]:
        group = self.session(s)
        return group[: self._split(group, s.session.session_id, s)]

    def session_after(self, s: StreamRecord) -> list[StreamRecord]:
        group = self.session(s)
        return group[self._split(group, s.session.session_id, s) + 1 :]
