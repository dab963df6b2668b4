"""A webhook's exchange is bounded (tenantcost.store.exchange, through tenantcost.store.notify):
against a real, hostile HTTP receiver on 127.0.0.1 that drips its answer one byte at a time,
sends a lazily generated 1 GiB body, a 70 KiB header or a redirect; an HTTPS receiver
with a self-signed certificate (made by the openssl command, which Debian's ca-certificates
depends on); and a real forward proxy (CONNECT tunnels and absolute-form requests), which
the environment's HTTP_PROXY / HTTPS_PROXY / NO_PROXY select as they did with requests."""

from __future__ import annotations

import base64
import contextlib
import json
import socket
import socketserver
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from tenantcost.config.watch import AlertSettings
from tenantcost.store.alert_deliveries import month_deliveries
from tenantcost.store.engine import open_engine
from tenantcost.store.exchange import (
    ANSWER_LIMIT,
    AnswerTooLarge,
    ProxyRefused,
    TimedOut,
    post,
)
from tenantcost.store.notify import notify
from tenantcost.store.schema import upgrade
from tenantcost.store.settings import resolve_settings

from .test_alerts import MONTH, SECRETS, anomaly, client, document

DRIP = 0.5
"""Seconds between two bytes of a dripped answer: each byte comes well within any timeout
of a single read, so only a bound on the whole exchange ends it."""
BOUND = 1.0
"""The timeout of the drip tests (alerts.timeout): twice the drip's interval."""
GIB = 1 << 30


@dataclass
class Hostile:
    port: int
    hits: dict[str, int] = field(default_factory=dict)
    huge_sent: list[int] = field(default_factory=list)
    """Bytes of the 1 GiB body written before the client hung up (one entry per request)."""

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"


@pytest.fixture(scope="module")
def hostile() -> Iterator[Hostile]:
    state = Hostile(0)

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length", "0")))
            state.hits[self.path] = state.hits.get(self.path, 0) + 1
            out = self.wfile
            try:
                if self.path == "/drip-head":
                    for byte in b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n":
                        out.write(bytes([byte]))
                        time.sleep(DRIP)
                elif self.path == "/drip-body":
                    out.write(b"HTTP/1.1 200 OK\r\nContent-Length: 20\r\n\r\n")
                    for _ in range(20):
                        out.write(b"x")
                        time.sleep(DRIP)
                elif self.path == "/huge":
                    out.write(f"HTTP/1.1 200 OK\r\nContent-Length: {GIB}\r\n\r\n".encode())
                    chunk, sent = b"y" * 65536, 0
                    try:
                        while sent < GIB:  # generated as it goes: never held whole
                            out.write(chunk)
                            sent += len(chunk)
                    finally:
                        state.huge_sent.append(sent)
                elif self.path == "/big-head":
                    out.write(b"HTTP/1.1 200 OK\r\nX-Pad: " + b"p" * 70_000 + b"\r\n\r\n")
                elif self.path == "/redirect":
                    out.write(b"HTTP/1.1 302 Found\r\nLocation: /ok\r\nContent-Length: 0\r\n\r\n")
                else:
                    out.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
            except OSError:  # the client hung up: what a bounded client does
                pass
            self.close_connection = True

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    state.port = server.server_address[1]
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    yield state
    server.shutdown()
    server.server_close()


def test_an_answer_is_read_to_64_kib_at_most_and_a_redirect_is_not_followed(hostile):
    started = time.monotonic()
    huge = post(hostile.url("/huge"), b"{}", {}, timeout=10)
    assert (huge.status, huge.complete) == (200, False)
    assert huge.read <= ANSWER_LIMIT == 65536
    assert time.monotonic() - started < 3
    with pytest.raises(AnswerTooLarge):
        post(hostile.url("/big-head"), b"{}", {}, timeout=10)
    moved = post(hostile.url("/redirect"), b"{}", {}, timeout=10)
    assert (moved.status, moved.headers["Location"], hostile.hits.get("/ok", 0)) == (302, "/ok", 0)
    fine = post(hostile.url("/fine"), b"{}", {}, timeout=10)
    assert (fine.status, fine.read, fine.complete) == (200, 40, True)


