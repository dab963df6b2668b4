"""Points in time as users and their exports write them, parsed in one place.

Every timestamp that comes from outside (the windows of usage and cost files, OpenCost JSON,
the usage API's records, CLI options such as ``--from``/``--to``/``--as-of``) is read here, so
one rule holds everywhere:

* ISO 8601 / RFC 3339 text, with ``Z`` or an offset; a naive time is UTC;
* an offset within ±14:00 (:data:`~tenantcost.limits.MAX_UTC_OFFSET_MINUTES`, the range of
  real time zones): pandas accepts up to ±23:59, so ``2026-11-01T00:00:00+23:00`` was read as
  a day earlier without a word, and ``+25:00`` gave a vague "cannot read";
* an instant from :data:`~tenantcost.limits.EARLIEST_INSTANT_ISO` to
  :data:`~tenantcost.limits.LATEST_INSTANT_ISO` (2000-01-01 .. 2100-01-01, the months
  2000-01 .. 2099-12 of :mod:`tenantcost.month`). The end is included because windows are
  half-open: the last hour of 2099-12 ends at 2100-01-01T00:00Z.

A refusal is one :class:`~tenantcost.errors.InputError` line naming the file, the row (or JSON
path) and the column of the first bad cell. Columns are parsed vectorised, each distinct text
once (a usage file repeats every window once per client and service), so the offsets are
checked on a few hundred strings, not millions.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from tenantcost.errors import InputError
from tenantcost.limits import EARLIEST_INSTANT_ISO, LATEST_INSTANT_ISO, MAX_UTC_OFFSET_MINUTES

EARLIEST = pd.Timestamp(EARLIEST_INSTANT_ISO).tz_convert("UTC")
"""The earliest instant accepted (the start of 2000-01)."""
LATEST = pd.Timestamp(LATEST_INSTANT_ISO).tz_convert("UTC")
"""The latest instant accepted (the end of 2099-12: a window may end there)."""

RANGE_TEXT = "2000-01-01T00:00:00Z .. 2100-01-01T00:00:00Z"
"""The accepted range as error messages and docs write it."""

EXAMPLE = "ISO 8601 such as 2026-11-07T00:00:00Z"
"""What a timestamp should look like, as the "cannot read" line says it."""

_OFFSET_TAIL = r"(?P<sign>[+-])(?P<hours>\d{2})(?::?(?P<minutes>\d{2}))?$"
"""The offset ending a time of day (``+05``, ``+0530``, ``-14:00``), in the text's last six
characters; a date alone (``2026-01-15``, whose ``-15`` is no offset) has no time and is not
read."""
_YEAR = r"^(?P<year>[+-]?\d{4,})-"


def _offset_label(minutes: int) -> str:
    sign = "-" if minutes < 0 else "+"
    hours, rest = divmod(abs(minutes), 60)
    return f"{sign}{hours:02d}:{rest:02d}"


_LIMIT = _offset_label(MAX_UTC_OFFSET_MINUTES)[1:]


class _Problem:
    """What is wrong with a cell (codes of a column, so the check is vectorised)."""

    NONE, EMPTY, UNREADABLE, OFFSET, OUTSIDE = 0, 1, 2, 3, 4


def parse_instants(
    values: pd.Series,
    *,
    file: str | None = None,
    place: Callable[[int], str] | None = None,
    column: str | None = None,
    example: str = EXAMPLE,
) -> pd.Series:
    """``values`` (text, or datetimes already typed by Parquet/Arrow) as
    ``datetime64[ns, UTC]`` on ``values``' index; the first bad cell (unreadable, empty, an
    offset beyond ±14:00, outside the range) raises one line with ``file``, ``place(position)``
    and ``column``."""
    parsed, problems = _checked(values)
    bad = np.flatnonzero(problems != _Problem.NONE)
    if len(bad):
        position = int(bad[0])
        raise InputError(
            _message(int(problems[position]), values.iloc[position], example),
            file=file,
            where=place(position) if place else None,
            column=column,
        )
    return parsed.dt.as_unit("ns")


def parse_instant(text: str, what: str) -> pd.Timestamp:
    """One timestamp (a CLI option, a query parameter) as a UTC ``pd.Timestamp``; a bad one
    is one line starting with ``what`` (``--from: not an ISO 8601 time: 'soon'``)."""
    values = pd.Series([str(text)], dtype="str")
    parsed, problems = _checked(values)
    problem = int(problems[0])
    if problem in (_Problem.EMPTY, _Problem.UNREADABLE):
        raise InputError(f"{what}: not an ISO 8601 time: '{text}'")
    if problem != _Problem.NONE:
        raise InputError(f"{what}: {_message(problem, text, EXAMPLE)}")
    return pd.Timestamp(parsed.iloc[0]).as_unit("ns")


def _checked(values: pd.Series) -> tuple[pd.Series, np.ndarray]:
    """``values`` parsed to UTC (NaT where refused) and each cell's :class:`_Problem`."""
    if isinstance(values.dtype, pd.DatetimeTZDtype):
        parsed = values.dt.tz_convert("UTC")
        problems = np.zeros(len(values), dtype="int8")
    elif pd.api.types.is_datetime64_dtype(values.dtype):
        parsed = values.dt.tz_localize("UTC")
        problems = np.zeros(len(values), dtype="int8")
    else:
        parsed, problems = _parse_text(values)
    outside = ((parsed < EARLIEST) | (parsed > LATEST)).fillna(False).to_numpy(dtype=bool)
    return parsed, np.where((problems == _Problem.NONE) & outside, _Problem.OUTSIDE, problems)


