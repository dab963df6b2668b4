"""Browser sessions: a signed cookie naming the token a person logged in with, and CSRF.

Why a signed cookie and not a server-side session table: the signature (itsdangerous, keyed
by the configured secret, ``TENANTCOST_SECRET`` or the settings file's ``secret``) lets every
uvicorn worker and every restart accept the same cookie without shared memory. The cookie
holds no token, only a reference to one (its name and store id): each request looks the
token up again (:func:`tenantcost.service.auth` via the principal resolver), so a session
ends the moment its token is revoked or expires, on every worker at once. A token revoked and
created again under the same name has another id, so old sessions stay dead.

Logout ends the session for good: the session's random id (``sid``) is recorded in the
store (``web_session_end``, :func:`end_session`) and every request checks it
(:func:`session_ended`), so a copy of the cookie taken before logout is refused afterwards,
on every worker. Only logout writes; a live session costs one primary-key lookup.

CSRF: every session, even before login, carries a random ``csrf`` value; every form renders
it in a hidden field and every POST must send it back (compared in constant time). Cross-site
pages cannot read the cookie or the page, so they cannot forge the field; SameSite=Lax stops
the cookie on cross-site POSTs as well (defence in depth). Logging in issues a new session
(new csrf value): a session fixed before login is worth nothing after it.

The cookie is ``HttpOnly`` (no script reads it), ``SameSite=Lax``, ``Path=/`` and ``Secure``
when the request came over HTTPS: either uvicorn saw HTTPS (TLS itself, or a trusted proxy's
``X-Forwarded-Proto`` that uvicorn's ``--forwarded-allow-ips`` applies to the scheme), or the
request carries ``X-Forwarded-Proto: https``. Trusting that header for this one flag is safe:
a forged header only makes the cookie stricter.
"""

from __future__ import annotations

import hmac
import secrets
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from itsdangerous import BadSignature, URLSafeTimedSerializer
from sqlalchemy import Engine, delete, insert, select
from sqlalchemy.exc import IntegrityError
from starlette.requests import Request
from starlette.responses import Response

COOKIE_NAME = "tenantcost_session"
SALT = "tenantcost.session.v1"
"""Namespaces the signature: a value signed for anything else with the same secret is not a
session."""
MAX_AGE_SECONDS = 12 * 3600
"""A session lasts a working day at most, whatever the token's own expiry (which is checked
on every request as well)."""
CSRF_FIELD = "csrf_token"
"""The hidden form field (and ``X-CSRF-Token`` header, for scripts) carrying the CSRF value."""
CSRF_HEADER = "x-csrf-token"
FORWARDED_PROTO = "x-forwarded-proto"


@dataclass(frozen=True)
class Session:
    """What the cookie says: the token (name and id) or none (anonymous, before login), the
    CSRF value and when it was issued (unix seconds)."""

    csrf: str
    token_name: str | None = None
    token_id: int | None = None
    issued_at: int = 0
    sid: str | None = None
    """The logged-in session's random id (what logout records as ended)."""

    @property
    def logged_in(self) -> bool:
        return self.token_name is not None and self.token_id is not None and bool(self.sid)


def new_session(token_name: str | None = None, token_id: int | None = None) -> Session:
    """A fresh session with a new CSRF value and, when logged in, a new id (at login, or
    anonymous for a first visit)."""
    sid = secrets.token_hex(16) if token_id is not None else None
    return Session(secrets.token_urlsafe(32), token_name, token_id, int(time.time()), sid)


