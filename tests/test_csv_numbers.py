"""CSV number cells: the fast path (Arrow's cast) gives ``pd.to_numeric``'s doubles, and any
odd cell still gets the exact path's one-line error naming file, row and column."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tenantcost.errors import InputError
from tenantcost.readers import canonical
from tenantcost.readers.canonical import (
    RawTable,
    _plain_floats,
    _quoted,
    arrow_cells,
    pandas_cells,
    parse_float,
    read_csv_header,
    read_csv_raw,
)
from tenantcost.readers.usage import read_usage

ODD_CELLS = st.sampled_from([
    "", " ", "nan", "NaN", "inf", "-inf", "Infinity", "1e400", "1e-400", "-0", "-0.0", "+5",
    " 7 ", "\t8", ".5", "5.", "1e5", "1E-05", "0x10", "1_000", "1,5", "abc", "١٢", "0005",
    "12345678901234567890", "0.1000000000000000055511151231257827", "9007199254740993",
])
CELLS = (
    st.floats(allow_nan=False, allow_infinity=False).map(repr)
    | st.integers(-(10**17), 10**17).map(str)
    | st.decimals(allow_nan=False, allow_infinity=False, places=3).map(str)
    | ODD_CELLS
)


def _exact(cells: list[str]) -> np.ndarray | str:
    """What the exact path gives: ``pd.to_numeric`` values, or the first bad cell's message."""
    text = pd.Series(cells, dtype="str").str.strip()
    numbers = pd.to_numeric(text, errors="coerce")
    bad = (numbers.isna() & (text != "")).to_numpy()
    if bad.any():
        position = int(np.flatnonzero(bad)[0])
        return f"u.csv, row {position + 2}, column 'requests': expected a number, got " + repr(
            cells[position]
        )
    return numbers.astype("float64").to_numpy()


@settings(max_examples=300, deadline=None)
@given(st.lists(CELLS, min_size=1, max_size=12))
def test_parse_float_is_to_numeric(cells: list[str]) -> None:
    raw = RawTable(pd.DataFrame({"requests": cells}, dtype="str"), "u.csv",
                   np.arange(2, len(cells) + 2))
    expected = _exact(cells)
    try:
        got = parse_float(raw.frame["requests"], raw, "requests").to_numpy()
    except InputError as exc:
        assert str(exc) == expected
        return
    assert not isinstance(expected, str), expected
    assert np.array_equal(got, expected, equal_nan=True)
    assert np.array_equal(np.signbit(got), np.signbit(expected))


def test_plain_numbers_take_the_fast_path() -> None:
    cells = pd.Series(["2006.0", "127", "0.3885677165821209", "1e-05", "+5"], dtype="str")
    fast = _plain_floats(cells)
    assert fast is not None
    assert fast.tolist() == [2006.0, 127.0, 0.3885677165821209, 1e-05, 5.0]
    for odd in ("", "nan", "-0", "inf", "0.12345678901234567"):
        assert _plain_floats(pd.Series(["1", odd], dtype="str")) is None


def test_usage_csv_errors_still_name_file_row_and_column(tmp_path: Path) -> None:
    path = tmp_path / "usage.csv"
    path.write_text(
        "window_start,window_end,service,client,requests\n"
        "2026-11-01T00:00:00Z,2026-11-01T01:00:00Z,api,a,3\n"
        "2026-11-01T00:00:00Z,2026-11-01T01:00:00Z,api,b,three\n",
        encoding="utf-8",
    )
    with pytest.raises(InputError) as error:
        read_usage([path])
    assert str(error.value) == (
        f"{path}, row 3, column 'requests': expected a number, got 'three'"
    )
    path.write_text(path.read_text().replace("three", "4.5"), encoding="utf-8")
    assert read_usage([path])["requests"].tolist() == [3.0, 4.5]


FIELD = st.lists(
    st.sampled_from([*"ab1 ,\"\n\r\t;'ü😀x.", '""', ',"",', '""\n']), max_size=6
).map("".join)


@st.composite
def csv_texts(draw: st.DrawFn) -> str:
    """Header plus rows: well-formed (csv module quoting) or raw lines that may be odd."""
    width = draw(st.integers(1, 4))
    header = ",".join(f"col{i}" for i in range(width))
    lines = [header]
    for _ in range(draw(st.integers(0, 5))):
        if draw(st.booleans()):
            fields = [draw(FIELD) for _ in range(width)]
            quoted = [
                '"' + f.replace('"', '""') + '"' if any(c in f for c in ',"\n\r') else f
                for f in fields
            ]
            lines.append(",".join(quoted))
        else:
            lines.append(draw(FIELD))
    end = draw(st.sampled_from(["\n", "\r\n", ""]))
    return draw(st.sampled_from(["\n", "\r\n"])).join(lines) + end


