"""Every way tenantcost writes a point in time, in one place.

Outputs (JSON documents, CSV files, report sheets, file names, API query parameters) and
error messages each use one fixed form; keeping the forms here means the same instant is
never written two ways by accident. All forms are UTC.

=====================  ================================  ======================================
function               example                           used for
=====================  ================================  ======================================
:func:`iso_z`          ``2026-11-03T10:00:00Z``          JSON/CSV fields, sheets (fraction kept)
:func:`iso_z_seconds`  ``2026-11-03T10:00:00Z``          APIs and stamps that take whole seconds
:func:`iso_compact`    ``20261103T100000Z``              file names
:func:`iso_offset`     ``2026-11-03T10:00:00+00:00``     error messages
:func:`window_text`    ``[<iso_offset>, <iso_offset>)``  half-open windows in error messages
:func:`iso_z_series`   ``…Z`` for a whole column          tables shown as text
=====================  ================================  ======================================
"""

from __future__ import annotations

from datetime import datetime

import pandas as pd

ISO_Z_FORMAT = "%Y-%m-%dT%H:%M:%SZ"
"""strftime pattern of :func:`iso_z_seconds` (also DuckDB's ``strftime`` and pandas'
``date_format``, which write whole columns)."""
ISO_Z_FRACTION_FORMAT = "%Y-%m-%dT%H:%M:%S.%fZ"
COMPACT_FORMAT = "%Y%m%dT%H%M%SZ"


def utc(value: pd.Timestamp | datetime | str) -> pd.Timestamp:
    """``value`` as a UTC timestamp; a naive time is taken as UTC."""
    ts = pd.Timestamp(value)
    return ts.tz_localize("UTC") if ts.tzinfo is None else ts.tz_convert("UTC")


def iso_z(value: pd.Timestamp | datetime) -> str:
    """ISO 8601 with ``Z``; a fraction of a second is kept when there is one."""
    return utc(value).isoformat().replace("+00:00", "Z")


def iso_z_seconds(value: pd.Timestamp | datetime) -> str:
    """ISO 8601 with ``Z`` in whole seconds (any fraction is dropped)."""
    return utc(value).strftime(ISO_Z_FORMAT)


def iso_compact(value: pd.Timestamp | datetime) -> str:
    """ISO 8601 basic format, whole seconds: safe in file names."""
    return utc(value).strftime(COMPACT_FORMAT)


def iso_offset(value: pd.Timestamp | datetime) -> str:
    """ISO 8601 with a numeric offset, as Python writes it (error messages)."""
    return pd.Timestamp(value).isoformat()


def window_text(start: pd.Timestamp | datetime, end: pd.Timestamp | datetime) -> str:
    """A half-open window ``[start, end)`` for error messages."""
    return f"[{iso_offset(start)}, {iso_offset(end)})"


def iso_z_series(values: pd.Series) -> pd.Series:
    """A timestamp column as ISO 8601 text with ``Z``: whole seconds, or microseconds for the
    whole column when any value has a fraction (so the column's values line up)."""
    utc_values = values.dt.tz_convert("UTC")
    fractional = bool(
        (utc_values.dt.microsecond != 0).any() or (utc_values.dt.nanosecond != 0).any()
    )
    pattern = ISO_Z_FRACTION_FORMAT if fractional else ISO_Z_FORMAT
    return utc_values.dt.strftime(pattern).astype("str")
