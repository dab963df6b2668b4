"""The month-over-month bridge from the store, on SQLite and a real PostgreSQL 15.

Each client's bridge of a month against the previous month's latest *issued* revision: the
same parts as ``explain --from-db`` (the one engine, :mod:`tenantcost.bridge`), adding up
exactly to the change, cached once per pair of runs; ``None`` without an issued previous
month. Restating the previous month (reopen, corrected costs, close) makes the bridge follow,
and the stored sheets (``report --from-db``) say which revision they compare with. Then a
real ``tenantcost serve`` shows it: ``bridge`` in ``GET /api/v1/clients/{id}/months/{M}``,
the client page's section and chart, the sheet routes (HTML, PDF, Markdown), redacted for
another client's account manager, following a restatement made while the server runs.
"""

from __future__ import annotations

import json
import re
import tempfile
from pathlib import Path

import httpx
import pytest
from sqlalchemy import delete, func, select
from typer.testing import CliRunner

from tenantcost.cli import app
from tenantcost.service.tokens import create_token
from tenantcost.store.cycle import latest_issued
from tenantcost.store.data import DataDir
from tenantcost.store.engine import open_engine
from tenantcost.store.models import (
    MonthBridge,
    MonthBridgeClient,
    MonthBridgePart,
    Statement,
    table,
)
from tenantcost.store.month_bridge import client_bridge, month_bridges, previous_issued
from tenantcost.store.settings import resolve_settings

from . import service_server

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "two-months"
AS_OF = "2027-01-01T00:00:00Z"
runner = CliRunner()


def ok(*args: str) -> str:
    done = runner.invoke(app, [str(a) for a in args])
    assert done.exit_code == 0, (args, done.output)
    return done.stdout


def two_months(url: str, data: str) -> None:
    """The two-months example in a store, both months closed (one hour each: incomplete)."""
    db = ["--db", url, "--data", data]
    ok("db", "upgrade", *db)
    ok("rules", "load", EXAMPLE / "rules.yaml", *db)
    ok("ingest", "usage", "--usage", EXAMPLE / "usage.csv", *db)
    ok("ingest", "costs", "--costs", EXAMPLE / "costs.csv", *db)
    for month in ("2026-09", "2026-10"):
        ok("close", "--month", month, "--allow-incomplete", *db)


def restate_september(url: str, data: str, folder: Path) -> None:
    """Reopen 2026-09, correct its API cost (1.00 → 1.60 USD) and close it: revision 2."""
    db = ["--db", url, "--data", data]
    ok("reopen", "--month", "2026-09", "--reason", "the api's cost was under-counted", *db)
    rows = (EXAMPLE / "costs.csv").read_text().splitlines()
    fixed = [rows[0]] + [
        r.replace(",api,1.0", ",api,1.6") for r in rows[1:] if r.startswith("2026-09")
    ]
    corrected = folder / "costs-2026-09.csv"
    corrected.write_text("\n".join(fixed) + "\n")
    ok("ingest", "costs", "--costs", corrected, *db)
    ok("close", "--month", "2026-09", "--allow-incomplete", *db)


def engine_for(url: str, data: str):
    return open_engine(resolve_settings(db=url, data=data, environ={}))


def explain_parts(url: str, data: str, client: str) -> dict:
    out = ok("explain", "--from-db", "--db", url, "--data", data, "--client", client,
             "--month", "2026-10", "--format", "json", "--as-of", AS_OF)  # fmt: skip
    return json.loads(out)


def run_of(engine, month: str) -> str:
    issued = latest_issued(engine, month)
    assert issued is not None
    return issued.run_id


def statement_amount(engine, month: str, client: str) -> int:
    s = table(Statement).c
    with engine.connect() as conn:
        return int(conn.execute(
            select(s.amount).where(s.month == month, s.client == client)
            .order_by(s.revision.desc()).limit(1)).scalar_one())  # fmt: skip


def bridge_rows(engine) -> int:
    with engine.connect() as conn:
        return int(conn.execute(select(func.count()).select_from(table(MonthBridge))).scalar())


def records(parts) -> list[tuple]:
    return [
        (str(e), str(s), str(k), int(a), str(r)) for e, s, k, a, r in parts.itertuples(index=False)
    ]


def clear_cache(engine) -> None:
    with engine.begin() as conn:
        for model in (MonthBridgePart, MonthBridgeClient, MonthBridge):
            conn.execute(delete(table(model)))