@pytest.mark.timing
def test_a_dripped_answer_ends_at_the_timeout(hostile, tmp_path: Path):
    """The status line dripped: the try times out at the bound. The body of a 200 dripped:
    the delivery is sent (the status is the receiver's answer) when the bound is reached."""
    started = time.monotonic()
    with pytest.raises(TimedOut):
        post(hostile.url("/drip-head"), b"{}", {}, timeout=BOUND)
    assert BOUND <= time.monotonic() - started < BOUND + DRIP

    store = open_engine(resolve_settings(db=f"sqlite:///{tmp_path / 's.db'}", environ={}),
                        create=True)  # fmt: skip
    upgrade(store)
    settings = AlertSettings.model_validate({
        "destinations": {"drip": {"webhook": hostile.url("/drip-body"), "secret_env": "TC_FIN"}},
        "catch_all": ["drip"], "timeout": BOUND})  # fmt: skip
    doc = document([client("drip-c", "within", 1, 2)],
                   [anomaly("drip-c", "2026-11-03", 9_000_000, 1_000_000)])  # fmt: skip
    started = time.monotonic()
    report = notify(store, settings, doc, month_closed=False, catalog=None, environ=SECRETS)
    took = time.monotonic() - started
    row = month_deliveries(store, MONTH).iloc[0]
    store.dispose()
    assert (report.sent, row["status"], row["attempts"]) == (1, "sent", 1)
    assert BOUND <= took < BOUND + 1.5, took  # the bound, plus the store's claim and outcome


@pytest.mark.timing
def test_a_1_gib_answer_does_not_grow_memory(hostile):
    """In a process of its own (its peak RSS is its own): a 200 with a 1 GiB body is read to
    64 KiB; the peak RSS grows by less than 8 MiB, and the server is hung up on."""
    script = (
        "import json, sys\n"
        "from tenantcost.store.exchange import post\n"
        "def peak():\n"
        "    text = open('/proc/self/status').read()\n"
        "    return int(text.split('VmHWM:')[1].split()[0]) * 1024\n"
        "before = peak()\n"
        "answer = post(sys.argv[1], b'{}', {}, timeout=10)\n"
        "print(json.dumps([answer.status, answer.read, peak() - before]))\n"
    )
    done = subprocess.run([sys.executable, "-c", script, hostile.url("/huge")],
                          capture_output=True, text=True, timeout=60, check=True)  # fmt: skip
    status, read, grown = json.loads(done.stdout)
    assert (status, read <= ANSWER_LIMIT) == (200, True)
    assert grown < 8 << 20, grown
    deadline = time.monotonic() + 5
    while len(hostile.huge_sent) < hostile.hits["/huge"] and time.monotonic() < deadline:
        time.sleep(0.05)  # the server's writes fail once the client has hung up
    assert hostile.huge_sent and max(hostile.huge_sent) < 64 << 20


PROXY_VARIABLES = [f"{name}_{kind}" for name in ("http", "https", "all", "no")
                   for kind in ("proxy", "PROXY")]  # fmt: skip


@dataclass
class ForwardProxy:
    """A forward proxy on 127.0.0.1. The user of a request's Proxy-Authorization picks its
    behaviour: ``drip`` drips its answer, ``deny`` answers 407, ``big`` answers with a 70 KiB
    header; anyone else is served (a CONNECT tunnel, or an absolute-form request forwarded in
    origin form)."""

    port: int
    seen: list[tuple[str, str, str | None]] = field(default_factory=list)
    """(method, target, Proxy-Authorization) of every request the proxy received."""

    def url(self, user: str, password: str = "pw") -> str:
        return f"http://{user}:{password}@127.0.0.1:{self.port}"


def _pipe(source: socket.socket, sink: socket.socket) -> None:
    try:
        while data := source.recv(65536):
            sink.sendall(data)
    except OSError:
        pass
    finally:
        with contextlib.suppress(OSError):
            sink.shutdown(socket.SHUT_WR)


@pytest.fixture(scope="module")
def proxy() -> Iterator[ForwardProxy]:
    state = ForwardProxy(0)

    class Handler(socketserver.BaseRequestHandler):
        def handle(self) -> None:
            client: socket.socket = self.request
            head = b""
            while b"\r\n\r\n" not in head:
                chunk = client.recv(4096)
                if not chunk:
                    return
                head += chunk
            head, _, rest = head.partition(b"\r\n\r\n")
            first, *lines = head.decode("latin-1").split("\r\n")
            method, target, _ = first.split(" ")
            fields = {k.lower(): v for k, v in (line.split(": ", 1) for line in lines)}
            auth = fields.get("proxy-authorization")
            state.seen.append((method, target, auth))
            user = base64.b64decode(auth.split()[1]).decode().split(":")[0] if auth else ""
            try:
                if user == "drip":
                    for byte in b"HTTP/1.1 200 Connection established\r\n\r\n":
                        client.sendall(bytes([byte]))
                        time.sleep(DRIP)
                    return
                if user in ("deny", "big"):
                    pad = b"X-Pad: " + b"p" * 70_000 + b"\r\n" if user == "big" else b""
                    client.sendall(b"HTTP/1.1 407 Proxy Authentication Required\r\n" + pad
                                   + b"Content-Length: 0\r\n\r\n")  # fmt: skip
                    return
                if method == "CONNECT":
                    host, port = target.rsplit(":", 1)
                    upstream = socket.create_connection((host, int(port)), timeout=10)
                    client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
                else:
                    parts = urlsplit(target)
                    upstream = socket.create_connection((parts.hostname, parts.port), timeout=10)
                    kept = [line for line in lines
                            if not line.lower().startswith("proxy-authorization:")]  # fmt: skip
                    origin = f"{method} {parts.path} HTTP/1.1\r\n" + "\r\n".join(kept)
                    upstream.sendall(origin.encode("latin-1") + b"\r\n\r\n" + rest)
                with upstream:
                    back = threading.Thread(target=_pipe, args=(upstream, client), daemon=True)
                    back.start()
                    _pipe(client, upstream)
                    back.join(10)
            except OSError:
                pass

    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    state.port = server.server_address[1]
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    yield state
    server.shutdown()
    server.server_close()


