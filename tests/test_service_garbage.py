"""Generated garbage on every route of a real ``tenantcost serve``, on SQLite and on PostgreSQL
(which refuses NUL in text, so every string that reaches SQL is a hazard there): no 5xx.

Hypothesis picks a route template from the application's own route table (``app.routes``,
so a route added later is covered without editing this file), fills its parameters with
hostile segments (NUL, percent-encoded bytes that are no UTF-8, bad tilde escapes, numbers
past 64 bits, dot segments, 300-character ids...), adds a query string of the same, a body
(nesting deeper than the JSON parser allows, JSON with lone surrogates and NUL, invalid
UTF-8, random bytes, forms) with a content type that may not match it, a method that may
not be the route's, and a valid admin token, a bad one, a garbage session cookie or nothing.
Every answer must be below 500, except the documented 503 with ``Retry-After`` (store
locked, ``/readyz``). The server's log must hold no traceback. Bounded: a few hundred
examples against one server per backend (fewer on PostgreSQL), well under a minute each.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from urllib.parse import quote

import fastapi.routing
import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tenantcost.service.session import COOKIE_NAME

from .odd_clients import ODD_CLIENTS, odd_client_store
from .service_server import MONTH, SECRET, Service, create_token, running_service

EXAMPLES_PER_ROUTE = {"sqlite": 12, "postgresql": 6}
"""About 400 examples in all over the application's 33 routes on SQLite, 200 on PostgreSQL."""
METHODS = ("GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS")
PARAM = re.compile(r"\{([^}:]+)(?::[^}]+)?\}")
QUERY_KEYS = ("q", "page", "per_page", "month", "keys", "mode", "next", "logged_out", "done")
QUERY_KEYS = (*QUERY_KEYS, "view")  # the sheets' ?view=client|internal
GOOD_SEGMENTS = (MONTH, "client-a", "client-b", "team~2Fa", "%E5%AE%A2%E6%88%B7", "a~7Eb",
                 "sheet.pdf", "no-such-token")  # fmt: skip
BAD_SEGMENTS = ("..", ".", "~", "~~", "~0", "~2F", "~00", "~ED~A0~80", "~FF", "%00", "%2F",
                "%ED%A0%80", "%FF%FE", "%25", "a" * 300, "2026-13", "2026-11%0A", "0" * 25,
                "99999999999999999999", "-1", "%C0%AF", "%E2%80%AE")  # fmt: skip
BAD_TEXT = ("\x00", "\ud800", "a\udfffb", "\x1b[31m", "\u202e", "9" * 30, "-" + "9" * 30, "")


@dataclass(frozen=True)
class Target:
    service: Service
    backend: str
    admin: str
    routes: tuple[tuple[str, tuple[str, ...]], ...]
    """(path template, methods) of every route the application has."""


def _route_table(db: str, data: str) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """The application's routes, read from an application built over the same store."""
    from tenantcost.service.app import create_app
    from tenantcost.service.config import ServiceSettings
    from tenantcost.store.settings import resolve_settings

    app = create_app(ServiceSettings(resolve_settings(db=db, data=data, environ={}), SECRET))
    # FastAPI >= 0.16x keeps included routers as such in app.routes; this flattens them.
    flatten = getattr(fastapi.routing, "iter_route_contexts", lambda routes: routes)
    try:
        return tuple(
            (route.path, tuple(sorted(getattr(route, "methods", None) or ("GET",))))
            for route in flatten(app.routes)
            if isinstance(getattr(route, "path", None), str)
        )
    finally:
        app.state.engine.dispose()


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def target(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Target]:
    folder = tmp_path_factory.mktemp(f"garbage-{request.param}")
    data = str(folder / "data")
    if request.param == "sqlite":
        db = f"sqlite:///{folder / 'store.db'}"
    else:
        from .postgres_fixture import new_database

        db = new_database(request.getfixturevalue("postgres_admin_url"))
    odd_client_store(db, data, folder)
    admin = create_token(db, "admin", "garbage-admin-5f0c9e")
    routes = _route_table(db, data)
    assert len(routes) >= 25, routes  # the API, the health probes, the docs and the pages
    with running_service(db, data, folder / "serve.log") as service:
        yield Target(service, request.param, admin, routes)
        log = service.log_text()
        assert "Traceback" not in log, log[-4000:]


def _percent(text: str) -> str:
    return quote(text, safe="~", errors="surrogatepass")


segments = st.one_of(
    st.sampled_from(GOOD_SEGMENTS),
    st.sampled_from(BAD_SEGMENTS),
    st.text(max_size=30).map(_percent),
    st.binary(max_size=12).map(lambda raw: "".join(f"%{b:02X}" for b in raw)),
    st.text(alphabet="~0123456789ABCDEFabcdefz-.", max_size=12),
    st.integers(min_value=-(10**30), max_value=10**30).map(str),
)
values = st.one_of(segments, st.sampled_from(BAD_TEXT).map(_percent))
queries = st.lists(
    st.tuples(st.one_of(st.sampled_from(QUERY_KEYS), segments), values), max_size=4
).map(lambda pairs: "&".join(f"{k}={v}" for k, v in pairs))
texts = st.one_of(st.text(max_size=20), st.sampled_from(BAD_TEXT))
scalars = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(10**40), max_value=10**40), st.floats(),
    texts,
)  # fmt: skip
documents = st.recursive(
    scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=4), st.dictionaries(texts, children, max_size=4)
    ),
    max_leaves=12,
)
shaped = st.fixed_dictionaries(
    {},
    optional={
        "reason": documents,
        "role": st.one_of(st.sampled_from(("admin", "account-manager", "nobody")), texts),
        "clients": st.lists(texts, max_size=3),
        "name": texts,
        "expires": st.one_of(st.sampled_from(("99999999999d", "0d", "1h", "9" * 400 + "w")),
                             texts),
        "allow_incomplete": documents,
        "mode": st.one_of(st.sampled_from(("sum", "replace")), texts),
        "records": st.lists(st.dictionaries(st.sampled_from(
            ("window_start", "window_end", "service", "client", "requests")), documents,
            max_size=5), max_size=3),
    },
)  # fmt: skip
bodies = st.one_of(
    st.none(),
    st.integers(min_value=1, max_value=200_000).map(lambda n: b"[" * n),
    st.integers(min_value=1, max_value=5_000).map(lambda n: b'{"reason":' * n),
    st.one_of(documents, shaped).map(lambda d: json.dumps(d, ensure_ascii=True).encode()),
    st.binary(max_size=64),
    st.tuples(values, values).map(lambda kv: f"csrf_token={kv[0]}&reason={kv[1]}".encode()),
)
content_types = st.sampled_from((None, "application/json", "application/x-www-form-urlencoded",
                                 "text/plain", "multipart/form-data; boundary=x",
                                 "application/vnd.apache.parquet"))  # fmt: skip


