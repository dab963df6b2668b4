"""Reader for OpenCost Allocation API responses (``/allocation`` and ``/allocation/compute``).

The response is ``{"code": 200, "status": "success", "data": [step, ...]}`` where each step maps
allocation name to allocation object (one map per ``step``); a bare list of step maps (the
``data`` value saved on its own) is accepted too. Each allocation becomes one cost-table row.

Places in error messages and the ``origin`` column are JSON paths into the document, e.g.
``data[0]['saas/deployment:api'].totalCost`` (``[0]['...']`` for a bare list), because JSON has
no meaningful row numbers and the path is what ``jq`` or an editor search needs.
"""

from __future__ import annotations

import json
import math
from itertools import repeat
from operator import is_
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from tenantcost.errors import InputError
from tenantcost.instants import parse_instants
from tenantcost.limits import MAX_COST_PER_ROW
from tenantcost.money import amount_problem
from tenantcost.readers.canonical import conform_costs, validate_costs
from tenantcost.tables import LABEL_PREFIX

PROPERTY_FIELDS = {
    "cluster": "cluster",
    "node": "node",
    "namespace": "namespace",
    "controller_kind": "controllerKind",
    "controller": "controller",
    "pod": "pod",
}
"""Cost-table column -> ``properties`` field. Controller names come from properties (plain
name), not from the allocation name (``kind:name`` when aggregated by controller)."""

COMPONENT_FIELDS: dict[str, tuple[str, str | None]] = {
    "cpu_cost": ("cpuCost", "cpuCostAdjustment"),
    "gpu_cost": ("gpuCost", "gpuCostAdjustment"),
    "ram_cost": ("ramCost", "ramCostAdjustment"),
    "pv_cost": ("pvCost", "pvCostAdjustment"),
    "network_cost": ("networkCost", "networkCostAdjustment"),
    "load_balancer_cost": ("loadBalancerCost", "loadBalancerCostAdjustment"),
    "shared_cost": ("sharedCost", None),
    "external_cost": ("externalCost", None),
}
"""Cost-table component -> (OpenCost cost field, its adjustment field). OpenCost's totalCost
includes the adjustments, so the components must too for them to add up to the total."""


def read_opencost_json(path: str | Path) -> pd.DataFrame:
    """Read a saved OpenCost Allocation API response (JSON file) into a cost table."""
    file = str(path)
    try:
        with open(path, encoding="utf-8-sig") as handle:
            content = handle.read()
    except FileNotFoundError:
        raise InputError("file not found", file=file) from None
    except UnicodeDecodeError as exc:
        raise InputError(f"not UTF-8 text ({exc.reason})", file=file) from None
    except OSError as exc:
        raise InputError(f"cannot read file: {exc.strerror}", file=file) from None
    try:
        payload = json.loads(content)
    except json.JSONDecodeError as exc:
        raise InputError(
            f"invalid JSON: {exc.msg}",
            file=file,
            where=f"line {exc.lineno}, column {exc.colno}",
        ) from None
    return parse_allocation_response(payload, file)


def parse_allocation_response(payload: object, origin: str) -> pd.DataFrame:
    """Turn a decoded Allocation API response into a validated cost table.

    ``origin`` names the source (normally the file path) in messages and in the ``origin``
    column. Null or empty steps are skipped (OpenCost returns them for steps with no data);
    unknown fields are ignored so newer OpenCost versions keep working.
    """
    steps, prefix = _steps(payload, origin)
    fast = fast_frame(steps, prefix, origin)
    return fast if fast is not None else exact_frame(steps, prefix, origin)


def exact_frame(steps: list[Any], prefix: str, origin: str) -> pd.DataFrame:
    """The cost table, one allocation at a time: every check in document order, so the first
    problem is reported with its JSON path (:func:`fast_frame` falls back to this)."""
    collected = _Collected()
    for index, step in enumerate(steps):
        step_path = f"{prefix}[{index}]"
        if step is None or step == {}:
            continue
        if not isinstance(step, dict):
            raise InputError(
                f"expected an object mapping allocation names to allocations, got {_kind(step)}",
                file=origin,
                where=step_path,
            )
        for key, allocation in step.items():
            collected.add(f"{step_path}[{key!r}]", str(key), allocation, origin)
    return collected.frame(origin)


