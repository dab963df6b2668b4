"""examples/invoice-close: every figure of its README, computed a second time with fractions.

This is a deliberately separate implementation of the invoice close's arithmetic (the rules
below; docs/invoice.md), the way ``tests/golden/compute_goldens.py`` is for the allocation: it
does not import tenantcost's allocation code. It reads the example's files with the standard
library (``csv``, ``json``, ``yaml``), classifies the billed lines by the rule file's ``match:``
patterns with ``fnmatch``, and computes with ``fractions.Fraction``:

* rounding = the exact decimal sum of a group, then half-even to micro-units, once;
* largest remainder: ``floor(P * w / W)``, the leftover units one each to the largest exact
  remainders; a negative pool is split on its magnitude and the sign put back;
* repricing: B = round(Σ EffectiveCost of the cluster's lines), each OpenCost row its
  largest-remainder share of B weighted by its micro amount, ties by (window_start, name,
  cluster, node, namespace, controller_kind, controller, pod);
* pools split by their key over the usage of their services, ties by client name;
* the invoice cascade: clients, residual, exclusions, ``external`` (its negative), outside,
  the bridge per ChargeCategory (/ CommitmentDiscountType), ``rounding``; gap = billed_total
  - Σ lines.

The real CLI then runs on the example and must give the same figures; the README's figures are
parsed and compared too, so none of them is unchecked.
"""

from __future__ import annotations

import csv
import fnmatch
import json
import math
import re
import subprocess
import sys
from collections import defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from fractions import Fraction
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

from . import focus_validator
from .invoice_data import invoice_close_rows, write_focus_csv

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "invoice-close"
RULES = EXAMPLE / "rules.yaml"
BILLING = EXAMPLE / "billing" / "2026-11" / "focus.csv"
README = EXAMPLE / "README.md"
MICRO = 10**6
"""Only the comparisons with the CLI wait for the lead's allocation core."""
TIE_COLUMNS = (
    "window_start",
    "name",
    "cluster",
    "node",
    "namespace",
    "controller_kind",
    "controller",
    "pod",
)

# --------------------------------------------------------------------------- arithmetic


def round_micros(value: Fraction | Decimal) -> int:
    """An exact amount of currency to micro-units, half-even, once."""
    scaled = Fraction(value) * MICRO
    floor = math.floor(scaled)
    rest = scaled - floor
    if rest > Fraction(1, 2) or (rest == Fraction(1, 2) and floor % 2 == 1):
        return floor + 1
    return floor


def largest_remainder(total: int, weights: Sequence[tuple[Any, Fraction]]) -> dict[Any, int]:
    """Split integer ``total`` by positive weights, in the given tie order; sign kept."""
    sign, parent = (-1, -total) if total < 0 else (1, total)
    whole = sum((w for _, w in weights), Fraction(0))
    exact = [(key, parent * w / whole) for key, w in weights]
    base = {key: math.floor(q) for key, q in exact}
    leftover = parent - sum(base.values())
    ranked = sorted(range(len(exact)), key=lambda i: -(exact[i][1] - base[exact[i][0]]))
    for i in ranked[:leftover]:  # sorted() is stable: equal remainders keep the tie order
        base[exact[i][0]] += 1
    return {key: sign * amount for key, amount in base.items()}


# --------------------------------------------------------------------------- inputs


def exact(text: str) -> Fraction:
    return Fraction(Decimal(text)) if text else Fraction(0)


@cache
def billing_rows() -> tuple[dict[str, str], ...]:
    with BILLING.open(newline="", encoding="utf-8") as f:
        return tuple(csv.DictReader(f))


@cache
def rules() -> dict[str, Any]:
    return yaml.safe_load(RULES.read_text(encoding="utf-8"))


