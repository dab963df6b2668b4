"""The rule-file surface of billing data: ``billing:`` and each version's ``billed:`` entries.

* every mistake in the new keys is one line naming the rule path (``rules[0].billed[1].reason``,
  ``billing.clusters[1].name``) and what is wrong, exit 2 from ``check-config``;
* ``billing.sources`` are relative to the rule file, like ``sources:``;
* ``check-config --usage`` counts the services of ``billed[].services`` as known, checks a
  billed entry's key against the usage columns, and warns of a billed service without usage;
* ``tenantcost schema`` types the new keys as the models do (a billed key like a workload's,
  the FOCUS columns of a ``match:``) and rejects what they reject by shape.
"""

from __future__ import annotations

import copy
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from typer.testing import CliRunner

from tenantcost.cli import app
from tenantcost.config.rules import load_rules, parse_rules
from tenantcost.config.schema import rules_schema
from tenantcost.errors import InputError, InputWarning

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "config" / "rules.example.yaml"
runner = CliRunner()

Doc = dict[str, Any]
HEADER = "window_start,window_end,service,client,requests,cpu_seconds"


def base() -> Doc:
    """A valid rule document with a shared workload, an external cost, two billed entries
    and a billing section."""
    return {
        "currency": "USD",
        "rules": [
            {
                "id": "r1",
                "effective_from": "2026-11-01",
                "workloads": [
                    {"match": {"namespace": "saas"}, "class": "shared", "service": "api",
                     "key": "requests"},
                    {"match": {"name": "__idle__"}, "class": "idle"},
                ],
                "external": [
                    {"name": "search", "amount": 1, "per": "hour", "key": "requests"},
                ],
                "billed": [
                    {"match": {"ServiceName": "Amazon Relational Database Service"},
                     "class": "shared", "key": "requests", "services": ["db"]},
                    {"match": {"ChargeCategory": "Tax"}, "class": "overhead"},
                ],
            }
        ],
        "billing": {
            "sources": ["billing/"],
            "clusters": [{"name": "prod", "match": {"tags": {"aws:eks:cluster-name": "prod"}}}],
        },
    }  # fmt: skip


def billed(doc: Doc, j: int) -> Doc:
    entry: Doc = doc["rules"][0]["billed"][j]
    return entry


def cluster(doc: Doc, j: int = 0) -> Doc:
    entry: Doc = doc["billing"]["clusters"][j]
    return entry


