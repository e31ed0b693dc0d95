"""Log readers: access logs (nginx, Apache, JSON) and server event logs → the normalised
``access`` and ``events`` tables of :mod:`.model` (see docs/logs.md).

Layers, top down: :mod:`.read` (which files, detection, bookkeeping; :func:`read_logs` and
the batch API :func:`iter_log_batches`) → :mod:`.files`
(the only file I/O: decompression, line-aligned chunks, rotation order) → sans-I/O parsers
:mod:`.access` (text formats compiled by :mod:`.formats`) and :mod:`.jsonmap` (JSON field
maps, used for JSON access logs and event logs).
"""

from sse_forensics.ingest.logs.formats import PRESETS, AccessFormat, compile_format
from sse_forensics.ingest.logs.jsonmap import ACCESS_PRESETS, LogMap, load_log_map
from sse_forensics.ingest.logs.model import ACCESS_SCHEMA, EVENTS_SCHEMA, LogSet
from sse_forensics.ingest.logs.read import (
    LogBatch,
    LogBatches,
    StreamSessions,
    attach_sessions,
    iter_log_batches,
    iter_log_chunks,
    read_logs,
    sniff_log,
)

__all__ = [
    "ACCESS_PRESETS",
    "ACCESS_SCHEMA",
    "EVENTS_SCHEMA",
    "PRESETS",
    "AccessFormat",
    "LogBatch",
    "LogBatches",
    "LogMap",
    "LogSet",
    "StreamSessions",
    "attach_sessions",
    "compile_format",
    "iter_log_batches",
    "iter_log_chunks",
    "load_log_map",
    "read_logs",
    "sniff_log",
]
