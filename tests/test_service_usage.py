"""The usage API against a real ``tenantcost serve`` on SQLite and PostgreSQL: idempotency
keys (a re-indented retry is a replay), concurrent posters, atomic refusals (422 naming the
record and field, 409 for a closed month, 413 over the limit) and the Parquet endpoint."""

from __future__ import annotations

import io
import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pandas as pd
import pytest
from sqlalchemy import select

from tenantcost.store.engine import open_engine
from tenantcost.store.models import Batch, BatchFile, table
from tenantcost.store.settings import resolve_settings

from .service_server import Service, create_token, example_store, running_service, tenantcost

MAX_RECORDS = 40


@dataclass(frozen=True)
class Served:
    service: Service
    db: str
    data: Path
    headers: dict[str, str]

    def post(self, body: Any, key: str | None = None, **kwargs: Any) -> httpx.Response:
        headers = self.headers | ({"Idempotency-Key": key} if key else {})
        return httpx.post(f"{self.service.url}/api/v1/usage", json=body, headers=headers,
                          timeout=120, **kwargs)  # fmt: skip

    def post_raw(self, body: bytes, key: str) -> httpx.Response:
        headers = self.headers | {"Idempotency-Key": key, "Content-Type": "application/json"}
        return httpx.post(f"{self.service.url}/api/v1/usage", content=body, headers=headers,
                          timeout=120)  # fmt: skip

    def batches(self) -> pd.DataFrame:
        engine = open_engine(resolve_settings(db=self.db, environ={}))
        try:
            with engine.connect() as conn:
                b = table(Batch).c
                rows = conn.execute(select(b.uid, b.kind, b.rows, b.mode, b.source, b.actor)
                                    .order_by(b.id)).all()  # fmt: skip
        finally:
            engine.dispose()
        return pd.DataFrame(rows, columns=["uid", "kind", "rows", "mode", "source", "actor"])

    def usage_rows(self) -> pd.DataFrame:
        """Every usage row of every committed batch's files (what the store holds)."""
        engine = open_engine(resolve_settings(db=self.db, environ={}))
        try:
            with engine.connect() as conn:
                f, b = table(BatchFile).c, table(Batch).c
                paths = conn.execute(select(f.path).join_from(table(BatchFile), table(Batch),
                                                              b.id == f.batch_id)
                                     .where(b.kind == "usage")).scalars().all()  # fmt: skip
        finally:
            engine.dispose()
        return pd.concat([pd.read_parquet(self.data / p) for p in paths], ignore_index=True)

    def files(self) -> set[Path]:
        return {p for p in self.data.rglob("*") if p.is_file()}


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def served(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Served]:
    tmp = tmp_path_factory.mktemp(f"usage-{request.param}")
    if request.param == "sqlite":
        db = f"sqlite:///{tmp / 'store.db'}"
    else:
        from .postgres_fixture import new_database

        db = new_database(request.getfixturevalue("postgres_admin_url"))
    data = tmp / "data"
    example_store(db, str(data))  # 2026-11 closed
    token = create_token(db, "ingest", "billing-app")
    args = ("--max-records", str(MAX_RECORDS))
    with running_service(db, str(data), tmp / "serve.log", args=args) as service:
        yield Served(service, db, data, {"Authorization": f"Bearer {token}"})


def record(
    hour: int, client: str, requests: float = 10, day: int = 1, **extra: Any
) -> dict[str, Any]:
    start = pd.Timestamp(f"2026-12-{day:02d}T00:00:00Z") + pd.Timedelta(hours=hour)
    return {"window_start": start.isoformat().replace("+00:00", "Z"),
            "window_end": (start + pd.Timedelta(hours=1)).isoformat().replace("+00:00", "Z"),
            "service": "api", "client": client, "requests": requests, "cpu_seconds": 1.5,
            **extra}  # fmt: skip


def test_a_batch_is_ingested_and_recorded_with_its_token(served: Served) -> None:
    body = {"mode": "replace", "records": [record(0, "client-a", 7), record(0, "client-b", 3)]}
    answer = served.post(body)
    assert answer.status_code == 200, answer.text
    doc = answer.json()
    assert doc["records"] == 2 and doc["cells"] == 1 and doc["mode"] == "replace"
    assert (
        doc["window_from"] == "2026-12-01T00:00:00Z" and doc["window_to"] == "2026-12-01T01:00:00Z"
    )
    batch = served.batches().iloc[-1]
    assert batch["uid"] == doc["batch"] and batch["actor"] == "token:billing-app"
    assert batch["source"] == "POST /api/v1/usage (token:billing-app)" and batch["rows"] == 2


