"""The billing reader: FOCUS 1.0–1.3 and CUR 2.0 files as one canonical view (see
docs/billing-data.md).

Files are built in the real column sets of each version (tests/billing_files.py) as CSV, gzip
CSV and Parquet, in folders and hive-partitioned datasets; every bad input is one line naming
the file, the row and the column; decimals stay exact; 2 M rows are read in bounded memory.
"""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from decimal import Decimal
from pathlib import Path

import duckdb
import pytest

from tenantcost.errors import InputError
from tenantcost.readers.billing import NO_INVOICE_ID, VIEW_COLUMNS, open_billing
from tenantcost.readers.focus_columns import FOCUS_COLUMNS

from . import focus_validator
from .billing_files import cur2_rows, focus_rows, write_cur2, write_focus

VERSIONS = ["1.0", "1.1", "1.2", "1.3"]
FORMATS = ["csv", "csv.gz", "parquet"]


def read(paths, currency="USD", **kwargs):
    con = duckdb.connect()
    data = open_billing([str(p) for p in paths], con, currency=currency, **kwargs)
    return con, data


def fetch(con, sql):
    return con.execute(sql).fetchall()


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("version", VERSIONS)
def test_every_version_and_format_reads_to_the_canonical_view(tmp_path, version, fmt):
    rows = focus_rows({"BilledCost": "0.1234567891", "EffectiveCost": "0.1000000001"},
                      {"BilledCost": "-0.0000000001", "ChargeCategory": "Credit"})  # fmt: skip
    path = write_focus(tmp_path / f"focus.{fmt}", rows, version=version, fmt=fmt)
    con, data = read([path])
    assert data.rows == 2 and data.files == [str(path)] and data.split_view is None
    described = {r[0]: r[1] for r in fetch(con, f"DESCRIBE SELECT * FROM {data.view}")}
    assert list(described) == list(dict.fromkeys(VIEW_COLUMNS))
    assert described["BilledCost"] == "DECIMAL(38,18)"
    assert described["ChargePeriodStart"] == "TIMESTAMP WITH TIME ZONE"
    got = fetch(con, f"SELECT x_file, x_row, BilledCost, EffectiveCost, InvoiceId, ProviderName,"
                     f" ChargeCategory, Tags, CommitmentDiscountType FROM {data.view}"
                     " ORDER BY x_row")  # fmt: skip
    invoice = "INV-2026-11-1" if version in ("1.2", "1.3") else NO_INVOICE_ID
    first = 1 if fmt == "parquet" else 2  # a CSV file's header is line 1, as in every reader
    assert got == [
        (str(path), first, Decimal("0.1234567891"), Decimal("0.1000000001"), invoice, "AWS",
         "Usage", '{"eks:cluster-name": "prod-paris"}', ""),
        (str(path), first + 1, Decimal("-0.0000000001"), Decimal("-0.0000000001"), invoice,
         "AWS",
         "Credit", '{"eks:cluster-name": "prod-paris"}', ""),
    ]  # fmt: skip
    (start,) = fetch(con, f"SELECT min(ChargePeriodStart) FROM {data.view}")[0]
    assert start.isoformat() == "2026-11-03T00:00:00+00:00"


def test_column_sets_follow_the_specification():
    assert "InvoiceId" not in FOCUS_COLUMNS["1.1"] and "InvoiceId" in FOCUS_COLUMNS["1.2"]
    assert "CapacityReservationId" not in FOCUS_COLUMNS["1.0"]
    assert {"AllocatedMethodId", "ServiceProviderName", "HostProviderName"} <= set(
        FOCUS_COLUMNS["1.3"]
    ) - set(FOCUS_COLUMNS["1.2"])
    assert len(FOCUS_COLUMNS["1.0"]) == 43 and len(FOCUS_COLUMNS["1.2"]) == 57


