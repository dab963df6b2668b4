"""One test per semantic rule of the allocation core."""

from __future__ import annotations

import pandas as pd
import pytest

from tenantcost.allocate import allocate
from tenantcost.errors import InputError, InputWarning
from tenantcost.kinds import Cause
from tenantcost.reconcile import cascade, residual_summary
from tenantcost.windows import Period

from .factories import BASIC_RULES, costs, hour, rules, usage


def amounts(result, kind: str | None = None) -> dict[str, int]:
    lines = result.lines if kind is None else result.lines[result.lines["kind"] == kind]
    return {str(k): int(v) for k, v in lines.groupby("client")["amount"].sum().items()}


API = {"namespace": "saas", "controller": "api"}


def test_shared_cost_splits_by_key_in_proportion():
    c = costs([{**API, "total_cost": 1.0}])
    u = usage([
        {"service": "api", "client": "a", "requests": 3},
        {"service": "api", "client": "b", "requests": 1},
    ])
    r = allocate(c, u, rules(_rules()))
    assert amounts(r) == {"a": 750_000, "b": 250_000}
    line = r.lines.set_index("client").loc["a"]
    assert line["key"] == "requests" and line["measure"] == 3 and line["share"] == 0.75
    assert cascade(r).gap == 0


def _rules(text_key: str = "requests") -> str:
    return BASIC_RULES.replace("key: requests", f"key: {text_key}").replace(
        "      - {match: {namespace: saas, controller: worker}, class: shared, service: worker,\n"
        "         key: cpu_seconds}\n",
        "",
    )


def test_even_key_splits_equally_among_clients_with_usage():
    c = costs([{**API, "total_cost": 0.000010}])  # 10 micro over 3 clients
    u = usage([
        {"service": "api", "client": "a", "requests": 100},
        {"service": "api", "client": "b", "requests": 1},
        {"service": "api", "client": "c", "requests": 0, "cpu_seconds": 2},
        {"service": "api", "client": "idle-client", "requests": 0, "cpu_seconds": 0},
    ])
    r = allocate(c, u, rules(_rules("even")))
    # 10 / 3 = 3 each, the leftover unit goes to the first label in order (tie-break).
    assert amounts(r) == {"a": 4, "b": 3, "c": 3}


def test_weights_key_uses_contract_weights_for_active_clients():
    c = costs([{**API, "total_cost": 0.9}])
    u = usage([
        {"service": "api", "client": "a", "requests": 1},
        {"service": "api", "client": "b", "requests": 1000},
        {"service": "api", "client": "c", "requests": 0},
    ])
    r = allocate(c, u, rules(_rules("{weights: {a: 2, b: 1, c: 5}}")))
    assert amounts(r) == {"a": 600_000, "b": 300_000}


def test_shared_cost_without_usage_in_window_is_unattributed():
    c = costs([{**API, "total_cost": 0.5, "h": 0}, {**API, "total_cost": 0.25, "h": 1}])
    u = usage([{"service": "api", "client": "a", "requests": 5, "h": 0},
               {"service": "api", "client": "b", "requests": 0, "h": 1}])
    r = allocate(c, u, rules(_rules()))
    assert amounts(r) == {"a": 500_000}
    assert r.unattributed["amount"].tolist() == [250_000]
    assert r.unattributed["cause"].tolist() == [Cause.NO_USAGE]
    assert cascade(r).gap == 0


def test_usage_without_client_id_leaves_its_share_unattributed():
    c = costs([{**API, "total_cost": 1.0}])
    u = usage([{"service": "api", "client": "a", "requests": 3},
               {"service": "api", "client": "", "requests": 1}])
    r = allocate(c, u, rules(_rules()))
    assert amounts(r) == {"a": 750_000}
    assert r.unattributed["cause"].tolist() == [Cause.NO_CLIENT]
    assert r.unattributed["amount"].tolist() == [250_000]


