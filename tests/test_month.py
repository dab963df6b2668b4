"""One range of months (2000-01 .. 2099-12) and of instants (offsets within ±14:00) for every
command and reader: the parsers themselves, and the commands and files that went around them.

The routes (422) and the store commands are checked against a real service in
``test_service_hostile_routes.py``; the usage API's timestamps in ``test_service_usage.py``.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from tenantcost.catalog import read_catalog
from tenantcost.cli import app
from tenantcost.errors import InputError
from tenantcost.instants import parse_instant, parse_instants
from tenantcost.limits import FIRST_MONTH, LAST_MONTH
from tenantcost.month import MONTH_PATTERN, is_month, parse_month, resolve_month

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "saas-three-clients"
INPUTS = ("--costs", str(EXAMPLE / "costs.json"), "--config", str(EXAMPLE / "rules.yaml"))


def test_the_month_parser_and_the_routes_pattern_accept_the_same_range() -> None:
    assert parse_month(FIRST_MONTH) == FIRST_MONTH and parse_month(LAST_MONTH) == LAST_MONTH
    every = [f"{y:04d}-{m:02d}" for y in (0, 1999, 2000, 2026, 2099, 2100, 9999)
             for m in range(0, 14)]  # fmt: skip
    odd = ["2026-1", "26-11", "2026-11 ", "\uff12\uff10\uff12\uff16-11", "", "2026/11"]
    for text in [*every, *odd]:
        accepted = FIRST_MONTH <= text <= LAST_MONTH and bool(re.fullmatch(r"\d{4}-\d{2}", text))
        accepted = accepted and 1 <= int(text[5:]) <= 12
        assert is_month(text) is accepted is (re.fullmatch(MONTH_PATTERN, text) is not None), text
        if not accepted:
            with pytest.raises(InputError) as refused:
                parse_month(text, "--vs")
            assert str(refused.value).startswith("--vs: ") and "\n" not in str(refused.value)
    with pytest.raises(InputError, match=r"^--month: month '0000-01' is outside the accepted "
                       r"range 2000-01 \.\. 2099-12$"):  # fmt: skip
        parse_month("0000-01")


def test_instants_refuse_far_offsets_and_years_and_name_the_cell() -> None:
    cells = pd.Series(["2026-11-01T00:00:00+14:00", "2026-11-01T00:00:00-1400",
                       "2026-11-01 05:30:00+05:30", "2026-11-01",
                       "2100-01-01T00:00:00Z"])  # fmt: skip
    parsed = parse_instants(cells)
    assert str(parsed.dtype) == "datetime64[ns, UTC]"
    assert parsed.tolist() == pd.to_datetime(
        ["2026-10-31T10:00Z", "2026-11-01T14:00Z", "2026-11-01T00:00Z", "2026-11-01T00:00Z",
         "2100-01-01T00:00Z"], utc=True).tolist()  # fmt: skip
    for bad, words in (
        ("2026-11-01T00:00:00+25:00", "has the UTC offset +25:00, outside -14:00 .. +14:00"),
        ("2026-11-01T00:00:00-14:30", "has the UTC offset -14:30"),
        ("20261101T000000+2300", "has the UTC offset +23:00"),
        ("0000-01-01T00:00:00Z", "is outside the accepted range 2000-01-01T00:00:00Z .. 21"),
        ("1999-12-31T23:59:59Z", "is outside the accepted range"),
        ("2100-01-01T00:00:01Z", "is outside the accepted range"),
        ("9999-12-31", "is outside the accepted range"),
        ("soon", "cannot read timestamp 'soon'"),
    ):
        column = pd.Series([*cells, bad, "2026-11-01T00:00:00+99:00"])
        with pytest.raises(InputError) as refused:
            parse_instants(column, file="u.csv", place=lambda i: f"row {i + 2}", column="ts")
        assert str(refused.value).startswith("u.csv, row 7, column 'ts': "), str(refused.value)
        assert words in str(refused.value)
    typed = pd.Series(pd.to_datetime(["1990-01-01"]))  # Parquet's own timestamps too
    with pytest.raises(InputError, match="outside the accepted range"):
        parse_instants(typed)
    one = parse_instant("2026-11-01T01:00:00+01:00", "--from")
    assert one == pd.Timestamp("2026-11-01", tz="UTC")
    with pytest.raises(InputError, match=r"^--from: not an ISO 8601 time: 'soon'$"):
        parse_instant("soon", "--from")


def _assert_one_line(done, *words: str) -> None:
    assert done.exit_code == 2, (done.exit_code, done.output)
    assert done.stdout == "" and done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith("error: ") and "Traceback" not in done.output
    for word in words:
        assert word in done.stderr, (word, done.stderr)


def test_scheduled_jobs_name_the_current_and_the_previous_month(tmp_path: Path) -> None:
    """A CronJob's command line is fixed: `watch --month current`, `close --month previous`."""
    from datetime import UTC, datetime

    january = datetime(2027, 1, 1, 0, 30, tzinfo=UTC)
    assert resolve_month("current", january) == "2027-01"
    assert resolve_month("previous", january) == "2026-12"
    assert resolve_month("previous", datetime(2026, 11, 30, 23, tzinfo=UTC)) == "2026-10"
    assert resolve_month("2026-05", january) == "2026-05"
    with pytest.raises(InputError, match="--month: expected YYYY-MM, got 'last'"):
        resolve_month("last", january)
    runner = CliRunner()
    db = ("--db", f"sqlite:///{tmp_path / 'tc.db'}", "--data", str(tmp_path / "data"))
    assert runner.invoke(app, ["db", "upgrade", *db]).exit_code == 0
    loaded = runner.invoke(app, ["rules", "load", str(EXAMPLE / "rules.yaml"), *db])
    assert loaded.exit_code == 0, loaded.output
    watched = runner.invoke(app, ["watch", "--month", "current", "--as-of",
                                  "2026-11-15T10:00:00Z", "--format", "json", *db])  # fmt: skip
    assert watched.exit_code == 0, watched.output
    assert '"month": "2026-11"' in watched.stdout
    closed = runner.invoke(app, ["close", "--month", "previous", *db])
    previous = resolve_month("previous", datetime.now(UTC))
    assert closed.exit_code != 0 and previous in closed.stderr, closed.output


