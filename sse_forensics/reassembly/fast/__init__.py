"""Fast path of capture reassembly: packet index → evidence rows in bulk, equal to the exact
path's (:func:`~sse_forensics.reassembly.capture.reassemble` with ``CaptureEvidence``), which
it falls back to, connection by connection, wherever it cannot prove that."""

from sse_forensics.reassembly.fast.capture import (
    FastReassembly,
    RowSink,
    combine,
    reassemble_fast,
)

__all__ = ["FastReassembly", "RowSink", "combine", "reassemble_fast"]
