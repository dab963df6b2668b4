"""Billing data (FOCUS 1.0–1.3, AWS CUR 2.0) as one canonical DuckDB view: what was invoiced.

The contract with the allocation core (the canonical billing view, docs/billing-data.md):
``open_billing(paths, con, currency=...)`` returns a :class:`BillingData` naming a TEMP VIEW on
``con`` with the FOCUS columns the core needs, whatever the source: FOCUS columns renamed
between versions are mapped (``focus_columns``), CUR 2.0 columns are derived into FOCUS ones
(``cur``), every cell is typed exactly (``billing_cells``: DECIMAL(38,18), UTC timestamps).

Why a view and not a frame: a month of billing data can hold 10 M rows. The view is a DuckDB
scan of the files (CSV, gzip CSV, Parquet; files, folders, hive-partitioned datasets), so
whoever queries it streams; nothing here holds the rows. Validation is one whole-column
aggregate query over the same scan; only when it finds a problem does a second query fetch
the first offending row (by file and row) to name it. Every problem is an
:class:`~tenantcost.errors.InputError` naming the file, ``row N`` (1-based data row within its
file) and the column: nothing is dropped silently.

FOCUS 1.3 split cost allocation: a dataset holding an origin charge *and* the allocated
charges split from it counts one side only (``focus_allocations``); a charge whose counterpart
is not in the dataset is always kept.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal

import duckdb

from tenantcost.config.billing import BILLING_MATCH_COLUMNS
from tenantcost.duck import quote
from tenantcost.errors import InputError
from tenantcost.limits import EARLIEST_INSTANT_ISO, INT64_MAX, LATEST_INSTANT_ISO
from tenantcost.readers import billing_csv, cur, focus_columns
from tenantcost.readers.billing_cells import (
    Cell,
    decimal_cell,
    literal,
    tags_cell,
    text_value,
    timestamp_cell,
)
from tenantcost.stored_text import bad_text_sql, text_problem

NO_INVOICE_ID = "(no invoice id)"
SUFFIXES = (".csv", ".csv.gz", ".parquet")
FocusAllocations = Literal["origin", "allocated"]
_COUNTER = itertools.count(1)

VIEW_COLUMNS: tuple[str, ...] = (
    "x_file", "x_row", *BILLING_MATCH_COLUMNS, *focus_columns.TIMES, *focus_columns.MONEY,
    "BillingCurrency", "Tags",
)  # fmt: skip
SPLIT_COLUMNS: tuple[str, ...] = (
    "x_file", "x_row", "ChargePeriodStart", "ChargePeriodEnd", "ParentResourceId", "Cluster",
    "Namespace", "WorkloadName", "WorkloadType", "Node", "Pod", "SplitCost", "UnusedCost", "Tags",
)  # fmt: skip


@dataclass(frozen=True)
class BillingData:
    """The billing rows as views on a DuckDB connection (see the module docstring)."""

    view: str
    split_view: str | None
    files: list[str]
    origin: str
    rows: int
    stage: str = ""
    """The view of every row (split rows included) with its first problem, ``x_problem``."""
    checked_view: str = ""
    """``view`` plus ``x_problem``: a caller that scans every line anyway (the allocation's
    grouping) counts the problems in that scan and checks only when there is one
    (``open_billing(..., check=False)`` and :func:`check_billing`)."""
    sources: tuple[Source, ...] = ()
    """The scans the views read (for the duplicate check and the CSV error diagnosis)."""


@dataclass(frozen=True)
class Source:
    """Files read by one DuckDB scan, with their columns (lower-case name -> spelling)."""

    files: tuple[str, ...]
    fmt: Literal["csv", "parquet"]
    names: dict[str, str]
    types: dict[str, str]
    shown_as: tuple[tuple[str, str], ...] = ()
    """(local prefix, name) pairs: a file copied from object storage is named by its URL in
    ``x_file`` (stored rows, messages), never by its temporary copy."""

    def file_name(self) -> str:
        """SQL of ``x_file``: the scanned file's name, as shown."""
        name = "CAST(x_src_file AS VARCHAR)"
        for local, shown in self.shown_as:
            name = f"replace({name}, {literal(local)}, {literal(shown)})"
        return name

    def relation(self) -> str:
        """The scan, with ``x_src_file`` and ``x_src_row``: as every reader counts rows, a CSV
        file's header is line 1 (its first record is row 2), a Parquet file's first record is
        row 1."""
        if self.fmt == "parquet":
            files = ", ".join(literal(f) for f in self.files)
            return (
                f"(SELECT *, file_row_number + 1 AS x_src_row FROM read_parquet([{files}],"
                " union_by_name=true, filename='x_src_file', file_row_number=true,"
                " hive_partitioning=false))"
            )
        header = list(self.types)  # the header's names, in its order
        return (
            "(SELECT *, row_number() OVER () + 1 AS x_src_row FROM "
            f"{billing_csv.csv_scan(self.files[0], header)})"
        )


