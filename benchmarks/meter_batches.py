"""The store under meter traffic: ``run`` on a month of small ``sum`` batches against
the same usage ingested as one file.

    python benchmarks/meter_batches.py                      # 350,000 batches (8 x 30 x 1,440)
    python benchmarks/meter_batches.py --batches 20000 --backend postgresql

What it builds, in ``--out`` (default under the system's temporary folder):

* costs and rules for November 2026 from ``benchmarks/generate.py`` (``--clients`` clients,
  ``--services`` services, 720 hours);
* a month of meter batches: ``--processes`` processes (each serving one service) flushing once
  a minute, spread evenly over the month, each batch the (hour, service, client) cells of 1 to
  ``--max-clients`` clients seen in that minute (integer ``requests``, ``cpu_seconds`` in
  1/1024 s so that sums are exact in any order);
* store **meter**: every batch a committed ``sum`` batch with its own Parquet file, its
  ``batch``, ``batch_cell`` and ``batch_file`` rows. Ingesting 350,000 batches one by one
  through the public ingest would take hours on this machine (see ``ingest ms/batch`` in the
  output), so all but the last ``--sample`` batches are written in bulk by this script: the
  same files and catalog rows ingest writes, and each day folded with
  :func:`tenantcost.store.compaction.compact_day` where ingest's threshold would have left it
  (the last ``n mod (COMPACT_AFTER + 1)`` batches of a day stay loose). The last ``--sample``
  batches go through :func:`tenantcost.store.ingest.ingest_usage` (the path of ``POST
  /api/v1/usage``) one by one, on top of the month: their time per batch, compactions included,
  is the ingest figure;
* store **one file**: the same usage summed per cell, ingested by ``tenantcost ingest usage``.

Then ``tenantcost run --month 2026-11 --format json`` is timed ``--repeat`` times on each
(separate processes, start-up included; the median is reported) and the per-client amounts
are compared to the micro-unit (a difference exits 1). The ratio must stay within 1.5.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

from sqlalchemy import insert, text  # noqa: E402

from tenantcost.store import compaction  # noqa: E402
from tenantcost.store.data import DataDir, Store, file_sha256, partition  # noqa: E402
from tenantcost.store.engine import open_engine  # noqa: E402
from tenantcost.store.ingest import ingest_usage  # noqa: E402
from tenantcost.store.lock import write_transaction  # noqa: E402
from tenantcost.store.models import Batch, BatchCell, BatchFile, table  # noqa: E402
from tenantcost.store.rules import sha256_hex  # noqa: E402
from tenantcost.store.settings import resolve_settings  # noqa: E402

MONTH = "2026-11"
START = pd.Timestamp("2026-11-01T00:00:00Z")
MINUTES = 30 * 24 * 60
HOUR = pd.Timedelta(hours=1)
CHUNK = 20_000
FOLD_EVERY = 1_000
"""The bulk build folds a day every 1,000 batches (ingest does every 33): each fold reads the
previous compacted file and those batches' files, so every file is read once, as by ingest."""


