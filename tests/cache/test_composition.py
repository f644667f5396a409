"""The cache's modules are parts used through their public surface: no import circle among them
(counting imports inside functions and for type checking), no class built on another class of
the cache, and no underscore attribute read on anything but `self` or `cls`."""

from __future__ import annotations

import ast
from pathlib import Path

CACHE = Path(__file__).resolve().parents[2] / "streaming" / "cache"


def _trees() -> dict[str, ast.Module]:
    return {p.stem: ast.parse(p.read_text(), str(p)) for p in sorted(CACHE.glob("*.py"))}


def _imports(tree: ast.Module, names: set[str]) -> set[str]:
    """Cache modules `tree` imports anywhere (top level, functions, TYPE_CHECKING blocks)."""
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            if node.module.startswith("streaming.cache."):
                found.add(node.module.split(".")[2])
            elif node.module == "streaming.cache":
                found.update(alias.name for alias in node.names if alias.name in names)
        elif isinstance(node, ast.Import):
            found.update(alias.name.split(".")[2] for alias in node.names
                         if alias.name.startswith("streaming.cache."))
    return found & names


def _reaches(edges: dict[str, set[str]], start: str) -> set[str]:
    seen: set[str] = set()
    todo = list(edges[start])
    while todo:
        name = todo.pop()
        if name not in seen:
            seen.add(name)
            todo.extend(edges[name])
    return seen


def test_no_cache_module_imports_itself_through_others() -> None:
    trees = _trees()
    names = set(trees) - {"__init__"}
    edges = {name: _imports(trees[name], names) - {name} for name in names}
    circles = sorted(name for name in names if name in _reaches(edges, name))
    assert not circles, f"import circles through {circles}: {edges}"


def test_cache_parts_are_composed_not_inherited() -> None:
    trees = _trees()
    classes = {node.name for tree in trees.values() for node in ast.walk(tree)
               if isinstance(node, ast.ClassDef)}
    inherited = [f"{module}.{node.name}" for module, tree in trees.items()
                 for node in ast.walk(tree) if isinstance(node, ast.ClassDef)
                 and any(isinstance(base, ast.Name) and base.id in classes for base in node.bases)]
    assert not inherited, f"cache classes built on other cache classes: {inherited}"
    reached = [f"{module}:{node.lineno} {ast.unparse(node)}" for module, tree in trees.items()
               for node in ast.walk(tree) if isinstance(node, ast.Attribute)
               and node.attr.startswith("_") and not node.attr.startswith("__")
               and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"))]
    assert not reached, f"private attributes read across objects: {reached}"
