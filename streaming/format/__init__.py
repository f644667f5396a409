"""MDS v2 on disk: column encodings, sample layout, compression, hashes, index.json, shards."""

from streaming.format.compression import (
    compress,
    decompress,
    decompress_file,
    extension,
    parse_compression,
)
from streaming.format.encodings import (
    Encoding,
    encoding_size,
    get_encoding,
    is_known_encoding,
)
from streaming.format.hashing import (
    SUPPORTED_HASHES,
    file_hexdigest,
    file_hexdigests,
    hexdigest,
    is_supported_hash,
)

__all__ = [
    "SUPPORTED_HASHES",
    "Encoding",
    "compress",
    "decompress",
    "decompress_file",
    "encoding_size",
    "extension",
    "file_hexdigest",
    "file_hexdigests",
    "get_encoding",
    "hexdigest",
    "is_known_encoding",
    "is_supported_hash",
    "parse_compression",
]
