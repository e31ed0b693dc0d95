"""Regenerate the encrypted and HTTP/2 samples in ``samples/tls/``:
``python samples/make_tls_samples.py [--only NAME...] [--out DIR]`` (root: tcpdump on ``lo``).

The PROFILE server (samples/profile_server.py) runs on hypercorn — HTTP/2 over TLS (ALPN
``h2``) or cleartext HTTP/2 with prior knowledge (h2c) — and the PROFILE client
(samples/profile_client.py) on httpx with ``http2=True``, while tcpdump records ``lo``. The
client's ``ssl`` context writes the NSS key log (``keylog_filename``, what ``SSLKEYLOGFILE``
does), kept as ``<name>.keys`` beside ``<name>.pcap``. The certificate is self-signed and made
afresh on every run with ``cryptography``; the TLS version and cipher suites are the client's
offer. One capture is also written as pcapng with its keys inside, as a Decryption Secrets
Block (``editcap --inject-secrets``), and no key log beside it.

Also: nginx (``listen ... ssl http2``, TLS 1.2 and 1.3) in front of the PROFILE server on
uvicorn, recorded on nginx's port only; h2c by ``Upgrade`` (the resume sent by ``curl
--http2``); TLS 1.3 0-RTT (``openssl s_client -early_data`` against nginx with
``ssl_early_data on``). Tools needed: tcpdump, editcap, nginx, curl with HTTP/2, openssl.

Each scenario reuses the server knobs and client plan of a plaintext HTTP/1.1 sample of
make_samples.py (same session prefix, so the same session and event IDs): the analyzer must
give the same findings for both (tests/end_to_end/test_tls_samples.py).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import os
import signal
import ssl
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

SAMPLES_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(SAMPLES_DIR))

import httpx  # noqa: E402
from make_samples import port_is_free, record_until_complete, tcpdump  # noqa: E402
from profile_client import ClientPlan, McpClient, run_plan, tool_params  # noqa: E402
from profile_server import ProfileServer, ServerKnobs, running_server  # noqa: E402

OUT_DIR = SAMPLES_DIR / "tls"
FIRST_PORT = 38301
UPSTREAM_OFFSET = 100  # nginx scenarios: the server on uvicorn listens here (not captured)


@dataclass(frozen=True)
class TLSScenario:
    name: str
    twin: str  # the plaintext HTTP/1.1 sample (samples/<twin>.pcap) of the same scenario
    description: str
    knobs: ServerKnobs
    plan: ClientPlan
    tls: str | None  # "1.3", "1.2" or None (h2c)
    ciphers: str | None = None  # OpenSSL cipher string for TLS 1.2 offers
    http2: bool = True
    dsb: bool = False  # write <name>.pcapng with a Decryption Secrets Block instead
    findings: list[dict] = field(default_factory=list)
    upgrade: bool = False  # h2c by Upgrade: HTTP/1.1 (httpx), the resume by curl --http2
    nginx: bool = False  # nginx (listen ... ssl http2) in front of the server on uvicorn
    server_suites: str | None = None  # nginx: the TLS 1.3 cipher suites it allows
    early_data: bool = False  # openssl s_client resumes with 0-RTT (nginx ssl_early_data)


def finding(rule: str, classification: str, first: str, last: str | None) -> dict:
    return {"rule": rule, "classification": classification, "gap": {"first": first, "last": last}}


SILENT_8_12 = [
    finding("silent-resume-jump", "silent_corruption", "8", "12"),
    finding("resume-in-gap-2xx", "silent_corruption", "8", "12"),
    finding("client-accepted-gap", "silent_corruption", "8", "12"),
]
DROP7 = ClientPlan(disconnect_after=7, resume=True)


def knobs(twin: str, **kw: object) -> ServerKnobs:
    """make_samples.py's knobs for ``twin`` (same session prefix and seed)."""
    return ServerKnobs(session_prefix=twin, seed=twin, **kw)  # type: ignore[arg-type]


