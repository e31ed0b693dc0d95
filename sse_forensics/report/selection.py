"""What a user asked to see: ``--session`` (any unique prefix of a session ID),
``--since``/``--until`` (capture time) and ``--host``/``--port`` (either end of the
connection), shared by ``scan``, ``timeline`` and ``report``.

A selection filters what is shown, never what is judged: the whole input is still read and
every session judged on all of it, so a verdict cannot change because a filter cut its
evidence in two.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sse_forensics.engine.finding import Finding
    from sse_forensics.result import ScanResult

MAX_NAMED = 10  # session IDs listed when a prefix matches none or several


class SelectionError(ValueError):
    """A ``--session`` prefix that names no session or several (a usage error)."""


def parse_time(text: str) -> float:
    """Seconds since the epoch from ``text``: a number (``1796010152.99``) or an ISO 8601 /
    RFC 3339 time (``2026-11-30T03:42:41Z``, ``2026-11-30 03:42:41+01:00``); a time
    without offset is UTC, as capture timestamps are."""
    try:
        return float(text)
    except ValueError:
        pass
    try:
        when = datetime.fromisoformat(text.strip().replace("z", "Z"))
    except ValueError as exc:
        raise ValueError(
            f"{text!r} is not a time: give seconds since the epoch or an ISO 8601 time "
            "such as 2026-11-30T03:42:41Z"
        ) from exc
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return when.timestamp()


def resolve_session(prefix: str, sessions: Iterable[str]) -> str:
    """The one session ID that is ``prefix`` or starts with it. Raises
    :class:`SelectionError` naming the candidates when none or several do."""
    known = sorted(set(sessions))
    if prefix in known:
        return prefix
    matches = [s for s in known if s.startswith(prefix)]
    if len(matches) == 1:
        return matches[0]
    shown = ", ".join(matches[:MAX_NAMED] if matches else known[:MAX_NAMED])
    if matches:
        more = f" and {len(matches) - MAX_NAMED} more" if len(matches) > MAX_NAMED else ""
        raise SelectionError(
            f"--session {prefix!r} matches {len(matches)} sessions: {shown}{more}; "
            "give more of the ID"
        )
    listed = f"; sessions: {shown}" if known else "; the input holds no session"
    raise SelectionError(f"--session {prefix!r} matches no session{listed}")


@dataclass(frozen=True, slots=True)
class Selection:
    """``session`` is a whole session ID (:func:`resolve_session` makes it one)."""

    session: str | None = None
    since: float | None = None
    until: float | None = None
    host: str | None = None
    port: int | None = None

    @property
    def everything(self) -> bool:
        return self == Selection()

    def in_time(self, ts: float | None) -> bool:
        """``ts`` within ``--since``/``--until`` (no time given: always; unknown time:
        only when no time was given)."""
        if self.since is None and self.until is None:
            return True
        if ts is None:
            return False
        return (self.since is None or ts >= self.since) and (self.until is None or ts <= self.until)

    def on_endpoints(self, *endpoints: tuple[str | None, int | None]) -> bool:
        """One of ``endpoints`` (``(ip, port)``) has ``--host`` and one has ``--port``."""
        if self.host is not None and not any(ip == self.host for ip, _ in endpoints):
            return False
        return self.port is None or any(port == self.port for _, port in endpoints)

    def finding(self, f: Finding) -> bool:
        if self.session is not None and f.session_id != self.session:
            return False
        return self.in_time(f.ts) and self.on_endpoints(f.client, f.server)

    def apply(self, result: ScanResult) -> ScanResult:
        """``result`` with only the selected findings. What was scanned (inputs, sessions,
        statistics, input problems, what could not be judged) stays as it was."""
        if self.everything:
            return result
        return dataclasses.replace(result, findings=[f for f in result.findings if self.finding(f)])

    def describe(self) -> str:
        """The filters in words, for a summary line ("" when nothing is filtered)."""
        parts = []
        if self.session is not None:
            parts.append(f"session {self.session}")
        if self.since is not None or self.until is not None:
            since = _iso(self.since) if self.since is not None else "start"
            until = _iso(self.until) if self.until is not None else "end"
            parts.append(f"{since} to {until}")
        if self.host is not None:
            parts.append(f"host {self.host}")
        if self.port is not None:
            parts.append(f"port {self.port}")
        return ", ".join(parts)


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