def test_direct_rows_go_wholly_to_their_client():
    c = costs([
        {"namespace": "tenant-acme", "controller": "db", "total_cost": 0.4},
        {"namespace": "tenant-acme", "controller": "web", "total_cost": 0.1},
        {"namespace": "tenant-zeta", "controller": "web", "total_cost": 0.2},
    ])
    r = allocate(c, None, rules(BASIC_RULES))
    assert amounts(r, "direct") == {"tenant-acme": 500_000, "tenant-zeta": 200_000}
    assert set(r.lines["share"]) == {1.0}


def test_direct_client_from_label_and_fixed_client():
    text = """
rules:
  - id: v1
    effective_from: 2026-11-01
    workloads:
      - {match: {namespace: apps}, class: direct, client_from: "label:tenant"}
      - {match: {namespace: special}, class: direct, client: bigco}
"""
    c = costs([
        {"namespace": "apps", "controller": "x", "label:tenant": "t1", "total_cost": 1},
        {"namespace": "apps", "controller": "y", "label:tenant": "", "total_cost": 2},
        {"namespace": "special", "controller": "z", "label:tenant": "", "total_cost": 3},
    ])
    c["label:tenant"] = c["label:tenant"].astype("str")
    r = allocate(c, None, rules(text))
    assert amounts(r) == {"t1": 1_000_000, "bigco": 3_000_000}
    # A direct row whose client property is empty is unattributed, not dropped.
    assert r.unattributed["amount"].tolist() == [2_000_000]
    assert cascade(r).gap == 0


def test_residual_and_exclusions_stay_visible():
    c = costs([
        {"namespace": "saas", "controller": "reserve", "total_cost": 0.3},
        {"namespace": "edge", "controller": "proxy", "total_cost": 0.2},
        {"namespace": "monitoring", "controller": "prometheus", "total_cost": 0.1},
        {"name": "__idle__", "total_cost": 0.7},
    ])
    r = allocate(c, None, rules(BASIC_RULES))
    res = {d["class"]: d["amount"] for d in residual_summary(r)}
    assert res == {"idle": 700_000, "overhead": 200_000, "reserve": 300_000}
    assert r.exclusions[["name", "reason", "amount"]].values.tolist() == [
        ["monitoring/prometheus", "platform tooling", 100_000]
    ]
    casc = cascade(r)
    assert casc.reference_total == 1_300_000 and casc.gap == 0


def test_special_opencost_names_are_classified_like_any_name():
    text = """
rules:
  - id: v1
    effective_from: 2026-11-01
    workloads:
      - {match: {name: __unallocated__}, class: overhead}
      - {match: {name: "__*__"}, class: excluded, reason: special rows}
"""
    c = costs([{"name": "__unallocated__", "total_cost": 1},
               {"name": "__unmounted__", "total_cost": 2},
               {"name": "__idle__", "total_cost": 4}])
    r = allocate(c, None, rules(text))
    assert {d["class"]: d["amount"] for d in residual_summary(r)}["overhead"] == 1_000_000
    assert sorted(r.exclusions["name"]) == ["__idle__", "__unmounted__"]


@pytest.mark.parametrize(
    ("method", "expected"),
    [
        # proportional to attributed cost 3:1 -> idle 1.0 split 0.75 / 0.25
        ("proportional", {"a": 750_000, "tenant-b": 250_000}),
        ("even", {"a": 500_000, "tenant-b": 500_000}),
    ],
)
def test_idle_distribution_is_a_visible_line_per_client(method, expected):
    c = costs([
        {**API, "total_cost": 0.3},
        {"namespace": "tenant-b", "controller": "x", "total_cost": 0.1},
        {"name": "__idle__", "total_cost": 1.0},
    ])
    u = usage([{"service": "api", "client": "a", "requests": 1}])
    r = allocate(c, u, rules(_rules().replace("idle: keep", f"idle: {method}")))
    assert amounts(r, "idle") == expected
    idle = next(d for d in residual_summary(r) if d["class"] == "idle")
    assert idle == {"class": "idle", "amount": 0, "before_distribution": 1_000_000,
                    "distributed": 1_000_000}
    assert cascade(r).gap == 0


