"""tenantcost-meter: each client's requests and CPU time per UTC hour and service, and the
metrics the application declares (database time, tokens...), measured in the application and
delivered to tenantcost (``POST /api/v1/usage``). Standard library only.

    from tenantcost_meter import Meter
    meter = Meter(service="api", url="https://tenantcost.internal", token="tc_...",
                  metrics=["db_seconds", "tokens"])
    app = meter.asgi(app, tenant_header="x-tenant-id")   # or meter.wsgi(app, ...)
    conn = meter.wrap_dbapi(conn)                        # or meter.track_sqlalchemy(engine)
    meter.add("tokens", usage.total_tokens)

See docs/meter.md in the tenantcost repository for what is and is not counted.
"""

from __future__ import annotations

from ._meter import Measurement, Meter, Recording

__all__ = ["Measurement", "Meter", "Recording"]
