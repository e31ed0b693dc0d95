"""A stream's live gaps judged from the events around its ID jumps (issue 16: a stream of a
million events with one jump held every one of them as a record, ~1.5 KB each, to judge
one pair). The columnar screen (:class:`.event_slices.Jumps`) gives each jump's two
positions, under the ``gaps_per_stream`` cap, and the positions of the stream's
``stream-gap`` events (and the counter values other signal events carry): only those events
are materialised, and the next data event past a jump is looked up in the ``kind`` column
when a signal covering the jump asks for it. What
:func:`.gaps.live_gaps` makes of them is what it makes of the whole stream.

A stream whose events are objects already (a resumed logical stream's: the replay
judgements walk them), or that has fewer than :data:`WINDOWED_EVENTS`, is read from all
of them."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator

import polars as pl

from sse_forensics.facts.gaps import LiveView, StreamGaps, full_view
from sse_forensics.facts.ids import IdKey
from sse_forensics.facts.model import EventRecord, StreamRecord
from sse_forensics.facts.signals import SignalPayload
from sse_forensics.limits import CapHit, Limits

Key = tuple[int, int]


def _grouped(
    frame: pl.DataFrame | None, columns: tuple[str, ...]
) -> dict[Key, list[tuple[int, ...]]]:
    """``columns`` of the rows of ``frame``, by stream (``conn_id, ex_index``), in order."""
    out: dict[Key, list[tuple[int, ...]]] = defaultdict(list)
    if frame is None:
        return out
    for conn, index, *values in frame.select("conn_id", "ex_index", *columns).iter_rows():
        out[(conn, index)].append(tuple(values))
    return out


# A stream of fewer events is read whole, in one gather with the other such streams of the
# partition (``facts.build``): a gather per stream costs ~0.5 ms, more than a few thousand
# events do as records.
WINDOWED_EVENTS = 1 << 12


def read_whole(stream: StreamRecord) -> bool:
    """``stream`` is judged on all its events: they are objects already, or few."""
    ex = stream.exchange
    return stream.events_built or ex.source is None or ex.n_events < WINDOWED_EVENTS


class JumpViews:
    """Per stream, its :class:`~.gaps.LiveView` from what the screen found (``pairs``:
    ``conn_id, ex_index, a_pos, b_pos``; ``signals``: ``conn_id, ex_index, position``)
    and its jumps past the cap (``past``: ``conn_id, ex_index, over, first``)."""

    def __init__(
        self, pairs: pl.DataFrame | None, signals: pl.DataFrame | None, past: pl.DataFrame | None
    ) -> None:
        self.pairs = _grouped(pairs, ("a_pos", "b_pos"))
        self.signals: dict[Key, pl.DataFrame] = {}
        if signals is not None and signals.height:
            self.signals = {
                (conn, index): part
                for (conn, index), part in signals.partition_by(
                    "conn_id", "ex_index", maintain_order=True, as_dict=True
                ).items()
            }
        self.past = _grouped(past, ("over", "first"))
        self.signals_over: dict[StreamRecord, tuple[int, EventRecord]] = {}

    def view(self, stream: StreamRecord) -> LiveView:
        key = (stream.exchange.connection_id, stream.exchange.index)
        pairs = self.pairs.get(key, [])
        source = stream.exchange.source
        if source is None or read_whole(stream):
            full, events = full_view(stream), stream.events
            return LiveView(
                [(events[a], events[b]) for a, b in pairs],
                full.signals,
                full.next_data,
                full.signal_keys,
            )
        signals = self.signals.get(key)
        at = events_at(stream, sorted({p for pair in pairs for p in pair}))
        jumps = [(at[a], at[b]) for a, b in pairs]
        view = LiveView(
            jumps,
            [],
            lambda position: source.next_of_kind(key, position, "data"),
            _inside(signals, jumps),
        )
        if signals is not None:
            gaps = signals.filter(pl.col("stream_gap")).get_column("position")
            if gaps.len():
                view.unread = _stream_gaps(stream, gaps)
        return view

    def signals_past_cap(self, stream: StreamRecord, view: LiveView) -> None:
        """Keep what :func:`.gaps.live_gaps` counted of ``stream``'s signals past the cap."""
        if view.first_over is not None:
            self.signals_over[stream] = (view.signals_over, view.first_over)

    def caps(self, streams: list[StreamRecord], limits: Limits) -> list[CapHit]:
        """A ``gaps_per_stream`` cap hit per stream that has jumps past the cap, and one
        per stream that has ``stream-gap`` signals no jump explains past it."""
        out = []
        for s in streams:
            for over, first in self.past.get((s.exchange.connection_id, s.exchange.index), []):
                out.append(_capped(s, over, events_at(s, [first])[first], limits))
            if s in self.signals_over:
                out.append(_signals_capped(s, *self.signals_over[s], limits))
        return out


def _stream_gaps(stream: StreamRecord, positions: pl.Series) -> StreamGaps:
    """The ``stream-gap`` events of ``stream`` at ``positions`` (rising), left in their
    columns: their payloads read :data:`PAYLOAD_SLICE` at a time, records built only for
    those :func:`.gaps.live_gaps` asks for."""
    ex, source = stream.exchange, stream.exchange.source
    assert source is not None  # a stream read from its columns has a source
    key = (ex.connection_id, ex.index)
    at = positions.cast(pl.Int64).to_numpy()

    def rows() -> Iterator[tuple[int, SignalPayload | None]]:
        for k in range(0, len(at), PAYLOAD_SLICE):
            part = at[k : k + PAYLOAD_SLICE]
            read = source.columns_at(key, part, ("sig_first", "sig_last", "sig_valid"))
            for position, (first, last, valid) in zip(part.tolist(), read.iter_rows(), strict=True):
                yield position, None if valid is None else SignalPayload(first, last, valid)

    def records(wanted: list[int]) -> list[EventRecord]:
        built = events_at(stream, wanted)
        return [built[p] for p in wanted]

    return StreamGaps(rows, records)


