"""The planning steps, one by one, and the lines sink the core streams window-level lines to."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pandas as pd
import pytest

from tenantcost.allocate import allocate, allocate_stream
from tenantcost.classify import classify
from tenantcost.engine.chunks import LinePartWriter
from tenantcost.engine.lines_csv import LinesCsvFile
from tenantcost.plan import (
    assign_versions,
    attach_entries,
    classify_costs,
    plan_allocation,
    select_costs,
    spec_tables,
)
from tenantcost.usage_source import FrameUsage

from .factories import BASIC_RULES, costs, rules, usage

API = {"namespace": "saas", "controller": "api"}
EXTERNAL = BASIC_RULES + """    external:
      - {name: search, amount: 0.065, per: hour, key: even}
      - {name: db, amount: 720, per: month, key: {weights: {a: 2, b: 1}}, services: [api]}
"""


def test_unmatched_rows_are_missing_entries_not_minus_one() -> None:
    c = costs([{**API, "total_cost": 1.0}, {"namespace": "elsewhere", "total_cost": 2.0}])
    c["version"] = 0
    entry = classify(c, rules(BASIC_RULES))
    assert str(entry.dtype) == "Int64"
    assert entry.iloc[0] == 0 and entry.isna().tolist() == [False, True]


def test_attach_entries_names_class_and_rule_of_every_row() -> None:
    ruleset = rules(BASIC_RULES.replace("unmatched: error", "unmatched: unattributed"))
    c = costs([{**API, "total_cost": 1.0},
               {"namespace": "tenant-x", "controller": "db", "total_cost": 0.5},
               {"namespace": "elsewhere", "controller": "y", "total_cost": 0.25}])
    frame, _, _ = select_costs(c, None)
    frame = attach_entries(classify_costs(assign_versions(frame, ruleset), ruleset), ruleset)
    assert frame["class"].tolist() == ["shared", "direct", "unclassified"]
    assert frame["rule_id"].tolist() == ["v1", "v1", "v1"]
    assert frame["client_from"].tolist() == ["", "namespace", ""]
    assert frame["amount"].tolist() == [1_000_000, 500_000, 250_000]


def test_pools_number_shared_entries_then_external_costs_per_window() -> None:
    ruleset = rules(EXTERNAL)
    specs = spec_tables(ruleset)
    assert specs.shared[["entry", "spec", "source", "key"]].values.tolist() == [
        [0, 0, "api", "requests"], [1, 1, "worker", "cpu_seconds"]]
    assert specs.external[["external", "spec", "source", "key"]].values.tolist() == [
        [0, 2, "search", "even"], [1, 3, "db", "weights"]]
    assert specs.specs["key_kind"].tolist() == ["column", "column", "even", "weights"]
    assert specs.weights.values.tolist() == [[3, "a", 2_000_000], [3, "b", 1_000_000]]

    c = costs([{**API, "total_cost": 1.0, "h": h} for h in range(2)])
    plan = plan_allocation(c, ruleset, key=None, period=None)
    pools = plan.tables.pools
    assert pools.columns.tolist() == [
        "pool", "window_start", "window_end", "spec", "amount", "rule_id", "source", "kind", "key"]
    assert pools["spec"].tolist() == [0, 2, 3, 0, 2, 3]  # no worker cost: no pool of spec 1
    assert pools["kind"].tolist() == ["shared", "external", "external"] * 2
    assert pools["amount"].tolist() == [1_000_000, 65_000, 1_000_000] * 2
    assert plan.external_total == 2 * (65_000 + 1_000_000)


def test_plan_needs_no_usage_and_keeps_direct_lines_apart() -> None:
    c = costs([{"namespace": "tenant-a", "controller": "db", "total_cost": 0.4, "h": 0},
               {"namespace": "tenant-b", "controller": "db", "total_cost": 0.1, "h": 1}])
    plan = plan_allocation(c, rules(BASIC_RULES), key=None, period=None)
    assert plan.direct_lines["client"].tolist() == ["tenant-a", "tenant-b"]
    start = plan.direct_lines["window_start"].iloc[1]
    assert plan.direct_lines_for(start, plan.period.end)["client"].tolist() == ["tenant-b"]
    assert plan.cost_total == 500_000 and len(plan.cost_windows) == 2


class MemorySink:
    """A lines sink that keeps every chunk's window-level lines in memory (no file at all)."""

    def __init__(self) -> None:
        self.parts: dict[int, pd.DataFrame] = {}
        self.done: list[int] = []

    def part(self, index: int) -> LinePartWriter:
        def write(con: duckdb.DuckDBPyConnection, direct_lines: pd.DataFrame) -> None:
            self.parts[index] = pd.concat(
                [con.execute("SELECT * FROM lines").df(), direct_lines], ignore_index=True
            )

        return write

    def chunk_done(self, index: int) -> None:
        self.done.append(index)


