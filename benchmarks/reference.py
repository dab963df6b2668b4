"""Run the plain-DuckDB reference allocation (``reference.sql``) over a rule file's inputs.

    python benchmarks/reference.py --config /tmp/bench-small/rules.yaml [--out totals.csv]

Prints the per-client totals as CSV ``client,amount_micros`` (sorted by client; clients without
a client id are not listed) and, with ``--out``, writes the same CSV to a file. Timing goes to
stderr. See the top of ``reference.sql`` for the arithmetic.

The rule file is read with PyYAML only (not with tenantcost), so the reference shares no code
with the tool it checks. Supported: one rule version; match on ``name``, ``cluster``,
``namespace``, ``controller_kind``, ``controller`` (literals, globs, lists); classes
``shared, idle, overhead, reserve, excluded``; keys that name a usage column or ``even``;
external costs per hour or per month; ``idle: keep | proportional | even``. Usage must be
Parquet (a file, a folder, or a hive-partitioned folder).
"""

from __future__ import annotations

import argparse
import itertools
import sys
import time
from decimal import ROUND_HALF_EVEN, Decimal
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd
import yaml

HERE = Path(__file__).resolve().parent
SQL_FILE = HERE / "reference.sql"
MATCH_COLUMNS = ("name", "cluster", "namespace", "controller_kind", "controller")
CLASSES = ("shared", "idle", "overhead", "reserve", "excluded")


class Unsupported(Exception):
    """The rule file uses something the reference does not implement."""


def _micros(amount: Any) -> int:
    return int((Decimal(str(amount)) * 10**6).quantize(Decimal(1), rounding=ROUND_HALF_EVEN))


def usage_files(paths: list[Path]) -> list[str]:
    """Every Parquet file of the given files and folders (folders recursively, sorted)."""
    files: list[str] = []
    for path in paths:
        if path.is_dir():
            found = sorted(p for p in path.rglob("*.parquet") if p.is_file())
            if not found:
                raise Unsupported(f"{path}: no .parquet files in this folder")
            files += [str(p) for p in found]
        elif path.suffix.lower() == ".parquet":
            files.append(str(path))
        else:
            raise Unsupported(f"{path}: the reference reads Parquet usage only")
    return files


def rule_tables(doc: dict[str, Any]) -> dict[str, pd.DataFrame]:
    """The rule file as the small tables ``reference.sql`` joins against."""
    rules = doc.get("rules") or []
    if len(rules) != 1:
        raise Unsupported("the reference supports exactly one rule version")
    rule = rules[0]
    match_rows, workload_rows = [], []
    shared_services: list[str] = []
    for ord_, entry in enumerate(rule["workloads"]):
        cls = entry["class"]
        if cls not in CLASSES:
            raise Unsupported(f"workloads[{ord_}]: class '{cls}'")
        match = entry.get("match") or {}
        unknown = set(match) - set(MATCH_COLUMNS)
        if unknown:
            raise Unsupported(f"workloads[{ord_}]: match on {sorted(unknown)}")
        choices = [[None] if col not in match else _as_list(match[col]) for col in MATCH_COLUMNS]
        for combo in itertools.product(*choices):
            match_rows.append((ord_, *combo))
        key = entry.get("key")
        if key is not None and not isinstance(key, str):
            raise Unsupported(f"workloads[{ord_}]: key {key!r} (weights)")
        service = entry.get("service")
        if cls == "shared" and service not in shared_services:
            shared_services.append(service)
        workload_rows.append((ord_, cls, service, key))
    ext_rows, ext_service_rows = [], []
    for x, ext in enumerate(rule.get("external") or []):
        if not isinstance(ext["key"], str):
            raise Unsupported(f"external[{x}]: key {ext['key']!r} (weights)")
        if ext["per"] not in ("hour", "month"):
            raise Unsupported(f"external[{x}]: per '{ext['per']}'")
        ext_rows.append((x, ext["name"], _micros(ext["amount"]), ext["per"], ext["key"]))
        for service in ext.get("services") or shared_services:
            ext_service_rows.append((x, service))
    return {
        "rule_match": pd.DataFrame(match_rows, columns=["ord", *MATCH_COLUMNS]),
        "rule_workloads": pd.DataFrame(workload_rows, columns=["ord", "class", "service", "key"]),
        "rule_externals": pd.DataFrame(
            ext_rows, columns=["ext", "name", "amount_micros", "per", "key"]
        ),
        "rule_external_services": pd.DataFrame(ext_service_rows, columns=["ext", "service"]),
        "rule_idle": pd.DataFrame({"method": [rule.get("idle", "keep")]}),
    }


def _as_list(value: Any) -> list[Any]:
    return [str(v) for v in value] if isinstance(value, list) else [str(value)]