@dataclass
class Stage:
    """One source's canonical SELECT: columns, raw texts, and the cell problems found."""

    columns: dict[str, str] = field(default_factory=dict)
    problems: list[tuple[str, str]] = field(default_factory=list)
    """(SQL condition, ``column|kind``) in the order they are reported."""
    inner: dict[str, str] = field(default_factory=dict)
    """Columns computed once, in a SELECT under the stage's, for expressions that use them."""
    shown: dict[str, str] = field(default_factory=dict)
    """Canonical money and time column -> the file's column an error about it names, as SQL
    (the range checks of :func:`_range_problems` run on the typed canonical columns)."""

    def cell(self, name: str, cell: Cell, *, required: bool, kind: str) -> None:
        self.columns[name] = cell.value
        self.columns[f"_raw_{name}"] = cell.raw
        if required:
            self.problems.append((cell.missing, f"{name}|missing"))
        self.problems.append((cell.bad, f"{name}|{kind}"))

    def stored_text(self, shown: dict[str, str], tags: str | None) -> None:
        """The stored-text rule (:mod:`tenantcost.stored_text`) on the text columns the
        store keeps (``shown``: canonical column -> the name the error shows) and the tags
        JSON: one regular expression per row over all of them, the column found only for a
        row that has one."""
        texts = [c for c in shown if c in self.columns]
        joined = f"concat({', '.join(self.columns[c] for c in texts)})"
        tag_sql = self.columns.get(tags, "''") if tags else "''"
        which = " ".join(
            f"WHEN {bad_text_sql(self.columns[c])} THEN {literal(f'{shown[c]}|control:{c}')}"
            for c in texts
        )
        which += f" WHEN {bad_text_sql(tag_sql, json=True)} THEN 'Tags|control:Tags'"
        for c in texts:
            self.columns[f"_text_{c}"] = self.columns[c]
        self.columns["_text_Tags"] = tag_sql
        # The joined text is computed once, in an inner SELECT (DuckDB would otherwise build
        # it for each of the test's parts), and the test is a column of its own: inside the
        # long CASE of the cell problems, on the rows each WHEN leaves, it costs several times
        # more.
        self.inner = {"x_joined_text": joined, "x_tags_text": tag_sql}
        condition = (f"{bad_text_sql('x_joined_text')} OR"
                     f" {bad_text_sql('x_tags_text', json=True)}")  # fmt: skip
        self.columns["x_text_problem"] = f"CASE WHEN {condition} THEN CASE {which} END END"

    def sql(self, source: Source) -> str:
        problem = " ".join(f"WHEN {cond} THEN {literal(code)}" for cond, code in self.problems
                           if cond != "FALSE")  # fmt: skip
        columns = [f"{sql} AS {quote(name)}" for name, sql in self.columns.items()]
        columns += [f"{sql} AS {quote('x_col_' + c)}" for c, sql in self.shown.items()]
        columns.append(f"CASE {problem} END AS x_cell_problem" if problem
                       else "CAST(NULL AS VARCHAR) AS x_cell_problem")  # fmt: skip
        return (
            f"SELECT {source.file_name()} AS x_file, CAST(x_src_row AS BIGINT) AS x_row, "
            + ", ".join(columns)
            + f" FROM {self._scan(source)}"
        )

    def _scan(self, source: Source) -> str:
        if not self.inner:
            return source.relation()
        extra = ", ".join(f"{sql} AS {quote(name)}" for name, sql in self.inner.items())
        return f"(SELECT *, {extra} FROM {source.relation()})"


