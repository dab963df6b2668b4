"""FOCUS export: an allocation as FinOps Open Cost and Usage Specification rows.

One row per client, source and charge period (a day or an hour), plus rows for what no client
carries (unattributed cost, idle kept by the platform, overhead, reserve, each exclusion,
unclassified cost), so the file's EffectiveCost adds up to the reference total to the
micro-unit, like the reconciliation cascade. Why each money column holds what it holds, and
which FOCUS columns are filled how, is in docs/focus.md.

Everything is built column by column with pandas and pyarrow: no Python loop per row. Money is
written exactly: pyarrow ``decimal128(38, 6)`` in Parquet (the unscaled value *is* the int64
micro-units), exact decimal strings in CSV.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import duckdb
import numpy as np
import pandas as pd
import pyarrow as pa

from tenantcost.config.focus import Focus
from tenantcost.errors import InputError, InternalError
from tenantcost.kinds import CostClass, LineKind
from tenantcost.money import MINOR_UNIT_EXPONENT, micros_to_decimal_strings
from tenantcost.result import AllocationResult
from tenantcost.tables import LINE_COLUMNS, LINE_DTYPES, empty_table
from tenantcost.timefmt import ISO_Z_FORMAT

FocusVersion = Literal["1.2", "1.3"]
Grain = Literal["day", "hour"]
FOCUS_VERSIONS: tuple[str, ...] = ("1.2", "1.3")
GRAINS: dict[str, str] = {"day": "D", "hour": "h"}

MONEY_TYPE = pa.decimal128(38, MINOR_UNIT_EXPONENT)
"""Exact to the micro-unit; 38 digits hold any total tenantcost accepts (at most 10**18 micros)."""

ALLOCATED_COLUMNS = [
    "AllocatedMethodDetails",
    "AllocatedMethodId",
    "AllocatedResourceId",
    "AllocatedResourceName",
    "AllocatedTags",
]
"""FOCUS 1.3's split cost allocation columns; ``x_``-prefixed in a 1.2 file (1.2 has none)."""

FOCUS_12_COLUMNS = [
    "BilledCost",
    "BillingAccountId",
    "BillingAccountName",
    "BillingCurrency",
    "BillingPeriodEnd",
    "BillingPeriodStart",
    "ChargeCategory",
    "ChargeClass",
    "ChargeDescription",
    "ChargeFrequency",
    "ChargePeriodEnd",
    "ChargePeriodStart",
    "ContractedCost",
    "EffectiveCost",
    "InvoiceId",
    "InvoiceIssuerName",
    "ListCost",
    "PricingQuantity",
    "PricingUnit",
    "ProviderName",
    "PublisherName",
    "ResourceId",
    "ResourceName",
    "ResourceType",
    "ServiceCategory",
    "ServiceName",
    "ServiceSubcategory",
    "Tags",
]
FOCUS_13_EXTRA = ["HostProviderName", "ServiceProviderName"]
"""Mandatory in 1.3 (ProviderName and PublisherName stay, deprecated)."""

X_COLUMNS = [
    "x_ClientId",
    "x_AllocationKey",
    "x_Measure",
    "x_PoolMeasure",
    "x_RuleId",
    "x_ResidualClass",
    "x_SourceKind",
    "x_Reason",
]
"""tenantcost's own columns, in every version (docs/focus.md)."""

MONEY_COLUMNS = ("BilledCost", "ContractedCost", "EffectiveCost", "ListCost")
DECIMAL_COLUMNS = (*MONEY_COLUMNS, "PricingQuantity")
TIME_COLUMNS = ("BillingPeriodEnd", "BillingPeriodStart", "ChargePeriodEnd", "ChargePeriodStart")
FLOAT_COLUMNS = ("x_Measure", "x_PoolMeasure")

METHOD_PREFIX = "tenantcost-"
"""AllocatedMethodId values: ``tenantcost-<method>``, each documented in docs/focus.md."""

