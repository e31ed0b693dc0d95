"""A finalised TCP connection's HTTP exchanges as evidence rows.

Called once per connection when reassembly finalises it: the connection's objects (heads,
bodies, SSE events) are reduced to rows and released, so a capture never keeps one Python
object per event beyond the connection that is still open; within it, the exact path hands
a long event stream's events over every ``SPILL_EVENTS`` (:meth:`CaptureEvidence.spill`),
so an open stream holds a window of objects and its earlier rows as compacted columns.
Bodies are not kept: what the facts need of them (JSON-RPC requests and their call
signatures, the ids a JSON answer answers, the negotiated protocol version) is read here.
"""

from __future__ import annotations

import pickle
from typing import Any, Protocol

import orjson
import polars as pl

from sse_forensics.evidence.classify import classify, put_classified
from sse_forensics.evidence.held_rows import HeldRows
from sse_forensics.evidence.sessions import attribute_connection, explicit_session, inferred_session
from sse_forensics.evidence.store import compact
from sse_forensics.evidence.tables import (
    ConnectionColumns,
    EventColumns,
    ExchangeColumns,
    put_origin,
)
from sse_forensics.facts.config import AnalysisConfig
from sse_forensics.facts.jsonrpc import parse_messages, protocol_version
from sse_forensics.facts.requests import call_signature
from sse_forensics.reassembly.exchange import BodyHole, Exchange, SpilledEvents
from sse_forensics.reassembly.flows import Connection
from sse_forensics.reassembly.http_events import header
from sse_forensics.reassembly.sse_columns import RETRY_MAX

LAST_EVENT_ID = "Last-Event-ID"
_VERSION_KEY = "protocolVersion"


def exchange_protocol_version(bodies: list[bytes | str], version_header: str | None) -> str | None:
    """The session era an exchange shows (docs/profile.md, "Protocol era"): the server's answer to
    ``initialize`` first (it may downgrade the client's proposal), then the request, then
    the ``MCP-Protocol-Version`` header."""
    for body in bodies:
        if not body:
            continue
        if isinstance(body, str):
            if _VERSION_KEY not in body:
                continue
        elif _VERSION_KEY.encode() not in body:
            continue
        messages = parse_messages(body)
        if messages:
            version = protocol_version(messages)
            if version:
                return version.strip()
    if version_header and version_header.strip():
        return version_header.strip()
    return None


def request_calls(body: bytes) -> str | None:
    """JSON ``[[method, rpc_id, signature], ...]`` of the JSON-RPC requests (not
    notifications) in a request body; ``None`` when there are none."""
    if not body:
        return None
    calls = [
        [m.method, m.rpc_id, call_signature(m.method, m.params).decode()]
        for m in parse_messages(body) or []
        if m.kind == "request"
    ]
    return orjson.dumps(calls).decode() if calls else None


def json_answers(ex: Exchange) -> str | None:
    """JSON list of the JSON-RPC ids a plain JSON response body answered."""
    if ex.is_event_stream or not ex.response_body:
        return None
    ids = [
        m.rpc_id
        for m in parse_messages(bytes(ex.response_body)) or []
        if m.kind in ("response", "error")
    ]
    return orjson.dumps(ids).decode() if ids else None


def holes_json(holes: list[BodyHole]) -> str | None:
    if not holes:
        return None
    out = []
    for h in holes:
        s = h.span
        row = [
            h.body_offset,
            s.direction,
            s.offset,
            s.length,
            s.reason,
            _origin_list(s.after),
            _origin_list(s.before),
        ]
        if h.body_length:
            row.append(h.body_length)
        out.append(row)
    return orjson.dumps(out).decode()


def _origin_list(origin: Any) -> list[Any] | None:
    if origin is None:
        return None
    return [origin.source, origin.number, origin.ts, origin.kind]


def connection_row(conn: Connection, buf: dict[str, list[Any]], from_log: bool = False) -> None:
    buf["conn_id"].append(conn.id)
    buf["community_id"].append(conn.community_id)
    buf["client_ip"].append(conn.client[0])
    buf["client_port"].append(conn.client[1])
    buf["server_ip"].append(conn.server[0])
    buf["server_port"].append(conn.server[1])
    buf["from_log"].append(from_log)
    put_origin(buf, "first", conn.first)
    put_origin(buf, "last", conn.last)
    # The TCP expert analysis (windows, stalls, FIN/RST, missing spans) is a handful of
    # records per connection read only by cause attribution and the per-session views: it
    # travels whole rather than as tables of its own.
    buf["state"].append(pickle.dumps(conn, protocol=pickle.HIGHEST_PROTOCOL))