def scenarios() -> list[TLSScenario]:
    clean = knobs("clean-resume-int", live_stop_after=7)
    jump = knobs("resume-jump-unsignalled", live_stop_after=7, replay_evicted=(8, 12))
    clean_what = "The client drops the tools/call stream after event 7 and resumes with "
    clean_what += "Last-Event-ID 7; the server replays 8-20."
    jump_what = "The client drops the stream after event 7; the server's replay buffer lost "
    jump_what += "8-12; the resume (Last-Event-ID 7) is answered 200 replaying 13-20."
    return [
        TLSScenario(
            "h2-tls13-clean-resume",
            "clean-resume-int",
            f"HTTP/2 over TLS 1.3 (AES-256-GCM). {clean_what}",
            clean,
            DROP7,
            "1.3",
        ),
        TLSScenario(
            "h2-tls13-resume-jump",
            "resume-jump-unsignalled",
            f"HTTP/2 over TLS 1.3 (AES-256-GCM). {jump_what}",
            jump,
            DROP7,
            "1.3",
            findings=SILENT_8_12,
        ),
        TLSScenario(
            "h2-tls12-aesgcm-resume-jump",
            "resume-jump-unsignalled",
            f"HTTP/2 over TLS 1.2 (ECDHE-RSA-AES128-GCM-SHA256). {jump_what}",
            jump,
            DROP7,
            "1.2",
            ciphers="ECDHE-RSA-AES128-GCM-SHA256",
            findings=SILENT_8_12,
        ),
        TLSScenario(
            "h2-tls12-chacha-clean-resume",
            "clean-resume-int",
            f"HTTP/2 over TLS 1.2 (ECDHE-RSA-CHACHA20-POLY1305). {clean_what}",
            clean,
            DROP7,
            "1.2",
            ciphers="ECDHE-RSA-CHACHA20-POLY1305",
        ),
        TLSScenario(
            "h1-tls13-resume-jump",
            "resume-jump-unsignalled",
            f"HTTP/1.1 over TLS 1.3 (ALPN http/1.1). {jump_what}",
            jump,
            DROP7,
            "1.3",
            http2=False,
            findings=SILENT_8_12,
        ),
        TLSScenario(
            "h1-tls12-cbc-resume-jump",
            "resume-jump-unsignalled",
            f"HTTP/1.1 over TLS 1.2 (ECDHE-RSA-AES128-SHA: CBC, encrypt-then-MAC). {jump_what}",
            jump,
            DROP7,
            "1.2",
            ciphers="ECDHE-RSA-AES128-SHA",
            http2=False,
            findings=SILENT_8_12,
        ),
        TLSScenario(
            "h2c-resume-jump",
            "resume-jump-unsignalled",
            f"Cleartext HTTP/2 with prior knowledge (h2c). {jump_what}",
            jump,
            DROP7,
            None,
            findings=SILENT_8_12,
        ),
        TLSScenario(
            "h2-tls13-dsb-resume-jump",
            "resume-jump-unsignalled",
            f"HTTP/2 over TLS 1.3, pcapng with the keys in a Decryption Secrets Block. {jump_what}",
            jump,
            DROP7,
            "1.3",
            dsb=True,
            findings=SILENT_8_12,
        ),
        TLSScenario(
            "h2c-upgrade-resume-jump",
            "resume-jump-unsignalled",
            "Cleartext HTTP/2 by Upgrade (RFC 7540 §3.2): initialize and tools/call over "
            "HTTP/1.1 (httpx); the resume is curl --http2's GET with Upgrade: h2c, answered "
            f"101, its response on HTTP/2 stream 1. {jump_what}",
            jump,
            DROP7,
            None,
            findings=SILENT_8_12,
            upgrade=True,
        ),
        TLSScenario(
            "nginx-h2-tls13-chacha-resume-jump",
            "resume-jump-unsignalled",
            "HTTP/2 over TLS 1.3 (nginx allows TLS_CHACHA20_POLY1305_SHA256 only) to nginx "
            f"(listen ssl http2), proxying HTTP/1.1 to uvicorn. {jump_what}",
            jump,
            DROP7,
            "1.3",
            findings=SILENT_8_12,
            nginx=True,
            server_suites="TLS_CHACHA20_POLY1305_SHA256",
        ),
        TLSScenario(
            "nginx-h2-tls13-clean-resume",
            "clean-resume-int",
            "HTTP/2 over TLS 1.3 (AES-256-GCM) to nginx (listen ssl http2), proxying HTTP/1.1 "
            f"to uvicorn. {clean_what}",
            clean,
            DROP7,
            "1.3",
            nginx=True,
        ),
        TLSScenario(
            "nginx-h2-tls12-aes256gcm-resume-jump",
            "resume-jump-unsignalled",
            "HTTP/2 over TLS 1.2 (ECDHE-RSA-AES256-GCM-SHA384: the SHA-384 PRF) to nginx "
            f"(listen ssl http2), proxying HTTP/1.1 to uvicorn. {jump_what}",
            jump,
            DROP7,
            "1.2",
            ciphers="ECDHE-RSA-AES256-GCM-SHA384",
            findings=SILENT_8_12,
            nginx=True,
        ),
        TLSScenario(
            "nginx-h2-tls12-clean-resume",
            "clean-resume-int",
            "HTTP/2 over TLS 1.2 (ECDHE-RSA-AES128-GCM-SHA256) to nginx (listen ssl http2), "
            f"proxying HTTP/1.1 to uvicorn. {clean_what}",
            clean,
            DROP7,
            "1.2",
            ciphers="ECDHE-RSA-AES128-GCM-SHA256",
            nginx=True,
        ),
        TLSScenario(
            "nginx-tls13-early-data",
            "",
            "TLS 1.3 0-RTT: openssl s_client (SNI localhost) asks nginx (ssl_early_data on) "
            "for GET /early and keeps the session ticket, then resumes the session sending "
            "the same request as early data, which nginx accepts and answers. Both "
            "connections are decrypted, the early request under CLIENT_EARLY_TRAFFIC_SECRET.",
            knobs("early-data"),
            ClientPlan(),
            "1.3",
            http2=False,
            nginx=True,
            early_data=True,
        ),
    ]