def test_provider_name_from_service_provider_name_and_older_names(tmp_path):
    """1.3 data without the deprecated ProviderName; pre-1.0 AmortizedCost / Region names."""
    full = write_focus(tmp_path / "full.parquet", focus_rows({"ServiceProviderName": "Microsoft"}),
                       version="1.3", fmt="parquet")  # fmt: skip
    path = tmp_path / "no-provider.parquet"
    duckdb.sql(f"COPY (SELECT * EXCLUDE (ProviderName, PublisherName) FROM '{full}') TO '{path}'")
    con, data = read([path])
    assert fetch(con, f"SELECT ProviderName, PublisherName FROM {data.view}") == [
        ("Microsoft", "Microsoft")
    ]
    old = tmp_path / "old.csv"
    old.write_text(
        "BilledCost,AmortizedCost,BillingAccountId,BillingCurrency,BillingPeriodStart,"
        "BillingPeriodEnd,ChargeType,ChargePeriodStart,ChargePeriodEnd,ServiceName,Region\n"
        "1.5,1.25,A,USD,2026-11-01,2026-12-01,Usage,2026-11-02T00:00:00Z,2026-11-03T00:00:00Z,"
        "Storage,eu-west-3\n"
    )
    con, data = read([old])
    assert fetch(con, f"SELECT EffectiveCost, ChargeCategory, RegionId, Tags FROM {data.view}") == [
        (Decimal("1.25"), "Usage", "eu-west-3", "{}")
    ]


def test_folders_hive_datasets_and_several_paths(tmp_path):
    hive = tmp_path / "export" / "data"
    write_focus(hive / "BILLING_PERIOD=2026-11" / "part-00001.parquet",
                focus_rows({"BilledCost": "1.1"}), fmt="parquet")  # fmt: skip
    write_focus(hive / "BILLING_PERIOD=2026-11" / "part-00002.parquet",
                focus_rows({"BilledCost": "2.2"}, {"BilledCost": "3.3"}), fmt="parquet")
    write_focus(hive / "BILLING_PERIOD=2026-11" / "extra" / "late.csv.gz",
                focus_rows({"BilledCost": "4.4"}), fmt="csv.gz")
    (hive / "manifest.json").write_text("{}")  # metadata next to the data is not billing data
    (hive / ".hidden.csv").write_text("garbage")
    other = write_focus(tmp_path / "other.csv", focus_rows({"BilledCost": "5.5"}))
    con, data = read([tmp_path / "export", other, other])
    assert data.rows == 5 and len(data.files) == 4
    assert fetch(con, f"SELECT sum(BilledCost) FROM {data.view}") == [(Decimal("16.5"),)]
    rows = fetch(con, f"SELECT x_file, x_row FROM {data.view} ORDER BY x_file, x_row")
    assert [(Path(f).name, r) for f, r in rows] == [
        ("late.csv.gz", 2), ("part-00001.parquet", 1), ("part-00002.parquet", 1),
        ("part-00002.parquet", 2), ("other.csv", 2)]  # fmt: skip


def test_exact_decimals_ten_places_summed_exactly(tmp_path):
    """A million rows of 0.0000000001 would be wrong as doubles; here 3 rows show the path."""
    amounts = ["0.1000000001", "0.2000000002", "0.3000000003"]
    focus = focus_rows(*({"BilledCost": a} for a in amounts))
    cur2 = cur2_rows(*({"line_item_unblended_cost": a} for a in amounts))
    paths = [
        write_focus(tmp_path / "a.csv", focus),
        write_focus(tmp_path / "b.parquet", focus, fmt="parquet"),
        write_cur2(tmp_path / "c.parquet", cur2),
    ]
    for path in paths:
        con, data = read([path])
        assert fetch(con, f"SELECT sum(BilledCost), sum(EffectiveCost) FROM {data.view}") == [
            (Decimal("0.6000000006"), Decimal("0.6000000006"))
        ], path.name


# --------------------------------------------------------------------------- FOCUS 1.3


