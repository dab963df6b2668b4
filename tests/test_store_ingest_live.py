"""`tenantcost ingest` from live sources on SQLite and a real PostgreSQL 15: usage from a real
Prometheus (`ingest usage --prometheus`, settings from --config or the stored rule file),
costs from an HTTP server answering like OpenCost (`ingest costs --opencost-url`), and the
hourly job `ingest --since-last` (every complete hour since the last ingested one, per source;
the store then holds what one ingest of the whole span would hold)."""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from tenantcost.cli import app
from tenantcost.config.sources import PrometheusSource
from tenantcost.errors import InputWarning
from tenantcost.readers.costs import read_costs
from tenantcost.readers.prometheus import read_prometheus_usage
from tenantcost.split import connect
from tenantcost.store.data import DataDir, Store
from tenantcost.store.engine import open_engine
from tenantcost.store.settings import resolve_settings
from tenantcost.store.stored import stored_costs, stored_usage
from tenantcost.tables import USAGE_KEY_COLUMNS
from tenantcost.windows import Period

from .opencost_server import FileScenario, GeneratedScenario, OpenCostServer, running
from .prometheus_fixture import HOURS, T0, PrometheusServer, running_prometheus

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "saas-three-clients"
HOUR = pd.Timedelta(hours=1)
END = T0 + HOURS * HOUR
runner = CliRunner()


def z(ts: pd.Timestamp) -> str:
    return ts.strftime("%Y-%m-%dT%H:%M:%SZ")


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrometheusServer]:
    """A real Prometheus serving the generated 12 hours of counters."""
    with running_prometheus(tmp_path_factory.mktemp("prometheus")) as server:
        yield server


@pytest.fixture(autouse=True)
def _no_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    """Loopback requests never go through a proxy set in the environment."""
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")


@pytest.fixture
def store(store_url: str, tmp_path: Path) -> Iterator[tuple[str, Path]]:
    assert runner.invoke(app, ["db", "upgrade", "--db", store_url]).exit_code == 0
    yield store_url, tmp_path / "data"


def cli(store: tuple[str, Path], *args: str):
    url, data = store
    return runner.invoke(app, [*args, "--db", url, "--data", str(data)])


def rules_file(folder: Path, prometheus: PrometheusServer | None) -> Path:
    """A rule file with sources.prometheus (when given) and one rule version, naming both
    services the Prometheus serves (a service no stored version names is refused)."""
    source = f'  prometheus: {{url: "{prometheus.url}"}}\n' if prometheus else "  {}\n"
    path = folder / "rules.yaml"
    path.write_text(
        "sources:\n" + source + "rules:\n  - id: v1\n    effective_from: 2024-01-01\n"
        "    workloads:\n"
        "      - {match: {controller: api}, class: shared, service: api, key: requests}\n"
        "      - {match: {controller: import}, class: shared, service: import, key: requests}\n"
    )
    return path


def stored_usage_frame(store: tuple[str, Path], period: Period) -> pd.DataFrame:
    url, data = store
    handle = Store(open_engine(resolve_settings(db=url, environ={})), DataDir(str(data)))
    con = connect()
    source = stored_usage(handle, period, con)
    handle.engine.dispose()
    assert source is not None
    frame = con.execute(source.relation(con)).df()
    frame["window_start"] = frame["window_start"].astype("datetime64[ns, UTC]")
    frame["window_end"] = frame["window_end"].astype("datetime64[ns, UTC]")
    return frame.sort_values(USAGE_KEY_COLUMNS).reset_index(drop=True)


def stored_cost_frame(store: tuple[str, Path], period: Period) -> pd.DataFrame:
    url, data = store
    handle = Store(open_engine(resolve_settings(db=url, environ={})), DataDir(str(data)))
    costs = stored_costs(handle, period)
    handle.engine.dispose()
    return costs


