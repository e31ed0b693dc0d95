"""What each SSE event is (docs/profile.md, "Events that are not data"), decided once at ingest:
data events carry a JSON-RPC message; priming events are an ``id`` with empty data;
``event: close`` and the gap signals are control events; anything else is ``other``."""

from __future__ import annotations

from typing import Any

import orjson

from sse_forensics.facts.jsonrpc import RpcMessage, parse_messages
from sse_forensics.facts.signals import SIGNAL_EVENT_TYPES, parse_signal


def classify(event: str, data: str, id_field: str | None) -> tuple[str, list[RpcMessage] | None]:
    """(kind, JSON-RPC messages of a data event)."""
    if event in SIGNAL_EVENT_TYPES:
        return "signal", None
    if event == "close":
        return "close", None
    if data == "":
        return ("priming" if id_field is not None else "other"), None
    rpc = parse_messages(data)
    if not rpc:
        return "other", None
    return "data", rpc


def put_classified(
    buf: dict[str, list[Any]], kind: str, rpc: list[RpcMessage] | None, event: str, data: str
) -> None:
    """Append the ``kind``, ``rpc_*`` and ``sig_*`` columns of one event."""
    buf["kind"].append(kind)
    if rpc:
        first = rpc[0]
        buf["rpc_kind"].append(first.kind)
        buf["rpc_method"].append(first.method)
        buf["rpc_id"].append(first.rpc_id)
        more = [[m.kind, m.method, m.rpc_id] for m in rpc[1:]]
        buf["rpc_more"].append(orjson.dumps(more).decode() if more else None)
    else:
        buf["rpc_kind"].append(None)
        buf["rpc_method"].append(None)
        buf["rpc_id"].append(None)
        buf["rpc_more"].append(None)
    if kind == "signal" and event in SIGNAL_EVENT_TYPES:
        sig = parse_signal(event, data)
        buf["sig_first"].append(sig.first)
        buf["sig_last"].append(sig.last)
        buf["sig_valid"].append(sig.valid)
    else:
        buf["sig_first"].append(None)
        buf["sig_last"].append(None)
        buf["sig_valid"].append(None)
