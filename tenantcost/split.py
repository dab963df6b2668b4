"""Split keyed pools and idle over clients: the heavy part of an allocation, in DuckDB.

A month for 10,000 clients and 20 services is ~100 million usage rows. Joining them with the
pools, summing weights and ranking remainders is a columnar sort-and-aggregate job, which an
in-process SQL engine does several times faster than pandas and without materialising the
usage in Python. The arithmetic is exactly the one documented in ``tenantcost.money``:

* a pool ``P`` (int64 micro-units) goes to recipients with integer weights ``w > 0`` (the
  key's measure in micro-units of its unit, so the total ``W`` is an exact integer sum);
* ``base = floor(P * w / W)`` and the remainder ``P * w - base * W``, both exact in 128-bit
  integers (measures, their sums and the products are ``HUGEINT``; see ``tenantcost.limits``
  for the ranges that keep every step exact);
* the ``P - sum(base)`` leftover units go one each to the largest remainders, ties by
  client name (binary order);
* a pool with no positive weight is unattributed ("no usage in window"); the part of the
  empty client ``""`` is unattributed ("usage without client id").

Idle sharing splits each window's idle over the clients' attributed amounts (proportional)
or equally (even) with the same rule.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

import duckdb
import pandas as pd

from tenantcost.duck import connect, quote  # noqa: F401  (connect re-exported for the split's callers)
from tenantcost.errors import InputError, InternalError
from tenantcost.kinds import Cause
from tenantcost.limits import MAX_AMOUNT_TOTAL, MAX_POOL_MEASURE, MEASURE_SCALE, SPLIT_LIMB
from tenantcost.tables import LINE_COLUMNS, UNATTRIBUTED_COLUMNS

KEY_EVEN = -1
"""Key code of the ``even`` key in the split's SQL (metric columns are coded 0, 1, ...)."""
KEY_WEIGHTS = -2
"""Key code of contract weights (``{weights: {client: w}}``)."""
KEY_UNKNOWN = -3
"""Key code of a key column the usage lacks (the rules check refuses it first): weight 0."""

CAUSE_NO_USAGE = Cause.NO_USAGE
CAUSE_NO_CLIENT = Cause.NO_CLIENT


FAST_MAX_PARENT = 2**49
"""The estimate path (:class:`Arithmetic`) takes pools below this many micro-units (5.6e8
currency units a pool and window): its double estimate of ``P * w / W`` is then off by less
than one unit."""
FAST_MAX_PRODUCT = 2**125
"""... and ``P * W`` below this, so that ``P * w`` and ``q * W`` fit a signed 128-bit integer."""


class Arithmetic(StrEnum):
    """How a split computes ``floor(P * w / W)`` and its remainder, both exact.

    * ``estimate``: a double estimate ``q0 = floor(P * (w / W))`` corrected by one exact
      128-bit step. With ``P < 2^49`` exact in a double and the quotient at most ``P``, the
      four double roundings (``w``, ``W``, the ratio, the product; relative error below
      ``5 * 2^-53``) move the estimate by less than ``2^49 * 5 * 2^-53 = 5/16`` of a unit, so
      ``floor`` is off by at most one: ``r0 = P * w - q0 * W`` (two 128-bit products, no
      division) lies in ``[-W, 2W)`` and one comparison fixes ``q`` and the remainder. It
      measured 3.5x faster than the limbs, whose 128-bit divisions dominate a split.
    * ``limbs``: ``P = P1 * L + P0`` (``tenantcost.limits.SPLIT_LIMB``), ``P1 * w = q1 * W +
      r1`` and ``r1 * L + P0 * w = q2 * W + rest``: exact for every pool the limits allow,
      without ever forming ``P * w``. Used when any pool of the split is outside the estimate
      path's range.
    """

    ESTIMATE = "estimate"
    LIMBS = "limbs"


def choose_arithmetic(max_parent: int, max_total: int) -> Arithmetic:
    """The estimate path when every pool of a split is within its range, else the limbs."""
    if max_parent < FAST_MAX_PARENT and max_parent * max_total < FAST_MAX_PRODUCT:
        return Arithmetic.ESTIMATE
    return Arithmetic.LIMBS


