"""Human-written sizes and counts (`cache_limit="10gb"`, `epoch_size="100k"`): what parses, and
the typed error (an ArgumentError, still a ValueError) naming what was wrong."""

from __future__ import annotations

import pytest

from streaming.errors import ArgumentError
from streaming.util.quantities import parse_bytes, parse_count


@pytest.mark.parametrize("value,expected", [
    (1024, 1024), (2.0, 2), ("64mb", 64 << 20), ("10GiB", 10 << 30), (" 3 kb ", 3 << 10),
    ("1.5k", 1536), ("7", 7), ("0", 0), ("2t", 2 << 40),
    ("12.8mb", 13421772), ("0.1kb", 102), ("1.3GiB", 1395864371),
])
def test_byte_sizes_use_binary_units(value, expected):
    assert parse_bytes(value) == expected


@pytest.mark.parametrize("value,expected", [
    ("100k", 100_000), ("64M", 64_000_000), ("2b", 2_000_000_000), ("1.5k", 1500),
    ("1e3", 1000), (12, 12),
])
def test_counts_use_decimal_units(value, expected):
    assert parse_count(value) == expected


@pytest.mark.parametrize("parse,value,message", [
    (parse_bytes, True, "byte size must be a number or a string like '64mb', got True"),
    (parse_bytes, 1.5, "byte size must be a whole number, got 1.5"),
    (parse_bytes, "12 parsecs", "cannot parse byte size '12 parsecs' (examples: '64mb'"),
    (parse_count, "64mb", "cannot parse count '64mb' (examples: '100k'"),
    (parse_bytes, [1], "byte size must be an int or a string, got list"),
    (parse_count, "1.0005k", "count '1.0005k' is not a whole number"),
    (parse_bytes, "1.5b", "byte size '1.5b' is not a whole number"),
    (parse_bytes, "2.5", "byte size '2.5' is not a whole number"),
    (parse_bytes, -1, "byte size must be non-negative, got -1"),
])
def test_bad_values_are_refused_naming_the_value(parse, value, message):
    with pytest.raises(ArgumentError) as info:
        parse(value)
    assert str(info.value).startswith(message)
    assert isinstance(info.value, ValueError)
