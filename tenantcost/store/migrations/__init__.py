"""Alembic migrations of the store (package data: the wheel ships them).

``env.py`` is run by Alembic with the connection :mod:`tenantcost.store.schema` opened; there
is no ``alembic.ini``. ``versions/`` holds one file per schema revision, named ``NNNN_*.py``
with revision ids ``NNNN`` so messages read "revision 0001, expected 0002". A migration
never imports :mod:`tenantcost.store.models`: it describes the schema as it was at its
revision, and the models move on (tests/test_store_schema.py checks head == models).

New revision: ``python scripts/new_migration.py "what changes"`` (autogenerates from the
models against a fresh SQLite store at head; read and edit the result).
"""