@cache
def cost_rows() -> tuple[dict[str, Any], ...]:
    """OpenCost's rows: the properties the tie order names, and the micro amount."""
    data = json.loads((EXAMPLE / "costs.json").read_text(encoding="utf-8"))
    rows = []
    for step in data["data"]:
        for name, item in step.items():
            props = item.get("properties", {})
            micros = Fraction(Decimal(str(item["totalCost"]))) * MICRO
            assert micros.denominator == 1, name
            rows.append(
                {
                    "window_start": item["window"]["start"],
                    "name": name,
                    "cluster": props.get("cluster", ""),
                    "node": props.get("node", ""),
                    "namespace": props.get("namespace", ""),
                    "controller_kind": props.get("controllerKind", ""),
                    "controller": props.get("controller", ""),
                    "pod": props.get("pod", ""),
                    "amount": int(micros),
                }
            )
    return tuple(sorted(rows, key=lambda r: tuple(r[c] for c in TIE_COLUMNS)))


@cache
def usage() -> dict[str, dict[str, dict[str, Fraction]]]:
    """service -> client -> metric -> exact measure."""
    out: dict[str, dict[str, dict[str, Fraction]]] = defaultdict(dict)
    with (EXAMPLE / "usage.csv").open(newline="", encoding="utf-8") as f:
        for row in csv.DictReader(f):
            out[row["service"]][row["client"]] = {
                m: exact(row[m]) for m in ("requests", "cpu_seconds")
            }
    return out


def matches(row: dict[str, str], match: dict[str, Any]) -> bool:
    """A ``match:``: every column's glob (or one of a list) holds; tags present, non-empty."""

    def one(value: str, pattern: Any) -> bool:
        patterns = pattern if isinstance(pattern, list) else [pattern]
        return any(fnmatch.fnmatchcase(value, str(p)) for p in patterns)

    for column, pattern in match.items():
        if column == "tags":
            tags = json.loads(row["Tags"] or "{}")
            if not all(tags.get(k) and one(str(tags[k]), p) for k, p in pattern.items()):
                return False
        elif not one(row[column], pattern):
            return False
    return True


def entry_label(entry: dict[str, Any]) -> str:
    if entry.get("name"):
        return str(entry["name"])
    parts = []
    for column, pattern in entry["match"].items():
        if column == "tags":
            parts += [f"{k}={v}" for k, v in pattern.items()]
        else:
            parts.append("|".join(pattern) if isinstance(pattern, list) else str(pattern))
    return "billed: " + ", ".join(parts)


# --------------------------------------------------------------------------- the figures

WORKLOADS: dict[str, tuple[str, str]] = {
    "cluster-one/saas/deployment:api": ("shared", "api"),
    "cluster-one/saas/deployment:import-worker": ("shared", "import-worker"),
    "cluster-one/saas/deployment:capacity-reserve": ("reserve", ""),
    "cluster-one/ingress/daemonset:edge-proxy": ("overhead", ""),
    "cluster-one/monitoring/statefulset:prometheus": (
        "excluded",
        "platform and tooling, outside the client perimeter",
    ),
    "cluster-one/opencost/deployment:opencost": (
        "excluded",
        "platform and tooling, outside the client perimeter",
    ),
    "cluster-one/loadtest/job:k6": ("excluded", "load generators, not client traffic"),
    "__idle__": ("idle", ""),
}
"""The rule file's workloads, written out by hand (as compute_goldens.py does)."""
KEYS = {"api": "requests", "import-worker": "cpu_seconds"}
EXTERNAL = ("external-search-service", 65_000, "requests", ("api", "import-worker"))


