"""What the judgements of a resume ask of the other streams of its logical stream (and of
its session), answered from their event columns (issue 16: a client that resumes after a
stream of a million events held every one of them as a record, ~1.5 KB each, to ask which
ID came last, whether a counter went past ``Last-Event-ID`` or which signal was sent).

Each question is a polars filter on the columns of a long stream, read
:data:`~.load.KIND_SLICE` events at a time; only the events it finds are built as records,
and the Python test of the whole-stream judgement is applied to them, so the answer is the
one the records give. A short stream, or one whose records exist, is read from its records
(:func:`.windows.read_whole`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import polars as pl

from sse_forensics.facts.front import event_keys
from sse_forensics.facts.index import StreamIndex
from sse_forensics.facts.load import CARRIES_ID, DATA_WITH_ID
from sse_forensics.facts.model import EventRecord, StreamRecord
from sse_forensics.facts.windows import events_at, read_whole

# Records built at a time (at most) from the positions a filter found.
RECORD_SLICE = 64


def events_where(
    stream: StreamRecord,
    where: pl.Expr,
    test: Callable[[EventRecord], bool],
    columns: tuple[str, ...] = ("kind", "event", "id_field"),
    keyed: bool = False,
    reverse: bool = False,
) -> Iterator[EventRecord]:
    """The events of ``stream`` that ``test`` holds for, in position order (the last first,
    if ``reverse``), built as they are asked for. A long stream's are looked for with
    ``where`` on its ``columns`` (with ``prefix`` and ``seq``, its IDs' keys, if
    ``keyed``): ``where`` must hold for every event ``test`` holds for."""
    ex, source = stream.exchange, stream.exchange.source
    if source is None or read_whole(stream):
        events = reversed(stream.events) if reverse else iter(stream.events)
        yield from (e for e in events if test(e))
        return
    key = (ex.connection_id, ex.index)
    added = None
    if keyed:
        columns = tuple(dict.fromkeys(("conn_id", "ex_index", "id_field", *columns)))
        added = keys_of(stream)
    for hits in source.rows_where(key, where, columns, added, reverse):
        positions = hits.get_column("position").cast(pl.Int64).to_list()
        if reverse:
            positions.reverse()
        k, size = 0, 1  # one record first: a question often wants the first found only
        while k < len(positions):
            part = positions[k : k + size]
            built = events_at(stream, sorted(part))
            for p in part:
                if test(built[p]):
                    yield built[p]
            k, size = k + size, min(2 * size, RECORD_SLICE)


def has_data(stream: StreamRecord) -> bool:
    """``stream`` holds a data event (``bool(stream.data_events())``)."""
    ex, source = stream.exchange, stream.exchange.source
    if source is None or read_whole(stream):
        return any(e.kind == "data" for e in stream.events)
    key = (ex.connection_id, ex.index)
    return source.next_of_kind(key, -1, "data") < source.count(key)


def first_data(stream: StreamRecord) -> EventRecord | None:
    """``stream``'s first data event (``stream.data_events()[0]``), and no other built."""
    return next(events_where(stream, pl.col("kind") == "data", lambda e: e.kind == "data"), None)


def event_at(stream: StreamRecord, position: int) -> EventRecord:
    """Event ``position`` of ``stream`` as a record, and no other built."""
    return events_at(stream, [position])[position]


def key_prefixes(stream: StreamRecord) -> set[str]:
    """The prefixes of the keys of ``stream``'s IDs (opaque IDs have none)."""
    if stream.codec is None or not stream.codec.arithmetic:
        return set()
    if stream.exchange.source is None or read_whole(stream):
        return {e.key.prefix for e in stream.events if e.key is not None}
    found = [
        hits.get_column("prefix").unique()
        for hits in _keyed(stream, pl.col("prefix").is_not_null())
    ]
    return set(pl.concat(found).to_list()) if found else set()


def top_counter(stream: StreamRecord, prefix: str) -> EventRecord | None:
    """The first of ``stream``'s events that carry an ID whose key, under ``prefix``, has
    the highest counter (``max`` over them by ``counter.seq``)."""
    test: Callable[[EventRecord], bool] = lambda e: (  # noqa: E731
        e.carries_id and e.key is not None and e.key.prefix == prefix
    )
    if stream.exchange.source is None or read_whole(stream):
        seen = [e for e in stream.events if test(e)]
        return max(seen, key=lambda e: e.counter.seq) if seen else None
    best: tuple[int, int] | None = None  # seq, position
    for hits in _keyed(stream, CARRIES_ID & (pl.col("prefix") == prefix)):
        at = hits.get_column("seq").arg_max()
        assert at is not None
        row = hits.row(at, named=True)
        if best is None or row["seq"] > best[0]:
            best = (int(row["seq"]), int(row["position"]))
    return None if best is None else event_at(stream, best[1])


