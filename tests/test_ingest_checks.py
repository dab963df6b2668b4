"""Checks at ingest: a record `run` would refuse is refused at ingest, by every path, on
SQLite and a real PostgreSQL: `tenantcost ingest usage` (a subprocess: exit 2, one
`error:` line, no traceback), `POST /api/v1/usage` and `POST /api/v1/usage.parquet` (a real
server: 422, a one-line `detail` naming the record and field), with `allocate` giving the
reader's same line. Valid windows (sub-hour windows inside an hour, hourly, daily) are still
accepted and the month still runs."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy import select

from tenantcost.client_id import bad_client_id_sql, bad_client_ids, client_id_problem
from tenantcost.readers.usage import OFF_HOUR_END_SQL, OFF_HOUR_START_SQL, off_hour_windows
from tenantcost.split import connect
from tenantcost.store.engine import open_engine
from tenantcost.store.models import Batch, table
from tenantcost.store.settings import resolve_settings

from .service_server import (
    EXAMPLE,
    STORE_ENV,
    create_token,
    example_store,
    invoke,
    running_service,
)

MONTH = "2026-11"
METRICS = ("requests", "cpu_seconds")
HEADER = "window_start,window_end,service,client,requests,cpu_seconds"
DAILY_COSTS = (  # 2026-11-05 as one daily cost window for both shared services
    "window_start,window_end,cluster,namespace,controller_kind,controller,total_cost\n"
    "2026-11-05T00:00:00Z,2026-11-06T00:00:00Z,prod,saas,deployment,api,24\n"
    "2026-11-05T00:00:00Z,2026-11-06T00:00:00Z,prod,saas,deployment,import-worker,12\n"
)


def rec(start: str, end: str, service: str = "api", client: str = "client-a") -> dict[str, Any]:
    return {"window_start": start, "window_end": end, "service": service, "client": client,
            "requests": 10, "cpu_seconds": 1.5}  # fmt: skip


GOOD = rec("2026-11-06T10:00:00Z", "2026-11-06T11:00:00Z")
"""A valid record sent before each bad one: the bad one is records[1], CSV row 3."""
LONG_ID = "c" * 300
HUGE_ID = "h" * 3_000_000  # beyond Arrow's 1 MB CSV block: the reader's pandas path

# name, bad record, field the error names (None: the row only), words of the reason; on
# SQLite, the first five run as subprocesses, as users run the CLI (what a real process prints
# does not depend on the backend); the others, and all on PostgreSQL, in this process (each
# subprocess costs an interpreter start and the imports: seconds)
REFUSED = [
    ("off-hour", rec("2026-11-04T10:30:00Z", "2026-11-04T11:30:00Z"), "window_start",
     "crosses an hour boundary but its window_start is not on a whole hour"),
    ("coarser than stored costs", rec("2026-11-03T10:00:00Z", "2026-11-03T12:00:00Z"), None,
     "is coarser than cost window [2026-11-03T10:00:00+00:00, 2026-11-03T11:00:00+00:00)"),
    ("service no rule names", rec("2026-11-04T10:00:00Z", "2026-11-04T11:00:00Z", "billing"),
     "service", "service 'billing' is not named by any shared workload"),
    ("NUL in client", rec("2026-11-04T10:00:00Z", "2026-11-04T11:00:00Z", client="acme\x00eu"),
     "client", "client id holds a control character U+0000 at character 5"),
    ("300-character client", rec("2026-11-04T10:00:00Z", "2026-11-04T11:00:00Z",
                                 client=LONG_ID),
     "client", "client id has 300 characters, at most 256 are allowed"),
    ("off-hour end", rec("2026-11-04T10:00:00Z", "2026-11-04T11:30:00Z"), "window_end",
     "its window_end is not on a whole hour"),
    ("3 MB client", rec("2026-11-04T10:00:00Z", "2026-11-04T11:00:00Z", client=HUGE_ID),
     "client", "client id has 3000000 characters"),
    ("overlaps stored usage", rec("2026-11-03T10:15:00Z", "2026-11-03T10:30:00Z"), None,
     "overlaps the window [2026-11-03T10:00:00+00:00, 2026-11-03T11:00:00+00:00) of stored "
     "batch"),
    ("across a month", rec("2026-10-31T00:00:00Z", "2026-11-02T00:00:00Z"), "window_end",
     "crosses the month boundary 2026-11-01T00:00:00Z"),
]  # fmt: skip


SUBPROCESS = 5
READER_CASES = ("off-hour", "NUL in client", "300-character client")
"""What a row is, without the store: `allocate` refuses these with ingest's very line."""


