"""Column encodings of MDS v2, one family per module, looked up by name through the registry."""

from streaming.format.encodings.encoding import Encoding
from streaming.format.encodings.registry import (
    encoding_size,
    get_encoding,
    is_known_encoding,
    known_encodings,
    register_encoding,
)

__all__ = ["Encoding", "encoding_size", "get_encoding", "is_known_encoding", "known_encodings",
           "register_encoding"]