def expected_usage(
    server: PrometheusServer, start: pd.Timestamp, end: pd.Timestamp
) -> pd.DataFrame:
    """What `allocate` reads from the same Prometheus, without the origin column."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InputWarning)
        frame = read_prometheus_usage(
            PrometheusSource.model_validate({"url": server.url}), start, end
        )
    return frame.drop(columns=["origin"]).sort_values(USAGE_KEY_COLUMNS).reset_index(drop=True)


def without_origin(costs: pd.DataFrame) -> pd.DataFrame:
    return costs.drop(columns=["origin"]).reset_index(drop=True)


# --------------------------------------------------------------------------- Prometheus


def test_prometheus_usage_from_the_config_and_from_the_stored_rule_file(
    store, prometheus, tmp_path
):
    rules = rules_file(tmp_path, prometheus)
    period = ("--from", z(T0), "--to", z(END))
    done = cli(store, "ingest", "usage", "--prometheus", "--config", str(rules), *period)
    assert done.exit_code == 0, done.output
    assert done.stdout.startswith("usage: batch ")
    assert f"windows {z(T0)} to {z(END)}" in done.stdout
    expected = expected_usage(prometheus, T0, END)
    assert f"{len(expected)} rows" in done.stdout
    pd.testing.assert_frame_equal(stored_usage_frame(store, Period(T0, END)), expected)
    # Without --config: sources.prometheus of the latest stored rule file.
    missing = cli(store, "ingest", "usage", "--prometheus", *period)
    assert missing.exit_code == 2
    assert "the store holds no rules" in missing.stderr and "--config" in missing.stderr
    assert cli(store, "rules", "load", str(rules)).exit_code == 0
    again = cli(store, "ingest", "usage", "--prometheus", *period)
    assert again.exit_code == 0, again.output
    assert f"replaced {expected[['window_start', 'service']].drop_duplicates().shape[0]} cell(s)" \
        in again.stdout  # fmt: skip
    pd.testing.assert_frame_equal(stored_usage_frame(store, Period(T0, END)), expected)


def test_prometheus_mistakes_are_one_line(store, prometheus, tmp_path):
    rules = rules_file(tmp_path, prometheus)
    plain = tmp_path / "plain"
    plain.mkdir()
    period = ("--from", z(T0), "--to", z(END))
    cases = [
        (("--prometheus", "--usage", str(EXAMPLE / "usage.csv"), *period),
         "give either --usage or --prometheus, not both"),
        (period, "give --usage PATH... or --prometheus"),
        (("--prometheus", "--config", str(rules)), "--prometheus needs a period"),
        (("--usage", str(EXAMPLE / "usage.csv"), "--config", str(rules)),
         "--config applies to --prometheus"),
        (("--prometheus", "--config", str(rules_file(plain, None)), *period),
         "--prometheus: sources.prometheus is not set in"),
    ]  # fmt: skip
    for args, message in cases:
        done = cli(store, "ingest", "usage", *args)
        assert done.exit_code == 2, (args, done.output)
        assert done.stderr.startswith("error: ") and message in done.stderr, done.stderr
        assert done.stderr.count("\n") == 1


def test_since_last_prometheus_ingests_the_complete_hours_since_the_last(
    store, prometheus, tmp_path
):
    rules = rules_file(tmp_path, prometheus)
    assert cli(store, "rules", "load", str(rules)).exit_code == 0
    first = cli(store, "ingest", "--since-last", "--prometheus", "--now", z(T0 + 3 * HOUR))
    assert first.exit_code == 2
    assert first.stderr == (
        f"error: --since-last: no usage ingested from prometheus {prometheus.url} yet, so there "
        "is no last hour; ingest the first period with `tenantcost ingest usage --prometheus "
        "--from T --to T` (or --month M), or give --lookback HOURS\n"
    )
    six = T0 + 6 * HOUR
    assert cli(store, "ingest", "usage", "--prometheus", "--from", z(T0), "--to",
               z(six)).exit_code == 0  # fmt: skip
    # now = 12:40 UTC: the complete hours are 06:00 to 12:00
    done = cli(store, "ingest", "--since-last", "--prometheus", "--now",
               z(END + pd.Timedelta(minutes=40)))  # fmt: skip
    assert done.exit_code == 0, done.output
    assert f"windows {z(six)} to {z(END)}" in done.stdout
    pd.testing.assert_frame_equal(
        stored_usage_frame(store, Period(T0, END)), expected_usage(prometheus, T0, END)
    )
    again = cli(store, "ingest", "--since-last", "--now", z(END + pd.Timedelta(minutes=59)))
    assert again.exit_code == 0, again.output  # no flag: the rule file's live sources
    assert again.stdout == (
        f"usage: up to date (last window ends {z(END)}, last complete hour ends {z(END)}); "
        "nothing to do\n"
    )


# --------------------------------------------------------------------------- OpenCost


def test_opencost_costs_equal_the_files_costs(store):
    with running(FileScenario.from_files(EXAMPLE / "costs.json")) as server:
        done = cli(store, "ingest", "costs", "--opencost-url", server.url, "--from",
                   "2026-11-03T10:00:00Z", "--to", "2026-11-03T11:00:00Z")  # fmt: skip
    assert done.exit_code == 0, done.output
    assert " committed (replace): 8 rows, 8 (window, workload) cells, 1 file(s)" in done.stdout
    pd.testing.assert_frame_equal(
        without_origin(stored_cost_frame(store, Period.month("2026-11"))),
        without_origin(read_costs([EXAMPLE / "costs.json"])),
    )
    both = cli(store, "ingest", "costs", "--opencost-url", "http://x", "--costs",
               str(EXAMPLE / "costs.json"))  # fmt: skip
    assert both.exit_code == 2 and "give either --costs or --opencost-url" in both.stderr
    period = cli(store, "ingest", "costs", "--opencost-url", "http://x")
    assert period.exit_code == 2 and "--opencost-url needs a period" in period.stderr


def expected_costs(server: OpenCostServer, start: pd.Timestamp, end: pd.Timestamp) -> float:
    from .opencost_server import expected_total

    return expected_total(server.scenario, start, end)


def test_since_last_opencost_and_prometheus_together(store, prometheus, tmp_path):
    """Costs and usage each continue from their own last hour; twice is a no-op."""
    rules = rules_file(tmp_path, prometheus)
    assert cli(store, "rules", "load", str(rules)).exit_code == 0
    with running(GeneratedScenario()) as server:
        costs_first = ("--from", z(T0), "--to", z(T0 + 2 * HOUR))
        usage_first = ("--from", z(T0), "--to", z(T0 + 5 * HOUR))
        assert cli(store, "ingest", "costs", "--opencost-url", server.url,
                   *costs_first).exit_code == 0  # fmt: skip
        assert cli(store, "ingest", "usage", "--prometheus", *usage_first).exit_code == 0
        now = z(END + pd.Timedelta(minutes=5))
        done = cli(store, "ingest", "--since-last", "--opencost-url", server.url,
                   "--prometheus", "--now", now)  # fmt: skip
        assert done.exit_code == 0, done.output
        costs_line, usage_line = done.stdout.splitlines()
        assert costs_line.startswith("costs: batch ")
        assert f"windows {z(T0 + 2 * HOUR)} to {z(END)}" in costs_line
        assert usage_line.startswith("usage: batch ")
        assert f"windows {z(T0 + 5 * HOUR)} to {z(END)}" in usage_line
        windows = [r.params["window"] for r in server.requests]
        assert windows[-1] == f"{z(T0 + 2 * HOUR)},{z(END)}"
        costs = stored_cost_frame(store, Period(T0, END))
        assert costs["window_start"].nunique() == HOURS
        total = expected_costs(server, T0, END)
        assert abs(costs["total_cost"].sum() - total) < 1e-9
        again = cli(store, "ingest", "--since-last", "--opencost-url", server.url,
                    "--prometheus", "--now", now)  # fmt: skip
        assert again.exit_code == 0, again.output
        assert [line.split(":")[0] + ": up to date" in line for line in again.stdout.splitlines()
                ] == [True, True]  # fmt: skip
    pd.testing.assert_frame_equal(
        stored_usage_frame(store, Period(T0, END)), expected_usage(prometheus, T0, END)
    )


def test_since_last_is_kept_per_source(store, prometheus, tmp_path):
    """Two clusters' OpenCost: one pulled on time never moves the other's last hour, so the
    late one is asked for every hour it has not delivered; a usage file beyond Prometheus'
    last hour (the meter, OTLP) never makes the Prometheus pull skip hours either."""
    rules = rules_file(tmp_path, prometheus)
    assert cli(store, "rules", "load", str(rules)).exit_code == 0
    first = ("--from", z(T0), "--to", z(T0 + 2 * HOUR))
    now = z(T0 + 6 * HOUR + pd.Timedelta(minutes=5))
    with running(GeneratedScenario()) as east, running(GeneratedScenario()) as west:
        for server in (east, west):
            done = cli(store, "ingest", "costs", "--opencost-url", server.url, *first)
            assert done.exit_code == 0, done.output
        on_time = cli(store, "ingest", "--since-last", "--opencost-url", east.url, "--now", now)
        assert on_time.exit_code == 0, on_time.output
        assert east.requests[-1].params["window"] == f"{z(T0 + 2 * HOUR)},{z(T0 + 6 * HOUR)}"
        late = cli(store, "ingest", "--since-last", "--opencost-url", west.url, "--now", now)
        assert late.exit_code == 0, late.output
        assert f"windows {z(T0 + 2 * HOUR)} to {z(T0 + 6 * HOUR)}" in late.stdout
        assert west.requests[-1].params["window"] == f"{z(T0 + 2 * HOUR)},{z(T0 + 6 * HOUR)}"
    assert cli(store, "ingest", "usage", "--prometheus", *first).exit_code == 0
    meter = tmp_path / "meter.csv"  # a pushed hour after Prometheus' last one
    meter.write_text("window_start,window_end,service,client,requests,cpu_seconds\n"
                     f"{z(T0 + 5 * HOUR)},{z(T0 + 6 * HOUR)},api,acme,3,1.5\n")  # fmt: skip
    pushed = cli(store, "ingest", "usage", "--usage", str(meter))
    assert pushed.exit_code == 0, pushed.output
    pulled = cli(store, "ingest", "--since-last", "--prometheus", "--now", now)
    assert pulled.exit_code == 0, pulled.output
    assert f"windows {z(T0 + 2 * HOUR)} to {z(T0 + 6 * HOUR)}" in pulled.stdout


def test_since_last_mistakes(store, tmp_path):
    rules = rules_file(tmp_path, None)
    assert cli(store, "rules", "load", str(rules)).exit_code == 0
    none = cli(store, "ingest", "--since-last")
    assert none.exit_code == 2 and "--since-last: no live source" in none.stderr
    nothing = cli(store, "ingest", "--since-last", "--opencost-url", "http://127.0.0.1:9")
    assert nothing.exit_code == 2
    assert "no costs ingested from OpenCost API http://127.0.0.1:9 yet" in nothing.stderr
    misplaced = runner.invoke(app, ["ingest", "--db", store[0], "usage", "--usage",
                                    str(EXAMPLE / "usage.csv")])  # fmt: skip
    assert misplaced.exit_code == 2
    assert "options before `usage` belong to `ingest --since-last`" in misplaced.stderr
    bare = runner.invoke(app, ["ingest"])
    assert "ingest --since-last" in bare.output
    bad_now = cli(store, "ingest", "--since-last", "--now", "yesterday")
    assert bad_now.exit_code == 2 and "--now: not an ISO 8601 time" in bad_now.stderr


def test_since_last_lookback_starts_and_re_reads_recent_hours(store):
    """The chart's hourly pull (`--lookback 6`): a source never pulled starts 6 hours back, a
    later run asks for its last 6 complete hours again (plus any missed since), and the store
    holds each hour once (a `replace` batch of the same hours changes nothing)."""
    with running(GeneratedScenario()) as server:
        first_now = z(T0 + 6 * HOUR + pd.Timedelta(minutes=5))
        first = cli(store, "ingest", "--since-last", "--opencost-url", server.url,
                    "--lookback", "6", "--now", first_now)  # fmt: skip
        assert first.exit_code == 0, first.output
        assert f"windows {z(T0)} to {z(T0 + 6 * HOUR)}" in first.stdout
        later_now = z(T0 + 9 * HOUR + pd.Timedelta(minutes=5))
        later = cli(store, "ingest", "--since-last", "--opencost-url", server.url,
                    "--lookback", "6", "--now", later_now)  # fmt: skip
        assert later.exit_code == 0, later.output
        assert server.requests[-1].params["window"] == f"{z(T0 + 3 * HOUR)},{z(T0 + 9 * HOUR)}"
        costs = stored_cost_frame(store, Period(T0, T0 + 9 * HOUR))
        assert costs["window_start"].nunique() == 9
        assert abs(costs["total_cost"].sum() - expected_costs(server, T0, T0 + 9 * HOUR)) < 1e-9
    misplaced = runner.invoke(app, ["ingest", "--lookback", "6", "costs"])
    assert misplaced.exit_code == 2 and "belong to `ingest --since-last`" in misplaced.stderr


def test_a_declared_gauge_is_sampled_into_its_own_batch(store, prometheus, tmp_path):
    """`ingest usage --prometheus` with a gauge the store declares and the rule file queries:
    the counters' batch, then a batch of samples (one per series and hour), which `run`'s
    reader integrates (each level held for its hour, stale_after 1h)."""
    query = "sum by ({client_label}, {service_label}) (app_cpu_seconds_total)"
    rules = tmp_path / "rules.yaml"
    rules.write_text(
        f'sources:\n  prometheus: {{url: "{prometheus.url}", queries: {{requests: "sum by '
        '({client_label}, {service_label}) (increase(app_requests_total[{window}]))", '
        f'level: "{query}"}}}}\n'
        "metrics:\n  level: {kind: gauge, stale_after: 1h}\n"
        "rules:\n  - id: v1\n    effective_from: 2024-01-01\n    workloads:\n"
        "      - {match: {controller: api}, class: shared, service: api, key: level}\n"
        "      - {match: {controller: import}, class: shared, service: import, key: requests}\n"
    )
    assert cli(store, "rules", "load", str(rules)).exit_code == 0
    end = T0 + pd.Timedelta(hours=3)
    done = cli(store, "ingest", "usage", "--prometheus", "--from", z(T0), "--to", z(end))
    assert done.exit_code == 0, done.output
    lines = done.stdout.strip().splitlines()
    assert len(lines) == 2 and all(line.startswith("usage: batch ") for line in lines)
    assert "0 (window, service) cells, 0 file(s)" in lines[1]  # 3 hours x 5 series of samples
    assert " 15 rows" in lines[1], lines[1]
    frame = stored_usage_frame(store, Period(T0, end))
    a = frame[(frame["service"] == "api") & (frame["client"] == "a")]
    levels = PrometheusSource.model_validate({"url": prometheus.url, "queries": {"l": query}})
    from tenantcost.readers.prometheus import read_prometheus_samples

    samples = read_prometheus_samples(levels, ["l"], T0, end)
    mine = samples[(samples["service"] == "api") & (samples["client"] == "a")]
    assert sorted(a["level"].astype(float)) == sorted(mine["value"].astype(float))
