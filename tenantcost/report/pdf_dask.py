"""PDF pages as Dask tasks (``report --engine dask``): WeasyPrint on the cluster's workers.

The HTML of each page is rendered in the main process, exactly as on the local paths; a task
turns that string into PDF **bytes** on a worker and the client writes the file. A worker may
run on another machine, so it never writes into the output folder, and it renders against the
same ``base_url`` string as the local path (the output folder's path): the pages' relative
links resolve to the same URIs, so the PDFs are the local ones byte for byte. The default
templates fetch nothing (CSS inlined, charts as inline SVG, the icon a ``data:`` URL); a
user's template that loads a relative resource resolves it against the output folder, as
locally, so that folder must then be reachable by the workers at the same path.

At most ``2 x workers`` pages are in flight, so neither the client nor the scheduler holds
more than that many pages whatever the number of clients; the progress callback runs as each
page is written.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from tenantcost.errors import InputError

if TYPE_CHECKING:
    from distributed import Client, Future


def pdf_bytes(html: str, base_url: str) -> bytes:
    """One page on a worker: WeasyPrint's PDF of ``html`` (imported once per worker)."""
    import logging

    import weasyprint

    logging.getLogger("weasyprint").setLevel(logging.ERROR)
    logging.getLogger("fontTools").setLevel(logging.ERROR)
    document: bytes = weasyprint.HTML(string=html, base_url=base_url).write_pdf()
    return document


def check_scheduler(address: str | None) -> None:
    """A ``--scheduler`` that is no Dask address at all is one line, before connecting
    (``distributed`` raises a bare ``ValueError`` for it)."""
    if not address:
        return
    from distributed.comm import parse_address
    from distributed.comm.addressing import parse_host_port
    from distributed.comm.registry import backends

    try:
        scheme, location = parse_address(address)  # no scheme: tcp, as distributed reads it
        if scheme not in backends:
            raise ValueError(f"unknown scheme '{scheme}'")
        if scheme in ("tcp", "tls", "ws", "wss"):
            parse_host_port(location)
    except ValueError as exc:
        raise InputError(
            f"--scheduler: not a Dask scheduler address '{address}' ({exc}); give tcp://HOST:PORT"
        ) from None


def dask_pdfs(engine: str, scheduler: str | None, jobs: int | None) -> bool:
    """Whether ``report``'s PDFs go to a Dask cluster, once its options make sense together:
    ``--jobs`` is the local engine's, and a ``--scheduler`` must be a Dask address."""
    if engine != "dask":
        return False
    if jobs is not None:
        raise InputError(
            "--jobs sets the local engine's PDF processes; with --engine dask the cluster's "
            "workers write the PDFs (--workers N for a local cluster)"
        )
    check_scheduler(scheduler)
    return True


class DaskPdfPool:
    """Writes PDFs through ``client``'s workers; ``done(path)`` is called as each is written.

    The interface of :class:`~tenantcost.report.pdf.PdfPool` (``submit``, ``finish``, a
    context manager), so the report writer only chooses which pool.
    """

    def __init__(self, client: Client, done: Callable[[Path], None]) -> None:
        workers = len(client.scheduler_info().get("workers", {})) or 1
        self.client = client
        self.limit = 2 * workers
        self.done = done
        self.pending: dict[Future[Any], Path] = {}

    def submit(self, html: str, target: Path) -> None:
        """Queue one page; waits while ``2 x workers`` pages are in flight."""
        while len(self.pending) >= self.limit:
            self._collect("FIRST_COMPLETED")
        future = self.client.submit(pdf_bytes, html, str(target.parent), pure=False)
        self.pending[future] = target

    def _collect(self, until: str) -> None:
        from distributed import wait

        finished, _ = wait(list(self.pending), return_when=until)
        for future in finished:
            target = self.pending.pop(future)
            data = future.result()  # a worker's error is raised here, in the main process
            future.release()
            target.write_bytes(data)
            self.done(target)

    def finish(self) -> None:
        """Wait for every queued page and write it."""
        if self.pending:
            self._collect("ALL_COMPLETED")

    def __enter__(self) -> DaskPdfPool:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """On an error, cancel what is still queued (the cluster belongs to the engine)."""
        if self.pending:
            self.client.cancel(list(self.pending))
            self.pending.clear()


__all__ = ["DaskPdfPool", "check_scheduler", "dask_pdfs", "pdf_bytes"]
