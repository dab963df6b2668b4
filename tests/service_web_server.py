"""A real ``uvicorn`` serving the service on an ephemeral 127.0.0.1 port, for the page tests.

The server is service-api's fixture (:mod:`tests.service_server`): ``tenantcost serve`` in
its own process on a free port. The store is the bundled example built the way
``serve --demo`` builds it (:func:`tenantcost.service.demo.example_store`), with one token per
role.
"""

from __future__ import annotations

import secrets
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from tenantcost.service.demo import example_store

from . import service_server

SECRET = "test-secret-" + "x" * 24
MONTH = "2026-11"


@dataclass
class Served:
    """A running service: its URL, store and one token per test user."""

    url: str
    db: str
    data: str
    secret: str
    tokens: dict[str, str] = field(default_factory=dict)


def make_tokens(db: str, data: str) -> dict[str, str]:
    """``admin``, ``finance``, ``manager`` (client-a), ``manager-b`` (client-b), ``ingest``,
    ``product``."""
    from tenantcost.service.tokens import create_token
    from tenantcost.store.engine import open_engine
    from tenantcost.store.settings import resolve_settings

    engine = open_engine(resolve_settings(db=db, data=data, environ={}))
    wanted = {
        "admin": ("admin", []),
        "finance": ("finance", []),
        "manager": ("account-manager", ["client-a"]),
        "manager-b": ("account-manager", ["client-b"]),
        "ingest": ("ingest", []),
        "product": ("product", []),
    }
    try:
        return {
            name: create_token(engine, role, clients=clients, name=f"test-{name}",
                               actor="tests")[0]
            for name, (role, clients) in wanted.items()
        }  # fmt: skip
    finally:
        engine.dispose()


def build_store(db: str, data: str, *, close: bool) -> dict[str, str]:
    """The example in a new store (month closed or not) and its tokens."""
    example_store(db, data, close=close, actor="tests")
    return make_tokens(db, data)


@contextmanager
def running_service(db: str, data: str, secret: str = SECRET) -> Iterator[str]:
    """``tenantcost serve`` on the store (service-api's fixture, the command users run);
    yields its base URL (no trailing slash)."""
    with tempfile.TemporaryDirectory(prefix="tenantcost-pages-log-") as folder:
        log = Path(folder) / "serve.log"
        try:
            with service_server.running_service(db, data, log, secret=secret) as service:
                yield service.url
        finally:  # a failing test shows the server's traceback, if it had one
            text = log.read_text(encoding="utf-8", errors="replace") if log.exists() else ""
            if "Traceback" in text:
                print(text[text.index("Traceback") - 200 :][:8000])


@contextmanager
def served_example(db: str, data: Path | str, *, close: bool) -> Iterator[Served]:
    """The example store served: build it, start uvicorn, yield what tests need."""
    tokens = build_store(db, str(data), close=close)
    secret = SECRET + secrets.token_hex(4)
    with running_service(db, str(data), secret) as url:
        yield Served(url, db, str(data), secret, tokens)
