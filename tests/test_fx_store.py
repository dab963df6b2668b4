"""The store's runs in another currency (issue 37): ``run`` records the month converted into
``presentation:`` at the stored rates, exactly as ``allocate --currency`` from the files;
``close`` freezes it (rates loaded later change no issued figure); a reopened month closes
at the rates in force then and says the rates changed; ``history`` shows the conversion with
the ledger amounts."""

from __future__ import annotations

import io
import json
import re
import shutil
from fractions import Fraction
from pathlib import Path

import httpx
import pandas as pd
from typer.testing import CliRunner

from tenantcost.cli import app
from tenantcost.reconcile import cascade
from tenantcost.service.tokens import create_token
from tenantcost.store.engine import open_engine
from tenantcost.store.run_fx import client_conversions, run_conversions
from tenantcost.store.settings import resolve_settings
from tenantcost.store.stored_run import load_statement

from .service_web_server import running_service

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "currency"
MONTH = "2026-11"
runner = CliRunner()


def logged_in(base: str, token: str) -> httpx.Client:
    """A browser-like session of ``token`` on the served pages (the login form, its CSRF)."""
    client = httpx.Client(base_url=base, timeout=60)
    csrf = re.search(r'name="csrf_token" value="([^"]+)"', client.get("/login").text)
    assert csrf is not None
    done = client.post("/login", data={"token": token, "csrf_token": csrf.group(1)})
    assert done.status_code == 303
    return client


def token_for(db: list[str], role: str, name: str, clients: list[str] | None = None) -> str:
    """A new token of ``role`` in the store ``db`` (``--db URL --data DIR``) names."""
    engine = open_engine(resolve_settings(db=db[1], environ={}))
    return create_token(engine, role, clients=clients or [], name=name, actor="tests")[0]


def example_store(db: list[str], rates: bool = True) -> None:
    """A new store (``--db URL --data DIR``) holding ``examples/currency``: its rules, usage
    and costs, and its rates unless ``rates`` is false."""
    cli("db", "upgrade", *db)
    cli("rules", "load", str(EXAMPLE / "rules.yaml"), *db)
    cli("ingest", "usage", "--usage", str(EXAMPLE / "usage.csv"), *db)
    cli("ingest", "costs", "--costs", str(EXAMPLE / "costs.csv"), *db)
    if rates:
        cli("fx", "load", str(EXAMPLE / "rates.csv"), *db)


def cli(*args: str, code: int = 0):
    done = runner.invoke(app, list(args))
    assert done.exit_code == code, done.output
    return done


def test_runs_convert_close_freezes_and_a_restatement_names_new_rates(tmp_path: Path):
    url = f"sqlite:///{tmp_path / 'store.db'}"
    db = ["--db", url, "--data", str(tmp_path / "data")]
    example_store(db, rates=False)

    refused = cli("run", "--month", MONTH, *db, code=2)  # presentation: EUR, no rates stored
    assert "converting USD into EUR" in refused.stderr and "fx load" in refused.stderr
    cli("fx", "load", str(EXAMPLE / "rates.csv"), *db)
    ran = json.loads(cli("run", "--month", MONTH, "--format", "json", *db).stdout)
    files = json.loads(cli("allocate", "--config", str(EXAMPLE / "rules.yaml"), "--format",
                           "json").stdout)  # fmt: skip
    [eur] = ran["conversions"]
    assert eur["currency"] == "EUR" and eur["reference_total"] == files["reference_total"]
    assert eur["ledger_reference_total"] == ran["reference_total"] == 300_000_000
    assert eur["fx"]["rates"] == files["fx"]["rates"]  # the same rates, as used

    engine = open_engine(resolve_settings(db=url, environ={}))
    stored = run_conversions(engine, ran["run_id"])["EUR"]
    assert sum(line[3] for line in stored.cascade) == stored.reference_total  # closes, gap 0
    shown = json.loads(cli("history", *db, "--format", "json").stdout)
    assert shown == []  # nothing issued yet
    cli("close", "--month", MONTH, "--allow-incomplete", *db)
    first = pd.DataFrame(json.loads(cli("history", *db, "--format", "json").stdout))
    by_file = {c["client"]: (c["amount"], c["ledger_amount"]) for c in files["clients"]}
    assert {r.client: (r.amount, r.ledger_amount) for r in first.itertuples()} == by_file
    assert set(first["currency"]) == {"EUR"} and set(first["ledger_currency"]) == {"USD"}

    # A corrected treasury rate for 6 November: the issued revision does not move.
    fix = tmp_path / "fix.csv"
    fix.write_text("date,base,quote,rate\n2026-11-06,EUR,USD,1.1000\n")
    cli("fx", "load", str(fix), *db)
    assert json.loads(cli("history", *db, "--format", "json").stdout) == first.to_dict("records")
    assert run_conversions(engine, ran["run_id"])["EUR"] == stored

    cli("reopen", "--month", MONTH, "--reason", "EUR rate of 6 November corrected", *db)
    closed = cli("close", "--month", MONTH, "--allow-incomplete", *db).stdout
    assert "(new run)" in closed  # the latest run converted at rates since replaced
    assert "exchange rates changed since revision 1 for EUR" in closed
    after = pd.DataFrame(json.loads(cli("history", *db, "--format", "json").stdout))
    second = after.loc[after["revision"] == 2].set_index("client")
    assert (second["ledger_amount"] == first.set_index("client")["ledger_amount"]).all()
    # Revision 2 is what allocate gives from files holding the corrected rate.
    folder = tmp_path / "corrected"
    shutil.copytree(EXAMPLE, folder)
    rates = folder / "rates.csv"
    corrected = rates.read_text().replace("11-06,EUR,USD,1.0800", "11-06,EUR,USD,1.1000")
    rates.write_text(corrected)
    again = json.loads(cli("allocate", "--config", str(folder / "rules.yaml"), "--format",
                           "json").stdout)  # fmt: skip
    assert second["amount"].to_dict() == {c["client"]: c["amount"] for c in again["clients"]}
    assert (second["amount"] < first.set_index("client")["amount"]).all()  # 1 EUR buys more USD
    table = cli("history", *db).stdout
    assert "ledger amount" in table and "150.000000  USD" in table
    refused = cli("history", *db, "--currency", "GBP", code=2)
    assert "--currency GBP: no issued revision here was converted" in refused.stderr


