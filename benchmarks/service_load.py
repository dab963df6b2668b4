"""Load of the service (on demand, not a test): reads of stored statements with many clients,
and ingest throughput of the usage API.

    python benchmarks/service_load.py --clients 10000 --hours 24 --out /tmp/svc-load

What it does, against a real ``tenantcost serve`` (uvicorn, ``--workers``) on 127.0.0.1:

1. generates a month's data with ``benchmarks/generate.py`` (``--clients`` × ``--services``
   × ``--hours``, from 2026-11-01), loads it into a fresh store (``--db``, default a SQLite
   file in ``--out``; a ``postgresql+psycopg://`` URL works the same), runs and closes the
   month (``--allow-incomplete`` when fewer than 720 hours), and creates tokens;
2. reads, ``--concurrency`` requests at a time, ``--requests`` of each kind, clients drawn at
   random: ``GET /api/v1/clients/{id}/months/M`` (the stored statement, finance and account
   manager), ``GET /api/v1/months``, ``GET /api/v1/clients?q=`` (search),
   ``GET .../sheet.html`` (the rendered sheet) and, when the pages exist, ``GET /clients/{id}``;
   reports p50 / p95 / max latency and errors for each;
3. posts usage for December (an open month) through ``POST /api/v1/usage`` (JSON, batches of
   ``--batch`` records) and ``POST /api/v1/usage.parquet``, and reports records per second.

Target (issue 10): p95 under 200 ms for stored statements on the development machine, zero
errors. Prints a Markdown table (and ``--json FILE`` writes the figures).
"""

from __future__ import annotations

import argparse
import io
import json
import os
import random
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import httpx
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
MONTH = "2026-11"
SECRET = "benchmark-secret-0123456789"


@dataclass(frozen=True)
class Latencies:
    name: str
    seconds: list[float]
    errors: int

    def row(self) -> dict[str, object]:
        ms = sorted(s * 1000 for s in self.seconds) or [0.0]
        p95 = ms[min(len(ms) - 1, int(0.95 * (len(ms) - 1) + 0.5))]
        return {
            "read": self.name,
            "requests": len(self.seconds),
            "errors": self.errors,
            "p50_ms": round(statistics.median(ms), 1),
            "p95_ms": round(p95, 1),
            "max_ms": round(ms[-1], 1),
        }


def tenantcost(*args: str, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "tenantcost", *args],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"tenantcost {' '.join(args[:3])} exited {done.returncode}: {done.stderr}")
    return done.stdout


def prepare_store(args: argparse.Namespace) -> tuple[str, str, dict[str, str], list[str]]:
    """Generate, ingest, run and close; the store URL, data folder, tokens and clients."""
    out: Path = args.out
    data_set = out / "data-set"
    if not (data_set / "meta.json").exists():
        subprocess.run(
            [
                sys.executable,
                str(ROOT / "benchmarks" / "generate.py"),
                "--clients",
                str(args.clients),
                "--services",
                str(args.services),
                "--hours",
                str(args.hours),
                "--layout",
                "file",
                "--out",
                str(data_set),
            ],
            check=True,
        )
    db = args.db or f"sqlite:///{out / 'store.db'}"
    data = str(out / "store-data")
    store = ("--db", db, "--data", data)
    timings = {}
    for label, command in (
        ("upgrade", ("db", "upgrade")),
        ("rules", ("rules", "load", str(data_set / "rules.yaml"))),
        ("ingest usage", ("ingest", "usage", "--usage", str(data_set / "usage.parquet"))),
        ("ingest costs", ("ingest", "costs", "--costs", str(data_set / "costs.json"))),
        ("run", ("run", "--month", MONTH)),
        ("close", ("close", "--month", MONTH, "--allow-incomplete")),
    ):
        t0 = time.perf_counter()
        tenantcost(*command, *store)
        timings[label] = round(time.perf_counter() - t0, 1)
        print(f"  {label}: {timings[label]} s", file=sys.stderr, flush=True)
    usage = pd.read_parquet(data_set / "usage.parquet", columns=["client"])
    clients = sorted(c for c in usage["client"].unique() if c)
    tokens = {
        "finance": tenantcost("token", "create", "--role", "finance", "--db", db).strip(),
        "ingest": tenantcost("token", "create", "--role", "ingest", "--db", db).strip(),
    }
    mine = random.Random(1).sample(clients, min(20, len(clients)))
    am = ["token", "create", "--role", "account-manager", "--db", db]
    for client in mine:
        am += ["--client", client]
    tokens["account-manager"] = tenantcost(*am).strip()
    tokens["am-clients"] = json.dumps(mine)
    return db, data, tokens, clients


