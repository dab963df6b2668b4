"""The client list (``GET /api/v1/clients``, ``/clients``) and the landing redirects of ``/``.

Against a real ``tenantcost serve`` (uvicorn) on SQLite and on a real PostgreSQL, on the
bundled example spread over three months: 2026-10 (client-a and client-c) closed, 2026-11
(the example: client-b arrives) closed with a budget, 2026-12 run (a draft: client-c ended).
Checked from outside, as a reader's program would: the items' fields and figures to the
micro-unit, the change and its fraction, drafts for finance only, the sort (nulls last, ties
by id), the filters, the CSV, an account manager's scope (rows and filter values), and where
``/`` sends each role.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from .service_server import EXAMPLE, Service, create_token, running_service, tenantcost

OCT, NOV, DEC = "2026-10", "2026-11", "2026-12"
HOUR = "2026-11-03T"
FIELDS = ["id", "name", "plan", "segment", "account_manager", "status", "amount",
          "previous_amount", "change", "change_pct", "budget_status"]  # fmt: skip


@dataclass(frozen=True)
class Served:
    service: Service
    tokens: dict[str, str]

    def get(self, path: str, role: str | None, **params: str) -> httpx.Response:
        headers = {"Authorization": f"Bearer {self.tokens[role]}"} if role else {}
        return httpx.get(self.service.url + path, params=params or None, headers=headers,
                         timeout=60, follow_redirects=False)  # fmt: skip

    def listed(self, role: str, **params: str) -> dict:
        answer = self.get("/api/v1/clients", role, **params)
        assert answer.status_code == 200, answer.text
        return answer.json()


def _month_inputs(folder: Path, day: str, drop: str | None) -> tuple[Path, Path]:
    """The example's hour moved to ``day`` (``2026-10-06T``), without ``drop``'s usage."""
    usage = [line for line in (EXAMPLE / "usage.csv").read_text().splitlines()
             if drop is None or f",{drop}," not in line]  # fmt: skip
    usage_path, costs_path = folder / f"usage-{day[:7]}.csv", folder / f"costs-{day[:7]}.json"
    usage_path.write_text("\n".join(usage).replace(HOUR, day) + "\n")
    costs_path.write_text((EXAMPLE / "costs.json").read_text().replace(HOUR, day))
    return usage_path, costs_path


def _build(tmp: Path, db: str) -> None:
    store = ("--db", db, "--data", str(tmp / "data"))
    rules = tmp / "rules.yaml"
    rules.write_text((EXAMPLE / "rules.yaml").read_text().replace('"2026-11-01"', '"2026-10-01"'))
    tenantcost("db", "upgrade", *store)
    tenantcost("rules", "load", str(rules), *store)
    tenantcost("catalog", "load", str(EXAMPLE / "catalog.csv"), *store)
    for month, day, drop in ((OCT, "2026-10-06T", "client-b"), (NOV, HOUR, None),
                             (DEC, "2026-12-02T", "client-c")):  # fmt: skip
        usage, costs = _month_inputs(tmp, day, drop)
        tenantcost("ingest", "usage", "--usage", str(usage), *store)
        tenantcost("ingest", "costs", "--costs", str(costs), *store)
        if month == NOV:  # client-a within its band, client-b above, client-c none
            budget = tmp / "budget.csv"
            budget.write_text("client,low,expected,high\nclient-a,0.1,0.2,0.3\n"
                              "client-b,0,0.001,0.002\n")  # fmt: skip
            tenantcost("budget", "load", str(budget), "--month", NOV, *store)
        if month == DEC:
            tenantcost("run", "--month", month, *store)  # a draft
        else:
            tenantcost("close", "--month", month, "--allow-incomplete", *store)


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def served(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
           ) -> Iterator[Served]:  # fmt: skip
    tmp = tmp_path_factory.mktemp(f"client-list-{request.param}")
    if request.param == "sqlite":
        db = f"sqlite:///{tmp / 'store.db'}"
    else:
        from .postgres_fixture import new_database

        db = new_database(request.getfixturevalue("postgres_admin_url"))
    _build(tmp, db)
    tokens = {
        "admin": create_token(db, "admin", "root"),
        "finance": create_token(db, "finance", "fin"),
        "product": create_token(db, "product", "pricing"),
        "one": create_token(db, "account-manager", "am-one", "client-a"),
        "two": create_token(db, "account-manager", "am-two", "client-a", "client-c"),
    }
    with running_service(db, str(tmp / "data"), tmp / "serve.log") as service:
        yield Served(service, tokens)


A, B, C = 123_458, 77_173, 1_569
"""The example's figures of 2026-11 (micro-USD), as its sheets and history give them."""


