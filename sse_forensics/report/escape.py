"""Captured bytes are attacker-controlled: before any of it reaches a terminal, control
characters (C0, C1, DEL), ANSI escapes and bidirectional overrides are shown escaped.
Rich renders these strings as :class:`rich.text.Text`, never as markup."""

from __future__ import annotations

import html
import re
from collections.abc import Iterable

_UNSAFE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def _escape_char(m: re.Match[str]) -> str:
    code = ord(m.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(value: object, limit: int | None = 200) -> str:
    """``value`` as text safe for a terminal: unsafe characters as ``\\xNN`` escapes,
    newlines and tabs as ``\\n``/``\\t``, cut to ``limit`` characters."""
    text = "" if value is None else str(value)
    if limit is not None and len(text) > limit:
        text = text[: limit - 1] + "…"
    text = text.replace("\\", "\\\\") if _UNSAFE.search(text) else text
    text = text.replace("\n", "\\n").replace("\t", "\\t")
    return _UNSAFE.sub(_escape_char, text)


def html_text(value: object, limit: int | None = None) -> str:
    """``value`` for an HTML page: :func:`printable`, then HTML-escaped (quotes too, so it
    may stand in an attribute). Text already made printable passes through unchanged but
    for the HTML escaping."""
    return html.escape(printable(value, limit), quote=True)


def find_session(requested: str, sessions: Iterable[str]) -> str | None:
    """The session ``requested`` names: itself, or the one whose :func:`printable` form it
    is — a session ID holding NUL cannot be a command-line argument, so the drill-down
    command the summary prints names it by its escaped form (``s\\x00id``)."""
    known = list(sessions)
    if requested in known:
        return requested
    return next((s for s in known if printable(s, None) == requested), None)
