"""Service tokens: created once, shown once, stored as a hash, revocable, optionally expiring.

A token is ``tc_`` followed by 43 URL-safe characters (32 random bytes, 256 bits): the prefix
makes a leaked token recognisable to secret scanners and to people. The store keeps only its
sha256 — a token has full entropy, so a fast hash is enough (a slow password hash protects
guessable secrets; nobody guesses 256 bits) and lookups stay one indexed query per request.

Names are unique for ever: a revoked token keeps its row, so the actor ``token:NAME`` recorded
on batches and closes always means one token.
"""

from __future__ import annotations

import hashlib
import json
import re
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

from sqlalchemy import Connection, Engine, insert, select, update
from sqlalchemy.engine import Row

from tenantcost.client_id import client_id_problem
from tenantcost.errors import InputError
from tenantcost.service.permissions import Principal, Role
from tenantcost.store.lock import write_transaction
from tenantcost.store.models import Token, table, utcnow

TOKEN_PREFIX = "tc_"
TOKEN_BYTES = 32
_DURATION = re.compile(r"^\s*(\d+)\s*([hdw])\s*$")
_UNITS = {"h": "hours", "d": "days", "w": "weeks"}
_HOURS = {"h": 1, "d": 24, "w": 24 * 7}
MAX_EXPIRES_DAYS = 36_500
"""The longest ``--expires``: 100 years (a longer one would overflow the dates it writes)."""
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@-]{0,99}$")


class TokenState(StrEnum):
    ACTIVE = "active"
    EXPIRED = "expired"
    REVOKED = "revoked"


@dataclass(frozen=True)
class TokenInfo:
    """A token as listed: everything but the secret (which the store does not have)."""

    id: int
    name: str
    role: Role
    clients: tuple[str, ...]
    created_at: datetime
    created_by: str
    expires_at: datetime | None
    revoked_at: datetime | None

    def state(self, now: datetime | None = None) -> TokenState:
        if self.revoked_at is not None:
            return TokenState.REVOKED
        if self.expires_at is not None and self.expires_at <= (now or utcnow()):
            return TokenState.EXPIRED
        return TokenState.ACTIVE

    def document(self) -> dict[str, Any]:
        """The JSON form (``GET /api/v1/tokens``, ``token list --format json``)."""

        def iso(t: datetime | None) -> str | None:
            return None if t is None else t.isoformat().replace("+00:00", "Z")

        return {
            "name": self.name,
            "role": str(self.role),
            "clients": list(self.clients),
            "state": str(self.state()),
            "created_at": iso(self.created_at),
            "created_by": self.created_by,
            "expires_at": iso(self.expires_at),
            "revoked_at": iso(self.revoked_at),
        }


def hash_token(secret: str) -> str:
    """The stored form of a token."""
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


def parse_duration(text: str) -> timedelta:
    """``90d``, ``12h``, ``2w`` → a positive duration (``--expires``), at most
    :data:`MAX_EXPIRES_DAYS` days: ``99999999999d`` is refused, not an ``OverflowError``."""
    match = _DURATION.match(text)
    digits = match.group(1).lstrip("0") if match else ""
    if not match or not digits:
        raise InputError(f"--expires: expected a duration such as 90d, 12h or 2w, got '{text}'")
    unit = match.group(2)
    if len(digits) > 9 or int(digits) * _HOURS[unit] > MAX_EXPIRES_DAYS * 24:
        raise InputError(
            f"--expires: at most {MAX_EXPIRES_DAYS}d (100 years), got '{text.strip()}'"
        )
    return timedelta(**{_UNITS[unit]: int(digits)})


def check_role(role: str) -> Role:
    try:
        return Role(role)
    except ValueError:
        choices = ", ".join(r.value for r in Role)
        raise InputError(f"--role: expected one of {choices}, got '{role}'") from None


def _check_request(role: Role, clients: list[str], name: str | None) -> None:
    if name is not None and not _NAME.fullmatch(name):
        raise InputError(
            f"--name: '{name}' is not a token name (letters, digits, '.', '_', '@', '-'; "
            "at most 100 characters)"
        )
    if role is Role.ACCOUNT_MANAGER and not clients:
        raise InputError("--client: an account-manager token needs at least one client")
    if role is not Role.ACCOUNT_MANAGER and clients:
        raise InputError(
            f"--client: only account-manager tokens are limited to clients; a {role} token "
            "sees what its role allows"
        )
    if any(not c.strip() for c in clients):
        raise InputError("--client: a client id is not empty")
    for client in clients:
        problem = client_id_problem(client)
        if problem is not None:
            raise InputError(f"--client: {problem}")


