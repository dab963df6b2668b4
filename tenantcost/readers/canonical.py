"""Canonical cost CSV/Parquet reader, and the cell-level helpers every tabular reader shares.

A canonical cost file already has the columns of the cost table (see ``tenantcost.tables``):
required ``window_start, window_end, cluster, namespace, controller_kind, controller,
total_cost``; optional ``name, node, pod``, ``label:<k>`` and ``<x>_cost`` components. It is the
escape hatch for any source tenantcost has no dedicated reader for.

The helpers live here (and not in a private module) because this module defines what "a
canonical table read from a file" is; the OpenCost CSV and usage readers reuse them so that
every tabular file gets the same row numbering, the same timestamp rules and the same error
wording.

**Row numbers.** For CSV, ``row n`` is the *line number in the file* where the record starts:
the header is line 1, so the first data record is ``row 2``. Blank lines are skipped but still
counted, and quoted fields with embedded newlines are accounted for, so ``row n`` is what an
editor shows. Parquet has no header line: ``row n`` is the 1-based record number (the first
record is ``row 1``).
"""

from __future__ import annotations

import csv
import math
from collections.abc import Collection, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from tenantcost.csv_cells import restored_cells
from tenantcost.errors import InputError, warn
from tenantcost.instants import parse_instants
from tenantcost.limits import MAX_COST_PER_ROW
from tenantcost.money import amount_problem, running_total, to_micros
from tenantcost.origin import split_origin  # re-exported: readers name their rows' origins
from tenantcost.suggest import did_you_mean
from tenantcost.tables import (
    COST_COMPONENT_COLUMNS,
    COST_PROPERTY_COLUMNS,
    COST_REQUIRED_COLUMNS,
    LABEL_PREFIX,
)

CANONICAL_REQUIRED_COLUMNS = [
    "window_start",
    "window_end",
    "cluster",
    "namespace",
    "controller_kind",
    "controller",
    "total_cost",
]
"""Columns a canonical cost file must have."""

CANONICAL_OPTIONAL_PROPERTIES = ["name", "node", "pod"]
"""Property columns that default to ``""`` (``name`` is derived, see :func:`derive_name`)."""


# --------------------------------------------------------------------------- raw tables


@dataclass(frozen=True)
class RawTable:
    """A file's cells before typing, plus the row number of each record as users see it.

    ``frame`` has a 0..n-1 positional index; ``rows[i]`` is the row number of ``frame`` row
    ``i`` (see the module docstring for the convention). Keeping the numbers beside the cells
    lets every later check point at the exact row without a per-row loop.
    """

    frame: pd.DataFrame
    file: str
    rows: np.ndarray

    def place(self, position: int) -> str:
        """``row n`` for the record at ``position`` (0-based) in :attr:`frame`."""
        return f"row {int(self.rows[position])}"

    def origins(self) -> pd.Series:
        """``<file>:row <n>`` for every record, as the ``origin`` column."""
        numbers = pc.cast(pa.array(self.rows, type=pa.int64()), pa.string())
        return pd.Series(pc.binary_join_element_wise(f"{self.file}:row ", numbers, ""), dtype="str")


def read_csv_header(path: str | Path) -> list[str]:
    """The header fields of a CSV file (whitespace-stripped), for sniffing and column checks."""
    file = str(path)
    try:
        with open(path, encoding="utf-8-sig", newline="") as handle:
            header = next(csv.reader(handle), None)
    except FileNotFoundError:
        raise InputError("file not found", file=file) from None
    except UnicodeDecodeError as exc:
        raise InputError(f"not UTF-8 text ({exc.reason})", file=file) from None
    except csv.Error as exc:
        raise InputError(f"not a valid CSV header: {exc}", file=file, where="row 1") from None
    except OSError as exc:
        raise InputError(f"cannot read file: {exc.strerror}", file=file) from None
    if not header or all(not h.strip() for h in header):
        raise InputError("file is empty: expected a header line", file=file, where="row 1")
    return [h.strip() for h in header]


