"""The outputs of ``unit-economics``: JSON document, terminal tables, CSV frames.

The JSON document states its money exactly as ``allocate --format json`` does (the same
``money`` object; every amount an integer of micro-units) and follows the contract of issue
11: ``money``, ``month``, ``plans[{plan, clients, cost, all_in_cost, cost_per_client{mean,
p50, p90, max}, revenue, margin, margin_pct, price_floor{per_client, per_1000_requests}}]``,
``clients[{client, plan, cost, all_in_cost, revenue, margin, margin_pct}]``,
``concentration{top_1pct, top_10pct, gini}``, ``not_in_catalog[]``; further fields add
detail and never rename these. With ``--by segment`` the group list is ``segments`` and each
group's name is in ``segment``.

The HTML page, and the ``--format`` and ``--out`` choices that include it, are the report
layer's (:mod:`tenantcost.report.economics_page`): writers never import the report.

Documents are built column-wise (``to_dict("records")`` of prepared frames, nested lists cut
at sorted group boundaries), never by a Python loop over clients.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from tenantcost import __version__
from tenantcost.csv_cells import neutralised
from tenantcost.economics import REQUESTS, Economics, Projection
from tenantcost.errors import warn
from tenantcost.money import micros_to_decimal_strings
from tenantcost.timefmt import iso_z
from tenantcost.writers.json_output import money_header
from tenantcost.writers.text import money, render_table

NO_GROUP = "(none)"
"""How a catalog client without a plan (segment) is shown in tables; null in JSON."""
STATS = ("mean", "p50", "p90", "max")


# --------------------------------------------------------------------------- values


def _ints(values: pd.Series | np.ndarray, present: Any = None) -> pd.Series:
    """Integers for JSON (None where ``present`` is False or the value is missing)."""
    series = pd.Series(np.asarray(values, dtype=object))
    keep = series.notna().to_numpy().copy()
    if present is not None:
        keep &= np.asarray(present, dtype=bool)
    out = [int(v) if k else None for v, k in zip(series.tolist(), keep.tolist(), strict=True)]
    return pd.Series(out, dtype=object)  # object: a frame of these keeps ints and None


def _floats(values: pd.Series | np.ndarray) -> pd.Series:
    floats = np.asarray(values, dtype="float64").tolist()
    return pd.Series([None if v != v else float(v) for v in floats], dtype=object)


def _records(columns: dict[str, Any]) -> list[dict[str, Any]]:
    """Records from aligned columns (positions, not index labels; object dtype keeps Python
    ints, bools and None as they are)."""
    frame = pd.DataFrame({k: np.asarray(v, dtype=object) for k, v in columns.items()})
    return frame.to_dict("records")


def _group_name(values: pd.Series) -> list[str | None]:
    return [v if v else None for v in values.astype(str).tolist()]


def _cut(records: list[dict[str, Any]], keys: np.ndarray) -> dict[str, list[dict[str, Any]]]:
    """Records (sorted by ``keys``) cut into one list per key."""
    if len(keys) == 0:
        return {}
    starts = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]])
    ends = np.r_[starts[1:], len(keys)]
    return {str(keys[a]): records[a:b] for a, b in zip(starts, ends, strict=True)}


# --------------------------------------------------------------------------- JSON


def _unit_cost_records(unit_costs: pd.DataFrame, scope: str) -> dict[str, list[dict[str, Any]]]:
    """Unit-cost documents per group (``scope="group"``) or per client."""
    frame = unit_costs.loc[unit_costs["scope"] == scope]
    owner = "group" if scope == "group" else "client"
    frame = frame.sort_values([owner, "kind", "source", "key"], kind="mergesort")
    table = _records(
        {
            "source": frame["source"].astype(object),
            "kind": frame["kind"].astype(object),
            "key": frame["key"].astype(object),
            "measure": _floats(frame["measure"].round(6)),
            "amount": _ints(frame["amount"]),
            "unit_cost": _ints(frame["unit_cost"]),
            "per": frame["basis"].astype(object),
        }
    )
    return _cut(table, frame[owner].astype(str).to_numpy())


def _group_documents(economics: Economics) -> list[dict[str, Any]]:
    groups = economics.groups
    by = str(economics.policy.by)
    units = _unit_cost_records(economics.unit_costs, "group")
    stats = {name: _ints(groups[name]) for name in STATS}
    all_in = {name: _ints(groups[f"all_in_{name}"]) for name in STATS}
    columns = {
        by: _group_name(groups["group"]),
        "clients": _ints(groups["clients"]),
        "catalog_clients": _ints(groups["catalog_clients"]),
        "clients_without_revenue": _ints(groups["clients_without_revenue"]),
        "cost": _ints(groups["cost"]),
        "all_in_cost": _ints(groups["all_in_cost"]),
        "revenue": _ints(groups["revenue"], groups["has_revenue"]),
        "margin": _ints(groups["margin"], groups["has_revenue"]),
        "margin_pct": _floats(groups["margin_pct"].where(groups["has_revenue"])),
        "requests": _floats(groups[REQUESTS]),
        "per_client": _ints(groups["price_per_client"]),
        "per_1000_requests": _ints(groups["price_per_1000_requests"]),
    }
    docs = _records(columns)
    for i, doc in enumerate(docs):  # one per plan: a handful of groups, not clients
        doc["cost_per_client"] = {name: stats[name][i] for name in STATS}
        doc["all_in_cost_per_client"] = {name: all_in[name][i] for name in STATS}
        doc["price_floor"] = {
            "per_client": doc.pop("per_client"),
            "per_1000_requests": doc.pop("per_1000_requests"),
            "target_margin": float(economics.policy.target_margin),
        }
        doc["unit_costs"] = units.get(str(groups["group"].iloc[i]), [])
    return docs


def _client_documents(economics: Economics) -> list[dict[str, Any]]:
    clients = economics.clients.sort_values("client", kind="mergesort")
    units = _unit_cost_records(economics.unit_costs, "client")
    has = clients["has_revenue"]
    records = _records(
        {
            "client": clients["client"].astype(object),
            "name": clients["name"].astype(object),
            "plan": _group_name(clients["plan"]),
            "segment": _group_name(clients["segment"]),
            "account_manager": clients["account_manager"].astype(object),
            "in_catalog": clients["in_catalog"].astype(bool).to_numpy(),
            "cost": _ints(clients["cost"]),
            "residual_share": _ints(clients["residual_share"]),
            "all_in_cost": _ints(clients["all_in_cost"]),
            "revenue": _ints(clients["revenue"], has),
            "margin": _ints(clients["margin"], has),
            "margin_pct": _floats(clients["margin_pct"].where(has)),
            "under_margin_floor": clients["under_margin_floor"].astype(bool).to_numpy(),
            "requests": _floats(clients[REQUESTS]),
            "revenue_currency": _revenue_currency(clients, economics.costs.currency),
            "own_revenue": _ints(clients["own_revenue"], has),
        }
    )
    by_client = _cut(records, clients["client"].astype(str).to_numpy())
    for client, docs in by_client.items():  # attach each client's unit costs (dict lookups)
        docs[0]["unit_costs"] = units.get(client, [])
    # each client in its own currency too
    own = (
        _own_documents(clients, economics.costs.currency)
        if "own_cost" in clients
        else [None] * len(records)
    )
    for record, extra in zip(records, own, strict=True):
        record["own"] = extra
    return records


def _own_documents(clients: pd.DataFrame, currency: str) -> list[dict[str, Any] | None]:
    """Each client's ``own`` object: its figures in its own currency (``None`` when that is
    the document's, or a stored run holds no conversion into it):
    ``{currency, cost, all_in_cost, revenue, margin, margin_pct}``."""
    codes = _revenue_currency(clients, currency)
    has = clients["has_revenue"]
    values = {
        "cost": _ints(clients["own_cost"]),
        "all_in_cost": _ints(clients["own_all_in_cost"]),
        "revenue": _ints(clients["own_revenue"], has),
        "margin": _ints(clients["own_margin"], has),
        "margin_pct": _floats(clients["own_margin_pct"].where(has)),
    }
    missing = clients["own_cost"].isna().tolist()  # a currency the stored run lacks
    out: list[dict[str, Any] | None] = []
    for i, code in enumerate(codes.tolist()):  # one small dict per client: the JSON's shape
        out.append(None if code == currency or missing[i] else
                   {"currency": code, **{k: v[i] for k, v in values.items()}})  # fmt: skip
    return out


def _totals(economics: Economics) -> dict[str, Any]:
    clients = economics.clients
    has = bool(clients["has_revenue"].any())
    revenue = int(clients["revenue"].sum())
    all_in = int(clients["all_in_cost"].sum())
    return {
        "clients": int((clients["cost"] > 0).sum()),
        "cost": int(clients["cost"].sum()),
        "all_in_cost": all_in,
        "revenue": revenue if has else None,
        "margin": revenue - all_in if has else None,
        "margin_pct": round((revenue - all_in) / revenue, 9) if has and revenue else None,
    }


def _projection_document(projection: Projection | None, by: str) -> dict[str, Any] | None:
    if projection is None:
        return None

    def rows(frame: pd.DataFrame, name: str, column: str) -> list[dict[str, Any]]:
        has = frame["has_revenue"].astype(bool)
        names = _group_name(frame[column]) if column == "group" else frame[column].tolist()
        return _records(
            {
                name: names,
                "cost": _ints(frame["cost"]),
                "all_in_cost": _ints(frame["all_in_cost"]),
                "revenue": _ints(frame["revenue"], has),
                "margin": _ints(frame["margin"], has),
                "margin_pct": _floats(frame["margin_pct"].where(has)),
            }
        )

    return {
        "as_of": iso_z(projection.as_of),
        "method": projection.method,
        "hours_covered": projection.hours_covered,
        "hours_in_month": projection.hours_in_month,
        f"{by}s": rows(projection.groups, by, "group"),
        "clients": rows(projection.clients.sort_values("client"), "client", "client"),
    }


def document(economics: Economics) -> dict[str, Any]:
    """The JSON document (module doc)."""
    costs, policy = economics.costs, economics.policy
    by = str(policy.by)
    clients = economics.clients
    missing = clients.loc[~clients["in_catalog"]].sort_values("client")
    return {
        "tenantcost_version": __version__,
        "currency": costs.currency,
        "money": money_header(costs.currency),
        "month": f"{costs.month.start:%Y-%m}",
        "period": {"start": iso_z(costs.month.start), "end": iso_z(costs.month.end)},
        "hours_covered": costs.hours_covered,
        "by": by,
        "pricing": {
            "residual": str(policy.residual),
            "margin_floor": float(policy.margin_floor) if policy.margin_floor is not None else None,
            "target_margin": float(policy.target_margin),
        },
        "residual": {
            "amount": costs.residual,
            "distributed": economics.distributed,
            "undistributed": economics.undistributed,
        },
        "totals": _totals(economics),
        f"{by}s": _group_documents(economics),
        "clients": _client_documents(economics),
        "concentration": economics.concentration,
        "not_in_catalog": _records(
            {
                "client": missing["client"].astype(object),
                "cost": _ints(missing["cost"]),
                "all_in_cost": _ints(missing["all_in_cost"]),
            }
        ),
        "under_margin_floor": sorted(clients.loc[clients["under_margin_floor"], "client"].tolist()),
        "projection": _projection_document(economics.projection, by),
    }


# --------------------------------------------------------------------------- text


def _shown(groups: pd.Series) -> list[str]:
    """Group names for tables (:data:`NO_GROUP` for catalog clients without one)."""
    return groups.astype(str).replace("", NO_GROUP).tolist()


def _money_or_dash(values: pd.Series, present: Any = None) -> list[str]:
    return ["-" if v is None else money(v) for v in _ints(values, present)]


def _pct(values: pd.Series) -> list[str]:
    return ["-" if v is None else f"{100 * v:.1f} %" for v in _floats(values)]


def _groups_table(economics: Economics) -> str:
    g = economics.groups
    has = g["has_revenue"]
    columns = [
        _shown(g["group"]),
        [str(v) for v in g["clients"].tolist()],
        _money_or_dash(g["cost"]),
        _money_or_dash(g["all_in_cost"]),
        _money_or_dash(g["mean"]),
        _money_or_dash(g["p50"]),
        _money_or_dash(g["p90"]),
        _money_or_dash(g["max"]),
        _money_or_dash(g["revenue"], has),
        _money_or_dash(g["margin"], has),
        _pct(g["margin_pct"].where(has)),
    ]
    headers = [str(economics.policy.by), "clients", "cost", "all-in cost", "mean", "p50", "p90",
               "max", "revenue", "margin", "margin %"]  # fmt: skip
    return render_table(headers, list(zip(*columns, strict=True)), set(range(1, 11)))


def _floors_table(economics: Economics) -> str:
    g = economics.groups
    target = float(economics.policy.target_margin)
    rows = list(
        zip(
            _shown(g["group"]),
            _money_or_dash(g["all_in_mean"]),
            _money_or_dash(g["price_per_client"]),
            _money_or_dash(g["price_per_1000_requests"]),
            strict=True,
        )
    )
    headers = [
        str(economics.policy.by),
        "all-in cost per client",
        f"price floor per client ({100 * target:g} % margin)",
        "per 1,000 requests",
    ]
    return render_table(headers, rows, {1, 2, 3})


def _clients_table(economics: Economics) -> str:
    c = economics.clients
    has = c["has_revenue"]
    flags = np.where(~c["in_catalog"], "not in catalog", np.where(c["under_margin_floor"],
                     "under margin floor", ""))  # fmt: skip
    own = pd.Series(_revenue_currency(c, economics.costs.currency), index=c.index)
    other = (own != economics.costs.currency) & has
    if other.any():  # revenue in the client's own currency, converted at the month's rate
        said = "revenue " + pd.Series(_money_or_dash(c["own_revenue"]), index=c.index) + " " + own
        if "own_margin" in c:  # the client in its own currency: its margin there too
            margin = pd.Series(_money_or_dash(c["own_margin"], has), index=c.index)
            pct = pd.Series(_pct(c["own_margin_pct"].where(has)), index=c.index)
            said = said + ", margin " + margin + " " + own + " (" + pct + ")"
        flags = np.where(other, np.where(flags == "", said, flags + "; " + said), flags)
    columns = [
        c["client"].astype(str).tolist(),
        _shown(c["group"]),
        _money_or_dash(c["cost"]),
        _money_or_dash(c["all_in_cost"]),
        _money_or_dash(c["revenue"], has),
        _money_or_dash(c["margin"], has),
        _pct(c["margin_pct"].where(has)),
        flags.tolist(),
    ]
    headers = ["client", str(economics.policy.by), "cost", "all-in cost", "revenue", "margin",
               "margin %", "note"]  # fmt: skip
    return render_table(headers, list(zip(*columns, strict=True)), {2, 3, 4, 5, 6})


def _unit_costs_table(economics: Economics) -> str:
    u = economics.unit_costs.loc[economics.unit_costs["scope"] == "group"]
    rows = list(
        zip(
            _shown(u["group"]),
            u["source"].astype(str).tolist(),
            u["key"].astype(str).tolist(),
            _money_or_dash(u["unit_cost"]),
            u["basis"].astype(str).tolist(),
            strict=True,
        )
    )
    return render_table([str(economics.policy.by), "source", "key", "unit cost", ""], rows, {3})


def _headline(economics: Economics) -> str:
    costs, policy = economics.costs, economics.policy
    conc = economics.concentration
    gini = "-" if conc["gini"] is None else f"{conc['gini']:.3f}"
    top = (
        "-"
        if conc["top_10pct"] is None
        else f"top 1 % of clients carry {100 * conc['top_1pct']:.1f} %, top 10 % "
        f"{100 * conc['top_10pct']:.1f} %"
    )
    hours = 24 * (costs.month.end - costs.month.start).days
    return (
        f"Unit economics {costs.month.start:%Y-%m} by {policy.by}: cost data covers "
        f"{costs.hours_covered:g} of {hours} h. Amounts in {costs.currency}, exact to 10^-6.\n"
        f"All-in cost = attributed cost + share of the residual (idle, overhead, reserve: "
        f"{money(costs.residual)}), pricing.residual {policy.residual}: "
        f"{money(economics.distributed)} distributed, {money(economics.undistributed)} not.\n"
        f"Concentration over {conc['clients']} clients with cost: {top}; Gini {gini}."
    )


def _projection_text(economics: Economics) -> list[str]:
    projection = economics.projection
    if projection is None:
        return []
    g = projection.groups
    has = g["has_revenue"]
    rows = list(
        zip(
            _shown(g["group"]),
            _money_or_dash(g["cost"]),
            _money_or_dash(g["all_in_cost"]),
            _money_or_dash(g["revenue"], has),
            _money_or_dash(g["margin"], has),
            _pct(g["margin_pct"].where(has)),
            strict=True,
        )
    )
    table = render_table(
        [str(economics.policy.by), "cost", "all-in cost", "revenue", "margin", "margin %"],
        rows,
        {1, 2, 3, 4, 5},
    )
    title = f"PROJECTION to month end (as of {iso_z(projection.as_of)}; {projection.method})"
    return [f"{title}\n{table}"]


def text(economics: Economics) -> str:
    """The terminal form: headline, groups, price floors, clients, unit costs, projection."""
    parts = [
        _headline(economics),
        _groups_table(economics),
        _floors_table(economics),
        _clients_table(economics),
        _unit_costs_table(economics),
        *_projection_text(economics),
    ]
    return "\n\n".join(parts)


# --------------------------------------------------------------------------- CSV


def _revenue_currency(clients: pd.DataFrame, currency: str) -> np.ndarray:
    """The currency of each client's catalog revenue (``own_revenue``): its own, else the
    costs' (``revenue`` is always in the costs' currency, converted at the month's rate)."""
    own = clients["currency"].astype("str")
    return own.where(own != "", currency).to_numpy(dtype=object)


