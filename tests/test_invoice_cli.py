"""The invoice from outside: --billing, --allow-unbilled and reconcile --against, as users run
them, on copies of examples/invoice-close; every mistake one line and exit 2."""

from __future__ import annotations

import csv
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

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