def _quotients(name: str, recipients: str, totals: str, pools: str, how: Arithmetic) -> str:
    """CTE ``{name}_b`` (pool, client, weight, total, parent, base, rest): the exact floor
    ``base = floor(P * w / W)`` and its remainder ``rest = P * w - base * W`` (``Arithmetic``)."""
    joined = (
        f"FROM {recipients} r JOIN {totals} t ON t.pool = r.pool JOIN {pools} p ON p.pool = r.pool"
    )
    if how == Arithmetic.ESTIMATE:
        return f"""
    {name}_e AS (
        SELECT r.pool, r.client, r.weight, t.total, p.amount AS parent,
               floor(p.amount::DOUBLE * (r.weight::DOUBLE / t.total::DOUBLE))::BIGINT AS q0
        {joined}
    ),
    {name}_r AS (
        SELECT *, parent::HUGEINT * weight - q0::HUGEINT * total AS r0 FROM {name}_e
    ),
    {name}_b AS (
        SELECT pool, client, weight, total, parent,
               q0 + CASE WHEN r0 < 0 THEN -1 WHEN r0 >= total THEN 1 ELSE 0 END AS base,
               r0 + CASE WHEN r0 < 0 THEN total WHEN r0 >= total THEN -total ELSE 0 END AS rest
        FROM {name}_r
    )"""
    limb = SPLIT_LIMB
    return f"""
    {name}_q AS (
        SELECT r.pool, r.client, r.weight, t.total, p.amount AS parent,
               (p.amount::HUGEINT // {limb}) * r.weight AS t1,
               p.amount::HUGEINT % {limb} AS p0
        {joined}
    ),
    {name}_t AS (
        SELECT pool, client, weight, total, parent, t1 // total AS q1,
               (t1 % total) * {limb} + p0 * weight AS t2
        FROM {name}_q
    ),
    {name}_b AS (
        SELECT pool, client, weight, total, parent,
               (q1 * {limb} + t2 // total)::BIGINT AS base, t2 % total AS rest
        FROM {name}_t
    )"""


MAX_NARROW_TOTAL = 2**63 - 1
"""A split whose every pool total is at most this ranks its remainders (each below its pool's
total) as ``BIGINT`` and returns its weights and totals as ``BIGINT``: the same values, and
the ranking sort on 64-bit columns measured about 15 % faster than on 128-bit ones."""


def _split(
    name: str,
    recipients: str,
    totals: str,
    pools: str,
    how: Arithmetic = Arithmetic.LIMBS,
    narrow: bool = False,
) -> str:
    """CTEs that split ``pools`` (pool, amount) over ``recipients`` (pool, client, weight > 0)
    whose per-pool sums are in ``totals`` (pool, total).

    The floor and remainder of ``P * w / W`` are exact either way (:class:`Arithmetic`). ``W``
    is common to a pool, so ranking by ``rest`` is ranking by the fraction. The totals are a
    hash aggregate joined back; the leftover units and the ranking of remainders share one
    window partition by pool (one sort). ``narrow``: every total is at most
    :data:`MAX_NARROW_TOTAL`, so the remainders are ranked, and the weights and totals
    returned, as ``BIGINT`` (narrower rows to sort and to sum afterwards).
    """
    # The window copies every column it carries into its sort: it carries only the per-row
    # ones (narrowed first where they fit); the pool's amount and total are joined after it.
    # Measured 10 % faster than ranking with them on board.
    measure, rest = ("weight::BIGINT", "rest::BIGINT") if narrow else ("weight", "rest")
    total = "t.total::BIGINT" if narrow else "t.total"
    return f"""{_quotients(name, recipients, totals, pools, how)},
    {name}_w AS (
        SELECT pool, client, weight, base,
               row_number() OVER (PARTITION BY pool ORDER BY rest DESC, client ASC) AS rank,
               sum(base) OVER (PARTITION BY pool) AS floors
        FROM (SELECT pool, client, {measure} AS weight, base, {rest} AS rest FROM {name}_b)
    ),
    {name} AS (
        SELECT w.pool, w.client, w.weight, {total} AS total,
               w.base + CASE WHEN w.rank <= p.amount - w.floors THEN 1 ELSE 0 END AS amount
        FROM {name}_w w JOIN {totals} t ON t.pool = w.pool JOIN {pools} p ON p.pool = w.pool
    )"""


