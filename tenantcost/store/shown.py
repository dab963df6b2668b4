"""A stored run's figures as every page shows them: the one rounding, read from the store.

The service's pages (the client page, its history, the search, the month page's clients under
each key) show a client's amount; the run's sheets, pack index and finance summary show it
too. They agree only if they round the same way, so the pages round the run's stored figures
with :mod:`tenantcost.report.rounding`, the hierarchy the sheets use: the stored cascade to
the reference total, every client's total to the cascade's ``clients`` line, each
alternative key's column within itself. That needs every client of the run, not only the
ones a page lists, so it is computed once per run (one query per table, vectorised) and kept:
a run's stored figures never change once written (``run`` writes its clients, a ``close``
adds the key figures of the run it issues), so the displayed figures of an issued revision
are frozen with it. A run cached before its close added the key figures is computed again
once they are there. The decimals are the run's display rule's
(:func:`tenantcost.store.display.run_places`): frozen by the close that issued it.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from threading import Lock

import pandas as pd
from sqlalchemy import Connection, Engine, func, select

from tenantcost.kinds import CascadeKind
from tenantcost.report.rounding import half_even, key_columns, largest_remainder
from tenantcost.store.connection import result_frame
from tenantcost.store.display import run_places
from tenantcost.store.models import RunClient, RunClientFigure, RunFigure, table

KEY_FIGURE = "key:"
RULE = "rule"
CACHED_RUNS = 64
"""Runs kept per process: a month page and the history of a client read a handful."""


@dataclass(frozen=True)
class RunShown:
    """A run's displayed figures, in units of ``10**-places``."""

    run_id: str
    places: int
    cascade: list[int]
    """One per stored cascade line, in the cascade's order."""
    reference: int
    clients: pd.DataFrame
    """Index: client id; columns: ``rule`` then the stored alternative keys (sorted)."""
    keyed: bool = False
    """Whether the run's key figures were stored (a close adds them, once): if so, nothing
    about the run changes any more."""
    rule: dict[str, int] = field(init=False, repr=False, compare=False)
    """The ``rule`` column as a dict: a page looks up a few clients, a frame's ``.at`` costs
    microseconds each."""

    def __post_init__(self) -> None:
        rule = self.clients[RULE] if RULE in self.clients.columns else pd.Series(dtype="int64")
        ids, amounts = rule.index.astype(str).tolist(), rule.astype("int64").tolist()
        object.__setattr__(self, "rule", dict(zip(ids, amounts, strict=True)))

    def amount(self, client: str, key: str = RULE) -> int | None:
        """The client's displayed figure under ``key``; ``None``: not a client of the run."""
        if key == RULE:
            return self.rule.get(client)
        if client not in self.clients.index or key not in self.clients.columns:
            return None
        return int(self.clients.at[client, key])

    def totals(self) -> dict[str, int]:
        """Each key's displayed total: the sum of its displayed clients."""
        return {str(k): int(v) for k, v in self.clients.sum().items()}


_cache: OrderedDict[tuple[str, str], RunShown] = OrderedDict()
_lock = Lock()


def _key_rows(connection: Connection, run_id: str) -> int:
    k = table(RunClientFigure).c
    query = select(func.count()).where(k.run_id == run_id, k.figure.like(f"{KEY_FIGURE}%"))
    return int(connection.execute(query).scalar() or 0)


def _amounts(connection: Connection, run_id: str, keyed: bool) -> pd.DataFrame:
    """Client x key exact amounts: the stored key figures, else the run's client totals."""
    rc, k = table(RunClient).c, table(RunClientFigure).c
    rule = result_frame(
        connection.execute(select(rc.client, rc.amount).where(rc.run_id == run_id)),
        ["client", RULE],
    ).set_index("client")
    if not keyed:
        return rule.astype("int64")
    rows = result_frame(
        connection.execute(
            select(k.client, k.figure, k.amount).where(
                k.run_id == run_id, k.figure.like(f"{KEY_FIGURE}%")
            )
        ),
        ["client", "figure", "amount"],
    )
    wide = rows.assign(key=rows["figure"].str.removeprefix(KEY_FIGURE)).pivot_table(
        index="client", columns="key", values="amount", aggfunc="sum"
    )
    others = sorted(str(c) for c in wide.columns if c != RULE)
    return rule.join(wide[others], how="left").fillna(0).astype("int64")


def _compute(connection: Connection, run_id: str, keyed: bool) -> RunShown:
    f = table(RunFigure).c
    cascade = connection.execute(
        select(f.kind, f.amount)
        .where(f.run_id == run_id, f.section == "cascade")
        .order_by(f.position)
    ).all()
    amounts = _amounts(connection, run_id, keyed)
    places = run_places(connection, run_id)  # frozen by the close, else the current rule
    units = largest_remainder([int(a) for _, a in cascade], places)
    kinds = [str(kind) for kind, _ in cascade]
    clients_line = (
        int(units[kinds.index(CascadeKind.CLIENTS.value)])
        if CascadeKind.CLIENTS.value in kinds
        else None
    )
    own = half_even(int(amounts[RULE].sum()), places)
    try:  # the clients line is the rule column's exact total, rounded within the cascade
        columns = key_columns(amounts, places, own if clients_line is None else clients_line)
    except ValueError:  # a run whose clients differ from its cascade: never a page error
        columns = key_columns(amounts, places, own)
    return RunShown(run_id, places, [int(u) for u in units], int(units.sum()), columns, keyed)


def compute_shown(connection: Connection, run_id: str) -> RunShown:
    """The run's displayed figures, computed now on ``connection`` (not cached)."""
    return _compute(connection, run_id, _key_rows(connection, run_id) > 0)


def run_shown(engine: Engine, run_id: str) -> RunShown:
    """The run's displayed figures, computed once per run and cached; a run without key
    figures yet is looked at again (one count) in case a close added them since."""
    key = (str(engine.url), run_id)
    with _lock:
        found = _cache.get(key)
        if found is not None:
            _cache.move_to_end(key)
    if found is not None and found.keyed:
        return found
    with engine.connect() as connection:
        keyed = _key_rows(connection, run_id) > 0
        if found is not None and not keyed:
            return found
        shown = _compute(connection, run_id, keyed)
    with _lock:
        _cache[key] = shown
        while len(_cache) > CACHED_RUNS:
            _cache.popitem(last=False)
    return shown
