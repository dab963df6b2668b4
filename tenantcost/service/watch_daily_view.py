"""The watch's daily cost per source, each anomaly marked and linking to its day.

A finance lead who sees "spike, import-worker, 2026-12-09" in the anomaly table wants the
days around it: was it one day, a step, or a slow climb? So the watch section of both pages
draws the month's days stacked by source (:mod:`tenantcost.report.daily_chart`), with each
flagged day marked by a shape and a label, and a table of the same figures beside it with a
link to its CSV. **Its day** is that table's row, anchor ``#watch-day-YYYY-MM-DD`` on the
same page: the chart's marks and the anomaly table's days link there, and the row shows the
day's figures per source and its anomalies.

The figures are the latest watch run's own sums (:mod:`tenantcost.store.watch_daily`), read,
never computed in a request:

* the client page reads the client's row only; its anomalies are its entry's, source names
  through the same redaction as the rest of its watch (:func:`tenantcost.service.figures.
  reader_text`), so an account manager sees nothing of another client;
* the month page (finance, product, admin) reads the run's total row: every client summed,
  with how many anomalies fall on each day and source (one row at 10,000 clients).

The API routes ``GET /api/v1/clients/{id}/months/{M}/watch/daily`` and
``GET /api/v1/months/{M}/watch/daily`` answer the same rows (``?format=csv``: the CSV).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pandas as pd
from markupsafe import Markup
from sqlalchemy import Engine

from tenantcost.money import MINOR_UNIT_EXPONENT
from tenantcost.report.daily_chart import DayColumn, DayMark, daily_chart
from tenantcost.report.display import auto_places, format_amount
from tenantcost.service.figures import reader_text
from tenantcost.service.permissions import Principal
from tenantcost.service.urls import api_client_path, encode_segment
from tenantcost.store.watch_daily import ALL_CLIENTS, read_daily
from tenantcost.store.watch_snapshots import client_entry, latest_snapshot

LABEL = "month to date, not issued"


def day_anchor(day: str) -> str:
    """The id of a day's row in the daily table: what "its day" links to."""
    return f"watch-day-{day}"


@dataclass(frozen=True)
class Daily:
    """A run's daily figures for one client or all, as the API answers them."""

    month: str
    as_of: str
    money: dict[str, Any]
    client: str | None
    frame: pd.DataFrame
    """``day``, ``source``, ``amount`` (int64 micro-units), ``anomalies`` (int64), by day
    then source."""

    def document(self) -> dict[str, Any]:
        days = [
            {"day": str(d), "source": str(s), "amount": int(a), "anomalies": int(n)}
            for d, s, a, n in self.frame.itertuples(index=False)
        ]  # the JSON itself: one item per day and source (31 x a few)
        head: dict[str, Any] = {"month": self.month, "label": LABEL, "as_of": self.as_of,
                                "money": self.money}  # fmt: skip
        if self.client is not None:
            head["client"] = self.client
        return head | {"days": days}


def _frame(amounts: pd.DataFrame, flagged: pd.DataFrame) -> pd.DataFrame:
    both = amounts.merge(flagged, on=["day", "source"], how="outer")
    both["amount"] = both["amount"].fillna(0).astype("int64")
    both["anomalies"] = both["count"].fillna(0).astype("int64")
    both = both.sort_values(["day", "source"], kind="stable").reset_index(drop=True)
    return both[["day", "source", "amount", "anomalies"]]


def client_daily(engine: Engine, principal: Principal, client: str, month: str) -> Daily | None:
    """``client``'s daily figures of the month's latest watch run (None: no run, the client
    is not in it, or the run kept no daily figures)."""
    snapshot = latest_snapshot(engine, month)
    if snapshot is None:
        return None
    entry = client_entry(engine, snapshot.id, client)
    figures = read_daily(engine, snapshot.id, client) if entry is not None else None
    if entry is None or figures is None:
        return None
    redact = reader_text(engine, principal, client)
    flagged = pd.DataFrame(entry.get("anomalies", []), columns=["day", "source"]).astype("str")
    counts = flagged.groupby(["day", "source"], as_index=False).size()
    frame = _frame(figures.amounts, counts.rename(columns={"size": "count"}))
    names = {s: redact(s) for s in frame["source"].unique()}  # a handful of sources
    frame["source"] = frame["source"].map(names).astype("str")
    frame = frame.groupby(["day", "source"], as_index=False, sort=True).sum()
    return Daily(month, str(snapshot.document.get("as_of", "")), _money(snapshot.currency),
                 client, frame)  # fmt: skip


def month_daily(engine: Engine, month: str) -> Daily | None:
    """Every client's daily figures summed, of the month's latest watch run."""
    snapshot = latest_snapshot(engine, month)
    figures = None if snapshot is None else read_daily(engine, snapshot.id, ALL_CLIENTS)
    if snapshot is None or figures is None:
        return None
    return Daily(month, str(snapshot.document.get("as_of", "")), _money(snapshot.currency),
                 None, _frame(figures.amounts, figures.anomalies))  # fmt: skip


def _money(currency: str) -> dict[str, Any]:
    return {"currency": currency, "minor_unit_exponent": MINOR_UNIT_EXPONENT}


