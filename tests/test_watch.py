"""`tenantcost watch` end to end on a real store (SQLite; one PostgreSQL 15 case).

The issue's generated month: daily cost windows from 18 October to 26 November 2026 for a
dozen clients, each with its own direct `import-worker` (daily noise) and a share of the
shared `search` workload split by requests, with
* one injected 10x spike in tenant-c03's import worker on 12 November (the only anomaly);
* a rule change on 15 November that splits `search` by cpu_seconds instead, where
  tenant-c05 uses 20x more CPU per request than the others: its search line jumps, and is
  not flagged (a new split restarts the baseline), but the change is listed in
  `rule_changes` with its effect, checked against `allocate` on the files under each version;
* tenant-c07 without usage rows for search on 10 November: a `no_usage` warning, no drop.
Watched at 2026-11-26T06:00Z: the cost window of the 26th (it ends on the 27th) is not
covered yet, so the hours covered are 1-25 November and `projected` is month_to_date x 30/25.
Also: a closed month re-watched (recorded as closed; projected = month to date), a month
without data (exit 0, `no_data`), and the one-line refusals.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
from fractions import Fraction
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from tenantcost.cli import app
from tenantcost.store.engine import open_engine
from tenantcost.store.settings import resolve_settings
from tenantcost.store.watch_snapshots import latest_snapshot, snapshot_document
from tenantcost.watch import anomaly_id

from .postgres_fixture import free_port

runner = CliRunner()
CLIENTS = [f"tenant-c{i:02d}" for i in range(1, 13)]
FIRST_DAY = pd.Timestamp("2026-10-18T00:00:00Z")
LAST_DAY = pd.Timestamp("2026-11-26T00:00:00Z")  # its window ends on the 27th
AS_OF = "2026-11-26T06:00:00Z"
SPIKE = ("tenant-c03", "tenant-c03/import-worker", "2026-11-12")
CHANGED, MISSING = "tenant-c05", ("tenant-c07", "2026-11-10")
RULES = """
currency: USD
rules:
  - id: v1
    effective_from: "2026-10-01T00:00:00Z"
    workloads:
      - {match: {namespace: saas, controller: search}, class: shared, service: search,
         key: requests}
      - {match: {namespace: "tenant-*"}, class: direct, client_from: namespace}
    idle: keep
  - id: v2
    effective_from: "2026-11-15T00:00:00Z"
    workloads:
      - {match: {namespace: saas, controller: search}, class: shared, service: search,
         key: cpu_seconds}
      - {match: {namespace: "tenant-*"}, class: direct, client_from: namespace}
    idle: keep
"""
CONTRACT = {
    "top": {"month", "as_of", "money", "clients", "anomalies", "rule_changes", "warnings"},
    "client": {"client", "month_to_date", "projected", "budget", "status"},
    "anomaly": {"id", "client", "source", "day", "amount", "baseline", "score", "kind"},
    "rule_change": {"day", "rule_id", "client", "effect"},
    "warning": {"client", "day", "kind", "detail"},
}


def cli(*args: str):
    return runner.invoke(app, list(args))


def generate(folder: Path) -> tuple[Path, Path]:
    """The month's costs and usage as canonical CSV files."""
    rng = np.random.default_rng(25)
    days = pd.date_range(FIRST_DAY, LAST_DAY, freq="D")
    base = {c: 20 + 3 * i for i, c in enumerate(CLIENTS)}
    costs, usage = [], []
    for day in days:
        window = {
            "window_start": day.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "window_end": (day + pd.Timedelta(days=1)).strftime("%Y-%m-%dT%H:%M:%SZ"),
        }
        for client in CLIENTS:
            amount = base[client] * rng.uniform(0.92, 1.08)
            if (client, f"{day:%Y-%m-%d}") == (SPIKE[0], SPIKE[2]):
                amount *= 10
            costs.append(
                {
                    **window,
                    "name": f"{client}/import-worker",
                    "namespace": client,
                    "controller": "import-worker",
                    "total_cost": round(amount, 4),
                }
            )
            if (client, f"{day:%Y-%m-%d}") == MISSING:
                continue
            requests = 1000 * base[client] * rng.uniform(0.92, 1.08)
            cpu = requests * (20 if client == CHANGED else 1) * rng.uniform(0.97, 1.03)
            usage.append(
                {
                    **window,
                    "service": "search",
                    "client": client,
                    "requests": round(requests, 1),
                    "cpu_seconds": round(cpu, 1),
                }
            )
        search = round(300 * rng.uniform(0.95, 1.05), 4)
        costs.append(
            {
                **window,
                "name": "saas/search",
                "namespace": "saas",
                "controller": "search",
                "total_cost": search,
            }
        )
    frame = pd.DataFrame(costs)
    for column in ("cluster", "node", "controller_kind", "pod"):
        frame[column] = ""
    costs_file, usage_file = folder / "costs.csv", folder / "usage.csv"
    frame.to_csv(costs_file, index=False)
    pd.DataFrame(usage).to_csv(usage_file, index=False)
    return costs_file, usage_file


