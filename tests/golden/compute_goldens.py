"""Independent golden figures for the bundled examples.

Run from the repository root: ``python tests/golden/compute_goldens.py``.

This script is a second, deliberately separate implementation of the allocation arithmetic. It
does NOT import tenantcost: it reads the example inputs with the standard library only, applies
the rules of the example rule files as written out by hand below, and computes every split with
exact rational arithmetic (``fractions.Fraction``). The allocation engine is checked against the
JSON files it writes:

* ``tests/golden/saas-three-clients.json``  (examples/saas-three-clients, docs/method.md)
* ``tests/golden/idle-three-teams.json``    (examples/idle-three-teams, its README)

Conventions (the contract the engine must meet):

* Money is an integer count of micro-units (1 USD = 1,000,000). OpenCost figures have 5 decimals,
  so they convert exactly.
* A pool P split over clients with weights w_i (W = sum w_i > 0) uses the largest-remainder
  method: each client gets floor(P * w_i / W) computed exactly; the P - sum(floor) leftover units
  go one each to the clients with the largest exact fractional remainders, ties broken by client
  name ascending. Clients with zero weight get nothing and never receive a leftover unit.
* External per-hour cost = amount * hours of the window, split by the key summed over the
  external's services per client.
* A key override (``tenantcost compare --keys K``) makes every shared workload AND every external
  use key K. ``even`` gives weight 1 to every client with a usage row for the service(s).
* idle keep: idle stays residual. idle proportional: the window's idle pool is split in proportion
  to each client's attributed amount in the window (shared + external + direct). idle even: equal
  weights over the clients whose attributed amount in the window is > 0.

The engine computes ``floor(P * w / W)`` and the remainders exactly in 128-bit integers (earlier
versions used float64, ``P * (w / W)``). The script still emulates that float computation (for
every summation order of W) and records whether it ever differs from the exact result
(``float64_check`` in each JSON file): on these examples it never did.
"""

from __future__ import annotations

import csv
import itertools
import json
import math
from decimal import Decimal
from fractions import Fraction
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
GOLDEN = Path(__file__).resolve().parent
MICRO = 10**6


# --------------------------------------------------------------------------- helpers


def to_micros(value: Decimal | str | int) -> int:
    """Exact conversion of a currency amount to micro-units; refuses anything finer."""
    scaled = Decimal(str(value)) * MICRO
    if scaled != scaled.to_integral_value():
        raise ValueError(f"{value} is finer than a micro-unit")
    return int(scaled)


def usd(micros: int) -> str:
    sign = "-" if micros < 0 else ""
    q, r = divmod(abs(micros), MICRO)
    return f"{sign}{q}.{r:06d}"


def split_exact(pool: int, weights: dict[str, Fraction]) -> dict[str, int]:
    """Largest remainder, exact. Returns a part for every client in ``weights``."""
    total = sum(weights.values(), Fraction(0))
    if total <= 0:
        raise ValueError("no positive weight: the pool would be unattributed")
    parts: dict[str, int] = {}
    remainders: dict[str, Fraction] = {}
    for client, w in weights.items():
        if w < 0:
            raise ValueError("negative weight")
        quota = Fraction(pool) * w / total
        base = math.floor(quota)
        parts[client] = base
        remainders[client] = quota - base
    leftover = pool - sum(parts.values())
    eligible = sorted((c for c, w in weights.items() if w > 0), key=lambda c: (-remainders[c], c))
    assert 0 <= leftover <= len(eligible)
    for client in eligible[:leftover]:
        parts[client] += 1
    assert sum(parts.values()) == pool
    return parts


def split_float64(pool: int, weights: dict[str, float], order: tuple[str, ...]) -> dict[str, int]:
    """The engine's float64 arithmetic: quota = P * (w / W), W summed in ``order``."""
    total = 0.0
    for client in order:
        total += weights[client]
    parts: dict[str, int] = {}
    fracs: dict[str, float] = {}
    for client, w in weights.items():
        quota = float(pool) * (w / total)
        base = math.floor(quota)
        parts[client] = int(base)
        fracs[client] = quota - base
    leftover = pool - sum(parts.values())
    eligible = sorted((c for c, w in weights.items() if w > 0), key=lambda c: (-fracs[c], c))
    for client in eligible[: max(leftover, 0)]:
        parts[client] += 1
    return parts


