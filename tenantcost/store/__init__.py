"""The store: what tenantcost has loaded, ingested, computed and issued, kept for good.

Metadata and results live in SQL (SQLite by default, PostgreSQL in production) through
SQLModel; raw usage and costs live as Parquet in a data directory. The schema only
changes through the Alembic migrations shipped in ``migrations/`` (package data), so a
store written by one tenantcost version is read by the next after ``tenantcost db upgrade``.

* :mod:`~tenantcost.store.settings`: where the store is (flags > environment > settings file
  > defaults);
* :mod:`~tenantcost.store.engine`: the SQLAlchemy engine (SQLite in WAL mode, PostgreSQL
  through psycopg 3) and one-line errors for a store that cannot be opened;
* :mod:`~tenantcost.store.models`: the tables;
* :mod:`~tenantcost.store.schema`: migrations and the schema-version check every store
  command runs first (:func:`~tenantcost.store.schema.require_current_schema`);
* :mod:`~tenantcost.store.lock`: the store's write lock (one writer at a time, ``--wait``,
  exit 4);
* :mod:`~tenantcost.store.rules`: rule file versions (``tenantcost rules load``);
* :mod:`~tenantcost.store.data`: the data directory (Parquet files per batch and day);
* :mod:`~tenantcost.store.ingest`: batches of raw usage and costs (``tenantcost ingest``);
* :mod:`~tenantcost.store.stored`: reading them back, each cell once (``stored_usage``,
  ``stored_costs``);
* :mod:`~tenantcost.store.runs`: ``tenantcost run`` (allocate a month from the store, record
  it); :mod:`~tenantcost.store.status`: ``tenantcost status``;
* :mod:`~tenantcost.store.actor`: who did it.

Nothing here is imported by ``tenantcost --help``: SQLAlchemy and Alembic load only when a
store command runs.
"""
