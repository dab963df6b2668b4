"""Where ``GET /`` sends a signed-in reader: each role's answer, one redirect away.

Why: the first screen decides whether a tool is used. Finance opens the service to close
the latest month, product to price plans, an account manager to see its clients; a search
box with a list of ids answered none of them. So ``/`` answers ``303`` to the page that
holds each role's answer (docs/service.md, "Landing"):

* finance and admin: the latest month with a run (``/months/{M}``, its month-close page;
  ``/months`` before any run);
* product: the pricing page;
* an account manager: its client's page when it has exactly one client, else the client
  list of its clients;
* anyone else (an ``ingest`` token): the client list, which tells it what it may not open.

The role decides, through :mod:`tenantcost.service.permissions`; nothing here grants access:
each target page asks for its own action.
"""

from __future__ import annotations

from sqlalchemy import Engine, func, select

from tenantcost.service.permissions import Action, Principal, Role, can
from tenantcost.service.urls import client_href
from tenantcost.store.models import Run, table

CLIENT_LIST = "/clients"


def landing(engine: Engine, principal: Principal) -> str:
    """The path ``/`` redirects ``principal`` to."""
    if principal.role is Role.ACCOUNT_MANAGER:
        if len(principal.clients) == 1:
            return client_href(next(iter(principal.clients)))
        return CLIENT_LIST
    if can(principal, Action.VIEW_CLUSTER).allowed:
        with engine.connect() as connection:
            month = connection.execute(select(func.max(table(Run).c.month))).scalar()
        return "/months" if month is None else f"/months/{month}"
    if can(principal, Action.VIEW_PRICING).allowed:
        return "/pricing"
    return CLIENT_LIST