class FloatCheck:
    """Collects every split, recomputes it in float64 under all summation orders, compares."""

    def __init__(self) -> None:
        self.splits = 0
        self.differences: list[dict[str, object]] = []

    def split(
        self, label: str, pool: int, exact_w: dict[str, Fraction], float_w: dict[str, float]
    ) -> dict[str, int]:
        exact = split_exact(pool, exact_w)
        self.splits += 1
        for order in itertools.permutations(sorted(float_w)):
            approx = split_float64(pool, float_w, order)
            if approx != exact:
                self.differences.append(
                    {"split": label, "sum_order": list(order), "exact": exact, "float64": approx}
                )
        return exact

    def report(self) -> dict[str, object]:
        return {
            "splits_checked": self.splits,
            "summation_orders": "all permutations of the clients",
            "float64_equals_exact": not self.differences,
            "differences": self.differences,
        }


def load_opencost(path: Path) -> list[dict[str, object]]:
    """Rows of every step of an OpenCost /allocation response, numbers as Decimal."""
    doc = json.loads(path.read_text(), parse_float=Decimal)
    assert doc["code"] == 200 and doc["status"] == "success"
    rows = []
    for step in doc["data"]:
        for name, alloc in step.items():
            assert alloc["name"] == name
            rows.append(alloc)
    return rows


# --------------------------------------------------------------------------- A: saas-three-clients

SAAS_DIR = EXAMPLES / "saas-three-clients"
PLATFORM = "platform and tooling, outside the client perimeter"
LOADGEN = "load generators, not client traffic"

# examples/saas-three-clients/rules.yaml, written out by hand (first matching entry wins).
SAAS_DEFAULT_KEYS = {"api": "requests", "import-worker": "cpu_seconds"}
EXTERNAL = {
    "name": "external-search-service",
    "usd_per_hour": "0.065",
    "key": "requests",
    "services": ("api", "import-worker"),
}


def classify_saas(row: dict[str, object]) -> tuple[str, str | None]:
    """(class, service-or-reason) of one OpenCost row under rules.yaml."""
    props = row["properties"]
    ns, ctl = props.get("namespace"), props.get("controller")
    if ns == "saas" and ctl == "api":
        return "shared", "api"
    if ns == "saas" and ctl == "import-worker":
        return "shared", "import-worker"
    if ns == "saas" and ctl == "capacity-reserve":
        return "reserve", None
    if ns == "ingress" and ctl == "edge-proxy":
        return "overhead", None
    if ns in ("monitoring", "opencost"):
        return "excluded", PLATFORM
    if ns == "loadtest":
        return "excluded", LOADGEN
    if row["name"] == "__idle__":
        return "idle", None
    raise ValueError(f"unmatched row {row['name']} (unmatched: error)")


def load_usage(path: Path) -> list[dict[str, object]]:
    with path.open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    for r in rows:
        r["exact"] = {
            "requests": Fraction(int(r["requests"])),
            "cpu_seconds": Fraction(r["cpu_seconds"]),
        }
        r["float"] = {"requests": float(r["requests"]), "cpu_seconds": float(r["cpu_seconds"])}
    return rows


def usage_weights(
    usage: list[dict[str, object]], services: tuple[str, ...], key: str
) -> tuple[dict[str, Fraction], dict[str, float]]:
    exact: dict[str, Fraction] = {}
    flt: dict[str, float] = {}
    for r in usage:
        if r["service"] not in services:
            continue
        c = r["client"]
        if key == "even":
            exact[c], flt[c] = Fraction(1), 1.0
        else:
            exact[c] = exact.get(c, Fraction(0)) + r["exact"][key]
            flt[c] = flt.get(c, 0.0) + r["float"][key]
    return exact, flt


def idle_distribution(
    check: FloatCheck, label: str, idle_pool: int, attributed: dict[str, int], method: str
) -> dict[str, int]:
    if method == "proportional":
        ex = {c: Fraction(a) for c, a in attributed.items()}
        fl = {c: float(a) for c, a in attributed.items()}
    elif method == "even":
        ex = {c: Fraction(1 if a > 0 else 0) for c, a in attributed.items()}
        fl = {c: (1.0 if a > 0 else 0.0) for c, a in attributed.items()}
    else:
        raise ValueError(method)
    return check.split(f"{label}/idle-{method}", idle_pool, ex, fl)


