"""``tenantcost watch --notify``: send a watch answer's new alerts, once, to their destinations.

:func:`notify` takes the alerts of one watch document (:func:`tenantcost.alerts.alerts`:
what they are, their keys, routes and payloads), claims in the store the deliveries not sent
yet (:mod:`tenantcost.store.alert_deliveries`), sends them and records each outcome. So an
hourly CronJob tells each account manager about a spike once, and a delivery that failed is
tried again by the next run.

* **Webhook**: a JSON POST of the payload. ``X-Tenantcost-Signature: sha256=<hex>`` is the
  HMAC-SHA256 of the exact body bytes, keyed by the destination's secret (the environment
  variable its ``secret_env`` names, UTF-8); ``X-Tenantcost-Alert-Id`` is the alert's stable
  key, for receivers to deduplicate. Each try is one exchange bounded as a whole by
  ``alerts.timeout`` and reading at most 64 KiB of the answer
  (:func:`tenantcost.store.exchange.post`): a receiver that drips its answer or sends a huge
  body cannot hold the run or its memory. A connection error, a timeout, a 5xx or a 429 is
  tried again within the run (:data:`ATTEMPTS` attempts, exponential backoff from
  ``backoff`` seconds, a 429's ``Retry-After`` honoured up to :data:`MAX_RETRY_AFTER`); any
  other non-2xx answer (redirects are not followed) fails the delivery at once. Either way a
  failed delivery is tried again by the next run.
* **E-mail**: one message per alert and destination, to that destination's addresses only
  (never a shared To: list), through the ``smtp:`` server with :mod:`smtplib`; the same
  retries on connection errors and 4xx SMTP replies. The body is the summary line and the
  payload as JSON; ``X-Tenantcost-Alert-Id`` is set and ``Message-ID`` is stable per alert and
  destination.
* **One delivery's failure is its own**: a message that cannot even be built (a header
  with a line break raises ``ValueError``), or any other error while sending, fails that
  delivery only (recorded with a one-line reason naming the kind of error, never a client or
  a figure) and the run goes on with the others. A run that is stopped (Ctrl-C, SIGTERM)
  records the delivery it was sending and gives back the claims it did not try, so the next
  run takes them at once.
* **A closed month sends nothing**: its figures are issued statements now, and a re-watch
  of it (to look again) must not page anyone.
* **Settings mistakes are refused before anything is claimed** (one line, exit 2): no
  ``alerts:`` section, a webhook secret or SMTP credential variable that is not set, a route
  by a catalog column without a catalog, a proxy (``HTTPS_PROXY``...) that is not an
  ``http://`` URL, a ``REQUESTS_CA_BUNDLE`` that cannot be read. Nothing is recorded, so
  the next run sends all.

The HTTP and SMTP calls run outside any store transaction.
"""

from __future__ import annotations

import hashlib
import hmac
import http.client
import json
import os
import smtplib
import ssl
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from email.message import EmailMessage
from typing import Any

import pandas as pd
from sqlalchemy import Engine

from tenantcost import __version__
from tenantcost.alerts import Alert, alerts
from tenantcost.config.watch import AlertSettings, Destination, SmtpSettings
from tenantcost.errors import InputError
from tenantcost.store.alert_deliveries import Claimant, Delivery, claim, finish, release, renew
from tenantcost.store.catalog import stored_catalog
from tenantcost.store.exchange import (
    ANSWER_LIMIT,
    AnswerTooLarge,
    BadCaBundle,
    TimedOut,
    UnsupportedProxy,
    post,
    proxy_for,
    tls_context,
)

ATTEMPTS = 3
"""Tries of one delivery within a run (then it is ``failed``, tried again next run)."""
BACKOFF = 1.0
"""Seconds before the second try; each later one waits twice as long."""
MAX_RETRY_AFTER = 30.0
"""Longest ``Retry-After`` of a 429 waited for within a run."""
SIGNATURE_HEADER = "X-Tenantcost-Signature"
ID_HEADER = "X-Tenantcost-Alert-Id"
MISSING_SECTION = (
    "--notify needs an `alerts:` section in the settings file (destinations and routes; "
    "see docs/alerts.md): there is none"
)


@dataclass
class DestinationReport:
    """One destination's part of a run (a delivery is one alert over one channel)."""

    destination: str
    sent: int = 0
    already_sent: int = 0
    failed: int = 0
    busy: int = 0
    """Deliveries another ``watch --notify`` run was sending at the same time."""
    errors: list[str] = field(default_factory=list)
    """The last error of each failed delivery (no figures: a status code or a reason)."""