@pytest.fixture
def no_proxy_environment(monkeypatch) -> pytest.MonkeyPatch:
    """A test's own proxy variables only (the machine's are set aside)."""
    for name in PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def test_a_webhook_to_an_http_receiver_goes_through_the_environments_proxy(
        hostile, proxy, no_proxy_environment):  # fmt: skip
    """HTTP_PROXY sends it through the proxy (absolute form, the proxy URL's credentials as
    Basic; the proxy saw it and the receiver got it); NO_PROXY naming the host bypasses it."""
    env = no_proxy_environment
    env.setenv("HTTP_PROXY", proxy.url("tc%40ops", "s%3Acret"))  # percent-encoded in the URL
    url = hostile.url("/via-proxy")
    answer = post(url, b"{}", {}, timeout=5)
    basic = "Basic " + base64.b64encode(b"tc@ops:s:cret").decode()
    assert (answer.status, proxy.seen[-1], hostile.hits["/via-proxy"]) == (
        200, ("POST", url, basic), 1)  # fmt: skip
    env.setenv("NO_PROXY", "example.com, 127.0.0.1")
    seen = len(proxy.seen)
    assert post(hostile.url("/bypass"), b"{}", {}, timeout=5).status == 200
    assert (len(proxy.seen), hostile.hits["/bypass"]) == (seen, 1)


def test_https_checks_the_certificate_and_tunnels_through_the_environments_proxy(
        tmp_path: Path, proxy, no_proxy_environment):  # fmt: skip
    """The system store (SSL_CERT_FILE), or REQUESTS_CA_BUNDLE, must trust the receiver. Through
    HTTPS_PROXY: a CONNECT tunnel (credentials to the proxy only, TLS end to end); a 407 to
    CONNECT is ProxyRefused; the proxy's answer counts against the 64 KiB."""
    monkeypatch = no_proxy_environment
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:prime256v1", "-nodes", "-keyout",
                    str(key), "-out", str(cert), "-days", "2", "-subj", "/CN=localhost",
                    "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"],
                   check=True, capture_output=True)  # fmt: skip

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers["Content-Length"]))
            self.send_response(204)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    url = f"https://localhost:{server.server_address[1]}/hook"
    try:
        with pytest.raises(ssl.SSLCertVerificationError):
            post(url, b"{}", {}, timeout=5)
        monkeypatch.setenv("SSL_CERT_FILE", str(cert))  # the documented way to trust it
        assert post(url, b"{}", {}, timeout=5).status == 204
        monkeypatch.delenv("SSL_CERT_FILE")
        monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(cert))  # what requests users had set
        monkeypatch.setenv("HTTPS_PROXY", proxy.url("ops"))
        assert post(url, b"{}", {}, timeout=5).status == 204
        basic = "Basic " + base64.b64encode(b"ops:pw").decode()
        assert proxy.seen[-1] == ("CONNECT", f"localhost:{server.server_address[1]}", basic)
        monkeypatch.setenv("HTTPS_PROXY", proxy.url("deny"))
        with pytest.raises(ProxyRefused, match="407"):
            post(url, b"{}", {}, timeout=5)
        monkeypatch.setenv("HTTPS_PROXY", proxy.url("big"))
        with pytest.raises(AnswerTooLarge):
            post(url, b"{}", {}, timeout=5)
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.timing
def test_a_proxy_that_drips_its_connect_answer_ends_at_the_timeout(proxy, no_proxy_environment):
    no_proxy_environment.setenv("https_proxy", proxy.url("drip"))
    started = time.monotonic()
    with pytest.raises(TimedOut):
        post("https://receiver.invalid/hook", b"{}", {}, timeout=BOUND)
    assert BOUND <= time.monotonic() - started < BOUND + DRIP
    assert proxy.seen[-1][:2] == ("CONNECT", "receiver.invalid:443")