@settings(max_examples=300, deadline=None)
@given(csv_texts(), st.booleans())
def test_arrow_cells_are_pandas_cells(tmp_path_factory: pytest.TempPathFactory, text: str,
                                      bom: bool) -> None:
    """Whenever Arrow reads a file, its cells are pandas' cells, value for value."""
    path = tmp_path_factory.mktemp("csv") / "cells.csv"
    path.write_bytes(("\ufeff" if bom else "").encode() + text.encode("utf-8"))
    header = read_csv_header(path)
    fast = arrow_cells(path, header)
    if fast is None:
        return
    try:
        exact = pandas_cells(path, header)
    except InputError as exc:
        raise AssertionError(f"Arrow read a file pandas refuses: {exc}") from None
    exact.columns = pd.Index([str(c).strip() for c in exact.columns])
    pd.testing.assert_frame_equal(fast, exact)


@settings(max_examples=100, deadline=None)
@given(csv_texts())
def test_raw_rows_are_the_same_whichever_parser_reads(
    tmp_path_factory: pytest.TempPathFactory, text: str
) -> None:
    """Arrow's files skip the scan for line breaks in cells (they have none): their cells
    and row numbers are still exactly pandas' path's."""
    path = tmp_path_factory.mktemp("csv") / "rows.csv"
    path.write_bytes(text.encode("utf-8"))
    try:
        fast = read_csv_raw(path)
    except InputError:
        return
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(canonical, "arrow_cells", lambda *_: None)
        exact = read_csv_raw(path)
    pd.testing.assert_frame_equal(fast.frame, exact.frame)
    assert fast.rows.tolist() == exact.rows.tolist()


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=40).map(lambda b: bytes(b'a"",\n'[x % 5] for x in b)),
       st.integers(1, 6))
def test_quoted_finds_a_quote_outside_pairs_across_blocks(
    tmp_path_factory: pytest.TempPathFactory, data: bytes, block: int
) -> None:
    """``""`` pairs taken left to right, wherever the reads cut the file."""
    path = tmp_path_factory.mktemp("csv") / "quotes.csv"
    path.write_bytes(data)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(canonical, "_QUOTE_SCAN_BLOCK", block)
        assert _quoted(path) == (b'"' in data.replace(b'""', b""))


def test_a_month_of_usage_is_read_by_arrow(tmp_path: Path) -> None:
    path = tmp_path / "usage.csv"
    path.write_text(
        "window_start,window_end,service,client,requests\n"
        "2026-11-01T00:00:00Z,2026-11-01T01:00:00Z,api,Zürich AG,3\r\n"
        "2026-11-01T00:00:00Z,2026-11-01T01:00:00Z,api,00123,4.5\n",
        encoding="utf-8-sig",
    )
    header = read_csv_header(path)
    fast = arrow_cells(path, header)
    assert fast is not None
    assert fast["client"].tolist() == ["Zürich AG", "00123"]
    pd.testing.assert_frame_equal(fast, pandas_cells(path, header))
    path.write_text(path.read_text().replace("Zürich AG", '"Zürich, AG"'), encoding="utf-8")
    assert arrow_cells(path, header) is None  # quotes: pandas reads it
    assert read_usage([path])["client"].tolist() == ["00123", "Zürich, AG"]


timestamp_text = st.one_of(
    st.sampled_from([
        "2026-11-01T00:00:00Z", " 2026-11-01T00:00:00Z ", "2026-11-01T01:00:00+01:00",
        "2026-11-01 00:00:00", "2026-11-01T00:00:00.5Z", "", "  ", "not a time", "2026-13-01",
        "1500-01-01T00:00:00Z",
    ]),
    st.datetimes().map(lambda d: d.isoformat()),
)


@settings(max_examples=100, deadline=None)
@given(cells=st.lists(st.one_of(st.none(), timestamp_text), max_size=30))
def test_timestamps_parsed_once_per_distinct_text_equal_parsing_every_cell(cells):
    """Each distinct text is parsed once (``tenantcost.instants``); a cell it accepts has the
    value parsing that cell alone gives, and a cell it refuses is unreadable alone, or its
    offset or instant is outside the accepted range."""
    from tenantcost.instants import EARLIEST, LATEST, _checked, _Problem

    values = pd.Series(cells, dtype="str")
    every = pd.to_datetime(values.fillna("").str.strip(), utc=True, format="ISO8601",
                           errors="coerce")
    parsed, problems = _checked(values)
    accepted = problems == _Problem.NONE
    pd.testing.assert_series_equal(parsed[accepted], every[accepted], check_dtype=False,
                                   check_names=False)
    assert parsed[~accepted & (problems != _Problem.OUTSIDE)].isna().all()
    for cell, alone, problem in zip(values, every, problems, strict=True):
        if problem in (_Problem.EMPTY, _Problem.UNREADABLE):
            assert pd.isna(alone), cell
        elif problem == _Problem.OUTSIDE:
            assert pd.isna(alone) or not EARLIEST <= alone <= LATEST, cell
        elif problem == _Problem.NONE:
            assert EARLIEST <= alone <= LATEST, cell
