"""Every bad input gives one clear line naming file and place, exit code 2, no traceback."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tenantcost.cli import app

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "saas-three-clients"
runner = CliRunner()


@pytest.fixture
def example(tmp_path: Path) -> Path:
    """A writable copy of the three-client example."""
    dest = tmp_path / "ex"
    shutil.copytree(EXAMPLE, dest)
    return dest


def run(*args: str | Path):
    return runner.invoke(app, [str(a) for a in args])


def assert_user_error(result, *fragments: str) -> str:
    assert result.exit_code == 2, result.output
    err = result.stderr.strip()
    assert err.startswith("error: "), err
    assert "\n" not in err, f"expected one line, got: {err}"
    assert "Traceback" not in result.output
    for fragment in fragments:
        assert fragment in err, f"{fragment!r} not in {err!r}"
    return err


def allocate(ex: Path, *extra: str | Path):
    return run("allocate", "--config", ex / "rules.yaml", *extra)


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, old
    path.write_text(text.replace(old, new, 1))


def test_malformed_json(example):
    (example / "costs.json").write_text('{"code": 200, "data": [')
    assert_user_error(allocate(example), "costs.json", "line 1")


def test_opencost_error_envelope(example):
    (example / "costs.json").write_text(json.dumps({"code": 500, "message": "Error: boom"}))
    assert_user_error(allocate(example), "costs.json", "500", "Error: boom")


def test_misspelled_usage_column(example):
    edit(example / "usage.csv", "window_start,window_end,service,client",
         "window_start,window_end,servce,client")
    assert_user_error(allocate(example), "usage.csv", "service", "servce")


def test_negative_cost(example):
    edit(example / "costs.json", '"totalCost": 0.0588', '"totalCost": -0.0588')
    assert_user_error(allocate(example), "costs.json", "totalCost", "negative")


def test_null_cost(example):
    edit(example / "costs.json", '"totalCost": 0.0588', '"totalCost": null')
    assert_user_error(allocate(example), "costs.json", "totalCost")


def test_negative_usage(example):
    edit(example / "usage.csv", "66348", "-66348")
    assert_user_error(allocate(example), "usage.csv", "row 2", "requests")


def test_nan_usage(example):
    edit(example / "usage.csv", "66348", "")
    assert_user_error(allocate(example), "usage.csv", "row 2", "requests")


def test_duplicate_usage_rows(example):
    lines = (example / "usage.csv").read_text().splitlines()
    (example / "usage.csv").write_text("\n".join([*lines, lines[1]]) + "\n")
    assert_user_error(allocate(example), "usage.csv", "row 2", f"row {len(lines) + 1}")


def test_usage_service_that_no_shared_workload_names(example):
    with (example / "usage.csv").open("a") as f:
        f.write("2026-11-03T10:00:00Z,2026-11-03T11:00:00Z,billing,client-a,5,1.0\n")
    assert_user_error(allocate(example), "usage.csv", "billing")


def test_shared_service_without_usage_is_a_warning_and_unattributed(example):
    lines = (example / "usage.csv").read_text().splitlines()
    kept = [line for line in lines if ",import-worker," not in line]
    (example / "usage.csv").write_text("\n".join(kept) + "\n")
    edit(example / "rules.yaml", "services: [api, import-worker]", "services: [api]")
    result = allocate(example, "--format", "json")
    assert result.exit_code == 0, result.output
    assert "warning:" in result.stderr and "import-worker" in result.stderr
    doc = json.loads(result.stdout)
    assert doc["unattributed"] == 78_400
    assert doc["gap"] == 0


def test_excluded_entry_without_reason(example):
    edit(example / "rules.yaml", "        reason: load generators, not client traffic\n", "")
    assert_user_error(allocate(example), "rules.yaml", "rules[0].workloads[5].reason")


def test_unsorted_rule_versions(example):
    text = (example / "rules.yaml").read_text()
    block = text[text.index("  - id: saas-2026-11"):]
    older = block.replace("saas-2026-11", "saas-2026-10").replace('"2026-11-01"', '"2026-10-01"')
    (example / "rules.yaml").write_text(text + older)
    assert_user_error(allocate(example), "rules.yaml", "rules[1].effective_from", "date order")


def test_cost_row_that_matches_nothing(example):
    edit(example / "rules.yaml", "      - match: {namespace: loadtest}\n        class: excluded\n"
         "        reason: load generators, not client traffic\n", "")
    assert_user_error(allocate(example), "costs.json", "loadtest", "matches no workload entry")


def test_unknown_key_in_rule_file(example):
    edit(example / "rules.yaml", "    idle: keep", "    idle: keep\n    idel: even")
    assert_user_error(allocate(example), "rules.yaml", "rules[0]", "unknown key 'idel'")


def test_unknown_usage_column_as_key(example):
    edit(example / "rules.yaml", "key: cpu_seconds", "key: cpu_secs")
    assert_user_error(
        allocate(example), "rules.yaml", "rules[0].workloads[1].key",
        "unknown usage column 'cpu_secs'", "columns are requests, cpu_seconds",
    )


def test_yaml_syntax_error(example):
    edit(example / "rules.yaml", "currency: USD", "currency: [USD")
    assert_user_error(allocate(example), "rules.yaml", "line")


def test_missing_input_file(example):
    assert_user_error(allocate(example, "--costs", example / "nope.json"), "nope.json")


def test_bad_month_and_conflicting_period(example):
    assert_user_error(allocate(example, "--month", "2026-13"), "--month")
    assert_user_error(allocate(example, "--month", "2026-11", "--from", "2026-11-01"), "--month")


def test_check_config_accepts_the_example_and_rejects_bad_files(example):
    ok = run("check-config", example / "rules.yaml", "--usage", example / "usage.csv")
    assert ok.exit_code == 0, ok.output
    assert "saas-2026-11: from 2026-11-01" in ok.stdout
    edit(example / "rules.yaml", "class: idle", "class: idel")
    assert_user_error(run("check-config", example / "rules.yaml"), "rules[0].workloads[6].class")


def test_console_script_prints_no_traceback(example):
    """The installed entry point, not just the typer app, keeps user errors to one line."""
    (example / "costs.json").write_text("not json")
    proc = subprocess.run(
        [sys.executable, "-m", "tenantcost", "allocate", "--config", str(example / "rules.yaml")],
        capture_output=True, text=True, check=False,
    )
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert proc.stderr.startswith("error: ") and "costs.json" in proc.stderr


def test_report_reads_parquet_usage_through_the_usage_source(example, tmp_path):
    """``report`` validates Parquet usage like ``allocate``: same one-line error, same place."""
    import pandas as pd

    frame = pd.read_csv(example / "usage.csv")
    for column in ("window_start", "window_end"):
        frame[column] = pd.to_datetime(frame[column], utc=True)
    frame.loc[0, "requests"] = -66348
    parquet = example / "usage.parquet"
    frame.to_parquet(parquet, index=False)
    for command in (["allocate"], ["report", "--out", str(tmp_path / "pack")]):
        result = run(*command, "--config", example / "rules.yaml", "--usage", parquet)
        assert_user_error(result, "usage.parquet", "row 1", "column 'requests'", ">= 0")
