"""`tenantcost history` on SQLite and a real PostgreSQL 15: only issued revisions, in a fixed
order (month, client, revision), `issued` for the latest and `superseded` before it, the JSON
contract's fields and types (amounts in `allocate --format json`'s minor unit, `run_id` a
string, `issued_at` RFC 3339 UTC), the same columns in CSV, filters by client and month."""

from __future__ import annotations

import csv
import io
import json
import re
from datetime import datetime
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from tenantcost.cli import app
from tenantcost.store.engine import open_engine
from tenantcost.store.history import FIELDS, HistoryStatus, history
from tenantcost.store.settings import resolve_settings

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "saas-three-clients"
RFC3339_Z = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{1,6})?Z$")
CLIENTS = ("client-a", "client-b", "client-c")
runner = CliRunner()


def cli(*args: str):
    return runner.invoke(app, list(args))


def ok(*args: str) -> str:
    done = cli(*args)
    assert done.exit_code == 0, done.output
    return done.stdout


def shifted(folder: Path, name: str, month_day: str) -> Path:
    """An example input file moved from 2026-11-03 to ``month_day`` (``2026-10-03``)."""
    path = folder / f"{month_day}-{name}"
    path.write_text((EXAMPLE / name).read_text().replace("2026-11-03", month_day))
    return path