RESOURCE_TYPES = {
    LineKind.SHARED: "Shared workload",
    LineKind.EXTERNAL: "External cost",
    LineKind.BILLED: "Billed service",
    LineKind.DIRECT: "Direct workload",
    LineKind.IDLE: "Idle capacity",
    CostClass.OVERHEAD: "Platform overhead",
    CostClass.RESERVE: "Reserved capacity",
    CostClass.EXCLUDED: "Excluded workload",
    CostClass.UNCLASSIFIED: "Unclassified cost",
}
UNATTRIBUTED = "unattributed"
"""``x_ResidualClass`` of cost a keyed pool or a direct workload could not give any client."""


def columns_for(version: FocusVersion) -> list[str]:
    """The columns of a file of ``version``, FOCUS columns first, then the ``x_`` columns."""
    if version == "1.3":
        return sorted([*FOCUS_12_COLUMNS, *FOCUS_13_EXTRA, *ALLOCATED_COLUMNS]) + X_COLUMNS
    return FOCUS_12_COLUMNS + [f"x_{c}" for c in ALLOCATED_COLUMNS] + X_COLUMNS


def charge_periods(starts: pd.Series, ends: pd.Series, grain: Grain) -> tuple[pd.Series, pd.Series]:
    """Each window's charge period: the day (or hour) containing it. A window longer than
    the grain (a daily cost window at ``hour``) is its own charge period: the export never
    invents how a window's cost spread over its hours."""
    freq = GRAINS[grain]
    bucket = starts.dt.floor(freq)
    bucket_end = bucket + pd.Timedelta(1, unit=freq)
    fits = ends <= bucket_end
    return bucket.where(fits, starts), bucket_end.where(fits, ends)


def _hours(frame: pd.DataFrame) -> pd.Series:
    return (frame["window_end"] - frame["window_start"]).dt.total_seconds() / 3600.0


def _client_items(lines: pd.DataFrame) -> pd.DataFrame:
    """Window-level client lines as export items."""
    key = lines["key"].fillna("").astype("str").where(lines["kind"] != LineKind.DIRECT, "")
    return pd.DataFrame(
        {
            "window_start": pd.to_datetime(lines["window_start"], utc=True),
            "window_end": pd.to_datetime(lines["window_end"], utc=True),
            "rule_id": lines["rule_id"].astype("str"),
            "client": lines["client"].astype("str"),
            "source": lines["source"].astype("str"),
            "kind": lines["kind"].astype("str"),
            "residual_class": "",
            "key": key.fillna(""),
            "reason": "",
            "measure": lines["measure"].astype("float64"),
            "total_measure": lines["total_measure"].astype("float64"),
            "amount": lines["amount"].astype("int64"),
        }
    )


def _other_items(
    frame: pd.DataFrame, kind: pd.Series, source: pd.Series, cls: str | pd.Series, reason: pd.Series
) -> pd.DataFrame:
    """Rows no client carries, in the items shape."""
    return pd.DataFrame(
        {
            "window_start": frame["window_start"],
            "window_end": frame["window_end"],
            "rule_id": frame["rule_id"].astype("str"),
            "client": "",
            "source": source.astype("str"),
            "kind": kind.astype("str"),
            "residual_class": cls,
            "key": "",
            "reason": reason.fillna("").astype("str"),
            "measure": np.nan,
            "total_measure": np.nan,
            "amount": frame["amount"].astype("int64"),
        }
    )


GROUP_KEYS = ["rule_id", "client", "source", "kind", "residual_class", "key", "reason"]
CHARGE_KEYS = ["charge_start", "charge_end", *GROUP_KEYS]
SUMMED = ["amount", "measure", "total_measure", "hours"]


def _sum_charges(items: pd.DataFrame) -> pd.DataFrame:
    """Items that already carry their charge period, summed per charge period and row key."""
    return (
        items.groupby(CHARGE_KEYS, sort=True, observed=True)[SUMMED].sum(min_count=1).reset_index()
    )