def _weight_expression(metrics: list[str]) -> str:
    """The per-usage-row weight of a spec: its key column, ``even`` or contract weights.

    One scan of the chunk serves every key: a CASE on the spec's small-integer key code
    (:data:`KEY_WEIGHTS`, :data:`KEY_EVEN`, i >= 0 the i-th metric) picks the value, which
    measured faster than one scan per key.
    """
    active = " OR ".join(f"u.{quote(m)} > 0" for m in metrics) or "FALSE"
    by_column = " ".join(
        f"WHEN {i} THEN round_even(u.{quote(m)} * {MEASURE_SCALE}, 0)::HUGEINT"
        for i, m in enumerate(metrics)
    )
    return f"""CASE s.key_code {by_column}
        WHEN {KEY_EVEN} THEN CASE WHEN {active} THEN {MEASURE_SCALE} ELSE 0 END
        WHEN {KEY_WEIGHTS} THEN CASE WHEN {active} THEN coalesce(sw.weight, 0) ELSE 0 END
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

    Every step is exact within ``tenantcost.limits``; an arithmetic error DuckDB still
    raises (a 128-bit overflow, a cast out of range) means a reader let a number through, so
    it becomes an :class:`InternalError`, never a traceback or a wrong amount.
    """
    try:
        _run_split(con, tables, usage_sql, metrics)
    except (duckdb.OutOfRangeException, duckdb.ConversionException) as exc:
        raise InternalError(f"split arithmetic out of range: {_first_line(exc)}") from exc


def _first_line(exc: BaseException) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


def _run_split(
    con: duckdb.DuckDBPyConnection,
    tables: SplitTables,
    usage_sql: str,
    metrics: list[str],
) -> None:
    """The body of :func:`run_split`."""
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
    _build_recipients(con, tables, usage_sql, metrics)
    con.execute(
        "CREATE OR REPLACE TEMP TABLE pool_totals AS "
        "SELECT pool, sum(weight) AS total FROM recipients GROUP BY pool"
    )
    _check_ranges(con)
    (keyed_how, keyed_narrow), (idle_how, idle_narrow) = _arithmetic(con)
    if keyed_narrow:  # a few rows: the split then joins and carries 64-bit totals
        con.execute(
            "CREATE OR REPLACE TEMP TABLE pool_totals AS "
            "SELECT pool, total::BIGINT AS total FROM pool_totals"
        )
    con.execute(
        f"""
        CREATE OR REPLACE TEMP TABLE keyed AS
        WITH {_split("parts", "recipients", "pool_totals", "t_pools", keyed_how, keyed_narrow)}
        SELECT * FROM parts
        """
    )
    con.execute(
        f"""
        CREATE OR REPLACE TEMP TABLE idle_parts AS
        WITH windows AS (
            -- The windows with idle, numbered: the sum per window and client below then
            -- groups on two integers instead of two timestamps and an integer.
            SELECT window_start, window_end, row_number() OVER () AS w
            FROM (SELECT DISTINCT window_start, window_end FROM t_idle_pools)
        ),
        pool_windows AS (
            SELECT p.pool, w.w FROM t_pools p JOIN windows w
              ON w.window_start = p.window_start AND w.window_end = p.window_end
        ),
        attributed AS (
            SELECT pw.w, k.client, k.amount
            FROM keyed k JOIN pool_windows pw ON pw.pool = k.pool WHERE k.client <> {no_client}
            UNION ALL
            SELECT w.w, c.cid, d.amount
            FROM t_direct d JOIN t_clients c ON c.client = d.client
            JOIN windows w ON w.window_start = d.window_start AND w.window_end = d.window_end
            WHERE d.client <> ''
        ),
        per_client AS (
            SELECT w, client, sum(amount)::BIGINT AS amount
            FROM attributed GROUP BY w, client HAVING sum(amount) > 0
        ),
        idle_recipients AS (
            SELECT ip.pool, a.client,
                   CASE WHEN ip.method = 'even' THEN {MEASURE_SCALE} ELSE a.amount END
                       ::HUGEINT AS weight
            FROM t_idle_pools ip JOIN windows w
              ON w.window_start = ip.window_start AND w.window_end = ip.window_end
            JOIN per_client a ON a.w = w.w
        ),
        idle_totals AS (
            SELECT pool, sum(weight) AS total FROM idle_recipients GROUP BY pool
        ),
        {_split("parts", "idle_recipients", "idle_totals", "t_idle_pools", idle_how, idle_narrow)}
        SELECT * FROM parts
        """
    )
    _check_conserved(con, "keyed", "t_pools")
    _check_conserved(con, "idle_parts", "t_idle_pools")
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


