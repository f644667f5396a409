"""`pkl`: arbitrary Python objects via pickle. Unsafe: decoding runs code chosen by the file."""

from __future__ import annotations

import pickle
from typing import Any

from streaming.format.encodings.encoding import Encoding

PROTOCOL = 4  # what the reference writer produced; readable by every Python 3.4+


class PickleEncoding(Encoding):
    """`pkl`: `pickle.dumps(value, protocol=4)`; only decoded when unsafe types are allowed."""

    name = "pkl"
    unsafe = True

    def encode(self, value: Any) -> bytes:
        try:
            return pickle.dumps(value, protocol=PROTOCOL)
        except (pickle.PicklingError, TypeError, AttributeError) as exc:
            raise self.fail(value, f"not picklable ({exc})") from exc

    def decode(self, data: memoryview | bytes) -> Any:
        return pickle.loads(data)


def pickle_encodings() -> dict[str, Encoding]:
    """Every encoding of this family, keyed by name."""
    return {"pkl": PickleEncoding()}
