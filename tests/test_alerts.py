"""``watch --notify``'s alerts (tenantcost.alerts) and their delivery (tenantcost.store.notify,
tenantcost.store.alert_deliveries), against real receivers on 127.0.0.1: a threaded HTTP
server in this process (it checks the HMAC of every body) and a real aiosmtpd SMTP server.

Watch documents are built by hand in the JSON contract's shape (they are the input): the
watch itself is tested in tests/test_watch.py. The store part runs on SQLite and PostgreSQL
(one store per backend for the module; each test uses clients of its own, so the alert keys
of one test never meet another's)."""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from email import message_from_bytes
from email.message import Message
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult, Envelope, LoginPassword
from sqlalchemy import Engine, update
from typer.testing import CliRunner

from tenantcost.alerts import AlertKind, alerts, status_key
from tenantcost.cli import app
from tenantcost.config.watch import AlertSettings
from tenantcost.errors import InputError
from tenantcost.store.alert_deliveries import Claimant, Delivery, claim, month_deliveries, renew
from tenantcost.store.engine import open_engine
from tenantcost.store.models import AlertDelivery, CatalogClient, table, utcnow
from tenantcost.store.notify import NotifyReport, notify, routing_catalog, signature
from tenantcost.store.schema import upgrade
from tenantcost.store.settings import resolve_settings
from tenantcost.watch import anomaly_id

from .postgres_fixture import free_port, new_database

MONTH = "2026-11"
AS_OF = "2026-11-12T00:00:00Z"
SECRETS = {"TC_ALICE": "alice-secret-ü", "TC_BOB": "bob-secret", "TC_FIN": "finance-secret"}
BACKOFF = 0.01
EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "saas-three-clients"


# --- a real HTTP receiver ------------------------------------------------------------------


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes

    @property
    def payload(self) -> dict[str, Any]:
        return dict(json.loads(self.body))


@dataclass
class Receiver:
    """A webhook receiver: records every request; answers the queued statuses first, then
    200."""

    port: int
    got: list[Received] = field(default_factory=list)
    answers: list[int] = field(default_factory=list)
    server: ThreadingHTTPServer | None = None
    delay: float = 0.0
    """Seconds each answer waits (a slow receiver)."""
    released: threading.Event = field(default_factory=threading.Event)
    """A request to ``/hang`` gets no answer until this is set."""

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def start(self) -> None:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                receiver.got.append(Received(self.path, dict(self.headers.items()), body))
                if self.path == "/hang":
                    receiver.released.wait(30)
                time.sleep(receiver.delay)
                status = receiver.answers.pop(0) if receiver.answers else 200
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        assert self.server is not None
        self.server.shutdown()
        self.server.server_close()
        self.server = None

    def take(self) -> list[Received]:
        got, self.got = self.got, []
        return got


@pytest.fixture(scope="module")
def receiver() -> Iterator[Receiver]:
    found = Receiver(free_port())
    found.start()
    yield found
    if found.server is not None:
        found.stop()


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def engine(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path_factory.mktemp('alerts') / 'store.db'}"
    else:
        url = new_database(request.getfixturevalue("postgres_admin_url"))
    found = open_engine(resolve_settings(db=url, environ={}), create=True)
    upgrade(found)
    yield found
    found.dispose()


# --- watch documents in the contract's shape ----------------------------------------------


def anomaly(client: str, day: str, amount: int, baseline: int, kind: str = "spike",
            source: str = "import-worker") -> dict[str, Any]:  # fmt: skip
    return {"id": anomaly_id(client, source, day, kind), "client": client, "source": source,
            "day": day, "amount": amount, "baseline": baseline,
            "score": round((amount - baseline) / max(baseline * 0.1, 10_000), 2),
            "kind": kind}  # fmt: skip


def client(name: str, status: str, mtd: int, projected: int,
           band: tuple[int, int, int] | None = (1, 2, 3)) -> dict[str, Any]:  # fmt: skip
    budget = None if band is None else dict(zip(("low", "expected", "high"), band, strict=True))
    return {"client": name, "month_to_date": mtd, "projected": projected, "budget": budget,
            "status": status}  # fmt: skip


