"""The layering docs/architecture.md promises, checked on the source. Every import counts: at
the top of a module, inside functions and under `TYPE_CHECKING` (a lazy import is still a
dependency, and a circle hidden in a function is still a circle). Checked: no import circles
outside a short allow-list, each layer free of the layers above it, at most eight modules at
the top of streaming/, and no file name used twice."""

from __future__ import annotations

import ast
from collections import Counter
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("streaming", "writers")

# Circles that exist today, each with the reason it is tolerated. An entry whose circle is gone
# must leave the list (test_allowed_circles_still_exist).
ALLOWED_CIRCLES: dict[frozenset[str], str] = {}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py")}


@cache
def parsed(path: Path) -> ast.Module:
    return ast.parse(path.read_text(), str(path))


def imports(path: Path, name: str, known: dict[str, Path]) -> set[str]:
    """Every module `path` imports, wherever the import statement stands: `from a import b`
    depends on module a.b when there is one, else on a itself."""
    tree = parsed(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
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
    return {name: {m for m in imports(path, name, known) if m in known and m != name}
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


def test_the_checker_counts_lazy_and_typing_imports(tmp_path: Path) -> None:
    source = tmp_path / "m.py"
    source.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import a.b\n"
                      "def f():\n    from c import d\n")
    known = {"a.b": source, "c": source}
    assert imports(source, "m", known) == {"typing", "a.b", "c"}


def test_no_import_circles() -> None:
    found = {frozenset(c) for c in cycles(graph())}
    assert sorted(sorted(c) for c in found - set(ALLOWED_CIRCLES)) == []


def test_allowed_circles_still_exist() -> None:
    found = {frozenset(c) for c in cycles(graph())}
    assert sorted(sorted(c) for c in set(ALLOWED_CIRCLES) - found) == []


def unit(module: str) -> str:
    """The package of streaming/ (or top-level module, `streaming.stream`) a module belongs to;
    writers is one unit."""
    parts = module.split(".")
    return ".".join(parts[:2]) if parts[0] == "streaming" else parts[0]


def two_way_edges(edges: dict[str, set[str]]) -> dict[frozenset[str], list[str]]:
    """Pairs of units that import each other, with the module imports of each direction."""
    between: dict[tuple[str, str], list[str]] = {}
    for source, targets in edges.items():
        for target in targets:
            a, b = unit(source), unit(target)
            if a != b:
                between.setdefault((a, b), []).append(f"{source} -> {target}")
    return {frozenset((a, b)): sorted(between[a, b] + between[b, a])
            for a, b in between if (b, a) in between and a < b}


def test_the_checker_sees_a_two_way_edge() -> None:
    edges = {"streaming.a.x": {"streaming.b.y"}, "streaming.b.y": set(),
             "streaming.b.z": {"streaming.a"}, "streaming.a": set(), "streaming.c": {"streaming.a"}}
    assert two_way_edges(edges) == {frozenset({"streaming.a", "streaming.b"}): [
        "streaming.a.x -> streaming.b.y", "streaming.b.z -> streaming.a"]}


def test_no_two_packages_import_each_other() -> None:
    """Package level: no two packages of streaming/ (a top-level module such as stream.py
    counts as one) import each other both ways, lazy and TYPE_CHECKING imports included."""
    assert two_way_edges(graph()) == {}


_ABOVE_CORE = ("streaming.dataset", "streaming.loader", "streaming.packing", "streaming.observe",
               "streaming.cli", "streaming.integrations", "streaming.base")


@pytest.mark.parametrize(("layer", "forbidden"), [
    # Pure planning and format code: no torch, no I/O layers, nothing above them.
    ("streaming.plan", ("torch", "streaming.cache", "streaming.read", "streaming.storage",
                        "streaming.coord", "streaming.format", "streaming.stream",
                        *_ABOVE_CORE)),
    ("streaming.format", ("torch", "streaming.cache", "streaming.read", "streaming.plan",
                          "streaming.storage", "streaming.coord", "streaming.stream",
                          *_ABOVE_CORE)),
    # Helpers every layer may use: only errors and the worker/world facts below them.
    ("streaming.util", ("torch", "streaming.cache", "streaming.read", "streaming.plan",
                        "streaming.storage", "streaming.format", "streaming.stream",
                        "streaming.coord",
                        *_ABOVE_CORE)),
    # Storage moves bytes; it knows nothing of plans, caches or readers.
    ("streaming.storage", ("torch", "streaming.cache", "streaming.read", "streaming.plan",
                           "streaming.stream", *_ABOVE_CORE)),
    # Coordination between processes of a node: shared memory, locks, the world.
    ("streaming.coord", ("streaming.cache", "streaming.read", "streaming.storage",
                         "streaming.format", "streaming.stream", *_ABOVE_CORE)),
    # The node cache makes shards ready; it does not read rows nor know the dataset.
    # It prepares a stream's files through `cache.prepare.stream_files.StreamFiles`, not the Stream.
    ("streaming.cache", ("torch", "streaming.read", "streaming.stream", *_ABOVE_CORE)),
    # The read side turns a worker's plan into rows through a ShardSource, never storage.
    ("streaming.read", ("torch", "streaming.storage", "streaming.plan", "streaming.stream",
                        *_ABOVE_CORE)),
    # Packing plans over lengths and serves packs; the loader and the CLI sit above it.
    ("streaming.packing", ("streaming.loader", "streaming.cli", "streaming.integrations",
                           "streaming.base")),
    # The loader batches a dataset; shards, caches and storage are the dataset's business.
    ("streaming.loader", ("streaming.cache", "streaming.read", "streaming.storage",
                          "streaming.format", "streaming.plan", "streaming.cli",
                          "streaming.integrations", "streaming.base")),
    # Packing builds on the dataset (it packs a StreamingDataset's plan), never the reverse.
    ("streaming.dataset", ("streaming.loader", "streaming.packing", "streaming.cli",
                           "streaming.integrations", "streaming.base")),
    ("streaming.observe", ("streaming.dataset", "streaming.loader", "streaming.packing",
                           "streaming.read", "streaming.storage", "streaming.cli",
                           "streaming.integrations", "streaming.base")),
    ("writers", ("torch", "streaming.cache", "streaming.read", "streaming.plan",
                 "streaming.coord", *_ABOVE_CORE)),
])
def test_lower_layers_do_not_import_upper_ones(layer: str, forbidden: tuple[str, ...]) -> None:
    assert forbidden_imports(layer, forbidden) == {}


def forbidden_imports(layer: str, forbidden: tuple[str, ...]) -> dict[str, list[str]]:
    """Module of `layer` -> the absolute imports it makes of `forbidden` modules (or below)."""
    offenders = {}
    for name, path in modules().items():
        if name != layer and not name.startswith(layer + "."):
            continue
        tree = parsed(path)
        imported = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import)
                    for alias in node.names}
        imported |= {node.module or "" for node in ast.walk(tree)
                     if isinstance(node, ast.ImportFrom) and not node.level}
        bad = sorted(m for m in imported
                     if any(m == f or m.startswith(f + ".") for f in forbidden))
        if bad:
            offenders[name] = bad
    return offenders


