"""The default engine: chunks one after the other in this process."""

from __future__ import annotations

from collections.abc import Iterator

import duckdb

from tenantcost.engine.chunks import ChunkOutput, ChunkTask, process_chunk
from tenantcost.usage_source import UsageSource


class LocalEngine:
    """Chunks one after the other in this process, on one DuckDB connection."""

    def __init__(self, con: duckdb.DuckDBPyConnection) -> None:
        self.con = con

    def run(self, source: UsageSource, tasks: list[ChunkTask]) -> Iterator[ChunkOutput]:
        for task in tasks:
            yield process_chunk(self.con, source.for_chunk(task.start, task.end), task)
