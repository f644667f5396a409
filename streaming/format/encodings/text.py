"""Variable-size text-like encodings: bytes, str, str_int, str_float, str_decimal, json."""

from __future__ import annotations

import json
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import numpy as np

from streaming.format.encodings.encoding import Encoding, FileBytes


class BytesEncoding(Encoding):
    """`bytes`: stored as is; decodes to `bytes` (a copy, safe after the shard closes)."""

    name = "bytes"

    def encode(self, value: Any) -> bytes:
        if not isinstance(value, (bytes, bytearray, memoryview)):
            raise self.fail(value, "expected bytes, bytearray or memoryview")
        return bytes(value)

    def decode(self, data: memoryview | bytes) -> bytes:
        return bytes(data)

    def decode_many(self, file: FileBytes, starts: np.ndarray, ends: np.ndarray) -> list[bytes]:
        view = file.view  # one copy per value, whatever the buffer type
        return [bytes(view[a:b]) for a, b in zip(starts.tolist(), ends.tolist())]

    def view_many(self, file: FileBytes, starts: np.ndarray, ends: np.ndarray
                  ) -> list[memoryview]:
        view = file.view
        return [view[a:b] for a, b in zip(starts.tolist(), ends.tolist())]


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

    def decode_many(self, file: FileBytes, starts: np.ndarray, ends: np.ndarray) -> list[str]:
        view = file.view
        return [str(view[a:b], "utf-8") for a, b in zip(starts.tolist(), ends.tolist())]


class NumberTextEncoding(Encoding):
    """`str_int`, `str_float`, `str_decimal`: a number's text in ASCII, parsed back on decode."""

    def __init__(
        self,
        name: str,
        accepts: tuple[type, ...],
        to_text: Callable[[Any], str],
        from_text: Callable[[str], Any],
    ) -> None:
        self.name = name
        self.accepts = accepts
        self.to_text = to_text
        self.from_text = from_text

    def encode(self, value: Any) -> bytes:
        if not isinstance(value, self.accepts) or isinstance(value, (bool, np.bool_)):
            wanted = " or ".join(kind.__name__ for kind in self.accepts)
            raise self.fail(value, f"expected {wanted}")
        return self.to_text(value).encode("ascii")

    def decode(self, data: memoryview | bytes) -> Any:
        return self.from_text(str(data, "ascii"))


def _number_encodings() -> list[Encoding]:
    # str_float writes the shortest round-trip repr; str_decimal keeps every digit.
    return [
        NumberTextEncoding("str_int", (int, np.integer), lambda v: str(int(v)), int),
        NumberTextEncoding(
            "str_float", (float, int, np.floating, np.integer), lambda v: str(float(v)), float
        ),
        NumberTextEncoding("str_decimal", (Decimal, int), lambda v: str(Decimal(v)), Decimal),
    ]


class JSONEncoding(Encoding):
    """`json`: `json.dumps(value)` in UTF-8 (key order kept, like the reference writer)."""

    name = "json"

    def encode(self, value: Any) -> bytes:
        try:
            return json.dumps(_plain(value), default=_plain_or_fail).encode("utf-8")
        except (TypeError, ValueError) as exc:
            raise self.fail(value, f"not JSON-serialisable ({exc})") from exc

    def decode(self, data: memoryview | bytes) -> Any:
        return json.loads(bytes(data))


def _plain(value: Any) -> Any:
    """numpy arrays and scalars as the Python lists and numbers `json` knows (a float64 stays
    as it is: it is a float already, and is written the same either way)."""
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic) and not isinstance(value, float):
        return value.item()
    return value


def _plain_or_fail(value: Any) -> Any:
    """`json.dumps` fallback: numpy values nested in lists and dicts; anything else fails."""
    if isinstance(value, (np.ndarray, np.generic)):
        return _plain(value)
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def text_encodings() -> dict[str, Encoding]:
    """Every encoding of this family, keyed by name."""
    found = [BytesEncoding(), StrEncoding(), JSONEncoding(), *_number_encodings()]
    return {encoding.name: encoding for encoding in found}