MAX_LINE_AMOUNT = f"{INT64_MAX // 1_000_000}.{INT64_MAX % 1_000_000:06d}"
"""The largest amount of one line, in currency units: its micro-units must fit ``int64``
(:data:`~tenantcost.limits.INT64_MAX`), as ``run`` holds them (``billed.micros_sql``)."""


def _range_problems(split: bool) -> tuple[tuple[str, str], ...]:
    """Amounts whose micro-units would not fit ``int64`` (``|amount| >``
    :data:`MAX_LINE_AMOUNT`, a bound a hair stricter than rounding first), and times outside
    :data:`~tenantcost.limits.EARLIEST_INSTANT_ISO` .. :data:`~tenantcost.limits.LATEST_INSTANT_ISO`
    (an end may be that last instant), on the typed canonical columns: cheap comparisons,
    where a check on each cell would evaluate its parse a second time."""
    money = [
        (f"abs({c}) > {MAX_LINE_AMOUNT}", c, "overflow")
        for c in (*focus_columns.MONEY, *(("SplitCost", "UnusedCost") if split else ()))
    ]
    earliest = f"TIMESTAMPTZ {literal(EARLIEST_INSTANT_ISO)}"
    latest = f"TIMESTAMPTZ {literal(LATEST_INSTANT_ISO)}"
    times = [(f"({c} < {earliest} OR {c} {'>' if c.endswith('End') else '>='} {latest})", c,
              "range") for c in focus_columns.TIMES]  # fmt: skip
    return tuple(
        (cond, f"coalesce(x_col_{c}, '{c}') || '|{kind}:{c}'") for cond, c, kind in money + times
    )


# --------------------------------------------------------------------------- files


def billing_files(paths: Iterable[str | Path]) -> list[str]:
    """Every billing file under ``paths`` (folders recursively, sorted; hidden names skipped)."""
    found: list[str] = []
    seen: set[Path] = set()
    for entry in paths:
        path = Path(entry)
        if path.is_dir():
            files = sorted(
                p for p in path.rglob("*")
                if p.is_file() and _suffix_ok(p)
                and not any(part.startswith(".") for part in p.relative_to(path).parts)
            )  # fmt: skip
            if not files:
                raise InputError(f"folder has no billing files ({', '.join(SUFFIXES)})",
                                 file=str(path))  # fmt: skip
        elif path.is_file():
            if not _suffix_ok(path):
                raise InputError(f"unsupported billing file type: expected {', '.join(SUFFIXES)}",
                                 file=str(path))  # fmt: skip
            files = [path]
        else:
            raise InputError("file or folder not found", file=str(path))
        for file in files:
            if file.resolve() not in seen:
                seen.add(file.resolve())
                found.append(str(file))
    return found


def _suffix_ok(path: Path) -> bool:
    return path.name.lower().endswith(SUFFIXES)


def _columns(con: duckdb.DuckDBPyConnection, file: str) -> list[tuple[str, str]]:
    """(name, DuckDB type) of a file's columns, from its header or Parquet schema."""
    if not file.lower().endswith(".parquet"):
        return [(name, "VARCHAR") for name in billing_csv.csv_header(file)]
    try:
        rows = con.execute(f"DESCRIBE SELECT * FROM read_parquet({literal(file)})").fetchall()
    except duckdb.Error as exc:
        raise InputError(f"cannot read billing file: {_first_line(exc)}", file=file) from None
    return [(str(r[0]), str(r[1])) for r in rows]


def _first_line(exc: Exception) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


