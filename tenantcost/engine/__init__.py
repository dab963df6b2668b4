"""Engines run an allocation's time chunks; the fold turns their outputs into the result.

* ``chunks``: :class:`ChunkTask`, :class:`ChunkOutput` and :func:`process_chunk`, the code
  every engine runs for one chunk, plus the protocols of a window-level lines sink;
* ``local``: :class:`LocalEngine`, chunks one after the other in this process (default);
* ``dask``: ``DaskEngine``, chunks as tasks on a Dask cluster (imported on demand: it needs
  the optional ``distributed`` package);
* ``fold``: folds the outputs, in chunk order, into an ``AllocationResult``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol

from tenantcost.engine.chunks import ChunkOutput, ChunkTask, LinePartWriter, LinesSink
from tenantcost.engine.local import LocalEngine
from tenantcost.usage_source import UsageSource

__all__ = [
    "ChunkOutput",
    "ChunkTask",
    "Engine",
    "LinePartWriter",
    "LinesSink",
    "LocalEngine",
]


class Engine(Protocol):
    """Runs chunk tasks and yields their outputs in task order."""

    def run(self, source: UsageSource, tasks: list[ChunkTask]) -> Iterator[ChunkOutput]: ...
