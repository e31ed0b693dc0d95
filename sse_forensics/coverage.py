"""What a scan could not judge (docs/profile.md, "What counts as what": never call capture loss
server loss — and never call what could not be seen "all clear").

A finding says what went wrong in what the inputs show. This module says what they do not
show well enough to judge at all: no input, no HTTP, no event stream, event streams of
which the capture lacks bytes that no two readable event IDs bracket, or resumes whose
Last-Event-ID is neither an event ID seen nor a counter (the fact builder's ``unjudged``
column of the ``sessions`` table). ``scan`` exits with its own code when
something could not be judged and nothing at or above ``--fail-on`` was found
(docs/exit-codes.md).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import polars as pl

if TYPE_CHECKING:
    from sse_forensics.reassembly.loss import CaptureLoss
    from sse_forensics.result import ScanResult

# Connections listed one by one when nothing could be judged; the rest are counted.
MAX_CONNECTIONS_LISTED = 10


@dataclass(frozen=True, slots=True)
class Unjudged:
    """One thing the scan could not judge. ``scope``: ``input`` (the scan as a whole),
    ``connection`` or ``stream``; ``missing_bytes``: bytes the capture lacks there
    (``None`` when unknown or not about capture loss); where to look: ``source`` and its
    ``frame`` (a capture) or ``line`` (a log)."""

    scope: str
    what: str
    why: str
    session_id: str | None = None
    missing_bytes: int | None = None
    source: str | None = None
    frame: int | None = None
    line: int | None = None  # a log's line, where ``frame`` is a capture's

    def as_dict(self) -> dict[str, object]:
        return {
            "scope": self.scope,
            "what": self.what,
            "why": self.why,
            "session_id": self.session_id,
            "missing_bytes": self.missing_bytes,
            "source": self.source,
            "frame": self.frame,
            "line": self.line,
        }

    def sentence(self) -> str:
        """The item for a person: its session, what and why."""
        where = f"session {self.session_id}, " if self.session_id else ""
        return f"{where}{self.what}: {self.why}"


# The columns of :attr:`Coverage.streams`, in :meth:`Unjudged.as_dict`'s order.
_ITEM_COLUMNS = ("scope", "what", "why", "session_id", "missing_bytes", "source", "frame", "line")
# One ``unjudged`` entry of the ``sessions`` table (sse_forensics.facts.unjudged).
_ENTRY = pl.List(
    pl.Struct(
        {
            "stream": pl.String,
            "missing_bytes": pl.Int64,
            "why": pl.String,
            "whole": pl.Boolean,
            "source": pl.String,
            "frame": pl.Int64,
            "line": pl.Int64,
        }
    )
)


# Rows of the sessions table decoded at a time: the decoded items of one slice are the
# transient peak, whatever the number of sessions (issue 10: deciding the 2.45 GB log set's
# 509k items at once took the client from ~250 MB to its ~1 GB end peak).
SLICE_ROWS = 1 << 16


@dataclass(frozen=True, slots=True)
class UnjudgedTotals:
    """How many unjudged items a scan found, how many of them are streams not judged at
    all, whether any / every one is about bytes the capture lacks — kept where a scan keeps
    only the first ``listed`` items themselves (:func:`keep_listed`)."""

    count: int = 0
    whole: int = 0
    any_lost: bool = False
    all_lost: bool = True
    listed: int | None = None  # None: every item kept

    def __add__(self, other: UnjudgedTotals) -> UnjudgedTotals:
        return UnjudgedTotals(
            self.count + other.count,
            self.whole + other.whole,
            self.any_lost or other.any_lost,
            self.all_lost and other.all_lost,
            self.listed if self.listed is not None else other.listed,
        )


@dataclass(frozen=True, slots=True)
class StreamItems:
    """The unjudged event streams and resumes, one item each, kept as the ``session_id`` and
    ``unjudged`` (JSON text) columns of the sessions table they come from and decoded
    :data:`SLICE_ROWS` rows at a time wherever they are read; ``totals`` found in one such
    pass (:meth:`of_sessions`), or handed over by a scan that kept only the first
    ``totals.listed`` items. ``decoded``: rows already in :data:`_ITEM_COLUMNS`."""

    source: pl.DataFrame
    decoded: bool
    totals: UnjudgedTotals

    @property
    def count(self) -> int:
        return self.totals.count

    @property
    def whole(self) -> int:
        return self.totals.whole

    @classmethod
    def of_sessions(
        cls, sessions: pl.DataFrame, totals: UnjudgedTotals | None = None
    ) -> StreamItems:
        source = sessions.select("session_id", "unjudged")  # the table's columns, no copy
        return cls(source, False, totals if totals is not None else _totals(source))

    @classmethod
    def of_rows(cls, rows: pl.DataFrame) -> StreamItems:
        """Items already decoded (:data:`_ITEM_COLUMNS`)."""
        return cls(rows, True, _totals_of(rows))

    def batches(self, limit: int | None = None) -> Iterator[pl.DataFrame]:
        """The items in order, as frames of :data:`_ITEM_COLUMNS`: enough of them for the
        first ``limit`` items where given. Asking past the items a scan kept is a bug
        (``ValueError``): that scan was told how many its output lists."""
        listed = self.totals.listed
        if listed is not None and (limit is None or limit > listed):
            raise ValueError(f"the scan kept the first {listed} unjudged item(s) only")
        if self.decoded:
            yield self.source
            return
        for part in _decoded(self.source):
            yield part.drop("whole")


def _totals(source: pl.DataFrame) -> UnjudgedTotals:
    """The totals of the entries of ``source`` (``session_id``, ``unjudged``)."""
    totals = UnjudgedTotals()
    for part in _decoded(source):
        totals += _totals_of(part)
    return totals


def _totals_of(rows: pl.DataFrame) -> UnjudgedTotals:
    """The totals of decoded items ``rows`` (streams not judged at all: its ``whole``
    column, where it has one)."""
    lost = pl.col("missing_bytes").fill_null(0) != 0
    whole = pl.col("whole").fill_null(False).sum() if "whole" in rows.columns else pl.lit(0)
    n_whole, any_lost, all_lost = rows.select(
        whole.alias("whole"), lost.any(), lost.all().alias("all")
    ).row(0)
    return UnjudgedTotals(rows.height, int(n_whole), bool(any_lost), bool(all_lost))


def keep_listed(
    sessions: pl.DataFrame, first_seen: pl.DataFrame, listed: int
) -> tuple[pl.DataFrame, pl.DataFrame, UnjudgedTotals]:
    """The rows of ``sessions`` (one partition's) whose ``unjudged`` entries the scan may
    list — its first sessions in the scan's order, by first exchange (``first_seen``, row
    for row), then those without one by ID (``pipeline._session_order``), until they hold
    ``listed`` items — with their first exchanges, and the totals of all the entries: the
    scan's first ``listed`` items are among its partitions' first ``listed``, and the rest
    are counted, not held. Such an output counts the sessions and holds no other row
    (issue 10: 509k items, ~170 MB of JSON text, and ~75-100 bytes a session on the client
    at the end of a scan of the 2.45 GB log set, whose output lists 20)."""
    source = sessions.select("session_id", "unjudged")
    totals = dataclasses.replace(_totals(source), listed=listed)
    if totals.count <= listed:
        rows = source.get_column("unjudged").is_not_null().arg_true()
    else:
        items = pl.col("unjudged").str.json_decode(_ENTRY).list.len()
        rows = (
            pl.concat([source.select("session_id", items.alias("n")), first_seen], how="horizontal")
            .with_row_index("row")
            .filter(pl.col("n").is_not_null())
            .sort("conn_id", "index", "session_id", nulls_last=True)
            .filter(pl.col("n").cum_sum() - pl.col("n") < listed)
            .get_column("row")
            .sort()
        )
    kept = sessions.select(pl.all().gather(rows)), first_seen.select(pl.all().gather(rows))
    return *kept, totals


def _decoded(source: pl.DataFrame) -> Iterator[pl.DataFrame]:
    """``source``'s entries (``session_id``, ``unjudged``), one item a row, a slice of the
    table at a time (none for a slice without entries)."""
    for part in source.iter_slices(SLICE_ROWS):
        rows = (
            part.lazy()
            .filter(pl.col("unjudged").is_not_null())
            .select("session_id", pl.col("unjudged").str.json_decode(_ENTRY))
            .explode("unjudged")
            .unnest("unjudged")
            .select(
                pl.lit("stream").alias("scope"),
                pl.format("stream {}", "stream").alias("what"),
                *_ITEM_COLUMNS[2:],
                "whole",
            )
            .collect()
        )
        if rows.height:
            yield rows


@dataclass(slots=True)
class Coverage:
    """``nothing_judged``: the inputs held no event stream or resume the rules could judge;
    what could not be judged and why (nothing when everything could): ``head``, the few
    items about the inputs and connections, then ``streams``, one item per event stream or
    resume, kept as the sessions table's columns (the --big log set has 254,615 of them, a
    cluster scan's 2.45 GB set 509k: built as objects only where a renderer reads them,
    decoded a slice at a time — issue 10's client peak)."""

    nothing_judged: bool
    head: list[Unjudged] = field(default_factory=list)
    streams: StreamItems | None = None

    @property
    def count(self) -> int:
        return len(self.head) + (self.streams.count if self.streams is not None else 0)

    @property
    def complete(self) -> bool:
        return not self.nothing_judged and not self.count

    def items(self, limit: int | None = None) -> Iterator[Unjudged]:
        """The items in order, the first ``limit`` of them where given."""
        yield from self.head[:limit]
        left = None if limit is None else limit - len(self.head)
        if self.streams is None or (left is not None and left <= 0):
            return
        for rows in self.streams.batches(left):
            for row in rows.head(left).iter_rows() if left is not None else rows.iter_rows():
                yield Unjudged(*row)
            if left is not None:
                left -= rows.height
                if left <= 0:
                    return

    def missing_bytes(self) -> tuple[bool, bool]:
        """Whether any item, and whether every item, is about bytes missing from the
        capture (both ``False``, ``True`` when there is no item)."""
        any_, all_ = (
            any(u.missing_bytes for u in self.head),
            all(u.missing_bytes for u in self.head),
        )
        if self.streams is not None and self.streams.count:
            totals = self.streams.totals
            any_, all_ = any_ or totals.any_lost, all_ and totals.all_lost
        return any_, all_

    def as_dict(self) -> dict[str, object]:
        items = [u.as_dict() for u in self.head]
        if self.streams is not None:
            for rows in self.streams.batches():
                items += rows.to_dicts()
        return {"nothing_judged": self.nothing_judged, "items": items}


