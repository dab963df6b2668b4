"""Every access decision of the service, in one place (routes only ask).

Why one module: "who may see what" must never be wrong, and a rule spread over forty route
functions is wrong in one of them sooner or later. Every route — JSON API and HTML pages —
calls :func:`can` (through :func:`tenantcost.service.auth.authorize`) with the principal, the
action and, for a client's URL, the client id; the answer is a :class:`Decision` whose HTTP
status the route returns unchanged. Tests walk every route × role × client through it.

The rules:

* no token, an unknown, expired or revoked one: **401** (the principal is ``None``);
* ``ingest``: only :attr:`Action.INGEST_USAGE`; anything else **403**;
* ``account-manager``: its own clients only. Another client's URL answers **404, exactly as
  for a client that does not exist** (same body, decided without touching the database, so
  no existence leak through content or timing class). Cluster-wide pages (reconciliation,
  compare, month close/reopen, tokens, ingest) answer **403**; the one month route it may
  read is a month's top movers (:attr:`Action.VIEW_MOVERS`), among its own clients only.
  It sees issued months only:
  the month list holds only months in which its own clients have statements, with the
  fields :data:`MANAGER_MONTH_FIELDS` (no run ids or counts, no coverage). Of a month not
  issued it sees only its own clients' entries of the latest watch run (month to
  date, projection, band, anomalies, labelled "month to date, not issued"), never a draft
  figure; the month-wide watch (:attr:`Action.VIEW_WATCH`) is **403**. Of a reopen it
  reads the reason written for clients, redacted, or "restated by finance", **never the
  internal reason** (:func:`sees_internal_reasons`): that one may hold other clients' names
  and figures that no redaction recognises;
* ``finance``: every client, drafts (marked), in the client list also the clients known
  from usage alone, before any run (marked "no statement yet": :func:`sees_usage_clients`),
  the cascade and the invoice cascade (the
  month closed on the cloud invoice, every billed line of the company), close and reopen,
  ingest of
  corrections, the internal reason of a reopen, the batch list and batch withdrawal (the
  repair of a month a later ingest made unusable; a withdrawal's reason is internal, so
  account managers see neither);
* ``product`` (pricing clients): every client's **issued** figures (the client list and
  search, every client's page, sheets and history, issued revisions only: never a draft),
  the cascade and key comparison of issued months (:attr:`Action.VIEW_ISSUED_MONTH`; the
  comparison of a *closed* month only, since it is computed from the current inputs) and the
  pricing page (:attr:`Action.VIEW_PRICING`), and every client's watch of a month
  (:attr:`Action.VIEW_WATCH`: month to date, projection, budget band, anomalies; labelled
  "month to date, not issued", never a draft run's figures). It reads a reopen's reason as
  clients read it.
  Its month pages (``/months``, ``/months/{M}``) show issued months only, without finance's
  workings (:func:`sees_month_workings`): a month never issued is **404** to it. It cannot
  close, reopen, ingest, list or withdraw batches, manage tokens, see the finance month
  pages' workings (drafts, runs, coverage, batches, usage, finance summaries) or the invoice
  cascade: **403**;
* ``admin``: everything finance may, and tokens.

A client's sheet has two views (:mod:`tenantcost.report.sheet_view`): the client's, which
every role that may open the client reads, and the internal one (``?view=internal``: the
confidence grade, the amounts under other keys, the input files and the reproduce command),
:attr:`Action.VIEW_INTERNAL_SHEET`, finance's and admin's only. An account manager or product
asking for it on a client it may open gets **403**; on another client, the **404** of any
other client's URL (the client scope is checked first).

Finance and admin may do everything product may (their action sets include product's).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import IntEnum, StrEnum


class Role(StrEnum):
    """A token's role (its value is what ``token create --role`` takes)."""

    ADMIN = "admin"
    FINANCE = "finance"
    ACCOUNT_MANAGER = "account-manager"
    PRODUCT = "product"
    INGEST = "ingest"