def _build_recipients(
    con: duckdb.DuckDBPyConnection, tables: SplitTables, usage_sql: str, metrics: list[str]
) -> None:
    """The ``recipients`` table (pool, client id, weight > 0) of every keyed pool.

    Single-service specs (every shared workload): usage rows are unique per window, service
    and client (the readers reject duplicates), so each row is one recipient as it is.
    Multi-service specs (external costs) sum a client's rows over the services (or take the
    max for ``even`` and contract weights, which count a client once). Two scans of the
    chunk, one per kind: measured faster than one join materialised for both.
    """
    weights_join = (
        "LEFT JOIN t_spec_weights sw ON sw.spec = s.spec AND sw.client = u.client"
        if not tables.spec_weights.empty
        else "LEFT JOIN (SELECT NULL::BIGINT AS weight) sw ON FALSE"
    )
    key_index = ", ".join(f"({i}, {_literal(m)})" for i, m in enumerate(metrics)) or "(0, '')"
    # Each pool with its spec's key and each service it is split by (small).
    con.execute(
        f"""
        CREATE OR REPLACE TEMP TABLE t_pool_services AS
        WITH spec_info AS (
            SELECT s.spec, s.agg,
                   CASE s.key_kind WHEN 'even' THEN {KEY_EVEN} WHEN 'weights' THEN {KEY_WEIGHTS}
                        ELSE coalesce(k.i, {KEY_UNKNOWN}) END AS key_code,
                   (SELECT count(*) FROM t_spec_services ss WHERE ss.spec = s.spec) > 1 AS multi
            FROM t_specs s LEFT JOIN (VALUES {key_index}) k(i, name) ON k.name = s.key_column
        )
        SELECT p.pool, p.spec, p.window_start, p.window_end, ss.service, i.agg, i.key_code,
               i.multi
        FROM t_pools p JOIN spec_info i ON i.spec = p.spec JOIN t_spec_services ss
          ON ss.spec = p.spec
        """
    )

    weight = _weight_expression(metrics)

    def usage_rows(multi: bool) -> str:
        """Each usage row joined with the pools of its window and service (of one kind)."""
        return f"""
            SELECT s.pool, c.cid AS client, s.agg, {weight} AS weight
            FROM t_pool_services s
            JOIN ({usage_sql}) u
              ON u.window_start = s.window_start AND u.window_end = s.window_end
             AND u.service = s.service
            JOIN t_clients c ON c.client = u.client
            {weights_join}
            WHERE {"" if multi else "NOT "}s.multi"""

    # Weights are >= 0, so a sum is > 0 exactly where a max is. Where every spec sums (no
    # `even` or contract weights over several services), the max is not needed at all.
    services = tables.spec_services.groupby("spec").size()
    multi = tables.specs["spec"].isin(services.index[services > 1])
    summed = bool((tables.specs.loc[multi, "agg"] == "sum").all())
    combined = (
        "sum(weight)"
        if summed
        else "CASE WHEN any_value(agg = 'max') THEN max(weight) ELSE sum(weight) END"
    )
    con.execute(
        f"""
        CREATE OR REPLACE TEMP TABLE recipients AS
        SELECT pool, client, weight FROM ({usage_rows(False)}) WHERE weight > 0
        UNION ALL
        SELECT pool, client, weight FROM (
            SELECT pool, client, ({combined})::HUGEINT AS weight
            FROM ({usage_rows(True)}) GROUP BY pool, client
        ) WHERE weight > 0
        """
    )


