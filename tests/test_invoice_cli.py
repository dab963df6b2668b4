"""The invoice from outside: --billing, --allow-unbilled and reconcile --against, as users run
them, on copies of examples/invoice-close; every mistake one line and exit 2."""

from __future__ import annotations

import csv
import json
import shutil
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tests.invoice_data import ec2_instance, nat_processing, savings_plan_fee, write_focus_csv

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "invoice-close"


def cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tenantcost", *args], capture_output=True, text=True, cwd=cwd
    )


@pytest.fixture()
def example(tmp_path: Path) -> Path:
    target = tmp_path / "invoice-close"
    shutil.copytree(EXAMPLE, target)
    return target


def edit_billing(folder: Path, change: dict[str, str], row: int = 0) -> Path:
    path = folder / "billing" / "2026-11" / "focus.csv"
    with path.open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    rows[row].update(change)
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return path


def one_error(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    lines = [ln for ln in done.stderr.splitlines() if ln.startswith("error: ")]
    assert len(lines) == 1, done.stderr
    return lines[0]


def test_json_carries_the_invoice_and_the_totals(example: Path) -> None:
    done = cli("allocate", "--config", str(example / "rules.yaml"), "--format", "json")
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    invoice = doc["invoice"]
    assert invoice["gap"] == 0 and doc["gap"] == 0
    assert doc["billed_total"] == invoice["billed_total"] == 950_697
    assert doc["opencost_estimate"] == 578_440
    assert sum(line["amount"] for line in invoice["lines"]) == invoice["billed_total"]
    assert [i["id"] for i in invoice["invoices"]] == ["INV-2026-11-001"]
    assert doc["reference_total"] == invoice["effective_in_scope"] + doc["external_total"]


def test_bad_billing_cells_are_one_line(example: Path) -> None:
    path = edit_billing(example, {"EffectiveCost": "twelve"}, row=2)
    line = one_error(cli("reconcile", "--config", str(example / "rules.yaml"), "--against",
                         "invoice"))  # fmt: skip
    assert line.startswith(f"error: {path}, row 4, column 'EffectiveCost'")


def test_mixed_currencies_and_unknown_options_are_one_line(example: Path) -> None:
    edit_billing(example, {"BillingCurrency": "EUR"}, row=1)
    line = one_error(cli("allocate", "--config", str(example / "rules.yaml")))
    assert "column 'BillingCurrency'" in line and "row 3" in line
    line = one_error(cli("reconcile", "--config", str(EXAMPLE / "rules.yaml"), "--against", "bill"))
    assert line == "error: --against: expected opencost or invoice, got 'bill'"


def test_unbilled_hours_need_allow_unbilled(example: Path, tmp_path: Path) -> None:
    costs = json.loads((example / "costs.json").read_text())
    later = {
        key.replace("10:00", "11:00"): {
            **value,
            "window": {"start": "2026-11-03T11:00:00Z", "end": "2026-11-03T12:00:00Z"},
            "start": "2026-11-03T11:00:00Z",
            "end": "2026-11-03T12:00:00Z",
        }
        for key, value in costs["data"][0].items()
    }
    costs["data"].append(later)
    (example / "costs.json").write_text(json.dumps(costs))
    rules = str(example / "rules.yaml")
    line = one_error(cli("allocate", "--config", rules))
    assert "no billed line in" in line and "--allow-unbilled" in line
    done = cli("reconcile", "--config", rules, "--against", "invoice", "--format", "json",
               "--allow-unbilled")  # fmt: skip
    assert done.returncode == 0, done.stderr
    invoice = json.loads(done.stdout)
    assert [r["estimate"] for r in invoice["repricing"]] == [False, True]
    estimate = [ln for ln in invoice["lines"] if ln["part"] == "estimate"]
    assert estimate and estimate[0]["amount"] == -invoice["repricing"][1]["opencost"]
    assert invoice["gap"] == 0


def test_billing_without_a_billing_section_is_refused(tmp_path: Path) -> None:
    line = one_error(
        cli(
            "allocate",
            "--config",
            str(EXAMPLE.parent / "saas-three-clients" / "rules.yaml"),
            "--billing",
            str(EXAMPLE / "billing"),
        )
    )
    assert "no billing: section" in line
    done = cli("reconcile", "--config", str(EXAMPLE.parent / "saas-three-clients" / "rules.yaml"),
               "--against", "invoice")  # fmt: skip
    assert "--against invoice: give the billing data" in one_error(done)


def test_the_pack_alternative_keys_run_on_billed_money() -> None:
    """The pack's alternative-key re-runs (and the sheets' key comparison) use the same
    billed money as the main run: same reference total under every key."""
    from tenantcost.inputs import load_inputs
    from tenantcost.report.changes import quiet_allocate_keys

    inputs = load_inputs(EXAMPLE / "rules.yaml")
    assert inputs.billing is not None
    main, other = quiet_allocate_keys(
        inputs, inputs.ruleset, inputs.billing.period, [None, "cpu_seconds"]
    )  # type: ignore[arg-type]
    assert main.reference_total == other.reference_total == 791_696
    assert main.client_totals()["amount"].sum() == other.client_totals()["amount"].sum()


def test_hours_without_cost_data_carry_no_external_cost(example: Path) -> None:
    """Issue 35: the seed-004 hour (one OpenCost window) on an invoice with an hourly node
    line, a daily NAT line and a monthly Savings Plan fee. The month charges the external
    cost on the one window with cost data, as it does without billing data, and names the
    billed amounts of the 719 other hours on their own line; `--from/--to` on the hour
    leaves them outside the period."""
    hour = datetime(2026, 11, 3, 10, tzinfo=UTC)
    day, month = datetime(2026, 11, 3, tzinfo=UTC), datetime(2026, 11, 1, tzinfo=UTC)
    rows = [
        ec2_instance(hour, hour + timedelta(hours=1), cluster="cluster-one",
                     instance="i-0a1b2c3d4e5f60718", effective="0.3703567890",
                     list_price="0.57844", savings_plan="0.3703567890"),
        nat_processing(day, day + timedelta(days=1), amount="0.4632920000"),
        savings_plan_fee(month, datetime(2026, 12, 1, tzinfo=UTC), fee="288"),
    ]  # fmt: skip
    write_focus_csv(example / "billing" / "2026-11" / "focus.csv", rows)
    rules = str(example / "rules.yaml")

    def invoice(*period: str) -> dict[str, dict[str, int]]:
        done = cli("allocate", "--config", rules, "--format", "json", *period)
        assert done.returncode == 0, done.stderr
        doc = json.loads(done.stdout)
        inv = doc["invoice"]
        assert inv["gap"] == 0 and inv["billed_total"] == 288_463_292  # the fee, the NAT day
        lines = {line["name"]: line for line in inv["lines"]}
        # finance reconciles the clients line to the statements
        assert lines["clients"]["amount"] == sum(c["amount"] for c in doc["clients"]) > 0
        return lines

    month_lines = invoice("--month", "2026-11")
    assert month_lines["external costs"]["amount"] == -65_000  # was -46.800000 (720 hours)
    assert month_lines["billed without cost data"] == {
        "part": "no cost data", "name": "billed without cost data", "amount": 443_988,
        "hours": 719, "to_clients": 0}  # fmt: skip  # no client has usage in those hours
    assert month_lines["unattributed"]["amount"] == 0  # was 46.735 external + the NAT hours
    hour_lines = invoice("--from", "2026-11-03T10:00:00Z", "--to", "2026-11-03T11:00:00Z")
    assert hour_lines["external costs"]["amount"] == -65_000
    assert hour_lines["outside the period"]["amount"] == 443_988
    assert "billed without cost data" not in hour_lines
    text = cli("reconcile", "--config", rules, "--against", "invoice", "--month", "2026-11")
    assert "(1 windows, 1 h)" in text.stdout.splitlines()[0]
    assert "billed without cost data (719 h; 0.000000 charged to clients)" in text.stdout
