"""A client's cost sheet (HTML, PDF, Markdown) rendered from a stored run, for the service.

The sheet is the report pack's own (same templates, same privacy rules: each sheet is built
for its client alone, exactly as ``report --from-db`` builds it), from the stored-run loader
(:func:`tenantcost.store.stored_run.load_statement`). Runs and issued revisions never
change, so each process keeps:

* the last :data:`PACKS_KEPT` month packs (every client of a run, and the views their sheets
  share): loading one is seconds for 10,000 clients, a sheet from it milliseconds; a draft's
  pack is keyed by the month's latest issued revision too, which its sheet names; every pack
  and sheet by the previous month's latest issued run, which its bridge compares with;
* the last :data:`CACHE_SIZE` rendered issued sheets (a PDF takes about a second).
"""

from __future__ import annotations

import functools
import shlex
import tempfile
import threading
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fastapi.responses import Response
from sqlalchemy import Engine

from tenantcost.service.auth import not_found
from tenantcost.service.downloads import Disposition, content_disposition
from tenantcost.service.figures import FigureStatus, MonthSource
from tenantcost.store.data import DataDir

MEDIA_TYPES = {
    "html": "text/html; charset=utf-8",
    "pdf": "application/pdf",
    "md": "text/markdown; charset=utf-8",
}
CACHE_SIZE = 256
PACKS_KEPT = 2
_cache: OrderedDict[tuple[str, str, str], bytes] = OrderedDict()
_packs: OrderedDict[str, _Loaded] = OrderedDict()
_pack_locks: dict[str, threading.Lock] = {}
_lock = threading.Lock()


def render_sheet(
    engine: Engine, source: MonthSource, client: str, fmt: str, data: DataDir | None = None
) -> Response:
    """The sheet of ``client`` from the run ``source`` names, as an HTTP response."""
    key = (f"{source.run_id}/{source.revision}{_compared(engine, source)}", client, fmt)
    body = _cached(key) if source.status is not FigureStatus.DRAFT else None
    if body is None:
        body = _render(engine, source, client, fmt, data)
        if source.status is not FigureStatus.DRAFT:
            _remember(key, body)
    disposition = Disposition.INLINE if fmt == "html" else Disposition.ATTACHMENT
    name = f"{source.month}-{client}.{fmt}"
    return Response(
        body,
        media_type=MEDIA_TYPES[fmt],
        headers={"Content-Disposition": content_disposition(disposition, name)},
    )


def _slug(client: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in client)[:80] or "client"


def _cached(key: tuple[str, str, str]) -> bytes | None:
    with _lock:
        body = _cache.get(key)
        if body is not None:
            _cache.move_to_end(key)
        return body


def _remember(key: tuple[str, str, str], body: bytes) -> None:
    with _lock:
        _cache[key] = body
        while len(_cache) > CACHE_SIZE:
            _cache.popitem(last=False)


@dataclass(frozen=True)
class _Loaded:
    """A month's whole pack as one run shows it, and the views every sheet shares."""

    pack: Any
    views: Any


def _compared(engine: Engine, source: MonthSource) -> str:
    """The previous month's latest issued run: the sheet's bridge compares with it, so a
    restated previous month is another sheet (one indexed query)."""
    from tenantcost.store.month_bridge import previous_issued

    previous = previous_issued(engine, source.month)
    return "" if previous is None else f"/vs {previous.run_id}"


def _pack_key(engine: Engine, source: MonthSource) -> str:
    if source.status is not FigureStatus.DRAFT:
        return f"{source.run_id}/revision {source.revision}{_compared(engine, source)}"
    from tenantcost.store.cycle import issued_revision

    # A draft's sheet names the month's latest issued revision: part of what it shows.
    after = issued_revision(engine, source.month)
    return f"{source.run_id}/draft after {after}{_compared(engine, source)}"


def _loaded(engine: Engine, source: MonthSource, data: DataDir | None) -> _Loaded:
    """The pack of every client of the run (loaded once per process and kept: loading is
    seconds for 10,000 clients, a sheet from it a few milliseconds)."""
    key = _pack_key(engine, source)
    with _lock:
        loading = _pack_locks.setdefault(key, threading.Lock())
    with loading:  # one load per key; concurrent requests for it wait for that one
        with _lock:
            found = _packs.get(key)
            if found is not None:
                _packs.move_to_end(key)
                return found
        loaded = _load(engine, source, data)
        with _lock:
            _packs[key] = loaded
            while len(_packs) > PACKS_KEPT:
                old, _ = _packs.popitem(last=False)
                _pack_locks.pop(old, None)
        return loaded


def _load(engine: Engine, source: MonthSource, data: DataDir | None) -> _Loaded:
    from tenantcost.report.sheet import prepare
    from tenantcost.store.stored_run import load_statement

    if source.status is FigureStatus.DRAFT:  # the run itself, marked as a draft
        loaded = load_statement(engine, source.month, run_id=source.run_id, data=data)
    else:  # the revision exactly as issued (a restated one says what changed)
        loaded = load_statement(engine, source.month, revision=source.revision, data=data)
    return _Loaded(loaded.pack, prepare(loaded.pack))


@functools.cache
def _environment(kind: str) -> Any:
    from tenantcost.report.render import environment

    return environment(kind, None)


def _render(
    engine: Engine, source: MonthSource, client: str, fmt: str, data: DataDir | None
) -> bytes:
    """One sheet, through the report pack's sheet builder and templates."""
    from tenantcost.report.render import Reproduce, _render
    from tenantcost.report.sheet import build_sheet

    loaded = _loaded(engine, source, data)
    pack, views = loaded.pack, loaded.views
    if client not in pack.clients:  # e.g. a client the restated run no longer has
        raise not_found()
    sheet = build_sheet(pack, client, _slug(client), views)
    command = [*pack.command] if pack.command is not None else ["tenantcost", "report"]
    reproduce = Reproduce(
        views.redaction.reader(client)(f"{shlex.join(command)} --client {shlex.quote(client)}")
    )
    kind = "md" if fmt == "md" else "html"
    name = "client_sheet.md" if fmt == "md" else "client_sheet.html"
    text = _render(_environment(kind), name, sheet=sheet, reproduce=reproduce)
    if fmt != "pdf":
        return text.encode("utf-8")
    from tenantcost.report.pdf import write_pdf
    from tenantcost.report.render import load_weasyprint

    with tempfile.TemporaryDirectory(prefix="tenantcost-sheet-") as tmp:
        target = Path(tmp) / "sheet.pdf"
        write_pdf(load_weasyprint(), text, target)
        return target.read_bytes()


def client_confidence(
    engine: Engine, source: MonthSource, client: str, data: DataDir | None = None
) -> dict[str, Any] | None:
    """The client's confidence level and its graded criteria, as its sheet states them
    (``None`` when the run's figures cannot be loaded, e.g. a run recorded before 0007)."""
    import math

    from tenantcost.errors import InputError

    try:
        pack = _loaded(engine, source, data).pack
    except InputError:
        return None
    graded = pack.confidence.get(client)
    if graded is None:
        return None
    return {
        "level": graded.level,
        "criteria": [
            {"name": c.name, "value": c.value if math.isfinite(c.value) else None, "grade": c.grade}
            for c in graded.criteria
        ],
    }