def _split_rows() -> list[dict[str, str]]:
    origin = {"BilledCost": "1.00", "ResourceId": "i-node"}
    allocated = {"ResourceId": "i-node", "AllocatedMethodId": "cpu-memory",
                 "AllocatedMethodDetails": '{"Elements": [{"AllocatedRatio": 0.6}]}'}
    return focus_rows(
        origin,
        {**allocated, "BilledCost": "0.60", "AllocatedResourceId": "pod-a"},
        {**allocated, "BilledCost": "0.40", "AllocatedResourceId": ""},  # unallocated part
        {**allocated, "BilledCost": "0.25", "ResourceId": "i-other"},  # its origin is absent
        {"BilledCost": "2.00", "ResourceId": "db-1"},  # never split
    )  # fmt: skip


@pytest.mark.parametrize(("mode", "total", "rows"), [("origin", "3.25", 3),
                                                     ("allocated", "3.25", 4)])  # fmt: skip
def test_focus_13_counts_an_origin_charge_or_its_allocated_charges_never_both(
    tmp_path, mode, total, rows
):
    path = write_focus(tmp_path / "split.parquet", _split_rows(), version="1.3", fmt="parquet")
    con, data = read([path], focus_allocations=mode)
    assert data.rows == rows
    assert fetch(con, f"SELECT sum(BilledCost) FROM {data.view}") == [(Decimal(total),)]
    kept = {r[0] for r in fetch(con, f"SELECT x_row FROM {data.view}")}
    assert kept == ({1, 4, 5} if mode == "origin" else {2, 3, 4, 5})


# --------------------------------------------------------------------------- CUR 2.0

SP = "arn:aws:savingsplans::111111111111:savingsplan/sp-1"
RI = "arn:aws:ec2:eu-west-3:111111111111:reserved-instances/ri-1"


def cur_month() -> list[dict[str, object]]:
    """One hour of a node under a Savings Plan, a reserved database, tax, a credit, split rows."""
    split = {"line_item_unblended_cost": "0", "split_line_item_parent_resource_id": "i-node"}
    return cur2_rows(
        {"line_item_line_item_type": "SavingsPlanCoveredUsage", "line_item_resource_id": "i-node",
         "savings_plan_savings_plan_a_r_n": SP,
         "savings_plan_savings_plan_effective_cost": "0.0612345678"},
        {"line_item_line_item_type": "SavingsPlanNegation", "line_item_resource_id": "i-node",
         "savings_plan_savings_plan_a_r_n": SP, "line_item_unblended_cost": "-0.096"},
        {"line_item_line_item_type": "SavingsPlanRecurringFee", "line_item_resource_id": SP,
         "savings_plan_savings_plan_a_r_n": SP, "line_item_unblended_cost": "0.07",
         "savings_plan_total_commitment_to_date": "0.07",
         "savings_plan_used_commitment": "0.0612345678"},
        {"line_item_line_item_type": "DiscountedUsage", "line_item_resource_id": "db-1",
         "reservation_reservation_a_r_n": RI, "line_item_unblended_cost": "0.2",
         "reservation_effective_cost": "0.1234", "product": {"product_name":
         "Amazon Relational Database Service"}},
        {"line_item_line_item_type": "RIFee", "line_item_resource_id": RI,
         "reservation_reservation_a_r_n": RI, "line_item_unblended_cost": "50",
         "reservation_unused_amortized_upfront_fee_for_billing_period": "0.5",
         "reservation_unused_recurring_fee": "1.25",
         "line_item_usage_start_date": "2026-11-01T00:00:00Z",
         "line_item_usage_end_date": "2026-12-01T00:00:00Z"},
        {"line_item_line_item_type": "Fee", "reservation_reservation_a_r_n": RI,
         "line_item_unblended_cost": "300"},
        {"line_item_line_item_type": "Tax", "line_item_unblended_cost": "12.5"},
        {"line_item_line_item_type": "Credit", "line_item_unblended_cost": "-3"},
        {**split, "line_item_resource_id": "arn:pod/api-1", "split_line_item_split_cost": "0.04",
         "split_line_item_unused_cost": "0.02", "split_line_item_net_split_cost": "0.035",
         "resource_tags": {"aws:eks:cluster-name": "prod-paris", "aws:eks:namespace": "api",
                           "aws:eks:workload-name": "api", "aws:eks:workload-type": "Deployment",
                           "aws:eks:node": "ip-10-0-0-1"}},
    )  # fmt: skip