def _arithmetic(
    con: duckdb.DuckDBPyConnection,
) -> tuple[tuple[Arithmetic, bool], tuple[Arithmetic, bool]]:
    """The arithmetic of the keyed split and of the idle split, and whether each ranks its
    remainders as ``BIGINT`` (``narrow``, :data:`MAX_NARROW_TOTAL`), from their largest pool
    and largest measure total (for idle: a bound, every attributed amount of the chunk or one
    ``MEASURE_SCALE`` per client for ``even``). Small aggregates over small tables."""
    row = con.execute(
        f"""SELECT (SELECT coalesce(max(amount), 0) FROM t_pools),
                   (SELECT coalesce(max(total), 0) FROM pool_totals)::VARCHAR,
                   (SELECT coalesce(max(amount), 0) FROM t_idle_pools),
                   (SELECT coalesce(sum(amount), 0) FROM t_pools)
                     + (SELECT coalesce(sum(amount), 0) FROM t_direct)
                     + (SELECT count(*) FROM t_clients) * {MEASURE_SCALE}"""
    ).fetchall()[0]
    keyed = choose_arithmetic(int(row[0]), int(row[1])), int(row[1]) <= MAX_NARROW_TOTAL
    idle = choose_arithmetic(int(row[2]), int(row[3])), int(row[3]) <= MAX_NARROW_TOTAL
    return keyed, idle


def _check_ranges(con: duckdb.DuckDBPyConnection) -> None:
    """Refuse a split whose numbers leave the ranges that keep it exact (``tenantcost.limits``).

    A pool's measure total is a sum of usage rows, so only the sum can pass
    :data:`~tenantcost.limits.MAX_POOL_MEASURE`: that is an input error naming the window and
    key. Pool amounts come from checked cost and external totals; one outside
    ``[0, MAX_AMOUNT_TOTAL]`` is a broken invariant.
    """
    pools = con.execute(
        f"""SELECT (SELECT count_if(amount < 0 OR amount > {MAX_AMOUNT_TOTAL}) FROM t_pools)
                 + (SELECT count_if(amount < 0 OR amount > {MAX_AMOUNT_TOTAL})
                    FROM t_idle_pools)"""
    ).fetchall()
    if pools and pools[0][0]:
        raise InternalError(
            f"a pool amount is outside [0, {MAX_AMOUNT_TOTAL}] micro-units; the cost readers "
            "should have refused its input"
        )
    over = con.execute(
        f"""SELECT p.window_start, p.window_end, p.key, p.source, t.total::VARCHAR
            FROM pool_totals t JOIN t_pools p ON p.pool = t.pool
            WHERE t.total > {MAX_POOL_MEASURE}::HUGEINT
            ORDER BY p.window_start, p.source LIMIT 1"""
    ).fetchall()
    if over:
        start, end, key, source, total = over[0]
        raise InputError(
            f"the usage of '{source}' in window {pd.Timestamp(start).isoformat()} .. "
            f"{pd.Timestamp(end).isoformat()} adds up to {int(total) / MEASURE_SCALE:.6g}, "
            f"beyond the {MAX_POOL_MEASURE // MEASURE_SCALE:.0e} one split holds exactly".replace(
                "e+", "e"
            ),
            where="usage",
            column=str(key),
        )


def _check_conserved(con: duckdb.DuckDBPyConnection, parts: str, pools: str) -> None:
    """Every split pool's parts add up to its amount (a cheap aggregate over the parts)."""
    broken = con.execute(
        f"""SELECT count(*) FROM (SELECT pool, sum(amount) AS amount FROM {parts} GROUP BY pool) k
            JOIN {pools} p ON p.pool = k.pool WHERE k.amount <> p.amount"""
    ).fetchall()
    if broken and broken[0][0]:
        raise InternalError(f"{broken[0][0]} split pool(s) in {parts} do not add up to the pool")


