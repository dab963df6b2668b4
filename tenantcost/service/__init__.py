"""The service: the store over HTTP, for account managers, finance and the
application reporting its usage.

* :mod:`~tenantcost.service.permissions`: every access decision (routes only ask it);
* :mod:`~tenantcost.service.auth`: who is asking (bearer token or browser session) and the
  one way a route is refused (401/403/404, logged without the token);
* :mod:`~tenantcost.service.tokens`: tokens (random, stored as sha256, revocable, expiring);
* :mod:`~tenantcost.service.config`: the service's settings (store, secret, limits);
* :mod:`~tenantcost.service.api`: the JSON API under ``/api/v1``;
* :mod:`~tenantcost.service.usage`: ``POST /api/v1/usage[.parquet]`` (validation,
  idempotency keys, atomic batches);
* :mod:`~tenantcost.service.figures`: what each principal sees (API and pages read it);
* :mod:`~tenantcost.service.sheets`: cost sheets from stored runs; ``compare``: keys compared;
* :mod:`~tenantcost.service.problems`: errors with fields beside ``detail``;
* :mod:`~tenantcost.service.app`: :func:`create_app`, the ASGI application;
* ``pages``, ``session``, ``demo``: the HTML pages, the browser session and ``serve --demo``.
"""
