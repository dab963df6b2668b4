"""The demo company (:func:`tenantcost.service.demo.build_demo`) built once per test run.

Building it costs tens of seconds, so it is paid once per run, not per module or per
pytest-xdist worker: the first worker to ask builds it into a folder every worker sees
(pytest's base temporary folder, the parent of the workers' own), under an exclusive
``fcntl`` lock on a file there; the others wait on the lock, then read what it wrote
(``demo.json``). A test that only reads uses the shared store; a test that writes (closes,
reopens, ingests) takes :func:`private_copy`, a copy of its own.
"""

from __future__ import annotations

import dataclasses
import fcntl
import json
import os
import sys
from pathlib import Path

import pytest

from tenantcost.service.demo import Demo, build_demo

from .store_copy import copy_store


def _shared_root(factory: pytest.TempPathFactory) -> Path:
    root = factory.getbasetemp()
    return root.parent if os.environ.get("PYTEST_XDIST_WORKER") else root


def shared_demo(factory: pytest.TempPathFactory) -> Demo:
    """The run's demo company (the default seed), built by the first caller of the run."""
    root = _shared_root(factory)
    folder = root / "demo-company"
    record = folder / "demo.json"
    with open(root / "demo-company.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not record.exists():
            demo = build_demo(folder)
            record.write_text(json.dumps(dataclasses.asdict(demo)), encoding="utf-8")
            print(f"\nthe demo company built in {demo.seconds:.1f} s", file=sys.stderr)
    fields = json.loads(record.read_text(encoding="utf-8"))
    fields["closed"] = tuple(fields["closed"])
    fields["scopes"] = {key: tuple(value) for key, value in fields["scopes"].items()}
    return Demo(**fields)


def private_copy(demo: Demo, dest: Path) -> Demo:
    """A copy of ``demo``'s store under ``dest``, the same tokens (they are in the store)."""
    db, data = copy_store(demo.db, Path(demo.data), dest)
    return dataclasses.replace(demo, db=db, data=str(data))
