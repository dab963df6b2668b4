"""What a conversion into another currency adds to ``allocate`` (issue 37: at most 10 %).

    python benchmarks/fx_section.py                         # 10,000 clients x 3 services x 744 h
    python benchmarks/fx_section.py --clients 1000 --repeat 3
    python benchmarks/fx_section.py --month 2026-11 --policy monthly_average  # a calendar month

The month (November 2026) is generated once by ``benchmarks/generate.py`` into
``--data-dir`` (reused while its ``meta.json`` matches), with a rates file of daily EUR
quotes on working days. Then, alternately ``--repeat`` times, two separate processes run
the whole command a user runs:

* ``tenantcost allocate --config RULES --format json`` (the ledger, USD);
* ``tenantcost allocate --config RULES --format json --currency EUR`` (``--policy daily``:
  the lines summed per day in the engine; ``monthly_average``: one rate for the month, so
  no day rows; every figure converted exactly and rounded top down).

Wall time, medians; the converted document must close (gap 0) and hold every client's
``ledger_amount`` equal to the ledger run's amount, or the script exits with status 1.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from datetime import date, timedelta
from pathlib import Path

HERE = Path(__file__).resolve().parent


def ensure_data(out: Path, clients: int, services: int, hours: int) -> Path:
    meta = out / "meta.json"
    wanted = {"clients": clients, "services": services, "hours": hours}
    if meta.exists():
        found = json.loads(meta.read_text())
        if all(found.get(k) == v for k, v in wanted.items()):
            return out / "rules.yaml"
    subprocess.run(
        [sys.executable, str(HERE / "generate.py"), "--clients", str(clients), "--services",
         str(services), "--hours", str(hours), "--out", str(out)],
        check=True,
    )  # fmt: skip
    return out / "rules.yaml"


def write_rates(out: Path) -> None:
    rows = ["date,base,quote,rate"]
    day = date(2026, 10, 26)
    while day <= date(2026, 12, 4):
        if day.weekday() < 5:
            rows.append(f"{day},EUR,USD,{1.07 + (day.toordinal() % 97) / 10000:.4f}")
        day += timedelta(days=1)
    (out / "rates.csv").write_text("\n".join(rows) + "\n")


def converting_rules(rules: Path, policy: str) -> Path:
    text = rules.read_text()
    converted = rules.with_name(f"rules-fx-{policy}.yaml")
    converted.write_text(text + f"\nfx:\n  rates: [rates.csv]\n  policy: {policy}\n")
    return converted


def timed(args: list[str]) -> tuple[float, dict]:
    start = time.perf_counter()
    done = subprocess.run(args, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(args)} failed: {done.stderr[-2000:]}")
    return seconds, json.loads(done.stdout)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=10_000)
    parser.add_argument("--services", type=int, default=3)
    parser.add_argument("--hours", type=int, default=744)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--policy", default="daily",
                        choices=("daily", "monthly_average", "month_end"))  # fmt: skip
    parser.add_argument("--month", help="allocate this calendar month only (e.g. 2026-11)")
    parser.add_argument("--data-dir", type=Path, default=Path("/tmp/tenantcost-bench-fx"))
    args = parser.parse_args(argv)
    rules = ensure_data(args.data_dir, args.clients, args.services, args.hours)
    write_rates(args.data_dir)
    fx_rules = converting_rules(rules, args.policy)
    tool = [sys.executable, "-m", "tenantcost", "allocate", "--format", "json"]
    if args.month:
        tool += ["--month", args.month]
    ledger_times, converted_times = [], []
    for _ in range(args.repeat):
        seconds, ledger = timed([*tool, "--config", str(rules)])
        ledger_times.append(seconds)
        seconds, converted = timed([*tool, "--config", str(fx_rules), "--currency", "EUR"])
        converted_times.append(seconds)
    if converted["gap"] != 0:
        print("error: the converted cascade does not close", file=sys.stderr)
        return 1
    amounts = {c["client"]: c["amount"] for c in ledger["clients"]}
    if {c["client"]: c["ledger_amount"] for c in converted["clients"]} != amounts:
        print("error: a converted client's ledger_amount differs from the ledger", file=sys.stderr)
        return 1
    base, with_fx = statistics.median(ledger_times), statistics.median(converted_times)
    print(
        f"| {args.clients:,} clients x {args.services} services x "
        f"{args.month or f'{args.hours} h'} | "
        f"{args.policy} | "
        f"{base:.1f} s | {with_fx:.1f} s | {100 * (with_fx - base) / base:+.1f} % |"
    )
    print(f"runs: ledger {ledger_times}, converted {converted_times}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
