"""Usage with gauges: counters as read, plus each gauge integrated per hour from its samples.

The split, the roll-up to cost windows, the coverage and every report read one usage table per
chunk (``chunk_usage``). A gauge's samples are not rows of it: they are levels at instants, and
their hourly measure depends on the samples around the hour (the one before it holds into it,
the next one ends it). So :class:`GaugedUsage` wraps the counters' source and, for each chunk,
integrates the samples that can reach it (from ``start - stale_after``) with
:func:`tenantcost.gauges.integrate` and joins the hourly measures to the counters' rows: one
table, counters 0 where only a gauge has a row and gauges 0 where only counters have one. A
rule then keys a pool by a gauge like by any column, and splits it exactly.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from pathlib import Path

import duckdb
import pandas as pd

from tenantcost.config.metrics import Metric
from tenantcost.duck import quote
from tenantcost.errors import InputError, warn
from tenantcost.gauges import integrate, stale_warning
from tenantcost.readers.costs import expand_paths
from tenantcost.readers.samples import empty_samples, is_samples_file, read_samples
from tenantcost.tables import USAGE_KEY_COLUMNS
from tenantcost.usage_source import UsageSource, is_url, open_usage
from tenantcost.windows import Period

_names = itertools.count(1)
_EMPTY_COUNTERS = (
    "(SELECT NULL::TIMESTAMPTZ AS window_start, NULL::TIMESTAMPTZ AS window_end, "
    "NULL::VARCHAR AS service, NULL::VARCHAR AS client WHERE false)"
)


class GaugedUsage(UsageSource):
    """Counters (``inner``, or none) and gauge samples, read as one usage source."""

    def __init__(
        self,
        inner: UsageSource | None,
        samples: pd.DataFrame,
        gauges: dict[str, Metric],
        origin: str,
        period: Period | None = None,
    ) -> None:
        """``samples``: ``metric, service, client, t_us, value, rank`` (``rank``: the batch
        order, a later one re-sending an instant wins)."""
        self.inner = inner
        self.samples = samples
        self.gauges = dict(sorted(gauges.items()))
        self.period = period
        self.origin = inner.origin if inner is not None else origin
        counters = inner.metrics if inner is not None else []
        clash = [c for c in counters if c in self.gauges]
        if clash:
            raise InputError(
                f"'{clash[0]}' is declared a gauge (metrics:) but given as window usage "
                "(window_start, window_end); a gauge's file has a time column",
                file=self.origin,
                column=clash[0],
            )
        self.metrics = [*counters, *self.gauges]
        self.counters = counters

    # ------------------------------------------------------------------ the chunk

    def materialise(
        self, con: duckdb.DuckDBPyConnection, start: pd.Timestamp, end: pd.Timestamp
    ) -> int:
        if self.period is not None:
            start, end = max(start, self.period.start), min(end, self.period.end)
        if self.inner is not None:
            self.inner.materialise(con, start, end)
        else:
            con.execute(
                "CREATE OR REPLACE TEMP TABLE chunk_usage (window_start TIMESTAMPTZ, "
                "window_end TIMESTAMPTZ, service VARCHAR, client VARCHAR)"
            )
        table = self._integrate(con, start, end)
        columns = [str(r[0]) for r in con.execute("DESCRIBE chunk_usage").fetchall()]
        con.execute(
            "CREATE OR REPLACE TEMP TABLE chunk_usage_gauged AS "
            + self._joined("chunk_usage", columns, table)
        )
        con.execute("DROP TABLE chunk_usage")
        con.execute(f"DROP TABLE {table}")
        con.execute("ALTER TABLE chunk_usage_gauged RENAME TO chunk_usage")
        rows = con.execute("SELECT count(*) FROM chunk_usage").fetchall()
        return int(rows[0][0]) if rows else 0

    def _joined(self, counters: str, columns: list[str], gauges: str) -> str:
        """The counters' rows (``counters``, a table or a parenthesised query with
        ``columns``) joined with the gauges' hourly rows (table ``gauges``)."""
        extra = [c for c in columns if c not in (*USAGE_KEY_COLUMNS, *self.gauges)]
        keys = ", ".join(f"coalesce(u.{k}, g.{k}) AS {k}" for k in USAGE_KEY_COLUMNS)
        values = [
            *(
                f"coalesce(u.{quote(c)}, 0) AS {quote(c)}"
                if c in self.counters
                else f"coalesce(u.{quote(c)}, {_literal(self.origin)}) AS {quote(c)}"
                for c in extra
            ),
            *(f"coalesce(g.{quote(g)}, 0)::DECIMAL(38, 6) AS {quote(g)}" for g in self.gauges),
        ]
        same = " AND ".join(f"u.{k} = g.{k}" for k in USAGE_KEY_COLUMNS)
        return (
            f"SELECT {keys}, {', '.join(values)} "
            f"FROM {counters} u FULL OUTER JOIN {gauges} g ON {same}"
        )

    def _integrate(
        self,
        con: duckdb.DuckDBPyConnection,
        start: pd.Timestamp,
        end: pd.Timestamp,
        warn_stale: bool = True,
    ) -> str:
        """The gauges' hourly measures of ``[start, end)`` in a new table (its name); warns
        of the stale spans (a chunk of the run does; an aggregate over the whole source,
        :meth:`relation`, does not say it again)."""
        reach = max((g.stale_seconds for g in self.gauges.values()), default=0)
        lo = (start.value // 1000) - reach * 1_000_000
        hi = end.value // 1000
        t_us = self.samples["t_us"]
        near = self.samples.loc[(t_us >= lo) & (t_us < hi)]
        before = self.samples.loc[t_us < lo].sort_values("t_us", kind="stable")
        last = before.groupby(["metric", "service", "client"], sort=False).tail(1)
        near = pd.concat([last, near], ignore_index=True)  # a level gone stale before start
        name = f"t_gauge_samples_{next(_names)}"
        con.register(name, near[["metric", "service", "client", "t_us", "value", "rank"]])
        table = f"t_gauge_usage_{next(_names)}"
        try:
            done = integrate(
                con,
                f"SELECT * FROM {name}",
                {g: m.stale_seconds for g, m in self.gauges.items()},
                start,
                end,
                table,
            )
        finally:
            con.unregister(name)
        message = stale_warning(done.stale) if warn_stale else None
        if message:
            warn(message)
        return table

    # ------------------------------------------------------------------ the whole source

    def services(self, con: duckdb.DuckDBPyConnection) -> list[str]:
        inner = self.inner.services(con) if self.inner is not None else []
        return sorted(set(inner) | set(self.samples["service"].unique().tolist()))

    def estimated_rows(self, con: duckdb.DuckDBPyConnection) -> int:
        inner = self.inner.estimated_rows(con) if self.inner is not None else 0
        return inner + len(self.samples)

    def count_outside(
        self, con: duckdb.DuckDBPyConnection, start: pd.Timestamp, end: pd.Timestamp
    ) -> int:
        return self.inner.count_outside(con, start, end) if self.inner is not None else 0

    def for_chunk(self, start: pd.Timestamp, end: pd.Timestamp) -> UsageSource:
        inner = self.inner.for_chunk(start, end) if self.inner is not None else None
        return GaugedUsage(inner, self.samples, self.gauges, self.origin, self.period)

    def within(self, period: Period) -> UsageSource:
        inner = self.inner.within(period) if self.inner is not None else None
        return GaugedUsage(inner, self.samples, self.gauges, self.origin, period)

    def relation(self, con: duckdb.DuckDBPyConnection) -> str:
        """Every row of the source's period (or of its samples' span), gauges integrated
        (into a table of the connection: the integral is not a view of the samples)."""
        start, end = self._span(con)
        table = self._integrate(con, start, end, warn_stale=False)
        if self.inner is None:
            return self._joined(_EMPTY_COUNTERS, list(USAGE_KEY_COLUMNS), table)
        inner = self.inner.relation(con)
        columns = [str(r[0]) for r in con.execute(f"DESCRIBE {inner}").fetchall()]
        return self._joined(f"({inner})", columns, table)

    def _span(self, con: duckdb.DuckDBPyConnection) -> tuple[pd.Timestamp, pd.Timestamp]:
        if self.period is not None:
            return self.period.start, self.period.end
        hour = 3_600_000_000
        reach = max((g.stale_seconds for g in self.gauges.values()), default=0) * 1_000_000
        t = self.samples["t_us"]
        lo = int(t.min()) // hour * hour if len(t) else 0
        hi = (int(t.max()) + reach) // hour * hour + hour if len(t) else hour
        if self.inner is not None:
            bounds = _inner_span(con, self.inner)
            if bounds is not None:
                lo, hi = min(lo, bounds[0]), max(hi, bounds[1])
        return pd.Timestamp(lo * 1000, tz="UTC"), pd.Timestamp(hi * 1000, tz="UTC")

    def first_row(self, con: duckdb.DuckDBPyConnection, condition: str) -> str:
        return self.inner.first_row(con, condition) if self.inner is not None else self.origin


def _inner_span(con: duckdb.DuckDBPyConnection, inner: UsageSource) -> tuple[int, int] | None:
    """The counters' first window start and last window end (µs)."""
    rows = con.execute(  # fetchall: no result left open on the connection
        f"SELECT epoch_us(min(window_start)), epoch_us(max(window_end)) "
        f"FROM ({inner.relation(con)})"
    ).fetchall()
    if not rows or rows[0][0] is None:
        return None
    return int(rows[0][0]), int(rows[0][1])


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def open_gauged(
    paths: Sequence[str | Path], con: duckdb.DuckDBPyConnection, gauges: dict[str, Metric]
) -> UsageSource | None:
    """The usage of ``paths``: window files through :func:`open_usage`, sample files (a
    ``time`` column; a folder of only such files) read as gauge samples. Without declared
    gauges this is :func:`open_usage` (a sample file is then refused by its reader, naming
    the missing ``window_start``)."""
    if not gauges:
        return open_usage(paths, con) if paths else None
    sampled = [p for p in paths if not is_url(p) and is_sample_input(Path(p))]
    windows = [p for p in paths if p not in sampled]
    inner = open_usage(windows, con) if windows else None
    samples = empty_samples() if not sampled else read_samples(sampled, gauges)
    origin = ", ".join(str(p) for p in paths)
    return GaugedUsage(inner, samples.assign(rank=1), gauges, origin)


def is_sample_input(path: Path) -> bool:
    """A sample file, or a folder whose CSV and Parquet files are all sample files."""
    if path.is_dir():
        found = expand_paths([path], (".csv", ".parquet"), "usage")
        return bool(found) and all(is_samples_file(f) for f, _ in found)
    return path.is_file() and is_samples_file(path)


__all__ = ["GaugedUsage", "is_sample_input", "open_gauged"]
