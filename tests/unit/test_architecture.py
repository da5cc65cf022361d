"""The shape of the code: arrows point down only.

The graph is read from the source with ``ast`` (no import runs): every ``import`` of an ``autodev`` module,
at the top of a module, inside a function or under ``TYPE_CHECKING`` alike, since a lazy import or one for
the type checker only is a circle all the same, just hidden.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import autodev

SOURCE = Path(autodev.__file__).resolve().parent
# Only these may know the facade: the package's public entry points and the CLI that drives it.
FACADE = "autodev.orchestrator.core"
FACADE_USERS = frozenset({"autodev", "autodev.orchestrator", "autodev.cli.app"})


def _module_name(path: Path) -> str:
    parts = path.relative_to(SOURCE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@cache
def _modules() -> dict[str, Path]:
    return {_module_name(path): path for path in SOURCE.rglob("*.py")}


def _imported(module: str, path: Path) -> Iterator[str]:
    """Every ``autodev`` module ``module`` imports, resolved to a module that exists."""
    known = _modules()
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            targets = [
                f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base for alias in node.names
            ]
        for target in targets:
            while target not in known and "." in target:
                target = target.rpartition(".")[0]
            if target in known and target != module and target.startswith("autodev"):
                yield target


@cache
def _graph() -> dict[str, frozenset[str]]:
    return {module: frozenset(_imported(module, path)) for module, path in _modules().items()}


def _circles(graph: dict[str, frozenset[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan, iteratively)."""
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
            node, edges = work[-1]
            for target in edges:
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(sorted(graph[target]))))
                    break
                if target in on_stack:
                    low[node] = min(low[node], index[target])
            else:
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
    return found


def test_the_graph_is_read_from_the_source() -> None:
    graph = _graph()
    assert len(graph) > 50
    assert "autodev.workspace.git" in graph["autodev.orchestrator.delegate"]


def test_the_circle_finder_finds_circles() -> None:
    graph = {"a": frozenset({"b"}), "b": frozenset({"c"}), "c": frozenset({"a"}), "d": frozenset({"a"})}
    assert _circles(graph) == [["a", "b", "c"]]


def test_no_module_imports_itself_back_through_others() -> None:
    assert _circles(_graph()) == []


def test_nothing_below_the_facade_knows_the_orchestrator() -> None:
    # The ``autodev.orchestrator`` package re-exports the facade: importing it is knowing it.
    facade = {FACADE, "autodev.orchestrator"}
    users = sorted(module for module, imported in _graph().items() if imported & facade)
    assert set(users) <= FACADE_USERS, users
