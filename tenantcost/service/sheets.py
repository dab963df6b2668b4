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

An issued revision's sheets are also kept in the store (:mod:`tenantcost.store.sheet_cache`),
shared by every worker: rendered in the background after close
(:mod:`tenantcost.service.prerender`), or on the first read, then read from there. A fresh
worker serves them without loading the month's pack. They are keyed by
:func:`render_version` (the sheet code, templates and WeasyPrint), so a new renderer renders
them again, and by the store catalog's fingerprint (:func:`sheet_version`): a client sheet's
title holds the client's catalog name, so a catalog load renders the kept sheets again.

A sheet has two views (:mod:`tenantcost.report.sheet_view`). What is kept and cached is the
client's; the internal view (finance's and admin's, ``?view=internal``) is rendered on demand
on every request and never kept: it is read rarely, and a store of finance's workings beside
the sheets clients receive is one more thing that could be served to the wrong reader.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import shlex
import tempfile
import threading
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fastapi.responses import Response
from sqlalchemy import Engine

from tenantcost.report.sheet_view import SheetView
from tenantcost.service.auth import not_found
from tenantcost.service.downloads import Disposition, content_disposition
from tenantcost.service.figures import FigureStatus, MonthSource
from tenantcost.store.data import DataDir
from tenantcost.store.sheet_cache import RenderKey, cached, remember

log = logging.getLogger("tenantcost.sheets")
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


CONFIDENCE = "confidence"
"""The format under which a client's confidence block (JSON) is kept beside its sheets."""


@functools.cache
def render_version() -> str:
    """What a kept sheet was rendered with: tenantcost's version, the sheet code (the report
    package and this module), the report templates and WeasyPrint's version. Any change of
    them misses the kept sheets, so nothing stale is served after an upgrade."""
    from importlib.metadata import PackageNotFoundError, version

    from tenantcost import __version__

    package = Path(__file__).resolve().parents[1]
    digest = hashlib.sha256(__version__.encode())
    try:
        digest.update(version("weasyprint").encode())
    except PackageNotFoundError:
        digest.update(b"no weasyprint")
    sources = [Path(__file__), *sorted((package / "report").glob("*.py")),
               *sorted(p for p in (package / "templates").iterdir() if p.is_file())]  # fmt: skip
    for path in sources:  # a few dozen files, once per process
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:32]


def sheet_version(engine: Engine) -> str:
    """The version kept sheets are keyed by: :func:`render_version`, and the fingerprint of
    the store's catalog when there is one (its names are in the sheets' titles). One indexed
    query for the latest catalog load."""
    from tenantcost.store.catalog import catalog_fingerprint

    catalog = catalog_fingerprint(engine)
    if catalog is None:
        return render_version()
    return hashlib.sha256(f"{render_version()}/{catalog}".encode()).hexdigest()[:32]


def store_key(engine: Engine, source: MonthSource) -> RenderKey | None:
    """Where an issued revision's sheets are kept (None for a draft: never kept)."""
    if source.status is FigureStatus.DRAFT or source.revision is None:
        return None
    return RenderKey(source.run_id, source.revision, sheet_version(engine))


def sheet_body(
    engine: Engine,
    source: MonthSource,
    client: str,
    fmt: str,
    data: DataDir | None = None,
    currency: str | None = None,
) -> bytes:
    """The client sheet's bytes: this process's cache, else the store's, else rendered (and
    kept in both when the revision is issued). In another ``currency`` than the ledger's
    (:func:`sheet_currency`), kept in this process only: the store keeps what the client
    was issued, and the background rendering prepares that."""
    issued = store_key(engine, source)
    version = issued.version if issued is not None else ""
    shown = f"/{currency}" if currency else ""
    key = (f"{source.run_id}/{source.revision}{_compared(engine, source)}/{version}{shown}",
           client, fmt)  # fmt: skip
    stored = issued if currency is None else None  # the store keeps the issued ones only
    body = _cached(key) if issued is not None else None
    if body is None and stored is not None:
        body = cached(engine, stored, client, fmt)
    if body is None:
        body = _render(engine, source, client, fmt, data, SheetView.CLIENT, currency)
        if stored is not None:
            _keep(engine, stored, client, fmt, body)
    if issued is not None:
        _remember(key, body)
    return body


def sheet_currency(engine: Engine, source: MonthSource, asked: str | None) -> str | None:
    """The currency a sheet of ``source``'s run is rendered in for ``?currency=asked``:
    ``None`` for the ledger's (as issued), ``asked`` when the run recorded a conversion into
    it; else no such sheet (404). Two indexed queries."""
    if asked is None:
        return None
    from sqlalchemy import select

    from tenantcost.store.models import Run, table
    from tenantcost.store.run_fx import run_conversions

    with engine.connect() as connection:
        run = table(Run).c
        ledger = connection.execute(select(run.currency).where(run.id == source.run_id)).scalar()
        if asked == ledger:
            return None
        if asked not in run_conversions(connection, source.run_id):
            raise not_found()
    return asked


