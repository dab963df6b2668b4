"""From the meter to the split: usage measured by ``tenantcost_meter`` in the application,
delivered to a real ``tenantcost serve``, then ``tenantcost run`` on the store, gives the
split the bundled example predicts.

The example's hour (2026-11-03 10:00 UTC, ``examples/saas-three-clients``) is replayed through
the meter's public API: one ``record()`` per request of the example's usage, so ``requests``,
the key of the ``api`` and of the external search service, must give those lines exactly.
The import worker is split by ``cpu_seconds``, which the meter measures: each tenant burns its
example CPU time scaled down 200 times, so its line is within the meter's 10 % of the example's
and the pool is conserved to the unit. The application's clock is set into that hour (the
meter files a request under the UTC hour in which it completes).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from .service_server import EXAMPLE, MONTH, create_token, running_service, tenantcost

METER = Path(__file__).resolve().parents[1] / "meter"
if not any(Path(p).resolve() == METER for p in sys.path if p):  # until `pip install -e ./meter`
    sys.path.insert(0, str(METER))

from tenantcost_meter import Meter, _meter  # noqa: E402

HOUR = pd.Timestamp("2026-11-03T10:20:00Z").timestamp()
SCALE = 200.0
"""The example's CPU seconds are burned divided by this."""


def burn(seconds: float) -> None:
    """Spend ``seconds`` of this thread's CPU time."""
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


def example_split() -> dict[tuple[str, str], int]:
    """(client, source) -> amount of ``allocate`` on the bundled example's own files."""
    out = json.loads(tenantcost("allocate", "--config", str(EXAMPLE / "rules.yaml"),
                                "--format", "json"))  # fmt: skip
    return {(c["client"], line["source"]): int(line["amount"])
            for c in out["clients"] for line in c["lines"]}  # fmt: skip


def test_usage_metered_in_the_application_splits_as_the_example_predicts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db, data = f"sqlite:///{tmp_path / 'store.db'}", str(tmp_path / "data")
    store = ("--db", db, "--data", data)
    tenantcost("db", "upgrade", *store)
    tenantcost("rules", "load", str(EXAMPLE / "rules.yaml"), *store)
    tenantcost("ingest", "costs", "--costs", str(EXAMPLE / "costs.json"), *store)
    token = create_token(db, "ingest", "app")
    usage = pd.read_csv(EXAMPLE / "usage.csv")
    with running_service(db, data, tmp_path / "serve.log") as service:
        monkeypatch.setattr(_meter.time, "time", lambda: HOUR)  # the application's clock
        meters = {name: Meter(service=name, url=service.url, token=token, flush_seconds=3600,
                              spool_dir=tmp_path / f"spool-{name}")
                  for name in ("api", "import-worker")}  # fmt: skip
        for row in usage.itertuples(index=False):
            meter = meters[str(row.service)]
            work = float(row.cpu_seconds) / SCALE if row.service == "import-worker" else 0.0
            per_request = work / int(row.requests)
            for _ in range(int(row.requests)):
                with meter.record(tenant=str(row.client)):
                    if per_request:
                        burn(per_request)
        for meter in meters.values():
            assert meter.flush(timeout=60)
            meter.close()
        monkeypatch.undo()
    assert not [p for n in meters for p in (tmp_path / f"spool-{n}").glob("*.json")]  # delivered

    shown = json.loads(tenantcost("status", "--usage", "--month", MONTH, "--format", "json",
                                  *store))  # fmt: skip
    (month,) = shown["months"]
    stored = {(u["service"], u["client"]): u for u in month["usage"]}
    for row in usage.itertuples(index=False):
        cell = stored[(str(row.service), str(row.client))]
        assert cell["requests"] == int(row.requests)
        if row.service == "import-worker":
            assert cell["cpu_seconds"] == pytest.approx(row.cpu_seconds / SCALE, rel=0.10)

    run = json.loads(tenantcost("run", "--month", MONTH, "--format", "json", *store))
    got = {(c["client"], line["source"]): int(line["amount"])
           for c in run["clients"] for line in c["lines"]}  # fmt: skip
    predicted = example_split()
    assert set(got) == set(predicted)
    for (client, source), amount in predicted.items():
        if source == "import-worker":  # measured CPU (each within 10 %): its shares, 15 %
            assert got[(client, source)] == pytest.approx(amount, rel=0.15), (client, source)
        else:  # keyed by requests, counted exactly
            assert got[(client, source)] == amount, (client, source)
    pool = sum(v for (_, s), v in predicted.items() if s == "import-worker")
    assert sum(v for (_, s), v in got.items() if s == "import-worker") == pool
    assert run["gap"] == 0
