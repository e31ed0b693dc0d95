"""The scan-wide numbers of the log pseudo-connections, found without a string per stream,
group or client address in the process that numbers them (issue 9: peak RSS flat in the
input size; the 5.8 GB five-log set held 16 M stream names and group keys there).

What carries strings stays in the partition it belongs to, in the log :class:`Spill`:

- ``named``: each stream's session as a batch first names it, by stream partition;
  :func:`named_sessions` keeps the first in reading order (what
  :class:`~sse_forensics.ingest.logs.StreamSessions` learns batch by batch).
- ``groups``: a session partition's event-log groups (:data:`.from_logs.GROUP_ORDER`);
  :func:`group_keys` gives their places in the scan's order as numbers only,
  :func:`number_keys` numbers all partitions' from those, and :func:`group_ids` puts a
  partition's numbers back beside its groups.
- ``firsts``: each client address's first line as the lines pass, by client partition;
  :func:`client_keys` gives the line of each client's first (numbers only), numbered in
  :data:`.from_logs.LINE_ORDER` on the client, and :func:`client_ids` joins them back.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import polars as pl

from sse_forensics.evidence import from_logs as F
from sse_forensics.evidence.log_records import GROUP_KEYS
from sse_forensics.evidence.tables import split_by
from sse_forensics.ingest.logs import StreamSessions
from sse_forensics.ingest.logs.model import own_strings

if TYPE_CHECKING:
    import numpy.typing as npt

    from sse_forensics.evidence.log_partitions import Spill

# A group's tie-break (untimed, source, line) packed into one unsigned 64-bit key when
# the source and the line fit beside each other: two sort keys instead of four.
_LINE_BITS = 40
_SOURCE_BITS = 63 - _LINE_BITS
_LAST_LINE = np.iinfo(np.int64).max  # a null line sorts last (nulls_last)


def first_names(events: pl.DataFrame) -> pl.DataFrame:
    """Each stream of an event-log batch with the first session a record of it names
    (``stream``, ``__session``), in its own buffers (:func:`~.model.own_strings`)."""
    return own_strings(
        events.select("stream", "session")
        .filter(pl.col("session").is_not_null() & pl.col("stream").is_not_null())
        .group_by("stream", maintain_order=True)
        .agg(pl.col("session").first().alias("__session"))
    )


def named_sessions(spill: Spill, bucket: int) -> StreamSessions:
    """The sessions of one stream partition's streams: the first name of each in reading
    order (the ``named`` parts in the order they were written)."""
    sessions = StreamSessions()
    named = spill.load("named", bucket)
    if named.height:
        sessions.known = named.unique("stream", keep="first", maintain_order=True)
    return sessions


@dataclass(slots=True)
class GroupKeys:
    """One session partition's event-log groups as places in the scan's order, in the
    partition's order: ``first_ts``, ``src`` (the index of ``first_src`` in ``sources``,
    sorted) and ``first_line`` (the groups themselves are the spill's ``groups``)."""

    order: pl.DataFrame = field(default_factory=pl.DataFrame)
    sources: list[str] = field(default_factory=list)


def group_keys(spill: Spill, bucket: int, groups: pl.DataFrame) -> GroupKeys:
    """Keep ``groups`` (:func:`.log_partitions.group_order` of partition ``bucket``, in
    :data:`.from_logs.GROUP_ORDER`) in ``spill`` and return their places without strings."""
    if not groups.height:
        return GroupKeys()
    spill.hold("groups", bucket, groups.select(GROUP_KEYS))
    src = groups.get_column("first_src")
    sources = sorted(src.drop_nulls().unique().to_list())
    code = src.replace_strict(sources, range(len(sources)), default=None, return_dtype=pl.UInt32)
    order = groups.select("first_ts", "first_line").with_columns(code.alias("src"))
    return GroupKeys(order, sources)


def number_keys(keys: dict[int, GroupKeys], first_id: int) -> dict[int, pl.Series]:
    """The ``conn_id`` of every partition's groups (in each partition's order), numbered
    from ``first_id`` in :data:`.from_logs.GROUP_ORDER` over all of them: by ``order_ts``
    (``first_ts``, 0 when null), untimed last, then source name and line. Holds a few
    numbers per group, no string."""
    parts = [(b, k) for b, k in sorted(keys.items()) if k.order.height]
    if not parts:
        return {}
    sources = sorted({s for _, k in parts for s in k.sources})
    rank = {s: i for i, s in enumerate(sources)}
    n = sum(k.order.height for _, k in parts)
    ts = np.empty(n, np.float64)
    untimed = np.empty(n, np.bool_)
    src = np.empty(n, np.int64)
    line = np.empty(n, np.int64)
    at = 0
    for _, k in parts:
        end = at + k.order.height
        first = k.order.get_column("first_ts")
        ts[at:end] = first.fill_null(0.0).to_numpy()
        untimed[at:end] = first.is_null().to_numpy()
        codes = np.array([rank[s] for s in k.sources] + [len(sources)], np.int64)  # null last
        src[at:end] = codes[k.order.get_column("src").fill_null(len(k.sources)).to_numpy()]
        line[at:end] = k.order.get_column("first_line").fill_null(_LAST_LINE).to_numpy()
        at = end
    order = _lexsort(ts, untimed, src, line)
    del ts, untimed, src, line
    rank_of = np.empty(n, np.int64)
    rank_of[order] = np.arange(first_id, first_id + n, dtype=np.int64)
    del order
    out, at = {}, 0
    for b, k in parts:
        out[b] = pl.Series("conn_id", rank_of[at : at + k.order.height])
        at += k.order.height
    return out


def _lexsort(
    ts: npt.NDArray[np.float64],
    untimed: npt.NDArray[np.bool_],
    src: npt.NDArray[np.int64],
    line: npt.NDArray[np.int64],
) -> npt.NDArray[np.intp]:
    """Row order by (ts, untimed, src, line): the last three packed into one key when
    they fit (no line past 2**40, no more sources than 2**23)."""
    if len(line) and line.min() >= 0 and src.max() < (1 << _SOURCE_BITS):
        top = (1 << _LINE_BITS) - 1  # a null line's place: after every line that fits
        fits = line < top
        if fits.all() or not (line[~fits] != _LAST_LINE).any():
            packed = np.minimum(line, top).astype(np.uint64)
            packed |= src.astype(np.uint64) << np.uint64(_LINE_BITS)
            packed |= untimed.astype(np.uint64) << np.uint64(63)
            return np.lexsort((packed, ts))
    return np.lexsort((line, src, untimed, ts))


def group_ids(spill: Spill, bucket: int, conn_ids: pl.Series | None) -> pl.DataFrame:
    """A session partition's groups (:data:`GROUP_KEYS`) with their ``conn_id``."""
    groups = spill.load("groups", bucket, GROUP_KEYS)
    if conn_ids is None or not groups.height:
        schema = {"session": pl.String, "stream": pl.String, "exchange_key": pl.String}
        return pl.DataFrame(schema={**schema, "conn_id": pl.Int64})
    return groups.with_columns(conn_ids.alias("conn_id"))


def client_firsts(spill: Spill, bucket: int) -> pl.DataFrame:
    """One client partition's addresses (``client``) with their first line's place
    (:data:`.from_logs.LINE_ORDER`), from the ``firsts`` its lines left as they passed,
    in that order (the first of a client's lines is the first of their firsts)."""
    firsts = spill.load("firsts", bucket)
    if not firsts.height:
        return firsts
    return firsts.sort(F.LINE_ORDER, nulls_last=True, maintain_order=True).unique(
        "client", keep="first", maintain_order=True
    )


def client_keys(spill: Spill, bucket: int) -> pl.DataFrame:
    """Step 4a on a worker: :func:`client_firsts` without the addresses."""
    return client_firsts(spill, bucket).select(F.LINE_ORDER)


def client_ids(spill: Spill, bucket: int, numbers: pl.DataFrame) -> pl.DataFrame:
    """One client partition's addresses (``client``) with the ``conn_id`` that
    ``numbers`` (:data:`.from_logs.LINE_ORDER` and ``conn_id`` of its clients' first
    lines) gives them: a line is known by its file and number."""
    firsts = client_firsts(spill, bucket)
    if not firsts.height:
        return pl.DataFrame(schema={"client": pl.String, "conn_id": pl.Int64})
    line = ["file_no", "line"]
    return firsts.join(numbers.select(*line, "conn_id"), on=line, how="left").select(
        "client", "conn_id"
    )


def number_lines(keys: dict[int, pl.DataFrame], first_id: int) -> dict[int, pl.DataFrame]:
    """Step 4a on the client: every client partition's first lines (:func:`client_keys`)
    numbered from ``first_id`` in :data:`.from_logs.LINE_ORDER` over all of them; per
    partition, ``file_no``, ``line`` and ``conn_id`` (three numbers per client address)."""
    bucket = [(b, k) for b, k in sorted(keys.items()) if k.height]
    frames = [k.with_columns(pl.lit(b, pl.Int64).alias(_BUCKET)) for b, k in bucket]
    if not frames:
        return {}
    numbered = (
        pl.concat(frames)
        .sort(F.LINE_ORDER, nulls_last=True)
        .with_row_index("conn_id", offset=first_id)
        .select(_BUCKET, "file_no", "line", pl.col("conn_id").cast(pl.Int64))
    )
    return {int(b): df for b, df in split_by(numbered, _BUCKET, keep_key=False).items()}


_BUCKET = "__bucket"