@dataclass(frozen=True)
class DailyRow:
    day: str
    anchor: str
    total: str
    cells: list[str]
    marks: str
    """The day's anomalies in words (empty: none)."""


@dataclass(frozen=True)
class DailyView:
    """The watch section's "Daily cost per source" part."""

    svg: Markup
    sources: list[str]
    rows: list[DailyRow]
    currency: str
    csv_href: str
    marked: int
    """Days marked on the chart."""


def _marks_text(frame: pd.DataFrame, kinds: dict[tuple[str, str], str]) -> pd.Series:
    """Per day: its anomalies in words, e.g. ``spike in import-worker`` (a client's, kind
    known) or ``3 anomalies: search-api (2), web`` (the month's counts)."""
    flagged = frame[frame["anomalies"] > 0]
    out: dict[str, str] = {}
    for day, group in flagged.groupby("day", sort=True):  # flagged days: a few
        parts, known = [], True
        for source, n in zip(group["source"], group["anomalies"], strict=True):
            kind = kinds.get((str(day), str(source)))
            known = known and kind is not None and n == 1
            parts.append(f"{kind} in {source}" if kind and n == 1 else
                         source if n == 1 else f"{source} ({n})")  # fmt: skip
        total = int(group["anomalies"].sum())
        head = "" if total == 1 and known else f"{total} anomal{'y' if total == 1 else 'ies'}: "
        out[str(day)] = head + ", ".join(parts)
    return pd.Series(out, dtype="object")


def _shape(kinds: set[str]) -> str:
    return next(iter(kinds)) if len(kinds) == 1 else "both"


def daily_view(
    daily: Daily,
    csv_href: str,
    who: str,
    kinds: dict[tuple[str, str], str] | None = None,
) -> DailyView | None:
    """The chart and table of ``daily``; ``kinds``: the kind of each (day, source) anomaly
    where known (a client's own), else the marks count anomalies."""
    frame = daily.frame
    if frame.empty:
        return None
    kinds = kinds or {}
    currency = str(daily.money.get("currency", ""))
    sources = sorted(frame["source"].unique().tolist())
    wide = frame.pivot_table(index="day", columns="source", values="amount", aggfunc="sum",
                             fill_value=0).reindex(columns=sources, fill_value=0)  # fmt: skip
    totals = wide.sum(axis=1)
    places = auto_places(currency, [int(v) for v in wide.to_numpy().ravel() if v])
    marks_text = _marks_text(frame, kinds)
    unit = 10**MINOR_UNIT_EXPONENT
    rows, columns, marks = [], [], []
    for day, values in wide.iterrows():  # the month's days: at most 31
        d = str(day)
        cells = [format_amount(int(v), places) for v in values]
        total = format_amount(int(totals[day]), places)
        text = str(marks_text.get(d, ""))
        rows.append(DailyRow(d, day_anchor(d), total, cells, text))
        columns.append(DayColumn(d, {s: int(v) / unit for s, v in values.items()},
                                 f"{d}: {total} {currency}"))  # fmt: skip
        if text:
            day_kinds = {k for (dd, _), k in kinds.items() if dd == d}
            n = int(frame.loc[frame["day"] == d, "anomalies"].sum())
            shape = _shape(day_kinds) if day_kinds else "both"
            label = (
                _shape(day_kinds)
                if n == 1 and day_kinds
                else (f"{n} anomal{'y' if n == 1 else 'ies'}")
            )
            marks.append(DayMark(d, shape, label, f"{d}: {text} (see the day)",
                                 f"#{day_anchor(d)}"))  # fmt: skip
    desc = (f"Daily cost per source, {currency}, {len(rows)} days; "
            + (f"{len(marks)} days with anomalies: " + "; ".join(m.title for m in marks)
               if marks else "no anomaly"))  # fmt: skip
    svg = daily_chart("watch-daily-chart", f"{who}: daily cost per source, {daily.month}",
                      desc, currency, columns, sources, marks)  # fmt: skip
    return DailyView(Markup(svg), sources, rows, currency, csv_href, len(marks))


def client_daily_section(
    engine: Engine, principal: Principal, client: str, month: str, anomalies: list[dict[str, Any]]
) -> DailyView | None:
    """The client page's daily part (``anomalies``: its watch document's, redacted)."""
    daily = client_daily(engine, principal, client, month)
    if daily is None:
        return None
    kinds = {(str(a.get("day")), str(a.get("source"))): str(a.get("kind")) for a in anomalies}
    href = api_client_path(client, "months", month, "watch", "daily") + "?format=csv"
    return daily_view(daily, href, client, kinds)


def month_daily_section(engine: Engine, month: str) -> DailyView | None:
    """The month page's daily part: every client summed."""
    daily = month_daily(engine, month)
    if daily is None:
        return None
    href = f"/api/v1/months/{encode_segment(month)}/watch/daily?format=csv"
    return daily_view(daily, href, "All clients")


__all__ = ["Daily", "DailyView", "client_daily", "client_daily_section", "day_anchor",
           "month_daily", "month_daily_section"]  # fmt: skip
