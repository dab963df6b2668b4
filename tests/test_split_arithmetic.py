"""The split's two arithmetics (``tenantcost.split.Arithmetic``) give the same exact parts.

The estimate path (a double estimate of ``P * w / W`` corrected by one 128-bit step) is only
taken inside its range; these tests run both paths' SQL on the same pools, against the rule
in plain Python integers, at the edges of that range.
"""

from __future__ import annotations

from functools import cache

import duckdb
import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from tenantcost.limits import MAX_POOL_MEASURE
from tenantcost.split import (
    FAST_MAX_PARENT,
    FAST_MAX_PRODUCT,
    MAX_NARROW_TOTAL,
    MEASURE_LIMB,
    Arithmetic,
    _limbs,
    _split,
    choose_arithmetic,
    connect,
)


def exact_parts(parent: int, weights: list[int]) -> list[int]:
    """Floors, then the leftover units to the largest remainders, ties to the lower client."""
    total = sum(weights)
    base = [parent * w // total for w in weights]
    rest = [parent * w % total for w in weights]
    order = sorted(range(len(weights)), key=lambda i: (-rest[i], i))
    for i in order[: parent - sum(base)]:
        base[i] += 1
    return base


@cache
def _connection() -> duckdb.DuckDBPyConnection:
    return connect()


def split_with(
    how: Arithmetic, pools: list[tuple[int, list[int]]], narrow: bool = False
) -> dict[tuple[int, int], int]:
    """Run the split's SQL with arithmetic ``how`` on pools of (amount, weights), ranking the
    remainders as ``BIGINT`` if ``narrow``. One connection for the module (its tables
    replaced on each call): a new connection per call cost more than the split itself."""
    con = _connection()
    pool_rows = pd.DataFrame({"pool": range(len(pools)), "amount": [p for p, _ in pools]})
    recipients = pd.DataFrame(
        [(i, c, str(w)) for i, (_, ws) in enumerate(pools) for c, w in enumerate(ws)],
        columns=["pool", "client", "weight"],
    )
    con.register("pool_frame", pool_rows)
    con.register("recipient_frame", recipients)
    con.execute(
        "CREATE OR REPLACE TEMP TABLE p AS SELECT pool::BIGINT AS pool, amount::BIGINT AS amount "
        "FROM pool_frame"
    )
    con.execute(
        "CREATE OR REPLACE TEMP TABLE r AS SELECT pool::BIGINT AS pool, client::INTEGER AS client, "
        "weight::HUGEINT AS weight FROM recipient_frame"
    )
    con.execute(
        "CREATE OR REPLACE TEMP TABLE t AS SELECT pool, sum(weight) AS total FROM r GROUP BY pool"
    )
    rows = con.execute(
        f"WITH {_split('parts', 'r', 't', 'p', how, narrow)} SELECT pool, client, amount FROM parts"
    ).fetchall()
    return {(int(pool), int(client)): int(amount) for pool, client, amount in rows}


def expected(pools: list[tuple[int, list[int]]]) -> dict[tuple[int, int], int]:
    return {
        (i, c): part
        for i, (parent, weights) in enumerate(pools)
        for c, part in enumerate(exact_parts(parent, weights))
    }


in_range_parent = st.one_of(
    st.integers(min_value=FAST_MAX_PARENT - 10**6, max_value=FAST_MAX_PARENT - 1),
    st.integers(min_value=0, max_value=10**9),
    st.integers(min_value=0, max_value=FAST_MAX_PARENT - 1),
)
weight = st.one_of(
    st.integers(min_value=1, max_value=10**6),
    st.integers(min_value=10**20, max_value=10**21),  # usage values at MAX_USAGE_VALUE
    st.integers(min_value=1, max_value=2**64),
)
pool = st.tuples(in_range_parent, st.lists(weight, min_size=1, max_size=8))


@settings(max_examples=200, deadline=None)
@given(pools=st.lists(pool, min_size=1, max_size=5))
def test_estimate_path_is_exact_wherever_it_is_chosen(pools):
    top_parent = max(p for p, _ in pools)
    top_total = max(sum(ws) for _, ws in pools)
    assert choose_arithmetic(top_parent, top_total) == Arithmetic.ESTIMATE
    want = expected(pools)
    assert split_with(Arithmetic.ESTIMATE, pools) == want
    assert split_with(Arithmetic.LIMBS, pools) == want


def test_ratios_just_below_and_above_whole_units_are_corrected():
    """Weights whose exact quotient sits a hair below or above an integer: the double estimate
    rounds to the wrong side and the one 128-bit step must move it back."""
    parent = FAST_MAX_PARENT - 1
    total = 3 * 10**21 + 1
    pools = [
        (parent, [10**21, 10**21, 10**21 + 1]),
        (parent, [total - 1, 1]),
        (parent, [1, total - 1]),
        (FAST_MAX_PARENT - 3, [7, 11, 13, 2**64]),
    ]
    want = expected(pools)
    assert split_with(Arithmetic.ESTIMATE, pools) == want
    assert split_with(Arithmetic.LIMBS, pools) == want


def test_pools_outside_the_estimate_range_take_the_limbs():
    assert choose_arithmetic(FAST_MAX_PARENT, 10) == Arithmetic.LIMBS
    assert choose_arithmetic(10**12, MAX_POOL_MEASURE) == Arithmetic.LIMBS
    assert choose_arithmetic(10**6, FAST_MAX_PRODUCT // 10**6 - 1) == Arithmetic.ESTIMATE
    assert choose_arithmetic(0, 0) == Arithmetic.ESTIMATE


narrow_weight = st.one_of(
    st.integers(min_value=1, max_value=10**6),
    st.integers(min_value=MAX_NARROW_TOTAL // 4 - 10**6, max_value=MAX_NARROW_TOTAL // 4),
)


@settings(max_examples=200, deadline=None)
@given(
    pools=st.lists(
        st.tuples(in_range_parent, st.lists(narrow_weight, min_size=1, max_size=4)),
        min_size=1,
        max_size=5,
    )
)
def test_remainders_ranked_as_bigint_give_the_same_parts_up_to_the_narrow_limit(pools):
    """Totals up to ``2^63 - 1`` (four weights near a quarter of it): remainders just below
    the limit rank the same as 64-bit integers as they do as 128-bit ones."""
    assert all(sum(ws) <= MAX_NARROW_TOTAL for _, ws in pools)
    want = expected(pools)
    assert split_with(Arithmetic.ESTIMATE, pools, narrow=True) == want
    assert split_with(Arithmetic.LIMBS, pools, narrow=True) == want


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 2**120 - 1), min_size=1, max_size=20))
def test_measure_limbs_are_the_base_2_40_digits(values: list[int]) -> None:
    """Shifts and masks on a non-negative HUGEINT give its digits in base ``MEASURE_LIMB``
    (the fold adds them up exactly), as divisions would."""
    con = duckdb.connect()
    rows = ", ".join(f"({v}::HUGEINT)" for v in values)
    got = con.execute(f"SELECT {_limbs('v', 'm')} FROM (VALUES {rows}) t(v)").fetchall()
    limb = MEASURE_LIMB
    assert got == [(v // limb**2, v // limb % limb, v % limb) for v in values]


many_weights = st.lists(
    st.one_of(st.sampled_from([1, 2, 3, 7, 1000]), st.integers(1, 10**6)),
    min_size=1,
    max_size=400,
)


@settings(max_examples=150, deadline=None)
@given(
    pools=st.lists(
        st.tuples(st.integers(0, 10**6), many_weights), min_size=1, max_size=4
    ),
    narrow=st.booleans(),
)
def test_crowded_pools_give_their_leftover_units_to_the_largest_remainders(pools, narrow):
    """Hundreds of recipients a pool, many with equal weights (equal remainders, ties broken
    by client), leftovers anywhere from none to nearly one a recipient: every part is the
    exact rule's."""
    assert split_with(Arithmetic.ESTIMATE, pools, narrow) == expected(pools)


def test_leftovers_equal_to_the_count_of_the_largest_remainders():
    """Remainders 1/4 and 3/4 of W, leftover equal to the number of 3/4 rows (they take the
    units, no tie to break); a leftover of 0; equal weights, ties to the lower client."""
    pools = [(2, [1, 3, 1, 3]), (0, [5, 5]), (1, [1, 1, 1]), (5, [2, 2, 1])]
    assert split_with(Arithmetic.ESTIMATE, pools) == expected(pools)
    assert split_with(Arithmetic.LIMBS, pools) == expected(pools)
