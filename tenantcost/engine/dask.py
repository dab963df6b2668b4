"""Run the allocation's time chunks on a Dask cluster, when one machine is not enough.

Every chunk is one task: the worker opens its own DuckDB connection, reads that chunk's usage
from paths it can reach (local paths shared with the client, or fsspec URLs such as s3://),
splits it with exactly the code the local engine runs
(:func:`tenantcost.engine.chunks.process_chunk`), and sends back only per-client sums. The
client folds the chunks in time order, so results are identical to the local engine to the
unit.

Only the small per-chunk tables (pools, specs, cost windows) travel with a task; usage files
are never shipped from the client. In-memory usage (a CSV file or Prometheus) is small by
nature and travels sliced to its chunk.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager
from types import TracebackType
from typing import Any

from tenantcost.engine.chunks import ChunkOutput, ChunkTask, process_chunk
from tenantcost.errors import InputError
from tenantcost.split import connect
from tenantcost.usage_source import UsageSource


def run_chunk_on_worker(source: UsageSource, task: ChunkTask) -> ChunkOutput:
    """The task a worker runs: its own DuckDB connection, one chunk."""
    con = connect(threads=1)
    try:
        return process_chunk(con, source, task)
    finally:
        con.close()


class DaskEngine(AbstractContextManager["DaskEngine"]):
    """Chunks as Dask tasks on an existing cluster (``scheduler``) or a local one (``workers``).

    At most ``in_flight`` chunks are submitted ahead of the one being folded, so the client's
    memory stays bounded however long the period is.
    """

    def __init__(
        self,
        scheduler: str | None = None,
        workers: int | None = None,
        in_flight: int | None = None,
    ) -> None:
        try:
            from distributed import Client, LocalCluster
        except ImportError:  # pragma: no cover - depends on the installation
            raise InputError(
                "--engine dask needs the 'distributed' package: pip install 'tenantcost[dask]'"
            ) from None
        self._cluster: Any = None
        try:
            if scheduler:
                self.client = Client(scheduler, timeout="30s")
            else:
                self._cluster = LocalCluster(
                    n_workers=workers or 2,
                    threads_per_worker=1,
                    processes=True,
                    host="127.0.0.1",
                    dashboard_address=None,
                )
                self.client = Client(self._cluster)
        except (OSError, ValueError) as exc:  # unreachable, or not an address at all
            raise InputError(f"cannot reach the Dask scheduler {scheduler}: {exc}") from None
        workers_now = len(self.client.scheduler_info().get("workers", {})) or 1
        self.in_flight = in_flight or 2 * workers_now

    def run(self, source: UsageSource, tasks: list[ChunkTask]) -> Iterator[ChunkOutput]:
        """Yield chunk outputs in task order while keeping a bounded window of tasks running."""
        pending: dict[int, Any] = {}
        next_submit = 0
        for index in range(len(tasks)):
            while next_submit < len(tasks) and next_submit < index + self.in_flight:
                task = tasks[next_submit]
                pending[next_submit] = self.client.submit(
                    run_chunk_on_worker,
                    source.for_chunk(task.start, task.end),
                    task,
                    key=f"tenantcost-chunk-{next_submit}-{id(tasks)}",
                    pure=False,
                )
                next_submit += 1
            future = pending.pop(index)
            try:
                yield future.result()
            except InputError:
                raise
            finally:
                future.release()

    def close(self) -> None:
        self.client.close()
        if self._cluster is not None:
            self._cluster.close()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
