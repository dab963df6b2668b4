"""The store's write lock with two real processes, on SQLite and a real PostgreSQL 15: while
another process writes, every writing command exits 4 with one line after `--wait` (default
0) and writes nothing; with a longer wait it goes through once the lock is released."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import func
from sqlmodel import Session, select
from typer.testing import CliRunner

from tenantcost.cli import app
from tenantcost.store.engine import open_engine
from tenantcost.store.lock import StoreLocked, write_transaction
from tenantcost.store.models import Batch, RuleFile
from tenantcost.store.settings import resolve_settings

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "saas-three-clients"
HOLDER = Path(__file__).with_name("store_lock_holder.py")
runner = CliRunner()


@pytest.fixture
def store(store_url: str) -> str:
    assert runner.invoke(app, ["db", "upgrade", "--db", store_url]).exit_code == 0
    return store_url


@pytest.fixture
def holder(store: str) -> Iterator[subprocess.Popen[str]]:
    """Another process holding the store's write lock until it reads a line."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, str(HOLDER), store], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True, env=env)  # fmt: skip
    assert proc.stdout is not None and proc.stdout.readline().strip() == "locked"
    yield proc
    if proc.poll() is None:
        proc.kill()
    proc.wait(timeout=30)


def release(proc: subprocess.Popen[str]) -> None:
    assert proc.stdin is not None
    proc.stdin.write("go\n")
    proc.stdin.flush()
    assert proc.wait(timeout=30) == 0


def counts(url: str) -> tuple[int, int]:
    engine = open_engine(resolve_settings(db=url, environ={}))
    with Session(engine) as session:
        batches = session.exec(select(func.count()).select_from(Batch)).one()
        rule_files = session.exec(select(func.count()).select_from(RuleFile)).one()
    engine.dispose()
    return batches, rule_files


WRITERS = [
    ["db", "upgrade"],
    ["rules", "load", str(EXAMPLE / "rules.yaml")],
    ["ingest", "usage", "--usage", str(EXAMPLE / "usage.csv")],
    ["ingest", "costs", "--costs", str(EXAMPLE / "costs.json")],
]


@pytest.mark.timing
def test_every_writer_exits_4_while_another_process_writes(store, holder, tmp_path):
    data = tmp_path / "data"
    for args in WRITERS:
        started = time.monotonic()
        done = runner.invoke(app, [*args, "--db", store, "--data", str(data)])
        assert done.exit_code == 4, (args, done.output)
        err = done.stderr.strip()
        assert err.startswith("error: the store ") and "\n" not in err, err
        assert "locked by another process" in err and "--wait SECONDS" in err
        assert "waited 0 s" in err and time.monotonic() - started < 5
    waited = runner.invoke(app, [*WRITERS[1], "--db", store, "--wait", "0.6"])
    assert waited.exit_code == 4 and "waited 0.6 s" in waited.stderr
    assert counts(store) == (0, 0)  # nothing written
    assert not data.exists() or not any(p.is_file() for p in data.rglob("*"))


@pytest.mark.timing
def test_a_writer_with_a_longer_wait_goes_through_after_release(store, holder, tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    ingest = [sys.executable, "-m", "tenantcost", "ingest", "usage", "--usage",
              str(EXAMPLE / "usage.csv"), "--db", store, "--data", str(tmp_path / "data"),
              "--wait", "60"]  # fmt: skip
    waiting = subprocess.Popen(ingest, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, env=env)  # fmt: skip
    time.sleep(3)  # long enough to start and reach the lock
    assert waiting.poll() is None, waiting.communicate()  # still waiting for the lock
    assert counts(store) == (0, 0)
    release(holder)
    out, err = waiting.communicate(timeout=60)
    assert waiting.returncode == 0, err
    assert out.startswith("usage: batch ") and " committed (replace): 6 rows" in out
    assert counts(store) == (1, 0)


def test_write_transaction_raises_store_locked_after_the_wait(store, holder):
    engine = open_engine(resolve_settings(db=store, environ={}))
    started = time.monotonic()
    with pytest.raises(StoreLocked, match=r"waited 0\.3 s"), write_transaction(engine, 0.3):
        pass
    assert 0.25 <= time.monotonic() - started < 5
    release(holder)
    with write_transaction(engine, 5) as connection:  # free again
        assert connection is not None
    engine.dispose()