def test_cur2_billed_and_effective_cost_as_aws_maps_them(tmp_path):
    path = write_cur2(tmp_path / "cur.parquet", cur_month())
    con, data = read([path])
    assert data.rows == 8 and data.split_view is not None
    got = fetch(con, f"SELECT x_row, ChargeCategory, CommitmentDiscountType, BilledCost,"
                     f" EffectiveCost, ServiceName, InvoiceId FROM {data.view} ORDER BY x_row")
    d = Decimal
    ec2, rds = "Amazon Elastic Compute Cloud", "Amazon Relational Database Service"
    assert [row[:5] for row in got] == [
        (1, "Usage", "Savings Plan", d("0.096"), d("0.0612345678")),
        (2, "Usage", "Savings Plan", d("-0.096"), d("0")),
        (3, "Purchase", "Savings Plan", d("0.07"), d("0.0087654322")),
        (4, "Usage", "Reserved Instance", d("0.2"), d("0.1234")),
        (5, "Purchase", "Reserved Instance", d("50"), d("1.75")),
        (6, "Purchase", "Reserved Instance", d("300"), d("0")),
        (7, "Tax", "", d("12.5"), d("12.5")),
        (8, "Credit", "", d("-3"), d("-3")),
    ]  # fmt: skip
    assert got[0][5] == ec2 and got[3][5] == rds and {r[6] for r in got} == {"EUINFR26-0001"}
    # the Savings Plan's hour: billed = effective = the commitment
    assert sum(r[3] for r in got[:3]) == sum(r[4] for r in got[:3]) == d("0.07")
    split = fetch(con, f"SELECT x_row, ParentResourceId, Cluster, Namespace, WorkloadName,"
                       f" WorkloadType, Node, Pod, SplitCost, UnusedCost FROM {data.split_view}")
    assert split == [(9, "i-node", "prod-paris", "api", "api", "Deployment", "ip-10-0-0-1",
                      "arn:pod/api-1", d("0.035"), d("0.02"))]  # fmt: skip


# --------------------------------------------------------------------------- bad input


def one_line(tmp_path, rows, *, fmt="csv", version="1.2", currency="USD", name=None) -> str:
    path = write_focus(tmp_path / (name or f"bad.{fmt}"), rows, version=version, fmt=fmt)
    with pytest.raises(InputError) as caught:
        read([path], currency=currency)
    text = caught.value.one_line()
    assert "\n" not in text and str(path) in text
    return text


@pytest.mark.parametrize(("override", "column", "expected"), [
    ({"BilledCost": "12,5"}, "BilledCost", "not an exact decimal number"),
    ({"EffectiveCost": "abc"}, "EffectiveCost", "'abc'"),
    ({"BilledCost": "0.1234567890123456789"}, "BilledCost", "at most 18 decimal places"),
    ({"BilledCost": "1_000"}, "BilledCost", "not an exact decimal"),
    ({"BilledCost": ""}, "BilledCost", "empty value"),
    ({"ChargePeriodStart": "yesterday"}, "ChargePeriodStart", "not a timestamp: 'yesterday'"),
    ({"ChargePeriodStart": "2026-10-31T23:00:00Z", "ChargePeriodEnd": "2026-11-01T00:00:00Z"},
     "ChargePeriodStart", "outside the billing period"),
    ({"ChargePeriodEnd": "2026-11-02T00:00:00Z"}, "ChargePeriodEnd", "ends before it starts"),
    ({"Tags": "[1, 2]"}, "Tags", "not a JSON object"),
    ({"BillingCurrency": "EUR"}, "BillingCurrency", "differs from 'USD'"),
])  # fmt: skip
def test_bad_cells_are_one_line_naming_file_row_and_column(tmp_path, override, column, expected):
    rows = focus_rows({}, {}, override)
    text = one_line(tmp_path, rows)
    assert "row 4" in text and f"column '{column}'" in text and expected in text, text


