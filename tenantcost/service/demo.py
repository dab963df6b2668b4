"""``tenantcost serve --demo``: the service on a made-up company, in a throw-away store.

A newcomer should see the product in a browser within a minute, without a database, a rule
file or usage data of their own, and see it on data that looks like theirs: a SaaS with a
hundred clients and half a year of history, not one hour of three clients.
:func:`build_demo` makes the company's input files (:mod:`tenantcost.service.demo_company`,
from a seed) and feeds them through the functions the commands call, in the order finance
would: rules and catalog loaded, each closed month's usage, costs and FOCUS invoice ingested
and the month closed, one month reopened and closed again with corrected usage (a
restatement with a reason for clients), next month's budget planned from the issued history
and loaded, and the open month ingested hour by hour, run and watched. So the demo runs
exactly the code a real deployment runs, and :func:`prepare_demo` adds a session secret and
one token per person who reads it. ``serve`` then exports :meth:`Demo.environ` and starts
uvicorn as usual.

The browser tests and the docs' screenshots use the same :func:`build_demo`. The small
bundled example (``demo_data/``: ``examples/saas-three-clients``, byte for byte; a test keeps
them equal) stays for the tests of mechanisms, through :func:`example_store`.
"""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tenantcost.service.demo_company import Company
    from tenantcost.store.data import Store

DEMO_MONTH = "2026-11"
"""The bundled example's month (:func:`example_store`)."""
DATA_PACKAGE_FOLDER = "demo_data"
ADMIN_NAME = "demo-admin"
MANAGER_NAME = "demo-account-manager"


@dataclass(frozen=True)
class DemoToken:
    """A token the demo prints: its role, its name in the store, and its clients."""

    role: str
    name: str
    clients: tuple[str, ...] = ()


@dataclass(frozen=True)
class Demo:
    """A prepared demo store: where it is, its secret, the tokens to log in with (by the
    names of :func:`demo_token_specs`) and what the company holds."""

    db: str
    data: str
    secret: str
    tokens: dict[str, str]
    month: str = DEMO_MONTH
    closed: tuple[str, ...] = ()
    restated: str = ""
    seed: int = 0
    clients: int = 0
    scopes: dict[str, tuple[str, ...]] = field(default_factory=dict)
    managers: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0

    @property
    def admin_token(self) -> str:
        return self.tokens["admin"]

    @property
    def manager_token(self) -> str:
        return self.tokens["account-manager"]

    def environ(self) -> dict[str, str]:
        """What ``serve`` exports so every worker opens the demo store with its secret."""
        from tenantcost.service.config import ENV_SECRET
        from tenantcost.store.settings import ENV_DATA, ENV_DB

        return {ENV_DB: self.db, ENV_DATA: self.data, ENV_SECRET: self.secret}

    def announce(self, host: str, port: int) -> str:
        """The lines ``serve --demo`` prints: what the company holds, the URL, then each token
        (to paste in the login form) on its own line and, under it, what that role may do,
        read from the access rules themselves (:func:`may_do`) so the text cannot drift."""
        shown = "127.0.0.1" if host in ("0.0.0.0", "::") else host
        url = f"http://[{shown}]:{port}/" if ":" in shown else f"http://{shown}:{port}/"
        closed = f"{self.closed[0]} to {self.closed[-1]}" if self.closed else ""
        lines = [
            f"tenantcost demo (seed {self.seed}, built in {self.seconds:.0f} s): a SaaS with "
            f"{self.clients} clients; {closed} closed ({self.restated} restated), {self.month} "
            "to date watched; catalog, FOCUS invoices and budgets loaded",
            f"  open        {url}",
        ]
        for key, token in self.tokens.items():
            role = key.removesuffix("-one")
            scope = self.scopes.get(key, ())
            manager = self.managers.get(key)
            said = ""
            if scope:
                who = f" of {manager}" if manager else ""
                said = (f" ({scope[0]} only{who})" if len(scope) == 1
                        else f" ({len(scope)} clients{who})")  # fmt: skip
            lines.append(f"  {key} token{said} {token}")
            lines.append(f"      may: {may_do(role, scope)}")
        lines.append(f"  store       {self.db} (temporary: removed when the server stops)")
        return "\n".join(lines)


ACTION_TEXT = {
    "list-months": "list months",
    "list-clients": "search clients",
    "view-client": "open client pages and sheets",
    "view-drafts": "see drafts",
    "view-cluster": "see each month's workings (drafts, runs, batches, usage)",
    "view-issued-month": "open issued months' cascade and key comparison",
    "view-pricing": "open the pricing page (unit economics)",
    "view-watch": "see every client's month to date (projection, budget band, anomalies)",
    "view-movers": "see a month's top movers (among the clients in scope)",
    "view-invoice": "see the invoice cascade",
    "close-month": "close",
    "reopen-month": "reopen",
    "ingest-usage": "ingest usage",
    "list-batches": "list batches",
    "withdraw-batch": "withdraw batches",
    "manage-tokens": "manage tokens",
    "view-internal-sheet": "read the internal sheets (confidence, keys, reproduce command)",
}
"""How the demo's announcement words each action, as a person reads it (a test checks that
every action has its words); an action added later and not listed here is still shown, its
name in words (``view-x`` as "view x"), never left out."""