@dataclass(frozen=True)
class Site:
    """A store holding the example (November open: rules, hourly costs and usage of
    2026-11-03 10:00) plus daily costs of 2026-11-05, and a real server on it."""

    db: str
    data: Path
    url: str
    headers: dict[str, str]
    tmp: Path

    def cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        """``tenantcost ARGS --db --data`` in its own process, as users run it."""
        return tenantcost(*args, "--db", self.db, "--data", str(self.data))

    def in_process(self, *args: str) -> subprocess.CompletedProcess[str]:
        """The same command run by the CLI app in this process (as fast tests do)."""
        done = invoke(*args, "--db", self.db, "--data", str(self.data))
        return subprocess.CompletedProcess(args, done.exit_code, done.stdout, done.stderr)

    def post(self, records: list[dict[str, Any]]) -> httpx.Response:
        return httpx.post(f"{self.url}/api/v1/usage", json={"mode": "sum", "records": records},
                          headers=self.headers, timeout=120)  # fmt: skip

    def post_raw(self, body: str) -> httpx.Response:
        return httpx.post(f"{self.url}/api/v1/usage", content=body.encode("ascii"),
                          headers=self.headers | {"Content-Type": "application/json"},
                          timeout=120)  # fmt: skip

    def post_parquet(self, records: list[dict[str, Any]]) -> httpx.Response:
        frame = pd.DataFrame(records)
        for column in ("window_start", "window_end"):
            frame[column] = pd.to_datetime(frame[column], utc=True)
        buffer = io.BytesIO()
        frame.to_parquet(buffer, index=False)
        return httpx.post(f"{self.url}/api/v1/usage.parquet", content=buffer.getvalue(),
                          headers=self.headers, timeout=120)  # fmt: skip

    def batches(self) -> list[str]:
        engine = open_engine(resolve_settings(db=self.db, environ={}))
        try:
            with engine.connect() as conn:
                b = table(Batch).c
                return [str(u) for u in conn.execute(select(b.uid).order_by(b.id)).scalars()]
        finally:
            engine.dispose()


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def site(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Site]:
    tmp = tmp_path_factory.mktemp(f"ingest-checks-{request.param}")
    if request.param == "sqlite":
        db = f"sqlite:///{tmp / 'store.db'}"
    else:
        from .postgres_fixture import new_database

        db = new_database(request.getfixturevalue("postgres_admin_url"))
    data = tmp / "data"
    example_store(db, str(data), close=False)
    token = create_token(db, "ingest", "billing-app")
    with running_service(db, str(data), tmp / "serve.log") as service:
        site = Site(db, data, service.url, {"Authorization": f"Bearer {token}"}, tmp)
        costs = write(tmp / "daily-costs.csv", DAILY_COSTS)
        done = site.in_process("ingest", "costs", "--costs", str(costs))
        assert done.returncode == 0, done.stderr
        yield site


def tenantcost(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in STORE_ENV}
    return subprocess.run([sys.executable, "-m", "tenantcost", *args], capture_output=True,
                          text=True, env=env, timeout=300, check=False)  # fmt: skip


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8", newline="")
    return path


def usage_csv(path: Path, records: list[dict[str, Any]]) -> Path:
    lines = [",".join(str(r[c]) for c in HEADER.split(",")) for r in records]
    return write(path, "\n".join([HEADER, *lines]) + "\n")


def one_error_line(done: subprocess.CompletedProcess[str]) -> str:
    """The single ``error:`` line of a refused command (exit 2, no traceback)."""
    assert done.returncode == 2, (done.returncode, done.stdout, done.stderr[-2000:])
    assert "Traceback" not in done.stderr and "DataError" not in done.stderr
    line = done.stderr.strip()
    assert line.startswith("error: ") and "\n" not in line, line[:2000]
    return line


@pytest.mark.slow  # a store and a real server per backend
def test_the_cli_refuses_what_run_would_refuse(site: Site) -> None:
    before = site.batches()
    for i, (name, bad, field, words) in enumerate(REFUSED):
        path = usage_csv(site.tmp / f"{name.replace(' ', '-')}.csv", [GOOD, bad])
        sqlite = site.db.startswith("sqlite")
        command = site.cli if i < SUBPROCESS and sqlite else site.in_process
        line = one_error_line(command("ingest", "usage", "--usage", str(path), "--mode", "sum"))
        place = f"error: {path}, row 3" + (f", column '{field}'" if field else "") + ": "
        assert line.startswith(place) and words in line, (name, line[:600])
        assert HUGE_ID not in line
        if name in READER_CASES and sqlite:  # allocate has no store
            allocate = invoke("allocate", "--config", str(EXAMPLE / "rules.yaml"),
                              "--costs", str(EXAMPLE / "costs.json"), "--usage", str(path))
            assert allocate.exit_code == 2 and allocate.stderr.strip() == line, name  # fmt: skip
    assert site.batches() == before  # nothing was stored


