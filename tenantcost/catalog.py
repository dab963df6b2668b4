"""The client catalog: who each client is commercially (plan, segment, revenue, contract dates).

Costs say what a client costs; pricing needs what it pays and on which plan. The catalog is a
CSV or Parquet file kept by whoever owns the contracts, with one row per client:

``client, name, plan, segment, account_manager, monthly_revenue, currency, start, end``

Only ``client`` is required. ``monthly_revenue`` is the contracted revenue of a whole month
(empty: unknown, so no margin for that client) in the client's ``currency`` (ISO 4217; empty:
the rule file's), which is also the currency the client's own pages show
(docs/currency.md); ``start`` and ``end`` are
the contract's first and last day (both inclusive, ``YYYY-MM-DD``; empty: open), so a month's
revenue is prorated by the contract's days in it.

The reader is strict like every tenantcost reader: an unknown column is a typo until proven
otherwise, and a bad cell is one line naming file, row and column (CSV rows are the line
numbers an editor shows; Parquet rows are 1-based record numbers). Every check is vectorised:
the first offending row is found with a mask, never by walking the rows. A CSV text cell
that starts with ``'`` and a formula character (``'=``, ``'-``...) loses the ``'``, which
tenantcost's own CSV files add for spreadsheets (:mod:`tenantcost.csv_cells`). Every text
cell follows the stored-text rule (:mod:`tenantcost.stored_text`): a name holding CR/LF is
refused here, not when an e-mail is built from it months later.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from tenantcost.client_id import bad_client_ids, client_id_problem
from tenantcost.errors import InputError
from tenantcost.limits import FIRST_MONTH, LAST_MONTH
from tenantcost.readers.canonical import (
    RawTable,
    check_amount_cells,
    parquet_columns,
    parse_float,
    read_csv_header,
    read_csv_raw,
    read_parquet_raw,
    require_columns,
    text,
    unquoted,
)
from tenantcost.stored_text import bad_texts, text_problem
from tenantcost.suggest import did_you_mean

TEXT_COLUMNS: tuple[str, ...] = ("client", "name", "plan", "segment", "account_manager", "currency")
"""Catalog columns read as text (ids keep their leading zeros)."""
CATALOG_COLUMNS: tuple[str, ...] = (
    *TEXT_COLUMNS[:5],
    "monthly_revenue",
    "currency",
    "start",
    "end",
)
"""Every column a catalog may have, in the documented order."""

_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")


@dataclass(frozen=True)
class Catalog:
    """The catalog's rows, typed: one row per client.

    ``frame`` columns: the text columns (``""`` when absent), ``monthly_revenue`` (int64
    micro-units), ``has_revenue`` (bool: the cell was not empty), ``start`` and ``end``
    (``datetime64[ns]`` dates, NaT when open), ``row`` (where the client is in the file).
    """

    frame: pd.DataFrame
    file: str
    columns: tuple[str, ...]
    """The columns the file actually has (a report says "no plan column" rather than
    grouping every client under an empty plan without comment)."""


def read_catalog(path: str | Path, currency: str) -> Catalog:
    """Read and check a catalog file; ``currency`` is the rule file's (revenue must be in it)."""
    raw = _read_raw(Path(path))
    frame = raw.frame
    out = pd.DataFrame(
        {c: text(frame[c]).str.strip() if c in frame else _blank(len(frame)) for c in TEXT_COLUMNS}
    )
    _check_texts(out, raw)
    _check_clients(out["client"], raw)
    out["currency"] = _check_currency(out["currency"], raw, currency)
    revenue = (
        parse_float(frame["monthly_revenue"], raw, "monthly_revenue")
        if "monthly_revenue" in frame
        else pd.Series(np.nan, index=range(len(frame)), dtype="float64")
    )
    out["has_revenue"] = revenue.notna().to_numpy()
    out["monthly_revenue"] = _revenue_micros(revenue, raw)
    for column in ("start", "end"):
        out[column] = _parse_dates(frame[column], raw, column) if column in frame else pd.NaT
        out[column] = out[column].astype("datetime64[ns]")
    _check_order(out, raw)
    out["row"] = "row " + pd.Series(raw.rows, dtype="int64").astype("str")
    present = tuple(c for c in CATALOG_COLUMNS if c in frame.columns)
    return Catalog(out.reset_index(drop=True), raw.file, present)


def _read_raw(path: Path) -> RawTable:
    """The file's cells, after checking its kind and its columns."""
    file = str(path)
    suffix = path.suffix.lower()
    if suffix == ".csv":
        columns = read_csv_header(path)
    elif suffix == ".parquet":
        columns = parquet_columns(path)
    else:
        raise InputError(
            "a catalog is a .csv or .parquet file (columns client, name, plan, segment, "
            "account_manager, monthly_revenue, currency, start, end)",
            file=file,
        )
    unknown = [c for c in columns if c not in CATALOG_COLUMNS]
    if unknown:
        raise InputError(
            f"unknown catalog column{did_you_mean(unknown[0], CATALOG_COLUMNS)}; columns are "
            f"{', '.join(CATALOG_COLUMNS)} (all but client optional)",
            file=file,
            where="header",
            column=unknown[0],
        )
    require_columns(columns, ["client"], file)
    if suffix == ".csv":
        return unquoted(read_csv_raw(path), TEXT_COLUMNS)
    return read_parquet_raw(path, text_columns=[c for c in TEXT_COLUMNS if c in columns])


def _blank(count: int) -> pd.Series:
    return pd.Series([""] * count, dtype="str")


