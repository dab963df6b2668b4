"""Usage from a real Prometheus: exact usage table, resets, gaps, unlabelled usage, errors.

The server is the Debian ``prometheus`` binary, backfilled with the history generated in
``prometheus_fixture.py``. Expected values are computed here from the generated *increments*
(not from counter values and not with Prometheus' formula): with a sample at both edges of
every window, ``increase`` is exactly the sum of the increments inside the window.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from pydantic import SecretStr

import tenantcost.readers.prometheus as prom
from tenantcost.config.rules import parse_rules
from tenantcost.config.sources import BasicAuth, PrometheusSource
from tenantcost.errors import InputError, InputWarning
from tenantcost.readers.prometheus import read_prometheus_usage
from tenantcost.tables import USAGE_KEY_COLUMNS

from .prometheus_fixture import (
    HOURS,
    METRICS,
    PER_HOUR,
    T0,
    History,
    PrometheusServer,
    free_port,
    running_prometheus,
    serve,
)

START = T0
END = T0 + pd.Timedelta(hours=HOURS)
HOUR = pd.Timedelta(hours=1)


@pytest.fixture(scope="session")
def prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrometheusServer]:
    """A real Prometheus serving the generated history (started once per session)."""
    with running_prometheus(tmp_path_factory.mktemp("prometheus")) as server:
        yield server


def source(server: PrometheusServer, **changes: object) -> PrometheusSource:
    return PrometheusSource.model_validate({"url": server.url, **changes})


def auth(username: str, password: str) -> BasicAuth:
    return BasicAuth(username=username, password=SecretStr(password))


def read_quietly(src: PrometheusSource, start: pd.Timestamp, end: pd.Timestamp) -> pd.DataFrame:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InputWarning)
        return read_prometheus_usage(src, start, end)


# --------------------------------------------------------------------------- expectations


def window_values(history: History, column: str) -> pd.DataFrame:
    """Per (window end, service, client): the summed usage of the series that have a value.

    A series has a value in a window when it was scraped at both edges (then the value is the
    sum of its increments in the window) and none when it has fewer than two samples in the
    window; the generated history never has anything in between.
    """
    rows = []
    for s in history.series:
        if s.family != METRICS[column]:
            continue
        for k in range(HOURS):
            lo, hi = k * PER_HOUR, (k + 1) * PER_HOUR
            if s.scraped[lo] and s.scraped[hi]:
                value = float(s.usage[lo + 1 : hi + 1].sum())
            else:
                assert s.scraped[lo : hi + 1].sum() < 2, "test design: partial windows"
                continue
            rows.append(
                {
                    "window_end": T0 + (k + 1) * HOUR,
                    "service": s.labels["service"],
                    "client": s.labels.get("client", ""),
                    column: value,
                }
            )
    frame = pd.DataFrame(rows)
    return frame.groupby(["window_end", "service", "client"], as_index=False)[column].sum()


def expected_usage(server: PrometheusServer) -> pd.DataFrame:
    """The usage table the reader must return, built from the generated increments."""
    requests = window_values(server.history, "requests")
    cpu = window_values(server.history, "cpu_seconds")
    wide = requests.merge(cpu, on=["window_end", "service", "client"], how="outer")
    first = np.where(wide["requests"].notna(), "requests", "cpu_seconds")
    ends = wide["window_end"].dt.strftime("%Y-%m-%dT%H:%M:%SZ")
    table = pd.DataFrame(
        {
            "window_start": (wide["window_end"] - HOUR).astype("datetime64[ns, UTC]"),
            "window_end": wide["window_end"].astype("datetime64[ns, UTC]"),
            "service": wide["service"].astype("str"),
            "client": wide["client"].astype("str"),
            "requests": wide["requests"].fillna(0.0).astype("float64"),
            "cpu_seconds": wide["cpu_seconds"].fillna(0.0).astype("float64"),
            "origin": (
                f"prometheus {server.url} query '" + pd.Series(first) + "' at " + ends
            ).astype("str"),
        }
    )
    return table.sort_values(USAGE_KEY_COLUMNS).reset_index(drop=True)


def value(usage: pd.DataFrame, hour: int, service: str, client: str, column: str) -> float:
    """The usage of the window ending ``hour`` hours after T0."""
    row = usage[
        (usage["window_end"] == T0 + hour * HOUR)
        & (usage["service"] == service)
        & (usage["client"] == client)
    ]
    assert len(row) == 1, row
    return float(row[column].iloc[0])


# --------------------------------------------------------------------------- the usage table


def test_usage_table_is_exact(prometheus: PrometheusServer) -> None:
    with pytest.warns(InputWarning) as caught:
        usage = read_prometheus_usage(source(prometheus), START, END)
    expected = expected_usage(prometheus)
    pd.testing.assert_frame_equal(usage, expected, check_exact=True)
    assert list(usage.columns) == [
        "window_start",
        "window_end",
        "service",
        "client",
        "requests",
        "cpu_seconds",
        "origin",
    ]
    assert str(usage["window_start"].dtype) == "datetime64[ns, UTC]"
    # 12 hours x 5 (service, client) pairs, minus the 3 hours in which import/c has no sample.
    assert len(usage) == 12 * 5 - 3
    assert sorted(str(w.message) for w in caught) == sorted(
        [
            f"prometheus {prometheus.url} query 'cpu_seconds': service 'import', client 'c': "
            "no sample for 3 of 12 1h windows (2024-03-04 06:00 to 09:00 UTC); those windows "
            "are reported, not filled: no row where no query has data, else 'cpu_seconds' is "
            "0 in that row",
            f"prometheus {prometheus.url} query 'requests': service 'api', client 'b': "
            "no sample for 2 of 12 1h windows (2024-03-04 01:00 to 03:00 UTC); those windows "
            "are reported, not filled: no row where no query has data, else 'requests' is 0 "
            "in that row",
            f"prometheus {prometheus.url} query 'requests': service 'import', client 'c': "
            "no sample for 3 of 12 1h windows (2024-03-04 06:00 to 09:00 UTC); those windows "
            "are reported, not filled: no row where no query has data, else 'requests' is 0 "
            "in that row",
        ]
    )


def test_a_gap_is_reported_not_filled(prometheus: PrometheusServer) -> None:
    with pytest.warns(InputWarning) as caught:
        usage = read_prometheus_usage(source(prometheus), START, END)
    gap = "service 'import', client 'c': no sample for 3 of 12 1h windows (2024-03-04 06:00 to"
    assert any(gap in str(w.message) for w in caught)
    import_c = usage[(usage["service"] == "import") & (usage["client"] == "c")]
    ends = set(import_c["window_end"])
    assert len(ends) == 9
    for hour in (7, 8, 9):  # windows 06:00-07:00, 07:00-08:00, 08:00-09:00
        assert T0 + hour * HOUR not in ends
    # The hour after the gap counts only its own usage, not what happened during the gap.
    c_cpu = next(
        s
        for s in prometheus.history.series
        if s.family == "app_cpu_seconds" and s.labels.get("client") == "c"
    )
    after = float(c_cpu.usage[9 * PER_HOUR + 1 : 10 * PER_HOUR + 1].sum())
    assert value(usage, 10, "import", "c", "cpu_seconds") == after


def test_gap_in_one_metric_keeps_the_row_for_the_other(prometheus: PrometheusServer) -> None:
    usage = read_quietly(source(prometheus), START, END)
    b_api = usage[(usage["service"] == "api") & (usage["client"] == "b")].set_index("window_end")
    hours = [T0 + 2 * HOUR, T0 + 3 * HOUR]
    assert (b_api.loc[hours, "requests"] == 0.0).all()
    assert (b_api.loc[hours, "cpu_seconds"] > 0).all()
    assert b_api.loc[hours, "origin"].str.contains("query 'cpu_seconds'").all()


def test_counter_reset_is_counted_once(prometheus: PrometheusServer) -> None:
    """Pod p2 of client a restarts at 04:20: the 04:00-05:00 window is still exact."""
    usage = read_quietly(source(prometheus), START, END)
    lo, hi = 4 * PER_HOUR, 5 * PER_HOUR
    for column, family in METRICS.items():
        pods = [
            s
            for s in prometheus.history.series
            if s.family == family and s.labels.get("client") == "a"
        ]
        truth = sum(float(s.usage[lo + 1 : hi + 1].sum()) for s in pods)
        naive = sum(float(s.values[hi] - s.values[lo]) for s in pods)
        assert any(s.restarts for s in pods)
        assert value(usage, 5, "api", "a", column) == truth
        assert naive != truth  # a plain difference would be wrong across the reset


def test_series_without_client_label_is_unattributed(prometheus: PrometheusServer) -> None:
    usage = read_quietly(source(prometheus), START, END)
    unlabelled = usage[usage["client"] == ""]
    assert set(unlabelled["service"]) == {"api"}
    assert len(unlabelled) == HOURS
    s = next(
        s
        for s in prometheus.history.series
        if s.family == "app_requests" and "client" not in s.labels
    )
    assert value(usage, 1, "api", "", "requests") == float(s.usage[1 : PER_HOUR + 1].sum())


def test_one_range_query_per_column_in_chunks(
    prometheus: PrometheusServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One request per column; chunked requests (5 window ends each) give the same table."""
    calls: list[tuple[object, object]] = []
    original = prom.PrometheusConnect.custom_query_range

    def counting(
        self: object, query: str, start_time: object, end_time: object, **kw: object
    ) -> Any:
        calls.append((start_time, end_time))
        return original(self, query, start_time=start_time, end_time=end_time, **kw)

    monkeypatch.setattr(prom.PrometheusConnect, "custom_query_range", counting)
    whole = read_quietly(source(prometheus), START, END)
    assert len(calls) == 2  # requests, cpu_seconds
    assert calls[0] == ((START + HOUR).to_pydatetime(), END.to_pydatetime())
    calls.clear()
    monkeypatch.setattr(prom, "MAX_POINTS", 5)
    chunked = read_quietly(source(prometheus), START, END)
    assert len(calls) == 2 * 3  # 12 window ends in chunks of 5, 5 and 2
    pd.testing.assert_frame_equal(chunked, whole, check_exact=True)


