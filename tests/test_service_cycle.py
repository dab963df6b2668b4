"""The monthly cycle through the API (real server, SQLite and PostgreSQL): finance reopens
with a reason, corrects usage, sees the draft; the account manager keeps seeing the issued
revision until finance closes again, then sees revision 2, restated, with the reason written
for clients (finance alone reads the internal one)."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from .service_server import MONTH, create_token, example_store, running_service, tenantcost

REASON = "client-a's api requests were counted twice"
CLIENT_REASON = "Your API requests were counted twice; client-b's were not"


def corrected_api_usage() -> list[dict[str, object]]:
    """The example's api rows of its one hour, client-a's requests halved."""
    window = {"window_start": "2026-11-03T10:00:00Z", "window_end": "2026-11-03T11:00:00Z",
              "service": "api"}  # fmt: skip
    return [
        window | {"client": "client-a", "requests": 33174, "cpu_seconds": 604.7},
        window | {"client": "client-b", "requests": 1710, "cpu_seconds": 75.9},
        window | {"client": "client-c", "requests": 342, "cpu_seconds": 3.4},
    ]


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_reopen_correct_close_through_the_api(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    if backend == "sqlite":
        db = f"sqlite:///{tmp_path / 'store.db'}"
    else:
        from .postgres_fixture import new_database

        db = new_database(request.getfixturevalue("postgres_admin_url"))
    data = str(tmp_path / "data")
    example_store(db, data)
    finance = {"Authorization": f"Bearer {create_token(db, 'finance', 'fin')}"}
    manager = {"Authorization": f"Bearer {create_token(db, 'account-manager', 'am', 'client-a')}"}
    with running_service(db, data, tmp_path / "serve.log") as service:
        api = f"{service.url}/api/v1"
        month_of_a = f"{api}/clients/client-a/months/{MONTH}"

        def seen(headers: dict[str, str]) -> dict[str, object]:
            answer = httpx.get(month_of_a, headers=headers, timeout=60)  # a draft: figures computed
            assert answer.status_code == 200, answer.text
            return dict(answer.json())

        assert seen(manager)["amount"] == seen(finance)["amount"] == 123458
        no_reason = httpx.post(f"{api}/months/{MONTH}/reopen", headers=finance, json={})
        assert no_reason.status_code == 422
        reopened = httpx.post(f"{api}/months/{MONTH}/reopen", headers=finance,
                              json={"reason": REASON, "client_reason": CLIENT_REASON})  # fmt: skip
        assert reopened.status_code == 200 and reopened.json()["revision"] == 1
        assert reopened.json()["client_reason"] == CLIENT_REASON
        assert reopened.json()["actor"] == "token:fin"
        fixed = httpx.post(f"{api}/usage", headers=finance,
                           json={"mode": "replace", "records": corrected_api_usage()})  # fmt: skip
        assert fixed.status_code == 200, fixed.text
        tenantcost("run", "--month", MONTH, "--db", db, "--data", data)  # a draft run

        draft = seen(finance)
        assert draft["status"] == "draft" and draft["revision"] is None
        assert draft["state"] == "open" and draft["amount"] != 123458
        issued = seen(manager)
        assert issued["status"] == "issued" and issued["revision"] == 1
        assert issued["amount"] == 123458  # the manager never sees the draft
        sheet = httpx.get(f"{month_of_a}/sheet.md", headers=finance, timeout=60).text
        assert "Draft: not an issued statement" in sheet

        closed = httpx.post(f"{api}/months/{MONTH}/close", headers=finance,
                            json={"allow_incomplete": True}, timeout=120)  # fmt: skip
        assert closed.status_code == 200, closed.text
        assert closed.json()["revision"] == 2 and closed.json()["reason"] == REASON
        restated = seen(manager)
        assert restated["status"] == "restated" and restated["revision"] == 2
        assert restated["amount"] == draft["amount"] and restated["previous_amount"] == 123458
        assert restated["difference"] == draft["amount"] - 123458  # type: ignore[operator]
        told = "Your API requests were counted twice; [another client]'s were not"
        assert restated["reason"] == told and "client_reason" not in restated
        internal = seen(finance)
        assert internal["reason"] == REASON and internal["client_reason"] == CLIENT_REASON
        history = httpx.get(f"{api}/clients/client-a/history", headers=manager).json()
        assert [(h["revision"], h["status"], h["reason"]) for h in history] == [
            (1, "superseded", None), (2, "issued", told)]  # fmt: skip
        again = httpx.post(f"{api}/months/{MONTH}/close", headers=finance, json={})
        assert again.status_code == 409 and "already closed" in again.json()["detail"]
        # Reopened with no new input: the close is refused (409 problem), unless forced.
        assert httpx.post(f"{api}/months/{MONTH}/reopen", headers=finance, timeout=60,
                          json={"reason": "checking"}).status_code == 200  # fmt: skip
        unchanged = httpx.post(f"{api}/months/{MONTH}/close", headers=finance,
                               json={"allow_incomplete": True}, timeout=120)  # fmt: skip
        assert unchanged.status_code == 409, unchanged.text
        problem = unchanged.json()
        assert problem["detail"].startswith("nothing changed since revision 2 of 2026-11")
        assert problem["revision"] == 2 and '"force": true' in problem["detail"]
        assert seen(manager)["revision"] == 2  # nothing issued
        forced = httpx.post(f"{api}/months/{MONTH}/close", headers=finance, timeout=120,
                            json={"allow_incomplete": True, "force": True})  # fmt: skip
        assert forced.status_code == 200 and forced.json()["revision"] == 3, forced.text