def exchange_rows(
    conn: Connection,
    exchanges: list[Exchange],
    config: AnalysisConfig,
    ex_buf: dict[str, list[Any]],
    ev_buf: dict[str, list[Any]],
) -> list[str]:
    """Append one row per exchange of ``conn`` (in exchange order) and one per SSE event;
    returns the session of each exchange."""
    exchanges = sorted(exchanges, key=lambda e: e.index)
    explicit = []
    for ex in exchanges:
        value = header(ex.request_headers, config.session_header) or header(
            ex.response_headers, config.session_header
        )
        endpoint = [sse.data for sse in ex.lead_events() if sse.event == "endpoint"]
        target = ex.request.target if ex.request is not None else None
        explicit.append(explicit_session(value, target, endpoint, config))
    keys = attribute_connection(
        explicit, inferred_session(conn.client[0], conn.server[0], conn.server[1])
    )
    for ex, key in zip(exchanges, keys, strict=True):
        _exchange_row(ex, key.session, key.how, key.inferred, config, ex_buf)
        _event_rows(ex, key.session, ev_buf)
    return [k.session for k in keys]


def _exchange_row(
    ex: Exchange,
    session: str,
    how: str,
    inferred: bool,
    config: AnalysisConfig,
    buf: dict[str, list[Any]],
) -> None:
    req, resp = ex.request, ex.response
    buf["conn_id"].append(ex.connection_id)
    buf["index"].append(ex.index)
    buf["session"].append(session)
    buf["session_how"].append(how)
    buf["session_inferred"].append(inferred)
    buf["from_log"].append(ex.from_log)
    buf["req_method"].append(req.method if req else None)
    buf["req_target"].append(req.target if req else None)
    buf["req_version"].append(req.version if req else None)
    buf["last_event_id"].append(header(req.headers, LAST_EVENT_ID) if req else None)
    put_origin(buf, "req", req.origin if req else None)
    buf["request_complete"].append(ex.request_complete)
    request_body = bytes(ex.request_body)
    buf["req_rpc"].append(request_calls(request_body) if req else None)
    answers: list[bytes | str] = [bytes(ex.response_body)]
    if ex.is_event_stream:
        answers.extend(data for data in ex.event_data() if data)
    answers.append(request_body)
    version_header = header(ex.request_headers, config.protocol_version_header)
    buf["protocol_version"].append(exchange_protocol_version(answers, version_header))
    buf["resp_status"].append(resp.status if resp else None)
    buf["resp_reason"].append(resp.reason if resp else None)
    buf["resp_version"].append(resp.version if resp else None)
    buf["content_type"].append(header(resp.headers, "content-type") if resp else None)
    buf["cache_control"].append(header(resp.headers, "cache-control") if resp else None)
    buf["event_stream"].append(ex.is_event_stream)
    put_origin(buf, "resp", resp.origin if resp else None)
    buf["head_captured"].append(resp.head_captured if resp else False)
    buf["json_answers"].append(json_answers(ex))
    buf["response_complete"].append(ex.response_complete)
    buf["end_reason"].append(ex.response_end_reason)
    put_origin(buf, "end", ex.response_end)
    put_origin(buf, "body", ex.last_body_origin)
    buf["body_bytes"].append(ex.body_bytes)
    buf["trailing"].append(bytes(ex.trailing))
    buf["comments"].append(ex.comment_count())
    buf["holes"].append(holes_json(ex.holes))
    buf["log_info"].append(None)


def _event_rows(ex: Exchange, session: str, buf: dict[str, list[Any]]) -> None:
    n = len(ex.events)
    if not n:
        return
    first = ex.spilled.events if ex.spilled is not None else 0  # positions handed on
    buf["conn_id"].extend([ex.connection_id] * n)
    buf["ex_index"].extend([ex.index] * n)
    buf["session"].extend([session] * n)
    buf["position"].extend(range(first, first + n))
    for sse in ex.events:
        buf["id"].append(sse.id)
        buf["id_field"].append(sse.id_field)
        buf["event"].append(sse.event)
        buf["data"].append(sse.data)
        # WHATWG allows any number of digits; a column holds 64 bits (sse_columns does so).
        buf["retry"].append(None if sse.retry is None else min(sse.retry, RETRY_MAX))
        buf["start"].append(sse.start)
        buf["end"].append(sse.end)
        buf["dispatched"].append(sse.dispatched)
        kind, rpc = classify(sse.event, sse.data, sse.id_field)
        put_classified(buf, kind, rpc, sse.event, sse.data)
        origins = sse.origins
        put_origin(buf, "first", origins[0] if origins else None)
        put_origin(buf, "last", origins[-1] if origins else None)


