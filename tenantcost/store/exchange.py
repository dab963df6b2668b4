"""One HTTP POST whose whole exchange is bounded: in time, and in the bytes read of the answer.

A webhook receiver is someone else's server. A client whose timeout applies to each socket
operation (``requests``, ``http.client`` as they come) can be held for ever by an answer that
drips one byte every few seconds, and reading a whole answer lets a 1 GiB body take the
process's memory. :func:`post` therefore

* gives the whole exchange one deadline: name resolution, connect, TLS handshake, sending
  the request, the status line, the headers and the body. Every socket read is given only
  the time left (:class:`_Bounded`), so a drip ends at the deadline, not after it;
* reads at most :data:`ANSWER_LIMIT` bytes of the answer, status line and headers included,
  then stops reading and closes the connection; the body is never kept (only its size
  counted): a status code is all a delivery needs;
* never follows a redirect (a 3xx is an answer like any other);
* goes through the proxy the environment names, as ``requests`` did, so a watch behind a
  corporate proxy still reaches its receivers (:func:`proxy_for`: ``HTTPS_PROXY``,
  ``HTTP_PROXY``, ``ALL_PROXY`` and ``NO_PROXY``, any case, read by :mod:`urllib.request`).
  An ``https`` URL is tunnelled with ``CONNECT`` on the bounded socket (the proxy's answer
  to it counts against the same deadline and byte limit; TLS then runs end to end with the
  receiver, so the proxy sees neither the body nor the signature); an ``http`` URL is sent
  to the proxy in absolute form. Credentials in the proxy's URL are sent as
  ``Proxy-Authorization: Basic``, to the proxy only;
* checks TLS against the system's certificate store (``SSL_CERT_FILE`` and ``SSL_CERT_DIR``
  apply) and, in addition, the bundle ``REQUESTS_CA_BUNDLE`` (or ``CURL_CA_BUNDLE``) names,
  which users of ``requests`` may have set for a private CA (:func:`tls_context`).

It is :mod:`http.client` over a socket that this module connects itself, so every read goes
through the deadline; a name lookup runs in a thread that is abandoned at the deadline
(:func:`socket.getaddrinfo` has no timeout of its own).
"""

from __future__ import annotations

import base64
import http.client
import io
import ipaddress
import os
import socket
import ssl
import threading
import time
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from email.message import Message
from typing import Any
from urllib.parse import unquote, urlsplit

ANSWER_LIMIT = 64 * 1024
"""Most bytes of an answer read (status line, headers and body together)."""
DRAIN_CHUNK = 8192


class AnswerTooLarge(Exception):
    """The answer's status line and headers alone exceed :data:`ANSWER_LIMIT`."""


class TimedOut(TimeoutError):
    """The exchange did not end within its timeout."""


class ProxyRefused(ConnectionError):
    """The proxy did not open a tunnel to the receiver (it answered ``CONNECT`` with a status
    outside 2xx, e.g. 407 for missing or wrong credentials)."""


class UnsupportedProxy(ValueError):
    """The environment names a proxy this module cannot use (not an ``http://`` proxy URL)."""


class BadCaBundle(ValueError):
    """``REQUESTS_CA_BUNDLE`` (or ``CURL_CA_BUNDLE``) names no readable certificate bundle."""


CA_BUNDLE_VARIABLES = ("REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE")
"""The variables ``requests`` read for its CA bundle, the first set one applying."""


@dataclass(frozen=True)
class Proxy:
    """A forward proxy from the environment."""

    host: str
    port: int
    authorization: str | None
    """The ``Proxy-Authorization`` value (Basic, from the proxy URL's credentials), or None."""


@dataclass(frozen=True)
class Answer:
    """What a receiver answered (its body is not kept)."""

    status: int
    headers: Message
    read: int
    """Bytes of the answer read from the connection, at most :data:`ANSWER_LIMIT` (through a
    proxy's tunnel, its answer to CONNECT included)."""
    complete: bool
    """Whether the body was read to its end (False: it was cut at the limit or the deadline,
    which does not change the status the receiver gave)."""


