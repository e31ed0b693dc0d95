"""Event classification in bulk: the ``kind``/``rpc_*``/``sig_*`` columns that
:func:`~sse_forensics.evidence.classify.classify` and
:func:`~sse_forensics.evidence.classify.put_classified` give one event at a time.

The common event of an MCP stream — one JSON-RPC object in ``data`` — is read here with one
``orjson.loads`` and a few dict lookups (``parse_messages``' rules for a single message);
everything else (signals, ``close``, empty data, batches, non-objects) goes through
``classify``/``put_classified`` themselves.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import orjson
import polars as pl

from sse_forensics.evidence.classify import classify, put_classified
from sse_forensics.facts.jsonrpc import _rpc_id
from sse_forensics.facts.signals import SIGNAL_EVENT_TYPES

if TYPE_CHECKING:
    from polars._typing import PolarsDataType  # a dtype class (pl.String) or instance

CLASS_DTYPES: dict[str, PolarsDataType] = {
    "kind": pl.String(),
    "rpc_kind": pl.String(),
    "rpc_method": pl.String(),
    "rpc_id": pl.String(),
    "rpc_more": pl.String(),
    "sig_first": pl.String(),
    "sig_last": pl.String(),
    "sig_valid": pl.Boolean(),
}
CLASS_COLUMNS = (
    "kind",
    "rpc_kind",
    "rpc_method",
    "rpc_id",
    "rpc_more",
    "sig_first",
    "sig_last",
    "sig_valid",
)
_MARKER = "jsonrpc"
_SPECIAL = SIGNAL_EVENT_TYPES | {"close"}
_VERSION = "protocolVersion"


def classify_events(events: pl.DataFrame) -> tuple[dict[str, pl.Series], list[int]]:
    """The classification columns of ``events`` (columns ``event``, ``data``,
    ``id_field``), in its row order, as Series of :data:`CLASS_DTYPES`; and the rows whose
    data may carry a protocol version: ``exchange_protocol_version`` finds one only in
    JSON-RPC responses, errors and ``initialize`` requests that name ``protocolVersion``."""
    n = events.height
    if not n:
        return {name: pl.Series(name, [], dtype=CLASS_DTYPES[name]) for name in CLASS_COLUMNS}, []
    flags = events.select(
        slow=pl.col("event").is_in(list(_SPECIAL)) | (pl.col("data") == ""),
        marked=pl.col("data").str.contains(_MARKER, literal=True),
    )
    slow_mask = flags["slow"].to_numpy()
    json_mask = flags["marked"].to_numpy() & ~slow_mask
    everything = bool(json_mask.all())
    json_rows = None if everything else np.flatnonzero(json_mask)
    data = events["data"] if json_rows is None else events["data"].gather(json_rows)
    datas = data.to_list()
    kinds, methods, ids, odd, versions = _json_rpc(datas)
    if json_rows is not None:
        versions = json_rows[versions].tolist() if versions else []
        odd = json_rows[odd].tolist() if odd else []
    cols: dict[str, pl.Series] = {}
    if json_rows is None:
        cols["rpc_kind"] = pl.Series("rpc_kind", kinds, dtype=pl.String)
        cols["rpc_method"] = pl.Series("rpc_method", methods, dtype=pl.String)
        cols["rpc_id"] = pl.Series("rpc_id", ids, dtype=pl.String)
    else:
        for name, values in (("rpc_kind", kinds), ("rpc_method", methods), ("rpc_id", ids)):
            cols[name] = pl.repeat(None, n, dtype=pl.String, eager=True).scatter(
                json_rows, pl.Series(values, dtype=pl.String)
            )
    cols["kind"] = (
        pl.DataFrame({"k": cols["rpc_kind"]})
        .select(pl.when(pl.col("k").is_not_null()).then(pl.lit("data")).otherwise(pl.lit("other")))
        .to_series()
    )
    for name in ("rpc_more", "sig_first", "sig_last", "sig_valid"):
        cols[name] = pl.repeat(None, n, dtype=CLASS_DTYPES[name], eager=True)
    # Signals, close, empty data and JSON that is not one object: classify() decides.
    slow = sorted(np.flatnonzero(slow_mask).tolist() + odd)
    if slow:
        rows = events.select("event", "data", "id_field")[slow]
        buf: dict[str, list[Any]] = {name: [] for name in CLASS_COLUMNS}
        seen_versions = set(versions)
        for at_row, (event, data_, id_field) in zip(slow, rows.iter_rows(), strict=True):
            k, rpc = classify(event, data_, id_field)
            put_classified(buf, k, rpc, event, data_)
            if _MARKER in data_ and _VERSION in data_:
                seen_versions.add(at_row)
        at = pl.Series(slow, dtype=pl.Int64)
        for name in CLASS_COLUMNS:
            cols[name] = (
                cols[name].scatter(at, pl.Series(buf[name], dtype=CLASS_DTYPES[name])).alias(name)
            )
        versions = sorted(seen_versions)
    return {name: cols[name].alias(name) for name in CLASS_COLUMNS}, versions


def _json_rpc(
    datas: list[str],
) -> tuple[list[Any], list[Any], list[Any], list[int], list[int]]:
    """``parse_messages`` for data that holds one JSON object: per data, the message kind
    (None: not JSON-RPC), method and id; ``odd``: positions of data that is JSON but not an
    object (a batch, say), left to ``classify``; ``versions``: positions of responses,
    errors and initialize requests that name ``protocolVersion``."""
    kinds: list[Any] = []
    methods: list[Any] = []
    ids: list[Any] = []
    odd: list[int] = []
    versions: list[int] = []
    add_kind, add_method, add_id = kinds.append, methods.append, ids.append
    loads = orjson.loads
    decode_error = orjson.JSONDecodeError
    for data in datas:
        try:
            obj = loads(data)
        except decode_error:
            obj = None
        if obj.__class__ is not dict:
            if obj is not None:
                odd.append(len(kinds))
            add_kind(None)
            add_method(None)
            add_id(None)
            continue
        if obj.get("jsonrpc") != "2.0":
            add_kind(None)
            add_method(None)
            add_id(None)
            continue
        method = obj.get("method")
        if isinstance(method, str):
            add_kind("request" if "id" in obj else "notification")
            add_method(method)
            if method == "initialize" and _VERSION in data:
                versions.append(len(ids))
        elif "result" in obj or "error" in obj:
            add_kind("response" if "result" in obj else "error")
            add_method(None)
            if _VERSION in data:
                versions.append(len(ids))
        else:
            add_kind(None)
            add_method(None)
            add_id(None)
            continue
        value = obj.get("id")
        # _rpc_id: orjson gives ints within 64 bits (larger ones as floats), written as str().
        if value is None or value.__class__ is str:
            add_id(value)
        elif value.__class__ is int:
            add_id(str(value))
        else:
            add_id(_rpc_id(value))
    return kinds, methods, ids, odd, versions
