"""Fold chunk outputs, in time order, into one allocation result.

Window-level lines are kept as they come (small runs and tests); period lines are summed per
client and source in batches of :data:`FOLD_ROWS` rows, so memory stays bounded however many
chunks a period has. Both ways give the same figures: every sum is over int64 micro-units,
measures included (as exact limbs, ``tenantcost.split.MEASURE_LIMB``), so no figure depends
on the chunk length or on the batches.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

import numpy as np
import pandas as pd

from tenantcost.engine.chunks import ChunkOutput, LinesSink
from tenantcost.kinds import Detail, LineKind
from tenantcost.plan import Plan
from tenantcost.result import AllocationResult
from tenantcost.split import (
    DAY_LINE_COLUMNS,
    MEASURE_LIMB,
    MEASURE_LIMB_COLUMNS,
    MEASURE_SCALE,
    POOL_CLIENT_COLUMNS,
    DayLines,
)
from tenantcost.tables import (
    LINE_DTYPES,
    PERIOD_LINE_COLUMNS,
    PERIOD_LINE_DTYPES,
    UNATTRIBUTED_DTYPES,
    empty_table,
)
from tenantcost.windows import warn_usage_without_cost

POOL_CLIENT_DTYPES = {
    "rule_id": "str", "kind": "str", "source": "str", "key": "str", "min_clients": "int64"
}  # fmt: skip

FOLD_ROWS = 500_000
"""Per-chunk period lines are folded into the running totals once they pass this many rows
(a few chunks of 10,000 clients: bounded memory without a pandas group-by per chunk)."""

GROUP_KEYS = ["rule_id", "client", "source", "kind", "key"]
LIMB_DTYPES = {column: "int64" for column in MEASURE_LIMB_COLUMNS}


def _limbs_of_direct(direct: pd.DataFrame) -> pd.DataFrame:
    """The plan's direct lines as period-line parts: no key, so all-zero measure limbs."""
    frame = direct.drop(columns=["measure", "total_measure", "share"]).assign(windows=1)
    return frame.assign(**{column: 0 for column in MEASURE_LIMB_COLUMNS})