def start_server(
    db: str, data: str, args: argparse.Namespace
) -> tuple[subprocess.Popen[bytes], str]:
    env = os.environ | {"TENANTCOST_SECRET": SECRET}
    port = args.port
    log = (args.out / "serve.log").open("wb")
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tenantcost",
            "serve",
            "--db",
            db,
            "--data",
            data,
            "--port",
            str(port),
            "--workers",
            str(args.workers),
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        env=env,
    )
    url = f"http://127.0.0.1:{port}"
    for _ in range(600):
        try:
            if httpx.get(f"{url}/readyz", timeout=1).status_code == 200:
                return process, url
        except httpx.TransportError:
            time.sleep(0.1)
    process.terminate()
    raise SystemExit("the server did not start: see serve.log")


def hammer(
    name: str, count: int, concurrency: int, request: Callable[[httpx.Client], httpx.Response]
) -> Latencies:
    """``count`` requests, ``concurrency`` at a time, each timed from send to full body."""
    seconds: list[float] = []
    errors = 0

    def one(client: httpx.Client) -> None:
        nonlocal errors
        t0 = time.perf_counter()
        try:
            answer = request(client)
            answer.read()
            ok = answer.status_code == 200
        except httpx.HTTPError:
            ok = False
        seconds.append(time.perf_counter() - t0)
        errors += 0 if ok else 1

    limits = httpx.Limits(max_connections=concurrency)
    with httpx.Client(timeout=60, limits=limits) as client, ThreadPoolExecutor(concurrency) as pool:
        list(pool.map(lambda _: one(client), range(count)))
    return Latencies(name, seconds, errors)


def reads(
    url: str, tokens: dict[str, str], clients: list[str], args: argparse.Namespace
) -> list[Latencies]:
    pick = random.Random(7)
    finance = {"Authorization": f"Bearer {tokens['finance']}"}
    manager = {"Authorization": f"Bearer {tokens['account-manager']}"}
    own = json.loads(tokens["am-clients"])
    n, c = args.requests, args.concurrency

    def statement(
        headers: dict[str, str], among: list[str]
    ) -> Callable[[httpx.Client], httpx.Response]:
        return lambda s: s.get(
            f"{url}/api/v1/clients/{pick.choice(among)}/months/{MONTH}", headers=headers
        )

    results = [
        hammer("API statement (finance)", n, c, statement(finance, clients)),
        hammer("API statement (account manager)", n, c, statement(manager, own)),
        hammer("API months", n, c, lambda s: s.get(f"{url}/api/v1/months", headers=finance)),
        hammer(
            "API client search",
            n,
            c,
            lambda s: s.get(
                f"{url}/api/v1/clients", params={"q": f"{pick.randrange(100):02d}"}, headers=finance
            ),
        ),
        hammer(
            "sheet.html (account manager)",
            n,
            c,
            lambda s: s.get(
                f"{url}/api/v1/clients/{pick.choice(own)}/months/{MONTH}/sheet.html",
                headers=manager,
            ),
        ),
    ]
    if httpx.get(f"{url}/clients/{own[0]}", headers=manager).status_code == 200:
        results.append(
            hammer(
                "client page (account manager)",
                n,
                c,
                lambda s: s.get(f"{url}/clients/{pick.choice(own)}", headers=manager),
            )
        )
    return results