def test_range_query_equals_instant_queries(prometheus: PrometheusServer) -> None:
    """The claim behind one range query: it equals an instant query at every window end."""
    usage = read_quietly(source(prometheus), START, END)
    src = source(prometheus)
    client = prom.PrometheusConnect(url=prometheus.url)
    for column in src.queries:
        for hour in range(1, HOURS + 1):
            at = T0 + hour * HOUR
            answer = client.custom_query(src.render(column), params={"time": at.timestamp()})
            instant = {
                (r["metric"]["service"], r["metric"].get("client", "")): float(r["value"][1])
                for r in answer
            }
            rows = usage[usage["window_end"] == at]
            ranged = {
                (s, c): v
                for s, c, v in zip(rows["service"], rows["client"], rows[column], strict=True)
                if (s, c) in instant or v != 0.0
            }
            assert ranged == instant, (column, at)


def test_sub_period_and_custom_labels(prometheus: PrometheusServer) -> None:
    """Label names are configurable; a sub-period returns only its windows."""
    query = (
        "sum by ({client_label}, {service_label}) (label_replace(label_replace("
        'increase(app_requests_total[{window}]), "tenant", "$1", "client", "(.+)"), '
        '"app", "$1", "service", "(.*)"))'
    )
    src = source(
        prometheus,
        client_label="tenant",
        service_label="app",
        queries={"requests": query},
    )
    usage = read_quietly(src, T0 + 3 * HOUR, T0 + 5 * HOUR)
    whole = read_quietly(source(prometheus), START, END)
    expected = whole[whole["window_end"].isin([T0 + 4 * HOUR, T0 + 5 * HOUR])]
    columns = [*USAGE_KEY_COLUMNS, "requests"]
    pd.testing.assert_frame_equal(
        usage[columns], expected[columns].reset_index(drop=True), check_exact=True
    )


