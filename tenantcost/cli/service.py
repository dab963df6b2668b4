"""The service's commands: ``serve`` and ``token create|list|revoke``.

``token create`` prints the token alone on stdout (so ``TOKEN=$(tenantcost token create
...)`` works) and never again: the store keeps its sha256 only. ``serve`` checks the store
(schema current, secret set) before starting uvicorn, so a mistake is one line and exit 2,
not a worker crash loop; the settings reach every worker through the environment.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Annotated

import typer

from tenantcost.cli.shell import app
from tenantcost.cli.store import DataOpt, DbOpt, SettingsOpt, WaitOpt, _register

token_app = typer.Typer(
    help="Service access tokens: create (shown once), list, revoke.", no_args_is_help=True
)
app.add_typer(token_app, name="token")

RoleOpt = Annotated[
    str,
    typer.Option(
        "--role", help="admin, finance, product, account-manager or ingest.", show_default=False
    ),
]
ClientOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--client",
        help="A client an account-manager token may see; repeat for several.",
        show_default=False,
    ),
]
NameOpt = Annotated[
    str | None,
    typer.Option(
        "--name",
        help="Unique name (in logs and as the actor of what the token "
        "does). Default: ROLE-<random>.",
        show_default=False,
    ),
]
ExpiresOpt = Annotated[
    str | None,
    typer.Option(
        "--expires", help="Lifetime, e.g. 90d, 12h, 2w. Default: no expiry.", show_default=False
    ),
]
FormatOpt = Annotated[str, typer.Option("--format", help="table (default) or json.")]
PortOpt = Annotated[int, typer.Option("--port", help="Port to listen on.", min=0, max=65535)]
WorkersOpt = Annotated[
    int, typer.Option("--workers", help="uvicorn worker processes (each its own engine).", min=1)
]
MaxRecordsOpt = Annotated[
    int,
    typer.Option(
        "--max-records",
        help="Largest usage batch accepted, in records (or Parquet "
        "rows, or OTLP data points per export); a larger one is refused with 413.",
        min=1,
    ),
]
MaxBodyOpt = Annotated[
    int,
    typer.Option(
        "--max-body",
        help="Largest request body accepted on any route, in bytes (default 32 MiB); a "
        "larger one, chunked or not, is cut off with 413 while it streams in.",
        min=1,
    ),
]


@_register(token_app, "create")
def token_create_command(
    role: RoleOpt,
    client: ClientOpt = None,
    name: NameOpt = None,
    expires: ExpiresOpt = None,
    db: DbOpt = None,
    data: DataOpt = None,
    settings: SettingsOpt = None,
    wait: WaitOpt = 0.0,
) -> None:
    """Create a token and print it, alone on stdout, this once."""
    from tenantcost.service.tokens import create_token, parse_duration
    from tenantcost.store.actor import os_actor
    from tenantcost.store.schema import current_store
    from tenantcost.store.settings import resolve_settings

    lifetime = parse_duration(expires) if expires is not None else None
    resolved = resolve_settings(db, data, settings)
    with current_store(resolved) as engine:
        secret, info = create_token(
            engine,
            role,
            clients=client or [],
            name=name,
            expires=lifetime,
            actor=os_actor(),
            wait=wait,
        )
    typer.echo(secret)
    until = f", expires {info.document()['expires_at']}" if info.expires_at else ""
    typer.echo(f"token '{info.name}' ({info.role}{until}) created; it is shown only now", err=True)


@_register(token_app, "list")
def token_list_command(
    fmt: FormatOpt = "table",
    db: DbOpt = None,
    data: DataOpt = None,
    settings: SettingsOpt = None,
) -> None:
    """List the tokens: name, role, clients, state, dates (never the token)."""
    from tenantcost.cli.run import check_format
    from tenantcost.service.tokens import list_tokens
    from tenantcost.store.schema import current_store
    from tenantcost.store.settings import resolve_settings
    from tenantcost.writers.text import render_table

    check_format(fmt, ("table", "json"))
    with current_store(resolve_settings(db, data, settings)) as engine:
        documents = [t.document() for t in list_tokens(engine)]
    if fmt == "json":
        typer.echo(json.dumps(documents, indent=2))
        return
    if not documents:
        typer.echo("no tokens: create one with `tenantcost token create --role ROLE`")
        return
    columns = ["name", "role", "clients", "state", "created_at", "expires_at", "revoked_at"]
    rows = [
        [", ".join(d[c]) if c == "clients" else (d[c] or "") for c in columns] for d in documents
    ]
    typer.echo(render_table(columns, rows, set()))


@_register(token_app, "revoke")
def token_revoke_command(
    name: Annotated[
        str,
        typer.Argument(
            help="The token's name (see `token list`).", metavar="NAME", show_default=False
        ),
    ],
    db: DbOpt = None,
    data: DataOpt = None,
    settings: SettingsOpt = None,
    wait: WaitOpt = 0.0,
) -> None:
    """Revoke a token now (its sessions end with it); its name stays taken."""
    from tenantcost.service.tokens import revoke_token
    from tenantcost.store.actor import os_actor
    from tenantcost.store.schema import current_store
    from tenantcost.store.settings import resolve_settings

    with current_store(resolve_settings(db, data, settings)) as engine:
        info = revoke_token(engine, name, actor=os_actor(), wait=wait)
    typer.echo(f"token '{info.name}' revoked at {info.document()['revoked_at']}")


DemoOpt = Annotated[
    bool,
    typer.Option(
        "--demo",
        help="Serve a made-up SaaS company in a temporary store (120 clients, six closed "
        "months and the month to date, built through ingest, close, budgets and watch) and "
        "print a token per person who reads it (admin, finance, product, an account manager "
        "of several clients and one of a single client), each with what it may do; no "
        "--db/--data/--settings.",
    ),
]
SeedOpt = Annotated[
    int | None,
    typer.Option("--seed", min=0, help="With --demo: another company (default: a fixed seed)."),
]
HostOpt = Annotated[str, typer.Option("--host", help="Address to listen on.")]
MetricsPortOpt = Annotated[
    int | None,
    typer.Option(
        "--metrics-port",
        min=1,
        max=65535,
        metavar="PORT",
        help="Serve Prometheus metrics at /metrics on this port too, without authentication "
        "(requests per route and status with their latency, every worker summed; ingests, "
        "last successful ingest per source, runs, closes, alerts and month states from the "
        "store). Default: off.",
    ),
]


@_register(app, "serve")
def serve_command(
    db: DbOpt = None,
    data: DataOpt = None,
    settings: SettingsOpt = None,
    host: HostOpt = "127.0.0.1",
    port: PortOpt = 8000,
    workers: WorkersOpt = 1,
    max_records: MaxRecordsOpt = 100_000,
    max_body: MaxBodyOpt = 33_554_432,
    demo: DemoOpt = False,
    seed: SeedOpt = None,
    metrics_port: MetricsPortOpt = None,
) -> None:
    """Serve the store over HTTP: the JSON API (/api/v1, docs at /docs) and the pages.

    Needs a session secret of 16 characters or more: TENANTCOST_SECRET, or secret: in the
    settings file (--demo makes one up). Tokens: `tenantcost token create`.
    """
    from tenantcost.errors import InputError
    from tenantcost.service.config import ENV_MAX_BODY, ENV_MAX_RECORDS

    os.environ[ENV_MAX_RECORDS] = str(max_records)
    os.environ[ENV_MAX_BODY] = str(max_body)
    _check_port(host, port)
    if metrics_port is not None:
        if metrics_port == port:
            raise InputError(f"--metrics-port {port} is --port too: give another port")
        _check_port(host, metrics_port)
    if seed is not None and not demo:
        raise InputError("--seed picks the demo's company: give it with --demo")
    if not demo:
        _export_store_settings(db, data, settings)
        _run_uvicorn(host, port, workers, metrics_port)
        return
    if db is not None or data is not None or settings is not None:
        raise InputError(
            "--demo makes its own temporary store: leave out --db, --data and --settings"
        )
    import tempfile
    from pathlib import Path

    from tenantcost.service.demo import exit_cleanly_on_sigterm, prepare_demo

    exit_cleanly_on_sigterm()  # the temporary store goes when the server stops
    with tempfile.TemporaryDirectory(prefix="tenantcost-demo-") as folder:
        prepared = prepare_demo(Path(folder), seed)
        os.environ.update(prepared.environ())
        typer.echo(prepared.announce(host, port))
        _run_uvicorn(host, port, workers, metrics_port)


def _check_port(host: str, port: int) -> None:
    """A port another process listens on: one line (exit 2) before any work, not uvicorn's
    log and exit 1 after the store was opened (or the demo built)."""
    import socket

    from tenantcost.errors import InputError

    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise InputError(f"--host: cannot resolve '{host}': {exc.strerror}") from None
    family, kind, proto, _name, address = infos[0]
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(address)
        except OSError as exc:
            raise InputError(f"--port: cannot listen on {host}:{port}: {exc.strerror}") from None


def _export_store_settings(db: str | None, data: str | None, settings: Path | None) -> None:
    """Resolve and check the store's settings, and export them for the worker processes."""
    from tenantcost.service.config import ENV_SECRET, settings_from_environment
    from tenantcost.store.schema import current_store
    from tenantcost.store.settings import ENV_DATA, ENV_DB, ENV_SETTINGS, resolve_settings

    resolved = resolve_settings(db, data, settings)
    with current_store(resolved):  # schema current, database reachable: else one line
        pass
    exported = {ENV_DB: resolved.db}
    if resolved.data is not None:
        exported[ENV_DATA] = resolved.data
    if resolved.settings_file is not None:
        exported[ENV_SETTINGS] = str(resolved.settings_file)
    if not os.environ.get(ENV_SECRET) and resolved.secret:
        exported[ENV_SECRET] = resolved.secret
    os.environ.update(exported)
    settings_from_environment()  # a missing or short secret: one line before uvicorn starts
    typer.echo(f"serving {resolved.display_db} (API docs at /docs)", err=True)


def _run_uvicorn(host: str, port: int, workers: int, metrics_port: int | None = None) -> None:
    """uvicorn with the app factory: each worker process builds its own app and engine. With
    ``metrics_port``, a fresh multiprocess folder is exported first (the workers inherit it
    and count into it) and this process serves ``/metrics`` (:mod:`tenantcost.service.
    metrics`)."""
    import tempfile

    import uvicorn

    if metrics_port is not None:
        from tenantcost.service.config import settings_from_environment
        from tenantcost.service.metrics import MULTIPROC_ENV, start_exporter
        from tenantcost.store.engine import open_engine

        folder = tempfile.TemporaryDirectory(prefix="tenantcost-metrics-")
        os.environ[MULTIPROC_ENV] = folder.name
        start_exporter(host, metrics_port, open_engine(settings_from_environment().store))
        typer.echo(f"metrics at http://{host}:{metrics_port}/metrics", err=True)
    uvicorn.run(
        "tenantcost.service.app:app_from_environment",
        factory=True,
        host=host,
        port=port,
        workers=workers,
        log_level="info",
    )