def test_the_bridge_is_explains_cached_per_pair_and_follows_a_restatement(
    store_url: str, tmp_path: Path
):
    data = str(tmp_path / "data")
    two_months(store_url, data)
    engine = engine_for(store_url, data)
    october = run_of(engine, "2026-10")
    assert previous_issued(engine, "2026-09") is None  # 2026-08 was never closed
    assert month_bridges(engine, "2026-09", run_of(engine, "2026-09"), "USD") is None
    assert bridge_rows(engine) == 1  # `close --month 2026-10` cached its pair
    clear_cache(engine)
    alone = {c: client_bridge(engine, "2026-10", october, c) for c in ("acme", "bravo")}
    assert bridge_rows(engine) == 0  # a client's own bridge, from its own lines only
    pb = month_bridges(engine, "2026-10", october, "USD", DataDir(data))
    assert pb is not None and pb.vs == "2026-09" and pb.vs_revision == 1
    assert sorted(pb.amounts.index) == ["acme", "bravo"]
    for client in ("acme", "bravo"):
        doc = explain_parts(store_url, data, client)
        parts = pb.client_parts(client)
        assert [(p["effect"], p["source"], p["amount"]) for p in doc["parts"]] == list(
            zip(parts["effect"], parts["source"], parts["amount"].astype(int), strict=True)
        )
        one = client_bridge(engine, "2026-10", october, client)
        assert one is not None and one.previous.revision == 1
        assert (one.previous_amount, one.amount) == (doc["from_amount"], doc["to_amount"])
        assert int(one.parts["amount"].sum()) == one.difference == doc["change"]
        assert one.amount == statement_amount(engine, "2026-10", client)
        mine = alone[client]
        assert mine is not None and records(mine.parts) == records(one.parts)  # exactly
        assert (mine.previous_amount, mine.amount) == (one.previous_amount, one.amount)
    assert bridge_rows(engine) == 1  # every read after the first is the cached pair

    before = client_bridge(engine, "2026-10", october, "acme")
    restate_september(store_url, data, tmp_path)
    after = client_bridge(engine, "2026-10", october, "acme")
    assert before is not None and after is not None
    assert after.previous.revision == 2 and after.previous.run_id != before.previous.run_id
    assert after.previous_amount == statement_amount(engine, "2026-09", "acme")
    assert after.previous_amount > before.previous_amount  # the api cost more in 2026-09
    assert after.amount == before.amount  # 2026-10 itself did not change
    assert int(after.parts["amount"].sum()) == after.difference
    rate = after.parts.loc[after.parts["effect"] == "rate", "amount"].sum()
    assert rate < before.parts.loc[before.parts["effect"] == "rate", "amount"].sum()
    assert bridge_rows(engine) == 2  # the close cached the new pair; the old one stays

    out = tmp_path / "pack"
    ok("report", "--month", "2026-10", "--from-db", "--db", store_url, "--data", data,
       "--out", out, "--format", "md")  # fmt: skip
    sheet = (out / "clients" / "acme.md").read_text()
    assert "What changed since 2026-09" in sheet
    assert "Compared with 2026-09, revision 2." in sheet
    assert "| 2026-09, revision 2 (last period) |" in sheet
    earlier = tmp_path / "earlier"
    ok("report", "--month", "2026-09", "--from-db", "--db", store_url, "--data", data,
       "--out", earlier, "--format", "md")  # fmt: skip
    before_sheet = (earlier / "clients" / "acme.md").read_text()
    # each end of the bridge reads as that month's own sheet shows it (one rounding per run)
    total = re.search(r"^\| \*\*Total\*\* \| \*\*([-0-9.]+) ", sheet, flags=re.M)
    now = re.search(r"^> \| 2026-10 \(this period\) \| ([-0-9.]+) \|", sheet, flags=re.M)
    assert total and now and now.group(1) == total.group(1), (total, now)
    then = re.search(r"^> \| 2026-09, revision 2 \(last period\) \| ([-0-9.]+) \|", sheet,
                     flags=re.M)  # fmt: skip
    then_total = re.search(r"^\| \*\*Total\*\* \| \*\*([-0-9.]+) ", before_sheet, flags=re.M)
    assert then and then_total
    if len(then.group(1)) == len(then_total.group(1)):  # shown at the same decimals
        assert then.group(1) == then_total.group(1)
    engine.dispose()


