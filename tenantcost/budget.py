"""Monthly budgets per client in three scenarios (low, expected, high), from issued history.

``tenantcost budget plan`` proposes a band per client from the client's amounts in the last
``N`` issued months (latest revisions); ``tenantcost budget load`` stores a band (the plan's
CSV, or finance's own figures); ``tenantcost watch`` compares each client's projected month
with it. The default method is simple enough that anyone can recompute it by hand
(docs/budgets.md, "The method"):

* ``g`` = the median of the client's month-over-month growth rates ``a_i / a_(i-1) - 1``
  between consecutive issued months of the client (a rate whose ``a_(i-1)`` is 0 is skipped);
* ``s`` = max(0.05, 1.4826 x the median absolute deviation of those rates);
* with ``L`` the last month's amount: ``expected = L (1 + g)``, ``low = max(0, L (1 + g - s))``,
  ``high = L (1 + g + s)``, each rounded half-even to the micro-unit;
* ``--growth low=..,expected=..,high=..`` replaces ``g - s``, ``g`` and ``g + s`` (method
  ``growth``);
* fewer than 3 issued months, or no usable rate (every earlier month 0): ``expected`` = the
  mean of those months, ``low``/``high`` = 80 % / 120 % of it (method ``fallback``); the
  fallback wins over ``--growth``, whose base ``L`` is then a client's first, often partial,
  month;
* a client with no issued month is listed with method ``no_history`` and no band;
* a default band whose ``high`` a budget cannot hold (over :data:`MAX_BUDGET`: growth from a
  near-zero month) gives way to the fallback, marked ``fallback``.

**Exactness.** Amounts are integers, so every rate is a rational number; the whole method runs
on exact :class:`fractions.Fraction` values (medians of rationals, 1.4826 as 14826/10000, 0.05
as 1/20) and the one rounding is the last step, ``round()`` of a Fraction, which is half-even.
So a figure never depends on float64 error and a test recomputes it to the micro-unit. The
arithmetic is vectorised over clients: rates, medians and bands are columns of one long frame
(a numpy object column of Fractions; medians by one sort and a positional pick per group),
never a Python loop over clients.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from enum import StrEnum
from fractions import Fraction
from pathlib import Path

import numpy as np
import pandas as pd

from tenantcost.client_id import bad_client_ids, client_id_problem
from tenantcost.csv_cells import restored_cells
from tenantcost.errors import InputError
from tenantcost.readers.canonical import (
    RawTable,
    read_csv_header,
    read_csv_raw,
    require_columns,
    text,
)
from tenantcost.suggest import did_you_mean

DEFAULT_HISTORY = 6
"""Issued months a plan looks back over (``--history``)."""
MIN_MONTHS = 3
"""Fewer issued months than this: the fallback (two months give one rate: no spread)."""
MIN_SPREAD = Fraction(1, 20)
"""``s`` is at least 5 %: a client with perfectly steady growth still gets a band."""
MAD_SCALE = Fraction(14826, 10000)
"""1.4826: the median absolute deviation times this estimates a normal spread's sigma."""
MAX_BUDGET = 10**18 - 1
"""The largest figure a budget holds: 999,999,999,999.999999 currency units in micro-units
(``budget load`` refuses more; int64 holds 9.2e18)."""
FALLBACK_BAND = Fraction(1, 5)
"""The fallback's band: the mean of the months ±20 %."""
PLAN_COLUMNS = ("client", "method", "months", "last", "growth", "spread", "low", "expected",
                "high")  # fmt: skip
"""The plan frame's columns, in order."""


class BudgetMethod(StrEnum):
    """How a client's band was computed (``method`` in every output)."""

    MEDIAN_GROWTH = "median_growth"
    """The default method: median growth ``g`` and spread ``s`` from the client's history."""
    GROWTH = "growth"
    """``--growth``: the given rates instead of ``g - s``, ``g``, ``g + s``."""
    FALLBACK = "fallback"
    """Fewer than 3 issued months (or no usable rate): the mean ±20 %."""
    NO_HISTORY = "no_history"
    """No issued month: no band."""