@dataclass
class Figures:
    """Every figure of the example, integer micro-USD."""

    opencost: int = 0
    billed_effective: int = 0  # B of cluster-one in the hour
    repriced: dict[str, int] = field(default_factory=dict)  # OpenCost row name -> amount
    pools: dict[str, int] = field(default_factory=dict)  # billed entry label -> A
    outside: dict[str, int] = field(default_factory=dict)
    lines: dict[tuple[str, str], int] = field(default_factory=dict)  # (client, source)
    residual: dict[str, int] = field(default_factory=dict)  # class -> amount
    exclusions: dict[str, int] = field(default_factory=dict)  # reason -> amount
    bridge: dict[str, int] = field(default_factory=dict)
    billed_total: int = 0
    invoices: dict[str, int] = field(default_factory=dict)
    exact_billed: Fraction = Fraction(0)

    @property
    def clients(self) -> dict[str, int]:
        out: dict[str, int] = defaultdict(int)
        for (client, _), amount in self.lines.items():
            out[client] += amount
        return dict(sorted(out.items()))

    @property
    def effective_in_scope(self) -> int:
        return self.billed_effective + sum(self.pools.values())

    def invoice_lines(self) -> list[tuple[str, str, int]]:
        """(part, name, amount) of the invoice cascade."""
        out = [("clients", "clients", sum(self.clients.values())), ("unattributed", "", 0)]
        out += [(cls, cls, self.residual.get(cls, 0)) for cls in ("idle", "overhead", "reserve")]
        out += [("excluded", r, a) for r, a in sorted(self.exclusions.items())]
        out += [("unclassified", "", 0), ("external", EXTERNAL[0], -EXTERNAL[1])]
        out += [("outside", n, a) for n, a in self.outside.items()]
        out += [("bridge", n, a) for n, a in self.bridge.items()]
        return out

    @property
    def gap(self) -> int:
        return self.billed_total - sum(a for _, _, a in self.invoice_lines())


def split_over(pool: int, services: Sequence[str], key: str) -> dict[str, int]:
    weights: dict[str, Fraction] = defaultdict(Fraction)
    for service in services:
        for client, measures in usage()[service].items():
            weights[client] += measures[key]
    order = sorted((c, w) for c, w in weights.items() if w > 0)  # ties: client name, binary
    return largest_remainder(pool, [(c, w) for c, w in order])


def classify(row: dict[str, str]) -> tuple[str, dict[str, Any]]:
    """('cluster', cluster) for the first cluster that matches, else ('billed', entry)."""
    for cluster in rules()["billing"]["clusters"]:
        if matches(row, cluster["match"]):
            return "cluster", cluster
    for entry in rules()["rules"][0]["billed"]:
        if matches(row, entry["match"]):
            return "billed", entry
    raise AssertionError(f"unmatched billed line {row['ChargeDescription']}")


@dataclass
class Sorted:
    """The billing rows sorted out: the cluster's effective cost, each entry's lines, and
    billed - effective per bridge name (every line but the outside ones)."""

    cluster_effective: Fraction = Fraction(0)
    groups: dict[str, list[dict[str, str]]] = field(default_factory=lambda: defaultdict(list))
    entries: dict[str, dict[str, Any]] = field(default_factory=dict)
    bridge: dict[str, Fraction] = field(default_factory=lambda: defaultdict(Fraction))


def sort_lines(rows: Sequence[dict[str, str]]) -> Sorted:
    out = Sorted()
    for r in rows:
        kind, what = classify(r)
        if kind == "cluster":
            out.cluster_effective += exact(r["EffectiveCost"])
        else:
            out.groups[entry_label(what)].append(r)
            out.entries[entry_label(what)] = what
        if kind == "billed" and what["class"] == "outside":
            continue
        name = r["ChargeCategory"]
        if name == "Usage" and r["CommitmentDiscountType"]:
            name += " / " + r["CommitmentDiscountType"]
        out.bridge[name] += exact(r["BilledCost"]) - exact(r["EffectiveCost"])
    return out


def add_item(f: Figures, cls: str, reason: str | None, amount: int) -> None:
    """A residual or excluded amount, summed per class or per reason."""
    if cls == "excluded":
        assert reason
        f.exclusions[reason] = f.exclusions.get(reason, 0) + amount
    else:
        f.residual[cls] = f.residual.get(cls, 0) + amount


def reprice(f: Figures, cluster_effective: Fraction) -> None:
    """1. One cluster, one period (the hour): OpenCost's rows become their share of B."""
    costs = cost_rows()
    f.opencost = sum(c["amount"] for c in costs)
    f.billed_effective = round_micros(cluster_effective)
    f.repriced = largest_remainder(
        f.billed_effective, [(c["name"], Fraction(c["amount"])) for c in costs]
    )
    for name, amount in f.repriced.items():
        cls, what = WORKLOADS[name]
        if cls == "shared":
            for client, a in split_over(amount, [what], KEYS[what]).items():
                f.lines[(client, what)] = a
        else:
            add_item(f, cls, what, amount)


