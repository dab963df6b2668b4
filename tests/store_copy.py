"""A private copy of a store built once per module, for each test that changes it.

Tests must not depend on each other's leftovers (they run in a random order), yet building a
store (schema, rules, a month of costs and usage) costs seconds per backend. A module builds
its base store once, leaves it untouched, and every test that writes works on a copy: SQLite
through the backup API (a consistent copy even with a write-ahead log), PostgreSQL as a
database created from the base as its template; the data folder is copied file by file.
"""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

from sqlalchemy import Engine

from .postgres_fixture import copy_database


def copy_store(db: str, data: Path, dest: Path, engine: Engine | None = None) -> tuple[str, Path]:
    """A copy of the store (``db``, ``data``) under ``dest``: returns its URL and data folder.
    ``engine``, the base's open engine if any, is disposed of first (PostgreSQL copies a
    database only while nothing is connected to it)."""
    if engine is not None:
        engine.dispose()
    dest.mkdir(parents=True, exist_ok=True)
    if db.startswith("sqlite"):
        target = dest / "store.db"
        source = sqlite3.connect(db.removeprefix("sqlite:///"))
        copy = sqlite3.connect(target)
        try:
            source.backup(copy)
        finally:
            copy.close()
            source.close()
        url = f"sqlite:///{target}"
    else:
        url = copy_database(db)
    folder = dest / "data"
    if data.exists():
        shutil.copytree(data, folder)
    return url, folder