def saas_three_clients() -> dict[str, object]:
    costs = load_opencost(SAAS_DIR / "costs.json")
    usage = load_usage(SAAS_DIR / "usage.csv")
    windows = {(r["window"]["start"], r["window"]["end"]) for r in costs}
    assert len(windows) == 1
    ((start, end),) = windows
    assert {(u["window_start"], u["window_end"]) for u in usage} == {(start, end)}
    minutes = {r["minutes"] for r in costs}
    assert len(minutes) == 1
    hours = Fraction(int(minutes.pop()), 60)  # one node-hour: 2026-11-03T10:00Z .. 11:00Z
    assert hours == 1

    pools: dict[str, int] = {}
    residual = {"idle": 0, "overhead": 0, "reserve": 0}
    exclusions: dict[str, dict[str, object]] = {}
    opencost_total = 0
    for r in costs:
        amount = to_micros(r["totalCost"])
        opencost_total += amount
        cls, tag = classify_saas(r)
        if cls == "shared":
            pools[tag] = pools.get(tag, 0) + amount
        elif cls == "excluded":
            ex = exclusions.setdefault(tag, {"reason": tag, "amount": 0, "rows": []})
            ex["amount"] += amount
            ex["rows"].append(r["name"])
        else:
            residual[cls] += amount
    external_exact = Fraction(to_micros(EXTERNAL["usd_per_hour"])) * hours
    assert external_exact.denominator == 1
    external_amount = int(external_exact)
    reference_total = opencost_total + external_amount

    check = FloatCheck()
    variants = {
        "default": {**SAAS_DEFAULT_KEYS, EXTERNAL["name"]: EXTERNAL["key"]},
        "requests": {"api": "requests", "import-worker": "requests", EXTERNAL["name"]: "requests"},
        "cpu_seconds": {
            "api": "cpu_seconds",
            "import-worker": "cpu_seconds",
            EXTERNAL["name"]: "cpu_seconds",
        },
        "even": {"api": "even", "import-worker": "even", EXTERNAL["name"]: "even"},
    }
    out_keys: dict[str, object] = {}
    idle_variants: dict[str, dict[str, object]] = {"proportional": {}, "even": {}}
    for variant, keymap in variants.items():
        per_source: dict[str, dict[str, int]] = {}
        for service in ("api", "import-worker"):
            ex, fl = usage_weights(usage, (service,), keymap[service])
            per_source[service] = check.split(f"{variant}/{service}", pools[service], ex, fl)
        ex, fl = usage_weights(usage, EXTERNAL["services"], keymap[EXTERNAL["name"]])
        per_source[EXTERNAL["name"]] = check.split(
            f"{variant}/{EXTERNAL['name']}", external_amount, ex, fl
        )
        clients = sorted({c for parts in per_source.values() for c in parts})
        table = {}
        for c in clients:
            src = {s: per_source[s].get(c, 0) for s in per_source}
            table[c] = {
                "amount": sum(src.values()),
                "amount_usd": usd(sum(src.values())),
                "sources": src,
            }
        unattributed = 0
        excl_total = sum(e["amount"] for e in exclusions.values())
        gap = reference_total - (
            sum(t["amount"] for t in table.values())
            + unattributed
            + sum(residual.values())
            + excl_total
        )
        assert gap == 0, (variant, gap)
        out_keys[variant] = {
            "keys": keymap,
            "clients": table,
            "unattributed": unattributed,
            "residual": dict(residual),
            "exclusions": sorted(exclusions.values(), key=lambda e: e["reason"]),
            "exclusions_total": excl_total,
            "reference_total": reference_total,
            "cascade_gap": gap,
        }
        attributed = {c: t["amount"] for c, t in table.items()}
        for method in ("proportional", "even"):
            shares = idle_distribution(check, variant, residual["idle"], attributed, method)
            idle_variants[method][variant] = {
                "clients": {
                    c: {
                        "amount": attributed[c] + shares[c],
                        "amount_usd": usd(attributed[c] + shares[c]),
                        "attributed_before_idle": attributed[c],
                        "idle_share": shares[c],
                    }
                    for c in clients
                },
                "residual": {**residual, "idle": residual["idle"] - sum(shares.values())},
                "idle_distributed": sum(shares.values()),
            }

    return {
        "scenario": "saas-three-clients",
        "source": "examples/saas-three-clients (costs.json, usage.csv, rules.yaml)",
        "generated_by": "tests/golden/compute_goldens.py (exact fractions, no tenantcost import)",
        "unit": "integer micro-USD (1 USD = 1000000)",
        "rule_id": "saas-2026-11",
        "window": {"start": start, "end": end, "hours": int(hours)},
        "opencost_total": opencost_total,
        "external_total": external_amount,
        "reference_total": reference_total,
        "pools": {**pools, EXTERNAL["name"]: external_amount},
        "keys": out_keys,
        "idle_variants": {
            "note": (
                "same rules with idle: proportional / idle: even instead of keep "
                "(not a bundled rule file)"
            ),
            **idle_variants,
        },
        "float64_check": check.report(),
    }


