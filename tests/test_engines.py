"""The chunked engines: Parquet usage streamed per chunk, and Dask, identical to the unit.

Tests start a real ``distributed.LocalCluster`` (two worker processes on 127.0.0.1), as a
user's cluster would run, and compare every result table with the local engine.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from distributed import LocalCluster
from typer.testing import CliRunner

from tenantcost.allocate import allocate, allocate_keys, allocate_stream
from tenantcost.cli import app
from tenantcost.config.rules import load_rules
from tenantcost.engine.dask import DaskEngine
from tenantcost.readers.costs import read_costs
from tenantcost.split import connect
from tenantcost.usage_source import FrameUsage, ParquetUsage
from tenantcost.windows import Period

START = pd.Timestamp("2026-11-01T00:00:00Z")
HOURS = 72
SERVICES = ["api", "import", "search"]
CLIENTS = [f"client-{i:03d}" for i in range(60)] + [""]

RULES = """
currency: USD
sources: {costs: [costs.csv], usage: [usage]}
rules:
  - id: v1
    effective_from: 2026-10-01
    workloads:
      - {match: {controller: api}, class: shared, service: api, key: requests}
      - {match: {controller: import}, class: shared, service: import, key: cpu_seconds}
      - {match: {controller: search}, class: shared, service: search, key: even}
      - {match: {controller: reserve}, class: reserve}
      - {match: {name: __idle__}, class: idle}
    external:
      - {name: search-saas, amount: 0.0731, per: hour, key: requests}
      - {name: database, amount: 812.34, per: month, key: cpu_seconds, services: [import]}
    idle: proportional
  - id: v2
    effective_from: 2026-11-02T12:00:00Z
    workloads:
      - {match: {controller: api}, class: shared, service: api, key: cpu_seconds}
      - {match: {controller: import}, class: shared, service: import, key: requests}
      - {match: {controller: search}, class: shared, service: search, key: requests}
      - {match: {controller: reserve}, class: reserve}
      - {match: {name: __idle__}, class: idle}
    idle: even
"""


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Costs CSV, hive-partitioned usage Parquet (date=YYYY-MM-DD) and a rule file."""
    root = tmp_path_factory.mktemp("dataset")
    rng = np.random.default_rng(7)
    hours = pd.date_range(START, periods=HOURS, freq="h", tz="UTC")
    cost_rows = []
    for h in hours:
        for controller in [*SERVICES, "reserve"]:
            cost_rows.append((h, controller, controller, round(rng.uniform(0.01, 2), 5)))
        cost_rows.append((h, "", "__idle__", round(rng.uniform(0, 3), 5)))
    costs = pd.DataFrame(cost_rows, columns=["window_start", "controller", "name", "total_cost"])
    costs["window_end"] = costs["window_start"] + pd.Timedelta(hours=1)
    costs = costs.assign(cluster="c1", namespace=np.where(costs["name"] == "__idle__", "", "saas"),
                         controller_kind="deployment")
    costs.to_csv(root / "costs.csv", index=False)
    sizes = rng.zipf(1.6, len(CLIENTS)).clip(1, 500)
    for day, day_hours in pd.Series(hours).groupby(hours.date):
        rows = []
        for h in day_hours:
            for s in SERVICES:
                if h.hour == 3 and s == "search":
                    continue  # an hour without usage: its cost is unattributed
                active = rng.random(len(CLIENTS)) < 0.8
                for c, size, on in zip(CLIENTS, sizes, active, strict=True):
                    if on:
                        rows.append((h, h + pd.Timedelta(hours=1), s, c,
                                     float(rng.poisson(size * 10)),
                                     round(float(rng.gamma(2, size / 10)), 3)))
        frame = pd.DataFrame(rows, columns=["window_start", "window_end", "service", "client",
                                            "requests", "cpu_seconds"])
        folder = root / "usage" / f"date={day}"
        folder.mkdir(parents=True)
        pq.write_table(pa.Table.from_pandas(frame, preserve_index=False),
                       folder / "part-0.parquet", row_group_size=5000)
    (root / "rules.yaml").write_text(RULES)
    return root


def _stream(dataset: Path, **kwargs):
    ruleset = load_rules(dataset / "rules.yaml")
    con = connect()
    source = ParquetUsage([dataset / "usage"], con)
    return allocate_stream(read_costs([dataset / "costs.csv"]), source, ruleset, con=con,
                           period=Period(START, START + pd.Timedelta(hours=HOURS)), **kwargs)


def _tables(result):
    return {name: getattr(result, name).reset_index(drop=True)
            for name in ("lines", "unattributed", "residual", "exclusions", "unclassified")}


