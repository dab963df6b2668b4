"""``report`` reads usage through the one input path: CSV and Parquet give identical sheets.

The same usage as a CSV file, a Parquet file and a date-partitioned Parquet dataset must give
the same pack, figure for figure: only the provenance (file name and fingerprint) and the
output folder may differ, and those are normalised before the files are compared.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from tenantcost.cli import app
from tenantcost.report.provenance import fingerprint, input_name
from tests.test_report import _scenario

ROOT = Path(__file__).resolve().parents[1]
SAAS = ROOT / "examples" / "saas-three-clients"
runner = CliRunner()


def usage_frame(csv: Path) -> pd.DataFrame:
    frame = pd.read_csv(csv, keep_default_na=False, na_values={"requests": [], "cpu_seconds": []})
    for column in ("window_start", "window_end"):
        frame[column] = pd.to_datetime(frame[column], utc=True)
    return frame


def run_report(out: Path, config: Path, usage: Path, *args: str) -> dict[str, str]:
    """Every file of the pack (HTML and Markdown), with the usage's name, fingerprint and the
    output folder replaced by placeholders."""
    result = runner.invoke(
        app,
        [
            "report",
            "--config",
            str(config),
            "--usage",
            str(usage),
            "--format",
            "html,md",
            "--out",
            str(out),
            *args,
        ],
    )
    assert result.exit_code == 0, result.output
    assert "0 client(s)" not in result.stderr
    assert "no usage data given" not in result.stderr
    sha = fingerprint(usage)
    files = {}
    for path in sorted(out.rglob("*.*")):
        text = path.read_text(encoding="utf-8")
        text = text.replace(sha, "SHA").replace(sha[:12], "SHA").replace(str(usage), "USAGE")
        name = input_name(str(usage))  # a client's sheet names it without directories
        text = text.replace(f"<code>{name}</code>", "USAGE").replace(f"`{name}`", "USAGE")
        files[str(path.relative_to(out))] = text.replace(str(out), "OUT")
    return files


def assert_same_pack(left: dict[str, str], right: dict[str, str]) -> None:
    assert sorted(left) == sorted(right)
    for name, text in left.items():
        assert text == right[name], f"{name} differs"


@pytest.fixture(autouse=True)
def pinned_time(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1790000000")


def test_saas_example_csv_and_parquet_give_identical_sheets(tmp_path: Path) -> None:
    example = tmp_path / "ex"
    shutil.copytree(SAAS, example)
    parquet = example / "usage.parquet"
    usage_frame(example / "usage.csv").to_parquet(parquet, index=False)
    config = example / "rules.yaml"
    from_csv = run_report(tmp_path / "csv", config, example / "usage.csv", "--month", "2026-11")
    from_parquet = run_report(tmp_path / "pq", config, parquet, "--month", "2026-11")
    assert len([n for n in from_csv if n.startswith("clients/")]) == 6  # 3 clients x html, md
    assert_same_pack(from_csv, from_parquet)
    sheet = from_parquet["clients/client-a.md"]
    # client-a's 0.123458 (README, golden), as the summary and index read it (one rounding)
    assert "| **Total** | **0.1234 USD** |" in sheet


def test_rule_change_scenario_csv_and_parquet_dataset_give_identical_sheets(
    tmp_path: Path,
) -> None:
    """Two rule versions, usage without client id, an hour without usage, the previous
    month's data: every re-run and confidence figure comes through the usage source."""
    rules = _scenario(tmp_path)
    dataset = tmp_path / "usage-dataset"
    frame = usage_frame(tmp_path / "usage.csv")
    frame = frame.assign(date=frame["window_start"].dt.strftime("%Y-%m-%d"))
    frame.to_parquet(dataset, partition_cols=["date"], index=False)
    # Finance's sheets (issue 36 §8): the confidence figures live in the internal view.
    internal = ("--month", "2026-11", "--view", "internal")
    from_csv = run_report(tmp_path / "csv", rules, tmp_path / "usage.csv", *internal)
    from_parquet = run_report(tmp_path / "pq", rules, dataset, *internal)
    assert_same_pack(from_csv, from_parquet)
    acme = from_parquet["clients/acme.md"]
    assert "| 2026-10 restated under api-by-cpu | 0.42 |  |" in acme
    assert "| Whole period under api-by-requests | 4.34 |  |" in acme
    assert "api (CPU seconds): 0.0 %; api (requests): 4.8 %" in acme  # no-client share by key
    assert "api: 1 h of 4 h" in acme  # hours without usage data
