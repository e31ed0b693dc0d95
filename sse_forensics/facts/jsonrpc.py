"""Reading JSON-RPC 2.0 messages out of request bodies and SSE ``data`` (MCP: every message
is JSON-RPC; docs/profile.md, "Events that are not data": only events whose ``data`` carries
a JSON-RPC message count as data events)."""

from __future__ import annotations

from typing import NamedTuple

import orjson


class RpcMessage(NamedTuple):
    """One JSON-RPC message (a NamedTuple: one is built per SSE data event)."""

    kind: str  # "request" | "notification" | "response" | "error"
    method: str | None
    rpc_id: str | None
    params: object = None
    result: object = None


def _rpc_id(value: object) -> str | None:
    if value is None or isinstance(value, bool):
        return None
    return orjson.dumps(value).decode() if not isinstance(value, str) else value


def parse_messages(payload: bytes | str) -> list[RpcMessage] | None:
    """The JSON-RPC messages in ``payload`` (a single message or a batch), or ``None`` when
    it is not JSON-RPC at all."""
    # A cheap pre-check: non-JSON-RPC data never reaches the JSON parser.
    if "jsonrpc" not in payload if isinstance(payload, str) else b"jsonrpc" not in payload:
        return None
    try:
        obj = orjson.loads(payload)
    except (orjson.JSONDecodeError, TypeError):
        return None
    items = obj if isinstance(obj, list) else [obj]
    out: list[RpcMessage] = []
    for item in items:
        if not isinstance(item, dict) or item.get("jsonrpc") != "2.0":
            return None
        method = item.get("method")
        rpc_id = _rpc_id(item.get("id"))
        if isinstance(method, str):
            kind = "request" if "id" in item else "notification"
            out.append(RpcMessage(kind, method, rpc_id, params=item.get("params")))
        elif "result" in item:
            out.append(RpcMessage("response", None, rpc_id, result=item.get("result")))
        elif "error" in item:
            out.append(RpcMessage("error", None, rpc_id, result=item.get("error")))
        else:
            return None
    return out or None


def protocol_version(messages: list[RpcMessage]) -> str | None:
    """``protocolVersion`` of an ``initialize`` request's params or its result."""
    for msg in messages:
        source = msg.params if msg.kind == "request" else msg.result
        if isinstance(source, dict):
            version = source.get("protocolVersion")
            if isinstance(version, str) and (msg.method in (None, "initialize")):
                return version
    return None