# (name, change, rule path, words of the message)
REFUSED: list[tuple[str, Callable[[Doc], object], str, str]] = [
    ("unknown FOCUS column", lambda d: billed(d, 0).update(match={"ServiceNam": "x"}),
     "rules[0].billed[0].match.ServiceNam",
     "unknown FOCUS column 'ServiceNam' (did you mean 'ServiceName'?); columns are "
     "BillingAccountId,"),
    ("column in another case", lambda d: billed(d, 0).update(match={"servicename": "x"}),
     "rules[0].billed[0].match.servicename", "(did you mean 'ServiceName'?)"),
    ("Tags for tags", lambda d: cluster(d).update(match={"Tags": {"a": "b"}}),
     "billing.clusters[0].match.Tags", "unknown FOCUS column 'Tags' (did you mean 'tags'?)"),
    ("column with a space", lambda d: billed(d, 1).update(match={"Service Name": "x"}),
     "rules[0].billed[1].match", "unknown FOCUS column 'Service Name' (did you mean"),
    ("tags not a mapping", lambda d: billed(d, 1).update(match={"tags": "tenant"}),
     "rules[0].billed[1].match.tags", "expected a mapping of tag key to pattern, got 'tenant'"),
    ("tags empty", lambda d: billed(d, 1).update(match={"tags": {}}),
     "rules[0].billed[1].match.tags", "an empty mapping names no tag"),
    ("tag pattern a number", lambda d: billed(d, 1).update(match={"tags": {"tenant": 3}}),
     "rules[0].billed[1].match.tags", "tag 'tenant': expected a text pattern or a list of them"),
    ("tag pattern empty", lambda d: billed(d, 1).update(match={"tags": {"tenant": ""}}),
     "rules[0].billed[1].match.tags",
     "tag 'tenant': an empty pattern matches no line (a tag must be present and non-empty)"),
    ("empty list pattern", lambda d: billed(d, 1).update(match={"ServiceName": []}),
     "rules[0].billed[1].match.ServiceName", "empty list matches nothing"),
    ("empty tag list", lambda d: billed(d, 1).update(match={"tags": {"tenant": []}}),
     "rules[0].billed[1].match.tags", "tag 'tenant': empty list matches nothing"),
    ("pattern a number", lambda d: billed(d, 1).update(match={"SubAccountId": 2000}),
     "rules[0].billed[1].match.SubAccountId", "expected a text pattern or a list of them, got "
     "2000"),
    ("shared without key", lambda d: billed(d, 0).pop("key"),
     "rules[0].billed[0].key", "required for class 'shared'"),
    ("shared without services", lambda d: billed(d, 0).pop("services"),
     "rules[0].billed[0].services", "required for class 'shared' (the usage it is split by)"),
    ("shared with no services", lambda d: billed(d, 0).update(services=[]),
     "rules[0].billed[0].services", "required for class 'shared'"),
    ("key on overhead", lambda d: billed(d, 1).update(key="requests"),
     "rules[0].billed[1].key/services", "only for class 'shared', not 'overhead'"),
    ("direct without client", lambda d: billed(d, 1).update({"class": "direct"}),
     "rules[0].billed[1].client/client_from", "class 'direct' needs exactly one of them"),
    ("direct with both", lambda d: billed(d, 1).update(
        {"class": "direct", "client": "acme", "client_from": {"tag": "tenant"}}),
     "rules[0].billed[1].client/client_from", "class 'direct' needs exactly one of them"),
    ("client_from as a workload's", lambda d: billed(d, 1).update(
        {"class": "direct", "client_from": "tenant"}),
     "rules[0].billed[1].client_from", "expected {tag: <tag key>} (the tag whose value names "
     "the client), got 'tenant'"),
    ("client on shared", lambda d: billed(d, 0).update(client="acme"),
     "rules[0].billed[0].client/client_from", "only for class 'direct', not 'shared'"),
    ("excluded without reason", lambda d: billed(d, 1).update({"class": "excluded"}),
     "rules[0].billed[1].reason", "required for class 'excluded'"),
    ("outside without reason", lambda d: billed(d, 1).update({"class": "outside"}),
     "rules[0].billed[1].reason", "required for class 'outside'"),
    ("outside with a blank reason", lambda d: billed(d, 1).update(
        {"class": "outside", "reason": "  "}),
     "rules[0].billed[1].reason", "required for class 'outside'"),
    ("class misspelt", lambda d: billed(d, 1).update({"class": "outsid"}),
     "rules[0].billed[1].class", "'excluded' or 'outside'; got 'outsid'"),
    ("duplicate cluster", lambda d: d["billing"]["clusters"].append(
        {"name": "prod", "match": {"ResourceId": "i-*"}}),
     "billing.clusters[1].name", "cluster 'prod' is listed twice"),
    ("cluster with an empty match", lambda d: cluster(d).update(match={}),
     "billing.clusters[0].match", "an empty match would take every billed line"),
    ("cluster without a name", lambda d: cluster(d).pop("name"),
     "billing.clusters[0].name", "required"),
    ("name of a workload's source", lambda d: billed(d, 1).update(name="api"),
     "rules[0].billed[1].name", "'api' already labels workloads[0]; give the entry a distinct "
     "name"),
    ("name of an external cost", lambda d: billed(d, 0).update(name="search"),
     "rules[0].billed[0].name", "'search' already labels external[0]"),
    ("name of a named workload", lambda d: (d["rules"][0]["workloads"][0].update(name="db pool"),
                                            billed(d, 0).update(name="db pool")),
     "rules[0].billed[0].name", "'db pool' already labels workloads[0]"),
    ("two entries, one derived name", lambda d: billed(d, 1).update(
        match={"ServiceName": "Amazon Relational Database Service"}),
     "rules[0].billed[1].name",
     "'billed: Amazon Relational Database Service' already labels billed[0]"),
    ("unmatched_billed", lambda d: d["rules"][0].update(unmatched_billed="ignore"),
     "rules[0].unmatched_billed", "'error' or 'unclassified'; got 'ignore'"),
    ("costs_from", lambda d: cluster(d).update(costs_from="cur"),
     "billing.clusters[0].costs_from", "'opencost' or 'split_cost_allocation'; got 'cur'"),
    ("focus_allocations", lambda d: d["billing"].update(focus_allocations="both"),
     "billing.focus_allocations", "'origin' or 'allocated'; got 'both'"),
    ("unknown billing key", lambda d: d["billing"].update(source=["b/"]),
     "billing", "unknown key 'source'"),
    ("unknown billed key", lambda d: billed(d, 0).update(service="db"),
     "rules[0].billed[0]", "unknown key 'service'"),
    ("key of another type", lambda d: billed(d, 0).update(key=3),
     "rules[0].billed[0].key", "must be a usage column name, 'even', or {weights: {client: w}}"),
    ("empty weights", lambda d: billed(d, 0).update(key={"weights": {}}),
     "rules[0].billed[0].key.weights", "weights must name at least one client"),
]  # fmt: skip


