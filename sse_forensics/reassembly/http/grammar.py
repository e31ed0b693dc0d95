"""The HTTP/1.1 grammar the exchange parser reads (RFC 9112, RFC 9110 §5.6), as regexes and
the size limits that bound each element, in the manner of h11's ``_abnf``.

Two kinds of pattern: the *strict* ones read an element where the framing says it starts
(start lines, field names, chunk-size lines); the *resync* ones find where to resume after
a capture hole, and are stricter still so that body bytes are not taken for a message start.
"""

from __future__ import annotations

import re

MAX_HEAD = 64 * 1024
"""Cap on a header section (and a trailer section). h11 and llhttp use 16–80 KiB."""
MAX_CHUNK_LINE = 4096
"""Cap on a chunk-size line with its extensions."""
CHUNK_RESYNC_WINDOW = 256 * 1024
"""How far past a hole in a chunked body to look for the next chunk header before giving
the body up: a server flushes chunks far smaller than this."""
RESYNC_TAIL = 64
"""Bytes kept across frames while searching, so a message start or chunk header split
between two frames is still found (longer than any pattern searched for)."""

# RFC 9112 §2.2: a recipient MAY recognise a lone LF as a line terminator.
HEAD_END = re.compile(rb"\r?\n\r?\n")
TOKEN = rb"[!#$%&'*+.^_`|~0-9A-Za-z-]+"  # RFC 9110 §5.6.2
FIELD_NAME = re.compile(TOKEN.decode())
OWS = " \t"  # RFC 9110 §5.6.3
REQUEST_LINE = re.compile(rb"(" + TOKEN + rb")[ \t]+([^ \t]+)[ \t]+(HTTP/[0-9]\.[0-9])[ \t]*")
STATUS_LINE = re.compile(rb"(HTTP/[0-9]\.[0-9])[ \t]+([0-9]{3})(?:[ \t](.*))?")
METHOD_PREFIX = re.compile(rb"[!#$%&'*+.^_`|~0-9A-Za-z-]{1,32}(?: |\Z)")
VERSION_PREFIX = b"HTTP/"
CHUNK_SIZE_DIGITS = re.compile(rb"[0-9A-Fa-f]{1,16}")  # RFC 9112 §7.1: chunk-size = 1*HEXDIG

# Where to resume after a hole: a plausible message start (strict, to avoid matching body
# bytes) and a plausible chunk header (RFC 9112 §7.1: chunk-size [chunk-ext] CRLF).
RESPONSE_START = re.compile(rb"HTTP/1\.[01] [1-5][0-9][0-9][ \r\n]")
REQUEST_START = re.compile(
    rb"(?:GET|POST|PUT|DELETE|HEAD|OPTIONS|PATCH|CONNECT|TRACE|PROPFIND|PROPPATCH|MKCOL|COPY"
    rb"|MOVE|LOCK|UNLOCK|REPORT|SEARCH) (?:/|\*|[A-Za-z][A-Za-z0-9+.-]*:)"
)
CHUNK_HEADER = re.compile(rb"\r\n([0-9A-Fa-f]{1,8})(?:[ \t]*;[^\r\n]*)?\r\n")
CHUNK_HEADER_AT_HOLE = re.compile(rb"(?:\r?\n)?([0-9A-Fa-f]{1,8})(?:[ \t]*;[^\r\n]*)?\r\n")
NEXT_CHUNK_HEADER = re.compile(rb"[0-9A-Fa-f]{1,8}(?:[ \t]*;[^\r\n]*)?\r\n")
CHUNK_HEADER_PREFIX = re.compile(rb"[0-9A-Fa-f]{1,8}(?:[ \t]*(?:;[^\r\n]*)?)?\r?")
