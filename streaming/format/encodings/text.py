"""Variable-size text-like encodings: bytes, str, str_int, str_float, str_decimal, json."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

import numpy as np

from streaming.format.encodings.base import Encoding


class BytesEncoding(Encoding):
    """`bytes`: stored as is; decodes to `bytes` (a copy, safe after the shard closes)."""

    name = "bytes"

    def encode(self, value: Any) -> bytes:
        if not isinstance(value, (bytes, bytearray, memoryview)):
            raise self.fail(value, "expected bytes, bytearray or memoryview")
        return bytes(value)

    def decode(self, data: memoryview | bytes) -> bytes:
        return bytes(data)


class StrEncoding(Encoding):
    """`str`: UTF-8 text."""

    name = "str"

    def encode(self, value: Any) -> bytes:
        if not isinstance(value, str):
            raise self.fail(value, "expected str")
        try:
            return value.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise self.fail(value, f"not encodable as UTF-8 ({exc.reason})") from exc

    def decode(self, data: memoryview | bytes) -> str:
        return str(data, "utf-8")


class StrIntEncoding(Encoding):
    """`str_int`: the decimal text of an integer; decodes to a Python int."""

    name = "str_int"

    def encode(self, value: Any) -> bytes:
        if not isinstance(value, (int, np.integer)) or isinstance(value, (bool, np.bool_)):
            raise self.fail(value, "expected an integer")
        return str(int(value)).encode("ascii")

    def decode(self, data: memoryview | bytes) -> int:
        return int(str(data, "ascii"))


class StrFloatEncoding(Encoding):
    """`str_float`: `str(float)` (shortest round-trip repr); decodes to a Python float."""

    name = "str_float"

    def encode(self, value: Any) -> bytes:
        if not isinstance(value, (float, int, np.floating, np.integer)) or isinstance(
            value, (bool, np.bool_)
        ):
            raise self.fail(value, "expected a float")
        return str(float(value)).encode("ascii")

    def decode(self, data: memoryview | bytes) -> float:
        return float(str(data, "ascii"))


class StrDecimalEncoding(Encoding):
    """`str_decimal`: `str(Decimal)`; decodes to `decimal.Decimal` without losing digits."""

    name = "str_decimal"

    def encode(self, value: Any) -> bytes:
        if not isinstance(value, (Decimal, int)) or isinstance(value, bool):
            raise self.fail(value, "expected decimal.Decimal or int")
        return str(Decimal(value)).encode("ascii")

    def decode(self, data: memoryview | bytes) -> Decimal:
        return Decimal(str(data, "ascii"))


class JSONEncoding(Encoding):
    """`json`: `json.dumps(value)` in UTF-8 (key order kept, like the reference writer)."""

    name = "json"

    def encode(self, value: Any) -> bytes:
        try:
            return json.dumps(value).encode("utf-8")
        except (TypeError, ValueError) as exc:
            raise self.fail(value, f"not JSON-serialisable ({exc})") from exc

    def decode(self, data: memoryview | bytes) -> Any:
        return json.loads(bytes(data))


def text_encodings() -> dict[str, Encoding]:
    """Every encoding of this family, keyed by name."""
    kinds = (
        BytesEncoding, StrEncoding, StrIntEncoding, StrFloatEncoding, StrDecimalEncoding,
        JSONEncoding,
    )
    return {kind.name: kind() for kind in kinds}
