"""The top-level ``config/`` folder: the example rule file, the defaults file, the JSON Schema.

* ``config/rules.example.yaml`` passes ``check-config`` and uses every key of every rule-file
  model (walked from the pydantic models, so a new key without an example fails here);
* ``config/defaults.yaml`` is the package's own file (one copy), read at run time, and its
  values are the defaults the models had as constants;
* ``config/rules.schema.json`` is what ``tenantcost schema`` prints today, accepts the example
  and rejects what the models reject by shape.
"""

from __future__ import annotations

import json
import subprocess
import sys
import typing
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from pydantic import BaseModel

from tenantcost.config import defaults as defaults_module
from tenantcost.config.confidence import Band, ConfidenceThresholds
from tenantcost.config.rules import RuleSet, load_rules, parse_rules
from tenantcost.config.schema import rules_schema
from tenantcost.config.sources import OpenCostSource, PrometheusSource
from tenantcost.errors import InputError

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "config"
EXAMPLE = CONFIG / "rules.example.yaml"
SCHEMA = CONFIG / "rules.schema.json"
PACKAGE_DEFAULTS = ROOT / "tenantcost" / "config" / "defaults.yaml"


class EditorLoader(yaml.SafeLoader):
    """YAML as a language server reads it for schema checks: a bare date stays a string."""


