"""The month-over-month bridge (``tenantcost.bridge``): exact parts, symmetric, order-free.

Property tests run the pure core on generated line tables (any clients, sources, amounts and
measures, with or without a rule change and its restatements): the parts always add up to the
change exactly, a month compared with itself gives zero parts, reading the months the other
way round negates every part, and the order of the input rows does not matter. A worked
example (two months: a volume change, a rate change, a new source and a direct workload) is
computed here independently with exact fractions, without tenantcost, and compared with
``explain --format json``.
"""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pandas as pd
from hypothesis import example, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from tenantcost.bridge import (
    Comparison,
    Effect,
    bridges,
    client_bridge,
    month_figures,
)
from tenantcost.cli import app
from tenantcost.windows import Period

runner = CliRunner()

SOURCES = [
    ("shared", "api", "requests"),
    ("shared", "api", "cpu_seconds"),
    ("external", "search", "requests"),
    ("direct", "tenant-a/worker", ""),
    ("idle", "idle", "proportional"),
]
CLIENTS = ["a", "b", "c", "d"]


def test_effects_are_exactly_the_documented_strings():
    assert [str(e) for e in Effect] == [
        "volume",
        "rate",
        "rule",
        "residual",
        "direct",
        "new_source",
        "ended_source",
        "fx",
    ]


# --------------------------------------------------------------------------- generated lines

line = st.tuples(
    st.sampled_from(CLIENTS),
    st.sampled_from(range(len(SOURCES))),
    st.integers(min_value=0, max_value=10**10),  # amount, micro-units
    st.integers(min_value=1, max_value=10**12),  # measure, micro-units of its unit
)
lines = st.lists(line, max_size=14, unique_by=lambda t: (t[0], t[1]))


def figures(rows: list[tuple[str, int, int, int]], month: str, rules: tuple[str, ...]) -> Any:
    """A month's figures through :func:`month_figures`, from generated line rows."""
    frame = pd.DataFrame(
        {
            "client": [r[0] for r in rows],
            "kind": [SOURCES[r[1]][0] for r in rows],
            "source": [SOURCES[r[1]][1] for r in rows],
            "key": [SOURCES[r[1]][2] for r in rows],
            "amount": pd.Series([r[2] for r in rows], dtype="int64"),
            "measure": [
                float("nan") if SOURCES[r[1]][0] == "direct" else r[3] / 10**6 for r in rows
            ],
        }
    )
    result = SimpleNamespace(
        lines=frame,
        period=Period.month(month),
        rules=[SimpleNamespace(id=r) for r in rules],
        hours=24.0,
    )
    return month_figures(result, month)  # type: ignore[arg-type]


def comparison(
    early: list[Any], late: list[Any], crosses: tuple[list[Any], list[Any]] | None
) -> Comparison:
    if crosses is None:
        return Comparison(figures(early, "2026-10", ("r1",)), figures(late, "2026-11", ("r1",)))
    return Comparison(
        figures(early, "2026-10", ("r1",)),
        figures(late, "2026-11", ("r2",)),
        early_cross=figures(crosses[0], "2026-10", ("r2",)),
        late_cross=figures(crosses[1], "2026-11", ("r1",)),
    )


def totals(rows: list[Any]) -> dict[str, int]:
    out: dict[str, int] = {}
    for client, _, amount, _ in rows:
        out[client] = out.get(client, 0) + amount
    return out


@settings(max_examples=60, deadline=None)
@given(lines, lines, st.none() | st.tuples(lines, lines))
# a unit cost that moves by 10**18: volume and rate beyond int64, their sum within it
@example([("a", 0, 0, 999_999_979_520)], [("a", 0, 18_446_745, 1)], None)
def test_parts_add_up_to_the_change_exactly(early, late, crosses):
    b = bridges(comparison(early, late, crosses))
    before, after = totals(early), totals(late)
    for client in set(before) | set(after):
        parts = b.parts.loc[b.parts["client"] == client, "amount"]
        assert int(parts.sum()) == after.get(client, 0) - before.get(client, 0)
        assert int(b.amounts.loc[client, "change"]) == after.get(client, 0) - before.get(client, 0)
    assert set(b.parts["effect"]) <= {str(e) for e in Effect}


@settings(max_examples=40, deadline=None)
@given(lines)
def test_a_month_compared_with_itself_gives_zero_parts(rows):
    same = figures(rows, "2026-11", ("r1",))
    b = bridges(Comparison(same, same))
    assert (b.parts["amount"] == 0).all()
    assert set(b.parts["effect"]) <= {"volume", "rate", "residual", "direct"}
    for client in totals(rows):
        one = client_bridge(b, client, "2026-11", "USD")
        assert one.change == 0 and one.document()["change"] == 0


