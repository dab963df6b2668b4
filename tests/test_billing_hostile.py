"""`ingest billing` refuses hostile billing files in one line (file, row, column; exit 2),
`--dry-run` too, on SQLite and PostgreSQL (issue 34, section 2): amounts whose micro-units
overflow int64, a billing period whose total passes 10^18 micro-units (with the lines already
stored for other accounts), times in year 0000 or 9999, control characters in stored text
(NUL: stored by SQLite, a psycopg DataError on PostgreSQL before), exact duplicate lines
(refused, naming both places; kept with --keep-duplicates), and malformed CSV lines that
DuckDB named without a row or a column.

One store per backend and test: each case is a file and the line it must give.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from .billing_files import cur2_rows, focus_rows, write_cur2, write_focus
from .service_server import invoke
from .test_store_billing import RULES

Case = tuple[str, Callable[[Path], Path], str, str, str]
"""(name, writer of the file, row, column, words of the message)."""

_BASE = focus_rows({}, {"BilledCost": "2"}, {"BilledCost": "3"})


def _lines(path: Path) -> list[bytes]:
    """The base FOCUS file's lines (LF endings), to spoil one of them."""
    write_focus(path, _BASE)
    return path.read_bytes().replace(b"\r\n", b"\n").rstrip(b"\n").split(b"\n")


def _spoiled(spoil: Callable[[bytes], bytes]) -> Callable[[Path], Path]:
    def write(path: Path) -> Path:
        lines = _lines(path)
        lines[2] = spoil(lines[2])  # the second data line: row 3
        path.write_bytes(b"\n".join(lines) + b"\n")
        return path

    return write


def _focus(*rows: dict[str, str], fmt: str = "csv") -> Callable[[Path], Path]:
    return lambda path: write_focus(path, focus_rows(*rows), fmt=fmt)


def _cur(*rows: dict[str, object]) -> Callable[[Path], Path]:
    return lambda path: write_cur2(path, cur2_rows(*rows))


YEAR_9999 = {"BillingPeriodStart": "9999-11-01T00:00:00Z", "BillingPeriodEnd":
             "9999-12-01T00:00:00Z", "ChargePeriodStart": "9999-11-03T00:00:00Z",
             "ChargePeriodEnd": "9999-11-03T01:00:00Z"}  # fmt: skip
CUR_9999 = {"bill_billing_period_start_date": "9999-11-01T00:00:00Z",
            "bill_billing_period_end_date": "9999-12-01T00:00:00Z",
            "line_item_usage_start_date": "9999-11-03T00:00:00Z",
            "line_item_usage_end_date": "9999-11-03T01:00:00Z"}  # fmt: skip
TOO_LARGE = "too large: a line's amount in micro-units must fit a 64-bit integer"
OUTSIDE = "is outside the instants tenantcost accepts"

CASES: list[Case] = [
    ("1e13.csv", _focus({"BilledCost": "1e13"}), "row 2", "BilledCost", f"'1e13' is {TOO_LARGE}"),
    ("20-digits.csv", _focus({}, {"EffectiveCost": "12345678901234567890"}), "row 3",
     "EffectiveCost", TOO_LARGE),
    ("int64-max.parquet", _focus({"BilledCost": "9223372036854775807"}, fmt="parquet"),
     "row 1", "BilledCost", TOO_LARGE),
    ("cur-1e13.parquet", _cur({}, {"line_item_unblended_cost": "1e13"}), "row 2",
     "line_item_unblended_cost", TOO_LARGE),
    ("cur-int64-max.parquet", _cur({"line_item_unblended_cost": str(2**63 - 1)}), "row 1",
     "line_item_unblended_cost", TOO_LARGE),
    ("year-9999.csv", _focus(YEAR_9999), "row 2", "BillingPeriodStart",
     f"'9999-11-01T00:00:00Z' {OUTSIDE}"),
    ("year-0000.csv", _focus({"ChargeClass": "Correction", "ChargePeriodStart":
                              "0000-11-03T00:00:00Z", "ChargePeriodEnd": "0000-11-03T01:00:00Z"}),
     "row 2", "ChargePeriodStart", f"'0000-11-03T00:00:00Z' {OUTSIDE}"),
    ("year-9999.parquet", _focus({}, YEAR_9999, fmt="parquet"), "row 2", "BillingPeriodStart",
     OUTSIDE),
    ("cur-9999.parquet", _cur(CUR_9999), "row 1", "bill_billing_period_start_date", OUTSIDE),
    ("nul.csv", _focus({}, {"BillingAccountId": "11\x0011"}), "row 3", "BillingAccountId",
     "the text holds a control character U+0000 at character 3"),
    ("crlf-service.parquet", _focus({"ServiceName": "EC2\r\nX-Evil: 1"}, fmt="parquet"),
     "row 1", "ServiceName", "control character U+000D at character 4"),
    ("cur-nul.parquet", _cur({"bill_payer_account_id": "1\x00"}), "row 1",
     "bill_payer_account_id", "control character U+0000"),
    ("short.csv", _spoiled(lambda line: line.rsplit(b",", 3)[0]), "row 3", "SubAccountName",
     "the row has 54 fields, the header has 57"),
    ("long.csv", _spoiled(lambda line: line + b",extra"), "row 3", "",
     "the row has 58 fields, the header has 57"),
    ("latin1.csv", _spoiled(lambda line: line.replace(b"prod", b"pr\xe9d", 1)), "row 3",
     "SubAccountName", "not UTF-8 text"),
    ("10mb-cell.csv", _spoiled(lambda line: line.replace(b"node-a", b"n" * 10_000_000)),
     "row 3", "ResourceName", "at most 2,000,000 are allowed in a billing line"),
    ("open-quote.csv", _spoiled(lambda line: line.replace(b"node-a", b'"node-a')), "row 3",
     "ResourceName", "a quoted value is not closed"),
]