def document(
    clients: list[dict[str, Any]],
    anomalies: list[dict[str, Any]],
    month: str = MONTH,
    warnings: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    return {"month": month, "as_of": AS_OF,
            "money": {"currency": "USD", "minor_unit_exponent": 6},
            "clients": clients, "anomalies": anomalies, "rule_changes": [],
            "warnings": warnings or []}  # fmt: skip


def hooks(receiver: Receiver, **extra: Any) -> AlertSettings:
    """Alice's clients (catalog column) to /alice, bob's list to /bob, catch-all /finance."""
    return AlertSettings.model_validate({
        "destinations": {
            "am-alice": {"webhook": receiver.url("/alice"), "secret_env": "TC_ALICE"},
            "am-bob": {"webhook": receiver.url("/bob"), "secret_env": "TC_BOB"},
            "finance": {"webhook": receiver.url("/finance"), "secret_env": "TC_FIN"},
        },
        "routes": [{"column": "account_manager", "value": "Alice", "to": ["am-alice"]},
                   {"clients": extra.pop("bob_clients", []), "to": ["am-bob"]}],
        **extra,
    })  # fmt: skip


def catalog(managers: dict[str, str]) -> pd.DataFrame:
    return pd.DataFrame({"client": list(managers), "name": [f"{c} Ltd" for c in managers],
                         "account_manager": list(managers.values()), "row": "x"})  # fmt: skip


def run(engine: Engine, settings: AlertSettings | None, doc: dict[str, Any],
        managers: dict[str, str] | None = None, closed: bool = False) -> NotifyReport:  # fmt: skip
    return notify(engine, settings, doc, month_closed=closed,
                  catalog=None if managers is None else catalog(managers), environ=SECRETS,
                  backoff=BACKOFF)  # fmt: skip


def verify(received: Received) -> dict[str, Any]:
    """What a receiver does: check the signature of the exact body with its own secret."""
    secret = {"/alice": "TC_ALICE", "/bob": "TC_BOB", "/finance": "TC_FIN",
              "/hang": "TC_ALICE"}[received.path]  # fmt: skip
    expected = hmac.new(SECRETS[secret].encode(), received.body, hashlib.sha256).hexdigest()
    assert received.headers["X-Tenantcost-Signature"] == f"sha256={expected}"
    payload = received.payload
    assert received.headers["X-Tenantcost-Alert-Id"] == payload["id"]
    return payload


# --- the tests ----------------------------------------------------------------------------


def test_a_spike_reaches_its_account_manager_signed_with_its_figures(engine, receiver):
    spike = anomaly("hmac-c1", "2026-11-09", 50_000_000, 5_000_000)
    doc = document([client("hmac-c1", "within", 120_000_000, 310_000_000)], [spike])
    report = run(engine, hooks(receiver), doc, {"hmac-c1": "Alice"})
    assert (report.sent, report.failed, report.already_sent, report.alerts) == (1, 0, 0, 1)
    (got,) = receiver.take()
    assert got.path == "/alice" and got.headers["Content-Type"].startswith("application/json")
    payload = verify(got)
    assert payload == {
        "id": spike["id"], "type": "anomaly", "month": MONTH, "as_of": AS_OF,
        "money": {"currency": "USD", "minor_unit_exponent": 6}, "client": "hmac-c1",
        "client_name": "hmac-c1 Ltd", "label": "month to date, not issued",
        "status": "within", "month_to_date": 120_000_000, "projected": 310_000_000,
        "budget": {"low": 1, "expected": 2, "high": 3},
        "anomaly": {k: spike[k] for k in ("id", "source", "day", "amount", "baseline", "score",
                                           "kind")},
        "summary": "hmac-c1 Ltd (2026-11): spike in import-worker on 2026-11-09: 50.00 USD "
                   "against a baseline of 5.00 USD (score 90.0)",
    }  # fmt: skip
    tampered = Received(got.path, got.headers, got.body.replace(b"50000000", b"50000001"))
    with pytest.raises(AssertionError):
        verify(tampered)
    assert signature(SECRETS["TC_ALICE"], got.body) == got.headers["X-Tenantcost-Signature"]
    documented = documented_verify()
    header = got.headers["X-Tenantcost-Signature"]
    assert documented(got.body, header, SECRETS["TC_ALICE"])
    assert not documented(tampered.body, header, SECRETS["TC_ALICE"])
    assert not documented(got.body, header, SECRETS["TC_BOB"])


def documented_verify() -> Any:
    """The receiver's check as docs/alerts.md gives it (its one Python block)."""
    text = (Path(__file__).resolve().parents[1] / "docs" / "alerts.md").read_text()
    (code,) = re.findall(r"```python\n(.*?)```", text, flags=re.DOTALL)
    space: dict[str, Any] = {}
    exec(compile(code, "docs/alerts.md", "exec"), space)
    return space["verify"]


def test_one_delivery_per_alert_across_three_runs(engine, receiver):
    names = {"once-a": "Alice", "once-b": "Bob"}
    doc = document(
        [client("once-a", "above", 9, 900, (100, 200, 300)), client("once-b", "within", 1, 2)],
        [anomaly("once-a", "2026-11-03", 7_000_000, 1_000_000),
         anomaly("once-b", "2026-11-04", 0, 3_000_000, "drop")],
    )  # fmt: skip
    settings = hooks(receiver, bob_clients=["once-b"], catch_all=["finance"])
    reports = [run(engine, settings, doc, names) for _ in range(3)]
    got = receiver.take()
    # a-spike and a-above to alice and finance, b-drop to bob and finance
    assert sorted((g.path, g.payload["type"], g.payload["client"]) for g in got) == [
        ("/alice", "anomaly", "once-a"), ("/alice", "status", "once-a"),
        ("/bob", "anomaly", "once-b"),
        ("/finance", "anomaly", "once-a"), ("/finance", "anomaly", "once-b"),
        ("/finance", "status", "once-a")]  # fmt: skip
    for g in got:
        verify(g)
    assert [(r.sent, r.already_sent, r.failed) for r in reports] == [(6, 0, 0), (0, 6, 0),
                                                                     (0, 6, 0)]  # fmt: skip
    rows = month_deliveries(engine, MONTH)
    mine = rows[rows["client"].str.startswith("once-")]
    assert len(mine) == 6 and set(mine["status"]) == {"sent"} and set(mine["attempts"]) == {1}
    status = next(g.payload for g in got if g.payload["type"] == "status")
    assert status["id"] == status_key(MONTH, "once-a", "above")
    assert status["summary"] == (
        "once-a Ltd (2026-11): projected 0.00 USD is above the budget band 0.00 USD to 0.00 USD "
        f"(month to date 0.00 USD as of {AS_OF}, not issued)"
    )
    assert reports[2].summary() == (
        "notify 2026-11: 3 alert(s); 0 sent, 6 already sent, 0 failed\n"
        "  am-alice: 0 sent, 2 already sent, 0 failed\n"
        "  am-bob: 0 sent, 1 already sent, 0 failed\n"
        "  finance: 0 sent, 3 already sent, 0 failed"
    )


def test_a_failed_delivery_is_retried_within_the_run_and_at_the_next(engine, receiver):
    doc = document([client("retry-c", "within", 1, 2)],
                   [anomaly("retry-c", "2026-11-05", 9_000_000, 1_000_000)])  # fmt: skip
    settings = hooks(receiver, bob_clients=["retry-c"])
    receiver.answers[:] = [503, 429]  # two tries refused, the third lands
    first = run(engine, settings, doc, {})
    assert (first.sent, first.failed) == (1, 0)
    assert [verify(g)["client"] for g in receiver.take()] == ["retry-c"] * 3
    rows = month_deliveries(engine, MONTH)
    assert rows.loc[rows["client"] == "retry-c", "attempts"].tolist() == [3]

    down = document([client("down-c", "within", 1, 2)],
                    [anomaly("down-c", "2026-11-06", 9_000_000, 1_000_000)])  # fmt: skip
    settings = hooks(receiver, bob_clients=["down-c"])
    receiver.stop()
    try:
        failed = run(engine, settings, down, {})
    finally:
        receiver.start()
    assert (failed.sent, failed.failed) == (0, 1)
    assert failed.destinations[0].errors == ["connection failed (ConnectionRefusedError)"]
    row = month_deliveries(engine, MONTH).set_index("client").loc["down-c"]
    assert (row["status"], row["attempts"], pd.isna(row["sent_at"])) == ("failed", 3, True)
    assert receiver.take() == []
    again = run(engine, settings, down, {})
    assert (again.sent, again.failed) == (1, 0)
    assert [verify(g)["client"] for g in receiver.take()] == ["down-c"]
    row = month_deliveries(engine, MONTH).set_index("client").loc["down-c"]
    assert (row["status"], row["attempts"], pd.isna(row["last_error"])) == ("sent", 4, True)
    assert run(engine, settings, down, {}).already_sent == 1 and receiver.take() == []


def test_a_client_error_fails_at_once_and_is_tried_next_run(engine, receiver):
    doc = document([client("http400-c", "within", 1, 2)],
                   [anomaly("http400-c", "2026-11-07", 9_000_000, 1_000_000)])  # fmt: skip
    settings = hooks(receiver, bob_clients=["http400-c"])
    receiver.answers[:] = [400]
    report = run(engine, settings, doc, {})
    assert (report.failed, report.destinations[0].errors) == (1, ["HTTP 400"])
    assert len(receiver.take()) == 1  # no retry within the run on a 4xx
    assert run(engine, settings, doc, {}).sent == 1 and len(receiver.take()) == 1


def test_a_closed_month_sends_nothing(engine, receiver):
    doc = document([client("closed-c", "above", 9, 900, (100, 200, 300))],
                   [anomaly("closed-c", "2026-10-09", 9_000_000, 1_000_000)],
                   month="2026-10")  # fmt: skip
    settings = hooks(receiver, bob_clients=["closed-c"], catch_all=["finance"])
    report = run(engine, settings, doc, closed=True)
    assert (report.month_closed, report.sent, report.alerts) == (True, 0, 0)
    assert report.summary() == "notify 2026-10: the month is closed, nothing sent"
    assert receiver.take() == [] and month_deliveries(engine, "2026-10").empty


def test_routes_by_catalog_column_and_client_list_catch_all_only_when_configured(receiver):
    doc = document(
        [client(c, "above", 9, 900, (100, 200, 300)) for c in ("r-alice", "r-bob", "r-nobody")],
        [anomaly(c, "2026-11-02", 9_000_000, 1_000_000) for c in ("r-alice", "r-bob", "r-nobody")],
    )  # fmt: skip
    managers = {"r-alice": "Alice", "r-bob": "Bob", "r-nobody": "Carol"}
    routed = {
        (a.client, a.kind): a.destinations
        for a in alerts(doc, catalog(managers), hooks(receiver, bob_clients=["r-bob"]))
    }
    assert routed == {("r-alice", AlertKind.ANOMALY): ("am-alice",),
                      ("r-alice", AlertKind.STATUS): ("am-alice",),
                      ("r-bob", AlertKind.ANOMALY): ("am-bob",),
                      ("r-bob", AlertKind.STATUS): ("am-bob",),
                      ("r-nobody", AlertKind.ANOMALY): (),
                      ("r-nobody", AlertKind.STATUS): ()}  # fmt: skip
    both = hooks(receiver, bob_clients=["r-bob", "r-alice"], catch_all=["finance"])
    routed = {(a.client, a.kind): a.destinations for a in alerts(doc, catalog(managers), both)}
    assert routed[("r-alice", AlertKind.ANOMALY)] == ("am-alice", "am-bob", "finance")
    assert routed[("r-nobody", AlertKind.STATUS)] == ("finance",)
    # a client the catalog does not list matches no column route
    assert {a.destinations for a in alerts(doc, catalog({"r-bob": "Alice"}), hooks(receiver))
            if a.client == "r-alice"} == {()}  # fmt: skip


def test_status_alerts_above_and_below_only_when_configured(receiver):
    doc = document([client("s-above", "above", 9, 900), client("s-below", "below", 1, 1),
                    client("s-within", "within", 2, 2), client("s-none", "no_budget", 3, 3, None)],
                   [])  # fmt: skip
    settings = hooks(receiver, bob_clients=["s-above", "s-below", "s-within", "s-none"])
    assert [(a.client, a.payload["status"]) for a in alerts(doc, None, _by_list(settings))] == [
        ("s-above", "above")]  # fmt: skip
    below = _by_list(hooks(receiver, bob_clients=["s-below"], notify_below=True))
    found = alerts(doc, None, below)
    assert [(a.client, a.payload["status"]) for a in found] == [("s-above", "above"),
                                                                 ("s-below", "below")]  # fmt: skip
    assert (
        found[1].key
        == status_key(MONTH, "s-below", "below")
        != status_key(MONTH, "s-below", "above")
    )
    assert "is below the budget band 0.00 USD to 0.00 USD" in found[1].payload["summary"]


def _by_list(settings: AlertSettings) -> AlertSettings:
    """The settings without their catalog-column route (for documents without a catalog)."""
    return settings.model_copy(update={"routes": settings.routes[1:]})


def test_no_payload_carries_another_clients_name_or_figure(engine, receiver):
    ids = [f"priv-{i:03d}" for i in range(20)]
    figures = {c: [10_000_000 + 1_000 * i + k for k in range(8)] for i, c in enumerate(ids)}
    clients = [client(c, "above", f[0], f[1], (f[2], f[3], f[4])) for c, f in figures.items()]
    found = [anomaly(c, "2026-11-08", f[5], f[6], source=f"worker-{c}") for c, f in
             figures.items()]  # fmt: skip
    warning = {"client": None, "day": "2026-11-05", "kind": "no_costs", "detail": "priv-007"}
    doc = document(clients, found, warnings=[warning])
    settings = hooks(receiver, bob_clients=ids, catch_all=["finance"])
    report = run(engine, _by_list(settings), doc)
    assert report.sent == 20 * 2 * 2
    for got in receiver.take():
        payload = verify(got)
        own = payload["client"]
        text = got.body.decode()
        others = [c for c in ids if c != own]
        assert not [c for c in others if c in text], own
        numbers = {int(n) for n in re.findall(r":(\d+)[,}]", text)} - {6}  # the exponent
        assert not numbers & {n for c in others for n in figures[c]}, own
        assert numbers <= set(figures[own])


@dataclass
class Mailbox:
    """A real SMTP server (aiosmtpd) on 127.0.0.1 that logs in tc-user/tc-pass and keeps
    every message."""

    port: int
    got: list[tuple[Envelope, Message]] = field(default_factory=list)

    def take(self) -> list[tuple[Envelope, Message]]:
        got, self.got = self.got, []
        return got


@pytest.fixture(scope="module")
def mailbox() -> Iterator[Mailbox]:
    box = Mailbox(free_port())

    class Handler:
        async def handle_DATA(self, server: object, session: object, envelope: Envelope) -> str:
            box.got.append((envelope, message_from_bytes(envelope.content)))  # type: ignore[arg-type]
            return "250 OK"

    def authenticator(server, session, envelope, mechanism, auth_data) -> AuthResult:
        ok = isinstance(auth_data, LoginPassword) and (
            auth_data.login, auth_data.password) == (b"tc-user", b"tc-pass")  # fmt: skip
        return AuthResult(success=ok)

    controller = Controller(Handler(), hostname="127.0.0.1", port=box.port,
                            authenticator=authenticator, auth_require_tls=False)  # fmt: skip
    controller.start()
    yield box
    controller.stop()


def smtp(mailbox: Mailbox) -> dict[str, Any]:
    return {"host": "127.0.0.1", "port": mailbox.port, "sender": "tenantcost@example.org",
            "username_env": "TC_SMTP_USER", "password_env": "TC_SMTP_PASS"}  # fmt: skip


MAIL_ENV = {**SECRETS, "TC_SMTP_USER": "tc-user", "TC_SMTP_PASS": "tc-pass"}


def test_smtp_mail_to_each_destinations_addresses_once(engine, mailbox: Mailbox):
    mailbox.take()
    settings = AlertSettings.model_validate(
        {
            "destinations": {
                "am-eve": {"email": ["eve@example.com", "eve2@example.com"]},
                "finance": {"email": ["fin@example.com"]},
            },
            "smtp": smtp(mailbox),
            "routes": [{"clients": ["mail-c"], "to": ["am-eve"]}],
            "catch_all": ["finance"],
        }
    )
    spike = anomaly("mail-c", "2026-11-10", 8_000_000, 2_000_000)
    doc = document(
        [client("mail-c", "within", 1, 2), client("mail-other", "within", 3, 4)],
        [spike, anomaly("mail-other", "2026-11-10", 9_000_000, 2_000_000)],
    )
    reports = [notify(engine, settings, doc, month_closed=False, catalog=None,
                      environ=MAIL_ENV, backoff=BACKOFF) for _ in range(2)]  # fmt: skip
    got = mailbox.take()
    assert [(r.sent, r.already_sent) for r in reports] == [(3, 0), (0, 3)]
    to_eve = [m for e, m in got if e.rcpt_tos == ["eve@example.com", "eve2@example.com"]]
    assert len(got) == 3 and len(to_eve) == 1
    mail = to_eve[0]
    assert mail["X-Tenantcost-Alert-Id"] == spike["id"] and mail["To"] == (
        "eve@example.com, eve2@example.com"
    )
    assert mail["From"] == "tenantcost@example.org"
    assert mail["Subject"].startswith("tenantcost alert: mail-c (2026-11): spike in import-wor")
    body = mail.get_payload(decode=True).decode().replace("\r\n", "\n")
    assert json.loads(body.split("\n\n", 1)[1])["anomaly"]["amount"] == 8_000_000
    assert "mail-other" not in body
    assert sorted(e.rcpt_tos[0] for e, _ in got) == ["eve@example.com", "fin@example.com",
                                                      "fin@example.com"]  # fmt: skip


def test_settings_mistakes_are_one_line_before_anything_is_claimed(engine, receiver,
                                                                   monkeypatch):  # fmt: skip
    doc = document([client("mistake-c", "within", 1, 2)],
                   [anomaly("mistake-c", "2026-11-11", 9_000_000, 1_000_000)])  # fmt: skip
    with pytest.raises(InputError, match=r"--notify needs an `alerts:` section"):
        run(engine, None, doc)
    with pytest.raises(InputError, match=r"alerts.destinations.am-alice.secret_env: the "
                                         r"environment variable TC_ALICE is not set"):  # fmt: skip
        notify(engine, hooks(receiver, bob_clients=["mistake-c"]), doc, month_closed=False,
               catalog=catalog({}), environ={})  # fmt: skip
    with pytest.raises(InputError, match=r"TC_FIN is not set"):  # also with nothing to send
        notify(engine, hooks(receiver), document([], []), month_closed=False,
               catalog=catalog({}), environ={"TC_ALICE": "a", "TC_BOB": "b"})  # fmt: skip
    with pytest.raises(
        InputError,
        match=r"alerts.routes\[0\] routes by the catalog column "
        r"'account_manager', but the store has no client",
    ):
        run(engine, hooks(receiver), doc)
    with pytest.raises(
        InputError,
        match=r"alerts.routes\[0\]: the client catalog has no "
        r"column 'account_manager' \(it has client, name\)",
    ):
        notify(engine, hooks(receiver), doc, month_closed=False,
               catalog=pd.DataFrame({"client": ["x"], "name": ["X"]}), environ=SECRETS)  # fmt: skip
    monkeypatch.setenv("ALL_PROXY", "socks5://user:secret@127.0.0.1:1080")
    with pytest.raises(InputError, match=r"^alerts.destinations.am-alice.webhook: the proxy for "
                       r"http URLs is not an http:// proxy URL \(scheme 'socks5'\)") as bad:
        notify(engine, hooks(receiver), doc, month_closed=False, catalog=catalog({}),
               environ=SECRETS)  # fmt: skip
    assert "secret" not in str(bad.value)  # the proxy URL's password is never quoted
    monkeypatch.delenv("ALL_PROXY")
    rows = month_deliveries(engine, MONTH)
    assert "mistake-c" not in set(rows["client"]) and receiver.take() == []


def test_a_claim_is_taken_over_when_stale_or_its_process_is_gone(engine):
    """Another run's live claim is left alone (busy); a claim older than the bound, or held
    by a process of this host that has died, is taken over at once."""
    mine = Delivery("claim-key", "am-x", "webhook", MONTH, "claim-c", "anomaly")
    other_run = Claimant()  # this process, another run: alive
    assert claim(engine, [mine], other_run).mine == [mine]
    held = claim(engine, [mine], Claimant())
    assert (held.mine, held.busy, held.already_sent) == ([], [mine], [])
    t = table(AlertDelivery)

    def held_by(claimant: str, age: timedelta = timedelta(0)) -> None:
        with engine.begin() as connection:
            connection.execute(update(t).where(t.c.alert_key == "claim-key").values(
                status="sending", claimed_by=claimant, claimed_at=utcnow() - age))  # fmt: skip

    me = Claimant()
    elsewhere = Claimant(host="another-host", pid=os.getpid())
    held_by(elsewhere.text())
    assert claim(engine, [mine], me).busy == [mine]  # another host's process: never judged
    held_by(elsewhere.text(), timedelta(minutes=16))
    assert claim(engine, [mine], me).mine == [mine]  # but its claim goes stale
    gone_pid = subprocess.Popen(["true"])  # a finished, reaped process: its id is free
    gone_pid.wait()
    held_by(Claimant(pid=gone_pid.pid).text())
    taken = claim(engine, [mine], me)
    assert taken.mine == [mine], "a dead process of this host holds nothing"
    row = month_deliveries(engine, MONTH).set_index("client").loc["claim-c"]
    assert (row["status"], row["claimed_by"]) == ("sending", me.text())
    assert not renew(engine, mine, other_run) and renew(engine, mine, me)


def test_routes_by_the_stored_catalog_and_a_name_that_breaks_a_mail_fails_alone(
    tmp_path: Path, receiver: Receiver, mailbox: Mailbox
):
    """Routes by the stored catalog's column; then a catalog name with CR/LF, written straight
    into the store (as `catalog load` accepted it before the stored-text rule): its e-mail
    cannot be built (ValueError in the Subject). That delivery alone fails, with a one-line
    reason, and is tried again by the next run; every other e-mail and webhook is sent."""
    url = f"sqlite:///{tmp_path / 'store.db'}"
    where = ["--db", url, "--data", str(tmp_path / "data")]
    assert CliRunner().invoke(app, ["db", "upgrade", *where]).exit_code == 0
    store = open_engine(resolve_settings(db=url, environ={}))
    assert routing_catalog(store) is None  # no catalog yet
    for command in (["rules", "load", str(EXAMPLE / "rules.yaml")],
                    ["catalog", "load", str(EXAMPLE / "catalog.csv")]):  # fmt: skip
        done = CliRunner().invoke(app, [*command, *where])
        assert done.exit_code == 0, done.output
    settings = AlertSettings.model_validate(
        {
            "destinations": {
                "am-dana": {"webhook": receiver.url("/alice"), "secret_env": "TC_ALICE"}
            },
            "routes": [{"column": "account_manager", "value": "Dana Smith", "to": ["am-dana"]}],
        }
    )
    doc = document([client(c, "within", 1, 2) for c in ("client-a", "client-b", "client-c")],
                   [anomaly(c, "2026-11-09", 9_000_000, 1_000_000)
                    for c in ("client-a", "client-b", "client-c")])  # fmt: skip
    report = notify(store, settings, doc, month_closed=False, catalog=routing_catalog(store),
                    environ=SECRETS, backoff=BACKOFF)  # fmt: skip
    assert (report.sent, report.unrouted) == (2, 1)
    got = sorted((verify(g)["client"], g.payload["client_name"]) for g in receiver.take())
    assert got == [("client-a", "Acme Analytics"), ("client-b", "Bolt Imports")]

    broken = "Acme\r\nBcc: someone@example.com"
    with store.begin() as connection:
        connection.execute(update(table(CatalogClient)).where(
            table(CatalogClient).c.client == "client-a").values(name=broken))  # fmt: skip
    everyone = AlertSettings.model_validate({
        "destinations": {"all": {"webhook": receiver.url("/alice"), "secret_env": "TC_ALICE",
                                 "email": ["all@example.com"]}},
        "smtp": smtp(mailbox), "catch_all": ["all"]})  # fmt: skip
    mailbox.take()
    runs = [notify(store, everyone, doc, month_closed=False, catalog=routing_catalog(store),
                   environ=MAIL_ENV, backoff=BACKOFF) for _ in range(2)]  # fmt: skip
    rows = month_deliveries(store, MONTH).set_index(["destination", "client", "channel"])
    rows = rows.sort_index()
    store.dispose()
    reason = "the e-mail could not be built (ValueError)"
    assert [(r.sent, r.already_sent, r.failed) for r in runs] == [(5, 0, 1), (0, 5, 1)]
    assert runs[0].destinations[0].errors == [reason]
    assert runs[1].failure() == (
        "error: 1 alert delivery of 2026-11 failed; the next run tries again (reasons above)"
    )
    mails = mailbox.take()
    assert sorted(m["Subject"].split(" (")[0] for _, m in mails) == [
        "tenantcost alert: Bolt Imports", "tenantcost alert: Cobalt Labs"]  # fmt: skip
    hooks_got = [verify(g) for g in receiver.take()]
    assert sorted(h["client_name"] for h in hooks_got) == [broken, "Bolt Imports", "Cobalt Labs"]
    failed = rows.loc[("all", "client-a", "email")]
    assert (failed["status"], failed["attempts"], failed["last_error"]) == ("failed", 2, reason)
    assert (rows.loc["all", "status"] == "sent").sum() == 5


def test_two_concurrent_runs_send_each_delivery_once(engine, receiver):
    """Two `watch --notify` runs at once (two claimants) against a slow receiver: each
    delivery reaches the receiver once; what one run holds, the other reports as busy."""
    ids = [f"twin-{i}" for i in range(4)]
    doc = document([client(c, "within", 1, 2) for c in ids],
                   [anomaly(c, "2026-11-02", 9_000_000, 1_000_000) for c in ids])  # fmt: skip
    settings = _by_list(hooks(receiver, bob_clients=ids))
    reports: list[NotifyReport] = []
    receiver.delay = 0.1
    try:
        runs = [threading.Thread(target=lambda: reports.append(notify(
            engine, settings, doc, month_closed=False, catalog=None, environ=SECRETS,
            backoff=BACKOFF, wait=10))) for _ in range(2)]  # fmt: skip
        for each in runs:
            each.start()
        for each in runs:
            each.join()
    finally:
        receiver.delay = 0.0
    got = sorted(verify(g)["client"] for g in receiver.take())
    assert got == ids
    assert sum(r.sent for r in reports) == 4 and sum(r.failed for r in reports) == 0
    assert sum(r.sent + r.busy + r.already_sent for r in reports) == 8


def test_a_run_killed_while_sending_is_retried_at_once_by_the_next(tmp_path, receiver):
    """SIGKILL a run while its receiver holds the request: its delivery stays `sending`,
    claimed by a process that is gone; the next run on this host takes it over at once."""
    url = f"sqlite:///{tmp_path / 'store.db'}"
    store = open_engine(resolve_settings(db=url, environ={}), create=True)
    upgrade(store)
    spec = {"destinations": {"hang": {"webhook": receiver.url("/hang"),
                                      "secret_env": "TC_ALICE"}},
            "catch_all": ["hang"]}  # fmt: skip
    doc = document([client("killed-c", "within", 1, 2)],
                   [anomaly("killed-c", "2026-11-03", 9_000_000, 1_000_000)])  # fmt: skip
    script = (
        "import json, sys\n"
        "from tenantcost.config.watch import AlertSettings\n"
        "from tenantcost.store.engine import open_engine\n"
        "from tenantcost.store.notify import notify\n"
        "from tenantcost.store.settings import resolve_settings\n"
        "spec, doc, secrets = (json.loads(a) for a in sys.argv[2:])\n"
        "engine = open_engine(resolve_settings(db=sys.argv[1], environ={}))\n"
        "notify(engine, AlertSettings.model_validate(spec), doc, month_closed=False,\n"
        "       catalog=None, environ=secrets)\n"
    )
    receiver.released.clear()
    child = subprocess.Popen([sys.executable, "-c", script, url, json.dumps(spec),
                              json.dumps(doc), json.dumps(SECRETS)])  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while not receiver.got and time.monotonic() < deadline and child.poll() is None:
            time.sleep(0.05)
        assert receiver.got, "the child never reached the receiver"
        row = month_deliveries(store, MONTH).iloc[0]
        assert (row["status"], row["claimed_by"].split(" ")[2]) == ("sending", str(child.pid))
        child.send_signal(signal.SIGKILL)
        child.wait()
    finally:
        receiver.released.set()
        if child.poll() is None:
            child.kill()
            child.wait()
    spec["destinations"]["hang"]["webhook"] = receiver.url("/alice")  # answers at once now
    report = notify(store, AlertSettings.model_validate(spec), doc, month_closed=False,
                    catalog=None, environ=SECRETS, backoff=BACKOFF)  # fmt: skip
    row = month_deliveries(store, MONTH).iloc[0]
    store.dispose()
    assert (report.sent, report.busy, row["status"]) == (1, 0, "sent")
    assert [verify(g)["client"] for g in receiver.take()] == ["killed-c", "killed-c"]
