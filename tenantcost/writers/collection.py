"""The ``collect`` command's summary: one line per OpenCost request and a total line.

``tenantcost.collect`` fetches and saves the responses; showing what was fetched is a writer's
job, in the same table form and amount format as every other text output
(``tenantcost.writers.text``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tenantcost.config.sources import OpenCostSource
from tenantcost.timefmt import iso_z_seconds
from tenantcost.writers.text import money, render_table

if TYPE_CHECKING:  # the API client (requests, urllib3) is imported only when costs come from it
    from tenantcost.readers.opencost_api import Collection


def collect_summary(source: OpenCostSource, collection: Collection) -> str:
    """One line per request (window, steps, rows, total, saved file) and a total line."""
    rows = [
        [
            f"[{iso_z_seconds(r.start)}, {iso_z_seconds(r.end)})",
            str(r.steps),
            str(r.empty_steps),
            str(r.rows),
            money(r.total_micros),
            str(r.file) if r.file is not None else "-",
        ]
        for r in collection.responses
    ]
    rows.append(
        [
            "total",
            str(collection.steps),
            str(collection.empty_steps),
            str(len(collection.costs)),
            money(sum(r.total_micros for r in collection.responses)),
            "",
        ]
    )
    title = (
        f"OpenCost {source.url}/allocation/compute: {len(collection.responses)} request(s), "
        f"step {source.step}, aggregate {source.aggregate}"
    )
    table = render_table(
        ["window", "steps", "no data", "rows", "total cost", "saved as"], rows, {1, 2, 3, 4}
    )
    return f"{title}\n\n{table}"
