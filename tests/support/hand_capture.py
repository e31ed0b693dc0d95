"""Exchanges built by hand and judged the way a scan judges a capture (one partition)."""

from __future__ import annotations

import random
import uuid

from sse_forensics.engine.registry import load_rules
from sse_forensics.evidence.from_capture import CaptureEvidence
from sse_forensics.evidence.store import EvidenceStore
from sse_forensics.facts.config import AnalysisConfig
from sse_forensics.pipeline import analyze_store
from sse_forensics.provenance import Origin
from sse_forensics.reassembly.exchange import Exchange
from sse_forensics.reassembly.flows import Connection
from sse_forensics.reassembly.http_events import RequestHead, ResponseHead
from sse_forensics.sse import SSEParser
from sse_forensics.verdicts import EVIDENCE_KINDS

T0 = 1767225600.0


def progress_event(event_id: str) -> str:
    note = '{"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":1}}'
    return f"id: {event_id}\ndata: {note}\n\n"


class HandCapture:
    """Exchanges built by hand, one connection each, one second apart."""

    def __init__(self) -> None:
        self.connections: dict[int, Connection] = {}
        self.exchanges: list[Exchange] = []

    def add(
        self,
        body: str,
        *,
        method: str = "GET",
        session: str | None = "S1",
        leid: str | None = None,
        status: int = 200,
        ctype: str = "text/event-stream",
        request_body: bytes = b"",
    ) -> Exchange:
        n = len(self.exchanges) + 1
        o = Origin("cap", n * 100, T0 + n)
        conn = Connection(n, ("10.0.0.1", 40000 + n), ("10.0.0.2", 80), f"1:c{n}", o, o)
        self.connections[n] = conn
        headers = [("Mcp-Session-Id", session)] if session else []
        if leid is not None:
            headers.append(("Last-Event-ID", leid))
        ex = Exchange(n, 0)
        ex.request = RequestHead(0, method, "/mcp", "HTTP/1.1", headers, o)
        ex.request_body = bytearray(request_body)
        ex.response = ResponseHead(0, status, "OK", "HTTP/1.1", [("Content-Type", ctype)], o)
        raw = body.encode()
        ex.response_body = bytearray(raw)
        ex.events = SSEParser().feed(raw, Origin("cap", n * 100 + 1, T0 + n + 0.5))
        ex.response_complete, ex.response_end_reason = True, "complete"
        ex.last_body_origin = o
        self.exchanges.append(ex)
        return ex

    def findings(self) -> tuple[object, set[tuple]]:
        """Judged the way a scan judges a capture: evidence rows, then one partition."""
        config = AnalysisConfig()
        with EvidenceStore() as store:
            writer = CaptureEvidence(store, config)
            for ex in self.exchanges:
                writer(self.connections[ex.connection_id], [ex])
            writer.flush()
            (result,) = analyze_store(
                store, config, load_rules(), EVIDENCE_KINDS, keep_records=True
            )
        facts, found = result.facts, result.findings
        return facts, {
            (f.rule, f.classification, f.gap.get("first"), f.gap.get("last")) for f in found
        }


def silent_only(found: set[tuple]) -> set[tuple]:
    return {f for f in found if f[1] == "silent_corruption"}


def uuids(n: int) -> list[str]:
    rng = random.Random(7)
    return [str(uuid.UUID(int=rng.getrandbits(128), version=4)) for _ in range(n)]
