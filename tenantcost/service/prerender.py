"""Each issued revision's sheets rendered once, in the background, after close.

A PDF sheet takes about a second of WeasyPrint; rendered on request it made ``sheet.pdf``
wait seconds, and the first sheet of a month in each worker waited for the month's pack to
load. So every worker runs a watcher thread (:func:`start`) that looks every
:data:`POLL_SECONDS` for a month's latest issued revision the current renderer
(:func:`~tenantcost.service.sheets.render_version`) has not rendered, and claims it in the
store (:func:`tenantcost.store.sheet_cache.claim`: one claimer in all, across workers,
processes and hosts). The winner renders it in a child process (``python -m
tenantcost.service.prerender``, at a lower CPU priority, so reads keep their cores and the
GIL): the pack is loaded once, then every client's confidence block, HTML and Markdown
sheets (milliseconds each, so the statements and HTML sheets of a fresh worker are served
from the store soon after close), then every PDF, each chunk of :data:`CHUNK` sheets kept in
one insert and the claim's heartbeat beaten. Sheets already kept (a read rendered them on
demand meanwhile) are skipped. A read before its sheet is kept renders it on demand and keeps
it (:func:`tenantcost.service.sheets.sheet_body`).

``TENANTCOST_PRERENDER=0`` turns the watcher off (reads then render on demand only).
"""

from __future__ import annotations

import logging
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

from sqlalchemy import Engine

from tenantcost.store.sheet_cache import (
    Pending,
    RenderKey,
    beat,
    cached_clients,
    claim,
    finish,
    release,
    remember,
)

ENV_PRERENDER = "TENANTCOST_PRERENDER"
POLL_SECONDS = 5.0
CHUNK = 50
"""Sheets kept per insert and heartbeat (milliseconds each)."""
PDF_CHUNK = 4
"""PDFs kept per insert and heartbeat (seconds each: a stopped rendering loses at most
these)."""
BEAT_SECONDS = 30.0
"""Chunks already kept are skipped with a heartbeat at most this often."""
NICE = 10
"""How much lower the rendering process runs than the workers answering requests."""
FAST_FORMATS = ("confidence", "html", "md")
log = logging.getLogger("tenantcost.prerender")


class Watcher:
    """A worker's watcher thread and the rendering process it may be waiting for."""

    def __init__(self, engine: Engine, poll: float = POLL_SECONDS) -> None:
        self.engine = engine
        self.poll = poll
        self.stopping = threading.Event()
        self.child: subprocess.Popen[bytes] | None = None
        self.thread = threading.Thread(target=self._loop, name="tenantcost-prerender", daemon=True)

    def start(self) -> Watcher:
        self.thread.start()
        return self

    def stop(self) -> None:
        """At shutdown: no new claim, and the rendering process ends (its claim goes stale
        and another process takes it over)."""
        self.stopping.set()
        child = self.child
        if child is not None and child.poll() is None:
            child.terminate()
        self.thread.join(timeout=5)

    def _loop(self) -> None:
        from tenantcost.service.sheets import sheet_version
        from tenantcost.store.sheet_cache import pending

        while not self.stopping.wait(self.poll):
            try:
                for job in pending(self.engine, sheet_version(self.engine)):  # one per month
                    if self.stopping.is_set():
                        return
                    worker = f"{socket.gethostname()}:{os.getpid()}"
                    if claim(self.engine, job.month, job.key, worker):
                        self._render(job, worker)
            except Exception:  # a store hiccup must not kill the watcher; it looks again
                log.exception("background rendering: looking for issued revisions failed")

    def _render(self, job: Pending, worker: str) -> None:
        key = job.key
        command = [sys.executable, "-m", "tenantcost.service.prerender", job.month,
                   key.run_id, str(key.revision), key.version, worker]  # fmt: skip
        self.child = subprocess.Popen(command)  # the exported store settings are inherited
        self.child.wait()
        self.child = None
        if self.stopping.is_set():  # stopped halfway: the next worker to look takes it over
            release(self.engine, key, worker)


def start(engine: Engine) -> Watcher | None:
    """This worker's watcher (None when ``TENANTCOST_PRERENDER=0``)."""
    if os.environ.get(ENV_PRERENDER, "1") == "0":
        return None
    return Watcher(engine).start()


def _batches(clients: list[str], formats: tuple[str, ...]) -> Iterator[list[tuple[str, str]]]:
    pairs = [(client, fmt) for fmt in formats for client in clients]
    size = PDF_CHUNK if "pdf" in formats else CHUNK
    for first in range(0, len(pairs), size):
        yield pairs[first : first + size]


def render_revision(engine: Engine, month: str, key: RenderKey, worker: str) -> tuple[int, bool]:
    """Render and keep every sheet of the revision not kept yet: how many were rendered,
    and whether all were (it stops early, leaving its claim to go stale, when the worker
    that started it is gone)."""
    from tenantcost.report.sheet_view import SheetView
    from tenantcost.service.figures import FigureStatus, MonthSource
    from tenantcost.service.sheets import _load, render_from
    from tenantcost.store.catalog import names_of

    status = FigureStatus.ISSUED if key.revision == 1 else FigureStatus.RESTATED
    source = MonthSource(month, key.run_id, status, key.revision, "closed")
    loaded = _load(engine, source, None)
    clients = sorted(str(c) for c in loaded.pack.clients)
    names = names_of(engine, clients)  # the titles (the key's version holds the catalog's)
    parent, done, beaten = os.getppid(), 0, time.monotonic()
    for formats in (FAST_FORMATS, ("pdf",)):
        kept = {fmt: cached_clients(engine, key, fmt) for fmt in formats}
        for batch in _batches(clients, formats):  # a chunk of sheets per insert
            if os.getppid() != parent:
                return done, False
            todo = [(c, f) for c, f in batch if c not in kept[f]]
            bodies = [
                (c, f, render_from(loaded, c, f, SheetView.CLIENT, names.get(c, "")))
                for c, f in todo
            ]
            remember(engine, key, bodies)
            done += len(bodies)
            if bodies or time.monotonic() - beaten > BEAT_SECONDS:  # not per skipped chunk
                beat(engine, key, worker, done)
                beaten = time.monotonic()
    return done, True


def main(argv: list[str]) -> int:
    """``python -m tenantcost.service.prerender MONTH RUN REVISION VERSION WORKER``: the
    rendering process a watcher starts once it holds the claim."""
    from tenantcost.store.engine import open_engine
    from tenantcost.store.settings import resolve_settings

    month, run_id, revision, version, worker = argv
    os.nice(NICE)
    key = RenderKey(run_id, int(revision), version)
    engine = open_engine(resolve_settings())
    started, done, complete, error = time.monotonic(), 0, True, None
    try:
        done, complete = render_revision(engine, month, key, worker)
    except Exception as exc:  # recorded on the job: reads render on demand instead
        log.exception("background rendering of %s revision %s failed", month, revision)
        error = f"{type(exc).__name__}: {exc}"[:2000]
    if complete:
        finish(engine, key, worker, done, error)
    log.info("rendered %d sheets of %s in %.1f s", done, month, time.monotonic() - started)
    engine.dispose()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