@pytest.mark.parametrize("fmt", ["parquet", "csv.gz"])
def test_bad_cell_found_in_every_format(tmp_path, fmt):
    text = one_line(tmp_path, focus_rows({}, {"BillingPeriodStart": "not-a-date"}), fmt=fmt)
    row = "row 2" if fmt == "parquet" else "row 3"
    assert row in text and "column 'BillingPeriodStart'" in text


def test_correction_rows_may_lie_outside_the_billing_period(tmp_path):
    late = {"ChargeClass": "Correction", "ChargePeriodStart": "2026-10-31T00:00:00Z",
            "ChargePeriodEnd": "2026-11-01T00:00:00Z", "BilledCost": "-1.5"}  # fmt: skip
    con, data = read([write_focus(tmp_path / "c.csv", focus_rows({}, late))])
    assert fetch(con, f"SELECT sum(BilledCost) FROM {data.view}") == [(Decimal("-1.404"),)]


def test_one_currency_and_it_is_the_rule_files(tmp_path):
    text = one_line(tmp_path, focus_rows({}, {}), currency="EUR")
    assert "row 2" in text and "'USD' is not the rule file's currency 'EUR'" in text
    first = write_focus(tmp_path / "a.csv", focus_rows({}))
    second = write_focus(tmp_path / "b.parquet", focus_rows({"BillingCurrency": "EUR"}),
                         fmt="parquet")  # fmt: skip
    with pytest.raises(InputError) as caught:
        read([first, second])
    assert caught.value.file == str(second) and caught.value.where == "row 1"
    assert caught.value.column == "BillingCurrency" and str(first) in caught.value.one_line()


def test_missing_columns_and_unreadable_inputs(tmp_path):
    rows = [{k: v for k, v in r.items() if k != "EffectiveCost"} for r in focus_rows({})]
    path = tmp_path / "nocost.csv"
    columns = [c for c in FOCUS_COLUMNS["1.2"] if c not in ("EffectiveCost", "Tags")]
    path.write_text(",".join(columns) + "\n" + ",".join(rows[0].get(c, "") for c in columns))
    with pytest.raises(InputError) as caught:
        read([path])
    assert caught.value.one_line() == (
        f"{path}, header, column 'EffectiveCost': required column missing from the header"
    )
    cur = write_cur2(tmp_path / "cur.parquet", cur2_rows({}))
    duckdb.sql(f"COPY (SELECT * EXCLUDE (line_item_currency_code) FROM '{cur}')"
               f" TO '{tmp_path / 'cur2.parquet'}'")  # fmt: skip
    with pytest.raises(InputError, match="column 'line_item_currency_code'"):
        read([tmp_path / "cur2.parquet"])
    (tmp_path / "empty").mkdir()
    (tmp_path / "notes.txt").write_text("x")
    (tmp_path / "other.csv").write_text("a,b\n1,2\n")
    for bad, expected in [("empty", "folder has no billing files"),
                          ("notes.txt", "unsupported billing file type"),
                          ("missing.csv", "file or folder not found"),
                          ("other.csv", "not FOCUS (no BilledCost column) nor AWS CUR 2.0")]:
        with pytest.raises(InputError, match=re.escape(expected)):
            read([tmp_path / bad])


def test_cur2_bad_cells_name_the_cur_column(tmp_path):
    path = write_cur2(tmp_path / "cur.parquet", cur2_rows(
        {}, {"line_item_line_item_type": "SavingsPlanCoveredUsage",
             "savings_plan_savings_plan_effective_cost": None}))  # fmt: skip
    with pytest.raises(InputError) as caught:
        read([path])
    assert caught.value.where == "row 2" and caught.value.column == "EffectiveCost"
    assert "'SavingsPlanCoveredUsage'" in caught.value.one_line()
    late = write_cur2(tmp_path / "late.parquet", cur2_rows(
        {"line_item_usage_start_date": "2026-12-01T00:00:00Z",
         "line_item_usage_end_date": "2026-12-01T01:00:00Z"}))  # fmt: skip
    with pytest.raises(InputError, match=r"row 1, column 'ChargePeriodStart'.*outside"):
        read([late])


