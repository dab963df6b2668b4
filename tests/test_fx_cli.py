"""``--currency``, ``fx load`` and docs/currency.md, from outside: the commands as users run
them, on the bundled example, and the documented figures checked against the output."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tenantcost.cli import app

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "currency"
DOC = ROOT / "docs" / "currency.md"
runner = CliRunner()


def cli(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tenantcost", *args], cwd=cwd, capture_output=True, text=True,
        timeout=120, check=False,
    )  # fmt: skip


def fenced_after(marker: str) -> str:
    """The first fenced block after ``<!-- marker -->`` in docs/currency.md."""
    text = DOC.read_text()
    rest = text[text.index(f"<!-- {marker} -->") :]
    return rest.split("```text\n", 1)[1].split("```", 1)[0]


def allocate_json(config: Path, *extra: str) -> dict:
    done = runner.invoke(app, ["allocate", "--config", str(config), "--format", "json", *extra])
    assert done.exit_code == 0, done.output
    return json.loads(done.stdout)


def test_the_documented_output_is_the_commands():
    done = cli("allocate", "--config", "examples/currency/rules.yaml")
    assert done.returncode == 0, done.stderr
    assert done.stdout == fenced_after("currency-example-output")


def with_policy(tmp_path: Path, policy: str) -> Path:
    folder = tmp_path / policy
    shutil.copytree(EXAMPLE, folder)
    rules = folder / "rules.yaml"
    text = rules.read_text().replace("policy: daily ", f"policy: {policy} ")
    if policy == "fixed":
        text = text.replace("  max_age: 4d", '  fixed: {"2026-11": {EUR: "0.9215"}}\n  max_age: 4d')
    rules.write_text(text)
    return rules


def decimal(micros: int) -> str:
    return f"{micros // 10**6}.{micros % 10**6:06d}"


def test_every_policy_figure_of_the_doc(tmp_path: Path):
    text = DOC.read_text()
    table = text[text.index("<!-- currency-policies -->") :].split("\n\n", 1)[0]
    rows = [r for r in table.splitlines() if r.startswith("| `")]
    assert len(rows) == 4
    for row in rows:
        cells = [c.strip() for c in row.strip("|").split("|")]
        policy = cells[0].strip("`")
        doc = allocate_json(with_policy(tmp_path, policy))
        clients = {c["client"]: c["amount"] for c in doc["clients"]}
        idle = next(c["amount"] for c in doc["cascade"] if c["line"] == "idle")
        shown = [decimal(clients["acme"]), decimal(clients["bravo"]), decimal(idle),
                 decimal(doc["reference_total"])]  # fmt: skip
        assert cells[2:] == shown, policy
        assert doc["fx"]["policy"] == policy and doc["gap"] == 0


def truncated(value: Fraction, places: int = 9) -> str:
    """``value``'s first ``places`` decimals, as the doc writes them before "…"."""
    scaled = value.numerator * 10**places // value.denominator
    return f"{scaled // 10**places}.{scaled % 10**places:0{places}d}…"


def test_the_by_hand_figures_of_the_doc():
    text = DOC.read_text()
    friday, monday = 1 / Fraction("1.0800"), 1 / Fraction("1.0850")
    assert truncated((60 + 30) * friday + 60 * monday) == "138.632872503…"
    assert truncated(200 * friday + 100 * monday) == "277.351083802…"
    gbp = 90 * Fraction("0.8400") / Fraction("1.0800") + 60 * Fraction("0.8450") / Fraction(
        "1.0850"
    )
    assert truncated(gbp) == "116.728110599…"
    for figure in ("138.632872503…", "277.351083802…", "116.728110599…"):
        assert figure in text
    doc = allocate_json(EXAMPLE / "rules.yaml", "--currency", "GBP")
    acme_gbp = next(c for c in doc["clients"] if c["client"] == "acme")
    assert acme_gbp["amount"] == 116_728_111 and acme_gbp["ledger_amount"] == 150_000_000
    assert doc["fx"]["rates"][1] == {
        "date": "2026-11-07", "rate": "0.8400/1.0800", "published": "2026-11-06",
        "quotes": [
            {"date": "2026-11-06", "base": "EUR", "quote": "GBP", "rate": "0.8400",
             "source": str(EXAMPLE / "rates.csv")},
            {"date": "2026-11-06", "base": "EUR", "quote": "USD", "rate": "1.0800",
             "source": str(EXAMPLE / "rates.csv")},
        ],
    }  # fmt: skip