@dataclass(frozen=True)
class NotifyReport:
    """What one :func:`notify` did."""

    month: str
    month_closed: bool
    alerts: int
    """Alerts in the document (0 for a closed month: none are looked at)."""
    unrouted: int
    """Alerts no route and no ``catch_all`` sends anywhere."""
    destinations: tuple[DestinationReport, ...]

    @property
    def sent(self) -> int:
        return sum(d.sent for d in self.destinations)

    @property
    def already_sent(self) -> int:
        return sum(d.already_sent for d in self.destinations)

    @property
    def failed(self) -> int:
        return sum(d.failed for d in self.destinations)

    @property
    def busy(self) -> int:
        return sum(d.busy for d in self.destinations)

    def failure(self) -> str | None:
        """One line for the operator when a delivery failed (None when none did): how many,
        and that the next run tries them again (the summary above names the errors)."""
        if not self.failed:
            return None
        return (f"error: {self.failed} alert deliver{'y' if self.failed == 1 else 'ies'} of "
                f"{self.month} failed; the next run tries again (reasons above)")  # fmt: skip

    def summary(self) -> str:
        """Lines for the operator: totals, then one line per destination (no client named)."""
        if self.month_closed:
            return f"notify {self.month}: the month is closed, nothing sent"
        lines = [
            f"notify {self.month}: {self.alerts} alert(s); {self.sent} sent, "
            f"{self.already_sent} already sent, {self.failed} failed"
            + (f", {self.busy} being sent by another run" if self.busy else "")
            + (f"; {self.unrouted} routed to no destination" if self.unrouted else "")
        ]
        for d in self.destinations:
            errors = f" ({'; '.join(sorted(set(d.errors)))})" if d.errors else ""
            busy = f", {d.busy} being sent by another run" if d.busy else ""
            lines.append(f"  {d.destination}: {d.sent} sent, {d.already_sent} already sent, "
                         f"{d.failed} failed{busy}{errors}")  # fmt: skip
        return "\n".join(lines)


@dataclass(frozen=True)
class _Outcome:
    ok: bool
    attempts: int
    error: str | None


def notify(
    engine: Engine,
    settings: AlertSettings | None,
    document: Mapping[str, Any],
    *,
    month_closed: bool,
    catalog: pd.DataFrame | None,
    environ: Mapping[str, str] = os.environ,
    backoff: float = BACKOFF,
    wait: float = 0.0,
) -> NotifyReport:
    """Send the document's alerts not delivered yet (see the module docstring); ``catalog``
    is the store's client catalog frame (routes by column), ``wait`` the store lock's
    ``--wait``. Raises :class:`~tenantcost.errors.InputError` for a settings mistake."""
    if settings is None:
        raise InputError(MISSING_SECTION)
    month = str(document["month"])
    if month_closed:
        return NotifyReport(month, True, 0, 0, ())
    _check_secrets(set(settings.destinations), settings, environ)
    found = alerts(document, catalog, settings)
    by_key = {a.key: a for a in found}
    wanted = _deliveries(found, settings)
    me = Claimant()
    claimed = claim(engine, wanted, me, wait=wait)
    reports = {name: DestinationReport(name) for name in sorted({d.destination for d in wanted})}
    for d in claimed.already_sent:
        reports[d.destination].already_sent += 1
    for d in claimed.busy:
        reports[d.destination].busy += 1
    for position, d in enumerate(claimed.mine):
        report = reports[d.destination]
        try:
            if not renew(engine, d, me, wait=wait):  # taken over: not this run's to send
                report.busy += 1
                continue
            outcome = _deliver(d, by_key[d.alert_key], settings, environ, backoff, engine, me,
                               wait)  # fmt: skip
        except BaseException as exc:  # stopped: give back what this run did not try
            reason = f"not tried: the run was stopped ({type(exc).__name__})"
            release(engine, claimed.mine[position:], me, reason, wait=wait)
            raise
        if outcome.ok:
            report.sent += 1
        else:
            report.failed += 1
            report.errors.append(str(outcome.error))
    unrouted = sum(1 for a in found if not a.destinations)
    return NotifyReport(month, False, len(found), unrouted, tuple(reports.values()))