def billed_pools(f: Figures, lines: Sorted) -> None:
    """2. Billed lines outside the cluster: one group per entry (one charge period, one hour),
    rounded once; outside entries at their BilledCost, for the invoice only."""
    for label, members in lines.groups.items():
        entry = lines.entries[label]
        if entry["class"] == "outside":
            f.outside[label] = round_micros(
                sum((exact(r["BilledCost"]) for r in members), Fraction(0))
            )
            continue
        amount = round_micros(sum((exact(r["EffectiveCost"]) for r in members), Fraction(0)))
        f.pools[label] = amount
        if entry["class"] == "shared":
            for client, a in split_over(amount, entry["services"], entry["key"]).items():
                f.lines[(client, label)] = a
        else:
            add_item(f, entry["class"], entry.get("reason"), amount)


def compute() -> Figures:
    f = Figures()
    rows = billing_rows()
    f.exact_billed = sum((exact(r["BilledCost"]) for r in rows), Fraction(0))
    f.billed_total = round_micros(f.exact_billed)
    per_invoice: dict[str, Fraction] = defaultdict(Fraction)
    for r in rows:
        per_invoice[r["InvoiceId"]] += exact(r["BilledCost"])
    f.invoices = {i: round_micros(v) for i, v in sorted(per_invoice.items())}
    lines = sort_lines(rows)
    reprice(f, lines.cluster_effective)
    for client, a in split_over(EXTERNAL[1], EXTERNAL[3], EXTERNAL[2]).items():
        f.lines[(client, EXTERNAL[0])] = a  # the rule file's external cost, as today
    billed_pools(f, lines)
    # 3. the bridge: billed - effective per category, then the rounding of the groups
    f.bridge = {n: round_micros(v) for n, v in sorted(lines.bridge.items()) if round_micros(v)}
    rounded = f.effective_in_scope + sum(f.outside.values()) + sum(f.bridge.values())
    f.bridge["rounding"] = f.billed_total - rounded
    return f


FIGURES = compute()


# --------------------------------------------------------------------------- checks of the figures


def test_largest_remainder_keeps_the_sign_and_the_tie_order():
    assert largest_remainder(-10, [("a", Fraction(1)), ("b", Fraction(1)), ("c", Fraction(1))]) == {
        "a": -4,
        "b": -3,
        "c": -3,
    }
    assert largest_remainder(10, [("b", Fraction(1)), ("a", Fraction(1)), ("c", Fraction(1))]) == {
        "b": 4,
        "a": 3,
        "c": 3,
    }
    assert round_micros(Fraction(5, 10**7)) == 0 and round_micros(Fraction(15, 10**7)) == 2
    assert round_micros(Fraction(-15, 10**7)) == -2


def test_the_figures_conserve_and_close():
    f = FIGURES
    assert sum(f.repriced.values()) == f.billed_effective
    assert f.billed_effective < f.opencost, "the Savings Plan makes the node cheaper"
    for label, amount in f.pools.items():
        assert sum(a for (_, s), a in f.lines.items() if s == label) in (amount, 0), label
    assert f.gap == 0
    assert sum(f.invoices.values()) == f.billed_total
    assert abs(f.bridge["rounding"]) <= len(f.pools) + 1  # at most half a unit per group
    assert f.bridge["Purchase"] == -f.bridge["Usage / Savings Plan"] > 0
    # the double count the example avoids: the bill's node on top of OpenCost's total
    node = [r for r in billing_rows() if classify(r)[0] == "cluster"]
    assert len(node) == 1 and Decimal(node[0]["ListCost"]) * MICRO == f.opencost


