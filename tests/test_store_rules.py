"""`tenantcost rules load` on SQLite and a real PostgreSQL 15: a rule version id keeps one
content forever; loading again is a no-op; a changed or bad file is one line, exit 2, and
leaves the store exactly as it was."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest
import yaml
from sqlalchemy import Engine, func
from sqlmodel import Session, select
from typer.testing import CliRunner

from tenantcost.cli import app
from tenantcost.config.rules import load_rules, parse_rules
from tenantcost.store.actor import os_actor
from tenantcost.store.engine import open_engine
from tenantcost.store.models import RuleFile, RuleVersion
from tenantcost.store.rules import stored_versions, version_document
from tenantcost.store.settings import resolve_settings

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "saas-three-clients"
DECEMBER = """
  - id: saas-2026-12
    effective_from: "2026-12-01"
    workloads:
      - match: {namespace: saas}
        class: shared
        service: api
        key: even
      - match: {name: __idle__}
        class: idle
"""
runner = CliRunner()


@pytest.fixture
def store(store_url: str, tmp_path: Path) -> tuple[str, Path]:
    """An upgraded store and a writable copy of the example (rules.yaml in it)."""
    assert runner.invoke(app, ["db", "upgrade", "--db", store_url]).exit_code == 0
    folder = tmp_path / "ex"
    shutil.copytree(EXAMPLE, folder)
    return store_url, folder / "rules.yaml"


def load(url: str, rules: Path):
    return runner.invoke(app, ["rules", "load", str(rules), "--db", url])


def snapshot(url: str) -> tuple[list[tuple], list[tuple]]:
    """Every stored row, to prove a refused command wrote nothing."""
    db = engine(url)
    with Session(db) as session:
        files = [(f.id, f.sha256, f.content) for f in session.exec(select(RuleFile))]
        versions = [(v.id, v.rule_id, v.sha256) for v in session.exec(select(RuleVersion))]
    db.dispose()
    return files, versions


def engine(url: str) -> Engine:
    return open_engine(resolve_settings(db=url, environ={}))


def assert_refused(result, *fragments: str) -> str:
    assert result.exit_code == 2, result.output
    err = result.stderr.strip()
    assert err.startswith("error: ") and "\n" not in err, err
    for fragment in fragments:
        assert fragment in err, f"{fragment!r} not in {err!r}"
    return err


def test_load_stores_content_and_sha256_per_version(store):
    url, rules = store
    done = load(url, rules)
    assert done.exit_code == 0, done.output
    sha = hashlib.sha256(rules.read_bytes()).hexdigest()
    assert done.stdout == f"{rules}: stored (sha256 {sha[:12]}); new rule versions: saas-2026-11\n"
    db = engine(url)
    [version] = stored_versions(db)
    with Session(db) as session:
        [rule_file] = session.exec(select(RuleFile)).all()
    db.dispose()
    assert version.rule_id == "saas-2026-11"
    assert version.effective_from.isoformat() == "2026-11-01T00:00:00+00:00"
    assert version.sha256 == hashlib.sha256(version.content.encode()).hexdigest()
    assert version.actor == rule_file.actor == os_actor()
    assert version.rule_file_id == rule_file.id
    assert rule_file.content == rules.read_text() and rule_file.currency == "USD"
    assert rule_file.sha256 == hashlib.sha256(rules.read_bytes()).hexdigest()
    # The content is itself a rule document: that one version, read exactly as the file was.
    document = json.loads(version.content)
    assert (document["currency"], document["hours_per_month"]) == ("USD", 730)
    again = parse_rules(document)
    assert again.rules == load_rules(rules).rules


def test_loading_the_same_file_again_writes_nothing(store):
    url, rules = store
    assert load(url, rules).exit_code == 0
    before = snapshot(url)
    again = load(url, rules)
    assert again.exit_code == 0, again.output
    sha = before[0][0][1]
    assert again.stdout.endswith(f"already loaded (sha256 {sha[:12]}); nothing to do\n")
    assert snapshot(url) == before


def test_comments_and_layout_are_not_changes(store):
    """A reformatted file is a new rule file row; its version is recognised as unchanged."""
    url, rules = store
    assert load(url, rules).exit_code == 0
    text = rules.read_text().replace("    idle: keep\n", "    idle: keep   # the default\n")
    rules.write_text("# reviewed by finance\n" + text.replace("unmatched: error\n", ""))
    done = load(url, rules)
    assert done.exit_code == 0, done.output
    assert done.stdout.endswith("new rule versions: none; unchanged: saas-2026-11\n")
    files, versions = snapshot(url)
    assert len(files) == 2 and len(versions) == 1


def test_a_new_version_is_added_and_the_old_one_kept(store):
    url, rules = store
    assert load(url, rules).exit_code == 0
    rules.write_text(rules.read_text() + DECEMBER)
    done = load(url, rules)
    assert done.exit_code == 0, done.output
    assert done.stdout.endswith("new rule versions: saas-2026-12; unchanged: saas-2026-11\n")
    db = engine(url)
    assert [v.rule_id for v in stored_versions(db)] == ["saas-2026-11", "saas-2026-12"]
    db.dispose()


def test_a_changed_version_is_refused_naming_its_id(store):
    url, rules = store
    assert load(url, rules).exit_code == 0
    before = snapshot(url)
    rules.write_text(rules.read_text().replace("amount: 0.065", "amount: 0.066")
                     + DECEMBER)  # fmt: skip
    refused = load(url, rules)
    assert_refused(refused, "rules.yaml", "rules[0].id", "rule version 'saas-2026-11'",
                   "already stored with other content", "new id")  # fmt: skip
    assert snapshot(url) == before  # the new December version was not stored either


def test_a_new_version_on_a_stored_date_is_refused(store):
    url, rules = store
    assert load(url, rules).exit_code == 0
    before = snapshot(url)
    rules.write_text(rules.read_text().replace("id: saas-2026-11", "id: saas-2026-11b"))
    refused = load(url, rules)
    assert_refused(refused, "rules[0].effective_from", "'saas-2026-11'", "one version per date")
    assert snapshot(url) == before


def test_another_currency_is_refused(store):
    url, rules = store
    assert load(url, rules).exit_code == 0
    before = snapshot(url)
    rules.write_text(rules.read_text().replace("currency: USD", "currency: EUR")
                     .replace("saas-2026-11", "eur-2026-11")
                     .replace('"2026-11-01"', '"2026-11-02"'))  # fmt: skip
    assert_refused(load(url, rules), "rules.yaml, currency", "EUR differs from the store's USD")
    assert snapshot(url) == before


@pytest.mark.parametrize(
    ("old", "new", "fragments"),
    [
        ("key: cpu_seconds", "key: [cpu_seconds]", ["rules[0].workloads[1].key"]),
        ("    idle: keep\n", "    idle: sometimes\n", ["rules[0].idle", "sometimes"]),
        ("rules:\n", "rules: [\n", ["not valid YAML"]),
    ],
)
def test_a_bad_rule_file_is_one_line_and_writes_nothing(store, old, new, fragments):
    url, rules = store
    rules.write_text(rules.read_text().replace(old, new, 1))
    assert_refused(load(url, rules), "rules.yaml", *fragments)
    assert snapshot(url) == ([], [])


def test_a_missing_rule_file_is_one_line(store):
    url, rules = store
    assert_refused(load(url, rules.with_name("nope.yaml")), "nope.yaml", "no such file")


def test_the_version_document_is_canonical():
    """Sorted, compact JSON of the validated model: the same rule spelled differently gives
    the same bytes, so the same sha256."""
    ruleset = load_rules(EXAMPLE / "rules.yaml")
    document = version_document(ruleset, ruleset.rules[0])
    assert document == json.dumps(json.loads(document), sort_keys=True, separators=(",", ":"))
    data = yaml.safe_load((EXAMPLE / "rules.yaml").read_text())
    version = data["rules"][0]
    version["effective_from"] = "2026-11-01T01:00:00+01:00"  # the same instant
    version["workloads"][0] = dict(reversed(version["workloads"][0].items()))
    data["rules"] = [dict(reversed(version.items()))]
    spelled = parse_rules(data)
    assert version_document(spelled, spelled.rules[0]) == document


def test_store_counts_stay_small(store):
    """Loading one file twice stores one file row and one version row (no duplicates)."""
    url, rules = store
    load(url, rules)
    load(url, rules)
    db = engine(url)
    with Session(db) as session:
        counts = (session.exec(select(func.count()).select_from(RuleFile)).one(),
                  session.exec(select(func.count()).select_from(RuleVersion)).one())  # fmt: skip
    db.dispose()
    assert counts == (1, 1)


def test_the_actor_is_the_os_account_not_the_user_variable(monkeypatch):
    import os
    import pwd

    from tenantcost.store.actor import token_actor

    monkeypatch.setenv("USER", "someone-else")
    monkeypatch.setenv("LOGNAME", "someone-else")
    assert os_actor() == pwd.getpwuid(os.geteuid()).pw_name
    assert token_actor("ci-ingest") == "token:ci-ingest"
