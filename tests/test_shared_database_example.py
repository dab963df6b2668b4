"""examples/shared-database: the shipped files are what tests/shared_database_data.py builds;
the month closes on its two invoices with gap 0; each billed pool is split by measures this
test computes again from the raw files (the gauges integrated in Python fractions, not by
tenantcost), and the README's figures are the CLI's."""

from __future__ import annotations

import csv
import json
import re
from collections import defaultdict
from datetime import datetime
from decimal import Decimal
from fractions import Fraction
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tenantcost.cli import app

from .shared_database_data import FOLDER, write_all

runner = CliRunner()
HOUR_S = 3600
MONTH_START = 1_793_491_200  # 2026-11-01T00:00:00Z
# billed entry -> (usage column, services, is a gauge, stale_after seconds)
POOLS = {
    "database instance": ("db_seconds", ("api", "worker"), False, 0),
    "database storage": ("storage_bytes", ("db",), True, 7 * HOUR_S),
    "object storage": ("s3_bytes", ("s3",), True, 25 * HOUR_S),
    "NAT gateway": ("bytes_out", ("api",), False, 0),
    "LLM API": ("tokens", ("api", "worker"), False, 0),
}


@pytest.fixture(scope="module")
def document() -> dict:
    done = runner.invoke(app, ["allocate", "--config", str(FOLDER / "rules.yaml"),
                               "--format", "json"])  # fmt: skip
    assert done.exit_code == 0, done.output
    return json.loads(done.stdout)


def _seconds(text: str) -> int:
    return int(datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp())


def hourly_measures(column: str, services: tuple[str, ...], gauge: bool, stale: int) -> dict:
    """{hour start (s): {client: exact measure}} from the raw files."""
    out: dict[int, dict[str, Fraction]] = defaultdict(lambda: defaultdict(Fraction))
    if not gauge:
        with (FOLDER / "usage.csv").open() as handle:
            for row in csv.DictReader(handle):
                if row["service"] in services:
                    out[_seconds(row["window_start"])][row["client"]] += Fraction(row[column])
        return out
    name = "db-storage.csv" if column == "storage_bytes" else "s3-inventory.csv"
    series: dict[str, list[tuple[int, Fraction]]] = defaultdict(list)
    with (FOLDER / "samples" / name).open() as handle:
        for row in csv.DictReader(handle):
            series[row["client"]].append((_seconds(row["time"]), Fraction(row[column])))
    end_of_month = _seconds("2026-12-01T00:00:00Z")
    for client, points in series.items():
        points.sort()
        for i, (t, level) in enumerate(points):
            until = min(t + stale, points[i + 1][0] if i + 1 < len(points) else end_of_month)
            for h in range(t - t % HOUR_S, until, HOUR_S):
                held = min(until, h + HOUR_S) - max(t, h)
                out[h][client] += level * held / HOUR_S  # unit-hours
    return out


def test_the_shipped_files_are_the_generated_ones(tmp_path: Path) -> None:
    for written in write_all(tmp_path):
        shipped = FOLDER / written.relative_to(tmp_path)
        assert shipped.read_bytes() == written.read_bytes(), shipped


def test_the_month_closes_on_both_invoices(document: dict) -> None:
    invoice = document["invoice"]
    assert document["gap"] == 0 and invoice["gap"] == 0
    billed = Decimal(0)
    for name in ("aws-focus.csv", "llm-focus.csv"):
        with (FOLDER / "billing/2026-11" / name).open() as handle:
            billed += sum(Decimal(r["BilledCost"]) for r in csv.DictReader(handle))
    assert invoice["billed_total"] == int((billed * 10**6).quantize(Decimal(1)))
    assert [i["id"] for i in invoice["invoices"]] == ["INV-AWS-2026-11", "INV-LLM-2026-11"]


