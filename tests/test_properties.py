"""Property tests: conservation to the unit, bounded parts and row-order invariance."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pandas as pd
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tenantcost.allocate import allocate
from tenantcost.limits import MAX_MICROS_PER_ROW, MAX_USAGE_VALUE
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


# Near the limits of tenantcost.limits: cost rows up to MAX_COST_PER_ROW, usage up to
# MAX_USAGE_VALUE (the largest values drawn often, not only by chance).
huge_money = st.one_of(
    st.integers(MAX_MICROS_PER_ROW - 10**6, MAX_MICROS_PER_ROW), st.integers(0, MAX_MICROS_PER_ROW)
).map(lambda m: m / 1e6)
huge_metrics = st.one_of(st.just(0.0), st.floats(MAX_USAGE_VALUE * 0.999, MAX_USAGE_VALUE),
                         st.integers(0, int(MAX_USAGE_VALUE)).map(float))


@st.composite
def scenarios(draw, money=money_values, metrics=metric_values):
    hours = draw(st.integers(min_value=1, max_value=4))
    cost_rows = [
        {**w, "h": h, "total_cost": draw(money)}
        for h in range(hours)
        for w in WORKLOADS
        if draw(st.booleans())
    ]
    if not cost_rows:
        cost_rows = [{**WORKLOADS[0], "h": 0, "total_cost": draw(money)}]
    usage_rows = [
        {"h": h, "service": s, "client": c, "requests": draw(metrics),
         "cpu_seconds": draw(metrics)}
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
@given(st.one_of(scenarios(), scenarios(huge_money, huge_metrics)))
def test_cascade_closes_to_the_unit_for_any_input_and_key(scenario):
    c, u, key, idle = scenario
    result = _run(c, u, key, idle)
    casc = cascade(result)
    micros = np.rint(c["total_cost"].to_numpy() * 1e6).astype("int64")  # exact int sums
    expected_reference = int(micros.sum()) + int(result.external_total)
    assert casc.reference_total == expected_reference
    assert casc.gap == 0
    assert (result.lines["amount"] >= 0).all()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(scenarios(), scenarios(huge_money, huge_metrics)),
       st.integers(min_value=0, max_value=2**31 - 1))
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


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    pools=st.lists(
        st.tuples(
            st.integers(min_value=0, max_value=10**12),
            st.lists(
                st.tuples(st.sampled_from(["a", "b", "c", "d", "e", ""]),
                          st.integers(min_value=0, max_value=10**9)),
                min_size=1, max_size=6, unique_by=lambda t: t[0],
            ),
        ),
        min_size=1, max_size=5,
    )
)
def test_duckdb_split_agrees_with_the_pandas_reference_split(pools):
    """The engine's SQL split and ``money.split_largest_remainder`` give the same units."""
    from tenantcost.split import SplitTables, connect, run_split

    t0 = pd.Timestamp("2026-11-01T00:00:00Z")
    pool_rows, usage_rows, expected_rows = [], [], []
    for i, (parent, recipients) in enumerate(pools):
        ws, we = t0 + pd.Timedelta(hours=i), t0 + pd.Timedelta(hours=i + 1)
        pool_rows.append((i, ws, we, 0, parent, "v", "api", "shared", "requests"))
        for client, w in recipients:
            usage_rows.append((ws, we, "api", client, w / 1e6, f"row {len(usage_rows)}"))
            expected_rows.append((i, parent, w, client))
    tables = SplitTables(
        pools=pd.DataFrame(pool_rows, columns=["pool", "window_start", "window_end", "spec",
                                               "amount", "rule_id", "source", "kind", "key"]),
        specs=pd.DataFrame([(0, "column", "requests", "sum")],
                           columns=["spec", "key_kind", "key_column", "agg"]),
        spec_services=pd.DataFrame([(0, "api")], columns=["spec", "service"]),
        spec_weights=pd.DataFrame({"spec": pd.Series([], dtype="int64"),
                                   "client": pd.Series([], dtype="str"),
                                   "weight": pd.Series([], dtype="int64")}),
        direct=pd.DataFrame({"window_start": pd.Series([], dtype="datetime64[ns, UTC]"),
                             "window_end": pd.Series([], dtype="datetime64[ns, UTC]"),
                             "client": pd.Series([], dtype="str"),
                             "amount": pd.Series([], dtype="int64")}),
        idle_pools=pd.DataFrame({"pool": pd.Series([], dtype="int64"),
                                 "window_start": pd.Series([], dtype="datetime64[ns, UTC]"),
                                 "window_end": pd.Series([], dtype="datetime64[ns, UTC]"),
                                 "amount": pd.Series([], dtype="int64"),
                                 "rule_id": pd.Series([], dtype="str"),
                                 "method": pd.Series([], dtype="str")}),
    )
    con = connect()
    con.register("u", pd.DataFrame(usage_rows, columns=["window_start", "window_end", "service",
                                                        "client", "requests", "origin"]))
    run_split(con, tables, "SELECT * FROM u", ["requests"])
    got = {(int(p), str(c)): int(a) for p, c, a in
           con.execute("SELECT k.pool, c.client, k.amount FROM keyed k "
                       "JOIN t_clients c ON c.cid = k.client").fetchall()}
    exp = pd.DataFrame(expected_rows, columns=["pool", "parent", "w", "client"])
    exp = exp[exp["w"] > 0]
    exp["part"] = split_largest_remainder(exp["pool"], exp["parent"], exp["w"], exp["client"])
    assert got == {(int(r.pool), str(r.client)): int(r.part) for r in exp.itertuples()}
