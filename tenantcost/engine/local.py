"""The default engine: chunks one after the other in this process, one chunk ahead of the fold.

A chunk's split is DuckDB work on both cores, but not all of a run is: converting a chunk's
lines to pandas, folding them into the running totals and appending a lines file are mostly
one core's work. The engine therefore splits the next chunk on a worker thread while the
caller folds the last one (DuckDB releases the GIL while it runs a query). Chunks still run
one at a time on one connection, in order, and outputs come back in order, so the result is
the same as running them strictly one after the other, and memory holds one chunk's usage.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator
from dataclasses import dataclass

import duckdb

from tenantcost.engine.chunks import ChunkOutput, ChunkTask, process_chunk
from tenantcost.usage_source import UsageSource

AHEAD = 1
"""Finished chunk outputs the worker may hold before the caller has taken them."""


@dataclass
class _Done:
    """What the worker hands over: a chunk's output, or the exception that ended the run."""

    output: ChunkOutput | None = None
    error: BaseException | None = None


class LocalEngine:
    """Chunks one after the other in this process, on one DuckDB connection, the next chunk
    split while the caller folds the last one."""

    def __init__(self, con: duckdb.DuckDBPyConnection) -> None:
        self.con = con

    def run(self, source: UsageSource, tasks: list[ChunkTask]) -> Iterator[ChunkOutput]:
        if len(tasks) <= 1:  # nothing to overlap
            for task in tasks:
                yield process_chunk(self.con, source.for_chunk(task.start, task.end), task)
            return
        yield from _Pipeline(self.con, source, tasks).outputs()


class _Pipeline:
    """A worker thread that runs the chunks in order and queues their outputs."""

    def __init__(
        self, con: duckdb.DuckDBPyConnection, source: UsageSource, tasks: list[ChunkTask]
    ) -> None:
        self.con = con
        self.source = source
        self.tasks = tasks
        self.done: queue.Queue[_Done] = queue.Queue(maxsize=AHEAD)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._work, name="tenantcost-chunks", daemon=True)

    def outputs(self) -> Iterator[ChunkOutput]:
        """The outputs in task order; a worker's exception is raised here, in the caller."""
        self.thread.start()
        finished = False
        try:
            for _ in self.tasks:
                done = self.done.get()
                if done.error is not None:
                    raise done.error
                assert done.output is not None
                yield done.output
            finished = True
        finally:
            if finished:
                self.thread.join()
            else:
                self._abandon()

    def _work(self) -> None:
        try:
            for task in self.tasks:
                if self.stop.is_set():
                    return
                chunk = self.source.for_chunk(task.start, task.end)
                self._hand_over(_Done(output=process_chunk(self.con, chunk, task)))
        except BaseException as exc:  # handed to the caller, which raises it
            self._hand_over(_Done(error=exc))

    def _hand_over(self, done: _Done) -> None:
        """Queue ``done``, unless the caller has stopped taking outputs."""
        while not self.stop.is_set():
            try:
                self.done.put(done, timeout=0.1)
                return
            except queue.Full:
                continue

    def _abandon(self) -> None:
        """Stop the worker early (a chunk or the caller failed, or the caller stopped asking):
        interrupt its query if it is still running one, and wait for it."""
        self.stop.set()
        if self.thread.is_alive():
            self.con.interrupt()
        self.thread.join()