def test_parquet_streaming_equals_in_memory_allocation(dataset: Path) -> None:
    """Chunked Parquet scanning gives the same window-level result as one in-memory pass."""
    streamed = _stream(dataset, detail="window", chunk=pd.Timedelta(hours=6))
    usage = pd.concat(
        [pd.read_parquet(p) for p in sorted((dataset / "usage").rglob("*.parquet"))]
    ).assign(origin="x")
    for c in ("window_start", "window_end"):
        usage[c] = usage[c].astype("datetime64[ns, UTC]")
    usage = usage.astype({"service": "str", "client": "str", "origin": "str"})
    whole = allocate(read_costs([dataset / "costs.csv"]), usage,
                     load_rules(dataset / "rules.yaml"),
                     period=Period(START, START + pd.Timedelta(hours=HOURS)))
    assert streamed.chunks == 12
    assert streamed.usage_rows == len(usage)
    for name, frame in _tables(whole).items():
        pd.testing.assert_frame_equal(frame, _tables(streamed)[name], obj=name)


@pytest.fixture(scope="module")
def half_days(dataset: Path):
    """The dataset streamed in 12 h chunks, once per module: the result the others equal.
    Tests only read it."""
    return _stream(dataset, chunk=pd.Timedelta("12h"))


@pytest.fixture(scope="module")
def hours(dataset: Path):
    """The dataset streamed an hour at a time, once per module (read only)."""
    return _stream(dataset, chunk=pd.Timedelta("1h"))


@pytest.mark.parametrize("chunk", ["1h", "1D", "3D"])
def test_chunk_size_does_not_change_any_figure(
    dataset: Path, half_days, hours, chunk: str
) -> None:
    """Measures too: they are summed over chunks as exact integers, not as floats."""
    other = hours if chunk == "1h" else _stream(dataset, chunk=pd.Timedelta(chunk))
    pd.testing.assert_frame_equal(half_days.lines, other.lines, check_exact=True)
    assert half_days.unattributed["amount"].sum() == other.unattributed["amount"].sum()


def test_fold_batches_do_not_change_any_figure(dataset: Path, hours, monkeypatch) -> None:
    """Folding after every chunk gives the figures of folding once at the end."""
    import tenantcost.engine.fold as fold

    monkeypatch.setattr(fold, "FOLD_ROWS", 1)
    every = _stream(dataset, chunk=pd.Timedelta("1h"))
    pd.testing.assert_frame_equal(hours.lines, every.lines, check_exact=True)
    measured = hours.lines[hours.lines["kind"] != "direct"]
    assert (measured["measure"] > 0).all() and (measured["share"] <= 1).all()


@pytest.fixture(scope="module")
def cluster():
    """A real Dask cluster: scheduler and two worker processes on loopback."""
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                      dashboard_address=None) as local:
        yield local


def test_dask_engine_equals_local_engine_to_the_unit(dataset: Path, half_days, cluster) -> None:
    local = half_days
    with DaskEngine(scheduler=cluster.scheduler_address) as engine:
        distributed = _stream(dataset, chunk=pd.Timedelta(hours=12), engine=engine)
    for name, frame in _tables(local).items():
        pd.testing.assert_frame_equal(frame, _tables(distributed)[name], obj=name)
    assert local.reference_total == distributed.reference_total
    assert local.lines["amount"].sum() > 0


def test_dask_cli_with_scheduler_matches_local_json_and_lines_file(
    dataset: Path, cluster, tmp_path: Path
) -> None:
    runner = CliRunner()
    base = ["allocate", "--config", str(dataset / "rules.yaml"), "--month", "2026-11",
            "--format", "json"]
    local = runner.invoke(app, [*base, "--out", str(tmp_path / "local")])
    assert local.exit_code == 0, local.output
    remote = runner.invoke(app, [*base, "--engine", "dask", "--scheduler",
                                 cluster.scheduler_address, "--out", str(tmp_path / "dask")])
    assert remote.exit_code == 0, remote.output
    a, b = json.loads(local.stdout), json.loads(remote.stdout)
    assert a["clients"] == b["clients"] and a["cascade"] == b["cascade"] and a["gap"] == 0
    assert [r["id"] for r in a["rules"]] == ["v1", "v2"]
    la = (tmp_path / "local" / "lines.csv").read_text()
    lb = (tmp_path / "dask" / "lines.csv").read_text()
    assert la == lb and la.count("\n") > 10_000


