"""Property: whatever sequence of `replace` and `sum` batches is ingested, the stored usage is
what the cell rules say (a `replace` batch's rows become the only rows of its cells, a `sum`
batch's rows add to them), whether or not cells are held by several batches (the stored scan
reads uncontested cells straight from the files and applies the rules to contested ones)."""

from __future__ import annotations

import itertools
from pathlib import Path

import pandas as pd
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tenantcost.split import connect
from tenantcost.store.data import DataDir, Store
from tenantcost.store.engine import open_engine
from tenantcost.store.ingest import ingest_usage
from tenantcost.store.schema import upgrade
from tenantcost.store.settings import resolve_settings
from tenantcost.store.stored import stored_usage
from tenantcost.windows import Period

DAY = Period(pd.Timestamp("2026-11-03T00:00Z"), pd.Timestamp("2026-11-04T00:00Z"))
WINDOWS = [pd.Timestamp("2026-11-03T10:00Z"), pd.Timestamp("2026-11-03T11:00Z")]
KEYS = list(itertools.product(range(len(WINDOWS)), ("api", "worker"), ("a", "b", "c")))
HOUR = pd.Timedelta(hours=1)

batch_rows = st.dictionaries(st.sampled_from(KEYS), st.integers(0, 50), min_size=1)
batches = st.lists(st.tuples(st.sampled_from(["replace", "sum"]), batch_rows), min_size=1,
                   max_size=5)  # fmt: skip


def model(sequence: list[tuple[str, dict[tuple[int, str, str], int]]]) -> dict:
    """The stored usage by the cell rules: {(window, service): {client: requests}}."""
    cells: dict[tuple[int, str], dict[str, int]] = {}
    for mode, rows in sequence:
        if mode == "replace":
            for window, service, _ in rows:
                cells[(window, service)] = {}
        for (window, service, client), value in rows.items():
            held = cells.setdefault((window, service), {})
            held[client] = held.get(client, 0) + value
    return {(WINDOWS[w], s, c): v for (w, s), clients in cells.items() for c, v in clients.items()}


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(sequence=batches)
def test_stored_usage_follows_the_cell_rules(tmp_path_factory, sequence):
    folder = tmp_path_factory.mktemp("cells")
    engine = open_engine(resolve_settings(db=f"sqlite:///{folder / 'tc.db'}", environ={}),
                         create=True)  # fmt: skip
    upgrade(engine)
    store = Store(engine, DataDir(str(folder / "data")))
    for number, (mode, rows) in enumerate(sequence):
        frame = pd.DataFrame(
            [(WINDOWS[w], WINDOWS[w] + HOUR, s, c, float(v), 1.0)
             for (w, s, c), v in rows.items()],
            columns=["window_start", "window_end", "service", "client", "requests", "cpu"],
        )  # fmt: skip
        path = folder / f"batch-{number}.parquet"
        frame.to_parquet(path, index=False)
        ingest_usage(store, [path], period=None, mode=mode, actor="test")
    con = connect()
    source = stored_usage(store, DAY, con)
    engine.dispose()
    assert source is not None
    stored = con.execute(source.relation(con)).df()
    got = {
        (pd.Timestamp(r.window_start), r.service, r.client): r.requests
        for r in stored.itertuples(index=False)
    }
    assert len(got) == len(stored)  # each (window, service, client) once
    assert got == {k: float(v) for k, v in model(sequence).items()}


def test_model_sanity() -> None:
    """The model itself: a replace empties the cell, a sum adds."""
    first = {(0, "api", "a"): 1, (0, "api", "b"): 2}
    assert model([("replace", first), ("replace", {(0, "api", "a"): 5})]) == {
        (WINDOWS[0], "api", "a"): 5
    }
    assert model([("replace", first), ("sum", {(0, "api", "a"): 5})]) == {
        (WINDOWS[0], "api", "a"): 6,
        (WINDOWS[0], "api", "b"): 2,
    }
    assert Path(__file__).name == "test_store_ingest_cells.py"