def meter_rows(batches: int, processes: int, services: list[str], clients: list[str],
               max_clients: int, seed: int) -> pd.DataFrame:  # fmt: skip
    """Every batch's rows, vectorised: ``batch, minute, window_start, window_end, service,
    client, requests, cpu_seconds`` (batch ``i`` is process ``i % processes`` at its minute)."""
    rng = np.random.default_rng(seed)
    index = np.arange(batches)
    slot = index // processes
    minute = slot * MINUTES // max(1, -(-batches // processes))  # spread over the month
    count = rng.integers(1, max_clients + 1, size=batches)
    batch = np.repeat(index, count)
    offset = np.arange(len(batch)) - np.repeat(np.cumsum(count) - count, count)
    first = rng.integers(0, len(clients), size=batches)
    client = (np.repeat(first, count) + offset * 7) % len(clients)  # distinct within a batch
    start = START + pd.to_timedelta(np.repeat(minute, count) // 60 * 60, unit="min")
    frame = pd.DataFrame({
        "batch": batch,
        "minute": np.repeat(minute, count),
        "window_start": start,
        "window_end": start + HOUR,
        "service": np.array(services)[np.repeat(index % processes, count) % len(services)],
        "client": np.array(clients)[client],
        "requests": rng.integers(1, 40, size=len(batch)).astype("float64"),
        "cpu_seconds": rng.integers(1, 4096, size=len(batch)) / 1024,
    })  # fmt: skip
    return frame.sort_values(["batch", "service", "client"]).reset_index(drop=True)


COLUMNS = ["window_start", "window_end", "service", "client", "requests", "cpu_seconds"]


def open_store(url: str, data: Path) -> Store:
    return Store(open_engine(resolve_settings(db=url, environ={})), DataDir(str(data)))


def bulk_batches(store: Store, rows: pd.DataFrame) -> dict[str, float]:
    """Write each batch's file and catalog rows as ingest would, folding each day where
    ingest's threshold would have left it; returns the seconds spent writing and folding."""
    timings = {"write": 0.0, "fold": 0.0}
    rows = rows.assign(day=rows["window_start"].dt.strftime("%Y-%m-%d"))
    for day, of_day in rows.groupby("day", sort=True):  # one iteration per day
        ids = of_day["batch"].unique()
        keep = len(ids) % (compaction.COMPACT_AFTER + 1)  # loose after ingest's last fold
        folded, loose = ids[: len(ids) - keep], ids[len(ids) - keep:]
        parts = [(folded[i:i + FOLD_EVERY], True) for i in range(0, len(folded), FOLD_EVERY)]
        for part, fold in [*parts, (loose, False)]:
            t0 = time.perf_counter()
            _write_batches(store, str(day), of_day[of_day["batch"].isin(part)])
            timings["write"] += time.perf_counter() - t0
            if fold and len(part):
                t0 = time.perf_counter()
                with write_transaction(store.engine) as conn:
                    compaction.compact_day(conn, store.data, str(day))
                timings["fold"] += time.perf_counter() - t0
        print(f"  {day}: {len(ids):,} batches, {len(loose)} loose", flush=True)
    return timings


def _write_batches(store: Store, day: str, rows: pd.DataFrame) -> None:
    """One Parquet file per batch under ``usage/date=<day>/<uid>.parquet`` and its ``batch``,
    ``batch_cell`` and ``batch_file`` rows (explicit ids, after the store's largest)."""
    if rows.empty:
        return
    whole = pa.Table.from_pandas(rows[COLUMNS], preserve_index=False)
    ends = np.flatnonzero(np.diff(rows["batch"].to_numpy())) + 1
    starts = np.concatenate([[0], ends])
    lengths = np.diff(np.concatenate([starts, [len(rows)]]))
    with store.engine.connect() as conn:
        first_id = int(conn.execute(text("SELECT coalesce(max(id), 0) FROM batch")).scalar() or 0)
    batch_rows, cells, files = [], [], []
    folder = Path(store.data.path(f"usage/date={day}"))
    folder.mkdir(parents=True, exist_ok=True)
    for n, (offset, length) in enumerate(zip(starts, lengths, strict=True)):  # per batch: a file
        uid = uuid.uuid4().hex
        relative = partition("usage", day, uid)
        path = Path(store.data.path(relative))
        pq.write_table(whole.slice(int(offset), int(length)), path)
        sha = file_sha256(path)
        head = rows.iloc[int(offset)]
        ws, we = head["window_start"].to_pydatetime(), head["window_end"].to_pydatetime()
        at = (START + pd.Timedelta(minutes=int(head["minute"]) + 1)).to_pydatetime()
        batch_id = first_id + n + 1
        batch_rows.append({"id": batch_id, "uid": uid, "kind": "usage", "source": "meter bench",
                           "mode": "sum", "rows": int(length), "sha256": sha256_hex(f"{day} {sha}"),
                           "window_from": ws, "window_to": we, "created_at": at,
                           "actor": "token:meter", "status": "committed"})  # fmt: skip
        cells.append({"batch_id": batch_id, "window_start": ws, "window_end": we,
                      "key": str(head["service"])})  # fmt: skip
        files.append({"batch_id": batch_id, "day": day, "path": relative, "rows": int(length),
                      "sha256": sha})  # fmt: skip
    with store.engine.begin() as conn:
        for model, records in ((Batch, batch_rows), (BatchCell, cells), (BatchFile, files)):
            for i in range(0, len(records), CHUNK):
                conn.execute(insert(table(model)), records[i:i + CHUNK])
        if conn.dialect.name == "postgresql":  # explicit ids: move the sequence past them
            conn.execute(text("SELECT setval(pg_get_serial_sequence('batch', 'id'), "
                              "(SELECT max(id) FROM batch))"))  # fmt: skip


def sample_ingest(store: Store, rows: pd.DataFrame, folder: Path) -> list[float]:
    """Ingest the batches of ``rows`` one by one through the public ingest; seconds each."""
    folder.mkdir(parents=True, exist_ok=True)
    seconds = []
    for number, (_, batch) in enumerate(rows.groupby("batch", sort=True)):
        path = folder / f"sample-{number}.parquet"
        batch[COLUMNS].to_parquet(path, index=False)
        t0 = time.perf_counter()
        ingest_usage(store, [path], period=None, mode="sum", actor="token:meter")
        seconds.append(time.perf_counter() - t0)
    return seconds


def tenantcost(*args: str, env: dict[str, str]) -> tuple[float, str]:
    """Run the CLI as a user does; wall seconds and stdout."""
    t0 = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "tenantcost", *args], env=env,
                          capture_output=True, text=True, check=False)  # fmt: skip
    seconds = time.perf_counter() - t0
    if done.returncode != 0:
        raise SystemExit(f"tenantcost {' '.join(args[:2])} failed: {done.stderr.strip()}")
    return seconds, done.stdout


