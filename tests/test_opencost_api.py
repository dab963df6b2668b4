"""OpenCost Allocation API client against a real HTTP server on 127.0.0.1.

The server (tests/opencost_server.py) answers from OpenCost's published sample responses, from
the bundled example and from a generated scenario, and can be switched into OpenCost's (and its
proxies') failure modes.
Time limits are small so the whole file runs in a few seconds.
"""

from __future__ import annotations

import json
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from typer.testing import CliRunner

from tenantcost.cli import app
from tenantcost.collect import opencost_source
from tenantcost.config.rules import load_rules, parse_rules
from tenantcost.config.sources import DEFAULT_OPENCOST_AGGREGATE, OpenCostSource
from tenantcost.errors import InputError, InputWarning
from tenantcost.readers.costs import read_costs
from tenantcost.readers.opencost_api import (
    collect_allocations,
    fetch_allocations,
    plan_requests,
    raw_file_name,
)
from tenantcost.readers.opencost_json import parse_allocation_response, read_opencost_json
from tests.opencost_server import (
    FileScenario,
    GeneratedScenario,
    OpenCostServer,
    expected_total,
    running,
)

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "saas-three-clients"
REFERENCE = Path(__file__).parent / "data" / "opencost"
ALLOCATION_EXAMPLE = REFERENCE / "opencost-website_allocation-example-output.json"
SWAGGER = REFERENCE / "opencost_docs_swagger.json"

T0 = pd.Timestamp("2026-11-03T10:00:00Z")
HOUR = pd.Timedelta(hours=1)
runner = CliRunner()


@pytest.fixture(autouse=True)
def _no_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    """Loopback requests never go through a proxy set in the environment."""
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")


@pytest.fixture
def server() -> Iterator[OpenCostServer]:
    with running(GeneratedScenario()) as srv:
        yield srv


def fast(srv: OpenCostServer, **settings: Any) -> OpenCostSource:
    """A source with test-sized limits (timeouts and backoff in tenths of a second)."""
    values: dict[str, Any] = {
        "url": srv.url,
        "timeout_seconds": 1.0,
        "total_timeout_seconds": 3.0,
        "retries": 3,
        "backoff_seconds": 0.01,
    }
    values.update(settings)
    return OpenCostSource(**values)


def fails(source: OpenCostSource, start: pd.Timestamp, end: pd.Timestamp) -> str:
    with pytest.raises(InputError) as info:
        fetch_allocations(source, start, end)
    text = str(info.value)
    assert "\n" not in text
    return text


def asked(start: pd.Timestamp, end: pd.Timestamp) -> str:
    return f"window={start:%Y-%m-%dT%H:%M:%SZ},{end:%Y-%m-%dT%H:%M:%SZ}"


def without_origin(frame: pd.DataFrame) -> pd.DataFrame:
    return frame.drop(columns="origin")


# --------------------------------------------------------------------------- requests


def test_parameters_sent(server: OpenCostServer) -> None:
    frame = fetch_allocations(fast(server), T0, T0 + 3 * HOUR)
    assert len(server.requests) == 1
    request = server.requests[0]
    assert request.path == "/allocation/compute"
    assert request.params == {
        "window": "2026-11-03T10:00:00Z,2026-11-03T13:00:00Z",
        "step": "1h",
        "aggregate": "cluster,namespace,controllerKind,controller",
        "includeIdle": "true",
        "shareIdle": "false",
    }
    assert request.headers["Accept"] == "application/json"
    assert len(frame) == 3 * 4  # three workloads and idle per hour
    assert sorted(frame["window_start"].unique()) == [T0, T0 + HOUR, T0 + 2 * HOUR]
    assert (frame["window_end"] - frame["window_start"] == HOUR).all()
    assert frame["total_cost"].sum() == pytest.approx(
        expected_total(server.scenario, T0, T0 + 3 * HOUR)
    )
    first = frame.iloc[0]["origin"]
    assert first.startswith(
        f"GET {server.url}/allocation/compute?window=2026-11-03T10:00:00Z,2026-11-03T13:00:00Z"
        "&step=1h&aggregate=cluster,namespace,controllerKind,controller&includeIdle=true"
        "&shareIdle=false:data[0]['"
    )


