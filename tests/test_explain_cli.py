"""``tenantcost explain`` through the real CLI, and the sheet's bridge notice against it.

The JSON contract (``money`` as ``allocate --format json``'s, amounts that add up exactly,
the documented effects), the table, projections of a month in progress, one-line errors with
exit 2, the months read either way round (exact negation, part by part, across a rule
change), a month compared with itself, the order of input rows, and every figure of a client
sheet's "What changed" notice checked against ``explain --format json``.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
from bs4 import BeautifulSoup
from typer.testing import CliRunner

from tenantcost.bridge import Effect
from tenantcost.cli import app
from tenantcost.money import round_for_display
from tenantcost.report.changes import effect_labels
from tenantcost.report.display import format_units
from tests.test_bridge import worked_example
from tests.test_report import _scenario as rule_change_scenario

runner = CliRunner()
AS_OF = "2027-01-01T00:00:00Z"  # after every month of the tests: none is in progress


def invoke(*args: str) -> Any:
    return runner.invoke(app, list(args))


def explain(rules: Path, *args: str) -> dict[str, Any]:
    result = invoke("explain", "--config", str(rules), "--format", "json", "--as-of", AS_OF, *args)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


@pytest.fixture(scope="module")
def example(tmp_path_factory) -> Path:
    return worked_example(tmp_path_factory.mktemp("worked"))


@pytest.fixture(scope="module")
def changing(tmp_path_factory) -> Path:
    return rule_change_scenario(tmp_path_factory.mktemp("changing"))


def client_amount(rules: Path, month: str, client: str) -> tuple[dict[str, Any], int]:
    result = invoke("allocate", "--config", str(rules), "--month", month, "--format", "json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    amounts = {c["client"]: c["amount"] for c in doc["clients"]}
    return doc["money"], amounts.get(client, 0)


def test_json_contract(example):
    doc = explain(example, "--client", "acme", "--month", "2026-10")
    assert list(doc) == [
        "money",
        "client",
        "month",
        "vs",
        "from_amount",
        "to_amount",
        "change",
        "parts",
        "rules",
        "projections",
    ]
    money, before = client_amount(example, "2026-09", "acme")
    _, after = client_amount(example, "2026-10", "acme")
    assert (
        doc["money"]
        == money
        == {
            "currency": "USD",
            "minor_unit_exponent": 6,
            "unit": "micro-USD (1 USD = 1,000,000)",
        }
    )
    assert (doc["client"], doc["month"], doc["vs"]) == ("acme", "2026-10", "2026-09")
    assert (doc["from_amount"], doc["to_amount"]) == (before, after)
    assert doc["change"] == after - before
    assert sum(p["amount"] for p in doc["parts"]) == doc["change"]
    for part in doc["parts"]:
        assert list(part) == ["effect", "source", "amount", "text"]
        assert part["effect"] in {str(e) for e in Effect}
        assert isinstance(part["amount"], int) and isinstance(part["source"], str)
    assert doc["rules"] == {"vs": ["r1"], "month": ["r1"]}
    assert doc["projections"] == []


def test_table(example):
    result = invoke(
        "explain", "--config", str(example), "--client", "bravo", "--month", "2026-10",
        "--as-of", AS_OF,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    text = result.stdout
    assert text.startswith("Bridge for bravo from 2026-09 to 2026-10; amounts in USD")
    rows = {line.split()[0]: line for line in text.splitlines()[4:] if line.strip()}
    doc = explain(example, "--client", "bravo", "--month", "2026-10")
    assert "0.333333" in rows["from"] and "0.622727" in rows["to"]
    assert f"+{doc['change'] / 10**6:.6f}" in rows["change"]
    for part in doc["parts"]:
        reason = part["text"].split(": ", 1)[1]
        assert any(reason in line and part["effect"] in line for line in text.splitlines())


def test_a_month_in_progress_is_projected(example):
    doc = explain(example, "--client", "acme", "--month", "2026-10", "--as-of", "2026-10-10T12:00Z")
    [projection] = doc["projections"]
    # one hour covered of October's 744: 1.427273 x 744 = 1,061.891112 USD
    assert projection == {
        "month": "2026-10",
        "as_of": "2026-10-10T12:00:00Z",
        "hours_covered": 1.0,
        "hours_in_month": 744.0,
        "amount_to_date": 1_427_273,
        "projected_amount": 1_061_891_112,
        "method": "run rate: the amount to date over the 1 hours covered by cost data, times "
        "the 744 hours of the month",
        "label": "projection",
    }
    assert doc["to_amount"] == 1_427_273  # the bridge itself compares the amounts to date
    table = invoke(
        "explain", "--config", str(example), "--client", "acme", "--month", "2026-10",
        "--as-of", "2026-10-10T12:00:00Z",
    )  # fmt: skip
    assert "2026-10 is in progress" in table.stdout
    assert "1 of 744 hours covered" in table.stdout and "1,061.891112 USD" in table.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--client", "zeta", "--month", "2026-10"],
            "error: --client: no client 'zeta' in 2026-09 or 2026-10; clients are acme, bravo",
        ),
        (
            ["--client", "acm", "--month", "2026-10"],
            "error: --client: no client 'acm' in 2026-09 or 2026-10 (did you mean 'acme'?); "
            "clients are acme, bravo",
        ),
        (
            ["--client", "acme", "--month", "2026-12"],
            "error: --month: the inputs have no cost data in 2026-12; their costs cover "
            "2026-09-10T10:00:00+00:00 to 2026-10-10T11:00:00+00:00",
        ),
        (
            ["--client", "acme", "--month", "2026-09"],
            "error: --vs (default: the month before --month): the inputs have no cost data in "
            "2026-08; their costs cover 2026-09-10T10:00:00+00:00 to 2026-10-10T11:00:00+00:00",
        ),
        (
            ["--client", "acme", "--month", "2026-10", "--vs", "2026-9"],
            "error: --vs: expected YYYY-MM, got '2026-9'",
        ),
        (
            ["--client", "acme", "--month", "2026-10", "--from", "2026-10-01"],
            "error: explain compares calendar months: give --month M and --vs M2, not --from/--to",
        ),
        (
            ["--client", "acme"],
            "error: explain needs --month M, the month to explain (YYYY-MM)",
        ),
        (
            ["--client", "acme", "--month", "2026-10", "--format", "csv"],
            "error: --format: expected one of table, json, got 'csv'",
        ),
        (
            ["--client", "acme", "--month", "2026-10", "--as-of", "soon"],
            None,
        ),
    ],
)
def test_bad_input_is_one_line_and_exit_2(example, args, message):
    result = runner.invoke(app, ["explain", "--config", str(example), *args])
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.output
    if message is not None:
        assert lines[0] == message
    else:
        assert lines[0].startswith("error: --as-of")


def test_reversed_months_negate_every_part_across_a_rule_change(changing):
    for client in ("acme", "globex", "initech"):
        forward = explain(changing, "--client", client, "--month", "2026-11")
        backward = explain(changing, "--client", client, "--month", "2026-10", "--vs", "2026-11")
        assert forward["rules"] == {
            "vs": ["api-by-requests"],
            "month": ["api-by-requests", "api-by-cpu"],
        }
        assert backward["change"] == -forward["change"]
        assert (backward["from_amount"], backward["to_amount"]) == (
            forward["to_amount"],
            forward["from_amount"],
        )
        assert [(p["effect"], p["source"], p["amount"]) for p in backward["parts"]] == [
            (p["effect"], p["source"], -p["amount"]) for p in forward["parts"]
        ]
        assert sum(p["amount"] for p in forward["parts"]) == forward["change"]
        assert "rule" in {p["effect"] for p in forward["parts"]}


def test_a_month_against_itself_is_all_zero(changing):
    doc = explain(changing, "--client", "globex", "--month", "2026-11", "--vs", "2026-11")
    assert doc["change"] == 0 and doc["parts"]
    assert all(p["amount"] == 0 for p in doc["parts"])


def test_the_order_of_input_rows_does_not_matter(changing, tmp_path):
    for name in ("costs.csv", "usage.csv", "rules.yaml"):
        text = (changing.parent / name).read_text()
        if name.endswith(".csv"):
            head, *rows = text.strip().splitlines()
            random.Random(11).shuffle(rows)
            text = "\n".join([head, *rows]) + "\n"
        (tmp_path / name).write_text(text)
    for client in ("acme", "globex"):
        assert explain(tmp_path / "rules.yaml", "--client", client, "--month", "2026-11") == (
            explain(changing, "--client", client, "--month", "2026-11")
        )


# --------------------------------------------------------------------------- the sheet


def notice_rows(sheet: Path) -> list[list[str]] | None:
    page = BeautifulSoup(sheet.read_text(encoding="utf-8"), "html.parser")
    for section in page.select("section.notice"):
        if "What changed since" in section.find("h2").get_text():
            return [
                [c.get_text(" ", strip=True) for c in row.find_all(["th", "td"])]
                for row in section.select("tbody tr")
            ]
    return None


def expected_rows(doc: dict[str, Any], places: int) -> list[list[str]]:
    """The notice as explain's JSON says it should be: the largest parts first (at most
    six, then one row for the rest), rounded so they add up to the change between the two
    shown amounts; a part that shows as zero is left out."""
    parts = [p for p in doc["parts"] if p["amount"] != 0]
    parts.sort(key=lambda p: -abs(p["amount"]))  # stable: canonical order among equals
    shown, rest = parts[:6], parts[6:]
    amounts = [p["amount"] for p in shown] + ([sum(p["amount"] for p in rest)] if rest else [])
    ends = [round_for_display([doc["from_amount"]], places)[0]]
    ends.append(round_for_display([doc["to_amount"]], places)[0])
    units = round_for_display(amounts, places, total=ends[1] - ends[0])
    labels = [p["text"].split(": ", 1)[1] for p in shown] + (
        [f"{len(rest)} smaller changes"] if rest else []
    )
    effects = [p["effect"] for p in shown]
    if rest:
        effects.append(", ".join(dict.fromkeys(p["effect"] for p in rest)))
    rows = [[f"{doc['vs']} (last period)", format_units(ends[0], places), ""]]
    for label, unit, effect in zip(labels, units, effects, strict=True):
        if unit:
            sign = "+" if unit > 0 else ""
            rows.append([label, sign + format_units(unit, places), effect_labels(effect)])
    rows.append([f"{doc['month']} (this period)", format_units(ends[1], places), ""])
    return rows


@pytest.mark.parametrize("scenario", ["example", "changing"])
def test_sheet_bridge_matches_explain_json(scenario, request, tmp_path):
    rules: Path = request.getfixturevalue(scenario)
    month = {"example": "2026-10", "changing": "2026-11"}[scenario]
    out = tmp_path / "pack"
    result = invoke(
        "report", "--config", str(rules), "--month", month, "--out", str(out),
        "--format", "html,md", "--decimals", "3",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    sheets = sorted((out / "clients").glob("*.html"))
    assert sheets
    for sheet in sheets:
        doc = explain(rules, "--client", sheet.stem, "--month", month)
        rows = notice_rows(sheet)
        assert rows is not None, sheet
        want = expected_rows(doc, 3)
        assert [r[:2] for r in rows] == [w[:2] for w in want], sheet.stem
        assert [r[2] for r in rows[1:-1]] == [w[2] for w in want[1:-1]]
        md = sheet.with_suffix(".md").read_text()
        assert f"What changed since {doc['vs']}" in md
    summary = (out / "finance-summary.html").read_text()
    assert "What changed since" not in summary  # a client's bridge stays on its own sheet


def test_no_bridge_without_the_previous_month(example, tmp_path):
    out = tmp_path / "pack"
    result = invoke(
        "report", "--config", str(example), "--month", "2026-09", "--out", str(out),
        "--format", "html",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert notice_rows(out / "clients" / "acme.html") is None


# --------------------------------------------------------------------------- --from-db


def stored(url: str, data: str, rules: Path, months: list[str]) -> None:
    """A store holding the scenario's rules, usage and costs, and a run of each month."""
    steps = [
        ["db", "upgrade", "--db", url],
        ["rules", "load", str(rules), "--db", url, "--data", data],
        [
            "ingest",
            "usage",
            "--usage",
            str(rules.parent / "usage.csv"),
            "--db",
            url,
            "--data",
            data,
        ],
        [
            "ingest",
            "costs",
            "--costs",
            str(rules.parent / "costs.csv"),
            "--db",
            url,
            "--data",
            data,
        ],
        *(["run", "--month", m, "--db", url, "--data", data] for m in months),
    ]
    for step in steps:
        done = invoke(*step)
        assert done.exit_code == 0, (step, done.output)


