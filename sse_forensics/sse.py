"""Public, stable import location of the WHATWG ``text/event-stream`` parser.

``from sse_forensics.sse import SSEParser, SSEEvent, SSEComment`` — the implementation lives
in :mod:`sse_forensics.reassembly.sse`; see ``docs/sse-parser.md``.
"""

from sse_forensics.reassembly.sse import (
    DEFAULT_EVENT_TYPE,
    UTF8_BOM,
    AnomalyKind,
    SSEAnomaly,
    SSEComment,
    SSEEvent,
    SSEParser,
    SSEPartialBlock,
)

__all__ = [
    "DEFAULT_EVENT_TYPE",
    "UTF8_BOM",
    "AnomalyKind",
    "SSEAnomaly",
    "SSEComment",
    "SSEEvent",
    "SSEParser",
    "SSEPartialBlock",
]
