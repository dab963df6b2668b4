"""Usage compaction (the store under meter traffic: many small batches) on SQLite and a real
PostgreSQL 15: meter-like `sum` batches folded per day read exactly as the same usage
ingested as one file (`run` gives the same document); a run still names every batch it read;
withdrawing a folded batch takes its rows away (the compaction is invalid, then folded anew);
a `replace` batch after a compaction replaces its cells, a `sum` batch after it adds. The
threshold is lowered for the test (`COMPACT_AFTER`), so a few batches are enough."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import Engine, func, select
from typer.testing import CliRunner

from tenantcost.cli import app
from tenantcost.split import connect
from tenantcost.store import compaction
from tenantcost.store.batches import withdraw_batch
from tenantcost.store.data import DataDir, Store
from tenantcost.store.engine import open_engine
from tenantcost.store.ingest import ingest_usage
from tenantcost.store.models import Batch, RunInput, UsageCompaction, table
from tenantcost.store.schema import upgrade
from tenantcost.store.settings import resolve_settings
from tenantcost.store.stored import _files, stored_usage
from tenantcost.windows import Period

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "saas-three-clients"
START = pd.Timestamp("2026-11-03T10:00Z")
HOUR = pd.Timedelta(hours=1)
DAY = Period(pd.Timestamp("2026-11-03T00:00Z"), pd.Timestamp("2026-11-04T00:00Z"))
CLIENTS = ("client-a", "client-b", "client-c")
SERVICES = ("api", "import-worker")
runner = CliRunner()


def cli(*args: str) -> str:
    done = runner.invoke(app, list(args))
    assert done.exit_code == 0, done.output
    return str(done.stdout)


def open_store(url: str, data: Path) -> Store:
    engine = open_engine(resolve_settings(db=url, environ={}), create=True)
    upgrade(engine)
    return Store(engine, DataDir(str(data)))


def frame(cells: dict[tuple[str, str], tuple[int, int]]) -> pd.DataFrame:
    """Usage rows of hour 10 of 2026-11-03: {(service, client): (requests, cpu in 1/1024 s)}
    (dyadic CPU seconds add up exactly in any order, so totals compare exactly)."""
    return pd.DataFrame(
        [(START, START + HOUR, s, c, float(r), cpu / 1024) for (s, c), (r, cpu) in cells.items()],
        columns=["window_start", "window_end", "service", "client", "requests", "cpu_seconds"],
    )


def ingest(store: Store, rows: pd.DataFrame, folder: Path, mode: str = "sum") -> str:
    path = folder / f"batch-{next(_numbers)}.parquet"
    rows.to_parquet(path, index=False)
    return ingest_usage(store, [path], period=None, mode=mode, actor="test").uid


_numbers = itertools.count(1)


def stored(store: Store) -> pd.DataFrame:
    """The stored usage of the day, one row per (window, service, client), sorted."""
    con = connect()
    source = stored_usage(store, DAY, con)
    assert source is not None
    rows = con.execute(source.relation(con)).df()
    keys = ["window_start", "service", "client"]
    rows = rows[[*keys, "requests", "cpu_seconds"]].sort_values(keys).reset_index(drop=True)
    assert not rows.duplicated(keys).any()
    return rows


def expected(*frames: pd.DataFrame) -> pd.DataFrame:
    rows = pd.concat(frames).groupby(["window_start", "service", "client"], as_index=False)
    summed = rows[["requests", "cpu_seconds"]].sum()
    summed["window_start"] = pd.to_datetime(summed["window_start"], utc=True)
    return summed.sort_values(["window_start", "service", "client"]).reset_index(drop=True)


def same(a: pd.DataFrame, b: pd.DataFrame) -> None:
    a, b = a.copy(), b.copy()
    for f in (a, b):
        f["window_start"] = pd.to_datetime(f["window_start"], utc=True).astype(
            "datetime64[ns, UTC]"
        )
    pd.testing.assert_frame_equal(a, b, check_dtype=False)


def compactions(engine: Engine) -> pd.DataFrame:
    u = table(UsageCompaction).c
    with engine.connect() as connection:
        rows = connection.execute(select(u.day, u.status, u.upto_batch_id, u.batches)).all()
    return pd.DataFrame([tuple(r) for r in rows],
                        columns=["day", "status", "upto_batch_id", "batches"])  # fmt: skip


def meter_batches(n: int) -> list[pd.DataFrame]:
    """``n`` small batches, each a few (service, client) cells of the hour (like a meter's
    one-minute flushes)."""
    out = []
    for i in range(n):
        picked = [(SERVICES[(i + k) % 2], CLIENTS[(i * 7 + k) % 3]) for k in range(1 + i % 3)]
        out.append(frame({cell: (1 + (i * 13 + j) % 17, 1 + (i * 29 + j) % 997)
                          for j, cell in enumerate(picked)}))  # fmt: skip
    return out


def test_folded_batches_read_and_run_as_one_file(
    store_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setattr(compaction, "COMPACT_AFTER", 4)
    store = open_store(store_url, tmp_path / "data")
    batches = meter_batches(23)
    uids = [ingest(store, rows, tmp_path) for rows in batches]
    done = compactions(store.engine)
    assert (done["status"] == "active").sum() == 1 and len(done) >= 4  # folded every 5
    active = done[done["status"] == "active"].iloc[0]
    assert active["batches"] == 20 and active["day"] == "2026-11-03"
    files = _files(store, "usage", DAY)
    assert len(files) == 1 + 3  # the compaction and the 3 batches after it
    same(stored(store), expected(*batches))

    # `run` on the folded month equals `run` on the same usage ingested as one file
    args = ["--db", store_url, "--data", str(tmp_path / "data")]
    cli("rules", "load", str(EXAMPLE / "rules.yaml"), *args)
    cli("ingest", "costs", "--costs", str(EXAMPLE / "costs.json"), *args)
    folded = json.loads(cli("run", "--month", "2026-11", "--format", "json", *args))
    one = tmp_path / "one.parquet"
    summed = expected(*batches)  # the same usage, one row per cell
    summed.insert(1, "window_end", summed["window_start"] + HOUR)
    summed.to_parquet(one, index=False)
    other = tmp_path / "one-file.db"
    other_args = ["--db", f"sqlite:///{other}", "--data", str(tmp_path / "data-one")]
    cli("db", "upgrade", *other_args)
    cli("rules", "load", str(EXAMPLE / "rules.yaml"), *other_args)
    cli("ingest", "costs", "--costs", str(EXAMPLE / "costs.json"), *other_args)
    cli("ingest", "usage", "--usage", str(one), *other_args)
    single = json.loads(cli("run", "--month", "2026-11", "--format", "json", *other_args))
    for document in (folded, single):
        document.pop("run_id")
    assert folded == single and folded["clients"]

    # provenance: the run names every batch it read, and `batch list` lists each
    b, i = table(Batch).c, table(RunInput).c
    with store.engine.connect() as connection:
        read = set(connection.execute(
            select(b.uid).join_from(table(RunInput), table(Batch), b.id == i.batch_id)
            .where(b.kind == "usage")).scalars())  # fmt: skip
    assert read == set(uids)
    listed = json.loads(cli("batch", "list", "--format", "json", *args))
    assert {x["uid"] for x in listed if x["kind"] == "usage"} == set(uids)
    store.engine.dispose()


def test_withdraw_and_replace_after_compaction(
    store_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setattr(compaction, "COMPACT_AFTER", 3)
    store = open_store(store_url, tmp_path / "data")
    batches = meter_batches(9)
    uids = [ingest(store, rows, tmp_path) for rows in batches]
    assert (compactions(store.engine)["status"] == "active").sum() == 1

    # withdrawing a folded batch takes its rows away: the day's compaction is invalid
    withdraw_batch(store.engine, uids[1], reason="test", actor="test")
    done = compactions(store.engine)
    assert "invalid" in set(done["status"]) and (done["status"] == "active").sum() == 0
    kept = [rows for n, rows in enumerate(batches) if n != 1]
    same(stored(store), expected(*kept))
    more = meter_batches(12)[9:]  # the next ingest folds the day anew, without it
    for rows in more:
        ingest(store, rows, tmp_path)
    done = compactions(store.engine)
    assert (done["status"] == "active").sum() == 1
    same(stored(store), expected(*kept, *more))

    # a replace batch after the compaction replaces its cells; a sum batch after it adds
    replacing = frame({("api", "client-a"): (5, 512), ("api", "client-z"): (2, 1024)})
    ingest(store, replacing, tmp_path, mode="replace")
    untouched = expected(*kept, *more)
    untouched = untouched[untouched["service"] != "api"]
    same(stored(store), expected(untouched, replacing))
    adding = frame({("api", "client-a"): (1, 1), ("import-worker", "client-b"): (3, 3)})
    ingest(store, adding, tmp_path)
    workers = [r[r["service"] == "import-worker"] for r in meter_batches(8)]
    workers = [r for r in workers if len(r)][:4]
    for rows in workers:  # enough to fold the day again, over the replace
        ingest(store, rows, tmp_path)
    with store.engine.connect() as connection:
        last_replace = connection.execute(
            select(func.max(table(Batch).c.id)).where(table(Batch).c.mode == "replace")
        ).scalar()
    done = compactions(store.engine)
    assert int(done[done["status"] == "active"]["upto_batch_id"].iloc[0]) > last_replace
    same(stored(store), expected(untouched, replacing, adding, *workers))
    store.engine.dispose()


cell = st.tuples(st.sampled_from(SERVICES), st.sampled_from(CLIENTS))
batch = st.tuples(st.sampled_from(["replace", "sum", "sum"]),
                  st.dictionaries(cell, st.tuples(st.integers(0, 9), st.integers(0, 99)),
                                  min_size=1, max_size=4))  # fmt: skip


@settings(max_examples=15, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])  # fmt: skip
@given(sequence=st.lists(batch, min_size=1, max_size=9))
def test_any_sequence_reads_the_same_folded_or_not(tmp_path_factory, sequence):
    """Property (SQLite): folded after every 2 loose files or never, the stored usage is the
    same, whatever the sequence of `replace` and `sum` batches."""
    results = []
    for after in (2, 10_000):
        folder = tmp_path_factory.mktemp("fold")
        store = open_store(f"sqlite:///{folder / 'tc.db'}", folder / "data")
        original = compaction.COMPACT_AFTER
        compaction.COMPACT_AFTER = after
        try:
            for mode, cells in sequence:
                ingest(store, frame(cells), folder, mode=mode)
        finally:
            compaction.COMPACT_AFTER = original
        results.append(stored(store))
        if after == 2 and len(sequence) > 2:
            assert len(compactions(store.engine))
        store.engine.dispose()
    same(results[0], results[1])


def test_a_metric_added_midway_folds_with_zero_before_it(
    store_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """A meter starts posting `db_seconds` after 3 batches: the fold reads the earlier files
    as 0 for it, and the store reads the same folded or not."""
    monkeypatch.setattr(compaction, "COMPACT_AFTER", 4)
    store = open_store(store_url, tmp_path / "data")
    batches = meter_batches(8)
    later = [b.assign(db_seconds=[0.125 * (i + 1)] * len(b)) for i, b in enumerate(batches[3:])]
    for rows in [*batches[:3], *later]:
        ingest(store, rows, tmp_path)
    assert (compactions(store.engine)["status"] == "active").sum() == 1
    con = connect()
    source = stored_usage(store, DAY, con)
    assert source is not None and source.metrics[-1] == "db_seconds"
    rows = con.execute(source.relation(con)).df()
    assert rows["db_seconds"].notna().all()
    assert rows["db_seconds"].sum() == sum(b["db_seconds"].sum() for b in later)
    same(stored(store), expected(*batches))
    store.engine.dispose()
