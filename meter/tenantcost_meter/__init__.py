"""tenantcost-meter: each client's requests and CPU time per UTC hour and service, measured in
the application and delivered to tenantcost (``POST /api/v1/usage``). Standard library only.

    from tenantcost_meter import Meter
    meter = Meter(service="api", url="https://tenantcost.internal", token="tc_...")
    app = meter.asgi(app, tenant_header="x-tenant-id")   # or meter.wsgi(app, ...)

See docs/meter.md in the tenantcost repository for what is and is not counted.
"""

from __future__ import annotations

from ._meter import Meter, Recording

__all__ = ["Meter", "Recording"]
