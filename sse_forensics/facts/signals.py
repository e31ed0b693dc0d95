"""The server's gap signals (docs/profile.md, "Gap signalling") read from SSE events.

| event type                | JSON form                                  | text form |
|---------------------------|--------------------------------------------|-----------|
| `stream-gap`              | `{"first": F, "last": L}`                  | `F-L`/`F` |
| `resume-gap`              | `{"requested": R, "oldest_retained": O}`   | `R-O`     |
| `backpressure-disconnect` | `{"last_written_id": W}`                   | `W`       |
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import orjson

STREAM_GAP = "stream-gap"
RESUME_GAP = "resume-gap"
BACKPRESSURE_DISCONNECT = "backpressure-disconnect"
SIGNAL_EVENT_TYPES = frozenset({STREAM_GAP, RESUME_GAP, BACKPRESSURE_DISCONNECT})


@dataclass(frozen=True, slots=True)
class SignalPayload:
    """What a signal event says, IDs as strings (as on the wire)."""

    first: str | None = None
    last: str | None = None
    valid: bool = True


def _id_text(value: object) -> str | None:
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, int | str):
        return str(value)
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return None


_SHAPE = re.compile(r"[A-Za-z]+|\d+|.")


def _shape(text: str) -> list[str]:
    return ["a" if t.isalpha() else "9" if t.isdigit() else t for t in _SHAPE.findall(text)]


def split_range(text: str) -> tuple[str, str] | None:
    """Split ``F-L`` where IDs may themselves contain ``-`` (UUIDs, ``s1-8``): choose the
    dash whose two sides have the same shape; fall back to the only dash."""
    text = text.strip()
    positions = [i for i, c in enumerate(text) if c == "-" and 0 < i < len(text) - 1]
    if not positions:
        return None
    for i in positions:
        left, right = text[:i].strip(), text[i + 1 :].strip()
        if left and right and _shape(left) == _shape(right):
            return left, right
    if len(positions) == 1:
        i = positions[0]
        return text[:i].strip(), text[i + 1 :].strip()
    # Random IDs of one format (UUIDs) differ in shape but not in length or dash count.
    for i in positions:
        left, right = text[:i].strip(), text[i + 1 :].strip()
        if len(left) == len(right) and left.count("-") == right.count("-"):
            return left, right
    return None


_PAYLOAD_KEYS: dict[str, tuple[str, str | None]] = {
    STREAM_GAP: ("first", "last"),
    RESUME_GAP: ("requested", "oldest_retained"),
    BACKPRESSURE_DISCONNECT: ("last_written_id", None),
}


def parse_signal(event_type: str, data: str | None) -> SignalPayload:
    """Read the payload of a signal event; ``valid`` is False when it cannot be read, or
    when ``event_type`` is none of the three signals (an event log's record may name any
    type: it is never a reason to fail)."""
    keys = _PAYLOAD_KEYS.get(event_type)
    if keys is None or data is None:
        return SignalPayload(valid=False)
    text = data.strip()
    try:
        obj = orjson.loads(text) if text[:1] in ("{", "[", '"') or text[:1].isdigit() else None
    except orjson.JSONDecodeError:
        obj = None
    if isinstance(obj, dict):
        first = _id_text(obj.get(keys[0]))
        last = _id_text(obj.get(keys[1])) if keys[1] else None
        if keys[1] is None:
            return SignalPayload(first, first, first is not None)
        if event_type == STREAM_GAP and first is not None and last is None:
            last = first
        return SignalPayload(first, last, first is not None and last is not None)
    if isinstance(obj, str):  # a JSON string holding the text form: "8-12"
        text = obj.strip()
    if isinstance(obj, int) and not isinstance(obj, bool):
        return SignalPayload(str(obj), str(obj), keys[1] is None or event_type == STREAM_GAP)
    if not text:
        return SignalPayload(valid=False)
    if keys[1] is None:
        return SignalPayload(text, text)
    pair = split_range(text)
    if pair is not None:
        return SignalPayload(pair[0], pair[1])
    if event_type == STREAM_GAP:
        return SignalPayload(text, text)
    return SignalPayload(valid=False)
