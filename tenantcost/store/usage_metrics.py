"""The kinds of the store's usage columns: the ``metrics:`` of the rule files loaded.

``rules load`` records them; ``ingest usage`` and ``run`` read them (a gauge's samples are
integrated by its ``stale_after``). A name's kind never changes: ``metrics:`` is not versioned,
since a gauge's earlier months would read differently under a counter's rule.
"""

from __future__ import annotations

from sqlalchemy import Connection, insert, select, update

from tenantcost.config.metrics import Metric, MetricKind
from tenantcost.config.rules import RuleSet
from tenantcost.errors import InputError
from tenantcost.store.models import UsageMetric, table, utcnow


def declare_metrics(conn: Connection, ruleset: RuleSet, rule_file_id: int, origin: str) -> None:
    """Record the rule file's ``metrics:``; a kind different from the stored one is refused
    (the kinds are not versioned: a gauge's months would read differently)."""
    if not ruleset.metrics:
        return
    m = table(UsageMetric).c
    stored = {r.name: r.kind for r in conn.execute(select(m.name, m.kind))}
    for name, metric in ruleset.metrics.items():
        values = {"kind": metric.kind.value, "unit": metric.unit,
                  "stale_after": metric.stale_after, "rule_file_id": rule_file_id,
                  "declared_at": utcnow()}  # fmt: skip
        if name not in stored:
            conn.execute(insert(table(UsageMetric)).values(name=name, **values))
        elif stored[name] != metric.kind.value:
            raise InputError(
                f"metrics.{name}.kind: the store holds '{name}' as a {stored[name]}; a metric's "
                "kind does not change (declare the new measure under another name)",
                file=origin,
            )
        else:
            conn.execute(update(table(UsageMetric)).where(m.name == name).values(**values))


def stored_gauges(conn: Connection) -> dict[str, Metric]:
    """The gauges the store's rule files declare, by name."""
    m = table(UsageMetric).c
    rows = conn.execute(
        select(m.name, m.unit, m.stale_after).where(m.kind == "gauge").order_by(m.name)
    )
    return {
        str(r.name): Metric(kind=MetricKind.GAUGE, unit=r.unit, stale_after=r.stale_after)
        for r in rows
    }
