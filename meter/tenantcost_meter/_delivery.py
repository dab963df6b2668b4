"""Delivery of usage batches: spooled to disk before the first POST, posted in order.

The contract (nothing lost, nothing counted twice):

- :meth:`Delivery.submit` splits the records into batches of one calendar month each (so a
  closed month refuses only its own part) and of at most :data:`MAX_BATCH_RECORDS` records
  (well under the service's per-batch limit), gives each a fresh random Idempotency-Key
  (uuid4) and spools it (:mod:`tenantcost_meter._spool`: atomic, fsync'd) *before* any POST.
  A batch is therefore never posted without being on disk with its key. When the spool
  cannot be written (a full disk, a removed folder), :class:`Unspooled` gives the caller back
  the records that are not on disk, to keep and submit again.
- :meth:`Delivery.deliver` posts the spooled batches oldest first, one file locked at a time;
  a file another process holds is skipped. The server's answer decides:

  - **2xx**: the batch is stored (or was already: a retried key is replayed by the server,
    ``Idempotent-Replayed``, and not added again). The file is removed.
  - **refused for good** (any 4xx but 401, 403, 404, 405, 408 and 429; in practice 422 for an
    invalid batch, 409 for a closed month, 413): retrying cannot help. The file moves to
    ``rejected/`` beside a ``.reason`` file with the status and the server's ``detail``, and
    is logged at WARNING. Later batches go on.
  - **transient** (connection refused or reset, timeout, 408, 429, 5xx, a redirect, 401,
    403, 404, 405): delivery stops there, so no later batch overtakes this one, and waits an
    exponential backoff with jitter (1 s, 2 s, 4 s, ... up to ``max_backoff``; at least the
    server's ``Retry-After``). Calls within the backoff return False at once. A spool folder
    that fails (removed, full, an I/O error) is not the server's fault: it is logged once,
    and delivery is tried again at the next call, without a backoff. 401/403 and
    404/405 are not refusals of the batch: they say the *token* (revoked, rotated) or the
    *url* (no such endpoint there) is wrong. The batches wait in the spool until a process
    with a valid token and url delivers them, under their original keys (the server checks
    keys store-wide, so they are replayed if they were stored before the rotation).

One POST, answer included, never outlasts the delivery's ``timeout`` nor the caller's
deadline: socket timeouts bound each read only, so a server dripping its answer a byte at a
time would hold it for ever; the connection is shut down at the deadline instead.

The token is sent as ``Authorization: Bearer ...`` and appears in no log line, file or
exception message. Log lines go to the ``tenantcost_meter`` logger (stdlib :mod:`logging`).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import random
import threading
import time
import uuid
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # imported when the first batch is posted: `import tenantcost_meter` stays fast
    import urllib.error
    import urllib.request

from tenantcost_meter._spool import PartlyWritten, Spool, Spooled, taken

log = logging.getLogger("tenantcost_meter")

PATH = "/api/v1/usage"
MAX_BATCH_RECORDS = 10_000
"""Records per batch at most (the service refuses over ``--max-records``, 100,000 by default)."""
FIRST_BACKOFF = 1.0
TRANSIENT_STATUSES = frozenset({401, 403, 404, 405, 408, 429})
"""4xx answers that say "later", or that the token or the url is wrong, not the batch."""
MAX_REASON = 2000
MAX_ANSWER = 65536
"""Bytes of a 2xx answer read at most (tenantcost answers a few hundred)."""


class Outcome(Enum):
    """What one POST of one batch came to."""

    STORED = "stored"
    REFUSED = "refused"
    TRANSIENT = "transient"


class Unspooled(Exception):
    """The spool could not be written: ``records`` (the very objects submitted) are not on
    disk, and nothing of them was; ``cause`` is the OSError."""

    def __init__(self, records: list[dict[str, Any]], cause: OSError) -> None:
        super().__init__(str(cause))
        self.records = records
        self.cause = cause


@dataclass(frozen=True)
class Answer:
    """The outcome, a one-line reason (status and the server's detail) and any Retry-After."""

    outcome: Outcome
    reason: str = ""
    retry_after: float = 0.0


def month_batches(records: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """The records split per calendar month of ``window_start`` (months in order, records in
    their order within a month), each month cut into batches of at most MAX_BATCH_RECORDS."""
    months: dict[str, list[dict[str, Any]]] = {}
    for record in records:
        months.setdefault(str(record.get("window_start", ""))[:7], []).append(record)
    return [
        rows[start : start + MAX_BATCH_RECORDS]
        for _, rows in sorted(months.items())
        for start in range(0, len(rows), MAX_BATCH_RECORDS)
    ]


class Delivery:
    """Spools batches of usage records and posts them to ``POST {url}/api/v1/usage``."""

    def __init__(
        self,
        url: str,
        token: str,
        spool_dir: str | os.PathLike[str],
        *,
        timeout: float = 10.0,
        max_backoff: float = 300.0,
    ) -> None:
        if not url.startswith(("http://", "https://")):
            raise ValueError(f"url: expected http://... or https://..., got {url!r}")
        self._endpoint = url.rstrip("/") + PATH
        self._token = token
        self._spool = Spool(spool_dir)
        self._timeout = timeout
        self._max_backoff = max_backoff
        self._delivering = threading.Lock()
        self._delivering_thread: int | None = None
        self._failures = 0
        self._retry_at = 0.0  # time.monotonic() before which deliver() does not try
        self._spool_trouble = ""  # the spool folder's last error, logged once
        self.rejected = 0
        """Batches moved to ``rejected/`` by this delivery (a caller compares it before and
        after a call to learn whether anything was refused meanwhile)."""

    @property
    def folder(self) -> Path:
        """The spool folder."""
        return self._spool.folder

    def __repr__(self) -> str:  # never the token
        return f"Delivery({self._endpoint!r}, spool_dir={str(self._spool.folder)!r})"

    def submit(self, records: list[dict[str, Any]]) -> None:
        """Spool ``records`` as batches of one calendar month each (fsync'd, a fresh
        Idempotency-Key each) before any POST. Does not post.

        When the spool cannot be written (disk full, the folder removed or not writable),
        :class:`Unspooled` carries the records that are not on disk (usually all of them),
        so the caller may keep them and submit them again without counting any twice."""
        batches = month_batches(records)
        try:
            self._spool.write([(uuid.uuid4().hex, {"mode": "sum", "records": b})
                               for b in batches])  # fmt: skip
        except PartlyWritten as exc:
            raise Unspooled([r for b in batches[exc.written :] for r in b], exc) from exc
        except OSError as exc:
            raise Unspooled(records, exc) from exc

    def deliver(self, deadline: float | None = None) -> bool:
        """Post every spooled batch in order; True when the spool is empty.

        ``deadline`` is a :func:`time.monotonic` instant after which no new POST starts.
        False when something is left: a transient failure (then a backoff), the deadline,
        or a file another process is posting."""
        if time.monotonic() < self._retry_at:
            return False
        return self._deliver(deadline)

    def close(self, timeout: float = 10.0) -> None:
        """Deliver what it can within ``timeout`` seconds; what remains stays spooled.

        One attempt even within a backoff (the process is about to end), stopping at the
        first transient failure: the spool keeps the rest for the next process."""
        self._deliver(time.monotonic() + timeout)

    def _deliver(self, deadline: float | None) -> bool:
        """One delivery at a time: another thread's call waits for it (until ``deadline``); a
        call from the delivering thread itself (a SIGTERM handler that flushes while this
        thread is posting) returns False at once instead of deadlocking."""
        if self._delivering_thread == threading.get_ident():
            return False
        wait = -1.0 if deadline is None else max(0.0, deadline - time.monotonic())
        if not self._delivering.acquire(timeout=wait):
            return False
        self._delivering_thread = threading.get_ident()
        try:
            empty = self._deliver_pending(deadline)
            self._spool_trouble = ""
            return empty
        except OSError as exc:  # the spool folder itself failed (removed, disk full, EIO)
            trouble = f"{type(exc).__name__}: {exc.strerror or exc}"
            if trouble != self._spool_trouble:
                log.warning("usage spool %s failed (%s); its batches are delivered once it "
                            "works again", self._spool.folder, trouble)  # fmt: skip
            self._spool_trouble = trouble
            return False
        finally:
            self._delivering_thread = None
            self._delivering.release()

    def _deliver_pending(self, deadline: float | None) -> bool:
        """Each pending file in order; False at the first transient failure or the deadline."""
        empty = True
        for path in self._spool.pending():
            if deadline is not None and time.monotonic() >= deadline:
                return False
            with taken(path) as batch:
                if batch is None:  # held by another process, or delivered meanwhile
                    empty = empty and not path.exists()
                    continue
                if not self._settle(batch, deadline):
                    return False
        return empty

    def _settle(self, batch: Spooled, deadline: float | None) -> bool:
        """Post one locked batch and act on the answer; False when delivery must stop."""
        answer = (
            Answer(Outcome.REFUSED, f"spool file {batch.damaged}")
            if batch.damaged is not None
            else self._post(batch, deadline)
        )
        if answer.outcome is Outcome.STORED:
            batch.path.unlink(missing_ok=True)
            self._failures = 0
            log.debug("usage batch %s delivered (%s)", batch.path.name, answer.reason)
            return True
        if answer.outcome is Outcome.REFUSED:
            target = self._spool.reject(batch.path, answer.reason)
            self.rejected += 1
            log.warning("tenantcost refused usage batch %s for good, kept in %s: %s",
                        batch.path.name, target, answer.reason)  # fmt: skip
            return True
        self._back_off(answer)
        return False

    def _back_off(self, answer: Answer) -> None:
        self._failures += 1
        delay = min(self._max_backoff, FIRST_BACKOFF * 2 ** min(self._failures - 1, 30))
        delay = max(delay * random.uniform(0.5, 1.0), min(answer.retry_after, self._max_backoff))
        self._retry_at = time.monotonic() + delay
        log.warning("usage delivery to %s failed (%s); retrying in %.1f s, batches stay spooled",
                    self._endpoint, answer.reason, delay)  # fmt: skip

    def _post(self, batch: Spooled, deadline: float | None) -> Answer:
        import http.client
        import urllib.error
        import urllib.request

        timeout = self._timeout
        if deadline is not None:
            timeout = max(0.1, min(timeout, deadline - time.monotonic()))
        watch = _Watch(time.monotonic() + timeout)
        request = _request_class()(
            self._endpoint,
            data=json.dumps(batch.body, separators=(",", ":")).encode("utf-8"),
            method="POST",
            headers={
                "Content-Type": "application/json",
                "Authorization": f"Bearer {self._token}",
                "Idempotency-Key": batch.key,
                "User-Agent": "tenantcost-meter",
            },
        )
        request.watch = watch
        try:
            with _opener().open(request, timeout=timeout) as response:
                response.read(MAX_ANSWER)
                replayed = response.headers.get("Idempotent-Replayed") == "true"
                return Answer(Outcome.STORED, f"HTTP {response.status}" + replayed * ", replayed")
        except urllib.error.HTTPError as exc:  # its status came whole: it decides
            return _classify(exc)
        except (OSError, http.client.HTTPException) as exc:  # URLError, reset, timeout
            if watch.fired:
                return _late(timeout)
            return Answer(Outcome.TRANSIENT, _network_reason(exc))
        finally:
            watch.cancel()


def _late(seconds: float) -> Answer:
    return Answer(Outcome.TRANSIENT, f"no whole answer within {seconds:.1f} s (timed out)")


class _Watch:
    """Shuts a connection's socket down at a deadline: a socket timeout bounds each read,
    not the exchange, and a server dripping its answer slowly would hold the POST (and
    ``close()``, and the process's exit) for as long as it likes."""

    def __init__(self, deadline: float) -> None:
        self.deadline = deadline
        self.fired = False
        self._lock = threading.Lock()
        self._done = False
        self._timer: threading.Timer | None = None

    def arm(self, sock: Any) -> None:
        """Watch ``sock`` (the connection's, right after it connected)."""
        with self._lock:
            if self._done:
                return
            wait = max(0.0, self.deadline - time.monotonic())
            self._timer = threading.Timer(wait, self._fire, (sock,))
            self._timer.daemon = True
            self._timer.start()

    def _fire(self, sock: Any) -> None:
        import socket

        with self._lock:
            if self._done:
                return
            self.fired = True
            # the plain socket's shutdown: under TLS too, the blocked read returns
            with contextlib.suppress(OSError):
                socket.socket.shutdown(sock, socket.SHUT_RDWR)

    def cancel(self) -> None:
        with self._lock:
            self._done = True
            if self._timer is not None:
                self._timer.cancel()


_OPENERS: list[urllib.request.OpenerDirector] = []
_REQUESTS: list[Any] = []


def _request_class() -> Any:
    """``urllib.request.Request`` with a ``watch`` (the POST's :class:`_Watch`)."""
    import urllib.request

    if not _REQUESTS:

        class WatchedRequest(urllib.request.Request):
            watch: _Watch | None = None

        _REQUESTS.append(WatchedRequest)
    return _REQUESTS[0]


def _opener() -> urllib.request.OpenerDirector:
    """urllib's opener (proxies from the environment included), except that:

    - a redirect is not followed: urllib would resend the token to wherever it points, and
      turn the POST into a GET. A 3xx surfaces as an HTTPError (transient: fix the url);
    - each connection is handed to its request's :class:`_Watch` once connected."""
    import http.client
    import urllib.request

    if _OPENERS:
        return _OPENERS[0]

    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args: Any, **kwargs: Any) -> None:
            return None

    armed: dict[Any, Any] = {}

    def watched(http_class: Any) -> Any:
        if http_class not in armed:

            class Watched(http_class):
                def __init__(self, *args: Any, watch: _Watch | None = None,
                             **kwargs: Any) -> None:  # fmt: skip
                    super().__init__(*args, **kwargs)
                    self.watch = watch

                def connect(self) -> None:
                    super().connect()
                    if self.watch is not None:
                        self.watch.arm(self.sock)

            armed[http_class] = Watched
        return armed[http_class]

    class Bounded(urllib.request.AbstractHTTPHandler):
        def do_open(self, http_class: Any, req: urllib.request.Request,
                    **kwargs: Any) -> http.client.HTTPResponse:  # fmt: skip
            watch = getattr(req, "watch", None)
            return super().do_open(watched(http_class), req, watch=watch, **kwargs)

    class BoundedHTTP(Bounded, urllib.request.HTTPHandler):
        pass

    handlers: list[Any] = [NoRedirect(), BoundedHTTP()]
    https = getattr(urllib.request, "HTTPSHandler", None)  # absent without the ssl module
    if https is not None:
        handlers.append(type("BoundedHTTPS", (Bounded, https), {})())
    _OPENERS.append(urllib.request.build_opener(*handlers))
    return _OPENERS[0]


def _classify(exc: urllib.error.HTTPError) -> Answer:
    """The answer of an HTTP error status, with the server's ``detail`` as the reason."""
    import http.client

    try:
        raw = exc.read(MAX_ANSWER)
    except (OSError, http.client.HTTPException):
        raw = b""
    finally:
        exc.close()
    reason = f"HTTP {exc.code}: {_detail(raw)}"[:MAX_REASON]
    status = exc.code
    if 400 <= status < 500 and status not in TRANSIENT_STATUSES:
        return Answer(Outcome.REFUSED, reason)
    return Answer(Outcome.TRANSIENT, reason, _retry_after(exc.headers.get("Retry-After")))


def _detail(raw: bytes) -> str:
    """The ``detail`` of a JSON error body (tenantcost's problem documents), else the text."""
    text = raw.decode("utf-8", "replace").strip()
    try:
        document = json.loads(text)
    except ValueError:
        return text or "(no body)"
    if isinstance(document, dict) and "detail" in document:
        detail = document["detail"]
        return detail if isinstance(detail, str) else json.dumps(detail)
    return text


def _retry_after(value: str | None) -> float:
    try:
        return max(0.0, float(value)) if value else 0.0
    except ValueError:  # an HTTP date: fall back on the backoff
        return 0.0


def _network_reason(exc: BaseException) -> str:
    reason = getattr(exc, "reason", None)
    return f"{type(exc).__name__}: {reason if reason is not None else exc}"