def _by_charge_period(items: pd.DataFrame, grain: Grain) -> pd.DataFrame:
    """Window-level items summed per charge period (with the hours their windows cover)."""
    start, end = charge_periods(items["window_start"], items["window_end"], grain)
    dated = items.assign(charge_start=start, charge_end=end, hours=_hours(items))
    return _sum_charges(dated.drop(columns=["window_start", "window_end"]))


def client_charge_lines(lines: pd.DataFrame, grain: Grain) -> pd.DataFrame:
    """Window-level client lines (``tenantcost.tables.LINE_COLUMNS``) summed per client,
    source and charge period: what a chunk hands over (:class:`ChargeLinesSink`)."""
    return _by_charge_period(_client_items(lines), grain)


def _other_charges(result: AllocationResult, grain: Grain) -> pd.DataFrame:
    """What no client carries, per charge period: unattributed cost, the residual (idle still
    before its distribution, under the one source name ``idle``), exclusions, unclassified."""
    un = result.unattributed
    parts = [_other_items(un, un["kind"], un["source"], UNATTRIBUTED, un["cause"])]
    idle = result.residual["class"] == CostClass.IDLE
    rows = result.residual[idle]
    name = pd.Series("idle", index=rows.index)
    no_reason = pd.Series("", index=rows.index)
    parts.append(_other_items(rows, name, name, str(CostClass.IDLE), no_reason))
    for table in (result.residual[~idle], result.exclusions, result.unclassified):
        parts.append(
            _other_items(table, table["class"], table["name"], table["class"], table["reason"])
        )
    return _by_charge_period(pd.concat(parts, ignore_index=True), grain)


def _net_of_distributed_idle(others: pd.DataFrame, clients: pd.DataFrame) -> pd.DataFrame:
    """The platform keeps the idle its rule did not distribute: residual idle minus the
    clients' idle lines, per charge period and rule (as the cascade counts it)."""
    period = ["charge_start", "charge_end", "rule_id"]
    distributed = (
        clients[clients["kind"] == LineKind.IDLE].groupby(period, observed=True)["amount"].sum()
    )
    idle = others["residual_class"] == CostClass.IDLE
    index = pd.MultiIndex.from_frame(others.loc[idle, period])
    given = distributed.reindex(index, fill_value=0).to_numpy(dtype="int64")
    out = others.copy()
    out.loc[idle, "amount"] = out.loc[idle, "amount"].to_numpy(dtype="int64") - given
    return out


def charge_items(
    result: AllocationResult, grain: Grain, clients: pd.DataFrame | None = None
) -> pd.DataFrame:
    """Every micro-unit of the reference total once, per charge period: client rows and what
    no client carries. ``clients`` are the client lines already summed per charge period
    (:class:`ChargeLinesSink`); by default they come from a window-level ``result``. Rows no
    client carries that sum to zero are dropped (they carry no cost); client rows are kept
    (their usage is information)."""
    if clients is None:
        if "windows" in result.lines.columns:
            raise InternalError("a FOCUS export needs window-level lines or charge lines")
        clients = client_charge_lines(result.lines, grain)
    others = _net_of_distributed_idle(_other_charges(result, grain), clients)
    items = _sum_charges(pd.concat([clients, others], ignore_index=True))
    keep = (items["client"] != "") | (items["amount"] != 0)
    return items[keep].reset_index(drop=True)


