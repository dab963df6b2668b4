"""A client's sheet never lets its reader compute another client's figures.

Pool figures (a source's total measure, its cost, the reader's share, its unattributed part)
and cluster sums (the cost meant for all clients) give other clients away when few clients
share them: the total minus the reader's own figure is the other client's. The tests render
real packs through the CLI, extract *every* number of a sheet (HTML text, PDF text through
``pdftotext``, Markdown) and try the arithmetic a curious reader would (each number, sums,
differences, products and quotients of two, and ``a - b - c`` over the amounts), against
the true measures and amounts of every other client and the others' sum on each withheld
pool, taken from the allocation itself. Figures are shown with six decimals so the sheet
carries as much information as it can. A positive control runs the same search on
``privacy.min_pool_clients: 1`` sheets and must find the leaks the default withholds.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from bs4 import BeautifulSoup
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from tenantcost.allocate import FrameUsage, allocate_stream
from tenantcost.cli import app
from tenantcost.inputs import load_inputs
from tenantcost.writers.json_output import client_lines
from tests import factories
from tests.test_report import pdf_text, table

runner = CliRunner()

HOURS = ["2026-11-05T10", "2026-11-05T11"]
# Six clients on the API (enough to show its totals), two on the worker, three on search.
# Measures have decimals so that a coincidence within the displayed precision is unlikely.
API = {
    "acme": (52_347.37, 48_113.61),
    "globex": (8_911.13, 9_377.29),
    "initech": (3_187.71, 2_903.17),
    "hooli": (17_653.29, 16_045.83),
    "umbrella": (2_459.83, 3_311.47),
    "wayne": (6_271.59, 7_129.31),
}
WORKER = {"acme": (731.37, 522.19), "globex": (1_288.93, 1_917.71)}
SEARCH = {"acme": (4_417.23, None), "globex": (913.47, None), "initech": (2_769.11, None)}
COSTS = {"api": 3.712913, "worker": 2.931187, "search": 1.873469, "tenant": 0.831173}
IDLE = 1.131379

RULES = """
currency: EUR
sources:
  costs: [costs.csv]
  usage: [usage.csv]
{privacy}
rules:
  - id: privacy-test
    effective_from: "2026-11-01"
    description: API by requests, worker by CPU time, search by requests
    workloads:
      - match: {{namespace: app, controller: api}}
        class: shared
        service: api
        key: requests
      - match: {{namespace: app, controller: worker}}
        class: shared
        service: worker
        key: cpu_seconds
      - match: {{namespace: app, controller: search}}
        class: shared
        service: search
        key: requests
      - match: {{namespace: tenant-acme}}
        class: direct
        client: acme
      - match: {{name: __idle__}}
        class: idle
    idle: proportional