def fetch_lines(con: duckdb.DuckDBPyConnection) -> pd.DataFrame:
    """The window-level lines of the last split."""
    return con.execute(f"SELECT {', '.join(LINE_COLUMNS)} FROM lines").df()


def fetch_unattributed(con: duckdb.DuckDBPyConnection) -> pd.DataFrame:
    return con.execute(f"SELECT {', '.join(UNATTRIBUTED_COLUMNS)} FROM unattributed").df()


POOL_CLIENT_COLUMNS = ["rule_id", "kind", "source", "key", "min_clients"]
"""Columns of :func:`fetch_pool_clients` (and of ``AllocationResult.pool_clients``)."""

POOL_CLIENTS_SQL = """
    WITH keyed_counts AS (
        -- Recipients are unique per pool and client; the empty client id is no client.
        SELECT r.pool, count(*) AS n FROM recipients r
        WHERE r.client <> (SELECT coalesce(min(cid), -1) FROM t_clients WHERE client = '')
        GROUP BY r.pool
    ),
    keyed AS (
        SELECT p.rule_id, p.kind, p.source, p.key, min(c.n) AS min_clients
        FROM keyed_counts c JOIN t_pools p ON p.pool = c.pool
        GROUP BY p.rule_id, p.kind, p.source, p.key
    ),
    idle_counts AS (
        SELECT pool, count(*) AS n FROM idle_parts GROUP BY pool
    ),
    idle AS (
        SELECT p.rule_id, 'idle' AS kind, 'idle' AS source, p.method AS key,
               min(c.n) AS min_clients
        FROM idle_counts c JOIN t_idle_pools p ON p.pool = c.pool
        GROUP BY p.rule_id, p.method
    )
    SELECT rule_id, kind, source, key, min_clients::BIGINT AS min_clients FROM keyed
    UNION ALL
    SELECT rule_id, kind, source, key, min_clients::BIGINT FROM idle
"""


def fetch_pool_clients(con: duckdb.DuckDBPyConnection) -> pd.DataFrame:
    """Per pool source of the last split, the fewest clients among which one window split it.

    A client's sheet may show a pool's totals only where every window split it among enough
    clients (``tenantcost.report.sheet``): with two, the total minus the reader's own figure
    is the other client's. Only windows in which the pool reached at least one client count
    (a window with no client usage adds nothing to any client's figure), so a source missing
    here reached no client in this split. Counted where the recipients are known, from the
    split's own tables: no extra scan of the usage.
    """
    return con.execute(POOL_CLIENTS_SQL).df()


MEASURE_LIMB = 2**40
"""Period lines carry their measure sums, exact integers of micro-units of the key's unit up to
``2^120`` (a pool's measure is at most ``tenantcost.limits.MAX_POOL_MEASURE``, 1e27 or
``2^90``, so a sum over a million windows fits), as three ``int64`` limbs of this base: the
fold adds limbs over chunks exactly and turns each sum into a float once
(``tenantcost.engine.fold``), so a measure does not depend on how the period was chunked or
batched (float sums do)."""

MEASURE_LIMB_COLUMNS = [
    "measure_2", "measure_1", "measure_0", "total_2", "total_1", "total_0"
]  # fmt: skip
"""The limbs of a chunk's period lines, most significant first (:data:`MEASURE_LIMB`)."""


def _limbs(value: str, name: str) -> str:
    """``value`` (a non-negative ``HUGEINT``) as three ``BIGINT`` limbs ``{name}_2..0``.

    The limb is a power of two, so for a non-negative value the quotients and remainders are
    shifts and masks: the same limbs, about 14 % less time for the period lines than 128-bit
    divisions."""
    bits = MEASURE_LIMB.bit_length() - 1
    mask = MEASURE_LIMB - 1
    return (
        f"({value} >> {2 * bits})::BIGINT AS {name}_2, "
        f"(({value} >> {bits}) & {mask})::BIGINT AS {name}_1, "
        f"({value} & {mask})::BIGINT AS {name}_0"
    )