@pytest.mark.slow  # a store and a real server per backend
def test_the_api_refuses_the_same_records(site: Site) -> None:
    before = site.batches()
    for name, bad, field, words in REFUSED:
        answer = site.post([GOOD, bad])
        assert answer.status_code == 422, (name, answer.text[:600])
        doc = answer.json()
        place = "records[1]" + (f".{field}" if field else "")
        assert doc["detail"].startswith(f"{place}: ") and words in doc["detail"], (name, doc)
        assert "\n" not in doc["detail"] and "tenantcost-api-" not in doc["detail"]
        assert doc["record"] == 1 and doc["field"] == field, (name, doc)
        assert HUGE_ID not in answer.text
    for name, bad, field, words in REFUSED[:4]:  # the bulk endpoint
        answer = site.post_parquet([GOOD, bad])
        assert answer.status_code == 422, (name, answer.text[:600])
        detail = answer.json()["detail"]
        place = "usage.parquet, row 2" + (f", column '{field}'" if field else "")
        assert detail.startswith(f"{place}: ") and words in detail, (name, detail)
    assert site.batches() == before


@pytest.mark.slow  # a store and a real server per backend
def test_a_lone_surrogate_is_422_naming_the_field(site: Site) -> None:
    before = site.batches()
    for field, value in (("client", "a\ud800b"), ("service", "\udfff")):
        body = json.dumps({"records": [GOOD, GOOD | {field: value}]})  # "\ud800" escapes
        assert "\\ud" in body
        answer = site.post_raw(body)
        assert answer.status_code == 422, answer.text
        doc = answer.json()
        assert doc["detail"].startswith(f"records[1].{field}: ") and "surrogate" in doc["detail"]
        assert doc["record"] == 1 and doc["field"] == field
    assert site.batches() == before


@pytest.mark.slow  # a store and a real server per backend
def test_a_service_without_rule_versions_yet_is_accepted_with_a_warning(site: Site) -> None:
    """The example's first rule version starts 2026-11-01: October's services cannot be
    checked yet."""
    october = rec("2026-10-04T10:00:00Z", "2026-10-04T11:00:00Z", "billing")
    path = usage_csv(site.tmp / "october.csv", [october])
    done = site.cli("ingest", "usage", "--usage", str(path))
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: batch ") and done.stdout.count("\n") == 1
    assert done.stderr.startswith("warning: no stored rule version is in force for 1 "
                                  "(window, service) cell(s)")  # fmt: skip
    assert "2026-10-04T10:00:00Z" in done.stderr and done.stderr.count("\n") == 1
    answer = site.post([october | {"window_start": "2026-10-05T10:00:00Z",
                                   "window_end": "2026-10-05T11:00:00Z"}])  # fmt: skip
    assert answer.status_code == 200, answer.text
    [warning] = answer.json()["warnings"]
    assert warning.startswith("no stored rule version is in force for 1 (window, service)")
    checked = site.post([GOOD | {"window_start": "2026-11-07T10:00:00Z",
                                 "window_end": "2026-11-07T11:00:00Z"}])  # fmt: skip
    assert checked.status_code == 200 and checked.json()["warnings"] == []


@pytest.mark.slow  # a store and a real server per backend
def test_valid_windows_are_accepted_and_the_month_runs(site: Site) -> None:
    """Sub-hour windows inside an hour (nested in the daily costs of 2026-11-05), a daily
    window equal to them, and hourly windows: accepted by the CLI and the API, and `run`
    splits them."""
    nested = [rec(f"2026-11-05T10:{m:02d}:00Z", f"2026-11-05T10:{m + 15:02d}:00Z",
                  client="nested-client") for m in (0, 15, 30)]  # fmt: skip
    daily = rec("2026-11-05T00:00:00Z", "2026-11-06T00:00:00Z", "import-worker", "daily-client")
    done = site.cli("ingest", "usage", "--usage",
                    str(usage_csv(site.tmp / "valid.csv", [*nested, daily])))  # fmt: skip
    assert done.returncode == 0 and done.stderr == "", done.stderr
    sent = site.post([rec("2026-11-05T10:45:00Z", "2026-11-05T11:00:00Z", client="api-client")])
    assert sent.status_code == 200, sent.text
    ran = site.cli("run", "--month", MONTH, "--format", "json")
    assert ran.returncode == 0, ran.stderr
    clients = {c["client"]: c for c in json.loads(ran.stdout)["clients"]}
    for client in ("nested-client", "daily-client", "api-client", "client-a"):
        assert clients[client]["amount"] > 0, (client, clients)