def test_run_caches_the_drafts_bridge_against_the_previous_issued_month(
    store_url: str, tmp_path: Path
):
    """`run` of a reopened month caches its draft's bridge (the movers' and What changed's
    parts), so no reader computes it; a month with no issued predecessor caches nothing."""
    data = str(tmp_path / "data")
    two_months(store_url, data)
    engine = engine_for(store_url, data)
    clear_cache(engine)
    db = ["--db", store_url, "--data", data]
    ok("reopen", "--month", "2026-10", "--reason", "a late cost", *db)
    draft = json.loads(ok("run", "--month", "2026-10", "--format", "json", *db))["run_id"]
    b, p = table(MonthBridge).c, previous_issued(engine, "2026-10")
    assert p is not None and p.revision == 1
    with engine.connect() as conn:
        cached = conn.execute(select(b.run_id, b.previous_run_id)).all()
    assert [tuple(map(str, row)) for row in cached] == [(draft, p.run_id)]
    ok("reopen", "--month", "2026-09", "--reason", "a late cost", *db)
    ok("run", "--month", "2026-09", *db)  # 2026-08 was never issued: nothing to compare
    assert bridge_rows(engine) == 1
    engine.dispose()


# --------------------------------------------------------------------------- the service


def csrf(client: httpx.Client) -> str:
    match = re.search(r'name="csrf_token" value="([^"]+)"', client.get("/login").text)
    assert match
    return match.group(1)


def login(url: str, token: str) -> httpx.Client:
    client = httpx.Client(base_url=url, timeout=120)
    done = client.post("/login", data={"token": token, "csrf_token": csrf(client),
                                       "next": "/clients"})  # fmt: skip
    assert done.status_code == 303, done.text
    return client


def bridge_of(url: str, token: str, client: str, month: str) -> dict:
    response = httpx.get(f"{url}/api/v1/clients/{client}/months/{month}",
                         headers={"Authorization": f"Bearer {token}"}, timeout=120)  # fmt: skip
    assert response.status_code == 200, response.text
    return response.json()


def check_bridge(doc: dict, previous_revision: int) -> None:
    bridge = doc["bridge"]
    assert bridge["previous_month"] == "2026-09"
    assert bridge["previous_revision"] == previous_revision
    assert bridge["difference"] == doc["amount"] - bridge["previous_amount"]
    assert sum(p["amount"] for p in bridge["parts"]) == bridge["difference"]
    known = {"volume", "rate", "rule", "residual", "direct", "new_source", "ended_source"}
    assert {p["part"] for p in bridge["parts"]} <= known
    assert all(set(p) == {"part", "source", "amount"} for p in bridge["parts"])


def svg_font_sizes(html: str) -> list[float]:
    chart = re.search(r"<svg[^>]*what-changed-chart-t.*?</svg>", html, re.S)
    assert chart, "no bridge chart"
    return [float(s) for s in re.findall(r'font-size="([0-9.]+)"', chart.group(0))]


