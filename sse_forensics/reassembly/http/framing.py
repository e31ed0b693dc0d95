"""Which framing a message body has, from its head (RFC 9112 §6.3), as pure functions."""

from __future__ import annotations

from typing import NamedTuple

from sse_forensics.reassembly.http.fields import (
    content_length,
    field_values,
    last_coding_is_chunked,
)
from sse_forensics.reassembly.http.state import Framing
from sse_forensics.reassembly.http_events import Headers


class BodyFraming(NamedTuple):
    framing: Framing
    length: int = 0  # Content-Length
    problem: str | None = None  # a broken rule, reported as a ProtocolError


def request_framing(headers: Headers) -> BodyFraming:
    """RFC 9112 §6.3 rules 4–7 for a request: chunked, else Content-Length, else none.
    ``problem`` set: the length cannot be known (the message ends ``unknown-length``)."""
    transfer_encoding = field_values(headers, "transfer-encoding")
    if transfer_encoding is not None:
        if not last_coding_is_chunked(transfer_encoding):
            rule = "request Transfer-Encoding without final chunked (RFC 9112 §6.3 rule 4)"
            return BodyFraming(Framing.NONE, problem=rule)
        return BodyFraming(Framing.CHUNKED)
    value = field_values(headers, "content-length")
    if value is not None:
        length = content_length(value)
        if length is None:
            return BodyFraming(Framing.NONE, problem=f"invalid Content-Length {value!r}")
        return BodyFraming(Framing.CONTENT_LENGTH, length)
    return BodyFraming(Framing.NONE)


def response_framing(headers: Headers) -> BodyFraming:
    """RFC 9112 §6.3 rules 3–8 for a response that has a body (rule 1, no body after HEAD,
    1xx, 204 or 304, is the caller's: it needs the request). ``problem`` set: an invalid
    Content-Length, the body is read until the close."""
    transfer_encoding = field_values(headers, "transfer-encoding")
    if transfer_encoding is not None:
        # Rule 3: chunked when it is the final coding, otherwise read until close.
        if last_coding_is_chunked(transfer_encoding):
            return BodyFraming(Framing.CHUNKED)
        return BodyFraming(Framing.UNTIL_CLOSE)
    value = field_values(headers, "content-length")
    if value is not None:
        length = content_length(value)
        if length is None:
            problem = f"invalid Content-Length {value!r}; body read until close"
            return BodyFraming(Framing.UNTIL_CLOSE, problem=problem)
        return BodyFraming(Framing.CONTENT_LENGTH, length)
    # Rule 8: the body is delimited by the close of the connection.
    return BodyFraming(Framing.UNTIL_CLOSE)
