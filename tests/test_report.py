"""The report pack: per-client sheets, finance summary and index, in HTML, PDF and Markdown.

Both bundled examples are rendered through the real CLI; the HTML is parsed (BeautifulSoup)
and every required element and figure is checked against the independently computed goldens;
the PDF's text is extracted with poppler's ``pdftotext``; each client's sheet is searched for
every other client's id. A synthetic scenario covers what the examples lack: two rule versions
in one month, a previous month under another rule, usage without client id, hours without
usage, redaction of other clients' names in rule text, and template overrides.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from bs4 import BeautifulSoup, Tag
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from tenantcost.cli import app
from tenantcost.config.confidence import Band
from tenantcost.money import round_for_display
from tenantcost.report.confidence import grade, worst
from tenantcost.report.display import auto_places, format_units
from tenantcost.report.privacy import REDACTED, Redactor, find_ids

ROOT = Path(__file__).resolve().parents[1]
SAAS = ROOT / "examples" / "saas-three-clients" / "rules.yaml"
TEAMS = ROOT / "examples" / "idle-three-teams"
GOLDEN = ROOT / "tests" / "golden"
SAAS_CLIENTS = ["client-a", "client-b", "client-c"]
TEAM_CLIENTS = ["team-a", "team-b", "team-c"]

runner = CliRunner()


def need_pdftotext() -> str:
    """pdftotext is part of the test setup: missing means the setup was skipped, a failure."""
    path = shutil.which("pdftotext")
    if path is None:
        pytest.fail(
            "pdftotext not found: install Debian poppler-utils, or run the README test "
            "command (bash scripts/test.sh), which installs it"
        )
    return path


def pdf_text(path: Path) -> str:
    out = subprocess.run(
        [need_pdftotext(), "-layout", str(path), "-"], check=True, capture_output=True, text=True
    )
    return out.stdout


def report(out: Path, *args: str) -> str:
    """The command's stdout: the summary of what it wrote."""
    view = [] if "--view" in args else ["--view", "internal"]  # every item of the sheets
    result = runner.invoke(app, ["report", *args, *view, "--out", str(out)])
    assert result.exit_code == 0, result.output
    return result.stdout


def soup(path: Path) -> BeautifulSoup:
    return BeautifulSoup(path.read_text(encoding="utf-8"), "html.parser")


def table(page: BeautifulSoup, table_id: str) -> list[list[str]]:
    """A table's rows as lists of cell texts (header, body and footer rows)."""
    found = page.find("table", id=table_id)
    assert isinstance(found, Tag), f"no table #{table_id}"
    return [
        [" ".join(cell.get_text(" ", strip=True).split()) for cell in row.find_all(["th", "td"])]
        for row in found.find_all("tr")
    ]


def micros_to_text(micros: int, places: int) -> str:
    return format_units(round_for_display([micros], places)[0], places)


def golden_shown(golden: dict, key: str, places: int = 4) -> dict[str, str]:
    """Each client's figure under ``key`` as every page must show it (one rounding),
    from the goldens: the default cascade's lines rounded to the reference total, then the
    key's client column (clients by id) by largest remainder to the cascade's clients line."""
    default = golden["keys"]["default"]
    clients_exact = sum(c["amount"] for c in default["clients"].values())
    lines = [clients_exact, default["unattributed"], *default["residual"].values()]
    lines += [e["amount"] for e in default["exclusions"]]
    clients_line = round_for_display(lines, places)[0]
    ids = sorted(golden["keys"][key]["clients"])
    units = round_for_display(
        [golden["keys"][key]["clients"][c]["amount"] for c in ids], places, total=clients_line
    )
    return {c: format_units(u, places) for c, u in zip(ids, units, strict=True)}


def other_ids_in(text: str, me: str, everyone: list[str]) -> list[str]:
    """Other clients' ids in ``text``, by the redaction rule (tenantcost.report.privacy)."""
    return find_ids(text, [c for c in everyone if c != me], me)


