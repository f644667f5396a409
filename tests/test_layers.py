"""The layering docs/architecture.md promises, checked on the source: no import circles among
the modules' top-level imports, pure planning and format code free of torch and of the layers
above them, and writers independent of the reader's packing."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("streaming", "writers")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py")}


def _type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def top_level_imports(path: Path, name: str, known: dict[str, Path]) -> set[str]:
    """Modules `path` imports when it is imported (not inside functions, not for typing):
    `from a import b` depends on module a.b when there is one, else on a itself."""
    tree = ast.parse(path.read_text(), str(path))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    body = list(tree.body)
    while body:
        node = body.pop(0)
        if isinstance(node, ast.If) and not _type_checking(node):
            body.extend(node.body + node.orelse)
        elif isinstance(node, ast.Try):
            body.extend(node.body + node.orelse + node.finalbody)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            found.update(f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base
                         for alias in node.names)
    return found


def graph() -> dict[str, set[str]]:
    known = modules()
    return {name: {m for m in top_level_imports(path, name, known) if m in known and m != name}
            for name, path in known.items()}


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def test_the_checker_sees_a_circle() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_circles() -> None:
    assert cycles(graph()) == []


@pytest.mark.parametrize(("layer", "forbidden"), [
    ("streaming.plan", ("torch", "streaming.cache", "streaming.read", "streaming.storage",
                        "streaming.coord", "streaming.dataset")),
    ("streaming.format", ("torch", "streaming.cache", "streaming.read", "streaming.plan",
                          "streaming.dataset", "streaming.packing")),
    ("writers", ("streaming.packing", "streaming.dataset", "streaming.read")),
])
def test_lower_layers_do_not_import_upper_ones(layer: str, forbidden: tuple[str, ...]) -> None:
    known = modules()
    offenders = {}
    for name, path in known.items():
        if name != layer and not name.startswith(layer + "."):
            continue
        tree = ast.parse(path.read_text(), str(path))
        imported = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import)
                    for alias in node.names}
        imported |= {node.module or "" for node in ast.walk(tree)
                     if isinstance(node, ast.ImportFrom) and not node.level}
        bad = sorted(m for m in imported
                     if any(m == f or m.startswith(f + ".") for f in forbidden))
        if bad:
            offenders[name] = bad
    assert offenders == {}