"""


def _window(h: str) -> str:
    end = f"{h[:-2]}{int(h[-2:]) + 1:02d}"
    return f"{h}:00:00Z,{end}:00:00Z"


def write_scenario(folder: Path, clients: Iterable[str], min_pool_clients: int | None) -> Path:
    """Costs, usage and rules of two hours; only ``clients`` have usage."""
    keep = set(clients)
    cost_rows = ["window_start,window_end,name,cluster,namespace,controller_kind,controller,"
                 "total_cost"]  # fmt: skip
    usage_rows = ["window_start,window_end,service,client,requests,cpu_seconds"]
    for i, h in enumerate(HOURS):
        w = _window(h)
        cost_rows += [
            f"{w},,c1,app,deployment,api,{COSTS['api'] + i / 7:.6f}",
            f"{w},,c1,app,deployment,worker,{COSTS['worker'] - i / 11:.6f}",
            f"{w},,c1,app,deployment,search,{COSTS['search'] + i / 13:.6f}",
            f"{w},,c1,tenant-acme,deployment,web,{COSTS['tenant']:.6f}",
            f"{w},__idle__,c1,,,,{IDLE + i / 17:.6f}",
        ]
        for service, table_ in (("api", API), ("worker", WORKER), ("search", SEARCH)):
            for client, values in table_.items():
                value = values[i]
                if client in keep and value is not None:
                    column = f"{value},0" if service != "worker" else f"0,{value}"
                    usage_rows.append(f"{w},{service},{client},{column}")
        if i == 1:
            usage_rows.append(f"{w},worker,,0,41.37")  # usage without client id
    (folder / "costs.csv").write_text("\n".join(cost_rows) + "\n")
    (folder / "usage.csv").write_text("\n".join(usage_rows) + "\n")
    privacy = f"privacy:\n  min_pool_clients: {min_pool_clients}" if min_pool_clients else ""
    rules = folder / "rules.yaml"
    rules.write_text(RULES.format(privacy=privacy))
    return rules


def render(folder: Path, rules: Path) -> Path:
    out = folder / "pack"
    args = ["report", "--config", str(rules), "--month", "2026-11", "--decimals", "6"]
    args += ["--view", "internal"]  # every figure a sheet may show (the client's has fewer)
    result = runner.invoke(app, [*args, "--out", str(out)])
    assert result.exit_code == 0, result.output
    return out


# --------------------------------------------------------------------------- numbers


@dataclass(frozen=True)
class Figure:
    value: float
    error: float
    """Half a unit of the last digit shown: the value is exact within it."""
    amount: bool
    """Shown with six decimals (an amount at ``--decimals 6``)."""


NOT_FIGURES = re.compile(
    r"\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2})?Z?)?"  # dates and times
    r"|\b[0-9a-f]{12}\b"  # input fingerprints
    r"|\b\d{2}:\d{2}\b"
)
NUMBER = re.compile(r"(?<![\w.])(\d{1,3}(?:,\d{3})+|\d+)(\.\d+)?(\s*%)?")


def figures(text: str) -> list[Figure]:
    """Every number of ``text`` (percentages as fractions), dates and digests aside."""
    out = set()
    for m in NUMBER.finditer(NOT_FIGURES.sub(" ", text)):
        whole, frac, pct = m.group(1), m.group(2) or "", m.group(3)
        value = float(whole.replace(",", "") + frac)
        error = 0.5 * 10.0 ** -(len(frac) - 1 if frac else 0)
        if pct:
            value, error = value / 100, error / 100
        out.add(Figure(value, error, amount=len(frac) == 7 and not pct))
    return sorted(out, key=lambda f: (f.value, f.error))


def derived(numbers: list[Figure]) -> tuple[np.ndarray, np.ndarray]:
    """Values a reader can compute from the sheet's numbers, with their error bounds."""
    v = np.array([f.value for f in numbers])
    e = np.array([f.error for f in numbers])
    a, b = np.meshgrid(v, v, indexing="ij")
    ea, eb = np.meshgrid(e, e, indexing="ij")
    values = [v, a - b, a + b, a * b]
    errors = [e, ea + eb, ea + eb, np.abs(a) * eb + np.abs(b) * ea]
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(b != 0, a / b, np.nan)
        values.append(ratio)
        errors.append(np.abs(ratio) * (ea / np.abs(a) + eb / np.abs(b)))
    amounts = np.array([f.value for f in numbers if f.amount])
    if amounts.size:  # pool - own - unattributed, total - own - ...: over amounts only
        x, y, z = np.meshgrid(amounts, amounts, amounts, indexing="ij")
        values.append(x - y - z)
        errors.append(np.full(x.shape, 1.5e-6))
    flat = np.concatenate([np.ravel(x) for x in values])
    err = np.concatenate([np.ravel(x) for x in errors])
    keep = np.isfinite(flat) & np.isfinite(err)
    return flat[keep], err[keep]


PRECISION = 1e-4
"""A derivation computes a figure when it pins it to 0.01 % or better. A share shown to one
decimal of a percent never does (55.5 % is 55.45 % to 55.55 %), so quotients by shares are
tried but cannot match by chance; the sheet must withhold what would make them exact."""


