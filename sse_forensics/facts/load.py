"""Read one partition's evidence tables back as the records the fact builder judges: one
:class:`~.model.ExchangeRecord` per exchange (with its SSE events) and the connections they
sit on. Objects exist for one partition at a time, never for a whole capture."""

from __future__ import annotations

import pickle
from collections.abc import Callable, Iterable, Iterator, Sequence
from itertools import islice
from typing import Any

import numpy as np
import orjson
import polars as pl

from sse_forensics.evidence.pieces import EventPieces
from sse_forensics.evidence.tables import EventColumns, single_response
from sse_forensics.facts.jsonrpc import RpcMessage
from sse_forensics.facts.model import EventParts, ExchangeRecord, RpcCall
from sse_forensics.facts.signals import SignalPayload
from sse_forensics.provenance import Origin
from sse_forensics.reassembly.exchange import BodyHole
from sse_forensics.reassembly.flows import Connection
from sse_forensics.reassembly.http_events import RequestHead, ResponseHead
from sse_forensics.reassembly.stream import MissingSpan
from sse_forensics.sse import SSEEvent

_ORIGIN_KEYS = {
    prefix: (f"{prefix}_src", f"{prefix}_num", f"{prefix}_ts", f"{prefix}_kind")
    for prefix in ("first", "last", "req", "resp", "end", "body")
}


_CONNECTION_COLUMNS = (
    "conn_id", "state", "client_ip", "client_port", "server_ip", "server_port",
    "community_id", *_ORIGIN_KEYS["first"], *_ORIGIN_KEYS["last"],
)  # fmt: skip
"""What :func:`load_connections` reads of a row."""


def load_connections(connections: pl.DataFrame) -> dict[int, Connection]:
    """A :class:`Connection` per ``conn_id`` (its first row), from the state a capture
    pickled or, for a log pseudo-connection, from its columns read as plain lists."""
    table = connections.select(_CONNECTION_COLUMNS).unique(
        "conn_id", keep="first", maintain_order=True
    )
    out: dict[int, Connection] = {}
    for (
        conn_id,
        state,
        client_ip,
        client_port,
        server_ip,
        server_port,
        community_id,
        *ends,
    ) in zip(*(table.get_column(c).to_list() for c in _CONNECTION_COLUMNS), strict=True):
        if state is not None:
            out[conn_id] = pickle.loads(state)
            continue
        fsrc, fnum, fts, fkind, lsrc, lnum, lts, lkind = ends
        assert fsrc is not None and lsrc is not None, "a connection without its ends' origins"
        out[conn_id] = Connection(
            id=conn_id,
            client=(client_ip, client_port),
            server=(server_ip, server_port),
            community_id=community_id,
            first=Origin(fsrc, fnum, fts, fkind),
            last=Origin(lsrc, lnum, lts, lkind),
        )
    return out


def _origin(value: list[Any] | None) -> Origin | None:
    return None if value is None else _origin_of(value)


def _origin_of(value: list[Any]) -> Origin:
    return Origin(value[0], value[1], value[2], value[3])


def _holes(text: str | None) -> list[BodyHole]:
    if not text:
        return []
    out = []
    for offset, direction, start, length, reason, after, before, *stretch in orjson.loads(text):
        span = MissingSpan(direction, start, length, reason, _origin(after), _origin(before))
        out.append(BodyHole(offset, span, stretch[0] if stretch else 0))
    return out


