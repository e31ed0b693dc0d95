"""Crafted hostile inputs for issue 16 ("no single record can abort a scan").

Each capture holds one hostile record and, in another session, one ordinary silent gap (a
live stream that sends events 1-7 then 13-20 with no ``stream-gap``) that the scan must
still report. Built from ``crafted.py``'s pieces; big inputs are made at test time (see
``tests/hostile/test_records.py``), never stored.

``python samples/hostile_records.py --out DIR`` writes every capture case into ``DIR``.
"""

from __future__ import annotations

import argparse
import json
import struct
import sys
import zlib
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # samples/ is not a package

import crafted as c

LONG_DIGITS = b"9" * 5000  # past Python's int-string limit (4300 digits)
ORDINARY_SESSION = "ef7bcfc82886c6774d36907fbeb24417"  # the ordinary gap's, in captures
LOG_SESSION = "live-jump-unsignalled-0001"  # and in the logs


def ordinary_gap(incident: c.Incident) -> c.Capture:
    """The real finding every hostile capture also holds: events 8-12 dropped, unsignalled."""
    capture = incident.capture(c.LINKTYPE_ETHERNET)
    conn = c._ethernet_connection(capture, incident)
    c._open_call(conn, incident)
    events = c.call_events([*range(1, 8), *range(13, 21)], 20)
    c._stream_chunks(conn, [c.chunk(e) for e in events] + [c.LAST_CHUNK])
    conn.close()
    return capture


def stream_of(blocks: list[bytes]) -> Callable[[c.Incident], c.Capture]:
    """A tools/call answered by an event stream of ``blocks`` (raw SSE text, one chunk each)."""

    def build(incident: c.Incident) -> c.Capture:
        capture = incident.capture(c.LINKTYPE_ETHERNET)
        conn = c._ethernet_connection(capture, incident)
        c._open_call(conn, incident)
        c._stream_chunks(conn, [c.chunk(b) for b in blocks] + [c.LAST_CHUNK])
        conn.close()
        return capture

    return build


def resume_with(last_event_id: bytes, answer: bytes | None) -> Callable[[c.Incident], c.Capture]:
    """Stream 1-7, the client hangs up and resumes with ``last_event_id``; ``answer`` is the
    whole response (``None``: a 200 event stream replaying from 13, a silent jump)."""

    def build(incident: c.Incident) -> c.Capture:
        capture = incident.capture(c.LINKTYPE_ETHERNET)
        conn = c._ethernet_connection(capture, incident)
        c._open_call(conn, incident)
        events = [c.chunk(e) for e in c.call_events(range(1, 21), 20)]
        c._stream_chunks(conn, events[:7])
        conn.close()
        capture.pause(500 * c.TICK_NS)
        resume = c._ethernet_connection(
            capture, incident, client_isn=0x5E6F7081, server_isn=0x2B3C4D5E
        )
        client = incident.client(c.CLIENT_V4, connection=1)
        resume.ends[c.CLIENT] = client
        resume.wrap = c.ethernet(client, c.SERVER_V4)
        resume.handshake()
        resume.send_data(c.CLIENT, c.resume_request(last_event_id, incident.session))
        if answer is None:
            resume.send_data(c.SERVER, incident.response_head())
            c._stream_chunks(resume, [*events[12:], c.LAST_CHUNK])
        else:
            resume.send_data(c.SERVER, answer)
        resume.close()
        return capture

    return build


def counted(ids: list[bytes]) -> list[bytes]:
    """Progress events with ``ids``, the last one the tools/call result."""
    events = [c.sse_event(i, c.progress(n, len(ids))) for n, i in enumerate(ids[:-1], 1)]
    return [*events, c.sse_event(ids[-1], c.result(b"done"))]


def in_session(session: bytes, build: Callable[[c.Incident], c.Capture]):
    """``build`` with the incident's ``Mcp-Session-Id`` set to ``session``."""

    def with_session(incident: c.Incident) -> c.Capture:
        return build(replace(incident, session=session))

    return with_session


BAD_REQUEST = b"HTTP/1.1 400 Bad Request\r\ncontent-length: 11\r\n\r\nbad request"