def test_explain_from_the_store_in_another_currency_is_the_files_bridge(tmp_path: Path):
    """``explain --from-db`` in EUR reads each month's recorded conversion and gives the
    bridge ``explain`` gives from the files: the same parts, the same ``fx`` part."""
    folder = tmp_path / "two-months"
    shutil.copytree(ROOT / "examples" / "two-months", folder)
    rules = folder / "rules.yaml"
    rules.write_text(
        rules.read_text() + 'presentation: EUR\nfx:\n  policy: fixed\n  fixed: {"2026-09": '
        '{EUR: "0.9"}, "2026-10": {EUR: "0.8"}}\n'
    )
    db = ["--db", f"sqlite:///{tmp_path / 'store.db'}", "--data", str(tmp_path / "data")]
    cli("db", "upgrade", *db)
    cli("rules", "load", str(rules), *db)
    cli("ingest", "usage", "--usage", str(folder / "usage.csv"), *db)
    cli("ingest", "costs", "--costs", str(folder / "costs.csv"), *db)
    for month in ("2026-09", "2026-10"):
        cli("run", "--month", month, *db)
    args = ["explain", "--month", "2026-10", "--client", "acme", "--format", "json"]
    stored = json.loads(cli(*args, "--from-db", *db).stdout)
    files = json.loads(cli(*args, "--config", str(rules)).stdout)
    assert stored["money"]["currency"] == files["money"]["currency"] == "EUR"
    for key in ("from_amount", "to_amount", "change", "parts"):
        assert stored[key] == files[key], key
    assert [p["effect"] for p in stored["parts"]][-1] == "fx"
    assert sum(p["amount"] for p in stored["parts"]) == stored["change"]
    page_change(tmp_path, db, stored)
    # the sheets' "What changed" compares the two months each in EUR at its own rate (the
    # files once compared September's USD with October's EUR); the store's issued sheets agree
    went = "Your amount went from 1.05 EUR in 2026-09 to 1.14 EUR in 2026-10 (+0.09)"
    at = ["--month", "2026-10", "--currency", "EUR", "--format", "html", "--client", "acme"]
    cli("report", "--config", str(rules), "--out", str(tmp_path / "files"), *at)
    cli("report", "--from-db", "--out", str(tmp_path / "stored"), *at, *db)
    for where in ("files", "stored"):
        assert went in sheet_text(tmp_path / where / "clients" / "acme.html"), where
    ledger = json.loads(cli(*args, "--from-db", "--currency", "USD", *db).stdout)
    assert ledger["money"]["currency"] == "USD" and ledger["change"] == stored["ledger"]["change"]
    refused = cli(*args, "--from-db", "--currency", "GBP", *db, code=2)
    assert "was not converted into GBP (its conversions: EUR)" in refused.stderr


