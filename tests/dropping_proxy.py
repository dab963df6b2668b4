"""A loopback HTTP forwarder between a client and a real server, for delivery faults.

It forwards each request whole to the server and reads the server's whole answer, so the
server has done (and committed) everything it does for that request; then it either passes
the answer on or, while ``drop_answers`` is above zero, closes the client's connection
without a byte: the client sees its answer lost *after* the commit. ``listening`` False
refuses connections, as a server that is down does. Every forwarded request is recorded
(its Idempotency-Key, the server's status and whether the server said
``Idempotent-Replayed``). One request per connection (the client asks ``Connection: close``,
as urllib does).
"""

from __future__ import annotations

import socket
import socketserver
import threading
from dataclasses import dataclass


@dataclass(frozen=True)
class Forwarded:
    """One request the proxy forwarded, and the server's answer to it."""

    key: str
    status: int
    replayed: bool
    dropped: bool


def _read_request(sock: socket.socket) -> bytes:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            return data
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip())
    while len(body) < length:
        chunk = sock.recv(65536)
        if not chunk:
            break
        body += chunk
    return head + b"\r\n\r\n" + body


def _header(head: bytes, wanted: bytes) -> str:
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == wanted:
            return value.strip().decode("latin-1")
    return ""


def _forward(request: bytes, upstream: tuple[str, int]) -> bytes:
    head, _, body = request.partition(b"\r\n\r\n")
    lines = [line for line in head.split(b"\r\n") if not line.lower().startswith(b"connection:")]
    request = b"\r\n".join([*lines, b"Connection: close"]) + b"\r\n\r\n" + body
    with socket.create_connection(upstream, timeout=60) as sock:
        sock.sendall(request)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    return answer


class DroppingProxy:
    """``http://127.0.0.1:<port>`` forwarding to ``upstream_url``; see the module doc."""

    def __init__(self, upstream_url: str, port: int) -> None:
        host, _, number = upstream_url.removeprefix("http://").partition(":")
        self.upstream = (host, int(number))
        self.port = port
        self.url = f"http://127.0.0.1:{port}"
        self.drop_answers = 0
        self.forwarded: list[Forwarded] = []
        self._lock = threading.Lock()
        self._server: socketserver.ThreadingTCPServer | None = None

    @property
    def listening(self) -> bool:
        return self._server is not None

    def start(self) -> None:
        proxy = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                proxy._handle(self.request)

        socketserver.ThreadingTCPServer.allow_reuse_address = True
        server = socketserver.ThreadingTCPServer(("127.0.0.1", self.port), Handler)
        server.daemon_threads = True
        threading.Thread(target=server.serve_forever, daemon=True).start()
        self._server = server

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def _handle(self, client: socket.socket) -> None:
        request = _read_request(client)
        if not request:
            return
        answer = _forward(request, self.upstream)
        head = answer.partition(b"\r\n\r\n")[0]
        status = int(head.split(b" ", 2)[1]) if head.startswith(b"HTTP/") else 0
        with self._lock:
            drop = self.drop_answers > 0
            self.drop_answers -= drop
            self.forwarded.append(Forwarded(
                key=_header(request, b"idempotency-key"), status=status,
                replayed=_header(head, b"idempotent-replayed") == "true", dropped=drop,
            ))  # fmt: skip
        if not drop:
            client.sendall(answer)
