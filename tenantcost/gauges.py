"""Gauges: levels sampled over time, integrated per hour into a key measure (pure, in DuckDB).

Why. A shared database's storage, a bucket's bytes or a product's seats are not counted per
window: they are *levels* that persist until replaced. Splitting them by the last sample of a
month (what a spreadsheet does) bills a client who deleted 9 TiB on the 2nd as if it held
them all month. The fair measure is the time integral of the level (byte-hours), which is
what the cloud bills a volume or a bucket by.

How, exactly. A sample ``(time, service, client, level)`` holds from its time until the next
sample of the same metric, service and client, but at most ``stale_after`` past its time;
then the level is unknown and the time counts 0 (a *stale span*, which the run names). A
repeated (metric, service, client, time) is the same instant measured again: the sample of
the latest batch (the larger ``rank``) wins. Each held segment is cut at UTC hours, and each
hour's measure is the exact sum of ``level x microseconds`` (128-bit integers: levels carry
at most :data:`LEVEL_PLACES` decimal places, times are whole microseconds), rounded once,
half to even, to the split's grain: a millionth of a unit-hour (``MEASURE_SCALE``). The split
then weighs it exactly like any other usage value (``round_even(value * 10^6)``), so no float
touches the integral. Everything is one SQL query over the whole sample set: no Python loop
per sample, client or hour.
"""

from __future__ import annotations

from dataclasses import dataclass

import duckdb
import pandas as pd

from tenantcost.duck import quote

LEVEL_PLACES = 9
"""Decimal places a gauge level may carry (a byte count has none; a ratio a few)."""
MAX_LEVEL = 10**15
"""The largest level accepted (a petabyte in bytes): one full hour of it is 1e15 unit-hours,
the usage value bound the split's exact arithmetic is sized for (``tenantcost.limits``)."""
HOUR_US = 3_600_000_000
"""Microseconds in an hour."""
_DIVISOR = HOUR_US * 10**LEVEL_PLACES // 10**6
"""From ``level x 10^9 x microseconds`` to millionths of a unit-hour: 3.6e12."""
SAMPLE_COLUMNS = ["metric", "service", "client", "t_us", "value", "rank"]
"""A sample set's columns: ``t_us`` is the sample time in microseconds since the epoch (UTC),
``value`` the level as exact decimal text, ``rank`` the batch order (later wins)."""


@dataclass(frozen=True)
class Integrated:
    """Per hour, service and client, each gauge's measure (unit-hours, ``DECIMAL(38, 6)``,
    in a DuckDB table), and the stale spans found."""

    table: str
    """The temporary table: ``window_start, window_end, service, client`` and one column per
    gauge; a cell without a level has 0 there."""
    stale: pd.DataFrame
    """``metric, service, client, last_sample, stale_from, stale_to`` (UTC), clipped to the
    period: each span a level was unknown."""