@dataclass(frozen=True)
class Growth:
    """``--growth``: the rates that replace ``g - s``, ``g`` and ``g + s``, exact."""

    low: Fraction
    expected: Fraction
    high: Fraction


def parse_growth(text: str) -> Growth:
    """``low=-0.05,expected=0.02,high=0.1``: the three rates, exact decimals, all three given,
    ``low <= expected <= high`` and ``expected >= -1`` (a month cannot cost less than 0)."""
    rates: dict[str, Fraction] = {}
    for part in text.split(","):
        name, _, value = part.partition("=")
        name = name.strip()
        if name not in ("low", "expected", "high") or not _:
            raise InputError(
                f"--growth: expected low=RATE,expected=RATE,high=RATE (e.g. "
                f"low=-0.05,expected=0.02,high=0.1), got '{text}'"
            )
        if name in rates:
            raise InputError(f"--growth: '{name}' given twice in '{text}'")
        rates[name] = _rate(name, value)
    missing = [n for n in ("low", "expected", "high") if n not in rates]
    if missing:
        raise InputError(f"--growth: '{missing[0]}' is missing in '{text}' (give all three)")
    growth = Growth(rates["low"], rates["expected"], rates["high"])
    if not growth.low <= growth.expected <= growth.high:
        raise InputError(f"--growth: expected low <= expected <= high, got '{text}'")
    if growth.expected < -1:
        raise InputError(f"--growth: expected must be at least -1 (-100 %), got '{text}'")
    return growth


def _rate(name: str, value: str) -> Fraction:
    try:
        number = Decimal(value.strip())
    except InvalidOperation:
        number = Decimal("NaN")
    if not number.is_finite():
        raise InputError(f"--growth: {name} must be a decimal rate such as 0.05, got '{value}'")
    return Fraction(number)


def plan_budgets(
    history: pd.DataFrame, clients: Iterable[str] = (), growth: Growth | None = None
) -> pd.DataFrame:
    """Each client's band from ``history`` (``client, month, amount``: one row per client and
    issued month, amounts int64 micro-units, already limited to the months to look at).

    ``clients`` adds clients to list even without history (``no_history``). Returns
    :data:`PLAN_COLUMNS` by client: ``months`` (issued months used), ``last`` (``L``,
    nullable), ``growth`` and ``spread`` (``g`` and ``s`` as exact Fractions, None where the
    method has none), ``low``/``expected``/``high`` (nullable Int64 micro-units)."""
    frame = history[["client", "month", "amount"]].sort_values(["client", "month"], kind="stable")
    frame = frame.reset_index(drop=True)
    rates = _rates(frame)
    g = _group_median(rates["client"], rates["rate"])
    deviation = (rates["rate"] - rates["client"].map(g)).abs()
    mad = _group_median(rates["client"], deviation)
    per = frame.groupby("client", sort=True).agg(
        months=("amount", "size"), last=("amount", "last"), total=("amount", "sum")
    )
    out = pd.DataFrame(index=pd.Index(sorted(set(per.index) | set(clients)), name="client"))
    out = out.join(per)
    out["months"] = out["months"].fillna(0).astype("int64")
    out["growth"], out["spread"] = g.reindex(out.index), mad.reindex(out.index)
    default = (out["months"] >= MIN_MONTHS) & out["growth"].notna()
    default = _band(out, default.to_numpy(), growth)
    fallback = (out["months"] > 0).to_numpy() & ~default
    _fallback(out, fallback)
    out["method"] = np.select(
        [default, fallback],
        [str(BudgetMethod.GROWTH if growth else BudgetMethod.MEDIAN_GROWTH),
         str(BudgetMethod.FALLBACK)],
        str(BudgetMethod.NO_HISTORY),
    )  # fmt: skip
    out = out.reset_index()
    out["last"] = out["last"].astype("Int64")
    return out[list(PLAN_COLUMNS)]