def routing_catalog(engine: Engine) -> pd.DataFrame | None:
    """The store's client catalog frame, for routes by catalog column (None: the store has
    none; :func:`notify` then refuses such a route with one line)."""
    try:
        return stored_catalog(engine).frame
    except InputError:  # the store has no catalog: its only InputError
        return None


def _deliveries(found: Sequence[Alert], settings: AlertSettings) -> list[Delivery]:
    """One delivery per alert, destination and channel (a destination may have both)."""
    wanted: dict[tuple[str, str, str], Delivery] = {}
    for alert in found:
        month = str(alert.payload["month"])
        for name in alert.destinations:
            destination = settings.destinations[name]
            channels = (["webhook"] if destination.webhook else []) + (
                ["email"] if destination.email else []
            )
            for channel in channels:
                wanted[(alert.key, name, channel)] = Delivery(
                    alert.key, name, channel, month, alert.client, str(alert.kind)
                )
    return list(wanted.values())


def _check_secrets(used: set[str], settings: AlertSettings, environ: Mapping[str, str]) -> None:
    """Every destination's secrets are set, and the proxy and CA bundle the process's
    environment names for its webhook are usable, before anything is claimed: checked at
    every run, alerts or not, so a mistake shows on the CronJob's first run, not at the
    first spike."""
    for name in sorted(used):
        destination = settings.destinations[name]
        if destination.webhook:
            _env(environ, str(destination.secret_env), f"alerts.destinations.{name}.secret_env")
            url = str(destination.webhook)
            try:
                proxy_for(url)
                if url.startswith("https:"):
                    tls_context()
            except (UnsupportedProxy, BadCaBundle) as exc:
                raise InputError(f"alerts.destinations.{name}.webhook: {exc}") from None
        if destination.email and settings.smtp is not None:
            _smtp_login(settings.smtp, environ)


def _env(environ: Mapping[str, str], variable: str, where: str) -> str:
    value = environ.get(variable, "")
    if not value:
        raise InputError(f"{where}: the environment variable {variable} is not set (or empty)")
    return value


def _smtp_login(smtp: SmtpSettings, environ: Mapping[str, str]) -> tuple[str, str] | None:
    """The SMTP user and password from the environment (None: no login configured)."""
    if smtp.username_env is None and smtp.password_env is None:
        return None
    if smtp.username_env is None or smtp.password_env is None:
        raise InputError("alerts.smtp: a login needs both username_env and password_env")
    return (_env(environ, smtp.username_env, "alerts.smtp.username_env"),
            _env(environ, smtp.password_env, "alerts.smtp.password_env"))  # fmt: skip


def _deliver(delivery: Delivery, alert: Alert, settings: AlertSettings,
             environ: Mapping[str, str], backoff: float, engine: Engine, me: Claimant,
             wait: float) -> _Outcome:  # fmt: skip
    """Send one claimed delivery and record its outcome: any error is this delivery's
    failure, recorded with its kind (never its text: it could quote a header, so a client's
    name); when interrupted it is ``failed`` too, not left ``sending``, and the interruption
    goes on."""
    destination = settings.destinations[delivery.destination]
    try:
        if delivery.channel == "webhook":
            outcome = _webhook(destination, alert, settings, environ, backoff)
        else:
            outcome = _email(destination, delivery.destination, alert, settings, environ, backoff)
    except Exception as exc:
        outcome = _Outcome(False, 1, f"failed unexpectedly ({type(exc).__name__})")
    except BaseException as exc:
        error = f"interrupted ({type(exc).__name__})"
        finish(engine, delivery, me, sent=False, attempts=1, error=error, wait=wait)
        raise
    finish(engine, delivery, me, sent=outcome.ok, attempts=outcome.attempts,
           error=outcome.error, wait=wait)  # fmt: skip
    return outcome


def body_bytes(payload: Mapping[str, Any]) -> bytes:
    """The exact bytes a webhook receives (and the signature covers): compact UTF-8 JSON."""
    return json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def signature(secret: str, body: bytes) -> str:
    """The ``X-Tenantcost-Signature`` value: ``sha256=`` and the hex HMAC-SHA256 of ``body``
    keyed by the UTF-8 bytes of ``secret``."""
    return "sha256=" + hmac.new(secret.encode("utf-8"), body, hashlib.sha256).hexdigest()


