"""The decimals a run's figures are shown with: frozen by its close, else decided now.

A close records the display rule's version and the decimals it chose on its close event
(migration 0025, :mod:`tenantcost.report.display_rule`): every page and sheet of an issued
revision reads them back, so its strings never change with the rule. A run no close issued
(a draft) is shown by the current rule. A revision closed before 0025 recorded nothing and
is shown by version 1, the rule it was shown with then.
"""

from __future__ import annotations

from sqlalchemy import Connection, and_, func, select

from tenantcost.report.display_rule import CURRENT, display_rule
from tenantcost.store.models import MonthEvent, Run, RunClient, table
from tenantcost.store.month_state import MonthAction


def run_places(connection: Connection, run_id: str) -> int:
    """The decimals ``run_id``'s figures are shown with (see the module doc)."""
    e = table(MonthEvent).c
    frozen = connection.execute(
        select(e.display_rule, e.display_places)
        .where(e.run_id == run_id, e.action == MonthAction.CLOSE.value)
        .order_by(e.id)
        .limit(1)
    ).first()
    if frozen is not None and frozen.display_places is not None:
        return int(frozen.display_places)
    return decide_places(connection, run_id, 1 if frozen is not None else CURRENT)


def decide_places(connection: Connection, run_id: str, version: int = CURRENT) -> int:
    """The decimals rule ``version`` gives ``run_id`` now: over its client amounts (one
    aggregate query) and the latest issued month before it in its currency."""
    r, rc = table(Run).c, table(RunClient).c
    run = connection.execute(select(r.month, r.currency).where(r.id == run_id)).first()
    if run is None:
        return display_rule(version).places("", [])
    smallest = connection.execute(
        select(func.min(func.abs(rc.amount))).where(rc.run_id == run_id, rc.amount != 0)
    ).scalar()
    return display_rule(version).places(
        str(run.currency),
        [] if smallest is None else [int(smallest)],
        _before(connection, str(run.month), str(run.currency)),
    )


def _before(connection: Connection, month: str, currency: str) -> int | None:
    """The decimals frozen by the latest close of the latest earlier month, same currency."""
    e, r = table(MonthEvent).c, table(Run).c
    row = connection.execute(
        select(e.display_places)
        .join(table(Run), and_(r.id == e.run_id, r.currency == currency))
        .where(
            e.month < month,
            e.action == MonthAction.CLOSE.value,
            e.display_places.is_not(None),
        )
        .order_by(e.month.desc(), e.id.desc())
        .limit(1)
    ).scalar()
    return None if row is None else int(row)


def freeze(connection: Connection, run_id: str) -> tuple[int, int]:
    """What a close records with its revision: (the current rule's version, its decimals)."""
    return CURRENT, decide_places(connection, run_id, CURRENT)