def prepare(url: str, data: Path, generated: Path, env: dict[str, str]) -> list[str]:
    store_args = ["--db", url, "--data", str(data)]
    tenantcost("db", "upgrade", "--db", url, env=env)
    tenantcost("rules", "load", str(generated / "rules.yaml"), *store_args, env=env)
    tenantcost("ingest", "costs", "--costs", str(generated / "costs.json"), *store_args, env=env)
    return store_args


def timed_runs(
    stores: list[list[str]], repeat: int, env: dict[str, str]
) -> list[tuple[float, dict[str, Any]]]:
    """``run`` on each store ``repeat`` times, interleaved (a busy machine slows both alike);
    per store the median seconds and the last document."""
    times: list[list[float]] = [[] for _ in stores]
    documents: list[dict[str, Any]] = [{} for _ in stores]
    for _ in range(repeat):
        for n, store_args in enumerate(stores):
            seconds, out = tenantcost("run", "--month", MONTH, "--format", "json",
                                      *store_args, env=env)  # fmt: skip
            times[n].append(seconds)
            documents[n] = json.loads(out)
    return [(statistics.median(t), d) for t, d in zip(times, documents, strict=True)]


def amounts(document: dict[str, Any]) -> dict[str, Any]:
    return {c["client"]: c["amount"] for c in document["clients"]}


def database(backend: str, folder: Path, name: str) -> str:
    if backend == "sqlite":
        return f"sqlite:///{folder / f'{name}.db'}"
    from tests.postgres_fixture import new_database

    return new_database(_POSTGRES[0])


_POSTGRES: list[str] = []


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batches", type=int, default=350_000)
    parser.add_argument("--processes", type=int, default=8)
    parser.add_argument("--services", type=int, default=4)
    parser.add_argument("--clients", type=int, default=200)
    parser.add_argument("--max-clients", type=int, default=4, help="clients per batch, at most")
    parser.add_argument("--sample", type=int, default=200,
                        help="batches ingested one by one through the public ingest")  # fmt: skip
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--backend", choices=("sqlite", "postgresql"), default="sqlite")
    parser.add_argument("--out", type=Path,
                        default=Path(tempfile.gettempdir()) / "tenantcost-bench-meter")  # fmt: skip
    parser.add_argument("--seed", type=int, default=23)
    parser.add_argument("--reuse", action="store_true",
                        help="time `run` again on the stores a previous call built in --out "
                             "(SQLite only)")  # fmt: skip
    args = parser.parse_args(argv)
    if args.backend == "postgresql":
        from tests.postgres_fixture import running_postgres

        with running_postgres() as admin:
            _POSTGRES.append(admin)
            return _bench(args)
    return _bench(args)


