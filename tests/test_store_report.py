"""`report --from-db` on SQLite and a real PostgreSQL 15: a closed month's pack rendered from
the store, without recomputing it, is the pack `report` renders from the same files, page by
page, but for three explicit differences (the provenance's input rows, the command that
reproduces the pack, and the statement block saying the month was issued incomplete); after a
reopen and a correction, revision 1 renders byte for byte as before and revision 2 says what
changed, by how much and why; drafts say they are drafts; refusals are one line, exit 2."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from sqlalchemy import insert, select
from typer.testing import CliRunner

from tenantcost.cli import app
from tenantcost.store.engine import open_engine
from tenantcost.store.models import (
    RunClientFigure,
    RunClientService,
    RunLine,
    RunPack,
    RunPool,
    RunReport,
    RunUnattributed,
    RunWorkload,
    table,
)
from tenantcost.store.settings import resolve_settings

from .test_properties import scenarios

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "saas-three-clients"
RULES = EXAMPLE / "rules.yaml"
AT = "2026-12-01T00:00:00Z"
REASON = "client-b's api requests were under-counted by the gateway (ticket 42)"
CLIENT_REASON = "client-b's api requests were under-counted"
runner = CliRunner()


def cli(*args: str):
    return runner.invoke(app, [str(a) for a in args])


def ok(*args: str) -> str:
    done = cli(*args)
    assert done.exit_code == 0, done.output
    return done.stdout


def one_line_refusal(result, *fragments: str) -> str:
    assert result.exit_code == 2, result.output
    err = result.stderr.strip()
    assert err.startswith("error: ") and "\n" not in err, err
    assert "Traceback" not in result.output
    for fragment in fragments:
        assert fragment in err, f"{fragment!r} not in {err!r}"
    return err


def store_args(url: str, tmp_path: Path) -> list[str]:
    return ["--db", url, "--data", str(tmp_path / "data")]


def fill_store(url: str, tmp_path: Path, rules: Path, costs: list[Path], usage: Path) -> None:
    db = store_args(url, tmp_path)
    ok("db", "upgrade", *db)
    ok("rules", "load", rules, *db)
    ok("ingest", "usage", "--usage", usage, *db)
    for path in costs:
        ok("ingest", "costs", "--costs", path, *db)


def pages(folder: Path) -> dict[str, str]:
    return {
        p.relative_to(folder).as_posix(): p.read_text(encoding="utf-8")
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


# What must differ between a pack from files and one from the store, and nothing else:
NORMALISE = [
    # 1. the provenance's input rows: files and their sha256 / stored batches and theirs
    (re.compile(r'<tr><th scope="row">(rules|costs|usage)</th><td><code>[^<]*</code></td>'
                r'<td><code title="sha256 [0-9a-f]{64}">[0-9a-f]{12}</code></td></tr>'),
     r"INPUT \1"),
    (re.compile(r"^\| (rules|costs|usage) \| `[^`]*` \| `[0-9a-f]{12}` \|$", re.M), r"INPUT \1"),
    # 2. the command reproducing the pack (report --config ... / report --month M --from-db)
    (re.compile(r"tenantcost report --(config|month) [^<\n]*"), "REPRODUCE"),
    # 3. the statement block of a month issued incomplete (the example has one hour of 720)
    (re.compile(r'<section class="notice statement statement-issued".*?</section>\n', re.S), ""),
    (re.compile(r"\n\n> \*\*Issued for an incomplete month[^\n]*\*\*\n(>[^\n]*\n)*"), "\n"),
]  # fmt: skip


def normalised(text: str) -> str:
    for pattern, replacement in NORMALISE:
        text = pattern.sub(replacement, text)
    return text


def assert_same_pages(files: Path, stored: Path) -> None:
    a, b = pages(files), pages(stored)
    assert sorted(a) == sorted(b)
    for name in a:
        assert normalised(a[name]) == normalised(b[name]), name


def input_rows(page: str) -> list[tuple[str, str, str]]:
    return re.findall(
        r'<tr><th scope="row">(\w+)</th><td><code>([^<]*)</code></td><td><code '
        r'title="sha256 ([0-9a-f]{64})">',
        page,
    )


def test_from_db_pack_is_the_file_pack(store_url: str, tmp_path: Path):
    fill_store(store_url, tmp_path, RULES, [EXAMPLE / "costs.json"], EXAMPLE / "usage.csv")
    db = store_args(store_url, tmp_path)
    ok("close", "--month", "2026-11", "--allow-incomplete", *db)
    common = ["--month", "2026-11", "--format", "html,md", "--generated-at", AT]
    common += ["--view", "internal"]  # the reproduce command and the input rows
    ok("report", "--config", RULES, *common, "--out", tmp_path / "files")
    ok("report", "--from-db", *common, *db, "--out", tmp_path / "stored")
    assert_same_pages(tmp_path / "files", tmp_path / "stored")
    sheet = (tmp_path / "stored" / "clients" / "client-b.md").read_text()
    assert "| **Total** | **0.0772 USD** |" in sheet
    assert "| api (shared workload) | requests | 1,710 |" in sheet
    assert "tenantcost report --month 2026-11 --from-db --revision 1 --out" in sheet
    assert "Issued for an incomplete month: revision 1 of 2026-11" in sheet
    assert "719 of 720 hours lack costs" in sheet
    # The stored rule file has the file's sha256; each batch row names the batch and its own.
    html = (tmp_path / "stored" / "finance-summary.html").read_text()
    files_html = (tmp_path / "files" / "finance-summary.html").read_text()
    stored_rows, file_rows = input_rows(html), input_rows(files_html)
    assert stored_rows[0][0] == "rules" and stored_rows[0][2] == file_rows[0][2]
    assert stored_rows[0][1].startswith("stored rule file ") and str(RULES) in stored_rows[0][1]
    assert [r[0] for r in stored_rows[1:]] == ["costs", "usage"]
    assert [r[1].split(":")[0] for r in stored_rows[1:]] == ["batch 2", "batch 1"]


def shifted(text: str) -> str:
    return text.replace("2026-11-03T10:00:00Z", "2026-11-20T10:00:00Z").replace(
        "2026-11-03T11:00:00Z", "2026-11-20T11:00:00Z"
    )


def two_versions(tmp_path: Path) -> tuple[Path, list[Path], Path]:
    """The example with a second hour (2026-11-20) under a second rule version (api by CPU
    seconds, idle shared in proportion), so the month spans two versions: lines per version,
    the change notice (with its re-runs) and unattributed cost of both causes must come back
    from the store unchanged."""
    rules = RULES.read_text()
    second = rules[rules.index("  - id: saas-2026-11"):].replace(
        "id: saas-2026-11", "id: saas-2026-11-b").replace(
        'effective_from: "2026-11-01"', 'effective_from: "2026-11-15"').replace(
        "service: api\n        key: requests", "service: api\n        key: cpu_seconds").replace(
        "idle: keep", "idle: proportional")  # fmt: skip
    folder = tmp_path / "inputs"
    folder.mkdir()
    (folder / "rules.yaml").write_text(rules.rstrip("\n") + "\n" + second)
    (folder / "costs-20.json").write_text(shifted((EXAMPLE / "costs.json").read_text()))
    usage = (EXAMPLE / "usage.csv").read_text()
    lines = usage.splitlines()
    later = [shifted(line).replace("client-c,342,", "client-c,30000,") for line in lines[1:]]
    # In the second hour import-worker has no usage (its cost is unattributed, an hour without
    # usage data) and some api requests carry no client id (unattributed too).
    later = [line for line in later if ",import-worker," not in line]
    later.append("2026-11-20T10:00:00Z,2026-11-20T11:00:00Z,api,,5000,1.0")
    (folder / "usage.csv").write_text("\n".join([*lines, *later]) + "\n")
    return (
        folder / "rules.yaml",
        [EXAMPLE / "costs.json", folder / "costs-20.json"],
        (folder / "usage.csv"),
    )


def test_a_month_of_two_rule_versions_renders_the_same_from_the_store(
    store_url: str, tmp_path: Path
):
    rules, costs, usage = two_versions(tmp_path)
    fill_store(store_url, tmp_path, rules, costs, usage)
    db = store_args(store_url, tmp_path)
    ok("close", "--month", "2026-11", "--allow-incomplete", *db)
    common = ["--month", "2026-11", "--format", "html,md", "--generated-at", AT]
    common += ["--view", "internal"]  # the input rows, normalised above
    inputs = ["--costs", costs[0], "--costs", costs[1], "--usage", usage]
    ok("report", "--config", rules, *inputs, *common, "--out", tmp_path / "files")
    ok("report", "--from-db", *common, *db, "--out", tmp_path / "stored")
    assert_same_pages(tmp_path / "files", tmp_path / "stored")
    sheet = (tmp_path / "stored" / "clients" / "client-c.md").read_text()
    assert "Change notice: The rule changed on 2026-11-15" in sheet
    assert "Whole period under saas-2026-11-b" in sheet
    assert "| import-worker (shared) |" in sheet and "no usage in window" in sheet
    assert "usage without client id" in sheet


def close_correct_close(url: str, tmp_path: Path) -> list[str]:
    """Revision 1, a refused ingest, reopen with a reason, the correction, revision 2."""
    db = store_args(url, tmp_path)
    fixed = tmp_path / "fixed.csv"
    usage = (EXAMPLE / "usage.csv").read_text()
    fixed.write_text(usage.replace("client-b,1710,", "client-b,3420,"))
    refused = cli("ingest", "usage", "--usage", fixed, *db)
    one_line_refusal(refused, "reopen")
    ok("reopen", "--month", "2026-11", "--reason", REASON, "--client-reason", CLIENT_REASON, *db)
    ok("ingest", "usage", "--usage", fixed, *db)
    ok("close", "--month", "2026-11", "--allow-incomplete", *db)
    return db


def test_revision_1_renders_byte_identical_after_a_correction_and_revision_2_is_restated(
    store_url: str, tmp_path: Path
):
    fill_store(store_url, tmp_path, RULES, [EXAMPLE / "costs.json"], EXAMPLE / "usage.csv")
    db = store_args(store_url, tmp_path)
    ok("close", "--month", "2026-11", "--allow-incomplete", *db)
    render = ["report", "--month", "2026-11", "--from-db", "--format", "html,md",
              "--view", "internal", "--generated-at", AT, *db,
              "--out", tmp_path / "pack"]  # fmt: skip
    ok(*render)  # the latest issued revision: 1
    before = pages(tmp_path / "pack")
    close_correct_close(store_url, tmp_path)
    ok(*render, "--revision", "1")
    assert pages(tmp_path / "pack") == before  # every page, byte for byte

    ok(*render[:-1], tmp_path / "latest")  # the latest issued revision: 2
    b = (tmp_path / "latest" / "clients" / "client-b.md").read_text()
    assert "> **Restated statement: revision 2 of 2026-11**" in b
    assert f"The month was reopened for this reason: {CLIENT_REASON}." in b
    assert "ticket 42" not in b  # the internal reason is finance's
    assert "Your amount changed by +0.0029." in b
    assert "> | Revision 1 (as issued before) | 0.0772 |" in b
    assert "> | Revision 2 (this statement) | 0.0801 |" in b
    assert "> | Difference | +0.0029 |" in b
    assert "| **Total** | **0.0801 USD** |" in b
    assert "| api (shared workload) | requests | 3,420 |" in b
    assert "--from-db --revision 2 --out" in b
    html = (tmp_path / "latest" / "clients" / "client-b.html").read_text()
    assert '<section class="notice statement statement-restated"' in html
    assert '<tr><th scope="row">Difference</th><td class="num">+0.0029</td></tr>' in html
    # Another client reads the reason with client-b's name redacted, and its own difference.
    a = (tmp_path / "latest" / "clients" / "client-a.md").read_text()
    assert "reopened for this reason: \\[another client\\]'s api requests" in a
    assert "client-b" not in a
    assert "> | Difference | -0.0029 |" in a and "| **Total** | **0.1205 USD** |" in a
    summary = (tmp_path / "latest" / "finance-summary.md").read_text()
    assert f"reopened for this reason: {REASON}." in summary and CLIENT_REASON in summary
    assert "> | Client | Revision 1 | Revision 2 | Difference |" in summary
    assert "> | client-b | 0.0772 | 0.0801 | +0.0029 |" in summary
    # revision 1 as it was sent (0.1234: one rounding, to the clients line; not 0.1235 alone)
    assert "> | client-a | 0.1234 | 0.1205 | -0.0029 |" in summary
    # Revision 2's figures are those of `report` on the corrected files.
    ok("report", "--config", RULES, "--usage", tmp_path / "fixed.csv", "--month", "2026-11",
       "--format", "md", "--generated-at", AT, "--view", "internal",
       "--out", tmp_path / "files")  # fmt: skip
    files = (tmp_path / "files" / "clients" / "client-b.md").read_text()
    strip = re.compile(r"\n\n> \*\*Restated statement[^\n]*\*\*\n(>[^\n]*\n)*")
    inputs = re.compile(r"^INPUT \w+\n", re.M)  # revision 2 read two usage batches
    assert inputs.sub("", normalised(strip.sub("\n", b))) == inputs.sub("", normalised(files))


def test_a_draft_says_so_and_needs_no_close(tmp_path: Path):
    url = f"sqlite:///{tmp_path / 's.db'}"
    fill_store(url, tmp_path, RULES, [EXAMPLE / "costs.json"], EXAMPLE / "usage.csv")
    db = store_args(url, tmp_path)
    refused = cli("report", "--month", "2026-11", "--from-db", *db, "--out", tmp_path / "x")
    one_line_refusal(refused, "2026-11 has no issued statement", "tenantcost close --month "
                     "2026-11", "--draft")  # fmt: skip
    assert not (tmp_path / "x").exists()
    run_id = ok("run", "--month", "2026-11", *db).rstrip("\n").rsplit("\n", 1)[1].split()[1]
    common = ["--month", "2026-11", "--from-db", "--format", "md", "--generated-at", AT, *db]
    common += ["--view", "internal"]  # the reproduce command
    ok("report", *common, "--draft", "--out", tmp_path / "draft")
    ok("report", *common, "--run", run_id, "--out", tmp_path / "run")
    draft = (tmp_path / "draft" / "clients" / "client-a.md").read_text()
    assert "> **Draft: not an issued statement**" in draft
    assert (
        f"These figures are those of run {run_id}, which no close issued; 2026-11 has no "
        "issued statement yet." in draft
    )
    assert f"--from-db --run {run_id} --out" in draft
    assert pages(tmp_path / "draft") == {
        k: v.replace(str(tmp_path / "run"), str(tmp_path / "draft"))
        for k, v in pages(tmp_path / "run").items()
    }
    # Once that run is issued, --draft and --run show it as the revision it was issued as.
    ok("close", "--month", "2026-11", "--allow-incomplete", *db)
    ok("report", *common, "--out", tmp_path / "issued")
    ok("report", *common, "--draft", "--out", tmp_path / "draft")
    assert pages(tmp_path / "draft") == {
        k: v.replace(str(tmp_path / "issued"), str(tmp_path / "draft"))
        for k, v in pages(tmp_path / "issued").items()
    }
    assert "--from-db --revision 1 --out" in (tmp_path / "draft" / "finance-summary.md").read_text()


@pytest.mark.parametrize(
    ("extra", "fragments"),
    [
        (["--revision", "2"], ["--revision: 2026-11 has revisions 1 to 1, not 2"]),
        (["--config", str(RULES)], ["--config: --from-db renders the stored run"]),
        (["--usage", "u.csv"], ["--usage: --from-db renders the stored run"]),
        (["--draft", "--revision", "1"], ["at most one of --revision, --run and --draft"]),
        (["--run", "nope"], ["--run: no run 'nope' in the store"]),
        (["--month", "2026-13"], ["2026-13"]),
        (["--month", "2026-10"], ["2026-10 has no issued statement"]),
        (["--format", "docx"], ["--format: expected a comma list of html, pdf, md"]),
        (["--client", "nobody"], ["--client: no client 'nobody' in the period"]),
    ],
)
def test_bad_from_db_options_are_one_line(extra: list[str], fragments: list[str], tmp_path: Path):
    url = f"sqlite:///{tmp_path / 's.db'}"
    fill_store(url, tmp_path, RULES, [EXAMPLE / "costs.json"], EXAMPLE / "usage.csv")
    db = store_args(url, tmp_path)
    ok("close", "--month", "2026-11", "--allow-incomplete", *db)
    month = [] if "--month" in extra else ["--month", "2026-11"]
    done = cli("report", "--from-db", *month, *extra, *db, "--out", tmp_path / "out")
    one_line_refusal(done, *fragments)
    assert not (tmp_path / "out").exists()


def test_store_options_need_from_db_and_config_stays_required_without(tmp_path: Path):
    out = ["--out", str(tmp_path / "out")]
    one_line_refusal(cli("report", "--month", "2026-11", "--revision", "1", *out),
                     "--revision goes with --from-db")  # fmt: skip
    one_line_refusal(cli("report", "--config", RULES, "--db", "sqlite:///x.db", *out),
                     "--db goes with --from-db")  # fmt: skip
    one_line_refusal(cli("report", "--from-db", "--db", f"sqlite:///{tmp_path / 'n.db'}", *out),
                     "--from-db needs --month")  # fmt: skip
    missing = cli("report", "--month", "2026-11", *out)
    assert missing.exit_code == 2 and "Missing option '--config'" in missing.output
    assert not (tmp_path / "out").exists()


def test_a_pdf_from_the_store(tmp_path: Path):
    url = f"sqlite:///{tmp_path / 's.db'}"
    fill_store(url, tmp_path, RULES, [EXAMPLE / "costs.json"], EXAMPLE / "usage.csv")
    db = store_args(url, tmp_path)
    ok("close", "--month", "2026-11", "--allow-incomplete", *db)
    ok("report", "--month", "2026-11", "--from-db", "--client", "client-c", "--format", "pdf",
       "--jobs", "1", *db, "--out", tmp_path / "pdf")  # fmt: skip
    assert (tmp_path / "pdf" / "clients" / "client-c.pdf").read_bytes().startswith(b"%PDF")
    assert sorted(p.name for p in (tmp_path / "pdf").rglob("*.pdf")) == [
        "client-c.pdf", "finance-summary.pdf"]  # fmt: skip


def count(url: str, model: type) -> dict[str, int]:
    """Rows per run of a table, and the set of rule ids of run_line."""
    engine = open_engine(resolve_settings(db=url, environ={}), foreign_keys=False)
    with engine.connect() as connection:
        rows = connection.execute(select(table(model))).mappings().all()
    engine.dispose()
    out: dict[str, int] = {}
    for row in rows:
        out[row["run_id"]] = out.get(row["run_id"], 0) + 1
    return out


def test_run_keeps_what_sheets_need_and_close_adds_the_pack_figures(store_url: str, tmp_path):
    fill_store(store_url, tmp_path, RULES, [EXAMPLE / "costs.json"], EXAMPLE / "usage.csv")
    db = store_args(store_url, tmp_path)
    run_id = ok("run", "--month", "2026-11", *db).rstrip("\n").rsplit("\n", 1)[1].split()[1]
    assert count(store_url, RunReport) == {run_id: 1}
    assert count(store_url, RunLine) == {run_id: 9}  # 3 clients x 3 sources, one rule version
    assert count(store_url, RunPool) == {run_id: 3}  # api, import-worker, external search
    assert count(store_url, RunWorkload) == {run_id: 6}  # idle, overhead, reserve, 3 exclusions
    assert count(store_url, RunUnattributed) == {}  # every pool reached clients
    assert count(store_url, RunPack) == {} and count(store_url, RunClientFigure) == {}
    ok("close", "--month", "2026-11", "--allow-incomplete", *db)  # issues that very run
    assert count(store_url, RunPack) == {run_id: 1}
    assert count(store_url, RunClientFigure) == {run_id: 12}  # 3 clients x (rule + 3 keys)
    assert count(store_url, RunClientService) == {run_id: 6}  # 3 clients x 2 services


def test_a_draft_of_a_run_whose_inputs_changed_is_refused(tmp_path: Path):
    url = f"sqlite:///{tmp_path / 's.db'}"
    fill_store(url, tmp_path, RULES, [EXAMPLE / "costs.json"], EXAMPLE / "usage.csv")
    db = store_args(url, tmp_path)
    run_id = ok("run", "--month", "2026-11", *db).rstrip("\n").rsplit("\n", 1)[1].split()[1]
    ok("ingest", "usage", "--usage", EXAMPLE / "usage.csv", "--mode", "sum", *db)
    refused = cli("report", "--month", "2026-11", "--from-db", "--run", run_id, *db,
                  "--out", tmp_path / "out")  # fmt: skip
    one_line_refusal(refused, f"the inputs of 2026-11 changed since run {run_id}",
                     "tenantcost run --month 2026-11")  # fmt: skip
    assert not (tmp_path / "out").exists()


@pytest.fixture(scope="module")
def round_trip_engine(tmp_path_factory: pytest.TempPathFactory):
    """One SQLite store for the property test (migrating a store per example is too slow)."""
    from tenantcost.store.schema import upgrade

    url = f"sqlite:///{tmp_path_factory.mktemp('roundtrip') / 's.db'}"
    engine = open_engine(resolve_settings(db=url, environ={}), create=True, foreign_keys=False)
    upgrade(engine)
    yield engine
    engine.dispose()


@pytest.mark.filterwarnings("ignore::tenantcost.errors.InputWarning")
@settings(
    max_examples=15,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(scenarios())
def test_a_recorded_run_reads_back_as_the_report_reads_it(round_trip_engine, scenario):
    """For any input, what `run` and `close` record reads back into an allocation and pack
    figures that every page of the report sees as the originals: cascade, summaries, pools,
    withheld pools, client lines, key amounts, grades' usage figures, change notices."""
    import uuid

    import yaml

    from tenantcost.allocate import allocate_stream
    from tenantcost.collect import CostInput
    from tenantcost.config.rules import parse_rules
    from tenantcost.inputs import Inputs
    from tenantcost.reconcile import (
        cascade,
        exclusion_summary,
        residual_summary,
        unattributed_summary,
    )
    from tenantcost.report.pack import pack_figures
    from tenantcost.report.privacy import too_few_clients, withheld_pools
    from tenantcost.split import connect
    from tenantcost.store.models import Run, utcnow
    from tenantcost.store.report_figures import (
        load_pack_figures,
        load_run,
        record_pack_figures,
        record_run_tables,
    )
    from tenantcost.store.runs import StoredRules
    from tenantcost.usage_source import FrameUsage
    from tenantcost.windows import Period
    from tenantcost.writers.json_output import client_lines

    from .test_properties import RULES as PROPERTY_RULES

    c, u, key, idle = scenario
    document = yaml.safe_load(PROPERTY_RULES.replace("IDLE", idle))
    ruleset = parse_rules(document, origin="rules.yaml")
    con, period = connect(), Period.month("2026-11")
    usage = FrameUsage(u) if not u.empty else None
    result = allocate_stream(c, usage, ruleset, key=key, period=period, detail="period", con=con)
    figures = pack_figures(Inputs(Path("rules.yaml"), ruleset, CostInput(c, []), usage, [], con),
                           result)  # fmt: skip
    run_id = str(uuid.uuid4())
    now = utcnow()
    run = {"id": run_id, "month": "2026-11", "status": "succeeded",
           "period_start": period.start.to_pydatetime(), "period_end": period.end.to_pydatetime(),
           "key_override": result.key_override,
           "rule_ids": json.dumps([r.id for r in result.rules]),
           "rule_file_sha256": "0" * 64, "code_version": "test", "currency": result.currency,
           "reference_total": result.reference_total, "clients_total": 0, "unattributed": 0,
           "gap": 0, "started_at": now, "finished_at": now, "actor": "test"}  # fmt: skip
    lines = result.lines.astype(object).where(result.lines.notna(), None)
    with round_trip_engine.begin() as connection:
        connection.execute(insert(table(Run)), [run])
        if not lines.empty:
            columns = ["client", "source", "kind", "key", "measure", "total_measure", "share",
                       "amount", "windows", "rule_id"]  # fmt: skip
            rows = lines[columns].assign(run_id=run_id).to_dict("records")
            connection.execute(insert(table(RunLine)), rows)
        record_run_tables(connection, run_id, result, StoredRules(ruleset, "0" * 64, "o", document))
        record_pack_figures(connection, run_id, figures)
    with round_trip_engine.connect() as connection:
        stored = load_run(connection, run_id)
        back = load_pack_figures(connection, run_id)
    got = stored.result
    assert cascade(got) == cascade(result)
    for summary in (unattributed_summary, residual_summary, exclusion_summary):
        assert summary(got) == summary(result)
    for threshold in (1, 2, 3, 5):
        assert withheld_pools(got, threshold) == withheld_pools(result, threshold)
        assert too_few_clients(got, threshold) == too_few_clients(result, threshold)
    pd.testing.assert_frame_equal(client_lines(got), client_lines(result), check_dtype=False)
    pd.testing.assert_frame_equal(got.unattributed, result.unattributed, check_dtype=False)
    assert (got.hours, got.windows, got.cost_total, got.external_total) == (
        result.hours, result.windows, result.cost_total, result.external_total)  # fmt: skip
    assert [r.id for r in got.rules] == [r.id for r in result.rules]
    assert back is not None and back.keys == figures.keys
    pd.testing.assert_frame_equal(back.amounts, figures.amounts, check_names=False)
    pd.testing.assert_series_equal(back.usage.no_client, figures.usage.no_client)
    assert back.usage.used == figures.usage.used
    assert back.usage.uncovered_hours.to_dict() == figures.usage.uncovered_hours.to_dict()
    assert back.other_clients == figures.other_clients and back.changes == figures.changes