def test_the_json_keeps_every_ledger_figure_and_adds_up():
    doc = allocate_json(EXAMPLE / "rules.yaml")
    assert doc["currency"] == doc["money"]["currency"] == "EUR"
    assert doc["ledger_reference_total"] == 300_000_000
    assert sum(c["amount"] for c in doc["cascade"]) == doc["reference_total"]
    assert sum(c["ledger_amount"] for c in doc["cascade"]) == doc["ledger_reference_total"]
    for client in doc["clients"]:
        assert sum(line["amount"] for line in client["lines"]) == client["amount"]
        assert sum(line["ledger_amount"] for line in client["lines"]) == client["ledger_amount"]
    ledger = allocate_json(EXAMPLE / "rules.yaml", "--currency", "usd")
    assert "fx" not in ledger and ledger["reference_total"] == 300_000_000


def test_csv_and_reconcile_and_compare_convert():
    csv = runner.invoke(app, ["allocate", "--config", str(EXAMPLE / "rules.yaml"),
                              "--format", "csv", "--currency", "CHF"])  # fmt: skip
    assert csv.exit_code == 1 or csv.exit_code == 2
    assert "cannot reach CHF from USD" in csv.output
    csv = runner.invoke(app, ["allocate", "--config", str(EXAMPLE / "rules.yaml"), "--format",
                              "csv"])  # fmt: skip
    assert csv.stdout.splitlines()[0] == (
        "client,amount,amount_micros,ledger_amount,ledger_amount_micros,currency,ledger_currency"
    )
    assert csv.stdout.splitlines()[1] == "acme,138.632873,138632873,150.000000,150000000,EUR,USD"
    recon = runner.invoke(app, ["reconcile", "--config", str(EXAMPLE / "rules.yaml"),
                                "--currency", "GBP", "--format", "json"])  # fmt: skip
    assert recon.exit_code == 0 and json.loads(recon.stdout)["gap"] == 0
    compare = runner.invoke(app, ["compare", "--config", str(EXAMPLE / "rules.yaml"),
                                  "--keys", "requests,even"])  # fmt: skip
    assert compare.exit_code == 0 and "Amounts in EUR" in compare.stdout
    compared = json.loads(
        runner.invoke(app, ["compare", "--config", str(EXAMPLE / "rules.yaml"), "--keys",
                            "requests,even", "--format", "json"]).stdout
    )  # fmt: skip
    assert compared["fx"]["currency"] == "EUR" and compared["ledger_pool_total"]["even"] == 270e6
    acme = next(c for c in compared["clients"] if c["client"] == "acme")
    assert acme["amounts"]["requests"] == 138_632_873
    assert acme["ledger_amounts"] == {"requests": 150_000_000, "even": 135_000_000}