def post(
    url: str,
    body: bytes,
    headers: Mapping[str, str],
    *,
    timeout: float,
    limit: int = ANSWER_LIMIT,
) -> Answer:
    """POST ``body`` to ``url`` and return the answer's status and headers, everything within
    ``timeout`` seconds and ``limit`` bytes read (see the module docstring).

    Raises :class:`TimedOut` when the status and headers did not arrive in time,
    :class:`AnswerTooLarge` when they exceed ``limit``, :class:`OSError` for a connection
    that failed and :class:`http.client.HTTPException` for an answer that is not HTTP."""
    deadline = time.monotonic() + timeout
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"not an http(s) URL: {url!r}")
    secure = parts.scheme == "https"
    host = parts.hostname
    port = parts.port or (443 if secure else 80)
    proxy = proxy_for(url)
    context = tls_context() if secure else None
    sock = _connect(proxy.host, proxy.port, deadline) if proxy else _connect(host, port, deadline)
    try:
        reader = _Bounded(sock, deadline, limit)
        sent = {**headers, "Connection": "close"}
        target = parts.path or "/"
        if parts.query:
            target += f"?{parts.query}"
        try:
            if context is not None:
                if proxy:
                    _tunnel(sock, reader, host, port, proxy)
                sock.settimeout(_left(deadline))  # the handshake as a whole (CPython's deadline)
                sock = context.wrap_socket(sock, server_hostname=host)
                reader.sock = sock
            elif proxy:  # absolute form, to the proxy (RFC 9112, 3.2.2)
                target = f"http://{_authority(host, port)}{target}"
                if proxy.authorization:
                    sent["Proxy-Authorization"] = proxy.authorization
            connection = _Connection(host, port, _Socket(sock, reader, deadline))
            connection.request("POST", target, body=body, headers=sent)
            answer = connection.getresponse()
        except TimeoutError as exc:
            raise TimedOut(f"no answer within {timeout:g} s") from exc
        complete = _drain(answer)
        return Answer(answer.status, answer.msg, reader.count, complete)
    finally:
        sock.close()


def proxy_for(url: str) -> Proxy | None:
    """The proxy the environment names for ``url``, as ``requests`` chose it: the scheme's
    variable (``https_proxy``/``HTTPS_PROXY``, ``http_proxy``/``HTTP_PROXY``), else
    ``all_proxy``/``ALL_PROXY``; none when ``no_proxy``/``NO_PROXY`` lists the host (or one
    of its domains, or ``*``). A proxy URL without a scheme is ``http://``; its port defaults
    to 80. Raises :class:`UnsupportedProxy` for any other scheme (``https://``, ``socks5://``):
    going straight to the receiver instead could bypass the proxy a network requires."""
    parts = urlsplit(url)
    proxies = urllib.request.getproxies_environment()
    value = proxies.get(parts.scheme) or proxies.get("all")
    bypass = urllib.request.proxy_bypass_environment  # type: ignore[attr-defined]  # no stub
    if not value or bypass(parts.netloc.rpartition("@")[2], proxies):
        return None
    proxy = urlsplit(value if "://" in value else f"http://{value}")
    if proxy.scheme != "http" or not proxy.hostname:
        raise UnsupportedProxy(
            f"the proxy for {parts.scheme} URLs is not an http:// proxy URL "
            f"(scheme {proxy.scheme!r}); only http:// proxies are supported")  # fmt: skip
    try:
        port = proxy.port or 80
    except ValueError as exc:  # never quote the value: it may hold a password
        raise UnsupportedProxy(f"the proxy for {parts.scheme} URLs has a bad port") from exc
    authorization = None
    if proxy.username is not None:
        credentials = f"{unquote(proxy.username)}:{unquote(proxy.password or '')}"
        authorization = "Basic " + base64.b64encode(credentials.encode("utf-8")).decode("ascii")
    return Proxy(proxy.hostname, port, authorization)


def tls_context() -> ssl.SSLContext:
    """The system's certificate store (``SSL_CERT_FILE``, ``SSL_CERT_DIR``) and, in addition,
    the file or (hashed, ``c_rehash``) directory ``REQUESTS_CA_BUNDLE`` or ``CURL_CA_BUNDLE``
    names. In addition, not instead (``requests`` used it instead of its own bundle): images
    often set both to the system store, and a private CA given in either must keep working.
    Raises :class:`BadCaBundle` when the variable names nothing readable."""
    context = ssl.create_default_context()
    for variable in CA_BUNDLE_VARIABLES:
        bundle = os.environ.get(variable, "")
        if bundle:
            try:
                if os.path.isdir(bundle):
                    context.load_verify_locations(capath=bundle)
                else:
                    context.load_verify_locations(cafile=bundle)
            except (OSError, ValueError) as exc:
                raise BadCaBundle(f"{variable}: no certificate bundle could be read from "
                                  f"{bundle!r} ({type(exc).__name__})") from exc  # fmt: skip
            break
    return context


def _authority(host: str, port: int) -> str:
    """``host:port`` of a request target (an IPv6 literal in brackets, a name in IDNA)."""
    if ":" in host:
        return f"[{host}]:{port}"
    return f"{host if host.isascii() else host.encode('idna').decode('ascii')}:{port}"