def may_do(role: str, clients: tuple[str, ...] = ()) -> str:
    """What a token of ``role`` may do (an account manager: with ``clients``), as one line of
    the announcement, asked of :func:`tenantcost.service.permissions.can` action by action."""
    from tenantcost.service.permissions import Action, Principal, Role, can

    scope = clients or ("client-a",)
    who = Principal("demo", Role(role), frozenset(scope))
    allowed = [a for a in Action if can(who, a, scope[0]).allowed]
    if not allowed:
        return "nothing yet (this role has no actions)"
    if role != "account-manager":
        whose = "every client"
    elif len(scope) == 1:
        whose = f"{scope[0]}'s figures only"
    else:
        whose = f"these {len(scope)} clients' figures only"
    said = [ACTION_TEXT.get(a.value, a.value.replace("-", " ")) for a in allowed]
    return whose + ": " + ", ".join(said)


def example_files() -> dict[str, Path]:
    """The bundled example's rule file, usage, costs and catalog (package data)."""
    folder = Path(__file__).resolve().parent / DATA_PACKAGE_FOLDER
    files = {
        "rules": folder / "rules.yaml",
        "usage": folder / "usage.csv",
        "costs": folder / "costs.json",
        "catalog": folder / "catalog.csv",
    }
    missing = [str(p) for p in files.values() if not p.is_file()]
    if missing:
        from tenantcost.errors import InternalError

        raise InternalError(f"the demo's example files are missing ({missing[0]}); reinstall")
    return files


def _new_store(db: str, data: str) -> Store:
    """An empty store at the current schema, opened (the caller disposes its engine)."""
    from tenantcost.store.data import DataDir, Store
    from tenantcost.store.engine import open_engine
    from tenantcost.store.schema import upgrade
    from tenantcost.store.settings import resolve_settings

    settings = resolve_settings(db=db, data=data, environ={})
    engine = open_engine(settings, create=True, foreign_keys=False)
    try:
        upgrade(engine)
    finally:
        engine.dispose()
    return Store(open_engine(settings), DataDir(data))


def _ingest(store: Store, usage: Path, costs: Path, actor: str) -> None:
    from tenantcost.store.ingest import ingest_costs, ingest_usage

    ingest_usage(store, [usage], period=None, mode="replace", actor=actor)
    ingest_costs(store, [costs], period=None, mode="replace", actor=actor)


def example_store(db: str, data: str, *, close: bool, actor: str, run: bool = True) -> None:
    """A new store at ``db``/``data`` holding the bundled example: rules loaded, usage and
    costs ingested, the month run (a draft) and, with ``close``, closed (revision 1). The
    tests build their stores with it too, so the demo is the tested path."""
    from tenantcost.store.cycle import close_month
    from tenantcost.store.rules import load_rule_file
    from tenantcost.store.runs import run_month

    files = example_files()
    store = _new_store(db, data)
    try:
        load_rule_file(store.engine, files["rules"], actor)
        _ingest(store, files["usage"], files["costs"], actor)
        if close:
            close_month(store, DEMO_MONTH, allow_incomplete=True, actor=actor)
        elif run:
            run_month(store, DEMO_MONTH, key=None, actor=actor)
    finally:
        store.engine.dispose()


def demo_token_specs(company: Company) -> dict[str, DemoToken]:
    """One demo token per person who reads the service (``ingest`` is an application's): an
    account manager with several clients (the first manager's) and one with a single client."""
    from tenantcost.service.demo_company import MANAGERS, SINGLE_MANAGER

    return {
        "admin": DemoToken("admin", ADMIN_NAME),
        "finance": DemoToken("finance", "demo-finance"),
        "product": DemoToken("product", "demo-product"),
        "account-manager": DemoToken("account-manager", MANAGER_NAME,
                                     tuple(company.manager_clients(MANAGERS[0]))),
        "account-manager-one": DemoToken("account-manager", f"{MANAGER_NAME}-one",
                                         tuple(company.manager_clients(SINGLE_MANAGER))),
    }  # fmt: skip


def demo_tokens(db: str, data: str, specs: dict[str, DemoToken], *, actor: str) -> dict[str, str]:
    """Create each token of ``specs`` in the store; returns their secrets by key."""
    from tenantcost.service.tokens import create_token
    from tenantcost.store.engine import open_engine
    from tenantcost.store.settings import resolve_settings

    engine = open_engine(resolve_settings(db=db, data=data, environ={}))
    try:
        return {
            key: create_token(engine, spec.role, name=spec.name, actor=actor,
                              clients=list(spec.clients) or None)[0]
            for key, spec in specs.items()
        }  # fmt: skip
    finally:
        engine.dispose()


