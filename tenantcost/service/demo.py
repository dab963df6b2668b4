"""``tenantcost serve --demo``: the service on the bundled example, in a throw-away store.

A newcomer should see the product in a browser within a minute, without a database, a rule
file or usage data of their own. :func:`prepare_demo` builds a temporary SQLite store from the
example bundled with the package (``demo_data/``: the three-client SaaS example of
``examples/saas-three-clients``, byte for byte, catalog included; a test keeps them equal),
creates one token per person who reads it (admin, finance, product, and an account manager
of ``client-a``) and makes up a session secret. ``serve`` then exports :meth:`Demo.environ`
and starts uvicorn as usual, so the demo runs exactly the code a real deployment runs.

The demo holds **two months**, so a client's history and the change since the previous month
mean something: 2026-10 is the same hour of costs a month earlier (the example's cost file
with its dates moved) under a rule version without the external search service, with
``demo_data/usage-2026-10.csv`` (client-b, whose contract starts on 2026-11-16, is not there
yet), and 2026-11 is the example itself. Both are closed (``--allow-incomplete``: each holds
one hour), in month order, as finance would close them. The catalog gives the clients their
names and plans.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tenantcost.store.data import Store

DEMO_MONTH = "2026-11"
PREVIOUS_MONTH = "2026-10"
DEMO_CLIENT = "client-a"
DATA_PACKAGE_FOLDER = "demo_data"
ADMIN_NAME = "demo-admin"
MANAGER_NAME = "demo-account-manager"
TOKEN_NAMES = {
    "admin": ADMIN_NAME,
    "finance": "demo-finance",
    "product": "demo-product",
    "account-manager": MANAGER_NAME,
}
"""One demo token per role a person logs in with (``ingest`` is an application's)."""


@dataclass(frozen=True)
class Demo:
    """A prepared demo store: where it is, its secret and the tokens to log in with."""

    db: str
    data: str
    secret: str
    tokens: dict[str, str]
    month: str = DEMO_MONTH

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
        """The lines ``serve --demo`` prints: the URL, then each token (to paste in the login
        form) on its own line and, under it, what that role may do, read from the access
        rules themselves (:func:`may_do`) so the text cannot drift from them."""
        shown = "127.0.0.1" if host in ("0.0.0.0", "::") else host
        url = f"http://[{shown}]:{port}/" if ":" in shown else f"http://{shown}:{port}/"
        lines = [
            f"tenantcost demo: the bundled example, {PREVIOUS_MONTH} and {self.month} "
            "ingested, run and closed, with its client catalog",
            f"  open        {url}",
        ]
        for role, token in self.tokens.items():
            scope = f" ({DEMO_CLIENT} only)" if role == "account-manager" else ""
            lines.append(f"  {role} token{scope} {token}")
            lines.append(f"      may: {may_do(role)}")
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
    "view-invoice": "see the invoice cascade",
    "close-month": "close",
    "reopen-month": "reopen",
    "ingest-usage": "ingest usage",
    "list-batches": "list batches",
    "withdraw-batch": "withdraw batches",
    "manage-tokens": "manage tokens",
}
"""How the demo's announcement words each action; an action added later and not listed here
is shown by its name (``Action`` value), never left out."""


def may_do(role: str) -> str:
    """What a token of ``role`` may do (an account manager: with its one client), as one line
    of the announcement, asked of :func:`tenantcost.service.permissions.can` action by action."""
    from tenantcost.service.permissions import Action, Principal, Role, can

    who = Principal("demo", Role(role), frozenset({DEMO_CLIENT}))
    allowed = [a for a in Action if can(who, a, DEMO_CLIENT).allowed]
    if not allowed:
        return "nothing yet (this role has no actions)"
    clients = f"{DEMO_CLIENT}'s figures only" if role == "account-manager" else "every client"
    return clients + ": " + ", ".join(ACTION_TEXT.get(a.value, a.value) for a in allowed)


def example_files() -> dict[str, Path]:
    """The bundled example's rule file, usage, costs and catalog (package data)."""
    folder = Path(__file__).resolve().parent / DATA_PACKAGE_FOLDER
    files = {
        "rules": folder / "rules.yaml",
        "usage": folder / "usage.csv",
        "costs": folder / "costs.json",
        "catalog": folder / "catalog.csv",
    }
    missing = [str(p) for p in [*files.values(), folder / PREVIOUS_USAGE] if not p.is_file()]
    if missing:
        from tenantcost.errors import InternalError

        raise InternalError(f"the demo's example files are missing ({missing[0]}); reinstall")
    return files


