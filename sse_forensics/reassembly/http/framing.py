"""Which framing a message body has, from its head (RFC 9112 §6.3), as pure functions."""

from __future__ import annotations

from sse_forensics.reassembly.http.fields import content_length, last_coding_is_chunked
from sse_forensics.reassembly.http.state import (
    CHUNKED,
    CONTENT_LENGTH,
    NO_BODY,
    UNTIL_CLOSE,
    Framing,
)

BodyFraming = tuple[Framing, int, str | None]
"""The framing, the Content-Length (0 for other framings) and the rule the head broke
(reported as a ProtocolError), if any. A plain tuple: one is made per message."""


def request_framing(transfer_encoding: str | None, value: str | None) -> BodyFraming:
    """RFC 9112 §6.3 rules 4–7 for a request with these Transfer-Encoding and
    Content-Length fields: chunked, else Content-Length, else none. A problem: the
    length cannot be known (the message ends ``unknown-length``)."""
    if transfer_encoding is not None:
        if not last_coding_is_chunked(transfer_encoding):
            rule = "request Transfer-Encoding without final chunked (RFC 9112 §6.3 rule 4)"
            return (NO_BODY, 0, rule)
        return (CHUNKED, 0, None)
    if value is not None:
        length = content_length(value)
        if length is None:
            return (NO_BODY, 0, f"invalid Content-Length {value!r}")
        return (CONTENT_LENGTH, length, None)
    return (NO_BODY, 0, None)


def response_framing(transfer_encoding: str | None, value: str | None) -> BodyFraming:
    """RFC 9112 §6.3 rules 3–8 for a response with these Transfer-Encoding and
    Content-Length fields that has a body (rule 1, no body after HEAD, 1xx, 204 or 304, is
    the caller's: it needs the request). A problem: an invalid Content-Length, the
    body is read until the close."""
    if transfer_encoding is not None:
        # Rule 3: chunked when it is the final coding, otherwise read until close.
        if last_coding_is_chunked(transfer_encoding):
            return (CHUNKED, 0, None)
        return (UNTIL_CLOSE, 0, None)
    if value is not None:
        length = content_length(value)
        if length is None:
            problem = f"invalid Content-Length {value!r}; body read until close"
            return (UNTIL_CLOSE, 0, problem)
        return (CONTENT_LENGTH, length, None)
    # Rule 8: the body is delimited by the close of the connection.
    return (UNTIL_CLOSE, 0, None)