# --- certificate --------------------------------------------------------------------------


def self_signed(folder: Path) -> tuple[Path, Path]:
    """A fresh key and self-signed certificate for 127.0.0.1 (PEM files in ``folder``)."""
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import rsa
    from cryptography.x509.oid import NameOID

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            ),
            critical=False,
        )
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = folder / "cert.pem", folder / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.TraditionalOpenSSL,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path


# --- server and client -------------------------------------------------------------------


@contextmanager
def hypercorn_server(
    app: object, port: int, cert: tuple[Path, Path] | None, http2: bool
) -> Iterator[None]:
    """Serve ``app`` on hypercorn at 127.0.0.1:``port`` in a thread (TLS with ``cert``)."""
    from hypercorn.asyncio import serve
    from hypercorn.config import Config

    config = Config()
    config.bind = [f"127.0.0.1:{port}"]
    config.loglevel = "WARNING"
    config.accesslog = None
    config.graceful_timeout = 2
    if cert is not None:
        config.certfile, config.keyfile = str(cert[0]), str(cert[1])
        config.alpn_protocols = ["h2", "http/1.1"] if http2 else ["http/1.1"]
        # hypercorn's default is ECDHE+AESGCM only; the samples need ChaCha20 and CBC too.
        config.ciphers = "ECDHE+AESGCM:ECDHE+CHACHA20:ECDHE-RSA-AES128-SHA"
    loop = asyncio.new_event_loop()
    stop = asyncio.Event()
    started = threading.Event()

    async def main() -> None:
        started.set()
        await serve(app, config, shutdown_trigger=stop.wait)  # type: ignore[arg-type]

    thread = threading.Thread(target=loop.run_until_complete, args=(main(),), daemon=True)
    thread.start()
    started.wait(5)
    deadline = time.monotonic() + 10
    while port_is_free(port):
        if time.monotonic() > deadline:
            raise RuntimeError(f"hypercorn did not start on port {port}")
        time.sleep(0.02)
    try:
        yield
    finally:
        loop.call_soon_threadsafe(stop.set)
        thread.join(timeout=10)


def client_factory(scenario: TLSScenario, cert: Path | None, keylog: Path) -> Callable:
    def make() -> httpx.Client:
        if scenario.tls is None and not scenario.http2:
            return httpx.Client(timeout=30.0)  # plaintext HTTP/1.1 (benchmarks)
        if scenario.tls is None:  # h2c: HTTP/2 with prior knowledge
            return httpx.Client(timeout=30.0, http1=False, http2=True)
        context = ssl.create_default_context(cafile=str(cert))
        context.keylog_filename = str(keylog)  # the NSS key log, as SSLKEYLOGFILE writes it
        if scenario.tls == "1.2":
            context.maximum_version = ssl.TLSVersion.TLSv1_2
            if scenario.ciphers:
                context.set_ciphers(scenario.ciphers)
        else:
            context.minimum_version = ssl.TLSVersion.TLSv1_3
        context.set_alpn_protocols(["h2", "http/1.1"] if scenario.http2 else ["http/1.1"])
        return httpx.Client(timeout=30.0, http2=scenario.http2, verify=context)

    return make


