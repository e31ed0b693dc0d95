"""Ingest: the only layer that opens files. Capture readers yield frames; decoders turn
frames into TCP segments with struct-level parsing (no per-packet objects)."""
