"""sse-forensics: offline forensic analysis of resumable SSE streams (MCP streamable HTTP).

Pipeline, one direction: ``ingest`` → ``reassembly`` (tcp, http, sse) → ``facts`` →
``engine`` (rules from ``rules/``) → ``report``.
"""

__version__ = "0.2.0"