CHARGE_LINES_SQL = """
    WITH windowed AS (
        SELECT epoch(window_start) AS ws, epoch(window_end) AS we, rule_id, client, source,
               kind, CASE WHEN kind = 'direct' THEN '' ELSE coalesce(key, '') END AS key,
               measure, total_measure, amount
        FROM (SELECT window_start, window_end, rule_id, client, source, kind, key, measure,
                     total_measure, amount FROM lines
              UNION ALL
              SELECT window_start, window_end, rule_id, client, source, kind, key, measure,
                     total_measure, amount FROM t_direct_lines)
    ),
    bucketed AS (
        SELECT *, floor(ws / {seconds}) * {seconds} AS bs FROM windowed
    )
    SELECT CASE WHEN we <= bs + {seconds} THEN bs ELSE ws END AS charge_start,
           CASE WHEN we <= bs + {seconds} THEN bs + {seconds} ELSE we END AS charge_end,
           rule_id, client, source, kind, key,
           sum(amount)::BIGINT AS amount, sum(measure) AS measure,
           sum(total_measure) AS total_measure, sum(we - ws) / 3600.0 AS hours
    FROM bucketed
    GROUP BY ALL
"""
"""One chunk's client lines summed per charge period, in DuckDB where the split ran: the
same arithmetic as :func:`client_charge_lines` (UTC days and hours are whole multiples of
86,400 and 3,600 epoch seconds), without bringing the chunk's window-level lines into pandas."""

GRAIN_SECONDS: dict[str, int] = {"day": 86_400, "hour": 3_600}


@dataclass(frozen=True)
class ChargePart:
    """Sums one chunk's window-level client lines per charge period, where the chunk runs
    (this process or a Dask worker sharing the folder), into a Parquet part file; small and
    picklable, so it travels with the task."""

    path: str
    grain: Grain

    def __call__(self, con: duckdb.DuckDBPyConnection, direct_lines: pd.DataFrame) -> None:
        con.register("t_direct_lines", direct_lines)
        try:
            sql = CHARGE_LINES_SQL.format(seconds=GRAIN_SECONDS[self.grain])
            frame = con.execute(sql).df()
        finally:
            con.unregister("t_direct_lines")
        for col in ("charge_start", "charge_end"):
            frame[col] = pd.to_datetime(frame[col], unit="s", utc=True).astype(
                "datetime64[ns, UTC]"
            )
        frame = frame.assign(residual_class="", reason="")
        frame[[*CHARGE_KEYS, *SUMMED]].to_parquet(self.path, index=False)


class ChargeLinesSink:
    """A lines sink (``tenantcost.engine.LinesSink``) that keeps the client lines summed per
    charge period, never the window-level lines of the whole period: memory stays bounded by
    one chunk, as for ``lines.csv``. Part files go to a hidden folder next to the export;
    :meth:`collect` sums them (a charge period may span two chunks). Use as a context
    manager: the folder is removed on exit, after a failed run too."""

    def __init__(self, folder: Path, grain: Grain) -> None:
        self.folder = folder
        self.grain = grain
        self._done: list[int] = []

    def __enter__(self) -> ChargeLinesSink:
        return self

    def __exit__(self, *exc: object) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)

    def _path(self, index: int) -> Path:
        return self.folder / f"part-{index:05d}.parquet"

    def part(self, index: int) -> ChargePart:
        self.folder.mkdir(parents=True, exist_ok=True)
        return ChargePart(str(self._path(index)), self.grain)

    def chunk_done(self, index: int) -> None:
        self._done.append(index)

    def collect(self) -> pd.DataFrame:
        """The client lines of every chunk, summed per charge period."""
        parts = [pd.read_parquet(self._path(i)) for i in self._done]
        if not parts:
            return client_charge_lines(empty_table(LINE_COLUMNS, LINE_DTYPES), self.grain)
        return _sum_charges(pd.concat(parts, ignore_index=True))


def _json_strings(values: pd.Series) -> pd.Series:
    """JSON string literals for a column, escaped once per distinct value (not per row)."""
    uniques = pd.unique(values)
    return values.map({u: json.dumps(str(u)) for u in uniques})


def _numbers(values: pd.Series) -> pd.Series:
    """JSON numbers (shortest round-trip float text) for a float column without NaN."""
    return pd.Series(np.char.mod("%.15g", values.to_numpy(dtype="float64")), index=values.index)


