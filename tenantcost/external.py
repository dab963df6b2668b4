"""External costs (OpenCost does not see them): their amount in each cost window.

An hourly cost accrues linearly in time and a monthly cost is spread evenly over the seconds
of its calendar month. To keep the money exact, the amount of a window is the difference of a
*cumulative* integer accrual at its two ends, ``C(end) - C(start)`` with
``C(t) = floor(rate * elapsed(t))``: windows that tile a month add up to the monthly amount
exactly, and no rounding error accumulates hour after hour.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from tenantcost.config.rules import RuleSet
from tenantcost.money import decimal_to_micros

_NS_PER_S = 1_000_000_000


def _epoch_seconds(ts: pd.Series) -> np.ndarray:
    return ts.astype("datetime64[ns, UTC]").astype("int64").to_numpy() // _NS_PER_S


def _floor_scaled(amount: int, elapsed: np.ndarray, span: int) -> np.ndarray:
    """floor(amount * elapsed / span) in int64 without overflow (elapsed <= span or hourly)."""
    whole, rest = divmod(amount, span)
    q, r = np.divmod(elapsed, span)
    return whole * elapsed + rest * q + (rest * r) // span


def hourly_accrual(rate_micros: int, starts: pd.Series, ends: pd.Series) -> np.ndarray:
    """Micro-units accrued by a per-hour cost in each window."""
    s, e = _epoch_seconds(starts), _epoch_seconds(ends)
    return _floor_scaled(rate_micros, e, 3600) - _floor_scaled(rate_micros, s, 3600)


def monthly_accrual(month_micros: int, starts: pd.Series, ends: pd.Series) -> np.ndarray:
    """Micro-units accrued by a per-month cost in each window (windows may span months)."""
    s, e = _epoch_seconds(starts), _epoch_seconds(ends)
    out = np.zeros(len(s), dtype="int64")
    if len(s) == 0:
        return out
    first = pd.Timestamp(int(s.min()), unit="s").to_period("M")
    last = pd.Timestamp(int(e.max()) - 1, unit="s").to_period("M")
    month = first
    while month <= last:  # one pass per calendar month touched, vectorised over windows
        ms = int(month.start_time.tz_localize("UTC").timestamp())
        me = int((month + 1).start_time.tz_localize("UTC").timestamp())
        span = me - ms
        lo = np.clip(s, ms, me) - ms
        hi = np.clip(e, ms, me) - ms
        out += _floor_scaled(month_micros, hi, span) - _floor_scaled(month_micros, lo, span)
        month = month + 1
    return out


def external_pools(windows: pd.DataFrame, ruleset: RuleSet) -> pd.DataFrame:
    """One row per (cost window, external cost of the rule version in force): its amount.

    ``windows`` has ``window_start, window_end, version``. Returns columns
    ``window_start, window_end, version, external, source, amount``.
    """
    parts = []
    for v, version in enumerate(ruleset.rules):
        in_v = windows[windows["version"] == v]
        if in_v.empty:
            continue
        for x, ext in enumerate(version.external):
            micros = decimal_to_micros(ext.amount)
            if ext.per == "hour":
                amount = hourly_accrual(micros, in_v["window_start"], in_v["window_end"])
            else:
                amount = monthly_accrual(micros, in_v["window_start"], in_v["window_end"])
            parts.append(
                pd.DataFrame(
                    {
                        "window_start": in_v["window_start"].to_numpy(),
                        "window_end": in_v["window_end"].to_numpy(),
                        "version": v,
                        "external": x,
                        "source": ext.name,
                        "amount": amount.astype("int64"),
                    }
                )
            )
    if not parts:
        return pd.DataFrame(
            {
                "window_start": pd.Series([], dtype="datetime64[ns, UTC]"),
                "window_end": pd.Series([], dtype="datetime64[ns, UTC]"),
                "version": pd.Series([], dtype="int64"),
                "external": pd.Series([], dtype="int64"),
                "source": pd.Series([], dtype="str"),
                "amount": pd.Series([], dtype="int64"),
            }
        )
    return pd.concat(parts, ignore_index=True)
