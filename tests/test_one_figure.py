"""One figure, one string: a client's amount reads the same on every surface that shows it.

The bundled example (three clients, its catalog) with its one hour widened to the whole of
November 2026, and its external service priced per month: the allocation is the example's,
figure for figure, but the cost data covers every hour of the month, so the month closes
without ``--allow-incomplete`` and the pricing page is on the ``month`` basis, not
``projected``. client-a's 0.123458 USD reads 0.1234 in the run's one rounding
(:mod:`tenantcost.store.shown`) but 0.1235 rounded alone: the pricing page's old bug. Through a
real server, finance reads client-a's amount on the client page, the client list, the pricing
page, the month page and the sheet (HTML, Markdown, and PDF through ``pdftotext``), and every
one of them prints ``0.1234``, never ``0.1235``.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from html import unescape

import httpx
import pytest

from .service_server import EXAMPLE, MONTH, create_token, running_service, tenantcost

CLIENT = "client-a"
SHOWN = "0.1234"
ALONE = "0.1235"
HOUR = ("2026-11-03T10:00:00Z", "2026-11-03T11:00:00Z")
WHOLE = ("2026-11-01T00:00:00Z", "2026-12-01T00:00:00Z")


@dataclass(frozen=True)
class Served:
    url: str
    headers: dict[str, str]

    def get(self, path: str) -> httpx.Response:
        answer = httpx.get(self.url + path, headers=self.headers, timeout=120)
        assert answer.status_code == 200, (path, answer.status_code, answer.text[:300])
        return answer


def _widen(text: str) -> str:
    """The example's hour as the whole month (OpenCost's ``minutes`` with it)."""
    text = text.replace(HOUR[0], WHOLE[0]).replace(HOUR[1], WHOLE[1])
    return text.replace('"minutes": 60,', '"minutes": 43200,')


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    tmp = tmp_path_factory.mktemp("one-figure")
    for name in ("costs.json", "usage.csv"):
        (tmp / name).write_text(_widen((EXAMPLE / name).read_text()))
    rules = (EXAMPLE / "rules.yaml").read_text()
    assert "per: hour" in rules
    (tmp / "rules.yaml").write_text(rules.replace("per: hour", "per: month"))
    db, data = f"sqlite:///{tmp / 'store.db'}", str(tmp / "data")
    store = ("--db", db, "--data", data)
    tenantcost("db", "upgrade", *store)
    tenantcost("rules", "load", str(tmp / "rules.yaml"), *store)
    tenantcost("ingest", "usage", "--usage", str(tmp / "usage.csv"), *store)
    tenantcost("ingest", "costs", "--costs", str(tmp / "costs.json"), *store)
    tenantcost("close", "--month", MONTH, *store)  # no --allow-incomplete: every hour covered
    tenantcost("catalog", "load", str(EXAMPLE / "catalog.csv"), *store)
    token = create_token(db, "finance", "one-figure-finance")
    with running_service(db, data, tmp / "serve.log") as service:
        yield Served(service.url, {"Authorization": f"Bearer {token}"})


def _text(html: str) -> str:
    html = re.sub(r"<(svg|style|script)\b.*?</\1>", " ", html, flags=re.S)
    return " ".join(unescape(re.sub(r"<[^>]+>", " ", html)).split())


def _rows_of(html: str, client: str) -> list[str]:
    """The text of every table row that names the client."""
    rows = re.findall(r"<tr\b.*?</tr>", html, flags=re.S)
    return [t for t in (_text(r) for r in rows) if re.search(rf"\b{re.escape(client)}\b", t)]


def _amount_in(text: str) -> bool:
    return re.search(rf"(?<![\d.]){re.escape(SHOWN)}(?!\d)", text) is not None


def test_the_month_is_whole_and_priced_on_the_month_basis(served: Served) -> None:
    doc = served.get(f"/api/v1/months/{MONTH}/unit-economics").json()
    assert doc["basis"] == "month" and doc["coverage"] == 1, (doc["basis"], doc["coverage"])
    exact = served.get(f"/api/v1/clients/{CLIENT}/months/{MONTH}").json()["amount"]
    assert exact == 123_458  # rounded alone: 0.1235; in the run's one rounding: 0.1234


def test_a_clients_amount_is_one_string_on_every_surface(served: Served) -> None:
    pages = {
        "client page": f"/clients/{CLIENT}?month={MONTH}",
        "client list": f"/clients?q={CLIENT}",
        "pricing page": f"/pricing?month={MONTH}",
        "month page": f"/months/{MONTH}",
    }
    for surface, path in pages.items():
        html = served.get(path).text
        if surface == "client page":
            amount = re.search(r'id="amount">([^<]*)<', html)
            assert amount and amount.group(1) == f"{SHOWN} USD", (surface, amount)
            assert ALONE not in _text(html), surface
            continue
        rows = _rows_of(html, CLIENT)  # a plan's or a key's total is no client's amount
        assert rows and any(_amount_in(r) for r in rows), (surface, rows)
        assert not any(ALONE in r for r in rows), (surface, rows)

    base = f"/api/v1/clients/{CLIENT}/months/{MONTH}/sheet"
    sheet = served.get(f"{base}.html").text
    total = re.search(r'id="total">([^<]*)<', sheet)
    assert total and total.group(1) == f"{SHOWN} USD", total
    lines = re.search(r'colspan="\d+">Total USD</th><td class="num">([^<]*)<', sheet)
    assert lines and lines.group(1) == SHOWN, lines  # the foot of the sheet's own lines
    assert ALONE not in _text(sheet)
    md = served.get(f"{base}.md").text
    assert re.search(rf"^\| \*\*Total\*\* \| \*\*{re.escape(SHOWN)} USD\*\* \|", md, re.M), md
    assert ALONE not in md
    if shutil.which("pdftotext") is None:  # poppler-utils: present where the suite runs
        pytest.skip("pdftotext is not installed")
    pdf = served.get(f"{base}.pdf").content
    text = subprocess.run(["pdftotext", "-layout", "-", "-"], input=pdf, capture_output=True,
                          check=True).stdout.decode()  # fmt: skip
    assert "Total for the period" in text and f" {SHOWN} USD\n" in text, text[:2000]
    assert re.search(rf"Total USD\s+{re.escape(SHOWN)}\n", text), text
    assert ALONE not in text


def _group_row(html: str, group: str) -> str:
    table = html[html.index('id="groups-table"') :]
    table = table[: table.index("</table>")]
    row = re.search(rf"<tr><th scope=\"row\">{re.escape(group)}</th>.*?</tr>", table, re.S)
    assert row, (group, table[:500])
    return _text(row.group(0))


def test_a_plan_of_one_client_reads_as_that_client(served: Served) -> None:
    """A plan's (and a segment's) cost is the sum of its clients' displayed figures."""
    plan = _group_row(served.get(f"/pricing?month={MONTH}").text, "business")
    assert plan.split()[:3] == ["business", "1", SHOWN], plan
    segment = _group_row(served.get(f"/pricing?month={MONTH}&by=segment").text, "enterprise")
    assert segment.split()[:3] == ["enterprise", "1", SHOWN], segment
