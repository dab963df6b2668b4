"""What a usage batch must agree with in the store, checked by ``ingest`` before it commits.

A record the store accepts must be usable by ``run``, or a month can be poisoned: open, yet
impossible to run or close. The readers refuse what is wrong with a record alone (the same
checks as ``allocate``: :func:`tenantcost.readers.usage.check_usage_keys`). What is wrong with
a record only next to what the store already holds is checked here, under the batch's write
lock, with what the store holds at that moment:

* **Stored cost windows.** A usage window must equal a stored cost window or nest in one,
  as ``run`` requires (:func:`tenantcost.windows.first_misaligned`): a 2-hour window is
  refused where hourly costs are stored for those hours. Hours without stored costs are not
  checked (costs may come later, in any window length).
* **Months.** ``run`` reads a month's windows whole, so a window across a UTC month boundary
  (a weekly window from 2026-10-29, say) would count in no month: refused, for costs too.
* **Rule versions.** Where stored rule versions are in force for a window, a service that
  none of them names (no shared workload of theirs has it, no billed entry lists it in its
  ``services``, and externals split only over shared services) is refused: its usage
  would be ignored and ``run`` refuses it. Where no stored version is in force yet (no
  rules loaded, or hours before the first version), the batch is accepted with one warning
  (:attr:`StoreView.warnings`).
* **Key columns.** ``run`` checks every stored version's keys against the usage's metric
  columns, so a batch without a column some stored version splits by is refused.
* **Overlapping usage windows.** Two different windows of one service that overlap (an hourly
  row stored, a 15-minute row of the same hour sent later) would count the same time twice,
  and ``run`` refuses them; a ``replace`` batch does not clear the other window's cell, so the
  batch is refused, naming the stored batch to withdraw first.

What only later can be known (costs ingested afterwards in finer windows, a rule version
loaded afterwards) is repaired by withdrawing the batch (``tenantcost batch withdraw``).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

import duckdb
import numpy as np
import pandas as pd
from sqlalchemy import Connection, func, select

from tenantcost.config.rules import RuleVersion as RuleVersionModel
from tenantcost.config.rules import parse_rules
from tenantcost.errors import InputError
from tenantcost.readers.canonical import split_origin
from tenantcost.store.models import Batch, BatchCell, RuleVersion, table
from tenantcost.suggest import did_you_mean
from tenantcost.timefmt import iso_z_seconds, window_text
from tenantcost.usage_source import UsageSource, timestamp_literal
from tenantcost.windows import first_misaligned, misalignment

WINDOW = ["window_start", "window_end"]


@dataclass(frozen=True)
class StoredVersion:
    """A stored rule version, as far as usage must agree with it."""

    rule_id: str
    effective_from: pd.Timestamp
    services: tuple[str, ...]
    """The services its usage splits (``RuleVersion.known_services``): its shared workloads'
    (its externals split over these only), then its billed entries' ``services``."""
    key_columns: tuple[tuple[str, str], ...]
    """``(path, column)`` of each key naming a usage column."""


