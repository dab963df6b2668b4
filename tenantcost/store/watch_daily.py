"""A watch run's daily cost per source, kept with the run so a page can draw it.

``tenantcost watch`` sums its allocation per client, source and UTC day to score anomalies
(the daily figures of :mod:`tenantcost.watch`); a page never allocates, so each run records
those sums of the watched month here, beside its snapshot, in the same transaction:

* one ``watch_daily`` row per client of the run, ``figures`` = ``{"amounts": [[day, source,
  amount], ...]}`` (days ``YYYY-MM-DD``, amounts int micro-units, non-zero only, by day then
  source): the client page reads its own client's row and nothing else (the privacy rule of
  :mod:`tenantcost.service.permissions`);
* one row with an empty ``client`` (:data:`ALL_CLIENTS`, no client id is empty): the same
  summed over every client, plus ``"anomalies": [[day, source, count], ...]``, how many of
  the run's anomalies fall on each day and source. The month page reads this one row, so it
  stays one small read at 10,000 clients.

Why JSON per client rather than a row per client, source and day: 10,000 clients x 30 days x
a few sources is over a million rows per run, and ``watch`` runs hourly; a page only ever
reads one client's month (or the total) whole. The JSON is built with vectorised string
operations (no Python loop per row or client). The current partial day is kept (it is part
of the month to date); days before the month (the anomaly baseline) are not.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pandas as pd
from sqlalchemy import Connection, Engine, insert, select

from tenantcost.store.connection import connected
from tenantcost.store.models import WatchDaily, table

ALL_CLIENTS = ""
"""The ``client`` of the row summed over every client of a run."""
COLUMNS = ("day", "source", "amount")


@dataclass(frozen=True)
class DailyFigures:
    """One row of ``watch_daily`` read back."""

    amounts: pd.DataFrame
    """``day`` (str ``YYYY-MM-DD``), ``source`` (str), ``amount`` (int64 micro-units)."""
    anomalies: pd.DataFrame
    """``day``, ``source``, ``count`` (int64): anomalies per day and source (the total row
    only; empty for a client's row, whose anomalies are in its entry)."""


def _items(frame: pd.DataFrame, value: str) -> pd.Series:
    """Each row as a JSON array ``["day","source",value]`` (sources through ``json.dumps``
    once per distinct source: a handful)."""
    sources = frame["source"].astype("str")
    quoted = sources.map({s: json.dumps(s, ensure_ascii=False) for s in sources.unique()})
    return (
        '["' + frame["day"] + '",' + quoted + "," + frame[value].astype("int64").astype("str") + "]"
    )


def daily_rows(
    snapshot_id: int, daily: pd.DataFrame, month: str, anomalies: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """The ``watch_daily`` rows of a run from the watch's daily figures (``client``,
    ``source``, ``day`` as UTC midnight, ``amount``): the month's days only."""
    days = pd.to_datetime(daily["day"], utc=True)
    kept = daily.loc[(days.dt.strftime("%Y-%m") == month).to_numpy()]
    kept = kept.loc[kept["amount"].to_numpy() != 0]
    frame = pd.DataFrame({
        "client": kept["client"].astype("str").to_numpy(),
        "source": kept["source"].astype("str").to_numpy(),
        "day": pd.to_datetime(kept["day"], utc=True).dt.strftime("%Y-%m-%d").to_numpy(),
        "amount": kept["amount"].astype("int64").to_numpy(),
    })  # fmt: skip
    frame = frame.groupby(["client", "day", "source"], as_index=False, sort=True)["amount"].sum()
    rows: list[dict[str, Any]] = []
    if not frame.empty:
        frame["item"] = _items(frame, "amount")
        joined = frame.groupby("client", sort=True)["item"].agg(",".join)
        figures = '{"amounts":[' + joined + "]}"
        rows = pd.DataFrame({"snapshot_id": snapshot_id, "client": joined.index.astype("str"),
                             "figures": figures.to_numpy()}).to_dict("records")  # fmt: skip
    total = frame.groupby(["day", "source"], as_index=False, sort=True)["amount"].sum()
    flagged = pd.DataFrame(anomalies, columns=["day", "source"]).astype("str")
    counts = flagged.groupby(["day", "source"], as_index=False, sort=True).size()
    counts = counts.rename(columns={"size": "count"})
    parts = {"amounts": total, "anomalies": counts}
    text = ",".join(
        f'"{name}":[' + (",".join(_items(f, "amount" if name == "amounts" else "count"))
                         if not f.empty else "") + "]"
        for name, f in parts.items()
    )  # fmt: skip
    rows.append({"snapshot_id": snapshot_id, "client": ALL_CLIENTS, "figures": "{" + text + "}"})
    return rows


def insert_daily(
    connection: Connection,
    snapshot_id: int,
    daily: pd.DataFrame,
    month: str,
    anomalies: list[dict[str, Any]],
) -> None:
    """Record a run's daily figures (inside the run's own transaction)."""
    connection.execute(insert(table(WatchDaily)), daily_rows(snapshot_id, daily, month, anomalies))


def _frame(items: list[list[Any]], value: str) -> pd.DataFrame:
    frame = pd.DataFrame(items, columns=["day", "source", value])
    return frame.astype({"day": "str", "source": "str", value: "int64"})


def read_daily(
    bind: Connection | Engine, snapshot_id: int, client: str = ALL_CLIENTS
) -> DailyFigures | None:
    """A run's daily figures of ``client`` (default: summed over every client); None when
    the run kept none for it (a run recorded before 0026, a client without a line)."""
    t = table(WatchDaily)
    query = select(t.c.figures).where(t.c.snapshot_id == snapshot_id, t.c.client == client)
    with connected(bind) as connection:
        text = connection.execute(query).scalar_one_or_none()
    if text is None:
        return None
    data = json.loads(text)
    return DailyFigures(
        _frame(data.get("amounts", []), "amount"), _frame(data.get("anomalies", []), "count")
    )


__all__ = ["ALL_CLIENTS", "DailyFigures", "daily_rows", "insert_daily", "read_daily"]
