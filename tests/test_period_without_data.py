"""A period with no cost data: every command that takes a period refuses it in one
line naming the span the data covers, exit 2, through one check
(:func:`tenantcost.cli.run.require_cost_data`), instead of a traceback (``report``, ``export
focus``) or an all-zero cascade (``allocate``, ``compare``, ``reconcile``). The store's
``run`` and ``close`` and ``ingest`` name the span of what is stored or given."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from tenantcost.cli import app
from tenantcost.cli.run import require_cost_data
from tenantcost.errors import InputError
from tenantcost.windows import Period

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "saas-three-clients"
RULES = EXAMPLE / "rules.yaml"
COVERED = "their costs cover 2026-11-03T10:00:00+00:00 to 2026-11-03T11:00:00+00:00"
runner = CliRunner()


def one_line(result, *fragments: str) -> str:
    assert result.exit_code == 2, result.output
    err = result.stderr.strip()
    assert err.startswith("error: ") and "\n" not in err, err
    assert "Traceback" not in result.output
    for fragment in fragments:
        assert fragment in err, f"{fragment!r} not in {err!r}"
    return err


@pytest.mark.parametrize(
    "command",
    [
        ["allocate"],
        ["allocate", "--format", "json"],
        ["compare", "--keys", "requests,cpu_seconds"],
        ["reconcile"],
        ["report", "--out", "{tmp}/pack"],
        ["export", "focus", "--out", "{tmp}/focus.csv"],
        ["unit-economics", "--catalog", str(EXAMPLE / "catalog.csv")],
        ["explain", "--client", "client-a"],
    ],
    ids=lambda c: " ".join(c[:2]),
)
def test_every_command_refuses_a_month_without_cost_data(command: list[str], tmp_path: Path):
    head = command[:2] if command[0] == "export" else command[:1]
    rest = [a.replace("{tmp}", str(tmp_path)) for a in command[len(head) :]]
    result = runner.invoke(app, [*head, "--config", str(RULES), "--month", "2026-12", *rest])
    err = one_line(result, "--month: the inputs have no cost data in 2026-12", COVERED)
    assert err == f"error: --month: the inputs have no cost data in 2026-12; {COVERED}"
    assert result.stdout == ""  # no all-zero cascade, no half-written output
    assert not (tmp_path / "pack").exists() and not (tmp_path / "focus.csv").exists()


def test_a_from_to_period_outside_the_data_names_both(tmp_path: Path):
    result = runner.invoke(app, ["allocate", "--config", str(RULES), "--from", "2026-12-01",
                                 "--to", "2026-12-02"])  # fmt: skip
    one_line(result, "--from/--to: the inputs have no cost data in 2026-12-01 to 2026-12-02 "
             "(end exclusive)", COVERED)  # fmt: skip


def test_a_period_with_data_still_allocates():
    result = runner.invoke(app, ["allocate", "--config", str(RULES), "--month", "2026-11"])
    assert result.exit_code == 0, result.output
    assert "gap" in result.stdout and "closes" in result.stdout


def test_the_one_check():
    frame = pd.DataFrame(
        {"window_start": pd.to_datetime(["2026-11-03T10:00Z"], utc=True),
         "window_end": pd.to_datetime(["2026-11-03T11:00Z"], utc=True)}
    )  # fmt: skip
    require_cost_data(frame, Period.month("2026-11"), "--month")  # inside: nothing to say
    with pytest.raises(InputError, match="--month: the inputs have no cost data in 2026-10; "):
        require_cost_data(frame, Period.month("2026-10"), "--month")
    with pytest.raises(InputError, match="no cost data at all, so none in 2026-11"):
        require_cost_data(frame.iloc[:0], Period.month("2026-11"), "--month")


def test_the_store_names_what_it_holds(tmp_path: Path):
    db = ["--db", f"sqlite:///{tmp_path / 'store.db'}", "--data", str(tmp_path / "data")]
    assert runner.invoke(app, ["db", "upgrade", *db]).exit_code == 0
    assert runner.invoke(app, ["rules", "load", str(RULES), *db]).exit_code == 0
    one_line(runner.invoke(app, ["run", "--month", "2026-11", *db]),
             "no costs stored for 2026-11", "the store has no costs at all")  # fmt: skip
    for kind, option, path in (("usage", "--usage", EXAMPLE / "usage.csv"),
                               ("costs", "--costs", EXAMPLE / "costs.json")):  # fmt: skip
        one_line(
            runner.invoke(app, ["ingest", kind, option, str(path), "--month", "2026-12", *db]),
            f"no {'cost' if kind == 'costs' else kind} rows to ingest in the period 2026-12-01",
            "rows cover 2026-11-03T10:00:00+00:00 to 2026-11-03T11:00:00+00:00",
        )
        done = runner.invoke(app, ["ingest", kind, option, str(path), *db])
        assert done.exit_code == 0, done.output
    stored = "the stored costs cover 2026-11-03T10:00:00+00:00 to 2026-11-03T11:00:00+00:00"
    one_line(runner.invoke(app, ["run", "--month", "2026-12", *db]),
             "no costs stored for 2026-12", stored)  # fmt: skip
    one_line(runner.invoke(app, ["close", "--month", "2026-12", "--allow-incomplete", *db]),
             "no costs stored for 2026-12", stored)  # fmt: skip