class SessionCodec:
    """Signs and checks session cookies with the service's secret."""

    def __init__(self, secret: str, max_age: int = MAX_AGE_SECONDS) -> None:
        if not secret:
            raise ValueError("a session secret is required")
        self._serializer = URLSafeTimedSerializer(secret, salt=SALT)
        self.max_age = max_age

    def dumps(self, session: Session) -> str:
        payload: dict[str, Any] = {"c": session.csrf, "i": session.issued_at}
        if session.logged_in:
            payload |= {"n": session.token_name, "t": session.token_id, "s": session.sid}
        return self._serializer.dumps(payload)

    def loads(self, value: str | None) -> Session | None:
        """The session, or None for a missing, forged, tampered or expired cookie."""
        if not value:
            return None
        try:
            data = self._serializer.loads(value, max_age=self.max_age)
        except BadSignature:  # SignatureExpired is a BadSignature too
            return None
        if not isinstance(data, dict) or not isinstance(data.get("c"), str):
            return None
        name, token_id, sid = data.get("n"), data.get("t"), data.get("s")
        valid = isinstance(name, str) and isinstance(sid, str) and type(token_id) is int
        if not valid:
            name = token_id = sid = None
        return Session(data["c"], name, token_id, int(data.get("i") or 0), sid)


def is_https(request: Request) -> bool:
    """The request reached the service over HTTPS (directly or per the proxy's header)."""
    if request.url.scheme == "https":
        return True
    forwarded = request.headers.get(FORWARDED_PROTO, "")
    return forwarded.split(",")[0].strip().lower() == "https"


def read_session(request: Request, codec: SessionCodec) -> Session | None:
    """The request's valid session cookie, if any."""
    return codec.loads(request.cookies.get(COOKIE_NAME))


def set_session_cookie(
    response: Response, request: Request, codec: SessionCodec, session: Session
) -> None:
    """Write ``session`` as the cookie: HttpOnly, SameSite=Lax, Secure over HTTPS."""
    response.set_cookie(
        COOKIE_NAME,
        codec.dumps(session),
        max_age=codec.max_age,
        path="/",
        httponly=True,
        samesite="lax",
        secure=is_https(request),
    )


def clear_session_cookie(response: Response, request: Request) -> None:
    """Remove the cookie (logout); same attributes, so every browser drops it."""
    response.delete_cookie(
        COOKIE_NAME, path="/", httponly=True, samesite="lax", secure=is_https(request)
    )


def session_ended(engine: Engine, session: Session) -> bool:
    """Whether logout ended ``session`` (one primary-key lookup)."""
    from tenantcost.store.models import WebSessionEnd, table

    ended = table(WebSessionEnd).c
    with engine.connect() as connection:
        found = connection.execute(select(ended.sid).where(ended.sid == session.sid)).first()
    return found is not None


def end_session(engine: Engine, session: Session, max_age: int = MAX_AGE_SECONDS) -> None:
    """Record ``session`` as ended (logout); ending it twice is harmless."""
    from tenantcost.store.models import WebSessionEnd, table, utcnow

    if not session.logged_in:
        return
    expires = datetime.fromtimestamp(session.issued_at + max_age, UTC)
    row = {"sid": session.sid, "token_id": session.token_id, "ended_at": utcnow(),
           "expires_at": expires}  # fmt: skip
    ended = table(WebSessionEnd)
    try:
        with engine.begin() as connection:
            # rows of cookies past their own expiry protect nothing any more: drop them here
            connection.execute(delete(ended).where(ended.c.expires_at < row["ended_at"]))
            connection.execute(insert(ended), [row])
    except IntegrityError:  # the same cookie logged out twice (two tabs)
        return


def csrf_matches(session: Session | None, submitted: str | None) -> bool:
    """The submitted value is this session's CSRF value (constant-time comparison)."""
    if session is None or not submitted:
        return False
    return hmac.compare_digest(session.csrf.encode(), submitted.encode())


__all__ = [
    "COOKIE_NAME",
    "CSRF_FIELD",
    "CSRF_HEADER",
    "Session",
    "SessionCodec",
    "clear_session_cookie",
    "csrf_matches",
    "end_session",
    "is_https",
    "new_session",
    "read_session",
    "session_ended",
    "set_session_cookie",
]