# Inside the cache, each part uses only the parts listed for it (and `shard_facts`): the policy
# is pure and shared by the engine, the simulation and `streaming plan`; the engine sits on top.
_CACHE_PARTS = ("policy", "folder", "prepare", "table", "engine")
_CACHE_USES = {
    "policy": (),
    "folder": (),
    "prepare": ("folder",),
    "table": ("policy",),
    "engine": ("policy", "folder", "prepare", "table"),
}


@pytest.mark.parametrize("part", _CACHE_PARTS)
def test_cache_parts_use_only_the_parts_below_them(part: str) -> None:
    prefix = f"streaming.cache.{part}"
    allowed = {f"streaming.cache.{p}" for p in (part, *_CACHE_USES[part])}
    offenders = {}
    for name, deps in graph().items():
        if name != prefix and not name.startswith(prefix + "."):
            continue
        bad = sorted(d for d in deps if d.startswith("streaming.cache.")
                     and d != "streaming.cache.shard_facts"
                     and not any(d == a or d.startswith(a + ".") for a in allowed))
        if bad:
            offenders[name] = bad
    assert offenders == {}


def test_the_cache_policy_is_pure() -> None:
    """No threads, files, shared memory or torch in the policy: the simulation and `streaming
    plan` run it offline exactly as the engine runs it live."""
    impure = ("torch", "threading", "os", "shutil", "mmap", "multiprocessing", "streaming.coord",
              "streaming.storage", "streaming.stream")
    assert forbidden_imports("streaming.cache.policy", impure) == {}


def test_at_most_eight_modules_at_the_top_of_streaming() -> None:
    top = sorted(p.name for p in (ROOT / "streaming").glob("*.py"))
    assert len(top) <= 8, top


def test_no_file_name_is_used_twice() -> None:
    """Apart from `__init__.py` and the reference's import paths under streaming/base/."""
    names = Counter(p.name for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py")
                    if p.name != "__init__.py" and "base" not in p.relative_to(ROOT).parts[1:2])
    assert sorted(name for name, count in names.items() if count > 1) == []


