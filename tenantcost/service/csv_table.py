"""A table of a page or an API route as a CSV download (``?format=csv``): one writer for all.

Finance copies what a page shows into a spreadsheet, so every table of the web app links to
its CSV, and the JSON routes behind them answer ``?format=csv`` with the same rows, unpaged for
the same filters. The rules are the same everywhere, which is why they live in one place:

* amounts, integers of micro-units in the JSON, are written as exact decimals in currency
  units at full precision (``0.123458``), never a rounded display string: a spreadsheet sums
  them to the micro-unit;
* a text cell that a spreadsheet would run as a formula gets the OWASP ``'`` prefix
  (:mod:`tenantcost.csv_cells`), decided by the column's type, never by its content;
* fractions (``change_pct``) and counts are written as they are; a missing value is empty;
* the file name says what and when (``clients-2026-11.csv``), through the one file-name rule
  of :mod:`tenantcost.service.downloads`, and the body is UTF-8 with a header row.

The caller builds a frame whose columns are the JSON item's fields, in order, and names
which of them are amounts.
"""

from __future__ import annotations

from collections.abc import Collection

import pandas as pd
from fastapi.responses import Response

from tenantcost.csv_cells import neutralised
from tenantcost.money import micros_to_decimal_strings
from tenantcost.service.downloads import Disposition, content_disposition

MEDIA_TYPE = "text/csv; charset=utf-8"


def csv_text(frame: pd.DataFrame, amounts: Collection[str] = ()) -> str:
    """The CSV text of ``frame``: ``amounts`` (micro-units, nullable) as exact decimals, the
    other text columns neutralised for spreadsheets."""
    shown = frame.copy()
    for column in amounts:
        values = shown[column]
        present = values.notna()
        text = pd.Series(pd.NA, index=values.index, dtype="object")
        if present.any():
            text[present] = micros_to_decimal_strings(values[present].astype("int64"))
        shown[column] = text
    return str(neutralised(shown, decimals=amounts).to_csv(index=False, lineterminator="\n"))


def csv_response(frame: pd.DataFrame, name: str, amounts: Collection[str] = ()) -> Response:
    """``frame`` as a CSV download named ``name`` (see the module's rules)."""
    return Response(
        content=csv_text(frame, amounts).encode("utf-8"),
        media_type=MEDIA_TYPE,
        headers={"Content-Disposition": content_disposition(Disposition.ATTACHMENT, name)},
    )
