"""Parse human-written sizes ("64mb", "10GiB") and counts ("100k", "2b") into integers."""

from __future__ import annotations

import math
import os
import re
from fractions import Fraction

from streaming.errors import ArgumentError

_BYTE_UNITS = {
    "": 1, "b": 1,
    "k": 1 << 10, "kb": 1 << 10, "kib": 1 << 10,
    "m": 1 << 20, "mb": 1 << 20, "mib": 1 << 20,
    "g": 1 << 30, "gb": 1 << 30, "gib": 1 << 30,
    "t": 1 << 40, "tb": 1 << 40, "tib": 1 << 40,
}
_COUNT_UNITS = {"": 1, "k": 10**3, "m": 10**6, "b": 10**9, "g": 10**9, "t": 10**12}
_PATTERN = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:e[0-9]+)?)\s*([a-z]*)\s*$")


def _parse(value: int | float | str, units: dict[str, int], what: str, *,
           fractions_of_unit: bool = False) -> int:
    if isinstance(value, bool):
        raise ArgumentError(f"{what} must be a number or a string like '64mb', got {value!r}")
    if isinstance(value, int):
        number, scale = value, 1
    elif isinstance(value, float):
        if not value.is_integer():
            raise ArgumentError(f"{what} must be a whole number, got {value!r}")
        number, scale = int(value), 1
    elif isinstance(value, str):
        match = _PATTERN.match(value.lower())
        if not match or match.group(2) not in units:
            raise ArgumentError(f"cannot parse {what} {value!r} (examples: {_examples(units)})")
        number, scale = Fraction(match.group(1)), units[match.group(2)]
    else:
        raise ArgumentError(f"{what} must be an int or a string, got {type(value).__name__}")
    result = number * scale
    if isinstance(result, Fraction):
        if result.denominator != 1 and not (fractions_of_unit and scale > 1):
            raise ArgumentError(f"{what} {value!r} is not a whole number")
        result = math.floor(result)
    if result < 0:
        raise ArgumentError(f"{what} must be non-negative, got {value!r}")
    return result


def _examples(units: dict[str, int]) -> str:
    return "'64mb', '10gb', 1024" if "mb" in units else "'100k', '64M', '2b', 1000"


def parse_bytes(value: int | float | str) -> int:
    """Bytes from an int or a string with a binary unit: '64mb' == 64 * 2**20.

    A decimal of a unit larger than a byte ('12.8mb') is rounded down to a whole byte.

    Args:
        value: a byte count, or a number followed by a unit.
    """
    return _parse(value, _BYTE_UNITS, "byte size", fractions_of_unit=True)


def byte_setting(name: str, default: int) -> int:
    """A positive byte count from environment variable `name`, as `parse_bytes` reads it
    ('512mb', '4gb', 1073741824); `default` when it is unset or blank.

    Args:
        name: the environment variable.
        default: the count when it is not set.

    Raises:
        ArgumentError: the setting is not a positive byte count (naming it).
    """
    text = os.environ.get(name)
    if text is None or not text.strip():
        return default
    try:
        value = parse_bytes(text)
    except ArgumentError:
        value = 0
    if value <= 0:
        raise ArgumentError(f"{name}={text!r} must be a positive number of bytes (such as "
                            f"1073741824 or '1gb')")
    return value


def parse_count(value: int | float | str) -> int:
    """A count from an int or a string with a decimal suffix: '100k', '64M', '2b'.

    Args:
        value: a count, or a number followed by a suffix; the result must be whole.
    """
    return _parse(value, _COUNT_UNITS, "count")


def human_bytes(count: float) -> str:
    """A byte count as people read it: 1536 -> '1.5 KiB' (the inverse of `parse_bytes`)."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(count) < 1024 or unit == "TiB":
            return f"{count:.0f} {unit}" if unit == "B" else f"{count:.1f} {unit}"
        count /= 1024
    return f"{count:.1f} TiB"