def december(records: int, clients: list[str], offset_hours: int) -> pd.DataFrame:
    """``records`` usage rows in December (open), one service, distinct (window, client)."""
    per_hour = min(len(clients), records)
    hours = -(-records // per_hour)
    start = pd.Timestamp("2026-12-01T00:00:00Z") + pd.Timedelta(hours=offset_hours)
    starts = start + pd.to_timedelta(pd.RangeIndex(hours).repeat(per_hour), unit="h")
    frame = pd.DataFrame(
        {"window_start": starts[:records], "client": (clients[:per_hour] * hours)[:records]}
    )
    frame["window_end"] = frame["window_start"] + pd.Timedelta(hours=1)
    frame["service"] = "svc-00"
    frame["requests"] = 10.0
    frame["cpu_seconds"] = 1.5
    return frame[["window_start", "window_end", "service", "client", "requests", "cpu_seconds"]]


def ingest(
    url: str, tokens: dict[str, str], clients: list[str], args: argparse.Namespace
) -> list[dict[str, object]]:
    headers = {"Authorization": f"Bearer {tokens['ingest']}"}
    out = []
    frame = december(args.batch, clients, 0)
    body = {
        "mode": "replace",
        "records": json.loads(
            frame.assign(
                window_start=frame["window_start"].dt.strftime("%Y-%m-%dT%H:%M:%SZ"),
                window_end=frame["window_end"].dt.strftime("%Y-%m-%dT%H:%M:%SZ"),
            ).to_json(orient="records")
        ),
    }
    t0 = time.perf_counter()
    answer = httpx.post(f"{url}/api/v1/usage", json=body, headers=headers, timeout=600)
    seconds = time.perf_counter() - t0
    out.append(
        {
            "endpoint": "POST /api/v1/usage (JSON)",
            "records": args.batch,
            "status": answer.status_code,
            "seconds": round(seconds, 2),
            "records_per_s": round(args.batch / seconds),
        }
    )
    bulk = december(args.parquet_rows, clients, 24 * 10)
    buffer = io.BytesIO()
    bulk.to_parquet(buffer, index=False)
    t0 = time.perf_counter()
    answer = httpx.post(
        f"{url}/api/v1/usage.parquet", content=buffer.getvalue(), headers=headers, timeout=600
    )
    seconds = time.perf_counter() - t0
    out.append(
        {
            "endpoint": "POST /api/v1/usage.parquet",
            "records": args.parquet_rows,
            "status": answer.status_code,
            "seconds": round(seconds, 2),
            "records_per_s": round(args.parquet_rows / seconds),
        }
    )
    return out


def markdown(rows: list[dict[str, object]]) -> str:
    head = list(rows[0])
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(str(r[h]) for h in head) + " |" for r in rows]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=10_000)
    parser.add_argument("--services", type=int, default=3)
    parser.add_argument("--hours", type=int, default=24)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--db", help="store URL (default: a SQLite file in --out)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--port", type=int, default=18_765)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--requests", type=int, default=500, help="requests per kind of read")
    parser.add_argument("--batch", type=int, default=10_000, help="records of the JSON batch")
    parser.add_argument("--parquet-rows", type=int, default=100_000)
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    db, data, tokens, clients = prepare_store(args)
    process, url = start_server(db, data, args)
    try:
        read_rows = [r.row() for r in reads(url, tokens, clients, args)]
        ingest_rows = ingest(url, tokens, clients, args)
    finally:
        process.terminate()
        process.wait(timeout=30)
    print(f"{len(clients)} clients, {args.workers} workers, {args.concurrency} concurrent\n")
    print(markdown(read_rows) + "\n\n" + markdown(ingest_rows))
    if args.json is not None:
        args.json.write_text(json.dumps({"reads": read_rows, "ingest": ingest_rows}, indent=2))
    return 0 if all(r["errors"] == 0 for r in read_rows) else 1


if __name__ == "__main__":
    sys.exit(main())
