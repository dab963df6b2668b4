"""The ``csv`` section of ``benchmarks/run.py``: usage handed over as CSV against the same usage
as Parquet.

Many users export usage as CSV. The target (issue "Speed") is that ``allocate`` on CSV takes at
most twice the time of the same rows as Parquet, with the same one-line errors. This section
takes a report case's month (``pack300`` by default: 300 clients x 10 services x 744 h), writes
its usage once as one CSV file (ISO 8601 UTC timestamps, the way applications export them, rows
in time order) next to the Parquet dataset, and times ``tenantcost allocate --month M --format
json`` on each, ``--repeat`` times alternately. Both runs must print the same per-client totals
to the micro-unit; a difference is an error.
"""

from __future__ import annotations

import argparse
import shlex
import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

import duckdb


class Measured(Protocol):
    """What ``run.measure`` returns (the fields this section reads)."""

    seconds: float
    peak_rss: int
    returncode: int
    stdout: str


CSV_NAME = "usage.csv"
RULES_NAME = "rules.csv.yaml"


def write_csv_case(folder: Path) -> Path:
    """Write the case's usage as one CSV and a rule file reading it; reuse them when present.

    Returns the rule file. The CSV has the canonical columns in the canonical order, every
    timestamp as ``YYYY-MM-DDTHH:MM:SSZ``.
    """
    csv_file, rules = folder / CSV_NAME, folder / RULES_NAME
    if not csv_file.exists():
        con = duckdb.connect()
        con.execute("SET TimeZone = 'UTC'")
        metrics = [
            name
            for name, in con.execute(
                "SELECT column_name FROM (DESCRIBE SELECT * FROM read_parquet(?, "
                "hive_partitioning = true))",
                [str(folder / "usage" / "**" / "*.parquet")],
            ).fetchall()
            if name not in ("window_start", "window_end", "service", "client", "date")
        ]
        stamp = "strftime({0}, '%Y-%m-%dT%H:%M:%SZ') AS {0}"
        select = ", ".join(
            [stamp.format("window_start"), stamp.format("window_end"), "service", "client"]
            + [f'"{m}"' for m in metrics]
        )
        tmp = csv_file.with_suffix(".csv.tmp")
        con.execute(
            f"COPY (SELECT {select} FROM read_parquet('{folder}/usage/**/*.parquet', "
            "hive_partitioning = true) ORDER BY window_start, service, client) "
            f"TO '{tmp}' (HEADER, DELIMITER ',')"
        )
        tmp.rename(csv_file)
    text = (folder / "rules.yaml").read_text(encoding="utf-8")
    rules.write_text(text.replace("usage: [usage]", f"usage: [{CSV_NAME}]"), encoding="utf-8")
    if f"usage: [{CSV_NAME}]" not in rules.read_text(encoding="utf-8"):
        raise RuntimeError(f"{folder / 'rules.yaml'}: no 'usage: [usage]' line to point at CSV")
    return rules


def csv_rows(table: Sequence[tuple[str, Measured, Measured]]) -> list[str]:
    """Markdown rows: format, median seconds, peak RSS, ratio to Parquet."""
    parquet = statistics.median(r.seconds for _, r, _ in table)
    csv = statistics.median(c.seconds for _, _, c in table)
    parquet_rss = statistics.median(r.peak_rss for _, r, _ in table)
    csv_rss = statistics.median(c.peak_rss for _, _, c in table)
    return [
        "| usage as | median s | peak RSS | × Parquet |",
        "|---|---|---|---|",
        f"| Parquet (hive dataset) | {parquet:.2f} | {parquet_rss / 2**20:,.0f} MiB | 1.00 |",
        f"| CSV (one file) | {csv:.2f} | {csv_rss / 2**20:,.0f} MiB | {csv / parquet:.2f} |",
    ]


def allocate_cmd(args: argparse.Namespace, rules: Path, month: str) -> list[str]:
    """What a user runs: the whole JSON document of one month."""
    return [
        *shlex.split(args.tenantcost),
        "allocate",
        "--config",
        str(rules),
        "--month",
        month,
        "--format",
        "json",
    ]