def to_units(text: str) -> int:
    """``1,234.5678`` -> 12345678 (display units of the text's own decimals)."""
    return int(text.replace(",", "").replace(".", ""))


# --------------------------------------------------------------------------- rounding


@given(
    st.lists(st.integers(min_value=-(10**12), max_value=10**12), max_size=40),
    st.integers(min_value=0, max_value=6),
)
def test_round_for_display_lines_sum_to_the_rounded_total(micros, places):
    shown = round_for_display(micros, places)
    unit = 10 ** (6 - places)
    total = round(sum(micros) / unit) if micros else 0  # Python rounds half to even too
    assert sum(shown) == total
    for value, rounded in zip(micros, shown, strict=True):
        assert rounded * unit - unit < value < rounded * unit + unit


@given(
    st.lists(st.integers(min_value=0, max_value=10**9), min_size=1, max_size=20),
    st.integers(min_value=0, max_value=4),
    st.booleans(),
)
def test_round_for_display_meets_an_imposed_total_within_one_unit(micros, places, up):
    unit = 10 ** (6 - places)
    exact = sum(micros) / unit
    target = int(exact) + (1 if up and exact != int(exact) else 0)
    shown = round_for_display(micros, places, total=target)
    assert sum(shown) == target
    assert all(abs(r * unit - v) < unit for v, r in zip(micros, shown, strict=True))


def test_round_for_display_ties_go_by_position():
    # three equal thirds of 0.01: one unit left over goes to the first line
    assert round_for_display([3_333, 3_333, 3_334], 2) == [0, 0, 1]
    assert round_for_display([5_000, 5_000], 2) == [1, 0]
    assert round_for_display([], 2) == []
    with pytest.raises(ValueError):
        round_for_display([1], 7)


def test_auto_places_raises_precision_for_sub_cent_figures():
    assert auto_places("USD", [96_363_574, 35_731_713]) == 2
    assert auto_places("USD", [123_458, 1_569]) == 4
    assert auto_places("JPY", [5_000_000_000]) == 0
    assert auto_places("USD", [0]) == 2


def test_grades_and_worst():
    band = Band(high=0.1, medium=0.3)
    assert [grade(v, band) for v in (0.0, 0.1, 0.2, 0.3, 0.31, float("inf"))] == [
        "high",
        "high",
        "medium",
        "medium",
        "low",
        "low",
    ]
    assert worst(["high", "medium", "high"]) == "medium"
    assert worst(["high", "low", "medium"]) == "low"


# --------------------------------------------------------------------------- the saas example


