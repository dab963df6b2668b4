"""Split keyed pools and idle over clients: the heavy part of an allocation, in DuckDB.

A month for 10,000 clients and 20 services is ~100 million usage rows. Joining them with the
pools, summing weights and ranking remainders is a columnar sort-and-aggregate job, which an
in-process SQL engine does several times faster than pandas and without materialising the
usage in Python. The arithmetic is exactly the one documented in ``tenantcost.money``:

* a pool ``P`` (int64 micro-units) goes to recipients with integer weights ``w > 0`` (the
  key's measure in micro-units of its unit, so the total ``W`` is an exact integer sum);
* ``quota = P * (w / W)`` in IEEE double, ``base = floor(quota)``;
* the ``P - sum(base)`` leftover units go one each to the largest ``quota - base``, ties by
  client name (binary order);
* a pool with no positive weight is unattributed ("no usage in window"); the part of the
  empty client ``""`` is unattributed ("usage without client id").

Idle sharing splits each window's idle over the clients' attributed amounts (proportional)
or equally (even) with the same rule.
"""

from __future__ import annotations

from dataclasses import dataclass

import duckdb
import pandas as pd

MEASURE_SCALE = 1_000_000
"""Measures are held as integers of 10^-6 of their unit (requests, CPU-seconds, ...)."""

LINE_COLUMNS = [
    "window_start",
    "window_end",
    "rule_id",
    "client",
    "source",
    "kind",
    "key",
    "measure",
    "total_measure",
    "share",
    "amount",
]
UNATTRIBUTED_COLUMNS = [
    "window_start",
    "window_end",
    "rule_id",
    "source",
    "kind",
    "cause",
    "amount",
]
CAUSE_NO_USAGE = "no usage in window"
CAUSE_NO_CLIENT = "usage without client id"


