"""The web pages over HTTP (httpx, no browser) against a real uvicorn on 127.0.0.1, on SQLite
and a real PostgreSQL 15: login and logout, the session cookie's flags and signature, CSRF on
every form, a revoked or expired token's session refused at once, the same 404 page for
another client's URL and a missing client's, the 403 page, search paging, the client and
finance month pages with their figures, and close / reopen through the forms."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy import select

from tenantcost.service.session import COOKIE_NAME, Session, SessionCodec
from tenantcost.service.tokens import create_token, revoke_token
from tenantcost.store.engine import open_engine
from tenantcost.store.models import Statement, table
from tenantcost.store.settings import resolve_settings

from .service_web_server import MONTH, Served, running_service, served_example

CSRF = re.compile(r'name="csrf_token" value="([^"]+)"')


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def served(request: pytest.FixtureRequest, tmp_path_factory) -> Iterator[Served]:
    """The example with 2026-11 closed (revision 1), served; one per backend."""
    folder = tmp_path_factory.mktemp(f"pages-{request.param}")
    if request.param == "sqlite":
        db = f"sqlite:///{folder / 'store.db'}"
    else:
        from .postgres_fixture import new_database

        db = new_database(request.getfixturevalue("postgres_admin_url"))
    with served_example(db, folder / "data", close=True) as service:
        yield service


def page_csrf(client: httpx.Client, path: str = "/login") -> str:
    response = client.get(path)
    match = CSRF.search(response.text)
    assert match, f"no CSRF field on {path}: {response.status_code}"
    return match.group(1)


def logged_in(served: Served, who: str) -> httpx.Client:
    client = httpx.Client(base_url=served.url, timeout=60)
    done = client.post(
        "/login",
        data={"token": served.tokens[who], "csrf_token": page_csrf(client), "next": "/clients"},
    )
    assert done.status_code == 303 and done.headers["location"] == "/clients", done.text
    return client


def engine_of(served: Served):
    return open_engine(resolve_settings(db=served.db, data=served.data, environ={}))


def set_cookie_attributes(response: httpx.Response) -> dict[str, str]:
    header = response.headers["set-cookie"]
    parts = [p.strip() for p in header.split(";")]
    return {p.split("=", 1)[0].lower(): (p.split("=", 1)[1] if "=" in p else "") for p in parts}


def test_login_sets_a_signed_httponly_lax_cookie_secure_behind_https(served: Served):
    client = httpx.Client(base_url=served.url)
    form = {"token": served.tokens["finance"], "csrf_token": page_csrf(client)}
    done = client.post("/login", data=form)
    assert done.status_code == 303
    attrs = set_cookie_attributes(done)
    assert "httponly" in attrs and attrs["samesite"].lower() == "lax" and attrs["path"] == "/"
    assert "secure" not in attrs  # plain HTTP on loopback
    assert served.tokens["finance"] not in done.headers["set-cookie"]  # never the token itself
    session = SessionCodec(served.secret).loads(client.cookies[COOKIE_NAME])
    assert session is not None and session.token_name == "test-finance"
    # behind a TLS-terminating proxy (X-Forwarded-Proto: https) the cookie is Secure
    proxied = httpx.Client(base_url=served.url, headers={"X-Forwarded-Proto": "https"})
    form = {"token": served.tokens["finance"], "csrf_token": page_csrf(proxied)}
    assert "secure" in set_cookie_attributes(proxied.post("/login", data=form))


def test_wrong_token_is_refused_on_the_form(served: Served):
    client = httpx.Client(base_url=served.url)
    refused = client.post(
        "/login", data={"token": "tc_not-a-token", "csrf_token": page_csrf(client)}
    )
    assert refused.status_code == 401
    assert "not valid" in refused.text and 'aria-invalid="true"' in refused.text
    assert client.get("/clients").status_code == 303  # still not logged in


def test_every_form_needs_its_csrf_value(served: Served):
    anonymous = httpx.Client(base_url=served.url)
    page_csrf(anonymous)
    for form in ({"token": served.tokens["finance"]},
                 {"token": served.tokens["finance"], "csrf_token": "forged"}):  # fmt: skip
        assert anonymous.post("/login", data=form).status_code == 403
    finance = logged_in(served, "finance")
    reopen = finance.post(f"/months/{MONTH}/reopen", data={"reason": "x", "csrf_token": "forged"})
    assert reopen.status_code == 403
    assert finance.post("/logout", data={}).status_code == 403
    # nothing happened: the month is still closed, the session still works
    month = finance.get(f"/months/{MONTH}")
    assert month.status_code == 200 and 'id="state">closed<' in month.text
    # a cookie-authenticated API write needs the X-CSRF-Token header too (else 401)
    api = finance.post(f"/api/v1/months/{MONTH}/reopen", json={"reason": "csrf test"})
    assert api.status_code == 401
    assert 'id="state">closed<' in finance.get(f"/months/{MONTH}").text


def test_logout_ends_the_session(served: Served):
    client = logged_in(served, "manager")
    assert client.get("/clients").status_code == 200
    copy = client.cookies[COOKIE_NAME]  # a copy of the cookie taken before logout
    other_tab = logged_in(served, "manager")  # another session of the same token
    done = client.post("/logout", data={"csrf_token": page_csrf(client, "/clients")})
    assert done.status_code == 303 and done.headers["location"].startswith("/login")
    assert COOKIE_NAME not in client.cookies
    again = client.get("/clients")
    assert again.status_code == 303 and again.headers["location"].startswith("/login")
    assert client.get("/api/v1/clients").status_code == 401
    replayed = httpx.get(f"{served.url}/clients", cookies={COOKIE_NAME: copy})
    assert replayed.status_code == 303  # ended in the store: refused on every worker
    assert httpx.get(f"{served.url}/api/v1/clients", cookies={COOKIE_NAME: copy}).status_code == 401
    assert other_tab.get("/clients").status_code == 200  # only that session ended


def test_a_revoked_or_expired_tokens_session_is_refused_at_once(served: Served):
    engine = engine_of(served)
    try:
        secret, _ = create_token(engine, "account-manager", clients=["client-a"],
                                 name="pages-revoked", actor="tests")  # fmt: skip
        short, _ = create_token(engine, "finance", name="pages-expiring",
                                expires=timedelta(seconds=2), actor="tests")  # fmt: skip
    finally:
        engine.dispose()
    client = httpx.Client(base_url=served.url)
    client.post("/login", data={"token": secret, "csrf_token": page_csrf(client)})
    assert client.get("/clients/client-a").status_code == 200
    expiring = httpx.Client(base_url=served.url)
    expiring.post("/login", data={"token": short, "csrf_token": page_csrf(expiring)})
    assert expiring.get("/months").status_code == 200
    engine = engine_of(served)
    try:
        revoke_token(engine, "pages-revoked", actor="tests")
    finally:
        engine.dispose()
    for path in ("/clients/client-a", "/clients"):
        refused = client.get(path)
        assert refused.status_code == 303 and refused.headers["location"].startswith("/login")
    assert client.get("/api/v1/clients/client-a").status_code == 401
    time.sleep(2.2)
    assert expiring.get("/months").status_code == 303


def test_forged_or_foreign_cookies_are_not_sessions(served: Served):
    engine = engine_of(served)
    try:
        from tenantcost.service.tokens import list_tokens

        admin = next(t for t in list_tokens(engine) if t.name == "test-admin")
    finally:
        engine.dispose()
    forged = SessionCodec("another-secret-of-enough-length").dumps(
        Session("csrf", "test-admin", admin.id, int(time.time()), "f" * 32)
    )
    client = httpx.Client(base_url=served.url, cookies={COOKIE_NAME: forged})
    assert client.get("/clients").status_code == 303
    assert client.get("/api/v1/tokens").status_code == 401
    genuine = SessionCodec(served.secret).dumps(
        Session("csrf", "test-admin", admin.id, int(time.time()), "f" * 32)
    )
    assert httpx.get(f"{served.url}/clients", cookies={COOKIE_NAME: genuine}).status_code == 200
    tampered = genuine[:-2] + ("AA" if not genuine.endswith("AA") else "BB")
    assert httpx.get(f"{served.url}/clients", cookies={COOKIE_NAME: tampered}).status_code == 303


def test_sessions_survive_a_restart_with_the_same_secret(served: Served):
    client = logged_in(served, "manager")
    cookie = client.cookies[COOKIE_NAME]
    with running_service(served.db, served.data, served.secret) as other:  # a second process
        page = httpx.get(f"{other}/clients/client-a", cookies={COOKIE_NAME: cookie})
        assert page.status_code == 200 and "Client client-a" in page.text
    with running_service(served.db, served.data, served.secret + "-rotated") as rotated:
        page = httpx.get(f"{rotated}/clients/client-a", cookies={COOKIE_NAME: cookie})
        assert page.status_code == 303


def test_another_clients_url_is_the_same_404_page_as_a_missing_client(served: Served):
    manager = logged_in(served, "manager")
    other = manager.get("/clients/client-b")
    missing = manager.get("/clients/no-such-client")
    other_month = manager.get(f"/clients/client-b?month={MONTH}")
    assert other.status_code == missing.status_code == other_month.status_code == 404
    assert other.content == missing.content == other_month.content
    assert "client-b" not in other.text and "Page not found" in other.text
    unknown = manager.get("/no/such/page")  # any unknown page URL: the same page
    assert unknown.status_code == 404 and unknown.content == other.content
    assert manager.get("/api/v1/no-such-route").json() == {"detail": "Not Found"}
    sheet = manager.get(f"/api/v1/clients/client-b/months/{MONTH}/sheet.pdf")
    assert sheet.status_code == 404
    # finance sees both; a month of a client with no figure is a 404 too
    finance = logged_in(served, "finance")
    assert finance.get("/clients/client-b").status_code == 200
    assert finance.get("/clients/no-such-client").status_code == 404
    assert finance.get("/clients/client-b?month=2026-10").status_code == 404


def test_cluster_pages_are_403_for_account_managers(served: Served):
    manager = logged_in(served, "manager")
    for path in ("/months", f"/months/{MONTH}"):
        page = manager.get(path)
        assert page.status_code == 403 and "Not allowed" in page.text
        assert "reference total" not in page.text
    csrf = page_csrf(manager, "/clients")
    close = manager.post(f"/months/{MONTH}/reopen", data={"csrf_token": csrf, "reason": "no"})
    assert close.status_code == 403
    ingest = logged_in(served, "ingest")
    assert ingest.get("/clients").status_code == 403


def test_search_is_server_side_paged_and_scoped(served: Served):
    finance = logged_in(served, "finance")
    first = finance.get("/clients", params={"per_page": 1})
    assert first.status_code == 200
    assert "3 clients, showing 1 to 1" in first.text and "page 1 of 3" in first.text
    shown = f"?month={MONTH}"  # the client's page at the month listed
    assert f'href="/clients/client-a{shown}"' in first.text and "client-b" not in first.text
    assert "/clients?q=&amp;page=2&amp;per_page=1" in first.text
    second = finance.get("/clients", params={"per_page": 1, "page": 2})
    assert f'href="/clients/client-b{shown}"' in second.text and 'rel="prev"' in second.text
    found = finance.get("/clients", params={"q": "NT-C"})  # any case, part of the id
    assert "1 client matching" in found.text and f'href="/clients/client-c{shown}"' in found.text
    manager = logged_in(served, "manager")
    own = manager.get("/clients")
    assert "1 client," in own.text and "client-b" not in own.text and "client-c" not in own.text
    assert "0 clients" in manager.get("/clients", params={"q": "client-b"}).text


def test_client_page_shows_the_issued_figure_sheet_links_and_history(served: Served):
    manager = logged_in(served, "manager")
    page = manager.get("/clients/client-a")
    assert page.status_code == 200
    text = page.text
    # the sheet's own decimals (4 for this month) and its figure: one rounding, the figure the
    # summary and index read
    assert 'id="amount">0.1234 USD<' in text
    assert 'id="status">issued<' in text and 'id="revision">1<' in text
    assert f"/api/v1/clients/client-a/months/{MONTH}/sheet.pdf" in text
    assert f"/api/v1/clients/client-a/months/{MONTH}/sheet.md" in text
    assert '<svg xmlns="http://www.w3.org/2000/svg" class="chart" role="img"' in text
    assert '<th scope="col">Month</th>' in text and "<caption>" in text
    for other in ("client-b", "client-c", "0.0772", "0.0016"):
        assert other not in text  # never another client's name or figure
    assert "frame-ancestors 'self'" in page.headers["content-security-policy"]
    assert "script-src" not in page.headers["content-security-policy"]  # default-src 'none'
    assert page.headers["x-frame-options"] == "SAMEORIGIN"
    assert page.headers["cache-control"] == "no-store"
    pdf = manager.get(f"/api/v1/clients/client-a/months/{MONTH}/sheet.pdf")
    assert pdf.status_code == 200 and pdf.content.startswith(b"%PDF-")


def test_finance_month_page_shows_cascade_idle_keys_and_provenance(served: Served):
    finance = logged_in(served, "finance")
    page = finance.get(f"/months/{MONTH}")
    assert page.status_code == 200
    text = page.text
    assert 'id="state">closed<' in text and 'id="revision">1<' in text
    assert 'aria-labelledby="cascade-chart-t cascade-chart-d"' in text  # the waterfall
    for figure in ("0.2022", "0.3219", "0.6434", "100.0 %"):  # clients, idle, reference
        assert figure in text
    assert 'id="idle-ratio">55.7 %<' in text
    # the two idle shares, each saying what it is a share of
    assert "<dt>Idle, % of the OpenCost total</dt>" in text
    assert "<dt>Idle, % of the reference total</dt>" in text
    assert 'id="idle-of-reference">50.0 %<' in text
    assert '<th scope="col" class="num">% of reference total</th>' in text
    # the cascade's foot: the reference total and what it is made of, and the gap
    assert re.search(r'<th scope="row">reference total</th><td class="num">0\.6434</td>'
                     r'<td class="num">100\.0 %</td><td>OpenCost total 0\.5784 \+ external '
                     r"0\.0650</td>", text)  # fmt: skip
    assert re.search(r'<th scope="row">gap</th><td class="num">0\.0000</td><td class="num">'
                     r"</td><td>closes</td>", text)  # fmt: skip
    assert 'href="/months/2026-11/finance-summary.html"' in text
    assert 'href="/months/2026-11/finance-summary.pdf"' in text
    for key in ("the rule", "CPU seconds", "requests", "even split"):
        assert f">{key}</th>" in text
    for amount in ("0.1234", "0.0897", "0.1513", "0.0674"):  # client-a under each key
        assert amount in text
    assert "reopen-form" in text and "close-form" not in text
    assert text.count('<th scope="row" class="num">') == 2  # the two batches the run read
    assert "usage.csv" in text and "costs.json" in text


def test_product_reads_issued_months_without_finances_workings(served: Served):
    product = logged_in(served, "product")
    months = product.get("/months")
    assert months.status_code == 200 and '<li><a href="/months"' in months.text  # nav
    assert f'<a href="/months/{MONTH}">{MONTH}</a>' in months.text
    assert ">Runs</th>" not in months.text and ">Costs h</th>" not in months.text
    assert "Issued months: state and revisions" in months.text
    page = product.get(f"/months/{MONTH}")
    assert page.status_code == 200
    text = page.text
    assert 'id="state">closed<' in text and 'id="revision">1<' in text
    assert 'aria-labelledby="cascade-chart-t cascade-chart-d"' in text  # the waterfall
    assert re.search(r'<th scope="row">reference total</th><td class="num">0\.6434</td>', text)
    assert re.search(r'<th scope="row">gap</th><td class="num">0\.0000</td>', text)
    assert "<dt>Idle, % of the OpenCost total</dt>" in text
    assert "<dt>Idle, % of the reference total</dt>" in text
    assert 'id="keys-table"' in text and 'href="/clients/client-b?month=2026-11"' in text
    for amount in ("0.1234", "0.0897", "0.1513", "0.0674", "0.2022"):
        assert amount in text
    for workings in ("reopen-form", "close-form", "summary-downloads", "finance-summary",
                     "events-table", "batches-table", 'id="run-id"', "usage-table",
                     "Hours covered", "costs.json", "status status-draft\"", "(draft"):  # fmt: skip
        assert workings not in text, workings
    assert product.get("/months/2026-10").status_code == 404  # never issued
    assert product.get("/months/11-2026").status_code == 404
    for fmt in ("html", "pdf"):
        assert product.get(f"/months/{MONTH}/finance-summary.{fmt}").status_code == 403
    csrf = page_csrf(product, "/clients")
    reopen = product.post(f"/months/{MONTH}/reopen", data={"csrf_token": csrf, "reason": "no"})
    assert reopen.status_code == 403
    assert 'href="/months"' not in logged_in(served, "manager").get("/clients").text


def test_finance_summary_downloads_for_finance_and_admin_only(served: Served):
    for who in ("finance", "admin"):
        browser = logged_in(served, who)
        html = browser.get(f"/months/{MONTH}/finance-summary.html")
        assert html.status_code == 200 and html.headers["content-type"].startswith("text/html")
        assert 'filename="2026-11-finance-summary.html"' in html.headers["content-disposition"]
        text = html.text
        assert "Finance summary: 2026-11" in text and 'id="reference-total">0.6434 USD<' in text
        assert '<a href="/months/2026-11">Month page</a>' in text  # not the pack's index.html
        assert 'href="/clients/client-b?month=2026-11"' in text
        for client in ("client-a", "client-b", "client-c"):
            assert client in text
        pdf = browser.get(f"/months/{MONTH}/finance-summary.pdf")
        assert pdf.status_code == 200 and pdf.content.startswith(b"%PDF-")
        assert pdf.headers["content-type"] == "application/pdf"
        assert pdf.headers["content-disposition"].startswith("attachment;")
    manager = logged_in(served, "manager")
    for fmt in ("html", "pdf"):
        denied = manager.get(f"/months/{MONTH}/finance-summary.{fmt}")
        assert denied.status_code == 403 and "client-b" not in denied.text
    finance = logged_in(served, "finance")
    assert finance.get("/months/2026-10/finance-summary.html").status_code == 404  # no run
    assert finance.get("/months/11-2026/finance-summary.pdf").status_code == 404
    anonymous = httpx.Client(base_url=served.url)
    assert anonymous.get(f"/months/{MONTH}/finance-summary.html").status_code == 303  # login


@pytest.fixture(params=["sqlite", "postgresql"])
def open_month(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Served]:
    """The example ingested, 2026-11 not closed yet, served."""
    if request.param == "sqlite":
        db = f"sqlite:///{tmp_path / 'store.db'}"
    else:
        from .postgres_fixture import new_database

        db = new_database(request.getfixturevalue("postgres_admin_url"))
    with served_example(db, tmp_path / "data", close=False) as service:
        yield service


def test_close_and_reopen_through_the_forms(open_month: Served):
    finance = logged_in(open_month, "finance")
    month = finance.get(f"/months/{MONTH}")
    assert 'id="state">open<' in month.text and "close-form" in month.text
    csrf = CSRF.search(month.text).group(1)  # type: ignore[union-attr]
    assert 'id="allow_incomplete" name="allow_incomplete" value="1">' in month.text  # unticked
    assert 'id="force"' not in month.text  # nothing issued yet: nothing to force
    product = logged_in(open_month, "product")
    assert product.get(f"/months/{MONTH}").status_code == 404  # no issued revision yet
    assert "No month issued yet." in product.get("/months").text
    refused = finance.post(f"/months/{MONTH}/close", data={"csrf_token": csrf})
    assert refused.status_code == 409 and "--allow-incomplete" in refused.text  # 1 h of 720
    # Ticked: not a close yet, the confirmation step with the missing hours.
    ticked = finance.post(f"/months/{MONTH}/close",
                          data={"csrf_token": csrf, "allow_incomplete": "1"})  # fmt: skip
    assert ticked.status_code == 200 and 'id="confirm-close"' in ticked.text
    assert "719 of 720 hours lack costs" in ticked.text and 'id="missing-table"' in ticked.text
    assert 'id="state">open<' in ticked.text and "close-form" not in ticked.text
    assert 'name="confirmed" value="1"' in ticked.text
    assert finance.get(f"/months/{MONTH}").text.count('id="revision">none issued<') == 1
    closed = finance.post(f"/months/{MONTH}/close",
                          data={"csrf_token": csrf, "allow_incomplete": "1",
                                "confirmed": "1"})  # fmt: skip
    assert closed.status_code == 303
    shown = finance.get(closed.headers["location"])
    assert "Closed: revision 1 issued." in shown.text and 'id="revision">1<' in shown.text
    empty = finance.post(f"/months/{MONTH}/reopen", data={"csrf_token": csrf, "reason": "  "})
    assert empty.status_code == 422 and 'id="state">closed<' in empty.text
    reopened = finance.post(f"/months/{MONTH}/reopen",
                            data={"csrf_token": csrf, "reason": "usage corrected",
                                  "client_reason": "your usage was corrected"})  # fmt: skip
    assert reopened.status_code == 303
    page = finance.get(reopened.headers["location"])
    assert "Reopened" in page.text and 'id="state">open<' in page.text
    assert "usage corrected" in page.text  # the events table
    assert 'id="force" name="force" value="1">' in page.text  # unticked
    issued = product.get(f"/months/{MONTH}").text  # reopened: revision 1 as issued
    assert 'id="state">open<' in issued and 'id="cascade-table"' in issued
    assert "usage corrected" not in issued and "close-form" not in issued
    same = {"csrf_token": csrf, "allow_incomplete": "1", "confirmed": "1"}
    unchanged = finance.post(f"/months/{MONTH}/close", data=same)  # no new input since
    assert unchanged.status_code == 409 and 'id="state">open<' in unchanged.text
    assert "nothing changed since revision 1 of 2026-11" in unchanged.text
    assert "Close even though nothing changed" in unchanged.text
    # forced, with the confirmation step keeping the force
    confirm = finance.post(f"/months/{MONTH}/close",
                           data={"csrf_token": csrf, "allow_incomplete": "1", "force": "1"})
    assert confirm.status_code == 200 and 'name="force" value="1"' in confirm.text
    again = finance.post(f"/months/{MONTH}/close", data={**same, "force": "1"})
    assert again.headers["location"].endswith("closed-2")
    engine = engine_of(open_month)
    try:
        with engine.connect() as connection:
            s = table(Statement).c
            rows = connection.execute(select(s.client, s.revision, s.reason, s.client_reason)
                                      .where(s.revision == 2)).all()  # fmt: skip
    finally:
        engine.dispose()
    assert sorted(r.client for r in rows) == ["client-a", "client-b", "client-c"]
    assert {(r.reason, r.client_reason) for r in rows} == {
        ("usage corrected", "your usage was corrected")}  # fmt: skip
    client = finance.get("/clients/client-b")
    assert 'id="status">restated<' in client.text and 'id="revision">2<' in client.text
    assert 'id="reason">usage corrected<' in client.text
    assert 'id="clients-read">your usage was corrected<' in client.text


def test_the_demo_ships_the_bundled_example_byte_for_byte():
    from tenantcost.service.demo import example_files

    example = Path(__file__).resolve().parents[1] / "examples" / "saas-three-clients"
    for name, path in example_files().items():
        assert path.read_bytes() == (example / path.name).read_bytes(), name


def test_login_never_redirects_off_site(served: Served):
    client = httpx.Client(base_url=served.url)
    for target in ("//evil.example/x", "https://evil.example/", "/\\evil.example"):
        done = client.post("/login", data={"token": served.tokens["finance"], "next": target,
                                           "csrf_token": page_csrf(client)})  # fmt: skip
        assert done.status_code == 303 and done.headers["location"] == "/"  # the role's landing
    done = client.post("/login", data={"token": served.tokens["finance"], "csrf_token":
                                       page_csrf(client), "next": f"/months/{MONTH}"})  # fmt: skip
    assert done.headers["location"] == f"/months/{MONTH}"


def test_serve_demo_comes_up_with_a_company_and_working_tokens(tmp_path: Path):
    """``tenantcost serve --demo --seed 7``: the real command, as a newcomer runs it (another
    seed than the shared build's, so the seed is exercised; its build time is printed, not
    asserted: docs/scale.md has the figure)."""
    import os
    import socket
    import subprocess
    import sys

    with socket.socket() as probe:  # a free port for the command's --port
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if not k.startswith("TENANTCOST_")}
    started = time.monotonic()
    process = subprocess.Popen(
        [sys.executable, "-m", "tenantcost", "serve", "--demo", "--seed", "7", "--port",
         str(port)],
        env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    try:
        assert process.stdout is not None
        lines = [process.stdout.readline()]
        while lines[-1] and not lines[-1].lstrip().startswith("store"):  # the last line
            lines.append(process.stdout.readline())
        tokens = dict(re.findall(r"^\s+(\S+) token.*?(tc_\S+)$", "".join(lines), flags=re.M))
        one = re.search(r"account-manager-one token \((\S+) only", "".join(lines))
        assert "(seed 7, built in" in lines[0] and one, lines
        store = re.search(r"sqlite:///(\S+)/tenantcost\.db", "".join(lines))
        assert f"http://127.0.0.1:{port}/" in "".join(lines) and store, lines
        client = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30)
        while True:
            try:
                if client.get("/healthz").status_code == 200:
                    break
            except httpx.TransportError:
                assert time.monotonic() - started < 600 and process.poll() is None
                time.sleep(0.2)
        print(f"serve --demo answered after {time.monotonic() - started:.1f} s")
        client.post("/login", data={"token": tokens["account-manager-one"],
                                    "csrf_token": page_csrf(client)})  # fmt: skip
        latest = re.search(r" to (\d{4}-\d{2}) closed", lines[0])
        assert latest, lines[0]
        page = client.get(f"/clients/{one.group(1)}?month={latest.group(1)}")
        assert page.status_code == 200 and 'id="status">issued<' in page.text
        from tenantcost.service.demo_company import make_company

        other = min(set(make_company(7).catalog["client"]) - {one.group(1)})
        assert client.get(f"/clients/{other}").status_code == 404  # another's: as missing
        admin = httpx.get(f"http://127.0.0.1:{port}/api/v1/tokens",
                          headers={"Authorization": f"Bearer {tokens['admin']}"})  # fmt: skip
        assert admin.status_code == 200 and len(admin.json()) == 5 == len(tokens)
    finally:
        process.terminate()
        process.wait(timeout=30)
    assert not Path(store.group(1)).exists()  # the temporary store went with the server


@settings(max_examples=200, deadline=None)
@given(
    name=st.text(min_size=1, max_size=40),
    token_id=st.integers(min_value=1, max_value=2**31),
    position=st.integers(min_value=0),
    replacement=st.characters(codec="ascii"),
)
def test_a_session_cookie_round_trips_and_any_altered_character_voids_it(
    name: str, token_id: int, position: int, replacement: str
):
    codec = SessionCodec("a-secret-of-at-least-sixteen")
    session = Session("csrf-value", name, token_id, int(time.time()), "a" * 32)
    cookie = codec.dumps(session)
    assert codec.loads(cookie) == session
    assert SessionCodec("another-secret-sixteen+").loads(cookie) is None
    i = position % len(cookie)
    altered = cookie[:i] + replacement + cookie[i + 1 :]
    if altered != cookie:
        loaded = codec.loads(altered)
        assert loaded is None or loaded == session  # base64 padding bits may not matter


@pytest.mark.slow  # a server of its own (~15 s to start on a loaded machine) and a run
def test_clients_known_from_usage_alone_are_listed_for_finance_and_admin_only(
    store_url: str, tmp_path: Path
):
    """Metered usage of the example's three clients stored, no run yet: admin and finance
    list them marked "no statement yet" (`"statement": false`), product and account managers
    list none and are told what to run; after a run of November, a client of December's usage
    alone is listed with the others (`"statement": true`)."""
    from .service_server import EXAMPLE, tenantcost
    from .service_web_server import make_tokens

    data = str(tmp_path / "data")
    store = ("--db", store_url, "--data", data)
    tenantcost("db", "upgrade", *store)
    tenantcost("rules", "load", str(EXAMPLE / "rules.yaml"), *store)
    tenantcost("ingest", "usage", "--usage", str(EXAMPLE / "usage.csv"), *store)
    tokens = make_tokens(store_url, data)
    example = ["client-a", "client-b", "client-c"]
    with running_service(store_url, data) as url:
        served = Served(url, store_url, data, "", tokens)

        def listed(who: str, **params: object) -> dict:
            auth = {"Authorization": f"Bearer {tokens[who]}"}
            return httpx.get(f"{url}/api/v1/clients", params=params, headers=auth).json()

        def brief(found: dict) -> list[dict]:  # the search's first fields (the list has more)
            return [{k: i[k] for k in ("id", "name", "statement")} for i in found["items"]]

        for who in ("admin", "finance"):
            found = listed(who)
            assert brief(found) == [{"id": c, "name": None, "statement": False}
                                    for c in example] and found["total"] == 3  # fmt: skip
            page = logged_in(served, who).get("/clients").text
            assert page.count("no statement yet</span>") == 3 and "3 clients" in page
            assert 'href="/clients/client-a"' not in page  # no page before a run
            assert "<code>tenantcost run --month YYYY-MM</code>" in page
        assert listed("finance", q="T-B", per_page=1)["items"][0]["id"] == "client-b"
        for who in ("product", "manager"):
            nothing = listed(who)
            assert (nothing["items"], nothing["total"], nothing["month"]) == ([], 0, None)
            page = logged_in(served, who).get("/clients").text
            assert "0 clients" in page and "no statement yet" not in page
            assert "No statements issued yet" in page and "<code>tenantcost close" in page
        tenantcost("ingest", "costs", "--costs", str(EXAMPLE / "costs.json"), *store)
        tenantcost("run", "--month", MONTH, *store)
        december = tmp_path / "december.csv"
        december.write_text("window_start,window_end,service,client,requests\n"
                            "2026-12-01T00:00:00Z,2026-12-01T01:00:00Z,api,client-0,5\n")
        tenantcost("ingest", "usage", "--usage", str(december), "--mode", "sum", *store)
        found = listed("admin", per_page=2, page=1, sort="id")
        assert found["total"] == 4 and brief(found) == [
            {"id": "client-0", "name": None, "statement": False},
            {"id": "client-a", "name": None, "statement": True},
        ]
        assert listed("product")["total"] == 0  # a draft run: still no issued statement