def test_a_dropped_or_doubled_line_shows_as_a_gap():
    """The gap is computed, not forced: a pool counted twice or a client line lost shows."""
    lines = FIGURES.invoice_lines()
    total = FIGURES.billed_total
    assert total - sum(a for *_, a in lines) == 0
    assert total - sum(a for *_, a in lines[1:]) == lines[0][2] != 0
    doubled = [*lines, ("overhead", "VAT", FIGURES.pools["VAT"])]
    assert total - sum(a for *_, a in doubled) == -FIGURES.pools["VAT"]


def test_the_shipped_billing_file_is_the_generated_one(tmp_path):
    fresh = write_focus_csv(tmp_path / "focus.csv", invoice_close_rows())
    assert fresh.read_text(encoding="utf-8") == BILLING.read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def validator_venv() -> Iterator[Path]:
    yield focus_validator.ensure_venv()


VALIDATOR_CONDITIONAL = {"InvoiceId-C-004-C"}
"""'InvoiceId MUST be null when the charge is not associated with an invoice': the validator
checks every row for null, as it cannot know which charges have an invoice; every line of
the example is on invoice INV-2026-11-001 (docs/focus.md notes the same for InvoiceId-C-005-C)."""


def test_the_billing_file_passes_the_focus_validator(validator_venv):
    report = focus_validator.validate(validator_venv, BILLING)
    assert report.failed_mandatory == [], report.output
    assert set(report.failures) <= VALIDATOR_CONDITIONAL, report.output
    assert report.passed > 100, report.summary_line


# --------------------------------------------------------------------------- the README's figures

CLIENTS = ("client-a", "client-b", "client-c")
SHORT = {name: name.split("/", 1)[-1] for name in WORKLOADS}


def usd(micros: int) -> str:
    """Micro-USD as the README writes it: six places, a minus sign when negative."""
    sign = "-" if micros < 0 else ""
    return f"{sign}{abs(micros) // MICRO}.{abs(micros) % MICRO:06d}"


def goes_to(row: dict[str, str]) -> str:
    kind, what = classify(row)
    if kind == "cluster":
        return f"cluster {what['name']}: reprices OpenCost's rows"
    label, cls = entry_label(what), what["class"]
    if cls == "shared":
        return f"{label}: shared, {what['key']} over {', '.join(what['services'])}"
    return f"{label}: {cls}" + (f" ({what['reason']})" if what.get("reason") else "")


def expected_tables(f: Figures) -> dict[str, list[list[str]]]:
    """Every table of the README, as the figures say it must read."""
    billing = []
    for r in billing_rows():
        category = r["ChargeCategory"]
        if r["CommitmentDiscountStatus"]:
            category += f", {r['CommitmentDiscountType']} {r['CommitmentDiscountStatus']}"
        billing.append(
            [r["ChargeDescription"], category, r["BilledCost"], r["EffectiveCost"], goes_to(r)]
        )
    billing.append(
        [
            "Total",
            "",
            str(sum(Decimal(r["BilledCost"]) for r in billing_rows())),
            str(sum(Decimal(r["EffectiveCost"]) for r in billing_rows())),
            "",
        ]
    )
    repricing = [
        [SHORT[c["name"]], WORKLOADS[c["name"]][0], usd(c["amount"]), usd(f.repriced[c["name"]])]
        for c in cost_rows()
    ]
    repricing.append(["Total", "", usd(f.opencost), usd(f.billed_effective)])
    shared = [e for e in rules()["rules"][0]["billed"] if e["class"] == "shared"]
    pools = [
        [
            entry_label(e),
            f"{e['key']} over {', '.join(e['services'])}",
            usd(f.pools[entry_label(e)]),
        ]
        + [usd(f.lines[(c, entry_label(e))]) for c in CLIENTS]
        for e in shared
    ]
    others = [
        [
            entry_label(e),
            e["class"],
            usd(
                f.pools.get(entry_label(e))
                if e["class"] != "outside"
                else f.outside[entry_label(e)]
            ),
        ]
        for e in rules()["rules"][0]["billed"]
        if e["class"] != "shared"
    ]
    sources = ["api", "import-worker", EXTERNAL[0]] + [entry_label(e) for e in shared]
    clients = [[s] + [usd(f.lines[(c, s)]) for c in CLIENTS] for s in sources]
    clients.append(["Total"] + [usd(f.clients[c]) for c in CLIENTS])
    residual = [["clients", usd(sum(f.clients.values()))], ["unattributed", usd(0)]]
    residual += [[cls, usd(f.residual[cls])] for cls in ("idle", "overhead", "reserve")]
    residual += [[f"excluded: {r}", usd(a)] for r, a in sorted(f.exclusions.items())]
    residual += [["unclassified", usd(0)]]
    reference = usd(f.effective_in_scope + EXTERNAL[1])
    statement = [
        *residual,
        ["reference total = billed effective in scope + external", reference],
        ["gap", usd(0)],
    ]
    invoice = [list(line) for line in residual]
    invoice += [
        [f"external: {EXTERNAL[0]}", usd(-EXTERNAL[1])],
        ["= effective cost in scope", usd(f.effective_in_scope)],
    ]
    invoice += [[f"outside: {n}", usd(a)] for n, a in f.outside.items()]
    invoice += [[f"bridge: {n}", usd(a)] for n, a in f.bridge.items()]
    invoice += [
        [f"= invoice total ({', '.join(f.invoices)})", usd(f.billed_total)],
        ["gap", usd(f.gap)],
    ]
    return {
        "billing": billing,
        "repricing": repricing,
        "pools": pools,
        "others": others,
        "clients": clients,
        "statement": statement,
        "invoice": invoice,
    }


