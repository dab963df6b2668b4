"""Generate a FOCUS 1.2 billing dataset (Parquet) for the benchmark month: 10 M rows by default.

    python benchmarks/billing_data.py --out /tmp/b/billing.parquet                 # 10 M rows
    python benchmarks/billing_data.py --rows 10000 --hours 48 --out /tmp/billing.parquet

What a SaaS company's cloud bill looks like in FOCUS (AWS exports it as ``FOCUS_1_2_AWS``), for
the hours of the benchmark's month (``--start``, ``--hours``: by default the 744 hours from
2026-11-01 that ``generate.py`` covers; each hour is billed in its calendar month's billing
period, with one invoice per billing period):

* **the cluster** (``--cluster``, ``cluster-one`` as in ``generate.py``): ``--nodes`` EC2
  instance lines per hour tagged ``aws:eks:cluster-name`` (and the node group's
  ``eks:cluster-name``), 60 % of them covered by a Savings Plan (``BilledCost`` 0,
  ``EffectiveCost`` the amortized rate), their EBS volumes and the EKS control-plane fee;
* **everything else**, hourly: about 13,000 resources of ten services (EC2 outside the
  cluster, S3, RDS, DynamoDB, Lambda, CloudWatch, data transfer, NAT, load balancers,
  ElastiCache) in twelve sub-accounts, two of another business unit (``2000000000*``). Costs
  follow a diurnal curve with noise; some EC2 instances are covered by the Savings Plan too;
* **the Savings Plan**: its hourly recurring fee (``ChargeCategory = Purchase``, billed, 0
  effective) and its unused part (``Usage``, ``CommitmentDiscountStatus = Unused``), so that for
  the commitment Σ usage EffectiveCost = Σ purchase BilledCost, as FOCUS requires;
* **per billing period**: a credit per sub-account of the first three (``Credit``, negative)
  and tax per sub-account (``Tax``, 20 % of what it was billed), charge period = the month;
* ``Tags``: a JSON object text of about five keys (``env``, ``team``, ``cost-center``,
  ``app``; ``tenant`` naming a client ``client-NNNN`` on about a fifth of the resources,
  the cluster's tags on its lines).

Amounts are ``decimal128(38, 10)`` (CUR's 10 places, exact). The file is written six hours
at a time (one row group each, aligned on UTC midnight, plus one for the monthly lines):
memory is bounded by six hours' rows whatever the month's length; there is never a frame of
all rows (10 M rows: about 80,000 rows a row group). The output depends only on the arguments
(``--seed``).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

NS_PER_HOUR = 3_600_000_000_000
CHUNK_HOURS = 6
"""Hours per row group (a divisor of 24: a chunk never crosses a day, hence a month)."""
SCALE = 10**10
"""Amounts are integers of 10^-10 currency units (decimal128(38, 10))."""
MONEY = pa.decimal128(38, 10)
TIME = pa.timestamp("us", tz="UTC")
ACCOUNT = "999988887777"
PROVIDER = "AWS"
ISSUER = "AWS"
"""The provider issues its own invoices (a marketplace seller would bill 0)."""
SP_ID = f"arn:aws:savingsplans::{ACCOUNT}:savingsplan/3f1b2c4d-sp-compute"
SP_RATE = 0.72
"""Savings Plan price as a share of on demand."""

SCHEMA = pa.schema(
    [
        ("BilledCost", MONEY),
        ("BillingAccountId", pa.string()),
        ("BillingAccountName", pa.string()),
        ("BillingCurrency", pa.string()),
        ("BillingPeriodEnd", TIME),
        ("BillingPeriodStart", TIME),
        ("ChargeCategory", pa.string()),
        ("ChargeClass", pa.string()),
        ("ChargeDescription", pa.string()),
        ("ChargeFrequency", pa.string()),
        ("ChargePeriodEnd", TIME),
        ("ChargePeriodStart", TIME),
        ("CommitmentDiscountCategory", pa.string()),
        ("CommitmentDiscountId", pa.string()),
        ("CommitmentDiscountName", pa.string()),
        ("CommitmentDiscountStatus", pa.string()),
        ("CommitmentDiscountType", pa.string()),
        ("ConsumedQuantity", MONEY),
        ("ConsumedUnit", pa.string()),
        ("ContractedCost", MONEY),
        ("EffectiveCost", MONEY),
        ("InvoiceId", pa.string()),
        ("InvoiceIssuerName", pa.string()),
        ("ListCost", MONEY),
        ("PricingCategory", pa.string()),
        ("PricingQuantity", MONEY),
        ("PricingUnit", pa.string()),
        ("ProviderName", pa.string()),
        ("PublisherName", pa.string()),
        ("RegionId", pa.string()),
        ("RegionName", pa.string()),
        ("ResourceId", pa.string()),
        ("ResourceName", pa.string()),
        ("ResourceType", pa.string()),
        ("ServiceCategory", pa.string()),
        ("ServiceName", pa.string()),
        ("ServiceSubcategory", pa.string()),
        ("SkuId", pa.string()),
        ("SkuPriceId", pa.string()),
        ("SubAccountId", pa.string()),
        ("SubAccountName", pa.string()),
        ("Tags", pa.string()),
    ]
)
CATALOG_COLUMNS = [
    "ChargeDescription",
    "ConsumedUnit",
    "PricingUnit",
    "RegionId",
    "RegionName",
    "ResourceId",
    "ResourceName",
    "ResourceType",
    "ServiceCategory",
    "ServiceName",
    "ServiceSubcategory",
    "SkuId",
    "SkuPriceId",
    "SubAccountId",
    "SubAccountName",
    "Tags",
]
"""Per-resource text columns: drawn once, taken for every hour the resource bills."""

# name, category, subcategory, resource type, unit, share of resources, median USD/hour, diurnal
SERVICES = [
    (
        "Amazon Elastic Compute Cloud",
        "Compute",
        "Virtual Machines",
        "Instance",
        "Hours",
        0.12,
        0.09,
        0.0,
    ),
    (
        "Amazon Simple Storage Service",
        "Storage",
        "Object Storage",
        "Bucket",
        "GB-Months",
        0.10,
        0.004,
        0.1,
    ),
    (
        "Amazon Relational Database Service",
        "Databases",
        "Relational Databases",
        "DB Instance",
        "Hours",
        0.04,
        0.35,
        0.0,
    ),
    (
        "Amazon DynamoDB",
        "Databases",
        "NoSQL Databases",
        "Table",
        "ReadRequestUnits",
        0.08,
        0.01,
        0.5,
    ),
    ("AWS Lambda", "Compute", "Serverless Compute", "Function", "GB-Seconds", 0.16, 0.002, 0.8),
    (
        "Amazon CloudWatch",
        "Management and Governance",
        "Observability",
        "Metric",
        "Metrics",
        0.14,
        0.0004,
        0.0,
    ),
    (
        "AWS Data Transfer",
        "Networking",
        "Network Connectivity",
        "Data Transfer",
        "GB",
        0.18,
        0.003,
        0.6,
    ),
    (
        "Amazon Virtual Private Cloud",
        "Networking",
        "Network Infrastructure",
        "NAT Gateway",
        "GB",
        0.06,
        0.06,
        0.6,
    ),
    (
        "Elastic Load Balancing",
        "Networking",
        "Network Infrastructure",
        "Load Balancer",
        "LCU-Hours",
        0.06,
        0.025,
        0.4,
    ),
    ("Amazon ElastiCache", "Databases", "Caching", "Cache Node", "Hours", 0.06, 0.2, 0.0),
]
SUB_ACCOUNTS = [f"1000000000{i:02d}" for i in range(1, 11)] + ["200000000001", "200000000002"]
TEAMS = ["checkout", "search", "billing", "identity", "data", "platform", "growth", "mobile"]
ENVS = ["prod", "prod", "prod", "staging", "dev"]


@dataclass
class Catalog:
    """The hourly resources, one row each: text columns and per-hour cost parameters."""

    text: pa.Table  # CATALOG_COLUMNS
    base: np.ndarray  # (K,) median cost per hour, 10^-10 units
    diurnal: np.ndarray  # (K,) amplitude of the daily curve
    covered: np.ndarray  # (K,) bool: Savings Plan covered (usage rows: billed 0)
    account: np.ndarray  # (K,) index into SUB_ACCOUNTS
    fixed: int  # the first ``fixed`` resources (the cluster's) bill in every hour

    @property
    def hourly_unit(self) -> np.ndarray:
        """(K,) bool: priced per hour (quantity 1 a row)."""
        return np.asarray(self.text["ConsumedUnit"].to_numpy(zero_copy_only=False)) == "Hours"


def _tags(rng: np.random.Generator, count: int, clients: int) -> list[str]:
    """About five tag keys per resource; ``tenant`` on about a fifth (one JSON text each: a
    loop over resources, once, never over rows)."""
    width = max(4, len(str(clients)))
    teams, envs = rng.integers(0, len(TEAMS), count), rng.integers(0, len(ENVS), count)
    tenant = rng.random(count) < 0.2
    client = rng.integers(1, clients + 1, count)
    out = []
    for i in range(count):
        tags = {
            "env": ENVS[envs[i]],
            "team": TEAMS[teams[i]],
            "cost-center": f"CC-{100 + teams[i]}",
            "app": f"app-{i % 20:02d}",
        }
        if tenant[i]:
            tags["tenant"] = f"client-{client[i]:0{width}d}"
        out.append(json.dumps(tags, separators=(",", ":")))
    return out


def _cluster_tags(cluster: str) -> str:
    return json.dumps(
        {
            "aws:eks:cluster-name": cluster,
            "eks:cluster-name": cluster,
            f"kubernetes.io/cluster/{cluster}": "owned",
            "env": "prod",
            "team": "platform",
        },
        separators=(",", ":"),
    )


def build_catalog(bulk: int, nodes: int, cluster: str, clients: int, seed: int) -> Catalog:
    """The cluster's ``nodes`` instances and their volumes and its control plane (fixed, every
    hour), then ``bulk`` other resources (the first ones of them bill in every hour)."""
    rng = np.random.default_rng([seed, 7])
    shares = np.array([s[5] for s in SERVICES])
    service = rng.choice(len(SERVICES), size=bulk, p=shares / shares.sum())
    account = rng.integers(0, len(SUB_ACCOUNTS), bulk)
    median = np.array([SERVICES[s][6] for s in service]) * rng.lognormal(0.0, 0.8, bulk)
    columns: dict[str, list[str]] = {k: [] for k in ("ChargeDescription", "ConsumedUnit",
        "ResourceId", "ResourceType", "ServiceCategory", "ServiceName", "ServiceSubcategory",
        "SkuId", "SubAccountId", "Tags")}  # fmt: skip
    tags = _cluster_tags(cluster)
    ec2 = SERVICES[0]
    for i in range(nodes):
        _append(columns, f"i-{cluster}-{i:04x}", ec2[:3], "Instance", "Hours", 0, tags)
    for i in range(nodes):
        volume = ("Amazon Elastic Block Store", "Storage", "Block Storage")
        _append(columns, f"vol-{cluster}-{i:04x}", volume, "Volume", "GB-Months", 0, tags)
    eks = ("Amazon Elastic Kubernetes Service", "Compute", "Containers")
    control = f"arn:aws:eks:eu-west-3:{SUB_ACCOUNTS[0]}:cluster/{cluster}"
    _append(columns, control, eks, "Cluster", "Hours", 0, tags)
    fixed = len(columns["ResourceId"])
    for i, (s, tag) in enumerate(zip(service, _tags(rng, bulk, clients), strict=True)):
        name, category, sub, kind, unit = SERVICES[s][:5]
        rid = f"{kind.lower().replace(' ', '-')}-{i:06x}"
        _append(columns, rid, (name, category, sub), kind, unit, int(account[i]), tag)
    total = len(columns["ResourceId"])
    text = {k: pa.array(v, pa.string()) for k, v in columns.items()}
    text["PricingUnit"] = text["ConsumedUnit"]
    text["SkuPriceId"] = pa.array([f"{sku}-P" for sku in columns["SkuId"]], pa.string())
    text["ResourceName"] = text["ResourceId"]
    text["RegionId"] = pa.array(["eu-west-3"] * total, pa.string())
    text["RegionName"] = pa.array(["Europe (Paris)"] * total, pa.string())
    text["SubAccountName"] = pa.array(
        [f"{'saas' if a[0] == '1' else 'corporate'}-{a[-2:]}" for a in columns["SubAccountId"]],
        pa.string(),
    )
    base = np.concatenate([[0.192] * nodes, [0.008] * nodes, [0.10], median]) * SCALE
    covered = np.zeros(total, dtype=bool)
    covered[: int(nodes * 0.6)] = True  # 60 % of the cluster's instances
    bulk_ec2 = fixed + np.flatnonzero(service == 0)
    covered[bulk_ec2[rng.random(len(bulk_ec2)) < 0.4]] = True
    return Catalog(
        text=pa.table({k: text[k] for k in CATALOG_COLUMNS}),
        base=np.rint(base).astype("int64"),
        diurnal=np.concatenate([np.zeros(fixed), [SERVICES[s][7] for s in service]]),
        covered=covered,
        account=np.concatenate([np.zeros(fixed, dtype="int64"), account]),
        fixed=fixed,
    )


def _append(cols: dict[str, list[str]], rid: str, service: tuple[str, str, str], kind: str,
            unit: str, account: int, tags: str) -> None:  # fmt: skip
    """One resource's text columns."""
    name, category, sub = service
    values = {
        "ChargeDescription": f"{name} {kind} usage",
        "ConsumedUnit": unit,
        "ResourceId": rid,
        "ResourceType": kind,
        "ServiceCategory": category,
        "ServiceName": name,
        "ServiceSubcategory": sub,
        "SkuId": f"SKU-{kind.upper().replace(' ', '')}-{account:02d}",
        "SubAccountId": SUB_ACCOUNTS[account],
        "Tags": tags,
    }
    for key, value in values.items():
        cols[key].append(value)