def test_thirty_minute_step_uses_the_window_placeholder(prometheus: PrometheusServer) -> None:
    usage = read_quietly(source(prometheus, step="30m"), T0, T0 + 2 * HOUR)
    assert sorted(set(usage["window_end"] - usage["window_start"])) == [pd.Timedelta("30min")]
    half = PER_HOUR // 2
    s = next(
        s
        for s in prometheus.history.series
        if s.family == "app_requests" and "client" not in s.labels
    )
    row = usage[(usage["client"] == "") & (usage["window_end"] == T0 + pd.Timedelta("30min"))]
    assert float(row["requests"].iloc[0]) == float(s.usage[1 : half + 1].sum())


# --------------------------------------------------------------------------- errors


def test_bad_promql_quotes_prometheus(prometheus: PrometheusServer) -> None:
    src = source(prometheus, queries={"requests": "sum by (client, service) (increase(x[1h]"})
    with pytest.raises(InputError) as info:
        read_prometheus_usage(src, START, END)
    text = str(info.value)
    assert text.startswith(f"prometheus {prometheus.url}, query 'requests': ")
    assert "Prometheus rejected the query (HTTP 400, bad_data," in text
    assert "parse error" in text
    assert "query: sum by (client, service) (increase(x[1h]" in text


def test_unreachable_url() -> None:
    port = free_port()  # nothing listens there
    src = PrometheusSource(url=f"http://127.0.0.1:{port}", timeout_seconds=5)
    with pytest.raises(InputError) as info:
        read_prometheus_usage(src, START, END)
    assert (
        str(info.value) == f"prometheus http://127.0.0.1:{port}: cannot connect: Connection refused"
    )