def read_csv_raw(path: str | Path) -> RawTable:
    """Read a CSV file with every cell as text (``""`` when empty) and its line numbers.

    Cells stay text so that error messages can quote the exact value the user wrote and so
    that ids such as ``00123`` keep their leading zeros. Blank lines are dropped but keep
    their place in the numbering.
    """
    file = str(path)
    header = read_csv_header(path)
    duplicates = sorted({h for h in header if header.count(h) > 1})
    if duplicates:
        raise InputError(
            "column appears more than once in the header",
            file=file,
            where="row 1",
            column=duplicates[0],
        )
    header_lines = 1 + sum(str(h).count("\n") for h in header)
    frame = arrow_cells(path, header) if header_lines == 1 else None
    # Arrow reads only files without a quoted field: none of its cells holds a line break.
    by_pandas = frame is None
    if frame is None:
        frame = pandas_cells(path, header)
    frame.columns = pd.Index([str(c).strip() for c in frame.columns])

    count = len(frame)
    rows = np.arange(header_lines + 1, header_lines + 1 + count, dtype="int64")
    if count and len(frame.columns):
        if by_pandas:
            rows += _line_breaks_before(frame)
        blank = (frame == "").all(axis=1).to_numpy()
        if blank.any():
            frame = frame.loc[~blank]
            rows = rows[~blank]
    return RawTable(frame.reset_index(drop=True), file, rows)


def _line_breaks_before(frame: pd.DataFrame) -> np.ndarray:
    """For each record, the line breaks inside the cells of the records before it: record i
    starts that many lines further down than its position says."""
    newlines = np.zeros(len(frame), dtype="int64")
    for column in frame.columns:
        cells = frame[column]
        if cells.str.contains("\n", regex=False).any():
            newlines += cells.str.count("\n").to_numpy(dtype="int64")
    return np.concatenate([[0], np.cumsum(newlines)[:-1]])


def pandas_cells(path: str | Path, header: list[str]) -> pd.DataFrame:
    """Every cell as text with pandas' parser: the exact path, whose errors users see."""
    file = str(path)
    try:
        frame = pd.read_csv(
            path,
            dtype=str,
            keep_default_na=False,
            na_filter=False,
            skip_blank_lines=False,
            encoding="utf-8-sig",
        )
    except UnicodeDecodeError as exc:
        raise InputError(f"not UTF-8 text ({exc.reason})", file=file) from None
    except (pd.errors.ParserError, ValueError) as exc:
        message = " ".join(str(exc).split())
        raise InputError(f"not a valid CSV file: {message}", file=file) from None
    if not isinstance(frame.index, pd.RangeIndex):
        # pandas silently turns the first column into the index when every data row has
        # one field more than the header; that would shift every value by one column.
        header_lines = 1 + sum(str(h).count("\n") for h in header)
        raise InputError(
            f"data rows have more fields than the header's {len(header)} columns",
            file=file,
            where=f"row {header_lines + 1}",
        )
    return frame


def arrow_cells(path: str | Path, header: list[str]) -> pd.DataFrame | None:
    """:func:`pandas_cells` of a plain file (one header line, no quote but ``""``, every row
    with the header's field count, no blank line, valid UTF-8), read by Arrow's multi-threaded
    CSV reader: several times faster on a month of usage. None on anything else (Arrow
    refuses it), and the caller uses pandas, which words the error or reads the odd file its
    own way."""
    if not all(header) or _quoted(path):  # pandas names an empty field "Unnamed: n"
        return None
    names = [f"c{i}" for i in range(len(header))]
    try:
        table = pacsv.read_csv(
            path,
            read_options=pacsv.ReadOptions(column_names=names, skip_rows=1),
            parse_options=pacsv.ParseOptions(newlines_in_values=True, ignore_empty_lines=False),
            convert_options=pacsv.ConvertOptions(
                column_types={n: pa.string() for n in names},
                strings_can_be_null=False,
                quoted_strings_can_be_null=False,
            ),
        )
    except (pa.ArrowException, OSError):
        return None
    if table.num_rows == 0:
        return None
    return pd.DataFrame(
        {h: pd.Series(table.column(n), dtype="str") for h, n in zip(header, names, strict=True)}
    )