def _methods(items: pd.DataFrame) -> pd.Series:
    """AllocatedMethodId of each client row (``None`` elsewhere), then spread to the rows of
    the same origin charge no client carries (the unattributed or kept part of a split)."""
    kind, key = items["kind"], items["key"]
    method = pd.Series(
        np.select(
            [kind == LineKind.IDLE, kind == LineKind.DIRECT, key == "even", key == "weights"],
            ["idle-" + key, "direct", "even", "weights"],
            "usage-key",
        ),
        index=items.index,
    )
    client_method = (METHOD_PREFIX + method).where(items["client"] != "")
    origin = ["charge_start", "charge_end", "rule_id", "source", "kind"]
    return client_method.groupby([items[c] for c in origin], observed=True).transform("first")


def _ratios(items: pd.DataFrame, split: pd.Series) -> pd.Series:
    """Each split row's part of its origin charge (the charge period's cost of that source):
    AllocatedRatio, summing to 1 over the origin's rows (0 for an origin that cost nothing)."""
    origin = ["charge_start", "charge_end", "rule_id", "source", "kind"]
    amount = items["amount"].astype("float64").where(split)
    total = amount.groupby([items[c] for c in origin], observed=True).transform("sum")
    return (amount / total.where(total != 0)).fillna(0.0)


def _method_details(items: pd.DataFrame, method: pd.Series) -> pd.Series:
    """AllocatedMethodDetails: ``{"Elements": [{AllocatedRatio, UsageUnit, UsageQuantity,
    x_PoolQuantity}], "x_RuleId": ...}``; the usage entries only where a key measured it."""
    split = method.notna()
    ratio = _numbers(_ratios(items, split))
    measured = split & items["measure"].notna() & (items["key"] != "")
    usage = (
        ', "UsageUnit": '
        + _json_strings(items["key"])
        + ', "UsageQuantity": '
        + _numbers(items["measure"].fillna(0.0))
        + ', "x_PoolQuantity": '
        + _numbers(items["total_measure"].fillna(0.0))
    ).where(measured, "")
    details = (
        '{"Elements": [{"AllocatedRatio": '
        + ratio
        + usage
        + '}], "x_RuleId": '
        + _json_strings(items["rule_id"])
        + "}"
    )
    return details.where(split)


def _descriptions(items: pd.DataFrame) -> pd.Series:
    """ChargeDescription: who carries what, and why, in one line."""
    client, source, kind, key = items["client"], items["source"], items["kind"], items["key"]
    cls, reason = items["residual_class"], items["reason"]
    suffix = " (rule " + items["rule_id"] + ")"
    why = (" (" + reason + ")").where(reason != "", "")
    text = np.select(
        [
            cls == UNATTRIBUTED,
            cls == CostClass.IDLE,
            cls != "",
            kind == LineKind.DIRECT,
            kind == LineKind.IDLE,
        ],
        [
            "unattributed: " + kind + " cost " + source + why,
            "idle capacity kept by the platform",
            cls + ": " + source + why,
            client + ": direct workload " + source,
            client + ": idle capacity, distributed " + key,
        ],
        client + ": " + kind + " cost " + source + ", split by " + key,
    )
    return pd.Series(text, index=items.index) + suffix


def subcategory(category: pd.Series) -> pd.Series:
    """ServiceSubcategory: ``Containers`` for Compute (Kubernetes workloads), else the
    category's own ``Other (<category>)``: tenantcost knows no finer kind of service."""
    return ("Other (" + category + ")").where(category != "Compute", "Containers")


def _billing_period(starts: pd.Series) -> tuple[pd.Series, pd.Series]:
    """The calendar month (UTC) of each charge period's start."""
    month = starts.dt.tz_localize(None).dt.to_period("M")
    begin = month.dt.start_time.dt.tz_localize("UTC")
    return begin, (month + 1).dt.start_time.dt.tz_localize("UTC")


def check_options(version: str, grain: str) -> None:
    """One line naming the option, for a version or grain this module does not write."""
    if version not in FOCUS_VERSIONS:
        raise InputError(f"--focus-version: expected 1.2 or 1.3, got '{version}'")
    if grain not in GRAINS:
        raise InputError(f"--grain: expected day or hour, got '{grain}'")