@settings(max_examples=40, deadline=None)
@given(lines, lines, st.none() | st.tuples(lines, lines))
def test_swapping_the_months_negates_every_part(early, late, crosses):
    b = bridges(comparison(early, late, crosses))
    for client in set(totals(early)) | set(totals(late)):
        forward = client_bridge(b, client, "2026-11", "USD").document()
        backward = client_bridge(b, client, "2026-10", "USD").document()
        assert (forward["month"], forward["vs"]) == (backward["vs"], backward["month"])
        assert forward["change"] == -backward["change"]
        assert [(p["effect"], p["source"], -p["amount"]) for p in forward["parts"]] == [
            (p["effect"], p["source"], p["amount"]) for p in backward["parts"]
        ]


@settings(max_examples=40, deadline=None)
@given(lines, lines, st.none() | st.tuples(lines, lines), st.randoms())
def test_the_order_of_input_rows_does_not_matter(early, late, crosses, rnd):
    def shuffled(rows: list[Any]) -> list[Any]:
        copy = list(rows)
        rnd.shuffle(copy)
        return copy

    mixed = (shuffled(crosses[0]), shuffled(crosses[1])) if crosses else None
    one = bridges(comparison(early, late, crosses)).parts
    two = bridges(comparison(shuffled(early), shuffled(late), mixed)).parts
    pd.testing.assert_frame_equal(one.reset_index(drop=True), two.reset_index(drop=True))


def test_volume_and_rate_are_the_symmetric_forms():
    """One source, one client: q 600 -> 750, unit cost 0.001 -> 0.0013 (exact decimals)."""
    early = figures([("a", 0, 600_000, 600 * 10**6)], "2026-10", ("r1",))
    late = figures([("a", 0, 975_000, 750 * 10**6)], "2026-11", ("r1",))
    parts = bridges(Comparison(early, late)).parts
    got = dict(zip(parts["effect"], parts["amount"], strict=True))
    # volume 150 x (0.001 + 0.0013) / 2 = 0.1725; rate 0.0003 x (600 + 750) / 2 = 0.2025
    assert got == {"volume": 172_500, "rate": 202_500}


# --------------------------------------------------------------------------- worked example

RULES = """
currency: USD
sources:
  costs: [costs.csv]
  usage: [usage.csv]
rules:
  - id: r1
    effective_from: "2026-09-01"
    workloads:
      - match: {namespace: app, controller: api}
        class: shared
        service: api
        key: requests
      - match: {namespace: app, controller: search}
        class: shared
        service: search
        key: requests
      - match: {namespace: tenant-acme}
        class: direct
        client: acme
      - match: {name: __idle__}
        class: idle
    idle: keep
"""
SEP = "2026-09-10T10:00:00Z,2026-09-10T11:00:00Z"
OCT = "2026-10-10T10:00:00Z,2026-10-10T11:00:00Z"


EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "two-months"


def worked_example(folder: Path) -> Path:
    """A copy of ``examples/two-months`` (written by :func:`write_worked_example`) in
    ``folder``: September, the API (1.00 USD) split 600:300 by requests, acme's own worker
    0.50; October, the API costs 1.30 and is split 700:400 (acme's requests rose by a sixth
    and the unit cost rose), a new search service (0.20) is split 50:150, acme's worker 0.55.
    """
    for name in ("rules.yaml", "costs.csv", "usage.csv"):
        (folder / name).write_text((EXAMPLE / name).read_text())
    return folder / "rules.yaml"


def write_worked_example(folder: Path) -> Path:
    """The example's files, as this test states them."""
    head = "window_start,window_end,name,cluster,namespace,controller_kind,controller,total_cost"
    (folder / "costs.csv").write_text(
        "\n".join(
            [
                head,
                f"{SEP},,c1,app,deployment,api,1.0",
                f"{SEP},,c1,tenant-acme,deployment,worker,0.5",
                f"{SEP},__idle__,c1,,,,0.3",
                f"{OCT},,c1,app,deployment,api,1.3",
                f"{OCT},,c1,app,deployment,search,0.2",
                f"{OCT},,c1,tenant-acme,deployment,worker,0.55",
                f"{OCT},__idle__,c1,,,,0.3",
            ]
        )
        + "\n"
    )
    (folder / "usage.csv").write_text(
        "\n".join(
            [
                "window_start,window_end,service,client,requests",
                f"{SEP},api,acme,600",
                f"{SEP},api,bravo,300",
                f"{OCT},api,acme,700",
                f"{OCT},api,bravo,400",
                f"{OCT},search,acme,50",
                f"{OCT},search,bravo,150",
            ]
        )
        + "\n"
    )
    rules = folder / "rules.yaml"
    rules.write_text(RULES)
    return rules