def test_a_client_page_shows_the_issued_conversion_and_its_ledger(tmp_path: Path):
    """Served by real uvicorn: the client page shows the month in the client's own currency
    (the catalog's: acme EUR, bravo GBP) as its run converted it, with the ledger amount and
    how it was converted; ``?currency=USD`` shows the ledger; an unknown code is a 422. An
    account manager reads no file name."""
    url = f"sqlite:///{tmp_path / 'store.db'}"
    data = str(tmp_path / "data")
    db = ["--db", url, "--data", data]
    example_store(db)
    cli("catalog", "load", str(EXAMPLE / "catalog.csv"), *db)  # acme EUR, bravo GBP
    budget = tmp_path / "budget.csv"  # acme's band in EUR: 138.63 EUR is within, 150 USD not
    budget.write_text("client,low,expected,high,currency\nacme,130,135,140,EUR\n")
    cli("budget", "load", str(budget), "--month", MONTH, *db)
    cli("close", "--month", MONTH, "--allow-incomplete", *db)
    tokens = {"manager": token_for(db, "account-manager", "fx-manager", ["acme"]),
              "finance": token_for(db, "finance", "fx-finance")}  # fmt: skip
    with running_service(url, data) as base:
        pages = {who: logged_in(base, token) for who, token in tokens.items()}
        manager = pages["manager"].get("/clients/acme")
        assert manager.status_code == 200
        assert '<span class="amount" id="amount">138.63 EUR</span>' in manager.text
        assert re.search(r'id="fx-ledger">150(\.0+)? USD, as issued', manager.text)
        assert re.search(r"the company(&#39;|')s rates file", manager.text)
        assert "rates.csv" not in manager.text and "bravo" not in manager.text
        api = pages["manager"].get(f"/api/v1/clients/acme/months/{MONTH}").json()
        assert api["money"]["currency"] == "USD" and api["amount"] == 150_000_000
        assert api["converted"]["currency"] == "EUR" and api["converted"]["amount"] == 138_632_873
        assert api["converted"]["ledger_amount"] == 150_000_000
        assert "rates.csv" not in json.dumps(api)  # the manager's view names no file
        ledger = pages["manager"].get(f"/api/v1/clients/acme/months/{MONTH}?currency=USD")
        assert ledger.json()["converted"] is None
        sheet = f"/api/v1/clients/acme/months/{MONTH}/sheet.html"
        assert f'href="{sheet}?currency=EUR" id="sheet-link"' in manager.text  # as the figure
        in_eur = pages["manager"].get(sheet, params={"currency": "EUR"})
        assert in_eur.status_code == 200 and "Total for the period 138.63 EUR" in sheet_text(
            in_eur.text)  # fmt: skip
        assert "rates.csv" not in in_eur.text and "bravo" not in in_eur.text
        assert "Total for the period 150.00 USD" in sheet_text(pages["manager"].get(sheet).text)
        assert pages["manager"].get(sheet, params={"currency": "CHF"}).status_code == 404
        trend = pages["manager"].get("/api/v1/clients/acme/trend", params={"currency": "EUR"})
        assert trend.json()["months"][0]["fx"]["source"] == "the company's rates file"
        assert "rates.csv" not in trend.text  # nor in its CSV
        assert "rates.csv" not in pages["manager"].get(
            "/api/v1/clients/acme/trend", params={"currency": "EUR", "format": "csv"}
        ).text  # fmt: skip
        listed = pages["finance"].get("/api/v1/clients", params={"month": MONTH}).json()
        assert {i["id"]: i["budget_status"] for i in listed["items"]}["acme"] == "within"
        own = {i["id"]: i["converted"] for i in listed["items"]}  # each in its own currency
        assert own["acme"] == {"currency": "EUR", "amount": 138_632_873}
        assert own["bravo"]["currency"] == "GBP"
        mine = pages["manager"].get("/clients").text  # the manager's list: acme alone
        assert re.search(r'class="muted own-currency">138\.63 EUR<', mine)
        assert "bravo" not in mine and "GBP" not in mine
        assert re.search(r"EUR: daily rates, 3 rate\(s\) dated 2026-11-06 to 2026-11-09, 1 USD = "
                         r"1 ÷ 1\.0850 to 1 ÷ 1\.0800 EUR; rates from the company(&#39;|')s "
                         r"rates file", mine)  # fmt: skip
        month_page = pages["finance"].get(f"/months/{MONTH}").text
        assert re.search(r'id="reference-converted">277\.35 EUR \(daily rates: 3 rate', month_page)
        assert "GBP (daily rates" in month_page  # bravo's own currency, converted by the run
        summary = pages["finance"].get(f"/months/{MONTH}/finance-summary.html",
                                       params={"currency": "EUR"})  # fmt: skip
        assert summary.status_code == 200 and "finance-summary.html?currency=EUR" in month_page
        text = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", summary.text.split("</style>")[-1]))
        assert "Cascade, EUR" in text and "277.35 100.0 % Gap closes 0.00" in text, text[:2000]
        assert "converted from the ledger currency USD (reference total 300.00 USD)" in text
        assert "EUR" in summary.headers["content-disposition"]
        assert pages["finance"].get(f"/months/{MONTH}/finance-summary.pdf",
                                    params={"currency": "EUR"}).status_code == 200  # fmt: skip
        for code, status in (("JPY", 404), ("USD", 200)):  # not converted into; the ledger's
            done = pages["finance"].get(f"/months/{MONTH}/finance-summary.html",
                                        params={"currency": code})  # fmt: skip
            assert done.status_code == status, (code, done.status_code)
        refused = pages["manager"].get(f"/months/{MONTH}/finance-summary.html",
                                       params={"currency": "EUR"})  # fmt: skip
        assert refused.status_code in (403, 404)
        internal = pages["finance"].get("/clients/acme").text
        assert "rates.csv" in internal  # finance sees where the rates came from
        own = pages["finance"].get("/clients/bravo").text  # the client's own currency wins
        assert re.search(r'id="amount">[0-9.]+ GBP</span>', own) and "120.00 USD" in own
        ledger = pages["manager"].get("/clients/acme", params={"currency": "usd"}).text
        assert 'id="amount">150' in ledger and "fx-ledger" not in ledger
        assert pages["manager"].get("/clients/acme", params={"currency": "XYZ"}).status_code == 422

        fix = tmp_path / "fix.csv"  # a corrected rate restates the month in EUR alone
        fix.write_text("date,base,quote,rate\n2026-11-06,EUR,USD,1.1000\n")
        cli("fx", "load", str(fix), *db)
        cli("reopen", "--month", MONTH, "--reason", "EUR rate corrected", *db)
        cli("close", "--month", MONTH, "--allow-incomplete", *db)
        restated = pages["manager"].get("/clients/acme").text
        assert "revision 1 of 2026-11: -1.52 EUR; in the ledger ±0.00 USD." in restated
        assert 'id="amount">137.12 EUR' in restated