def create_token(
    engine: Engine,
    role: str,
    *,
    clients: list[str] | None = None,
    name: str | None = None,
    expires: timedelta | None = None,
    actor: str,
    wait: float = 0.0,
) -> tuple[str, TokenInfo]:
    """A new token: its secret (to show once) and what the store keeps."""
    checked = check_role(role)
    wanted = sorted(set(clients or []))
    _check_request(checked, wanted, name)
    secret = TOKEN_PREFIX + secrets.token_urlsafe(TOKEN_BYTES)
    now = utcnow()
    token_name = name or f"{checked.value}-{secrets.token_hex(4)}"
    expires_at = now + expires if expires else None
    with write_transaction(engine, wait) as conn:
        taken = conn.execute(select(table(Token).c.id).where(table(Token).c.name == token_name))
        if taken.first() is not None:
            raise InputError(
                f"--name: a token named '{token_name}' exists (names are never "
                "reused, even after revoke)"
            )
        row = {
            "name": token_name,
            "role": checked.value,
            "clients": json.dumps(wanted),
            "hash": hash_token(secret),
            "created_at": now,
            "created_by": actor,
            "expires_at": expires_at,
        }
        token_id = conn.execute(insert(table(Token)).values(**row)).inserted_primary_key
    assert token_id is not None
    return secret, TokenInfo(
        int(token_id[0]), token_name, checked, tuple(wanted), now, actor, expires_at, None
    )


def _info(row: Row[Any]) -> TokenInfo:
    return TokenInfo(
        row.id,
        row.name,
        Role(row.role),
        tuple(json.loads(row.clients)),
        row.created_at,
        row.created_by,
        row.expires_at,
        row.revoked_at,
    )


def list_tokens(bind: Engine | Connection) -> list[TokenInfo]:
    """Every token, in creation order (the secrets are not in the store)."""
    query = select(table(Token)).order_by(table(Token).c.id)
    if isinstance(bind, Engine):
        with bind.connect() as conn:
            return [_info(r) for r in conn.execute(query)]
    return [_info(r) for r in bind.execute(query)]


def revoke_token(engine: Engine, name: str, *, actor: str, wait: float = 0.0) -> TokenInfo:
    """Revoke ``name`` now; every later request with it is 401 (sessions included)."""
    t = table(Token).c
    with write_transaction(engine, wait) as conn:
        # No token name holds NUL, and PostgreSQL refuses it in a query: not looked up.
        found = select(table(Token)).where(t.name == name)
        row = conn.execute(found).first() if "\x00" not in name else None
        if row is None:
            known = [i.name for i in list_tokens(conn)]
            from tenantcost.suggest import did_you_mean

            raise InputError(f"no token named '{name}'{did_you_mean(name, known)}")
        if row.revoked_at is not None:
            return _info(row)
        now = utcnow()
        conn.execute(
            update(table(Token)).where(t.id == row.id).values(revoked_at=now, revoked_by=actor)
        )
        info = _info(row)
    return TokenInfo(
        info.id,
        info.name,
        info.role,
        info.clients,
        info.created_at,
        info.created_by,
        info.expires_at,
        now,
    )


def _principal(row: Row[Any] | None, now: datetime) -> Principal | None:
    if row is None or row.revoked_at is not None:
        return None
    if row.expires_at is not None and row.expires_at <= now:
        return None
    return Principal(row.name, Role(row.role), frozenset(json.loads(row.clients)), row.id)


def principal_for_secret(engine: Engine, secret: str) -> Principal | None:
    """The principal of a presented token, or None (unknown, expired, revoked)."""
    if not secret.startswith(TOKEN_PREFIX):
        return None
    query = select(table(Token)).where(table(Token).c.hash == hash_token(secret))
    with engine.connect() as conn:
        return _principal(conn.execute(query).first(), utcnow())


def principal_for_id(engine: Engine, token_id: int) -> Principal | None:
    """The principal a browser session names (by token row id), or None if the token was
    revoked or expired since the login: a session never outlives its token."""
    query = select(table(Token)).where(table(Token).c.id == token_id)
    with engine.connect() as conn:
        return _principal(conn.execute(query).first(), utcnow())
