"""``lines.csv``: every window-level client line of a run, streamed chunk by chunk.

A month for thousands of clients has far more window-level lines than fit in memory next to
the usage, so each chunk writes its own lines (DuckDB ``COPY``, where the chunk runs: in this
process or on a Dask worker that shares the output folder) to a part file next to the target,
and the run appends the parts in chunk order (header once) and deletes them. Amounts carry
both the exact decimal and the integer micro-units, like every CSV output.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import BinaryIO

import duckdb
import pandas as pd

from tenantcost.errors import InternalError

LINES_CSV_SQL = """
    COPY (
        SELECT strftime(window_start, '%Y-%m-%dT%H:%M:%SZ') AS window_start,
               strftime(window_end, '%Y-%m-%dT%H:%M:%SZ') AS window_end,
               rule_id, client, source, kind, key, measure, total_measure, share,
               printf('%d.%06d', amount // 1000000, amount % 1000000) AS amount,
               amount AS amount_micros
        FROM (SELECT * FROM lines UNION ALL
              SELECT window_start, window_end, rule_id, client, source, kind, key,
                     measure, total_measure, share, amount FROM t_direct_lines)
        ORDER BY window_start, client, kind, source
    ) TO '{target}' (HEADER true)
"""


@dataclass(frozen=True)
class CsvPart:
    """Writes one chunk's lines (the split's ``lines`` view and the chunk's direct lines) to
    a CSV part file; small and picklable, so it travels with a Dask task."""

    path: str

    def __call__(self, con: duckdb.DuckDBPyConnection, direct_lines: pd.DataFrame) -> None:
        con.register("t_direct_lines", direct_lines)
        try:
            con.execute(LINES_CSV_SQL.format(target=self.path.replace("'", "''")))
        finally:
            con.unregister("t_direct_lines")


def _append_part(handle: BinaryIO, part: Path, with_header: bool) -> None:
    """Append a chunk's CSV part to the lines file (its header only once), then delete it."""
    with part.open("rb") as src:
        header = src.readline()
        if with_header:
            handle.write(header)
        shutil.copyfileobj(src, handle)
    part.unlink()


class LinesCsvFile:
    """A lines sink (``tenantcost.engine.LinesSink``) that writes one CSV file.

    Use as a context manager: the file is created on entry and closed on exit (a failed run
    leaves what was written so far).
    """

    def __init__(self, target: Path) -> None:
        self.target = target
        self._handle: BinaryIO | None = None
        self._parts_added = 0

    def __enter__(self) -> LinesCsvFile:
        self._handle = self.target.open("wb")
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._handle is not None:
            self._handle.close()
            self._handle = None

    def _part_path(self, index: int) -> Path:
        return self.target.with_name(f".{self.target.name}.part-{index:05d}.csv")

    def part(self, index: int) -> CsvPart:
        """Chunk ``index`` writes its lines to a hidden part file next to the target."""
        return CsvPart(str(self._part_path(index)))

    def chunk_done(self, index: int) -> None:
        """Append chunk ``index``'s part (header only for the first part), then delete it."""
        if self._handle is None:
            raise InternalError("LinesCsvFile used outside its 'with' block")
        _append_part(self._handle, self._part_path(index), with_header=self._parts_added == 0)
        self._parts_added += 1
