"""No other client's name reaches an account manager, on any surface.

A store on SQLite and on a real PostgreSQL 15 with clients ``acme``, ``bravo``, ``charlie``
and ``eu``, whose rule ids, rule description, excluded workload's reason and name, internal
reopen reason and reason for clients all name acme as ``Acme``, ``ACME``, ``acme_eu`` and
``Acme's``. Through a real server, bravo's account manager reads every surface it may: the
client-month JSON, the client document, ``/history``, ``/months``, the web client page (its
change notices included) and the sheet as HTML, Markdown and PDF (read by ``pdftotext``),
whose statement block and rule-change notice carry the names. None of them holds another
client's id by the redaction rule, nor any of the internal reason; the reason for clients is
there, redacted. Finance reads the internal reason; acme's manager reads its own name.
"""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
from bs4 import BeautifulSoup

from tenantcost.report.privacy import REDACTED, RESTATED_NOTE, find_ids

from .service_server import create_token, invoke, running_service, tenantcost
from .test_report import pdf_text

MONTH = "2026-11"
CLIENTS = ["acme", "bravo", "charlie", "eu"]
INTERNAL = "bravo disputed: acme paid 0.66 of the api cost, ACME's invoice is wrong"
CLIENT_REASON = "Corrected usage: Acme, ACME, acme_eu and Acme's batch were counted as yours"
TOLD_BRAVO = (
    f"Corrected usage: {REDACTED}, {REDACTED}, {REDACTED}_{REDACTED} and {REDACTED}'s batch "
    "were counted as yours"
)
WORKLOADS = """
    workloads:
      - {match: {controller: api}, class: shared, service: api, key: requests}
      - match: {namespace: loadtest}
        class: excluded
        reason: "load generators before the Acme launch (ACME's k6, acme_eu)"
      - {match: {name: __idle__}, class: idle}
    idle: proportional
"""
RULES = f"""
currency: EUR
rules:
  - id: base-2026
    effective_from: "2026-10-01"
    description: API by requests
{WORKLOADS}
  - id: ACME-2026-11b
    effective_from: "2026-11-05T11:00:00Z"
    description: "since Acme's batch jobs moved to acme_eu, the API by requests again"
{WORKLOADS}
"""
HOURS = ["2026-10-20T10", "2026-11-05T10", "2026-11-05T11"]
REQUESTS = {"acme": 100, "bravo": 50, "charlie": 30, "eu": 10}


def _window(hour: str) -> str:
    return f"{hour}:00:00Z,{hour[:-2]}{int(hour[-2:]) + 1:02d}:00:00Z"


def scenario(folder: Path) -> tuple[Path, Path, Path]:
    """Rules, costs and usage of three hours: one of October (a run, never closed), two of
    November under two rule versions (a rule-change notice on every sheet)."""
    costs = ["window_start,window_end,name,cluster,namespace,controller_kind,controller,"
             "total_cost"]  # fmt: skip
    usage = ["window_start,window_end,service,client,requests"]
    for i, hour in enumerate(HOURS):
        w = _window(hour)
        costs += [f"{w},,c1,app,deployment,api,{2.5 + i}",
                  f"{w},,c1,loadtest,deployment,Acme-k6,0.4",
                  f"{w},__idle__,c1,,,,0.3"]  # fmt: skip
        usage += [f"{w},api,{c},{n + 7 * i}" for c, n in REQUESTS.items()]
    paths = folder / "rules.yaml", folder / "costs.csv", folder / "usage.csv"
    for path, text in zip(paths, (RULES, "\n".join(costs) + "\n", "\n".join(usage) + "\n"),
                          strict=True):  # fmt: skip
        path.write_text(text)
    return paths


def restated_store(db: str, data: str, folder: Path) -> None:
    """October run (a draft); November closed, reopened with both reasons, closed again."""
    rules, costs, usage = scenario(folder)
    store = ("--db", db, "--data", data)
    tenantcost("db", "upgrade", *store)
    tenantcost("rules", "load", str(rules), *store)
    tenantcost("ingest", "usage", "--usage", str(usage), *store)
    tenantcost("ingest", "costs", "--costs", str(costs), *store)
    tenantcost("run", "--month", "2026-10", *store)
    tenantcost("close", "--month", MONTH, "--allow-incomplete", *store)
    tenantcost("reopen", "--month", MONTH, "--reason", INTERNAL, "--client-reason",
               CLIENT_REASON, *store)  # fmt: skip
    # No new input: the restatement's text is what is tested, so the close is forced.
    closed = tenantcost("close", "--month", MONTH, "--allow-incomplete", "--force", *store)
    assert f"reason: {INTERNAL}" in closed and f"clients read: {CLIENT_REASON}" in closed


