"""Issued sheets rendered once and kept in the store (so a read is fast): the claim lets one
process in all render a revision (across threads here, across uvicorn workers below), a read
before the rendering renders on demand and keeps what it rendered, and a sheet kept under
another renderer version is never served. Real uvicorn (2 workers), SQLite and PostgreSQL."""

from __future__ import annotations

import json
import threading
import time
from datetime import timedelta
from pathlib import Path

import httpx
from sqlalchemy import delete, func, select, update

from tenantcost.service.sheets import render_version
from tenantcost.store.cycle import latest_issued
from tenantcost.store.engine import open_engine
from tenantcost.store.models import SheetRender, SheetRenderJob, table, utcnow
from tenantcost.store.settings import resolve_settings
from tenantcost.store.sheet_cache import (
    STALE_SECONDS,
    RenderKey,
    claim,
    finish,
    jobs,
    pending,
    remember,
)

from .service_server import MONTH, create_token, example_store, running_service

CLIENTS = 3
FORMATS = 4  # confidence, html, md, pdf


def _engine(db: str):
    return open_engine(resolve_settings(db=db, environ={}))


def _issued_key(engine) -> RenderKey:
    issued = latest_issued(engine, MONTH)
    assert issued is not None
    return RenderKey(issued.run_id, issued.revision, render_version())


def _kept(engine, key: RenderKey) -> dict[tuple[str, str], bytes]:
    r = table(SheetRender).c
    with engine.connect() as connection:
        rows = connection.execute(
            select(r.client, r.format, r.body).where(
                r.run_id == key.run_id, r.version == key.version
            )
        ).all()
    return {(str(c), str(f)): bytes(b) for c, f, b in rows}


def test_one_claimer_wins_and_a_dead_claim_is_taken_over_once(store_url: str, tmp_path: Path):
    example_store(store_url, str(tmp_path / "data"))
    engine = _engine(store_url)
    key = _issued_key(engine)
    assert [p.key for p in pending(engine, key.version)] == [key]
    barrier, won = threading.Barrier(6), []

    def contend(n: int) -> None:
        barrier.wait()
        won.append(claim(engine, MONTH, key, f"worker-{n}"))

    threads = [threading.Thread(target=contend, args=(n,)) for n in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(won) == [False] * 5 + [True]
    assert pending(engine, key.version) == []  # a live claim is not pending
    with engine.begin() as connection:  # its process died: no heartbeat for too long
        connection.execute(
            update(table(SheetRenderJob)).values(
                heartbeat_at=utcnow() - timedelta(seconds=STALE_SECONDS + 1)
            )
        )
    assert [p.key for p in pending(engine, key.version)] == [key]
    assert claim(engine, MONTH, key, "heir") is True
    assert claim(engine, MONTH, key, "late") is False
    finish(engine, key, "heir", 0, None)
    assert claim(engine, MONTH, key, "after") is False and pending(engine, key.version) == []
    (job,) = jobs(engine, key.run_id, key.revision)
    assert job.claimed_by == "heir" and job.finished_at is not None
    with engine.connect() as connection:
        count = select(func.count()).select_from(table(SheetRenderJob))
        assert connection.execute(count).scalar() == 1
    engine.dispose()


def _wait_finished(engine, key: RenderKey, seconds: float = 120.0) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        found = jobs(engine, key.run_id, key.revision)
        if found and found[0].finished_at is not None:
            return
        time.sleep(0.5)
    raise AssertionError(f"the background rendering did not finish within {seconds} s: {found}")


def test_two_workers_render_each_sheet_once_and_a_read_keeps_what_it_renders(
    store_url: str, tmp_path: Path
):
    data = str(tmp_path / "data")
    example_store(store_url, data)
    token = create_token(store_url, "account-manager", "am", "client-a", "client-b", "client-c")
    manager = {"Authorization": f"Bearer {token}"}
    engine = _engine(store_url)
    key = _issued_key(engine)
    remember(engine, RenderKey(key.run_id, key.revision, "an-older-renderer"),
             [("client-b", "html", b"stale")])  # fmt: skip
    remember(engine, key, [("client-c", "md", b"kept by another worker")])
    log = tmp_path / "serve.log"
    with running_service(store_url, data, log, args=("--workers", "2"),
                         environ={"TENANTCOST_PRERENDER": "1"}) as service:
        _wait_finished(engine, key)
        (job,) = jobs(engine, key.run_id, key.revision)  # one claim, one rendering
        assert job.error is None and job.sheets == CLIENTS * FORMATS - 1  # the kept one skipped
        kept = _kept(engine, key)
        assert len(kept) == CLIENTS * FORMATS and kept[("client-a", "pdf")].startswith(b"%PDF")
        sheet = f"{service.url}/api/v1/clients/{{}}/months/{MONTH}/sheet"
        for fmt in ("pdf", "html", "md"):  # served from the store, byte for byte
            answer = httpx.get(f"{sheet.format('client-a')}.{fmt}", headers=manager, timeout=60)
            assert answer.status_code == 200 and answer.content == kept[("client-a", fmt)]
        other = httpx.get(f"{sheet.format('client-b')}.html", headers=manager, timeout=60)
        assert other.content == kept[("client-b", "html")] and b"stale" not in other.content
        found = httpx.get(f"{sheet.format('client-c')}.md", headers=manager, timeout=60)
        assert found.content == b"kept by another worker"  # the store's: not rendered again
        statement = httpx.get(f"{service.url}/api/v1/clients/client-a/months/{MONTH}",
                              headers=manager, timeout=60).json()  # fmt: skip
        assert statement["confidence"] == json.loads(kept[("client-a", "confidence")])
        _forget(engine, key, "client-b", "pdf")  # never read yet: in no worker's memory
        again = httpx.get(f"{sheet.format('client-b')}.pdf", headers=manager, timeout=120)
        assert again.status_code == 200 and again.content.startswith(b"%PDF")
        assert _kept(engine, key)[("client-b", "pdf")] == again.content  # kept on the way
    assert len(jobs(engine, key.run_id, key.revision)) == 1
    engine.dispose()


def _forget(engine, key: RenderKey, client: str, fmt: str) -> None:
    r = table(SheetRender).c
    with engine.begin() as connection:
        connection.execute(
            delete(table(SheetRender)).where(
                r.run_id == key.run_id, r.version == key.version, r.client == client,
                r.format == fmt,
            )
        )  # fmt: skip
