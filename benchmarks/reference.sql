-- tenantcost's allocation written as plain DuckDB SQL: the tool a data engineer would write
-- instead. It must agree with `tenantcost allocate` to the micro-unit on every client.
--
-- THE ARITHMETIC (all amounts are integers of micro-units, 1 USD = 1,000,000):
--
--  1. Cost rows. Each OpenCost allocation row's cost is
--       micros = round_half_even(totalCost * 10^6)          (DOUBLE product, then BIGINT)
--     Rows are classified by the first workload entry (in rule order) whose match selects them
--     (a missing property is ''; patterns are literal or shell globs). A row no entry matches
--     is an error. A shared pool is the sum of micros per (window, shared entry).
--  2. Measures are quantized: w = round_half_even(measure * 10^6)::BIGINT ("micro-measure")
--     per usage row; for key `even`, w = 10^6 for every row with any metric > 0. Only rows
--     with w > 0 take part. A shared entry's recipients are the usage rows of its service in
--     the window (one per client). An external cost's recipients are the clients' w summed
--     over the services it lists (default: every shared service of the rule).
--  3. Split of a pool P (BIGINT) over its recipients (largest remainder):
--       W     = SUM(w) over the pool (exact, HUGEINT)
--       base  = (P * w) // W;  frac = (P * w) % W       -- exact, HUGEINT (P * w < 1e38 here)
--       (frac is the numerator of the exact fractional part; W is common to the pool)
--       R     = P - SUM(base) over the pool
--       rows ranked by frac DESC, client ASC (binary string order): rank <= R gets base + 1,
--       the others get base.
--     The empty client '' (usage without a client id) takes part like any client; its part is
--     unattributed. A pool with no recipient is unattributed as a whole.
--  4. External costs, per cost window [s, e) (epoch seconds):
--       per hour,  rate r micro:  C(t) = floor(r * t / 3600),             amount = C(e) - C(s)
--       per month, M micro over each calendar month [ms, me) the window touches:
--                  C(t) = floor(M * (clip(t, ms, me) - ms) / (me - ms)), amount = sum C(e)-C(s)
--     (exact integer arithmetic, HUGEINT). Split like a shared pool, with the external's key.
--  5. Idle (`idle: proportional`): each window's idle pool (sum of the micros of its idle rows)
--     is split over the clients (not '') in proportion to their attributed amount in that
--     window (shared + external parts, integers, used as w without scaling); clients with 0
--     attributed get none; same rounding as 3. (`idle: even`: w = 1 for each such client.)
--  6. Client total = shared parts + external parts + distributed idle.
--
-- INPUTS (set by benchmarks/reference.py before running this file):
--   variables  costs_file VARCHAR, usage_files VARCHAR[],
--              period_start, period_end TIMESTAMPTZ (NULL = the whole span of the cost data)
--   tables     rule_match(ord, name, cluster, namespace, controller_kind, controller)
--                  one row per combination of patterns of entry `ord` (NULL = any value);
--                  lists in a match are expanded into several rows
--              rule_workloads(ord INTEGER, class VARCHAR, service VARCHAR, key VARCHAR)
--              rule_externals(ext INTEGER, name VARCHAR, amount_micros BIGINT,
--                             per VARCHAR, key VARCHAR)
--              rule_external_services(ext INTEGER, service VARCHAR)
--              rule_idle(method VARCHAR)                 -- keep | proportional | even
-- OUTPUT: the last statement returns client, amount_micros (sorted by client); the tables
--   cost_rows, unmatched, pools, attributed, idle_parts, client_totals stay available.

SET TimeZone = 'UTC';
SET preserve_insertion_order = false;  -- no ORDER BY is relied on but the last one

-- 1. Cost rows from the OpenCost /allocation response ----------------------------------------
CREATE OR REPLACE TEMP TABLE cost_rows AS
WITH doc AS (
    SELECT content::JSON AS j FROM read_text(getvariable('costs_file'))
), steps AS (
    SELECT unnest(json_extract(j, '$.data[*]')) AS step FROM doc
), allocations AS (
    SELECT e.key AS alloc_key, e.value AS a
    FROM steps, json_each(steps.step) AS e
), typed AS (
    SELECT
        coalesce(a -> '$.window' ->> '$.start', a ->> '$.start')::TIMESTAMPTZ AS window_start,
        coalesce(a -> '$.window' ->> '$.end', a ->> '$.end')::TIMESTAMPTZ AS window_end,
        coalesce(a ->> '$.name', alloc_key) AS name,
        coalesce(a -> '$.properties' ->> '$.cluster', '') AS cluster,
        coalesce(a -> '$.properties' ->> '$.namespace', '') AS namespace,
        coalesce(a -> '$.properties' ->> '$.controllerKind', '') AS controller_kind,
        coalesce(a -> '$.properties' ->> '$.controller', '') AS controller,
        round_even((a ->> '$.totalCost')::DOUBLE * 1000000, 0)::BIGINT AS micros
    FROM allocations
)
SELECT * FROM typed
WHERE getvariable('period_start') IS NULL
   OR (window_start >= getvariable('period_start') AND window_end <= getvariable('period_end'));