def run_upgrade_plan(url: str, plan: ClientPlan) -> list[object]:
    """``plan`` over HTTP/1.1 (httpx) up to the resume, which curl sends: on an ``http://``
    URL ``--http2`` asks for ``Upgrade: h2c`` with ``HTTP2-Settings`` (hypercorn switches
    for a request without a body), and reads the replay on stream 1."""
    client = McpClient(url, plan.protocol_version, lambda: httpx.Client(timeout=30.0))
    try:
        client.initialize()
        log = client.call_tool(2, tool_params(2, plan.steps), plan)
        headers = {**client.headers("text/event-stream"), "Last-Event-ID": log.last_event_id}
        command = ["curl", "-sS", "-N", "--http2", "--max-time", "30", url]
        for name, value in headers.items():
            command += ["-H", f"{name}: {value}"]
        replay = subprocess.run(command, capture_output=True, timeout=60, check=True).stdout
        if b"HTTP/2" in replay or b"id: 13" not in replay:
            raise RuntimeError(f"curl's upgraded resume did not get the replay: {replay[:200]!r}")
        return [log, replay]
    finally:
        client.close()


NGINX_CONF = """
daemon off;
worker_processes 1;
user root;
pid {tmp}/nginx.pid;
events {{ worker_connections 64; }}
http {{
    access_log off;
    client_body_temp_path {tmp}/body;
    proxy_temp_path {tmp}/proxy;
    fastcgi_temp_path {tmp}/fastcgi;
    uwsgi_temp_path {tmp}/uwsgi;
    scgi_temp_path {tmp}/scgi;
    server {{
        listen 127.0.0.1:{port} ssl http2;
        ssl_certificate {cert};
        ssl_certificate_key {key};
        ssl_protocols TLSv1.2 TLSv1.3;
        ssl_ciphers ECDHE+AESGCM:ECDHE+CHACHA20;
        {extra}
        location /mcp {{
            proxy_pass http://127.0.0.1:{upstream};
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_buffering off;
            proxy_read_timeout 60s;
        }}
        location = /early {{ return 200 "answered\n"; }}
    }}
}}
"""


@contextmanager
def nginx_proxy(
    scenario: TLSScenario, port: int, upstream: int, cert: tuple[Path, Path]
) -> Iterator[None]:
    """nginx at 127.0.0.1:``port`` (``listen ... ssl http2``, TLS 1.2 and 1.3) in front of
    ``upstream``, streaming responses as they come (``proxy_buffering off``)."""
    extra = []
    if scenario.server_suites:
        extra.append(f"ssl_conf_command Ciphersuites {scenario.server_suites};")
    if scenario.early_data:
        extra.append("ssl_early_data on;")
    with tempfile.TemporaryDirectory() as tmp:
        conf = Path(tmp) / "nginx.conf"
        conf.write_text(
            NGINX_CONF.format(
                tmp=tmp,
                port=port,
                upstream=upstream,
                cert=cert[0],
                key=cert[1],
                extra="\n        ".join(extra),
            )
        )
        command = ["nginx", "-p", tmp, "-e", f"{tmp}/error.log", "-c", str(conf)]
        process = subprocess.Popen(command)
        try:
            deadline = time.monotonic() + 10
            while port_is_free(port):
                if process.poll() is not None or time.monotonic() > deadline:
                    log = Path(tmp, "error.log")
                    raise RuntimeError(f"nginx did not start: {log.read_text()[-500:]}")
                time.sleep(0.02)
            yield
        finally:
            process.send_signal(signal.SIGQUIT)  # graceful: workers finish, then exit
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=5)