def _webhook(destination: Destination, alert: Alert, settings: AlertSettings,
             environ: Mapping[str, str], backoff: float) -> _Outcome:  # fmt: skip
    body = body_bytes(alert.payload)
    secret = _env(environ, str(destination.secret_env), "secret_env")
    headers = {
        "Content-Type": "application/json; charset=utf-8",
        "User-Agent": f"tenantcost/{__version__}",
        SIGNATURE_HEADER: signature(secret, body),
        ID_HEADER: alert.key,
    }
    error = ""
    for attempt in range(1, ATTEMPTS + 1):
        delay = backoff * 2 ** (attempt - 1)
        try:
            answer = post(str(destination.webhook), body, headers, timeout=settings.timeout)
        except TimedOut:
            error = f"timed out ({settings.timeout:g} s)"
        except AnswerTooLarge:  # a broken answer: not worth a retry now
            return _Outcome(False, attempt, f"answer headers over {ANSWER_LIMIT // 1024} KiB")
        except OSError as exc:
            error = f"connection failed ({type(exc).__name__})"
        except http.client.HTTPException as exc:  # not HTTP: not worth a retry now
            return _Outcome(False, attempt, f"request failed ({type(exc).__name__})")
        else:
            if 200 <= answer.status < 300:
                return _Outcome(True, attempt, None)
            error = f"HTTP {answer.status}"
            if answer.status != 429 and answer.status < 500:
                return _Outcome(False, attempt, error)
            delay = max(delay, _retry_after(answer.status, answer.headers.get("Retry-After")))
        if attempt < ATTEMPTS:
            time.sleep(delay)
    return _Outcome(False, ATTEMPTS, error)


def _retry_after(status: int, value: str | None) -> float:
    """A 429's ``Retry-After`` in seconds (capped), 0 if absent or not a number."""
    if status != 429:
        return 0.0
    try:
        return min(max(float(value or "0"), 0.0), MAX_RETRY_AFTER)
    except ValueError:
        return 0.0


def message(alert: Alert, destination: str, addresses: Sequence[str], sender: str) -> EmailMessage:
    """The e-mail of one alert to one destination: the summary, then the payload as JSON."""
    mail = EmailMessage()
    summary = str(alert.payload["summary"])
    mail["Subject"] = f"tenantcost alert: {summary}"
    mail["From"] = sender
    mail["To"] = ", ".join(addresses)
    mail[ID_HEADER] = alert.key
    mark = hashlib.sha256(destination.encode("utf-8")).hexdigest()[:12]
    mail["Message-ID"] = f"<{alert.key}.{mark}@{sender.rpartition('@')[2] or 'tenantcost'}>"
    text = json.dumps(alert.payload, ensure_ascii=False, indent=2)
    mail.set_content(f"{summary}\n\n{text}\n")
    return mail


def _email(destination: Destination, name: str, alert: Alert, settings: AlertSettings,
           environ: Mapping[str, str], backoff: float) -> _Outcome:  # fmt: skip
    smtp = settings.smtp
    assert smtp is not None  # AlertSettings refuses e-mail destinations without smtp
    try:
        mail = message(alert, name, destination.email, smtp.sender)
    except (ValueError, TypeError) as exc:  # e.g. a line break in a header (the client's name)
        return _Outcome(False, 1, f"the e-mail could not be built ({type(exc).__name__})")
    login = _smtp_login(smtp, environ)
    error = ""
    for attempt in range(1, ATTEMPTS + 1):
        try:
            _smtp_send(smtp, login, mail, settings.timeout)
            return _Outcome(True, attempt, None)
        except smtplib.SMTPResponseException as exc:
            error = f"SMTP {exc.smtp_code}"
            if not 400 <= exc.smtp_code < 500:
                return _Outcome(False, attempt, error)
        except smtplib.SMTPRecipientsRefused:
            return _Outcome(False, attempt, "SMTP: every recipient refused")
        except (OSError, smtplib.SMTPException) as exc:
            error = f"SMTP connection failed ({type(exc).__name__})"
        if attempt < ATTEMPTS:
            time.sleep(backoff * 2 ** (attempt - 1))
    return _Outcome(False, ATTEMPTS, error)


def _smtp_send(smtp: SmtpSettings, login: tuple[str, str] | None, mail: EmailMessage,
               timeout: float) -> None:  # fmt: skip
    with smtplib.SMTP(smtp.host, smtp.port, timeout=timeout) as server:
        if smtp.starttls:
            server.starttls(context=ssl.create_default_context())
        if login is not None:
            server.login(*login)
        server.send_message(mail)