def _bench(args: argparse.Namespace) -> int:
    out: Path = args.out
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    if args.reuse:
        stores = [["--db", f"sqlite:///{out / f'{n}.db'}", "--data", str(out / f"{n}-data")]
                  for n in ("meter", "one")]  # fmt: skip
        (meter_run, meter_doc), (one_run, one_doc) = timed_runs(stores, args.repeat, env)
        same = amounts(meter_doc) == amounts(one_doc) and bool(meter_doc["clients"])
        print(json.dumps({"date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
                          "run_seconds_meter": round(meter_run, 2),
                          "run_seconds_one_file": round(one_run, 2),
                          "ratio": round(meter_run / one_run, 2), "same_amounts": same},
                         indent=2))  # fmt: skip
        return 0 if same else 1
    if out.exists():
        subprocess.run(["rm", "-rf", str(out)], check=True)
    out.mkdir(parents=True)
    generated = out / "generated"
    subprocess.run([sys.executable, str(HERE / "generate.py"), "--clients", str(args.clients),
                    "--services", str(args.services), "--hours", "720", "--start",
                    START.isoformat(), "--out", str(generated)], check=True,
                   stdout=subprocess.DEVNULL)  # fmt: skip
    meta = json.loads((generated / "meta.json").read_text())
    width = max(4, len(str(args.clients)))
    clients = [f"client-{i:0{width}d}" for i in range(1, args.clients + 1)]
    services = [f"svc-{s:02d}" for s in range(1, args.services + 1)]
    rows = meter_rows(args.batches, args.processes, services, clients, args.max_clients,
                      args.seed)  # fmt: skip
    print(f"{args.batches:,} batches, {len(rows):,} rows; costs: {meta['cost_rows']:,} rows",
          flush=True)  # fmt: skip

    meter_url = database(args.backend, out, "meter")
    meter_args = prepare(meter_url, out / "meter-data", generated, env)
    store = open_store(meter_url, out / "meter-data")
    last = args.batches - min(args.sample, args.batches)
    t0 = time.perf_counter()
    bulk = bulk_batches(store, rows[rows["batch"] < last])
    print(f"bulk: {time.perf_counter() - t0:.0f} s", flush=True)
    sample = sample_ingest(store, rows[rows["batch"] >= last], out / "sample")
    store.engine.dispose()

    one_url = database(args.backend, out, "one")
    one_args = prepare(one_url, out / "one-data", generated, env)
    summed = rows.groupby(["window_start", "window_end", "service", "client"], as_index=False)[
        ["requests", "cpu_seconds"]].sum()  # fmt: skip
    one_file = out / "one.parquet"
    summed.to_parquet(one_file, index=False)
    one_ingest, _ = tenantcost("ingest", "usage", "--usage", str(one_file), *one_args, env=env)

    (meter_run, meter_doc), (one_run, one_doc) = timed_runs([meter_args, one_args],
                                                            args.repeat, env)  # fmt: skip
    same = amounts(meter_doc) == amounts(one_doc) and bool(meter_doc["clients"])
    report = {
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": f"{os.cpu_count()} cores, {_memory()}",
        "backend": args.backend, "batches": args.batches, "usage_rows": len(rows),
        "one_file_rows": len(summed), "compact_after": compaction.COMPACT_AFTER,
        "bulk_write_seconds": round(bulk["write"], 1), "fold_seconds": round(bulk["fold"], 1),
        "ingest_ms_per_batch_p50": round(1000 * statistics.median(sample), 1) if sample else None,
        "ingest_ms_per_batch_max": round(1000 * max(sample), 1) if sample else None,
        "one_file_ingest_seconds": round(one_ingest, 2),
        "run_seconds_meter": round(meter_run, 2), "run_seconds_one_file": round(one_run, 2),
        "ratio": round(meter_run / one_run, 2), "same_amounts": same,
    }  # fmt: skip
    print(json.dumps(report, indent=2))
    if not same:
        print("error: the per-client amounts differ", file=sys.stderr)
        return 1
    return 0


def _memory() -> str:
    try:
        pages, size = os.sysconf("SC_PHYS_PAGES"), os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError):
        return "memory unknown"
    return f"{pages * size / 2**30:.0f} GiB"


if __name__ == "__main__":
    raise SystemExit(main())