# --------------------------------------------------------------------------- one rule, two forms

BASE = pd.Timestamp("2026-11-01T00:00:00Z")
DUCKDB = connect()


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3 * 24 * 60), st.integers(1, 2 * 24 * 60)),
                min_size=1, max_size=20))  # fmt: skip
def test_the_hour_rule_is_the_same_in_pandas_and_in_duckdb(windows: list[tuple[int, int]]) -> None:
    """A window is refused iff it crosses an hour boundary and does not start and end on
    whole hours; the readers (numpy) and the Parquet scan (SQL) agree row by row."""
    start = pd.Series([BASE + pd.Timedelta(minutes=a) for a, _ in windows])
    end = pd.Series([BASE + pd.Timedelta(minutes=a + n) for a, n in windows])
    off_start, off_end = off_hour_windows(start, end)
    pairs = list(zip(start, end, strict=True))
    one_hour = [s.floor("h") == (e - pd.Timedelta(1)).floor("h") for s, e in pairs]
    whole = [s == s.floor("h") and e == e.floor("h") for s, e in pairs]
    expected = [not (a or b) for a, b in zip(one_hour, whole, strict=True)]
    assert (off_start | off_end).tolist() == expected
    con = DUCKDB
    con.register("w", pd.DataFrame({"window_start": start, "window_end": end}))
    found = con.execute(f"SELECT ({OFF_HOUR_START_SQL}), ({OFF_HOUR_END_SQL}) FROM w").fetchall()
    assert [bool(a) for a, _ in found] == off_start.tolist()
    assert [bool(b) for _, b in found] == off_end.tolist()


@settings(max_examples=100, deadline=None)
@given(st.lists(st.text(st.characters(exclude_categories=["Cs"]), max_size=300),
                min_size=1, max_size=10))  # fmt: skip
def test_the_client_id_rule_is_the_same_in_pandas_and_in_duckdb(ids: list[str]) -> None:
    expected = [client_id_problem(i) is not None for i in ids]
    assert bad_client_ids(pd.Series(ids, dtype="str")).tolist() == expected
    assert bad_client_ids(pd.Series(ids, dtype=object)).tolist() == expected
    con = DUCKDB
    con.register("ids", pd.DataFrame({"client": pd.Series(ids, dtype="str")}))
    found = con.execute(f"SELECT {bad_client_id_sql('client')} FROM ids").fetchall()
    assert [bool(r[0]) for r in found] == expected


# --------------------------------------------------------------------------- billed services

BILLED = """    billed:
      - match: {ServiceName: Amazon Relational Database Service}
        class: shared
        key: requests
        services: [database]
"""


def test_a_service_only_a_billed_entry_names_is_accepted(tmp_path: Path) -> None:
    """The usage of `billed[].services` splits billed pools, so a stored rule
    version that names a service only there makes its usage known (SQLite: the check reads
    the stored version's content, the same on both backends)."""
    text = (EXAMPLE / "rules.yaml").read_text(encoding="utf-8")
    assert text.endswith("    unmatched: error\n")
    rules = write(tmp_path / "rules.yaml", text + BILLED)
    store = ("--db", f"sqlite:///{tmp_path / 'store.db'}", "--data", str(tmp_path / "data"))
    for args in (("db", "upgrade"), ("rules", "load", str(rules))):
        done = invoke(*args, *store)
        assert done.exit_code == 0, done.output
    database = rec("2026-11-04T10:00:00Z", "2026-11-04T11:00:00Z", "database")
    done = invoke("ingest", "usage", "--usage",
                  str(usage_csv(tmp_path / "database.csv", [GOOD, database])), *store)  # fmt: skip
    assert done.exit_code == 0, done.output
    assert done.stderr == "" and done.stdout.startswith("usage: batch ")
    cache = database | {"service": "cache"}  # named by no workload and no billed entry
    done = invoke("ingest", "usage", "--usage",
                  str(usage_csv(tmp_path / "cache.csv", [cache])), *store)  # fmt: skip
    assert done.exit_code == 2, done.output
    assert done.stderr.startswith(
        f"error: {tmp_path / 'cache.csv'}, row 2, column 'service': service 'cache' is not "
        "named by any shared workload or billed entry of the rule version(s) in force for "
        "window [2026-11-04T10:00:00+00:00, 2026-11-04T11:00:00+00:00) ('saas-2026-11': "
        "api, import-worker, database)"
    ), done.stderr