# --------------------------------------------------------------------------- validator


@pytest.fixture(scope="session")
def validator_venv():
    return focus_validator.ensure_venv()


def test_the_focus_validator_passes_a_built_12_file(tmp_path, validator_venv):
    """Parquet: the validator infers CSV column types from values, and reads a numeric
    BillingAccountId (AWS account ids are numeric) as an integer there."""
    rows = focus_rows({}, {"BilledCost": "1.5", "ServiceName": "Amazon Relational Database Service",
                           "ServiceCategory": "Databases", "ServiceSubcategory":
                           "Relational Databases", "ResourceId": "db-1", "ResourceType":
                           "DB Instance", "SkuId": "SKU-RDS", "SkuPriceId": "SKU-RDS-OD"})
    path = write_focus(tmp_path / "focus-1.2.parquet", rows, version="1.2", fmt="parquet")
    report = focus_validator.validate(validator_venv, path)
    assert report.failed_mandatory == [], report.output
    assert report.passed > 100, report.summary_line
    _, data = read([path])
    assert data.rows == 2


# --------------------------------------------------------------------------- memory

MEMORY_PROBE = textwrap.dedent("""
    import resource, sys, duckdb
    from tenantcost.readers.billing import open_billing
    con = duckdb.connect()
    con.execute("SET threads = 2")
    con.execute("SET enable_progress_bar = false")
    con.execute("SELECT 1").fetchall()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    data = open_billing([sys.argv[1]], con, currency="USD")
    total = con.execute(f"SELECT sum(BilledCost), count(DISTINCT ServiceName) FROM {data.view}"
                        f" GROUP BY date_trunc('hour', ChargePeriodStart) ORDER BY 1 LIMIT 1"
                        ).fetchall()
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(data.rows, after - before)
""")


def test_two_million_rows_are_read_in_bounded_memory(tmp_path):
    """The view streams: reading, validating and grouping 2 M rows (45 columns, about 1 GB as
    one pandas frame of strings) grows the process by a bounded amount, far below the data."""
    path = tmp_path / "big.parquet"
    template = focus_rows({})[0]
    columns = ", ".join(
        "(i % 997) * 0.0000000001 + 0.01 AS BilledCost" if c == "BilledCost"
        else "(i % 997) * 0.0000000001 AS EffectiveCost" if c == "EffectiveCost"
        else f"TIMESTAMPTZ '2026-11-01 00:00:00+00' + to_hours(i % 720) AS {c}"
        if c == "ChargePeriodStart"
        else f"TIMESTAMPTZ '2026-11-01 01:00:00+00' + to_hours(i % 720) AS {c}"
        if c == "ChargePeriodEnd"
        else f"TIMESTAMPTZ '{template[c]}' AS {c}" if c.startswith("BillingPeriod")
        else f"'svc-' || (i % 50) AS {c}" if c == "ServiceName"
        else f"'i-' || (i % 1000) AS {c}" if c == "ResourceId"
        else f"'{template.get(c, '')}' AS {c}"
        for c in FOCUS_COLUMNS["1.2"]
    )  # fmt: skip
    duckdb.sql(f"COPY (SELECT {columns} FROM range(2000000) t(i)) TO '{path}'")
    done = subprocess.run([sys.executable, "-c", MEMORY_PROBE, str(path)], capture_output=True,
                          text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    rows, growth_kb = (int(v) for v in done.stdout.split()[-2:])
    assert rows == 2_000_000
    assert growth_kb < 400 * 1024, f"peak RSS grew by {growth_kb / 1024:.0f} MB"
