"""How fast the columnar packet index reads a capture, next to the per-frame readers and
``tcpflow -r``.

Generates a ``make_capture.py`` capture (classic pcap, default 200,000 packets) into a
temporary directory, writes the same frames as pcapng (one interface, nanosecond
timestamps, one EPB per frame), and times on each file:

- ``read_frames + decode_tcp``: the per-frame path ``reassemble`` uses today (one ``Frame``
  and one ``TCPSegment`` object per packet);
- ``index_capture``: ``sse_forensics.ingest.packet_index`` (mmap, record walk, vectorized
  decode); the index is checked against the first path's frame and segment counts;
- ``tcpflow -r FILE -o DIR``: TCP reassembly to one file per direction (a child process,
  so its time includes start-up and writing the flows), when tcpflow is installed.

In-process timings are the best of ``--repeat`` runs (the file is in the page cache after
the first); tcpflow's likewise. Absolute times are noisy on a shared machine: compare
within one run.

    python benchmarks/index_bench.py [--packets N] [--seed S] [--repeat R] [--dir DIR]
"""

from __future__ import annotations

import argparse
import platform
import shutil
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

from make_capture import write_capture  # noqa: E402

from sse_forensics.errors import ReadError  # noqa: E402
from sse_forensics.ingest.linklayer import decode_tcp  # noqa: E402
from sse_forensics.ingest.packet_index import index_capture  # noqa: E402
from sse_forensics.ingest.pcap import read_frames  # noqa: E402


def to_pcapng(pcap: Path, out: Path) -> None:
    """The frames of a little-endian µs classic pcap as pcapng (SHB, one IDB with
    if_tsresol 9, one EPB per frame)."""
    content = pcap.read_bytes()

    def block(btype: int, body: bytes) -> bytes:
        body += b"\0" * (-len(body) % 4)
        total = len(body) + 12
        return struct.pack("<II", btype, total) + body + struct.pack("<I", total)

    linktype = struct.unpack_from("<I", content, 20)[0] & 0xFFFF
    parts = [
        block(0x0A0D0D0A, struct.pack("<IHHq", 0x1A2B3C4D, 1, 0, -1)),
        block(1, struct.pack("<HHI", linktype, 0, 0) + struct.pack("<HHB3xI", 9, 1, 9, 0)),
    ]
    offset = 24
    while offset + 16 <= len(content):
        sec, usec, caplen, wirelen = struct.unpack_from("<IIII", content, offset)
        ticks = sec * 1_000_000_000 + usec * 1000
        data = content[offset + 16 : offset + 16 + caplen]
        head = struct.pack("<IIIII", 0, ticks >> 32, ticks & 0xFFFFFFFF, caplen, wirelen)
        parts.append(block(6, head + data))
        offset += 16 + caplen
    out.write_bytes(b"".join(parts))


def per_frame(path: Path) -> tuple[int, int]:
    frames = segments = 0
    for item in read_frames(str(path)):
        if isinstance(item, ReadError):
            continue
        frames += 1
        seg = decode_tcp(item)
        segments += seg is not None and not isinstance(seg, ReadError)
    return frames, segments


def indexed(path: Path) -> tuple[int, int]:
    with index_capture(str(path)) as index:
        return len(index), index.tcp_segments


def best_of(repeat: int, run: Callable[[], object]) -> tuple[float, object]:
    best, result = float("inf"), None
    for _ in range(repeat):
        started = time.perf_counter()
        result = run()
        best = min(best, time.perf_counter() - started)
    return best, result


def tcpflow(path: Path, work: Path, repeat: int) -> float | None:
    exe = shutil.which("tcpflow")
    if exe is None:
        return None

    def once() -> None:
        flows = work / "tcpflow-out"
        shutil.rmtree(flows, ignore_errors=True)
        flows.mkdir()
        subprocess.run(
            [exe, "-r", str(path), "-o", str(flows)],
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

    seconds, _ = best_of(repeat, once)
    shutil.rmtree(work / "tcpflow-out", ignore_errors=True)
    return seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--packets", type=int, default=200_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--dir", type=Path, help="keep the captures here (default: temporary)")
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="index-bench-") as tmp:
        work = args.dir or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        pcap = work / f"mcp-{args.packets}-seed{args.seed}.pcap"
        truth = write_capture(pcap, args.packets, args.seed)
        pcapng = pcap.with_suffix(".pcapng")
        to_pcapng(pcap, pcapng)
        print(
            f"capture: {truth.packets} packets, pcap {pcap.stat().st_size / 1e6:.1f} MB, "
            f"pcapng {pcapng.stat().st_size / 1e6:.1f} MB; Python {platform.python_version()}, "
            f"best of {args.repeat}"
        )
        rows: list[tuple[str, str, float, int]] = []
        ok = True
        for path in (pcap, pcapng):
            fmt = path.suffix.lstrip(".")
            flow_s = tcpflow(path, work, args.repeat)
            ref_s, ref = best_of(args.repeat, lambda p=path: per_frame(p))
            idx_s, got = best_of(args.repeat, lambda p=path: indexed(p))
            if got != ref:
                print(f"MISMATCH on {path.name}: index {got}, read_frames+decode_tcp {ref}")
                ok = False
            packets = ref[0]  # type: ignore[index]
            rows.append(("read_frames + decode_tcp", fmt, ref_s, packets))
            rows.append(("index_capture", fmt, idx_s, packets))
            if flow_s is not None:
                rows.append(("tcpflow -r", fmt, flow_s, packets))
            else:
                print("tcpflow not found: skipped (apt-get install tcpflow)")

        flow_times = {fmt: s for tool, fmt, s, _ in rows if tool == "tcpflow -r"}
        print()
        print("| tool | format | seconds | packets/s | time vs tcpflow |")
        print("|---|---|---:|---:|---:|")
        for tool, fmt, seconds, packets in rows:
            ratio = f"{seconds / flow_times[fmt]:.2f}x" if fmt in flow_times else "-"
            print(f"| {tool} | {fmt} | {seconds:.3f} | {packets / seconds:,.0f} | {ratio} |")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