def mean(values: list[Fraction]) -> Fraction:
    return sum(values, Fraction(0)) / len(values)


def test_revenue_in_each_clients_currency_meets_costs_at_the_months_rate(
    tmp_path: Path, store_url: str
):
    """The catalog gives acme EUR and bravo GBP. Unit economics in EUR converts bravo's GBP
    revenue at November's mean cross rate, in USD both; the store's runs convert into each
    client's currency, and ``history`` shows each client in its own."""
    eur_usd = [Fraction(r) for r in ("1.0790", "1.0800", "1.0850", "1.0860")]  # rates.csv
    eur_gbp = [Fraction(r) for r in ("0.8390", "0.8400", "0.8450", "0.8460")]
    args = ["unit-economics", "--config", str(EXAMPLE / "rules.yaml"), "--catalog",
            str(EXAMPLE / "catalog.csv"), "--month", MONTH, "--format", "json"]  # fmt: skip

    def revenues(*extra: str) -> dict[str, tuple[int, int, str]]:
        doc = json.loads(cli(*args, *extra).stdout)
        return {c["client"]: (c["revenue"], c["own_revenue"], c["revenue_currency"])
                for c in doc["clients"]}  # fmt: skip

    gbp_in_eur = mean([1 / g for g in eur_gbp])
    assert revenues() == {  # presentation: EUR
        "acme": (400_000_000, 400_000_000, "EUR"),
        "bravo": (round(250_000_000 * gbp_in_eur), 250_000_000, "GBP"),
    }
    own = {c["client"]: c["own"] for c in json.loads(cli(*args).stdout)["clients"]}
    gbp_sheet = json.loads(cli("allocate", "--config", str(EXAMPLE / "rules.yaml"), "--format",
                               "json", "--currency", "GBP").stdout)  # fmt: skip
    assert own["acme"] is None  # in EUR already, the table's currency
    assert own["bravo"]["currency"] == "GBP" and own["bravo"]["revenue"] == 250_000_000
    assert own["bravo"]["cost"] == next(c["amount"] for c in gbp_sheet["clients"]
                                        if c["client"] == "bravo")  # fmt: skip
    assert own["bravo"]["margin"] == 250_000_000 - own["bravo"]["all_in_cost"]
    in_usd = revenues("--currency", "USD")
    assert in_usd["acme"][0] == round(400_000_000 * mean(eur_usd))
    cross = mean([u / g for u, g in zip(eur_usd, eur_gbp, strict=True)])  # GBP->USD per day
    assert in_usd["bravo"][0] == round(250_000_000 * cross)

    db = ["--db", store_url, "--data", str(tmp_path / "data")]
    example_store(db)
    ran = json.loads(cli("run", "--month", MONTH, "--format", "json", *db).stdout)
    assert [c["currency"] for c in ran["conversions"]] == ["EUR"]  # presentation: only
    cli("catalog", "load", str(EXAMPLE / "catalog.csv"), *db)  # bravo's GBP: run again
    assert "(new run)" in cli("close", "--month", MONTH, "--allow-incomplete", *db).stdout
    shown = json.loads(cli("history", "--format", "json", *db).stdout)
    assert {(h["client"], h["currency"]) for h in shown} == {("acme", "EUR"), ("bravo", "GBP")}
    gbp = json.loads(cli("allocate", "--config", str(EXAMPLE / "rules.yaml"), "--format", "json",
                         "--currency", "GBP").stdout)  # fmt: skip
    bravo = next(h for h in shown if h["client"] == "bravo")
    assert bravo["amount"] == next(c["amount"] for c in gbp["clients"] if c["client"] == "bravo")
    files = json.loads(cli(*args).stdout)
    priced_in_eur(db, files)
    # from the store: presentation: EUR as the run converted it, each client in its own too,
    # the figures of the files; --currency USD is the ledger's
    from_db = ["unit-economics", "--from-db", "--month", MONTH, "--format", "json", *db]
    stored = json.loads(cli(*from_db).stdout)
    assert stored["money"]["currency"] == "EUR"
    picked = ["client", "cost", "all_in_cost", "revenue", "margin", "own"]
    assert [{k: c[k] for k in picked} for c in stored["clients"]] == [
        {k: c[k] for k in picked} for c in files["clients"]
    ]
    ledger = json.loads(cli(*from_db, "--currency", "USD").stdout)
    assert ledger["money"]["currency"] == "USD"
    assert next(c for c in ledger["clients"] if c["client"] == "acme")["revenue"] == in_usd[
        "acme"][0]  # fmt: skip
    refused = cli(*from_db, "--currency", "JPY", code=2)
    assert "was not converted into JPY (its conversions: EUR, GBP)" in refused.stderr
    # next month's budget plan: each client in its own currency, from its issued figure there
    plan = tmp_path / "plan.csv"
    cli("budget", "plan", "--month", "2026-12", "--format", "csv", "--out", str(plan), *db)
    planned = pd.read_csv(plan).set_index("client")
    own_amounts = {h["client"]: (h["amount"], h["currency"]) for h in shown}
    for client, (amount, currency) in own_amounts.items():
        assert planned.loc[client, "currency"] == currency
        assert round(planned.loc[client, "expected"] * 1_000_000) == amount  # fallback: last
    assert "version 1" in cli("budget", "load", str(plan), "--month", "2026-12", *db).stdout