def test_dask_local_cluster_from_workers_option(dataset: Path) -> None:
    result = CliRunner().invoke(app, ["reconcile", "--config", str(dataset / "rules.yaml"),
                                      "--engine", "dask", "--workers", "2"])
    assert result.exit_code == 0, result.output
    assert "closes" in result.stdout


def _stream_keys(dataset: Path, keys, **kwargs):
    ruleset = load_rules(dataset / "rules.yaml")
    con = connect()
    source = ParquetUsage([dataset / "usage"], con)
    return allocate_keys(read_costs([dataset / "costs.csv"]), source, ruleset, keys=keys,
                         con=con, period=Period(START, START + pd.Timedelta(hours=HOURS)),
                         **kwargs)


@pytest.mark.parametrize("engine_kind", ["local", "dask"])
def test_several_keys_in_one_pass_equal_one_run_per_key(dataset: Path, cluster,
                                                        engine_kind: str) -> None:
    """One read of each chunk, one split per key: each result is that key's own run."""
    keys = [None, "requests", "even", "cpu_seconds"]
    chunk = pd.Timedelta(hours=12)
    if engine_kind == "dask":
        with DaskEngine(scheduler=cluster.scheduler_address) as engine:
            together = _stream_keys(dataset, keys, chunk=chunk, engine=engine)
    else:
        together = _stream_keys(dataset, keys, chunk=chunk)
    assert len(together) == len(keys)
    for key, result in zip(keys, together, strict=True):
        alone = _stream(dataset, key=key, chunk=chunk)
        for name, frame in _tables(alone).items():
            pd.testing.assert_frame_equal(frame, _tables(result)[name], obj=f"{key}: {name}",
                                          check_exact=True)
        assert result.usage_rows == alone.usage_rows and result.chunks == alone.chunks
        assert result.key_override == alone.key_override
    # the keys give different figures, so a mix-up would show
    totals = [r.client_totals().set_index("client")["amount"] for r in together]
    assert not totals[1].equals(totals[2]) and not totals[0].equals(totals[2])


@pytest.mark.parametrize("address", ["nonsense", "foo://127.0.0.1:1"])
def test_a_malformed_scheduler_address_is_one_line_and_exit_2(dataset: Path, address: str) -> None:
    result = CliRunner().invoke(app, ["allocate", "--config", str(dataset / "rules.yaml"),
                                      "--engine", "dask", "--scheduler", address])
    assert result.exit_code == 2, result.output
    assert result.output.startswith("error: cannot reach the Dask scheduler " + address)
    assert "Traceback" not in result.output


def test_a_bad_parquet_row_is_named_even_on_a_worker(dataset: Path, tmp_path: Path,
                                                     cluster) -> None:
    bad = tmp_path / "bad"
    bad.mkdir()
    frame = pd.read_parquet(next((dataset / "usage").rglob("*.parquet")))
    frame.loc[7, "requests"] = -1.0
    frame.to_parquet(bad / "usage.parquet")
    rules = (dataset / "rules.yaml").read_text().replace("usage: [usage]", f"usage: [{bad}]")
    rules = rules.replace("costs: [costs.csv]", f"costs: [{dataset / 'costs.csv'}]")
    (tmp_path / "rules.yaml").write_text(rules)
    result = CliRunner().invoke(app, ["allocate", "--config", str(tmp_path / "rules.yaml"),
                                      "--engine", "dask", "--scheduler",
                                      cluster.scheduler_address])
    assert result.exit_code == 2, result.output
    assert "usage.parquet" in result.stderr and "row 8" in result.stderr
    assert "requests" in result.stderr and "Traceback" not in result.output


def test_frame_usage_can_be_sliced_per_chunk(dataset: Path) -> None:
    frame = pd.DataFrame({"window_start": pd.to_datetime([START], utc=True),
                          "window_end": pd.to_datetime([START + pd.Timedelta(hours=1)], utc=True),
                          "service": ["api"], "client": ["a"], "requests": [1.0], "origin": ["x"]})
    src = FrameUsage(frame)
    assert len(src.for_chunk(START, START + pd.Timedelta(hours=1)).frame) == 1
    assert src.for_chunk(START + pd.Timedelta(hours=1), START + pd.Timedelta(hours=2)).frame.empty