def _steps(payload: object, origin: str) -> tuple[list[Any], str]:
    """The list of step maps and the JSON path prefix to report them under."""
    if isinstance(payload, list):
        return payload, ""
    if not isinstance(payload, dict):
        raise InputError(
            f"expected an OpenCost allocation response object, got {_kind(payload)}",
            file=origin,
        )
    code = payload.get("code")
    message = payload.get("message")
    failed = code is not None and str(code) != "200"
    if failed or (message and payload.get("data") is None):
        details = " ".join(str(message).split()) if message else "no message"
        raise InputError(
            f"OpenCost returned an error (code {code}): {details}",
            file=origin,
            where="code" if failed else "message",
        )
    if "data" not in payload:
        raise InputError(
            "not an OpenCost allocation response: no 'data' field "
            '(expected {"code": 200, "status": "success", "data": [...]})',
            file=origin,
        )
    data = payload["data"]
    if data is None:
        return [], "data"
    if not isinstance(data, list):
        raise InputError(
            f"expected a list of step maps, got {_kind(data)}", file=origin, where="data"
        )
    return data, "data"


class _Collected:
    """Column lists filled one allocation at a time, turned into one DataFrame at the end."""

    def __init__(self) -> None:
        self.paths: list[str] = []
        self.names: list[str] = []
        self.starts: list[str] = []
        self.start_paths: list[str] = []
        self.ends: list[str] = []
        self.end_paths: list[str] = []
        self.properties: dict[str, list[str]] = {c: [] for c in PROPERTY_FIELDS}
        self.labels: list[dict[str, str]] = []
        self.totals: list[float] = []
        self.components: dict[str, list[float]] = {c: [] for c in COMPONENT_FIELDS}

    def add(self, path: str, key: str, allocation: object, origin: str) -> None:
        """Validate one allocation object and append its values."""
        if not isinstance(allocation, dict):
            raise InputError(
                f"expected an allocation object, got {_kind(allocation)}",
                file=origin,
                where=path,
            )
        name = allocation.get("name")
        self.names.append(name if isinstance(name, str) else key)
        self.paths.append(path)

        start, start_path = _window_edge(allocation, "start", path, origin)
        end, end_path = _window_edge(allocation, "end", path, origin)
        self.starts.append(start)
        self.start_paths.append(start_path)
        self.ends.append(end)
        self.end_paths.append(end_path)

        properties = allocation.get("properties")
        if properties is None:
            properties = {}
        if not isinstance(properties, dict):
            raise InputError(
                f"expected an object, got {_kind(properties)}",
                file=origin,
                where=f"{path}.properties",
            )
        for column, field in PROPERTY_FIELDS.items():
            value = properties.get(field)
            self.properties[column].append("" if value is None else str(value))
        labels = properties.get("labels")
        if labels is None:
            labels = {}
        if not isinstance(labels, dict):
            raise InputError(
                f"expected an object, got {_kind(labels)}",
                file=origin,
                where=f"{path}.properties.labels",
            )
        self.labels.append({str(k): "" if v is None else str(v) for k, v in labels.items()})

        self.totals.append(_total_cost(allocation, path, origin))
        for column, (field, adjustment_field) in COMPONENT_FIELDS.items():
            value = _number(allocation, field, path, origin)
            adjustment = (
                _number(allocation, adjustment_field, path, origin) if adjustment_field else None
            )
            base = math.nan if value is None else value
            self.components[column].append(base + (adjustment or 0.0))

    def frame(self, origin: str) -> pd.DataFrame:
        """One DataFrame built column-wise; windows parsed in one vectorised call."""
        columns: dict[str, object] = {
            "window_start": _parse_times(self.starts, self.start_paths, origin),
            "window_end": _parse_times(self.ends, self.end_paths, origin),
            "name": pd.Series(self.names, dtype="str"),
            **{c: pd.Series(v, dtype="str") for c, v in self.properties.items()},
            "total_cost": pd.Series(self.totals, dtype="float64"),
            "origin": pd.Series([f"{origin}:{p}" for p in self.paths], dtype="str"),
            **{c: pd.Series(v, dtype="float64") for c, v in self.components.items()},
        }
        return _labelled_frame(columns, self.labels)


def _labelled_frame(columns: dict[str, object], labels: list[dict[str, str]]) -> pd.DataFrame:
    """The cost table of the columns plus one column per label key; conformed and validated."""
    for key in sorted({k for one in labels for k in one}):
        columns[LABEL_PREFIX + key] = pd.Series([one.get(key, "") for one in labels], dtype="str")
    frame = conform_costs(pd.DataFrame(columns))
    validate_costs(frame, total_column="totalCost")
    return frame


