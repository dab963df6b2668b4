"""Service tokens: created once and shown once, kept as a hash, listed without the secret,
revoked and expired tokens refused at once (API and CLI), on SQLite and PostgreSQL."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import httpx
import pytest
from sqlalchemy import select

from tenantcost.service.tokens import create_token as create_token_now
from tenantcost.store.engine import open_engine
from tenantcost.store.models import Token, table
from tenantcost.store.settings import resolve_settings

from .service_server import (
    Service,
    create_token,
    example_store,
    invoke,
    running_service,
    tenantcost,
)


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def store(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[
    tuple[str, Service]
]:  # fmt: skip
    tmp = tmp_path_factory.mktemp(f"tokens-{request.param}")
    if request.param == "sqlite":
        db = f"sqlite:///{tmp / 'store.db'}"
    else:
        from .postgres_fixture import new_database

        db = new_database(request.getfixturevalue("postgres_admin_url"))
    data = str(tmp / "data")
    example_store(db, data, close=False)
    with running_service(db, data, tmp / "serve.log") as service:
        yield db, service


def months(service: Service, token: str) -> int:
    answer = httpx.get(f"{service.url}/api/v1/months", headers={"Authorization": f"Bearer {token}"})
    return answer.status_code


def stored_rows(db: str) -> list[dict[str, object]]:
    engine = open_engine(resolve_settings(db=db, environ={}))
    try:
        with engine.connect() as conn:
            return [dict(r._mapping) for r in conn.execute(select(table(Token)))]
    finally:
        engine.dispose()


def test_create_prints_the_token_alone_and_the_store_keeps_only_its_hash(store) -> None:
    db, service = store
    done = subprocess.run([sys.executable, "-m", "tenantcost", "token", "create", "--role",
                           "finance", "--name", "fin-1", "--db", db], capture_output=True,
                          text=True, check=True)  # fmt: skip
    token = done.stdout.removesuffix("\n")
    assert "\n" not in token and done.stderr.startswith("token 'fin-1' (finance) created")
    assert token.startswith("tc_") and len(token) >= 3 + 43  # 32 random bytes, base64url
    [row] = [r for r in stored_rows(db) if r["name"] == "fin-1"]
    assert row["hash"] == hashlib.sha256(token.encode()).hexdigest()
    assert token not in json.dumps(stored_rows(db), default=str)
    assert months(service, token) == 200
    listed = tenantcost("token", "list", "--db", db, "--format", "json")
    assert token not in listed and token[3:15] not in listed
    entry = next(t for t in json.loads(listed) if t["name"] == "fin-1")
    assert entry["role"] == "finance" and entry["state"] == "active" and entry["clients"] == []
    assert "fin-1" in tenantcost("token", "list", "--db", db)


def test_revoke_takes_effect_at_once_and_the_name_stays_taken(store) -> None:
    db, service = store
    token = create_token(db, "finance", "fin-2")
    assert months(service, token) == 200
    out = tenantcost("token", "revoke", "fin-2", "--db", db)
    assert out.startswith("token 'fin-2' revoked at ")
    assert months(service, token) == 401
    again = invoke("token", "create", "--role", "finance", "--name", "fin-2", "--db", db)
    assert again.exit_code == 2 and again.stdout == ""
    assert again.stderr.startswith("error: --name: a token named 'fin-2' exists")
    state = json.loads(tenantcost("token", "list", "--db", db, "--format", "json"))
    assert next(t for t in state if t["name"] == "fin-2")["state"] == "revoked"


def test_an_expired_token_is_401(store) -> None:
    db, service = store
    engine = open_engine(resolve_settings(db=db, environ={}))
    try:
        token, _info = create_token_now(engine, "finance", name="short-lived",
                                       expires=timedelta(seconds=2), actor="test")  # fmt: skip
    finally:
        engine.dispose()
    assert months(service, token) == 200
    time.sleep(2.5)
    assert months(service, token) == 401
    listed = json.loads(tenantcost("token", "list", "--db", db, "--format", "json"))
    assert next(t for t in listed if t["name"] == "short-lived")["state"] == "expired"
    week = create_token(db, "ingest", "weekly", expires="1w")
    entry = next(t for t in json.loads(tenantcost("token", "list", "--db", db, "--format",
                                                  "json")) if t["name"] == "weekly")  # fmt: skip
    assert entry["expires_at"] is not None and months(service, week) == 403


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--role", "boss"], "error: --role: expected one of admin, finance, account-manager, "
                             "product, ingest, got 'boss'"),
        (["--role", "account-manager"], "error: --client: an account-manager token needs at "
                                        "least one client"),
        (["--role", "finance", "--client", "a"], "error: --client: only account-manager tokens"),
        (["--role", "admin", "--expires", "soon"], "error: --expires: expected a duration such "
                                                   "as 90d, 12h or 2w, got 'soon'"),
        (["--role", "admin", "--name", "has space"], "error: --name: 'has space' is not a token"),
    ],
)  # fmt: skip
def test_bad_token_requests_are_one_line_and_exit_2(store, args: list[str], message: str) -> None:
    db, _service = store
    before = stored_rows(db)
    done = invoke("token", "create", *args, "--db", db)
    assert done.exit_code == 2 and done.stdout == "" and "Traceback" not in done.stderr
    assert done.stderr.startswith(message) and done.stderr.count("\n") == 1
    assert stored_rows(db) == before


def test_admin_manages_tokens_through_the_api(store) -> None:
    db, service = store
    admin = {"Authorization": f"Bearer {create_token(db, 'admin', 'api-admin')}"}
    made = httpx.post(f"{service.url}/api/v1/tokens", headers=admin,
                      json={"role": "account-manager", "clients": ["client-b"], "name": "am-b",
                            "expires": "90d"})  # fmt: skip
    assert made.status_code == 201
    body = made.json()
    secret = body.pop("token")
    assert body["name"] == "am-b" and body["clients"] == ["client-b"] and body["expires_at"]
    assert secret.startswith("tc_") and months(service, secret) == 200
    listed = httpx.get(f"{service.url}/api/v1/tokens", headers=admin)
    assert secret not in listed.text and "am-b" in listed.text
    gone = httpx.delete(f"{service.url}/api/v1/tokens/am-b", headers=admin)
    assert gone.status_code == 200 and gone.json()["state"] == "revoked"
    assert months(service, secret) == 401
    assert httpx.delete(f"{service.url}/api/v1/tokens/nobody", headers=admin).status_code == 404
    dup = httpx.post(f"{service.url}/api/v1/tokens", headers=admin,
                     json={"role": "finance", "name": "am-b"})  # fmt: skip
    assert dup.status_code == 422 and "exists" in dup.json()["detail"]


def test_serve_refuses_a_missing_or_short_secret(store, tmp_path: Path) -> None:
    db, _service = store
    for secret in (None, "short", "change-me-to-a-long-random-string"):
        env = {"PATH": "/usr/bin:/bin"} | ({"TENANTCOST_SECRET": secret} if secret else {})
        done = subprocess.run([sys.executable, "-m", "tenantcost", "serve", "--db", db,
                               "--port", "1"], capture_output=True, text=True, env=env,
                              timeout=60)  # fmt: skip
        assert done.returncode == 2 and "Traceback" not in done.stderr
        assert done.stderr.startswith("error: ") and "secret" in done.stderr


def test_serve_refuses_a_port_in_use(store) -> None:
    import socket

    db, _service = store
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = invoke("serve", "--db", db, "--port", str(port))
    assert done.exit_code == 2
    assert (
        done.stderr == f"error: --port: cannot listen on 127.0.0.1:{port}: Address already in use\n"
    )