def _exchange(row: tuple[Any, ...]) -> ExchangeRecord:
    """An exchange from a row of :data:`_EXCHANGE_COLUMNS` (``trailing``: its length),
    unpacked once: no dict per row (issue 9: a partition of the 1 GB log set holds ~30,000
    exchanges)."""
    (
        conn_id, index, session, session_how, session_inferred, req_method,
        req_target, req_version, last_event_id, resp_status, resp_reason,
        resp_version, content_type, cache_control, head_captured, req_rpc,
        json_answers, event_stream, holes, comments, trailing, body_bytes,
        response_complete, end_reason, from_log, log_info, protocol_version,
        req_src, req_num, req_ts, req_kind, resp_src, resp_num, resp_ts, resp_kind,
        end_src, end_num, end_ts, end_kind, body_src, body_num, body_ts, body_kind,
    ) = row  # fmt: skip
    request = None
    if req_method is not None:
        assert req_src is not None, "a row without its req origin"
        request = RequestHead(
            index,
            req_method,
            req_target,
            req_version,
            [] if last_event_id is None else [("Last-Event-ID", last_event_id)],
            Origin(req_src, req_num, req_ts, req_kind),
        )
    response = None
    if resp_status is not None:
        assert resp_src is not None, "a row without its resp origin"
        headers = []
        if content_type is not None:
            headers.append(("Content-Type", content_type))
        if cache_control is not None:
            headers.append(("Cache-Control", cache_control))
        response = ResponseHead(
            index,
            resp_status,
            resp_reason,
            resp_version,
            headers,
            Origin(resp_src, resp_num, resp_ts, resp_kind),
            head_captured=head_captured,
        )
    return ExchangeRecord(
        connection_id=conn_id,
        index=index,
        session=session,
        session_how=session_how,
        session_inferred=session_inferred,
        request=request,
        response=response,
        is_event_stream=event_stream,
        holes=_holes(holes),
        comments=comments,
        trailing_bytes=trailing,
        body_bytes=body_bytes,
        response_complete=response_complete,
        response_end_reason=end_reason,
        response_end=None if end_src is None else Origin(end_src, end_num, end_ts, end_kind),
        last_body_origin=(
            None if body_src is None else Origin(body_src, body_num, body_ts, body_kind)
        ),
        from_log=from_log,
        log_text=log_info,
        calls=[RpcCall(*c) for c in orjson.loads(req_rpc)] if req_rpc else [],
        json_answers=orjson.loads(json_answers) if json_answers else [],
        protocol_version=protocol_version,
    )


_EXCHANGE_COLUMNS = (
    "conn_id", "index", "session", "session_how", "session_inferred", "req_method",
    "req_target", "req_version", "last_event_id", "resp_status", "resp_reason",
    "resp_version", "content_type", "cache_control", "head_captured", "req_rpc",
    "json_answers", "event_stream", "holes", "comments", "trailing", "body_bytes",
    "response_complete", "end_reason", "from_log", "log_info", "protocol_version",
    *(name for prefix in ("req", "resp", "end", "body") for name in _ORIGIN_KEYS[prefix]),
)  # fmt: skip
"""What :func:`_exchange` reads of a row."""


_EVENT_COLUMNS = (
    "conn_id",
    "ex_index",
    "id",
    "event",
    "data",
    "retry",
    "id_field",
    "start",
    "end",
    "dispatched",
    "kind",
    "rpc_kind",
    "rpc_method",
    "rpc_id",
    "rpc_more",
    "sig_first",
    "sig_last",
    "sig_valid",
    "first_src",
    "first_num",
    "first_ts",
    "first_kind",
    "last_src",
    "last_num",
    "last_ts",
    "last_kind",
)


def _rpc(kind: str, method: str | None, rpc_id: str | None, more: str | None) -> list[RpcMessage]:
    out = [RpcMessage(kind, method, rpc_id)]
    if more:
        out.extend(RpcMessage(k, m, i) for k, m, i in orjson.loads(more))
    return out