@dataclass
class StoreView:
    """What the store holds that a usage batch's windows and services must agree with,
    read once per batch; :meth:`check_chunk` runs per day of the batch."""

    cost_windows: pd.DataFrame
    """Distinct stored cost windows meeting the batch's span (``window_start, window_end,
    batch``), sorted; empty when they overlap each other (``run`` refuses those costs)."""
    usage_cells: pd.DataFrame
    """Stored usage cells meeting the batch's span (``window_start, window_end, key,
    batch``), with the cells of the batch's days checked so far (batch ``""``)."""
    versions: list[StoredVersion]
    unchecked: int = 0
    first_unchecked: pd.Timestamp | None = field(default=None)

    def check_chunk(
        self, con: duckdb.DuckDBPyConnection, source: UsageSource, cells: pd.DataFrame
    ) -> None:
        """Check one materialised chunk (``chunk_usage``) whose distinct (window, service)
        are ``cells`` (``window_start, window_end, key``)."""
        cells = _utc_windows(cells)
        windows = cells[WINDOW].drop_duplicates()
        _refuse_across_months(windows, lambda w: _first_row(con, source, w), "usage")
        self._check_cost_windows(con, source, windows)
        self._check_services(con, source, cells)
        self._check_overlaps(con, source, cells)

    def warnings(self) -> list[str]:
        """One warning for the usage no stored rule version could check (none if all was)."""
        if not self.unchecked or self.first_unchecked is None:
            return []
        none = (
            "the store holds no rule version"
            if not self.versions
            else ("no stored rule version is in force")
        )
        return [
            f"{none} for {self.unchecked} (window, service) cell(s) of this usage (the first "
            f"from {iso_z_seconds(self.first_unchecked)}): their services are checked only "
            "when `tenantcost run` reads them; load the rules first (`tenantcost rules load "
            "RULES.yaml`), or withdraw the batch if the run refuses it"
        ]  # fmt: skip

    def _check_cost_windows(
        self, con: duckdb.DuckDBPyConnection, source: UsageSource, windows: pd.DataFrame
    ) -> None:
        found = first_misaligned(windows, self.cost_windows)
        if found is None:
            return
        usage, cost = found
        text = misalignment(usage, cost, "", f" (stored costs, batch {cost.batch[:12]})")
        file, where = split_origin(_first_row(con, source, usage))
        raise InputError(f"{text}; `run` would refuse it", file=file, where=where)

    def _check_overlaps(
        self, con: duckdb.DuckDBPyConnection, source: UsageSource, cells: pd.DataFrame
    ) -> None:
        """No window of the chunk overlaps another window of its service, stored or sent
        (equal windows are one cell: ``sum`` adds to it, ``replace`` replaces it)."""
        known = pd.concat([self.usage_cells, cells.assign(batch="")], ignore_index=True)
        con.register("t_ingest_new_cells", cells[[*WINDOW, "key"]])
        con.register("t_ingest_known_cells", known)
        try:
            found = con.execute(
                """
                SELECT n.window_start, n.window_end, n.key, o.window_start, o.window_end,
                       o.batch
                FROM t_ingest_new_cells n JOIN t_ingest_known_cells o
                  ON n.key = o.key AND n.window_start < o.window_end
                 AND o.window_start < n.window_end
                 AND NOT (n.window_start = o.window_start AND n.window_end = o.window_end)
                ORDER BY n.window_start, n.key, n.window_end, o.window_start LIMIT 1
                """
            ).df()
        finally:
            con.unregister("t_ingest_new_cells")
            con.unregister("t_ingest_known_cells")
        self.usage_cells = known
        if not found.empty:
            self._raise_overlap(con, source, found.iloc[0])

    def _raise_overlap(
        self, con: duckdb.DuckDBPyConnection, source: UsageSource, row: pd.Series
    ) -> None:
        new, old = (
            pd.Series({"window_start": _utc(row.iloc[a]), "window_end": _utc(row.iloc[a + 1])})
            for a in (0, 3)
        )
        batch = str(row.iloc[5])
        held = (
            f"the window {window_text(old.window_start, old.window_end)} of stored batch "
            f"{batch[:12]} (withdraw it first: `tenantcost batch withdraw {batch} --reason "
            "TEXT`)"
            if batch
            else f"its window {window_text(old.window_start, old.window_end)} in this usage"
        )
        file, where = split_origin(_first_row(con, source, new, service=str(row.iloc[2])))
        raise InputError(
            f"usage window {window_text(new.window_start, new.window_end)} of service "
            f"'{row.iloc[2]}' overlaps {held}: the same hours would be counted twice and `run` "
            "would refuse them; give each service's usage in one window length",
            file=file,
            where=where,
        )

    def _check_services(
        self, con: duckdb.DuckDBPyConnection, source: UsageSource, cells: pd.DataFrame
    ) -> None:
        """Each (window, service) against the versions in force during the window: from
        the one in force at its start to the last one starting before its end."""
        effective = pd.DatetimeIndex([v.effective_from for v in self.versions]).as_unit("ns")
        starts = pd.DatetimeIndex(cells["window_start"]).as_unit("ns")
        ends = pd.DatetimeIndex(cells["window_end"]).as_unit("ns")
        first = np.searchsorted(effective.asi8, starts.asi8, side="right") - 1
        last = np.searchsorted(effective.asi8, ends.asi8, side="left") - 1
        covered = last >= 0
        if (~covered).any():
            self.unchecked += int((~covered).sum())
            earliest = starts[~covered].min()
            if self.first_unchecked is None or earliest < self.first_unchecked:
                self.first_unchecked = earliest
        if not covered.any():
            return
        services, code = np.unique(cells["key"].astype(str).to_numpy(), return_inverse=True)
        named = np.array([[s in v.services for s in services] for v in self.versions])
        so_far = np.vstack([np.zeros((1, len(services)), dtype=np.int64), named.cumsum(axis=0)])
        low = first.clip(0, None)
        named_in_force = so_far[last + 1, code] - so_far[low, code] > 0
        bad = covered & ~named_in_force
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            self._raise_unnamed(con, source, cells.iloc[i], range(int(low[i]), int(last[i]) + 1))

    def _raise_unnamed(
        self, con: duckdb.DuckDBPyConnection, source: UsageSource, cell: pd.Series, in_force: range
    ) -> None:
        versions = [self.versions[v] for v in in_force]
        shown = "; ".join(f"'{v.rule_id}': {', '.join(v.services) or 'none'}" for v in versions)
        known = sorted({s for v in versions for s in v.services})
        where = _first_row(con, source, cell, service=str(cell.key))
        file, place = split_origin(where)
        raise InputError(
            f"service '{cell.key}'{did_you_mean(str(cell.key), known)} is not named by any "
            f"shared workload or billed entry of the rule version(s) in force for window "
            f"{window_text(cell.window_start, cell.window_end)} ({shown}); its usage would "
            "be ignored and `run` would refuse it: correct the service, or load a rule version "
            "that names it first",
            file=file,
            where=place,
            column="service",
        )