def test_architecture_lists_every_module() -> None:
    """docs/architecture.md names every module under its package's heading (`streaming/cache/`
    then "- `index_diff.py`: ..."; subpackage files as `batching/random.py`)."""
    listed: set[str] = set()
    section = ""
    for line in (ROOT / "docs" / "architecture.md").read_text().splitlines():
        if line.startswith("`") and line.endswith("/`"):
            section = line.strip("`")
        elif section and line.startswith("- `") and "`:" in line:
            listed.add(section + line[3:line.index("`:")])
    missing = []
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            relative = path.relative_to(ROOT).as_posix()
            parts = relative.split("/")
            heading = "/".join(parts[:2]) + "/" if len(parts) > 2 else parts[0] + "/"
            if heading + "/".join(parts[len(heading.strip("/").split("/")):]) not in listed:
                missing.append(relative)
    assert not missing, f"modules docs/architecture.md does not list: {missing}"


# The picture of the package structure in docs/architecture.md, generated from the imports:
# `.venv/bin/python tests/test_layers.py` rewrites it; the test below keeps it current.
PICTURE_START, PICTURE_END = "<!-- package-graph:start -->", "<!-- package-graph:end -->"


def package_of(module: str) -> str | None:
    """The box a module is drawn in: `writers`, a package of streaming (`read`), a part of the
    cache (`cache/engine`, `cache/shard_facts.py`) or a top-level module (`stream.py`); None for
    what is not drawn (`streaming` itself and errors.py, which every layer imports)."""
    parts = module.split(".")
    if parts[0] == "writers":
        return "writers"
    if len(parts) == 1 or parts[1] == "errors":
        return None
    if (ROOT / "streaming" / f"{parts[1]}.py").exists():
        return f"{parts[1]}.py"
    if parts[1] == "cache" and len(parts) > 2:
        part = ROOT / "streaming" / "cache" / parts[2]
        return f"cache/{parts[2]}" if part.is_dir() else f"cache/{parts[2]}.py"
    return parts[1]


def package_edges() -> dict[str, set[str]]:
    """Box -> the boxes its modules import (package `__init__` re-exports left out)."""
    edges: dict[str, set[str]] = {}
    known = modules()
    for name, deps in graph().items():
        source = package_of(name)
        if source is None or known[name].name == "__init__.py":
            continue
        edges.setdefault(source, set())
        edges[source] |= {t for t in map(package_of, deps) if t is not None and t != source}
    return edges


def transitive_reduction(edges: dict[str, set[str]]) -> dict[str, set[str]]:
    """The edges no longer path implies (the graph has no circles between boxes)."""
    def reach(start: str) -> set[str]:
        seen: set[str] = set()
        todo = list(edges.get(start, ()))
        while todo:
            node = todo.pop()
            if node not in seen:
                seen.add(node)
                todo.extend(edges.get(node, ()))
        return seen

    return {a: {b for b in targets if not any(b in reach(c) for c in targets - {b})}
            for a, targets in edges.items()}


def package_picture() -> str:
    """A mermaid flowchart of the boxes, each arrow `A --> B` saying A imports B (arrows a
    longer path already implies are left out)."""
    reduced = transitive_reduction(package_edges())
    ids = {box: box.replace("/", "_").replace(".", "_") for box in reduced}
    lines = ["```mermaid", "flowchart TD"]
    lines += [f'    {ids[box]}["{box}"]' for box in sorted(reduced)]
    lines += [f"    {ids[a]} --> {ids[b]}" for a in sorted(reduced) for b in sorted(reduced[a])]
    return "\n".join([*lines, "```"])


def _doc_with_picture(text: str) -> str:
    head, _, rest = text.partition(PICTURE_START + "\n")
    _, _, tail = rest.partition(PICTURE_END)
    return f"{head}{PICTURE_START}\n{package_picture()}\n{PICTURE_END}{tail}"


def test_the_package_boxes_have_no_circles() -> None:
    assert cycles({a: set(b) for a, b in package_edges().items()} | {
        b: set() for targets in package_edges().values() for b in targets
        if b not in package_edges()}) == []


def test_architecture_shows_the_package_graph_of_the_code() -> None:
    """The picture in docs/architecture.md is the one the imports draw today (regenerate it
    with `.venv/bin/python tests/test_layers.py`)."""
    text = (ROOT / "docs" / "architecture.md").read_text()
    assert PICTURE_START in text and PICTURE_END in text
    assert text == _doc_with_picture(text), "regenerate: .venv/bin/python tests/test_layers.py"


def test_transitive_reduction_keeps_only_arrows_no_path_implies() -> None:
    edges = {"a": {"b", "c"}, "b": {"c"}, "c": set()}
    assert transitive_reduction(edges) == {"a": {"b"}, "b": {"c"}, "c": set()}


if __name__ == "__main__":
    doc = ROOT / "docs" / "architecture.md"
    doc.write_text(_doc_with_picture(doc.read_text()))