def integrate(
    con: duckdb.DuckDBPyConnection,
    samples: str,
    stale_seconds: dict[str, int],
    start: pd.Timestamp,
    end: pd.Timestamp,
    table: str = "gauge_usage",
) -> Integrated:
    """Integrate the samples of ``samples`` (a relation with :data:`SAMPLE_COLUMNS`) over the
    hours of ``[start, end)`` for each gauge of ``stale_seconds`` (name -> seconds a sample
    holds). ``samples`` must hold every sample from ``start - stale_after`` on: an older one
    reaches the period only to be named stale (pass each series' latest sample before it to
    have its stale span named)."""
    p0, p1 = _epoch_us(start), _epoch_us(end)
    gauges = sorted(stale_seconds)
    spec = ", ".join(f"({_text(g)}, {stale_seconds[g] * 1_000_000}::BIGINT)" for g in gauges)
    con.execute(f"""
        CREATE OR REPLACE TEMP TABLE t_gauge_segments AS
        WITH spec(metric, stale_us) AS (VALUES {spec}),
        s AS (
            SELECT metric, service, client, t_us,
                   arg_max(CAST(value AS DECIMAL(38, {LEVEL_PLACES})), rank) AS level
            FROM ({samples}) GROUP BY metric, service, client, t_us),
        seg AS (
            SELECT s.metric, s.service, s.client, s.t_us, s.level, s.t_us + spec.stale_us AS ripe,
                   lead(s.t_us) OVER (PARTITION BY s.metric, s.service, s.client
                                      ORDER BY s.t_us) AS next_us
            FROM s JOIN spec ON spec.metric = s.metric)
        SELECT metric, service, client, t_us, level, ripe, next_us,
               greatest(t_us, {p0}) AS a,
               least(coalesce(next_us, {p1}), ripe, {p1}) AS b
        FROM seg
        WHERE t_us < {p1} AND coalesce(next_us, {p1}) > {p0}""")  # fmt: skip
    con.execute(f"""
        CREATE OR REPLACE TEMP TABLE t_gauge_hours AS
        WITH cut AS (
            SELECT metric, service, client, a, b,
                   CAST(level * {10**LEVEL_PLACES} AS HUGEINT) AS scaled,
                   unnest(generate_series(a // {HOUR_US} * {HOUR_US},
                                          (b - 1) // {HOUR_US} * {HOUR_US}, {HOUR_US})) AS h
            FROM t_gauge_segments WHERE b > a),
        summed AS (
            SELECT h, metric, service, client,
                   sum(scaled * (least(b, h + {HOUR_US}) - greatest(a, h))::HUGEINT) AS x
            FROM cut GROUP BY h, metric, service, client),
        q AS (SELECT *, x // {_DIVISOR} AS q0 FROM summed)
        SELECT h, metric, service, client,
               q0 + CASE WHEN 2 * (x - q0 * {_DIVISOR}) > {_DIVISOR}
                           OR (2 * (x - q0 * {_DIVISOR}) = {_DIVISOR} AND q0 % 2 = 1)
                         THEN 1 ELSE 0 END AS micro
        FROM q""")  # fmt: skip
    columns = ", ".join(
        f"(coalesce(sum(micro) FILTER (WHERE metric = {_text(g)}), 0)::DECIMAL(38, 0)"
        f" * 0.000001::DECIMAL(38, 6))::DECIMAL(38, 6) AS {quote(g)}"
        for g in gauges
    )
    con.execute(f"""
        CREATE OR REPLACE TEMP TABLE {table} AS
        SELECT make_timestamp(h)::TIMESTAMPTZ AS window_start,
               make_timestamp(h + {HOUR_US})::TIMESTAMPTZ AS window_end,
               service, client, {columns}
        FROM t_gauge_hours GROUP BY h, service, client""")  # fmt: skip
    stale = con.execute(f"""
        SELECT metric, service, client, make_timestamp(t_us)::TIMESTAMPTZ AS last_sample,
               make_timestamp(greatest(ripe, {p0}))::TIMESTAMPTZ AS stale_from,
               make_timestamp(least(coalesce(next_us, {p1}), {p1}))::TIMESTAMPTZ AS stale_to
        FROM t_gauge_segments
        WHERE greatest(ripe, {p0}) < least(coalesce(next_us, {p1}), {p1})
        ORDER BY metric, service, client, t_us""").df()  # fmt: skip
    for column in ("last_sample", "stale_from", "stale_to"):
        stale[column] = pd.to_datetime(stale[column], utc=True)
    con.execute("DROP TABLE t_gauge_segments")
    con.execute("DROP TABLE t_gauge_hours")
    return Integrated(table, stale)


def stale_warning(stale: pd.DataFrame, shown: int = 3) -> str | None:
    """One line naming the stale spans (the first ``shown`` of them and how many in all):
    the time a level was unknown counted 0."""
    if stale.empty:
        return None
    parts = [
        f"{r.metric} of client '{r.client}' (service '{r.service}') unknown "
        f"{_iso(r.stale_from)} to {_iso(r.stale_to)} (last sample {_iso(r.last_sample)})"
        for r in stale.head(shown).itertuples(index=False)
    ]
    more = f"; and {len(stale) - shown} more span(s)" if len(stale) > shown else ""
    return (
        f"gauge levels went stale, counted 0 there: {'; '.join(parts)}{more}"
        " (a newer sample within stale_after would have held the level)"
    )


def _iso(moment: pd.Timestamp) -> str:
    return pd.Timestamp(moment).tz_convert("UTC").strftime("%Y-%m-%dT%H:%M:%SZ")


def _epoch_us(moment: pd.Timestamp) -> int:
    return int(pd.Timestamp(moment).tz_convert("UTC").value // 1000)


def _text(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


__all__ = ["Integrated", "integrate", "stale_warning"]