GOOD_PARAMS = {
    "client_id": ("client-a", "client-b", "team~2Fa", "%E5%AE%A2%E6%88%B7", "a~7Eb", "ghost"),
    "month": (MONTH, "2026-10"),
}
GOOD_QUERIES = ("", "q=client", "q=%E5%AE%A2", "page=2&per_page=2", f"month={MONTH}",
                "keys=requests,cpu_seconds", "mode=sum", "next=/clients")  # fmt: skip
WHO = ("admin", "anonymous", "bad-token", "bad-cookie")
AXES = ("path", "path", "query", "query", "body", "body", "method", "who", "content-type")
"""What an example breaks (one or two of these); the rest of the request is well formed, so
the garbage gets past authentication and routing to the code that reads it."""


@st.composite
def garbage_requests(draw: st.DrawFn, template: str, methods: tuple[str, ...]) -> dict:
    broken = set(draw(st.lists(st.sampled_from(AXES), min_size=1, max_size=2)))
    if "path" in broken and draw(st.integers(0, 5)) == 0:  # now and then no template at all
        template = "/" + "/".join(draw(st.lists(segments, max_size=4)))

    def param(match: re.Match[str]) -> str:
        good = st.sampled_from(GOOD_PARAMS.get(match.group(1), ("no-such-token",)))
        return draw(st.one_of(segments, good) if "path" in broken else good)

    path = PARAM.sub(param, template)
    query = draw(queries if "query" in broken else st.sampled_from(GOOD_QUERIES))
    body = draw(bodies if "body" in broken else st.one_of(
        st.none(), shaped.map(lambda d: json.dumps(d, ensure_ascii=True).encode())))  # fmt: skip
    typed = "application/json" if body is not None and body[:1] in (b"{", b"[") else None
    return {
        "method": draw(st.sampled_from(METHODS if "method" in broken else methods)),
        "url": path + (f"?{query}" if query else ""),
        "body": body,
        "content_type": draw(content_types) if "content-type" in broken else typed,
        "who": draw(st.sampled_from(WHO)) if "who" in broken else "admin",
        "cookie": draw(st.text(alphabet="abcdefXYZ0123456789._-=", max_size=80)),
    }


def _headers(target: Target, request: dict) -> dict[str, str]:
    headers = {"Content-Type": request["content_type"]} if request["content_type"] else {}
    if request["who"] == "admin":
        headers["Authorization"] = f"Bearer {target.admin}"
    elif request["who"] == "bad-token":
        headers["Authorization"] = "Bearer tc_" + request["cookie"]
    elif request["who"] == "bad-cookie":
        headers["Cookie"] = f"{COOKIE_NAME}={request['cookie']}"
    return headers


def test_no_generated_request_gets_a_5xx(target: Target) -> None:
    statuses: Counter[int] = Counter()
    wrong: list[str] = []
    with httpx.Client(base_url=target.service.url, timeout=60) as client:
        for template, methods in target.routes:  # every route gets its share of the examples

            @settings(
                max_examples=EXAMPLES_PER_ROUTE[target.backend],
                deadline=None,
                database=None,
                suppress_health_check=list(HealthCheck),
            )
            @given(garbage_requests(template, methods))  # fmt: skip
            def check(request: dict) -> None:
                answer = client.request(request["method"], request["url"],
                                        content=request["body"],
                                        headers=_headers(target, request))  # fmt: skip
                statuses[answer.status_code] += 1
                if answer.status_code >= 500:
                    assert answer.status_code == 503 and "retry-after" in answer.headers, (
                        f"{request['method']} {request['url']} ({request['who']}, "
                        f"{request['content_type']}, body {request['body']!r:.200}): "
                        f"{answer.status_code} {answer.text[:300]}"
                    )

            try:
                check()
            except AssertionError as exc:  # go on: one run names every route that fails
                wrong.append(f"{template}: {str(exc).splitlines()[0]}")
    assert not wrong, "\n".join(wrong)
    # The garbage reached the routes: some answers are successes, most are refusals.
    examples = sum(statuses.values())
    assert sum(n for s, n in statuses.items() if s < 300) >= examples // 10, statuses
    assert sum(n for s, n in statuses.items() if 400 <= s < 500) >= examples // 3, statuses


def test_the_odd_store_serves_its_clients(target: Target) -> None:
    """The store the garbage ran against is the one meant (a check the garbage cannot pass
    by answering 4xx to everything)."""
    admin = {"Authorization": f"Bearer {target.admin}"}
    found = httpx.get(f"{target.service.url}/api/v1/clients", headers=admin, timeout=60).json()
    assert set(ODD_CLIENTS) <= {item["id"] for item in found["items"]}