def rates_file(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "rates.csv"
    path.write_text("date,base,quote,rate\n" + body)
    return path


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("2026-11-06,EUR,USD,0\n", "rates.csv, row 2, column 'rate': a rate must not be zero"),
        ("2026-11-06,EUR,USD,-1.08\n", "row 2, column 'rate': a rate must be a positive"),
        ("2026-11-06,EUR,USD,abc\n", "row 2, column 'rate': a rate must be a positive"),
        ("2026-11-06,EUR,USX,1.08\n", "row 2, column 'quote': unknown currency code"),
        ("2026-11-31,EUR,USD,1.08\n", "row 2, column 'date': not a calendar date"),
        ("2026-10-01,EUR,USD,1.08\n", "no USD->EUR rate within 4d of 2026-11-06"),
        (
            "2026-11-06,EUR,USD,1.08\n2026-11-06,EUR,USD,1.09\n",
            "EUR->USD on 2026-11-06 is given twice with different rates",
        ),
    ],
)
def test_bad_rates_are_one_line_and_exit_2(tmp_path: Path, body: str, expected: str):
    folder = tmp_path / "example"
    shutil.copytree(EXAMPLE, folder)
    rates_file(folder, body)
    done = cli("allocate", "--config", str(folder / "rules.yaml"))
    assert done.returncode == 2, done.stderr
    assert expected in done.stderr and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize(
    ("edit", "args", "expected"),
    [
        (None, ["--currency", "XYZ"], "--currency: unknown currency code 'XYZ'"),
        (("presentation: EUR", "presentation: EUX"), [], "presentation: unknown currency code"),
        (("policy: daily ", "policy: fixed "), [], "fx.fixed: policy 'fixed' needs the rate"),
        (
            ("policy: daily ", 'policy: fixed \n  fixed: {"2026-10": {EUR: "0.92"}}\n'),
            [],
            'fx.fixed."2026-11".EUR: policy fixed: no USD->EUR rate for 2026-11',
        ),
        (None, ["--currency", "CHF"], "the rates cannot reach CHF from USD"),
        (("fx:\n", "fxx:\n"), [], "showing USD amounts in EUR needs exchange rates"),
    ],
)
def test_bad_currency_settings_are_one_line_and_exit_2(tmp_path, edit, args, expected):
    folder = tmp_path / "example"
    shutil.copytree(EXAMPLE, folder)
    rules = folder / "rules.yaml"
    if edit is not None:
        text = rules.read_text()
        if edit[0] == "fx:\n":  # no fx: section at all
            text = text.split("fx:\n")[0] + "sources:" + text.split("sources:", 1)[1]
        else:
            text = text.replace(*edit)
        rules.write_text(text)
    done = cli("allocate", "--config", str(rules), *args)
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert expected in done.stderr and "Traceback" not in done.stderr


def test_fx_load_keeps_rates_and_a_treasury_file_wins(tmp_path: Path):
    from sqlalchemy import create_engine

    from tenantcost.store.fx_rates import stored_rates

    url = f"sqlite:///{tmp_path / 'store.db'}"
    assert cli("db", "upgrade", "--db", url).returncode == 0
    ecb = cli("fx", "load", "ecb", "--since", "2026-10-01", "--db", url)
    assert ecb.returncode == 0, ecb.stderr
    assert re.search(r"ecb: stored \d+ rates from 2026-10-01 to 2026-10-30", ecb.stdout)
    again = cli("fx", "load", "ecb", "--since", "2026-10-01", "--db", url)
    assert "already in the store" in again.stdout
    own = rates_file(tmp_path, "2026-10-30,EUR,USD,1.2345\n")
    loaded = cli("fx", "load", str(own), "--db", url)
    assert loaded.returncode == 0 and "stored 1 rates" in loaded.stdout
    later_ecb = cli("fx", "load", "ecb", "--since", "2026-10-15", "--db", url)
    assert later_ecb.returncode == 0
    rates = stored_rates(create_engine(url))
    usd = rates.loc[(rates["quote"] == "USD") & (rates["date"] == "2026-10-30"), "rate"]
    assert usd.tolist() == ["1.2345"]  # the treasury's rate, though the ECB's was loaded later
    bad = cli("fx", "load", str(rates_file(tmp_path, "2026-10-30,EUR,USD,0\n")), "--db", url)
    assert bad.returncode == 2 and "column 'rate'" in bad.stderr