def test_the_base_document_is_valid() -> None:
    ruleset = parse_rules(base(), origin="rules.yaml")
    assert ruleset.billing is not None and ruleset.billing.clusters[0].costs_from == "opencost"
    assert ruleset.billing.focus_allocations == "origin"
    version = ruleset.rules[0]
    assert version.unmatched_billed == "error"
    assert [b.label for b in version.billed] == [
        "billed: Amazon Relational Database Service", "billed: Tax"
    ]  # fmt: skip
    assert version.known_services == ["api", "db"]


@pytest.mark.parametrize(("name", "change", "path", "words"), REFUSED, ids=[r[0] for r in REFUSED])
def test_a_mistake_is_one_line_with_its_rule_path(
    name: str, change: Callable[[Doc], object], path: str, words: str
) -> None:
    doc = base()
    change(doc)
    with pytest.raises(InputError) as caught:
        parse_rules(doc, origin="rules.yaml")
    line = str(caught.value)
    assert line.startswith(f"rules.yaml, {path}: "), line
    assert words in line and "\n" not in line, line
    assert "Value error" not in line and "Input should be a valid dictionary" not in line


def test_a_workloads_name_clash_names_its_path_too() -> None:
    """The version-level name check words workloads' clashes the same way (one formatter)."""
    doc = base()
    doc["rules"][0]["workloads"].append(
        {"match": {"namespace": "x"}, "class": "shared", "service": "api", "key": "requests"}
    )
    with pytest.raises(InputError) as caught:
        parse_rules(doc, origin="rules.yaml")
    assert str(caught.value).startswith(
        "rules.yaml, rules[0].workloads[2].name: 'api' already labels workloads[0]"
    )


def test_check_config_exits_2_with_the_line(tmp_path: Path) -> None:
    doc = base()
    billed(doc, 1).update({"class": "outside"})
    rules = write_rules(tmp_path, doc)
    done = runner.invoke(app, ["check-config", str(rules)])
    assert done.exit_code == 2, done.output
    assert done.stderr == f"error: {rules}, rules[0].billed[1].reason: required for class " \
        "'outside'\n"  # fmt: skip


def test_billing_sources_are_relative_to_the_rule_file(tmp_path: Path) -> None:
    doc = base()
    doc["billing"]["sources"] = ["billing/2026-11/", "/data/cur/2026-11.parquet",
                                 "s3://exports/focus/"]  # fmt: skip
    ruleset = load_rules(write_rules(tmp_path / "site", doc))
    assert ruleset.billing is not None
    assert ruleset.billing.sources == [
        str(tmp_path / "site" / "billing" / "2026-11"), "/data/cur/2026-11.parquet",
        "s3://exports/focus/",
    ]  # fmt: skip
    doc["billing"]["sources"] = "invoice.csv.gz"  # one path, as for sources:
    one = load_rules(write_rules(tmp_path / "one", doc))
    assert one.billing is not None
    assert one.billing.sources == [str(tmp_path / "one" / "invoice.csv.gz")]
    without = parse_rules(base(), origin="rules.yaml")  # no base folder: as written
    assert without.billing is not None and without.billing.sources == ["billing/"]