MARKER = re.compile(r"<!-- figures: (\w+) -->\n((?:\|.*\|\n)+)")


def readme_tables(text: str) -> dict[str, list[list[str]]]:
    """The README's marked tables: header and separator dropped, ``**`` and backticks too."""
    tables = {}
    for name, body in MARKER.findall(text):
        rows = [line.strip().strip("|").split("|") for line in body.splitlines()[2:]]
        tables[name] = [[c.strip().replace("**", "").replace("`", "") for c in r] for r in rows]
    return tables


def prose_figures(f: Figures) -> set[str]:
    """Numbers the README's prose may quote: the figures, and the inputs they come from."""
    tables = expected_tables(f)
    known = {cell for rows in tables.values() for row in rows for cell in row}
    known |= {
        usd(v)
        for v in (
            f.opencost,
            f.billed_effective,
            2 * f.opencost,
            f.opencost + f.billed_effective,
            EXTERNAL[1],
            f.bridge["rounding"],
            f.effective_in_scope + EXTERNAL[1],
        )
    }
    # 0.578 -> 1.157: the double count as the README rounds it (to the thousandth)
    known |= {
        str((Decimal(v) / MICRO).quantize(Decimal("0.001"))) for v in (f.opencost, 2 * f.opencost)
    }
    known |= {
        f"{Fraction(f.billed_effective, f.opencost).__float__():.4f}",
        str(EXTERNAL[1] / MICRO),
    }
    known |= {str(Decimal(f.opencost) / MICRO)}
    known |= {str(sum(Decimal(r["BilledCost"]) for r in billing_rows()))}
    known |= {"0.065", "1.2", "2.0", "10", "0.4"}
    return known


def test_every_readme_table_holds_the_computed_figures():
    tables = readme_tables(README.read_text(encoding="utf-8"))
    expected = expected_tables(FIGURES)
    assert sorted(tables) == sorted(expected)
    for name, rows in expected.items():
        assert tables[name] == rows, name


def test_every_number_in_the_readme_prose_is_a_checked_figure():
    text = MARKER.sub("", README.read_text(encoding="utf-8"))
    text = re.sub(r"```.*?```", "", text, flags=re.DOTALL)
    numbers = set(re.findall(r"(?<![\w.-])-?\d+\.\d+(?![\w.])", text))
    numbers -= {n for n in numbers if re.fullmatch(r"20\d\d\.\d\d", n)}
    assert numbers and numbers <= prose_figures(FIGURES), numbers - prose_figures(FIGURES)


# --------------------------------------------------------------------------- the real CLI


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tenantcost", *args, "--config", str(RULES)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )


