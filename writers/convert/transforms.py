"""Ready-made transforms for `convert(transform=...)`; user functions work the same way."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from streaming.errors import EncodeError


class tokenize:  # lower case: used like a function, transform=tokenize(tok)
    """Turn `record[field]` into a `tokens` array (and its `length`), keeping chosen fields.

    Records whose text tokenises to nothing are dropped (MDS cannot store empty arrays).
    """

    def __init__(self, tokenizer: Callable[[str], Sequence[int]], *, field: str = "text",
                 out: str = "tokens", length: str | None = "length", dtype: str = "int32",
                 keep: Sequence[str] = ()) -> None:
        self.tokenizer, self.field, self.out, self.length = tokenizer, field, out, length
        self.dtype, self.keep = np.dtype(dtype), tuple(keep)

    def __call__(self, record: dict[str, Any]) -> dict[str, Any] | None:
        try:
            text = record[self.field]
        except KeyError:
            raise EncodeError(f"tokenize: record has no field {self.field!r}") from None
        tokens = np.asarray(self.tokenizer(text), dtype=self.dtype)
        if tokens.size == 0:
            return None
        sample = {name: record[name] for name in self.keep}
        sample[self.out] = tokens
        if self.length:
            sample[self.length] = int(tokens.size)
        return sample