# Spilled event frames (of a ``SPILL_EVENTS`` window each) handed to the store at once.
HAND_ON_FRAMES = 16

# Rows buffered before they become a polars batch: large enough that building the batch
# costs little per row, small enough to stay a few megabytes.
FLUSH_ROWS = 50_000


class BatchStore(Protocol):
    """Where :class:`CaptureEvidence` hands its batches (an ``EvidenceStore``)."""

    def add(
        self, connections: pl.DataFrame, exchanges: pl.DataFrame, events: pl.DataFrame
    ) -> None: ...


class CaptureEvidence:
    """Collects finalised connections' rows and hands them to ``store`` in batches (the
    ``sink`` of :func:`~sse_forensics.reassembly.capture.reassemble`)."""

    def __init__(self, store: BatchStore, config: AnalysisConfig) -> None:
        self.store = store
        self.config = config
        self.exchanges = 0
        # Event rows of streams still open, by (connection, exchange): spilled (``spill``)
        # before their session is known, handed on when the connection is (in scratch
        # files past a budget: :mod:`.held_rows`).
        self._held = HeldRows()
        self._reset()

    def _reset(self) -> None:
        self._conns = ConnectionColumns.buffer()
        self._exs = ExchangeColumns.buffer()
        self._evs = EventColumns.buffer()
        self._rows = 0

    def __call__(self, conn: Connection, exchanges: list[Exchange]) -> None:
        if not exchanges:
            return
        if self._held and any(ex.spilled is not None for ex in exchanges):
            self._with_spilled(conn, exchanges)
            return
        connection_row(conn, self._conns)
        exchange_rows(conn, exchanges, self.config, self._exs, self._evs)
        self.exchanges += len(exchanges)
        self._rows += len(exchanges) + sum(len(ex.events) for ex in exchanges)
        if self._rows >= FLUSH_ROWS:
            self.flush()

    def spill(self, ex: Exchange) -> None:
        """The exact path's ``spill`` hook (issue 16): ``ex``'s events so far become rows
        held here until the connection ends (their session is known only then), and the
        objects are dropped; ``ex.spilled`` keeps what the exchange row reads of them."""
        spilled = ex.spilled
        if spilled is None:
            spilled = ex.spilled = SpilledEvents(lead=ex.events[:2])
        if not spilled.version_data:  # the first data an exchange's version is read from
            for sse in ex.events:
                if sse.data and exchange_protocol_version([sse.data], None) is not None:
                    spilled.version_data.append(sse.data)
                    break
        buf = EventColumns.buffer()
        _event_rows(ex, "", buf)
        # Stored once where a column holds one value (the connection, the sources, sparse
        # columns): a window of a long stream costs its varying columns only.
        frame = compact(EventColumns.frame(buf))
        self._held.add((ex.connection_id, ex.index), frame)
        spilled.events += len(ex.events)
        spilled.comments += len(ex.comments)
        ex.events = []
        ex.comments = []

    def _with_spilled(self, conn: Connection, exchanges: list[Exchange]) -> None:
        """A connection some of whose events were spilled: its rows, then each exchange's
        events in order (spilled rows under the session now known, then the rest)."""
        self.flush()  # rows of earlier connections go first, as they would have
        connection_row(conn, self._conns)
        sessions = exchange_rows(conn, exchanges, self.config, self._exs, self._evs)
        self.exchanges += len(exchanges)
        tails = EventColumns.frame(self._evs)
        self.store.add(
            ConnectionColumns.frame(self._conns), ExchangeColumns.frame(self._exs), tails.clear()
        )
        self._reset()
        no_conns, no_exs = ConnectionColumns.frame(), ExchangeColumns.frame()
        at = 0
        for ex, session in zip(sorted(exchanges, key=lambda e: e.index), sessions, strict=True):
            named = pl.lit(session, pl.String).alias("session")
            # Whole columns again, in batches as large as the fast path's (the store and
            # the facts read many small, partly scalar, batches slowly).
            for rows in self._held.take((ex.connection_id, ex.index), HAND_ON_FRAMES):
                self.store.add(no_conns, no_exs, rows.with_columns(named))
            if ex.events:
                self.store.add(no_conns, no_exs, tails.slice(at, len(ex.events)))
                at += len(ex.events)

    def flush(self) -> None:
        if self._rows or self._conns["conn_id"]:
            self.store.add(
                ConnectionColumns.frame(self._conns),
                ExchangeColumns.frame(self._exs),
                EventColumns.frame(self._evs),
            )
        self._reset()
