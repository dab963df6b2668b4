"""The pure watch core (tenantcost/watch.py): anomalies, gaps and budget status.

Figures are checked against an independent reference written here with exact fractions and
plain loops (``reference``), not against the core's own arithmetic.
"""

from __future__ import annotations

from fractions import Fraction
from statistics import median

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tenantcost.config.watch import WatchSettings
from tenantcost.watch import (
    ANOMALY_COLUMNS,
    DAILY_COLUMNS,
    GAP_COLUMNS,
    WatchParams,
    anomaly_id,
    band_status,
    score_days,
)

MICRO = 1_000_000
NOV = pd.Timestamp("2026-11-01", tz="UTC")


def day(n: int) -> pd.Timestamp:
    """2026-11-01 plus n days (negative: October)."""
    return NOV + pd.Timedelta(days=n)


def frame(rows: list[tuple[str, str, int, int, str, bool]]) -> pd.DataFrame:
    """Daily figures from (client, source, day offset, amount, split, has_usage) tuples."""
    out = pd.DataFrame(rows, columns=list(DAILY_COLUMNS))
    out["day"] = pd.to_datetime([day(n) for n in out["day"]], utc=True)
    out["amount"] = out["amount"].astype("int64")
    out["has_usage"] = out["has_usage"].astype(bool)
    return out


def scored_days(first: int, last: int) -> list[pd.Timestamp]:
    return [day(n) for n in range(first, last + 1)]


def found(anomalies: pd.DataFrame) -> set[tuple[str, str, str, str]]:
    return set(anomalies[["client", "source", "day", "kind"]].itertuples(index=False, name=None))


def reference(
    rows: list[tuple[str, str, int, int, str, bool]], days: range, params: WatchParams
) -> tuple[dict[tuple[str, str, str], tuple[str, int, int, float]], set[tuple[str, str, str]]]:
    """The method of docs/watch.md, one day at a time in exact fractions: the anomalies as
    {(client, source, day): (kind, amount, baseline, score)} and the gaps."""
    by_key = {(c, s, d): (a, sp, u) for c, s, d, a, sp, u in rows}
    anomalies: dict[tuple[str, str, str], tuple[str, int, int, float]] = {}
    gaps: set[tuple[str, str, str]] = set()
    for client, source in sorted({(c, s) for c, s, *_ in rows}):
        for d in days:
            text = str(day(d).date())
            window = [by_key.get((client, source, d - k)) for k in range(1, params.window_days + 1)]
            row = by_key.get((client, source, d))
            if any(w is not None and w[2] for w in window) and (row is None or not row[2]):
                gaps.add((client, source, text))
            if row is None:
                continue
            amount, split, usage = row
            base = [Fraction(w[0]) for w in window if w is not None and w[2] and w[1] == split]
            if len(base) < params.min_days:
                continue
            m = Fraction(median(base))
            mad = Fraction(median([abs(x - m) for x in base]))
            scale = max(Fraction(14826, 10000) * mad, abs(m) / 10, Fraction(params.min_amount))
            score = (amount - m) / (scale or 1)
            if abs(score) < Fraction(params.threshold) or abs(amount - m) < params.min_amount:
                continue
            if score < 0 and not usage:
                continue
            kind = "spike" if score > 0 else "drop"
            anomalies[(client, source, text)] = (kind, amount, round(m), float(score))
    return anomalies, gaps


# --- a generated month with a spike, a split change and a missing day --------------------

SPIKE = ("c017", "import-worker", 8)  # 2026-11-09
SPLIT_CHANGE = ("c042", "api", 7)  # from 2026-11-08: another key, three times the money
MISSING = ("c099", "import-worker", 4)  # 2026-11-05: no usage rows, no line
NO_USAGE_ROW = ("c123", "api", 11)  # 2026-11-12: a row without usage, amount 0


def generated_month(split_aware: bool = True) -> list[tuple[str, str, int, int, str, bool]]:
    """200 clients x 3 sources, 2026-10-18 .. 2026-11-15, 5 % daily noise, with one spike,
    one split change and one missing usage day (``SPIKE``, ``SPLIT_CHANGE``, ``MISSING``)."""
    rng = np.random.default_rng(25)
    rows = []
    for i in range(200):
        client = f"c{i:03d}"
        for source in ("api", "import-worker", "idle"):
            base = int(rng.integers(1, 500)) * MICRO
            noise = np.clip(rng.normal(1.0, 0.05, 29), 0.85, 1.15)
            for n, factor in zip(range(-14, 15), noise, strict=True):
                amount, split, usage = int(base * factor), f"{source}:usage:cpu", True
                if (client, source) == SPIKE[:2] and n == SPIKE[2]:
                    amount *= 10
                if (client, source) == SPLIT_CHANGE[:2] and n >= SPLIT_CHANGE[2]:
                    amount *= 3
                    split = "api:usage:requests" if split_aware else split
                if (client, source, n) == MISSING:
                    continue
                if (client, source, n) == NO_USAGE_ROW:
                    amount, usage = 0, False
                rows.append((client, source, n, amount, split, usage))
    return rows