-- Classification: first matching entry per distinct workload identity.
CREATE OR REPLACE TEMP TABLE classified AS
WITH combos AS (
    SELECT DISTINCT name, cluster, namespace, controller_kind, controller FROM cost_rows
), matched AS (
    SELECT c.name, c.cluster, c.namespace, c.controller_kind, c.controller, min(m.ord) AS ord
    FROM combos c
    LEFT JOIN rule_match m
      ON (m.name IS NULL OR c.name GLOB m.name)
     AND (m.cluster IS NULL OR c.cluster GLOB m.cluster)
     AND (m.namespace IS NULL OR c.namespace GLOB m.namespace)
     AND (m.controller_kind IS NULL OR c.controller_kind GLOB m.controller_kind)
     AND (m.controller IS NULL OR c.controller GLOB m.controller)
    GROUP BY ALL
)
SELECT r.window_start, r.window_end, r.micros, m.ord, w.class, w.service, w.key, r.name,
       r.namespace, r.controller
FROM cost_rows r
JOIN matched m USING (name, cluster, namespace, controller_kind, controller)
LEFT JOIN rule_workloads w USING (ord);

CREATE OR REPLACE TEMP TABLE unmatched AS
SELECT * FROM classified WHERE ord IS NULL;

CREATE OR REPLACE TEMP TABLE cost_windows AS
SELECT DISTINCT window_start, window_end FROM classified;

-- 2. Usage, quantized: the micro-measure of every key, per usage row --------------------------
-- Keys are the application export's columns `requests` and `cpu_seconds`, or `even`
-- (any metric column > 0; every column but the four key columns is a metric).
CREATE OR REPLACE TEMP VIEW usage_w AS
SELECT window_start::TIMESTAMPTZ AS window_start, window_end::TIMESTAMPTZ AS window_end,
       service, coalesce(client, '') AS client,
       round_even(requests::DOUBLE * 1000000, 0)::BIGINT AS w_requests,
       round_even(cpu_seconds::DOUBLE * 1000000, 0)::BIGINT AS w_cpu_seconds,
       CASE WHEN greatest(*COLUMNS(* EXCLUDE (window_start, window_end, service, client))) > 0
            THEN 1000000 ELSE 0 END::BIGINT AS w_even
FROM read_parquet(getvariable('usage_files'), hive_partitioning = false, union_by_name = true);

CREATE OR REPLACE TEMP MACRO key_w(key, w_requests, w_cpu_seconds, w_even) AS
    CASE key WHEN 'requests' THEN w_requests WHEN 'cpu_seconds' THEN w_cpu_seconds
             WHEN 'even' THEN w_even END;

