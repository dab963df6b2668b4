"""Client ids that broke routes, and the inputs that answered 500,
against a real ``tenantcost serve`` on SQLite and on a real PostgreSQL 15.

* ``team/a``, ``客户`` and ``a~b`` open on every client route (API, pages, sheet downloads,
  history) for finance and for their account manager; another account manager gets the 404
  of a client that does not exist; the client list's links, the client page's sheet links
  and the finance month page's links all open; downloads carry an RFC 6266
  ``Content-Disposition`` (``filename*`` in UTF-8, an ASCII ``filename`` fallback).
* Each input below answered 500 or printed a traceback; each is now a 4xx whose body names
  the field (or a one-line CLI error, exit 2): deeply nested JSON, a lone surrogate, NUL,
  a page number past SQLite's integers, ``--expires 99999999999d``.

The URLs are written out here (``team~2Fa``...), not only built by the code under test, so
a change of the encoding that breaks existing links fails this test.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from html import unescape
from urllib.parse import quote, unquote

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tenantcost.client_id import client_id_problem
from tenantcost.service.urls import api_client_path, client_href, decode_segment, encode_segment

from .odd_clients import ODD_CLIENTS, ODD_TOKEN, odd_client_store
from .service_server import MONTH, SECRET, Service, create_token, invoke, running_service

SEGMENTS = {"team/a": "team~2Fa", "客户": "%E5%AE%A2%E6%88%B7", "a~b": "a~7Eb"}
"""The URL segment of each odd client, as links and scripts write it."""
CLIENT_ROUTES = ("", f"/months/{MONTH}", "/history", f"/months/{MONTH}/sheet.html",
                 f"/months/{MONTH}/sheet.md", f"/months/{MONTH}/sheet.pdf")  # fmt: skip
DISPOSITIONS = {
    ("team/a", "pdf"): 'attachment; filename="2026-11-team_a.pdf"',
    ("客户", "pdf"): 'attachment; filename="2026-11-__.pdf"; '
    "filename*=UTF-8''2026-11-%E5%AE%A2%E6%88%B7.pdf",
    ("客户", "html"): 'inline; filename="2026-11-__.html"; '
    "filename*=UTF-8''2026-11-%E5%AE%A2%E6%88%B7.html",
    ("a~b", "md"): "attachment; filename=\"2026-11-a_b.md\"; filename*=UTF-8''2026-11-a~b.md",
}
ROW_LINK = re.compile(r'<th scope="row"><a href="([^"]+)">([^<]*)</a>')
SHEET_LINK = re.compile(r'<a href="([^"]+)" id="(sheet|pdf|md)-link"')
CSRF = re.compile(r'name="csrf_token" value="([^"]+)"')


@dataclass(frozen=True)
class Served:
    service: Service
    db: str
    tokens: dict[str, str]

    def get(self, path: str, who: str | None = "finance") -> httpx.Response:
        headers = {"Authorization": f"Bearer {self.tokens[who]}"} if who else {}
        return httpx.get(self.service.url + path, headers=headers, timeout=60)

    def post(self, path: str, content: bytes, who: str = "admin") -> httpx.Response:
        headers = {"Authorization": f"Bearer {self.tokens[who]}",
                   "Content-Type": "application/json"}  # fmt: skip
        return httpx.post(self.service.url + path, content=content, headers=headers, timeout=60)


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def served(request: pytest.FixtureRequest, tmp_path_factory) -> Iterator[Served]:
    folder = tmp_path_factory.mktemp(f"hostile-{request.param}")
    if request.param == "sqlite":
        db = f"sqlite:///{folder / 'store.db'}"
    else:
        from .postgres_fixture import new_database

        db = new_database(request.getfixturevalue("postgres_admin_url"))
    data = str(folder / "data")
    odd_client_store(db, data, folder)
    tokens = {
        "admin": create_token(db, "admin", "hostile-admin"),
        "finance": create_token(db, "finance", "hostile-finance"),
        "odd": create_token(db, "account-manager", ODD_TOKEN, *ODD_CLIENTS),
        "other": create_token(db, "account-manager", "am-client-a", "client-a"),
    }
    with running_service(db, data, folder / "serve.log", secret=SECRET) as service:
        yield Served(service, db, tokens)
        assert "Traceback" not in service.log_text(), service.log_text()[-3000:]


def test_client_urls_keep_plain_ids_and_encode_the_rest() -> None:
    assert {client: encode_segment(client) for client in SEGMENTS} == SEGMENTS
    for plain in ("client-a", "acme.eu", "A_1-b"):  # the URLs they always had
        assert encode_segment(plain) == quote(plain, safe="") == plain
    assert client_href("team/a", MONTH) == "/clients/team~2Fa?month=2026-11"
    assert api_client_path("a~b", "history") == "/api/v1/clients/a~7Eb/history"
    assert encode_segment("50% off?") == "50~25~20off~3F"
    assert encode_segment("..") == "~2E~2E" and decode_segment("~2E~2E") == ".."
    assert decode_segment("~E5~AE~A2") == "客"  # Datasette writes non-ASCII so; read it too
    for bad in ("a~b", "a~2", "~ED~A0~80"):
        with pytest.raises(ValueError):
            decode_segment(bad)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=40).filter(lambda c: c != "" and client_id_problem(c) is None))
def test_every_client_id_round_trips_through_its_url_segment(client: str) -> None:
    segment = encode_segment(client)
    assert "/" not in segment and segment not in (".", "..") and segment.isascii()
    assert decode_segment(unquote(segment)) == client  # the server percent-decodes first


def test_odd_ids_open_on_every_client_route_for_finance_and_their_manager(served: Served):
    for client, segment in SEGMENTS.items():
        for route in CLIENT_ROUTES:
            api = f"/api/v1/clients/{segment}{route}"
            for who in ("finance", "odd"):
                answer = served.get(api, who)
                assert answer.status_code == 200, (api, who, answer.text[:300])
                if route in ("", f"/months/{MONTH}"):
                    assert answer.json()["id" if not route else "client"] == client
                if route == "/history":
                    assert {entry["client"] for entry in answer.json()} == {client}
            other, ghost = served.get(api, "other"), served.get(f"/api/v1/clients/ghost{route}")
            assert other.status_code == ghost.status_code == 404
            assert other.content == ghost.content == b'{"detail":"not found"}'
        for page in (f"/clients/{segment}", f"/clients/{segment}?month={MONTH}"):
            for who in ("finance", "odd"):
                answer = served.get(page, who)
                assert answer.status_code == 200 and client in unescape(answer.text), page


def test_the_links_of_every_page_open_and_downloads_name_the_client(served: Served):
    for who, expected in (("odd", set(ODD_CLIENTS)), ("finance", {*ODD_CLIENTS, "client-a"})):
        listing = served.get("/clients", who)
        links = {unescape(name): unescape(href) for href, name in ROW_LINK.findall(listing.text)}
        assert expected <= set(links), links
        for client in expected:
            assert links[client] == client_href(client, MONTH)  # the list is of a month (issue 36)
            page = served.get(links[client], who)
            assert page.status_code == 200 and client in unescape(page.text)
            sheets = {kind: unescape(href) for href, kind in SHEET_LINK.findall(page.text)}
            assert set(sheets) == {"sheet", "pdf", "md"}, page.text[:500]
            for kind, href in sheets.items():
                fmt = {"sheet": "html", "pdf": "pdf", "md": "md"}[kind]
                sheet = served.get(href, who)
                assert sheet.status_code == 200, (href, sheet.text[:300])
                disposition = sheet.headers["content-disposition"]
                assert disposition.isascii()
                if (client, fmt) in DISPOSITIONS:
                    assert disposition == DISPOSITIONS[client, fmt]
                encoded = re.search(r"filename\*=UTF-8''(\S+)$", disposition)
                name = unquote(encoded.group(1)) if encoded else disposition.split('"')[1]
                assert name == f"{MONTH}-{client.replace('/', '_')}.{fmt}"
    month = served.get(f"/months/{MONTH}", "finance")
    found = {unescape(name): unescape(href) for href, name in ROW_LINK.findall(month.text)}
    for client in ODD_CLIENTS:
        assert found[client] == client_href(client, MONTH)
        assert served.get(found[client], "finance").status_code == 200


def _detail(answer: httpx.Response) -> str:
    """The error's ``detail``, as one string (FastAPI's validation list included)."""
    detail = answer.json()["detail"]
    return detail if isinstance(detail, str) else json.dumps(detail)


def test_deeply_nested_or_undecodable_bodies_are_422_on_every_json_route(served: Served):
    routes = (f"/api/v1/months/{MONTH}/close", f"/api/v1/months/{MONTH}/reopen",
              "/api/v1/tokens", "/api/v1/usage")  # fmt: skip
    for path in routes:
        for body in (b"[" * 100_000, b'{"a":' * 50_000, b"\xff\xfe{}", b"1" * 5000):
            answer = served.post(path, body)
            assert answer.status_code == 422, (path, body[:10], answer.text[:300])
            assert _detail(answer).startswith("body: ") and answer.json()["field"] == "body"
        if not path.endswith("/usage"):  # FastAPI echoed these bytes in its error: a 500
            untyped = httpx.post(
                served.service.url + path,
                content=b"\x80",
                timeout=60,
                headers={"Authorization": f"Bearer {served.tokens['admin']}"},
            )
            assert untyped.status_code == 415 and untyped.json()["field"] == "body"
        nested = b'{"reason": ' + b"[" * 500 + b"]" * 500 + b"}"  # readable, but too deep
        answer = served.post(path, nested)
        assert answer.status_code == 422, (path, answer.text[:300])
        if not path.endswith("/usage"):  # usage's own model refuses it (no records)
            assert _detail(answer).startswith("reason" + "[0]" * 31 + ": nested deeper than 32")


def test_lone_surrogates_are_422_naming_the_field(served: Served):
    for path, body, field in (
        (f"/api/v1/months/{MONTH}/reopen", b'{"reason": "acme \\ud800"}', "reason"),
        ("/api/v1/tokens", b'{"role": "account-manager", "clients": ["x", "\\udfff"]}',
         "clients[1]"),
        ("/api/v1/tokens", b'{"role": "admin", "name": "\\ud800"}', "name"),
    ):  # fmt: skip
        answer = served.post(path, body)
        assert answer.status_code == 422, answer.text
        assert answer.json()["field"] == field and _detail(answer).startswith(f"{field}: ")
        assert "lone surrogate" in _detail(answer)
    for path in ("/api/v1/clients/~ED~A0~80", "/clients/~ED~A0~80"):  # UTF-8 of U+D800
        answer = served.get(path)
        assert answer.status_code == 422 and answer.json()["field"] == "client_id", answer.text
    # A percent-encoded surrogate reaches the route as U+FFFD (the server decodes with
    # replacement), which no client has: an empty search, not an error.
    answer = served.get("/api/v1/clients?q=%ED%A0%80")
    assert answer.status_code == 200 and answer.json()["total"] == 0


def test_nul_in_a_search_a_reason_or_a_client_url_is_422_naming_it(served: Served):
    for path in ("/api/v1/clients?q=a%00", "/clients?q=%00"):
        answer = served.get(path)
        assert answer.status_code == 422, answer.text
        assert answer.json()["detail"][0]["loc"] == ["query", "q"]
    for path in ("/api/v1/clients/a%00b", f"/api/v1/clients/a%00b/months/{MONTH}/sheet.pdf",
                 "/clients/a%00b"):  # fmt: skip
        answer = served.get(path)
        assert answer.status_code == 422 and _detail(answer).startswith("client_id: "), path
    answer = served.post(f"/api/v1/months/{MONTH}/reopen", b'{"reason": "a\\u0000b"}')
    assert answer.status_code == 422 and answer.json()["field"] == "reason"
    answer = served.post("/api/v1/tokens", b'{"role": "account-manager", "clients": ["a\\u0000"]}')
    assert answer.status_code == 422 and answer.json()["field"] == "clients[0]"
    gone = httpx.delete(served.service.url + "/api/v1/tokens/a%00b", timeout=60,
                        headers={"Authorization": f"Bearer {served.tokens['admin']}"})  # fmt: skip
    assert gone.status_code == 404 and _detail(gone).startswith("no token named")
    # The reopen form: logged in (session and CSRF), a reason holding NUL.
    with httpx.Client(base_url=served.service.url, timeout=60) as browser:
        csrf = CSRF.search(browser.get("/login").text)
        assert csrf is not None
        browser.post("/login", data={"token": served.tokens["finance"],
                                     "csrf_token": csrf.group(1)})  # fmt: skip
        form = CSRF.search(browser.get(f"/months/{MONTH}").text)
        assert form is not None
        answer = browser.post(f"/months/{MONTH}/reopen",
                              data={"csrf_token": form.group(1), "reason": "a\x00b"})  # fmt: skip
        assert answer.status_code == 422 and "The reason holds NUL" in answer.text
    assert served.get(f"/api/v1/months/{MONTH}/reconciliation").status_code == 200
    months = served.get("/api/v1/months").json()
    assert [m["state"] for m in months if m["month"] == MONTH] == ["closed"]  # not reopened


def test_page_numbers_past_any_page_are_422_naming_page(served: Served):
    huge = "99999999999999999999"
    for path in (f"/api/v1/clients?page={huge}", f"/clients?page={huge}",
                 f"/months/{MONTH}?page={huge}", "/api/v1/clients?page=1000001",
                 f"/api/v1/clients?per_page={'9' * 5000}"):  # fmt: skip
        answer = served.get(path)
        assert answer.status_code == 422, (path, answer.text[:300])
        assert answer.json()["detail"][0]["loc"][0:2] == ["query", "page" if "?page" in path
                                                           else "per_page"]  # fmt: skip
    assert served.get("/api/v1/clients?page=1000000").json()["items"] == []


def test_an_expiry_past_any_date_is_refused_by_the_api_and_the_cli(served: Served):
    for expires in ("99999999999d", "36501d", "9" * 5000 + "h"):
        answer = served.post("/api/v1/tokens", json.dumps({"role": "admin", "expires": expires})
                             .encode())  # fmt: skip
        assert answer.status_code == 422 and _detail(answer).startswith("--expires: at most")
    done = invoke("token", "create", "--role", "admin", "--expires", "99999999999d",
                  "--db", served.db)  # fmt: skip
    assert done.exit_code == 2 and done.stdout == ""
    assert done.stderr == "error: --expires: at most 36500d (100 years), got '99999999999d'\n"
    odd = invoke("token", "create", "--role", "account-manager", "--client", "a\x1bb",
                 "--db", served.db)  # fmt: skip
    assert odd.exit_code == 2 and odd.stderr == (
        "error: --client: client id holds a control character U+001B at character 2\n"
    )
    longest = served.post("/api/v1/tokens", b'{"role": "admin", "expires": "36500d"}')
    assert longest.status_code == 201 and longest.json()["expires_at"] > "2125"


OUTSIDE_MONTHS = ("0000-01", "9999-12", "1999-12", "2100-01")
"""Well formed (``YYYY-MM``) but outside 2000-01 .. 2099-12: 500s and tracebacks before."""


def test_months_outside_the_range_are_422_and_one_cli_line(served: Served, tmp_path) -> None:
    from sqlalchemy import create_engine, func, select

    from tenantcost.store.models import BudgetVersion, table

    for month in OUTSIDE_MONTHS:
        for path in (f"/api/v1/batches?month={month}", f"/months/{month}",
                     f"/api/v1/months/{month}/compare?keys=requests",
                     f"/api/v1/months/{month}/reconciliation", f"/pricing?month={month}",
                     f"/api/v1/clients/client-a/months/{month}", f"/clients/client-a?month={month}",
                     f"/api/v1/months/{month}/unit-economics"):  # fmt: skip
            answer = served.get(path)
            assert answer.status_code == 422, (path, answer.text[:300])
        for path in (f"/api/v1/months/{month}/close", f"/api/v1/months/{month}/reopen"):
            answer = served.post(path, b'{"reason": "typo"}')
            assert answer.status_code == 422, (path, answer.text[:300])
    assert served.get("/months/11-2026").status_code == 404  # not a month: no such page
    far = served.get(f"/api/v1/months/{MONTH}/unit-economics?as_of=2026-11-20T00:00:00%2B25:00")
    assert far.status_code == 422 and "UTC offset +25:00, outside -14:00 .. +14:00" in far.text
    assert "outside the accepted range 2000-01 .. 2099-12" in served.get("/months/0000-01").text
    budget = tmp_path / "budget.csv"
    budget.write_text("client,low,expected,high\nclient-a,1,2,3\n")
    store = ("--db", served.db)
    for month in ("0000-01", "9999-12"):
        for args in (("run", "--month", month), ("watch", "--month", month),
                     ("batch", "list", "--month", month), ("close", "--month", month),
                     ("reopen", "--month", month, "--reason", "typo"),
                     ("status", "--month", month), ("history", "--month", month),
                     ("budget", "load", str(budget), "--month", month),
                     ("budget", "plan", "--month", month),
                     ("unit-economics", "--month", month, "--from-db")):  # fmt: skip
            done = invoke(*args, *store)
            assert done.exit_code == 2 and done.stdout == "", (args, done.stdout)
            assert done.stderr == (f"error: --month: month '{month}' is outside the accepted "
                                   "range 2000-01 .. 2099-12\n"), (args, done.stderr)  # fmt: skip
    engine = create_engine(served.db)
    try:
        with engine.connect() as connection:
            stored = connection.execute(select(func.count()).select_from(table(BudgetVersion)))
            assert stored.scalar_one() == 0  # `budget load --month 0000-01` stored one before
    finally:
        engine.dispose()
