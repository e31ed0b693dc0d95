"""Header field lines and what the framing rules read of them (RFC 9112 §5, §6.3)."""

from __future__ import annotations

from sse_forensics.reassembly.http.grammar import FIELD_NAME, OWS
from sse_forensics.reassembly.http_events import Headers


def parse_fields(section: str) -> tuple[Headers, bool]:
    """RFC 9112 §5: ``field-name ":" OWS field-value OWS``, and whether a line was invalid
    (it is skipped). The section is decoded latin-1 (never fails; RFC 9110 §5.5: field
    values are historically ISO-8859-1)."""
    headers: Headers = []
    bad = False
    if not section:
        return headers, bad
    for line in section.split("\n"):
        if line[-1:] == "\r":
            line = line[:-1]
        if line[:1] in (" ", "\t") and headers:
            # RFC 9112 §5.2: obs-fold; a recipient may replace it with SP.
            name, value = headers[-1]
            headers[-1] = (name, value + " " + line.strip(OWS))
            continue
        name, sep, value = line.partition(":")
        if not sep or FIELD_NAME.fullmatch(name) is None:
            bad = True
            continue
        headers.append((name, value.strip(OWS)))
    return headers, bad


INVALID_FIELD_LINE = "invalid header field line ignored (RFC 9112 §5)"


def field_values(headers: Headers, name: str) -> str | None:
    """All field lines of ``name`` combined with commas (RFC 9110 §5.3)."""
    values = [v for k, v in headers if k.lower() == name]
    return ", ".join(values) if values else None


def content_length(value: str) -> int | None:
    """RFC 9110 §8.6: 1*DIGIT; a list of identical values is the same length (RFC 9112
    §6.3 rule 5). ``None`` when invalid."""
    lengths = {v.strip() for v in value.split(",")}
    if len(lengths) != 1:
        return None
    (length,) = lengths
    return int(length) if length.isdigit() and length.isascii() else None


def last_coding_is_chunked(transfer_encoding: str) -> bool:
    """RFC 9112 §6.3 rule 4: a body is chunked when ``chunked`` is the final coding."""
    codings = [c.strip().lower() for c in transfer_encoding.split(",") if c.strip()]
    return bool(codings) and codings[-1].split(";", 1)[0].strip() == "chunked"


def applied_codings(content_encoding: str | None, transfer_encoding: str | None) -> str | None:
    """Every coding applied to the body, in order: content codings, then the transfer
    codings other than ``chunked`` (RFC 9112 §6.1: a recipient undoes them; ``gzip,
    chunked`` is gzip inside the chunks)."""
    codings = [content_encoding] if content_encoding else []
    if transfer_encoding:
        codings += [
            c for c in transfer_encoding.split(",") if c.strip() and c.strip().lower() != "chunked"
        ]
    return ", ".join(codings) or None