# --------------------------------------------------------------------------- check-config


def write_rules(folder: Path, doc: Doc) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "rules.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    return path


def write_usage(folder: Path, services: list[str]) -> Path:
    rows = [f"2026-11-03T10:00:00Z,2026-11-03T11:00:00Z,{s},client-{c},{10 + i},1.5"
            for i, (s, c) in enumerate((s, c) for s in services for c in "ab")]  # fmt: skip
    path = folder / "usage.csv"
    path.write_text("\n".join([HEADER, *rows]) + "\n", encoding="utf-8")
    return path


def check_config(*args: str | Path) -> Any:
    return runner.invoke(app, ["check-config", *(str(a) for a in args)])


def test_check_config_prints_the_billing_section() -> None:
    done = check_config(EXAMPLE)
    assert done.exit_code == 0, done.output
    lines = done.stdout.splitlines()
    assert lines[1] == (
        "  billed: 6 entries (2 direct, 1 shared, 1 excluded, 1 outside, 1 overhead), split "
        "over services api, unmatched_billed error"
    )
    sources = EXAMPLE.parent / "billing" / "2026-11"
    assert f"billing: clusters prod-eu (opencost); sources {sources}; focus_allocations origin" \
        in lines  # fmt: skip
    assert lines[-1].endswith("ok (2 rule version(s), currency EUR)")


def test_check_config_names_an_unnamed_cluster(tmp_path: Path) -> None:
    doc = base()
    cluster(doc).update(name="", costs_from="split_cost_allocation")
    doc["billing"]["sources"] = []
    done = check_config(write_rules(tmp_path, doc))
    assert done.exit_code == 0, done.output
    assert 'billing: clusters "" (split_cost_allocation); sources none (give --billing)' \
        in done.stdout  # fmt: skip


def test_usage_of_a_service_only_a_billed_entry_names_is_accepted(tmp_path: Path) -> None:
    rules = write_rules(tmp_path, base())
    usage = write_usage(tmp_path, ["api", "db"])
    done = check_config(rules, "--usage", usage)
    assert done.exit_code == 0, done.output
    assert done.stderr == "" and "ok (1 rule version(s)" in done.stdout
    # The same usage without the billed entry that names `db`: its usage would be ignored.
    doc = base()
    del doc["rules"][0]["billed"][0]
    refused = check_config(write_rules(tmp_path / "without", doc), "--usage", usage)
    assert refused.exit_code == 2, refused.output
    assert refused.stderr.startswith(f"error: {usage}, column 'service': service 'db' is not "
                                     "named by any shared workload or billed entry in the "
                                     "rules (api)")  # fmt: skip


def test_a_billed_key_the_usage_lacks_is_refused_with_its_path(tmp_path: Path) -> None:
    doc = base()
    doc["rules"][0]["billed"].insert(1, {"match": {"ServiceName": "AWS Data Transfer"},
                                         "class": "shared", "key": "bytes_out",
                                         "services": ["api"]})  # fmt: skip
    done = check_config(write_rules(tmp_path, doc), "--usage", write_usage(tmp_path, ["api", "db"]))
    assert done.exit_code == 2, done.output
    assert done.stderr.strip() == (
        f"error: {tmp_path / 'rules.yaml'}, rules[0].billed[1].key: unknown usage column "
        "'bytes_out'; columns are requests, cpu_seconds"
    )


