"""Every public class and function a user imports from `streaming`, `writers` or
`streaming.packing` documents each parameter of its signature in a Google-style `Args:` section,
and that section names no parameter the signature has lost (editors show both on hover)."""

from __future__ import annotations

import importlib
import inspect
import re
from collections.abc import Callable

import pytest

PACKAGES = ("streaming", "writers", "streaming.packing")
ENTRY = re.compile(r"\*{0,2}(\w+)\s*(?:\([^)]*\))?:(?:\s|$)")


def public_callables() -> dict[str, Callable[..., object]]:
    """Each package's `__all__` entries that are classes or functions, by qualified name."""
    found: dict[str, Callable[..., object]] = {}
    for package in PACKAGES:
        module = importlib.import_module(package)
        for name in module.__all__:
            value = getattr(module, name)
            if inspect.isclass(value) or inspect.isfunction(value):
                found.setdefault(f"{value.__module__}.{value.__qualname__}", value)
    return found


def documented_args(doc: str) -> list[str] | None:
    """Names of the `Args:` section's entries in order, or None without such a section.

    An entry starts at the section's first indentation (`name: text` or `name (type): text`);
    deeper lines continue it; the section ends at a line indented no deeper than `Args:`."""
    lines = inspect.cleandoc(doc).splitlines()
    starts = [i for i, line in enumerate(lines) if line.strip() == "Args:"]
    if not starts:
        return None
    header = lines[starts[0]]
    base = len(header) - len(header.lstrip())
    names: list[str] = []
    entry_indent: int | None = None
    for line in lines[starts[0] + 1:]:
        if not line.strip():
            continue
        indent = len(line) - len(line.lstrip())
        if indent <= base:
            break
        entry_indent = indent if entry_indent is None else entry_indent
        if indent == entry_indent:
            match = ENTRY.match(line.strip())
            if match is None:
                raise AssertionError(f"Args: entry without `name:` -> {line.strip()!r}")
            names.append(match.group(1))
    return names


VARIADIC = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)


def parameters(obj: Callable[..., object], variadic: bool = False) -> list[str]:
    """The parameters of `inspect.signature(obj)` (no self): the named ones, or with
    `variadic` the *args and **kwargs ones (which an Args: section may name, need not)."""
    return [p.name for p in inspect.signature(obj).parameters.values()
            if (p.kind in VARIADIC) == variadic]


def test_the_parser_reads_google_style_args() -> None:
    doc = """Summary.

    Args:
        alpha: First,
            continued here: with a colon.
        beta (int): Second.

        gamma: After a blank line.

    Returns:
        delta: not an argument.
    """
    assert documented_args(doc) == ["alpha", "beta", "gamma"]
    assert documented_args("No section.") is None


def test_the_public_surface_is_found() -> None:
    names = {qualified.rpartition(".")[2] for qualified in public_callables()}
    assert {"StreamingDataset", "Stream", "StreamingDataLoader", "MDSWriter", "JSONWriter",
            "CSVWriter", "TSVWriter", "XSVWriter", "LocalDataset", "PackedStreamingDataset",
            "PackedDataset", "plan_packs", "merge_index"} <= names


def mismatch(obj: Callable[..., object]) -> tuple[list[str], list[str]] | None:
    """(parameters the Args: section lacks, entries naming no parameter), or None when the
    callable has parameters and no Args: section."""
    wanted = parameters(obj)
    documented = documented_args(obj.__doc__ or "")
    if documented is None:
        return None if wanted else ([], [])
    assert len(documented) == len(set(documented)), f"{obj}: an Args: entry is repeated"
    allowed = wanted + parameters(obj, variadic=True)
    return ([n for n in wanted if n not in documented],
            [n for n in documented if n not in allowed])


def test_the_check_finds_missing_and_stale_entries() -> None:
    def kept(a: int, *rest: int, b: int = 0, **options: int) -> None:
        """Kept.

        Args:
            a: One.
            b: Two.
            **options: Passed on.
        """

    def renamed(a: int, c: int = 0) -> None:
        """Renamed.

        Args:
            a: One.
            b: The old name of c.
        """

    def bare(a: int) -> None:
        """No section."""

    assert mismatch(kept) == ([], [])
    assert mismatch(renamed) == (["c"], ["b"])
    assert mismatch(bare) is None


@pytest.mark.parametrize("qualified", sorted(public_callables()))
def test_args_section_matches_the_signature(qualified: str) -> None:
    obj = public_callables()[qualified]
    found = mismatch(obj)
    assert found is not None, f"{qualified} has parameters {parameters(obj)} but no Args:"
    missing, stale = found
    assert not missing and not stale, (
        f"{qualified}: Args: lacks {missing}, names parameters that do not exist {stale}")
