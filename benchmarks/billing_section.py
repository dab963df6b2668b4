"""The billing section of the benchmarks: ``allocate`` with 10 M billing rows against without.

    python benchmarks/run.py --sections billing                  # small case, 10 M rows
    python benchmarks/run.py --sections billing --billing-rows 1000000 --repeat 1

The target, on the 1,000-client month (the ``small`` case: 1,000 clients x 10
services x 744 h) and a FOCUS 1.2 billing file of ``--billing-rows`` rows for the same hours
(``benchmarks/billing_data.py``, generated once into ``--data-dir/billing-<rows>/`` and reused
while its ``meta.json`` matches):

* ``allocate`` with billing (``--config rules.billing.yaml --billing FILE``: the rule file plus
  a ``billing:`` section listing ``cluster-one`` and ``billed:`` entries of every class) takes
  at most the time of ``allocate`` without it (``--config rules.yaml``) plus 3x the plain
  DuckDB query of ``benchmarks/billing_query.py`` on the same file;
* its peak RSS stays under 1.5 GB.

Each is a separate process, measured as ``run.py`` measures every run (wall time from spawn to
exit, peak RSS of the process tree), ``--repeat`` times alternately, medians. The query's
process runs it once (``--repeat 1``), so its wall time includes Python's and DuckDB's start-up
like the other two; the query's own time is reported beside it. When the installed
``tenantcost allocate`` has no ``--billing`` option yet, the with-billing runs are reported as
not available (the rest is measured) and the section is not counted as failed.
"""

from __future__ import annotations

import argparse
import json
import shlex
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
CASE = "small"
CLUSTER = "cluster-one"
RSS_LIMIT = 1.5 * 2**30
BUDGET_FACTOR = 3
"""With billing <= without + BUDGET_FACTOR x the plain query: the target."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The section's options (on ``benchmarks/run.py``)."""
    parser.add_argument(
        "--billing-rows", type=int, default=10_000_000, help="rows of the billing file"
    )


def ensure_billing(args: argparse.Namespace, meta: dict[str, object]) -> Path:
    """The billing file for the case's hours, generated unless a matching one is there."""
    hours = int(str(meta["hours"]))
    folder = args.data_dir / f"billing-{args.billing_rows}"
    path, meta_file = folder / "billing.parquet", folder / "meta.json"
    wanted = {"rows": args.billing_rows, "hours": hours, "seed": args.seed, "cluster": CLUSTER}
    if meta_file.exists() and path.exists():
        found = json.loads(meta_file.read_text(encoding="utf-8"))
        if all(found.get(k) == v for k, v in wanted.items()) and found.get("start_iso") == str(
            meta["start"]
        ):
            print(f"[billing] reusing {path} ({found['rows']:,} rows)", flush=True)
            return path
    from run import measure

    cmd = [
        sys.executable, str(HERE / "billing_data.py"), "--rows", str(args.billing_rows),
        "--start", str(meta["start"]), "--hours", str(hours), "--seed", str(args.seed),
        "--cluster", CLUSTER, "--clients", str(meta["clients"]), "--out", str(path),
    ]  # fmt: skip
    print(f"[billing] generating: {shlex.join(cmd)}", flush=True)
    run = measure(cmd, args.timeout)
    if run.returncode != 0:
        raise RuntimeError(f"billing_data.py failed:\n{run.stderr[-2000:]}")
    generated = json.loads(run.stdout.strip().splitlines()[-1])
    generated.update(start_iso=str(meta["start"]), peak_rss=run.peak_rss)
    meta_file.write_text(json.dumps(generated, indent=2) + "\n", encoding="utf-8")
    print(
        f"[billing] generated {generated['rows']:,} rows in {run.seconds:.1f} s, "
        f"peak RSS {run.peak_rss / 2**20:,.0f} MiB",
        flush=True,
    )
    return path


def billing_rules(folder: Path, services: list[str]) -> Path:
    """``rules.billing.yaml``: the case's rule file, ``billed:`` entries of every class in its
    rule version, and a ``billing:`` section listing the cluster (its instance lines carry
    ``aws:eks:cluster-name``)."""
    text = (folder / "rules.yaml").read_text(encoding="utf-8")
    if not text.endswith("    unmatched: error\n"):
        raise RuntimeError(f"{folder / 'rules.yaml'}: not the layout generate.py writes")
    first = ", ".join(services[:3])
    every = ", ".join(services)
    text += f"""\
    billed:
      - match: {{SubAccountId: "2000000000*"}}
        class: outside
        reason: another business unit's account
      - match: {{ChargeCategory: [Tax, Credit, Purchase]}}
        class: overhead
      - match: {{tags: {{tenant: "*"}}}}
        class: direct
        client_from: {{tag: tenant}}
      - match: {{ServiceName: Amazon CloudWatch}}
        class: excluded
        reason: monitoring, outside the client perimeter
      - match: {{ServiceName: [Amazon Relational Database Service, Amazon ElastiCache]}}
        class: shared
        key: cpu_seconds
        services: [{first}]
      - match: {{ProviderName: AWS}}
        name: other billed services
        class: shared
        key: requests
        services: [{every}]
    unmatched_billed: error
billing:
  clusters:
    - name: {CLUSTER}
      match: {{tags: {{"aws:eks:cluster-name": {CLUSTER}}}}}
"""
    out = folder / "rules.billing.yaml"
    out.write_text(text, encoding="utf-8")
    return out