def two_months(folder: Path, url: str) -> tuple[list[str], dict[str, str]]:
    """October and November 2026 closed; November reopened and closed again. Returns the
    --db/--data arguments and each close's run id by ``month/revision``."""
    db = ["--db", url, "--data", str(folder / "data")]
    document = yaml.safe_load((EXAMPLE / "rules.yaml").read_text())
    document.pop("sources")
    october = {**document["rules"][0], "id": "saas-2026-10", "effective_from": "2026-10-01"}
    document["rules"].insert(0, october)
    rules = folder / "rules.yaml"
    rules.write_text(yaml.safe_dump(document, sort_keys=False))
    ok("db", "upgrade", *db)
    ok("rules", "load", str(rules), *db)
    for day in ("2026-10-03", "2026-11-03"):
        ok("ingest", "usage", "--usage", str(shifted(folder, "usage.csv", day)), *db)
        ok("ingest", "costs", "--costs", str(shifted(folder, "costs.json", day)), *db)
    runs = {}
    for month in ("2026-11", "2026-10"):  # closed out of order: history still sorts by month
        out = ok("close", "--month", month, "--allow-incomplete", *db)
        runs[f"{month}/1"] = re.search(r"from run ([0-9a-f-]{36})", out).group(1)  # type: ignore[union-attr]
    ok("reopen", "--month", "2026-11", "--reason", "client-b's requests, corrected", *db)
    fixed = folder / "usage-fixed.csv"
    fixed.write_text(
        (EXAMPLE / "usage.csv").read_text().replace(",client-b,1710,", ",client-b,3420,")
    )
    ok("ingest", "usage", "--usage", str(fixed), *db)
    out = ok("close", "--month", "2026-11", "--allow-incomplete", *db)
    runs["2026-11/2"] = re.search(r"from run ([0-9a-f-]{36})", out).group(1)  # type: ignore[union-attr]
    return db, runs


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def closed(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> tuple[str, list[str], dict[str, str]]:
    """:func:`two_months` in a store on each backend, built once: the tests only read it."""
    folder = tmp_path_factory.mktemp(f"history-{request.param}")
    if request.param == "sqlite":
        url = f"sqlite:///{folder / 'store.db'}"
    else:
        from .postgres_fixture import new_database

        url = new_database(request.getfixturevalue("postgres_admin_url"))
    return (url, *two_months(folder, url))


@pytest.mark.slow  # two months closed, one reopened, per backend
def test_history_json_is_the_contract(closed: tuple[str, list[str], dict[str, str]]):
    _, db, runs = closed
    entries = json.loads(ok("history", "--format", "json", *db))
    assert [(e["month"], e["client"], e["revision"], e["status"]) for e in entries] == [
        *(("2026-10", c, 1, "issued") for c in CLIENTS),
        *(("2026-11", c, r, s) for c in CLIENTS for r, s in ((1, "superseded"), (2, "issued"))),
    ]
    for entry in entries:
        assert list(entry) == list(FIELDS)
        assert entry["run_id"] == runs[f"{entry['month']}/{entry['revision']}"]
        assert isinstance(entry["amount"], int) and isinstance(entry["rule_ids"], list)
        assert RFC3339_Z.match(entry["issued_at"]), entry["issued_at"]
        assert datetime.fromisoformat(entry["issued_at"]).utcoffset().total_seconds() == 0
        assert entry["issued_by"]
    october = [e for e in entries if e["month"] == "2026-10"]
    assert {e["rule_ids"][0] for e in october} == {"saas-2026-10"}
    assert [e["amount"] for e in october] == [123458, 77173, 1569]  # allocate's micro-units
    revised = [e for e in entries if e["revision"] == 2]
    assert {e["reason"] for e in revised} == {"client-b's requests, corrected"}
    assert all(e["reason"] is None for e in entries if e["revision"] == 1)
    assert [e["amount"] for e in revised] == [120540, 80106, 1554]

    # The same bytes twice; the same rows in CSV, same columns.
    assert ok("history", "--format", "json", *db) == ok("history", "--format", "json", *db)
    table = list(csv.DictReader(io.StringIO(ok("history", "--format", "csv", *db))))
    assert [list(row) for row in table[:1]] == [list(FIELDS)]
    as_text = [{k: ("" if v is None else ";".join(v) if isinstance(v, list) else str(v))
                for k, v in e.items()} for e in entries]  # fmt: skip
    assert table == as_text


@pytest.mark.slow  # two months closed, one reopened, per backend
def test_history_filters_and_formats(closed: tuple[str, list[str], dict[str, str]]):
    url, db, _ = closed
    only_b = json.loads(ok("history", "--client", "client-b", "--format", "json", *db))
    assert [(e["month"], e["revision"]) for e in only_b] == [("2026-10", 1), ("2026-11", 1),
                                                           ("2026-11", 2)]  # fmt: skip
    november_c = json.loads(ok("history", "--client", "client-c", "--month", "2026-11",
                               "--format", "json", *db))  # fmt: skip
    assert [(e["revision"], e["amount"], e["status"]) for e in november_c] == [
        (1, 1569, "superseded"), (2, 1554, "issued")]  # fmt: skip
    assert ok("history", "--month", "2026-12", "--format", "json", *db) == "[]\n"
    assert ok("history", "--client", "nobody", "--format", "csv", *db) == ",".join(FIELDS) + "\n"
    text = ok("history", "--month", "2026-11", *db).splitlines()
    assert text[0].split() == ["month", "client", "rev", "status", "amount", "difference",
                               "currency", "hours", "issued", "at", "by", "reason"]  # fmt: skip
    assert text[2].split()[:8] == ["2026-11", "client-a", "1", "superseded", "0.123458", "-",
                                   "USD", "incomplete"]  # fmt: skip
    assert text[5].split()[:6] == ["2026-11", "client-b", "2", "issued", "0.080106", "+0.002933"]
    assert len(text) == 2 + 6
    engine = open_engine(resolve_settings(db=url, environ={}))
    entries = history(engine, client="client-a")
    assert [e.status for e in entries] == [HistoryStatus.ISSUED, HistoryStatus.SUPERSEDED,
                                           HistoryStatus.ISSUED]  # fmt: skip
    assert entries[2].previous_amount == 123458 and entries[2].difference == 120540 - 123458
    engine.dispose()


@pytest.mark.parametrize("args", [["--format", "xml"], ["--month", "2026-13"]])
def test_bad_history_options_are_one_line(tmp_path: Path, args: list[str]):
    url = f"sqlite:///{tmp_path / 'store.db'}"
    ok("db", "upgrade", "--db", url)
    done = cli("history", *args, "--db", url)
    assert done.exit_code == 2, done.output
    err = done.stderr.strip()
    assert err.startswith("error: ") and "\n" not in err and "Traceback" not in done.output


def test_a_store_never_closed_has_no_history(tmp_path: Path):
    url = f"sqlite:///{tmp_path / 'store.db'}"
    ok("db", "upgrade", "--db", url)
    assert ok("history", "--format", "json", "--db", url, "--data", str(tmp_path)) == "[]\n"
    assert ok("history", "--db", url) == "(no issued statements)\n"