def test_series_without_service_label(prometheus: PrometheusServer) -> None:
    src = source(
        prometheus, queries={"cpu_seconds": "sum by (client) (increase(app_cpu_seconds_total[1h]))"}
    )
    with pytest.raises(InputError, match=r"query 'cpu_seconds': a series has no 'service' label"):
        read_prometheus_usage(src, START, END)


def test_nan_is_an_error(prometheus: PrometheusServer) -> None:
    src = source(
        prometheus,
        queries={"requests": "sum by (client, service) (increase(app_requests_total[1h])) * NaN"},
    )
    with pytest.raises(InputError, match=r"value NaN for service '\w+', client .* at 2024-03-04T"):
        read_prometheus_usage(src, START, END)


def test_unaggregated_series_are_an_error(prometheus: PrometheusServer) -> None:
    src = source(prometheus, queries={"requests": "increase(app_requests_total[1h])"})
    with pytest.raises(InputError, match=r"two series have the same service 'api' and client"):
        read_prometheus_usage(src, START, END)


def test_no_data_is_a_warning(prometheus: PrometheusServer) -> None:
    src = source(
        prometheus, queries={"requests": "sum by (client, service) (increase(nothing_total[1h]))"}
    )
    with pytest.warns(InputWarning, match=r"query 'requests': no data between 2024-03-04T00:00"):
        usage = read_prometheus_usage(src, START, END)
    assert usage.empty
    assert list(usage.columns) == [*USAGE_KEY_COLUMNS, "requests", "origin"]


# --------------------------------------------------------------------------- authentication

WEB_CONFIG = (
    "basic_auth_users:\n"
    # bcrypt (cost 4) of the password 's3cret'
    "  alice: $2b$04$abcdefghijklmnopqrstuuLZYjhNQAOdpbzt4WxWlUHjv1wsyH5DG\n"
)