def _rates(frame: pd.DataFrame) -> pd.DataFrame:
    """``client, rate``: ``a_i / a_(i-1) - 1`` as Fractions between each client's consecutive
    issued months, the rates whose ``a_(i-1)`` is 0 left out."""
    previous = frame.groupby("client", sort=False)["amount"].shift(1)
    usable = (previous.notna() & (previous != 0)).to_numpy()
    current = frame["amount"].to_numpy()[usable].astype(object)
    before = previous.to_numpy()[usable].astype("int64").astype(object)
    rate = np.frompyfunc(Fraction, 2, 1)(current - before, before) if usable.any() else []
    return pd.DataFrame({"client": frame["client"].to_numpy()[usable],
                         "rate": pd.Series(rate, dtype=object)})  # fmt: skip


def _group_median(keys: pd.Series, values: pd.Series) -> pd.Series:
    """The exact median of ``values`` (Fractions) per key: the rows sorted by key then value,
    the middle one or two rows of each group picked by position."""
    if not len(values):
        return pd.Series(dtype=object)
    frame = pd.DataFrame({"key": keys.to_numpy(), "value": values.to_numpy(dtype=object)})
    ordered = frame.iloc[_exact_order(frame["key"], frame["value"])]
    position = ordered.groupby("key", sort=False).cumcount().to_numpy()
    size = ordered.groupby("key", sort=False)["value"].transform("size").to_numpy()
    lower = ordered[position == (size - 1) // 2].set_index("key")["value"]
    upper = ordered[position == size // 2].set_index("key")["value"]
    return (lower + upper.reindex(lower.index)) / 2


def _exact_order(keys: pd.Series, values: pd.Series) -> np.ndarray:
    """Positions ordering the rows by key, then by exact value. The sort runs on the values'
    doubles (a Fraction's float is correctly rounded, so ``a < b`` gives ``float(a) <=
    float(b)``: only rows whose doubles tie can be out of order); the few groups where
    distinct Fractions share a double are then ordered exactly, in Python."""
    codes = pd.factorize(keys, sort=True)[0]
    floats = np.frompyfunc(float, 1, 1)(values.to_numpy(dtype=object)).astype("float64")
    order = np.lexsort((floats, codes))
    key_o, float_o, value_o = codes[order], floats[order], values.to_numpy()[order]
    tie = (key_o[1:] == key_o[:-1]) & (float_o[1:] == float_o[:-1])
    unsure = np.flatnonzero(tie & (value_o[1:] != value_o[:-1]))
    if unsure.size == 0:
        return order
    groups = np.isin(key_o, np.unique(key_o[unsure]))
    fixed = sorted(np.flatnonzero(groups), key=lambda i: (key_o[i], value_o[i]))
    order[np.flatnonzero(groups)] = order[fixed]
    return order


def _band(out: pd.DataFrame, default: np.ndarray, growth: Growth | None) -> np.ndarray:
    """Fill ``low, expected, high`` (and ``growth``/``spread``) of the clients of the default
    method; returns the clients it applies to: those of ``default`` whose ``high`` a budget
    can hold (:data:`MAX_BUDGET`; a growth from almost nothing can give 10^20), the others
    being left to the fallback."""
    for column in ("low", "expected", "high"):
        out[column] = pd.array([pd.NA] * len(out), dtype="Int64")
    out["spread"] = out["spread"].astype(object)
    out.loc[~default, ["growth", "spread"]] = None
    if not default.any():
        return default
    last = out.loc[default, "last"].to_numpy().astype("int64").astype(object)
    if growth is None:
        g = out.loc[default, "growth"].to_numpy(dtype=object)
        scaled = MAD_SCALE * out.loc[default, "spread"].to_numpy(dtype=object)
        s = np.maximum(np.full(len(scaled), MIN_SPREAD, dtype=object), scaled)
        out.loc[default, "spread"] = pd.Series(s, index=out.index[default], dtype=object)
        rates = (g - s, g, g + s)
    else:
        out.loc[default, ["growth", "spread"]] = None
        rates = (growth.low, growth.expected, growth.high)
    low, expected, high = (last * (1 + rate) for rate in rates)
    holds = np.asarray(high <= MAX_BUDGET, dtype=bool)
    kept = default.copy()
    kept[np.flatnonzero(default)[~holds]] = False
    out.loc[default & ~kept, ["growth", "spread"]] = None
    _put(out, kept, *(np.maximum(0, low)[holds], expected[holds], high[holds]))
    return kept


def _fallback(out: pd.DataFrame, fallback: np.ndarray) -> None:
    """The mean of the client's issued months ±20 %."""
    if fallback.any():
        total = out.loc[fallback, "total"].to_numpy().astype("int64").astype(object)
        mean = np.frompyfunc(Fraction, 2, 1)(total, out.loc[fallback, "months"].to_numpy())
        _put(out, fallback, mean * (1 - FALLBACK_BAND), mean, mean * (1 + FALLBACK_BAND))


def _put(out: pd.DataFrame, mask: np.ndarray, *bands: np.ndarray) -> None:
    """The three exact figures rounded half-even (``round`` of a Fraction) into ``mask``."""
    rounded = np.frompyfunc(round, 1, 1)
    for column, band in zip(("low", "expected", "high"), bands, strict=True):
        values = np.asarray(rounded(np.asarray(band, dtype=object)), dtype="int64")
        out.loc[mask, column] = values


BUDGET_COLUMNS = ("client", "low", "expected", "high")
"""The columns of a budget file (all required), in order; ``method`` (``budget plan``'s CSV)
may follow."""
_AMOUNT = r"^(?P<sign>[+-]?)(?P<whole>\d+)(?:\.(?P<frac>\d*))?$"
_MAX_UNITS_DIGITS = 12
"""At most 999,999,999,999 currency units per client and month (int64 micro-units hold 9.2e12;
a larger budget is a typo)."""


def read_budgets(path: Path) -> pd.DataFrame:
    """A budget file, CSV ``client, low, expected, high`` (currency units, exact decimals with
    at most 6 places; ``budget plan --format csv`` writes it, with a ``method`` column; an
    optional ``currency`` column sets a band in the client's currency), as ``client, low,
    expected, high`` int64 micro-units and ``currency`` (``""``: the ledger's). The first bad
    cell is one :class:`InputError` naming file, row and column: an empty cell (but a row
    ``budget plan`` marks ``no_history`` has no band and is left out), a client given twice
    or refused by :mod:`tenantcost.client_id`, a negative or inexact amount, ``low > expected`` or
    ``expected > high``. A client id's leading ``'`` before a formula character, which
    tenantcost's CSV files add for spreadsheets, is removed (:mod:`tenantcost.csv_cells`), so
    a plan it wrote loads the ids it planned."""
    raw = _read_raw(path)
    frame = raw.frame
    clients = restored_cells(text(frame["client"]))
    method = text(frame["method"] if "method" in frame else pd.Series([""] * len(frame)))
    method = method.str.strip()
    _check_clients(clients, method, raw)
    unbudgeted = (method == str(BudgetMethod.NO_HISTORY)).to_numpy()
    out = pd.DataFrame({"client": clients})
    for column in BUDGET_COLUMNS[1:]:
        cells = text(frame[column]).str.strip()
        _fail(raw, unbudgeted & (cells != "").to_numpy(),
              f"a no_history row has no band: leave {column} empty (or give a method other "
              "than no_history)", column)  # fmt: skip
        out[column] = _micros(cells.where(~unbudgeted, "0"), raw, column)
    _fail(raw, (out["low"] > out["expected"]).to_numpy(), "low is above expected", "low")
    _fail(raw, (out["expected"] > out["high"]).to_numpy(), "expected is above high", "expected")
    out["currency"] = _currencies(frame, raw)
    return out.loc[~unbudgeted].reset_index(drop=True)


def _currencies(frame: pd.DataFrame, raw: RawTable) -> pd.Series:
    """The optional ``currency`` column: the band's ISO 4217 currency, upper case; empty (or
    no column): the ledger currency, ``""``."""
    from tenantcost.currency import codes

    if "currency" not in frame:
        return pd.Series([""] * len(frame), dtype="str")
    cells = text(frame["currency"]).str.strip().str.upper()
    _fail(raw, ~(cells.isin(codes()) | (cells == "")).to_numpy(),
          "currency must be an ISO 4217 code in force, such as EUR (or empty: the ledger "
          "currency)", "currency")  # fmt: skip
    return cells


def _read_raw(path: Path) -> RawTable:
    file = str(path)
    if path.suffix.lower() != ".csv":
        raise InputError("a budget file is a .csv file (columns client, low, expected, high)",
                         file=file)  # fmt: skip
    columns = read_csv_header(path)
    known = (*BUDGET_COLUMNS, "method", "currency")
    unknown = [c for c in columns if c not in known]
    if unknown:
        raise InputError(
            f"unknown budget column{did_you_mean(unknown[0], known)}; columns are client, low, "
            "expected, high (and method, as budget plan writes it, and currency)",
            file=file, where="header", column=unknown[0],
        )  # fmt: skip
    require_columns(columns, list(BUDGET_COLUMNS), file)
    return read_csv_raw(path)


def _fail(raw: RawTable, mask: np.ndarray, message: str, column: str) -> None:
    """Raise for the first row of ``mask`` (if any)."""
    if mask.any():
        position = int(np.flatnonzero(mask)[0])
        raise InputError(message, file=raw.file, where=raw.place(position), column=column)


def _check_clients(clients: pd.Series, method: pd.Series, raw: RawTable) -> None:
    """Every row names a client, once, that the client-id rule accepts; ``method`` is one
    :class:`BudgetMethod` or empty."""
    _fail(raw, (clients.str.strip() == "").to_numpy(), "client is empty: every row names a client",
          "client")  # fmt: skip
    bad = bad_client_ids(clients).to_numpy()
    if bad.any():
        problem = client_id_problem(str(clients.iloc[int(np.flatnonzero(bad)[0])]))
        _fail(raw, bad, problem or "client id refused", "client")
    repeated = clients.duplicated(keep="first").to_numpy()
    if repeated.any():
        position = int(np.flatnonzero(repeated)[0])
        first = int(np.flatnonzero((clients == clients.iloc[position]).to_numpy())[0])
        _fail(raw, repeated, f"client '{clients.iloc[position]}' is already in "
              f"{raw.place(first)}: one row per client", "client")  # fmt: skip
    methods = {str(m) for m in BudgetMethod}
    _fail(raw, ~(method.isin(methods) | (method == "")).to_numpy(),
          f"method must be one of {', '.join(sorted(methods))} (or empty)", "method")  # fmt: skip


def _micros(cells: pd.Series, raw: RawTable, column: str) -> np.ndarray:
    """Exact decimal cells as int64 micro-units, vectorised (no float on the way)."""
    parts = cells.str.extract(_AMOUNT)
    empty = (cells == "").to_numpy()
    _fail(raw, empty, f"{column} is empty: give an amount in currency units", column)
    unreadable = parts["whole"].isna().to_numpy()
    if unreadable.any():
        value = cells.iloc[int(np.flatnonzero(unreadable)[0])]
        _fail(raw, unreadable, f"expected an exact decimal amount such as 1250.50, got "
              f"'{value}'", column)  # fmt: skip
    frac = parts["frac"].fillna("")
    _fail(
        raw,
        (frac.str.len() > 6).to_numpy(),
        f"{column} has more than 6 decimals: amounts are exact to the micro-unit",
        column,
    )
    whole = parts["whole"].str.lstrip("0")
    _fail(
        raw,
        (whole.str.len() > _MAX_UNITS_DIGITS).to_numpy(),
        f"{column} is beyond 999,999,999,999 currency units (a typo?)",
        column,
    )
    micros = (whole.where(whole != "", "0").astype("int64") * 1_000_000
              + frac.str.ljust(6, "0").astype("int64"))  # fmt: skip
    negative = (parts["sign"] == "-").to_numpy() & (micros != 0).to_numpy()
    _fail(raw, negative, f"{column} is negative: a budget is at least 0", column)
    return micros.to_numpy(dtype="int64")


__all__ = [
    "BUDGET_COLUMNS",
    "DEFAULT_HISTORY",
    "PLAN_COLUMNS",
    "BudgetMethod",
    "Growth",
    "parse_growth",
    "plan_budgets",
    "read_budgets",
]