def _window_edge(allocation: dict[str, Any], edge: str, path: str, origin: str) -> tuple[str, str]:
    """``window.<edge>``, falling back to the top-level ``<edge>`` field, with its path."""
    window = allocation.get("window")
    if isinstance(window, dict) and window.get(edge) is not None:
        value, where = window[edge], f"{path}.window.{edge}"
    elif allocation.get(edge) is not None:
        value, where = allocation[edge], f"{path}.{edge}"
    else:
        raise InputError(
            f"window {edge} is missing (neither window.{edge} nor {edge} is set)",
            file=origin,
            where=f"{path}.window.{edge}",
        )
    if not isinstance(value, str):
        raise InputError(
            f"expected an RFC 3339 timestamp string, got {_kind(value)}",
            file=origin,
            where=where,
        )
    return value, where


def _parse_times(values: list[str], paths: list[str], origin: str) -> pd.Series:
    """RFC 3339 windows, checked as every input's (:mod:`tenantcost.instants`)."""
    return parse_instants(pd.Series(values, dtype="str"), file=origin, place=paths.__getitem__,
                          example="RFC 3339 such as 2026-11-07T00:00:00Z")  # fmt: skip


def _total_cost(allocation: dict[str, Any], path: str, origin: str) -> float:
    """``totalCost``, which must be a finite number >= 0: it is the amount being split."""
    where = f"{path}.totalCost"
    if "totalCost" not in allocation:
        raise InputError("totalCost is missing", file=origin, where=where)
    value = _number(allocation, "totalCost", path, origin, limited=False)
    if value is None:
        raise InputError(
            "totalCost is null (OpenCost writes NaN and Inf as null)", file=origin, where=where
        )
    if not math.isfinite(value):
        raise InputError(f"totalCost is not finite: {value}", file=origin, where=where)
    if value < 0:
        raise InputError(f"totalCost is negative: {value}", file=origin, where=where)
    if value > MAX_COST_PER_ROW:
        raise InputError(amount_problem(value), file=origin, where=where)
    return value


def _number(
    allocation: dict[str, Any], field: str, path: str, origin: str, *, limited: bool = True
) -> float | None:
    """A numeric field as float, ``None`` when absent or null; anything else is an error.

    ``limited``: infinite values and values beyond
    :data:`~tenantcost.limits.MAX_COST_PER_ROW` are errors too (the caller checks them itself
    when it words them its own way).
    """
    value = allocation.get(field)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InputError(
            f"expected a number, got {_kind(value)} {value!r}",
            file=origin,
            where=f"{path}.{field}",
        )
    huge = isinstance(value, int) and abs(value) > MAX_COST_PER_ROW  # 10**400: no double
    if huge or (limited and (math.isinf(value) or abs(value) > MAX_COST_PER_ROW)):
        # Refused here, with its JSON path, before it can become a wrapped micro-unit amount;
        # NaN passes (OpenCost's "not reported").
        raise InputError(amount_problem(value), file=origin, where=f"{path}.{field}")
    return float(value)