def render_sheet(
    engine: Engine,
    source: MonthSource,
    client: str,
    fmt: str,
    data: DataDir | None = None,
    view: SheetView = SheetView.CLIENT,
    currency: str | None = None,
) -> Response:
    """The sheet of ``client`` from the run ``source`` names, as an HTTP response: the
    client view kept and cached, the internal view rendered now (the caller checked that
    the principal may read it); in ``currency`` as the run converted it (:func:`sheet_currency`)."""
    shown = sheet_currency(engine, source, currency)
    if view.internal:
        body = _render(engine, source, client, fmt, data, view, shown)
    else:
        body = sheet_body(engine, source, client, fmt, data, shown)
    disposition = Disposition.INLINE if fmt == "html" else Disposition.ATTACHMENT
    suffix = ("-internal" if view.internal else "") + (f"-{shown}" if shown else "")
    name = f"{source.month}-{client}{suffix}.{fmt}"
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


def _pack_key(engine: Engine, source: MonthSource, currency: str | None = None) -> str:
    shown = f"/in {currency}" if currency else ""
    if source.status is not FigureStatus.DRAFT:
        return f"{source.run_id}/revision {source.revision}{_compared(engine, source)}{shown}"
    from tenantcost.store.cycle import issued_revision

    # A draft's sheet names the month's latest issued revision: part of what it shows.
    after = issued_revision(engine, source.month)
    return f"{source.run_id}/draft after {after}{_compared(engine, source)}{shown}"


def _loaded(
    engine: Engine, source: MonthSource, data: DataDir | None, currency: str | None = None
) -> _Loaded:
    """The pack of every client of the run (loaded once per process and kept: loading is
    seconds for 10,000 clients, a sheet from it a few milliseconds), in ``currency`` (None:
    the ledger's) as the run converted it."""
    key = _pack_key(engine, source, currency)
    with _lock:
        loading = _pack_locks.setdefault(key, threading.Lock())
    with loading:  # one load per key; concurrent requests for it wait for that one
        with _lock:
            found = _packs.get(key)
            if found is not None:
                _packs.move_to_end(key)
                return found
        loaded = _load(engine, source, data, currency)
        with _lock:
            _packs[key] = loaded
            while len(_packs) > PACKS_KEPT:
                old, _ = _packs.popitem(last=False)
                _pack_locks.pop(old, None)
        return loaded


def prepare_pack(engine: Engine, source: MonthSource, data: DataDir | None) -> None:
    """Load and keep the run's pack ahead of its first reader (:mod:`tenantcost.service.warm`)."""
    _loaded(engine, source, data)


def _load(
    engine: Engine, source: MonthSource, data: DataDir | None, currency: str | None = None
) -> _Loaded:
    from tenantcost.report.sheet import prepare
    from tenantcost.store.catalog import all_names
    from tenantcost.store.stored_run import load_statement

    if source.status is FigureStatus.DRAFT:  # the run itself, marked as a draft
        loaded = load_statement(engine, source.month, run_id=source.run_id, data=data,
                                currency=currency)  # fmt: skip
    else:  # the revision exactly as issued (a restated one says what changed)
        loaded = load_statement(engine, source.month, revision=source.revision, data=data,
                                currency=currency)  # fmt: skip
    return _Loaded(loaded.pack, prepare(loaded.pack, all_names(engine)))


@functools.cache
def _environment(kind: str) -> Any:
    from tenantcost.report.render import environment

    return environment(kind, None)


def _render(
    engine: Engine,
    source: MonthSource,
    client: str,
    fmt: str,
    data: DataDir | None,
    view: SheetView,
    currency: str | None = None,
) -> bytes:
    """One sheet, through the report pack's sheet builder and templates, titled with the
    client's catalog name."""
    from tenantcost.store.catalog import names_of

    loaded = _loaded(engine, source, data, currency)
    if client not in loaded.pack.clients:  # e.g. a client the restated run no longer has
        raise not_found()
    name = names_of(engine, [client]).get(client, "")
    return render_from(loaded, client, fmt, view, name)


