"""Gauge integration (tenantcost.gauges) against an independent exact integration in Python
fractions, on generated samples with gaps, staleness, late (re-sent) samples and levels
before the period."""

from __future__ import annotations

from fractions import Fraction

import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from tenantcost.duck import connect
from tenantcost.gauges import HOUR_US, integrate

START = pd.Timestamp("2026-11-01T00:00:00Z")
HOURS = 6
P0 = START.value // 1000
P1 = P0 + HOURS * HOUR_US

levels = st.decimals(min_value=0, max_value=10**12, places=3, allow_nan=False)
samples = st.lists(
    st.tuples(
        st.sampled_from(["size", "seats"]),
        st.sampled_from(["a", "b", ""]),
        # from 3 hours before the period to 1 hour after it, at any microsecond
        st.integers(min_value=P0 - 3 * HOUR_US, max_value=P1 + HOUR_US),
        levels,
        st.integers(min_value=1, max_value=3),  # the batch: a later one re-sends an instant
    ),
    max_size=25,
    unique_by=lambda r: (r[0], r[1], r[2], r[4]),  # one batch never repeats an instant
)
STALE = {"size": 2 * 3600, "seats": 5400}


def expected(rows: list[tuple]) -> dict[tuple, int]:
    """Millionths of a unit-hour per (hour, metric, client): the level times microseconds,
    in fractions, rounded half to even once."""
    latest: dict[tuple, tuple[int, Fraction]] = {}
    for metric, client, t, level, rank in rows:
        key = (metric, client, t)
        if key not in latest or rank >= latest[key][0]:
            latest[key] = (rank, Fraction(level))
    out: dict[tuple, Fraction] = {}
    series: dict[tuple, list[tuple[int, Fraction]]] = {}
    for (metric, client, t), (_, level) in latest.items():
        series.setdefault((metric, client), []).append((t, level))
    for (metric, client), points in series.items():
        points.sort()
        for i, (t, level) in enumerate(points):
            end = t + STALE[metric] * 1_000_000
            if i + 1 < len(points):
                end = min(end, points[i + 1][0])
            for h in range(HOURS):
                lo, hi = P0 + h * HOUR_US, P0 + (h + 1) * HOUR_US
                overlap = min(end, hi) - max(t, lo)
                if overlap > 0:
                    key = (h, metric, client)
                    out[key] = out.get(key, Fraction(0)) + level * overlap
    return {k: round(v / 3600) for k, v in out.items() if round(v / 3600) != 0}


@settings(max_examples=60, deadline=None)
@given(samples, st.randoms())
def test_integration_is_the_exact_integral_rounded_once(rows, rnd):
    shuffled = list(rows)
    rnd.shuffle(shuffled)  # no result depends on input row order
    frame = pd.DataFrame(
        [(m, "db", c, t, str(v), r) for m, c, t, v, r in shuffled],
        columns=["metric", "service", "client", "t_us", "value", "rank"],
    )
    con = connect()
    con.register("samples", frame)
    done = integrate(con, "SELECT * FROM samples", STALE, START, START + pd.Timedelta(hours=6))
    table = con.execute(
        f"SELECT window_start, window_end, client, size, seats FROM {done.table}"
    ).fetchall()  # exact Decimal values
    got: dict[tuple, int] = {}
    for start, end, client, *measures in table:
        h = int((pd.Timestamp(start) - START) / pd.Timedelta(hours=1))
        assert pd.Timestamp(end) - pd.Timestamp(start) == pd.Timedelta(hours=1)
        for metric, value in zip(("size", "seats"), measures, strict=True):
            micro = value.scaleb(6)
            assert micro == int(micro)  # whole millionths of a unit-hour
            if micro:
                got[(h, metric, client)] = int(micro)
    assert got == expected(rows)


def test_a_stale_span_is_named_and_counts_zero():
    t = P0 + HOUR_US // 2
    frame = pd.DataFrame(
        [("size", "db", "a", t, "1024", 1), ("size", "db", "a", t + 4 * HOUR_US, "2048", 1)],
        columns=["metric", "service", "client", "t_us", "value", "rank"],
    )
    con = connect()
    con.register("samples", frame)
    done = integrate(
        con, "SELECT * FROM samples", {"size": 3600}, START, START + pd.Timedelta(hours=6)
    )
    spans = done.stale.to_dict("records")
    hour = pd.Timedelta(minutes=60)
    assert [(s["stale_from"], s["stale_to"]) for s in spans] == [
        (START + 1.5 * hour, START + 4.5 * hour),  # until the next sample
        (START + 5.5 * hour, START + 6 * hour),  # until the period's end
    ]
    assert [s["client"] for s in spans] == ["a", "a"]
    assert spans[0]["last_sample"] == START + 0.5 * hour
    sizes = con.execute(f"SELECT size FROM {done.table} ORDER BY window_start").fetchall()
    # 1024 for 30 min + 30 min, nothing for 1 h 30, then 2048 from 04:30 until 05:30
    assert [float(s) for (s,) in sizes] == [512.0, 512.0, 1024.0, 1024.0]