def read_view(conn: Connection, start: pd.Timestamp, end: pd.Timestamp) -> StoreView:
    """The stored cost windows and usage cells meeting ``[start, end)``, and every stored
    rule version."""
    return StoreView(
        _cost_windows(conn, start, end), _usage_cells(conn, start, end), _stored_versions(conn)
    )


def check_key_columns(view: StoreView, metrics: list[str], origin: str) -> None:
    """Every usage column a stored version splits by is a metric column of the batch."""
    columns = ", ".join(metrics) or "(none)"
    for version in view.versions:
        for where, column in version.key_columns:
            if column not in metrics:
                raise InputError(
                    f"stored rule version '{version.rule_id}' splits by usage column "
                    f"'{column}' ({where}), which this usage lacks{did_you_mean(column, metrics)}"
                    f"; its metric columns are {columns}; `run` would refuse it",
                    file=origin,
                    column=column,
                )


def refuse_costs_across_months(costs: pd.DataFrame) -> None:
    """Cost rows whose window crosses a UTC month boundary (``origin`` names the row)."""
    _refuse_across_months(costs, lambda row: str(row.origin), "cost")


def _refuse_across_months(
    frame: pd.DataFrame, origin_of: Callable[[pd.Series], str], what: str
) -> None:
    """The first window of ``frame`` that crosses a UTC month boundary is an error."""
    if frame.empty:
        return
    starts = pd.DatetimeIndex(frame["window_start"]).tz_convert("UTC").tz_localize(None)
    ends = pd.DatetimeIndex(frame["window_end"]).tz_convert("UTC").tz_localize(None)
    next_month = (starts.to_numpy().astype("datetime64[M]") + 1).astype("datetime64[ns]")
    across = ends.to_numpy() > next_month
    if not across.any():
        return
    i = int(np.flatnonzero(across)[0])
    row = frame.iloc[i]
    file, where = split_origin(origin_of(row))
    boundary = pd.Timestamp(next_month[i], tz="UTC")
    raise InputError(
        f"{what} window {window_text(row.window_start, row.window_end)} crosses the month "
        f"boundary {iso_z_seconds(boundary)}: `run` allocates one month at a time and would "
        f"count it in neither; split it at {iso_z_seconds(boundary)}",
        file=file,
        where=where,
        column="window_end",
    )


