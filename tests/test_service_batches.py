"""The batch API against a real ``tenantcost serve`` on SQLite and PostgreSQL: a
month poisoned by a record only a later ingest made unusable is refused by `close` naming the
batch and the withdraw command, repaired with `POST /api/v1/batches/{uid}/withdraw`, then
closed; a closed month refuses a withdrawal (409); identical records posted again into the
closed month change nothing (200, ``unchanged``)."""

from __future__ import annotations

import csv
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from .service_server import (
    EXAMPLE,
    MONTH,
    Service,
    create_token,
    running_service,
    tenantcost,
)

FIELDS = ["uid", "kind", "mode", "rows", "cells", "window_from", "window_to", "ingested_at",
          "actor", "source", "status", "withdrawn_at", "withdrawn_by", "reason"]  # fmt: skip
"""A batch's fields in the batch API's contract, written out (not imported)."""


@dataclass(frozen=True)
class Served:
    service: Service
    tokens: dict[str, str]
    daily: str
    """The uid of the daily usage batch that hourly costs made unusable."""

    def call(self, method: str, path: str, role: str = "finance", **kwargs: Any) -> httpx.Response:
        headers = {"Authorization": f"Bearer {self.tokens[role]}", **kwargs.pop("headers", {})}
        return httpx.request(method, self.service.url + path, headers=headers, timeout=120,
                             **kwargs)  # fmt: skip


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def served(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Served]:
    tmp = tmp_path_factory.mktemp(f"batches-{request.param}")
    if request.param == "sqlite":
        db = f"sqlite:///{tmp / 'store.db'}"
    else:
        from .postgres_fixture import new_database

        db = new_database(request.getfixturevalue("postgres_admin_url"))
    store = ("--db", db, "--data", str(tmp / "data"))
    daily = tmp / "daily.csv"
    daily.write_text(
        (EXAMPLE / "usage.csv")
        .read_text()
        .replace(
            "2026-11-03T10:00:00Z,2026-11-03T11:00:00Z", "2026-11-03T00:00:00Z,2026-11-04T00:00:00Z"
        )
    )
    tenantcost("db", "upgrade", *store)
    tenantcost("rules", "load", str(EXAMPLE / "rules.yaml"), *store)
    uid = tenantcost("ingest", "usage", "--usage", str(daily), *store).split("batch ")[1][:12]
    tenantcost("ingest", "costs", "--costs", str(EXAMPLE / "costs.json"), *store)
    tokens = {"finance": create_token(db, "finance", "fin"),
              "account-manager": create_token(db, "account-manager", "am", "client-a"),
              "ingest": create_token(db, "ingest", "app")}  # fmt: skip
    with running_service(db, str(tmp / "data"), tmp / "serve.log") as service:
        yield Served(service, tokens, uid)


def hourly_records() -> list[dict[str, Any]]:
    with (EXAMPLE / "usage.csv").open() as handle:
        return [{**r, "requests": float(r["requests"]), "cpu_seconds": float(r["cpu_seconds"])}
                for r in csv.DictReader(handle)]  # fmt: skip