def _bytes(n: int) -> str:
    return f"{n} byte" if n == 1 else f"{n} bytes"


def _loss_reasons(loss: CaptureLoss) -> str:
    parts = [
        f"{name} {_bytes(n)}"
        for name, n in (
            ("snap length", loss.snaplen_bytes),
            ("ACKed but not captured", loss.acked_unseen),
            ("holes", loss.hole_bytes),
        )
        if n
    ]
    return ", ".join(parts)


def _capture_loss(result: ScanResult) -> Unjudged | None:
    loss = result.loss
    if not loss.missing_bytes:
        return None
    total = loss.bytes_seen + loss.missing_bytes
    why = (
        f"{loss.missing_bytes} of {_bytes(total)} ({loss.percent_lost:.0f}%) "
        f"exchanged on {loss.connections_with_loss} connection(s) are missing from the "
        f"capture ({_loss_reasons(loss)})"
    )
    return Unjudged("input", "capture", why, missing_bytes=loss.missing_bytes)


def _connections(result: ScanResult) -> list[Unjudged]:
    """Connections that lost bytes to the capture, when no stream of theirs was judged."""
    out = []
    lossy = [c for c in result.connections if any(d.missing_bytes for d in c.loss.values())]
    for conn in lossy[:MAX_CONNECTIONS_LISTED]:
        missing = sum(d.missing_bytes for d in conn.loss.values())
        seen = sum(d.bytes_seen for d in conn.loss.values())
        what = (
            f"conn {conn.id} {conn.client[0]}:{conn.client[1]} -> {conn.server[0]}:{conn.server[1]}"
        )
        why = f"{_bytes(missing)} missing from the capture, {_bytes(seen)} seen"
        first = next(iter(conn.missing), None)
        origin = (first.after or first.before) if first is not None else None
        out.append(
            Unjudged(
                "connection",
                what,
                why,
                missing_bytes=missing,
                source=origin.source if origin else None,
                frame=origin.number if origin else None,
            )
        )
    # A scan keeps some connections without HTTP as counts only: the loss totals say how
    # many lost bytes.
    lossy_count = max(len(lossy), result.loss.connections_with_loss)
    if lossy_count > MAX_CONNECTIONS_LISTED:
        rest = lossy_count - MAX_CONNECTIONS_LISTED
        out.append(Unjudged("connection", f"{rest} more connection(s)", "bytes missing too"))
    return out