def _ns_windows(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with its window columns as ``datetime64[ns, UTC]``."""
    wrong = [c for c in ("window_start", "window_end") if frame[c].dtype != "datetime64[ns, UTC]"]
    if not wrong:
        return frame
    return frame.astype(dict.fromkeys(wrong, "datetime64[ns, UTC]"))


def sum_period_parts(parts: list[pd.DataFrame]) -> pd.DataFrame:
    """Sum per-chunk period lines (or earlier sums of them) into one row per rule, client,
    source, kind and key, measures still as exact limbs. Integer sums only, so the result
    does not depend on how the parts were batched."""
    frames = [p for p in parts if not p.empty]
    if not frames:
        return pd.DataFrame(
            {c: pd.Series(dtype=t) for c, t in {**PERIOD_LINE_DTYPES, **LIMB_DTYPES}.items()}
        ).drop(columns=["measure", "total_measure", "share"])
    # One time unit for every part: DuckDB hands back microseconds, the plan holds
    # nanoseconds, and a concat of both is an object column (a slow, Python-level min/max).
    frames = [_ns_windows(f) for f in frames]
    lines = pd.concat(frames, ignore_index=True)
    lines["key"] = lines["key"].fillna("")
    sums = {column: (column, "sum") for column in MEASURE_LIMB_COLUMNS}
    return (
        lines.groupby(GROUP_KEYS, sort=False, observed=True)
        .agg(
            window_start=("window_start", "min"),
            window_end=("window_end", "max"),
            amount=("amount", "sum"),
            windows=("windows", "sum"),
            **sums,
        )
        .reset_index()
    )


def _limb_value(frame: pd.DataFrame, name: str) -> pd.Series:
    """``{name}_2 * B^2 + {name}_1 * B + {name}_0`` (B = ``MEASURE_LIMB``) in micro-units of
    the key's unit, as a float: each product by a power of two is exact and the float only
    rounds in the two additions, the same way for the same integers."""
    limb = float(MEASURE_LIMB)
    two = frame[f"{name}_2"].to_numpy(dtype="float64") * (limb * limb)
    one = frame[f"{name}_1"].to_numpy(dtype="float64") * limb
    return pd.Series(two + one + frame[f"{name}_0"].to_numpy(dtype="float64"), index=frame.index)


def fold_period_lines(parts: list[pd.DataFrame]) -> pd.DataFrame:
    """Sum per-chunk period lines into one row per rule, client, source, kind and key, with
    measure, total measure and share derived once from the exact sums."""
    grouped = sum_period_parts(parts)
    scale = float(MEASURE_SCALE)
    grouped["measure"] = _limb_value(grouped, "measure") / scale
    grouped["total_measure"] = _limb_value(grouped, "total") / scale
    direct = grouped["kind"] == LineKind.DIRECT
    grouped.loc[direct, ["measure", "total_measure"]] = np.nan  # no key, no measure
    with np.errstate(divide="ignore", invalid="ignore"):
        share = grouped["measure"] / grouped["total_measure"].where(grouped["total_measure"] != 0)
    grouped["share"] = np.where(direct, 1.0, share)
    out = grouped[PERIOD_LINE_COLUMNS].astype(PERIOD_LINE_DTYPES)
    order = ["client", "kind", "source", "rule_id", "key"]
    return out.sort_values(order, kind="mergesort").reset_index(drop=True)


class Fold:
    """The running state of a run: lines, unattributed cost, usage rows, orphan windows."""

    def __init__(self, plan: Plan, detail: Detail) -> None:
        self.plan = plan
        self.detail = detail
        self.line_parts: list[pd.DataFrame] = []
        self.running = sum_period_parts([])
        self.unattributed_parts: list[pd.DataFrame] = [plan.unattributed_direct]
        self.orphan_count = 0
        self.orphan_first: pd.Series | None = None
        self.usage_rows = 0
        self.pool_client_parts: list[pd.DataFrame] = []
        self.day_parts: list[DayLines] | None = None

    def add(self, out: ChunkOutput) -> None:
        """Take in one chunk's output (chunks must come in order)."""
        self.usage_rows += out.usage_rows
        if not out.orphans.empty:
            self.orphan_first = self.orphan_first if self.orphan_count else out.orphans.iloc[0]
            self.orphan_count += len(out.orphans)
        self.line_parts.append(out.lines)
        if self.detail == Detail.PERIOD and sum(len(p) for p in self.line_parts) > FOLD_ROWS:
            # Fold in batches: bounded memory without a pandas group-by per chunk.
            self.running = sum_period_parts([self.running, *self.line_parts])
            self.line_parts = []
        self.unattributed_parts.append(out.unattributed)
        if out.day_lines is not None:
            self.day_parts = [*(self.day_parts or []), out.day_lines]
        if not out.pool_clients.empty:
            self.pool_client_parts.append(out.pool_clients)

    def lines(self) -> pd.DataFrame:
        """The chunks' lines and the plan's direct lines, at the run's detail."""
        direct = self.plan.direct_lines
        if self.detail == Detail.PERIOD:
            return fold_period_lines([self.running, *self.line_parts, _limbs_of_direct(direct)])
        parts = [p.astype(LINE_DTYPES) for p in self.line_parts if not p.empty]
        lines = pd.concat([*parts, direct], ignore_index=True).astype(LINE_DTYPES)
        return lines.sort_values(
            ["window_start", "client", "kind", "source"], kind="mergesort"
        ).reset_index(drop=True)

    def unattributed(self) -> pd.DataFrame:
        """Every chunk's unattributed cost and the plan's direct rows without a client."""
        parts = [p for p in self.unattributed_parts if not p.empty]
        return (
            pd.concat(parts or [self.plan.unattributed_direct], ignore_index=True)
            .astype(UNATTRIBUTED_DTYPES)
            .sort_values(["window_start", "source", "cause"], kind="mergesort")
            .reset_index(drop=True)
        )

    def pool_clients(self) -> pd.DataFrame:
        """Per pool source of the period, the fewest clients one window split it among.

        The minimum of the chunks' minima; a source of the plan no chunk split among clients
        gets 0, so a reader of the table never mistakes a missing row for a large pool.
        """
        keys = ["rule_id", "kind", "source", "key"]
        plan = self.plan.tables
        idle = plan.idle_pools.assign(
            kind=LineKind.IDLE.value, source="idle", key=plan.idle_pools["method"]
        )
        sources = (
            pd.concat([plan.pools[keys], idle[keys]], ignore_index=True)
            .astype(str)
            .drop_duplicates()
        )
        counts = pd.concat(
            [empty_table(POOL_CLIENT_COLUMNS, POOL_CLIENT_DTYPES), *self.pool_client_parts],
            ignore_index=True,
        ).astype(POOL_CLIENT_DTYPES)
        least = counts.groupby(keys, observed=True)["min_clients"].min().reset_index()
        out = sources.merge(least, on=keys, how="outer")
        out["min_clients"] = out["min_clients"].fillna(0)
        return (
            out.astype(POOL_CLIENT_DTYPES)
            .sort_values(keys, kind="mergesort")
            .reset_index(drop=True)[POOL_CLIENT_COLUMNS]
        )

    def line_days(self) -> pd.DataFrame | None:
        """The chunks' day lines and the plan's direct lines, per client, source and UTC day;
        None unless the chunks were asked for them. A day cut by a chunk boundary has a row
        per chunk: not summed here, since every reader sums per line (``tenantcost.convert``).
        The labels are categoricals built from integer codes and ``line`` numbers each
        (rule, client, source, kind, key): a million rows of labels as strings, and a
        group-by on five of them, cost more than the conversion itself."""
        if self.day_parts is None:
            return None
        direct = self.plan.direct_lines
        direct_days = direct.assign(
            key=direct["key"].fillna(""),
            day=direct["window_start"].dt.tz_convert("UTC").dt.tz_localize(None).dt.normalize(),
        )[DAY_LINE_COLUMNS]
        labelled = [direct_days, *(p.idle[DAY_LINE_COLUMNS] for p in self.day_parts
                                   if not p.idle.empty)]  # fmt: skip
        keyed = [p.keyed for p in self.day_parts if not p.keyed.empty]
        specs = (
            pd.concat([p.specs for p in self.day_parts], ignore_index=True)
            .drop_duplicates("spec")
            .reset_index(drop=True)
        )
        return coded_day_lines(labelled, keyed, specs)

    def result(self, chunks: int) -> AllocationResult:
        """The allocation result of the folded run."""
        plan = self.plan
        hours = (plan.cost_windows["window_end"] - plan.cost_windows["window_start"]).sum()
        return AllocationResult(
            currency=plan.ruleset.currency,
            period=plan.period,
            rules=plan.rules_used,
            key_override=plan.key_label,
            reference_total=plan.cost_total + plan.external_total + plan.billed_pool_total,
            billed_pool_total=plan.billed_pool_total,
            cost_total=plan.cost_total,
            external_total=plan.external_total,
            lines=self.lines(),
            unattributed=self.unattributed(),
            residual=plan.residual,
            exclusions=plan.exclusions,
            unclassified=plan.unclassified,
            windows=len(plan.cost_windows),
            hours=float(hours / pd.Timedelta(hours=1)),
            detail=self.detail,
            usage_rows=self.usage_rows,
            chunks=chunks,
            pool_clients=self.pool_clients(),
            line_days=self.line_days(),
        )


def fold_chunks(
    plan: Plan,
    detail: Detail,
    outputs: Iterable[ChunkOutput],
    total: int,
    sink: LinesSink | None = None,
    progress: Callable[[int, int], None] | None = None,
    others: Sequence[Plan] = (),
) -> list[AllocationResult]:
    """Fold ``total`` chunk outputs (in chunk order) into the result of ``plan`` and of each
    of the ``others`` (their outputs ride in ``ChunkOutput.also``, in order); tell ``sink``
    about each finished chunk and ``progress`` about each step; warn once about usage
    windows without cost."""
    folds = [Fold(plan, detail), *(Fold(other, detail) for other in others)]
    for done, out in enumerate(outputs, start=1):
        for fold, part in zip(folds, (out, *out.also), strict=True):
            fold.add(part)
        if sink is not None:
            sink.chunk_done(out.index)
        if progress is not None:
            progress(done, total)
    warn_usage_without_cost(folds[0].orphan_count, folds[0].orphan_first)
    return [fold.result(chunks=total) for fold in folds]


_LABELS = ["rule_id", "source", "kind", "key"]


def coded_day_lines(
    labelled: list[pd.DataFrame], keyed: list[pd.DataFrame], specs: pd.DataFrame
) -> pd.DataFrame:
    """Day lines (:data:`DAY_LINE_COLUMNS` plus ``line``) from frames with their labels and
    keyed rows labelled by ``spec`` (``specs``: each spec's labels), without materialising
    a label string per row: every row gets a label id (one per distinct rule, source, kind
    and key), the labels are categoricals of those ids, and ``line`` is the factorised
    (label id, client) pair, numbered by first appearance."""
    labelled = [f for f in labelled if not f.empty]
    distinct = [_distinct_labels(f) for f in labelled]  # each frame's few label tuples
    table = pd.concat([specs[_LABELS].astype("str"), *(d for d, _ in distinct)],
                      ignore_index=True)  # fmt: skip
    label_of, names = pd.MultiIndex.from_frame(table).factorize()
    ids, at = [], len(specs)
    spec_ids = pd.Series(label_of[: len(specs)], index=specs["spec"].to_numpy())
    for frame in keyed:
        ids.append(spec_ids.reindex(frame["spec"].to_numpy()).to_numpy())
    for found, row_codes in distinct:
        ids.append(label_of[at : at + len(found)][row_codes])
        at += len(found)
    parts = [*keyed, *labelled]
    if not parts:
        return pd.DataFrame({c: pd.Series(dtype="str") for c in DAY_LINE_COLUMNS}).assign(
            day=pd.Series(dtype="datetime64[ns]"), amount=pd.Series(dtype="int64"),
            line=pd.Series(dtype="int64"),
        )  # fmt: skip
    label_id = np.concatenate(ids).astype("int64")
    client_codes, clients = pd.factorize(
        pd.concat([f["client"].astype("str") for f in parts], ignore_index=True)
    )
    line, _ = pd.factorize(label_id * max(len(clients), 1) + client_codes)
    out = {
        name: pd.Categorical.from_codes(*_column_codes(names, i, label_id))
        for i, name in enumerate(_LABELS)
    }
    out["client"] = pd.Categorical.from_codes(client_codes, clients.astype("str"))
    frame = pd.DataFrame(out)
    frame["day"] = np.concatenate(
        [pd.to_datetime(f["day"]).to_numpy(dtype="datetime64[ns]") for f in parts]
    )
    frame["amount"] = np.concatenate([f["amount"].to_numpy(dtype="int64") for f in parts])
    frame["line"] = line.astype("int64")
    return frame[[*DAY_LINE_COLUMNS, "line"]]


def _distinct_labels(frame: pd.DataFrame) -> tuple[pd.DataFrame, np.ndarray]:
    """``frame``'s distinct label tuples and, per row, the position of its tuple among them:
    one factorisation per column and one of their combined integer, not of string tuples."""
    combined = np.zeros(len(frame), dtype="int64")
    for column in _LABELS:
        codes, uniques = pd.factorize(frame[column].astype("str"))
        combined = combined * (len(uniques) + 1) + codes
    row_codes, _ = pd.factorize(combined)  # numbered by first appearance
    first_rows = np.unique(row_codes, return_index=True)[1]
    return frame[_LABELS].iloc[first_rows].astype("str").reset_index(drop=True), row_codes


def _column_codes(
    names: pd.MultiIndex, level: int, label_id: np.ndarray
) -> tuple[np.ndarray, pd.Index]:
    """The codes (per row) and categories of one label column of the label ids."""
    codes, categories = pd.factorize(names.get_level_values(level))
    return codes[label_id], pd.Index(categories).astype("str")