def _quoted(path: str | Path) -> bool:
    """A ``"`` in the file other than in ``""`` (an empty quoted field, as DuckDB writes an
    empty string). Quoting is where CSV parsers differ on malformed input (an open quote at
    the end, text after a closing quote, ...): such files take pandas' path.

    Pairs are taken left to right, so a quote is left over exactly where a run of adjacent
    quotes has an odd length. The runs are found in numpy on the positions of the quotes
    (a usage file has few, or none), a 16 MiB block at a time; a run may go on across blocks.
    """
    run = 0  # length of the run of quotes the previous block ended with
    with open(path, "rb") as handle:
        while block := handle.read(_QUOTE_SCAN_BLOCK):
            at = np.flatnonzero(np.frombuffer(block, dtype=np.uint8) == _QUOTE)
            if at.size == 0 or at[0] != 0:
                if run % 2:
                    return True
                run = 0
            if at.size == 0:
                continue
            starts = np.concatenate([[0], np.flatnonzero(np.diff(at) != 1) + 1])
            lengths = np.diff(np.append(starts, at.size))
            lengths[0] += run  # zero unless the block starts by going on with that run
            open_end = bool(at[-1] == len(block) - 1)
            if np.any(lengths[: len(lengths) - open_end] % 2):
                return True
            run = int(lengths[-1]) if open_end else 0
    return run % 2 == 1


_QUOTE = ord('"')
_QUOTE_SCAN_BLOCK = 1 << 24


def parquet_columns(path: str | Path) -> list[str]:
    """The column names of a Parquet file, without reading its data."""
    return list(_open_parquet(path).schema_arrow.names)


def _open_parquet(path: str | Path) -> pq.ParquetFile:
    file = str(path)
    try:
        return pq.ParquetFile(path)
    except FileNotFoundError:
        raise InputError("file not found", file=file) from None
    except (pa.ArrowException, OSError) as exc:
        message = " ".join(str(exc).split())
        raise InputError(f"not a readable Parquet file: {message}", file=file) from None


def read_parquet_raw(
    path: str | Path,
    *,
    columns: Sequence[str] | None = None,
    text_columns: Collection[str] = (),
) -> RawTable:
    """Read one Parquet file (never its hive partition folders) with 1-based record numbers.

    ``text_columns`` are cast to strings in Arrow (so integer client ids stay ``"42"``, not
    ``"42.0"``) and their nulls become ``""``. Dictionary columns are decoded and dates become
    timestamps so that the shared helpers only see plain pandas dtypes.
    """
    file = str(path)
    handle = _open_parquet(path)
    try:
        table = handle.read(columns=list(columns) if columns is not None else None)
    except (pa.ArrowException, OSError) as exc:
        message = " ".join(str(exc).split())
        raise InputError(f"cannot read Parquet data: {message}", file=file) from None
    arrays: dict[str, pa.ChunkedArray] = {}
    for name in table.column_names:
        array = table.column(name)
        if pa.types.is_dictionary(array.type):
            array = array.cast(array.type.value_type)
        if name in text_columns and not (
            pa.types.is_string(array.type) or pa.types.is_large_string(array.type)
        ):
            try:
                array = array.cast(pa.string())
            except (pa.ArrowException, ValueError):
                raise InputError(
                    f"cannot read {array.type} values as text",
                    file=file,
                    where="schema",
                    column=name,
                ) from None
        elif pa.types.is_date(array.type):
            array = array.cast(pa.timestamp("ns"))
        arrays[name] = array
    frame = pa.table(arrays).to_pandas() if arrays else pd.DataFrame(index=range(table.num_rows))
    for name in text_columns:
        if name in frame.columns:
            frame[name] = frame[name].astype("str").fillna("")
    rows = np.arange(1, len(frame) + 1, dtype="int64")
    return RawTable(frame.reset_index(drop=True), file, rows)


# --------------------------------------------------------------------------- column checks


def require_columns(
    present: Sequence[str],
    required: Sequence[str],
    file: str,
    *,
    known: Collection[str] = (),
) -> None:
    """Raise :class:`InputError` for the first required column the header lacks.

    The suggestion is drawn from the columns that are not themselves expected (``known`` and
    ``required``), since a misspelt column is one the reader does not recognise.
    """
    missing = [c for c in required if c not in present]
    if not missing:
        return
    column = missing[0]
    expected = set(required) | set(known)
    candidates = [c for c in present if c not in expected]
    shown = ", ".join(present[:12]) + (", ..." if len(present) > 12 else "")
    raise InputError(
        f"required column is missing{did_you_mean(column, candidates, ignore_case=True)}; "
        f"the file has: {shown or 'no columns'}",
        file=file,
        where="header",
        column=column,
    )