def test_usage_from_urls_gives_the_same_result(dataset: Path) -> None:
    """file:// URLs go to DuckDB directly; other protocols are served through fsspec
    (here fsspec's in-memory file system, standing in for s3:// or gs://)."""
    import fsspec

    base = _stream(dataset)
    ruleset = load_rules(dataset / "rules.yaml")
    period = Period(START, START + pd.Timedelta(hours=HOURS))
    costs = read_costs([dataset / "costs.csv"])
    con = connect()
    by_file_url = allocate_stream(
        costs, ParquetUsage([f"file://{dataset / 'usage'}/"], con), ruleset, con=con,
        period=period,
    )
    memory = fsspec.filesystem("memory")
    for part in sorted((dataset / "usage").rglob("*.parquet")):
        rel = part.relative_to(dataset).as_posix()
        memory.pipe(f"/bench/{rel}", part.read_bytes())
    con = connect()
    by_fsspec = allocate_stream(
        costs, ParquetUsage(["memory://bench/usage/"], con), ruleset, con=con, period=period
    )
    cols = ["rule_id", "client", "source", "kind", "key", "amount", "windows"]
    pd.testing.assert_frame_equal(base.lines[cols], by_file_url.lines[cols])
    pd.testing.assert_frame_equal(base.lines[cols], by_fsspec.lines[cols])


def test_duplicate_parquet_rows_name_both_rows(dataset: Path, tmp_path: Path) -> None:
    frame = pd.read_parquet(next((dataset / "usage").rglob("*.parquet")))
    frame = pd.concat([frame, frame.iloc[[3]]], ignore_index=True)
    frame.to_parquet(tmp_path / "dup.parquet")
    con = connect()
    source = ParquetUsage([tmp_path / "dup.parquet"], con)
    with pytest.raises(Exception) as err:
        allocate_stream(read_costs([dataset / "costs.csv"]), source,
                        load_rules(dataset / "rules.yaml"), con=con,
                        period=Period(START, START + pd.Timedelta(hours=HOURS)))
    message = str(err.value)
    assert "duplicate usage row" in message
    assert "dup.parquet:row 4" in message and f"row {len(frame)}" in message


def _bad_late_chunk(dataset: Path, tmp_path: Path) -> Path:
    """The dataset's usage with one negative value on its last day (a late chunk)."""
    bad = tmp_path / "late-bad"
    for part in sorted((dataset / "usage").rglob("*.parquet")):
        target = bad / part.relative_to(dataset / "usage")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(part.read_bytes())
    last = sorted(bad.rglob("*.parquet"))[-1]
    frame = pd.read_parquet(last)
    frame.loc[11, "cpu_seconds"] = -2.0
    frame.to_parquet(last)
    return last


def test_a_bad_row_in_a_late_chunk_stops_the_pipelined_run_with_its_name(
    dataset: Path, tmp_path: Path
) -> None:
    """The local engine splits the next chunk on a worker thread while the fold takes the
    last one: an input error there reaches the caller as itself, naming file, row and
    column, and the worker is gone afterwards (its connection usable again)."""
    import threading

    from tenantcost.errors import InputError

    last = _bad_late_chunk(dataset, tmp_path)
    con = connect()
    source = ParquetUsage([last.parent.parent], con)
    with pytest.raises(InputError) as err:
        allocate_stream(read_costs([dataset / "costs.csv"]), source,
                        load_rules(dataset / "rules.yaml"), con=con, chunk=pd.Timedelta("6h"),
                        period=Period(START, START + pd.Timedelta(hours=HOURS)))
    assert f"{last}" in str(err.value) and "row 12" in str(err.value)
    assert "cpu_seconds" in str(err.value)
    assert not [t for t in threading.enumerate() if t.name == "tenantcost-chunks"]
    assert con.execute("SELECT 41 + 1").fetchall() == [(42,)]


def test_a_caller_that_stops_early_stops_the_worker(dataset: Path) -> None:
    """Closing the engine's output stream after the first chunk ends the worker thread and
    gives the connection back: no chunk keeps running in the background."""
    import threading

    from tenantcost.engine import LocalEngine
    from tenantcost.engine.chunks import chunk_tasks
    from tenantcost.kinds import Detail
    from tenantcost.plan import plan_allocation
    from tenantcost.windows import chunk_bounds

    con = connect()
    period = Period(START, START + pd.Timedelta(hours=HOURS))
    plan = plan_allocation(read_costs([dataset / "costs.csv"]),
                           load_rules(dataset / "rules.yaml"), key=None, period=period)
    bounds = chunk_bounds(plan.period, pd.Timedelta("6h"), plan.cost_windows)
    tasks = chunk_tasks(plan, bounds, Detail.PERIOD, None)
    outputs = LocalEngine(con).run(ParquetUsage([dataset / "usage"], con), tasks)
    first = next(outputs)
    assert first.index == 0 and first.usage_rows > 0
    outputs.close()
    assert not [t for t in threading.enumerate() if t.name == "tenantcost-chunks"]
    assert con.execute("SELECT count(*) FROM range(3)").fetchall() == [(3,)]
