"""The closed vocabularies of an allocation: cost classes, line kinds, causes, detail levels.

Each is a :class:`enum.StrEnum`, so a member *is* its string: it compares equal to the old
bare string (``CostClass.SHARED == "shared"``), lands in pandas ``str`` columns and in JSON and
CSV outputs as exactly that string, and DuckDB SQL can embed it. What the enums add is one
place that lists every value, so a typo is a name error instead of a silently empty filter,
and ``mypy`` can tell a line kind from a cost class.

The rule file's pydantic models keep their ``Literal`` types (``tenantcost.config.rules``);
those are the user-facing spelling of the same classes, and the JSON Schema is generated
from them.
"""

from __future__ import annotations

from enum import StrEnum


class CostClass(StrEnum):
    """What a workload entry does with a cost row (``class:`` in the rule file), plus
    ``unclassified`` for rows no entry matched."""

    SHARED = "shared"
    """Split over the clients by the entry's key."""
    DIRECT = "direct"
    """Carried by one client (``client:``, or the property named by ``client_from:``)."""
    IDLE = "idle"
    """Unused capacity: residual, or distributed to the clients per the rule's ``idle:``."""
    OVERHEAD = "overhead"
    """Residual: the platform's own cost."""
    RESERVE = "reserve"
    """Residual: capacity held back on purpose."""
    EXCLUDED = "excluded"
    """Outside the allocation, with a reason."""
    UNCLASSIFIED = "unclassified"
    """Matched no workload entry (only with ``unmatched: unattributed``)."""


RESIDUAL_CLASSES: tuple[CostClass, ...] = (CostClass.IDLE, CostClass.OVERHEAD, CostClass.RESERVE)
"""The classes that form the residual of the cascade, in cascade order."""


class LineKind(StrEnum):
    """Where a client line's money comes from (the ``kind`` column of lines and
    unattributed cost)."""

    SHARED = "shared"
    """A keyed part of a shared workload's cost."""
    EXTERNAL = "external"
    """A keyed part of an external cost (the rule's ``external:`` list)."""
    DIRECT = "direct"
    """A direct workload's cost, whole."""
    IDLE = "idle"
    """A part of the window's idle, distributed by the rule's ``idle:`` method."""
    BILLED = "billed"
    """A keyed part of a billed line outside the clusters (a version's ``billed:`` list)."""


KEYED_KINDS: tuple[LineKind, ...] = (LineKind.SHARED, LineKind.EXTERNAL, LineKind.BILLED)
"""The kinds split by a usage key: together they are the *pool*, identical under every key."""


class Cause(StrEnum):
    """Why a cost is unattributed (the ``cause`` column)."""

    NO_USAGE = "no usage in window"
    """A keyed pool whose services had no positive measure in the window."""
    NO_CLIENT = "usage without client id"
    """The part of a keyed pool that went to usage rows without a client id."""
    NO_CLIENT_PROPERTY = "direct workload without client property"
    """A direct row whose ``client_from:`` property is empty or missing."""


class Detail(StrEnum):
    """How fine the lines of a result are."""

    WINDOW = "window"
    """One line per client, source and window (small runs and tests)."""
    PERIOD = "period"
    """One line per client and source over the period, with a ``windows`` count."""


class KeyKind(StrEnum):
    """How a key measures a client (the ``key_kind`` of a split spec)."""

    COLUMN = "column"
    """A usage metric column, summed (``requests``, ``cpu_seconds``, ...)."""
    EVEN = "even"
    """One share per client with any positive usage."""
    WEIGHTS = "weights"
    """The rule's contract weights, for clients with any positive usage."""


class CascadeKind(StrEnum):
    """The groups of the reconciliation cascade's lines (``tenantcost.reconcile``)."""

    CLIENTS = "clients"
    UNATTRIBUTED = "unattributed"
    RESIDUAL = "residual"
    EXCLUSION = "exclusion"
    UNCLASSIFIED = "unclassified"