# --------------------------------------------------------------------------- cell parsing


def parse_utc(values: pd.Series, raw: RawTable, column: str) -> pd.Series:
    """Timestamps as ``datetime64[ns, UTC]``: ISO 8601 with ``Z`` or an offset; naive = UTC.

    Windows from different sources are compared and joined, so they must share one zone and
    one resolution. The first bad cell (unreadable, empty, an offset beyond ±14:00, outside
    2000-01-01 .. 2100-01-01: :mod:`tenantcost.instants`) is reported by row and column.
    """
    parsed = parse_instants(values, file=raw.file, place=raw.place, column=column)
    return parsed.reset_index(drop=True)


def parse_float(values: pd.Series, raw: RawTable, column: str) -> pd.Series:
    """Cells as float64; empty cells become NaN (callers decide whether that is allowed).

    A non-numeric cell raises :class:`InputError` quoting the value, its row and column.
    """
    if pd.api.types.is_bool_dtype(values.dtype):
        if len(values):
            raise InputError(
                f"expected a number, got {values.iloc[0]!r}",
                file=raw.file,
                where=raw.place(0),
                column=column,
            )
        return values.astype("float64").reset_index(drop=True)
    if pd.api.types.is_numeric_dtype(values.dtype):
        return values.astype("float64").reset_index(drop=True)
    text = values.astype("str").fillna("").str.strip()
    fast = _plain_floats(text)
    if fast is not None:
        return fast
    numbers = pd.to_numeric(text, errors="coerce")
    bad = (numbers.isna() & (text != "")).to_numpy()
    if bad.any():
        position = int(np.flatnonzero(bad)[0])
        raise InputError(
            f"expected a number, got {str(values.iloc[position])!r}",
            file=raw.file,
            where=raw.place(position),
            column=column,
        )
    return numbers.astype("float64").reset_index(drop=True)


_PLAIN_NUMBER_CHARS = 18
"""At most this many characters: at most 17 significant digits in a decimal number, where
``pd.to_numeric`` and Arrow both round correctly (and an integer below 2**53 is exact)."""


def _plain_floats(text: pd.Series) -> pd.Series | None:
    """``pd.to_numeric`` of stripped cells, ten times faster (Arrow's cast), when every cell is
    a plain finite number; None otherwise (empty or odd cells, NaN, infinities, ``-0``, very
    long or huge numbers), and the caller takes the exact path, which quotes the first bad
    cell. On plain numbers both give the same correctly rounded double."""
    if not hasattr(text.array, "__arrow_array__") or not len(text):
        return None
    array = text.array.__arrow_array__()
    try:
        numbers = pc.cast(array, pa.float64())
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        return None
    if pc.max(pc.utf8_length(array)).as_py() > _PLAIN_NUMBER_CHARS:
        return None
    floats = numbers.to_numpy(zero_copy_only=False)
    if not np.isfinite(floats).all() or (np.abs(floats) >= 2.0**53).any():
        return None
    if np.signbit(floats[floats == 0]).any():  # "-0": to_numeric reads an integer 0
        return None
    return pd.Series(floats, dtype="float64")


def check_amount_cells(values: pd.Series, raw: RawTable, column: str) -> None:
    """Amount cells (already floats) that are infinite or beyond
    :data:`~tenantcost.limits.MAX_COST_PER_ROW` raise :class:`InputError` by row and column;
    missing cells (NaN) are left to the caller, which knows whether they are allowed."""
    array = values.to_numpy(dtype="float64")
    bad = np.isinf(array) | (np.abs(np.nan_to_num(array)) > MAX_COST_PER_ROW)
    if bad.any():
        position = int(np.flatnonzero(bad)[0])
        raise InputError(
            amount_problem(float(array[position])),
            file=raw.file,
            where=raw.place(position),
            column=column,
        )


def text(values: pd.Series) -> pd.Series:
    """Cells as pandas ``str`` with ``""`` for missing values."""
    return values.astype("str").fillna("").reset_index(drop=True)