RULE_TABLE_DDL = {
    "rule_match": "ord INTEGER, name VARCHAR, cluster VARCHAR, namespace VARCHAR, "
    "controller_kind VARCHAR, controller VARCHAR",
    "rule_workloads": "ord INTEGER, class VARCHAR, service VARCHAR, key VARCHAR",
    "rule_externals": "ext INTEGER, name VARCHAR, amount_micros BIGINT, per VARCHAR, key VARCHAR",
    "rule_external_services": "ext INTEGER, service VARCHAR",
    "rule_idle": "method VARCHAR",
}


def _create(con: duckdb.DuckDBPyConnection, name: str, frame: pd.DataFrame) -> None:
    """A typed temp table holding ``frame`` (typed even when it has no rows)."""
    con.execute(f"CREATE OR REPLACE TEMP TABLE {name} ({RULE_TABLE_DDL[name]})")
    if not frame.empty:
        con.register("frame_df", frame)
        con.execute(f"INSERT INTO {name} SELECT * FROM frame_df")
        con.unregister("frame_df")


def run_reference(
    config: Path,
    costs: Path | None = None,
    usage: list[Path] | None = None,
    period: tuple[str, str] | None = None,
    threads: int | None = None,
    memory_limit: str | None = None,
) -> pd.DataFrame:
    """Per-client totals ``client, amount_micros`` (int64), sorted by client."""
    doc = yaml.safe_load(config.read_text(encoding="utf-8"))
    base = config.parent
    sources = doc.get("sources") or {}
    cost_paths = [costs] if costs else [base / p for p in sources.get("costs") or []]
    if len(cost_paths) != 1 or cost_paths[0].suffix.lower() != ".json":
        raise Unsupported("the reference reads exactly one OpenCost JSON cost file")
    usage_paths = usage or [base / p for p in sources.get("usage") or []]
    files = usage_files(usage_paths)

    con = duckdb.connect()
    if threads:
        con.execute(f"SET threads = {int(threads)}")
    if memory_limit:
        con.execute(f"SET memory_limit = '{memory_limit}'")
    con.execute("SET TimeZone = 'UTC'")
    con.execute("SET VARIABLE costs_file = ?", [str(cost_paths[0])])
    con.execute("SET VARIABLE usage_files = ?::VARCHAR[]", [files])
    if period is None:
        con.execute("SET VARIABLE period_start = NULL::TIMESTAMPTZ")
        con.execute("SET VARIABLE period_end = NULL::TIMESTAMPTZ")
    else:
        con.execute("SET VARIABLE period_start = ?::TIMESTAMPTZ", [period[0]])
        con.execute("SET VARIABLE period_end = ?::TIMESTAMPTZ", [period[1]])
    for name, frame in rule_tables(doc).items():
        _create(con, name, frame)

    totals = con.execute(SQL_FILE.read_text(encoding="utf-8")).df()
    unmatched = con.execute("SELECT count(*), any_value(name) FROM unmatched").fetchall()[0]
    if unmatched[0]:
        raise Unsupported(
            f"{unmatched[0]} cost row(s) match no workload entry, e.g. {unmatched[1]}"
        )
    con.close()
    return totals.astype({"client": "str", "amount_micros": "int64"})


def _period(args: argparse.Namespace) -> tuple[str, str] | None:
    if args.month:
        start = pd.Timestamp(f"{args.month}-01", tz="UTC")
        return start.isoformat(), (start + pd.offsets.MonthBegin(1)).isoformat()
    if args.start or args.end:
        if not (args.start and args.end):
            raise SystemExit("give both --from and --to")
        return args.start, args.end
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", type=Path, required=True, help="the YAML rule file")
    parser.add_argument("--costs", type=Path, help="OpenCost JSON (default: sources.costs)")
    parser.add_argument(
        "--usage", type=Path, action="append", help="usage Parquet file or folder (repeatable)"
    )
    parser.add_argument("--month", help="period: calendar month YYYY-MM")
    parser.add_argument("--from", dest="start", help="period start (ISO 8601)")
    parser.add_argument("--to", dest="end", help="period end, exclusive (ISO 8601)")
    parser.add_argument("--out", type=Path, help="also write the CSV here")
    parser.add_argument("--threads", type=int, help="DuckDB threads (default: all cores)")
    parser.add_argument("--memory-limit", help="DuckDB memory_limit, e.g. 4GB")
    args = parser.parse_args(argv)
    t0 = time.perf_counter()
    try:
        totals = run_reference(
            args.config,
            args.costs,
            args.usage,
            _period(args),
            threads=args.threads,
            memory_limit=args.memory_limit,
        )
    except Unsupported as exc:
        print(f"reference: unsupported input: {exc}", file=sys.stderr)
        return 2
    text = totals.to_csv(index=False)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text, encoding="utf-8")
    sys.stdout.write(text)
    print(
        f"reference: {len(totals)} clients, total {int(totals['amount_micros'].sum())} micros, "
        f"{time.perf_counter() - t0:.2f} s",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
