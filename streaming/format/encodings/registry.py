"""Look up an Encoding by the name written in index.json (`int`, `str`, `ndarray:int32:2,3`...)."""

from __future__ import annotations

from functools import lru_cache

from streaming.errors import UnknownEncodingError
from streaming.format.encodings.encoding import Encoding
from streaming.format.encodings.images import image_encodings
from streaming.format.encodings.ndarray import parse_ndarray_name
from streaming.format.encodings.pickle import pickle_encodings
from streaming.format.encodings.scalars import scalar_encodings
from streaming.format.encodings.text import text_encodings

_FIXED: dict[str, Encoding] = {
    **scalar_encodings(),
    **text_encodings(),
    **image_encodings(),
    **pickle_encodings(),
}


def get_encoding(name: str) -> Encoding:
    """The encoding called `name`; raises UnknownEncodingError naming it."""
    if not isinstance(name, str):
        raise UnknownEncodingError(f"encoding names are strings, got {name!r}")
    return _lookup(name)


@lru_cache(maxsize=1024)
def _lookup(name: str) -> Encoding:
    found = _FIXED.get(name)
    if found is not None:
        return found
    if name == "ndarray" or name.startswith("ndarray:"):
        return parse_ndarray_name(name)
    raise UnknownEncodingError(
        f"encoding `{name}` is unsupported: unknown encoding {name!r}; known: "
        f"{', '.join(sorted(_FIXED))}, ndarray[:dtype[:shape]]"
    )


def register_encoding(name: str, encoding: Encoding) -> None:
    """Make `encoding` readable and writable under `name` (replacing any previous one); the
    compatibility layer's `_encodings[name] = cls` comes here (docs/from-reference-api.md)."""
    if not isinstance(name, str) or not name or ":" in name:
        raise UnknownEncodingError(f"an encoding name is a non-empty string without ':', got "
                                   f"{name!r}")
    if not isinstance(encoding, Encoding):
        raise UnknownEncodingError(f"register_encoding({name!r}, ...) needs an Encoding "
                                   f"instance, got {encoding!r}")
    _FIXED[name] = encoding
    _lookup.cache_clear()


def is_known_encoding(name: str) -> bool:
    """Whether `name` is an encoding this library can read and write."""
    try:
        get_encoding(name)
    except UnknownEncodingError:
        return False
    return True


def encoding_size(name: str) -> int | None:
    """Fixed byte size of values of encoding `name`, or None when variable."""
    return get_encoding(name).size


def known_encodings() -> list[str]:
    """Every non-parametric encoding name (ndarray variants are built on demand)."""
    return sorted(_FIXED) + ["ndarray"]