@pytest.fixture(scope="module")
def month() -> list[tuple[str, str, int, int, str, bool]]:
    return generated_month()


def test_generated_month_flags_exactly_the_spike(month):
    params = WatchParams()
    got = score_days(frame(month), scored_days(0, 14), params)
    assert list(got.anomalies.columns) == list(ANOMALY_COLUMNS)
    assert found(got.anomalies) == {("c017", "import-worker", "2026-11-09", "spike")}
    want, _ = reference([r for r in month if r[:2] == SPIKE[:2]], range(0, 15), params)
    _kind, amount, baseline, score = want[("c017", "import-worker", "2026-11-09")]
    row = got.anomalies.iloc[0]
    assert (row["amount"], row["baseline"]) == (amount, baseline)
    assert row["score"] == pytest.approx(score, abs=0.005)
    assert row["score"] > 20  # ten times the day: far beyond the threshold
    assert row["id"] == anomaly_id("c017", "import-worker", "2026-11-09", "spike")
    assert list(got.gaps.columns) == list(GAP_COLUMNS)
    gaps = set(got.gaps.itertuples(index=False, name=None))
    assert gaps == {
        ("c099", "import-worker", "2026-11-05"),
        ("c123", "api", "2026-11-12"),
    }


def test_split_change_is_what_keeps_the_client_quiet(month):
    """The same month with the split string unchanged: c042's tripled cost is flagged, so the
    quiet answer above is the split rule's doing, not the data's."""
    got = score_days(frame(generated_month(split_aware=False)), scored_days(0, 14), WatchParams())
    assert ("c042", "api", "2026-11-08", "spike") in found(got.anomalies)


def test_missing_usage_is_a_gap_not_a_drop(month):
    """With usage rows and a zero amount, the same days are drops: the gap rule keeps them out."""
    rows = [r for r in month if (r[0], r[1], r[2]) != NO_USAGE_ROW]
    rows += [(*MISSING[:2], MISSING[2], 0, "import-worker:usage:cpu", True)]
    rows += [(*NO_USAGE_ROW[:2], NO_USAGE_ROW[2], 0, "api:usage:cpu", True)]
    got = score_days(frame(rows), scored_days(0, 14), WatchParams())
    assert found(got.anomalies) == {
        ("c017", "import-worker", "2026-11-09", "spike"),
        ("c099", "import-worker", "2026-11-05", "drop"),
        ("c123", "api", "2026-11-12", "drop"),
    }
    assert got.gaps.empty


# --- the worked example of docs/watch.md ("The method") ---------------------------------

EXAMPLE = ["12.00", "12.40", "11.80", "12.10", "12.60", "11.90", "12.20"]
EXAMPLE += ["12.00", "12.30", "11.70", "12.50", "12.10", "11.90", "12.20"]  # 1 .. 14 Nov
EXAMPLE += ["36.60", "9.00"]  # 15 and 16 Nov; 17 Nov: no row


def example_rows() -> list[tuple[str, str, int, int, str, bool]]:
    return [
        ("acme", "import-worker", n, int(Fraction(text) * MICRO), "import-worker:cpu", True)
        for n, text in enumerate(EXAMPLE)
    ]


def test_worked_example():
    got = score_days(frame(example_rows()), scored_days(14, 16), WatchParams())
    assert got.anomaly_records() == [
        {
            "id": anomaly_id("acme", "import-worker", "2026-11-15", "spike"),
            "client": "acme",
            "source": "import-worker",
            "day": "2026-11-15",
            "amount": 36_600_000,
            "baseline": 12_100_000,  # median of the 14 days
            "score": 20.25,  # (36.60 - 12.10) / max(1.4826 x 0.20, 1.21, 0.01)
            "kind": "spike",
        }
    ]
    assert got.gaps.to_dict("records") == [
        {"client": "acme", "source": "import-worker", "day": "2026-11-17"}
    ]
    # 16 Nov (9.00 against a median of 12.15) scores -2.59: a drop only at threshold 2.5
    low = score_days(frame(example_rows()), [day(15)], WatchParams(threshold=2.5))
    assert low.anomaly_records()[0] | {"id": ""} == {
        "id": "",
        "client": "acme",
        "source": "import-worker",
        "day": "2026-11-16",
        "amount": 9_000_000,
        "baseline": 12_150_000,
        "score": -2.59,
        "kind": "drop",
    }