def _inputs() -> tuple[pd.DataFrame, pd.DataFrame]:
    c = costs([{**API, "total_cost": 1.0 + h, "h": h} for h in range(6)]
              + [{"namespace": "tenant-z", "controller": "db", "total_cost": 0.3, "h": 2}])
    u = usage([{"service": "api", "client": cl, "requests": n + h, "h": h}
               for h in range(6) for cl, n in (("a", 1), ("b", 2), ("", 1))])
    return c, u


def test_a_sink_receives_every_window_line_in_chunk_order() -> None:
    c, u = _inputs()
    sink = MemorySink()
    streamed = allocate_stream(c, FrameUsage(u), rules(BASIC_RULES), detail="period",
                               chunk=pd.Timedelta(hours=2), lines_sink=sink)
    assert sink.done == [0, 1, 2] and streamed.chunks == 3
    window = allocate(c, u, rules(BASIC_RULES)).lines
    received = pd.concat(sink.parts.values(), ignore_index=True)
    key = ["window_start", "client", "kind", "source"]
    received = received.sort_values(key, kind="mergesort").reset_index(drop=True)
    assert received["amount"].tolist() == window["amount"].tolist()
    assert received["client"].tolist() == window["client"].tolist()
    assert streamed.lines["amount"].sum() == window["amount"].sum()


def test_lines_csv_file_holds_the_window_lines_once_with_one_header(tmp_path: Path) -> None:
    c, u = _inputs()
    target = tmp_path / "lines.csv"
    allocate_stream(c, FrameUsage(u), rules(BASIC_RULES), chunk=pd.Timedelta(hours=1),
                    lines_out=target)
    written = pd.read_csv(target)
    window = allocate(c, u, rules(BASIC_RULES)).lines
    assert len(written) == len(window)
    assert written["amount_micros"].tolist() == window["amount"].tolist()
    assert written.columns[-2:].tolist() == ["amount", "amount_micros"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["lines.csv"]  # parts deleted


def test_lines_csv_amounts_are_exact_decimals_and_windows_iso_stamps(tmp_path: Path) -> None:
    c, u = _inputs()
    target = tmp_path / "lines.csv"
    allocate_stream(c, FrameUsage(u), rules(BASIC_RULES), lines_out=target)
    text = pd.read_csv(target, dtype=str, keep_default_na=False)
    micros = text["amount_micros"].astype("int64")
    assert text["amount"].tolist() == [f"{m // 10**6}.{m % 10**6:06d}" for m in micros]
    assert text["window_start"].iloc[0] == "2026-11-01T00:00:00Z"
    assert (text["window_start"].str.len() == 20).all()


def test_a_run_that_writes_its_lines_takes_smaller_chunks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """lines.csv's sort holds a chunk's lines whole: auto chunks then hold fewer usage rows
    (``LINES_CHUNK_ROW_BUDGET``), with the same figures."""
    import tenantcost.allocate as allocate_module

    c, u = _inputs()  # 3 usage rows an hour for 6 hours
    monkeypatch.setattr(allocate_module, "CHUNK_ROW_BUDGET", 100)
    monkeypatch.setattr(allocate_module, "LINES_CHUNK_ROW_BUDGET", 6)
    plain = allocate_stream(c, FrameUsage(u), rules(BASIC_RULES))
    written = allocate_stream(
        c, FrameUsage(u), rules(BASIC_RULES), lines_out=tmp_path / "lines.csv"
    )
    assert (plain.chunks, written.chunks) == (1, 3)  # 2-hour chunks of 6 rows
    pd.testing.assert_frame_equal(written.lines, plain.lines)
    assert len(pd.read_csv(tmp_path / "lines.csv")) == 13  # a and b in 6 windows, tenant-z


@pytest.mark.parametrize("kernel_copy", ["works", "refused", "missing"])
def test_parts_are_appended_whole_with_or_without_a_kernel_copy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kernel_copy: str
) -> None:
    import os

    if kernel_copy == "refused":

        def refuse(*args: object) -> int:
            raise OSError(18, "Invalid cross-device link")

        monkeypatch.setattr(os, "copy_file_range", refuse)
    elif kernel_copy == "missing":
        monkeypatch.delattr(os, "copy_file_range", raising=False)
    target = tmp_path / "lines.csv"
    with LinesCsvFile(target) as sink:
        for index, rows in enumerate(["a,1\nb,2\n", "c,3\n" * 50_000]):
            Path(sink.part(index).path).write_text("name,n\n" + rows)
            sink.chunk_done(index)
    assert target.read_text() == "name,n\na,1\nb,2\n" + "c,3\n" * 50_000
    assert sorted(p.name for p in tmp_path.iterdir()) == ["lines.csv"]


def test_lines_csv_file_must_be_opened() -> None:
    from tenantcost.errors import InternalError

    with pytest.raises(InternalError):
        LinesCsvFile(Path("never-written.csv")).chunk_done(0)
