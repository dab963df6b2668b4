"""PDF pages in a local process pool: WeasyPrint takes about a second a page on one core.

The HTML of each page is rendered in the main process (the same string the serial path
renders), then handed to a worker process that writes the PDF; WeasyPrint's output depends
only on that string, so the files are those of the serial path, byte for byte. At most
``2 x jobs`` pages are in flight, so memory does not grow with the number of clients, and
each worker is replaced after :data:`TASKS_PER_WORKER` pages to bound what WeasyPrint keeps.
Workers are started with ``spawn``: forking a process that runs DuckDB's threads is unsafe.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from pathlib import Path
from types import ModuleType, TracebackType

TASKS_PER_WORKER = 200
"""Pages a worker writes before it is replaced (bounds its memory)."""


def default_jobs() -> int:
    """The cores this process may run on."""
    return len(os.sched_getaffinity(0))


def write_pdf(weasyprint: ModuleType, html: str, target: Path) -> None:
    """WeasyPrint's rendering of ``html`` into ``target`` (relative URLs from its folder)."""
    logging.getLogger("weasyprint").setLevel(logging.ERROR)
    logging.getLogger("fontTools").setLevel(logging.ERROR)
    weasyprint.HTML(string=html, base_url=str(target.parent)).write_pdf(str(target))


def _worker_page(html: str, target: str) -> str:
    """One page in a worker process (WeasyPrint is imported once per worker)."""
    import weasyprint

    write_pdf(weasyprint, html, Path(target))
    return target


class PdfPool:
    """Writes PDFs in ``jobs`` worker processes; ``done(path)`` is called as each is written."""

    def __init__(self, jobs: int, done: Callable[[Path], None]) -> None:
        self.limit = 2 * jobs
        self.done = done
        self.pending: dict[Future[str], Path] = {}
        self.executor = ProcessPoolExecutor(
            max_workers=jobs,
            mp_context=multiprocessing.get_context("spawn"),
            max_tasks_per_child=TASKS_PER_WORKER,
        )

    def submit(self, html: str, target: Path) -> None:
        """Queue one page; waits while ``2 x jobs`` pages are in flight."""
        while len(self.pending) >= self.limit:
            self._collect(FIRST_COMPLETED)
        self.pending[self.executor.submit(_worker_page, html, str(target))] = target

    def _collect(self, until: str) -> None:
        finished, _ = wait(self.pending, return_when=until)
        for future in finished:
            target = self.pending.pop(future)
            future.result()  # a worker's error is raised here, in the main process
            self.done(target)

    def finish(self) -> None:
        """Wait for every queued page."""
        if self.pending:
            self._collect("ALL_COMPLETED")

    def __enter__(self) -> PdfPool:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.executor.shutdown(wait=True, cancel_futures=kind is not None)