def test_the_same_key_and_body_twice_changes_nothing(served: Served) -> None:
    body = {"mode": "sum", "records": [record(1, "client-a", 5)]}
    first = served.post(body, key="retry-1")
    before = served.batches()
    rows = len(served.usage_rows())
    second = served.post(body, key="retry-1")
    assert first.status_code == second.status_code == 200
    assert second.json() == first.json() and second.headers["idempotent-replayed"] == "true"
    assert served.batches().equals(before) and len(served.usage_rows()) == rows
    other = served.post({"mode": "sum", "records": [record(1, "client-a", 6)]}, key="retry-1")
    assert other.status_code == 409 and "another body" in other.json()["detail"]
    assert served.batches().equals(before)


def test_the_same_batch_re_indented_is_a_replay_not_a_conflict(served: Served) -> None:
    """The key compares what the body says (parsed records), not its bytes."""
    records = [record(2, "client-a", 4), record(2, "client-b", 2)]
    compact = json.dumps({"mode": "sum", "records": records}, separators=(",", ":"))
    first = served.post_raw(compact.encode(), key="reindent-1")
    assert first.status_code == 200, first.text
    before, rows = served.batches(), len(served.usage_rows())
    shuffled = [dict(reversed(list(r.items()))) for r in records]  # keys in another order
    pretty = json.dumps({"records": shuffled, "mode": "sum"}, indent=4)
    again = served.post_raw(pretty.encode(), key="reindent-1")
    assert again.status_code == 200, again.text
    assert again.json() == first.json() and again.headers["idempotent-replayed"] == "true"
    assert served.batches().equals(before) and len(served.usage_rows()) == rows
    changed = json.dumps({"mode": "sum", "records": [records[0]]}, indent=4)
    assert served.post_raw(changed.encode(), key="reindent-1").status_code == 409