def test_the_example_folder_is_the_worked_example(tmp_path):
    write_worked_example(tmp_path)
    for name in ("rules.yaml", "costs.csv", "usage.csv"):
        assert (tmp_path / name).read_text() == (EXAMPLE / name).read_text()


def largest_remainder(parent: int, weights: dict[str, int]) -> dict[str, int]:
    """Independent split: floors, then one unit each to the largest remainders (ties by name)."""
    total = sum(weights.values())
    exact = {k: Fraction(parent * w, total) for k, w in weights.items()}
    out = {k: v.numerator // v.denominator for k, v in exact.items()}
    left = parent - sum(out.values())
    for k in sorted(exact, key=lambda k: (-(exact[k] - out[k]), k))[:left]:
        out[k] += 1
    return out


def expected_bridge(client: str) -> dict[str, Any]:
    """The worked example's bridge for ``client`` from 2026-09 to 2026-10, in fractions."""
    api_sep = largest_remainder(1_000_000, {"acme": 600, "bravo": 300})
    api_oct = largest_remainder(1_300_000, {"acme": 700, "bravo": 400})
    search = largest_remainder(200_000, {"acme": 50, "bravo": 150})
    q1, q2 = {"acme": 600, "bravo": 300}[client], {"acme": 700, "bravo": 400}[client]
    a1, a2 = api_sep[client], api_oct[client]
    direct = {"acme": (500_000, 550_000), "bravo": (0, 0)}[client]
    volume = (q2 - q1) * (Fraction(a1, q1) + Fraction(a2, q2)) / 2
    rate = (Fraction(a2, q2) - Fraction(a1, q1)) * Fraction(q1 + q2, 2)
    exact = [("volume", "api", volume), ("rate", "api", rate)]
    if client == "acme":
        exact.append(("direct", "tenant-acme/worker", Fraction(direct[1] - direct[0])))
    exact.append(("new_source", "search", Fraction(search[client])))
    before, after = a1 + direct[0], a2 + direct[1] + search[client]
    assert sum(x for _, _, x in exact) == after - before
    floors = [x.numerator // x.denominator for _, _, x in exact]
    left = (after - before) - sum(floors)
    order = sorted(range(len(exact)), key=lambda i: (-(exact[i][2] - floors[i]), i))
    for i in order[:left]:
        floors[i] += 1
    parts = [(e, s, f) for (e, s, _), f in zip(exact, floors, strict=True)]
    return {"from": before, "to": after, "parts": parts}


def explain_json(rules: Path, *args: str) -> dict[str, Any]:
    result = runner.invoke(
        app, ["explain", "--config", str(rules), "--format", "json", "--as-of", "2027-01-01", *args]
    )
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_worked_example_matches_the_independent_fractions(tmp_path):
    rules = worked_example(tmp_path)
    for client in ("acme", "bravo"):
        doc = explain_json(rules, "--client", client, "--month", "2026-10")
        want = expected_bridge(client)
        assert (doc["from_amount"], doc["to_amount"]) == (want["from"], want["to"])
        assert doc["change"] == want["to"] - want["from"]
        assert [(p["effect"], p["source"], p["amount"]) for p in doc["parts"]] == want["parts"]
        assert sum(p["amount"] for p in doc["parts"]) == doc["change"]
    acme = explain_json(rules, "--client", "acme", "--month", "2026-10")
    # the figures, written out: 0.666667 + 0.5 -> 0.827273 + 0.05 + 0.55
    assert (acme["from_amount"], acme["to_amount"], acme["change"]) == (
        1_166_667,
        1_427_273,
        260_606,
    )
    assert [p["amount"] for p in acme["parts"]] == [114_647, 45_959, 50_000, 50_000]
    assert [p["text"] for p in acme["parts"]] == [
        "+0.114647 USD: your api requests rose 17 %",
        "+0.045959 USD: the api's cost per 1,000 requests rose",
        "+0.05 USD: your own workload tenant-acme/worker cost more",
        "+0.05 USD: you started using search in 2026-10",
    ]
