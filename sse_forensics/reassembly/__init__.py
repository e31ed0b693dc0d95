"""Reassembly: TCP byte streams → HTTP/1.1 exchanges → SSE events, each byte keeping its
origin. Parsers here are sans-I/O (h11-style): bytes in, typed events out."""