def _money(units: np.ndarray) -> pa.Array:
    """int64 10^-10 units as ``decimal128(38, 10)``: the unscaled value *is* the unit count, so
    the 16-byte little-endian words are the int64 and its sign extension (exact, vectorised)."""
    values = np.ascontiguousarray(units, dtype="int64")
    words = np.empty((len(values), 2), dtype="<i8")
    words[:, 0] = values
    words[:, 1] = values >> 63
    return pa.Array.from_buffers(MONEY, len(values), [None, pa.py_buffer(words.tobytes())])


def _const(value: str | None, n: int) -> pa.Array:
    return pa.array([value], pa.string()).take(pa.array(np.zeros(n, dtype="int32")))


def _pick(choices: list[str | None], index: np.ndarray) -> pa.Array:
    return pa.array(choices, pa.string()).take(pa.array(index.astype("int32")))


def _times(ns: np.ndarray) -> pa.Array:
    return pa.array(np.asarray(ns, dtype="int64") // 1000, TIME)


def _month(ns: int) -> tuple[int, int]:
    """The calendar month (billing period) holding the instant ``ns``: (start, end) in ns."""
    at = pd.Timestamp(ns, tz="UTC")
    begin = pd.Timestamp(year=at.year, month=at.month, day=1, tz="UTC")
    return begin.value, (begin + pd.offsets.MonthBegin(1)).value


def _invoice(period_start: int) -> str:
    return f"INV-{pd.Timestamp(period_start, tz='UTC'):%Y%m}-{ACCOUNT[-4:]}"


@dataclass
class Rows:
    """Columns of a block of rows that vary (the rest is constant or taken from the catalog)."""

    text: pa.Table  # CATALOG_COLUMNS
    start_ns: np.ndarray
    end_ns: np.ndarray
    billed: np.ndarray  # 10^-10 units
    effective: np.ndarray
    listed: np.ndarray
    quantity: np.ndarray | None  # None: no quantities (not usage)
    category: pa.Array
    frequency: pa.Array
    commitment: np.ndarray  # int: 0 none, 1 used, 2 unused, 3 purchase
    period: tuple[int, int]


COMMITMENT: dict[str, list[str | None]] = {
    "CommitmentDiscountId": [None, SP_ID, SP_ID, SP_ID],
    "CommitmentDiscountName": [None, "Compute Savings Plan", "Compute Savings Plan",
                               "Compute Savings Plan"],
    "CommitmentDiscountType": [None, "Savings Plan", "Savings Plan", "Savings Plan"],
    "CommitmentDiscountCategory": [None, "Spend", "Spend", "Spend"],
    "CommitmentDiscountStatus": [None, "Used", "Unused", None],
    "PricingCategory": ["Standard", "Committed", "Committed", "Standard"],
}  # fmt: skip


def to_table(rows: Rows) -> pa.Table:
    """A block of rows in the file's schema."""
    n = len(rows.billed)
    quantity = rows.quantity
    arrays: dict[str, pa.Array] = {
        "BilledCost": _money(rows.billed),
        "BillingAccountId": _const(ACCOUNT, n),
        "BillingAccountName": _const("Example SaaS Ltd", n),
        "BillingCurrency": _const("USD", n),
        "BillingPeriodEnd": _times(np.full(n, rows.period[1])),
        "BillingPeriodStart": _times(np.full(n, rows.period[0])),
        "ChargeCategory": rows.category,
        "ChargeClass": _const(None, n),
        "ChargeFrequency": rows.frequency,
        "ChargePeriodEnd": _times(rows.end_ns),
        "ChargePeriodStart": _times(rows.start_ns),
        "ConsumedQuantity": pa.nulls(n, MONEY) if quantity is None else _money(quantity),
        "ContractedCost": _money(rows.listed),
        "EffectiveCost": _money(rows.effective),
        "InvoiceId": _const(_invoice(rows.period[0]), n),
        "InvoiceIssuerName": _const(ISSUER, n),
        "ListCost": _money(rows.listed),
        "PricingQuantity": pa.nulls(n, MONEY) if quantity is None else _money(quantity),
        "ProviderName": _const(PROVIDER, n),
        "PublisherName": _const(PROVIDER, n),
        **{c: _pick(v, rows.commitment) for c, v in COMMITMENT.items()},
        **{c: rows.text[c] for c in CATALOG_COLUMNS},
    }
    if quantity is None:
        arrays["ConsumedUnit"] = _const(None, n)
    return pa.Table.from_arrays([arrays[f.name] for f in SCHEMA], schema=SCHEMA)


def hour_counts(rows: int, hours: int, fixed: int, periods: int) -> tuple[np.ndarray, int]:
    """Bulk resources billing in each hour (the first ``n_h`` of the catalog's bulk), so that
    the file has exactly ``rows`` rows; and the monthly rows' count."""
    monthly = periods * (3 + len(SUB_ACCOUNTS))
    bulk = rows - monthly - hours * (fixed + 2)
    if bulk < 0:
        raise ValueError(
            f"--rows {rows} is below the {rows - bulk:,} fixed rows of {hours} hours "
            f"({fixed + 2} a hour) and {monthly} monthly rows: give more rows or fewer hours"
        )
    counts = np.full(hours, bulk // hours, dtype="int64")
    counts[: bulk % hours] += 1
    return counts, monthly


def usage_block(
    catalog: Catalog, starts: np.ndarray, counts: np.ndarray, fee: int, seed: int, chunk: int
) -> tuple[Rows, np.ndarray]:
    """The usage rows of the hours ``starts`` (one chunk, within a UTC day), the Savings Plan's
    fee and unused rows; and Σ billed per sub-account (for the month's tax)."""
    rng = np.random.default_rng([seed, 8, chunk])
    sizes = catalog.fixed + counts
    idx = np.concatenate([np.arange(k) for k in sizes])
    hour = np.repeat(np.arange(len(starts)), sizes)
    utc_hour = (starts // NS_PER_HOUR) % 24
    curve = np.sin(2 * np.pi * (utc_hour[hour] - 8) / 24.0)
    amplitude = catalog.diurnal[idx]
    noise = np.where(amplitude > 0, rng.lognormal(0.0, 0.1, len(idx)), 1.0)
    listed = np.maximum(1, np.rint(catalog.base[idx] * (1 + amplitude * curve) * noise))
    listed = listed.astype("int64")
    covered = catalog.covered[idx]
    effective = np.where(covered, np.rint(listed * SP_RATE).astype("int64"), listed)
    billed = np.where(covered, 0, listed)
    used = np.zeros(len(starts), dtype="int64")
    np.add.at(used, hour[covered], effective[covered])
    quantity = np.where(catalog.hourly_unit[idx], SCALE, listed * 50)
    n, h = len(idx), len(starts)
    sp_text = _sp_text(2 * h)
    text = pa.concat_tables([catalog.text.take(pa.array(idx)), sp_text])
    fee_rows = np.full(h, fee, dtype="int64")
    fee_row = np.concatenate([np.zeros(n), np.ones(h), np.zeros(h)])  # 1: the fee's rows
    zeros = np.zeros(h, dtype="int64")
    block = Rows(
        text=text,
        start_ns=np.concatenate([starts[hour], starts, starts]),
        end_ns=np.concatenate([starts[hour], starts, starts]) + NS_PER_HOUR,
        billed=np.concatenate([billed, fee_rows, zeros]),
        effective=np.concatenate([effective, zeros, fee - used]),
        listed=np.concatenate([listed, fee_rows, zeros]),
        quantity=np.concatenate([quantity, np.full(2 * h, SCALE)]),
        category=_pick(["Usage", "Purchase"], fee_row),
        frequency=_pick(["Usage-Based", "Recurring"], fee_row),
        commitment=np.concatenate([covered.astype("int64"), np.full(h, 3), np.full(h, 2)]),
        period=_month(int(starts[0])),
    )
    per_account = np.zeros(len(SUB_ACCOUNTS), dtype="int64")
    np.add.at(per_account, catalog.account[idx], billed)
    per_account[0] += fee * h
    return block, per_account


def _sp_text(n: int) -> pa.Table:
    """Text columns of the Savings Plan's own rows (fee, unused)."""
    values = {
        "ChargeDescription": "Compute Savings Plan, 1 year, No Upfront",
        "ConsumedUnit": "Hours",
        "PricingUnit": "Hours",
        "RegionId": None,
        "RegionName": None,
        "ResourceId": SP_ID,
        "ResourceName": "compute-savings-plan",
        "ResourceType": "Savings Plan",
        "ServiceCategory": "Compute",
        "ServiceName": "Savings Plans for AWS Compute usage",
        "ServiceSubcategory": "Other (Compute)",
        "SkuId": "SKU-SAVINGSPLAN",
        "SkuPriceId": "SKU-SAVINGSPLAN-P",
        "SubAccountId": SUB_ACCOUNTS[0],
        "SubAccountName": "saas-01",
        "Tags": "{}",
    }
    return pa.table({c: _const(values[c], n) for c in CATALOG_COLUMNS})


def monthly_block(period: tuple[int, int], billed: np.ndarray) -> Rows:
    """A billing period's credits (the first three sub-accounts, 1 % of their billed cost,
    negative) and tax (every sub-account, 20 % of its billed cost): charge period = month."""
    credit = -(billed[:3] // 100)
    tax = billed // 5
    k = len(SUB_ACCOUNTS)
    accounts = [*SUB_ACCOUNTS[:3], *SUB_ACCOUNTS]
    n = len(accounts)
    text: dict[str, pa.Array] = {c: _const(None, n) for c in CATALOG_COLUMNS}
    text["ChargeDescription"] = _pick(["Promotional credit", "VAT"], np.r_[np.zeros(3), np.ones(k)])
    text["ServiceName"] = _pick(["Amazon Elastic Compute Cloud", "Tax"],
                                np.r_[np.zeros(3), np.ones(k)])  # fmt: skip
    text["ServiceCategory"] = _pick(["Compute", "Other"], np.r_[np.zeros(3), np.ones(k)])
    text["ServiceSubcategory"] = _pick(["Virtual Machines", "Other (Other)"],
                                       np.r_[np.zeros(3), np.ones(k)])  # fmt: skip
    text["SubAccountId"] = pa.array(accounts, pa.string())
    text["SubAccountName"] = pa.array(
        [f"{'saas' if a[0] == '1' else 'corporate'}-{a[-2:]}" for a in accounts], pa.string()
    )
    text["Tags"] = _const("{}", n)
    amounts = np.concatenate([credit, tax]).astype("int64")
    return Rows(
        text=pa.table({c: text[c] for c in CATALOG_COLUMNS}),
        start_ns=np.full(n, period[0]),
        end_ns=np.full(n, period[1]),
        billed=amounts,
        effective=amounts,
        listed=amounts,
        quantity=None,
        category=_pick(["Credit", "Tax"], np.r_[np.zeros(3), np.ones(k)]),
        frequency=_pick(["One-Time", "Recurring"], np.r_[np.zeros(3), np.ones(k)]),
        commitment=np.zeros(n, dtype="int64"),
        period=period,
    )


def savings_plan_fee(catalog: Catalog, most: int) -> int:
    """The hourly commitment: 4 % above the covered usage of the fullest hour, so some of it
    goes unused every hour (covered resources are instances: constant cost)."""
    first = np.arange(len(catalog.base)) < catalog.fixed + most
    used = np.rint(catalog.base[first & catalog.covered] * SP_RATE).astype("int64").sum()
    return int(used) * 104 // 100


def generate(
    rows: int,
    start: pd.Timestamp,
    hours: int,
    out: Path,
    *,
    nodes: int = 12,
    cluster: str = "cluster-one",
    clients: int = 1000,
    seed: int = 42,
) -> dict[str, object]:
    """Write the dataset to ``out`` (one Parquet file); return its metadata."""
    t0 = time.perf_counter()
    starts = start.value + np.arange(hours, dtype="int64") * NS_PER_HOUR
    periods = sorted({_month(int(s)) for s in starts})
    fixed = 2 * nodes + 1
    counts, monthly = hour_counts(rows, hours, fixed, len(periods))
    catalog = build_catalog(int(counts.max()), nodes, cluster, clients, seed)
    fee = savings_plan_fee(catalog, int(counts.max()))
    chunks = (starts - start.normalize().value) // (CHUNK_HOURS * NS_PER_HOUR)
    billed = {p: np.zeros(len(SUB_ACCOUNTS), dtype="int64") for p in periods}
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    written = 0
    with pq.ParquetWriter(tmp, SCHEMA, compression="zstd") as writer:
        for chunk in np.unique(chunks):
            chosen = chunks == chunk
            block, per_account = usage_block(catalog, starts[chosen], counts[chosen], fee, seed,
                                             int(chunk))  # fmt: skip
            billed[block.period] += per_account
            table = to_table(block)
            writer.write_table(table, row_group_size=table.num_rows)
            written += table.num_rows
        for period in periods:
            table = to_table(monthly_block(period, billed[period]))
            writer.write_table(table, row_group_size=table.num_rows)
            written += table.num_rows
    tmp.replace(out)
    if written != rows:
        raise AssertionError(f"wrote {written} rows, expected {rows}")
    return {
        "rows": written,
        "start": str(start),
        "hours": hours,
        "nodes": nodes,
        "cluster": cluster,
        "clients": clients,
        "seed": seed,
        "monthly_rows": monthly,
        "bytes": out.stat().st_size,
        "seconds": round(time.perf_counter() - t0, 2),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--start", default="2026-11-01T00:00:00Z", help="first hour")
    parser.add_argument("--hours", type=int, default=744)
    parser.add_argument("--out", type=Path, required=True, help="the Parquet file to write")
    parser.add_argument("--nodes", type=int, default=12, help="the cluster's instances")
    parser.add_argument("--cluster", default="cluster-one")
    parser.add_argument("--clients", type=int, default=1000, help="tenant tag values")
    parser.add_argument("--seed", type=int, default=42)
    args = parser.parse_args(argv)
    start = pd.Timestamp(args.start)
    start = start.tz_localize("UTC") if start.tzinfo is None else start.tz_convert("UTC")
    if start != start.floor("h") or args.hours < 1 or args.nodes < 0:
        parser.error("--start must be on a whole hour, --hours >= 1, --nodes >= 0")
    try:
        meta = generate(args.rows, start, args.hours, args.out, nodes=args.nodes,
                        cluster=args.cluster, clients=args.clients, seed=args.seed)  # fmt: skip
    except ValueError as exc:
        parser.error(str(exc))
    print(json.dumps(meta))
    return 0


if __name__ == "__main__":
    sys.exit(main())