def openssl_early_data(port: int, keys: Path) -> None:
    """Two ``openssl s_client`` connections: a full handshake that keeps the session ticket,
    then a resumption sending its request as TLS 1.3 early data (0-RTT); the client writes
    the key log (``-keylogfile``, with CLIENT_EARLY_TRAFFIC_SECRET)."""
    request = b"GET /early HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
    with tempfile.TemporaryDirectory() as tmp:
        session, early = Path(tmp) / "session.pem", Path(tmp) / "early.txt"
        early.write_bytes(request)
        base = ["openssl", "s_client", "-connect", f"127.0.0.1:{port}", "-servername"]
        base += ["localhost", "-tls1_3", "-keylogfile", str(keys), "-ign_eof", "-quiet"]
        first = subprocess.run(
            [*base, "-sess_out", str(session)], input=request, capture_output=True, timeout=30
        )
        if b"answered" not in first.stdout or not session.exists():
            raise RuntimeError(f"s_client: no answer or no session: {first.stderr[-300:]!r}")
        second = subprocess.run(
            [*base, "-sess_in", str(session), "-early_data", str(early)],
            input=b"",
            capture_output=True,
            timeout=30,
        )
        if b"answered" not in second.stdout:
            raise RuntimeError(f"s_client: the early request was not answered: {second!r}")
        if "CLIENT_EARLY_TRAFFIC_SECRET" not in keys.read_text():
            raise RuntimeError("s_client sent no early data (no early traffic secret logged)")


def record(scenario: TLSScenario, port: int, out_dir: Path) -> Path:
    """Run ``scenario`` while tcpdump writes ``out_dir/<name>.pcap`` (and the client the key
    log ``<name>.keys``; pcapng with the keys inside for a ``dsb`` scenario)."""
    if not port_is_free(port):
        raise RuntimeError(f"port {port} for {scenario.name} is in use")
    pcap = out_dir / f"{scenario.name}.pcap"
    keys = out_dir / f"{scenario.name}.keys"
    scheme = "https" if scenario.tls else "http"
    with tempfile.TemporaryDirectory() as tmp:
        cert = self_signed(Path(tmp)) if scenario.tls else None

        def run() -> object:
            keys.unlink(missing_ok=True)
            if scenario.nginx:
                assert cert is not None
                app = ProfileServer(scenario.knobs).app()
                upstream = port + UPSTREAM_OFFSET
                with (
                    tcpdump(pcap, port),
                    running_server(app, upstream),
                    nginx_proxy(scenario, port, upstream, cert),
                ):
                    if scenario.early_data:
                        return openssl_early_data(port, keys)
                    url = f"https://127.0.0.1:{port}/mcp"
                    return run_plan(url, scenario.plan, client_factory(scenario, cert[0], keys))
            with tcpdump(pcap, port):
                app = ProfileServer(scenario.knobs).app()
                with hypercorn_server(app, port, cert, scenario.http2):
                    url = f"{scheme}://127.0.0.1:{port}/mcp"
                    if scenario.upgrade:
                        return run_upgrade_plan(url, scenario.plan)
                    factory = client_factory(scenario, cert[0] if cert else None, keys)
                    return run_plan(url, scenario.plan, factory)

        record_until_complete(scenario.name, run)
    if scenario.dsb:
        pcapng = out_dir / f"{scenario.name}.pcapng"
        subprocess.run(
            ["editcap", "--inject-secrets", f"tls,{keys}", str(pcap), str(pcapng)], check=True
        )
        pcap.unlink()
        keys.unlink()
        pcap = pcapng
    elif scenario.tls is None:
        keys.unlink(missing_ok=True)
    return pcap


def make(scenario: TLSScenario, port: int, out_dir: Path) -> None:
    pcap = record(scenario, port, out_dir)
    if scenario.early_data:
        made_by = "loopback (nginx, openssl s_client -early_data, tcpdump)"
    elif scenario.nginx:
        made_by = "loopback (nginx in front of uvicorn, httpx http2, tcpdump)"
    elif scenario.upgrade:
        made_by = "loopback (hypercorn+httpx, curl --http2, tcpdump)"
    else:
        made_by = "loopback (hypercorn+httpx http2, tcpdump)"
    expected = {
        "description": scenario.description,
        "made_by": made_by,
        "twin": f"{scenario.twin}.pcap" if scenario.twin else None,
        "tls": scenario.tls,
        "http2": "upgrade" if scenario.upgrade else scenario.http2,
        "port": port,
        "findings": scenario.findings,
    }
    (out_dir / f"{scenario.name}.expected.json").write_text(json.dumps(expected, indent=2) + "\n")
    print(f"{scenario.name:32} {pcap.stat().st_size:>7} bytes  port {port}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", help="scenario names")
    parser.add_argument("--out", type=Path, default=OUT_DIR)
    args = parser.parse_args()
    if os.geteuid() != 0:
        print("make_tls_samples.py needs root: tcpdump captures on lo", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    for i, scenario in enumerate(scenarios()):
        if args.only and scenario.name not in args.only:
            continue
        make(scenario, FIRST_PORT + i, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