def keys_of(stream: StreamRecord) -> Callable[[pl.DataFrame], pl.DataFrame]:
    """What gives rows of ``stream`` (``conn_id``, ``ex_index``, ``id_field``) their IDs'
    keys, ``prefix`` and ``seq`` (:func:`.front.event_keys`; null where none)."""
    ex = stream.exchange
    codecs = {(ex.connection_id, ex.index): stream.codec} if stream.codec is not None else {}

    def added(part: pl.DataFrame) -> pl.DataFrame:
        if not codecs:
            return part.with_columns(prefix=pl.lit(None, pl.String), seq=pl.lit(None, pl.Int64))
        return event_keys(part, codecs)

    return added


def _keyed(stream: StreamRecord, where: pl.Expr) -> Iterator[pl.DataFrame]:
    """The rows of long ``stream`` ``where`` holds for, with ``prefix`` and ``seq``."""
    ex, source = stream.exchange, stream.exchange.source
    assert source is not None
    read = ("conn_id", "ex_index", "id_field", "kind")
    yield from source.rows_where((ex.connection_id, ex.index), where, read, keys_of(stream))


class IdOrder:
    """The IDs of the data events of streams (their observed order: the only continuity
    opaque IDs allow) as one string column, asked what the list of them was asked."""

    def __init__(self, ids: pl.Series) -> None:
        self.ids = ids

    def __len__(self) -> int:
        return self.ids.len()

    def __getitem__(self, at: int) -> str:
        value: str = self.ids[at]
        return value

    def last(self, event_id: str) -> int | None:
        """The index of the last ``event_id``, ``None`` when absent."""
        hits = (self.ids == event_id).arg_true()
        return int(hits[-1]) if hits.len() else None

    def first_from(self, event_id: str, start: int) -> int | None:
        """The index of the first ``event_id`` at or past ``start``."""
        hits = (self.ids.slice(start) == event_id).arg_true()
        return start + int(hits[0]) if hits.len() else None

    def before(self, event_id: str, stop: int) -> bool:
        """``event_id`` is among the first ``stop``."""
        return bool((self.ids.slice(0, max(stop, 0)) == event_id).any())

    def among(self, event_ids: set[str], stop: int) -> set[str]:
        """Those of ``event_ids`` among the first ``stop``."""
        head = self.ids.slice(0, max(stop, 0))
        return set(head.filter(head.is_in(list(event_ids))).to_list())

    def between(self, start: int, stop: int | None = None) -> list[str]:
        return self.ids.slice(start, None if stop is None else stop - start).to_list()

    def tail_without(self, start: int, left_out: set[str] | pl.Series) -> list[str]:
        """The IDs from ``start`` on that are not in ``left_out``."""
        tail = self.ids.slice(start)
        out = left_out.implode() if isinstance(left_out, pl.Series) else list(left_out)
        return tail.filter(~tail.is_in(out)).to_list()


def data_id_rows(stream: StreamRecord) -> pl.DataFrame:
    """``position, id_field`` of ``stream``'s data events that carry an ID, in position
    order: read from the columns of a long stream, no record built."""
    ex, source = stream.exchange, stream.exchange.source
    if source is None or read_whole(stream):
        rows = [
            (e.position, e.id_field) for e in stream.events if e.kind == "data" and e.carries_id
        ]
        return pl.DataFrame(rows, schema=_ID_ROWS, orient="row")
    key = (ex.connection_id, ex.index)
    parts = [
        hits.select(pl.col("position").cast(pl.Int64), "id_field")
        for hits in source.rows_where(key, DATA_WITH_ID, ("kind", "id_field"))
    ]
    return pl.concat(parts) if parts else pl.DataFrame(schema=_ID_ROWS)


_ID_ROWS = {"position": pl.Int64, "id_field": pl.String}


def event_ids(stream: StreamRecord) -> pl.Series:
    """The IDs ``stream``'s events carry (of any kind), in position order: read from the
    columns of a long stream, no record built."""
    ex, source = stream.exchange, stream.exchange.source
    if source is None or read_whole(stream):
        return pl.Series("id_field", [e.id_field for e in stream.events if e.id_field], pl.String)
    key = (ex.connection_id, ex.index)
    parts = [
        hits.get_column("id_field") for hits in source.rows_where(key, CARRIES_ID, ("id_field",))
    ]
    return pl.concat(parts) if parts else pl.Series("id_field", [], pl.String)


def data_ids(stream: StreamRecord) -> pl.Series:
    """The IDs of ``stream``'s data events that carry one, in position order."""
    return data_id_rows(stream).get_column("id_field")


def observed_ids(stream: StreamRecord, index: StreamIndex) -> IdOrder:
    """The IDs of :func:`.gaps.observed_order`: of the data events of the logical stream
    before ``stream``, in time order."""
    parts = [data_ids(s) for s in index.logical_before(stream)]
    return IdOrder(pl.concat(parts) if parts else pl.Series("id_field", [], pl.String))
