"""Session-wide fixtures shared by several test modules.

The PostgreSQL cluster starts only when a test asks for it (the store tests), once per
session, and stops at teardown.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from .postgres_fixture import running_postgres


@pytest.fixture(scope="session")
def postgres_admin_url() -> Iterator[str]:
    """A real PostgreSQL 15 on 127.0.0.1 (``postgresql+psycopg://postgres@127.0.0.1:PORT/``)."""
    with running_postgres() as url:
        yield url


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request: pytest.FixtureRequest, tmp_path) -> str:
    """An empty store database on each backend: a SQLite file, or a fresh PostgreSQL database."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'store.db'}"
    from .postgres_fixture import new_database

    return new_database(request.getfixturevalue("postgres_admin_url"))
