"""The OpenCost JSON reader's column-wise fast path gives the exact path's table, and on any
unusual value the same one-line error (the exact path names the JSON path)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tenantcost.errors import InputError
from tenantcost.readers.opencost_json import (
    _steps,
    exact_frame,
    fast_frame,
    parse_allocation_response,
)

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
NUMBERS = st.sampled_from([0, 0.0, -0.0, 1, 0.17694, 1e-05, 12.5, 999_999_999.0]) | st.floats(
    min_value=0, max_value=1e6
)
ODD_VALUES: st.SearchStrategy[Any] = st.sampled_from([
    None, True, "1.5", -1.0, float("nan"), float("inf"), -float("inf"), 10**400, 2 * 10**9,
    [], {}, "2026-11-01", "not a time", 7, "Zürich",
])
FIELDS = [
    "totalCost", "cpuCost", "cpuCostAdjustment", "ramCost", "ramCostAdjustment", "gpuCost",
    "pvCost", "networkCost", "loadBalancerCost", "sharedCost", "externalCost",
]


def _allocation(hour: int, name: str, total: float, cpu: float, adjust: float) -> dict[str, Any]:
    start, end = f"2026-11-01T{hour:02d}:00:00Z", f"2026-11-01T{hour + 1:02d}:00:00Z"
    return {
        "name": name,
        "properties": {"cluster": "c1", "namespace": "saas", "controllerKind": "deployment",
                       "controller": name.split(":")[-1], "labels": {"team": "a"}},
        "window": {"start": start, "end": end},
        "start": start, "end": end,
        "cpuCost": cpu, "cpuCostAdjustment": adjust, "ramCost": total - cpu, "gpuCost": 0,
        "sharedCost": 0.0, "totalCost": total,
    }


@st.composite
def payloads(draw: st.DrawFn, edits: bool = True) -> dict[str, Any]:
    """A valid response of 1–3 steps, then (with ``edits``) 0–3 edits that may make it odd
    or wrong."""
    steps: list[Any] = []
    for hour in range(draw(st.integers(1, 3))):
        step: dict[str, Any] = {}
        for n in range(draw(st.integers(0, 4))):
            name = f"saas/deployment:{draw(st.sampled_from(['api', 'db', 'w{x}', 'q']))}{n}"
            total = draw(NUMBERS)
            step[name] = _allocation(hour, name, total, total / 2, draw(NUMBERS) / 1e6)
        keep: bool = draw(st.booleans())
        steps.append(step if step or keep else None)
    payload = {"code": 200, "status": "success", "data": steps}
    allocations = [a for s in steps if s for a in s.values()]
    for _ in range(draw(st.integers(0, 3)) if allocations and edits else 0):
        target = draw(st.sampled_from(allocations))
        where = draw(st.sampled_from(["field", "drop", "window", "properties", "labels", "name"]))
        value = draw(ODD_VALUES)
        if where == "field":
            target[draw(st.sampled_from(FIELDS))] = value
        elif where == "drop":
            target.pop(draw(st.sampled_from([*FIELDS, "window", "name", "properties"])), None)
        elif where == "window":
            target["window"] = value if draw(st.booleans()) else {"start": value, "end": None}
        elif where == "properties":
            target["properties"] = value if draw(st.booleans()) else {"namespace": value}
        elif where == "labels":
            target["properties"] = {"labels": value if draw(st.booleans()) else {"k": value}}
        else:
            target["name"] = value
    return payload


def _outcome(run: Any) -> pd.DataFrame | str:
    try:
        frame: pd.DataFrame = run()
    except InputError as exc:
        return str(exc)
    return frame


@settings(max_examples=300, deadline=None)
@given(payloads())
def test_fast_and_exact_paths_agree(payload: dict[str, Any]) -> None:
    steps, prefix = _steps(payload, "costs.json")
    exact = _outcome(lambda: exact_frame(copy.deepcopy(steps), prefix, "costs.json"))
    both = _outcome(lambda: parse_allocation_response(payload, "costs.json"))
    if isinstance(exact, str):
        assert both == exact
    else:
        assert isinstance(both, pd.DataFrame)
        pd.testing.assert_frame_equal(both, exact)


@settings(max_examples=100, deadline=None)
@given(payloads(edits=False))
def test_plain_documents_take_the_fast_path(payload: dict[str, Any]) -> None:
    """A valid document is read by the fast path (not only by the fallback)."""
    steps, prefix = _steps(payload, "costs.json")
    fast = fast_frame(steps, prefix, "costs.json")
    assert fast is not None
    pd.testing.assert_frame_equal(fast, exact_frame(steps, prefix, "costs.json"))


def test_the_bundled_example_takes_the_fast_path() -> None:
    path = str(EXAMPLES / "saas-three-clients" / "costs.json")
    payload = json.loads(Path(path).read_text(encoding="utf-8-sig"))
    steps, prefix = _steps(payload, path)
    fast = fast_frame(steps, prefix, path)
    assert fast is not None and len(fast) > 0
    pd.testing.assert_frame_equal(fast, exact_frame(steps, prefix, path))


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        ({"totalCost": None}, "data[0]['a'].totalCost: totalCost is null"),
        ({"cpuCost": "1.5"}, "data[0]['a'].cpuCost: expected a number, got string '1.5'"),
        ({"window": {"start": "soon", "end": "2026-11-01T01:00:00Z"}},
         "data[0]['a'].window.start: cannot read timestamp 'soon'"),
    ],
)
def test_errors_name_the_json_path(edit: dict[str, Any], message: str) -> None:
    allocation = {**_allocation(0, "a", 1.0, 0.5, 0.0), **edit}
    payload = {"code": 200, "data": [{"a": allocation}, {"b": _allocation(1, "b", 1.0, 0.5, 0)}]}
    with pytest.raises(InputError) as error:
        parse_allocation_response(payload, "costs.json")
    assert str(error.value).startswith(f"costs.json, {message}")
