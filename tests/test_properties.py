"""Property tests: conservation to the unit, bounded parts and row-order invariance."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pandas as pd
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tenantcost.allocate import allocate
from tenantcost.money import split_largest_remainder
from tenantcost.reconcile import cascade

from .factories import costs, rules, usage

weights = st.one_of(
    st.just(0.0),
    st.floats(min_value=0.0, max_value=1e6, allow_nan=False, allow_infinity=False),
    st.integers(min_value=0, max_value=10**9).map(float),
)


@given(
    parent=st.integers(min_value=0, max_value=10**13),
    ws=st.lists(weights, min_size=1, max_size=30),
)
def test_split_conserves_parent_and_bounds_every_part(parent, ws):
    n = len(ws)
    labels = [f"c{i:03d}" for i in range(n)]
    parts = split_largest_remainder(
        pd.Series([0] * n), pd.Series([parent] * n), pd.Series(ws), pd.Series(labels)
    )
    total = sum(Fraction(w) for w in ws)
    if total == 0:
        assert parts.tolist() == [0] * n
        return
    assert int(parts.sum()) == parent
    for part, w in zip(parts.tolist(), ws, strict=True):
        exact = Fraction(parent) * Fraction(w) / total
        assert part <= exact + 1, "a part exceeds its exact share by a unit or more"
        assert part > exact - 1 - Fraction(1, 10**6)
        if w == 0:
            assert part == 0


@given(
    parents=st.lists(st.integers(min_value=0, max_value=10**9), min_size=1, max_size=5),
    data=st.data(),
)
def test_split_is_vectorised_over_groups_and_order_free(parents, data):
    rows = []
    for g, p in enumerate(parents):
        k = data.draw(st.integers(min_value=1, max_value=6))
        for i in range(k):
            rows.append((g, p, data.draw(weights), f"c{i}"))
    frame = pd.DataFrame(rows, columns=["g", "p", "w", "label"])
    parts = split_largest_remainder(frame["g"], frame["p"], frame["w"], frame["label"])
    frame["part"] = parts
    shuffled = frame.sample(frac=1, random_state=data.draw(st.integers(0, 2**31 - 1)))
    again = split_largest_remainder(shuffled["g"], shuffled["p"], shuffled["w"],
                                    shuffled["label"])
    assert (again == shuffled["part"].to_numpy()).all()
    for g, p in enumerate(parents):
        grp = frame[frame["g"] == g]
        if grp["w"].sum() > 0:
            assert int(grp["part"].sum()) == p


RULES = """
rules:
  - id: v1
    effective_from: 2026-11-01
    workloads:
      - {match: {controller: api}, class: shared, service: api, key: requests}
      - {match: {controller: worker}, class: shared, service: worker, key: cpu_seconds}
      - {match: {namespace: "tenant-*"}, class: direct, client_from: namespace}
      - {match: {controller: reserve}, class: reserve}
      - {match: {controller: proxy}, class: overhead}
      - {match: {namespace: monitoring}, class: excluded, reason: tooling}
      - {match: {name: __idle__}, class: idle}
    external:
      - {name: search, amount: 0.065, per: hour, key: requests}
      - {name: db, amount: 1234.56, per: month, key: even, services: [worker]}
    idle: IDLE
    unmatched: unattributed
"""

WORKLOADS = [
    {"namespace": "saas", "controller": "api"},
    {"namespace": "saas", "controller": "worker"},
    {"namespace": "tenant-a", "controller": "db"},
    {"namespace": "tenant-b", "controller": "db"},
    {"namespace": "saas", "controller": "reserve"},
    {"namespace": "edge", "controller": "proxy"},
    {"namespace": "monitoring", "controller": "prom"},
    {"namespace": "mystery", "controller": "x"},
    {"name": "__idle__"},
]
CLIENTS = ["a", "b", "c", "", "tenant-a"]

money_values = st.integers(min_value=0, max_value=5_000_000_000).map(lambda m: m / 1e6)
metric_values = st.one_of(st.just(0.0), st.floats(min_value=0, max_value=1e7, allow_nan=False),
                          st.integers(0, 10**6).map(float))


@st.composite
def scenarios(draw):
    hours = draw(st.integers(min_value=1, max_value=4))
    cost_rows = [
        {**w, "h": h, "total_cost": draw(money_values)}
        for h in range(hours)
        for w in WORKLOADS
        if draw(st.booleans())
    ]
    if not cost_rows:
        cost_rows = [{**WORKLOADS[0], "h": 0, "total_cost": draw(money_values)}]
    usage_rows = [
        {"h": h, "service": s, "client": c, "requests": draw(metric_values),
         "cpu_seconds": draw(metric_values)}
        for h in range(hours)
        for s in ("api", "worker")
        for c in CLIENTS
        if draw(st.booleans())
    ]
    key = draw(st.sampled_from([None, "requests", "cpu_seconds", "even"]))
    idle = draw(st.sampled_from(["keep", "proportional", "even"]))
    return costs(cost_rows), usage(usage_rows), key, idle


def _run(c, u, key, idle):
    return allocate(c, u if not u.empty else None, rules(RULES.replace("IDLE", idle)), key=key)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_cascade_closes_to_the_unit_for_any_input_and_key(scenario):
    c, u, key, idle = scenario
    result = _run(c, u, key, idle)
    casc = cascade(result)
    expected_reference = int(np.rint(c["total_cost"].to_numpy() * 1e6).sum()) + int(
        result.external_total
    )
    assert casc.reference_total == expected_reference
    assert casc.gap == 0
    assert (result.lines["amount"] >= 0).all()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios(), st.integers(min_value=0, max_value=2**31 - 1))
def test_results_do_not_depend_on_input_row_order(scenario, seed):
    c, u, key, idle = scenario
    first = _run(c, u, key, idle)
    shuffled = _run(c.sample(frac=1, random_state=seed), u.sample(frac=1, random_state=seed),
                    key, idle)
    for name in ("lines", "unattributed", "residual", "exclusions", "unclassified"):
        pd.testing.assert_frame_equal(
            getattr(first, name).reset_index(drop=True),
            getattr(shuffled, name).reset_index(drop=True),
            obj=name,
        )