def _ids(doc: dict) -> list[str]:
    return [item["id"] for item in doc["items"]]


def test_the_items_figures_change_and_budget_of_an_issued_month(served: Served) -> None:
    doc = served.listed("product", month=NOV)
    assert doc["month"] == NOV and doc["previous_month"] == OCT
    assert doc["money"]["currency"] == "USD" and doc["money"]["minor_unit_exponent"] == 6
    assert doc["sort"] == "amount" and doc["order"] == "desc" and doc["total"] == 3
    assert [list(item) for item in doc["items"]] == [[*FIELDS, "statement", "converted"]] * 3
    assert all(item["converted"] is None for item in doc["items"])  # the ledger's only
    a, b, c = doc["items"]  # amount, descending
    assert (a["id"], a["name"], a["plan"], a["segment"], a["account_manager"]) == (
        "client-a",
        "Acme Analytics",
        "business",
        "enterprise",
        "Dana Smith",
    )
    assert (a["status"], a["amount"], a["budget_status"]) == ("issued", A, "within")
    assert a["change"] == a["amount"] - a["previous_amount"]
    assert a["change_pct"] == round(a["change"] / a["previous_amount"], 9)
    # new this month: no previous figure, its change is its amount, no fraction
    assert (b["id"], b["amount"], b["previous_amount"], b["change"], b["change_pct"],
            b["budget_status"]) == ("client-b", B, None, B, None, "above")  # fmt: skip
    assert (c["id"], c["amount"], c["budget_status"]) == ("client-c", C, "no_budget")
    # the month conserves: the totals of every matching row, not only the page's
    assert doc["totals"]["amount"] == A + B + C
    assert doc["totals"]["change"] == doc["totals"]["amount"] - doc["totals"]["previous_amount"]
    assert served.listed("product", month=NOV, per_page="1")["totals"] == doc["totals"]
    # without a month: the latest the reader sees (product: issued only, finance: the draft)
    assert served.listed("product")["month"] == NOV
    draft = served.listed("finance")
    assert draft["month"] == DEC and {i["status"] for i in draft["items"]} == {"draft", None}
    ended = next(i for i in draft["items"] if i["id"] == "client-c")  # not in 2026-12
    assert (ended["amount"], ended["previous_amount"], ended["change"], ended["status"],
            ended["budget_status"]) == (None, C, -C, None, None)  # fmt: skip
    assert _ids(draft)[-1] == "client-c"  # a null amount sorts last
    assert served.listed("product", month=DEC)["items"] == []  # never a draft