@pytest.fixture(scope="module")
def saas_pack(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("saas") / "pack"
    report(out, "--config", str(SAAS), "--month", "2026-11")
    return out


def test_saas_pack_has_every_file(saas_pack):
    names = sorted(p.relative_to(saas_pack).as_posix() for p in saas_pack.rglob("*") if p.is_file())
    expected = ["finance-summary.html", "finance-summary.md", "finance-summary.pdf", "index.html"]
    for client in SAAS_CLIENTS:
        expected += [f"clients/{client}.{ext}" for ext in ("html", "md", "pdf")]
    assert names == sorted(expected)


def test_saas_sheet_figures_match_golden(saas_pack):
    golden_all = json.loads((GOLDEN / "saas-three-clients.json").read_text())
    golden = golden_all["keys"]
    for client in SAAS_CLIENTS:
        page = soup(saas_pack / "clients" / f"{client}.html")
        assert page.find("html")["lang"] == "en"
        text = page.get_text(" ", strip=True)
        # header: client, period, currency, rule id and date, version, fingerprints
        assert f"Cost sheet: {client}" in page.find("h1").get_text()
        for fact in ("2026-11", "USD", "saas-2026-11", "effective 2026-11-01", "tenantcost 0.1.0"):
            assert fact in text, fact
        codes = {c.get_text() for c in page.select("#provenance code")}
        for name in ("rules.yaml", "costs.json", "usage.csv"):
            assert any(name in c for c in codes), name
        fingerprints = page.select("#provenance code[title^='sha256 ']")
        assert len(fingerprints) == 3
        assert all(re.fullmatch(r"[0-9a-f]{12}", f.get_text()) for f in fingerprints)
        # lines: one per source with key, measure, share and amount; they add up to the total
        rows = table(page, "lines-table")
        assert rows[0] == [
            "Source",
            "Key",
            "Your measure",
            "Your share",
            "Source cost",
            "Unit cost",
            "Your amount",
        ]
        body, foot = rows[1:-1], rows[-1]
        expected = golden["default"]["clients"][client]
        sources = {r[0].split(" ")[0]: r for r in body}
        assert set(sources) == set(expected["sources"])
        for source, amount in expected["sources"].items():
            shown = sources[source][-1]
            assert abs(to_units(shown) - amount / 100) <= 1, (client, source, shown)
        assert sum(to_units(r[-1]) for r in body) == to_units(foot[-1])
        # the total reads as in the summary and index (one rounding, to the
        # clients line), within one unit of the exact figure
        total = golden_shown(golden_all, "default")[client]
        assert abs(to_units(total) - expected["amount"] / 100) <= 100
        assert foot[-1] == total
        assert page.find(id="total").get_text(strip=True) == f"{total} USD"
        # the rule, the unattributed share, confidence with its figures, charts
        assert "split by requests" in text and "split by CPU seconds" in text
        assert "load generators, not client traffic" in text
        assert "platform and tooling, outside the client perimeter" in text
        assert "Idle capacity (node capacity no workload requested) is not charged" in text
        assert "is unattributed" in text
        conf = table(page, "confidence-table")
        assert [r[0] for r in conf[1:]] == [
            "key spread",
            "usage without client id",
            "hours without usage data",
        ]
        assert conf[1][2] == "low"  # the keys disagree a lot in this example (docs/method.md)
        keys = table(page, "keys-table")
        assert [r[0] for r in keys[1:]] == [
            "the rule as written",
            "requests everywhere",
            "CPU seconds everywhere",
            "even split everywhere",
        ]
        for row, key in zip(keys[2:4], ("requests", "cpu_seconds"), strict=True):
            assert row[1] == golden_shown(golden_all, key)[client]
        # three clients per pool: the even split (pool cost over client count) is withheld
        assert keys[4][1] == "withheld"
        svgs = page.find_all("svg")
        assert len(svgs) == 2
        for svg in svgs:
            assert svg.find("title") and svg.find("desc") and svg["role"] == "img"
        # real tables: every table has a caption and column headers with scope
        for tbl in page.find_all("table"):
            assert tbl.find("caption") is not None
            assert all(th.get("scope") in ("col", "row") for th in tbl.find_all("th"))


def test_saas_unit_costs_are_quoted_where_they_make_sense(saas_pack):
    page = soup(saas_pack / "clients" / "client-b.html")
    rows = {r[0].split(" ")[0]: r for r in table(page, "lines-table")[1:-1]}
    # api: 0.001470 USD for 1,710 requests = 0.000860 per 1,000 requests
    assert rows["api"][5] == "0.000860 per 1,000 requests"
    # three clients per pool, fewer than the default privacy.min_pool_clients (5): the
    # pool's total, the share and the source cost are withheld, own figures stay
    assert rows["api"][2] == "1,710"
    assert rows["api"][3] == rows["api"][4] == "withheld *"
    assert "fewer than 5 clients" in page.select_one("#withheld-note").get_text()
    # import-worker: 0.073933 USD for 480 CPU seconds = 0.5545 per CPU-hour
    assert rows["import-worker"][5] == "0.5545 per CPU-hour"


def test_saas_min_pool_clients_1_shows_every_pool_figure(tmp_path):
    folder = tmp_path / "saas"
    shutil.copytree(SAAS.parent, folder)
    rules = folder / "rules.yaml"
    rules.write_text(rules.read_text() + "privacy:\n  min_pool_clients: 1\n")
    out = tmp_path / "pack"
    report(out, "--config", str(rules), "--month", "2026-11", "--format", "html,md")
    page = soup(out / "clients" / "client-b.html")
    rows = {r[0].split(" ")[0]: r for r in table(page, "lines-table")[1:-1]}
    assert rows["api"][2] == "1,710 of 68,400"
    assert rows["api"][3] == "2.5 %"
    assert page.find(id="withheld-note") is None
    text = page.get_text(" ", strip=True)
    assert "withheld" not in text and "meant for clients this period" in text
    md = (out / "clients" / "client-a.md").read_text()
    assert "| api (shared workload) | requests | 66,348 | 68,400 | 97.0 % |" in md


def test_saas_no_sheet_names_another_client(saas_pack):
    for client in SAAS_CLIENTS:
        stem = saas_pack / "clients" / client
        for text in (
            stem.with_suffix(".html").read_text(),
            stem.with_suffix(".md").read_text(),
            pdf_text(stem.with_suffix(".pdf")),
        ):
            assert client in text
            assert other_ids_in(text, client, SAAS_CLIENTS) == []


def test_saas_pdf_text_has_the_figures(saas_pack):
    text = pdf_text(saas_pack / "clients" / "client-b.pdf")
    flat = " ".join(text.split())
    for figure in ("Cost sheet: client-b", "0.0772 USD", "0.0739", "0.0015", "0.0018"):
        assert figure in flat, figure
    assert "Confidence" in flat and "LOW" in flat.upper()
    summary = " ".join(pdf_text(saas_pack / "finance-summary.pdf").split())
    for figure in ("0.6434", "0.3219", "0.0672", "0.0091", "0.0280", "0.0051", "0.0099"):
        assert figure in summary, figure
    assert "Page 1 of" in summary


def test_saas_markdown_sheet(saas_pack):
    md = (saas_pack / "clients" / "client-a.md").read_text()
    assert md.startswith("# Cost sheet: client-a\n")
    assert "| **Total** | **0.1234 USD** |" in md  # one rounding: as the summary and index read
    assert "| api (shared workload) | requests | 66,348 | - | withheld\\* | withheld\\* |" in md
    lines = [line for line in md.splitlines() if line.startswith("| ") and "|---" not in line]
    widths = {line.count("|") - line.count("\\|") for line in lines[:10]}
    assert len(widths) <= 2  # tables are well formed (the header table has 3 pipes)


def test_saas_finance_summary(saas_pack):
    page = soup(saas_pack / "finance-summary.html")
    golden = json.loads((GOLDEN / "saas-three-clients.json").read_text())
    cascade = table(page, "cascade-table")
    labels = [r[0] for r in cascade[1:]]
    assert labels[:5] == ["clients", "unattributed", "idle", "overhead", "reserve"]
    assert "excluded: loadtest/k6" in labels and "excluded: monitoring/prometheus" in labels
    assert labels[-2:] == ["Reference total", "Gap"]
    body = cascade[1:-2]
    assert sum(to_units(r[2]) for r in body) == to_units(cascade[-2][2])
    assert cascade[-2][2] == "0.6434"
    assert cascade[-1][2] == "0.0000"
    assert page.find(id="gap").get_text() == "0.0000"
    assert page.find(id="idle-ratio").get_text() == "55.7 %"  # 0.32191 / 0.57844
    clients = table(page, "clients-table")
    assert clients[0][:5] == ["Client", "the rule", "requests", "CPU seconds", "even split"]
    for row in clients[1:-1]:
        client = row[0]
        for col, key in ((2, "requests"), (3, "cpu_seconds"), (4, "even")):
            exact = golden["keys"][key]["clients"][client]["amount"]
            assert abs(to_units(row[col].rstrip(" †")) - exact / 100) <= 1
    for col in range(1, 5):
        assert sum(to_units(r[col].rstrip(" †")) for r in clients[1:-1]) == to_units(
            clients[-1][col]
        )
    svg = page.select_one("#cascade svg")
    assert svg is not None and "Reconciliation cascade" in svg.find("title").get_text()
    assert "saas-2026-11" in page.select_one("#rules").get_text()


def test_saas_index_links_every_file(saas_pack):
    page = soup(saas_pack / "index.html")
    links = {a["href"] for a in page.find_all("a", href=True)}
    for href in links:
        assert (saas_pack / href).is_file(), href
    for client in SAAS_CLIENTS:
        for ext in ("html", "pdf", "md"):
            assert f"clients/{client}.{ext}" in links
    assert {"finance-summary.html", "finance-summary.pdf", "finance-summary.md"} <= links


# --------------------------------------------------------------------------- the teams example


@pytest.fixture(scope="module")
def teams_pack(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("teams") / "pack"
    report(
        out,
        "--config",
        str(TEAMS / "rules-proportional.yaml"),
        "--month",
        "2026-01",
        "--format",
        "html,pdf,md",
    )
    return out


def test_teams_sheets_show_distributed_idle(teams_pack):
    # team-a's 96.363574 reads 96.37 as in the summary and index (one rounding; the
    # summary's column must add up to 167.83), its lines rounded to it (56.502 -> 56.51)
    expected = {"team-a": "96.37", "team-b": "35.73", "team-c": "35.73"}
    idle = {"team-a": "39.86", "team-b": "14.78", "team-c": "14.78"}
    direct = {"team-a": "56.51", "team-b": "20.95", "team-c": "20.95"}
    for client in TEAM_CLIENTS:
        page = soup(teams_pack / "clients" / f"{client}.html")
        rows = table(page, "lines-table")
        lines = {r[0]: r for r in rows[1:-1]}
        assert lines[f"{client} your workload"][-1] == direct[client]
        assert lines["idle distributed idle"][-1] == idle[client]
        assert lines["idle distributed idle"][1] == "proportional"
        assert lines["idle distributed idle"][4] == "withheld *"  # three teams: fewer than 5
        assert rows[-1][-1] == expected[client]
        text = page.get_text(" ", strip=True)
        assert "in proportion to each client's cost" in text
        assert "No alternative key" in text  # no usage data: no key to compare
        assert page.select_one(".total-box .grade").get_text() == "high"
        for body in (page.get_text(" "), pdf_text(teams_pack / "clients" / f"{client}.pdf")):
            assert other_ids_in(body, client, TEAM_CLIENTS) == []


def test_teams_summary_marks_the_cent_moved_to_add_up(teams_pack):
    page = soup(teams_pack / "finance-summary.html")
    clients = table(page, "clients-table")
    # 96.363574 + 35.731713 + 35.731713 = 167.827: the column must show 167.83, so one cent
    # moves to team-a (largest remainder), which the summary marks and explains.
    assert [r[1] for r in clients[1:]] == ["96.37 †", "35.73", "35.73", "167.83"]
    assert page.find(id="rounding-note") is not None
    cascade = table(page, "cascade-table")
    assert cascade[3][1] == "69.42 before distribution, 69.42 distributed to clients"
    assert page.find(id="idle-ratio").get_text() == "41.4 %"


# --------------------------------------------------------------------------- a changing rule

RULES = """
currency: EUR
sources:
  costs: [costs.csv]
  usage: [usage.csv]
confidence:
  key_spread: {high: 0.05, medium: 0.5}
  no_client_share: {high: 0.01, medium: 0.2}
  missing_hours: {high: 0.0, medium: 0.3}
rules:
  - id: api-by-requests
    effective_from: "2026-10-01"
    description: API by request count
    workloads:
      - match: {namespace: app, controller: api}
        class: shared
        service: api
        key: requests
      - match: {namespace: tenant-acme}
        class: direct
        client: acme
      - match: {namespace: loadtest}
        class: excluded
        reason: load tests before the acme launch
      - match: {name: __idle__}
        class: idle
    idle: keep
  - id: api-by-cpu
    effective_from: "2026-11-15"
    description: API by CPU time since acme moved its batch jobs to the API
    workloads:
      - match: {namespace: app, controller: api}
        class: shared
        service: api
        key: cpu_seconds
      - match: {namespace: tenant-acme}
        class: direct
        client: acme
      - match: {namespace: loadtest}
        class: excluded
        reason: load tests before the acme launch
      - match: {name: __idle__}
        class: idle
    idle: keep
"""
CLIENTS = ["acme", "globex", "initech"]
HOURS = ["2026-10-10T10", "2026-11-05T10", "2026-11-05T11", "2026-11-20T10", "2026-11-20T11"]


def _scenario(folder: Path) -> Path:
    cost_rows = [
        "window_start,window_end,name,cluster,namespace,controller_kind,controller,total_cost"
    ]
    usage_rows = ["window_start,window_end,service,client,requests,cpu_seconds"]
    for h in HOURS:
        start = f"{h}:00:00Z"
        end = f"{h[:-2]}{int(h[-2:]) + 1:02d}:00:00Z"
        w = f"{start},{end}"
        cost_rows += [
            f"{w},,c1,app,deployment,api,1.2",
            f"{w},,c1,tenant-acme,deployment,worker,0.3",
            f"{w},,c1,loadtest,job,acme-k6,0.05",
            f"{w},__idle__,c1,,,,0.45",
        ]
        if h == "2026-11-20T11":
            continue  # an hour without any usage row: the API's cost is unattributed
        usage_rows += [
            f"{w},api,acme,900,10",
            f"{w},api,globex,90,80",
            f"{w},api,initech,10,10",
        ]
        if h == "2026-11-05T11":
            usage_rows.append(f"{w},api,,100,5")  # usage without client id
    (folder / "costs.csv").write_text("\n".join(cost_rows) + "\n")
    (folder / "usage.csv").write_text("\n".join(usage_rows) + "\n")
    rules = folder / "rules.yaml"
    rules.write_text(RULES)
    return rules


@pytest.fixture(scope="module")
def change_pack(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("change")
    rules = _scenario(folder)
    out = folder / "pack"
    report(out, "--config", str(rules), "--month", "2026-11", "--format", "html,md,pdf")
    return out


def test_change_notice_within_the_period_and_against_last_month(change_pack):
    page = soup(change_pack / "clients" / "globex.html")
    notices = page.select("section.notice")
    titles = [n.find("h2").get_text(" ", strip=True) for n in notices]
    assert titles == [
        "Change notice: The rule changed on 2026-11-15: the denominator changed",
        "Change notice: Another rule than last period: the denominator changed",
        # what changed since last month, the bridge (its figures: tests/test_explain_cli.py)
        "Change notice: What changed since 2026-10: +1.06 EUR",
    ]
    within = [
        [c.get_text(" ", strip=True) for c in r.find_all(["th", "td"])]
        for r in notices[0].find_all("tr")
    ]
    labels = [r[0] for r in within[1:]]
    assert labels == [
        "Charged under api-by-requests (until 2026-11-15)",
        "Charged under api-by-cpu (from 2026-11-15)",
        "Whole period under api-by-requests",
        "Whole period under api-by-cpu",
    ]
    # globex: 90 of 1,000 requests (0.108 of 1.2) or 80 of 100 CPU seconds (0.96 of 1.2)
    charged = to_units(within[1][1]) + to_units(within[2][1])
    assert charged == to_units(table(page, "lines-table")[-1][-1])
    assert to_units(within[3][1]) < to_units(within[4][1])
    previous = [
        [c.get_text(" ", strip=True) for c in r.find_all(["th", "td"])]
        for r in notices[1].find_all("tr")
    ]
    assert [r[0] for r in previous[1:]] == [
        "2026-10 as issued (api-by-requests)",
        "2026-10 restated under api-by-cpu",
        "2026-11 (api-by-requests, api-by-cpu)",
    ]
    assert previous[1][1] == "0.11"  # 1.2 x 90 / 1,000 = 0.108
    assert previous[2][1] == "0.96"  # 1.2 x 80 / 100
    md = (change_pack / "clients" / "globex.md").read_text()
    assert "> **Change notice: The rule changed on 2026-11-15" in md
    summary = soup(change_pack / "finance-summary.html")
    assert len(summary.select("section.notice")) == 2


def test_confidence_figures_in_the_changing_scenario(change_pack):
    page = soup(change_pack / "clients" / "initech.html")
    conf = {r[0]: r for r in table(page, "confidence-table")[1:]}
    # 1 of the 4 November hours had no usage row at all
    assert conf["hours without usage data"][1] == "25.0 %"
    assert conf["hours without usage data"][2] == "medium"
    assert "api: 1 h of 4 h" in conf["hours without usage data"][4]
    # no-client usage under the key in force: 100 of 2,100 requests in the two hours under
    # api-by-requests (4.8 %), none of 100 CPU seconds in the hour under api-by-cpu
    assert conf["usage without client id"][1] == "4.8 %"
    assert conf["usage without client id"][2] == "medium"
    assert conf["usage without client id"][4] == "api (CPU seconds): 0.0 %; api (requests): 4.8 %"
    assert page.select_one(".total-box .grade").get_text() == "low"  # worst of the three
    summary = soup(change_pack / "finance-summary.html")
    unattributed = summary.select_one("#unattributed").get_text(" ", strip=True)
    assert "no usage in window" in unattributed and "usage without client id" in unattributed


def test_other_clients_are_redacted_from_rule_text(change_pack):
    for client in CLIENTS:
        stem = change_pack / "clients" / client
        html = stem.with_suffix(".html").read_text()
        for text in (html, stem.with_suffix(".md").read_text(), pdf_text(stem.with_suffix(".pdf"))):
            assert other_ids_in(text, client, CLIENTS) == []
        if client != "acme":
            assert REDACTED in html  # "load tests before the acme launch", "acme-k6"
            assert "charged to you alone" not in html
            assert "acme" not in html
    acme = (change_pack / "clients" / "acme.html").read_text()
    assert "since acme moved its batch jobs" in acme
    assert "charged to you alone" in acme
    assert "loadtest/[another client]-k6" in (change_pack / "clients" / "globex.html").read_text()


def test_redactor_keeps_the_readers_own_id():
    redact = Redactor(["team-a", "team-a-eu", "acme"], me="team-a-eu")
    assert redact("team-a-eu and team-a, acme-k6, acmecorp, acme.") == (
        "team-a-eu and [another client], [another client]-k6, [another client]corp, "
        "[another client]."
    )
    assert find_ids("team-a-eu only", ["team-a"], me="team-a-eu") == []


def test_no_sheet_shows_another_clients_amount(change_pack, tmp_path):
    rules = change_pack.parent / "rules.yaml"
    doc = runner.invoke(
        app, ["allocate", "--config", str(rules), "--month", "2026-11", "--format", "json"]
    )
    totals = {
        c["client"]: micros_to_text(c["amount"], 2) for c in json.loads(doc.stdout)["clients"]
    }
    assert len(set(totals.values())) == 3  # distinct figures, so a text search is meaningful
    for client in CLIENTS:
        stem = change_pack / "clients" / client
        for text in (stem.with_suffix(".html").read_text(), pdf_text(stem.with_suffix(".pdf"))):
            assert totals[client] in text
            for other in CLIENTS:
                if other != client:
                    assert not re.search(rf"(?<![\d.,]){re.escape(totals[other])}(?!\d)", text), (
                        client,
                        other,
                    )


def test_client_option_renders_only_that_sheet(tmp_path):
    rules = _scenario(tmp_path)
    out = tmp_path / "one"
    said = report(
        out, "--config", str(rules), "--month", "2026-11", "--client", "globex", "--format", "md"
    )
    assert said.startswith("wrote 3 files for 1 client(s) to ")  # the summary is on stdout
    assert sorted(p.name for p in (out / "clients").iterdir()) == ["globex.md"]
    index = soup(out / "index.html")
    rows = table(index, "index-table")
    assert sorted(r[0] for r in rows[1:-1]) == CLIENTS  # every client, one sheet linked
    assert {a["href"] for a in index.find_all("a", href=True)} == {
        "finance-summary.md",
        "clients/globex.md",
    }
    bad = runner.invoke(
        app, ["report", "--config", str(rules), "--client", "nobody", "--out", str(out)]
    )
    assert bad.exit_code == 2
    assert "error: --client: no client 'nobody' in the period" in bad.output


def test_templates_can_be_overridden_file_by_file(tmp_path):
    rules = _scenario(tmp_path)
    brand = tmp_path / "brand"
    brand.mkdir()
    (brand / "base.html").write_text(
        (ROOT / "tenantcost" / "templates" / "base.html")
        .read_text()
        .replace("Kubernetes cost allocation", "ACME Cloud Billing")
    )
    out = tmp_path / "branded"
    report(
        out,
        "--config",
        str(rules),
        "--month",
        "2026-11",
        "--format",
        "html",
        "--templates",
        str(brand),
    )
    page = soup(out / "clients" / "initech.html")
    assert page.select_one(".brand").get_text(strip=True) == "ACME Cloud Billing"
    assert page.find(id="lines-table") is not None  # the rest comes from the defaults


def test_report_errors_are_one_line(tmp_path, monkeypatch):
    rules = _scenario(tmp_path)
    bad_format = runner.invoke(
        app,
        ["report", "--config", str(rules), "--format", "html,docx", "--out", str(tmp_path / "o")],
    )
    assert bad_format.exit_code == 2
    assert bad_format.output.strip() == (
        "error: --format: expected a comma list of html, pdf, md, got 'docx'"
    )
    monkeypatch.setitem(sys.modules, "weasyprint", None)  # as if WeasyPrint failed to import
    no_pdf = runner.invoke(
        app, ["report", "--config", str(rules), "--format", "pdf", "--out", str(tmp_path / "p")]
    )
    assert no_pdf.exit_code == 2
    assert no_pdf.output.startswith("error: --format pdf needs WeasyPrint")
    assert "Traceback" not in no_pdf.output and len(no_pdf.output.strip().splitlines()) == 1


def test_confidence_thresholds_are_validated(tmp_path):
    rules = _scenario(tmp_path)
    text = rules.read_text().replace("{high: 0.05, medium: 0.5}", "{high: 0.6, medium: 0.5}")
    rules.write_text(text)
    result = runner.invoke(app, ["check-config", str(rules)])
    assert result.exit_code == 2
    assert "confidence.key_spread" in result.output
    assert "high (0.6) must not exceed medium (0.5)" in result.output


def test_reports_are_reproducible(tmp_path, monkeypatch):
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1790000000")
    rules = _scenario(tmp_path)
    a, b = tmp_path / "a", tmp_path / "b"
    report(a, "--config", str(rules), "--month", "2026-11", "--format", "html,md")
    report(b, "--config", str(rules), "--month", "2026-11", "--format", "html,md")
    for path in sorted(a.rglob("*.*")):
        other = b / path.relative_to(a)
        assert path.read_text().replace(str(a), "OUT") == other.read_text().replace(str(b), "OUT")
    assert "2026-09-21T" in (a / "clients" / "acme.md").read_text()