def _streams(result: ScanResult) -> StreamItems | None:
    """Event streams the capture lacks bytes of that no two readable IDs bracket, and
    resumes that could not be placed: the sessions table's ``unjudged`` entries."""
    sessions = result.tables.get("sessions")
    if sessions is None or "unjudged" not in sessions.columns:
        return None
    return StreamItems.of_sessions(sessions, result.unjudged)


def coverage(result: ScanResult) -> Coverage:
    """What ``result`` could not judge, and whether it could judge anything at all: found
    once per result, then shared by its renderers and the exit code (the --big log set's
    254,615 unjudged streams are 254,615 items)."""
    if result.coverage is None:
        result.coverage = _coverage(result)
    return result.coverage


def _coverage(result: ScanResult) -> Coverage:
    stats = result.stats
    streams = _streams(result)
    judged = stats.streams - (streams.whole if streams is not None else 0) + stats.resumes
    if judged > 0:
        return Coverage(False, streams=streams)
    items: list[Unjudged] = []
    if not result.inputs:
        items.append(
            Unjudged("input", "inputs", "no capture or log file was found in the given paths")
        )
    elif stats.http_exchanges == 0:
        if stats.frames:
            why = (
                f"no HTTP/1.1 exchange could be read from {result.stats.tcp_connections} TCP "
                f"connection(s) in {stats.frames} frame(s)"
            )
        else:
            why = "the inputs hold no TCP packet and no log line describing an HTTP exchange"
        items.append(Unjudged("input", "HTTP", why))
    elif stats.streams == 0:
        items.append(
            Unjudged(
                "input",
                "SSE",
                f"{stats.http_exchanges} HTTP exchange(s), none of them a text/event-stream "
                "response or a resume (an access log alone shows requests, not events)",
            )
        )
    loss = _capture_loss(result)
    if loss is not None:
        items.append(loss)
    if streams is None or not streams.count:
        items.extend(_connections(result))
    return Coverage(True, items, streams)


def summary(cov: Coverage) -> str:
    """One sentence for the terminal: what could not be judged."""
    if cov.nothing_judged:
        return "Could not judge anything: no event stream or resume could be read."
    n = cov.count
    if cov.missing_bytes()[1]:
        return f"Could not judge all of {n} event stream(s): the capture lacks bytes of them."
    return f"Could not judge all of {n} event stream(s) or resume(s):"
