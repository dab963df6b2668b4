"""A real PostgreSQL 15 for the store tests: a throw-away cluster on a free loopback port.

``initdb`` refuses to run as root, so as root the cluster is created and run as the
``postgres`` user (``runuser``); as another user it runs as that user. ``fsync=off`` and
``--no-sync``: the cluster dies with the session, durability would only cost time. About a
second to create, a tenth to start and to stop. A missing PostgreSQL FAILS the session (the
README's test command installs it); nothing is skipped.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from itertools import count
from pathlib import Path

import pytest

BIN = Path("/usr/lib/postgresql/15/bin")
INSTALL_HINT = (
    "run the README's test command, `bash scripts/test.sh`, which installs the Debian package "
    "'postgresql' (PostgreSQL 15)"
)
_databases = count(1)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _as_owner(args: list[str], root: bool) -> list[str]:
    return ["runuser", "-u", "postgres", "--", *args] if root else args


def _run(args: list[str], what: str) -> None:
    done = subprocess.run(args, capture_output=True, text=True, check=False, timeout=120)
    if done.returncode != 0:
        pytest.fail(f"PostgreSQL {what} failed: {(done.stderr or done.stdout)[-2000:]}",
                    pytrace=False)  # fmt: skip


@contextmanager
def running_postgres() -> Iterator[str]:
    """Start a cluster; yields the admin URL ``postgresql+psycopg://postgres@127.0.0.1:PORT/``."""
    initdb, pg_ctl = BIN / "initdb", BIN / "pg_ctl"
    if not initdb.exists():
        pytest.fail(f"'{initdb}' is missing: {INSTALL_HINT}", pytrace=False)
    root = os.geteuid() == 0
    if root and shutil.which("runuser") is None:
        pytest.fail(
            "'runuser' is missing (util-linux): it runs initdb as 'postgres'", pytrace=False
        )
    workdir = Path(tempfile.mkdtemp(prefix="tenantcost-pg-"))
    if root:
        shutil.chown(workdir, "postgres", "postgres")
    data, port = workdir / "data", free_port()
    _run(_as_owner([str(initdb), "-D", str(data), "-U", "postgres", "-A", "trust", "-E", "UTF8",
                    "--locale=C.UTF-8", "--no-sync"], root), "initdb")  # fmt: skip
    options = f"-p {port} -k {workdir} -c listen_addresses=127.0.0.1 -c fsync=off"
    start = [str(pg_ctl), "-D", str(data), "-l", str(workdir / "log"), "-w", "-o", options, "start"]
    _run(_as_owner(start, root), "start")
    try:
        yield f"postgresql+psycopg://postgres@127.0.0.1:{port}/"
    finally:
        stop = [str(pg_ctl), "-D", str(data), "-m", "fast", "-w", "stop"]
        subprocess.run(_as_owner(stop, root), capture_output=True, check=False, timeout=60)
        shutil.rmtree(workdir, ignore_errors=True)


def new_database(admin_url: str) -> str:
    """A fresh, empty database on the cluster; returns its URL."""
    import psycopg

    name = f"store_{os.getpid()}_{next(_databases)}"
    conninfo = admin_url.replace("postgresql+psycopg://", "postgresql://") + "postgres"
    with psycopg.connect(conninfo, autocommit=True) as connection:
        connection.execute(f'CREATE DATABASE "{name}"')
    return f"{admin_url}{name}"


def copy_database(url: str) -> str:
    """A new database on the same cluster with the contents of ``url`` (``CREATE DATABASE ...
    TEMPLATE``: a file copy, a few tenths of a second); returns its URL. Nothing may be
    connected to ``url`` meanwhile: dispose of its engines first."""
    import psycopg

    admin_url, source = url.rsplit("/", 1)
    name = f"store_{os.getpid()}_{next(_databases)}"
    conninfo = admin_url.replace("postgresql+psycopg://", "postgresql://") + "/postgres"
    with psycopg.connect(conninfo, autocommit=True) as connection:
        connection.execute(f'CREATE DATABASE "{name}" TEMPLATE "{source}"')
    return f"{admin_url}/{name}"