# --- baselines, splits and edges --------------------------------------------------------


def steady(client: str, first: int, last: int, split: str = "k1", amount: int = 10 * MICRO):
    return [(client, "api", n, amount, split, True) for n in range(first, last + 1)]


def test_baseline_reaches_into_the_previous_month():
    rows = [*steady("a", -14, -1), ("a", "api", 0, 50 * MICRO, "k1", True)]
    got = score_days(frame(rows), [day(0)], WatchParams())
    assert found(got.anomalies) == {("a", "api", "2026-11-01", "spike")}
    assert got.anomalies["baseline"].tolist() == [10 * MICRO]


def test_split_change_restarts_the_baseline_until_min_days():
    """Split k2 (three times the money) from 5 Nov: a spike after 7 days under k2 is scored
    against k2's days; after 6 it is not scored, nor is the first day under a new split; a
    rule version with the same split string interrupts nothing."""
    rows = steady("a", -10, 3) + steady("a", 4, 10, "k2", 30 * MICRO)
    rows += [("a", "api", 11, 300 * MICRO, "k2", True)]
    rows += [*steady("b", -10, 10), ("b", "api", 11, 300 * MICRO, "k1", True)]
    rows += steady("c", -10, 3) + steady("c", 4, 9, "k2", 30 * MICRO)
    rows += [("c", "api", 10, 300 * MICRO, "k2", True)]
    rows += [*steady("d", -10, 9), ("d", "api", 10, 300 * MICRO, "k1+k2", True)]
    got = score_days(frame(rows), scored_days(0, 11), WatchParams())
    assert found(got.anomalies) == {
        ("a", "api", "2026-11-12", "spike"),
        ("b", "api", "2026-11-12", "spike"),
    }
    assert got.anomalies.set_index("client").loc["a", "baseline"] == 30 * MICRO


def test_small_moves_and_short_history_are_not_flagged():
    # 0.009 above a baseline of zeros: score 0.9 (scale = min_amount 0.01), and < min_amount
    rows = [*steady("a", -14, -1, amount=0), ("a", "api", 0, 9000, "k1", True)]
    rows += [*steady("b", -6, -1), ("b", "api", 0, 500 * MICRO, "k1", True)]  # 6 days only
    got = score_days(frame(rows), [day(0)], WatchParams())
    assert got.anomalies.empty
    # a threshold below 1: the score (0.9) passes, the move (0.009 < 0.01) does not
    assert score_days(frame(rows[:15]), [day(0)], WatchParams(threshold=0.5)).anomalies.empty
    flagged = score_days(frame(rows), [day(0)], WatchParams(min_amount=0, min_days=6))
    assert found(flagged.anomalies) == {
        ("a", "api", "2026-11-01", "spike"),
        ("b", "api", "2026-11-01", "spike"),
    }


def test_a_source_unused_for_a_whole_window_is_no_gap():
    """Usage up to 20 Oct, then on 3 Nov only: 1-2 Nov have no usage in their window (no
    gap), 4 Nov has (a gap)."""
    rows = [*steady("a", -20, -15), ("a", "api", 2, 10 * MICRO, "k1", True)]
    got = score_days(frame(rows), scored_days(0, 3), WatchParams())
    assert got.gaps.to_dict("records") == [{"client": "a", "source": "api", "day": "2026-11-04"}]
    assert got.anomalies.empty


def test_empty_inputs_give_empty_frames():
    empty = pd.DataFrame({c: [] for c in DAILY_COLUMNS})
    for got in (
        score_days(empty, [day(0)], WatchParams()),
        score_days(frame(steady("a", -14, 0)), [], WatchParams()),
    ):
        assert list(got.anomalies.columns) == list(ANOMALY_COLUMNS)
        assert list(got.gaps.columns) == list(GAP_COLUMNS)
        assert got.anomalies.empty and got.gaps.empty


