"""The metrics an application declares (``Meter(metrics=[...])``): their names and values.

Every batch the meter posts carries the same columns: ``requests``, ``cpu_seconds``
(``bytes_out`` if enabled) and each declared metric, 0 where nothing was counted. The store
compares a batch's columns with the usage it holds, so a column may not come and go with
the traffic: a name must be declared to be counted.

A name is a usage column of the store and a key of the rule file (``key: db_seconds``):
lower-case ASCII letters, digits and ``_``, starting with a letter, at most 63 characters
(the store's rule for metric names, made lower-case).
Lower case only because DuckDB, which reads the store's files, does not tell ``Tokens`` from
``tokens``. The store's key columns (``time``: of gauge samples), the folder key of its files
(``date``), the rule file's word ``even`` and the meter's own columns are refused.

A value is a finite number >= 0 and at most the store's limit for one usage value (1e15): a
negative or infinite weight would make a split meaningless, and the store refuses the whole
batch holding one (every client's usage of that hour with it).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

MAX_NAME = 63
MAX_VALUE = 1e15
"""The store's largest usage value (``tenantcost.limits.MAX_USAGE_VALUE``)."""

OWN = ("requests", "cpu_seconds", "bytes_out")
"""The meter's own columns: counted by the meter itself, not declared."""
RESERVED = ("window_start", "window_end", "service", "client", "time", "origin", "date", "even")
"""The store's key columns, its files' folder key, and the rule file's ``key: even``."""

_NAME = re.compile(r"[a-z][a-z0-9_]*")


def name_problem(name: object) -> str | None:
    """Why ``name`` cannot be a metric (the end of a sentence), or None if it can."""
    if not isinstance(name, str):
        return f"a metric name is a str, not {type(name).__name__}"
    if not _NAME.fullmatch(name) or len(name) > MAX_NAME:
        return (f"metric name {name!r} is not a usage column name: lower-case letters, digits "
                f"and '_', starting with a letter, at most {MAX_NAME} characters")  # fmt: skip
    if name in OWN:
        return f"'{name}' is a column the meter counts itself, not a metric to declare"
    if name in RESERVED:
        return f"'{name}' is reserved by the store (its key columns, 'date' and 'even')"
    return None


def declared(metrics: Iterable[str]) -> tuple[str, ...]:
    """``metrics`` checked: a list of distinct valid names (ValueError otherwise)."""
    if isinstance(metrics, (str, bytes)):
        raise ValueError(f"metrics is a list of names, not one string: metrics=[{metrics!r}]")
    try:
        names = tuple(metrics)
    except TypeError:
        raise ValueError(f"metrics is a list of names, got {type(metrics).__name__}") from None
    for name in names:
        problem = name_problem(name)
        if problem is not None:
            raise ValueError(f"metrics: {problem}")
    doubled = sorted({name for name in names if names.count(name) > 1})
    if doubled:
        raise ValueError(f"metrics: {', '.join(doubled)} declared twice")
    return names


def undeclared(name: object, names: tuple[str, ...]) -> ValueError:
    """The error for a metric that is not one of ``names``."""
    problem = name_problem(name)
    if problem is not None:
        return ValueError(problem)
    listed = ", ".join(repr(n) for n in names) if names else "none"
    return ValueError(f"metric {name!r} is not declared: declare it with Meter(metrics=[...]) "
                      f"(declared: {listed}); every batch carries the same columns")  # fmt: skip


def value_problem(value: object) -> tuple[float, str | None]:
    """``value`` as a float, and why it cannot be counted (None if it can)."""
    kind = type(value)
    if (
        kind is not float
        and kind is not int
        and (isinstance(value, (bool, str, bytes)) or not hasattr(value, "__float__"))
    ):
        return 0.0, f"a {kind.__name__} is not a number"
    try:
        number = float(value)  # type: ignore[arg-type]
    except OverflowError:
        return 0.0, f"an int over {MAX_VALUE:g}, the store's limit for one value"
    except (TypeError, ValueError) as error:
        return 0.0, f"a {kind.__name__} that float() refuses ({type(error).__name__})"
    if number >= 0 and number <= MAX_VALUE:
        return number, None
    if number != number:
        return 0.0, "NaN is not a number"
    if number < 0:
        return 0.0, f"{number!r} is negative"
    return 0.0, f"{number!r} is over {MAX_VALUE:g}, the store's limit for one value"