_NO_CLIENT = "(SELECT coalesce(min(cid), -1) FROM t_clients WHERE client = '')"
_WINDOW_SUMS = """min(p.window_start) AS window_start, max(p.window_end) AS window_end,
               sum(k.weight) AS weight, sum(k.total) AS total, sum(k.amount) AS amount,
               count(*) AS windows"""
_KEYED_SUMS = f"""
        -- Aggregate on integer keys first (spec, client); labels are joined afterwards.
        SELECT p.spec, k.client, {_WINDOW_SUMS}
        FROM keyed k JOIN t_pools p ON p.pool = k.pool
        WHERE k.client <> {_NO_CLIENT}
        GROUP BY p.spec, k.client"""
_IDLE_SUMS = f"""
        SELECT p.rule_id, p.method AS key, k.client, {_WINDOW_SUMS}
        FROM idle_parts k JOIN t_idle_pools p ON p.pool = k.pool
        GROUP BY p.rule_id, p.method, k.client"""


def _period_line_sql(keyed_sums: str, idle_sums: str) -> str:
    """The period lines from per-(spec, client) and per-(rule, method, client) sums."""
    return f"""
    WITH keyed_sums AS ({keyed_sums}
    ),
    spec_labels AS (
        SELECT DISTINCT spec, rule_id, source, kind, key FROM t_pools
    ),
    idle_sums AS ({idle_sums}
    )
    SELECT s.window_start, s.window_end, l.rule_id, c.client, l.source, l.kind, l.key,
           {_limbs("s.weight", "measure")}, {_limbs("s.total", "total")},
           s.amount::BIGINT AS amount, s.windows::BIGINT AS windows
    FROM keyed_sums s JOIN spec_labels l ON l.spec = s.spec
    JOIN t_clients c ON c.cid = s.client
    UNION ALL
    SELECT i.window_start, i.window_end, i.rule_id, c.client, 'idle', 'idle', i.key,
           {_limbs("i.weight", "measure")}, {_limbs("i.total", "total")},
           i.amount::BIGINT, i.windows::BIGINT
    FROM idle_sums i JOIN t_clients c ON c.cid = i.client
"""


PERIOD_LINE_SQL = _period_line_sql(_KEYED_SUMS, _IDLE_SUMS)

_POOL_DAYS = "(SELECT *, CAST(window_start AS DATE) AS day FROM {pools})"
_SPEC_DAY = 100_000
"""A keyed pool's (spec, UTC day) as one integer, ``spec x 100,000 + days since 1970-01-01``
(below 100,000 until the year 2243): grouping on one integer key rather than two columns
took 10 % off the day sums (1.88 s to 1.69 s over a month of 10,000 clients)."""
_POOL_SPEC_DAYS = (
    f"(SELECT *, spec::BIGINT * {_SPEC_DAY} + datediff('day', DATE '1970-01-01', "
    "CAST(window_start AS DATE)) AS spec_day FROM t_pools)"
)
DAY_SUMS_SQL = f"""
    CREATE OR REPLACE TEMP TABLE keyed_days AS
        SELECT p.spec_day, k.client, {_WINDOW_SUMS}
        FROM keyed k JOIN {_POOL_SPEC_DAYS} p ON p.pool = k.pool
        WHERE k.client <> {_NO_CLIENT}
        GROUP BY p.spec_day, k.client;
    CREATE OR REPLACE TEMP TABLE idle_days AS
        SELECT p.rule_id, p.method AS key, k.client, p.day, {_WINDOW_SUMS}
        FROM idle_parts k JOIN {_POOL_DAYS.format(pools="t_idle_pools")} p ON p.pool = k.pool
        GROUP BY p.rule_id, p.method, k.client, p.day;
"""
"""A split's sums per UTC day (of each window's start), on integer keys, when a run also
wants its lines per day (a conversion at daily exchange rates): the period lines
(:data:`PERIOD_FROM_DAYS_SQL`) and the day lines are both read from these, so the split's
rows are aggregated once. The day is computed per pool, not per row."""

_FROM_DAYS = """min(window_start) AS window_start, max(window_end) AS window_end,
               sum(weight)::HUGEINT AS weight, sum(total)::HUGEINT AS total,
               sum(amount) AS amount, sum(windows) AS windows"""
