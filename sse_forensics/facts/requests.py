"""JSON-RPC requests the clients sent, and whether a client re-issued one (docs/profile.md,
"What counts as what": a gap after which the client aborted and re-issued the originating
request is an expected gap)."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

import orjson

from sse_forensics.facts.model import ExchangeRecord, SessionRecord, StreamRecord
from sse_forensics.facts.sessions import PostTime
from sse_forensics.ingest.logs.files import rotation_key
from sse_forensics.provenance import Origin

# MCP puts per-call bookkeeping (progressToken, traceparent) under `_meta`; a client that
# re-issues a call mints new ones, so they are not part of what makes two calls the same.
_PER_CALL_KEYS = ("_meta",)
# nginx's $time_local and Apache's %t count whole seconds.
LOG_TIME_RESOLUTION = 1.0


def call_signature(method: str | None, params: object) -> bytes:
    """What makes two requests "the same call": method and params without ``_meta``."""
    if isinstance(params, dict):
        params = {k: v for k, v in params.items() if k not in _PER_CALL_KEYS}
    try:
        return orjson.dumps([method, params], option=orjson.OPT_SORT_KEYS)
    except TypeError:
        return orjson.dumps([method, repr(params)])


@dataclass(slots=True)
class RequestRecord:
    session: SessionRecord | None
    exchange: ExchangeRecord
    method: str | None
    rpc_id: str | None
    signature: str
    origin: Origin

    @property
    def ts(self) -> float:
        return self.origin.ts


def collect_requests(
    exchanges: list[ExchangeRecord], sessions: dict[tuple[int, int], SessionRecord]
) -> list[RequestRecord]:
    """Every JSON-RPC request (not notification) in a request body, in time order."""
    out: list[RequestRecord] = []
    for ex in exchanges:
        if ex.request is None:
            continue
        for call in ex.calls:
            out.append(
                RequestRecord(
                    sessions.get((ex.connection_id, ex.index)),
                    ex,
                    call.method,
                    call.rpc_id,
                    call.signature,
                    ex.request.origin,
                )
            )
    out.sort(key=lambda r: r.ts)
    return out


class RequestIndex:
    """Look-ups over the requests of a capture."""

    def __init__(
        self,
        requests: list[RequestRecord],
        posts: dict[str, list[PostTime]] | None = None,
    ) -> None:
        self.requests = requests
        # Every POST per session (by session id), bodies or not.
        self.posts = posts or {}
        self._by_exchange: dict[ExchangeRecord, list[RequestRecord]] = defaultdict(list)
        # Time order; requests whose session is unknown share the None key.
        self._by_session: dict[SessionRecord | None, list[RequestRecord]] = defaultdict(list)
        for r in requests:
            self._by_exchange[r.exchange].append(r)
            self._by_session[r.session].append(r)

    def originating(self, stream: StreamRecord) -> list[RequestRecord]:
        """The JSON-RPC request(s) whose result the logical stream carries (the POST that
        opened it); empty for a standalone GET stream."""
        return self._by_exchange.get(stream.logical.exchange, [])

    def post_after(self, stream: StreamRecord, ts: float) -> bool:
        """Any later POST in the session: all an access log can show of a re-issue. An
        access log's times have one-second resolution: a POST logged after the stream's
        own line (it ended later) counts unless it began more than that before ``ts``."""
        posts = self.posts.get(stream.session.session_id, [])
        if any(p.start is not None and p.start > ts for p in posts):
            return True
        origin = stream.request_origin
        ended = stream.exchange.last_body_origin
        if origin is None or origin.kind != "line" or ended is None:
            return False
        mine = (ended.ts, rotation_key(origin.source), origin.number)
        return any(
            p.line is not None
            and p.start is not None
            and p.end is not None
            and (p.end, *p.line) > mine
            and p.start + LOG_TIME_RESOLUTION > ts
            for p in posts
        )

    def reissue_after(self, stream: StreamRecord, ts: float) -> RequestRecord | None:
        """A later request in the same session repeating the stream's originating call."""
        originals = self.originating(stream)
        if not originals:
            return None
        wanted = {r.signature for r in originals}
        for r in self._by_session.get(stream.session, []):
            if r.ts > ts and r.exchange is not stream.logical.exchange and r.signature in wanted:
                return r
        return None