def connect(
    threads: int | None = None, memory_limit: str | None = None
) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB connection that reads and returns timestamps in UTC."""
    con = duckdb.connect(":memory:")
    con.execute("SET TimeZone = 'UTC'")
    if threads:
        con.execute(f"SET threads = {int(threads)}")
    if memory_limit:
        con.execute(f"SET memory_limit = '{memory_limit}'")
    con.execute("SET preserve_insertion_order = false")
    return con


def quote(name: str) -> str:
    """A SQL identifier, quoted."""
    return '"' + name.replace('"', '""') + '"'


def _split(name: str, recipients: str, totals: str, pools: str) -> str:
    """CTEs that split ``pools`` (pool, amount) over ``recipients`` (pool, client, weight > 0)
    whose per-pool sums are in ``totals`` (pool, total).

    The totals are a hash aggregate joined back; the leftover units and the ranking of
    remainders share one window partition by pool (one sort).
    """
    return f"""
    {name}_b AS (
        SELECT r.pool, r.client, r.weight, t.total, p.amount AS parent,
               floor(p.amount::DOUBLE * (r.weight::DOUBLE / t.total::DOUBLE))::BIGINT AS base,
               p.amount::DOUBLE * (r.weight::DOUBLE / t.total::DOUBLE)
                 - floor(p.amount::DOUBLE * (r.weight::DOUBLE / t.total::DOUBLE)) AS frac
        FROM {recipients} r JOIN {totals} t ON t.pool = r.pool JOIN {pools} p ON p.pool = r.pool
    ),
    {name} AS (
        SELECT pool, client, weight, total,
               base + CASE WHEN row_number() OVER (
                                PARTITION BY pool ORDER BY frac DESC, client ASC)
                            <= parent - sum(base) OVER (PARTITION BY pool)
                      THEN 1 ELSE 0 END AS amount
        FROM {name}_b
    )"""


def _weight_expression(metrics: list[str]) -> str:
    """The per-usage-row weight of a spec: its key column, ``even`` or contract weights.

    One scan of the chunk serves every key: a CASE on the spec's small-integer key code
    (-2 weights, -1 even, i >= 0 the i-th metric) picks the value, which measured faster
    than one scan per key.
    """
    active = " OR ".join(f"u.{quote(m)} > 0" for m in metrics) or "FALSE"
    by_column = " ".join(
        f"WHEN {i} THEN round_even(u.{quote(m)} * {MEASURE_SCALE}, 0)::BIGINT"
        for i, m in enumerate(metrics)
    )
    return f"""CASE s.key_code {by_column}
        WHEN -1 THEN CASE WHEN {active} THEN {MEASURE_SCALE} ELSE 0 END
        WHEN -2 THEN CASE WHEN {active} THEN coalesce(sw.weight, 0) ELSE 0 END
        ELSE 0 END"""


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


@dataclass(frozen=True)
class SplitTables:
    """The small pandas tables a split needs (registered into DuckDB per run).

    * ``pools``: pool, window_start, window_end, spec, amount, rule_id, source, kind, key;
    * ``specs``: spec, key_kind ('column' | 'even' | 'weights'), key_column, agg ('sum'|'max');
    * ``spec_services``: spec, service;
    * ``spec_weights``: spec, client, weight (int64, contract weights in micro-units);
    * ``direct``: window_start, window_end, client, amount (attributed direct cost);
    * ``idle_pools``: pool, window_start, window_end, amount, rule_id, method.
    """

    pools: pd.DataFrame
    specs: pd.DataFrame
    spec_services: pd.DataFrame
    spec_weights: pd.DataFrame
    direct: pd.DataFrame
    idle_pools: pd.DataFrame


def run_split(
    con: duckdb.DuckDBPyConnection,
    tables: SplitTables,
    usage_sql: str,
    metrics: list[str],
) -> None:
    """Split every pool of ``tables`` over the usage rows of ``usage_sql``.

    Leaves two temporary tables on ``con``: ``lines`` (window-level client lines: keyed
    shared/external parts and distributed idle, with ``LINE_COLUMNS``) and ``unattributed``
    (``UNATTRIBUTED_COLUMNS``). Callers fetch or aggregate them.
    """
    for name in ("pools", "specs", "spec_services", "spec_weights", "direct", "idle_pools"):
        # Small tables: copied into DuckDB so the views below outlive the registration.
        con.register("t_frame", getattr(tables, name))
        con.execute(f"CREATE OR REPLACE TEMP TABLE t_{name} AS SELECT * FROM t_frame")
        con.unregister("t_frame")
    # Clients as dense integers in name order: joins, group-bys and the remainder ranking then
    # work on integers, and ordering by the id is ordering by the name (the tie-break rule).
    con.execute(
        f"""
        CREATE OR REPLACE TEMP TABLE t_clients AS
        SELECT client, (row_number() OVER (ORDER BY client) - 1)::INTEGER AS cid
        FROM (SELECT DISTINCT client FROM ({usage_sql}) UNION SELECT client FROM t_direct)
        """
    )
    found = con.execute("SELECT min(cid) FROM t_clients WHERE client = ''").fetchall()
    no_client = int(found[0][0]) if found and found[0][0] is not None else -1
    weight = _weight_expression(metrics)
    weights_join = (
        "LEFT JOIN t_spec_weights sw ON sw.spec = p.spec AND sw.client = u.client"
        if not tables.spec_weights.empty
        else "LEFT JOIN (SELECT NULL::BIGINT AS weight) sw ON FALSE"
    )
    key_index = ", ".join(f"({i}, {_literal(m)})" for i, m in enumerate(metrics)) or "(0, '')"
    # Single-service specs (every shared workload): usage rows are unique per window, service
    # and client (the readers reject duplicates), so each row is one recipient as it is.
    # Multi-service specs (external costs) sum a client's rows over the services (or take
    # the max for `even` and contract weights, which count a client once).
    con.execute(
        f"""
        CREATE OR REPLACE TEMP TABLE recipients AS
        WITH spec_info AS (
            SELECT s.spec, s.agg,
                   CASE s.key_kind WHEN 'even' THEN -1 WHEN 'weights' THEN -2
                        ELSE coalesce(k.i, -3) END AS key_code,
                   (SELECT count(*) FROM t_spec_services ss WHERE ss.spec = s.spec) > 1 AS multi
            FROM t_specs s LEFT JOIN (VALUES {key_index}) k(i, name) ON k.name = s.key_column
        ),
        rows AS (
            SELECT p.pool, c.cid AS client, s.agg, s.multi, {weight} AS weight
            FROM t_pools p
            JOIN spec_info s ON s.spec = p.spec
            JOIN t_spec_services ss ON ss.spec = p.spec
            JOIN ({usage_sql}) u
              ON u.window_start = p.window_start AND u.window_end = p.window_end
             AND u.service = ss.service
            JOIN t_clients c ON c.client = u.client
            {weights_join}
        )
        SELECT pool, client, weight FROM rows WHERE NOT multi AND weight > 0
        UNION ALL
        SELECT pool, client,
               (CASE WHEN any_value(agg) = 'max' THEN max(weight)
                     ELSE sum(weight) END)::BIGINT AS weight
        FROM rows WHERE multi GROUP BY pool, client HAVING max(weight) > 0
        """
    )
    con.execute(
        "CREATE OR REPLACE TEMP TABLE pool_totals AS "
        "SELECT pool, sum(weight) AS total FROM recipients GROUP BY pool"
    )
    con.execute(
        f"""
        CREATE OR REPLACE TEMP TABLE keyed AS
        WITH {_split("parts", "recipients", "pool_totals", "t_pools")}
        SELECT * FROM parts
        """
    )
    con.execute(
        f"""
        CREATE OR REPLACE TEMP TABLE idle_parts AS
        WITH attributed AS (
            SELECT p.window_start, p.window_end, k.client, k.amount
            FROM keyed k JOIN t_pools p ON p.pool = k.pool WHERE k.client <> {no_client}
            UNION ALL
            SELECT d.window_start, d.window_end, c.cid, d.amount
            FROM t_direct d JOIN t_clients c ON c.client = d.client WHERE d.client <> ''
        ),
        per_client AS (
            SELECT window_start, window_end, client, sum(amount)::BIGINT AS amount
            FROM attributed GROUP BY ALL HAVING sum(amount) > 0
        ),
        idle_recipients AS (
            SELECT ip.pool, a.client,
                   CASE WHEN ip.method = 'even' THEN {MEASURE_SCALE} ELSE a.amount END
                       ::BIGINT AS weight
            FROM t_idle_pools ip JOIN per_client a
              ON a.window_start = ip.window_start AND a.window_end = ip.window_end
        ),
        idle_totals AS (
            SELECT pool, sum(weight) AS total FROM idle_recipients GROUP BY pool
        ),
        {_split("parts", "idle_recipients", "idle_totals", "t_idle_pools")}
        SELECT * FROM parts
        """
    )
    scale = float(MEASURE_SCALE)
    con.execute(
        f"""
        CREATE OR REPLACE TEMP VIEW lines AS
        SELECT p.window_start, p.window_end, p.rule_id, c.client, p.source, p.kind, p.key,
               k.weight / {scale} AS measure, k.total / {scale} AS total_measure,
               k.weight::DOUBLE / k.total::DOUBLE AS share, k.amount
        FROM keyed k JOIN t_pools p ON p.pool = k.pool JOIN t_clients c ON c.cid = k.client
        WHERE k.client <> {no_client}
        UNION ALL
        SELECT p.window_start, p.window_end, p.rule_id, c.client, 'idle' AS source,
               'idle' AS kind, p.method AS key,
               k.weight / {scale} AS measure, k.total / {scale} AS total_measure,
               k.weight::DOUBLE / k.total::DOUBLE AS share, k.amount
        FROM idle_parts k JOIN t_idle_pools p ON p.pool = k.pool
        JOIN t_clients c ON c.cid = k.client
        """
    )
    con.execute(
        f"""
        CREATE OR REPLACE TEMP TABLE unattributed AS
        SELECT p.window_start, p.window_end, p.rule_id, p.source, p.kind,
               '{CAUSE_NO_CLIENT}' AS cause, k.amount
        FROM keyed k JOIN t_pools p ON p.pool = k.pool WHERE k.client = {no_client}
        UNION ALL
        SELECT p.window_start, p.window_end, p.rule_id, p.source, p.kind,
               '{CAUSE_NO_USAGE}' AS cause, p.amount
        FROM t_pools p
        WHERE p.amount <> 0 AND p.pool NOT IN (SELECT pool FROM pool_totals)
        """
    )


def fetch_lines(con: duckdb.DuckDBPyConnection) -> pd.DataFrame:
    """The window-level lines of the last split."""
    return con.execute(f"SELECT {', '.join(LINE_COLUMNS)} FROM lines").df()


def fetch_unattributed(con: duckdb.DuckDBPyConnection) -> pd.DataFrame:
    return con.execute(f"SELECT {', '.join(UNATTRIBUTED_COLUMNS)} FROM unattributed").df()


PERIOD_LINE_SQL = f"""
    WITH keyed_sums AS (
        -- Aggregate on integer keys first (spec, client); labels are joined afterwards.
        SELECT p.spec, k.client, min(p.window_start) AS window_start,
               max(p.window_end) AS window_end, sum(k.weight) AS weight,
               sum(k.total) AS total, sum(k.amount) AS amount, count(*) AS windows
        FROM keyed k JOIN t_pools p ON p.pool = k.pool
        WHERE k.client <> (SELECT coalesce(min(cid), -1) FROM t_clients WHERE client = '')
        GROUP BY p.spec, k.client
    ),
    spec_labels AS (
        SELECT DISTINCT spec, rule_id, source, kind, key FROM t_pools
    ),
    idle_sums AS (
        SELECT p.rule_id, p.method AS key, k.client, min(p.window_start) AS window_start,
               max(p.window_end) AS window_end, sum(k.weight) AS weight,
               sum(k.total) AS total, sum(k.amount) AS amount, count(*) AS windows
        FROM idle_parts k JOIN t_idle_pools p ON p.pool = k.pool
        GROUP BY p.rule_id, p.method, k.client
    )
    SELECT s.window_start, s.window_end, l.rule_id, c.client, l.source, l.kind, l.key,
           s.weight / {float(MEASURE_SCALE)} AS measure,
           s.total / {float(MEASURE_SCALE)} AS total_measure,
           s.weight::DOUBLE / nullif(s.total, 0)::DOUBLE AS share,
           s.amount::BIGINT AS amount, s.windows::BIGINT AS windows
    FROM keyed_sums s JOIN spec_labels l ON l.spec = s.spec
    JOIN t_clients c ON c.cid = s.client
    UNION ALL
    SELECT i.window_start, i.window_end, i.rule_id, c.client, 'idle', 'idle', i.key,
           i.weight / {float(MEASURE_SCALE)}, i.total / {float(MEASURE_SCALE)},
           i.weight::DOUBLE / nullif(i.total, 0)::DOUBLE, i.amount::BIGINT, i.windows::BIGINT
    FROM idle_sums i JOIN t_clients c ON c.cid = i.client
"""


def fetch_period_lines(con: duckdb.DuckDBPyConnection) -> pd.DataFrame:
    """The last split's lines summed over its windows, one row per client and source."""
    return con.execute(PERIOD_LINE_SQL).df()