def test_sorting_nulls_last_ties_by_id_and_refusals(served: Served) -> None:
    asc = served.listed("admin", month=NOV, sort="change_pct", order="asc")
    assert _ids(asc) == ["client-c", "client-a", "client-b"]  # b's null last either way
    desc = served.listed("admin", month=NOV, sort="change_pct", order="desc")
    assert _ids(desc) == ["client-a", "client-c", "client-b"]
    assert _ids(served.listed("admin", month=NOV, sort="change", order="desc")) == [
        "client-b",
        "client-c",
        "client-a",
    ]
    assert _ids(served.listed("admin", month=NOV, sort="name", order="desc")) == [
        "client-c",
        "client-b",
        "client-a",
    ]
    # ties: a and b share a manager; the tie goes by id in both orders
    for order in ("asc", "desc"):
        doc = served.listed("admin", month=NOV, sort="account_manager", order=order)
        assert _ids(doc) == (["client-a", "client-b", "client-c"] if order == "asc"
                             else ["client-c", "client-a", "client-b"])  # fmt: skip
    assert _ids(served.listed("admin", month=NOV, sort="budget_status", order="asc")) == [
        "client-b",
        "client-a",
        "client-c",
    ]  # above, within, no_budget
    paged = served.listed("admin", month=NOV, sort="id", per_page="1", page="2")
    assert _ids(paged) == ["client-b"] and paged["total"] == 3
    for params, named in (({"sort": "cost"}, "sort: expected one of id, name, plan"),
                          ({"order": "up"}, "order: expected one of asc, desc")):  # fmt: skip
        answer = served.get("/api/v1/clients", "admin", **params)
        assert answer.status_code == 422 and named in answer.json()["detail"], answer.text


def test_filters_and_search(served: Served) -> None:
    by_manager = served.listed("admin", month=NOV, manager="Dana Smith", sort="id")
    assert _ids(by_manager) == ["client-a", "client-b"]
    assert by_manager["totals"]["amount"] == A + B
    assert _ids(served.listed("admin", month=NOV, plan="starter")) == ["client-c"]
    assert _ids(served.listed("admin", month=NOV, segment="mid-market")) == ["client-b"]
    assert served.listed("admin", month=NOV, plan="Starter")["total"] == 0  # exact values
    assert _ids(served.listed("admin", month=NOV, q="ANALYTICS")) == ["client-a"]
    assert _ids(served.listed("admin", month=NOV, q="nt-c", manager="Lee Wong")) == ["client-c"]
    assert served.listed("admin", q="%")["total"] == 0  # no wildcard
    assert served.get("/api/v1/clients", "admin", plan="a\x00").status_code == 422


def test_the_csv_has_the_same_rows_unpaged_with_exact_decimals(served: Served) -> None:
    answer = served.get("/api/v1/clients", "finance", month=NOV, format="csv", per_page="1",
                        sort="id")  # fmt: skip
    assert answer.status_code == 200 and answer.headers["content-type"].startswith("text/csv")
    assert 'filename="clients-2026-11.csv"' in answer.headers["content-disposition"]
    rows = list(csv.DictReader(io.StringIO(answer.text)))
    assert list(rows[0]) == FIELDS and [r["id"] for r in rows] == ["client-a", "client-b",
                                                                   "client-c"]  # fmt: skip
    assert (rows[0]["amount"], rows[0]["change_pct"]) == ("0.123458", "-0.332886639")
    assert (rows[1]["previous_amount"], rows[1]["change"]) == ("", "0.077173")
    mine = served.get("/api/v1/clients", "one", format="csv").text
    assert "client-a" in mine and "client-b" not in mine and "Bolt" not in mine


def test_an_account_manager_sees_its_own_clients_and_values_only(served: Served) -> None:
    one = served.listed("one", month=NOV)
    assert _ids(one) == ["client-a"] and one["totals"]["amount"] == A
    two = served.listed("two")
    assert two["month"] == NOV and _ids(two) == ["client-a", "client-c"]
    assert served.listed("two", manager="Dana Smith")["total"] == 1  # not client-b's row
    assert served.listed("one", q="bolt")["total"] == 0
    page = served.get("/clients", "one").text
    for other in ("client-b", "Bolt", "Cobalt", "Lee Wong", "starter", "mid-market"):
        assert other not in page, other  # no row, no filter value of another client
    assert "Dana Smith" in page and "Acme Analytics" in page


def test_root_sends_each_role_to_its_answer(served: Served) -> None:
    for role, target in (("finance", f"/months/{DEC}"), ("admin", f"/months/{DEC}"),
                         ("product", "/pricing"), ("one", "/clients/client-a"),
                         ("two", "/clients"), (None, "/login")):  # fmt: skip
        answer = served.get("/", role)
        assert answer.status_code == 303 and answer.headers["location"] == target, role