def sources(con: duckdb.DuckDBPyConnection, files: Sequence[str]) -> list[Source]:
    """Files grouped into scans: Parquet files with one schema share a scan, CSV files don't
    (their row numbers come from a per-file streaming ``row_number()``)."""
    groups: dict[tuple[object, ...], list[str]] = {}
    schemas: dict[tuple[object, ...], list[tuple[str, str]]] = {}
    for file in files:
        columns = _columns(con, file)
        fmt = "parquet" if file.lower().endswith(".parquet") else "csv"
        key: tuple[object, ...] = (fmt, tuple(columns)) if fmt == "parquet" else (fmt, file)
        groups.setdefault(key, []).append(file)
        schemas[key] = columns
    result = []
    for key, group in groups.items():
        columns = schemas[key]
        kind: Literal["csv", "parquet"] = "parquet" if key[0] == "parquet" else "csv"
        result.append(Source(tuple(group), kind, {n.lower(): n for n, _ in columns},
                             dict(columns)))  # fmt: skip
    return result


# --------------------------------------------------------------------------- stages


def _require(source: Source, required: Sequence[str], resolve: object = None) -> None:
    """A missing required column names the file, the header row and the column."""
    for column in required:
        found = (
            focus_columns.resolve(column, source.names) if resolve is None
            else source.names.get(column)
        )  # fmt: skip
        if found is None:
            raise InputError(
                "required column missing from the header",
                file=source.files[0],
                where="header",
                column=column,
            )


def focus_stage(source: Source) -> Stage:
    """A FOCUS source's canonical columns (any version 1.0–1.3, columns matched by name)."""
    _require(source, focus_columns.REQUIRED)
    stage = Stage()

    def ref(column: str) -> str | None:
        found = focus_columns.resolve(column, source.names)
        return None if found is None else quote(found)

    def dtype(column: str) -> str:
        found = focus_columns.resolve(column, source.names)
        return "VARCHAR" if found is None else source.types[found]

    for column in BILLING_MATCH_COLUMNS:
        stage.columns[column] = text_value(ref(column))
    stage.columns["BillingCurrency"] = text_value(ref("BillingCurrency"))
    stage.problems.append((f"{stage.columns['BillingCurrency']} = ''", "BillingCurrency|missing"))
    for column in focus_columns.TIMES:
        stage.cell(column, timestamp_cell(ref(column) or "NULL", dtype(column)),
                   required=True, kind="time")  # fmt: skip
    for column in focus_columns.MONEY:
        stage.cell(column, decimal_cell(ref(column) or "NULL", dtype(column)),
                   required=True, kind="number")  # fmt: skip
    stage.cell("Tags", tags_cell(ref("Tags"), dtype("Tags")), required=False, kind="tags")
    for column in (*focus_columns.TIMES, *focus_columns.MONEY):
        stage.shown[column] = literal(focus_columns.resolve(column, source.names) or column)
    texts = (*BILLING_MATCH_COLUMNS, "BillingCurrency")
    stage.stored_text({c: focus_columns.resolve(c, source.names) or c for c in texts
                       if focus_columns.resolve(c, source.names)}, "Tags")  # fmt: skip
    method = ref("AllocatedMethodId")
    stage.columns["x_alloc"] = "FALSE" if method is None else f"{text_value(method)} <> ''"
    stage.columns["x_split"] = "FALSE"
    return stage