def test_idle_stays_residual_in_a_window_without_clients():
    c = costs([{"name": "__idle__", "total_cost": 1.0, "h": 0},
               {**API, "total_cost": 0.5, "h": 1}, {"name": "__idle__", "total_cost": 2.0, "h": 1}])
    u = usage([{"service": "api", "client": "a", "requests": 1, "h": 1}])
    r = allocate(c, u, rules(_rules().replace("idle: keep", "idle: proportional")))
    idle = next(d for d in residual_summary(r) if d["class"] == "idle")
    assert idle["amount"] == 1_000_000 and idle["distributed"] == 2_000_000


def test_external_cost_joins_the_pool_per_window_and_splits_by_its_key():
    text = _rules() + """    external:
      - {name: search, amount: 0.065, per: hour, key: cpu_seconds}
"""
    c = costs([{**API, "total_cost": 0.1, "h": h} for h in range(3)])
    u = usage([{"service": "api", "client": cl, "requests": 1, "cpu_seconds": cpu, "h": h}
               for h in range(3) for cl, cpu in (("a", 1.0), ("b", 3.0))])
    r = allocate(c, u, rules(text))
    ext = r.lines[r.lines["kind"] == "external"].groupby("client")["amount"].sum()
    assert ext.to_dict() == {"a": 3 * 16_250, "b": 3 * 48_750}
    assert r.external_total == 3 * 65_000
    assert r.reference_total == 3 * 100_000 + 3 * 65_000
    assert cascade(r).gap == 0


def test_monthly_external_cost_sums_to_its_amount_over_the_month():
    text = _rules() + """    external:
      - {name: db, amount: 1000, per: month, key: requests}
"""
    c = costs([{**API, "total_cost": 0.01, "h": h} for h in range(720)])
    u = usage([{"service": "api", "client": "a", "requests": 1, "h": h} for h in range(720)])
    r = allocate(c, u, rules(text), period=Period.month("2026-11"))
    assert r.external_total == 1000 * 1_000_000
    assert cascade(r).gap == 0


def test_each_window_uses_the_rule_in_force_at_its_start():
    text = """
rules:
  - id: old
    effective_from: 2026-10-01
    workloads:
      - {match: {controller: api}, class: shared, service: api, key: requests}
  - id: new
    effective_from: 2026-11-01T02:00:00Z
    workloads:
      - {match: {controller: api}, class: shared, service: api, key: cpu_seconds}
"""
    c = costs([{**API, "total_cost": 1.0, "h": h} for h in range(4)])
    u = usage([{"service": "api", "client": cl, "requests": rq, "cpu_seconds": cpu, "h": h}
               for h in range(4) for cl, rq, cpu in (("a", 1, 3), ("b", 3, 1))])
    r = allocate(c, u, rules(text))
    assert [v.id for v in r.rules] == ["old", "new"]
    assert amounts(r) == {"a": 2 * 250_000 + 2 * 750_000, "b": 2 * 750_000 + 2 * 250_000}
    assert r.lines.groupby("rule_id")["key"].first().to_dict() == {
        "new": "cpu_seconds", "old": "requests"}


def test_period_selects_whole_windows_and_rejects_straddling_ones():
    c = costs([{**API, "total_cost": 1.0, "h": h} for h in range(4)])
    u = usage([{"service": "api", "client": "a", "requests": 1, "h": h} for h in range(4)])
    start, _ = hour(1)
    _, end = hour(2)
    r = allocate(c, u, rules(_rules()), period=Period(start, end))
    assert r.reference_total == 2_000_000 and r.windows == 2
    with pytest.raises(InputError, match="straddles the period"):
        allocate(c, u, rules(_rules()),
                 period=Period(start + pd.Timedelta(minutes=30), end))


def test_misaligned_usage_window_is_an_error_naming_both_windows():
    c = costs([{**API, "total_cost": 1.0, "h": 0}])
    u = usage([{"service": "api", "client": "a", "requests": 1}])
    u["window_start"] = u["window_start"] + pd.Timedelta(minutes=30)
    u["window_end"] = u["window_end"] + pd.Timedelta(minutes=30)
    with pytest.raises(InputError) as err:
        allocate(c, u, rules(_rules()))
    msg = str(err.value)
    assert "usage window [2026-11-01T00:30:00+00:00" in msg
    assert "cost window [2026-11-01T00:00:00+00:00" in msg
    assert "usage.csv:row 2" in msg and "costs.csv:row 2" in msg