def _first_row(
    con: duckdb.DuckDBPyConnection, source: UsageSource, window: pd.Series, service: str = ""
) -> str:
    """``file:row n`` of the chunk's first row with ``window`` (and ``service``)."""
    condition = (
        f"window_start = {timestamp_literal(window.window_start)} "
        f"AND window_end = {timestamp_literal(window.window_end)}"
    )
    if service:
        condition += " AND service = '" + service.replace("'", "''") + "'"
    return source.first_row(con, condition)


def _utc_windows(frame: pd.DataFrame) -> pd.DataFrame:
    out = frame.copy()
    for column in WINDOW:
        out[column] = pd.to_datetime(out[column], utc=True).astype("datetime64[ns, UTC]")
    return out.sort_values([*WINDOW, *(c for c in ("key",) if c in out)]).reset_index(drop=True)


def _cost_windows(conn: Connection, start: pd.Timestamp, end: pd.Timestamp) -> pd.DataFrame:
    b, c = table(Batch).c, table(BatchCell).c
    rows = conn.execute(
        select(c.window_start, c.window_end, func.min(b.uid))
        .join_from(table(BatchCell), table(Batch), b.id == c.batch_id)
        .where(b.kind == "costs", b.status == "committed")
        .where(c.window_start < _dt(end), c.window_end > _dt(start))
        .group_by(c.window_start, c.window_end)
    ).all()
    frame = _utc_windows(pd.DataFrame([tuple(r) for r in rows], columns=[*WINDOW, "batch"]))
    overlapping = (frame["window_start"] < frame["window_end"].shift(1)).any()
    return frame.iloc[0:0] if overlapping else frame


def _usage_cells(conn: Connection, start: pd.Timestamp, end: pd.Timestamp) -> pd.DataFrame:
    b, c = table(Batch).c, table(BatchCell).c
    rows = conn.execute(
        select(c.window_start, c.window_end, c.key, func.max(b.uid))
        .join_from(table(BatchCell), table(Batch), b.id == c.batch_id)
        .where(b.kind == "usage", b.status == "committed")
        .where(c.window_start < _dt(end), c.window_end > _dt(start))
        .group_by(c.window_start, c.window_end, c.key)
    ).all()
    frame = pd.DataFrame([tuple(r) for r in rows], columns=[*WINDOW, "key", "batch"])
    return _utc_windows(frame.astype({"key": "str", "batch": "str"}))


def _stored_versions(conn: Connection) -> list[StoredVersion]:
    v = table(RuleVersion).c
    rows = conn.execute(select(v.rule_id, v.content).order_by(v.effective_from)).all()
    return [_version(str(row.rule_id), str(row.content)) for row in rows]  # one per version


def _version(rule_id: str, content: str) -> StoredVersion:
    version: RuleVersionModel = parse_rules(json.loads(content), origin=rule_id).rules[0]
    return StoredVersion(
        rule_id,
        pd.Timestamp(version.effective_from).tz_convert("UTC"),
        tuple(version.known_services),
        tuple(version.key_columns),
    )


def _utc(value: object) -> pd.Timestamp:
    return pd.Timestamp(value).tz_convert("UTC")


def _dt(ts: pd.Timestamp) -> datetime:
    return pd.Timestamp(ts).tz_convert("UTC").to_pydatetime()
