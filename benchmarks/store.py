"""The store section of the benchmarks: ingest throughput and ``run`` against ``allocate``.

    python benchmarks/run.py --sections store --store-cases medium
    python benchmarks/run.py --sections store --store-cases large --store-backends sqlite

Per case, one calendar month (November 2026, 720 hours) is generated once into
``--store-data-dir/<case>`` (default under the system's temporary folder; reused while its
``meta.json`` matches), then timed as separate processes, each the whole command a user runs:

* ``tenantcost allocate --config RULES --month 2026-11 --format json`` on the files;
* per backend (SQLite file; PostgreSQL 15 started for the section like the test suite's,
  ``tests/postgres_fixture.py``, with ``fsync=off``), on a fresh store: ``db upgrade``,
  ``rules load``, ``ingest costs`` (untimed), then **timed** ``ingest usage --usage DIR``
  (rows/s = usage rows / wall time of the process, start-up included) and ``run --month
  2026-11 --format json``.

Every ``run``'s per-client amounts are compared with ``allocate``'s to the micro-unit; a
difference is an error (exit status 1). Peak RSS is that of the process tree (psutil); CPU
is user + system time of the process (all its threads), which a busy machine inflates less
than the wall time.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
MONTH = "2026-11"
START = "2026-11-01T00:00:00Z"
STORE_CASES: dict[str, dict[str, int]] = {
    "tiny": {"clients": 50, "services": 3, "hours": 720},
    "small": {"clients": 1_000, "services": 10, "hours": 720},
    "medium": {"clients": 2_000, "services": 20, "hours": 720},
    "large": {"clients": 10_000, "services": 20, "hours": 720},
}
"""One calendar month each, so ``run --month`` and ``allocate --month`` read every row."""
BACKENDS = ("sqlite", "postgresql")
DEFAULT_DATA_DIR = Path(tempfile.gettempdir()) / "tenantcost-bench-store"


@dataclass
class StoreRow:
    """One case on one backend."""

    case: str
    backend: str
    rows: int
    ingest_seconds: float
    ingest_cpu: float
    ingest_rss: int
    run_seconds: float
    run_cpu: float
    run_rss: int
    allocate_seconds: float
    allocate_cpu: float
    allocate_rss: int
    same: bool


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The section's options (on ``benchmarks/run.py``)."""
    parser.add_argument(
        "--store-cases", default="medium", help=f"comma list of {','.join(STORE_CASES)}"
    )
    parser.add_argument("--store-backends", default=",".join(BACKENDS), help="sqlite,postgresql")
    parser.add_argument(
        "--store-data-dir",
        type=Path,
        default=DEFAULT_DATA_DIR,
        help="where the store section's generated months are kept",
    )


