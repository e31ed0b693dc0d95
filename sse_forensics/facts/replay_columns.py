"""What a long resume's own answer holds, read from its event columns (issue 16: a resume
answered with a replay of a million events built every one as a record, ~1.5 KB each, to
count its data events, its duplicates and the events it leaked from other streams).

A resume is long when its events are read from the partition's columns and number at least
:data:`~.windows.WINDOWED_EVENTS`; each answer here is the one :class:`.replays.ReplayJudge`
gives from its records, read :data:`~.load.KIND_SLICE` events at a time. Only the events
cited are built.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import dataclass

import polars as pl

from sse_forensics.facts import windows
from sse_forensics.facts.earlier import first_data, keys_of
from sse_forensics.facts.front import pair_hash
from sse_forensics.facts.ids import IdKey
from sse_forensics.facts.load import DATA_WITH_ID
from sse_forensics.facts.model import EventRecord, StreamRecord
from sse_forensics.facts.observed import ResumeOrder

Key = tuple[int, int]
_DATA = pl.col("kind") == "data"


def is_long(stream: StreamRecord) -> bool:
    """``stream`` is judged from its columns here, whatever records of it exist."""
    ex = stream.exchange
    return ex.source is not None and ex.n_events >= windows.WINDOWED_EVENTS


def _key(stream: StreamRecord) -> Key:
    return (stream.exchange.connection_id, stream.exchange.index)


def data_count(stream: StreamRecord) -> int:
    """How many data events long ``stream`` holds (``len(stream.data_events())``)."""
    source = stream.exchange.source
    assert source is not None  # a long stream reads its columns
    return sum(h.height for h in source.rows_where(_key(stream), _DATA, ("kind",)))


def replay_data(stream: StreamRecord) -> tuple[int, EventRecord | None]:
    """How many data events ``stream`` holds, and the first of them."""
    if not is_long(stream):
        data = stream.data_events()
        return len(data), data[0] if data else None
    return data_count(stream), first_data(stream)


def duplicates(r: StreamRecord, lk: IdKey | None, order: ResumeOrder) -> int:
    """The data events of long resume ``r`` the client had: those whose key, under the
    prefix of ``Last-Event-ID`` (``lk``), is not past it, and those without such a key
    whose ID the observed order holds up to ``Last-Event-ID`` (``order``)."""
    source = r.exchange.source
    assert source is not None  # a long stream reads its columns
    head: pl.Series | None = None  # read only for an event without a matching key
    count = 0
    added = keys_of(r) if lk is not None else None
    for hits in source.rows_where(
        _key(r), _DATA, ("conn_id", "ex_index", "kind", "id_field"), added
    ):
        rest = hits
        if lk is not None:
            matched = (pl.col("prefix") == lk.prefix).fill_null(False)
            count += hits.filter(matched & (pl.col("seq") <= lk.seq)).height
            rest = hits.filter(~matched)
        if not rest.height:
            continue
        if head is None:
            li = order.last
            head = (
                order.ids().ids.slice(0, li + 1)
                if li is not None
                else pl.Series([], dtype=pl.String)
            )
        count += rest.filter(pl.col("id_field").is_in(head.implode())).height
    return count


@dataclass(slots=True)
class Crossing:
    """A replayed event of a long resume first sent elsewhere: at ``position`` of the
    resume; first sighted at ``first_position`` of the stream ranked ``rank``, or (``rank``
    ``None``) in a stream another task judges (:attr:`.replays.ReplayJudge.foreign`)."""

    position: int
    rank: int | None = None
    first_position: int = 0


Parts = Callable[[Sequence[str]], Iterator[pl.DataFrame]]


def crossings(
    r: StreamRecord,
    own_prefixes: set[str] | None,
    foreign: Collection[int],
    sightings: Sightings,
    rank_logical: Callable[[int], StreamRecord],
) -> list[Crossing]:
    """The data events of long resume ``r`` carrying an ID (not under ``own_prefixes``,
    its resumed stream's own) that were first sent on another logical stream, in position
    order: those at ``foreign`` positions, and those whose (ID, data) pair a stream of the
    partition outside ``r``'s logical stream carries, when its first sighting (in time
    order) is there (``rank_logical``: the logical stream of the stream of a rank). The
    pairs are screened by a hash, then compared; no record is built."""
    source = r.exchange.source
    assert source is not None  # a long stream reads its columns
    key = _key(r)
    read = ("conn_id", "ex_index", "kind", "id_field", "data")
    parts = []
    for hits in source.rows_where(key, DATA_WITH_ID, read, keys_of(r) if own_prefixes else None):
        if own_prefixes:
            hits = hits.filter(~pl.col("prefix").is_in(sorted(own_prefixes)).fill_null(False))
        parts.append(hits.select(pl.col("position").cast(pl.Int64), pair_hash().alias("h")))
    if not parts:
        return []
    rows = pl.concat(parts)
    at_foreign = pl.col("position").is_in(sorted(foreign))
    out = [Crossing(p) for p in rows.filter(at_foreign).get_column("position").to_list()]
    rows = rows.filter(~at_foreign)
    own = [_key(s) for s in sightings.logical(r)]
    seen = sightings.elsewhere(rows.get_column("h").unique(), own)
    if seen.len():
        wanted = rows.filter(pl.col("h").is_in(seen.implode())).get_column("position")
        pairs = source.columns_at(key, wanted.to_numpy(), ("id_field", "data")).with_columns(
            position=wanted
        )
        firsts = pairs.join(
            sightings.first(pairs.select("id_field", "data").unique()),
            on=["id_field", "data"],
            how="inner",
        )
        for position, rank, first_position in firsts.select(
            "position", "rank", "first_position"
        ).iter_rows():
            if rank_logical(rank) is not r.logical:
                out.append(Crossing(position, rank, first_position))
    return sorted(out, key=lambda c: c.position)


class Sightings:
    """Where the partition's data events carrying given (ID, data) pairs were first seen,
    asked of its event columns in time order (``facts.columns.EventColumns.parts``: each
    with its stream's ``rank``)."""

    def __init__(self, parts: Parts, logical: Callable[[StreamRecord], list[StreamRecord]]) -> None:
        self.parts = parts
        self.logical = logical

    def _data_rows(self) -> Iterator[pl.DataFrame]:
        read = ("conn_id", "ex_index", "kind", "id_field", "data", "position")
        for part in self.parts(read):
            yield part.filter(DATA_WITH_ID)

    def elsewhere(self, hashes: pl.Series, own: list[Key]) -> pl.Series:
        """Those of the pair ``hashes`` (:func:`pair_hash`) some data event of a stream not
        in ``own`` carries."""
        found = []
        own_frame = pl.DataFrame(
            own, schema={"conn_id": pl.Int64, "ex_index": pl.Int64}, orient="row"
        )
        for part in self._data_rows():
            rows = part.select(
                pl.col("conn_id").cast(pl.Int64),
                pl.col("ex_index").cast(pl.Int64),
                pair_hash().alias("h"),
            ).filter(pl.col("h").is_in(hashes.implode()))
            if rows.height:
                rows = rows.join(own_frame, on=["conn_id", "ex_index"], how="anti")
                found.append(rows.get_column("h"))
        return pl.concat(found).unique() if found else pl.Series("h", [], pl.UInt64)

    def first(self, pairs: pl.DataFrame) -> pl.DataFrame:
        """``id_field, data, rank, first_position``: the first data event (in time order)
        carrying each of ``pairs`` (``id_field, data``)."""
        found = [
            part.join(pairs, on=["id_field", "data"], how="semi").select(
                "id_field",
                "data",
                pl.col("rank").cast(pl.Int64),
                pl.col("position").cast(pl.Int64).alias("first_position"),
            )
            for part in self._data_rows()
        ]
        return pl.concat(found).unique(["id_field", "data"], keep="first", maintain_order=True)