def test_a_budget_in_the_clients_currency_is_watched_at_the_months_rates(tmp_path: Path):
    """acme's band is in EUR: the watch converts its projection at November's rates to date
    (the mean of the four published rates), exactly, rounded once, and compares that; bravo's
    band stays in the ledger. A bad currency cell is one line, exit 2."""
    db = ["--db", f"sqlite:///{tmp_path / 'store.db'}", "--data", str(tmp_path / "data")]
    example_store(db)
    budget = tmp_path / "budget.csv"
    budget.write_text("client,low,expected,high,currency\nacme,130,135,140,EUR\n"
                      "bravo,100,110,115,\n")  # fmt: skip
    cli("budget", "load", str(budget), "--month", MONTH, *db)
    args = ["watch", "--month", MONTH, "--as-of", "2026-12-01T00:00:00Z", *db]
    doc = json.loads(cli(*args, "--format", "json").stdout)
    acme, bravo = (next(c for c in doc["clients"] if c["client"] == n) for n in ("acme", "bravo"))
    rate = mean([1 / Fraction(r) for r in ("1.0790", "1.0800", "1.0850", "1.0860")])
    assert acme["projected"] == 150_000_000  # the ledger, as scored
    assert acme["budget"]["currency"] == "EUR" and Fraction(acme["budget"]["rate"]) == rate
    assert acme["budget"]["projected"] == round(150_000_000 * rate) == 138_569_223
    assert acme["status"] == "within"  # 138.57 EUR in 130..140 EUR (150 USD would be above)
    assert bravo["budget"]["currency"] == "USD" and bravo["status"] == "above"
    table = cli(*args).stdout
    assert "130.000000 .. 140.000000 EUR (projected 138.569223 EUR at ≈0.923795)" in table
    served_pages(tmp_path, db)
    budget.write_text("client,low,expected,high,currency\nacme,130,135,140,EURO\n")
    refused = cli("budget", "load", str(budget), "--month", MONTH, *db, code=2)
    assert "row 2, column 'currency': currency must be an ISO 4217 code" in refused.stderr


