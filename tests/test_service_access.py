"""Access matrix of the service: every API route × every role × own / other / non-existent
client, against a real ``tenantcost serve`` on SQLite and on a real PostgreSQL.

The expected answers are written out here from the access rules (not derived from
tenantcost.service.permissions), so a wrong rule in the code fails this test:

* no token: 401 everywhere but the health probes and the API documentation;
* ingest: POST usage only, 403 elsewhere;
* account-manager: lists, months and its own client; another client's URL is 404 with the
  same body as a client that does not exist; cluster-wide routes 403;
* finance: every client, cluster routes, close and reopen, the batch list and withdrawal;
  tokens 403;
* product: every client (issued figures only), the months, the cascade and key
  comparison (issued months), the unit economics, the month's watch; close, reopen,
  batches, tokens, ingest and the invoice cascade 403;
* admin: everything.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest

from .service_server import (
    MONTH,
    Service,
    create_token,
    example_store,
    running_service,
)

OWN, OTHER, GHOST = "client-a", "client-b", "no-such-client"
ROLES = ("admin", "finance", "account-manager", "product", "ingest", None)
EVERYONE = {"admin", "finance", "account-manager", "product", "ingest", None}
READERS = {"admin", "finance", "account-manager", "product"}
CLUSTER = {"admin", "finance"}
ISSUED = {"admin", "finance", "product"}
"""The issued months' cascade and key comparison, the unit economics, the month's watch."""
INGESTERS = {"admin", "finance", "ingest"}


@dataclass(frozen=True)
class Route:
    """A route, who may pass the access check, and the status it then answers."""

    method: str
    path: str
    allowed: set[str | None]
    ok: int = 200
    json: object | None = None
    content: bytes | None = None
    per_client: bool = False

    def url(self, client: str) -> str:
        return self.path.format(client=client, month=MONTH)


C = "/api/v1/clients/{client}"
ROUTES = [
    Route("GET", "/healthz", EVERYONE),
    Route("GET", "/readyz", EVERYONE),
    Route("GET", "/openapi.json", EVERYONE),
    Route("GET", "/docs", EVERYONE),
    Route("GET", "/api/v1/months", READERS),
    Route("GET", "/api/v1/clients?q=client&per_page=2", READERS),
    Route("GET", C, READERS, per_client=True),
    Route("GET", C + "/months/{month}", READERS, per_client=True),
    Route("GET", C + "/months/{month}/sheet.html", READERS, per_client=True),
    Route("GET", C + "/months/{month}/sheet.md", READERS, per_client=True),
    Route("GET", C + "/months/{month}/sheet.pdf", READERS, per_client=True),
    Route("GET", C + "/history", READERS, per_client=True),
    Route("GET", C + "/trend", READERS, per_client=True),
    Route("GET", C + "/unit-cost-trend?format=csv", READERS, per_client=True),
    # movers: account managers too, among their own clients (no previous month here: empty)
    Route("GET", "/api/v1/months/{month}/movers", READERS),
    Route("GET", "/api/v1/months/{month}/reconciliation", ISSUED),
    Route("GET", "/api/v1/months/{month}/reconciliation?against=invoice", CLUSTER, ok=404),
    Route("GET", "/api/v1/months/{month}/compare?keys=requests,cpu_seconds", ISSUED),
    # the store of this module has no catalog: access lets through, pricing refuses
    Route("GET", "/api/v1/months/{month}/unit-economics?by=plan", ISSUED, ok=422),
    # the month-wide watch, every client's month to date; none recorded (404 naming the command)
    Route("GET", "/api/v1/months/{month}/watch", ISSUED, ok=404),
    # Writes: requests access lets through but the store refuses, so nothing changes.
    Route("POST", "/api/v1/months/{month}/close", CLUSTER, ok=409, json={}),
    Route("POST", "/api/v1/months/{month}/reopen", CLUSTER, ok=422, json={"reason": ""}),
    Route("GET", "/api/v1/batches?month={month}", CLUSTER),
    Route(
        "POST",
        "/api/v1/batches/0123456789abcdef/withdraw",
        CLUSTER,
        ok=404,
        json={"reason": "no such batch"},
    ),
    Route("GET", "/api/v1/tokens", {"admin"}),
    Route("POST", "/api/v1/tokens", {"admin"}, ok=422, json={"role": "nobody"}),
    Route("DELETE", "/api/v1/tokens/no-such-token", {"admin"}, ok=404),
    Route("POST", "/api/v1/usage", INGESTERS, ok=422, json={"records": []}),
    Route("POST", "/api/v1/usage.parquet", INGESTERS, ok=422, content=b"not parquet"),
]


def expected(route: Route, role: str | None, client: str) -> int:
    if role not in route.allowed:
        return 401 if role is None else 403
    if not route.per_client:
        return route.ok
    if client == GHOST or (client == OTHER and role == "account-manager"):
        return 404
    return route.ok


@dataclass(frozen=True)
class Served:
    service: Service
    tokens: dict[str, str]
    db: str


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def served(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Served]:
    tmp = tmp_path_factory.mktemp(f"access-{request.param}")
    if request.param == "sqlite":
        db = f"sqlite:///{tmp / 'store.db'}"
    else:
        from .postgres_fixture import new_database

        db = new_database(request.getfixturevalue("postgres_admin_url"))
    data = str(tmp / "data")
    example_store(db, data)
    tokens = {
        "admin": create_token(db, "admin", "root-admin"),
        "finance": create_token(db, "finance", "fin"),
        "account-manager": create_token(db, "account-manager", "am-a", OWN, "client-c"),
        "product": create_token(db, "product", "pricing"),
        "ingest": create_token(db, "ingest", "app"),
    }
    with running_service(db, data, tmp / "serve.log") as service:
        yield Served(service, tokens, db)


def call(served: Served, route: Route, role: str | None, client: str) -> httpx.Response:
    headers = {"Authorization": f"Bearer {served.tokens[role]}"} if role else {}
    return httpx.request(route.method, served.service.url + route.url(client), headers=headers,
                         json=route.json, content=route.content, timeout=60)  # fmt: skip


def test_every_route_every_role_every_client(served: Served) -> None:
    wrong = []
    for route in ROUTES:
        for role in ROLES:
            for client in (OWN, OTHER, GHOST) if route.per_client else (OWN,):
                answer = call(served, route, role, client)
                if answer.status_code != expected(route, role, client):
                    wrong.append(f"{route.method} {route.url(client)} as {role}: "
                                 f"{answer.status_code} (expected {expected(route, role, client)})"
                                 f" {answer.text[:200]}")  # fmt: skip
    assert not wrong, "\n".join(wrong)


def test_another_clients_url_reads_exactly_like_a_client_that_does_not_exist(
    served: Served,
) -> None:
    for route in (r for r in ROUTES if r.per_client):
        for role in ("account-manager", "finance"):
            other = call(served, route, role, OTHER if role == "account-manager" else GHOST)
            ghost = call(served, route, role, GHOST)
            assert other.status_code == ghost.status_code == 404
            assert other.content == ghost.content == b'{"detail":"not found"}'
            assert other.headers["content-type"] == ghost.headers["content-type"]
            assert other.headers["content-length"] == ghost.headers["content-length"]


def test_an_account_manager_lists_and_searches_only_its_own_clients(served: Served) -> None:
    headers = {"Authorization": f"Bearer {served.tokens['account-manager']}"}
    url = served.service.url + "/api/v1/clients"
    every = httpx.get(url, headers=headers).json()
    assert [i["id"] for i in every["items"]] == ["client-a", "client-c"]  # by amount, desc
    assert every["total"] == 2 and (every["page"], every["per_page"]) == (1, 50)
    assert {i["name"] for i in every["items"]} == {None}  # no catalog: no names
    assert httpx.get(url, params={"q": "B"}, headers=headers).json()["total"] == 0
    admin = {"Authorization": f"Bearer {served.tokens['admin']}"}
    found = httpx.get(url, params={"q": "B"}, headers=admin).json()
    assert [(i["id"], i["name"], i["statement"]) for i in found["items"]] == [
        ("client-b", None, True)]  # fmt: skip
    assert found["total"] == 1
    page2 = httpx.get(url, params={"per_page": 2, "page": 2, "sort": "id"}, headers=admin).json()
    assert [i["id"] for i in page2["items"]] == ["client-c"]
    assert (page2["page"], page2["per_page"], page2["total"]) == (2, 2, 3)
    assert httpx.get(url, params={"per_page": 501}, headers=admin).status_code == 422


def test_an_account_managers_figures_name_no_other_client(served: Served) -> None:
    headers = {"Authorization": f"Bearer {served.tokens['account-manager']}"}
    base = f"{served.service.url}/api/v1/clients/{OWN}/months/{MONTH}"
    month = httpx.get(base, headers=headers)
    assert month.status_code == 200
    doc = month.json()
    assert doc["amount"] == 123458 and doc["status"] == "issued" and doc["revision"] == 1
    assert all(set(line) == {"source", "kind", "key", "measure", "amount", "windows"}
               for line in doc["lines"])  # fmt: skip
    assert sum(line["amount"] for line in doc["lines"]) == 123458
    assert doc["confidence"]["level"].lower() == "low"  # as the sheet says (1 hour of 720)
    assert len(doc["confidence"]["criteria"]) == 3
    for fmt in ("html", "md"):
        sheet = httpx.get(f"{base}/sheet.{fmt}", headers=headers, timeout=60).text
        assert "client-a" in sheet and "client-b" not in sheet and "client-c" not in sheet
    pdf = httpx.get(f"{base}/sheet.pdf", headers=headers, timeout=60)
    assert pdf.content.startswith(b"%PDF") and pdf.headers["content-type"] == "application/pdf"


def test_bad_tokens_are_401_and_denials_are_logged_without_the_token(served: Served) -> None:
    url = served.service.url + "/api/v1/months"
    # this test's own denials (the module's server is shared: other tests may not have run)
    other = httpx.get(f"{served.service.url}/api/v1/clients/{OTHER}",
                      headers={"Authorization": f"Bearer {served.tokens['account-manager']}"})
    assert other.status_code == 404
    ingest = httpx.get(url, headers={"Authorization": f"Bearer {served.tokens['ingest']}"})
    assert ingest.status_code == 403
    for header in ("Bearer tc_not-a-real-token", "Bearer", "Basic dXNlcjpwYXNz",
                   f"Token {served.tokens['admin']}"):  # fmt: skip
        answer = httpx.get(url, headers={"Authorization": header})
        assert answer.status_code == 401 and answer.headers["www-authenticate"] == "Bearer"
    log = served.service.log_text()
    assert "denied 404 token=am-a role=account-manager action=view-client" in log
    assert "denied 403 token=app role=ingest" in log
    assert "denied 401 token=(none valid)" in log
    for token in served.tokens.values():
        assert token not in log and token[3:12] not in log