PERIOD_FROM_DAYS_SQL = _period_line_sql(
    f"SELECT spec_day // {_SPEC_DAY} AS spec, client, {_FROM_DAYS} FROM keyed_days "
    f"GROUP BY spec_day // {_SPEC_DAY}, client",
    f"SELECT rule_id, key, client, {_FROM_DAYS} FROM idle_days GROUP BY rule_id, key, client",
)
""":data:`PERIOD_LINE_SQL` from the day sums: the same sums, in two steps."""
DAY_LINE_SQL = f"""
    SELECT s.spec_day // {_SPEC_DAY} AS spec, c.client,
           DATE '1970-01-01' + (s.spec_day % {_SPEC_DAY})::INTEGER AS day,
           s.amount::BIGINT AS amount
    FROM keyed_days s JOIN t_clients c ON c.cid = s.client
"""
"""A chunk's keyed lines per day, labelled by spec (an integer) and client only: the spec's
labels (:data:`SPEC_LABEL_SQL`) are joined once in the fold, not on every row."""
SPEC_LABEL_SQL = (
    "SELECT DISTINCT spec, rule_id, source, kind, coalesce(key, '') AS key FROM t_pools"
)
IDLE_DAY_LINE_SQL = """
    SELECT i.rule_id, c.client, 'idle' AS source, 'idle' AS kind, coalesce(i.key, '') AS key,
           i.day, i.amount::BIGINT AS amount
    FROM idle_days i JOIN t_clients c ON c.cid = i.client
"""
DAY_LINE_COLUMNS = ["rule_id", "client", "source", "kind", "key", "day", "amount"]
"""Columns of the lines per day (``AllocationResult.line_days``)."""


@dataclass
class DayLines:
    """A chunk's lines per UTC day: keyed lines by spec and client (``spec, client, day,
    amount``), the labels of its specs, and the idle lines with their labels
    (:data:`DAY_LINE_COLUMNS`)."""

    keyed: pd.DataFrame
    specs: pd.DataFrame
    idle: pd.DataFrame


def fetch_period_and_day_lines(
    con: duckdb.DuckDBPyConnection,
) -> tuple[pd.DataFrame, DayLines]:
    """The last split's period lines (as :func:`fetch_period_lines`) and its lines per client,
    source and UTC day, for a conversion at daily exchange rates (``tenantcost.convert``):
    the split's rows are summed once per day on integer keys (:data:`DAY_SUMS_SQL`), both are
    read from those sums, and labels are joined last."""
    try:
        con.execute(DAY_SUMS_SQL)
        period = con.sql(PERIOD_FROM_DAYS_SQL).to_arrow_table().to_pandas()
        days = DayLines(
            con.sql(DAY_LINE_SQL).to_arrow_table().to_pandas(),
            con.sql(SPEC_LABEL_SQL).to_arrow_table().to_pandas(),
            con.sql(IDLE_DAY_LINE_SQL).to_arrow_table().to_pandas(),
        )
    except (duckdb.OutOfRangeException, duckdb.ConversionException) as exc:
        raise InternalError(f"period sums out of range: {_first_line(exc)}") from exc
    return period, days


def fetch_period_lines(con: duckdb.DuckDBPyConnection) -> pd.DataFrame:
    """The last split's lines summed over its windows, one row per client and source, with
    the measure sums as exact limbs (:data:`MEASURE_LIMB_COLUMNS`) instead of ``measure``,
    ``total_measure`` and ``share``, which the fold derives once it has every chunk.

    Measures are summed in ``HUGEINT`` and amounts cast back to ``BIGINT``; both are sums of
    parts of checked totals (``tenantcost.limits``), so a range error here is internal.
    """
    try:
        # Through Arrow: strings stay Arrow-backed (pandas' ``str``), several times faster
        # than ``.df()``, which makes a Python object of every label of every line.
        return con.sql(PERIOD_LINE_SQL).to_arrow_table().to_pandas()
    except (duckdb.OutOfRangeException, duckdb.ConversionException) as exc:
        raise InternalError(f"period sums out of range: {_first_line(exc)}") from exc
