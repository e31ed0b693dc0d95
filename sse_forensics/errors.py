"""Problems with user input are values, not exceptions (docs/exit-codes.md: exit code 3).

A reader that cannot read part of its input records a :class:`ReadError` and goes on; the
scan reports them under ``errors``. Only input that is not a capture or log at all raises
:class:`UnreadableInput`, which the CLI turns into one clear line and exit code 2.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ReadError:
    """Something in the input could not be read or made sense of.

    ``frame`` (capture) or ``line`` (log) says where, when it is known.
    """

    source: str
    what: str
    frame: int | None = None
    line: int | None = None
    ts: float | None = None

    def as_dict(self) -> dict[str, object]:
        out: dict[str, object] = {"source": self.source, "what": self.what}
        if self.frame is not None:
            out["frame"] = self.frame
        if self.line is not None:
            out["line"] = self.line
        if self.ts is not None:
            out["ts"] = self.ts
        return out


class UnreadableInput(Exception):
    """The file is not a capture (or log) this tool can read at all."""

    def __init__(self, source: str, reason: str) -> None:
        super().__init__(f"{source}: {reason}")
        self.source = source
        self.reason = reason