def test_commands_refuse_months_and_times_outside_the_range_with_one_line(
    tmp_path: Path,
) -> None:
    runner = CliRunner()
    usage = tmp_path / "usage.csv"
    lines = (EXAMPLE / "usage.csv").read_text().splitlines()
    first = lines[1].split(",")
    first[0] = first[0].replace("Z", "+25:00")  # window_start, row 2
    usage.write_text("\n".join([lines[0], ",".join(first), *lines[2:]]) + "\n")
    shutil.copy(EXAMPLE / "usage.csv", tmp_path / "good.csv")
    allocate = ("allocate", *INPUTS, "--usage", str(tmp_path / "good.csv"))
    for args, words in (
        ((*allocate, "--month", "0000-01"), ["--month: month '0000-01' is outside"]),
        ((*allocate, "--month", "9999-12"), ["--month: month '9999-12' is outside"]),
        ((*allocate, "--from", "2026-11-01T00:00:00+25:00", "--to", "2026-12-01T00:00:00Z"),
         ["--from: timestamp", "has the UTC offset +25:00"]),
        ((*allocate, "--from", "2026-11-01", "--to", "9999-01-01"),
         ["--to: timestamp '9999-01-01' is outside the accepted range"]),
        (("explain", *INPUTS, "--usage", str(tmp_path / "good.csv"), "--month", "2026-11",
          "--vs", "0000-01", "--client", "client-a"), ["--vs: month '0000-01' is outside"]),
        (("allocate", *INPUTS, "--usage", str(usage)),
         [f"{usage}, row 2, column 'window_start': timestamp", "UTC offset +25:00"]),
    ):  # fmt: skip
        _assert_one_line(runner.invoke(app, list(args)), *words)


def test_input_files_keep_to_the_range(tmp_path: Path) -> None:
    """A rule version's ``effective_from`` and a catalog's contract dates: 9999-12-31 for
    "open" and +25:00 are refused by the file's reader, not read a century off."""
    runner = CliRunner()
    rules = (EXAMPLE / "rules.yaml").read_text()
    found = re.search(r"effective_from: *(\S+)", rules)
    assert found is not None
    for stamp, words in (("1970-01-01T00:00:00Z", "outside the accepted range"),
                         ("2026-01-01T00:00:00+25:00", "effective_from")):  # fmt: skip
        bad = tmp_path / "rules.yaml"
        bad.write_text(rules.replace(found.group(0), f'effective_from: "{stamp}"', 1))
        _assert_one_line(runner.invoke(app, ["check-config", str(bad)]), words)
    catalog = tmp_path / "catalog.csv"
    text = (EXAMPLE / "catalog.csv").read_text().replace("2026-11-30", "9999-12-31")
    catalog.write_text(text)
    with pytest.raises(InputError) as refused:
        read_catalog(catalog, "USD")
    assert str(refused.value) == (
        f"{catalog}, row 4, column 'end': date '9999-12-31' is outside 2000-01-01 .. "
        "2099-12-31 (leave end empty for an open contract)"
    )
