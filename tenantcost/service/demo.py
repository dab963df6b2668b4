"""``tenantcost serve --demo``: the service on the bundled example, in a throw-away store.

A newcomer should see the product in a browser within a minute, without a database, a rule
file or usage data of their own. :func:`prepare_demo` builds a temporary SQLite store from the
example bundled with the package (``demo_data/``: the three-client SaaS example of
``examples/saas-three-clients``, byte for byte; a test keeps them equal), loads its rules,
ingests its usage and costs, runs and closes its month (``--allow-incomplete``: the example
holds one hour), creates an admin token and an account-manager token for ``client-a``, and
makes up a session secret. ``serve`` then exports :meth:`Demo.environ` and starts uvicorn
as usual, so the demo runs exactly the code a real deployment runs.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from pathlib import Path

DEMO_MONTH = "2026-11"
DEMO_CLIENT = "client-a"
DATA_PACKAGE_FOLDER = "demo_data"
ADMIN_NAME = "demo-admin"
MANAGER_NAME = "demo-account-manager"


@dataclass(frozen=True)
class Demo:
    """A prepared demo store: where it is, its secret and the tokens to log in with."""

    db: str
    data: str
    secret: str
    admin_token: str
    manager_token: str
    month: str = DEMO_MONTH

    def environ(self) -> dict[str, str]:
        """What ``serve`` exports so every worker opens the demo store with its secret."""
        from tenantcost.service.config import ENV_SECRET
        from tenantcost.store.settings import ENV_DATA, ENV_DB

        return {ENV_DB: self.db, ENV_DATA: self.data, ENV_SECRET: self.secret}

    def announce(self, host: str, port: int) -> str:
        """The lines ``serve --demo`` prints: the URL and the tokens to paste in the form."""
        shown = "127.0.0.1" if host in ("0.0.0.0", "::") else host
        url = f"http://[{shown}]:{port}/" if ":" in shown else f"http://{shown}:{port}/"
        return "\n".join(
            [
                f"tenantcost demo: the bundled example, {self.month} ingested, run and closed",
                f"  open        {url}",
                f"  admin token {self.admin_token}",
                f"  account-manager token ({DEMO_CLIENT} only) {self.manager_token}",
                f"  store       {self.db} (temporary: removed when the server stops)",
            ]
        )


def example_files() -> dict[str, Path]:
    """The bundled example's rule file, usage and costs (package data)."""
    folder = Path(__file__).resolve().parent / DATA_PACKAGE_FOLDER
    files = {
        "rules": folder / "rules.yaml",
        "usage": folder / "usage.csv",
        "costs": folder / "costs.json",
    }
    missing = [str(p) for p in files.values() if not p.is_file()]
    if missing:
        from tenantcost.errors import InternalError

        raise InternalError(f"the demo's example files are missing ({missing[0]}); reinstall")
    return files


def example_store(db: str, data: str, *, close: bool, actor: str, run: bool = True) -> None:
    """A new store at ``db``/``data`` holding the bundled example: rules loaded, usage and
    costs ingested, the month run (a draft) and, with ``close``, closed (revision 1). The
    tests build their stores with it too, so the demo is the tested path."""
    from tenantcost.store.cycle import close_month
    from tenantcost.store.data import DataDir, Store
    from tenantcost.store.engine import open_engine
    from tenantcost.store.ingest import ingest_costs, ingest_usage
    from tenantcost.store.rules import load_rule_file
    from tenantcost.store.runs import run_month
    from tenantcost.store.schema import upgrade
    from tenantcost.store.settings import resolve_settings

    files = example_files()
    settings = resolve_settings(db=db, data=data, environ={})
    engine = open_engine(settings, create=True, foreign_keys=False)
    try:
        upgrade(engine)
    finally:
        engine.dispose()
    engine = open_engine(settings)
    try:
        load_rule_file(engine, files["rules"], actor)
        store = Store(engine, DataDir(data))
        ingest_usage(store, [files["usage"]], period=None, mode="replace", actor=actor)
        ingest_costs(store, [files["costs"]], period=None, mode="replace", actor=actor)
        if close:
            close_month(store, DEMO_MONTH, allow_incomplete=True, actor=actor)
        elif run:
            run_month(store, DEMO_MONTH, key=None, actor=actor)
    finally:
        engine.dispose()


def prepare_demo(directory: Path) -> Demo:
    """Build the demo store in ``directory`` (which the caller removes afterwards)."""
    from tenantcost.service.permissions import Role
    from tenantcost.service.tokens import create_token
    from tenantcost.store.actor import os_actor
    from tenantcost.store.engine import open_engine
    from tenantcost.store.settings import resolve_settings

    db = f"sqlite:///{directory / 'tenantcost.db'}"
    data = str(directory / "tenantcost-data")
    actor = os_actor()
    example_store(db, data, close=True, actor=actor)
    engine = open_engine(resolve_settings(db=db, data=data, environ={}))
    try:
        admin, _ = create_token(engine, Role.ADMIN.value, name=ADMIN_NAME, actor=actor)
        manager, _ = create_token(
            engine, Role.ACCOUNT_MANAGER.value, clients=[DEMO_CLIENT], name=MANAGER_NAME,
            actor=actor,
        )  # fmt: skip
    finally:
        engine.dispose()
    return Demo(db, data, secrets.token_urlsafe(32), admin, manager)


def exit_cleanly_on_sigterm() -> None:
    """Make SIGTERM end ``serve --demo`` through Python, so its temporary store is removed.

    uvicorn re-raises the signal that stopped it once it has shut down; with the default
    SIGTERM action the process would die there, before the temporary folder's cleanup. A
    handler raising :class:`SystemExit` lets the ``with`` blocks around the server run."""
    import signal
    import sys

    signal.signal(signal.SIGTERM, lambda _signum, _frame: sys.exit(0))
