"""The watch section of the benchmarks: ``watch`` at mid-month against ``allocate`` on the same
hours (the bound: at most 1.5x its wall time).

    python benchmarks/run.py --sections watch                      # the 10,000-client month
    python benchmarks/run.py --sections watch --watch-cases small  # 1,000 clients

Per case, the first half of November 2026 (360 hours, 1-15 November: what a store holds at
mid-month) is generated once by ``benchmarks/generate.py`` into ``--watch-data-dir/<case>``
(reused while its ``meta.json`` matches), ingested into a fresh SQLite store (``db upgrade``,
``rules load``, ``ingest costs``, ``ingest usage``: untimed), then timed as separate
processes, each the whole command a user runs, alternately ``--repeat`` times:

* ``tenantcost allocate --config RULES --from 2026-11-01T00:00:00Z --to 2026-11-16T00:00:00Z
  --format json`` on the files;
* ``tenantcost watch --month 2026-11 --as-of 2026-11-16T00:00:00Z --format json`` on the
  store (it allocates the same hours from the store, folds the lines per day, scores every
  client-source day and records the snapshot).

Every watch's ``month_to_date`` per client is compared with ``allocate``'s amounts to the
micro-unit; a difference is an error (exit status 1). Wall time, CPU (user + system) and peak
RSS of the process tree, medians over the runs.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
MONTH = "2026-11"
START, AS_OF = "2026-11-01T00:00:00Z", "2026-11-16T00:00:00Z"
WATCH_CASES: dict[str, dict[str, int]] = {
    "tiny": {"clients": 50, "services": 3, "hours": 360},
    "small": {"clients": 1_000, "services": 10, "hours": 360},
    "large": {"clients": 10_000, "services": 20, "hours": 360},
}
"""The first 15 days of November: a store at mid-month."""
DEFAULT_DATA_DIR = Path(tempfile.gettempdir()) / "tenantcost-bench-watch"


@dataclass
class WatchRow:
    """One case: medians of the timed runs."""

    case: str
    rows: int
    watch_seconds: float
    watch_cpu: float
    watch_rss: int
    allocate_seconds: float
    allocate_cpu: float
    allocate_rss: int
    runs: int
    same: bool


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The section's options (on ``benchmarks/run.py``)."""
    parser.add_argument(
        "--watch-cases", default="large", help=f"comma list of {','.join(WATCH_CASES)}"
    )
    parser.add_argument(
        "--watch-data-dir",
        type=Path,
        default=DEFAULT_DATA_DIR,
        help="where the watch section's generated half months and stores are kept",
    )


