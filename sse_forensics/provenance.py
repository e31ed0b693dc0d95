"""Where a byte came from.

Every fact the analyzer derives cites its origin: the input file, the frame (1-based
record number within that file, as Wireshark numbers frames) or log line, and the
capture timestamp. Findings copy these into their ``evidence``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

OriginKind = Literal["frame", "line"]


@dataclass(frozen=True, slots=True)
class Origin:
    """One frame of a capture file (or one line of a log file)."""

    source: str
    number: int
    ts: float
    kind: OriginKind = "frame"