def leaks(text: str, targets: dict[str, float]) -> list[str]:
    """The targets a reader can compute from ``text`` (to :data:`PRECISION`)."""
    values, errors = derived(figures(text))
    found = []
    for name, target in targets.items():
        precise = errors <= PRECISION * abs(target)
        close = np.abs(values - target) <= errors + 1e-9
        close &= precise
        if close.any():
            found.append(name)
    return found


def others(rules: Path, reader: str) -> tuple[dict[str, float], pd.DataFrame]:
    """Other clients' figures the reader must not compute, and the pool-client counts."""
    inputs = load_inputs(rules)
    result = allocate_stream(inputs.costs, inputs.usage, inputs.ruleset, con=inputs.con)
    lines = client_lines(result)
    rest = lines[lines["client"] != reader]
    targets: dict[str, float] = {}
    for r in rest.itertuples(index=False):
        targets[f"{r.client} {r.source} amount"] = r.amount / 1e6
        if r.kind != "direct":
            targets[f"{r.client} {r.source} measure"] = r.measure
    for client, amount in rest.groupby("client")["amount"].sum().items():
        targets[f"{client} total"] = amount / 1e6
    counts = result.pool_clients.set_index("source")["min_clients"]
    small = [s for s, n in counts.items() if n < 5 and (lines["source"] == s).any()]
    for source in small:  # the others' sum on a pool that must stay withheld
        pool = rest[rest["source"] == source]
        if pool["client"].nunique() > 1:
            targets[f"others' {source} amount"] = pool["amount"].sum() / 1e6
            targets[f"others' {source} measure"] = pool["measure"].sum()
    return {k: v for k, v in targets.items() if abs(v) > 1e-6}, result.pool_clients


def sheet_texts(pack: Path, client: str) -> dict[str, str]:
    stem = pack / "clients" / client
    html = BeautifulSoup(stem.with_suffix(".html").read_text(), "html.parser")
    return {
        "html": html.get_text(" "),
        "pdf": pdf_text(stem.with_suffix(".pdf")),
        "md": stem.with_suffix(".md").read_text(),
    }


# --------------------------------------------------------------------------- the tests

SIX = list(API)