CAPTURE_CASES: dict[str, Callable[[c.Incident], c.Capture]] = {
    # 1, 2, <hostile>, 3: the hostile ID is an outlier of an int stream that lost nothing.
    "long-int-id": stream_of(counted([b"1", b"2", LONG_DIGITS, b"3"])),
    "long-prefixed-id": stream_of(counted([b"s_1", b"s_2", b"s_" + LONG_DIGITS, b"s_3"])),
    "int64-overflow-id": stream_of(counted([b"1", b"2", b"9" * 25, b"3"])),
    "long-retry": stream_of(
        [
            b"retry: " + LONG_DIGITS + b"\n" + c.sse_event(b"1", c.progress(1, 2)),
            c.sse_event(b"2", c.result(b"done")),
        ]
    ),
    "long-last-event-id-400": resume_with(LONG_DIGITS, BAD_REQUEST),
    "long-last-event-id-200": resume_with(LONG_DIGITS, None),
    # A Last-Event-ID with a bare CR: the resume's own jump (8-12) must not go unjudged.
    "garbage-last-event-id": resume_with(b"7\rX-Injected: 1", None),
    "plain-resume-jump": resume_with(b"7", None),
    # Session IDs a shell word cannot carry as they are: NUL, invalid UTF-8, non-ASCII.
    "session-nul": in_session(b"s\x00e\x00ss", resume_with(b"7", None)),
    "session-non-ascii": in_session(b"s\xe9ss-\xc3\xa9-\xff\xfe", resume_with(b"7", None)),
}


IF_TSOFFSET = 14
YEAR_10000_US = 253_402_300_800 * 1_000_000  # 10000-01-01T00:00:00Z in microseconds


def pcapng_two_interfaces(first: c.Capture, second: c.Capture, second_idb: bytes) -> bytes:
    """pcapng: ``first``'s records on interface 0 (nanoseconds, as ``crafted.py`` writes),
    then ``second``'s on interface 1, whose IDB options are ``second_idb`` (microseconds by
    default); the second's timestamps are written as microseconds since the epoch."""
    end = c._pcapng_option(c.OPT_ENDOFOPT, b"")
    shb = struct.pack("<IHHq", c.PCAPNG_BYTE_ORDER_MAGIC, 1, 0, -1) + end
    idb0 = struct.pack("<HHI", c.LINKTYPE_ETHERNET, 0, c.DEFAULT_SNAPLEN)
    idb0 += c._pcapng_option(c.OPT_IF_TSRESOL, b"\x09") + end
    idb1 = struct.pack("<HHI", c.LINKTYPE_ETHERNET, 0, c.DEFAULT_SNAPLEN) + second_idb + end
    out = [
        c._pcapng_block(c.PCAPNG_SHB, shb),
        c._pcapng_block(c.PCAPNG_IDB, idb0),
        c._pcapng_block(c.PCAPNG_IDB, idb1),
    ]
    for ifid, capture, per_tick in ((0, first, 1), (1, second, 1000)):
        for record in capture.records:
            ticks = record.ts_ns // per_tick
            high, low = divmod(ticks, 1 << 32)
            epb = struct.pack("<IIIII", ifid, high, low, len(record.wire), len(record.wire))
            out.append(c._pcapng_block(c.PCAPNG_EPB, epb + c._pad4(record.wire)))
    return b"".join(out)


def tsoffset(seconds: int) -> bytes:
    return c._pcapng_option(IF_TSOFFSET, struct.pack("<q", seconds))


def shifted(capture: c.Capture, ns: int) -> c.Capture:
    """``capture`` with every record ``ns`` later."""
    for record in capture.records:
        record.ts_ns += ns
    return capture


PCAPNG_CASES: dict[str, Callable[[], bytes]] = {
    # An interface whose if_tsoffset puts its frames past the year 10000, or before 1970.
    "pcapng-tsoffset-huge": lambda: pcapng_two_interfaces(
        ordinary_gap(c.Incident.of(0, "ordinary-gap")),
        ordinary_gap(c.Incident.of(1, "tsoffset-huge")),
        tsoffset(1 << 62),
    ),
    "pcapng-tsoffset-negative": lambda: pcapng_two_interfaces(
        ordinary_gap(c.Incident.of(0, "ordinary-gap")),
        ordinary_gap(c.Incident.of(1, "tsoffset-negative")),
        tsoffset(-(1 << 62)),
    ),
    # Timestamps in the year 10000 (microsecond ticks go that far).
    "pcapng-year-10000": lambda: pcapng_two_interfaces(
        ordinary_gap(c.Incident.of(0, "ordinary-gap")),
        shifted(ordinary_gap(c.Incident.of(1, "year-10000")), YEAR_10000_US * 1000),
        b"",
    ),
}


# -- logs -------------------------------------------------------------------------------------

