"""Start a new store migration: autogenerate it from tenantcost.store.models.

    python scripts/new_migration.py "what changes" [--out DIR]

A throw-away SQLite store is brought to the current head, Alembic compares it with the
models and writes ``tenantcost/store/migrations/versions/NNNN_what_changes.py`` (revision id
``NNNN``, the next number). Read and edit the result before committing: autogenerate does not
see renames or CHECK constraint changes, and a migration must not import the models. Then
tests/test_store_schema.py checks that head equals the models on SQLite and PostgreSQL.
"""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

from alembic import command

from tenantcost.store.engine import open_engine
from tenantcost.store.schema import MIGRATIONS, alembic_config, head_revision, upgrade
from tenantcost.store.settings import resolve_settings


def main() -> None:
    """Parse the arguments and write the new revision file."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("message", help="what the migration changes, in a few words")
    parser.add_argument("--out", type=Path, default=MIGRATIONS / "versions")
    args = parser.parse_args()
    rev_id = f"{int(head_revision()) + 1:04d}"
    with tempfile.TemporaryDirectory() as tmp:
        settings = resolve_settings(db=f"sqlite:///{Path(tmp) / 'head.db'}", environ={})
        engine = open_engine(settings, create=True, foreign_keys=False)
        upgrade(engine)
        with engine.begin() as connection:
            config = alembic_config(connection)
            versions = {str(MIGRATIONS / "versions"), str(args.out.resolve())}
            config.set_main_option("version_locations", os.pathsep.join(sorted(versions)))
            script = command.revision(
                config, message=args.message, autogenerate=True, rev_id=rev_id,
                version_path=str(args.out.resolve()),
            )  # fmt: skip
        engine.dispose()
    assert script is not None and not isinstance(script, list)
    print(script.path)


if __name__ == "__main__":
    main()
