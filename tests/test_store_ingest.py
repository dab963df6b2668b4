"""`tenantcost ingest usage|costs` on SQLite and a real PostgreSQL 15: one atomic batch per
command, files in day partitions named by the committed catalog only; `replace` makes a
batch's rows the only ones of its cells (ingesting twice changes nothing), `sum` adds; a bad
row, a failure mid-batch or a killed process leaves the store and the data directory as they
were (leftovers are ignored, then cleaned by the next ingest)."""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest
from sqlalchemy import func
from sqlmodel import Session, col, select
from typer.testing import CliRunner

from tenantcost.cli import app
from tenantcost.readers.costs import read_costs
from tenantcost.split import connect
from tenantcost.store.actor import os_actor
from tenantcost.store.data import DataDir, Store
from tenantcost.store.engine import open_engine
from tenantcost.store.ingest import PAUSE_BEFORE_COMMIT_ENV, workload_key
from tenantcost.store.models import Batch, BatchCell, BatchFile
from tenantcost.store.settings import resolve_settings
from tenantcost.store.stored import stored_costs, stored_usage
from tenantcost.windows import Period

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "saas-three-clients"
NOVEMBER = Period.month("2026-11")
HEADER = "window_start,window_end,service,client,requests,cpu_seconds\n"
runner = CliRunner()


def row(day: int, hour: int, service: str, client: str, requests: float, cpu: float) -> str:
    start = pd.Timestamp(f"2026-11-{day:02d}T{hour:02d}:00:00Z")
    end = start + pd.Timedelta(hours=1)
    return (
        f"{start:%Y-%m-%dT%H:%M:%SZ},{end:%Y-%m-%dT%H:%M:%SZ},{service},{client},{requests},{cpu}\n"
    )