def cur_stage(source: Source) -> Stage:
    """A CUR 2.0 source's canonical columns, derived as :mod:`tenantcost.readers.cur` says."""
    _require(source, cur.REQUIRED, resolve=False)
    col = cur.quoted_lookup(source.names)
    stage = Stage()
    texts = cur.text_columns(col)
    for column in BILLING_MATCH_COLUMNS:
        stage.columns[column] = texts[column]
    stage.columns["BillingCurrency"] = texts["BillingCurrency"]
    stage.problems.append((f"{texts['BillingCurrency']} = ''", "line_item_currency_code|missing"))
    times = {"BillingPeriodStart": "bill_billing_period_start_date",
             "BillingPeriodEnd": "bill_billing_period_end_date",
             "ChargePeriodStart": "line_item_usage_start_date",
             "ChargePeriodEnd": "line_item_usage_end_date"}  # fmt: skip
    for column, name in times.items():
        cell = timestamp_cell(col(name) or "NULL", source.types[source.names[name]])
        stage.cell(column, cell, required=False, kind="time")
        stage.columns[f"_raw_{name}"] = cell.raw
        stage.problems += [(cell.missing, f"{name}|missing")]
        stage.problems = [(c, k.replace(f"{column}|", f"{name}|")) for c, k in stage.problems]
    cells = cur.money_cells(col, lambda name: source.types[source.names[name]])
    for name, cell in cells.items():
        stage.columns[f"_raw_{name}"] = cell.raw
        stage.problems.append((cell.bad, f"{name}|number"))
    stage.problems.append((cells["line_item_unblended_cost"].missing,
                           "line_item_unblended_cost|missing"))  # fmt: skip
    split = cur.split_flag(col)
    stage.columns["BilledCost"] = cur.billed_cost(cells)
    stage.columns["EffectiveCost"] = cur.effective_cost(col, cells)
    stage.columns["_raw_EffectiveCost"] = text_value(col("line_item_line_item_type"))
    stage.problems.append((f"NOT ({split}) AND ({stage.columns['EffectiveCost']}) IS NULL",
                           "EffectiveCost|derive"))  # fmt: skip
    net = cells.get("line_item_net_unblended_cost")
    billed = (
        "'line_item_unblended_cost'"
        if net is None
        else f"CASE WHEN ({net.value}) IS NULL THEN 'line_item_unblended_cost'"
        " ELSE 'line_item_net_unblended_cost' END"
    )  # as billed_cost() chooses
    stage.shown.update({c: literal(n) for c, n in times.items()})
    stage.shown.update({"BilledCost": billed, "EffectiveCost": "'EffectiveCost'",
                        "SplitCost": "'split_line_item_split_cost'",
                        "UnusedCost": "'split_line_item_unused_cost'"})  # fmt: skip
    tags = col("resource_tags")
    stage.cell("Tags", tags_cell(tags, source.types.get(source.names.get("resource_tags", ""), "")),
               required=False, kind="tags")  # fmt: skip
    stage.columns["x_alloc"] = "FALSE"
    stage.columns["x_split"] = split
    for name, sql in cur.split_columns(col, cells).items():
        stage.columns[name] = sql
    stage.problems.append((f"({split}) AND ({stage.columns['SplitCost']}) IS NULL",
                           "split_line_item_split_cost|missing"))  # fmt: skip
    shown = {c: cur.TEXT_SOURCES.get(c, c) for c in (*BILLING_MATCH_COLUMNS, "BillingCurrency",
                                                     *cur.SPLIT_TEXT)}  # fmt: skip
    stage.stored_text(shown, None)
    return stage


def stage_for(source: Source) -> Stage:
    """The stage of a FOCUS or a CUR 2.0 source; anything else is refused."""
    columns = set(source.names)
    if focus_columns.is_focus(columns):
        return focus_stage(source)
    if cur.is_cur(columns):
        return cur_stage(source)
    raise InputError(
        "not FOCUS (no BilledCost column) nor AWS CUR 2.0 (no line_item_unblended_cost and"
        " line_item_line_item_type columns)",
        file=source.files[0],
        where="header",
    )


# --------------------------------------------------------------------------- checks

PERIOD_PROBLEMS: tuple[tuple[str, str], ...] = (
    ("BillingPeriodEnd <= BillingPeriodStart", "BillingPeriodEnd|order"),
    ("ChargePeriodEnd < ChargePeriodStart", "ChargePeriodEnd|order"),
    ("ChargeClass <> 'Correction' AND (ChargePeriodStart < BillingPeriodStart"
     " OR ChargePeriodEnd > BillingPeriodEnd)", "ChargePeriodStart|period"),
)  # fmt: skip
"""Row checks on the typed columns (after the cell checks): a Correction row corrects an
earlier billing period and is counted in the period that bills it, so it may lie outside."""