def has_billing_option(tenantcost: str) -> bool:
    """Whether the installed ``allocate`` takes ``--billing`` (older versions do not)."""
    done = subprocess.run(
        [*shlex.split(tenantcost), "allocate", "--help"], capture_output=True, text=True
    )
    return "--billing" in done.stdout


def billing_section(args: argparse.Namespace, errors: list[str]) -> str:
    """Time the plain query, ``allocate`` without and with billing; check the budget."""
    from run import Run, _mib, ensure_data, measure, period_args

    meta = ensure_data(CASE, args.data_dir, args.seed, args.layout)
    folder = args.data_dir / CASE
    billing = ensure_billing(args, meta)
    services = [f"svc-{s:02d}" for s in range(1, int(str(meta["services"])) + 1)]
    rules = billing_rules(folder, services)
    allocate = [*shlex.split(args.tenantcost), "allocate", *period_args(meta), "--format", "json"]
    commands: dict[str, list[str]] = {
        "query": [sys.executable, str(HERE / "billing_query.py"), "--billing", str(billing),
                  "--repeat", "1"],
        "without": [*allocate, "--config", str(folder / "rules.yaml")],
        "with": [*allocate, "--config", str(rules), "--billing", str(billing)],
    }  # fmt: skip
    available = has_billing_option(args.tenantcost)
    if not available:
        del commands["with"]
    runs: dict[str, list[Run]] = {k: [] for k in commands}
    query_seconds: list[float] = []
    for i in range(args.repeat):
        for label, cmd in commands.items():
            run = measure(cmd, args.timeout)
            status = "ok" if run.returncode == 0 else f"exit {run.returncode}"
            print(f"[billing] run {i + 1}/{args.repeat} {label:8s} {run.seconds:8.2f} s  "
                  f"peak RSS {_mib(run.peak_rss)}  {status}", flush=True)  # fmt: skip
            if run.returncode != 0:
                errors.append(f"billing {label} run {i + 1}: exit {run.returncode}: "
                              + " ".join(run.stderr.strip().splitlines()[-3:]))  # fmt: skip
                continue
            runs[label].append(run)
            if label == "query":
                query_seconds.append(float(json.loads(run.stdout)["median_seconds"]))
    return report(runs, query_seconds, args.billing_rows, available, errors)


def report(
    runs: dict[str, list[Any]],
    query_seconds: list[float],
    rows: int,
    available: bool,
    errors: list[str],
) -> str:
    """The Markdown table and the verdict on the budget."""

    def median(label: str, attr: str) -> float | None:
        values = [getattr(r, attr) for r in runs.get(label, [])]
        return statistics.median(values) if values else None

    def cell(value: float | None, mib: bool = False) -> str:
        if value is None:
            return "-"
        return f"{value / 2**20:,.0f} MiB" if mib else f"{value:.2f}"

    names = {
        "query": "plain DuckDB query (`billing_query.py`, whole process)",
        "without": "`allocate --format json` without billing",
        "with": "`allocate --format json --billing FILE`",
    }
    lines = ["| run | median s | peak RSS | runs |", "|---|---|---|---|"]
    for label, name in names.items():
        if label == "with" and not available:
            lines.append(f"| {name} | not available (no `--billing` yet) | - | 0 |")
            continue
        wall, peak = cell(median(label, "seconds")), cell(median(label, "peak_rss"), True)
        lines.append(f"| {name} | {wall} | {peak} | {len(runs.get(label, []))} |")
    query = statistics.median(query_seconds) if query_seconds else None
    lines += ["", f"Billing file: {rows:,} FOCUS 1.2 rows (`benchmarks/billing_data.py`). "
              f"The query alone (inside its process): {cell(query)} s."]  # fmt: skip
    without, with_billing = median("without", "seconds"), median("with", "seconds")
    process_query = median("query", "seconds")
    if without is not None and with_billing is not None and process_query is not None:
        budget = without + BUDGET_FACTOR * process_query
        rss = median("with", "peak_rss") or 0.0
        ok = with_billing <= budget and rss < RSS_LIMIT
        lines.append(
            f"Budget: without + {BUDGET_FACTOR} x query = {budget:.2f} s; with billing "
            f"{with_billing:.2f} s, peak RSS {cell(rss, True)} (limit 1.5 GB): "
            f"{'met' if ok else 'NOT MET'}."
        )
        if not ok:
            errors.append("billing: allocate with billing is over its time or memory budget")
    return "\n".join(lines)