class EventSource:
    """One partition's events, read back as objects one exchange at a time (in position
    order) when a judgement asks for them. The events are not copied: a row number per
    event in (exchange, position) order is all that is kept beside them (issue 16: a
    stream of ten million events must not cost a sorted copy of every column)."""

    def __init__(self, events: pl.DataFrame | EventPieces) -> None:
        self.order: np.ndarray | None = None
        # Rows read ahead by prefetch, by exchange, until their records are built.
        self._fetched: dict[tuple[int, int], list[tuple[Any, ...]]] = {}
        self.pieces: EventPieces | None = None
        if isinstance(events, EventPieces):  # each exchange's rows one run: read on demand
            self.pieces, self.events = events, EventColumns.frame().select(_EVENT_COLUMNS)
            runs = events.runs()
            assert runs is not None, "pieces are opened only when each exchange is one run"
            self.spans: dict[tuple[int, int], tuple[int, int]] = {
                (c, i): (a, n) for c, i, a, n in runs.iter_rows()
            }
            return
        self.events = events.select(_EVENT_COLUMNS)
        one = single_response(events)
        if one is not None:  # one response in position order: the rows as they are
            self.spans = {one: (0, events.height)}
            return
        keys = (
            events.select("conn_id", "ex_index", "position")
            .with_row_index("row")
            .sort("conn_id", "ex_index", "position")
        )
        self.order = keys.get_column("row").to_numpy()
        spans = (
            keys.select("conn_id", "ex_index")
            .with_row_index("at")
            .group_by("conn_id", "ex_index")
            .agg(pl.col("at").first().alias("start"), pl.len().alias("n"))
        )
        del keys
        self.spans = {(c, i): (start, n) for c, i, start, n in spans.iter_rows()}

    def _index(self, start: int, n: int) -> np.ndarray:
        """The table rows of the span ``start, n`` of the (exchange, position) order."""
        if self.order is None:
            return np.arange(start, start + n)
        return self.order[start : start + n]

    def _rows(self, start: int, n: int, columns: Sequence[str] = _EVENT_COLUMNS) -> pl.DataFrame:
        """``columns`` of the span ``start, n`` of the (exchange, position) order: a
        zero-copy slice when its rows sit in one ascending run of the table (as ingest
        writes each response's events), else a gather (a polars gather costs ~0.5 ms a call
        whatever its size)."""
        if self.pieces is not None:
            return self.pieces.slice(start, n, columns)
        events = self.events if columns is _EVENT_COLUMNS else self.events.select(columns)
        if self.order is None:
            return events.slice(start, n)
        rows = self.order[start : start + n]
        first = int(rows[0])
        if int(rows[-1]) - first == n - 1 and (n < 3 or bool((np.diff(rows) == 1).all())):
            return events.slice(first, n)
        return events[rows]

    def count(self, key: tuple[int, int]) -> int:
        span = self.spans.get(key)
        return span[1] if span else 0

    def prefetch(self, keys: Iterable[tuple[int, int]]) -> None:
        """Read the events of the exchanges ``keys`` in one gather and one pass over its
        rows, for :meth:`materialize` to build their records from when they are asked for:
        the exchanges a judgement will read (``facts.build``), each read by itself, cost a
        polars call apiece, which outweighs their rows."""
        wanted = sorted(k for k in set(keys) if k in self.spans and k not in self._fetched)
        if not wanted:
            return
        spans = [self.spans[k] for k in wanted]
        if self.pieces is not None:
            read = pl.concat([self._rows(*span) for span in spans])
        else:
            read = self.events[np.concatenate([self._index(*span) for span in spans])]
        rows = read.iter_rows()
        for key, (_start, n) in zip(wanted, spans, strict=True):
            self._fetched[key] = list(islice(rows, n))

    def materialize(self, ex: ExchangeRecord) -> None:
        key = (ex.connection_id, ex.index)
        span = self.spans.get(key)
        if span is None:
            return
        events, kinds, rpcs, signals = ex._events, ex._kinds, ex._rpcs, ex._signals
        assert events is not None
        fetched = self._fetched.pop(key, None)
        for row in fetched if fetched is not None else self._rows(*span).iter_rows():
            sse, kind, rpc, signal = _event_of(row)
            events.append(sse)
            kinds.append(kind)
            rpcs.append(rpc)
            signals.append(signal)

    def events_at(self, key: tuple[int, int], positions: Sequence[int]) -> list[EventParts]:
        """The events at ``positions`` (rising) of exchange ``key``, and nothing else of
        it: a long stream judged around its ID jumps (:mod:`.windows`, issue 16)."""
        if not positions or key not in self.spans:
            return []
        read = self.columns_at(key, np.asarray(positions, dtype=np.int64), _EVENT_COLUMNS)
        return [_event_of(row) for row in read.iter_rows()]

    def columns_at(
        self, key: tuple[int, int], positions: np.ndarray, columns: Sequence[str]
    ) -> pl.DataFrame:
        """``columns`` of the events at ``positions`` (rising, not empty) of exchange
        ``key``."""
        start, n = self.spans.get(key, (0, 0))
        if int(positions[-1]) >= n:
            raise IndexError(f"event {int(positions[-1])} of an exchange of {n}")
        rows = self._index(start, n)[positions]
        if self.pieces is not None:
            return self.pieces.take(pl.Series(rows), columns)
        events = self.events if columns is _EVENT_COLUMNS else self.events.select(columns)
        read: pl.DataFrame = events[rows]
        return read

    def next_of_kind(self, key: tuple[int, int], position: int, kind: str) -> int:
        """The position of the first event of exchange ``key`` past ``position`` whose kind
        is ``kind`` (the exchange's event count when none): its ``kind`` column read
        :data:`KIND_SLICE` events at a time from there, nothing else of it."""
        start, n = self.spans.get(key, (0, 0))
        at = position + 1
        while at < n:
            length = min(KIND_SLICE, n - at)
            kinds = self._rows(start + at, length, ("kind",)).get_column("kind")
            hits = (kinds == kind).arg_true()
            if hits.len():
                return at + int(hits[0])
            at += length
        return n

    def rows_where(
        self,
        key: tuple[int, int],
        where: pl.Expr,
        columns: Sequence[str],
        added: Callable[[pl.DataFrame], pl.DataFrame] | None = None,
        reverse: bool = False,
    ) -> Iterator[pl.DataFrame]:
        """Per slice of :data:`KIND_SLICE` events of exchange ``key`` (the last first, if
        ``reverse``), its rows ``where`` holds for: ``columns``, the columns ``added``
        computes from them (an ID's key) and ``position``, nothing else of the exchange
        (issue 16: a resume judged against a long earlier stream, ``facts.earlier``)."""
        start, n = self.spans.get(key, (0, 0))
        slices = range(0, n, KIND_SLICE)
        for at in reversed(slices) if reverse else slices:
            part = self._rows(start + at, min(KIND_SLICE, n - at), columns)
            if added is not None:
                part = added(part)
            hits = part.with_row_index("position", offset=at).filter(where)
            if hits.height:
                yield hits

    def id_ends(self, key: tuple[int, int]) -> tuple[int | None, int | None]:
        """The positions of the first and the last event of exchange ``key`` that carries
        an ID and is no signal (continuity is judged between them: ``facts.unjudged``),
        ``None`` when none does: its ``kind`` and ``id_field`` columns read
        :data:`KIND_SLICE` events at a time from each end, nothing else of it (issue 16)."""
        start, n = self.spans.get(key, (0, 0))
        first = next(self._hits(start, range(0, n, KIND_SLICE), n, CONSIDERED, False), None)
        if first is None:
            return None, None
        return first, max(first, self._last(key, CONSIDERED, first) or first)

    def last_data_with_id(self, key: tuple[int, int]) -> int | None:
        """The position of the last data event of exchange ``key`` that carries an ID
        (``None`` when none does), read as :meth:`id_ends` reads (``facts.build``: when
        a client left a stream)."""
        return self._last(key, DATA_WITH_ID, 0)

    def _last(self, key: tuple[int, int], where: pl.Expr, down_to: int) -> int | None:
        """The position of the last event of exchange ``key`` at or past ``down_to`` that
        ``where`` holds for: its slices read from the end."""
        start, n = self.spans.get(key, (0, 0))
        if n <= down_to:
            return None
        ends = range(((n - 1) // KIND_SLICE) * KIND_SLICE, down_to - KIND_SLICE, -KIND_SLICE)
        return next(self._hits(start, ends, n, where, True), None)

    def _hits(self, start: int, slices: range, n: int, where: pl.Expr, last: bool) -> Iterator[int]:
        """Per slice of :data:`KIND_SLICE` events starting at each of ``slices``, the
        position of its first (``last``: its last) event ``where`` holds for."""
        for at in slices:
            part = self._rows(start + at, min(KIND_SLICE, n - at), ("kind", "id_field"))
            hits = part.select(pl.arg_where(where)).to_series()
            if hits.len():
                yield at + int(hits[-1] if last else hits[0])


CARRIES_ID = pl.col("id_field").fill_null("") != ""
# An event whose ID continuity is judged: it carries an ID and is no signal (here and in
# the per-slice judgements of facts.event_slices).
CONSIDERED = CARRIES_ID & (pl.col("kind") != "signal")
DATA_WITH_ID = CARRIES_ID & (pl.col("kind") == "data")

# Events' kinds read at a time by EventSource.next_of_kind.
KIND_SLICE = 1 << 16


def _event_of(row: tuple[Any, ...]) -> EventParts:
    """An event and what ingest read of it, from a row of :data:`_EVENT_COLUMNS`."""
    (
        _conn,
        _index,
        ev_id,
        event,
        data,
        retry,
        id_field,
        start,
        end,
        dispatched,
        kind,
        rpc_kind,
        rpc_method,
        rpc_id,
        rpc_more,
        sig_first,
        sig_last,
        sig_valid,
        fsrc,
        fnum,
        fts,
        fkind,
        lsrc,
        lnum,
        lts,
        lkind,
    ) = row
    if fsrc is None:
        origins: tuple[Origin, ...] = ()
    else:
        first = Origin(fsrc, fnum, fts, fkind)
        if (lsrc, lnum) == (fsrc, fnum):
            origins = (first,)
        else:
            origins = (first, Origin(lsrc, lnum, lts, lkind))
    return (
        SSEEvent(ev_id, event, data, retry, id_field, start, end, origins, dispatched),
        kind,
        _rpc(rpc_kind, rpc_method, rpc_id, rpc_more) if rpc_kind else None,
        SignalPayload(sig_first, sig_last, sig_valid) if sig_valid is not None else None,
    )


def prefetch_events(records: Iterable[ExchangeRecord]) -> None:
    """Read ahead the events of those of ``records`` whose events are not built yet
    (:meth:`EventSource.prefetch`): one gather per source, not one per exchange."""
    by_source: dict[EventSource, list[tuple[int, int]]] = {}
    for r in records:
        if r._events is None and r.source is not None:
            by_source.setdefault(r.source, []).append((r.connection_id, r.index))
    for source, keys in by_source.items():
        source.prefetch(keys)


def load_exchanges(
    exchanges: pl.DataFrame, events: pl.DataFrame | EventPieces
) -> list[ExchangeRecord]:
    """The exchanges in (connection, index) order; their events are read on first use."""
    source = EventSource(events)
    # The columns read, and the trailing bytes' length, not the bytes: every column sorted
    # and turned into Python objects costs, and a partition's exchanges hold ~50.
    trailing = pl.col("trailing").bin.size().fill_null(0).cast(pl.Int64)
    wanted = exchanges.select(
        *(trailing if c == "trailing" else c for c in _EXCHANGE_COLUMNS)
    ).sort("conn_id", "index")
    # Column by column into plain lists (polars converts a column at a time far faster
    # than it builds rows), zipped into one tuple per row for :func:`_exchange`.
    values = (wanted.get_column(c).to_list() for c in _EXCHANGE_COLUMNS)
    records = [_exchange(row) for row in zip(*values, strict=True)]
    for r in records:
        r.source = source
        r.n_events = source.count((r.connection_id, r.index))
    return records
