"""Allocating from the store equals allocating from the files, to the micro-unit: the bundled
example ingested (twice, to prove each cell is read once) and read back through
stored_costs/stored_usage gives the same document as `allocate` on the files, on SQLite and
a real PostgreSQL 15."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from tenantcost.allocate import allocate_stream
from tenantcost.cli import app
from tenantcost.config.rules import load_rules
from tenantcost.inputs import load_inputs
from tenantcost.reconcile import cascade, require_closed
from tenantcost.split import connect
from tenantcost.store.data import DataDir, Store
from tenantcost.store.engine import open_engine
from tenantcost.store.settings import resolve_settings
from tenantcost.store.stored import StoredUsage, stored_costs, stored_usage
from tenantcost.windows import Period
from tenantcost.writers.json_output import result_document

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "saas-three-clients"
RULES = EXAMPLE / "rules.yaml"
NOVEMBER = Period.month("2026-11")
runner = CliRunner()


def test_allocate_on_the_store_equals_allocate_on_the_files(store_url: str, tmp_path: Path):
    data = str(tmp_path / "data")
    assert runner.invoke(app, ["db", "upgrade", "--db", store_url]).exit_code == 0
    for _ in range(2):  # a second replace of the same files changes nothing
        for kind, option, path in (("usage", "--usage", "usage.csv"),
                                   ("costs", "--costs", "costs.json")):  # fmt: skip
            done = runner.invoke(app, ["ingest", kind, option, str(EXAMPLE / path),
                                       "--db", store_url, "--data", data])  # fmt: skip
            assert done.exit_code == 0, done.output

    files = load_inputs(RULES, period=NOVEMBER)
    expected = allocate_stream(files.costs, files.usage, files.ruleset, period=NOVEMBER,
                               detail="period", rules_origin=str(RULES), con=files.con)  # fmt: skip

    settings = resolve_settings(db=store_url, data=data, environ={})
    store = Store(open_engine(settings), DataDir(data))
    con = connect()
    usage = stored_usage(store, NOVEMBER, con)
    assert isinstance(usage, StoredUsage) and usage.metrics == ["requests", "cpu_seconds"]
    got = allocate_stream(stored_costs(store, NOVEMBER), usage, load_rules(RULES),
                          period=NOVEMBER, detail="period", rules_origin=str(RULES),
                          con=con)  # fmt: skip
    store.engine.dispose()
    require_closed(cascade(got))
    assert json.dumps(result_document(got)) == json.dumps(result_document(expected))
    totals = got.client_totals()
    assert totals.equals(expected.client_totals())
    assert int(totals["amount"].sum()) > 0

    # The same figures as the command users run on the files.
    cli = runner.invoke(app, ["allocate", "--config", str(RULES), "--month", "2026-11",
                              "--format", "json"])  # fmt: skip
    assert cli.exit_code == 0, cli.output
    assert json.loads(cli.stdout) == result_document(got)