def test_idle_by_node_aggregate_and_headers(
    server: OpenCostServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENCOST_TEST_TOKEN", "s3cret")
    source = fast(
        server,
        aggregate="cluster, namespace",
        idle_by_node=True,
        step="2h",
        headers={"Authorization": "Bearer ${OPENCOST_TEST_TOKEN}"},
    )
    frame = fetch_allocations(source, T0, T0 + 4 * HOUR)
    params = server.requests[0].params
    assert params["aggregate"] == "cluster,namespace"
    assert params["idleByNode"] == "true"
    assert params["step"] == "2h"
    assert server.requests[0].headers["Authorization"] == "Bearer s3cret"
    idle = frame[frame["name"].str.endswith("__idle__")]
    assert sorted(idle["node"].unique()) == ["node-1", "node-2"]
    assert "s3cret" not in repr(source)


def test_missing_header_variable(server: OpenCostServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENCOST_TEST_TOKEN", raising=False)
    source = fast(server, headers={"Authorization": "Bearer ${OPENCOST_TEST_TOKEN}"})
    text = fails(source, T0, T0 + HOUR)
    assert "sources.opencost.headers.Authorization" in text
    assert "OPENCOST_TEST_TOKEN is not set" in text
    assert server.requests == []


def test_ten_days_with_max_window_7d_make_two_requests(server: OpenCostServer) -> None:
    start = pd.Timestamp("2026-11-01T00:00:00Z")
    end = start + pd.Timedelta(days=10)
    collection = collect_allocations(fast(server, max_window="7d"), start, end)
    windows = [r.params["window"] for r in server.requests]
    assert windows == [
        "2026-11-01T00:00:00Z,2026-11-08T00:00:00Z",
        "2026-11-08T00:00:00Z,2026-11-11T00:00:00Z",
    ]
    assert [r.steps for r in collection.responses] == [168, 72]
    assert collection.costs["window_start"].nunique() == 240
    assert collection.costs["total_cost"].sum() == pytest.approx(
        expected_total(server.scenario, start, end)
    )


def test_requests_split_on_step_boundaries() -> None:
    source = OpenCostSource(url="http://opencost:9003", step="2h", max_window="5h")
    plan = plan_requests(source, T0, T0 + 10 * HOUR)
    assert [(s - T0, e - s) for s, e in plan] == [
        (pd.Timedelta(0), 4 * HOUR),
        (4 * HOUR, 4 * HOUR),
        (8 * HOUR, 2 * HOUR),
    ]
    with pytest.raises(InputError, match="not a whole number of 2h steps"):
        plan_requests(source, T0, T0 + 3 * HOUR)
    with pytest.raises(InputError, match="whole seconds"):
        plan_requests(source, T0 + pd.Timedelta(milliseconds=5), T0 + 2 * HOUR)
    assert raw_file_name(T0, T0 + HOUR) == "opencost-20261103T100000Z-20261103T110000Z.json"


# --------------------------------------------------------------------------- real samples


def test_published_samples_give_the_same_table_as_the_files() -> None:
    swagger = json.loads(SWAGGER.read_text(encoding="utf-8"))
    example = swagger["paths"]["/allocation/compute"]["get"]["responses"]["200"]["content"][
        "application/json"
    ]["examples"]["0"]["value"]
    swagger_payload = json.loads(example)
    website = json.loads(ALLOCATION_EXAMPLE.read_text(encoding="utf-8"))
    scenario = FileScenario.from_payloads(website, swagger_payload)
    with running(scenario) as srv:
        week = fetch_allocations(
            fast(srv, step="7d", max_window="7d"),
            pd.Timestamp("2023-07-12T11:02:46Z"),
            pd.Timestamp("2023-07-19T11:02:46Z"),
        )
        two_days = fetch_allocations(
            fast(srv, step="2d"),
            pd.Timestamp("2023-01-18T11:38:45Z"),
            pd.Timestamp("2023-01-20T11:38:45Z"),
        )
    pd.testing.assert_frame_equal(
        without_origin(week), without_origin(read_opencost_json(ALLOCATION_EXAMPLE))
    )
    pd.testing.assert_frame_equal(
        without_origin(two_days),
        without_origin(parse_allocation_response(swagger_payload, "swagger")),
    )


def test_saved_raw_responses_trace_every_row(tmp_path: Path) -> None:
    with running(FileScenario.from_files(EXAMPLE / "costs.json")) as srv:
        out = tmp_path / "responses"
        with pytest.warns(InputWarning, match="no cost data"):
            frame = fetch_allocations(
                fast(srv, max_window="2h"), T0 - HOUR, T0 + 3 * HOUR, out_dir=out
            )
        bodies = list(srv.bodies)
    names = sorted(p.name for p in out.iterdir())
    assert names == [
        "opencost-20261103T090000Z-20261103T110000Z.json",
        "opencost-20261103T110000Z-20261103T130000Z.json",
        "requests.tsv",
    ]
    first = out / names[0]
    assert first.read_bytes() == bodies[0]  # exactly the bytes received
    assert set(frame["origin"].str.partition(":data[")[0]) == {str(first)}
    assert frame.iloc[0]["origin"] == f"{first}:data[1]['__idle__']"
    pd.testing.assert_frame_equal(frame, read_costs([out]))  # same origins, same rows
    pd.testing.assert_frame_equal(
        without_origin(frame), without_origin(read_costs([EXAMPLE / "costs.json"]))
    )
    manifest = (out / "requests.tsv").read_text().splitlines()
    assert manifest[0].split("\t")[:2] == ["file", "url"]
    assert manifest[1].startswith(f"{names[0]}\t{srv.url}/allocation/compute?window=")


# --------------------------------------------------------------------------- failure modes


def test_error_envelope_is_reported_and_not_retried(server: OpenCostServer) -> None:
    server.mode = "envelope"
    text = fails(fast(server), T0, T0 + HOUR)
    assert text.startswith(f"GET {server.url}/allocation/compute?{asked(T0, T0 + HOUR)}")
    assert "OpenCost returned an error (code 500): Error: error computing allocations" in text
    assert len(server.requests) == 1


def test_http_500_then_success_is_retried(server: OpenCostServer) -> None:
    server.queue("http500", "http503")
    frame = fetch_allocations(fast(server), T0, T0 + HOUR)
    assert len(frame) == 4
    assert len(server.requests) == 3


def test_retries_run_out_with_opencost_message(server: OpenCostServer) -> None:
    server.mode = "http500"
    text = fails(fast(server, retries=2), T0, T0 + HOUR)
    assert "HTTP 500 Internal Server Error: Error: error computing allocations" in text
    assert "gave up after 3 attempts" in text
    assert len(server.requests) == 3


@pytest.mark.timing
def test_http_503_forever_hits_total_time_limit(server: OpenCostServer) -> None:
    server.mode = "http503"
    began = time.monotonic()
    text = fails(
        fast(server, retries=100, backoff_seconds=0.05, total_timeout_seconds=0.5), T0, T0 + HOUR
    )
    assert time.monotonic() - began < 3  # the limit is 0.5 s; without it: 100 retries
    assert "HTTP 503 Service Unavailable" in text
    assert "total time limit (total_timeout_seconds)" in text
    assert asked(T0, T0 + HOUR) in text
    assert 2 <= len(server.requests) < 100


@pytest.mark.timing
def test_retry_after_beyond_time_limit_stops_at_once(server: OpenCostServer) -> None:
    server.mode = "http503"
    server.retry_after = "3600"
    began = time.monotonic()
    text = fails(fast(server), T0, T0 + HOUR)
    assert time.monotonic() - began < 2  # not an hour
    assert "the next retry (in 3600 s) would pass the total time limit" in text
    assert "gave up after 1 attempt" in text
    assert len(server.requests) == 1


@pytest.mark.timing
def test_short_retry_after_is_honoured(server: OpenCostServer) -> None:
    server.queue("http503")
    server.retry_after = "1"
    began = time.monotonic()
    fetch_allocations(fast(server), T0, T0 + HOUR)
    assert time.monotonic() - began >= 0.9
    assert len(server.requests) == 2


def test_http_400_and_404_are_not_retried(server: OpenCostServer) -> None:
    server.mode = "http400"
    text = fails(fast(server), T0, T0 + HOUR)
    assert "HTTP 400 Bad Request: Invalid 'aggregate' parameter" in text
    assert len(server.requests) == 1
    wrong = fast(server, url=f"{server.url}/api/v1")
    text = fails(wrong, T0, T0 + HOUR)
    assert "HTTP 404 Not Found: '404 page not found'; is the URL OpenCost's API" in text
    assert len(server.requests) == 2


@pytest.mark.parametrize(
    ("mode", "problem"),
    [
        ("truncated", "the response stops in the middle of the JSON after"),
        ("dropped", "the connection broke before the whole response arrived ("),
        ("html", "expected JSON, got HTML or XML ('<!DOCTYPE html>"),
        ("garbage", "the response is not valid JSON: Expecting value at line 1, column 1"),
        ("null_total", "['cluster-one/saas/deployment:api'].totalCost: totalCost is null"),
        ("missing_step", "asked for 2 result set(s) of 1h for [2026-11-03T10:00:00Z, "),
    ],
)
def test_bad_answers_name_url_window_and_problem(
    server: OpenCostServer, mode: str, problem: str
) -> None:
    server.mode = mode
    text = fails(fast(server), T0, T0 + 2 * HOUR)
    assert text.startswith(f"GET {server.url}/allocation/compute?{asked(T0, T0 + 2 * HOUR)}&")
    assert problem in text


@pytest.mark.timing
def test_slow_answer_times_out(server: OpenCostServer) -> None:
    server.mode = "slow"
    began = time.monotonic()
    text = fails(fast(server, timeout_seconds=0.2, retries=0), T0, T0 + HOUR)
    assert time.monotonic() - began < 1.8  # the server answers after 2 s
    assert "no response within 0.2 s (timeout_seconds)" in text


def test_connection_refused() -> None:
    with running(GeneratedScenario()) as srv:
        source = fast(srv, retries=1)
    text = fails(source, T0, T0 + HOUR)
    assert "cannot connect: Failed to establish a new connection" in text
    assert "gave up after 2 attempts" in text


def test_unknown_fields_are_tolerated(server: OpenCostServer) -> None:
    plain = fetch_allocations(fast(server), T0, T0 + 2 * HOUR)
    server.mode = "extra_fields"
    extra = fetch_allocations(fast(server), T0, T0 + 2 * HOUR)
    pd.testing.assert_frame_equal(plain, extra)


def test_step_with_shifted_window(server: OpenCostServer) -> None:
    server.mode = "shifted"
    text = fails(fast(server), T0, T0 + 2 * HOUR)
    assert asked(T0, T0 + 2 * HOUR) in text
    assert (
        "data[1]['cluster-one/saas/deployment:api']: allocation window "
        "[2026-11-03T11:30:00Z, 2026-11-03T12:30:00Z) is not its step's window "
        "[2026-11-03T11:00:00Z, 2026-11-03T12:00:00Z)"
    ) in text


def test_empty_steps_warn_with_their_hours() -> None:
    empty = {T0 + HOUR, T0 + 2 * HOUR}
    with running(GeneratedScenario(empty=empty)) as srv, warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        collection = collect_allocations(fast(srv), T0, T0 + 4 * HOUR)
    caught = list(w)
    messages = [str(w.message) for w in caught if issubclass(w.category, InputWarning)]
    assert len(messages) == 1
    assert messages[0].endswith(
        "data[1..2]: no cost data for [2026-11-03T11:00:00Z, 2026-11-03T13:00:00Z) (2 steps of 1h)"
    )
    assert collection.empty_steps == 2
    assert sorted(collection.costs["window_start"].unique()) == [T0, T0 + 3 * HOUR]


# --------------------------------------------------------------------------- configuration


def test_sources_opencost_in_rule_file(tmp_path: Path) -> None:
    text = (EXAMPLE / "rules.yaml").read_text()
    text = text.replace(
        "sources:                          # paths are relative to this file\n",
        "sources:\n  opencost:\n    url: http://opencost.opencost:9003/\n    step: 1d\n"
        "    max_window: 2w\n    headers: {Authorization: 'Bearer ${TOKEN}'}\n",
    )
    path = tmp_path / "rules.yaml"
    path.write_text(text)
    ruleset = load_rules(path)
    source = ruleset.sources.opencost
    assert source is not None
    assert source.url == "http://opencost.opencost:9003"
    assert source.aggregate == DEFAULT_OPENCOST_AGGREGATE
    assert source.max_window_timedelta == pd.Timedelta(days=14)
    assert ruleset.sources.costs == [str(tmp_path / "costs.json")]
    override = opencost_source(ruleset, "http://localhost:9003", "1h")
    assert override is not None and override.url == "http://localhost:9003"
    assert override.step == "1h" and override.headers == source.headers


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"url": "opencost:9003"}, "sources.opencost.url: must be an http:// or https:// URL"),
        ({"url": "http://x", "step": "1hour"}, "sources.opencost.step: must be a duration"),
        ({"url": "http://x", "step": "2d", "max_window": "1d"}, "is shorter than the step 2d"),
        ({"url": "http://x", "aggregate": "namespace,,pod"}, "sources.opencost.aggregate"),
        ({"url": "http://x", "timeout": 3}, "unknown key 'timeout'"),
    ],
)
def test_bad_opencost_settings(settings: dict[str, Any], message: str) -> None:
    document = {"sources": {"opencost": settings}, "rules": []}
    with pytest.raises(InputError) as info:
        parse_rules(document, origin="rules.yaml")
    assert message in str(info.value)