def _decimal(frame: pd.DataFrame, column: str, present: Any = None) -> pd.Series:
    values = frame[column].fillna(0).astype("int64")
    text_values = micros_to_decimal_strings(values)
    if present is not None:
        text_values = text_values.where(np.asarray(present, dtype=bool), "")
    return text_values


CLIENT_AMOUNTS = ("cost", "residual_share", "all_in_cost", "revenue", "margin")
"""The client CSV's amounts, each an exact decimal beside its micro-units."""


def clients_frame(economics: Economics) -> pd.DataFrame:
    """One CSV row per client: exact decimals and micro-units side by side, text cells
    neutralised for spreadsheets (:mod:`tenantcost.csv_cells`)."""
    c = economics.clients.sort_values("client", kind="mergesort")
    has = c["has_revenue"].to_numpy()
    out = c[["client", "name", "plan", "segment", "account_manager", "in_catalog"]].copy()
    for column in CLIENT_AMOUNTS:
        present = has if column in ("revenue", "margin") else None
        out[column] = _decimal(c, column, present)
        out[f"{column}_micros"] = pd.array(_ints(c[column], present).tolist(), dtype="Int64")
    out["margin_pct"] = c["margin_pct"].where(c["has_revenue"])
    out["under_margin_floor"] = c["under_margin_floor"]
    out[REQUESTS] = c[REQUESTS]
    out["currency"] = economics.costs.currency
    out["revenue_currency"] = _revenue_currency(c, economics.costs.currency)
    out["own_revenue"] = _decimal(c, "own_revenue", has)
    return neutralised(out.reset_index(drop=True), decimals=(*CLIENT_AMOUNTS, "own_revenue"))


def groups_frame(economics: Economics) -> pd.DataFrame:
    """One CSV row per plan (segment), amounts in micro-units, text cells neutralised."""
    g = economics.groups.rename(columns={"group": str(economics.policy.by)})
    g = g.drop(columns=["has_revenue"]).assign(currency=economics.costs.currency)
    return neutralised(g)


def unit_costs_frame(economics: Economics) -> pd.DataFrame:
    """One CSV row per unit cost (group or client, source and key), text cells neutralised."""
    return neutralised(economics.unit_costs)


def warn_partial(economics: Economics) -> None:
    """A finished month whose cost data covers fewer hours than the month compares part of
    a month's cost with a whole month's revenue: say so (a month in progress is projected)."""
    costs = economics.costs
    hours = (costs.month.end - costs.month.start) / pd.Timedelta(hours=1)
    if economics.projection is None and costs.hours_covered < hours:
        warn(
            f"cost data covers {costs.hours_covered:g} of the {hours:g} hours of "
            f"{costs.month.start:%Y-%m}; revenue is the whole month's, so margins are overstated"
        )