@pytest.mark.parametrize("scenario", ["example", "changing"])
def test_from_db_gives_the_figures_of_the_files(scenario, request, store_url, tmp_path):
    rules: Path = request.getfixturevalue(scenario)
    months = {"example": ["2026-09", "2026-10"], "changing": ["2026-10", "2026-11"]}[scenario]
    data = str(tmp_path / "data")
    stored(store_url, data, rules, months)
    clients = {"example": ["acme", "bravo"], "changing": ["acme", "globex", "initech"]}[scenario]
    for client in clients:
        for month, vs in (months, months[::-1]):
            files = explain(rules, "--client", client, "--month", month, "--vs", vs)
            result = invoke(
                "explain", "--from-db", "--db", store_url, "--data", data, "--client", client,
                "--month", month, "--vs", vs, "--format", "json", "--as-of", AS_OF,
            )  # fmt: skip
            assert result.exit_code == 0, result.output
            assert json.loads(result.stdout) == files


def test_from_db_refusals(example, tmp_path):
    url, data = f"sqlite:///{tmp_path / 'store.db'}", str(tmp_path / "data")
    stored(url, data, example, ["2026-10"])
    base = ["explain", "--from-db", "--db", url, "--data", data, "--client", "acme"]
    result = invoke(*base, "--month", "2026-10")
    assert result.exit_code == 2 and result.stderr.strip() == (
        "error: --from-db: 2026-09 has no run in the store: `tenantcost run --month 2026-09` first"
    )
    result = invoke(*base, "--month", "2026-10", "--config", str(example))
    assert result.exit_code == 2
    assert result.stderr.strip() == "error: --from-db reads the store's runs: leave out --config"