class Action(StrEnum):
    """What a request wants to do. A route names exactly one."""

    INGEST_USAGE = "ingest-usage"
    """POST /api/v1/usage and /api/v1/usage.parquet."""
    LIST_MONTHS = "list-months"
    """GET /api/v1/months (account managers: months with issued statements only)."""
    LIST_CLIENTS = "list-clients"
    """GET /api/v1/clients, the client search page (account managers: their own only)."""
    VIEW_CLIENT = "view-client"
    """Anything under /api/v1/clients/{id} and the client page: needs ``client``."""
    VIEW_DRAFTS = "view-drafts"
    """See figures of a run not (yet) issued; asked with the client for client URLs."""
    VIEW_CLUSTER = "view-cluster"
    """Cluster-wide figures as finance reads them (drafts included): the month pages'
    workings (runs, coverage, close/reopen forms, events, batches, usage, finance summaries)."""
    VIEW_ISSUED_MONTH = "view-issued-month"
    """GET /api/v1/months/{M}/reconciliation and /compare: the cascade and key comparison;
    the month pages /months and /months/{M}. What run it shows, :func:`sees_drafts` decides
    (product: the issued revision only); what else a month page shows,
    :func:`sees_month_workings`."""
    VIEW_PRICING = "view-pricing"
    """GET /pricing: the unit economics of a month (cost, margin, price floors per plan)."""
    VIEW_WATCH = "view-watch"
    """GET /api/v1/months/{M}/watch and the month page's "Month to date, not issued" section:
    every client's month to date, projection and budget band, and every anomaly, from the
    latest ``tenantcost watch`` run. A client's own entry is ``view-client``'s."""
    VIEW_INVOICE = "view-invoice"
    """GET /api/v1/months/{M}/reconciliation?against=invoice: the invoice cascade (the
    cloud invoice's total, its bridge and every billed line outside the clients)."""
    VIEW_MOVERS = "view-movers"
    """GET /api/v1/months/{M}/movers and the month page's top movers: the clients whose
    figures moved most since the previous month, among the clients in the viewer's scope
    (:func:`client_scope`). Account managers too: an exception to the cluster-wide 403 of the
    month routes, since the list is filtered to their own clients in SQL."""
    CLOSE_MONTH = "close-month"
    REOPEN_MONTH = "reopen-month"
    MANAGE_TOKENS = "manage-tokens"
    """GET/POST /api/v1/tokens, DELETE /api/v1/tokens/{name}."""
    LIST_BATCHES = "list-batches"
    """GET /api/v1/batches: every ingested batch, active or withdrawn (with the reason)."""
    WITHDRAW_BATCH = "withdraw-batch"
    """POST /api/v1/batches/{uid}/withdraw."""
    VIEW_INTERNAL_SHEET = "view-internal-sheet"
    """GET /api/v1/clients/{id}/months/{M}/sheet.{html,pdf,md}?view=internal: the sheet
    with finance's workings (asked after ``view-client``, which decides the 404)."""


class Decision(IntEnum):
    """The answer, as the HTTP status a denied request gets (``ALLOW`` is 200)."""

    ALLOW = 200
    UNAUTHENTICATED = 401
    FORBIDDEN = 403
    NOT_FOUND = 404

    @property
    def allowed(self) -> bool:
        return self is Decision.ALLOW


@dataclass(frozen=True)
class Principal:
    """Who is asking: a valid (known, unexpired, unrevoked) token, resolved per request.

    ``clients`` matters for ``account-manager`` only (the others see every client).
    ``token_id`` is the token's row id (what a browser session remembers)."""

    name: str
    role: Role
    clients: frozenset[str] = field(default_factory=frozenset)
    token_id: int | None = None

    @property
    def actor(self) -> str:
        """What the store records as the actor of this principal's writes."""
        from tenantcost.store.actor import token_actor

        return token_actor(self.name)