def _kind(value: object) -> str:
    """JSON type name of a decoded value, for messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


# The fast path: the same table, column by column. A month of a large cluster has hundreds of
# thousands of allocations; checking and appending one at a time costs ~10 µs each. Each check
# below covers a whole column at once and only says whether all values are plain; anything
# unusual (and every error) returns None, and the exact path then reads the document again and
# names the first problem with its JSON path.

_NONE = type(None)


def fast_frame(steps: list[Any], prefix: str, origin: str) -> pd.DataFrame | None:
    """The cost table :func:`exact_frame` makes, built column-wise, or None when any value
    is not plain (then the exact path decides: an error, or the same table the slow way)."""
    found = _fast_allocations(steps, prefix, origin)
    if found is None:
        return None
    allocations, keys, origins = found
    if not all(map(isinstance, allocations, repeat(dict))):
        return None
    columns = _fast_columns(allocations, keys)
    properties = _fast_properties(allocations)
    if columns is None or properties is None:
        return None
    property_columns, labels = properties
    return _labelled_frame(
        {
            "window_start": columns["window_start"],
            "window_end": columns["window_end"],
            "name": columns["name"],
            **property_columns,
            "total_cost": columns["total_cost"],
            "origin": pd.Series(origins, dtype="str"),
            **{c: columns[c] for c in COMPONENT_FIELDS},
        },
        labels,
    )


def _fast_allocations(
    steps: list[Any], prefix: str, origin: str
) -> tuple[list[Any], list[str], list[str]] | None:
    """All allocations, their keys and ``origin`` values, one ``extend`` per step."""
    allocations: list[Any] = []
    keys: list[str] = []
    origins: list[str] = []
    for index, step in enumerate(steps):  # one step per window, not per allocation
        if step is None or step == {}:
            continue
        if not isinstance(step, dict) or not all(map(isinstance, step, repeat(str))):
            return None
        place = f"{origin}:{prefix}[{index}]".replace("{", "{{").replace("}", "}}")
        origins.extend(map((place + "[{!r}]").format, step))
        keys.extend(step)
        allocations.extend(step.values())
    return allocations, keys, origins


def _plain(values: list[Any], types: set[type]) -> bool:
    return set(map(type, values)) <= types


def _floats(values: list[Any]) -> np.ndarray | None:
    """Numbers (``None`` as NaN) as float64, or None if one is not a plain JSON number."""
    if not _plain(values, {int, float, _NONE}):
        return None
    try:
        return np.array(values, dtype="float64")
    except OverflowError:  # an integer beyond any double
        return None


def _fast_times(windows: list[Any], edge: str) -> pd.Series | None:
    values = list(map(dict.get, windows, repeat(edge)))
    if not _plain(values, {str}):
        return None
    try:
        return parse_instants(pd.Series(values, dtype="str"))
    except InputError:  # the exact path names the allocation
        return None


def _fast_columns(allocations: list[dict[str, Any]], keys: list[str]) -> dict[str, Any] | None:
    """Windows, names, total and components, each checked as a column."""
    get = dict.get
    windows = list(map(get, allocations, repeat("window")))
    if not all(map(isinstance, windows, repeat(dict))):
        return None
    columns: dict[str, Any] = {
        "window_start": _fast_times(windows, "start"),
        "window_end": _fast_times(windows, "end"),
    }
    names = list(map(get, allocations, repeat("name")))
    if not _plain(names, {str}):  # a name that is not a string: the key instead
        names = [n if isinstance(n, str) else k for n, k in zip(names, keys, strict=True)]
    columns["name"] = pd.Series(names, dtype="str")
    totals = _floats(list(map(get, allocations, repeat("totalCost"))))
    if totals is None or not np.all((totals >= 0) & (totals <= MAX_COST_PER_ROW)):
        return None  # NaN fails both: null or missing totalCost is an error
    columns["total_cost"] = pd.Series(totals, dtype="float64")
    for column, (field, adjustment_field) in COMPONENT_FIELDS.items():
        component = _fast_component(allocations, field, adjustment_field)
        if component is None:
            return None
        columns[column] = pd.Series(component, dtype="float64")
    if any(columns[c] is None for c in ("window_start", "window_end")):
        return None
    return columns


def _fast_component(
    allocations: list[dict[str, Any]], field: str, adjustment_field: str | None
) -> np.ndarray | None:
    """``value + (adjustment or 0.0)`` of :meth:`_Collected.add`, for a whole column."""
    base = _floats(list(map(dict.get, allocations, repeat(field))))
    if base is None:
        return None
    adjustment = np.zeros(len(base))
    if adjustment_field is not None:
        raw = list(map(dict.get, allocations, repeat(adjustment_field)))
        given = _floats(raw)
        if given is None:
            return None
        absent = np.fromiter(map(is_, raw, repeat(None)), dtype=bool, count=len(raw))
        adjustment = np.where(absent | (given == 0), 0.0, given)  # `adjustment or 0.0`
    both = np.concatenate([base, adjustment])
    if np.isinf(both).any() or (np.abs(both[~np.isnan(both)]) > MAX_COST_PER_ROW).any():
        return None
    result: np.ndarray = base + adjustment
    return result


def _fast_properties(
    allocations: list[dict[str, Any]],
) -> tuple[dict[str, pd.Series], list[dict[str, str]]] | None:
    """Property columns (plain strings or null) and each allocation's labels."""
    empty: dict[str, Any] = {}
    raw = map(dict.get, allocations, repeat("properties"))
    properties = [empty if p is None else p for p in raw]
    if not all(map(isinstance, properties, repeat(dict))):
        return None
    columns: dict[str, pd.Series] = {}
    for column, field in PROPERTY_FIELDS.items():
        values = list(map(dict.get, properties, repeat(field)))
        if not _plain(values, {str, _NONE}):
            return None
        series = pd.Series(values, dtype=object)
        columns[column] = pd.Series(series.where(series.notna(), ""), dtype="str")
    raw_labels = list(map(dict.get, properties, repeat("labels")))
    if not _plain(raw_labels, {dict, _NONE}):
        return None
    labels = [
        {str(k): "" if v is None else str(v) for k, v in one.items()} if one else {}
        for one in raw_labels
    ]
    return columns, labels
