"""The fast JSON writer of ``allocate --format json`` writes ``json.dumps(doc, indent=2)``
byte for byte: non-ASCII and quoted names, floats of every magnitude, empty keys."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from tenantcost.allocate import allocate
from tenantcost.cli import app
from tenantcost.writers.json_output import (
    client_documents,
    clients_json,
    result_document,
    result_json,
)

from .factories import BASIC_RULES, costs, rules, usage

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"

AWKWARD_FLOATS = [
    0.0, -0.0, 1e-05, 1.5e-10, 0.1, 1 / 3, 2 / 3, 123456789.123456789, 1e15, 1e16, 1e17,
    1.7976931348623157e308, 5e-324, float("nan"), float("inf"), -float("inf"), -2.5, 1e22,
]
NAMES = st.text(min_size=1, max_size=8).filter(lambda s: s.strip() != "") | st.sampled_from(
    ["Zürich AG", 'quote"d', "back\\slash", "日本", "tab\there", "\u2028", "😀", "a/b"]
)
FLOATS = st.sampled_from(AWKWARD_FLOATS) | st.floats(allow_nan=True, allow_infinity=True)


def _reference(totals: pd.DataFrame, grouped: pd.DataFrame) -> str:
    """The ``clients`` value as ``json.dumps(document, indent=2)`` writes it at level 1."""
    text = json.dumps({"clients": client_documents(totals, grouped)}, indent=2)
    return text[len('{\n  "clients": '): -len("\n}")]


@st.composite
def line_tables(draw: st.DrawFn) -> tuple[pd.DataFrame, pd.DataFrame]:
    """A client total table and its grouped lines (sorted by client, like client_lines)."""
    clients = draw(st.lists(NAMES, min_size=1, max_size=6, unique=True))
    rows = []
    for client in clients:
        for _ in range(draw(st.integers(1, 4))):
            rows.append({
                "client": client,
                "kind": draw(st.sampled_from(["shared", "external", "direct", "idle"])),
                "source": draw(NAMES),
                "key": draw(st.sampled_from(["", "requests", "cpu_seconds", "gewicht ä"])),
                "measure": draw(FLOATS),
                "share": draw(FLOATS),
                "amount": draw(st.integers(-(2**62), 2**62)),
                "windows": draw(st.integers(0, 10_000)),
            })
    grouped = pd.DataFrame(rows).sort_values("client", kind="stable").reset_index(drop=True)
    amounts = draw(st.lists(st.integers(-(10**15), 10**15), min_size=len(clients),
                            max_size=len(clients)))
    totals = pd.DataFrame({"client": clients, "amount": amounts})
    return totals, grouped


@settings(max_examples=200, deadline=None)
@given(line_tables())
def test_clients_json_is_json_dumps(tables: tuple[pd.DataFrame, pd.DataFrame]) -> None:
    totals, grouped = tables
    assert clients_json(totals, grouped) == _reference(totals, grouped)


def test_awkward_floats_are_written_like_json_dumps() -> None:
    """Every edge float in both float columns, one line each, under a non-ASCII client."""
    n = len(AWKWARD_FLOATS)
    grouped = pd.DataFrame({
        "client": ["Zürich \"AG\""] * n, "kind": ["shared"] * n, "source": ["svc"] * n,
        "key": ["requests"] * n, "measure": AWKWARD_FLOATS,
        "share": list(reversed(AWKWARD_FLOATS)), "amount": range(n), "windows": [744] * n,
    })
    totals = pd.DataFrame({"client": ["Zürich \"AG\""], "amount": [sum(range(n))]})
    text = clients_json(totals, grouped)
    assert text == _reference(totals, grouped)
    assert text is not None and '"client": "Z\\u00fcrich \\"AG\\""' in text
    assert '"measure": 1e-05,' in text and '"measure": 1e+16,' in text
    assert '"measure": null,' in text and '"measure": Infinity,' in text


def test_unusual_tables_fall_back_to_the_reference() -> None:
    """A client without lines, a line of an unknown client, a non-string name: None."""
    grouped = pd.DataFrame({
        "client": ["a"], "kind": ["shared"], "source": ["s"], "key": ["k"],
        "measure": [1.0], "share": [1.0], "amount": [5], "windows": [1],
    })
    assert clients_json(pd.DataFrame({"client": ["a", "b"], "amount": [5, 0]}), grouped) is None
    assert clients_json(pd.DataFrame({"client": ["b"], "amount": [5]}), grouped) is None
    odd = grouped.assign(source=[7])
    assert clients_json(pd.DataFrame({"client": ["a"], "amount": [5]}), odd) is None
    assert clients_json(pd.DataFrame({"client": [], "amount": []}), grouped.iloc[:0]) == "[]"


def test_result_json_is_the_document_on_a_real_allocation() -> None:
    """Direct lines (empty key, no measure), shared lines, a non-ASCII client."""
    c = costs([
        {"namespace": "saas", "controller": "api", "total_cost": 1.0},
        {"namespace": "tenant-a", "controller": "db", "total_cost": 0.5},
    ])
    u = usage([{"service": "api", "client": "Zürich", "requests": 3},
               {"service": "api", "client": "b\"q", "requests": 1}])
    result = allocate(c, u, rules(BASIC_RULES))
    assert result_json(result) == json.dumps(result_document(result), indent=2)


def test_allocate_format_json_on_the_examples(tmp_path: Path) -> None:
    """The CLI prints the reference document (plus echo's newline) on the bundled examples."""
    runner = CliRunner()
    for config in [EXAMPLES / "saas-three-clients" / "rules.yaml",
                   EXAMPLES / "idle-three-teams" / "rules-proportional.yaml"]:
        done = runner.invoke(app, ["allocate", "--config", str(config), "--format", "json"])
        assert done.exit_code == 0, done.output
        assert done.stdout == json.dumps(json.loads(done.stdout), indent=2) + "\n"