@pytest.fixture(scope="module")
def six(tmp_path_factory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("six")
    rules = write_scenario(folder, SIX, None)
    return rules, render(folder, rules)


@pytest.fixture(scope="module")
def two(tmp_path_factory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("two")
    rules = write_scenario(folder, ["acme", "globex"], None)
    return rules, render(folder, rules)


def test_pool_client_counts_are_the_fewest_of_any_window(six, two):
    _, counts = others(six[0], "acme")
    least = dict(zip(counts["source"], counts["min_clients"], strict=True))
    # search had no usage in the second hour: that hour reached no client and does not count
    assert least == {"api": 6, "worker": 2, "search": 3, "idle": 6}
    _, counts = others(two[0], "acme")
    assert dict(zip(counts["source"], counts["min_clients"], strict=True)) == {
        "api": 2, "worker": 2, "search": 2, "idle": 2
    }  # fmt: skip


@pytest.mark.parametrize("reader", ["acme", "globex", "initech"])
def test_no_sheet_figure_gives_another_client_away_six_clients(six, reader):
    rules, pack = six
    targets, _ = others(rules, reader)
    assert len(targets) > 20
    for kind, text in sheet_texts(pack, reader).items():
        assert leaks(text, targets) == [], (reader, kind)


@pytest.mark.parametrize("reader", ["acme", "globex"])
def test_no_sheet_figure_gives_the_other_client_away_two_clients(two, reader):
    rules, pack = two
    targets, _ = others(rules, reader)
    for kind, text in sheet_texts(pack, reader).items():
        assert leaks(text, targets) == [], (reader, kind)
    page = BeautifulSoup((pack / "clients" / f"{reader}.html").read_text(), "html.parser")
    note = page.select_one("#unattributed-note").get_text()
    assert "fewer than 5 clients" in note
    assert "meant for clients this period is unattributed" not in page.get_text(" ")


def test_the_search_finds_the_leaks_of_min_pool_clients_1(tmp_path):
    """Positive control: the same search on sheets that show every pool figure."""
    rules = write_scenario(tmp_path, SIX, 1)
    pack = render(tmp_path, rules)
    targets, _ = others(rules, "acme")
    found = leaks(sheet_texts(pack, "acme")["html"], targets)
    # worker cost minus acme's minus its unattributed part (the worker's measure total also
    # holds usage without client id, which the sheet does not show: no exact measure there)
    assert "globex worker amount" in found
    assert "others' search measure" in found  # search total minus acme's: globex + initech
    assert "others' search amount" in found
    two = tmp_path / "two"
    two.mkdir()
    rules = write_scenario(two, ["acme", "globex"], 1)
    pack = render(two, rules)
    targets, _ = others(rules, "acme")
    assert "globex total" in leaks(sheet_texts(pack, "acme")["md"], targets)


def test_a_pool_with_enough_clients_shows_its_figures(six):
    _, pack = six
    page = BeautifulSoup((pack / "clients" / "globex.html").read_text(), "html.parser")
    rows = {r[0].split(" ")[0]: r for r in table(page, "lines-table")[1:-1]}
    # api: six clients in both hours: total measure, share and source cost are shown
    assert rows["api"][2] == "18,288.42 of 177,711.6"  # 8,911.13 + 9,377.29 of every client's
    assert rows["api"][3].endswith("%") and rows["api"][4][0].isdigit()
    assert rows["idle"][4][0].isdigit()  # idle went to six clients
    # worker (two clients) and search (three): own figures and unit cost only
    for source in ("worker", "search"):
        assert rows[source][3] == rows[source][4] == "withheld *"
        assert " of " not in rows[source][2]
        assert rows[source][5][0].isdigit()  # own amount over own measure
    text = page.get_text(" ", strip=True)
    # six clients in the period: the cost meant for clients is shown; the unattributed
    # parts of the worker pool (usage without client id) are withheld, and so the total
    assert "meant for clients this period" in text
    section = page.select_one("#unattributed").get_text(" ", strip=True)
    assert "worker (shared) usage without client id withheld" in section
    assert "Total unattributed" not in section


def test_confidence_and_key_comparison_keep_working(two):
    rules, pack = two
    inputs = load_inputs(rules)
    page = BeautifulSoup((pack / "clients" / "globex.html").read_text(), "html.parser")
    conf = table(page, "confidence-table")
    assert [r[0] for r in conf[1:]] == [
        "key spread",
        "usage without client id",
        "hours without usage data",
    ]
    keys = table(page, "keys-table")
    assert [r[0] for r in keys[1:]] == [
        "the rule as written",
        "requests everywhere",
        "CPU seconds everywhere",
        "even split everywhere",
    ]
    result = allocate_stream(inputs.costs, inputs.usage, inputs.ruleset, con=inputs.con)
    own = result.client_totals().set_index("client")["amount"]
    assert keys[1][1] == f"{own['globex'] / 1e6:,.6f}"
    md = (pack / "clients" / "globex.md").read_text()
    assert "## 4. Confidence" in md and "| even split everywhere |" in md


def test_rule_text_says_even_and_weights_reveal_by_contract(tmp_path):
    rules = write_scenario(tmp_path, SIX, None)
    text = (
        rules.read_text()
        .replace(
            "service: search\n        key: requests",
            "service: search\n        key: {weights: {acme: 2, globex: 1, initech: 1}}",
        )
        .replace("service: worker\n        key: cpu_seconds", "service: worker\n        key: even")
    )
    rules.write_text(text)
    pack = render(tmp_path, rules)
    page = (pack / "clients" / "globex.md").read_text()
    assert "every such client pays the same part of that hour's cost as you" in page
    assert "your part and the weights give the others' parts" in page
    assert "your weight is 1" in page


def test_threshold_must_be_at_least_one(tmp_path):
    rules = write_scenario(tmp_path, SIX, None)
    rules.write_text(
        rules.read_text().replace("rules:\n", "privacy: {min_pool_clients: 0}\nrules:\n", 1)
    )
    result = runner.invoke(app, ["check-config", str(rules)])
    assert result.exit_code == 2
    assert "min_pool_clients" in result.output and "Traceback" not in result.output


def test_every_combination_is_tried():
    """The search itself: a difference of two shown figures is found, within its precision."""
    shown = "pool 1,234.567891 mine 1,000.000000 share 25.0 %"
    assert leaks(shown, {"other": 234.567891}) == ["other"]
    assert leaks(shown, {"other": 234.5679}) == []
    assert leaks("a 3.000000 b 1.000000 c 0.500000", {"x": 1.5}) == ["x"]


# --------------------------------------------------------------------------- the count itself

PROPERTY_RULES = """
currency: USD
rules:
  - id: v1
    effective_from: "2026-11-01"
    workloads:
      - {match: {controller: api}, class: shared, service: api, key: requests}
      - {match: {controller: worker}, class: shared, service: worker, key: even}
      - {match: {name: __idle__}, class: idle}
    external:
      - {name: ext, amount: 0.5, per: hour, key: requests, services: [api, worker]}
    idle: even
"""


@pytest.mark.filterwarnings("ignore::tenantcost.errors.InputWarning")
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.tuples(
            st.integers(0, 3),  # hour
            st.sampled_from(["api", "worker"]),
            st.sampled_from(["", "a", "b", "c", "d"]),  # "" is usage without client id
            st.sampled_from([0.0, 1.0, 7.5]),  # requests (0: no usage under this key)
        ),
        max_size=30,
        unique_by=lambda r: r[:3],
    ),
    st.sampled_from([None, pd.Timedelta(hours=1), pd.Timedelta(hours=2)]),
)
def test_min_clients_is_the_fewest_clients_of_any_window_that_reached_one(rows, chunk):
    """Against a plain pandas count, whatever the chunking: per window, the clients with a
    positive weight; the minimum over windows with at least one; 0 if none."""
    cost_rows = [
        {"h": h, "controller": c, "total_cost": 1.0} for h in range(4) for c in ("api", "worker")
    ] + [{"h": h, "name": "__idle__", "total_cost": 0.25} for h in range(4)]
    use = factories.usage(
        [{"h": h, "service": s, "client": c, "requests": r} for h, s, c, r in rows]
    )
    result = allocate_stream(
        factories.costs(cost_rows),
        FrameUsage(use) if not use.empty else None,
        factories.rules(PROPERTY_RULES),
        chunk=chunk,
    )
    got = {(r.kind, r.source): r.min_clients for r in result.pool_clients.itertuples(index=False)}
    use = use.assign(h=use["window_start"].dt.hour)
    by_requests = use[(use["requests"] > 0) & (use["client"] != "")]
    active = use[(use[["requests", "cpu_seconds"]].sum(axis=1) > 0) & (use["client"] != "")]

    def fewest(frame: pd.DataFrame) -> int:
        counts = frame.groupby("h")["client"].nunique()
        return int(counts.min()) if not counts.empty else 0

    assert got[("shared", "api")] == fewest(by_requests[by_requests["service"] == "api"])
    assert got[("shared", "worker")] == fewest(active[active["service"] == "worker"])
    assert got[("external", "ext")] == fewest(by_requests)
    # idle (even) goes to the clients with a cost in the hour: any client reached above
    assert got[("idle", "idle")] == fewest(pd.concat([by_requests, active]))