def served_pages(tmp_path: Path, db: list[str]) -> None:
    """The pages that read a watch with a band in a client's currency answer 200 and show
    the band in it (a band's currency text once made the trend a 500)."""
    token = token_for(db, "finance", "fx-watch")
    with running_service(db[1], db[3]) as base:
        client = logged_in(base, token)
        page = client.get("/clients/acme")
        assert page.status_code == 200
        assert 'id="watch-band-projected">138.57 EUR' in page.text
        month = client.get(f"/months/{MONTH}")
        assert month.status_code == 200 and "140.00 EUR" in month.text
        trend = client.get("/api/v1/clients/acme/trend")
        assert trend.status_code == 200


def page_change(tmp_path: Path, db: list[str], bridge: dict) -> None:
    """The client page of a converted month says what changed in EUR as ``explain --from-db
    --currency EUR`` splits it: the ledger's parts at the earlier month's rate and the
    exchange rate's part, adding up to the change between the two figures as shown (once:
    no second "Change in EUR" line)."""
    for month in ("2026-09", "2026-10"):
        cli("close", "--month", month, "--allow-incomplete", *db)
    token = token_for(db, "finance", "fx-change")
    with running_service(db[1], db[3]) as base:
        session = logged_in(base, token)
        page = session.get("/clients/acme", params={"month": "2026-10"}).text
        trend_in_eur(session, db, page)
    assert 'id="fx-change"' not in page
    table = page[page.index('id="what-changed-table"') : page.index("</table>",
                 page.index('id="what-changed-table"'))]  # fmt: skip
    rows = re.findall(r'<th scope="row">([^<]+)</th><td>[^<]*</td><td class="num">([^<]+)<',
                      table)  # fmt: skip

    def number(text: str) -> float:
        return float(re.sub(r"[^0-9.\-]", "", text.replace("\u2212", "-")))

    (start, first), *parts, (end, last) = rows
    assert (start, end) == ("2026-09, revision 1", "2026-10")
    assert round(number(first) + sum(number(a) for _, a in parts), 2) == number(last)
    assert abs(number(last) - number(first) - bridge["change"] / 1e6) <= 0.01
    fx = dict(parts)["Exchange rate"]
    fx_part = next(p for p in bridge["parts"] if p["effect"] == "fx")["amount"] / 1e6
    assert abs(number(fx) - fx_part) <= 0.01
    assert "EUR" in page[page.index('id="what-changed-summary"') :][:300]