def company_store(store: Store, company: Company, files: dict[str, Path], *, actor: str) -> None:
    """Feed the company's files through the commands' functions, as finance would, month by
    month (the module docstring); ``files`` are :meth:`Company.write`'s, and must outlive the
    store (they are its batches' recorded origins)."""
    from tenantcost.budget import plan_budgets
    from tenantcost.config.watch import WatchSettings
    from tenantcost.service.demo_company import RESTATE_CLIENT_REASON, RESTATE_REASON
    from tenantcost.store import budgets
    from tenantcost.store.billing_ingest import ingest_billing
    from tenantcost.store.catalog import load_catalog
    from tenantcost.store.cycle import close_month, reopen_month
    from tenantcost.store.ingest import ingest_costs, ingest_usage
    from tenantcost.store.lock import write_transaction
    from tenantcost.store.rules import load_rule_file
    from tenantcost.store.runs import run_month
    from tenantcost.store.watch_run import watch_month
    from tenantcost.windows import Period
    from tenantcost.writers.budget import plan_csv

    load_rule_file(store.engine, files["rules"], actor)
    with write_transaction(store.engine) as connection:
        load_catalog(connection, files["catalog"], actor)

    def ingest(month: str, usage: str) -> None:
        period = Period.month(month)
        ingest_usage(store, [files[usage]], period=period, mode="replace", actor=actor)
        ingest_costs(store, [files[f"costs-{month}"]], period=period, mode="replace",
                     actor=actor)  # fmt: skip

    for month in company.closed:
        ingest(month, f"usage-{month}")
        ingest_billing(store, [files[f"billing-{month}"]], actor=actor)
        close_month(store, month, actor=actor)
    restated = company.restated
    reopen_month(store.engine, restated, reason=RESTATE_REASON, actor=actor,
                 client_reason=RESTATE_CLIENT_REASON)  # fmt: skip
    ingest_usage(store, [files[f"usage-{restated}-corrected"]], period=Period.month(restated),
                 mode="replace", actor=actor)  # fmt: skip
    close_month(store, restated, actor=actor)
    month = company.open_month
    with store.engine.connect() as connection:
        months = budgets.issued_months(connection, month, 6)
        plan = plan_budgets(budgets.issued_history(connection, months),
                            budgets.catalog_clients(connection), None)  # fmt: skip
    plan_file = files["catalog"].parent / f"budget-{month}.csv"
    plan_file.write_text(plan_csv(plan), encoding="utf-8")
    with write_transaction(store.engine) as connection:
        budgets.load_budget(connection, plan_file, month, actor)
    ingest(month, f"usage-{month}")
    if f"billing-{month}" in files:
        ingest_billing(store, [files[f"billing-{month}"]], actor=actor)
    run_month(store, month, key=None, actor=actor, allow_unbilled=True)
    watch_month(store, month, company.now, WatchSettings(), actor)


def build_demo(folder: Path, seed: int | None = None, now: str | None = None) -> Demo:
    """The demo company of ``seed`` (default :data:`DEFAULT_SEED`) in a new SQLite store in
    ``folder`` (which the caller removes afterwards), with its tokens; ``now`` (default the
    clock) places its open month. The one builder of ``serve --demo``, the browser tests and
    the docs' screenshots."""
    import pandas as pd

    from tenantcost.service.demo_company import DEFAULT_SEED, make_company
    from tenantcost.store.actor import os_actor

    started = time.monotonic()
    chosen = DEFAULT_SEED if seed is None else seed
    company = make_company(chosen, None if now is None else pd.Timestamp(now))
    files = company.write(folder / "demo-inputs")
    db = f"sqlite:///{folder / 'tenantcost.db'}"
    data = str(folder / "tenantcost-data")
    actor = os_actor()
    store = _new_store(db, data)
    try:
        company_store(store, company, files, actor=actor)
    finally:
        store.engine.dispose()
    specs = demo_token_specs(company)
    tokens = demo_tokens(db, data, specs, actor=actor)
    from tenantcost.service.demo_company import MANAGERS, SINGLE_MANAGER

    return Demo(db, data, secrets.token_urlsafe(32), tokens, company.open_month,
                tuple(company.closed), company.restated, chosen, len(company.catalog),
                {key: spec.clients for key, spec in specs.items() if spec.clients},
                {"account-manager": MANAGERS[0], "account-manager-one": SINGLE_MANAGER},
                time.monotonic() - started)  # fmt: skip


def prepare_demo(directory: Path, seed: int | None = None) -> Demo:
    """Build the demo store in ``directory`` (which the caller removes afterwards)."""
    return build_demo(directory, seed)


def exit_cleanly_on_sigterm() -> None:
    """Make SIGTERM end ``serve --demo`` through Python, so its temporary store is removed.

    uvicorn re-raises the signal that stopped it once it has shut down; with the default
    SIGTERM action the process would die there, before the temporary folder's cleanup. A
    handler raising :class:`SystemExit` lets the ``with`` blocks around the server run."""
    import signal
    import sys

    signal.signal(signal.SIGTERM, lambda _signum, _frame: sys.exit(0))