PREVIOUS_USAGE = f"usage-{PREVIOUS_MONTH}.csv"
PREVIOUS_HOUR = ("2026-11-03T", "2026-10-06T")
"""The example's hour (``2026-11-03T10``) and the previous month's demo hour."""


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


def previous_month_files(folder: Path) -> dict[str, Path]:
    """The demo's 2026-10 inputs, written into ``folder``: a rule file holding a version for
    2026-10 (the example's, without the external search service) and the example's own, the
    example's costs a month earlier, and the bundled 2026-10 usage."""
    import copy
    import shutil

    import yaml

    files = example_files()
    document = yaml.safe_load(files["rules"].read_text(encoding="utf-8"))
    document.pop("sources", None)  # the store reads inputs from ingest, not from the rule file
    current = document["rules"][0]
    previous = copy.deepcopy(current)
    previous.pop("external", None)
    previous.update(id=f"saas-{PREVIOUS_MONTH}", effective_from=f"{PREVIOUS_MONTH}-01",
                    description="API by request count, import worker by CPU time")  # fmt: skip
    document["rules"] = [previous, current]
    folder.mkdir(parents=True, exist_ok=True)
    out = {"rules": folder / "rules-two-months.yaml", "costs": folder / "costs-2026-10.json",
           "usage": folder / PREVIOUS_USAGE}  # fmt: skip
    out["rules"].write_text(yaml.safe_dump(document, sort_keys=False), encoding="utf-8")
    costs = files["costs"].read_text(encoding="utf-8")
    out["costs"].write_text(costs.replace(*PREVIOUS_HOUR), encoding="utf-8")
    shutil.copyfile(files["rules"].parent / PREVIOUS_USAGE, out["usage"])
    return out


def demo_store(db: str, data: str, inputs: Path, *, actor: str) -> None:
    """The demo's store: 2026-10 ingested and closed, then 2026-11 (the example) ingested and
    closed, and the example's catalog loaded. ``inputs`` is a folder for the generated
    2026-10 files (they are the recorded inputs: it must outlive the store)."""
    from tenantcost.store.catalog import load_catalog
    from tenantcost.store.cycle import close_month
    from tenantcost.store.lock import write_transaction
    from tenantcost.store.rules import load_rule_file

    files = example_files()
    previous = previous_month_files(inputs)
    store = _new_store(db, data)
    try:
        load_rule_file(store.engine, previous["rules"], actor)
        _ingest(store, previous["usage"], previous["costs"], actor)
        close_month(store, PREVIOUS_MONTH, allow_incomplete=True, actor=actor)
        _ingest(store, files["usage"], files["costs"], actor)
        close_month(store, DEMO_MONTH, allow_incomplete=True, actor=actor)
        with write_transaction(store.engine) as connection:
            load_catalog(connection, files["catalog"], actor)
    finally:
        store.engine.dispose()


def demo_tokens(db: str, data: str, *, actor: str) -> dict[str, str]:
    """One token per role in :data:`TOKEN_NAMES` (the account manager's: ``client-a``)."""
    from tenantcost.service.tokens import create_token
    from tenantcost.store.engine import open_engine
    from tenantcost.store.settings import resolve_settings

    engine = open_engine(resolve_settings(db=db, data=data, environ={}))
    try:
        return {
            role: create_token(engine, role, name=name, actor=actor,
                               clients=[DEMO_CLIENT] if role == "account-manager" else None)[0]
            for role, name in TOKEN_NAMES.items()
        }  # fmt: skip
    finally:
        engine.dispose()


def prepare_demo(directory: Path) -> Demo:
    """Build the demo store in ``directory`` (which the caller removes afterwards)."""
    from tenantcost.store.actor import os_actor

    db = f"sqlite:///{directory / 'tenantcost.db'}"
    data = str(directory / "tenantcost-data")
    actor = os_actor()
    demo_store(db, data, directory / "demo-inputs", actor=actor)
    return Demo(db, data, secrets.token_urlsafe(32), demo_tokens(db, data, actor=actor))


def exit_cleanly_on_sigterm() -> None:
    """Make SIGTERM end ``serve --demo`` through Python, so its temporary store is removed.

    uvicorn re-raises the signal that stopped it once it has shut down; with the default
    SIGTERM action the process would die there, before the temporary folder's cleanup. A
    handler raising :class:`SystemExit` lets the ``with`` blocks around the server run."""
    import signal
    import sys

    signal.signal(signal.SIGTERM, lambda _signum, _frame: sys.exit(0))