def render_from(
    loaded: _Loaded,
    client: str,
    fmt: str,
    view: SheetView = SheetView.CLIENT,
    name: str = "",
) -> bytes:
    """``client``'s sheet in ``fmt`` from a loaded pack (the background rendering's step),
    in ``view``, titled with the client's catalog ``name`` (when it has one)."""
    from tenantcost.report.render import Reproduce, _render
    from tenantcost.report.sheet import build_sheet

    if fmt == CONFIDENCE:
        return json.dumps(_confidence(loaded.pack, client)).encode("utf-8")
    pack, views = loaded.pack, loaded.views
    sheet = build_sheet(pack, client, _slug(client), views, view, name)
    command = [*pack.command] if pack.command is not None else ["tenantcost", "report"]
    command += ["--client", client] + (["--view", "internal"] if view.internal else [])
    reproduce = Reproduce(views.redaction.reader(client)(shlex.join(command)))
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


SUMMARY_KEY = "\x00finance-summary"
"""The cache's client field for a month's finance summary (no client id holds a NUL)."""


def render_summary(
    engine: Engine,
    source: MonthSource,
    fmt: str,
    data: DataDir | None = None,
    currency: str | None = None,
) -> Response:
    """The month's finance summary (the report pack's, from the same stored pack as the
    sheets), HTML or PDF, as a download; an issued revision's is rendered once and kept; in
    ``currency`` as the run converted it (:func:`sheet_currency`: its cascade, every key's
    column and the conversion's rates), as ``report --from-db --currency`` writes it."""
    shown = sheet_currency(engine, source, currency)
    key = (f"{source.run_id}/{source.revision}/{shown or ''}", SUMMARY_KEY, fmt)
    body = _cached(key) if source.status is not FigureStatus.DRAFT else None
    if body is None:
        body = _render_summary(engine, source, fmt, data, shown)
        if source.status is not FigureStatus.DRAFT:
            _remember(key, body)
    disposition = Disposition.INLINE if fmt == "html" else Disposition.ATTACHMENT
    draft = "-draft" if source.status is FigureStatus.DRAFT else ""
    name = f"{source.month}-finance-summary{draft}{f'-{shown}' if shown else ''}.{fmt}"
    return Response(
        body,
        media_type=MEDIA_TYPES[fmt],
        headers={"Content-Disposition": content_disposition(disposition, name)},
    )


def _render_summary(
    engine: Engine, source: MonthSource, fmt: str, data: DataDir | None, currency: str | None
) -> bytes:
    """The summary through the pack's builder and template; its links go to the service's
    month page and client pages (the pack's index and sheet files are not served)."""
    from tenantcost.report.render import Reproduce, _render
    from tenantcost.report.summary import build_summary
    from tenantcost.service.urls import client_href

    pack = _loaded(engine, source, data, currency).pack
    links = {c: client_href(c, source.month) for c in pack.clients} if fmt == "html" else {}
    summary = build_summary(pack, links)
    command = [*pack.command] if pack.command is not None else ["tenantcost", "report"]
    text = _render(_environment("html"), "finance_summary.html", summary=summary,
                   reproduce=Reproduce(shlex.join(command)),
                   index_href=f"/months/{source.month}", index_label="Month page")  # fmt: skip
    if fmt != "pdf":
        return text.encode("utf-8")
    from tenantcost.report.pdf import write_pdf
    from tenantcost.report.render import load_weasyprint

    with tempfile.TemporaryDirectory(prefix="tenantcost-summary-") as tmp:
        target = Path(tmp) / "summary.pdf"
        write_pdf(load_weasyprint(), text, target)
        return target.read_bytes()


def client_confidence(
    engine: Engine, source: MonthSource, client: str, data: DataDir | None = None
) -> dict[str, Any] | None:
    """The client's confidence level and its graded criteria, as its sheet states them
    (``None`` when the run's figures cannot be loaded, e.g. a run recorded before 0007).
    An issued revision's is kept with its sheets: a statement needs no pack load then."""
    from tenantcost.errors import InputError

    stored = store_key(engine, source)
    if stored is not None:
        body = cached(engine, stored, client, CONFIDENCE)
        if body is not None:
            found: dict[str, Any] | None = json.loads(body)
            return found
    try:
        loaded = _loaded(engine, source, data)
    except InputError:
        return None
    shown = _confidence(loaded.pack, client)
    if stored is not None:
        _keep(engine, stored, client, CONFIDENCE, json.dumps(shown).encode("utf-8"))
    return shown


def _keep(engine: Engine, key: RenderKey, client: str, fmt: str, body: bytes) -> None:
    """Keep a sheet rendered on demand; a store too busy to take it now (SQLite's writer
    lock held past its timeout) costs a render later, never this answer."""
    from sqlalchemy.exc import SQLAlchemyError

    try:
        remember(engine, key, [(client, fmt, body)])
    except SQLAlchemyError:
        log.warning("could not keep the %s sheet of %s run %s", fmt, client, key.run_id)


def _confidence(pack: Any, client: str) -> dict[str, Any] | None:
    import math

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
