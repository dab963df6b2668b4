"""The package's layers, checked from its imports: no cycle, no upward import.

The graph is read with ``ast`` from the source of ``tenantcost/``, one node per module. Every
import statement counts wherever it stands (module level, inside a function, under
``TYPE_CHECKING``), because a function-level import is still a dependency: it only hides the
loop from the interpreter until the function runs. A module importing its own package's
``__init__`` (``tenantcost``, ``tenantcost.store`` from ``tenantcost.store.x``) does not count.

The layers are the ones ``docs/architecture.md`` shows, read from its ``text`` block, so the
page and the check cannot disagree. The checker's own tests build small packages on disk and
show that it finds a cycle hidden in a function, one under ``TYPE_CHECKING``, and an upward
import.
"""

from __future__ import annotations

import ast
import fnmatch
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ARCHITECTURE = ROOT / "docs" / "architecture.md"


@dataclass(frozen=True)
class Import:
    """One import of ``target`` by ``source`` at ``line``."""

    source: str
    target: str
    line: int


def modules(package_dir: Path) -> dict[str, tuple[Path, bool]]:
    """Every module of the package: dotted name -> (file, is a package ``__init__``)."""
    found: dict[str, tuple[Path, bool]] = {}
    for path in sorted(package_dir.rglob("*.py")):
        parts = list(path.relative_to(package_dir.parent).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        if is_package:
            parts = parts[:-1]
        found[".".join(parts)] = (path, is_package)
    return found


def _names(module: str, is_package: bool, node: ast.Import | ast.ImportFrom) -> list[str]:
    """The dotted names an import statement may refer to (a module, or a name in one)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if node.level:
        base = module.split(".") if is_package else module.split(".")[:-1]
        base = base[: len(base) - (node.level - 1)]
        prefix = ".".join(base + ([node.module] if node.module else []))
    else:
        prefix = node.module or ""
    return [prefix] + [f"{prefix}.{alias.name}" for alias in node.names]


@cache
def imports(package_dir: Path) -> list[Import]:
    """Every import of one of the package's modules by another, as the rules count them
    (cached: the package's tests read its graph more than once)."""
    known = modules(package_dir)
    found: set[Import] = set()
    for module, (path, is_package) in known.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            if not isinstance(node, ast.Import | ast.ImportFrom):
                continue
            for name in _names(module, is_package, node):
                parts = name.split(".")
                while parts and ".".join(parts) not in known:
                    parts.pop()
                target = ".".join(parts)
                if not target or target == module:
                    continue
                if known[target][1] and module.startswith(target + "."):
                    continue  # its own package's __init__
                found.add(Import(module, target, node.lineno))
    return sorted(found, key=lambda i: (i.source, i.target, i.line))


def cycles(edges: list[Import]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan, iterative)."""
    graph: dict[str, set[str]] = {}
    for edge in edges:
        graph.setdefault(edge.source, set()).add(edge.target)
        graph.setdefault(edge.target, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
            elif child not in index:
                index[child] = low[child] = len(index)
                stack.append(child)
                on_stack.add(child)
                work.append((child, iter(sorted(graph[child]))))
            elif child in on_stack:
                low[node] = min(low[node], index[child])
    return sorted(found)


def declared_layers(page: Path = ARCHITECTURE) -> list[tuple[str, list[str]]]:
    """The layers of ``docs/architecture.md``, lowest first: (name, module patterns)."""
    text = page.read_text(encoding="utf-8")
    block = re.search(r"```text\n(base:.*?)```", text, re.DOTALL)
    assert block, f"{page}: no ```text block starting with 'base:' (the layers)"
    layers = []
    for line in block.group(1).splitlines():
        name, _, patterns = line.partition(":")
        layers.append((name.strip(), patterns.split()))
    return layers


def layer_of(module: str, layers: list[tuple[str, list[str]]], package: str) -> int | None:
    """The position of the module's layer (0 = lowest), or None when no layer names it."""
    short = module.removeprefix(package + ".") if module != package else package
    for position, (_, patterns) in enumerate(layers):
        if any(fnmatch.fnmatchcase(short, pattern) for pattern in patterns):
            return position
    return None


def upward(edges: list[Import], layers: list[tuple[str, list[str]]], package: str) -> list[str]:
    """Each import of a module in a higher layer, as ``a:line imports b (low -> high)``."""
    bad = []
    for edge in edges:
        source, target = (
            layer_of(edge.source, layers, package),
            layer_of(edge.target, layers, package),
        )
        if source is not None and target is not None and target > source:
            bad.append(
                f"{edge.source}:{edge.line} imports {edge.target} "
                f"({layers[source][0]} -> {layers[target][0]})"
            )
    return bad


# ------------------------------------------------------------------------------ the package


def test_no_import_cycle_among_tenantcost_modules() -> None:
    found = cycles(imports(ROOT / "tenantcost"))
    assert found == [], "import cycles:\n" + "\n".join(" <-> ".join(c) for c in found)


def test_every_module_has_a_layer_and_every_layer_entry_names_a_module() -> None:
    layers = declared_layers()
    names = list(modules(ROOT / "tenantcost"))
    assert layers[0][0] == "base" and len(layers) >= 6
    unplaced = [m for m in names if layer_of(m, layers, "tenantcost") is None]
    assert unplaced == [], f"modules no layer of {ARCHITECTURE.name} names: {unplaced}"
    short = ["tenantcost" if m == "tenantcost" else m.removeprefix("tenantcost.") for m in names]
    stale = [p for _, ps in layers for p in ps if not any(fnmatch.fnmatchcase(s, p) for s in short)]
    assert stale == [], f"layer entries that name no module: {stale}"


def test_each_layer_imports_only_from_the_layers_below_it() -> None:
    bad = upward(imports(ROOT / "tenantcost"), declared_layers(), "tenantcost")
    assert bad == [], "upward imports:\n" + "\n".join(bad)


# ------------------------------------------------------------------------ the checker itself


def _package(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "pkg"
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


def test_checker_finds_a_cycle_hidden_in_a_function_or_under_type_checking(
    tmp_path: Path,
) -> None:
    root = _package(
        tmp_path,
        {
            "__init__.py": "",
            "a.py": "def f():\n    from pkg.b import g\n",
            "b.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg import c\n",
            "c.py": "from . import a\n",
            "d.py": "import pkg.a\n",
        },
    )
    assert cycles(imports(root)) == [["pkg.a", "pkg.b", "pkg.c"]]


def test_checker_ignores_a_module_importing_its_own_package(tmp_path: Path) -> None:
    root = _package(
        tmp_path,
        {
            "__init__.py": "from pkg.sub import x\n",
            "sub/__init__.py": "from pkg.sub.x import y\n",
            "sub/x.py": "import pkg\nfrom pkg.sub import something\ny = 1\n",
        },
    )
    edges = imports(root)
    assert cycles(edges) == []
    assert ("pkg.sub.x", "pkg.sub") not in {(e.source, e.target) for e in edges}


def test_checker_reports_an_upward_import_with_its_line(tmp_path: Path) -> None:
    root = _package(
        tmp_path,
        {
            "__init__.py": "",
            "money.py": "\n\ndef f():\n    from pkg.report.page import x\n",
            "report/__init__.py": "",
            "report/page.py": "from pkg.money import f\n",
        },
    )
    layers = [("base", ["money", "pkg"]), ("report", ["report", "report.*"])]
    edges = imports(root)
    assert upward(edges, layers, "pkg") == ["pkg.money:4 imports pkg.report.page (base -> report)"]
    assert cycles(edges) == [["pkg.money", "pkg.report.page"]]