MESSAGES = {
    "missing": "empty value: the column is required",
    "number": "not an exact decimal number with at most 18 decimal places: {raw}",
    "time": "not a timestamp: {raw}",
    "tags": "not a JSON object: {raw}",
    "order": "the period ends before it starts",
    "period": "charge period {ChargePeriodStart} – {ChargePeriodEnd} is outside the billing"
    " period {BillingPeriodStart} – {BillingPeriodEnd} (only ChargeClass 'Correction' rows may be)",
    "derive": "EffectiveCost cannot be derived for line item type {raw}: a cost column it needs"
    " is empty (docs/billing-data.md)",
    "overflow": "amount {raw} is too large: a line's amount in micro-units must fit a 64-bit"
    f" integer (at most {MAX_LINE_AMOUNT} in absolute value), as run holds it",
    "range": "{raw} is outside the instants tenantcost accepts"
    f" ({EARLIEST_INSTANT_ISO} to {LATEST_INSTANT_ISO})",
    "control": "{raw}",
}


def _problem_sql(split: bool) -> str:
    """The first problem of a row: its cells', else the range and period checks (``split``:
    the data has CUR split rows, whose split costs are checked too)."""
    whens = " ".join(f"WHEN {cond} THEN {code}" for cond, code in _range_problems(split))
    whens += " " + " ".join(f"WHEN {cond} THEN {literal(code)}" for cond, code in PERIOD_PROBLEMS)
    return f"COALESCE(x_cell_problem, x_text_problem, CASE {whens} END)"


def _raise_problem(con: duckdb.DuckDBPyConnection, stage: str) -> None:
    """The first row with a problem (by file, then row), as one InputError."""
    file, row, code = con.execute(
        f"SELECT x_file, x_row, x_problem FROM {stage} WHERE x_problem IS NOT NULL"
        " ORDER BY x_file, x_row LIMIT 1"
    ).fetchall()[0]
    column, kind = str(code).split("|")
    names = con.execute(f"SELECT * FROM {stage} LIMIT 0").description or []
    kind, _, canonical = kind.partition(":")
    raw_of = {"control": f"_text_{canonical}", "range": f"_raw_{canonical}"}.get(
        kind, f"_raw_{column}"
    )  # the cell as written
    if kind == "overflow" and raw_of not in {d[0] for d in names}:
        raw_of = canonical  # derived (CUR EffectiveCost): the typed amount
    wanted = [raw_of] if raw_of in {d[0] for d in names} else []
    wanted += [t for t in focus_columns.TIMES if t != raw_of]
    # as text (a year 0000 has no Python datetime), UTC
    shown = [f"CAST(timezone('UTC', {quote(w)}) AS VARCHAR)" if w in focus_columns.TIMES
             else f"CAST({quote(w)} AS VARCHAR)" for w in wanted]  # fmt: skip
    values = con.execute(
        f"SELECT {', '.join(shown)} FROM {stage} WHERE x_file = ? AND x_row = ?", [file, row],
    ).fetchall()[0]  # fmt: skip
    found = dict(zip(wanted, values, strict=True))
    raw = found.get(raw_of)
    context = {k: _iso(v) for k, v in found.items() if k in focus_columns.TIMES}
    if kind == "overflow" and raw is not None and "." in str(raw):
        raw = str(raw).rstrip("0").rstrip(".")
    if kind == "control":
        raw = text_problem(str(raw), "the text") or "holds a control character"
        message = f"{raw}: stored text may hold no control character (docs/billing-data.md)"
        raise InputError(message, file=file, where=f"row {row}", column=column)
    message = MESSAGES[kind].format(raw="(empty)" if raw is None else repr(str(raw)), **context)
    raise InputError(message, file=file, where=f"row {row}", column=column)


def _iso(value: object) -> str:
    """A UTC timestamp's text (DuckDB's ``2026-11-01 00:00:00``) as ISO 8601 with ``Z``."""
    return f"{str(value).replace(' ', 'T')}Z" if value is not None else "(empty)"