def surfaces(url: str, headers: dict[str, str], client: str) -> dict[str, str]:
    """Every text ``client``'s reader gets from the server, by surface."""
    api = f"{url}/api/v1/clients/{client}"
    out: dict[str, str] = {}
    for name, path in (
        ("month JSON", f"{api}/months/{MONTH}"),
        ("client JSON", api),
        ("history JSON", f"{api}/history"),
        ("months JSON", f"{url}/api/v1/months"),
    ):
        answer = httpx.get(path, headers=headers, timeout=60)
        assert answer.status_code == 200, (name, answer.text)
        out[name] = json.dumps(answer.json(), ensure_ascii=False)
    page = httpx.get(
        f"{url}/clients/{client}", params={"month": MONTH}, headers=headers, timeout=60
    )
    assert page.status_code == 200, page.text
    out["web page"] = page.text
    out["web page text"] = BeautifulSoup(page.text, "html.parser").get_text(" ")
    for fmt in ("html", "md", "pdf"):
        sheet = httpx.get(f"{api}/months/{MONTH}/sheet.{fmt}", headers=headers, timeout=120)
        assert sheet.status_code == 200, (fmt, sheet.text[:500])
        out[f"sheet.{fmt}"] = sheet.text if fmt != "pdf" else ""
        if fmt == "pdf":
            target = Path(f"/tmp/tenantcost-redaction-{client}.pdf")
            target.write_bytes(sheet.content)
            out["sheet.pdf"] = pdf_text(target)
            target.unlink()
    return out


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_no_surface_names_another_client_to_an_account_manager(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    if backend == "sqlite":
        db = f"sqlite:///{tmp_path / 'store.db'}"
    else:
        from .postgres_fixture import new_database

        db = new_database(request.getfixturevalue("postgres_admin_url"))
    data = str(tmp_path / "data")
    restated_store(db, data, tmp_path)
    finance = {"Authorization": f"Bearer {create_token(db, 'finance', 'fin')}"}
    bravo = {"Authorization": f"Bearer {create_token(db, 'account-manager', 'am-b', 'bravo')}"}
    acme = {"Authorization": f"Bearer {create_token(db, 'account-manager', 'am-a', 'acme')}"}
    nobody = {"Authorization": f"Bearer {create_token(db, 'account-manager', 'am-z', 'zeta')}"}
    with running_service(db, data, tmp_path / "serve.log") as service:
        seen = surfaces(service.url, bravo, "bravo")
        for name, text in seen.items():
            assert "acme" not in text.lower(), name
            assert find_ids(text, CLIENTS, "bravo") == [], name
            assert "disputed" not in text and "0.66" not in text, name  # the internal reason
        month = json.loads(seen["month JSON"])
        assert month["reason"] == TOLD_BRAVO and "client_reason" not in month
        assert month["rule_ids"] == ["base-2026", f"{REDACTED}-2026-11b"]
        history = json.loads(seen["history JSON"])
        assert [h["reason"] for h in history] == [None, TOLD_BRAVO]
        assert json.loads(seen["months JSON"]) == [
            {"month": MONTH, "state": "closed", "revisions": 2}
        ]
        assert TOLD_BRAVO in seen["web page text"]  # the figure's reason and the notice's
        assert f"Reason: {TOLD_BRAVO}." in " ".join(seen["web page text"].split())
        for fmt in ("sheet.html", "sheet.md", "sheet.pdf"):
            assert "were counted as yours" in seen[fmt], fmt
            assert "2026-11b" in seen[fmt], fmt  # the rule-change notice, its id redacted
        sheet = " ".join(BeautifulSoup(seen["sheet.html"], "html.parser").get_text(" ").split())
        assert f"The month was reopened for this reason: {TOLD_BRAVO}." in sheet

        # finance reads the internal reason and what clients read; the draft month too
        doc = httpx.get(f"{service.url}/api/v1/clients/bravo/months/{MONTH}", headers=finance)
        assert doc.json()["reason"] == INTERNAL and doc.json()["client_reason"] == CLIENT_REASON
        assert doc.json()["rule_ids"] == ["base-2026", "ACME-2026-11b"]
        months = httpx.get(f"{service.url}/api/v1/months", headers=finance).json()
        assert [(m["month"], m["runs"], m["revisions"]) for m in months] == [
            ("2026-10", 1, 0), (MONTH, 1, 2)]  # fmt: skip
        page = httpx.get(f"{service.url}/clients/bravo", headers=finance).text
        assert INTERNAL.replace("'", "&#39;") in page and 'id="clients-read"' in page
        # a manager of a client without statements sees no month at all
        assert httpx.get(f"{service.url}/api/v1/months", headers=nobody).json() == []
        # acme's manager keeps its own name (and reads the others' redacted)
        own = httpx.get(f"{service.url}/api/v1/clients/acme/months/{MONTH}/sheet.md",
                        headers=acme, timeout=120).text  # fmt: skip
        assert "Corrected usage: Acme, ACME, acme\\_\\[another client\\] and Acme's" in own
        assert "bravo" not in own and "charlie" not in own


def test_without_a_client_reason_managers_read_the_fixed_note(tmp_path: Path) -> None:
    db, data = f"sqlite:///{tmp_path / 'store.db'}", str(tmp_path / "data")
    restated_store(db, data, tmp_path)
    store = ("--db", db, "--data", data)
    tenantcost("reopen", "--month", MONTH, "--reason", INTERNAL, *store)
    tenantcost("close", "--month", MONTH, "--allow-incomplete", "--force", *store)
    refused = invoke("reopen", "--month", MONTH, "--reason", "x", "--client-reason", "a\x00b",
                     *store)  # fmt: skip
    assert refused.exit_code == 2 and "--client-reason: control character U+0000" in refused.stderr
    assert "Traceback" not in refused.output
    manager = {"Authorization": f"Bearer {create_token(db, 'account-manager', 'am', 'bravo')}"}
    with running_service(db, data, tmp_path / "serve.log") as service:
        api = f"{service.url}/api/v1/clients/bravo"
        assert httpx.get(f"{api}/months/{MONTH}", headers=manager).json()["reason"] == RESTATED_NOTE
        history = httpx.get(f"{api}/history", headers=manager).json()
        assert [h["reason"] for h in history] == [None, TOLD_BRAVO, RESTATED_NOTE]
        sheet = httpx.get(f"{api}/months/{MONTH}/sheet.md", headers=manager, timeout=120).text
        assert f"The month was reopened for this reason: {RESTATED_NOTE}." in sheet
        assert "disputed" not in sheet