def trend_in_eur(session: httpx.Client, db: list[str], page: str) -> None:
    """The client's trend in EUR: each month as its run converted it (the fixed rates 0.9
    and 0.8), its sources adding up to it, the ledger amount beside; the page's chart and
    its CSV in EUR; a currency no run converted into leaves the trend in the ledger."""
    ledger = session.get("/api/v1/clients/acme/trend").json()
    eur = session.get("/api/v1/clients/acme/trend", params={"currency": "EUR"}).json()
    assert ledger["money"]["currency"] == "USD" and "ledger_currency" not in ledger
    assert eur["money"]["currency"] == "EUR" and eur["ledger_currency"] == "USD"
    assert eur["not_converted"] == []
    engine = open_engine(resolve_settings(db=db[1], environ={}))
    runs = {r["month"]: r["run_id"] for r in json.loads(cli("history", "--client", "acme",
            "--currency", "USD", "--format", "json", *db).stdout)}  # fmt: skip
    stored = client_conversions(engine, list(runs.values()), "EUR", ["acme"])
    by_run = dict(zip(stored["run_id"], stored["amount"], strict=True))
    rate = {"2026-09": Fraction(9, 10), "2026-10": Fraction(8, 10)}
    for before, after in zip(ledger["months"], eur["months"], strict=True):
        assert after["ledger_amount"] == before["amount"] and after["fx"]["policy"] == "fixed"
        assert after["amount"] == by_run[runs[after["month"]]]
        assert abs(after["amount"] - before["amount"] * rate[after["month"]]) <= 1
        assert sum(after["by_source"].values()) == after["amount"]
    assert re.search(r'id="trend-fx">In EUR: each month as its run converted it from USD', page)
    assert "/api/v1/clients/acme/trend?format=csv&amp;currency=EUR" in page
    table = page[page.index('id="trend-table"') :]
    assert re.search(
        r'2026-09</th><td>issued</td><td class="num">1\.05</td><td>api 0\.60, '
        r"tenant-acme/worker 0\.45<",
        table,
    )  # at EUR's decimals, adding up
    csv = session.get("/api/v1/clients/acme/trend", params={"format": "csv", "currency": "EUR"})
    rows = pd.read_csv(io.StringIO(csv.text))
    assert set(rows["currency"]) == {"EUR"} and set(rows["ledger_currency"]) == {"USD"}
    assert set(rows["fx_policy"]) == {"fixed"}  # each row says how it was converted
    assert (rows["fx_rates"].str.contains("1 USD = 0.9 EUR|1 USD = 0.8 EUR")).all()
    for _, r in rows.iterrows():  # a reader can redo each row: ledger x the month's rate
        rate = {"2026-09": 0.9, "2026-10": 0.8}[r["month"]]
        assert abs(r["ledger_amount"] * rate - r["amount"]) <= 0.000001
    assert rows.groupby("month")["amount"].sum().round(6).tolist() == [
        m["amount"] / 1e6 for m in eur["months"]
    ]
    gbp = session.get("/api/v1/clients/acme/trend", params={"currency": "GBP"}).json()
    assert gbp == ledger  # no run converted into GBP: the ledger trend, which says so


def priced_in_eur(db: list[str], files: dict) -> None:
    """The pricing API prices the stored month in presentation: EUR as the run converted it:
    the same per plan and per client as ``unit-economics --currency EUR`` from the files;
    ``?currency=USD`` is the ledger's. The page says how it was converted."""
    token = token_for(db, "product", "fx-pricing")
    with running_service(db[1], db[3]) as base:
        client = httpx.Client(
            base_url=base, timeout=60, headers={"Authorization": f"Bearer {token}"}
        )
        doc = client.get(f"/api/v1/months/{MONTH}/unit-economics").json()
        ledger = client.get(f"/api/v1/months/{MONTH}/unit-economics?currency=USD").json()
        html = logged_in(base, token).get("/pricing").text
    assert doc["currency"] == "EUR" and doc["fx"]["ledger_currency"] == "USD"
    assert ledger["currency"] == "USD" and "fx" not in ledger
    # 3 of the month's 720 hours are covered: the page prices the month at its run rate, x240
    assert doc["basis"] == "projected" and files["money"]["currency"] == "EUR"
    assert doc["residual"]["amount"] == files["residual"]["amount"] * 240
    mine = {c["client"]: (c["cost"], c["revenue"]) for c in doc["clients"]}
    assert mine == {c["client"]: (c["cost"] * 240, c["revenue"])
                    for c in files["clients"]}  # fmt: skip
    assert 'id="pricing-fx">daily rates, 3 rate(s) dated 2026-11-06 to 2026-11-09' in html


def test_a_client_currency_the_rates_cannot_reach_never_stops_the_month(tmp_path: Path):
    """A catalog is accepted with any ISO code; CHF, which the stored rates do not quote,
    is skipped by the run with one warning line (its client stays in the ledger), and the
    month still closes, from that same run."""
    db = ["--db", f"sqlite:///{tmp_path / 'store.db'}", "--data", str(tmp_path / "data")]
    example_store(db)
    catalog = tmp_path / "catalog.csv"
    catalog.write_text("client,currency\nacme,CHF\nbravo,\n")
    cli("catalog", "load", str(catalog), *db)
    ran = cli("run", "--month", MONTH, "--format", "json", *db)
    assert "not converted into CHF, a client's currency in the catalog" in ran.stderr
    assert "acme" not in ran.stderr and "Traceback" not in ran.output
    assert [c["currency"] for c in json.loads(ran.stdout)["conversions"]] == ["EUR"]
    closed = cli("close", "--month", MONTH, "--allow-incomplete", *db).stdout
    assert "(latest run, inputs unchanged)" in closed