def test_each_pool_is_split_by_what_each_client_used(document: dict) -> None:
    lines = {(c["client"], line["source"]): line for c in document["clients"]
             for line in c["lines"]}  # fmt: skip
    daily = _daily_effective()
    for pool, (column, services, gauge, stale) in POOLS.items():
        hours = hourly_measures(column, services, gauge, stale)
        clients = {c for by in hours.values() for c in by}
        for client in clients:
            measured = sum((by.get(client, 0) for by in hours.values()), Fraction(0))
            if measured == 0:  # no use, no line (acme calls no LLM)
                assert (client, pool) not in lines
                continue
            line = lines[(client, pool)]
            assert line["key"] == column
            assert line["measure"] == pytest.approx(float(measured), rel=1e-9, abs=1e-3)
            expected = sum(
                daily[pool][(h - MONTH_START) // 86400] / 24 * by.get(client, 0) / sum(by.values())
                for h, by in hours.items()
                if sum(by.values())
            )
            # each hour: the accrual and the split round by at most a micro-dollar each
            assert abs(line["amount"] - float(expected) * 10**6) < 2 * len(hours), (pool, client)


def test_the_readme_figures_are_the_cli_s(document: dict) -> None:
    text = (FOLDER / "README.md").read_text()
    table = text.split("<!-- figures: clients -->", 1)[1].split("\n\n", 1)[0]
    rows = [r for r in table.strip().splitlines()[2:] if r.startswith("| ")]
    by_client = {c["client"]: c for c in document["clients"]}
    header = [h.strip() for h in table.strip().splitlines()[0].strip("|").split("|")]
    assert len(rows) == len(by_client) + 1
    for row in rows:
        cells = [c.strip().strip("*") for c in row.strip("|").split("|")]
        if cells[0] == "Total":
            assert _money(cells[-1]) == sum(c["amount"] for c in document["clients"])
            continue
        client = by_client[cells[0]]
        amounts = {line["source"]: line["amount"] for line in client["lines"]}
        for name, cell in zip(header[1:-1], cells[1:-1], strict=True):
            assert _money(cell) == amounts.get(name, 0), (cells[0], name)
        assert _money(cells[-1]) == client["amount"]
    gap = re.search(r"invoice total \(billed\) \| ([\d,.]+)", text)
    assert gap is not None and _money(gap[1]) == document["invoice"]["billed_total"]


def _money(text: str) -> int:
    return int((Decimal(text.replace(",", "")) * 10**6).quantize(Decimal(1)))


def _daily_effective() -> dict[str, list[Fraction]]:
    """Each billed entry's EffectiveCost per day of the month (the rule file's matches)."""
    out: dict[str, list[Fraction]] = {p: [Fraction(0)] * 30 for p in POOLS}
    for name in ("aws-focus.csv", "llm-focus.csv"):
        with (FOLDER / "billing/2026-11" / name).open() as handle:
            for row in csv.DictReader(handle):
                day = _seconds(row["ChargePeriodStart"]) - _seconds("2026-11-01T00:00:00Z")
                pool = _pool_of(row)
                if pool is not None:
                    out[pool][day // 86400] += Fraction(row["EffectiveCost"])
    return out


def _pool_of(row: dict[str, str]) -> str | None:
    if row["ProviderName"] == "Example LLM Inc.":
        return "LLM API"
    if row["ResourceType"] == "NAT Gateway":
        return "NAT gateway"
    if row["ServiceName"] == "Amazon Simple Storage Service":
        return "object storage"
    if row["ServiceName"] == "Amazon Relational Database Service":
        return (
            "database storage" if "storage" in row["ChargeDescription"] else ("database instance")
        )
    return None


def test_both_exports_pass_the_focus_validator() -> None:
    from . import focus_validator

    venv = focus_validator.ensure_venv()
    for name in ("aws-focus.csv", "llm-focus.csv"):
        report = focus_validator.validate(venv, FOLDER / "billing/2026-11" / name)
        assert report.failed_mandatory == [], report.output
        # every line is on an invoice: the validator cannot know it (test_invoice_example.py)
        assert set(report.failures) <= {"InvoiceId-C-004-C"}, report.output


def test_the_sheets_name_a_gauge_s_measure_in_its_unit(tmp_path: Path) -> None:
    done = runner.invoke(app, ["report", "--config", str(FOLDER / "rules.yaml"),
                               "--out", str(tmp_path), "--format", "md"])  # fmt: skip
    assert done.exit_code == 0, done.output
    sheet = (tmp_path / "clients" / "initech.md").read_text()
    row = next(r for r in sheet.splitlines() if r.startswith("| database storage"))
    # initech's byte-hours of PostgreSQL storage over the month, in GiB-hours
    measured = hourly_measures("storage_bytes", ("db",), True, 7 * HOUR_S)
    gib_hours = sum(by.get("initech", 0) for by in measured.values()) / 2**30
    assert f"| storage bytes (GiB-hours) | {round(gib_hours):,} |" in row
    assert "per GiB-hour" in row