def test_overlapping_cost_windows_are_an_error():
    c = costs([{**API, "total_cost": 1.0, "h": 0},
               {**API, "total_cost": 1.0, "window_start": hour(0)[0] + pd.Timedelta(minutes=30),
                "window_end": hour(1)[1]}])
    with pytest.raises(InputError, match="cost windows overlap"):
        allocate(c, None, rules("""
rules:
  - {id: v, effective_from: 2026-11-01, workloads: [{match: {}, class: overhead}]}
"""))


def test_usage_in_hours_without_cost_is_reported():
    c = costs([{**API, "total_cost": 1.0, "h": 0}])
    u = usage([{"service": "api", "client": "a", "requests": 1, "h": h} for h in range(2)])
    with pytest.warns(InputWarning, match=r"1 usage row\(s\) lie outside the cost data"):
        allocate(c, u, rules(_rules()))


def test_unmatched_rows_error_or_become_unclassified():
    c = costs([{"namespace": "mystery", "controller": "x", "total_cost": 0.5}])
    with pytest.raises(InputError, match="matches no workload entry of rule 'v1'") as err:
        allocate(c, None, rules(BASIC_RULES))
    assert "costs.csv:row 2" in str(err.value)
    r = allocate(c, None, rules(BASIC_RULES.replace("unmatched: error", "unmatched: unattributed")))
    assert int(r.unclassified["amount"].sum()) == 500_000
    assert cascade(r).gap == 0


def test_key_override_applies_to_every_shared_workload_and_external():
    text = BASIC_RULES + """    external:
      - {name: search, amount: 0.01, per: hour, key: requests}
"""
    c = costs([{**API, "total_cost": 1.0},
               {"namespace": "saas", "controller": "worker", "total_cost": 1.0}])
    u = usage([{"service": s, "client": cl, "requests": rq, "cpu_seconds": cpu}
               for s in ("api", "worker") for cl, rq, cpu in (("a", 1, 0.5), ("b", 1, 1.5))])
    r = allocate(c, u, rules(text), key="cpu_seconds")
    assert set(r.lines["key"]) == {"cpu_seconds"}
    assert r.key_override == "cpu_seconds"
    assert amounts(r) == {"a": 502_500, "b": 1_507_500}


def test_window_before_first_rule_version_is_an_error():
    c = costs([{**API, "total_cost": 1.0, "window_start": "2026-10-01T00:00:00Z",
                "window_end": "2026-10-01T01:00:00Z"}])
    with pytest.raises(InputError, match="before the first rule version 'v1'"):
        allocate(c, None, rules(BASIC_RULES))


def test_unknown_key_column_names_the_rule_path():
    c = costs([{**API, "total_cost": 1.0}])
    u = usage([{"service": "api", "client": "a", "requests": 1}])
    with pytest.raises(InputError) as err:
        allocate(c, u, rules(_rules("cpu_secs")), rules_origin="rules.yaml")
    assert str(err.value) == (
        "rules.yaml, rules[0].workloads[0].key: unknown usage column 'cpu_secs' (did you mean "
        "'cpu_seconds'?); columns are requests, cpu_seconds"
    )


def test_usage_service_no_rule_names_is_an_error_and_missing_service_a_warning():
    c = costs([{**API, "total_cost": 1.0}])
    u = usage([{"service": "billing", "client": "a", "requests": 1}])
    with pytest.raises(InputError, match="service 'billing' is not named by any shared workload"):
        allocate(c, u, rules(_rules()))
    u = usage([{"service": "api", "client": "a", "requests": 1}])
    with pytest.warns(InputWarning, match="shared service 'worker' never appears"):
        r = allocate(c, u, rules(BASIC_RULES))
    assert amounts(r) == {"a": 1_000_000}
