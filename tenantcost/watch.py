"""Month-to-date watch: each client's projection against its budget band, and anomalies.

``tenantcost watch`` (:mod:`tenantcost.cli.watch`, the store's side in
:mod:`tenantcost.store.watch_run`) allocates the hours covered so far and hands this pure core
one table, the **daily figures**:

=============  ======================  =====================================================
column         dtype                   meaning
=============  ======================  =====================================================
client         str                     the client
source         str                     the source of its lines (a workload, an external cost,
                                       ``idle``), as in the allocation's lines
day            datetime64[ns, UTC]     a complete UTC day (midnight)
amount         int64                   micro-units the client carries from the source that day
split          str                     the source's split that day (class, key, services of
                                       the rule version in force; two versions in one day
                                       give a value of its own, comparable with no other day)
has_usage      bool                    the client had usage rows for the source that day
                                       (always true for a direct source: it has no key)
=============  ======================  =====================================================

one row per client, source and day on which the client had a line or usage rows for the
source; a day with neither has no row.

**Anomalies** (the method; docs/watch.md has a worked example): for each client, source and
complete day before ``as_of``, the baseline is the median of the client-source's amounts on
the trailing ``window_days`` days with usage under the **same split**; the scale is
max(1.4826 x MAD, 10 % of |median|, ``min_amount``); score = (amount - median) / scale. A day
is flagged when |score| >= ``threshold`` and |amount - median| >= ``min_amount``, with at
least ``min_days`` baseline days. A day without usage is a gap (a ``no_usage`` warning),
never a drop, and never part of a baseline.

Beyond the method above, :func:`score_days` decides:

* the trailing window of day d is the ``window_days`` days d - window_days .. d - 1 (the
  scored day is not part of its own baseline);
* a day's split is compared by its ``split`` string only: a new rule version that gives the
  same string does not interrupt the baseline, any other string restarts it;
* a day with a row but no usage (a line the client carries without usage rows) is a gap and
  may still be a spike (its money is real), never a drop; a day with no row is never scored;
* a gap is reported only for a client-source with usage on some day of its trailing window
  (under any split): a source the client stopped using two weeks ago is not a gap;
* the scale's floor is one micro-unit where the formula gives 0 (a baseline of zeros with
  ``min_amount`` 0): the data's resolution, and a score is always finite;
* the arithmetic is on integers (medians x 2, MADs x 4, 1.4826 as 14826/10000), so a flag
  does not depend on float rounding and scaling every amount by k keeps every score.

An anomaly's id is a hash of client, source, day and kind (:func:`anomaly_id`): the same
finding has the same id on every run, so ``--notify`` sends it once.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

import numpy as np
import pandas as pd
from numpy.lib.stride_tricks import sliding_window_view

from tenantcost.config.watch import WatchSettings
from tenantcost.money import decimal_to_micros


class BudgetStatus(StrEnum):
    """Where a client's projected month lands against its budget band."""

    BELOW = "below"
    """Under ``low``."""
    WITHIN = "within"
    """From ``low`` to ``high``, both included."""
    ABOVE = "above"
    """Over ``high``."""
    NO_BUDGET = "no_budget"
    """No budget was loaded for the client and month."""


class AnomalyKind(StrEnum):
    """Which way a flagged day moved from its baseline."""

    SPIKE = "spike"
    DROP = "drop"


class WarningKind(StrEnum):
    """Why a figure of the watch is not (yet) as good as an issued one."""

    NO_USAGE = "no_usage"
    """A client had no usage rows for a source on a day (a gap in its data, not a drop)."""
    NO_COSTS = "no_costs"
    """A complete day of the month has no cost data (month level: no client)."""
    UNBILLED = "unbilled"
    """A day's money is an estimate: billing data does not reach it yet (month level)."""
    NO_DATA = "no_data"
    """The month has no cost data yet: the answer is empty (month level)."""


def anomaly_id(client: str, source: str, day: str, kind: AnomalyKind | str) -> str:
    """The stable id of a finding: the same client, source, day (``YYYY-MM-DD``) and kind give
    the same id on every run and every machine."""
    text = "\x1f".join((client, source, day, str(kind)))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:20]


DAILY_COLUMNS = ("client", "source", "day", "amount", "split", "has_usage")
"""The daily figures table's columns (the module docstring gives their meaning)."""
ANOMALY_COLUMNS = ("id", "client", "source", "day", "amount", "baseline", "score", "kind")
""":attr:`Scored.anomalies`' columns: the contract's anomaly fields, in its order."""
GAP_COLUMNS = ("client", "source", "day")
""":attr:`Scored.gaps`' columns: each becomes a ``no_usage`` warning."""

