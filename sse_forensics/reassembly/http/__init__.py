"""Sans-I/O HTTP/1.1 exchange parser for reassembled TCP streams (RFC 9112).

:class:`HTTPConnection` takes both directions of one connection — bytes in, typed events
(:mod:`.http_events`) out, no I/O, in the manner of h11 — and pairs each response with
the request it answers by order (RFC 9112 §9.3), so pipelining needs no timing.

Why not httptools (llhttp) or h11: they are built for live endpoints and stop at the
first error. A capture needs more: resynchronising after a capture hole (a missing-bytes
span inside a header section or chunked body), knowing that a response answers ``HEAD``
(the request is in the other direction), and the frame each body byte came from. So this
is a small parser of its own, written for the hot path: heads and chunk-size lines are
found with ``bytes.find``/regex searches, and body bytes pass through as slices of the
frame's payload, never byte by byte.

Conventions:

- Each request gets the next exchange number (0, 1, 2, …). A response whose request was
  not seen (the capture started mid-connection, or the request fell in a hole) gets the
  next number of its own: it is an exchange with no ``RequestHead``.
- Feed both directions in capture order: pairing is by order, and a response that arrives
  while no request is pending is numbered as its own exchange — unless the next request
  parsed was sent before it (its bytes were held behind a TCP hole), which then takes
  that response's number.
- A head's ``origin`` is the frame holding its first byte; a body event's is the frame
  holding its bytes (after content decoding: the frame whose coded bytes produced it);
  an end's is the frame holding the last byte, or the frame that ended the direction.
- Nothing the bytes contain raises: a broken rule is a :class:`ProtocolError` value, and
  the direction resynchronises at the next message start (bytes that are not HTTP give
  one error, then are scanned silently).
- ``ResponseEnd.reason`` / ``RequestEnd.reason``: ``complete``; ``tunnel`` (101, or 2xx
  to CONNECT: a :class:`Tunnel` precedes it and both directions are ignored afterwards;
  the bytes of either direction that followed the switch in what was fed, held or not,
  are kept for the caller, :meth:`HTTPConnection.take_tunnel_bytes`, e.g. HTTP/2 after
  ``Upgrade: h2c``);
  ``fin``/``rst``/``capture-end`` (the direction ended first; a close-delimited body ended
  by ``fin`` is complete, RFC 9112 §6.3 rule 8); ``missing-bytes`` (a hole the framing
  could not cross, or a response lost whole in a hole — that end has no head and no
  origin); ``malformed-chunk``; ``unknown-length`` (request with unusable framing).
  A hole the framing crosses (inside a Content-Length body or one chunk, or anywhere in a
  close-delimited body) gives a :class:`BodyGap` and the message can still end complete.
- Event-stream pickup: after a server-side hole that lost the message boundaries (above
  all the capture starting mid-stream), bytes that are not a status line are searched
  (within :data:`PICKUP_WINDOW`) for an event-stream body — SSE field lines, chunked or
  not. If found, the parser infers a :class:`ResponseHead` with ``head_captured=False``
  (status 0), gives a :class:`BodyGap` for the bytes before where it resumed, then reads
  the body as usual. Long-lived streams predate the capture that records an incident.

Layout (in the manner of h11):

- :mod:`.connection` — :class:`HTTPConnection`: pairing, framing choice, tunnels.
- :mod:`.reader` — one direction's receive buffer and state machine
  (:class:`~.state.ReadState`); it stops at every decision the connection makes
  (:mod:`.asks`).
- :mod:`.readers` — the table of what each state reads: :mod:`.heads`,
  :mod:`.content_length`, :mod:`.chunked`, :mod:`.close_delimited`, :mod:`.tunnel`,
  :mod:`.resync`, :mod:`.pickup` (event-stream bodies whose head was not captured).
- :mod:`.grammar` (the ABNF as regexes), :mod:`.fields` and :mod:`.framing` (RFC 9112
  §5 and §6.3 as pure functions).
"""

from __future__ import annotations

from sse_forensics.reassembly.content_coding import CODING_CAPPED
from sse_forensics.reassembly.http.connection import HEAD_NOT_CAPTURED, HTTPConnection
from sse_forensics.reassembly.http.grammar import MAX_CHUNK_LINE, MAX_HEAD
from sse_forensics.reassembly.http.pickup import PICKUP_WINDOW
from sse_forensics.reassembly.http.reader import CODING_CUT

__all__ = [
    "CODING_CAPPED",
    "CODING_CUT",
    "HEAD_NOT_CAPTURED",
    "MAX_CHUNK_LINE",
    "MAX_HEAD",
    "PICKUP_WINDOW",
    "HTTPConnection",
]
