"""Who is asking, and the one way a request is refused.

Every route gets its :class:`~tenantcost.service.permissions.Principal` from
:func:`get_principal` (a FastAPI dependency) and asks :func:`authorize` (or uses the
:func:`require` / :func:`client_access` dependencies, which do both). A refusal is a
:class:`Denied` exception carrying the permission module's :class:`Decision`; the JSON API
answers it with :func:`denied_response`, the HTML pages with their own page (same status).

The principal comes from ``Authorization: Bearer tc_...`` or, without that header, from the
browser session: the session module registers a :data:`SessionLookup` with
:func:`set_session_lookup` that returns the token id the session cookie holds. Either way the
token row is read on every request, so a revoked or expired token stops working at once,
sessions included. A bad ``Authorization`` header is 401 even when a session exists (a client
that sends a token means that token).

Every denial is logged (logger ``tenantcost.service.access``) with the token's *name*, role,
action, method, path and status — never the token itself.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import Depends, HTTPException, Path, Request
from fastapi.responses import JSONResponse

from tenantcost.service.permissions import Action, Decision, Principal, can
from tenantcost.service.urls import PARAM_DESCRIPTION, client_param

log = logging.getLogger("tenantcost.service.access")

SessionLookup = Callable[[Request], int | None]
"""Given a request, the token id its (verified) session cookie holds, or None."""

NOT_FOUND_DETAIL = "not found"
"""The body of every 404 about a client: another's and a non-existent one read the same."""
_DETAILS = {
    Decision.UNAUTHENTICATED: "a valid token is required (Authorization: Bearer tc_...)",
    Decision.FORBIDDEN: "this token's role may not do this",
    Decision.NOT_FOUND: NOT_FOUND_DETAIL,
}


class Denied(HTTPException):
    """A request the permission module refused; ``status_code`` is the decision's."""

    def __init__(self, decision: Decision, action: Action | None = None) -> None:
        headers = {"WWW-Authenticate": "Bearer"} if decision is Decision.UNAUTHENTICATED else None
        super().__init__(int(decision), _DETAILS[decision], headers=headers)
        self.decision = decision
        self.action = action


def not_found() -> Denied:
    """The 404 of a client (or a client's month) that does not exist: raised by routes after
    a lookup, byte-identical to the 404 :func:`authorize` gives for another's client."""
    return Denied(Decision.NOT_FOUND)


def set_session_lookup(app: Any, lookup: SessionLookup) -> None:
    """Let browser sessions authenticate (called once by the session module's install)."""
    app.state.session_lookup = lookup


def get_principal(request: Request) -> Principal | None:
    """The request's principal (cached on the request), or None: no, unknown, expired or
    revoked token, or a session whose token is gone."""
    if hasattr(request.state, "principal"):
        cached: Principal | None = request.state.principal
        return cached
    from tenantcost.service.tokens import principal_for_id, principal_for_secret

    engine = request.app.state.engine
    principal: Principal | None = None
    header = request.headers.get("authorization")
    if header is not None:
        scheme, _, value = header.strip().partition(" ")
        if scheme.lower() == "bearer" and value.strip():
            principal = principal_for_secret(engine, value.strip())
    else:
        lookup: SessionLookup | None = getattr(request.app.state, "session_lookup", None)
        token_id = lookup(request) if lookup is not None else None
        if token_id is not None:
            principal = principal_for_id(engine, token_id)
    request.state.principal = principal
    return principal


def authorize(
    request: Request, principal: Principal | None, action: Action, client: str | None = None
) -> Principal:
    """``principal`` if the permission module allows ``action`` (on ``client``); else the
    denial is logged and raised as :class:`Denied`."""
    decision = can(principal, action, client)
    if decision.allowed:
        assert principal is not None
        return principal
    log_denial(request, principal, action, decision, client)
    raise Denied(decision, action)


def log_denial(
    request: Request,
    principal: Principal | None,
    action: Action | str,
    decision: Decision,
    client: str | None = None,
) -> None:
    """One line per denial: who (token name, never the token), what, where, the answer."""
    who = (
        f"token={principal.name} role={principal.role}"
        if principal is not None
        else f"token=(none valid) authorization_header={'authorization' in request.headers}"
    )
    log.warning(
        "denied %d %s action=%s method=%s path=%s client=%s",
        int(decision),
        who,
        action,
        request.method,
        request.url.path,
        client or "-",
    )


def require(action: Action) -> Callable[..., Principal]:
    """A dependency: the principal, if it may do ``action`` (no client involved)."""

    def dependency(
        request: Request, principal: Annotated[Principal | None, Depends(get_principal)]
    ) -> Principal:
        return authorize(request, principal, action)

    return dependency


@dataclass(frozen=True)
class ClientAccess:
    """A principal allowed to open ``client`` (which may still not exist: routes check,
    and answer :func:`not_found`)."""

    principal: Principal
    client: str


def client_access(
    request: Request,
    client_id: Annotated[str, Path(description=PARAM_DESCRIPTION)],
    principal: Annotated[Principal | None, Depends(get_principal)],
) -> ClientAccess:
    """A dependency for routes under ``/clients/{client_id}``: the one place the id is read
    from its (tilde-encoded) path segment (:func:`tenantcost.service.urls.client_param`).

    401 and 403 come first, saying nothing about the id; a segment that cannot be a client
    id is then 422, whoever asks; only then is the client's scope checked (404)."""
    authorize(request, principal, Action.VIEW_CLIENT)
    client = client_param(client_id)
    return ClientAccess(authorize(request, principal, Action.VIEW_CLIENT, client), client)


def denied_response(exc: Denied) -> JSONResponse:
    """The JSON answer to a denial (the API's; pages render their own)."""
    return JSONResponse({"detail": exc.detail}, status_code=exc.status_code, headers=exc.headers)


CurrentPrincipal = Annotated[Principal | None, Depends(get_principal)]
"""A route parameter: the principal or None (the route then calls :func:`authorize`)."""
ClientAccessDep = Annotated[ClientAccess, Depends(client_access)]
"""A route parameter under ``/clients/{client_id}``: the principal may open that client."""
MayIngest = Annotated[Principal, Depends(require(Action.INGEST_USAGE))]
MayListMonths = Annotated[Principal, Depends(require(Action.LIST_MONTHS))]
MayListClients = Annotated[Principal, Depends(require(Action.LIST_CLIENTS))]
MayViewCluster = Annotated[Principal, Depends(require(Action.VIEW_CLUSTER))]
MayViewIssuedMonth = Annotated[Principal, Depends(require(Action.VIEW_ISSUED_MONTH))]
MayViewPricing = Annotated[Principal, Depends(require(Action.VIEW_PRICING))]
MayViewWatch = Annotated[Principal, Depends(require(Action.VIEW_WATCH))]
MayClose = Annotated[Principal, Depends(require(Action.CLOSE_MONTH))]
MayReopen = Annotated[Principal, Depends(require(Action.REOPEN_MONTH))]
MayManageTokens = Annotated[Principal, Depends(require(Action.MANAGE_TOKENS))]
MayListBatches = Annotated[Principal, Depends(require(Action.LIST_BATCHES))]
MayWithdrawBatch = Annotated[Principal, Depends(require(Action.WITHDRAW_BATCH))]
