"""The in-process SQL engine every layer shares: one way to open DuckDB, quote a name, and
write a point in time as a literal.

Readers, the split, the engine, the report and the store all query DuckDB. A connection that
reads and returns timestamps in anything but UTC would shift every window by the machine's
offset, so every connection is opened here with the same settings; and the quoting of column
names and timestamps is written once, so no query builds them two ways. This is a base
module: it imports nothing of tenantcost's, and everything may import it.
"""

from __future__ import annotations

import duckdb
import pandas as pd


def connect(
    threads: int | None = None, memory_limit: str | None = None
) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB connection that reads and returns timestamps in UTC."""
    con = duckdb.connect(":memory:")
    con.execute("SET TimeZone = 'UTC'")
    if threads:
        con.execute(f"SET threads = {int(threads)}")
    if memory_limit:
        con.execute(f"SET memory_limit = '{memory_limit}'")
    con.execute("SET preserve_insertion_order = false")
    return con


def quote(name: str) -> str:
    """A SQL identifier, quoted."""
    return '"' + name.replace('"', '""') + '"'


def timestamp_literal(ts: pd.Timestamp) -> str:
    """A DuckDB TIMESTAMPTZ literal for a UTC timestamp."""
    return f"TIMESTAMPTZ '{ts.tz_convert('UTC').strftime('%Y-%m-%d %H:%M:%S.%f')}+00'"