def _parse_text(values: pd.Series) -> tuple[pd.Series, np.ndarray]:
    """Parsed timestamps (NaT where refused) and each cell's :class:`_Problem`; every
    distinct text is parsed and checked once."""
    codes, uniques = pd.factorize(values.astype("str"), use_na_sentinel=True)
    text = pd.Series(uniques, dtype="str").str.strip()
    parsed = pd.Series(pd.to_datetime(text, utc=True, format="ISO8601", errors="coerce"))

    minutes = _offset_minutes(text)
    far = (minutes.abs() > MAX_UTC_OFFSET_MINUTES).fillna(False).to_numpy(dtype=bool)
    unread = parsed.isna().to_numpy() & ~far
    year = pd.Series(np.nan, index=text.index)
    if unread.any():  # the year of what pandas could not read: out of its range, or ours
        found = text[unread].str.extract(_YEAR)["year"]
        year[unread] = pd.to_numeric(found, errors="coerce").to_numpy(dtype="float64")
    beyond = ((year < EARLIEST.year) | (year >= LATEST.year)).to_numpy(dtype=bool)
    empty = (text == "").to_numpy()
    problem = np.select(
        [far, unread & beyond, unread & empty, unread],
        [_Problem.OFFSET, _Problem.OUTSIDE, _Problem.EMPTY, _Problem.UNREADABLE],
        _Problem.NONE,
    ).astype("int8")
    parsed = parsed.where(problem == _Problem.NONE)

    index = pd.DatetimeIndex(parsed).take(codes, allow_fill=True, fill_value=pd.NaT)
    per_cell = np.where(codes >= 0, problem[np.maximum(codes, 0)] if len(problem) else 0,
                        _Problem.EMPTY).astype("int8")  # fmt: skip
    return pd.Series(index, index=values.index), per_cell


def _offset_minutes(text: pd.Series) -> pd.Series:
    """The UTC offset of each text in minutes (NaN: ``Z``, naive or unreadable). An offset
    is at the end, after a time of day: the last six characters are read, each distinct tail
    once (a column holds a handful: ``+00:00``, ``Z``...), by Arrow's RE2."""
    array: pa.Array | pa.ChunkedArray
    if hasattr(text.array, "__arrow_array__"):  # pandas' Arrow strings: no copy
        array = text.array.__arrow_array__()
    else:
        array = pa.array(text.to_numpy(dtype=object, na_value=None), pa.string())
    tails = pc.utf8_slice_codeunits(array, -6)
    distinct = pc.unique(tails)
    found = pc.extract_regex(distinct, _OFFSET_TAIL)
    hours = pc.cast(pc.struct_field(found, "hours"), pa.float64())
    rest = pc.cast(pc.if_else(pc.equal(pc.struct_field(found, "minutes"), ""), "0",
                              pc.struct_field(found, "minutes")), pa.float64())  # fmt: skip
    minutes = pc.add(pc.multiply(hours, 60.0), rest)
    signed = pc.if_else(pc.equal(pc.struct_field(found, "sign"), "-"), pc.negate(minutes), minutes)
    per_cell = pc.take(signed, pc.index_in(tails, distinct)).to_numpy(zero_copy_only=False)
    has_time = pc.or_(pc.match_substring(array, "T"), pc.match_substring(array, " "))
    return pd.Series(np.where(has_time.to_numpy(zero_copy_only=False), per_cell, np.nan),
                     index=text.index, dtype="float64")  # fmt: skip


def _message(problem: int, value: object, example: str) -> str:
    shown = str(value)
    if problem == _Problem.EMPTY:
        return "timestamp is empty"
    if problem == _Problem.OFFSET:
        minutes = int(_offset_minutes(pd.Series([shown.strip()], dtype="str")).iloc[0])
        return (
            f"timestamp {shown!r} has the UTC offset {_offset_label(minutes)}, outside "
            f"-{_LIMIT} .. +{_LIMIT}"
        )
    if problem == _Problem.OUTSIDE:
        return f"timestamp {shown!r} is outside the accepted range {RANGE_TEXT}"
    return f"cannot read timestamp {shown!r}: expected {example}"