@pytest.fixture
def store(store_url: str, tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """An upgraded store and its data directory."""
    assert runner.invoke(app, ["db", "upgrade", "--db", store_url]).exit_code == 0
    yield store_url, tmp_path / "data"


def cli(store: tuple[str, Path], *args: str):
    url, data = store
    return runner.invoke(app, [*args, "--db", url, "--data", str(data)])


def opened(store: tuple[str, Path]) -> Store:
    url, data = store
    return Store(open_engine(resolve_settings(db=url, environ={})), DataDir(str(data)))


def usage_rows(store: tuple[str, Path], period: Period = NOVEMBER) -> pd.DataFrame:
    """The stored usage of the period, sorted, as a plain frame."""
    handle, con = opened(store), connect()
    source = stored_usage(handle, period, con)
    handle.engine.dispose()
    if source is None:
        return pd.DataFrame()
    frame = con.execute(source.relation(con)).df()
    return frame.sort_values(["window_start", "service", "client"]).reset_index(drop=True)


def batches(store: tuple[str, Path]) -> list[Batch]:
    handle = opened(store)
    with Session(handle.engine) as session:
        found = list(session.exec(select(Batch).order_by(col(Batch.id))))
    handle.engine.dispose()
    return found


def files(store: tuple[str, Path]) -> list[str]:
    data = store[1]
    return sorted(str(p.relative_to(data)) for p in data.rglob("*") if p.is_file())


def snapshot(store: tuple[str, Path]) -> tuple[list[tuple], list[str]]:
    """Every batch row and every file: a refused or killed ingest must leave both as they were."""
    return [(b.id, b.uid, b.sha256) for b in batches(store)], files(store)


def test_usage_batch_is_recorded_and_partitioned_by_day(store, tmp_path):
    usage = tmp_path / "usage.csv"
    usage.write_text(HEADER + row(7, 23, "api", "a", 10, 1.5) + row(8, 0, "api", "a", 20, 2.5)
                     + row(8, 0, "api", "b", 5, 0.5) + row(8, 0, "worker", "a", 1, 9))  # fmt: skip
    done = cli(store, "ingest", "usage", "--usage", str(usage))
    assert done.exit_code == 0, done.output
    [batch] = batches(store)
    assert done.stdout == (
        f"usage: batch {batch.uid[:12]} committed (replace): 4 rows, 3 (window, service) cells, "
        "2 file(s), windows 2026-11-07T23:00:00Z to 2026-11-08T01:00:00Z, sha256 "
        f"{batch.sha256[:12]}\n"
    )
    assert (batch.kind, batch.mode, batch.rows, batch.status) == (
        "usage",
        "replace",
        4,
        "committed",
    )
    assert batch.source == str(usage) and batch.actor == os_actor()
    assert batch.window_from == pd.Timestamp("2026-11-07T23:00Z").to_pydatetime()
    assert batch.window_to == pd.Timestamp("2026-11-08T01:00Z").to_pydatetime()
    assert files(store) == [f"usage/date=2026-11-07/{batch.uid}.parquet",
                            f"usage/date=2026-11-08/{batch.uid}.parquet"]  # fmt: skip
    handle = opened(store)
    with Session(handle.engine) as session:
        stored = list(session.exec(select(BatchFile).order_by(col(BatchFile.day))))
        cells = list(session.exec(select(BatchCell).order_by(col(BatchCell.window_start))))
    handle.engine.dispose()
    assert [(f.day, f.rows) for f in stored] == [("2026-11-07", 1), ("2026-11-08", 3)]
    for f in stored:
        assert f.sha256 == hashlib.sha256((store[1] / f.path).read_bytes()).hexdigest()
    lines = "\n".join(f"{f.day} {f.sha256}" for f in stored)
    assert batch.sha256 == hashlib.sha256(lines.encode()).hexdigest()
    assert [(c.window_start.hour, c.key) for c in cells] == [(23, "api"), (0, "api"), (0, "worker")]
    read = usage_rows(store)
    assert read[["service", "client", "requests", "cpu_seconds"]].values.tolist() == [
        ["api", "a", 10.0, 1.5], ["api", "a", 20.0, 2.5], ["api", "b", 5.0, 0.5],
        ["worker", "a", 1.0, 9.0]]  # fmt: skip


def test_replace_twice_is_idempotent_and_sum_adds(store):
    usage = str(EXAMPLE / "usage.csv")
    assert cli(store, "ingest", "usage", "--usage", usage).exit_code == 0
    first = usage_rows(store)
    again = cli(store, "ingest", "usage", "--usage", usage)
    assert again.exit_code == 0, again.output
    assert "replaced 2 cell(s) held by earlier batches" in again.stdout
    pd.testing.assert_frame_equal(usage_rows(store), first)  # each cell once
    one, two = batches(store)
    assert one.sha256 == two.sha256 and one.uid != two.uid  # same content, two batches
    summed = cli(store, "ingest", "usage", "--usage", usage, "--mode", "sum")
    assert summed.exit_code == 0 and "added to 2 cell(s)" in summed.stdout
    doubled = usage_rows(store)
    assert doubled["requests"].tolist() == (first["requests"] * 2).tolist()
    assert doubled["cpu_seconds"].tolist() == (first["cpu_seconds"] * 2).tolist()
    # A replace after a sum supersedes both: back to the file's figures.
    assert cli(store, "ingest", "usage", "--usage", usage).exit_code == 0
    pd.testing.assert_frame_equal(usage_rows(store), first)


def test_replace_only_touches_the_batches_cells(store, tmp_path):
    """A correction of one (window, service) cell leaves the other cells as they were; a
    client absent from the correction is gone from that cell."""
    base, fix = tmp_path / "base.csv", tmp_path / "fix.csv"
    base.write_text(HEADER + row(3, 10, "api", "a", 10, 1) + row(3, 10, "api", "b", 30, 3)
                    + row(3, 10, "worker", "a", 7, 70))  # fmt: skip
    fix.write_text(HEADER + row(3, 10, "api", "a", 12, 1.2))
    assert cli(store, "ingest", "usage", "--usage", str(base)).exit_code == 0
    done = cli(store, "ingest", "usage", "--usage", str(fix))
    assert done.exit_code == 0 and "replaced 1 cell(s)" in done.stdout
    read = usage_rows(store)
    assert read[["service", "client", "requests"]].values.tolist() == [
        ["api", "a", 12.0], ["worker", "a", 7.0]]  # fmt: skip


def test_costs_replace_by_window_and_workload(store, tmp_path):
    costs = str(EXAMPLE / "costs.json")
    done = cli(store, "ingest", "costs", "--costs", costs)
    assert done.exit_code == 0, done.output
    assert " committed (replace): 8 rows, 8 (window, workload) cells, 1 file(s)" in done.stdout
    expected = read_costs([costs])
    handle = opened(store)
    pd.testing.assert_frame_equal(stored_costs(handle, NOVEMBER), expected)
    again = cli(store, "ingest", "costs", "--costs", costs)
    assert again.exit_code == 0 and "replaced 8 cell(s)" in again.stdout
    pd.testing.assert_frame_equal(stored_costs(handle, NOVEMBER), expected)
    assert stored_costs(handle, Period.month("2026-12")).empty
    handle.engine.dispose()
    [batch, _] = batches(store)
    assert batch.kind == "costs" and batch.rows == 8


def test_workload_key_joins_controllers_and_names_rows_without_one():
    costs = read_costs([EXAMPLE / "costs.json"])
    keys = dict(zip(costs["name"], workload_key(costs), strict=True))
    assert keys["cluster-one/saas/deployment:api"] == "cluster-one\x1fsaas\x1fdeployment\x1fapi\x1f"
    assert keys["__idle__"] == "cluster-one\x1f\x1f\x1f\x1f__idle__"


def test_period_keeps_its_windows_and_reports_the_rest(store, tmp_path):
    usage = tmp_path / "usage.csv"
    usage.write_text(HEADER + row(30, 23, "api", "a", 1, 1) + "2026-12-01T00:00:00Z,"
                     "2026-12-01T01:00:00Z,api,a,2,2\n")  # fmt: skip
    done = cli(store, "ingest", "usage", "--usage", str(usage), "--month", "2026-11")
    assert done.exit_code == 0, done.output
    assert "windows 2026-11-01T00:00:00Z to 2026-12-01T00:00:00Z" in done.stdout
    assert "1 row(s) outside the period left out" in done.stdout
    assert batches(store)[0].rows == 1
    none = cli(store, "ingest", "usage", "--usage", str(usage), "--month", "2026-10")
    assert none.exit_code == 2 and "no usage rows to ingest in the period" in none.stderr


def test_dry_run_validates_counts_and_writes_nothing(store):
    done = cli(store, "ingest", "usage", "--usage", str(EXAMPLE / "usage.csv"), "--dry-run")
    assert done.exit_code == 0, done.output
    assert done.stdout.startswith("usage: dry run, nothing written: 6 rows, 2 (window, service)")
    costs = cli(store, "ingest", "costs", "--costs", str(EXAMPLE / "costs.json"), "--dry-run")
    assert costs.exit_code == 0 and "8 rows, 8 (window, workload) cells" in costs.stdout
    assert snapshot(store) == ([], [])


def test_a_bad_row_in_the_middle_of_a_csv_is_one_line_and_writes_nothing(store, tmp_path):
    assert cli(store, "ingest", "usage", "--usage", str(EXAMPLE / "usage.csv")).exit_code == 0
    before = snapshot(store)
    bad = tmp_path / "bad.csv"
    bad.write_text(HEADER + row(4, 1, "api", "a", 1, 1) + row(4, 2, "api", "a", -5, 1)
                   + row(4, 3, "api", "a", 1, 1))  # fmt: skip
    done = cli(store, "ingest", "usage", "--usage", str(bad))
    assert done.exit_code == 2, done.output
    assert (
        done.stderr
        == f"error: {bad}, row 3, column 'requests': usage value must be >= 0, got '-5'\n"
    )
    assert snapshot(store) == before


def test_a_bad_day_in_parquet_removes_the_days_already_written(store, tmp_path):
    """Parquet is validated day by day while being written: day 2's bad row stops the batch
    after day 1's file was written; that file goes, the catalog never named it."""
    assert cli(store, "ingest", "usage", "--usage", str(EXAMPLE / "usage.csv")).exit_code == 0
    before = snapshot(store)
    frame = pd.read_csv(EXAMPLE / "usage.csv")
    days = []
    for day in (10, 11, 12):
        part = frame.copy()
        for column in ("window_start", "window_end"):
            part[column] = pd.to_datetime(part[column]) + pd.Timedelta(days=day - 3)
        days.append(part)
    bad = pd.concat(days, ignore_index=True)
    bad.loc[8, "cpu_seconds"] = float("nan")
    path = tmp_path / "bad.parquet"
    bad.to_parquet(path, index=False)
    done = cli(store, "ingest", "usage", "--usage", str(path))
    assert done.exit_code == 2, done.output
    assert done.stderr.startswith(
        f"error: {path}, row 9, column 'cpu_seconds': usage value is missing"
    )
    assert snapshot(store) == before


def test_an_unknown_mode_and_different_metrics_are_refused(store, tmp_path):
    usage = str(EXAMPLE / "usage.csv")
    done = cli(store, "ingest", "usage", "--usage", usage, "--mode", "append")
    assert done.exit_code == 2 and "--mode: expected replace or sum, got 'append'" in done.stderr
    assert cli(store, "ingest", "usage", "--usage", usage).exit_code == 0
    other = tmp_path / "other.csv"
    other.write_text("window_start,window_end,service,client,requests\n"
                     "2026-11-03T10:00:00Z,2026-11-03T11:00:00Z,api,a,1\n")  # fmt: skip
    before = snapshot(store)
    refused = cli(store, "ingest", "usage", "--usage", str(other))
    assert refused.exit_code == 2
    assert "usage metric columns (requests) lack the stored usage's cpu_seconds" in refused.stderr
    assert snapshot(store) == before


def test_a_sum_batch_lacking_a_stored_metric_adds_zero_there(store, tmp_path):
    """`sum` fills the stored metric columns it lacks with 0 (in its files too, so `run`
    reads every cell whole); `replace` lacking one is refused; a batch adding a metric is
    stored, and every earlier row reads 0 for it."""
    usage = str(EXAMPLE / "usage.csv")
    assert cli(store, "ingest", "usage", "--usage", usage).exit_code == 0
    before = usage_rows(store)
    only = tmp_path / "requests.csv"
    only.write_text("window_start,window_end,service,client,requests\n"
                    "2026-11-03T10:00:00Z,2026-11-03T11:00:00Z,api,client-b,4\n"
                    "2026-11-03T10:00:00Z,2026-11-03T11:00:00Z,api,meter-new,7\n")  # fmt: skip
    tried = cli(store, "ingest", "usage", "--usage", str(only), "--mode", "sum", "--dry-run")
    assert tried.exit_code == 0, tried.output
    done = cli(store, "ingest", "usage", "--usage", str(only), "--mode", "sum")
    assert done.exit_code == 0, done.output
    after = usage_rows(store)
    assert len(after) == len(before) + 1
    key = ["window_start", "service", "client"]
    merged = after.merge(before, on=key, how="left", suffixes=("", "_was"))
    b = merged[merged["client"] == "client-b"].iloc[0]
    was = before[(before["client"] == "client-b")].iloc[0]
    assert (b["requests"], b["cpu_seconds"]) == (was["requests"] + 4, was["cpu_seconds"])
    new = after[after["client"] == "meter-new"].iloc[0]
    assert (new["requests"], new["cpu_seconds"]) == (7, 0)
    untouched = merged[~merged["client"].isin(["client-b", "meter-new"])]
    assert (untouched["requests"] == untouched["requests_was"]).all()
    latest = max(batches(store), key=lambda b: b.id)
    [written] = [f for f in files(store) if latest.uid in f]
    stored = pd.read_parquet(store[1] / written)
    assert list(stored.columns)[-2:] == ["requests", "cpu_seconds"]
    assert stored["cpu_seconds"].tolist() == [0.0, 0.0]
    snap = snapshot(store)
    refused = cli(store, "ingest", "usage", "--usage", str(only))  # replace
    assert refused.exit_code == 2, refused.output
    assert "a replace batch must carry all of them" in refused.stderr
    assert snapshot(store) == snap
    extra = tmp_path / "extra.csv"
    extra.write_text("window_start,window_end,service,client,requests,cpu_seconds,bytes_out\n"
                     "2026-11-03T10:00:00Z,2026-11-03T11:00:00Z,api,client-b,1,1,9\n")  # fmt: skip
    added = cli(store, "ingest", "usage", "--usage", str(extra), "--mode", "sum")
    assert added.exit_code == 0, added.output
    grown = usage_rows(store)  # earlier batches read 0 for the metric they did not carry
    assert list(grown.columns)[-3:] == ["requests", "cpu_seconds", "bytes_out"]
    assert len(grown) == len(after)
    cell = (grown["client"] == "client-b") & (grown["service"] == "api")
    b = grown[cell & (grown["window_start"] == b["window_start"])]
    assert b[["requests", "cpu_seconds", "bytes_out"]].values.tolist() == [
        [was["requests"] + 5, was["cpu_seconds"] + 1, 9]
    ]
    assert grown.loc[grown.index != b.index[0], "bytes_out"].eq(0).all()
    assert (
        grown.drop(columns="bytes_out")
        .loc[grown.index != b.index[0]]
        .equals(after.loc[after.index != b.index[0]])
    )
    narrow = cli(store, "ingest", "usage", "--usage", usage)  # replace lacking bytes_out
    assert narrow.exit_code == 2 and "a replace batch must carry all of them" in narrow.stderr
    assert "\n" not in narrow.stderr.strip() and "Traceback" not in narrow.output


def test_a_killed_ingest_leaves_the_store_unchanged_and_is_cleaned_next_time(store, tmp_path):
    url, data = store
    usage = str(EXAMPLE / "usage.csv")
    assert cli(store, "ingest", "usage", "--usage", usage).exit_code == 0
    before, stored_before = snapshot(store), usage_rows(store)
    marker = tmp_path / "paused"
    env = {**os.environ, "PYTHONPATH": str(ROOT), PAUSE_BEFORE_COMMIT_ENV: str(marker)}
    fix = tmp_path / "fix.csv"
    fix.write_text(HEADER + row(3, 10, "api", "client-a", 1, 1))
    proc = subprocess.Popen([sys.executable, "-m", "tenantcost", "ingest", "usage", "--usage",
                             str(fix), "--db", url, "--data", str(data)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
    deadline = time.monotonic() + 60
    while not marker.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert marker.exists(), proc.communicate()
    proc.send_signal(signal.SIGKILL)  # files written and renamed, batch not committed
    proc.wait(timeout=30)
    leftovers = sorted(set(files(store)) - set(before[1]))
    assert len(leftovers) == 1 and leftovers[0].startswith("usage/date=2026-11-03/")
    assert [(b.id, b.uid, b.sha256) for b in batches(store)] == before[0]
    pd.testing.assert_frame_equal(usage_rows(store), stored_before)  # the leftover is ignored
    again = runner.invoke(app, ["ingest", "usage", "--usage", usage, "--db", url, "--data",
                                str(data), "--wait", "10"])  # fmt: skip
    assert again.exit_code == 0, again.output
    assert again.stdout.rstrip().endswith("; removed 1 leftover file(s)")
    assert not set(leftovers) & set(files(store))
    pd.testing.assert_frame_equal(usage_rows(store), stored_before)


def test_the_store_must_exist_and_be_current(tmp_path):
    url = f"sqlite:///{tmp_path / 'none.db'}"
    done = runner.invoke(app, ["ingest", "usage", "--usage", str(EXAMPLE / "usage.csv"),
                               "--db", url])  # fmt: skip
    assert done.exit_code == 2 and "no store at" in done.stderr


def test_batch_counts_stay_small(store):
    """One batch row per command, whatever the number of rows."""
    assert cli(store, "ingest", "costs", "--costs", str(EXAMPLE / "costs.json")).exit_code == 0
    handle = opened(store)
    with Session(handle.engine) as session:
        assert session.exec(select(func.count()).select_from(Batch)).one() == 1
        assert session.exec(select(func.count()).select_from(BatchCell)).one() == 8
    handle.engine.dispose()


def test_a_full_disk_is_one_line_and_leaves_the_store_unchanged(store, tmp_path):
    """`ulimit -f` (a file-size limit) stands in for a full disk: the day's Parquet file cannot
    be written; exit 2 with one line, and no batch, no file."""
    import numpy as np

    url, data = store
    assert cli(store, "ingest", "usage", "--usage", str(EXAMPLE / "usage.csv")).exit_code == 0
    before = snapshot(store)
    n = 60_000
    rng = np.random.default_rng(7)
    big = pd.DataFrame({"window_start": "2026-11-05T00:00:00Z",
                        "window_end": "2026-11-05T01:00:00Z", "service": "api",
                        "client": [f"c{i}" for i in range(n)], "requests": rng.random(n) * 1e6,
                        "cpu_seconds": rng.random(n)})  # fmt: skip
    path = tmp_path / "big.csv"
    big.to_csv(path, index=False)
    limit = 400 * 1024

    def small_files() -> None:
        import resource

        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    proc = subprocess.run([sys.executable, "-m", "tenantcost", "ingest", "usage", "--usage",
                           str(path), "--db", url, "--data", str(data)], capture_output=True,
                          text=True, env={**os.environ, "PYTHONPATH": str(ROOT)},
                          preexec_fn=small_files, timeout=120)  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    err = proc.stderr.strip()
    assert err.startswith("error: ") and "\n" not in err and "Traceback" not in err
    assert err.endswith("cannot write: File too large")
    assert snapshot(store) == before


def test_a_data_directory_url_works_the_same(store_url, tmp_path):
    """An fsspec URL as the data directory (memory:// here, s3:// in production): files are
    uploaded under a temporary name and moved; reading goes through fsspec."""
    import fsspec

    assert runner.invoke(app, ["db", "upgrade", "--db", store_url]).exit_code == 0
    data = f"memory://tc-{tmp_path.name}/"
    for _ in range(2):
        for kind, option, path in (("usage", "--usage", "usage.csv"),
                                   ("costs", "--costs", "costs.json")):  # fmt: skip
            done = runner.invoke(app, ["ingest", kind, option, str(EXAMPLE / path), "--db",
                                       store_url, "--data", data])  # fmt: skip
            assert done.exit_code == 0, done.output
    found = fsspec.filesystem("memory").find(f"/tc-{tmp_path.name}")
    assert len(found) == 4 and all(".tmp" not in f for f in found)
    handle = Store(open_engine(resolve_settings(db=store_url, environ={})), DataDir(data))
    con = connect()
    source = stored_usage(handle, NOVEMBER, con)
    assert source is not None and len(con.execute(source.relation(con)).fetchall()) == 6
    expected = read_costs([EXAMPLE / "costs.json"])
    pd.testing.assert_frame_equal(stored_costs(handle, NOVEMBER), expected)
    handle.engine.dispose()