def test_a_billed_service_without_usage_is_a_warning(tmp_path: Path) -> None:
    doc = base()
    billed(doc, 1).update({"class": "shared", "key": "even", "services": ["api", "cache"]})
    rules = write_rules(tmp_path, doc)
    done = check_config(rules, "--usage", write_usage(tmp_path, ["api", "db"]))
    assert done.exit_code == 0, done.output
    assert done.stderr == (
        f"warning: {rules}, rules[0].billed[1].services: service 'cache' never appears in the "
        "usage data; a billed pool without usage of its services is unattributed\n"
    )
    # A shared workload's service keeps its own wording.
    doc["rules"][0]["workloads"].insert(1, {"match": {"namespace": "batch"}, "class": "shared",
                                            "service": "batch", "key": "requests"})  # fmt: skip
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always", InputWarning)
        from tenantcost.config.rules import check_against_usage

        check_against_usage(parse_rules(doc), ["requests", "cpu_seconds"], ["api", "db"])
    assert [str(w.message) for w in seen] == [
        "<rules>: shared service 'batch' never appears in the usage data; its cost is "
        "reported as unattributed",
        "<rules>, rules[0].billed[1].services: service 'cache' never appears in the usage "
        "data; a billed pool without usage of its services is unattributed",
    ]


# --------------------------------------------------------------------------- JSON Schema


def test_a_billed_key_has_a_workload_keys_schema() -> None:
    defs = rules_schema()["$defs"]
    assert defs["BilledEntry"]["properties"]["key"] == defs["WorkloadRule"]["properties"]["key"]
    external = defs["ExternalCost"]["properties"]["key"]["anyOf"]
    assert defs["BilledEntry"]["properties"]["key"]["anyOf"] == [*external, {"type": "null"}]
    assert defs["BilledEntry"]["properties"]["class"]["enum"] == [
        "shared", "direct", "idle", "overhead", "reserve", "excluded", "outside"
    ]  # fmt: skip


def test_the_schema_lists_the_focus_columns_of_a_match() -> None:
    from tenantcost.config.billing import BILLING_MATCH_COLUMNS

    defs = rules_schema()["$defs"]
    for model in ("BilledEntry", "BillingCluster"):
        match = defs[model]["properties"]["match"]
        assert list(match["properties"]) == [*BILLING_MATCH_COLUMNS, "tags"]
        assert match["additionalProperties"] is False
    assert defs["BillingCluster"]["properties"]["match"]["minProperties"] == 1
    validator = jsonschema.Draft202012Validator(rules_schema())
    assert not list(validator.iter_errors(base()))


SCHEMA_REFUSED: list[tuple[str, Callable[[Doc], object], str]] = [
    ("unknown column", lambda d: billed(d, 0).update(match={"ServiceNam": "x"}), "ServiceNam"),
    ("tags not a mapping", lambda d: billed(d, 1).update(match={"tags": "x"}), "tags"),
    ("empty list", lambda d: billed(d, 1).update(match={"ServiceName": []}), "ServiceName"),
    ("class", lambda d: billed(d, 1).update({"class": "outsid"}), "class"),
    ("unmatched_billed", lambda d: d["rules"][0].update(unmatched_billed="no"), "unmatched_billed"),
    ("costs_from", lambda d: cluster(d).update(costs_from="cur"), "costs_from"),
    ("focus_allocations", lambda d: d["billing"].update(focus_allocations="x"),
     "focus_allocations"),
    ("cluster match empty", lambda d: cluster(d).update(match={}), "match"),
    ("client_from text", lambda d: billed(d, 1).update({"class": "direct", "client_from": "t"}),
     "client_from"),
]  # fmt: skip


@pytest.mark.parametrize(("name", "change", "path"), SCHEMA_REFUSED,
                         ids=[r[0] for r in SCHEMA_REFUSED])  # fmt: skip
def test_the_schema_rejects_what_the_models_reject(
    name: str, change: Callable[[Doc], object], path: str
) -> None:
    doc = copy.deepcopy(base())
    change(doc)
    validator = jsonschema.Draft202012Validator(rules_schema())
    assert list(validator.iter_errors(doc)), "the schema accepted a broken rule file"
    with pytest.raises(InputError) as caught:
        parse_rules(doc)
    assert path in str(caught.value)
