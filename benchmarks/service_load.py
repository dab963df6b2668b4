"""Load of the service (on demand, not a test): reads of stored statements with many clients,
and ingest throughput of the usage API.

    python benchmarks/service_load.py --clients 10000 --hours 24 --out /tmp/svc-load

What it does, against a real ``tenantcost serve`` (uvicorn, ``--workers``) on 127.0.0.1:

1. generates a month's data with ``benchmarks/generate.py`` (``--clients`` × ``--services``
   × ``--hours``, from 2026-11-01), loads it into a fresh store (``--db``, default a SQLite
   file in ``--out``; a ``postgresql+psycopg://`` URL works the same), runs and closes the
   month (``--allow-incomplete`` when fewer than 720 hours), and creates tokens
   (``--reuse``: the store an earlier run left in ``--out``, upgraded, new tokens);
2. waits (at most ``--render-wait`` seconds) for the service's background rendering of the
   issued revision's sheets: every client's confidence, HTML and Markdown, then the PDFs,
   and reports how long each part took (or how far it got);
3. reads, ``--concurrency`` requests at a time, ``--requests`` of each kind, clients drawn at
   random: the stored statement (finance, account manager), ``GET /api/v1/months``, client
   search, a client and its history, ``sheet.html`` and ``sheet.pdf`` (each account
   manager's PDF read once first, so the figures are of kept PDFs), and the pages: a client
   (both roles), the client search, the months and the month page; reports p50 / p95 / max
   latency and errors for each;
4. restarts the server and times the first read of each kind in the fresh workers;
With ``--months 12``: 12 closed months ending 2026-11 and the open 2026-12 (run, a draft),
a catalog, no sheets (``--sheets`` to read them), and issue 36's reads per role: the client
list (API with sort/filter/search, page, CSV), trends, movers (JSON, CSV), the client, month,
pricing and months pages and ``unit-economics``, on the closed and the open month.

5. posts usage for December (an open month) through ``POST /api/v1/usage`` (JSON, batches of
   ``--batch`` records) and ``POST /api/v1/usage.parquet``, and reports records per second.

Targets: every page and API read p95 <= 200 ms at 10,000 clients, 8 concurrent,
2 workers; a kept PDF sheet p95 <= 300 ms; the first read of a month in a fresh worker
<= 1 s; zero errors. Prints Markdown tables (and ``--json FILE`` writes the figures) with
the machine's load average: other processes on the machine slow every figure.
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
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
MONTH = "2026-11"
"""The latest closed month (the only month with ``--months 1``)."""
OPEN = "2026-12"
"""With ``--months`` above 1: the open month, run (a draft) and not closed."""
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
    """Generate, ingest, run and close (``--reuse``: the store of an earlier run, upgraded);
    the store URL, data folder, tokens and clients."""
    out: Path = args.out
    data_set = out / "data-set"
    db = args.db or f"sqlite:///{out / 'store.db'}"
    data = str(out / "store-data")
    if args.reuse:
        tenantcost("db", "upgrade", "--db", db, "--data", data)
    else:
        build_store(args, data_set, db, data)
    usage = pd.read_parquet(data_set / "usage.parquet", columns=["client"])
    clients = sorted(c for c in usage["client"].unique() if c)
    return db, data, create_tokens(db, clients), clients


def build_store(args: argparse.Namespace, data_set: Path, db: str, data: str) -> None:
    """The generated month (``--months N``: N closed months ending with MONTH, then OPEN run
    and left open), ingested, run and closed in a fresh store, with a catalog."""
    closed = months_before(MONTH, args.months)
    sets = {month: data_set if month == MONTH else data_set.parent / f"data-set-{month}"
            for month in closed + ([OPEN] if args.months > 1 else [])}  # fmt: skip
    generators = [
        subprocess.Popen(
            [
                sys.executable,
                str(ROOT / "benchmarks" / "generate.py"),
                "--clients",
                str(args.clients),
                "--services",
                str(args.services),
                "--hours",
                str(args.hours),
                "--start",
                f"{month}-01T00:00:00Z",
                "--layout",
                "file",
                "--out",
                str(folder),
            ],
            stdout=subprocess.DEVNULL,
        )
        for month, folder in sets.items()
        if not (folder / "meta.json").exists()
    ]
    if any(g.wait() != 0 for g in generators):
        raise SystemExit("benchmarks/generate.py failed")
    store = ("--db", db, "--data", data)
    first = sets[closed[0]]
    timings: dict[str, float] = {}

    def timed(label: str, *command: str) -> None:
        t0 = time.perf_counter()
        tenantcost(*command, *store)
        timings[label] = round(time.perf_counter() - t0, 1)
        print(f"  {label}: {timings[label]} s", file=sys.stderr, flush=True)

    timed("upgrade", "db", "upgrade")
    timed("rules", "rules", "load", str(first / "rules.yaml"))
    catalog = data_set.parent / "catalog.csv"
    usage = pd.read_parquet(first / "usage.parquet", columns=["client"])
    write_catalog(sorted(c for c in usage["client"].unique() if c), catalog)
    timed("catalog", "catalog", "load", str(catalog))
    for month, folder in sets.items():
        timed(f"{month} ingest usage", "ingest", "usage", "--usage", str(folder / "usage.parquet"))
        timed(f"{month} ingest costs", "ingest", "costs", "--costs", str(folder / "costs.json"))
        timed(f"{month} run", "run", "--month", month)
        if month != OPEN:
            timed(f"{month} close", "close", "--month", month, "--allow-incomplete")


def months_before(last: str, count: int) -> list[str]:
    """``count`` calendar months ending with ``last``, oldest first."""
    end = pd.Period(last, freq="M")
    return [str(end - k) for k in range(count - 1, -1, -1)]


PLANS = ("starter", "team", "business", "enterprise")
SEGMENTS = ("smb", "mid-market", "enterprise")
MANAGERS = tuple(f"Manager {k:02d}" for k in range(1, 21))


def write_catalog(clients: list[str], path: Path) -> None:
    """A catalog of every client: a name, one of 4 plans, 3 segments, 20 account managers and
    a monthly revenue, drawn with a fixed seed (vectorised)."""
    import numpy as np

    draw = np.random.default_rng(11)
    n = len(clients)
    plan = draw.integers(0, len(PLANS), n)
    frame = pd.DataFrame({
        "client": clients,
        "name": [f"Company {c}" for c in clients],
        "plan": np.array(PLANS)[plan],
        "segment": np.array(SEGMENTS)[draw.integers(0, len(SEGMENTS), n)],
        "account_manager": np.array(MANAGERS)[draw.integers(0, len(MANAGERS), n)],
        "monthly_revenue": (np.array([9.0, 49.0, 199.0, 799.0])[plan]).round(2),
        "currency": "USD",
    })  # fmt: skip
    frame.to_csv(path, index=False)


def create_tokens(db: str, clients: list[str]) -> dict[str, str]:
    """New finance, ingest and account-manager tokens (20 clients drawn at random)."""
    tag = f"{os.getpid()}-{int(time.time())}"
    tokens = {
        role: tenantcost("token", "create", "--role", role, "--name", f"bench-{role}-{tag}",
                         "--db", db).strip()
        for role in ("finance", "ingest", "product")
    }  # fmt: skip
    mine = random.Random(1).sample(clients, min(20, len(clients)))
    am = ["token", "create", "--role", "account-manager", "--name", f"bench-am-{tag}", "--db", db]
    for client in mine:
        am += ["--client", client]
    tokens["account-manager"] = tenantcost(*am).strip()
    tokens["am-clients"] = json.dumps(mine)
    return tokens


def start_server(
    db: str, data: str, args: argparse.Namespace
) -> tuple[subprocess.Popen[bytes], str]:
    env = os.environ | {"TENANTCOST_SECRET": SECRET}
    if not args.sheets:  # the store's sheets are left out: no background rendering
        env |= {"TENANTCOST_PRERENDER": "0"}
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

    def get(
        path: Callable[[], str], headers: dict[str, str]
    ) -> Callable[[httpx.Client], httpx.Response]:
        return lambda s: s.get(f"{url}{path()}", headers=headers)

    sheet = f"/months/{MONTH}/sheet"
    for client in own if args.sheets else []:  # the PDFs read below: kept, or rendered now
        httpx.get(f"{url}/api/v1/clients/{client}{sheet}.pdf", headers=manager, timeout=600)
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
    ]
    if args.sheets:
        results += [
            hammer("sheet.html (account manager)", n, c,
                   get(lambda: f"/api/v1/clients/{pick.choice(own)}{sheet}.html", manager)),
            hammer("sheet.pdf, kept (account manager)", n, c,
                   get(lambda: f"/api/v1/clients/{pick.choice(own)}{sheet}.pdf", manager)),
        ]  # fmt: skip
    results += [
        hammer("API client (finance)", n, c,
               get(lambda: f"/api/v1/clients/{pick.choice(clients)}", finance)),
        hammer("API history (finance)", n, c,
               get(lambda: f"/api/v1/clients/{pick.choice(clients)}/history", finance)),
    ]  # fmt: skip
    if httpx.get(f"{url}/clients/{own[0]}", headers=manager).status_code == 200:
        results += [
            hammer("client page (account manager)", n, c,
                   get(lambda: f"/clients/{pick.choice(own)}", manager)),
            hammer("client page (finance)", n, c,
                   get(lambda: f"/clients/{pick.choice(clients)}", finance)),
            hammer("clients page, search (finance)", n, c,
                   get(lambda: f"/clients?q={pick.randrange(100):02d}", finance)),
            hammer("months page (finance)", n, c, get(lambda: "/months", finance)),
            hammer("month page (finance)", n, c, get(lambda: f"/months/{MONTH}", finance)),
        ]  # fmt: skip
    return results


def issue36_reads(
    url: str, tokens: dict[str, str], clients: list[str], args: argparse.Namespace
) -> list[Latencies]:
    """The reads of issue 36 on the closed month (MONTH) and the open one (OPEN), each by the
    roles that see it. The list's sort, filter and search parameters are read as well; a
    build that does not know them answers 422 (or ignores them: then the items carry no
    ``change``), which the read's name says."""
    pick = random.Random(36)
    finance = {"Authorization": f"Bearer {tokens['finance']}"}
    manager = {"Authorization": f"Bearer {tokens['account-manager']}"}
    product = {"Authorization": f"Bearer {tokens['product']}"}
    own = json.loads(tokens["am-clients"])
    n, c = args.requests, args.concurrency

    def get(
        path: Callable[[], str], headers: dict[str, str]
    ) -> Callable[[httpx.Client], httpx.Response]:
        return lambda s: s.get(f"{url}{path()}", headers=headers)

    def listed(month: str) -> Callable[[], str]:
        def path() -> str:
            sort = pick.choice(("amount", "change", "change_pct", "name", "id"))
            order = pick.choice(("asc", "desc"))
            extra = pick.choice((f"&plan={pick.choice(PLANS)}", f"&segment={pick.choice(SEGMENTS)}",
                                 f"&manager={pick.choice(MANAGERS).replace(' ', '+')}",
                                 f"&q={pick.randrange(100):02d}", ""))  # fmt: skip
            return f"/api/v1/clients?month={month}&sort={sort}&order={order}{extra}"

        return path

    probe = httpx.get(f"{url}{listed(MONTH)()}", headers=finance, timeout=60)
    items = probe.json().get("items", []) if probe.status_code == 200 else []
    params = ("" if probe.status_code == 200 and items and "change" in items[0]
              else f" [sort/filter params: {probe.status_code}, not applied]")  # fmt: skip
    months = [m for m in (MONTH, OPEN) if args.months > 1 or m == MONTH]
    results: list[Latencies] = []
    for month in months:
        tag = "open" if month == OPEN else "closed"
        # product reads issued months only: the open month's draft pricing is finance's
        pricer, who = (finance, "finance") if month == OPEN else (product, "product")
        results += [
            hammer(f"API clients ?month ({tag}, finance)", n, c,
                   get(lambda m=month: f"/api/v1/clients?month={m}", finance)),
            hammer(f"API clients sort/filter/search ({tag}, finance){params}", n, c,
                   get(listed(month), finance)),
            hammer(f"API movers ({tag}, finance)", n, c,
                   get(lambda m=month: f"/api/v1/months/{m}/movers", finance)),
            hammer(f"API movers CSV ({tag}, finance)", n, c,
                   get(lambda m=month: f"/api/v1/months/{m}/movers?format=csv", finance)),
            hammer(f"month page ({tag}, finance)", n, c,
                   get(lambda m=month: f"/months/{m}", finance)),
            hammer(f"clients page ?month ({tag}, finance)", n, c,
                   get(lambda m=month: f"/clients?month={m}", finance)),
            hammer(f"pricing page ({tag}, {who})", n, c,
                   get(lambda m=month: f"/pricing?month={m}", pricer)),
            hammer(f"API unit-economics ({tag}, {who})", n, c,
                   get(lambda m=month: f"/api/v1/months/{m}/unit-economics", pricer)),
        ]  # fmt: skip
    results += [
        hammer("API clients ?month, CSV (closed, finance)", max(10, n // 10), c,
               get(lambda: f"/api/v1/clients?month={MONTH}&format=csv", finance)),
        hammer("API clients (account manager)", n, c,
               get(lambda: f"/api/v1/clients?month={MONTH}", manager)),
        hammer("API movers (closed, account manager)", n, c,
               get(lambda: f"/api/v1/months/{MONTH}/movers", manager)),
        hammer("clients page (account manager)", n, c, get(lambda: "/clients", manager)),
        hammer("API trend (finance)", n, c,
               get(lambda: f"/api/v1/clients/{pick.choice(clients)}/trend", finance)),
        hammer("API trend (account manager)", n, c,
               get(lambda: f"/api/v1/clients/{pick.choice(own)}/trend", manager)),
        hammer("API unit-cost-trend (finance)", n, c,
               get(lambda: f"/api/v1/clients/{pick.choice(clients)}/unit-cost-trend", finance)),
        hammer("client page, 12-month trend (finance)", n, c,
               get(lambda: f"/clients/{pick.choice(clients)}", finance)),
        hammer("client page, 12-month trend (account manager)", n, c,
               get(lambda: f"/clients/{pick.choice(own)}", manager)),
        hammer("pricing page, default month (product)", n, c, get(lambda: "/pricing", product)),
        hammer("months page (finance)", n, c, get(lambda: "/months", finance)),
        hammer("months page (product)", n, c, get(lambda: "/months", product)),
    ]  # fmt: skip
    return results


def first_reads(
    url: str, tokens: dict[str, str], clients: list[str], sheets: bool
) -> list[dict[str, object]]:
    """Right after the server (re)started: the first read of each kind, one at a time, each
    the first of the month in the worker that answers it (no pack loaded yet)."""
    finance = {"Authorization": f"Bearer {tokens['finance']}"}
    manager = {"Authorization": f"Bearer {tokens['account-manager']}"}
    own = json.loads(tokens["am-clients"])
    other = random.Random(3).choice(clients)
    kinds = [
        ("API statement (finance)", f"/api/v1/clients/{other}/months/{MONTH}", finance),
        ("API statement (account manager)", f"/api/v1/clients/{own[1]}/months/{MONTH}", manager),
        ("sheet.html (account manager)", f"/api/v1/clients/{own[2]}/months/{MONTH}/sheet.html",
         manager),
        ("sheet.md (account manager)", f"/api/v1/clients/{own[3]}/months/{MONTH}/sheet.md",
         manager),
        ("sheet.pdf (account manager)", f"/api/v1/clients/{own[0]}/months/{MONTH}/sheet.pdf",
         manager),
        ("client page (account manager)", f"/clients/{own[4]}", manager),
        ("month page (finance)", f"/months/{MONTH}", finance),
        ("API months (finance)", "/api/v1/months", finance),
    ]  # fmt: skip
    if not sheets:
        kinds = [k for k in kinds if not k[0].startswith("sheet")]
    rows = []
    for name, path, headers in kinds:  # one at a time: each is a first read
        t0 = time.perf_counter()
        answer = httpx.get(f"{url}{path}", headers=headers, timeout=600)
        rows.append({"first read": name, "status": answer.status_code,
                     "ms": round((time.perf_counter() - t0) * 1000, 1)})  # fmt: skip
    return rows


def rendering(db: str, wait: float, since: str | None = None) -> dict[str, object]:
    """The background rendering of the month's issued revision (the job the service's
    watcher claimed): waits up to ``wait`` seconds for its fast part (every client's
    confidence, HTML and Markdown) or the whole job to finish, then reports how long it
    took, or how far it got, per format (seconds from the claim to the last sheet)."""
    from sqlalchemy import func, select

    from tenantcost.store.cycle import latest_issued
    from tenantcost.store.engine import open_engine
    from tenantcost.store.models import SheetRender, table
    from tenantcost.store.settings import resolve_settings
    from tenantcost.store.sheet_cache import jobs

    engine = open_engine(resolve_settings(db=db, environ={}))
    issued = latest_issued(engine, MONTH)
    assert issued is not None
    r = table(SheetRender).c
    query = (
        select(r.format, func.count(), func.min(r.rendered_at), func.max(r.rendered_at))
        .where(r.run_id == issued.run_id, r.revision == issued.revision)
        .group_by(r.format)
    )
    deadline = time.monotonic() + wait
    while True:
        found = jobs(engine, issued.run_id, issued.revision)
        with engine.connect() as connection:
            per_format = connection.execute(query).all()
        counts = {str(f): int(n) for f, n, _, _ in per_format}
        fast_done = len({counts.get(f, 0) for f in ("confidence", "html", "md")}) == 1
        if (found and found[-1].finished_at is not None) or (fast_done and counts.get("md")):
            break
        if time.monotonic() >= deadline:
            break
        time.sleep(2)
    engine.dispose()
    job = found[-1] if found else None
    end = job.finished_at if job is not None and job.finished_at is not None else None
    start = datetime.fromisoformat(since) if since else job.claimed_at if job else None
    return {
        "claimed_at": start.isoformat() if start else None,
        "finished": end is not None,
        "seconds": round((end - start).total_seconds(), 1) if start and end else None,
        "error": job.error if job else None,
        "formats": {
            str(fmt): {"sheets": int(n), "seconds": _since(start, first, last)}
            for fmt, n, first, last in per_format
        },
    }  # fmt: skip


def _since(start: datetime | None, first: Any, last: Any) -> float | str | None:
    """Seconds from the claim to the format's last sheet; a format whose sheets were kept
    before the claim (a ``--reuse`` store, a claim taken over from a stopped server) says so
    instead of giving a negative time."""
    if start is None or last is None:
        return None
    first, last = (v if isinstance(v, datetime) else datetime.fromisoformat(str(v))
                   for v in (first, last))  # fmt: skip
    if first.replace(tzinfo=None) < start.replace(tzinfo=None):
        return "kept before this claim"
    return round((last.replace(tzinfo=None) - start.replace(tzinfo=None)).total_seconds(), 1)


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
    frame["service"] = "svc-01"  # a service the generated rules name
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
    parser.add_argument("--hours", type=int, default=24, help="hours of data in each month")
    parser.add_argument(
        "--months", type=int, default=1,
        help="closed months ending with 2026-11; above 1, also 2026-12 run and left open",
    )  # fmt: skip
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--db", help="store URL (default: a SQLite file in --out)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--port", type=int, default=18_765)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--requests", type=int, default=500, help="requests per kind of read")
    parser.add_argument("--batch", type=int, default=10_000, help="records of the JSON batch")
    parser.add_argument("--parquet-rows", type=int, default=100_000)
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument(
        "--reuse",
        action="store_true",
        help="read the store an earlier run left in --out (upgraded, new tokens)",
    )
    parser.add_argument(
        "--render-wait",
        type=float,
        default=600.0,
        help="seconds to wait for the background rendering before reading",
    )
    parser.add_argument(
        "--sheets",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="render and read the sheets (default: with --months 1 only)",
    )
    args = parser.parse_args(argv)
    if args.sheets is None:
        args.sheets = args.months == 1
    args.out.mkdir(parents=True, exist_ok=True)
    db, data, tokens, clients = prepare_store(args)
    process, url = start_server(db, data, args)
    try:
        rendered = rendering(db, args.render_wait if args.sheets else 0)
        print(f"  background rendering: {json.dumps(rendered)}", file=sys.stderr, flush=True)
        load = os.getloadavg()
        done = reads(url, tokens, clients, args) + issue36_reads(url, tokens, clients, args)
        read_rows = [r.row() for r in done]
        load = max(load, os.getloadavg())
        process.terminate()
        process.wait(timeout=30)
        process, url = start_server(db, data, args)  # fresh workers: nothing loaded
        first_rows = first_reads(url, tokens, clients, args.sheets)
        ingest_rows = ingest(url, tokens, clients, args)
    finally:
        process.terminate()
        process.wait(timeout=30)
    rendered_after = rendering(db, 0, str(rendered["claimed_at"] or "") or None)
    print(f"{len(clients)} clients x {args.months} months, {args.workers} workers, "
          f"{args.concurrency} concurrent; "
          f"load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}\n")  # fmt: skip
    print(markdown(read_rows) + "\n\n" + markdown(first_rows) + "\n\n" + markdown(ingest_rows))
    print(f"\nbackground rendering before the reads: {json.dumps(rendered)}")
    print(f"background rendering at the end: {json.dumps(rendered_after)}")
    if args.json is not None:
        args.json.write_text(json.dumps({
            "reads": read_rows, "first_reads": first_rows, "ingest": ingest_rows,
            "rendering": rendered, "rendering_at_end": rendered_after,
        }, indent=2))  # fmt: skip
    return 0 if all(r["errors"] == 0 for r in read_rows) else 1


if __name__ == "__main__":
    sys.exit(main())