@pytest.fixture(scope="module")
def protected(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A second, empty Prometheus that requires basic auth (alice / s3cret)."""
    workdir = tmp_path_factory.mktemp("prometheus-auth")
    data = workdir / "data"
    data.mkdir()
    with serve(data, workdir, web_config=WEB_CONFIG, probe_auth=("alice", "s3cret")) as (url, _):
        yield url


def test_basic_auth(protected: str) -> None:
    good = PrometheusSource(url=protected, basic_auth=auth("alice", "s3cret"))
    with pytest.warns(InputWarning, match="no data"):
        assert read_prometheus_usage(good, START, END).empty
    bad = PrometheusSource(url=protected, basic_auth=auth("alice", "nope"))
    with pytest.raises(InputError, match=r"HTTP 401: access refused; credentials sent: basic_auth"):
        read_prometheus_usage(bad, START, END)
    header = PrometheusSource(url=protected, headers={"Authorization": "Basic YWxpY2U6czNjcmV0"})
    with pytest.warns(InputWarning, match="no data"):
        assert read_prometheus_usage(header, START, END).empty


def test_credentials_never_appear_in_messages(protected: str) -> None:
    url = protected.replace("http://", "http://alice:wrong@")
    with pytest.raises(InputError) as info:
        read_prometheus_usage(PrometheusSource(url=url), START, END)
    assert "wrong" not in str(info.value)
    assert str(info.value).startswith(f"prometheus {protected}: HTTP 401")


# --------------------------------------------------------------------------- configuration


def test_default_queries_render_as_documented() -> None:
    src = PrometheusSource(url="http://prometheus:9090/")
    assert src.url == "http://prometheus:9090"
    assert src.render("requests") == "sum by (client, service) (increase(app_requests_total[1h]))"
    assert (
        src.render("cpu_seconds")
        == "sum by (client, service) (increase(app_cpu_seconds_total[1h]))"
    )
    assert src.step_timedelta == pd.Timedelta(hours=1)
    assert "s3cret" not in repr(
        PrometheusSource(url="http://p:9090", basic_auth=auth("u", "s3cret"))
    )


RULES = {"rules": [{"id": "r1", "effective_from": "2024-01-01", "workloads": []}]}


@pytest.mark.parametrize(
    ("prometheus_config", "where", "message"),
    [
        ({}, "sources.prometheus.url", "required"),
        ({"url": "prometheus:9090"}, "sources.prometheus.url", "must be an http:// or https://"),
        ({"url": "http://p", "step": "1h30m"}, "sources.prometheus.step", "one unit"),
        ({"url": "http://p", "stepp": "1h"}, "sources.prometheus", "unknown key 'stepp'"),
        (
            {"url": "http://p", "client_label": "client-id"},
            "sources.prometheus.client_label",
            "not a Prometheus label name",
        ),
        (
            {"url": "http://p", "queries": {}},
            "sources.prometheus.queries",
            "at least one query is required",
        ),
        (
            {"url": "http://p", "queries": {"client": "up"}},
            "sources.prometheus.queries.client",
            "'client' is a key column",
        ),
        (
            {"url": "http://p", "queries": {"requests": "increase(x[{windw}])"}},
            "sources.prometheus.queries.requests",
            "unknown placeholder '{windw}' (did you mean '{window}'?)",
        ),
        (
            {"url": "http://p", "timeout_seconds": 0},
            "sources.prometheus.timeout_seconds",
            "greater than 0",
        ),
        (
            {"url": "http://p", "basic_auth": {"username": "u"}},
            "sources.prometheus.basic_auth.password",
            "required",
        ),
        (
            {
                "url": "http://p",
                "basic_auth": {"username": "u", "password": "p"},
                "headers": {"authorization": "Bearer x"},
            },
            "sources.prometheus.basic_auth",
            "cannot be combined with an Authorization header",
        ),
    ],
)
def test_config_validation(prometheus_config: dict[str, object], where: str, message: str) -> None:
    with pytest.raises(InputError) as info:
        parse_rules({**RULES, "sources": {"prometheus": prometheus_config}}, origin="rules.yaml")
    assert info.value.where == where
    assert message in info.value.message


def test_config_in_rule_file() -> None:
    ruleset = parse_rules(
        {
            **RULES,
            "sources": {
                "prometheus": {
                    "url": "https://prom.example:9090",
                    "step": "30m",
                    "queries": {"requests": "sum by (client, service) (increase(r[{window}]))"},
                }
            },
        }
    )
    assert ruleset.sources.prometheus is not None
    assert ruleset.sources.prometheus.render("requests") == (
        "sum by (client, service) (increase(r[30m]))"
    )
    assert parse_rules(RULES).sources.prometheus is None


def test_config_survives_loading_from_a_file(tmp_path: Path) -> None:
    ruleset = parse_rules(
        {**RULES, "sources": {"prometheus": {"url": "http://p:9090"}}}, base_dir=tmp_path
    )
    assert ruleset.sources.prometheus is not None


@pytest.mark.parametrize(
    ("start", "end", "message"),
    [
        (END, START, "is not after its start"),
        (START, START + pd.Timedelta(minutes=90), "is not a whole number of 1h windows"),
        (START + pd.Timedelta(milliseconds=5), END, "must be a whole second"),
        ("yesterday-ish", END, "not a date or time"),
    ],
)
def test_period_validation(start: object, end: object, message: str) -> None:
    src = PrometheusSource(url="http://127.0.0.1:9")
    with pytest.raises(InputError, match=message):
        read_prometheus_usage(src, start, end)


def test_naive_times_are_utc(prometheus: PrometheusServer) -> None:
    naive = read_quietly(source(prometheus), START.tz_localize(None), END.tz_localize(None))
    pd.testing.assert_frame_equal(naive, read_quietly(source(prometheus), START, END))


def test_allocate_reads_usage_from_prometheus_end_to_end(
    prometheus: PrometheusServer, tmp_path: Path
) -> None:
    """A rule file with ``sources.prometheus`` and no usage file: allocate pulls the usage."""
    import json

    from typer.testing import CliRunner

    from tenantcost.cli import app

    hours = pd.date_range(START, END - HOUR, freq="h", tz="UTC")
    costs = pd.DataFrame(
        {
            "window_start": [h.isoformat() for h in hours for _ in range(2)],
            "window_end": [(h + HOUR).isoformat() for h in hours for _ in range(2)],
            "cluster": "c1",
            "namespace": "saas",
            "controller_kind": "deployment",
            "controller": ["api", "import"] * len(hours),
            "total_cost": [0.5, 0.25] * len(hours),
        }
    )
    costs.to_csv(tmp_path / "costs.csv", index=False)
    (tmp_path / "rules.yaml").write_text(
        f"""
sources:
  costs: [costs.csv]
  prometheus: {{url: "{prometheus.url}"}}
rules:
  - id: v1
    effective_from: 2024-01-01
    workloads:
      - {{match: {{controller: api}}, class: shared, service: api, key: requests}}
      - {{match: {{controller: import}}, class: shared, service: import, key: cpu_seconds}}
"""
    )
    result = CliRunner().invoke(
        app, ["allocate", "--config", str(tmp_path / "rules.yaml"), "--format", "json"]
    )
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["gap"] == 0
    assert doc["reference_total"] == HOURS * 750_000
    # Expected: the same allocation from the usage table read directly.
    usage = read_quietly(source(prometheus), START, END)
    api = usage[usage["service"] == "api"]
    per_hour = api.groupby("window_start")["requests"].transform("sum")
    a_share = (api["requests"] / per_hour)[api["client"] == "a"].sum()
    a_api = next(
        line["amount"]
        for c in doc["clients"]
        if c["client"] == "a"
        for line in c["lines"]
        if line["source"] == "api"
    )
    assert abs(a_api - a_share * 500_000) <= HOURS  # at most one unit per hour of rounding
    # usage without a client label is kept as unattributed, not dropped
    assert any(d["cause"] == "usage without client id" for d in doc["unattributed_detail"])


# --------------------------------------------------------------------------- gauges

LEVEL = "sum by ({client_label}, {service_label}) (app_cpu_seconds_total)"
"""A level at each instant: the CPU counters' raw values read as a gauge (exact quarters)."""


def expected_levels(server: PrometheusServer, hours: range) -> dict[tuple, str]:
    """(hour, service, client) -> the sum of the pair's counter values at that instant."""
    out: dict[tuple, float] = {}
    for s in server.history.series:
        if s.family != METRICS["cpu_seconds"]:
            continue
        for hour in hours:
            key = (hour, s.labels["service"], s.labels.get("client", ""))
            out[key] = out.get(key, 0.0) + float(s.values[hour * PER_HOUR])
    return {k: repr(v).removesuffix(".0") for k, v in out.items()}


def test_a_gauge_query_gives_one_sample_per_series_and_step(prometheus: PrometheusServer) -> None:
    src = source(prometheus, queries={"level": LEVEL})
    samples = prom.read_prometheus_samples(src, ["level"], START, START + 4 * HOUR)
    got = {
        (int((t - START.value // 1000) // 3_600_000_000), s, c): v
        for t, s, c, v in zip(samples["t_us"], samples["service"], samples["client"],
                              samples["value"], strict=True)
    }  # fmt: skip
    assert got == expected_levels(prometheus, range(4))
    assert set(samples["metric"]) == {"level"}


def test_allocate_splits_by_a_gauge_from_prometheus(
    prometheus: PrometheusServer, tmp_path: Path
) -> None:
    """``metrics:`` declares ``level`` a gauge: allocate samples it hourly from Prometheus and
    splits the api by each client's level-hours (a level held for the hour after its
    sample)."""
    import json

    from typer.testing import CliRunner

    from tenantcost.cli import app

    hours = pd.date_range(START, START + 3 * HOUR, freq="h", tz="UTC", inclusive="left")
    pd.DataFrame(
        {
            "window_start": [h.isoformat() for h in hours],
            "window_end": [(h + HOUR).isoformat() for h in hours],
            "cluster": "c1",
            "namespace": "saas",
            "controller_kind": "deployment",
            "controller": "api",
            "total_cost": 0.5,
        }
    ).to_csv(tmp_path / "costs.csv", index=False)
    (tmp_path / "rules.yaml").write_text(f"""
sources:
  costs: [costs.csv]
  prometheus:
    url: "{prometheus.url}"
    queries: {{requests: "sum by ({{client_label}}, {{service_label}}) (increase(app_requests_total[{{window}}]))", level: "{LEVEL}"}}
metrics:
  level: {{kind: gauge, unit: CPU-second, stale_after: 1h}}
rules:
  - id: v1
    effective_from: 2024-01-01
    workloads:
      - {{match: {{controller: api}}, class: shared, service: api, key: level}}
      - {{match: {{controller: import}}, class: shared, service: import, key: requests}}
""")  # noqa: E501
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InputWarning)  # the fixture's gaps in requests
        result = CliRunner().invoke(
            app, ["allocate", "--config", str(tmp_path / "rules.yaml"), "--format", "json"]
        )
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["gap"] == 0
    levels = expected_levels(prometheus, range(3))
    measure = {
        c["client"]: line["measure"]
        for c in doc["clients"]
        for line in c["lines"]
        if line["source"] == "api"
    }
    for client in ("a", "b"):
        assert measure[client] == sum(float(levels[(h, "api", client)]) for h in range(3))