EditorLoader.yaml_implicit_resolvers = {
    first: [(tag, regex) for tag, regex in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def as_editor_reads(path: Path) -> Any:
    return yaml.load(path.read_text(), Loader=EditorLoader)  # a SafeLoader subclass


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tenantcost", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )


# --------------------------------------------------------------------------- the example


def test_example_passes_check_config():
    done = run_cli("check-config", "config/rules.example.yaml")
    assert done.returncode == 0, done.stderr
    assert "config/rules.example.yaml: ok (2 rule version(s), currency EUR)" in done.stdout
    assert "saas-2026-11: from 2026-11-01, 10 workload entries" in done.stdout


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    """The pydantic models inside a field's annotation (through lists, dicts, unions)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    found: list[type[BaseModel]] = []
    for arg in typing.get_args(annotation):
        found += _models_in(arg)
    return found


def _field_keys(model: type[BaseModel]) -> dict[str, Any]:
    """The model's keys as written in YAML (aliases) and their annotations."""
    return {(f.alias or name): f.annotation for name, f in model.model_fields.items()}


def _all_fields(model: type[BaseModel], seen: set[tuple[str, str]]) -> None:
    for key, annotation in _field_keys(model).items():
        if (model.__name__, key) in seen:
            continue
        seen.add((model.__name__, key))
        for inner in _models_in(annotation):
            _all_fields(inner, seen)


def _used_fields(model: type[BaseModel], data: Any, used: set[tuple[str, str]]) -> None:
    """Walk ``data`` along the models, recording each (model, key) the document sets."""
    if isinstance(data, list):
        for item in data:
            _used_fields(model, item, used)
        return
    if not isinstance(data, dict):
        return
    keys = _field_keys(model)
    for key, value in data.items():
        if key not in keys:
            continue
        used.add((model.__name__, key))
        mapped = typing.get_origin(keys[key]) is dict and isinstance(value, dict)
        for inner in _models_in(keys[key]):  # dict[str, Model]: each value is a Model
            for item in value.values() if mapped else [value]:
                _used_fields(inner, item, used)


def test_example_uses_every_rule_file_key():
    text = EXAMPLE.read_text()
    expected: set[tuple[str, str]] = set()
    _all_fields(RuleSet, expected)
    used: set[tuple[str, str]] = set()
    _used_fields(RuleSet, yaml.safe_load(text), used)
    # Keys that exclude each other are shown as comments: cost_model takes exactly one pricing.
    commented = {(model, key) for model, key in expected - used if f"# {key}:" in text}
    missing = sorted(expected - used - commented)
    assert not missing, f"config/rules.example.yaml lacks these keys (model, key): {missing}"
    assert commented == {("CostModel", "fractions"), ("CostModel", "unit_prices")}


def test_example_loads_as_written():
    ruleset = load_rules(EXAMPLE)
    first, second = ruleset.rules
    assert [w.class_ for w in first.workloads] == [
        "shared", "shared", "shared", "shared", "direct", "direct",
        "reserve", "overhead", "excluded", "idle",
    ]  # fmt: skip
    assert first.workloads[3].key is not None and not isinstance(first.workloads[3].key, str)
    assert second.idle == "proportional" and second.unmatched == "unattributed"
    assert ruleset.sources.prometheus is not None
    assert ruleset.sources.prometheus.basic_auth is not None
    assert ruleset.sources.prometheus.basic_auth.password.get_secret_value() == "change-me"
    assert ruleset.cost_model is not None and ruleset.cost_model.pricing == "weights"
    # The example shows the confidence defaults: stating them changes nothing.
    assert ruleset.confidence == ConfidenceThresholds()


# --------------------------------------------------------------------------- defaults


def test_defaults_file_is_one_file_read_by_the_package():
    link = CONFIG / "defaults.yaml"
    assert link.is_symlink(), "config/defaults.yaml must link to the package's file, not copy it"
    assert link.resolve() == PACKAGE_DEFAULTS.resolve()
    assert defaults_module.defaults_text() == PACKAGE_DEFAULTS.read_text()
    loaded = defaults_module.load_defaults()
    assert set(loaded) == set(defaults_module.SECTIONS)


def test_defaults_are_the_former_constants():
    """Behaviour unchanged: the values the models had in code before they moved to the file."""
    prometheus = PrometheusSource(url="http://prometheus:9090")
    assert prometheus.queries == {
        "requests": (
            "sum by ({client_label}, {service_label}) (increase(app_requests_total[{window}]))"
        ),
        "cpu_seconds": (
            "sum by ({client_label}, {service_label}) (increase(app_cpu_seconds_total[{window}]))"
        ),
    }
    assert prometheus.render("requests") == (
        "sum by (client, service) (increase(app_requests_total[1h]))"
    )
    assert (prometheus.client_label, prometheus.service_label, prometheus.step) == (
        "client", "service", "1h"
    )  # fmt: skip
    assert prometheus.timeout_seconds == 30.0 and isinstance(prometheus.timeout_seconds, float)
    opencost = OpenCostSource()
    assert opencost.model_dump(exclude={"headers"}) == {
        "url": None,
        "aggregate": "cluster,namespace,controllerKind,controller",
        "step": "1h",
        "idle_by_node": False,
        "max_window": "7d",
        "timeout_seconds": 30.0,
        "total_timeout_seconds": 300.0,
        "retries": 5,
        "backoff_seconds": 0.5,
    }
    assert ConfidenceThresholds() == ConfidenceThresholds(
        key_spread=Band(high=0.10, medium=0.30),
        no_client_share=Band(high=0.01, medium=0.05),
        missing_hours=Band(high=0.01, medium=0.05),
        spread_includes_even=False,
    )


def test_defaults_are_copies():
    """A caller changing a default it was given cannot change the next model's default."""
    first = PrometheusSource(url="http://prometheus:9090")
    first.queries["requests"] = "changed"
    assert PrometheusSource(url="http://prometheus:9090").queries["requests"] != "changed"


def test_a_rule_file_still_overrides_a_default():
    ruleset = parse_rules(
        {
            "rules": [
                {
                    "id": "r",
                    "effective_from": "2026-11-01",
                    "workloads": [{"match": {"name": "__idle__"}, "class": "idle"}],
                }
            ],
            "confidence": {"key_spread": {"high": 0.2, "medium": 0.4}},
            "sources": {"opencost": {"aggregate": "namespace"}},
        }
    )
    assert ruleset.confidence.key_spread == Band(high=0.2, medium=0.4)
    assert ruleset.confidence.missing_hours == Band(high=0.01, medium=0.05)
    assert ruleset.sources.opencost is not None
    assert ruleset.sources.opencost.aggregate == "namespace"
    assert ruleset.sources.opencost.step == "1h"


def test_defaults_are_read_on_first_use_not_at_import():
    code = (
        "import sys; import tenantcost.config.rules, tenantcost.config.schema; "
        "from tenantcost.config import defaults; "
        "print(defaults.load_defaults.cache_info().currsize)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "0"


def test_a_broken_defaults_file_is_an_internal_error(monkeypatch):
    from tenantcost.errors import InternalError

    defaults_module.load_defaults.cache_clear()
    monkeypatch.setattr(defaults_module, "defaults_text", lambda: "prometheus: {}\n")
    try:
        with pytest.raises(InternalError, match="has no 'opencost' mapping"):
            defaults_module.load_defaults()
    finally:
        monkeypatch.undo()
        defaults_module.load_defaults.cache_clear()
    assert OpenCostSource().step == "1h"


# --------------------------------------------------------------------------- JSON Schema


def test_checked_in_schema_is_current():
    current = json.dumps(rules_schema(), indent=2) + "\n"
    assert SCHEMA.read_text() == current, (
        "config/rules.schema.json is stale: regenerate it with "
        "`tenantcost schema > config/rules.schema.json`"
    )


def test_schema_command_prints_the_schema():
    done = run_cli("schema")
    assert done.returncode == 0, done.stderr
    assert done.stdout == SCHEMA.read_text()


def test_schema_shape():
    schema = rules_schema()
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["required"] == ["rules"]
    assert schema["additionalProperties"] is False
    workload = schema["$defs"]["WorkloadRule"]
    assert "class" in workload["properties"] and "class_" not in workload["properties"]
    assert workload["properties"]["class"]["enum"] == [
        "shared", "direct", "idle", "overhead", "reserve", "excluded"
    ]  # fmt: skip
    # Defaults from defaults.yaml are shown, so editors can offer them.
    prometheus = schema["$defs"]["PrometheusSource"]["properties"]
    assert prometheus["step"]["default"] == "1h"
    assert set(prometheus["queries"]["default"]) == {"requests", "cpu_seconds"}
    confidence = schema["$defs"]["ConfidenceThresholds"]["properties"]
    assert confidence["key_spread"]["default"] == {"high": 0.1, "medium": 0.3}


def test_schema_accepts_the_example_and_the_examples_folder():
    validator = jsonschema.Draft202012Validator(rules_schema())
    files = [EXAMPLE, *sorted((ROOT / "examples").glob("*/rules*.yaml"))]
    for path in files:
        errors = [e.message for e in validator.iter_errors(as_editor_reads(path))]
        assert errors == [], path


@pytest.mark.parametrize(
    ("change", "path"),
    [
        (lambda d: d.update(currencyy="EUR"), "(top level)"),
        (lambda d: d["rules"][0]["workloads"][0].update({"class": "sharde"}), "class"),
        (lambda d: d["rules"][0].update(idle="spread"), "idle"),
        (lambda d: d["confidence"]["key_spread"].pop("medium"), "medium"),
        (lambda d: d["sources"]["opencost"].update(retries=101), "retries"),
        (lambda d: d["rules"][0]["external"][0].update(per="day"), "per"),
    ],
)
def test_schema_rejects_what_the_models_reject(change, path):
    data = as_editor_reads(EXAMPLE)
    change(data)
    validator = jsonschema.Draft202012Validator(rules_schema())
    assert list(validator.iter_errors(data)), "the schema accepted a broken rule file"
    with pytest.raises(InputError) as caught:
        parse_rules(data)
    assert path in str(caught.value)


def test_schema_module_is_light():
    code = "import sys, tenantcost.config.schema; print('tenantcost.config.rules' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert done.stdout.strip() == "False"