def test_a_poisoned_month_is_repaired_through_the_api(served: Served) -> None:
    close = f"/api/v1/months/{MONTH}/close"
    refused = served.call("POST", close, json={"allow_incomplete": True})
    assert refused.status_code == 422
    detail = refused.json()["detail"]
    assert "coarser than cost window" in detail and "\n" not in detail
    assert f"usage batch {served.daily}" in detail
    assert f"`tenantcost batch withdraw {served.daily} --reason TEXT`" in detail
    # hourly records of the same hours would count them twice: ingest names the batch
    overlap = served.call("POST", "/api/v1/usage", "ingest", json={"records": hourly_records()})
    assert overlap.status_code == 422 and f"stored batch {served.daily}" in overlap.text
    withdraw = f"/api/v1/batches/{served.daily}/withdraw"
    assert served.call("POST", withdraw, json={"reason": ""}).status_code == 422
    nul = served.call("POST", withdraw, json={"reason": "a\u0000b"})  # PostgreSQL: no NUL
    assert nul.status_code == 422 and "U+0000" in nul.json()["detail"]
    done = served.call("POST", withdraw, json={"reason": "daily usage, hourly costs"})
    assert done.status_code == 200, done.text
    doc = done.json()
    assert doc["status"] == "withdrawn" and doc["withdrawn_by"] == "token:fin"
    assert doc["reason"] == "daily usage, hourly costs" and doc["months"] == [MONTH]
    again = served.call("POST", withdraw, json={"reason": "twice"})
    assert again.status_code == 409 and "already withdrawn" in again.json()["detail"]
    unknown = served.call("POST", "/api/v1/batches/0123456789abcdef/withdraw",
                          json={"reason": "x"})  # fmt: skip
    assert unknown.status_code == 404 and "no batch" in unknown.json()["detail"]
    posted = served.call("POST", "/api/v1/usage", "ingest", json={"records": hourly_records()})
    assert posted.status_code == 200 and posted.json()["unchanged"] is False
    hourly = posted.json()["batch"]
    closed = served.call("POST", close, json={"allow_incomplete": True})
    assert closed.status_code == 200 and closed.json()["revision"] == 1, closed.text
    # the month is closed: withdrawing refuses, identical records change nothing
    refusal = served.call("POST", f"/api/v1/batches/{hourly}/withdraw", json={"reason": "x"})
    assert refusal.status_code == 409
    assert f"tenantcost reopen --month {MONTH} --reason TEXT" in refusal.json()["detail"]
    before = served.call("GET", "/api/v1/batches").json()
    same = served.call("POST", "/api/v1/usage", "ingest", json={"records": hourly_records()})
    assert same.status_code == 200 and same.json()["unchanged"] is True
    assert same.json()["batch"] == hourly
    summed = served.call("POST", "/api/v1/usage", "ingest",
                         json={"mode": "sum", "records": hourly_records()})  # fmt: skip
    assert summed.status_code == 409
    assert served.call("GET", "/api/v1/batches").json() == before
    # the list: every field, the withdrawal with its actor and reason
    assert all(list(b) == FIELDS for b in before)
    assert [(b["uid"][:12], b["kind"], b["status"], b["withdrawn_by"]) for b in before] == [
        (served.daily, "usage", "withdrawn", "token:fin"), (before[1]["uid"][:12], "costs",
        "active", None), (hourly[:12], "usage", "active", None)]  # fmt: skip
    assert before[2]["actor"] == "token:app" and before[0]["reason"] == doc["reason"]
    month = served.call("GET", "/api/v1/batches", params={"month": MONTH}).json()
    assert month == before
    assert served.call("GET", "/api/v1/batches", params={"month": "2026-12"}).json() == []


def test_only_finance_and_admin_list_and_withdraw(served: Served) -> None:
    for role in ("account-manager", "ingest"):
        assert served.call("GET", "/api/v1/batches", role).status_code == 403
        assert served.call("POST", f"/api/v1/batches/{served.daily}/withdraw", role,
                           json={"reason": "x"}).status_code == 403  # fmt: skip
    assert served.call("GET", "/api/v1/batches", params={"month": "2026-13"}).status_code == 422


def test_a_non_finite_number_in_a_body_is_a_422(served: Served) -> None:
    """JSON's Infinity, NaN and 1e999 parse as Python floats; FastAPI's 422 echoed them in a
    body that cannot be JSON, and the answer was a 500."""
    withdraw = f"/api/v1/batches/{served.daily}/withdraw"
    for body, echoed in ((b"[Infinity]", ["Infinity"]), (b'{"reason": NaN}', "NaN"),
                         (b'{"reason": -1e999}', "-Infinity")):  # fmt: skip
        done = served.call("POST", withdraw, content=body,
                           headers={"content-type": "application/json"})  # fmt: skip
        assert done.status_code == 422, (body, done.text)
        assert done.json()["detail"][0]["input"] == echoed