def sheet_text(path: Path | str) -> str:
    """A sheet's visible text (from its file, or its HTML), one space between words."""
    html = path.read_text() if isinstance(path, Path) else path
    page = re.sub(r"<(style|svg)\b.*?</\1>", " ", html, flags=re.S)
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", page))


def between(text: str, start: str, end: str) -> str:
    return text[text.index(start) : text.index(end, text.index(start))]


def test_an_issued_statement_renders_in_another_currency_as_its_run_converted_it(
    tmp_path: Path, store_url: str
):
    """``report --from-db --currency EUR`` renders the issued revision as its run converted
    it: the lines, the cascade (closing, gap 0) and the conversion part (every daily rate
    beside the client's ledger amount that day) are those of ``report --currency EUR`` from
    the files; rates loaded later change no byte of it; a currency the run did not convert
    into is one line, exit 2."""
    db = ["--db", store_url, "--data", str(tmp_path / "data")]
    example_store(db)
    cli("catalog", "load", str(EXAMPLE / "catalog.csv"), *db)  # bravo's currency: GBP
    cli("close", "--month", MONTH, "--allow-incomplete", *db)
    at = ["--generated-at", "2026-12-01T00:00:00Z", "--format", "html"]
    stored, files = tmp_path / "stored", tmp_path / "files"
    cli("report", "--from-db", "--month", MONTH, "--currency", "EUR", "--out", str(stored),
        *at, *db)  # fmt: skip
    cli("report", "--config", str(EXAMPLE / "rules.yaml"), "--month", MONTH, "--currency",
        "EUR", "--out", str(files), *at)  # fmt: skip
    mine, theirs = (sheet_text(d / "clients" / "acme.html") for d in (stored, files))
    assert "Total for the period 138.63 EUR" in mine
    for start, end in (("1. Your cost", "2. The rule"), ("Currency conversion", "2. The rule")):
        assert between(mine, start, end) == between(theirs, start, end), start
    assert "2026-11-07 1 ÷ 1.0800 1 EUR = 1.0800 USD published 2026-11-06 30.00" in mine
    summary = sheet_text(stored / "finance-summary.html")
    assert "Reference total 277.35 EUR Gap: 0.00 (closes)" in summary
    keys = ("Client totals, EUR", "Moved by one display unit")  # every key's column, as files
    assert between(summary, *keys) == between(sheet_text(files / "finance-summary.html"), *keys)

    engine = open_engine(resolve_settings(db=db[1], environ={}))
    pack = load_statement(engine, MONTH, currency="EUR").pack
    files_json = json.loads(cli("allocate", "--config", str(EXAMPLE / "rules.yaml"),
                                "--currency", "EUR", "--format", "json").stdout)  # fmt: skip
    assert cascade(pack.base).gap == 0
    assert pack.base.reference_total == files_json["reference_total"]
    totals = pack.base.client_totals().set_index("client")["amount"].to_dict()
    assert totals == {c["client"]: c["amount"] for c in files_json["clients"]}

    before = (stored / "clients" / "acme.html").read_bytes()
    fix = tmp_path / "fix.csv"
    fix.write_text("date,base,quote,rate\n2026-11-06,EUR,USD,1.1000\n")
    cli("fx", "load", str(fix), *db)
    again = tmp_path / "again"
    cli("report", "--from-db", "--month", MONTH, "--currency", "EUR", "--out", str(again),
        *at, *db)  # fmt: skip
    assert (again / "clients" / "acme.html").read_bytes() == before  # frozen at close
    gbp = tmp_path / "gbp"
    cli("report", "--from-db", "--month", MONTH, "--currency", "gbp", "--client", "bravo",
        "--out", str(gbp), *at, *db)  # fmt: skip
    assert re.search(r"Total for the period [0-9.]+ GBP", sheet_text(gbp / "clients" /
                                                                     "bravo.html"))  # fmt: skip
    refused = cli("report", "--from-db", "--month", MONTH, "--currency", "CHF", "--out",
                  str(tmp_path / "chf"), *db, code=2)  # fmt: skip
    assert "was not converted into CHF (its conversions: EUR, GBP)" in refused.stderr
    assert "Traceback" not in refused.output