def focus_frame(
    result: AllocationResult,
    focus: Focus,
    *,
    version: FocusVersion = "1.2",
    grain: Grain = "day",
    clients: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """The whole export as one DataFrame (:func:`focus_rows` of every charge item)."""
    check_options(version, grain)
    return focus_rows(charge_items(result, grain, clients), result.currency, focus, version)


def batches(items: pd.DataFrame, rows: int) -> Iterator[pd.DataFrame]:
    """Charge items in batches of about ``rows`` rows, cut only between charge periods (a
    charge period's rows, hence every origin charge and its ratios, stay in one batch), so a
    large export is built and written a batch at a time."""
    if items.empty:
        yield items
        return
    sizes = items.groupby("charge_start", sort=True, observed=True).size()
    batch_of = (sizes.cumsum() - sizes) // max(rows, 1)
    for _, batch in items.groupby(items["charge_start"].map(batch_of), sort=True):
        yield batch


def focus_rows(
    items: pd.DataFrame, currency: str, focus: Focus, version: FocusVersion
) -> pd.DataFrame:
    """FOCUS rows for charge items (:func:`charge_items`): money columns as int64 micro-units
    (the writers turn them into exact decimals), PricingQuantity in micro-hours, times as UTC
    timestamps, JSON columns as serialised strings, ``None`` for null. Columns in
    :func:`columns_for` order."""
    client = items["client"]
    has_client = client != ""
    method = _methods(items)
    resource_kind = items["kind"].where(
        items["residual_class"].isin(["", UNATTRIBUTED]), items["residual_class"]
    )
    amount = items["amount"].astype("int64")
    billed = amount if focus.billed_cost == "effective" else pd.Series(0, index=items.index)
    listed = items["source"].map(focus.service_categories).astype("object")
    category = listed.where(listed.notna(), focus.service_category)
    bp_start, bp_end = _billing_period(items["charge_start"])
    tags = (
        '{"tenantcost/rule-id": '
        + _json_strings(items["rule_id"])
        + ', "tenantcost/source-kind": '
        + _json_strings(resource_kind)
        + "}"
    )
    null = pd.Series(None, index=items.index, dtype="object")
    columns: dict[str, pd.Series | object] = {
        "BilledCost": billed.astype("int64"),
        "BillingAccountId": focus.billing_account_id,
        "BillingAccountName": focus.billing_account_name,
        "BillingCurrency": currency,
        "BillingPeriodEnd": bp_end,
        "BillingPeriodStart": bp_start,
        "ChargeCategory": "Usage",
        "ChargeClass": null,
        "ChargeDescription": _descriptions(items),
        "ChargeFrequency": np.where(items["kind"] == LineKind.EXTERNAL, "Recurring", "Usage-Based"),
        "ChargePeriodEnd": items["charge_end"],
        "ChargePeriodStart": items["charge_start"],
        "ContractedCost": amount,
        "EffectiveCost": amount,
        "InvoiceId": null,
        "InvoiceIssuerName": focus.invoice_issuer_name,
        "ListCost": amount,
        "PricingQuantity": np.rint(items["hours"].to_numpy() * 10**MINOR_UNIT_EXPONENT).astype(
            "int64"
        ),
        "PricingUnit": "Hours",
        "ProviderName": focus.provider_name,
        "PublisherName": focus.publisher_name,
        "ResourceId": resource_kind + "/" + items["source"],
        "ResourceName": items["source"],
        "ResourceType": resource_kind.map(RESOURCE_TYPES),
        "ServiceCategory": category,
        "ServiceName": items["source"],
        "ServiceSubcategory": subcategory(category),
        "Tags": tags,
        "HostProviderName": focus.host_provider_name,
        "ServiceProviderName": focus.provider_name,
        "AllocatedMethodDetails": _method_details(items, method),
        "AllocatedMethodId": method,
        "AllocatedResourceId": client.where(has_client),
        "AllocatedResourceName": client.where(has_client),
        "AllocatedTags": ('{"tenantcost/client": ' + _json_strings(client) + "}").where(has_client),
        "x_ClientId": client.where(has_client),
        "x_AllocationKey": items["key"].where(items["key"] != ""),
        "x_Measure": items["measure"],
        "x_PoolMeasure": items["total_measure"],
        "x_RuleId": items["rule_id"],
        "x_ResidualClass": items["residual_class"].where(~has_client),
        "x_SourceKind": resource_kind,
        "x_Reason": items["reason"].where(items["reason"] != ""),
    }
    frame = pd.DataFrame(columns, index=items.index)
    frame = frame.rename(
        columns={c: f"x_{c}" for c in ALLOCATED_COLUMNS} if version == "1.2" else {}
    )
    frame = frame[columns_for(version)]
    for col in frame.columns:
        if frame[col].dtype == object:
            frame[col] = frame[col].astype("object").where(frame[col].notna(), None)
    return frame


def _decimal_array(micros: pd.Series) -> pa.Array:
    """int64 micro-units as ``decimal128(38, 6)``: the unscaled value *is* the micro count, so
    the 16-byte little-endian words are the int64 and its sign extension (exact, vectorised)."""
    values = micros.to_numpy(dtype="int64")
    words = np.empty((len(values), 2), dtype="<i8")
    words[:, 0] = values
    words[:, 1] = values >> 63
    return pa.Array.from_buffers(MONEY_TYPE, len(values), [None, pa.py_buffer(words.tobytes())])


def to_arrow(frame: pd.DataFrame) -> pa.Table:
    """The export as an Arrow table: decimals exact, times as UTC timestamps, strings."""
    arrays: dict[str, pa.Array] = {}
    for col in frame.columns:
        if col in DECIMAL_COLUMNS:
            arrays[col] = _decimal_array(frame[col])
        elif col in TIME_COLUMNS:
            arrays[col] = pa.array(frame[col], type=pa.timestamp("us", tz="UTC"))
        elif col in FLOAT_COLUMNS:
            arrays[col] = pa.array(frame[col], type=pa.float64(), from_pandas=True)
        else:
            arrays[col] = pa.array(frame[col], type=pa.string(), from_pandas=True)
    return pa.table(arrays)


def to_csv_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """The export with exact decimal strings and ISO 8601 UTC times, for CSV. Text cells are
    written as they are, unlike every other CSV's (:mod:`tenantcost.csv_cells`): FinOps tools
    read this file, and a FOCUS value must be exact."""
    out = frame.copy()
    for col in DECIMAL_COLUMNS:
        out[col] = micros_to_decimal_strings(frame[col])
    for col in TIME_COLUMNS:
        out[col] = frame[col].dt.strftime(ISO_Z_FORMAT)
    return out


def write_focus(frames: Iterable[pd.DataFrame], out: Path) -> int:
    """Write the export's batches to ``out`` (Parquet or CSV by its suffix); return the row
    count. The file is written next to ``out`` and renamed at the end, so a failed run never
    leaves half a file under the name finance loads."""
    import pyarrow.parquet as pq

    suffix = out.suffix.lower()
    if suffix not in (".parquet", ".csv"):
        raise InputError("--out: the FOCUS file must end in .parquet or .csv", file=str(out))
    partial = out.with_name(f".{out.name}.partial")
    count = 0
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        writer: pq.ParquetWriter | None = None
        for frame in frames:
            if suffix == ".parquet":
                table = to_arrow(frame)
                writer = writer or pq.ParquetWriter(partial, table.schema)
                writer.write_table(table)
            else:
                to_csv_frame(frame).to_csv(partial, index=False, mode="a" if count else "w",
                                           header=not count)  # fmt: skip
            count += len(frame)
        if writer is not None:
            writer.close()
        partial.replace(out)
    except OSError as exc:
        raise InputError(f"cannot write the FOCUS file: {exc.strerror}", file=str(out)) from None
    finally:
        partial.unlink(missing_ok=True)
    return count