@pytest.fixture
def store(store_url: str, tmp_path: Path) -> tuple[str, ...]:
    """An upgraded store with the billing test rules (currency USD)."""
    where = ("--db", store_url, "--data", str(tmp_path / "data"))
    (tmp_path / "rules.yaml").write_text(RULES)
    for args in (("db", "upgrade"), ("rules", "load", str(tmp_path / "rules.yaml"))):
        done = invoke(*args, *where)
        assert done.exit_code == 0, done.stderr
    return where


def _refused(result: object, *parts: str) -> str:
    line = str(getattr(result, "stderr", "")).strip()
    assert getattr(result, "exit_code", None) == 2, line
    assert "\n" not in line and "Traceback" not in line, line
    for part in parts:
        assert part in line, (part, line)
    return line


def test_hostile_billing_files_are_refused_in_one_line(store: tuple[str, ...],
                                                       tmp_path: Path) -> None:  # fmt: skip
    for i, (name, write, row, column, words) in enumerate(CASES):
        path = write(tmp_path / name)
        dry = ("--dry-run",) if i % 2 else ()  # half dry runs: both paths refuse alike
        done = invoke("ingest", "billing", "--billing", str(path), *dry, *store)
        _refused(done, f"{path}, {row}", f"column '{column}'" if column else "", words)
    # nothing was written: the store takes a good file, and a NUL is refused for real too
    nul = dict(zip([c[0] for c in CASES], CASES, strict=True))["nul.csv"][1](tmp_path / "n.csv")
    _refused(invoke("ingest", "billing", "--billing", str(nul), *store), "U+0000")
    good = write_focus(tmp_path / "good.csv", _BASE)
    done = invoke("ingest", "billing", "--billing", str(good), *store)
    assert done.exit_code == 0 and " 3 rows" in done.stdout, done.stderr


def test_a_line_starting_with_hash_is_a_line_not_a_comment(tmp_path: Path) -> None:
    """DuckDB's sniffer took a line starting with ``#`` for a comment and dropped it."""
    from tenantcost.readers.billing import open_billing
    from tenantcost.split import connect

    path = write_focus(tmp_path / "hash.csv", focus_rows({}, {"AvailabilityZone": "#az"}))
    data = open_billing([path], connect(), currency="USD")
    assert data.rows == 2


def test_duplicates_are_refused_naming_both_places_unless_kept(store: tuple[str, ...],
                                                              tmp_path: Path) -> None:  # fmt: skip
    first = write_focus(tmp_path / "a.csv", _BASE)
    again = write_focus(tmp_path / "b.csv", [_BASE[1]])  # the second line of a.csv, once more
    both = ("--billing", str(first), "--billing", str(again))
    _refused(invoke("ingest", "billing", *both, "--dry-run", *store),
             f"{again}, row 2: the line repeats {first}, row 3 exactly", "--keep-duplicates")
    twice = tmp_path / "twice.csv"  # a file concatenated to itself (without its header)
    body = first.read_text().splitlines(keepends=True)
    twice.write_text("".join(body + body[1:]))
    _refused(invoke("ingest", "billing", "--billing", str(twice), *store),
             f"{twice}, row 5: the line repeats {twice}, row 2", "(2 more duplicate lines)")
    cur = write_cur2(tmp_path / "cur.parquet", cur2_rows({}, {}))
    _refused(invoke("ingest", "billing", "--billing", str(cur), "--dry-run", *store),
             f"{cur}, row 2: the line repeats {cur}, row 1")
    distinct = write_cur2(tmp_path / "ids.parquet", cur2_rows(
        {"identity_line_item_id": "li-1"}, {"identity_line_item_id": "li-2"}))  # fmt: skip
    assert invoke("ingest", "billing", "--billing", str(distinct), "--dry-run",
                  *store).exit_code == 0  # fmt: skip
    kept = invoke("ingest", "billing", *both, "--keep-duplicates", *store)
    assert kept.exit_code == 0 and " 4 rows" in kept.stdout, kept.stderr


def test_a_billing_period_total_stays_under_the_limit_run_holds(store: tuple[str, ...],
                                                               tmp_path: Path) -> None:  # fmt: skip
    """10^18 micro-units (limits.MAX_AMOUNT_TOTAL): the batch's lines, and the live lines of
    the other accounts of the period that the batch does not replace."""
    half = "600000000000"  # 6e11: two of them pass 1e12 currency units
    over = write_focus(tmp_path / "over.csv", focus_rows(
        {"BilledCost": half}, {"BilledCost": half, "ResourceId": "i-2"}))  # fmt: skip
    _refused(invoke("ingest", "billing", "--billing", str(over), "--dry-run", *store),
             f"{over}, row 3, column 'BilledCost'", "would total more than 1,000,000,000,000")
    one = write_focus(tmp_path / "one.csv", focus_rows({"BilledCost": half}))
    assert invoke("ingest", "billing", "--billing", str(one), *store).exit_code == 0
    restated = invoke("ingest", "billing", "--billing", str(one), *store)  # replaces its cell
    assert restated.exit_code == 0, restated.stderr
    other = write_focus(tmp_path / "other.csv", focus_rows(
        {"BilledCost": half, "BillingAccountId": "999"}))  # fmt: skip
    _refused(invoke("ingest", "billing", "--billing", str(other), *store),
             f"{other}, row 2, column 'BilledCost'", "600,000,000,000 of it already stored")