def unquoted(raw: RawTable, columns: Collection[str]) -> RawTable:
    """``raw`` with its text ``columns`` (those present) as text, without the ``'`` that
    tenantcost's CSV files put before a formula character for spreadsheets
    (:mod:`tenantcost.csv_cells`): a file tenantcost wrote reads back as it was."""
    changed = {}
    for column in (c for c in columns if c in raw.frame.columns):
        cells = text(raw.frame[column])
        restored = restored_cells(cells)
        if restored is not cells:
            changed[column] = restored
    return replace(raw, frame=raw.frame.assign(**changed)) if changed else raw


def _is_empty(value: object) -> bool:
    if value is None:
        return True
    if isinstance(value, float) and math.isnan(value):
        return True
    return isinstance(value, str) and not value.strip()


def describe_value(value: object) -> str:
    """How an error message shows a cell: ``empty``, ``NaN`` or the quoted value."""
    if isinstance(value, float) and math.isnan(value):
        return "NaN"
    return "empty" if _is_empty(value) else repr(str(value))


# --------------------------------------------------------------------------- cost tables


def derive_name(namespace: pd.Series, controller: pd.Series) -> pd.Series:
    """``namespace/controller``, or ``namespace``, or ``""``: OpenCost's own naming shape.

    Without a namespace the row cannot be named the way OpenCost would, so the name is ``""``.
    """
    joined = namespace + "/" + controller
    name = joined.where(controller != "", namespace)
    return name.where(namespace != "", "").astype("str")


def is_component_column(column: str) -> bool:
    """True for ``<x>_cost`` columns other than ``total_cost``."""
    return column.endswith("_cost") and column != "total_cost"


def conform_costs(frame: pd.DataFrame) -> pd.DataFrame:
    """Give a cost frame the canonical column set, dtypes and column order.

    Missing property columns become ``""``, label cells missing after a concat become ``""``;
    component costs stay float64 with NaN where a source does not report that component.
    Columns are ordered required, then components (known order, then others sorted), then
    labels sorted, so frames from different sources line up.
    """
    out = frame.copy()
    for column in COST_PROPERTY_COLUMNS:
        out[column] = text(out[column]) if column in out.columns else ""
        out[column] = out[column].astype("str")
    for column in ("window_start", "window_end"):
        if column not in out.columns:
            out[column] = pd.Series(pd.NaT, index=out.index, dtype="datetime64[ns, UTC]")
    out["origin"] = text(out["origin"]) if "origin" in out.columns else ""
    out["origin"] = out["origin"].astype("str")
    out["total_cost"] = out["total_cost"].astype("float64")
    components = [c for c in out.columns if is_component_column(str(c))]
    ordered_components = [c for c in COST_COMPONENT_COLUMNS if c in components] + sorted(
        c for c in components if c not in COST_COMPONENT_COLUMNS
    )
    for column in ordered_components:
        out[column] = out[column].astype("float64")
    labels = sorted(c for c in out.columns if str(c).startswith(LABEL_PREFIX))
    for column in labels:
        out[column] = text(out[column]).astype("str")
    ordered = [*COST_REQUIRED_COLUMNS, *ordered_components, *labels]
    return out[ordered].reset_index(drop=True)


def validate_costs(frame: pd.DataFrame, *, total_column: str = "total_cost") -> None:
    """Every row: ``total_cost`` finite, >= 0 and at most
    :data:`~tenantcost.limits.MAX_COST_PER_ROW`, components finite (or missing) and within
    the same limit, ``window_end`` after ``window_start``; and the running total of the rows
    within :data:`~tenantcost.limits.MAX_AMOUNT_TOTAL`.

    The first offending row (in the frame's order) is named by its origin, so the user can go
    straight to the cell; ``total_column`` is the name the user's file gives the total. The
    limits keep every later micro-unit conversion and every sum exact (``tenantcost.limits``).
    """
    total = frame["total_cost"].to_numpy(dtype="float64")
    bad = ~np.isfinite(total) | (total < 0) | (total > MAX_COST_PER_ROW)
    if bad.any():
        position = int(np.flatnonzero(bad)[0])
        value = float(total[position])
        if math.isnan(value):
            problem = "total cost is missing"
        elif value > MAX_COST_PER_ROW and math.isfinite(value):
            problem = f"total {amount_problem(value)}"
        else:
            problem = f"total cost must be finite and >= 0, got {value!r}"
        file, where = split_origin(str(frame["origin"].iloc[position]))
        raise InputError(problem, file=file, where=where, column=total_column)
    _validate_components(frame)
    running_total(to_micros(total), origins=frame["origin"], column=total_column)
    backwards = (frame["window_end"] <= frame["window_start"]).to_numpy()
    if backwards.any():
        position = int(np.flatnonzero(backwards)[0])
        file, where = split_origin(str(frame["origin"].iloc[position]))
        start = frame["window_start"].iloc[position].isoformat()
        end = frame["window_end"].iloc[position].isoformat()
        raise InputError(
            f"window_end {end} is not after window_start {start}",
            file=file,
            where=where,
            column="window_end",
        )


