"""The files of ``examples/shared-database``: a small SaaS month (November 2026, four clients)
whose shared database, storage, NAT and LLM lines are split by what each client really uses.

Deterministic (no randomness: diurnal curves and fixed per-client profiles), so the shipped
files equal what this module builds (``tests/test_shared_database_example.py`` checks it) and
``python -m tests.shared_database_data`` rewrites them. Amounts are exact decimal text.

* ``costs.csv``: OpenCost's hourly rows of the cluster ``prod-paris`` (one m6i.2xlarge node at
  0.448 USD an hour): the api and worker deployments, monitoring, and ``__idle__``.
* ``usage.csv``: what the meter posts per hour, service and client: requests, cpu_seconds,
  db_seconds (time waiting on PostgreSQL), tokens (the LLM's) and bytes_out (through NAT).
* ``samples/db-storage.csv``: each client's bytes in the shared PostgreSQL, sampled every 6
  hours (a gauge); ``samples/s3-inventory.csv``: each client's prefix in the bucket, summed
  from the daily S3 Inventory report (a gauge).
* ``billing/2026-11/aws-focus.csv`` and ``billing/2026-11/llm-focus.csv``: the month's FOCUS
  1.2 exports of AWS (node, RDS instance and storage, S3, NAT) and of the LLM provider, daily
  lines.
"""

from __future__ import annotations

import csv
import math
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

from .invoice_data import ec2_instance, nat_processing, service_usage, write_focus_csv

ROOT = Path(__file__).resolve().parents[1]
FOLDER = ROOT / "examples" / "shared-database"
START = datetime(2026, 11, 1, tzinfo=UTC)
DAYS = 30
HOURS = DAYS * 24
NODE_HOURLY = Decimal("0.448")
CLUSTER = "prod-paris"
DB_ARN = "arn:aws:rds:eu-west-3:100000000001:db:saas-main"
BUCKET_ARN = "arn:aws:s3:::saas-prod-tenants"
LLM_ACCOUNT = "org-7Qb2sLx0"
NAT_PER_GB = Decimal("0.048")
LLM_PER_MILLION = Decimal("0.60")

# requests/h at peak, CPU s per request, DB ms per request, LLM tokens per request,
# bytes out per request, worker jobs/h, GiB in PostgreSQL at start and growth/day, S3 GiB
CLIENTS: dict[str, dict[str, float]] = {
    "acme": dict(
        rps=5200, cpu=0.011, db=4.0, tok=0, out=42_000, jobs=30, pg=120, pg_day=1.5, s3=900
    ),
    "globex": dict(
        rps=2100, cpu=0.014, db=3.0, tok=420, out=18_000, jobs=90, pg=40, pg_day=0.5, s3=150
    ),
    "initech": dict(
        rps=700, cpu=0.02, db=38.0, tok=0, out=9_000, jobs=10, pg=260, pg_day=4.0, s3=60
    ),
    "umbrella": dict(
        rps=400, cpu=0.012, db=6.0, tok=35, out=310_000, jobs=5, pg=15, pg_day=0.2, s3=2600
    ),
}
GIB = 2**30