def test_two_posters_at_once_lose_nothing(served: Served) -> None:
    before = len(served.batches())
    errors: list[str] = []

    def poster(client: str) -> None:
        for hour in range(6):  # sum into the same (window, service) cells as the other poster
            answer = served.post({"mode": "sum", "records": [record(hour, client, 1, day=2)]},
                                 key=f"{client}-{hour}")  # fmt: skip
            if answer.status_code != 200:
                errors.append(answer.text)

    threads = [threading.Thread(target=poster, args=(c,)) for c in ("client-a", "client-b")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert len(served.batches()) == before + 12
    rows = served.usage_rows()
    day2 = rows[rows["window_start"].astype(str).str.startswith("2026-12-02")]
    assert sorted(day2.groupby("client").size().items()) == [("client-a", 6), ("client-b", 6)]


def test_a_malformed_batch_writes_nothing_and_names_the_record_and_field(served: Served) -> None:
    before, files = served.batches(), served.files()
    good = [record(h, "client-a", day=3) for h in range(3)]
    cases = [
        ([*good, record(3, "client-b", -1, day=3)], 3, "requests", "must be >= 0"),
        ([*good[:1], record(1, "client-b", day=3) | {"window_start": "yesterday"}], 1,
         "window_start", ""),
        ([*good[:2], {k: v for k, v in record(2, "x", day=3).items() if k != "cpu_seconds"}], 2,
         "cpu_seconds", "missing"),
        ([*good, record(0, "client-a", day=3)], 3, "client", "duplicate usage row"),
        ([*good[:1], record(1, "client-b", day=3) | {"service": " "}], 1, "service", "empty"),
        ([*good[:1], record(1, "client-b", day=3) | {"window_end": "2026-12-03T02:00:00+25:00"}],
         1, "window_end", "has the UTC offset +25:00, outside -14:00 .. +14:00"),
        ([record(0, "client-b") | {"window_start": "9999-12-31T00:00:00Z"}], 0, "window_start",
         "outside the accepted range 2000-01-01T00:00:00Z .. 2100-01-01T00:00:00Z"),
    ]  # fmt: skip
    for records, index, field, words in cases:
        answer = served.post({"records": records}, key=f"bad-{index}-{field}")
        assert answer.status_code == 422, answer.text
        doc = answer.json()
        assert doc["record"] == index and doc["field"] == field, doc
        assert doc["detail"].startswith(f"records[{index}].{field}: ") and words in doc["detail"]
        assert "tenantcost-api-" not in doc["detail"]  # no temporary path leaks
    shape = served.post({"records": [record(0, "a"), 5]})
    assert shape.status_code == 422 and shape.json()["record"] == 1
    assert served.post({"mode": "add", "records": [record(0, "a")]}).status_code == 422
    assert served.batches().equals(before) and served.files() == files


def test_a_closed_month_is_409_naming_reopen(served: Served) -> None:
    before = served.batches()
    late = record(0, "client-a") | {"window_start": "2026-11-03T10:00:00Z",
                                    "window_end": "2026-11-03T11:00:00Z"}  # fmt: skip
    answer = served.post({"records": [late]})
    assert answer.status_code == 409
    assert (
        "2026-11" in answer.json()["detail"]
        and "tenantcost reopen --month 2026-11" in (answer.json()["detail"])
    )
    assert served.batches().equals(before)


def test_over_the_limit_is_413(served: Served) -> None:
    before = served.batches()
    records = [record(h % 24, f"c{h}", day=4 + h // 24) for h in range(MAX_RECORDS + 1)]
    answer = served.post({"records": records})
    assert answer.status_code == 413 and f"limit of {MAX_RECORDS}" in answer.json()["detail"]
    buffer = io.BytesIO()
    pd.DataFrame(records).to_parquet(buffer, index=False)
    bulk = httpx.post(f"{served.service.url}/api/v1/usage.parquet", content=buffer.getvalue(),
                      headers=served.headers)  # fmt: skip
    assert bulk.status_code == 413
    assert served.batches().equals(before)


def test_parquet_bulk_is_one_batch(served: Served) -> None:
    frame = pd.DataFrame([record(h, f"client-{h % 3}", h + 1, day=10) for h in range(30)])
    frame["window_start"] = pd.to_datetime(frame["window_start"], utc=True)
    frame["window_end"] = pd.to_datetime(frame["window_end"], utc=True)
    buffer = io.BytesIO()
    frame.to_parquet(buffer, index=False)
    url = f"{served.service.url}/api/v1/usage.parquet"
    answer = httpx.post(url, params={"mode": "replace"}, content=buffer.getvalue(),
                        headers=served.headers | {"Idempotency-Key": "bulk-1"})  # fmt: skip
    assert answer.status_code == 200, answer.text
    assert answer.json()["records"] == 30 and answer.json()["cells"] == 30
    again = httpx.post(url, content=buffer.getvalue(),
                       headers=served.headers | {"Idempotency-Key": "bulk-1"})  # fmt: skip
    assert again.json() == answer.json()
    bad = frame.assign(requests=frame["requests"].where(frame.index != 4, -2.0))
    buffer = io.BytesIO()
    bad.to_parquet(buffer, index=False)
    refused = httpx.post(url, content=buffer.getvalue(), headers=served.headers)
    assert refused.status_code == 422
    assert refused.json()["detail"].startswith("usage.parquet, row 5, column 'requests'")


def test_a_sum_batch_lacking_a_stored_metric_gets_zero_there(served: Served) -> None:
    """A meter or an OTLP export posting one metric: `sum` fills the stored metric columns
    it lacks with 0 (JSON and Parquet); `replace` lacking one is 422; a new metric is stored."""
    only = {k: v for k, v in record(5, "client-a", 3, day=12).items() if k != "cpu_seconds"}
    answer = served.post({"mode": "sum", "records": [only]})
    assert answer.status_code == 200, answer.text
    frame = pd.DataFrame([only]).drop(columns=["requests"]).assign(cpu_seconds=0.25)
    for column in ("window_start", "window_end"):
        frame[column] = pd.to_datetime(frame[column], utc=True)
    buffer = io.BytesIO()
    frame.to_parquet(buffer, index=False)
    bulk = httpx.post(f"{served.service.url}/api/v1/usage.parquet", params={"mode": "sum"},
                      content=buffer.getvalue(), headers=served.headers)  # fmt: skip
    assert bulk.status_code == 200, bulk.text
    rows = served.usage_rows()
    cell = rows[rows["window_start"].astype(str).str.startswith("2026-12-12 05")]
    assert sorted(zip(cell["requests"], cell["cpu_seconds"], strict=True)) == [(0, 0.25), (3, 0)]
    before = served.batches()
    replace = served.post({"mode": "replace", "records": [only]})
    assert replace.status_code == 422 and "a replace batch must carry all" in replace.text
    assert served.batches().equals(before)
    extra = served.post({"mode": "sum", "records": [record(6, "client-a", day=12, bytes_out=9)]})
    assert extra.status_code == 200, extra.text  # a new metric: earlier rows read 0 for it
    grown = served.usage_rows()
    assert grown["bytes_out"].fillna(0).sum() == 9 and grown["bytes_out"].eq(9).sum() == 1
    # a replace batch without it: refused where it would erase the 9, taken elsewhere
    erase = served.post({"mode": "replace", "records": [record(6, "client-a", day=12)]})
    assert erase.status_code == 422 and "lack the stored usage's bytes_out" in erase.text
    elsewhere = served.post({"mode": "replace", "records": [record(7, "client-a", day=12)]})
    assert elsewhere.status_code == 200, elsewhere.text


def test_a_key_is_replayed_across_a_token_rotation(served: Served) -> None:
    """Keys are store-wide: a spooled batch delivered by the next token after a rotation is
    the stored answer, replayed, and adds nothing; another body under that key is 409."""
    old = {"Authorization": f"Bearer {create_token(served.db, 'ingest', 'meter-old')}"}
    body = {"mode": "sum", "records": [record(7, "client-a", 11, day=13),
                                       record(7, "client-b", 2, day=13)]}  # fmt: skip
    url = f"{served.service.url}/api/v1/usage"
    first = httpx.post(url, json=body, headers=old | {"Idempotency-Key": "spool-7"}, timeout=120)
    assert first.status_code == 200, first.text
    before, rows = served.batches(), served.usage_rows()
    tenantcost("token", "revoke", "meter-old", "--db", served.db)
    assert httpx.post(url, json=body, headers=old | {"Idempotency-Key": "spool-7"},
                      timeout=120).status_code == 401  # fmt: skip
    new = {"Authorization": f"Bearer {create_token(served.db, 'ingest', 'meter-new')}"}
    again = httpx.post(url, json=body, headers=new | {"Idempotency-Key": "spool-7"}, timeout=120)
    assert again.status_code == 200, again.text
    assert again.json() == first.json() and again.headers["idempotent-replayed"] == "true"
    assert served.batches().equals(before)
    after = served.usage_rows()
    assert after.equals(rows)
    day13 = after[after["window_start"].astype(str).str.startswith("2026-12-13")]
    assert sorted(zip(day13["client"], day13["requests"], strict=True)) == [
        ("client-a", 11), ("client-b", 2)]  # fmt: skip
    other = {"mode": "sum", "records": [record(7, "client-a", 12, day=13)]}
    conflict = httpx.post(url, json=other, headers=new | {"Idempotency-Key": "spool-7"},
                          timeout=120)  # fmt: skip
    assert conflict.status_code == 409 and "another body" in conflict.json()["detail"]
    assert served.batches().equals(before)


def test_records_with_a_time_are_gauge_samples(served: Served, tmp_path: Path) -> None:
    """`POST /api/v1/usage` records with `time` are samples of the declared gauges (one
    batch of samples); `mode: sum` and an undeclared gauge are 422 naming the record."""
    from .service_server import EXAMPLE

    rules = tmp_path / "rules.yaml"
    seats = "metrics:\n  seats: {kind: gauge, unit: seat, stale_after: 25h}\n"
    rules.write_text((EXAMPLE / "rules.yaml").read_text() + seats)
    tenantcost("rules", "load", str(rules), "--db", served.db, "--data", str(served.data))
    samples = [{"time": "2026-12-14T08:00:00.000250Z", "service": "api", "client": "client-a",
                "seats": 12},
               {"time": "2026-12-14T08:00:00Z", "service": "api", "client": "client-b",
                "seats": "3.5"}]  # fmt: skip
    before = served.batches()
    answer = served.post({"records": samples})
    assert answer.status_code == 200, answer.text
    assert answer.json()["records"] == 2 and answer.json()["cells"] == 0
    after = served.batches()
    assert len(after) == len(before) + 1
    summed = served.post({"mode": "sum", "records": samples})
    assert summed.status_code == 422 and "sum is refused for gauge samples" in summed.text
    unknown = served.post({"records": [{**samples[0], "seats": 1, "tables": 4}]})
    assert unknown.status_code == 422, unknown.text
    assert "'tables' is given as samples" in unknown.json()["detail"]
    assert "records.csv" not in unknown.text and "/tmp" not in unknown.text
    assert served.batches().equals(after)