def _check_currency(con: duckdb.DuckDBPyConnection, stage: str, low: str, high: str,
                    currency: str) -> None:  # fmt: skip
    """One BillingCurrency in the whole dataset, and it is the rule file's ``currency:``."""
    if low == high and low == currency:
        return
    first_file, first_row, first = con.execute(
        f"SELECT x_file, x_row, BillingCurrency FROM {stage} ORDER BY x_file, x_row LIMIT 1"
    ).fetchall()[0]
    if low != high:
        file, row, other = con.execute(
            f"SELECT x_file, x_row, BillingCurrency FROM {stage} WHERE BillingCurrency <> ?"
            " ORDER BY x_file, x_row LIMIT 1", [first],
        ).fetchall()[0]  # fmt: skip
        raise InputError(
            f"billing currency '{other}' differs from '{first}' ({first_file}, row {first_row}):"
            " one BillingCurrency per run (currency conversion is not supported)",
            file=file,
            where=f"row {row}",
            column="BillingCurrency",
        )
    raise InputError(
        f"billing currency '{first}' is not the rule file's currency '{currency}'",
        file=first_file,
        where=f"row {first_row}",
        column="BillingCurrency",
    )


def validate(con: duckdb.DuckDBPyConnection, stage: str, currency: str) -> None:
    """One aggregate pass over every row; the error path names the first offending row."""
    problems, low, high = con.execute(
        f"SELECT count(*) FILTER (WHERE x_problem IS NOT NULL), min(BillingCurrency),"
        f" max(BillingCurrency) FROM {stage}"
    ).fetchall()[0]
    if problems:
        _raise_problem(con, stage)
    if low is not None:
        _check_currency(con, stage, str(low), str(high), currency)


# --------------------------------------------------------------------------- the view


def _allocation_filter(mode: FocusAllocations, stage: str) -> str:
    """FOCUS 1.3: leave out the side of each origin/allocated pair that is not counted."""
    pairs = f"ResourceId <> '' AND x_key IN (SELECT x_key FROM {stage} WHERE ResourceId <> ''"
    if mode == "origin":
        return f"NOT (x_alloc AND {pairs} AND NOT x_alloc AND NOT x_split))"
    return f"NOT (NOT x_alloc AND {pairs} AND x_alloc))"


def _key_sql() -> str:
    parts = [*focus_columns.ALLOCATION_KEY, "CAST(ChargePeriodStart AS VARCHAR)",
             "CAST(ChargePeriodEnd AS VARCHAR)"]  # fmt: skip
    return f"concat_ws(chr(31), {', '.join(parts)})"


def _create_views(con: duckdb.DuckDBPyConnection, stages: list[tuple[Source, Stage]],
                  focus_allocations: FocusAllocations) -> tuple[str, str, str | None]:  # fmt: skip
    name = f"billing_{next(_COUNTER)}"
    union = " UNION ALL BY NAME ".join(f"({stage.sql(source)})" for source, stage in stages)
    allocating = any("allocatedmethodid" in source.names for source, _ in stages)
    split_rows = any("SplitCost" in stage.columns for _, stage in stages)
    key = f", {_key_sql()} AS x_key" if allocating else ""
    con.execute(
        f"CREATE OR REPLACE TEMP VIEW {name}_stage AS SELECT *,"
        f" {_problem_sql(split_rows)} AS x_problem{key} FROM ({union})"
    )
    where = "NOT x_split"
    if allocating:
        where += f" AND {_allocation_filter(focus_allocations, f'{name}_stage')}"
    columns = ", ".join(quote(c) for c in VIEW_COLUMNS)
    invoice = f"CASE WHEN InvoiceId = '' THEN {literal(NO_INVOICE_ID)} ELSE InvoiceId END"
    columns = columns.replace('"InvoiceId"', f'{invoice} AS "InvoiceId"')
    con.execute(f"CREATE OR REPLACE TEMP VIEW {name} AS SELECT {columns} FROM {name}_stage"
                f" WHERE {where}")  # fmt: skip
    con.execute(f"CREATE OR REPLACE TEMP VIEW {name}_checked AS SELECT {columns}, x_problem"
                f" FROM {name}_stage WHERE {where}")  # fmt: skip
    split = None
    if any("split_line_item_parent_resource_id" in s.names for s, _ in stages):
        split = f"{name}_split"
        columns = ", ".join(quote(c) for c in SPLIT_COLUMNS)
        con.execute(f"CREATE OR REPLACE TEMP VIEW {split} AS SELECT {columns}"
                    f" FROM {name}_stage WHERE x_split")  # fmt: skip
    return name, f"{name}_stage", split