LOGS = Path(__file__).resolve().parent / "logs"
ORDINARY_EVENT_LOG = LOGS / "live-jump-unsignalled" / "events.jsonl"  # 8-12 dropped
ORDINARY_ACCESS_LOG = LOGS / "live-jump-unsignalled" / "access.log"


def event_record(**fields: object) -> bytes:
    """One event-log line of session ``hostile``, ``fields`` overriding the defaults."""
    record = {"ts": 1796010160.0, "session": "hostile", "stream": "s", "kind": "written"}
    record.update(fields)
    return json.dumps(record).encode()


def _ids(ids: list[object]) -> list[bytes]:
    return [event_record(event_id=i, ts=1796010160.0 + n) for n, i in enumerate(ids)]


def _nested(depth: int) -> bytes:
    return event_record(event_id="1", extra=None).replace(
        b'"extra": null', b'"extra": ' + b"[" * depth + b"]" * depth
    )


# name -> (lines before the ordinary log, lines after it)
EVENT_LOG_CASES: dict[str, tuple[list[bytes], list[bytes]]] = {
    "event-log-long-id": ([], _ids(["1", "2", LONG_DIGITS.decode(), "3"])),
    # A JSON number of 5000 digits: its decimal text is the ID.
    "event-log-long-id-number": (
        [],
        [*_ids(["1", "2"]), event_record(event_id=0).replace(b": 0", b": " + LONG_DIGITS)],
    ),
    "event-log-year-10000": (
        [],
        [
            event_record(event_id="1", ts="10000-01-01T00:00:00Z"),
            event_record(event_id="2", ts=253402300800.0 * 10),
            event_record(event_id="3", ts=-1e300),
        ],
    ),
    # A field that is a string in 300 records, then an object.
    "event-log-type-change": (
        [],
        [*_ids([str(n) for n in range(1, 301)]), event_record(event_id="301", session={"a": 1})],
    ),
    "event-log-long-first-record": ([event_record(event_id="1", note="x" * 70_000)], []),
    "event-log-nested-first-record": ([_nested(5000)], []),
    "event-log-deep-record": ([], [_nested(300)]),
}


def event_log_case(name: str) -> bytes:
    """Case ``name``: hostile records around the ordinary event log (a live jump 8-12)."""
    before, after = EVENT_LOG_CASES[name]
    ordinary = ORDINARY_EVENT_LOG.read_bytes()
    return (
        b"".join(line + b"\n" for line in before)
        + ordinary
        + b"".join(line + b"\n" for line in after)
    )


def write_gzip(path: Path, head: bytes, zeros: int, tail: bytes = b"") -> Path:
    """A gzip file of ``head``, ``zeros`` NUL bytes (one line, however long) and ``tail``,
    compressed as it streams: a 4 GB expansion costs 4 MB on disk and no memory."""
    packer = zlib.compressobj(9, zlib.DEFLATED, 31)
    block = b"\0" * (1 << 24)
    with path.open("wb") as out:
        out.write(packer.compress(head))
        while zeros > 0:
            out.write(packer.compress(block[: min(zeros, len(block))]))
            zeros -= len(block)
        out.write(packer.compress(tail) + packer.flush())
    return path


def write_long_line_log(path: Path, head: bytes, length: int, tail: bytes = b"") -> Path:
    """A plain log of ``head``, one line of ``length`` NUL bytes (a sparse file: no disk
    used) and ``tail``."""
    with path.open("wb") as out:
        out.write(head)
        out.truncate(len(head) + length)
        out.seek(0, 2)
        out.write(b"\n" + tail)
    return path


def capture_case(name: str) -> c.Capture:
    """Case ``name`` (incident 1) merged after the ordinary gap (incident 0)."""
    capture = ordinary_gap(c.Incident.of(0, "ordinary-gap"))
    capture.records += CAPTURE_CASES[name](c.Incident.of(1, name)).records
    return capture


def write_case(name: str, path: Path) -> Path:
    c.write_pcap(path, capture_case(name))
    return path


def main(out_dir: Path) -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    written = [write_case(name, out_dir / f"{name}.pcap") for name in CAPTURE_CASES]
    for name, build in PCAPNG_CASES.items():
        path = out_dir / f"{name}.pcapng"
        path.write_bytes(build())
        written.append(path)
    for name in EVENT_LOG_CASES:
        path = out_dir / f"{name}.jsonl"
        path.write_bytes(event_log_case(name))
        written.append(path)
    return written


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    for written in main(parser.parse_args().out):
        print(written)
