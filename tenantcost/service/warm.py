"""What a fresh worker prepares before it answers its first request.

Why: the first read a worker answered paid for what every later one reuses: the store's
client ids compiled for redaction (about a second for 10,000 clients: every account
manager's statement, page and sheet needs it) and the sheet templates. A worker does it in
its startup, before uvicorn gives it a request, so the first read of a month costs what the
others do. The month's pack is not loaded here: issued sheets are read from the store
(:mod:`tenantcost.service.prerender`). A store that cannot be read yet (empty, unreachable)
only makes this a no-op: the requests then answer as they would have.

It also prepares what the first page of a month would compute: the displayed figures of each
month's latest issued revision (:mod:`tenantcost.store.shown`, which rounds every client of
the run: a client page shows its whole history, so it needs each of them), and the latest
month's finance page (cascade, key table, usage totals), whose first read took a second at
10,000 clients. Past :data:`WARM_MONTHS` months, an older month's first read pays its own.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from functools import partial

import jinja2
from sqlalchemy import Engine, func, select

from tenantcost.store.data import Store

log = logging.getLogger("tenantcost.warm")
WARM_MONTHS = 24
"""Months whose issued figures a worker prepares (the latest ones): two years of history."""
PAGES = ("client.html", "clients.html", "months.html", "month.html", "pricing.html",
         "login.html", "error.html")  # fmt: skip


def warm_up(
    engine: Engine, pages: jinja2.Environment | None = None, store: Store | None = None
) -> None:
    """Compile the store's redaction, load the sheet and page templates, and prepare the
    months' displayed figures and the latest month's page (errors are logged)."""
    try:
        from tenantcost.service.redaction import store_redaction
        from tenantcost.service.sheets import _environment, render_version

        store_redaction(engine)
        for kind in ("html", "md"):
            _environment(kind).get_template(f"client_sheet.{kind}")
        render_version()
        if pages is not None:
            for name in PAGES:
                pages.get_template(f"service/{name}")
        _months(engine, store)
    except Exception:  # the first request will do it (or answer the error) instead
        log.exception("warming the worker up failed")


def _months(engine: Engine, store: Store | None) -> None:
    from tenantcost.service.page_views import month_view
    from tenantcost.store.models import MonthEvent, Run, table
    from tenantcost.store.shown import run_shown

    e, r = table(MonthEvent).c, table(Run).c
    issued = (
        select(e.month, e.run_id)
        .where(e.action == "close", e.run_id.is_not(None))
        .order_by(e.month.desc(), e.revision.desc())
    )
    with engine.connect() as connection:
        closes = connection.execute(issued).all()
        latest = connection.execute(select(func.max(r.month))).scalar()
    issued_run: dict[str, str] = {}
    for month, run_id in closes:  # each month's newest revision first: keep that one
        issued_run.setdefault(str(month), str(run_id))
    for month in sorted(issued_run, reverse=True)[:WARM_MONTHS]:
        run_shown(engine, issued_run[month])
    if latest is not None:
        month_view(engine, str(latest), 1, store, 1)


class Preparer:
    """The thread of :func:`prepare_in_background`; :meth:`stop` makes it end after its
    current step and waits for it, so a worker shuts down (and ``serve --demo`` removes its
    store) only once nothing reads the store any more."""

    def __init__(self, engine: Engine, store: Store | None) -> None:
        import threading

        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(engine, store),
                                        name="warm-prepare", daemon=True)  # fmt: skip
        self._thread.start()

    def stop(self, timeout: float = 60.0) -> None:
        self._stopping.set()
        self._thread.join(timeout)

    def _run(self, engine: Engine, store: Store | None) -> None:
        try:
            for step in _steps(engine, store):
                if self._stopping.is_set():
                    return
                step()
        except Exception:  # no catalog, a store not readable yet: the first reader answers it
            log.info("the latest month was not prepared", exc_info=True)


def _steps(engine: Engine, store: Store | None) -> Iterator[Callable[[], object]]:
    """For product (issued) and finance (a draft): the latest month's pack (a statement's
    confidence needs it), then the pricing page's document and its margins across months."""
    import pandas as pd

    from tenantcost.economics import GroupBy
    from tenantcost.service.figures import month_source, months_document
    from tenantcost.service.permissions import Principal, Role
    from tenantcost.service.plan_margins import DEFAULT_MONTHS, plan_margins
    from tenantcost.service.pricing import priced_month
    from tenantcost.service.sheets import prepare_pack

    data = None if store is None else store.data
    for role in (Role.PRODUCT, Role.FINANCE):
        who = Principal("warm-up", role)
        months = months_document(engine, who)
        if not months:
            continue
        month = str(months[-1]["month"])
        source = month_source(engine, who, month)
        if source is not None:
            yield partial(prepare_pack, engine, source, data)
        now = pd.Timestamp.now(tz="UTC")
        yield partial(priced_month, engine, store, who, month, GroupBy.PLAN, now)
        yield partial(plan_margins, engine, store, who, month, DEFAULT_MONTHS, GroupBy.PLAN)


def prepare_in_background(engine: Engine, store: Store | None) -> Preparer:
    """Compute, in a thread once the worker serves, what the first reads of the latest
    month would compute, as product (issued) and finance (a draft) see it: the month's pack
    (a statement's confidence grade, 2.8 s at 10,000 clients when its sheets are not
    rendered yet), the pricing page's document and its margins across months (about a
    second per month, so 12 months' margins took the first pricing read 15 s). A reader
    arriving meanwhile waits for the same computation (:func:`tenantcost.service.memo.
    remembered`, and the pack's own lock) instead of repeating it."""
    return Preparer(engine, store)


__all__ = ["Preparer", "prepare_in_background", "warm_up"]