def two_months(tmp_path: Path, september: str, october: str) -> Path:
    folder = tmp_path / "two-months"
    shutil.copytree(ROOT / "examples" / "two-months", folder)
    rules = folder / "rules.yaml"
    rules.write_text(
        rules.read_text() + f'fx:\n  policy: fixed\n  fixed: {{"2026-09": {{EUR: "{september}"}}, '
        f'"2026-10": {{EUR: "{october}"}}}}\n'
    )
    return rules


@pytest.mark.parametrize(("september", "october"), [("0.9", "0.9"), ("0.9", "0.8")])
def test_explain_in_another_currency_has_an_fx_part_and_adds_up(tmp_path, september, october):
    rules = two_months(tmp_path, september, october)
    args = ["explain", "--config", str(rules), "--month", "2026-10", "--client", "acme"]
    ledger = json.loads(runner.invoke(app, [*args, "--format", "json"]).stdout)
    done = runner.invoke(app, [*args, "--format", "json", "--currency", "EUR"])
    assert done.exit_code == 0, done.output
    doc = json.loads(done.stdout)
    assert doc["money"]["currency"] == "EUR" and doc["ledger"]["change"] == ledger["change"]
    assert sum(p["amount"] for p in doc["parts"]) == doc["change"]
    assert doc["change"] == doc["to_amount"] - doc["from_amount"]
    fx = [p for p in doc["parts"] if p["effect"] == "fx"]
    assert len(fx) == 1 and fx[0]["ledger_amount"] == 0
    before, after = Fraction(september), Fraction(october)
    assert doc["from_amount"] == round(ledger["from_amount"] * before)
    assert doc["to_amount"] == round(ledger["to_amount"] * after)
    expected_fx = ledger["to_amount"] * (after - before)  # the later amount at the rate's move
    assert abs(fx[0]["amount"] - expected_fx) <= 1
    for part, own in zip(doc["parts"], ledger["parts"], strict=False):
        assert part["effect"] == own["effect"] and part["ledger_amount"] == own["amount"]
        assert abs(part["amount"] - own["amount"] * before) <= 1
    assert (
        doc["fx"]["effective_rates"]["month"]
        == str(Fraction(doc["to_amount"], ledger["to_amount"]))
        or "." in doc["fx"]["effective_rates"]["month"]
    )


def test_report_follows_presentation(tmp_path: Path):
    """``presentation: EUR`` shows the report pack in EUR too (the sheets carry the
    conversion; ``report --from-db --currency``: tests/test_fx_store.py)."""
    done = runner.invoke(app, ["report", "--config", str(EXAMPLE / "rules.yaml"), "--out",
                               str(tmp_path / "pack"), "--format", "md"])  # fmt: skip
    assert done.exit_code == 0, done.output
    sheet = (tmp_path / "pack" / "clients" / "acme.md").read_text()
    assert "| **Total** | **138.63 EUR** |" in sheet
    assert "Your total in USD: **150.00 USD**" in sheet
    assert "examples/currency" not in sheet  # a client's view names no file


def test_a_parquet_rates_file_converts_as_its_csv(tmp_path: Path):
    import pandas as pd

    folder = tmp_path / "example"
    shutil.copytree(EXAMPLE, folder)
    csv = pd.read_csv(folder / "rates.csv", dtype=str)
    csv.assign(date=pd.to_datetime(csv["date"]).dt.date, rate=csv["rate"].astype(float)).to_parquet(
        folder / "rates.parquet"
    )
    (folder / "rates.csv").unlink()
    rules = folder / "rules.yaml"
    rules.write_text(rules.read_text().replace("rates: [rates.csv]", "rates: [rates.parquet]"))
    doc = allocate_json(rules)
    assert {c["client"]: c["amount"] for c in doc["clients"]} == {
        "acme": 138_632_873, "bravo": 110_983_103,
    }  # fmt: skip
    assert doc["fx"]["rates"][0]["quotes"][0]["rate"] == "1.08"  # the float's shortest text