def ensure_month(case: str, data_dir: Path, seed: int) -> dict[str, object]:
    """Generate the case's month unless a matching ``meta.json`` is already there."""
    params = STORE_CASES[case]
    folder = data_dir / case
    meta_file = folder / "meta.json"
    if meta_file.exists():
        meta = json.loads(meta_file.read_text(encoding="utf-8"))
        if all(meta.get(k) == v for k, v in {**params, "seed": seed}.items()):
            print(f"[store {case}] reusing {folder} ({meta['usage_rows']:,} usage rows)")
            return dict(meta)
    cmd = [sys.executable, str(HERE / "generate.py"), "--clients", str(params["clients"]),
           "--services", str(params["services"]), "--hours", str(params["hours"]), "--seed",
           str(seed), "--layout", "hive", "--start", START, "--out", str(folder)]  # fmt: skip
    print(f"[store {case}] generating into {folder}", flush=True)
    subprocess.run(cmd, check=True, stderr=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
    return dict(json.loads(meta_file.read_text(encoding="utf-8")))


@contextmanager
def database(backend: str, folder: Path) -> Iterator[str]:
    """A fresh, empty database of ``backend``."""
    if backend == "sqlite":
        yield f"sqlite:///{folder / 'tenantcost.db'}"
        return
    sys.path.insert(0, str(ROOT))
    from tests.postgres_fixture import new_database, running_postgres

    with running_postgres() as admin:
        yield new_database(admin)


def store_section(args: argparse.Namespace, errors: list[str]) -> str:
    """Measure every store case on every backend; the Markdown table."""
    from run import measure, read_json_totals

    cases = [c.strip() for c in args.store_cases.split(",") if c.strip()]
    backends = [b.strip() for b in args.store_backends.split(",") if b.strip()]
    rows: list[StoreRow] = []
    for case in cases:
        meta = ensure_month(case, args.store_data_dir, args.seed)
        folder = args.store_data_dir / case
        rules = folder / "rules.yaml"
        allocate = measure([args.tenantcost, "allocate", "--config", str(rules), "--month",
                            MONTH, "--format", "json"], args.timeout)  # fmt: skip
        if allocate.returncode != 0:
            errors.append(f"store {case}: allocate failed: {allocate.stderr.strip()[-500:]}")
            continue
        expected = read_json_totals(allocate.stdout)
        print(f"[store {case}] allocate {allocate.seconds:.1f} s", flush=True)
        for backend in backends:
            with tempfile.TemporaryDirectory(prefix="tc-store-") as work, \
                    database(backend, Path(work)) as url:  # fmt: skip
                store = ["--db", url, "--data", str(Path(work) / "data")]

                def tc(*command: str, store: list[str] = store) -> list[str]:
                    return [args.tenantcost, *command, *store]

                costs = str(folder / "costs.json")
                for step in (tc("db", "upgrade"), tc("rules", "load", str(rules)),
                             tc("ingest", "costs", "--costs", costs)):  # fmt: skip
                    subprocess.run(step, check=True, capture_output=True)
                ingest = measure(tc("ingest", "usage", "--usage", str(folder / "usage")),
                                 args.timeout)  # fmt: skip
                run = measure(tc("run", "--month", MONTH, "--format", "json"), args.timeout)
            for label, done in (("ingest usage", ingest), ("run", run)):
                if done.returncode != 0:
                    errors.append(f"store {case} {backend}: {label} failed: "
                                  f"{done.stderr.strip()[-500:]}")  # fmt: skip
            if ingest.returncode or run.returncode:
                continue
            same = read_json_totals(run.stdout).equals(expected)
            if not same:
                errors.append(f"store {case} {backend}: run and allocate differ")
            rows.append(StoreRow(case, backend, int(str(meta["usage_rows"])), ingest.seconds,
                                 ingest.cpu_seconds, ingest.peak_rss, run.seconds,
                                 run.cpu_seconds, run.peak_rss, allocate.seconds,
                                 allocate.cpu_seconds, allocate.peak_rss, same))  # fmt: skip
            print(f"[store {case} {backend}] ingest {ingest.seconds:.1f} s, run "
                  f"{run.seconds:.1f} s", flush=True)  # fmt: skip
    return table(rows, cases)


def table(rows: list[StoreRow], cases: list[str]) -> str:
    """The section's Markdown table."""
    mib = 1024 * 1024
    lines = [
        "| case | backend | usage rows | ingest (CPU) | ingest rows/s (per CPU s) | ingest peak "
        "RSS | run (CPU) | allocate (CPU) | run / allocate (CPU) | run peak RSS | allocate peak "
        "RSS | same figures |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for r in rows:
        p = STORE_CASES[r.case]
        lines.append(
            f"| {p['clients']:,} clients × {p['services']} services × {p['hours']} h | "
            f"{r.backend} | {r.rows:,} | {r.ingest_seconds:.1f} s ({r.ingest_cpu:.1f} s) | "
            f"{r.rows / r.ingest_seconds / 1e6:.2f} M ({r.rows / r.ingest_cpu / 1e6:.2f} M) | "
            f"{r.ingest_rss / mib:,.0f} MiB | {r.run_seconds:.1f} s ({r.run_cpu:.1f} s) | "
            f"{r.allocate_seconds:.1f} s ({r.allocate_cpu:.1f} s) | "
            f"{r.run_seconds / r.allocate_seconds:.2f} ({r.run_cpu / r.allocate_cpu:.2f}) | "
            f"{r.run_rss / mib:,.0f} MiB | {r.allocate_rss / mib:,.0f} MiB | "
            f"{'yes' if r.same else 'NO'} |"
        )
    if not rows:
        lines.append(f"| {', '.join(cases)} | - | - | - | - | - | - | - | - | - | - | failed |")
    return "\n".join(lines)