MAD_TO_SIGMA = "1.4826"
"""The MAD's factor (a normal distribution's sigma is 1.4826 MAD), held as the exact
fraction 14826 / 10000 below so that the arithmetic stays on integers."""
_C_NUM = 14826
_C_DEN = 10000
_Q = 4
"""The median of integers is a multiple of 1/2 and a MAD a multiple of 1/4: times ``_Q`` both
are integers, so every quantity of the score is an integer held exactly in a float64 (up to
2^53, i.e. about 150,000 currency units a day per client and source; beyond, the float's
relative error is 1e-16)."""
_CELLS_PER_CHUNK = 1_000_000
"""Series x scored days x window cells per chunk: bounds the scoring's memory (~40 MB)."""


@dataclass(frozen=True)
class WatchParams:
    """The anomaly method's parameters, money in micro-units (the ``watch:`` section's
    ``min_amount`` is in currency units for people; the core works on the store's integers)."""

    window_days: int = 14
    min_days: int = 7
    threshold: float = 4.0
    min_amount: int = 10_000

    def __post_init__(self) -> None:
        if not 1 <= self.min_days <= self.window_days:
            raise ValueError(
                f"need 1 <= min_days <= window_days, got {self.min_days} and {self.window_days}"
            )
        if not self.threshold > 0 or self.min_amount < 0:
            raise ValueError("threshold must be > 0 and min_amount >= 0")

    @classmethod
    def from_settings(cls, settings: WatchSettings) -> WatchParams:
        """The parameters of a ``watch:`` section; ``min_amount`` rounded half-even to the
        micro-unit (the amounts it is compared with have no finer digit)."""
        return cls(
            window_days=settings.window_days,
            min_days=settings.min_days,
            threshold=float(settings.threshold),
            min_amount=decimal_to_micros(settings.min_amount),
        )


@dataclass(frozen=True)
class Scored:
    """What :func:`score_days` found: flagged days and gaps, each sorted by client, source, day."""

    anomalies: pd.DataFrame
    """:data:`ANOMALY_COLUMNS`: id (str), client, source, day ("YYYY-MM-DD"), amount (int64
    micro-units), baseline (int64: the median, half-even), score (float, 2 decimals), kind."""
    gaps: pd.DataFrame
    """:data:`GAP_COLUMNS`: a scored day on which a client-source with usage in its trailing
    window has no usage rows (a ``no_usage`` warning, never a drop)."""

    def anomaly_records(self) -> list[dict[str, object]]:
        """The anomalies as the contract's JSON objects (plain ints, floats and strings)."""
        return [
            {
                "id": str(row.id),
                "client": str(row.client),
                "source": str(row.source),
                "day": str(row.day),
                "amount": int(row.amount),
                "baseline": int(row.baseline),
                "score": float(row.score),
                "kind": str(row.kind),
            }
            for row in self.anomalies.itertuples(index=False)
        ]


@dataclass(frozen=True)
class _Grid:
    """The daily figures as dense (client-source) x day arrays from day number ``first``."""

    clients: np.ndarray
    sources: np.ndarray
    amount: np.ndarray
    """float64 micro-units (integers), NaN where there is no row."""
    usage: np.ndarray
    """bool: the client had usage rows for the source that day."""
    split: np.ndarray
    """int64 code of the day's split; -1 where there is no row."""
    first: int