# Signal payloads read at a time by a StreamGaps' rows.
PAYLOAD_SLICE = 1 << 16


def _inside(
    signals: pl.DataFrame | None, jumps: list[tuple[EventRecord, EventRecord]]
) -> list[IdKey]:
    """The counter values of ``signals`` (``prefix, seq``) strictly inside one of the
    ``jumps`` (the only values :func:`.gaps.live_gaps` asks whether a signal took): found
    by an as-of join on the jumps' ranges, merged where they overlap, never a key per
    signal event of a flood."""
    if signals is None or not jumps:
        return []
    ranges: list[tuple[str, int, int]] = []
    for prefix, lo, hi in sorted(
        (a.counter.prefix, a.counter.seq, b.counter.seq) for a, b in jumps
    ):
        if ranges and ranges[-1][0] == prefix and lo < ranges[-1][2]:
            ranges[-1] = (prefix, ranges[-1][1], max(hi, ranges[-1][2]))
        else:
            ranges.append((prefix, lo, hi))
    keyed = (
        signals.filter(pl.col("seq").is_not_null())
        .select("prefix", pl.col("seq").cast(pl.Int64))
        .sort("seq")
    )
    bounds = pl.DataFrame(
        ranges, schema={"prefix": pl.String, "lo": pl.Int64, "hi": pl.Int64}, orient="row"
    ).sort("lo")
    inside = keyed.join_asof(
        bounds, left_on="seq", right_on="lo", by="prefix", check_sortedness=False
    ).filter((pl.col("seq") > pl.col("lo")) & (pl.col("seq") < pl.col("hi")))
    return [IdKey(prefix, seq) for prefix, seq in inside.select("prefix", "seq").iter_rows()]


def id_ends(stream: StreamRecord) -> tuple[EventRecord | None, EventRecord | None]:
    """The first and the last event of ``stream`` that carries an ID and is no signal
    (the same one when it has one; ``None, None`` when none): found in the columns of a
    long stream and only those two built as records (``facts.unjudged``, issue 16)."""
    ex, source = stream.exchange, stream.exchange.source
    if source is None or read_whole(stream):
        ids = [e for e in stream.events if e.carries_id and e.kind != "signal"]
        return (ids[0], ids[-1]) if ids else (None, None)
    first, last = source.id_ends((ex.connection_id, ex.index))
    if first is None or last is None:
        return None, None
    at = events_at(stream, sorted({first, last}))
    return at[first], at[last]


def last_data_with_id(stream: StreamRecord) -> EventRecord | None:
    """The last data event of ``stream`` that carries an ID (``None`` when none does):
    found in the columns of a long stream, only it built as a record (``facts.build``:
    when the client left the stream, issue 16)."""
    ex, source = stream.exchange, stream.exchange.source
    if source is None or read_whole(stream):
        return next((e for e in reversed(stream.events) if e.carries_id and e.kind == "data"), None)
    last = source.last_data_with_id((ex.connection_id, ex.index))
    return None if last is None else events_at(stream, [last])[last]


def events_at(stream: StreamRecord, positions: list[int]) -> dict[int, EventRecord]:
    """The records of ``stream``'s events at ``positions`` (rising), and of no other."""
    ex, source = stream.exchange, stream.exchange.source
    if source is None or read_whole(stream):
        events = stream.events
        return {p: events[p] for p in positions}
    read = source.events_at((ex.connection_id, ex.index), positions)
    return {p: stream.record(p, parts) for p, parts in zip(positions, read, strict=True)}


def _capped(stream: StreamRecord, over: int, first: EventRecord, limits: Limits) -> CapHit:
    """The ``gaps_per_stream`` hit of ``stream``: ``over`` jumps past the cap, the first of
    them to ``first``."""
    origin = first.origin or stream.response_origin or stream.connection.first
    where = {"frame" if origin.kind == "frame" else "line": origin.number}
    return CapHit.of(
        "gaps_per_stream",
        limits,
        origin.source,
        f"{over} more ID jump(s) on {stream.label}, from event id {first.id_field} on",
        "counted, not judged one by one: the events each may have lost, its signal and "
        "its verdict are not reported (the stream's jumps before them are judged as usual)",
        ts=origin.ts,
        **where,
    )


def _signals_capped(stream: StreamRecord, over: int, first: EventRecord, limits: Limits) -> CapHit:
    """The ``gaps_per_stream`` hit of ``stream``'s ``stream-gap`` signals that no jump
    explains: ``over`` past the cap, the first of them ``first``."""
    origin = first.origin or stream.response_origin or stream.connection.first
    where = {"frame" if origin.kind == "frame" else "line": origin.number}
    payload = first.signal
    named = f"{payload.first}..{payload.last}" if payload is not None else "?"
    return CapHit.of(
        "gaps_per_stream",
        limits,
        origin.source,
        f"{over} more stream-gap signal(s) no ID jump explains on {stream.label}, from the "
        f"one for {named} on",
        "counted, not judged one by one: the ranges they declare dropped are not reported "
        "as gaps (the stream's ID jumps and the signals covering them are judged as usual)",
        ts=origin.ts,
        **where,
    )