def ensure_half_month(case: str, data_dir: Path, seed: int, tenantcost: str) -> dict[str, object]:
    """Generate the case's 15 days and ingest them into a SQLite store, unless done already."""
    params = WATCH_CASES[case]
    folder = data_dir / case
    meta_file = folder / "meta.json"
    if meta_file.exists() and (folder / "store.done").exists():
        meta = json.loads(meta_file.read_text(encoding="utf-8"))
        if all(meta.get(k) == v for k, v in {**params, "seed": seed}.items()):
            print(f"[watch {case}] reusing {folder} ({meta['usage_rows']:,} usage rows)")
            upgrade = [tenantcost, "db", "upgrade", *store_args(folder)]  # a newer schema
            subprocess.run(upgrade, check=True, capture_output=True)
            return dict(meta)
    shutil.rmtree(folder, ignore_errors=True)
    cmd = [sys.executable, str(HERE / "generate.py"), "--clients", str(params["clients"]),
           "--services", str(params["services"]), "--hours", str(params["hours"]), "--seed",
           str(seed), "--layout", "hive", "--start", START, "--out", str(folder)]  # fmt: skip
    print(f"[watch {case}] generating into {folder}", flush=True)
    subprocess.run(cmd, check=True, stderr=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
    store = store_args(folder)
    for step in (["db", "upgrade"], ["rules", "load", str(folder / "rules.yaml")],
                 ["ingest", "costs", "--costs", str(folder / "costs.json")],
                 ["ingest", "usage", "--usage", str(folder / "usage")]):  # fmt: skip
        print(f"[watch {case}] {' '.join(step[:2])}", flush=True)
        subprocess.run([tenantcost, *step, *store], check=True, capture_output=True)
    (folder / "store.done").write_text("ingested\n", encoding="utf-8")
    return dict(json.loads(meta_file.read_text(encoding="utf-8")))


def store_args(folder: Path) -> list[str]:
    return ["--db", f"sqlite:///{folder / 'tenantcost.db'}", "--data", str(folder / "data")]


def watch_section(args: argparse.Namespace, errors: list[str]) -> str:
    """Measure every watch case; the Markdown table."""
    from run import measure, read_json_totals

    rows: list[WatchRow] = []
    for case in [c.strip() for c in args.watch_cases.split(",") if c.strip()]:
        meta = ensure_half_month(case, args.watch_data_dir, args.seed, args.tenantcost)
        folder = args.watch_data_dir / case
        allocate_cmd = [args.tenantcost, "allocate", "--config", str(folder / "rules.yaml"),
                        "--from", START, "--to", AS_OF, "--format", "json"]  # fmt: skip
        watch_cmd = [args.tenantcost, "watch", "--month", MONTH, "--as-of", AS_OF, "--format",
                     "json", *store_args(folder)]  # fmt: skip
        allocates, watches, same = [], [], True
        for _ in range(args.repeat):
            for runs, cmd in ((allocates, allocate_cmd), (watches, watch_cmd)):
                done = measure(cmd, args.timeout)
                if done.returncode != 0:
                    errors.append(f"watch {case}: {cmd[1]} failed: {done.stderr.strip()[-500:]}")
                    return table(rows)
                runs.append(done)
            expected = read_json_totals(allocates[-1].stdout)
            clients = json.loads(watches[-1].stdout)["clients"]
            got = {c["client"]: c["month_to_date"] for c in clients if c["month_to_date"]}
            if got != {k: int(v) for k, v in expected.items() if v}:
                same = False
                errors.append(f"watch {case}: month_to_date differs from allocate's amounts")
            print(f"[watch {case}] allocate {allocates[-1].seconds:.1f} s, watch "
                  f"{watches[-1].seconds:.1f} s", flush=True)  # fmt: skip

        def med(runs: list, attr: str) -> float:  # type: ignore[type-arg]
            return float(statistics.median(getattr(r, attr) for r in runs))

        rows.append(WatchRow(case, int(str(meta["usage_rows"])), med(watches, "seconds"),
                             med(watches, "cpu_seconds"), int(med(watches, "peak_rss")),
                             med(allocates, "seconds"), med(allocates, "cpu_seconds"),
                             int(med(allocates, "peak_rss")), args.repeat, same))  # fmt: skip
    return table(rows)


def table(rows: list[WatchRow]) -> str:
    """The section's Markdown table."""
    mib = 1024 * 1024
    lines = [
        "| case | usage rows | watch (CPU) | allocate (CPU) | watch / allocate (CPU) | watch "
        "peak RSS | allocate peak RSS | runs | same figures |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for r in rows:
        p = WATCH_CASES[r.case]
        lines.append(
            f"| {p['clients']:,} clients × {p['services']} services × {p['hours']} h | "
            f"{r.rows:,} | {r.watch_seconds:.1f} s ({r.watch_cpu:.1f} s) | "
            f"{r.allocate_seconds:.1f} s ({r.allocate_cpu:.1f} s) | "
            f"{r.watch_seconds / r.allocate_seconds:.2f} ({r.watch_cpu / r.allocate_cpu:.2f}) | "
            f"{r.watch_rss / mib:,.0f} MiB | {r.allocate_rss / mib:,.0f} MiB | {r.runs} | "
            f"{'yes' if r.same else 'NO'} |"
        )
    if not rows:
        lines.append("| - | - | - | - | - | - | - | - | failed |")
    return "\n".join(lines)
