"""Smoke test of the billing benchmark's generator (benchmarks/billing_data.py): a small file.

The benchmark itself (10 M rows, ``benchmarks/run.py --sections billing``) runs on demand; this
checks, on 10,000 rows over two days, that the generator writes a correct FOCUS 1.2 file
quickly: the columns and types, one row group per day plus the monthly lines, the charge
categories, the Savings Plan identity FOCUS requires, the tags and the tax.
"""

from __future__ import annotations

import importlib.util
import sys
import time
from decimal import Decimal
from pathlib import Path
from types import ModuleType
from typing import Any

import duckdb
import pandas as pd
import pyarrow.parquet as pq
import pytest

from tenantcost.writers.focus import FOCUS_12_COLUMNS

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("billing_data", BENCHMARKS / "billing_data.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["billing_data"] = module  # dataclasses resolve their module by name
    spec.loader.exec_module(module)
    return module


@pytest.mark.timing
def test_generator_writes_a_correct_small_focus_file_in_seconds(tmp_path: Path) -> None:
    billing_data = _generator()
    out = tmp_path / "billing.parquet"
    begin = time.perf_counter()
    meta = billing_data.generate(10_000, pd.Timestamp("2026-11-01T00:00:00Z"), 48, out, seed=7)
    assert time.perf_counter() - begin < 5
    assert meta["rows"] == 10_000

    file = pq.ParquetFile(out)
    assert file.metadata.num_rows == 10_000
    assert file.metadata.num_row_groups == 9  # 6 hours each, then the month's credits and tax
    names = set(file.schema_arrow.names)
    assert set(FOCUS_12_COLUMNS) <= names
    assert {"SubAccountId", "CommitmentDiscountType", "CommitmentDiscountStatus"} <= names
    assert str(file.schema_arrow.field("BilledCost").type) == "decimal128(38, 10)"

    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    con.execute(f"CREATE VIEW b AS SELECT * FROM read_parquet('{out}')")

    def one(sql: str) -> Any:
        return con.execute(sql).fetchall()[0][0]

    categories = {c for (c,) in con.execute("SELECT DISTINCT ChargeCategory FROM b").fetchall()}
    assert categories == {"Usage", "Purchase", "Tax", "Credit"}
    assert one("SELECT COUNT(*) FROM b WHERE NOT json_valid(Tags)") == 0
    assert one("SELECT COUNT(*) FROM b WHERE ChargePeriodStart < BillingPeriodStart "
               "OR ChargePeriodEnd > BillingPeriodEnd") == 0  # fmt: skip
    assert one("SELECT COUNT(DISTINCT InvoiceId) FROM b") == 1  # one billing period
    # the cluster: 12 instances, their volumes and the control plane in each of the 48 hours
    cluster = "Tags->>'$.\"aws:eks:cluster-name\"' = 'cluster-one'"
    assert one(f"SELECT COUNT(*) FROM b WHERE {cluster}") == 48 * 25
    assert one(f"SELECT COUNT(*) FROM b WHERE {cluster} AND ResourceType = 'Instance'") == 48 * 12
    assert 0 < one("SELECT COUNT(*) FROM b WHERE Tags->>'$.tenant' LIKE 'client-%'") < 5_000
    # Savings Plan: covered usage billed 0 at an effective cost; for the commitment,
    # Σ usage EffectiveCost (used + unused) = Σ purchase BilledCost (FOCUS)
    assert one("SELECT COUNT(*) FROM b WHERE CommitmentDiscountStatus = 'Used' "
               "AND (BilledCost <> 0 OR EffectiveCost <= 0)") == 0  # fmt: skip
    used = one("SELECT SUM(EffectiveCost) FROM b WHERE CommitmentDiscountId IS NOT NULL "
               "AND ChargeCategory = 'Usage'")  # fmt: skip
    bought = one("SELECT SUM(BilledCost) FROM b WHERE ChargeCategory = 'Purchase'")
    assert isinstance(used, Decimal) and used == bought and used > 0
    # tax: per sub-account, a fifth of what it was billed (exact, floor to 10 places)
    taxes = con.execute(
        "SELECT SubAccountId, SUM(BilledCost) FILTER (WHERE ChargeCategory = 'Tax'), "
        "SUM(BilledCost) FILTER (WHERE ChargeCategory IN ('Usage', 'Purchase')) "
        "FROM b GROUP BY 1"
    ).fetchall()
    assert len(taxes) == 12
    for _, tax, billed in taxes:
        assert tax == (billed * 10**10 // 5) / Decimal(10**10)
    assert one("SELECT COUNT(*) FROM b WHERE ChargeCategory = 'Credit' AND BilledCost >= 0") == 0