def test_bad_daily_figures_are_refused():
    rows = frame(steady("a", 0, 3))
    with pytest.raises(ValueError, match="two rows"):
        score_days(pd.concat([rows, rows.iloc[:1]]), [day(3)], WatchParams())
    with pytest.raises(ValueError, match="lack column"):
        score_days(rows.drop(columns=["split"]), [day(3)], WatchParams())
    with pytest.raises(ValueError, match="midnight"):
        score_days(rows, [day(3) + pd.Timedelta(hours=1)], WatchParams())


def test_params_from_settings():
    assert WatchParams.from_settings(WatchSettings()) == WatchParams()
    custom = WatchSettings(window_days=10, min_days=5, threshold=3.5, min_amount="0.0000015")
    assert WatchParams.from_settings(custom) == WatchParams(10, 5, 3.5, 2)  # half-even
    with pytest.raises(ValueError):
        WatchParams(window_days=5, min_days=6)


def test_band_status_exact_and_vectorised():
    big = 2**60
    table = pd.DataFrame(
        {
            "projected": [1, 2, 10, 11, 5, big + 1, big],
            "low": [2, 2, 2, 2, None, 0, 0],
            "high": [10, 10, 10, 10, None, big, big],
        }
    )
    assert band_status(table).tolist() == [
        "below",
        "within",
        "within",
        "above",
        "no_budget",
        "above",  # one micro-unit over 2^60: exact, not a float comparison
        "within",
    ]


# --- properties --------------------------------------------------------------------------

SMALL = WatchParams(window_days=5, min_days=2, threshold=2.0, min_amount=10)
KEYS = st.tuples(
    st.sampled_from(["a", "ç"]), st.sampled_from(["api", "import"]), st.integers(0, 11)
)


def daily_rows(amounts: st.SearchStrategy[int]) -> st.SearchStrategy[list]:
    """Dense small months: mostly steady days with usage under split x, some outliers."""
    values = st.tuples(
        amounts, st.sampled_from(["x", "x", "x", "x", "y"]), st.sampled_from([True] * 5 + [False])
    )
    return st.dictionaries(KEYS, values, min_size=15, max_size=48).map(
        lambda d: [(c, s, n, a, sp, u) for (c, s, n), (a, sp, u) in d.items()]
    )


STEADY = st.integers(95, 105)
AMOUNTS = st.one_of(STEADY, STEADY, STEADY, st.integers(-50, 500), st.sampled_from([0, 5_000]))


@settings(max_examples=40, deadline=None)
@given(daily_rows(AMOUNTS), st.sampled_from([0, 10]), st.sampled_from([0.5, 2.0]))
def test_agrees_with_the_exact_reference(rows, min_amount, threshold):
    params = WatchParams(5, 2, threshold, min_amount)
    got = score_days(frame(rows), scored_days(5, 11), params)
    want, want_gaps = reference(rows, range(5, 12), params)
    assert set(got.gaps.itertuples(index=False, name=None)) == want_gaps
    assert len(got.anomalies) == len(want)
    for row in got.anomalies.itertuples(index=False):
        kind, amount, baseline, score = want[(row.client, row.source, row.day)]
        assert (row.kind, row.amount, row.baseline) == (kind, amount, baseline)
        assert row.score == pytest.approx(score, abs=0.006)
        assert row.id == anomaly_id(row.client, row.source, row.day, row.kind)


@settings(max_examples=25, deadline=None)
@given(daily_rows(AMOUNTS), st.data())
def test_row_order_does_not_change_the_answer(rows, data):
    order = data.draw(st.permutations(range(len(rows))))
    first = score_days(frame(rows), scored_days(5, 11), SMALL)
    again = score_days(frame([rows[i] for i in order]), scored_days(5, 11), SMALL)
    pd.testing.assert_frame_equal(first.anomalies, again.anomalies)
    pd.testing.assert_frame_equal(first.gaps, again.gaps)
    assert first.anomalies["id"].is_unique


@settings(max_examples=25, deadline=None)
@given(daily_rows(st.integers(1, 10**6) | STEADY), st.integers(2, 1000))
def test_scaling_all_amounts_keeps_the_flags(rows, k):
    params = WatchParams(5, 2, 2.0, 0)
    scaled = [(c, s, n, a * k, sp, u) for c, s, n, a, sp, u in rows]
    one = score_days(frame(rows), scored_days(5, 11), params).anomalies
    many = score_days(frame(scaled), scored_days(5, 11), params).anomalies
    assert many["id"].tolist() == one["id"].tolist()
    assert many["score"].tolist() == one["score"].tolist()
    assert (many["amount"] == one["amount"] * k).all()
