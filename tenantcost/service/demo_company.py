"""The demo's company: a mid-size SaaS made up from a seed, as the files a user would ingest.

``serve --demo`` must look like a company, not a toy: a newcomer judges the product on
whether a plan's margin, a client's trend and the month's idle read like theirs would. So the
demo generates what a real deployment receives (a client catalog, the meter's usage, OpenCost's
costs, a FOCUS invoice, a rule file with a dated change) and :mod:`tenantcost.service.demo`
feeds them through the same functions the commands call. Nothing here allocates or computes a
figure the product shows: only inputs.

Everything is drawn from one seeded :class:`numpy.random.Generator`, vectorised (a frame per
month, never a loop per client or per day), so a seed and a calendar month give the same
company byte for byte. The clock only places the company in time: the open month is the
current one, holding its hours up to now (hourly windows, which the watch scores); the six
closed months before it have daily windows, which is what makes the build fast. Another
seed is another company: other names, sizes, plans and figures.

What the company holds, and why each piece is there:

* **Clients** (:data:`CLIENTS`): names built from word lists, one id each (its slug), a plan
  by size (the largest are enterprise), a segment, an account manager, and a monthly revenue
  set from the client's expected cost and its plan's target margin, so plan margins read
  40 to 80 %. One manager has a single client (the one-client token), the others several.
* **Growth, churn, new clients**: usage grows about 3.5 % a month; some clients end in a
  closed month (their contract's ``end``), some start in a later month.
* **A new service and a rule change**: ``search`` appears in the fourth closed month, with a
  rule version from that month splitting it by requests.
* **Idle near 30 %**: the cluster's cost is split over workloads by fixed shares, idle being
  what is left; the new service's share comes out of idle.
* **A FOCUS invoice per closed month**: the cluster's instances day by day (a Savings Plan
  prices them below OpenCost's list price, so repricing shows), a database shared by the API's
  requests, support and tax as overhead.
* **A restatement**: the meter double-counted one client's imports for a few days of one
  closed month; the corrected usage (:attr:`Company.corrected`) replaces it after the close.
* **An anomaly**: one client's API traffic spikes on the open month's last complete day.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

DEFAULT_SEED = 2026
CLIENTS = 120
CLOSED_MONTHS = 6
CLUSTER = "prod-eu-1"
CURRENCY = "USD"

PREFIXES = (
    "Acme", "Bolt", "Cobalt", "Delta", "Ember", "Fjord", "Granite", "Harbor", "Indigo",
    "Juniper", "Kestrel", "Lumen", "Meridian", "Northwind", "Orchid", "Pinnacle", "Quartz",
    "Redwood", "Summit", "Tidal", "Umber", "Vertex", "Willow", "Xenon", "Yarrow", "Zephyr",
    "Atlas", "Beacon", "Cascade", "Driftwood", "Evergreen", "Falcon", "Glacier", "Horizon",
    "Ironclad", "Jasper", "Keystone", "Lighthouse", "Maple", "Nimbus", "Oakridge", "Polaris",
    "Quill", "Riverbend", "Sierra", "Trident", "Unity", "Vantage", "Westfield", "Aurora",
)  # fmt: skip
SUFFIXES = (
    "Analytics", "Imports", "Labs", "Logistics", "Health", "Retail", "Systems", "Foods",
    "Finance", "Media", "Energy", "Travel", "Robotics", "Insurance", "Learning", "Studios",
    "Freight", "Biotech", "Partners", "Networks", "Outfitters", "Dental", "Motors", "Legal",
)  # fmt: skip
MANAGERS = ("Dana Smith", "Lee Wong", "Maria Garcia", "Tom Becker", "Aisha Khan", "Olu Adeyemi")
SINGLE_MANAGER = "Priya Nair"
"""The account manager with exactly one client (the demo's one-client token)."""

PLANS = ("enterprise", "business", "team", "starter")
PLAN_SHARE = np.array([0.10, 0.20, 0.35, 0.35])
"""Plans by size rank: the largest 10 % of clients are enterprise, and so on."""
PLAN_MARGIN = np.array([0.45, 0.58, 0.67, 0.76])
SEGMENT = np.array(["enterprise", "mid-market", "mid-market", "smb"])

WORKLOAD_SHARE = {
    ("saas", "deployment", "api"): 0.33,
    ("saas", "deployment", "import-worker"): 0.19,
    ("saas", "deployment", "capacity-reserve"): 0.05,
    ("ingress", "deployment", "edge-proxy"): 0.045,
    ("monitoring", "statefulset", "prometheus"): 0.04,
    ("loadtest", "deployment", "k6"): 0.015,
}
SEARCH = ("saas", "deployment", "search")
SEARCH_SHARE = 0.05
"""Shares of the cluster's cost per day; idle is the rest (33 %, 28 % once search runs)."""
SEARCH_FROM = 3
"""The closed month (0-based) from which the ``search`` service and its rule version run."""

RESTATED = 2
"""The closed month (0-based) restated: reopened, its usage corrected, closed again."""
RESTATE_REASON = "meter double-counted import jobs retried on 3 days; corrected usage"
RESTATE_CLIENT_REASON = "Import usage was counted twice on three days; corrected."


@dataclass(frozen=True)
class Company:
    """The generated inputs, one frame per file, and the facts the demo announces."""

    seed: int
    now: pd.Timestamp
    closed: list[str]
    open_month: str
    catalog: pd.DataFrame
    usage: dict[str, pd.DataFrame]
    costs: dict[str, pd.DataFrame]
    billing: dict[str, pd.DataFrame]
    corrected: pd.DataFrame
    spike: tuple[str, pd.Timestamp] | None
    rules: dict[str, object]

    @property
    def months(self) -> list[str]:
        return [*self.closed, self.open_month]

    @property
    def restated(self) -> str:
        """The closed month restated (:data:`RESTATED`)."""
        return self.closed[RESTATED]

    def manager_clients(self, manager: str) -> list[str]:
        rows = self.catalog[self.catalog["account_manager"] == manager]
        return sorted(rows["client"].tolist())

    def write(self, folder: Path) -> dict[str, Path]:
        """Write every file into ``folder``; returns their paths by name (``usage-M``,
        ``costs-M``, ``billing-M`` a folder, ``usage-M-corrected``, ``catalog``, ``rules``)."""
        folder.mkdir(parents=True, exist_ok=True)
        paths: dict[str, Path] = {"catalog": folder / "catalog.csv", "rules": folder / "rules.yaml"}
        self.catalog.to_csv(paths["catalog"], index=False)
        paths["rules"].write_text(yaml.safe_dump(self.rules, sort_keys=False), encoding="utf-8")
        for month in self.months:
            paths[f"usage-{month}"] = _csv(self.usage[month], folder / f"usage-{month}.csv")
            paths[f"costs-{month}"] = _csv(self.costs[month], folder / f"costs-{month}.csv")
        for month, lines in self.billing.items():
            billing = folder / "billing" / month
            billing.mkdir(parents=True, exist_ok=True)
            paths[f"billing-{month}"] = _csv(lines, billing / "focus.csv")
        restated = self.closed[RESTATED]
        paths[f"usage-{restated}-corrected"] = _csv(
            self.corrected, folder / f"usage-{restated}-corrected.csv"
        )
        return paths


def _csv(frame: pd.DataFrame, path: Path) -> Path:
    out = frame.copy()
    for column in ("window_start", "window_end"):
        if column in out:
            out[column] = out[column].dt.strftime("%Y-%m-%dT%H:%M:%SZ")
    out.to_csv(path, index=False)
    return path


def month_start(stamp: pd.Timestamp) -> pd.Timestamp:
    """The first instant of ``stamp``'s UTC month."""
    return pd.Timestamp(year=stamp.year, month=stamp.month, day=1, tz="UTC")


def month_text(stamp: pd.Timestamp) -> str:
    return f"{stamp:%Y-%m}"


def make_company(seed: int = DEFAULT_SEED, now: pd.Timestamp | None = None) -> Company:
    """The company of ``seed``, placed so that its open month is ``now``'s (default: the
    clock), holding the hours before ``now`` (floored to the hour)."""
    clock = pd.Timestamp.now(tz="UTC") if now is None else pd.Timestamp(now)
    clock = clock.tz_localize("UTC") if clock.tzinfo is None else clock.tz_convert("UTC")
    clock = clock.floor("h")
    open_start = month_start(clock)
    first = open_start - pd.DateOffset(months=CLOSED_MONTHS)
    if clock == open_start:  # the first hour of a month: keep one hour of it
        clock = open_start + pd.Timedelta(hours=1)
    rng = np.random.default_rng(seed)
    catalog, weights, importing, searching = _clients(rng, first, open_start, clock)
    month_starts = [first + pd.DateOffset(months=i) for i in range(CLOSED_MONTHS + 1)]
    closed = [month_text(m) for m in month_starts[:-1]]
    days = pd.date_range(first, open_start, freq="D", inclusive="left")
    hours = pd.date_range(open_start, clock, freq="h", inclusive="left")
    cluster_month = rng.uniform(30_000, 38_000)
    daily_usage = _usage(rng, catalog, days, weights, importing, searching, first, open_start)
    spike = _spike_client(catalog, weights, clock)
    hourly_usage = _hourly_usage(rng, catalog, hours, weights, importing, searching, first, spike)
    daily_costs = _costs(rng, days, first, cluster_month, pd.Timedelta(days=1))
    hourly_costs = _costs(rng, hours, first, cluster_month, pd.Timedelta(hours=1))
    usage = _by_month(daily_usage, closed) | {month_text(open_start): hourly_usage}
    costs = _by_month(daily_costs, closed) | {month_text(open_start): hourly_costs}
    restated = closed[RESTATED]
    corrected = usage[restated]
    usage[restated] = _double_counted(rng, corrected, weights)
    billing = {m: _billing(rng, costs[m], m, i) for i, m in enumerate(closed)}
    billed_days = costs[month_text(open_start)]
    billed_days = billed_days[billed_days["window_start"] < clock.floor("D")]
    if not billed_days.empty:  # the open month's bill so far: its complete days' instances
        billing[month_text(open_start)] = _billing(rng, billed_days, month_text(open_start),
                                                   len(closed), monthly=False)  # fmt: skip
    rules = _rules(closed)
    return Company(seed, clock, closed, month_text(open_start), catalog, usage, costs, billing,
                   corrected, spike, rules)  # fmt: skip


def _slug(names: pd.Series) -> pd.Series:
    return names.str.lower().str.replace(r"[^a-z0-9]+", "-", regex=True).str.strip("-")


def _clients(
    rng: np.random.Generator, first: pd.Timestamp, open_start: pd.Timestamp, now: pd.Timestamp
) -> tuple[pd.DataFrame, np.ndarray, np.ndarray, np.ndarray]:
    """The catalog, with each client's size (its share of traffic), import intensity and
    whether it uses search, all indexed like the catalog's rows (sorted by id)."""
    pairs = rng.choice(len(PREFIXES) * len(SUFFIXES), CLIENTS, replace=False)
    names = pd.Series([f"{PREFIXES[p // len(SUFFIXES)]} {SUFFIXES[p % len(SUFFIXES)]}"
                       for p in pairs])  # fmt: skip
    size = rng.lognormal(0.0, 1.1, CLIENTS)
    importing = rng.lognormal(0.0, 1.0, CLIENTS)
    searching = (rng.random(CLIENTS) < 0.6) * rng.lognormal(0.0, 0.5, CLIENTS)
    rank = np.empty(CLIENTS, dtype=int)
    rank[np.argsort(-size, kind="stable")] = np.arange(CLIENTS)
    bounds = np.cumsum(PLAN_SHARE) * CLIENTS
    plan = np.searchsorted(bounds, rank, side="right")
    span_days = (open_start - first).days
    start = pd.Series(first - pd.to_timedelta(rng.integers(30, 900, CLIENTS), unit="D"))
    end = pd.Series(pd.NaT, index=range(CLIENTS), dtype="datetime64[ns, UTC]")
    smaller = np.flatnonzero(plan >= 1)  # new and ending clients are never enterprise
    chosen = rng.choice(smaller, 18, replace=False)
    new, ending = chosen[:10], chosen[10:]
    latest = max(31, (now - first).days - 2)
    start.iloc[new] = first + pd.to_timedelta(np.sort(rng.integers(31, latest, len(new))),
                                              unit="D")  # fmt: skip
    end.iloc[ending] = first + pd.to_timedelta(rng.integers(20, span_days - 1, len(ending)),
                                               unit="D")  # fmt: skip
    manager = np.array(MANAGERS)[rng.integers(0, len(MANAGERS), CLIENTS)]
    manager[np.flatnonzero(plan == 0)[-1]] = SINGLE_MANAGER
    expected = _expected_cost(size, importing, searching)
    margin = np.clip(PLAN_MARGIN[plan] + rng.normal(0.0, 0.06, CLIENTS), 0.2, 0.9)
    revenue = np.maximum(np.round(expected / (1.0 - margin), -1), 29.0)
    catalog = pd.DataFrame({
        "client": _slug(names), "name": names, "plan": np.array(PLANS)[plan],
        "segment": SEGMENT[plan], "account_manager": manager,
        "monthly_revenue": [f"{r:.2f}" for r in revenue], "currency": CURRENCY,
        "start": start.dt.strftime("%Y-%m-%d"),
        "end": end.dt.strftime("%Y-%m-%d").fillna(""),
    })  # fmt: skip
    order = np.argsort(catalog["client"].to_numpy(), kind="stable")
    catalog = catalog.iloc[order].reset_index(drop=True)
    return catalog, size[order], importing[order], searching[order]


ALL_IN = 1.35
"""A client's all-in cost (its share of idle, overhead and reserve included, as the pricing
page counts it) over its share of the shared services' list-price cost, about."""


def _expected_cost(size: np.ndarray, importing: np.ndarray, searching: np.ndarray) -> np.ndarray:
    """A client's rough monthly all-in cost (USD) in the latest months: its share of each
    shared service times the service's share of a 40,000 USD cluster month, times
    :data:`ALL_IN`; the revenue is set from it, so plan margins come out as planned."""
    month = 40_000.0
    api = size / size.sum() * WORKLOAD_SHARE[("saas", "deployment", "api")]
    work = (
        size
        * importing
        / (size * importing).sum()
        * WORKLOAD_SHARE[("saas", "deployment", "import-worker")]
    )
    search = size * searching / max((size * searching).sum(), 1e-9) * SEARCH_SHARE
    return np.asarray(month * ALL_IN * (api + work + search))


def _active(catalog: pd.DataFrame, times: pd.DatetimeIndex) -> np.ndarray:
    """clients x times: whether the contract covers the time's day."""
    start = pd.to_datetime(catalog["start"], utc=True).to_numpy()
    end = pd.to_datetime(catalog["end"].replace("", None), utc=True)
    end = end.fillna(pd.Timestamp("2100-01-01", tz="UTC")).to_numpy()
    day = times.floor("D").to_numpy()
    return np.asarray((day[None, :] >= start[:, None]) & (day[None, :] <= end[:, None]))


def _growth(times: pd.DatetimeIndex, first: pd.Timestamp, rate: float = 0.035) -> np.ndarray:
    """``exp(rate x months since first)``: about ``rate`` a month."""
    months = (times - first) / pd.Timedelta(days=30.44)
    return np.asarray(np.exp(rate * np.asarray(months, dtype=float)))


def _usage_frame(
    rng: np.random.Generator,
    catalog: pd.DataFrame,
    times: pd.DatetimeIndex,
    step: pd.Timedelta,
    volume: np.ndarray,
    search_on: np.ndarray,
    weights: tuple[np.ndarray, np.ndarray, np.ndarray],
) -> pd.DataFrame:
    """The meter's rows (``window_start, window_end, service, client, requests,
    cpu_seconds``) for ``times``: ``volume`` is each window's traffic relative to a day."""
    size, importing, searching = weights
    active = _active(catalog, times)
    base = size[:, None] * volume[None, :] * active
    noise = rng.lognormal(0.0, 0.08, (3, *base.shape))
    api = base * 40_000 * noise[0]
    work = base * importing[:, None] * 200 * noise[1]
    search = base * searching[:, None] * 6_000 * noise[2] * search_on[None, :]
    parts = []
    for service, requests, per_request in (("api", api, 0.012), ("import-worker", work, 2.6),
                                           ("search", search, 0.05)):  # fmt: skip
        count = rng.poisson(requests).astype(np.int64)  # small hourly counts stay unbiased
        client, when = np.nonzero(count > 0)
        parts.append(pd.DataFrame({
            "window_start": times[when], "window_end": times[when] + step, "service": service,
            "client": catalog["client"].to_numpy()[client], "requests": count[client, when],
            "cpu_seconds": np.round(count[client, when] * per_request, 1),
        }))  # fmt: skip
    out = pd.concat(parts, ignore_index=True)
    return out.sort_values(["window_start", "service", "client"], kind="stable").reset_index(
        drop=True
    )


def _usage(
    rng: np.random.Generator,
    catalog: pd.DataFrame,
    days: pd.DatetimeIndex,
    size: np.ndarray,
    importing: np.ndarray,
    searching: np.ndarray,
    first: pd.Timestamp,
    open_start: pd.Timestamp,
) -> pd.DataFrame:
    weekday = np.where(days.day_of_week >= 5, 0.55, 1.0)
    volume = _growth(days, first) * weekday
    search_on = np.asarray(days >= first + pd.DateOffset(months=SEARCH_FROM), dtype=float)
    step = pd.Timedelta(days=1)
    return _usage_frame(rng, catalog, days, step, volume, search_on, (size, importing, searching))


DIURNAL = 0.6 + 0.8 * np.clip(np.sin((np.arange(24) - 6) / 24 * 2 * np.pi), 0, None)
"""Traffic by UTC hour: a working-day hump over a night floor (sums to about 24 x 0.86)."""


def _hourly_usage(
    rng: np.random.Generator,
    catalog: pd.DataFrame,
    hours: pd.DatetimeIndex,
    size: np.ndarray,
    importing: np.ndarray,
    searching: np.ndarray,
    first: pd.Timestamp,
    spike: tuple[str, pd.Timestamp] | None,
) -> pd.DataFrame:
    shape = DIURNAL[hours.hour] / DIURNAL.sum()
    weekday = np.where(hours.day_of_week >= 5, 0.55, 1.0)
    volume = _growth(hours, first) * weekday * shape
    search_on = np.ones(len(hours))
    step = pd.Timedelta(hours=1)
    out = _usage_frame(rng, catalog, hours, step, volume, search_on, (size, importing, searching))
    if spike is not None:
        client, day = spike
        hit = ((out["client"] == client) & (out["service"] == "api")
               & (out["window_start"].dt.floor("D") == day))  # fmt: skip
        out.loc[hit, "requests"] = out.loc[hit, "requests"] * 6
        out.loc[hit, "cpu_seconds"] = (out.loc[hit, "cpu_seconds"] * 6).round(1)
    return out


def _spike_client(
    catalog: pd.DataFrame, size: np.ndarray, now: pd.Timestamp
) -> tuple[str, pd.Timestamp] | None:
    """The client whose API traffic spikes (the largest business-plan client still active),
    and the day: the open month's last complete day (none on its first day)."""
    day = now.floor("D") - pd.Timedelta(days=1)
    if day < month_start(now):
        return None
    business = (catalog["plan"] == "business").to_numpy() & (catalog["end"] == "").to_numpy()
    index = np.flatnonzero(business)[np.argmax(size[business])]
    return str(catalog["client"].iloc[index]), day


def _costs(
    rng: np.random.Generator,
    times: pd.DatetimeIndex,
    first: pd.Timestamp,
    cluster_month: float,
    step: pd.Timedelta,
) -> pd.DataFrame:
    """OpenCost's rows as a canonical cost table: each workload's share of the window's
    cluster cost, ``__idle__`` the rest."""
    per_window = cluster_month / (30.44 * pd.Timedelta(days=1) / step)
    total = per_window * _growth(times, first, 0.04) * rng.normal(1.0, 0.02, len(times))
    workloads = list(WORKLOAD_SHARE)
    shares = np.array([WORKLOAD_SHARE[w] for w in workloads])[None, :] * rng.normal(
        1.0, 0.04, (len(times), len(workloads))
    )
    search_on = np.asarray(times >= first + pd.DateOffset(months=SEARCH_FROM), dtype=float)
    shares = np.column_stack([shares, SEARCH_SHARE * search_on])
    workloads.append(SEARCH)
    amounts = np.round(shares * total[:, None], 6)
    idle = np.round(total, 6) - amounts.sum(axis=1)
    rows = len(workloads) + 1
    namespace, kind, controller = (np.array([*parts, ""]) for parts in zip(*workloads, strict=True))
    out = pd.DataFrame({
        "window_start": np.repeat(times, rows), "window_end": np.repeat(times + step, rows),
        "name": np.tile(np.array([""] * len(workloads) + ["__idle__"]), len(times)),
        "cluster": CLUSTER, "namespace": np.tile(namespace, len(times)),
        "controller_kind": np.tile(kind, len(times)),
        "controller": np.tile(controller, len(times)),
        "total_cost": np.round(np.column_stack([amounts, idle]).ravel(), 6),
    })  # fmt: skip
    return out[out["total_cost"] > 0].reset_index(drop=True)


def _by_month(frame: pd.DataFrame, months: list[str]) -> dict[str, pd.DataFrame]:
    month = frame["window_start"].dt.strftime("%Y-%m")
    return {m: frame[month == m].reset_index(drop=True) for m in months}


def _double_counted(
    rng: np.random.Generator, usage: pd.DataFrame, size: np.ndarray
) -> pd.DataFrame:
    """The restated month's usage as first ingested: the import worker's rows of the three
    busiest importers doubled on three days (retried jobs counted twice)."""
    work = usage[usage["service"] == "import-worker"]
    busiest = work.groupby("client")["cpu_seconds"].sum().nlargest(3).index
    days = np.sort(work["window_start"].unique())[[9, 10, 11]]
    hit = (
        (usage["service"] == "import-worker")
        & usage["client"].isin(busiest)
        & usage["window_start"].isin(days)
    )
    out = usage.copy()
    out.loc[hit, "requests"] = out.loc[hit, "requests"] * 2
    out.loc[hit, "cpu_seconds"] = (out.loc[hit, "cpu_seconds"] * 2).round(1)
    return out


DATABASE_ARN = "arn:aws:rds:eu-west-1:314159265358:db:saas"
FOCUS_FIXED = {
    "BillingAccountId": "aws-payer-531209874466", "BillingAccountName": "SaaS payer",
    "BillingCurrency": CURRENCY, "ProviderName": "AWS", "PublisherName": "AWS",
    "InvoiceIssuerName": "AWS", "SubAccountId": "314159265358", "SubAccountName": "saas-prod",
    "RegionId": "eu-west-1", "RegionName": "Europe (Ireland)",
}  # fmt: skip


def _billing(
    rng: np.random.Generator, costs: pd.DataFrame, month: str, index: int, monthly: bool = True
) -> pd.DataFrame:
    """The month's FOCUS lines: the cluster's instances per day (a Savings Plan: 68-74 % of
    OpenCost's list price) and, with ``monthly`` (a closed month's invoice), a database shared
    by the API's requests and the support plan (overhead)."""
    start = pd.Timestamp(f"{month}-01", tz="UTC")
    end = start + pd.DateOffset(months=1)
    daily = costs.groupby(costs["window_start"].dt.floor("D"), sort=True)["total_cost"].sum()
    factor = rng.uniform(0.68, 0.74)
    ec2 = np.round(daily.to_numpy() * factor * rng.normal(1.0, 0.01, len(daily)), 6)
    database = round(2_400.0 * 1.03**index * rng.uniform(0.97, 1.03), 2)
    support = round(0.03 * (ec2.sum() + database), 2)
    lines = pd.DataFrame({
        "ChargePeriodStart": [*daily.index, start, start],
        "ChargePeriodEnd": [*(daily.index + pd.Timedelta(days=1)), end, end],
        "ChargeCategory": ["Usage"] * len(daily) + ["Usage", "Usage"],
        "ServiceName": ["Amazon Elastic Compute Cloud"] * len(daily)
        + ["Amazon Relational Database Service", "AWS Support (Business)"],
        "ChargeDescription": [f"EKS node group {CLUSTER}, Compute Savings Plan"] * len(daily)
        + ["db.r6g.xlarge Multi-AZ PostgreSQL", "Business support plan"],
        "ResourceId": [f"eks-nodegroup/{CLUSTER}"] * len(daily) + [DATABASE_ARN, ""],
        "EffectiveCost": [*ec2, database, support],
        "Tags": [json.dumps({"eks:cluster-name": CLUSTER})] * len(daily) + ["{}", "{}"],
    })  # fmt: skip
    if not monthly:
        lines = lines.iloc[: len(daily)].copy()
    lines["BilledCost"] = lines["EffectiveCost"]
    lines["InvoiceId"] = f"INV-{month}-0001"
    lines["BillingPeriodStart"] = start
    lines["BillingPeriodEnd"] = end
    for column, value in FOCUS_FIXED.items():
        lines[column] = value
    for column in ("ChargePeriodStart", "ChargePeriodEnd", "BillingPeriodStart",
                   "BillingPeriodEnd"):  # fmt: skip
        lines[column] = pd.to_datetime(lines[column], utc=True).dt.strftime("%Y-%m-%dT%H:%M:%SZ")
    lines["EffectiveCost"] = lines["EffectiveCost"].map(lambda v: f"{v:.6f}")
    lines["BilledCost"] = lines["EffectiveCost"]
    return lines


_WORKLOADS = [
    {"match": {"namespace": "saas", "controller": "api"}, "class": "shared", "service": "api",
     "key": "requests"},
    {"match": {"namespace": "saas", "controller": "import-worker"}, "class": "shared",
     "service": "import-worker", "key": "cpu_seconds"},
    {"match": {"namespace": "saas", "controller": "capacity-reserve"}, "class": "reserve"},
    {"match": {"namespace": "ingress", "controller": "edge-proxy"}, "class": "overhead"},
    {"match": {"namespace": "monitoring"}, "class": "excluded",
     "reason": "platform and tooling, outside the client perimeter"},
    {"match": {"namespace": "loadtest"}, "class": "excluded",
     "reason": "load generators, not client traffic"},
    {"match": {"name": "__idle__"}, "class": "idle"},
]  # fmt: skip
_BILLED = [
    {"match": {"ServiceName": "Amazon Relational Database Service"}, "class": "shared",
     "key": "requests", "services": ["api"]},
    {"match": {"ServiceName": "AWS Support*"}, "name": "support", "class": "overhead"},
]  # fmt: skip


def _rules(closed: list[str]) -> dict[str, object]:
    """Two rule versions: from the first month, and from :data:`SEARCH_FROM` with ``search``."""
    described = "API by requests, import worker by CPU time, the database by the API's requests"
    first: dict[str, object] = {
        "id": f"saas-{closed[0]}", "effective_from": f"{closed[0]}-01",
        "description": described,
        "workloads": _WORKLOADS, "billed": _BILLED, "unmatched_billed": "error",
        "idle": "keep", "unmatched": "error",
    }  # fmt: skip
    search = {"match": {"namespace": "saas", "controller": "search"}, "class": "shared",
              "service": "search", "key": "requests"}  # fmt: skip
    second = {
        **first,
        "id": f"saas-{closed[SEARCH_FROM]}", "effective_from": f"{closed[SEARCH_FROM]}-01",
        "description": described + "; the new search service by its requests",
        "workloads": [*_WORKLOADS[:2], search, *_WORKLOADS[2:]],
    }  # fmt: skip
    billing = {"clusters": [{"name": CLUSTER, "match": {"tags": {"eks:cluster-name": CLUSTER}},
                             "costs_from": "opencost"}]}  # fmt: skip
    return {"currency": CURRENCY, "hours_per_month": 730, "billing": billing,
            "rules": [first, second]}  # fmt: skip