def _validate_components(frame: pd.DataFrame) -> None:
    """Component costs may be missing (NaN: the source does not report them) or negative
    (adjustments), but never infinite or beyond what a micro-unit conversion holds exactly."""
    for column in frame.columns:
        if not is_component_column(str(column)):
            continue
        values = frame[column].to_numpy(dtype="float64")
        bad = np.isinf(values) | (np.abs(np.nan_to_num(values)) > MAX_COST_PER_ROW)
        if bad.any():
            position = int(np.flatnonzero(bad)[0])
            file, where = split_origin(str(frame["origin"].iloc[position]))
            raise InputError(
                amount_problem(float(values[position])), file=file, where=where, column=column
            )


# --------------------------------------------------------------------------- canonical reader


def read_canonical_costs(path: str | Path) -> pd.DataFrame:
    """Read a canonical cost CSV or Parquet file into a validated cost table.

    Unknown columns are ignored with a warning (they may be typos of optional columns); an
    ``origin`` column in the file is replaced by this file's own row references.
    """
    file = str(path)
    suffix = Path(path).suffix.lower()
    if suffix == ".parquet":
        present = parquet_columns(path)
        require_columns(present, CANONICAL_REQUIRED_COLUMNS, file, known=_known(present))
        text_columns = [
            c for c in present if c in COST_PROPERTY_COLUMNS or c.startswith(LABEL_PREFIX)
        ]
        raw = read_parquet_raw(path, text_columns=text_columns)
    elif suffix == ".csv":
        raw = read_csv_raw(path)
        present = list(raw.frame.columns)
        raw = unquoted(raw, [c for c in present if c in COST_PROPERTY_COLUMNS
                             or c.startswith(LABEL_PREFIX)])  # fmt: skip
        require_columns(present, CANONICAL_REQUIRED_COLUMNS, file, known=_known(present))
    else:
        raise InputError("expected a .csv or .parquet canonical cost file", file=file)

    cells = raw.frame
    unknown = [c for c in cells.columns if c not in _known(list(cells.columns))]
    if unknown:
        warn(f"{file}: ignoring unknown cost column(s): {', '.join(map(str, unknown))}")

    out: dict[str, pd.Series] = {
        "window_start": parse_utc(cells["window_start"], raw, "window_start"),
        "window_end": parse_utc(cells["window_end"], raw, "window_end"),
    }
    for column in ["cluster", "namespace", "controller_kind", "controller", "node", "pod"]:
        out[column] = text(cells[column]) if column in cells.columns else _blank(len(cells))
    if "name" in cells.columns:
        out["name"] = text(cells["name"])
    else:
        out["name"] = derive_name(out["namespace"], out["controller"])
    out["total_cost"] = parse_float(cells["total_cost"], raw, "total_cost")
    out["origin"] = raw.origins()
    for column in cells.columns:
        if is_component_column(str(column)):
            out[column] = parse_float(cells[column], raw, column)
            check_amount_cells(out[column], raw, column)
        elif str(column).startswith(LABEL_PREFIX):
            out[column] = text(cells[column])
    frame = conform_costs(pd.DataFrame(out))
    validate_costs(frame)
    return frame


def _known(present: Sequence[str]) -> set[str]:
    return {
        *CANONICAL_REQUIRED_COLUMNS,
        *CANONICAL_OPTIONAL_PROPERTIES,
        "origin",
        *(c for c in present if c.startswith(LABEL_PREFIX) or is_component_column(c)),
    }


def _blank(count: int) -> pd.Series:
    return pd.Series([""] * count, dtype="str")