def test_the_service_shows_the_bridge_and_follows_a_restatement(store_url: str, tmp_path: Path):
    data = str(tmp_path / "data")
    two_months(store_url, data)
    engine = engine_for(store_url, data)
    tokens = {
        "finance": create_token(engine, "finance", name="t-finance", actor="tests")[0],
        "bravo": create_token(engine, "account-manager", clients=["bravo"], name="t-bravo",
                              actor="tests")[0],
    }  # fmt: skip
    engine.dispose()
    with tempfile.TemporaryDirectory() as folder:
        log = Path(folder) / "serve.log"
        with service_server.running_service(store_url, data, log) as service:
            url = service.url
            doc = bridge_of(url, tokens["finance"], "acme", "2026-10")
            check_bridge(doc, 1)
            assert doc["difference"] is not None  # the statement's own field, untouched
            parts = {(p["part"], p["source"]) for p in doc["bridge"]["parts"]}
            assert {("new_source", "search"), ("direct", "tenant-acme/worker")} <= parts
            assert bridge_of(url, tokens["finance"], "acme", "2026-09")["bridge"] is None

            bravo = bridge_of(url, tokens["bravo"], "bravo", "2026-10")
            check_bridge(bravo, 1)
            assert "acme" not in json.dumps(bravo["bridge"])

            page = login(url, tokens["bravo"]).get("/clients/bravo?month=2026-10").text
            section = re.search(r'<section class="what-changed".*?</section>', page, re.S)
            assert section and "Compared with 2026-09, revision 1." in section.group(0)
            assert "acme" not in section.group(0)
            assert min(svg_font_sizes(page)) >= 11
            assert page.count('class="what-changed"') == 1 and "Since 2026-09" not in page

            block = login(url, tokens["finance"]).get("/clients/acme?month=2026-10").text
            rows = re.findall(
                r'<tr class="change-(rise|fall)"><th scope="row">([^<]+)</th>'
                r"<td>[^<]*</td><td class=\"num\">(up \+|down \u2212)",
                block,
            )
            assert ("rise", "New service", "up +") in rows, rows  # acme starts using search
            assert all((c == "rise") == (w == "up +") for c, _, w in rows), rows
            ends = re.findall(r'<tr class="end"><th scope="row">[^<]*</th><td></td>'
                              r'<td class="num">([^<]+)</td>', block)  # fmt: skip
            history = re.findall(r'\?month=2026-(?:09|10)">2026-\d\d</a></th><td class="num">'
                                 r"([^<]+) USD</td>", block)  # fmt: skip
            assert ends == history and len(ends) == 2, (ends, history)  # the frozen strings

            finance = login(url, tokens["finance"])
            md = finance.get("/api/v1/clients/acme/months/2026-10/sheet.md").text
            assert "Compared with 2026-09, revision 1." in md
            html = finance.get("/api/v1/clients/acme/months/2026-10/sheet.html").text
            assert "What changed since 2026-09" in html and "revision 1 (last period)" in html
            pdf = finance.get("/api/v1/clients/acme/months/2026-10/sheet.pdf")
            assert pdf.status_code == 200 and pdf.content.startswith(b"%PDF")

            restate_september(store_url, data, tmp_path)
            doc2 = bridge_of(url, tokens["finance"], "acme", "2026-10")
            check_bridge(doc2, 2)
            assert doc2["bridge"]["previous_amount"] > doc["bridge"]["previous_amount"]
            assert doc2["amount"] == doc["amount"]
            page = finance.get("/clients/acme?month=2026-10").text
            assert "Compared with 2026-09, revision 2." in page
            md = finance.get("/api/v1/clients/acme/months/2026-10/sheet.md").text
            assert "Compared with 2026-09, revision 2." in md  # the cached sheet followed


@pytest.mark.parametrize("width", [1280, 390])
def test_the_bridge_section_fits_the_screen_in_chromium(browser, width: int, tmp_path: Path):
    """Real Chromium: the client page with its bridge is no wider than the screen, and the
    chart's text renders at 11 px or more (its 12 px scaled to the width it is drawn at)."""
    data = str(tmp_path / "data")
    url = f"sqlite:///{tmp_path / 'store.db'}"
    two_months(url, data)
    engine = engine_for(url, data)
    token = create_token(engine, "account-manager", clients=["acme"], name="t-acme",
                         actor="tests")[0]  # fmt: skip
    engine.dispose()
    with service_server.running_service(url, data, tmp_path / "serve.log") as service:
        context = browser.new_context(viewport={"width": width, "height": 800})
        page = context.new_page()
        page.goto(service.url + "/login")
        page.fill("#token", token)
        page.keyboard.press("Enter")
        page.wait_for_url(lambda u: "/login" not in u)  # the role's landing
        page.goto(service.url + "/clients/acme?month=2026-10")
        assert (
            page.locator("#what-changed-summary")
            .inner_text()
            .endswith("Compared with 2026-09, revision 1.")
        )
        assert page.locator("#what-changed-table tbody tr").count() >= 3
        wide = page.evaluate("document.documentElement.scrollWidth")
        assert wide <= page.evaluate("innerWidth"), f"{wide} px wide at {width}"
        sizes = page.evaluate(
            "[...document.querySelectorAll('#what-changed svg text')]"
            ".map(t => parseFloat(getComputedStyle(t).fontSize))"
        )
        assert sizes and min(sizes) >= 11, sizes
        colours = page.evaluate(  # acme's parts all rise: a rise is coloured, an end is not
            "['change-rise', 'end'].map(c => { const e = document.querySelector("
            "`#what-changed-table tr.${c} td.num`); return e && getComputedStyle(e).color; })"
        )
        assert None not in colours and colours[0] != colours[1], colours
        context.close()