def _fail(raw: RawTable, mask: np.ndarray, message: str, column: str) -> None:
    """Raise for the first row of ``mask`` (if any)."""
    if mask.any():
        position = int(np.flatnonzero(mask)[0])
        raise InputError(message, file=raw.file, where=raw.place(position), column=column)


def _check_texts(frame: pd.DataFrame, raw: RawTable) -> None:
    """Every text cell follows the stored-text rule (:mod:`tenantcost.stored_text`: no
    control character; a CR/LF in a name would break the e-mail headers of ``watch
    --notify``), and a client id the client-id rule (:mod:`tenantcost.client_id`)."""
    for column in TEXT_COLUMNS:
        bad = (bad_client_ids(frame[column]) if column == "client"
               else bad_texts(frame[column])).to_numpy()  # fmt: skip
        if bad.any():
            value = str(frame[column].iloc[int(np.flatnonzero(bad)[0])])
            problem = (client_id_problem(value) if column == "client"
                       else text_problem(value, column))  # fmt: skip
            _fail(raw, bad, f"{problem}: the catalog's text may hold no control character",
                  column)  # fmt: skip


def _check_clients(clients: pd.Series, raw: RawTable) -> None:
    """Every row names a client, each client once."""
    _fail(raw, (clients == "").to_numpy(), "client is empty: every catalog row names a client",
          "client")  # fmt: skip
    repeated = clients.duplicated(keep="first").to_numpy()
    if repeated.any():
        position = int(np.flatnonzero(repeated)[0])
        first = int(np.flatnonzero((clients == clients.iloc[position]).to_numpy())[0])
        raise InputError(
            f"client '{clients.iloc[position]}' is already in {raw.place(first)}: one row per "
            "client",
            file=raw.file,
            where=raw.place(position),
            column="client",
        )


def _check_currency(values: pd.Series, raw: RawTable, currency: str) -> pd.Series:
    """The client's currency: its revenue's, and what its own pages and sheets show. Empty
    is the rule file's (``currency``); any other must be an ISO 4217 code in force. Revenue
    in another currency is converted where it meets costs
    (:func:`tenantcost.presentation.revenue_rates`)."""
    from tenantcost.currency import codes

    filled = values.where(values != "", currency)
    _fail(
        raw,
        (~filled.isin(codes())).to_numpy(),
        "currency must be an ISO 4217 code in force, such as USD, EUR or JPY",
        "currency",
    )
    return filled


def _revenue_micros(revenue: pd.Series, raw: RawTable) -> np.ndarray:
    """Monthly revenue as int64 micro-units (0 where the cell is empty)."""
    check_amount_cells(revenue, raw, "monthly_revenue")
    _fail(raw, (revenue < 0).to_numpy(), "monthly_revenue must be >= 0", "monthly_revenue")
    return np.rint(revenue.fillna(0.0).to_numpy() * 1e6).astype("int64")


def _parse_dates(values: pd.Series, raw: RawTable, column: str) -> pd.Series:
    """``YYYY-MM-DD`` dates (Parquet dates and midnight timestamps too); empty: open."""
    if pd.api.types.is_datetime64_any_dtype(values.dtype):
        stamps = pd.Series(values).reset_index(drop=True)
        if isinstance(stamps.dtype, pd.DatetimeTZDtype):
            stamps = stamps.dt.tz_convert("UTC").dt.tz_localize(None)
        not_midnight = (stamps.notna() & (stamps != stamps.dt.normalize())).to_numpy()
        _fail(raw, not_midnight, "expected a date (YYYY-MM-DD), got a time of day", column)
        _check_range(stamps, stamps.astype("str"), raw, column)
        return stamps.astype("datetime64[ns]")
    cells = text(values).str.strip()
    shaped = cells.str.fullmatch(_DATE.pattern)
    _check_range(cells.where(shaped, None), cells, raw, column)
    parsed = pd.to_datetime(cells.where(shaped, None), format="%Y-%m-%d", errors="coerce")
    bad = ((cells != "") & parsed.isna()).to_numpy()
    if bad.any():
        position = int(np.flatnonzero(bad)[0])
        raise InputError(
            f"expected a date YYYY-MM-DD, got {cells.iloc[position]!r}",
            file=raw.file,
            where=raw.place(position),
            column=column,
        )
    return parsed.astype("datetime64[ns]")


def _check_range(dates: pd.Series, shown: pd.Series, raw: RawTable, column: str) -> None:
    """Contract dates lie in the months every input may name (2000-01 .. 2099-12,
    :mod:`tenantcost.month`); an open contract leaves ``end`` empty rather than 9999-12-31."""
    day = dates.astype("str").str[:10]
    outside = (dates.notna() & ((day < FIRST_MONTH) | (day > f"{LAST_MONTH}-31"))).to_numpy()
    if outside.any():
        position = int(np.flatnonzero(outside)[0])
        raise InputError(
            f"date {shown.iloc[position]!r} is outside {FIRST_MONTH}-01 .. {LAST_MONTH}-31 "
            "(leave end empty for an open contract)",
            file=raw.file,
            where=raw.place(position),
            column=column,
        )


def _check_order(frame: pd.DataFrame, raw: RawTable) -> None:
    """A contract ends on or after the day it starts."""
    backwards = (frame["end"] < frame["start"]).to_numpy()
    if backwards.any():
        position = int(np.flatnonzero(backwards)[0])
        raise InputError(
            f"end {frame['end'].iloc[position].date()} is before start "
            f"{frame['start'].iloc[position].date()}",
            file=raw.file,
            where=raw.place(position),
            column="end",
        )