def fill_store(url: str, data: str, rules: Path, costs: Path, usage: Path) -> None:
    for step in (["db", "upgrade"], ["rules", "load", str(rules)],
                 ["ingest", "costs", "--costs", str(costs)],
                 ["ingest", "usage", "--usage", str(usage)]):  # fmt: skip
        done = cli(*step, "--db", url, "--data", data)
        assert done.exit_code == 0, done.output


@pytest.fixture(scope="module")
def month(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The generated month in a SQLite store, watched once at AS_OF."""
    folder = tmp_path_factory.mktemp("watch")
    rules = folder / "rules.yaml"
    rules.write_text(RULES, encoding="utf-8")
    costs, usage = generate(folder)
    url, data = f"sqlite:///{folder / 'tc.db'}", str(folder / "data")
    fill_store(url, data, rules, costs, usage)
    done = cli("watch", "--month", "2026-11", "--as-of", AS_OF, "--format", "json",
               "--db", url, "--data", data)  # fmt: skip
    assert done.exit_code == 0, done.output
    return {"folder": folder, "url": url, "data": data, "rules": rules, "costs": costs,
            "usage": usage, "document": json.loads(done.stdout)}  # fmt: skip


def allocate_totals(m: dict[str, Any], rules_text: str, start: str, end: str) -> pd.Series:
    """Per-client amounts of `allocate` on the files (the same core, another input path)."""
    rules = m["folder"] / f"rules-{abs(hash(rules_text))}.yaml"
    rules.write_text(rules_text, encoding="utf-8")
    done = cli("allocate", "--config", str(rules), "--costs", str(m["costs"]), "--usage",
               str(m["usage"]), "--from", start, "--to", end, "--format", "json")  # fmt: skip
    assert done.exit_code == 0, done.output
    clients = json.loads(done.stdout)["clients"]
    return pd.Series({c["client"]: int(c["amount"]) for c in clients}, dtype="int64")


def only(version: str) -> str:
    """RULES reduced to one version, in force from October."""
    head, v1, v2 = RULES.split("  - id: ")
    body = v1 if version == "v1" else v2
    lines = body.splitlines()
    lines[1] = '    effective_from: "2026-10-01T00:00:00Z"'
    return head + "  - id: " + "\n".join(lines) + "\n"


def test_contract_fields_are_exact(month: dict[str, Any]):
    doc = month["document"]
    assert set(doc) == CONTRACT["top"]
    assert doc["month"] == "2026-11" and doc["as_of"] == AS_OF
    assert doc["money"] == {"currency": "USD", "minor_unit_exponent": 6}
    assert [c["client"] for c in doc["clients"]] == CLIENTS
    for name, items in (
        ("client", doc["clients"]),
        ("anomaly", doc["anomalies"]),
        ("rule_change", doc["rule_changes"]),
        ("warning", doc["warnings"]),
    ):
        assert items, name
        for item in items:
            assert set(item) == CONTRACT[name], item
    for client in doc["clients"]:  # no budget loaded
        assert client["budget"] is None and client["status"] == "no_budget"
        assert isinstance(client["month_to_date"], int) and isinstance(client["projected"], int)


def test_exactly_the_injected_spike_is_flagged(month: dict[str, Any]):
    (anomaly,) = month["document"]["anomalies"]
    client, source, day = SPIKE
    assert (anomaly["client"], anomaly["source"], anomaly["day"], anomaly["kind"]) == (
        client,
        source,
        day,
        "spike",
    )
    assert anomaly["id"] == anomaly_id(client, source, day, "spike")
    assert 8 * anomaly["baseline"] < anomaly["amount"] < 12 * anomaly["baseline"]
    assert anomaly["score"] >= 4


def test_month_to_date_and_projection_are_the_allocation_of_the_covered_hours(month):
    expected = allocate_totals(month, RULES, "2026-11-01T00:00:00Z", "2026-11-26T00:00:00Z")
    got = {c["client"]: c for c in month["document"]["clients"]}
    for client, amount in expected.items():
        assert got[client]["month_to_date"] == amount
        exact = Fraction(int(amount) * 30, 25)  # 30 days in the month, 25 covered
        assert got[client]["projected"] == round(exact)  # Python's round: half to even


def test_the_rule_change_is_listed_with_its_effect_and_not_flagged(month: dict[str, Any]):
    doc = month["document"]
    assert all(a["client"] != CHANGED for a in doc["anomalies"])
    changes = {c["client"]: c for c in doc["rule_changes"]}
    assert {c["rule_id"] for c in changes.values()} == {"v2"}
    assert {c["day"] for c in changes.values()} == {"2026-11-15"}
    start, end = "2026-11-15T00:00:00Z", "2026-11-26T00:00:00Z"
    under_v2 = allocate_totals(month, only("v2"), start, end)
    under_v1 = allocate_totals(month, only("v1"), start, end)
    effect = under_v2 - under_v1
    effect = effect[effect != 0]
    assert {c: e["effect"] for c, e in changes.items()} == effect.to_dict()
    assert changes[CHANGED]["effect"] > 0
    assert sum(e["effect"] for e in changes.values()) == 0  # the pool is the same money


def test_a_missing_day_of_usage_is_a_warning_not_an_anomaly(month: dict[str, Any]):
    doc = month["document"]
    client, day = MISSING
    gaps = [w for w in doc["warnings"] if w["kind"] == "no_usage"]
    assert [(w["client"], w["day"]) for w in gaps] == [(client, day)]
    assert "search" in gaps[0]["detail"]
    assert all(a["client"] != client for a in doc["anomalies"])
    assert not [w for w in doc["warnings"] if w["kind"] in ("no_costs", "unbilled", "no_data")]


def test_each_run_is_recorded_and_the_table_reads_the_same_answer(month: dict[str, Any]):
    engine = open_engine(resolve_settings(db=month["url"], environ={}))
    snapshot = latest_snapshot(engine, "2026-11")
    assert snapshot is not None and not snapshot.month_closed
    assert snapshot_document(engine, snapshot) == month["document"]
    done = cli("watch", "--month", "2026-11", "--as-of", AS_OF, "--db", month["url"],
               "--data", month["data"])  # fmt: skip
    assert done.exit_code == 0, done.output
    assert "tenant-c03/import-worker" in done.stdout and "2026-11-12" in done.stdout
    later = latest_snapshot(engine, "2026-11")
    assert later is not None and later.id > snapshot.id


def test_a_closed_month_re_watched(month: dict[str, Any]):
    where = ("--db", month["url"], "--data", month["data"])
    if "2026-10" not in closed_months(month):  # the notify test may have closed it first
        done = cli("close", "--month", "2026-10", "--allow-incomplete", *where)  # runs it too
        assert done.exit_code == 0, done.output
    done = cli("watch", "--month", "2026-10", "--format", "json", *where)
    assert done.exit_code == 0, done.output
    doc = json.loads(done.stdout)
    assert all(c["projected"] == c["month_to_date"] for c in doc["clients"])
    expected = allocate_totals(month, RULES, "2026-10-18T00:00:00Z", "2026-11-01T00:00:00Z")
    assert {c["client"]: c["month_to_date"] for c in doc["clients"]} == expected.to_dict()
    no_costs = [w["day"] for w in doc["warnings"] if w["kind"] == "no_costs"]
    assert no_costs == [f"2026-10-{d:02d}" for d in range(1, 18)]
    assert all(w["client"] is None for w in doc["warnings"] if w["kind"] == "no_costs")
    engine = open_engine(resolve_settings(db=month["url"], environ={}))
    snapshot = latest_snapshot(engine, "2026-10")
    assert snapshot is not None and snapshot.month_closed


def test_a_month_without_data_is_an_empty_answer_and_exit_0(month: dict[str, Any]):
    done = cli("watch", "--month", "2026-12", "--as-of", "2026-12-01T00:10:00Z", "--format",
               "json", "--db", month["url"], "--data", month["data"])  # fmt: skip
    assert done.exit_code == 0, done.output
    doc = json.loads(done.stdout)
    assert set(doc) == CONTRACT["top"]
    assert doc["clients"] == doc["anomalies"] == doc["rule_changes"] == []
    (warning,) = doc["warnings"]
    assert warning["kind"] == "no_data" and warning["client"] is None


def test_lagging_costs_a_partly_covered_day_is_a_warning_not_a_drop(month: dict[str, Any]):
    """January 2027 holds 12 h of costs of its first day: the 1st is complete at as_of but
    covered in part, so it is not scored (a `no_costs` warning naming the hours) and the
    projection scales the 12 h covered to the month's 744 h."""
    folder = month["folder"]
    window = {"window_start": "2027-01-01T00:00:00Z", "window_end": "2027-01-01T12:00:00Z"}
    rows = [{**window, "name": "tenant-c01/import-worker", "namespace": "tenant-c01",
             "controller": "import-worker", "total_cost": 12.5}]  # fmt: skip
    frame = pd.DataFrame(rows)
    for column in ("cluster", "node", "controller_kind", "pod"):
        frame[column] = ""
    frame.to_csv(folder / "january.csv", index=False)
    where = ("--db", month["url"], "--data", month["data"])
    done = cli("ingest", "costs", "--costs", str(folder / "january.csv"), *where)
    assert done.exit_code == 0, done.output
    done = cli("watch", "--month", "2027-01", "--as-of", "2027-01-02T06:00:00Z",
               "--format", "json", *where)  # fmt: skip
    assert done.exit_code == 0, done.output
    doc = json.loads(done.stdout)
    assert doc["clients"] == [{"client": "tenant-c01", "month_to_date": 12_500_000,
                               "projected": 12_500_000 * 62, "budget": None,
                               "status": "no_budget"}]  # fmt: skip
    assert doc["anomalies"] == [] and doc["rule_changes"] == []
    (warning,) = doc["warnings"]
    assert (warning["kind"], warning["day"], warning["client"]) == ("no_costs", "2027-01-01", None)
    assert "12 of 24 h" in warning["detail"]


def test_notify_tells_the_spike_once_to_its_account_manager(month, tmp_path, monkeypatch):
    """`watch --notify` run twice, as an hourly CronJob would: the spike reaches the
    webhook of tenant-c03's account manager once, signed, with its figures and source and
    no other client; a second destination that refuses it (400) fails alone, each run ending
    with one error line and exit 1; a closed month re-watched sends nothing."""
    got: list[tuple[dict[str, str], bytes]] = []

    class Hook(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            if self.path == "/hook":
                got.append((dict(self.headers.items()), body))
            self.send_response(200 if self.path == "/hook" else 400)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", free_port()), Hook)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    settings = tmp_path / "settings.yaml"
    settings.write_text(
        "alerts:\n  destinations:\n    am-carol: {webhook: "
        f'"http://127.0.0.1:{server.server_address[1]}/hook", secret_env: TC_WATCH_HOOK}}\n'
        "    am-broken: {webhook: "
        f'"http://127.0.0.1:{server.server_address[1]}/broken", secret_env: TC_WATCH_HOOK}}\n'
        "  routes:\n    - {clients: [tenant-c03], to: [am-carol, am-broken]}\n",
        encoding="utf-8",
    )
    monkeypatch.setenv("TC_WATCH_HOOK", "carol-secret")
    where = ("--settings", str(settings), "--db", month["url"], "--data", month["data"])
    try:
        for _ in range(2):  # the second finds it sent
            done = cli("watch", "--month", "2026-11", "--as-of", AS_OF, "--notify", *where)
            assert done.exit_code == 1, done.output
            *summary, last = done.stderr.strip().splitlines()
            assert "  am-broken: 0 sent, 0 already sent, 1 failed (HTTP 400)" in summary
            assert last == ("error: 1 alert delivery of 2026-11 failed; the next run tries "
                            "again (reasons above)")  # fmt: skip
        if all(w != "2026-10" for w in closed_months(month)):
            assert cli("close", "--month", "2026-10", "--allow-incomplete", *where).exit_code == 0
        done = cli("watch", "--month", "2026-10", "--notify", *where)
        assert done.exit_code == 0, done.output
        assert "closed" in done.stderr
    finally:
        server.shutdown()
        server.server_close()
    ((headers, body),) = got
    digest = hmac.new(b"carol-secret", body, hashlib.sha256).hexdigest()
    assert headers["X-Tenantcost-Signature"] == f"sha256={digest}"
    payload = json.loads(body)
    spike = next(a for a in month["document"]["anomalies"])
    assert payload["client"] == SPIKE[0]
    text = body.decode("utf-8")
    assert SPIKE[1] in text and SPIKE[2] in text and str(spike["amount"]) in text
    assert not [c for c in CLIENTS if c != SPIKE[0] and c in text]


def closed_months(month: dict[str, Any]) -> list[str]:
    from tenantcost.store.cycle import closed_months as closed

    engine = open_engine(resolve_settings(db=month["url"], environ={}))
    return closed(
        engine, pd.Timestamp("2026-10-01", tz="UTC"), pd.Timestamp("2026-11-01", tz="UTC")
    )


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (("--month", "2026-13"), "--month"),
        (("--month", "2026-11", "--as-of", "2026-10-31T00:00:00Z"), "before 2026-11 starts"),
        (("--month", "2026-11", "--as-of", "not-a-time"), "--as-of"),
        (("--month", "2026-11", "--format", "csv"), "--format"),
        (("--month", "2026-11", "--notify"), "alerts:"),
    ],
)
def test_user_mistakes_are_one_line_exit_2(month: dict[str, Any], args, fragment):
    done = cli("watch", *args, "--db", month["url"], "--data", month["data"])
    assert done.exit_code == 2, done.output
    err = done.stderr.strip()
    assert err.startswith("error: ") and "\n" not in err and fragment in err, err


def test_postgresql_gives_the_same_answer(month: dict[str, Any], postgres_admin_url: str,
                                          tmp_path: Path):  # fmt: skip
    from tests.postgres_fixture import new_database

    url, data = new_database(postgres_admin_url), str(tmp_path / "data")
    fill_store(url, data, month["rules"], month["costs"], month["usage"])
    done = cli("watch", "--month", "2026-11", "--as-of", AS_OF, "--format", "json",
               "--db", url, "--data", data)  # fmt: skip
    assert done.exit_code == 0, done.output
    assert json.loads(done.stdout) == month["document"]