def score_days(daily: pd.DataFrame, days: Sequence[pd.Timestamp], params: WatchParams) -> Scored:
    """Score each client-source on each of ``days`` (complete UTC days, midnights) against
    its trailing baseline, as the module docstring says.

    ``daily`` may (and should) reach ``window_days`` before the first scored day: those rows
    only feed baselines; rows outside that span are ignored. Two rows for one client, source
    and day are a caller's error (``ValueError``): the table has one row per day.
    """
    missing = [column for column in DAILY_COLUMNS if column not in daily.columns]
    if missing:
        raise ValueError(f"daily figures lack column(s): {', '.join(missing)}")
    scored = np.unique(_day_numbers(pd.Series(list(days), dtype="object")))
    if not len(scored):
        return _scored_frames(np.array([], dtype=object), np.array([], dtype=object), [])
    first = int(scored[0]) - params.window_days
    grid = _grid(daily, first, int(scored[-1]))
    positions = scored - first
    per_chunk = max(1, _CELLS_PER_CHUNK // (len(positions) * params.window_days))
    parts = [
        _score_chunk(grid, start, min(start + per_chunk, len(grid.clients)), positions, params)
        for start in range(0, len(grid.clients), per_chunk)
    ]
    days_text = scored.astype("datetime64[D]").astype(str)
    return _scored_frames(grid.clients, grid.sources, parts, days_text)


def _day_numbers(values: pd.Series) -> np.ndarray:
    """Days since 1970-01-01 (int64) of UTC midnights; naive times are taken as UTC."""
    if not len(values):
        return np.array([], dtype="int64")
    index = pd.DatetimeIndex(pd.to_datetime(values, utc=True)).tz_localize(None)
    if (index != index.normalize()).any():
        raise ValueError("days must be UTC midnights (complete days)")
    return np.asarray(index.values.astype("datetime64[D]").astype("int64"))


def _grid(daily: pd.DataFrame, first: int, last: int) -> _Grid:
    """Dense arrays of the rows from day ``first`` to ``last``; series sorted by client, source."""
    day = _day_numbers(daily["day"])
    rows = daily.loc[(day >= first) & (day <= last)]
    pos = day[(day >= first) & (day <= last)] - first
    client_codes, clients = pd.factorize(rows["client"].astype(str), sort=True)
    source_codes, sources = pd.factorize(rows["source"].astype(str), sort=True)
    pair = client_codes.astype("int64") * max(len(sources), 1) + source_codes
    codes, pairs = pd.factorize(pair, sort=True)  # sorted pairs: by client, then source
    n_days = last - first + 1
    cell = codes.astype("int64") * n_days + pos
    if len(cell) and np.bincount(cell).max() > 1:
        raise ValueError("daily figures have two rows for one client, source and day")
    shape = (len(pairs), n_days)
    amount = np.full(shape, np.nan)
    amount[codes, pos] = rows["amount"].to_numpy(dtype="int64")
    usage = np.zeros(shape, dtype=bool)
    usage[codes, pos] = rows["has_usage"].to_numpy(dtype=bool)
    split = np.full(shape, -1, dtype="int64")
    split[codes, pos] = pd.factorize(rows["split"].astype(str))[0]
    return _Grid(
        clients=np.asarray(clients, dtype=object)[pairs // max(len(sources), 1)],
        sources=np.asarray(sources, dtype=object)[pairs % max(len(sources), 1)],
        amount=amount,
        usage=usage,
        split=split,
        first=first,
    )


def _windows(values: np.ndarray, positions: np.ndarray, window: int) -> np.ndarray:
    """(series, scored day, window): the ``window`` days before each scored day's column."""
    return sliding_window_view(values, window, axis=1)[:, positions - window, :]


def _median(values: np.ndarray, count: np.ndarray) -> np.ndarray:
    """The median over the last axis of the non-NaN values (``count`` of them; NaN if none).

    Sorting puts NaN last, so the counted values are the first ``count``: one sort and two
    gathers, instead of nanmedian's per-row work."""
    ordered = np.sort(values, axis=-1)
    low = np.maximum((count - 1) // 2, 0)[..., None]
    high = np.maximum(count // 2, 0)[..., None]
    middle = (
        np.take_along_axis(ordered, low, axis=-1) + np.take_along_axis(ordered, high, axis=-1)
    )[..., 0] / 2
    return np.where(count > 0, middle, np.nan)


def _score(
    amount: np.ndarray, median: np.ndarray, mad: np.ndarray, min_amount: int
) -> tuple[np.ndarray, np.ndarray]:
    """(score, moved at least min_amount), on integers times ``_Q * _C_DEN``.

    scale = max(1.4826 MAD, |median| / 10, min_amount); where that is 0 (a baseline of zeros
    with ``min_amount`` 0) one micro-unit, the data's resolution, so a score is always finite.
    Scaling every amount by k scales both integers by k exactly: the quotient, hence every
    flag, does not change (the float division rounds the same exact ratio)."""
    diff = _Q * (amount - median)
    scale = np.maximum(
        np.maximum(_C_NUM * (_Q * mad), (_C_DEN // 10) * (_Q * np.abs(median))),
        float(_C_DEN * _Q * min_amount),
    )
    scale = np.where(scale == 0, float(_C_DEN * _Q), scale)
    return _C_DEN * diff / scale, np.abs(diff) >= _Q * min_amount


def _score_chunk(
    grid: _Grid, lo: int, hi: int, positions: np.ndarray, params: WatchParams
) -> dict[str, np.ndarray]:
    """Flags and gaps of series ``lo`` to ``hi`` on the scored days (``positions``: their
    columns). A baseline day has usage and the scored day's split; a day without a row has
    no split and is never scored (it can only be a gap)."""
    window = params.window_days
    amount, usage, split = grid.amount[lo:hi], grid.usage[lo:hi], grid.split[lo:hi]
    win_usage = _windows(usage, positions, window)
    day_split = split[:, positions]
    same = (
        win_usage
        & (_windows(split, positions, window) == day_split[..., None])
        & (day_split >= 0)[..., None]
    )
    count = same.sum(axis=-1)
    values = np.where(same, _windows(amount, positions, window), np.nan)
    with np.errstate(invalid="ignore"):
        median = _median(values, count)
        mad = _median(np.abs(values - median[..., None]), count)
        score, moved = _score(amount[:, positions], median, mad, params.min_amount)
        day_usage = usage[:, positions]
        flagged = (
            (day_split >= 0)
            & (count >= params.min_days)
            & (np.abs(score) >= params.threshold)
            & moved
            & ((score > 0) | day_usage)
        )
    series, day = np.nonzero(flagged)
    gap_series, gap_day = np.nonzero(~day_usage & win_usage.any(axis=-1))
    return {
        "series": series + lo,
        "day": day,
        "amount": amount[:, positions][series, day].astype("int64"),
        "baseline": np.rint(median[series, day]).astype("int64"),
        "score": np.round(score[series, day], 2),
        "gap_series": gap_series + lo,
        "gap_day": gap_day,
    }


def _scored_frames(
    clients: np.ndarray,
    sources: np.ndarray,
    parts: list[dict[str, np.ndarray]],
    days_text: np.ndarray | None = None,
) -> Scored:
    """The chunks' findings as the two frames (chunks come in series order, and each in
    series-then-day order, so the frames are sorted by client, source, day already)."""

    def joined(name: str, dtype: str) -> np.ndarray:
        if not parts:
            return np.array([], dtype=dtype)
        return np.concatenate([part[name] for part in parts]).astype(dtype)

    texts = days_text if days_text is not None else np.array([], dtype=object)
    series, day = joined("series", "int64"), joined("day", "int64")
    score = joined("score", "float64")
    kind = np.where(score > 0, AnomalyKind.SPIKE.value, AnomalyKind.DROP.value).astype(object)
    anomalies = pd.DataFrame(
        {
            "client": clients[series].astype(object),
            "source": sources[series].astype(object),
            "day": texts[day].astype(object),
            "amount": joined("amount", "int64"),
            "baseline": joined("baseline", "int64"),
            "score": score,
            "kind": kind,
        }
    )
    ids = [
        anomaly_id(c, s, d, k)
        for c, s, d, k in zip(
            anomalies["client"], anomalies["source"], anomalies["day"], kind, strict=True
        )
    ]
    anomalies.insert(0, "id", pd.Series(ids, dtype=anomalies["client"].dtype))
    gap_series, gap_day = joined("gap_series", "int64"), joined("gap_day", "int64")
    gaps = pd.DataFrame(
        {
            "client": clients[gap_series].astype(object),
            "source": sources[gap_series].astype(object),
            "day": texts[gap_day].astype(object),
        }
    )
    return Scored(anomalies=anomalies, gaps=gaps)


def band_status(frame: pd.DataFrame) -> pd.Series:
    """Each row's :class:`BudgetStatus` (its string value): ``projected`` (int64 micro-units)
    against ``low`` and ``high`` (integers, missing = no budget): below < low <= within <=
    high < above. Compared as integers (nullable Int64), never as floats: money is exact."""
    projected = pd.array(frame["projected"], dtype="Int64")
    low = pd.array(frame["low"], dtype="Int64")
    high = pd.array(frame["high"], dtype="Int64")
    has_budget = ~(pd.isna(low) | pd.isna(high))
    below = np.asarray((projected < low).fillna(False), dtype=bool)
    above = np.asarray((projected > high).fillna(False), dtype=bool)
    status = np.select(
        [~has_budget, below, above],
        [BudgetStatus.NO_BUDGET.value, BudgetStatus.BELOW.value, BudgetStatus.ABOVE.value],
        default=BudgetStatus.WITHIN.value,
    )
    return pd.Series(status.astype(object), index=frame.index, name="status")