def _iso(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def _load(hour: int) -> float:
    """Diurnal traffic, 0.25 at night to 1.0 at 14:00 UTC, a little lower at weekends."""
    at = START + timedelta(hours=hour)
    curve = 0.625 + 0.375 * math.sin(math.pi * (at.hour - 8) / 12)
    return curve * (0.7 if at.weekday() >= 5 else 1.0)


def usage_rows() -> list[list[str]]:
    rows = []
    for h in range(HOURS):
        start, load = START + timedelta(hours=h), _load(h)
        end = start + timedelta(hours=1)
        for client, p in CLIENTS.items():
            requests = round(p["rps"] * load)
            jobs = round(p["jobs"] * (0.5 + load / 2))
            api = [requests, round(requests * p["cpu"], 1), round(requests * p["db"] / 1000, 3),
                   round(requests * p["tok"]), round(requests * p["out"])]  # fmt: skip
            worker = [jobs, round(jobs * 2.5, 1), round(jobs * p["db"] * 40 / 1000, 3),
                      round(jobs * p["tok"] * 6), 0]  # fmt: skip
            for service, values in (("api", api), ("worker", worker)):
                rows.append([_iso(start), _iso(end), service, client, *map(str, values)])
    return rows


def cost_rows() -> list[list[str]]:
    """OpenCost's rows: api by traffic, worker, monitoring, and the rest of the node idle."""
    rows = []
    for h in range(HOURS):
        start = START + timedelta(hours=h)
        end = start + timedelta(hours=1)
        api = (NODE_HOURLY * Decimal(str(round(0.18 + 0.14 * _load(h), 4)))).quantize(
            Decimal("0.000001")
        )
        worker = Decimal("0.089600")
        monitoring = Decimal("0.022400")
        idle = NODE_HOURLY - api - worker - monitoring
        for name, namespace, kind, controller, amount in (
            ("saas/api", "saas", "deployment", "api", api),
            ("saas/worker", "saas", "deployment", "worker", worker),
            ("monitoring/prometheus", "monitoring", "statefulset", "prometheus", monitoring),
            ("__idle__", "", "", "", idle),
        ):
            rows.append([_iso(start), _iso(end), name, CLUSTER, namespace, kind, controller,
                         str(amount)])  # fmt: skip
    return rows


def db_storage_rows() -> list[list[str]]:
    """Bytes per tenant schema in PostgreSQL, sampled every 6 hours (pg_total_relation_size)."""
    rows = []
    for h in range(0, HOURS, 6):
        at = START + timedelta(hours=h)
        for client, p in CLIENTS.items():
            level = round((p["pg"] + p["pg_day"] * h / 24) * GIB)
            rows.append([_iso(at), "db", client, str(level)])
    return rows


def s3_rows() -> list[list[str]]:
    """Bytes under each tenant's prefix, from the daily S3 Inventory report (00:00 UTC)."""
    rows = []
    for d in range(DAYS):
        at = START + timedelta(days=d)
        for client, p in CLIENTS.items():
            rows.append([_iso(at), "s3", client, str(round(p["s3"] * GIB * (1 + d / 300)))])
    return rows


def aws_rows(usage: list[list[str]]) -> list[dict[str, str]]:
    """The AWS bill, one line per day and item (FOCUS 1.2, every column)."""
    bytes_out = [0] * DAYS
    for row in usage:
        day = (datetime.fromisoformat(row[0]) - START).days
        bytes_out[day] += int(row[8])
    out = []
    for d in range(DAYS):
        a, b = START + timedelta(days=d), START + timedelta(days=d + 1)
        invoice = "INV-AWS-2026-11"
        out.append(ec2_instance(a, b, cluster=CLUSTER, instance="i-0c0ffee0123456789",
                                effective=NODE_HOURLY * 24, list_price=NODE_HOURLY,
                                invoice=invoice))  # fmt: skip
        out.append(service_usage(
            a, b, service="Amazon Relational Database Service", category="Databases",
            subcategory="Relational Databases", amount=Decimal("0.456") * 24, invoice=invoice,
            resource=DB_ARN, resource_type="DB Instance", quantity=24, unit_price="0.456",
            description="db.r6g.large Multi-AZ PostgreSQL instance-hour"))  # fmt: skip
        out.append(service_usage(
            a, b, service="Amazon Relational Database Service", category="Databases",
            subcategory="Relational Databases", amount=Decimal("2.76"), invoice=invoice,
            resource=DB_ARN, resource_type="DB Instance", unit="GB-Months", quantity=20,
            unit_price="0.138",
            description="$0.138 per GB-month of General Purpose (gp3) storage"))  # fmt: skip
        out.append(service_usage(
            a, b, service="Amazon Simple Storage Service", category="Storage",
            subcategory="Object Storage", amount=Decimal("2.4"), invoice=invoice,
            resource=BUCKET_ARN, resource_type="Bucket", unit="GB-Months", quantity=100,
            unit_price="0.024",
            description="$0.024 per GB-Mo for storage used (S3 Standard)"))  # fmt: skip
        gigabytes = Decimal(bytes_out[d]) / Decimal(10**9)
        out.append(nat_processing(a, b, amount=gigabytes * NAT_PER_GB, gigabytes=gigabytes,
                                  invoice=invoice))  # fmt: skip
    return out


def llm_rows(usage: list[list[str]]) -> list[dict[str, str]]:
    """The LLM provider's bill (a SaaS provider's FOCUS export): tokens per day."""
    tokens = [0] * DAYS
    for row in usage:
        tokens[(datetime.fromisoformat(row[0]) - START).days] += int(row[7])
    out = []
    for d in range(DAYS):
        a, b = START + timedelta(days=d), START + timedelta(days=d + 1)
        thousands = Decimal(tokens[d]) / 1000
        price = LLM_PER_MILLION / 1000  # per 1000 tokens: 0.0006
        out.append(service_usage(
            a, b, service="LLM API", category="AI and Machine Learning",
            subcategory="Generative AI", amount=thousands * price,
            invoice="INV-LLM-2026-11", unit="1000 Tokens", quantity=thousands,
            unit_price=price, description="Model tokens (input and output)",
            ProviderName="Example LLM Inc.", PublisherName="Example LLM Inc.",
            InvoiceIssuerName="Example LLM Inc.", BillingAccountId=LLM_ACCOUNT,
            BillingAccountName="Example SaaS", BillingAccountType="Organization",
            SubAccountId=None, SubAccountName=None, SubAccountType=None))  # fmt: skip
    return out


def _write_csv(path: Path, header: list[str], rows: list[list[str]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="", encoding="utf-8") as out:
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(header)
        writer.writerows(rows)


def write_all(folder: Path = FOLDER) -> list[Path]:
    """Write every data file of the example under ``folder``; returns their paths."""
    usage = usage_rows()
    files = {
        "costs.csv": (["window_start", "window_end", "name", "cluster", "namespace",
                       "controller_kind", "controller", "total_cost"], cost_rows()),
        "usage.csv": (["window_start", "window_end", "service", "client", "requests",
                       "cpu_seconds", "db_seconds", "tokens", "bytes_out"], usage),
        "samples/db-storage.csv": (["time", "service", "client", "storage_bytes"],
                                   db_storage_rows()),
        "samples/s3-inventory.csv": (["time", "service", "client", "s3_bytes"], s3_rows()),
    }  # fmt: skip
    for name, (header, rows) in files.items():
        _write_csv(folder / name, header, rows)
    write_focus_csv(folder / "billing/2026-11/aws-focus.csv", aws_rows(usage))
    write_focus_csv(folder / "billing/2026-11/llm-focus.csv", llm_rows(usage))
    return [folder / n for n in files] + [folder / "billing/2026-11/aws-focus.csv",
                                          folder / "billing/2026-11/llm-focus.csv"]  # fmt: skip


if __name__ == "__main__":
    for written in write_all():
        print(written)