-- 3. Pools ---------------------------------------------------------------------------------------
-- 4. External costs: exact cumulative accruals, per hour or spread over calendar months.
CREATE OR REPLACE TEMP TABLE external_amounts AS
WITH win AS (
    SELECT window_start, window_end,
           epoch_ms(window_start) // 1000 AS s, epoch_ms(window_end) // 1000 AS e
    FROM cost_windows
), win_months AS (
    SELECT window_start, window_end, s, e,
           epoch_ms(m) // 1000 AS ms, epoch_ms(m + INTERVAL 1 MONTH) // 1000 AS me
    FROM (
        SELECT *, unnest(generate_series(
                      date_trunc('month', window_start),
                      date_trunc('month', window_end - INTERVAL 1 MICROSECOND),
                      INTERVAL 1 MONTH)) AS m
        FROM win
    )
)
SELECT w.window_start, w.window_end, x.ext,
       ((x.amount_micros::HUGEINT * w.e) // 3600
        - (x.amount_micros::HUGEINT * w.s) // 3600)::BIGINT AS amount
FROM win w JOIN rule_externals x ON x.per = 'hour'
UNION ALL
SELECT m.window_start, m.window_end, x.ext,
       sum((x.amount_micros::HUGEINT * (least(greatest(m.e, m.ms), m.me) - m.ms))
               // (m.me - m.ms)
           - (x.amount_micros::HUGEINT * (least(greatest(m.s, m.ms), m.me) - m.ms))
               // (m.me - m.ms))::BIGINT
FROM win_months m JOIN rule_externals x ON x.per = 'month'
GROUP BY m.window_start, m.window_end, x.ext;

CREATE OR REPLACE TEMP TABLE pools AS
SELECT row_number() OVER (ORDER BY window_start, kind DESC, ref) AS pool, *
FROM (
    SELECT window_start, window_end, 'shared' AS kind, ord AS ref,
           any_value(service) AS service, any_value(key) AS key, sum(micros)::BIGINT AS amount
    FROM classified WHERE class = 'shared'
    GROUP BY window_start, window_end, ord
    UNION ALL
    SELECT a.window_start, a.window_end, 'external', a.ext, NULL, x.key, a.amount
    FROM external_amounts a JOIN rule_externals x USING (ext)
);

-- Recipients: (pool, client, w > 0), one row per client of the pool. A view: the usage is
-- scanned where it is needed and never held in memory as a whole.
CREATE OR REPLACE TEMP VIEW recipients AS
SELECT p.pool, u.client, key_w(p.key, u.w_requests, u.w_cpu_seconds, u.w_even) AS w
FROM usage_w u
JOIN pools p
  ON p.kind = 'shared' AND u.window_start = p.window_start AND u.window_end = p.window_end
 AND u.service = p.service
WHERE key_w(p.key, u.w_requests, u.w_cpu_seconds, u.w_even) > 0
UNION ALL
SELECT p.pool, u.client, sum(key_w(p.key, u.w_requests, u.w_cpu_seconds, u.w_even))::BIGINT
FROM usage_w u
JOIN rule_external_services s ON u.service = s.service
JOIN pools p
  ON p.kind = 'external' AND p.ref = s.ext AND u.window_start = p.window_start
 AND u.window_end = p.window_end
WHERE key_w(p.key, u.w_requests, u.w_cpu_seconds, u.w_even) > 0
GROUP BY p.pool, u.client;

-- 3. Largest-remainder split, as a macro over rows (grp, tag, client, w, P) -------------------
-- Returns (grp, tag, client, part); the parts of a group sum to its P exactly. `tag` is
-- carried along (here: the window start) so that callers need no join to aggregate parts.
CREATE OR REPLACE TEMP MACRO largest_remainder(rows_table) AS TABLE
WITH totals AS (
    SELECT grp, sum(w) AS W FROM query_table(rows_table) GROUP BY grp
), q AS (
    SELECT r.grp, r.tag, r.client, r.P, r.P::HUGEINT * r.w AS Pw, t.W
    FROM query_table(rows_table) r JOIN totals t ON r.grp = t.grp
), b AS (
    SELECT grp, tag, client, P, (Pw // W)::BIGINT AS base, Pw % W AS frac
    FROM q
), ranked AS (
    SELECT grp, tag, client, base,
           P - sum(base) OVER (PARTITION BY grp) AS R,
           row_number() OVER (PARTITION BY grp ORDER BY frac DESC, client ASC) AS rnk
    FROM b
)
SELECT grp, tag, client, (base + CASE WHEN rnk <= R THEN 1 ELSE 0 END)::BIGINT AS part
FROM ranked;

CREATE OR REPLACE TEMP VIEW split_input AS
SELECT r.pool AS grp, p.window_start AS tag, r.client, r.w, p.amount AS P
FROM recipients r JOIN pools p USING (pool);

-- What each client was attributed in each window (shared + external parts). The parts of
-- the empty client '' are unattributed and dropped here.
CREATE OR REPLACE TEMP TABLE attributed AS
SELECT tag AS window_start, client, sum(part)::BIGINT AS amount
FROM largest_remainder('split_input')
WHERE client <> ''
GROUP BY tag, client;

-- 5. Idle, split over the clients in proportion to what they were attributed ------------------
CREATE OR REPLACE TEMP VIEW idle_input AS
WITH idle_pools AS (
    SELECT window_start, sum(micros)::BIGINT AS P
    FROM classified WHERE class = 'idle'
    GROUP BY window_start
)
SELECT i.window_start AS grp, i.window_start AS tag, a.client,
       CASE (SELECT min(method) FROM rule_idle) WHEN 'even' THEN 1 ELSE a.amount END AS w,
       i.P
FROM idle_pools i
JOIN attributed a USING (window_start)
WHERE a.amount > 0 AND (SELECT min(method) FROM rule_idle) IN ('proportional', 'even');

CREATE OR REPLACE TEMP TABLE idle_parts AS
SELECT tag AS window_start, client, part FROM largest_remainder('idle_input');

-- 6. Client totals -----------------------------------------------------------------------------
CREATE OR REPLACE TEMP TABLE client_totals AS
SELECT client, sum(part)::BIGINT AS amount_micros
FROM (
    SELECT client, amount AS part FROM attributed
    UNION ALL
    SELECT client, part FROM idle_parts
)
GROUP BY client;

SELECT client, amount_micros FROM client_totals ORDER BY client;