def describe_paths(paths: Sequence[str | Path]) -> str:
    """A short text naming the billing paths, for messages."""
    names = [str(p) for p in paths]
    return names[0] if len(names) == 1 else f"{names[0]} and {len(names) - 1} more"


def open_billing(
    paths: Sequence[str | Path],
    con: duckdb.DuckDBPyConnection,
    *,
    currency: str,
    focus_allocations: FocusAllocations = "origin",
    check: bool = True,
    shown_as: Mapping[str, str] | None = None,
) -> BillingData:
    """Billing files and folders as the canonical view on ``con``, validated (module doc).

    ``check=False`` leaves the whole-data pass to the caller (:func:`check_billing`), for a
    caller whose own scan counts ``x_problem`` of ``checked_view``: one pass instead of two
    over millions of rows. The files, their columns and their headers are checked either way.
    ``shown_as``: local copies' prefixes and the URLs they name (:attr:`Source.shown_as`).
    """
    if isinstance(paths, str | Path):
        paths = [paths]
    if not paths:
        raise InputError("no billing input given")
    origin = describe_paths(paths)
    files = billing_files(paths)
    pairs = tuple(sorted((shown_as or {}).items(), key=lambda kv: -len(kv[0])))
    scans = [replace(scan, shown_as=pairs) for scan in sources(con, files)]
    stages = [(source, stage_for(source)) for source in scans]
    view, stage, split = _create_views(con, stages, focus_allocations)
    try:
        if check:
            validate(con, stage, currency)
        rows = int(con.execute(f"SELECT count(*) FROM {view}").fetchall()[0][0])
    except duckdb.Error as exc:
        raise read_error(con, scans, exc, origin) from None
    return BillingData(
        view=view,
        split_view=split,
        files=files,
        origin=origin,
        rows=rows,
        stage=stage,
        checked_view=f"{view}_checked",
        sources=tuple(scans),
    )


def read_error(
    con: duckdb.DuckDBPyConnection, scans: Sequence[Source], exc: Exception, origin: str
) -> InputError:
    """A failed scan as one line: a CSV file's first bad line (file, row, column) when one of
    them has it (:func:`tenantcost.readers.billing_csv.diagnose`), else DuckDB's first line."""
    for source in scans:
        if source.fmt == "csv":
            found = billing_csv.diagnose(con, source.files[0], list(source.types))
            if found is not None:
                return found
    return InputError(f"cannot read billing data: {_first_line(exc)}", file=origin)


def check_billing(con: duckdb.DuckDBPyConnection, data: BillingData, currency: str) -> None:
    """The checks ``open_billing(..., check=False)`` left out: every row's cells and periods,
    one currency and the rule file's; raises the first problem as one :class:`InputError`."""
    try:
        validate(con, data.stage, currency)
    except duckdb.Error as exc:
        raise read_error(con, data.sources, exc, data.origin) from None


def check_split_rows(con: duckdb.DuckDBPyConnection, data: BillingData, currency: str) -> None:
    """:func:`check_billing` of the EKS split rows alone (``check=False`` callers scan only
    the canonical view themselves; the split rows are a small part of the data)."""
    if data.split_view is None:
        return
    try:
        validate(con, f"(SELECT * FROM {data.stage} WHERE x_split)", currency)
    except duckdb.Error as exc:
        raise read_error(con, data.sources, exc, data.origin) from None
