"""Small builders for canonical tables and rule sets, so tests state only what matters."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pandas as pd
import yaml

from tenantcost.config.rules import RuleSet, parse_rules
from tenantcost.tables import COST_PROPERTY_COLUMNS

T0 = pd.Timestamp("2026-11-01T00:00:00Z")


def hour(i: int) -> tuple[pd.Timestamp, pd.Timestamp]:
    """The i-th hour of November 2026 as (start, end)."""
    start = T0 + pd.Timedelta(hours=i)
    return start, start + pd.Timedelta(hours=1)


def costs(rows: Iterable[dict[str, Any]]) -> pd.DataFrame:
    """A canonical cost table; each row gives ``h`` (hour index) or windows, properties, cost."""
    records = []
    for n, row in enumerate(rows):
        row = dict(row)
        start, end = hour(row.pop("h", 0))
        rec: dict[str, Any] = {
            "window_start": row.pop("window_start", start),
            "window_end": row.pop("window_end", end),
            **{c: "" for c in COST_PROPERTY_COLUMNS},
            "origin": f"costs.csv:row {n + 2}",
        }
        rec.update(row)
        if not rec["name"]:
            rec["name"] = f"{rec['namespace']}/{rec['controller']}"
        records.append(rec)
    frame = pd.DataFrame.from_records(records)
    for c in [*COST_PROPERTY_COLUMNS, "origin"]:
        frame[c] = frame[c].astype("str")
    frame["total_cost"] = frame["total_cost"].astype("float64")
    for c in ("window_start", "window_end"):
        frame[c] = pd.to_datetime(frame[c], utc=True).astype("datetime64[ns, UTC]")
    return frame


def usage(rows: Iterable[dict[str, Any]], metrics: tuple[str, ...] = ("requests", "cpu_seconds")
          ) -> pd.DataFrame:
    """A canonical usage table; each row gives ``h``, service, client and metric values."""
    records = []
    for n, row in enumerate(rows):
        row = dict(row)
        start, end = hour(row.pop("h", 0))
        rec: dict[str, Any] = {"window_start": start, "window_end": end, "client": ""}
        rec.update({m: 0.0 for m in metrics})
        rec.update(row)
        rec["origin"] = f"usage.csv:row {n + 2}"
        records.append(rec)
    frame = pd.DataFrame.from_records(
        records, columns=["window_start", "window_end", "service", "client", *metrics, "origin"]
    )
    for c in ("service", "client", "origin"):
        frame[c] = frame[c].astype("str")
    for m in metrics:
        frame[m] = frame[m].astype("float64")
    for c in ("window_start", "window_end"):
        frame[c] = pd.to_datetime(frame[c], utc=True).astype("datetime64[ns, UTC]")
    return frame


def rules(text: str) -> RuleSet:
    """A rule set from YAML text."""
    return parse_rules(yaml.safe_load(text), origin="rules.yaml")


BASIC_RULES = """
currency: USD
rules:
  - id: v1
    effective_from: "2026-11-01"
    workloads:
      - {match: {namespace: saas, controller: api}, class: shared, service: api, key: requests}
      - {match: {namespace: saas, controller: worker}, class: shared, service: worker,
         key: cpu_seconds}
      - {match: {namespace: "tenant-*"}, class: direct, client_from: namespace}
      - {match: {controller: reserve}, class: reserve}
      - {match: {controller: proxy}, class: overhead}
      - {match: {namespace: [monitoring]}, class: excluded, reason: platform tooling}
      - {match: {name: __idle__}, class: idle}
    idle: keep
    unmatched: error
"""