def _tunnel(sock: socket.socket, reader: _Bounded, host: str, port: int, proxy: Proxy) -> None:
    """Ask the proxy for a tunnel to ``host:port`` on the connected socket. Its answer is read
    byte by byte through ``reader`` (so nothing after the answer's headers, the receiver's
    first TLS bytes, is taken from the socket), within the exchange's deadline and limit."""
    authority = _authority(host, port)
    head = f"CONNECT {authority} HTTP/1.1\r\nHost: {authority}\r\n"
    if proxy.authorization:
        head += f"Proxy-Authorization: {proxy.authorization}\r\n"
    sock.settimeout(_left(reader.deadline))
    sock.sendall(f"{head}\r\n".encode("ascii"))
    answer = http.client.HTTPResponse(_Unbuffered(reader), method="CONNECT")  # type: ignore[arg-type]
    try:
        answer.begin()
    finally:
        answer.fp = None  # type: ignore[assignment]  # closing it must not close the reader
    if not 200 <= answer.status < 300:
        raise ProxyRefused(f"the proxy answered {answer.status} to CONNECT")


def _left(deadline: float) -> float:
    """Seconds left before ``deadline``; :class:`TimedOut` when none are."""
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        raise TimedOut("the exchange ran out of time")
    return remaining


Address = tuple[int, int, int, str, tuple[Any, ...]]


def _addresses(host: str, port: int, deadline: float) -> list[Address]:
    """The host's addresses, looked up within the deadline (an IP literal needs no lookup)."""
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        pass
    else:
        family = socket.AF_INET6 if ip.version == 6 else socket.AF_INET
        return [(family, socket.SOCK_STREAM, 0, "", (host, port))]
    found: dict[str, object] = {}

    def look() -> None:
        try:
            found["addresses"] = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except OSError as exc:
            found["error"] = exc

    thread = threading.Thread(target=look, name="tenantcost-webhook-lookup", daemon=True)
    thread.start()
    thread.join(_left(deadline))
    if thread.is_alive():
        raise TimedOut(f"looking up {host} took longer than the timeout")
    if "error" in found:
        raise found["error"]  # type: ignore[misc]
    return list(found["addresses"])  # type: ignore[call-overload]


def _connect(host: str, port: int, deadline: float) -> socket.socket:
    """A connected socket to the first address that answers within the deadline."""
    error: OSError = OSError(f"no address for {host}")
    for family, kind, proto, _, address in _addresses(host, port, deadline):
        sock = socket.socket(family, kind, proto)
        try:
            sock.settimeout(_left(deadline))
            sock.connect(address)
            return sock
        except TimedOut:
            sock.close()
            raise
        except OSError as exc:
            sock.close()
            error = TimedOut("connect took longer than the timeout") if isinstance(
                exc, TimeoutError) else exc  # fmt: skip
    raise error


class _Bounded(io.RawIOBase):
    """The answer's bytes: each read waits only for the time left, and reads stop at the
    limit (:class:`AnswerTooLarge`)."""

    def __init__(self, sock: socket.socket, deadline: float, limit: int) -> None:
        self.sock, self.deadline, self.limit = sock, deadline, limit
        self.count = 0
        """Bytes read: a proxy's answer to CONNECT, then the receiver's answer."""

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview | bytearray) -> int:  # type: ignore[override]
        room = self.limit - self.count
        if room <= 0:
            raise AnswerTooLarge(f"the answer exceeds {self.limit} bytes")
        self.sock.settimeout(_left(self.deadline))
        got = self.sock.recv_into(memoryview(buffer)[:room])
        self.count += got
        return got


class _Socket:
    """What :class:`http.client.HTTPConnection` uses of a socket: ``sendall`` within the time
    left (a timeout bounds a whole ``sendall``), ``makefile`` giving the bounded reader."""

    def __init__(self, sock: socket.socket, reader: _Bounded, deadline: float) -> None:
        self.sock, self.reader, self.deadline = sock, reader, deadline

    def sendall(self, data: bytes) -> None:
        self.sock.settimeout(_left(self.deadline))
        self.sock.sendall(data)

    def makefile(self, mode: str = "rb", *args: object, **kwargs: object) -> io.BufferedReader:
        return io.BufferedReader(self.reader)

    def close(self) -> None:
        self.sock.close()


class _Unbuffered:
    """A socket whose ``makefile`` is the bounded reader itself, unbuffered."""

    def __init__(self, reader: _Bounded) -> None:
        self.reader = reader

    def makefile(self, mode: str = "rb", *args: object, **kwargs: object) -> _Bounded:
        return self.reader


class _Connection(http.client.HTTPConnection):
    """An HTTP connection over a socket connected by :func:`_connect` (never reconnects)."""

    def __init__(self, host: str, port: int, sock: _Socket) -> None:
        super().__init__(host, port)
        self.sock = sock

    def connect(self) -> None:
        raise http.client.NotConnected("the exchange's connection is closed")


def _drain(answer: http.client.HTTPResponse) -> bool:
    """Read (and drop) the body up to the limit or the deadline; True if it was read to its
    end. The status is already known: a cut body changes nothing."""
    try:
        while answer.read(DRAIN_CHUNK):
            pass
    except (AnswerTooLarge, TimeoutError, OSError, http.client.HTTPException):
        return False
    return True
