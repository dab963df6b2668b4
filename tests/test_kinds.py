"""The typed vocabularies: each enum member is its old string, in frames and in every output."""

from __future__ import annotations

import json
from typing import get_args

import pandas as pd

from tenantcost.allocate import allocate
from tenantcost.config.rules import WorkloadClass
from tenantcost.kinds import (
    KEYED_KINDS,
    RESIDUAL_CLASSES,
    CascadeKind,
    Cause,
    CostClass,
    Detail,
    KeyKind,
    LineKind,
)
from tenantcost.reconcile import cascade
from tenantcost.writers.json_output import result_document

from .factories import BASIC_RULES, costs, rules, usage


def test_members_are_their_strings() -> None:
    assert CostClass.SHARED == "shared" and f"{CostClass.EXCLUDED}" == "excluded"
    assert json.dumps([LineKind.IDLE, Detail.PERIOD, KeyKind.WEIGHTS]) == (
        '["idle", "period", "weights"]'
    )
    assert [str(c) for c in Cause] == [
        "no usage in window",
        "usage without client id",
        "direct workload without client property",
    ]
    assert [str(c) for c in RESIDUAL_CLASSES] == ["idle", "overhead", "reserve"]
    assert set(KEYED_KINDS) == {"shared", "external", "billed"}


def test_cost_classes_are_the_rule_file_classes_plus_unclassified() -> None:
    """The rule file's ``class:`` Literal and the core's enum cannot drift apart."""
    assert {*get_args(WorkloadClass), "unclassified"} == {c.value for c in CostClass}


def test_result_tables_hold_plain_strings() -> None:
    """Enum members land in the result tables (and so in CSV and JSON) as the plain strings."""
    c = costs([
        {"namespace": "saas", "controller": "api", "total_cost": 1.0},
        {"namespace": "tenant-a", "controller": "db", "total_cost": 0.5},
        {"namespace": "edge", "controller": "proxy", "total_cost": 0.25},
        {"namespace": "elsewhere", "controller": "x", "total_cost": 0.125},
    ])
    u = usage([{"service": "api", "client": "b", "requests": 3},
               {"service": "api", "client": "", "requests": 1}])
    text = BASIC_RULES.replace("unmatched: error", "unmatched: unattributed")
    r = allocate(c, u, rules(text))
    assert set(r.lines["kind"]) == {"shared", "direct"}
    assert r.unattributed["cause"].tolist() == ["usage without client id"]
    assert r.unclassified["class"].tolist() == ["unclassified"]
    assert r.residual["class"].tolist() == ["overhead"]
    for frame in (r.lines, r.unattributed, r.residual, r.unclassified):
        for column in frame.select_dtypes(exclude="number").columns:
            if not pd.api.types.is_datetime64_any_dtype(frame[column]):
                assert all(type(v) is str for v in frame[column].dropna()), column
    document = json.loads(json.dumps(result_document(r)))
    assert [c["kind"] for c in document["cascade"]] == [
        "clients", "unattributed", "residual", "residual", "residual", "unclassified",
    ]
    assert cascade(r).lines[0].kind is CascadeKind.CLIENTS