# --------------------------------------------------------------------------- command line


def run(*args: str | Path) -> Any:
    return runner.invoke(app, [str(a) for a in args])


HOUR_OPTIONS = ("--from", "2026-11-03T10:00:00Z", "--to", "2026-11-03T11:00:00Z")


@pytest.fixture
def example_server() -> Iterator[OpenCostServer]:
    with running(FileScenario.from_files(EXAMPLE / "costs.json")) as srv:
        yield srv


def test_allocate_from_api_equals_allocate_from_file(example_server: OpenCostServer) -> None:
    config = EXAMPLE / "rules.yaml"
    from_file = run("allocate", "--config", config, "--format", "csv")
    from_api = run(
        "allocate",
        "--config",
        config,
        "--opencost-url",
        example_server.url,
        *HOUR_OPTIONS,
        "--format",
        "csv",
    )
    assert from_api.exit_code == 0, from_api.output
    assert from_api.stdout == from_file.stdout
    assert "client-a,0.123458,123458,USD" in from_api.stdout
    assert example_server.requests[0].params["window"] == (
        "2026-11-03T10:00:00Z,2026-11-03T11:00:00Z"
    )


def test_url_from_rule_file_and_saved_responses(
    example_server: OpenCostServer, tmp_path: Path
) -> None:
    text = (
        (EXAMPLE / "rules.yaml")
        .read_text()
        .replace("  costs: [costs.json]", f"  opencost: {{url: '{example_server.url}'}}")
    )
    config = tmp_path / "rules.yaml"
    config.write_text(text)
    (tmp_path / "usage.csv").write_bytes((EXAMPLE / "usage.csv").read_bytes())

    missing = run("allocate", "--config", config)
    assert missing.exit_code == 2
    assert "need a period: give --month or --from/--to" in missing.stderr

    out = tmp_path / "out"
    result = run("allocate", "--config", config, *HOUR_OPTIONS, "--out", out)
    assert result.exit_code == 0, result.output
    assert "client-a         0.123458" in result.stdout
    saved = out / "responses" / "opencost-20261103T100000Z-20261103T110000Z.json"
    assert saved.is_file() and (out / "clients.csv").is_file()

    reconcile = run("reconcile", "--config", config, *HOUR_OPTIONS)
    assert reconcile.exit_code == 0, reconcile.output
    compare = run("compare", "--config", config, "--keys", "requests,even", *HOUR_OPTIONS)
    assert compare.exit_code == 0, compare.output

    files = run("reconcile", "--config", config, "--costs", saved, "--format", "json")
    assert files.exit_code == 0, files.output
    both = run("allocate", "--config", config, "--costs", saved, "--opencost-url", "http://x")
    assert both.exit_code == 2
    assert "give either --costs or --opencost-url, not both" in both.stderr


