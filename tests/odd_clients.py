"""A store whose clients have ids that break naive URLs and headers, for the route tests.

The bundled example (``client-a``, ``client-b``, ``client-c``) with three more clients in the
same hour: ``team/a`` (a ``/``), ``客户`` (outside Latin-1) and ``a~b`` (the tilde encoding's
own escape character), then run and closed (revision 1) like the other service tests' store.
"""

from __future__ import annotations

import csv
from pathlib import Path

from .service_server import EXAMPLE, MONTH, tenantcost

ODD_CLIENTS = ("team/a", "客户", "a~b")
ODD_TOKEN = "am-odd"
"""The account manager of exactly the odd clients."""


def odd_client_store(db: str, data: str, folder: Path) -> None:
    """The example plus :data:`ODD_CLIENTS`, ingested, run and closed in the store ``db``."""
    usage = folder / "usage.csv"
    with (EXAMPLE / "usage.csv").open(newline="", encoding="utf-8") as source:
        rows = list(csv.reader(source))
    window = rows[1][:2]
    with usage.open("w", newline="", encoding="utf-8") as sink:
        writer = csv.writer(sink)
        writer.writerows(rows)
        for n, client in enumerate(ODD_CLIENTS, start=1):
            writer.writerow([*window, "api", client, str(100 * n), str(n)])
    store = ("--db", db, "--data", data)
    tenantcost("db", "upgrade", *store)
    tenantcost("rules", "load", str(EXAMPLE / "rules.yaml"), *store)
    tenantcost("ingest", "usage", "--usage", str(usage), *store)
    tenantcost("ingest", "costs", "--costs", str(EXAMPLE / "costs.json"), *store)
    tenantcost("run", "--month", MONTH, *store)
    tenantcost("close", "--month", MONTH, "--allow-incomplete", *store)
