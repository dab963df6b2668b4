"""Month-to-date watch: each client's projection against its budget band, and anomalies.

``tenantcost watch`` (:mod:`tenantcost.cli.watch`, the store's side in
:mod:`tenantcost.store.watch_run`) allocates the hours covered so far and hands this pure core
one table, the **daily figures**:

=============  ======================  =====================================================
column         dtype                   meaning
=============  ======================  =====================================================
client         str                     the client
source         str                     the source of its lines (a workload, an external cost,
                                       ``idle``), as in the allocation's lines
day            datetime64[ns, UTC]     a complete UTC day (midnight)
amount         int64                   micro-units the client carries from the source that day
split          str                     the source's split that day (class, key, services of
                                       the rule version in force; two versions in one day
                                       give a value of its own, comparable with no other day)
has_usage      bool                    the client had usage rows for the source that day
                                       (always true for a direct source: it has no key)
=============  ======================  =====================================================

one row per client, source and day on which the client had a line or usage rows for the
source; a day with neither has no row.

**Anomalies** (the method; docs/watch.md has a worked example): for each client, source and
complete day before ``as_of``, the baseline is the median of the client-source's amounts on
the trailing ``window_days`` days with usage under the **same split**; the scale is
max(1.4826 x MAD, 10 % of |median|, ``min_amount``); score = (amount - median) / scale. A day
is flagged when |score| >= ``threshold`` and |amount - median| >= ``min_amount``, with at
least ``min_days`` baseline days. A day without usage is a gap (a ``no_usage`` warning),
never a drop, and never part of a baseline.

An anomaly's id is a hash of client, source, day and kind (:func:`anomaly_id`): the same
finding has the same id on every run, so ``--notify`` sends it once.
"""

from __future__ import annotations

import hashlib
from enum import StrEnum


class BudgetStatus(StrEnum):
    """Where a client's projected month lands against its budget band."""

    BELOW = "below"
    """Under ``low``."""
    WITHIN = "within"
    """From ``low`` to ``high``, both included."""
    ABOVE = "above"
    """Over ``high``."""
    NO_BUDGET = "no_budget"
    """No budget was loaded for the client and month."""


class AnomalyKind(StrEnum):
    """Which way a flagged day moved from its baseline."""

    SPIKE = "spike"
    DROP = "drop"


class WarningKind(StrEnum):
    """Why a figure of the watch is not (yet) as good as an issued one."""

    NO_USAGE = "no_usage"
    """A client had no usage rows for a source on a day (a gap in its data, not a drop)."""
    NO_COSTS = "no_costs"
    """A complete day of the month has no cost data (month level: no client)."""
    UNBILLED = "unbilled"
    """A day's money is an estimate: billing data does not reach it yet (month level)."""
    NO_DATA = "no_data"
    """The month has no cost data yet: the answer is empty (month level)."""


def anomaly_id(client: str, source: str, day: str, kind: AnomalyKind | str) -> str:
    """The stable id of a finding: the same client, source, day (``YYYY-MM-DD``) and kind give
    the same id on every run and every machine."""
    text = "\x1f".join((client, source, day, str(kind)))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:20]
