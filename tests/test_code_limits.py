"""The house's size limits, checked on the source: no file in streaming/ or writers/ over 450
lines, no function (methods and nested functions included) over 60 lines."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("streaming", "writers")
MAX_FILE_LINES = 450
MAX_FUNCTION_LINES = 60

# Long functions another branch is shortening, by "path:name", with that branch.
PENDING = {
}


def sources() -> list[Path]:
    return sorted(p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py"))


def long_functions(path: Path) -> list[tuple[str, int]]:
    """(name, lines) of every function in `path` longer than the limit, from `def` to its end."""
    tree = ast.parse(path.read_text(), str(path))
    return [(node.name, node.end_lineno - node.lineno + 1) for node in ast.walk(tree)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            and node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES]


def test_no_file_over_the_limit() -> None:
    offenders = []
    for path in sources():
        lines = len(path.read_text().splitlines())
        if lines > MAX_FILE_LINES:
            offenders.append(f"{path.relative_to(ROOT)}: {lines} lines")
    assert not offenders, f"files over {MAX_FILE_LINES} lines:\n" + "\n".join(offenders)


def test_no_function_over_the_limit() -> None:
    offenders = []
    for path in sources():
        relative = path.relative_to(ROOT).as_posix()
        for name, lines in long_functions(path):
            if f"{relative}:{name}" not in PENDING:
                offenders.append(f"{relative}:{name}: {lines} lines")
    assert not offenders, (f"functions over {MAX_FUNCTION_LINES} lines:\n"
                           + "\n".join(offenders))


def test_the_checker_counts_nested_functions(tmp_path: Path) -> None:
    body = "\n".join(f"        x{i} = {i}" for i in range(MAX_FUNCTION_LINES))
    path = tmp_path / "long.py"
    path.write_text(f"def outer():\n    def inner():\n{body}\n    return inner\n")
    assert dict(long_functions(path)) == {"outer": MAX_FUNCTION_LINES + 3,
                                          "inner": MAX_FUNCTION_LINES + 1}