_CLUSTER_ROLES = frozenset({Role.ADMIN, Role.FINANCE})
_ROLE_ACTIONS: dict[Role, frozenset[Action]] = {
    Role.ADMIN: frozenset(Action),
    Role.FINANCE: frozenset(Action) - {Action.MANAGE_TOKENS},
    Role.ACCOUNT_MANAGER: frozenset(
        {Action.LIST_MONTHS, Action.LIST_CLIENTS, Action.VIEW_CLIENT, Action.VIEW_MOVERS}
    ),
    Role.PRODUCT: frozenset(
        {
            Action.LIST_MONTHS,
            Action.LIST_CLIENTS,
            Action.VIEW_CLIENT,
            Action.VIEW_ISSUED_MONTH,
            Action.VIEW_PRICING,
            Action.VIEW_WATCH,
            Action.VIEW_MOVERS,
        }
    ),
    Role.INGEST: frozenset({Action.INGEST_USAGE}),
}
_CLIENT_ACTIONS = frozenset({Action.VIEW_CLIENT, Action.VIEW_DRAFTS})


def can(principal: Principal | None, action: Action, client: str | None = None) -> Decision:
    """May ``principal`` do ``action`` (on ``client``, for a client's URL)?

    Order matters: authentication first (401), then the client scope for client URLs (404,
    so an account manager learns nothing about clients that are not its own, not even that
    the URL is one it could never open), then the role (403)."""
    if principal is None:
        return Decision.UNAUTHENTICATED
    role = principal.role
    if (
        action in _CLIENT_ACTIONS
        and client is not None
        and role is Role.ACCOUNT_MANAGER
        and client not in principal.clients
    ):
        return Decision.NOT_FOUND
    if action not in _ROLE_ACTIONS[role]:
        return Decision.FORBIDDEN
    return Decision.ALLOW


def sees_drafts(principal: Principal) -> bool:
    """Finance and admin see figures of runs not issued yet (marked ``draft``)."""
    return principal.role in _CLUSTER_ROLES


def client_scope(principal: Principal) -> frozenset[str] | None:
    """The clients a list or search may return: ``None`` means every client. Lists filter
    in SQL with this set (never fetch all and drop rows in Python)."""
    return principal.clients if principal.role is Role.ACCOUNT_MANAGER else None


def sees_internal_reasons(principal: Principal) -> bool:
    """Finance and admin read a reopen's reason as written (and what clients read instead);
    anyone else reads only what clients read (:func:`tenantcost.report.privacy.client_note`)."""
    return principal.role in _CLUSTER_ROLES


MANAGER_MONTH_FIELDS = ("month", "state", "revisions")
"""What a client-scoped principal reads of a month in the month list: a draft's run id, how
often a month was run and the cluster's coverage are finance's."""


def month_fields(principal: Principal) -> tuple[str, ...] | None:
    """The fields of ``GET /api/v1/months`` ``principal`` may read (``None``: every field);
    which months, :func:`client_scope` decides (months with its clients' statements)."""
    return None if client_scope(principal) is None else MANAGER_MONTH_FIELDS


def sees_month_workings(principal: Principal) -> bool:
    """Finance and admin read the month pages as the workshop they close months in: every
    stored month with its coverage and runs, drafts, the close/reopen forms, the events (with
    internal reasons), batches, usage, finance summaries and the invoice cascade. Anyone else
    let onto the month pages (product) reads issued months only: the list's
    :data:`MANAGER_MONTH_FIELDS` of months with an issued revision, and a month's latest
    issued revision (cascade, idle, clients under each key); a month never issued is not
    found for it."""
    return can(principal, Action.VIEW_CLUSTER).allowed


def sees_usage_clients(principal: Principal) -> bool:
    """Finance and admin also list the clients known from usage alone (metered usage stored,
    no run yet), marked "no statement yet": an admin who just connected the meter sees who
    arrived before the first ``run``. Usage is cluster-wide workings (the month page's usage
    section is :attr:`Action.VIEW_CLUSTER`'s); product and account managers list issued
    statements only."""
    return can(principal, Action.VIEW_CLUSTER).allowed


def visible(principal: Principal, clients: Iterable[str]) -> list[str]:
    """``clients`` restricted to those ``principal`` may see, order kept."""
    scope = client_scope(principal)
    return [c for c in clients if scope is None or c in scope]