@pytest.fixture(scope="module")
def allocated() -> dict[str, Any]:
    done = cli("allocate", "--format", "json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def by_part(lines: list[dict[str, Any]]) -> dict[str, int]:
    out: dict[str, int] = defaultdict(int)
    for line in lines:
        out[line["part"]] += line["amount"]
    return dict(out)


def expected_invoice(f: Figures) -> dict[str, Any]:
    return {
        "currency": "USD",
        "billed_total": f.billed_total,
        "effective_in_scope": f.effective_in_scope,
        "invoices": [{"id": i, "billed_total": a} for i, a in f.invoices.items()],
        "repricing": [
            {
                "cluster": "cluster-one",
                "period_start": "2026-11-03T10:00:00Z",
                "period_end": "2026-11-03T11:00:00Z",
                "opencost": f.opencost,
                "billed_effective": f.billed_effective,
                "estimate": False,
            }
        ],
        "gap": 0,
    }


def check_invoice(doc: dict[str, Any], f: Figures) -> None:
    """The ``invoice`` object against the fractions: totals, parts, bridge lines by name."""
    for key, value in expected_invoice(f).items():
        assert doc[key] == value, key
    assert sum(line["amount"] for line in doc["lines"]) == doc["billed_total"]
    parts: dict[str, int] = defaultdict(int)
    for part, _, amount in f.invoice_lines():
        parts[part] += amount
    assert by_part(doc["lines"]) == {
        p: a for p, a in parts.items() if a or p in by_part(doc["lines"])
    }
    bridge = {line["name"]: line["amount"] for line in doc["lines"] if line["part"] == "bridge"}
    assert bridge == f.bridge


def test_allocate_gives_the_fraction_figures(allocated):
    f = FIGURES
    clients = {c["client"]: c["amount"] for c in allocated["clients"]}
    assert clients == f.clients
    lines = {
        (c["client"], line["source"]): line["amount"]
        for c in allocated["clients"]
        for line in c["lines"]
    }
    assert lines == f.lines
    residual: dict[str, int] = defaultdict(int)
    for item in allocated["residual"]:  # one item per class today; summed if per name
        residual[item["class"]] += item["amount"]
    assert {k: v for k, v in residual.items() if v} == f.residual
    reasons: dict[str, int] = defaultdict(int)
    for item in allocated["exclusions"]:
        reasons[item["reason"]] += item["amount"]
    assert dict(reasons) == f.exclusions
    assert allocated["reference_total"] == f.effective_in_scope + EXTERNAL[1]
    assert allocated["opencost_estimate"] == f.opencost
    assert allocated["billed_total"] == f.billed_total
    assert allocated["gap"] == 0
    check_invoice(allocated["invoice"], f)


def test_reconcile_against_invoice_json_is_the_invoice_object(allocated):
    done = cli("reconcile", "--against", "invoice", "--format", "json")
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    check_invoice(doc, FIGURES)
    assert doc == allocated["invoice"]


def test_reconcile_against_invoice_table_closes():
    done = cli("reconcile", "--against", "invoice")
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "Purchase" in out and "Usage / Savings Plan" in out and "rounding" in out, out
    assert usd(FIGURES.billed_total) in out and "INV-2026-11-001" in out, out
    gap = [line for line in out.splitlines() if line.startswith("gap")]
    assert gap and usd(0) in gap[0], out


def test_reconcile_default_cascade_closes():
    """``--against opencost`` (the default) closes too: today on OpenCost's estimate, with
    the core on billed money."""
    done = cli("reconcile", "--format", "json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["gap"] == 0


def test_the_example_has_the_inputs_of_saas_three_clients():
    """Only the billing changes: the OpenCost and usage files are those of saas-three-clients."""
    for name in ("costs.json", "usage.csv"):
        assert (EXAMPLE / name).read_bytes() == (
            ROOT / "examples/saas-three-clients" / name
        ).read_bytes()


def test_check_config_accepts_the_rule_file():
    done = subprocess.run(
        [sys.executable, "-m", "tenantcost", "check-config", str(RULES)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "ok" in done.stdout