def test_collect_writes_responses_and_costs(example_server: OpenCostServer, tmp_path: Path) -> None:
    out = tmp_path / "collected"
    result = run(
        "collect",
        "--opencost-url",
        example_server.url,
        "--from",
        "2026-11-03T09:00:00Z",
        "--to",
        "2026-11-03T12:00:00Z",
        "--out",
        out,
    )
    assert result.exit_code == 0, result.output
    assert "1 request(s), step 1h" in result.stdout
    assert "0.578440" in result.stdout  # OpenCost total of the example hour
    assert "no cost data for [2026-11-03T09:00:00Z, 2026-11-03T10:00:00Z)" in result.stderr
    collected = read_costs([out / "costs.csv"])
    pd.testing.assert_frame_equal(
        without_origin(collected), without_origin(read_costs([EXAMPLE / "costs.json"]))
    )
    again = run(
        "allocate",
        "--config",
        EXAMPLE / "rules.yaml",
        "--costs",
        out / "costs.csv",
        "--format",
        "csv",
    )
    assert "client-a,0.123458,123458,USD" in again.stdout


def test_cli_errors_are_one_line(example_server: OpenCostServer) -> None:
    example_server.mode = "html"
    result = run(
        "allocate",
        "--config",
        EXAMPLE / "rules.yaml",
        "--opencost-url",
        example_server.url,
        *HOUR_OPTIONS,
    )
    assert result.exit_code == 2
    err = result.stderr.strip()
    assert err.startswith(f"error: GET {example_server.url}/allocation/compute?window=")
    assert "\n" not in err and "Traceback" not in result.output
    no_url = run("collect", "--month", "2026-11")
    assert no_url.exit_code == 2
    assert "no OpenCost URL" in no_url.stderr
    bad_step = run(
        "collect", "--opencost-url", example_server.url, "--month", "2026-11", "--step", "1x"
    )
    assert "--step: must be a duration" in bad_step.stderr
