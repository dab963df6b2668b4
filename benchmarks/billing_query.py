"""The yardstick of the billing benchmark: a plain DuckDB query over the billing file.

    python benchmarks/billing_query.py --billing /tmp/b/billing.parquet [--repeat 3]

The target bounds ``allocate`` with billing data: at most the time of ``allocate`` without it
plus 3x this query, which groups the same billing file by ``ServiceName``, ``SubAccountId``,
``ChargeCategory`` and hour with the ``Tags`` JSON parsed. The query reads every row, parses
each row's ``Tags`` once (the ``tenant`` and ``aws:eks:cluster-name`` keys, as billed lines
are matched on them) and sums the exact decimal costs per group, in and out of the cluster.
The hour is ``time_bucket`` (``date_trunc`` on a ``TIMESTAMP WITH TIME ZONE`` goes through
ICU's calendar, several times slower: the yardstick is the query one would write to be fast);
the groups are fetched as Arrow (exact decimals, no Python object per group).

Prints one JSON line: the rows read, the groups, the seconds of each run (the query alone,
on a fresh connection each time, results fetched) and their median. The whole process
(start-up included) is what ``run.py --sections billing`` times.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import duckdb
import pyarrow.compute as pc

QUERY = """
WITH parsed AS (
    SELECT ServiceName, SubAccountId, ChargeCategory,
           time_bucket(INTERVAL '1 hour', ChargePeriodStart) AS hour,
           BilledCost, EffectiveCost,
           json_extract_string(Tags, ['$.tenant', '$."aws:eks:cluster-name"']) AS tag
    FROM read_parquet(?)
)
SELECT ServiceName, SubAccountId, ChargeCategory, hour,
       COUNT(*) AS lines,
       SUM(BilledCost) AS billed,
       SUM(EffectiveCost) AS effective,
       SUM(EffectiveCost) FILTER (WHERE tag[2] IS NOT NULL) AS cluster_effective,
       COUNT(*) FILTER (WHERE tag[1] IS NOT NULL) AS tenant_lines
FROM parsed
GROUP BY ServiceName, SubAccountId, ChargeCategory, hour
"""


def run_once(path: str, threads: int | None) -> tuple[float, int, int]:
    """Seconds of one run of the query on a fresh connection; groups and rows seen."""
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    if threads:
        con.execute(f"SET threads = {int(threads)}")
    begin = time.perf_counter()
    groups = con.sql(QUERY, params=[path]).to_arrow_table()  # Arrow: exact, no Python objects
    seconds = time.perf_counter() - begin
    con.close()
    return seconds, groups.num_rows, int(pc.sum(groups["lines"]).as_py())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--billing", type=Path, required=True, help="the billing Parquet file")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--threads", type=int, help="DuckDB threads (default: all cores)")
    args = parser.parse_args(argv)
    if not args.billing.exists():
        parser.error(f"--billing {args.billing}: no such file")
    runs = [run_once(str(args.billing), args.threads) for _ in range(max(1, args.repeat))]
    seconds = [round(r[0], 3) for r in runs]
    print(
        json.dumps(
            {
                "billing": str(args.billing),
                "rows": runs[0][2],
                "groups": runs[0][1],
                "seconds": seconds,
                "median_seconds": round(statistics.median(seconds), 3),
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