# --------------------------------------------------------------------------- B: idle-three-teams

TEAMS_DIR = EXAMPLES / "idle-three-teams"
PUBLISHED = {  # examples/idle-three-teams/README.md, "Published", USD per 730-hour month
    "keep": {"team-a": "56.50", "idle": "69.42"},
    "even": {"team-a": "79.65", "team-b": "44.14"},
    "proportional": {"team-a": "96.36", "team-b": "35.77"},
}
TOLERANCE_USD = "0.02"


def idle_three_teams() -> dict[str, object]:
    costs = load_opencost(TEAMS_DIR / "costs.json")
    windows = {(r["window"]["start"], r["window"]["end"]) for r in costs}
    assert len(windows) == 1
    ((start, end),) = windows
    assert all(r["minutes"] == 730 * 60 for r in costs)
    direct: dict[str, int] = {}
    idle = 0
    for r in costs:
        amount = to_micros(r["totalCost"])
        ns = r["properties"].get("namespace", "")
        # rules-*.yaml: {namespace: "team-*"} -> direct, client_from namespace;
        #               {name: __idle__} -> idle
        if ns.startswith("team-"):
            direct[ns] = direct.get(ns, 0) + amount
        elif r["name"] == "__idle__":
            idle += amount
        else:
            raise ValueError(f"unmatched row {r['name']}")
    total = sum(direct.values()) + idle

    check = FloatCheck()
    methods: dict[str, object] = {}
    for method in ("keep", "even", "proportional"):
        if method == "keep":
            shares = {c: 0 for c in direct}
        else:
            shares = idle_distribution(check, "idle-three-teams", idle, direct, method)
        clients = {
            c: {
                "amount": direct[c] + shares[c],
                "amount_usd": usd(direct[c] + shares[c]),
                "direct": direct[c],
                "idle_share": shares[c],
            }
            for c in sorted(direct)
        }
        residual_idle = idle - sum(shares.values())
        assert sum(v["amount"] for v in clients.values()) + residual_idle == total
        comparison = {}
        for who, published in PUBLISHED[method].items():
            exact = residual_idle if who == "idle" else clients[who]["amount"]
            delta = to_micros(published) - exact
            comparison[who] = {
                "published_usd": published,
                "exact_usd": usd(exact),
                "delta_usd": usd(delta),
                "within_0.02": abs(delta) <= to_micros(TOLERANCE_USD),
            }
        methods[method] = {
            "rule_file": f"examples/idle-three-teams/rules-{method}.yaml",
            "clients": clients,
            "residual": {"idle": residual_idle},
            "idle_distributed": sum(shares.values()),
            "published_comparison": comparison,
        }
    return {
        "scenario": "idle-three-teams",
        "source": "examples/idle-three-teams (costs.json, rules-keep|even|proportional.yaml)",
        "generated_by": "tests/golden/compute_goldens.py (exact fractions, no tenantcost import)",
        "unit": "integer micro-USD (1 USD = 1000000)",
        "rule_id": "teams-2026-01",
        "window": {"start": start, "end": end, "hours": 730},
        "reference_total": total,
        "idle_pool": idle,
        "methods": methods,
        "published_tolerance_usd": TOLERANCE_USD,
        "published_note": (
            "DOMAIN.md section 3 rounded at intermediate steps (hourly figures to 4 decimals, "
            "then x 730). team-a and the idle line are within 0.02 USD of the exact figures; "
            "team-b is not (even: 0.048, proportional: 0.038). Compare B against the published "
            "figures with 0.05 USD, or compare against this file exactly."
        ),
        "float64_check": check.report(),
    }


def main() -> None:
    for name, result in (
        ("saas-three-clients", saas_three_clients()),
        ("idle-three-teams", idle_three_teams()),
    ):
        path = GOLDEN / f"{name}.json"
        path.write_text(json.dumps(result, indent=2, sort_keys=False) + "\n")
        print(f"wrote {path.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
