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
from streaming.format.index import (
    DatasetIndex,
    index_bytes,
    merge_index,
    parse_index,
    read_index,
    write_index,
)
from streaming.format.sample import SampleCodec
from streaming.format.shard import ShardReader, validate_file

__all__ = [
    "SUPPORTED_HASHES",
    "DatasetIndex",
    "Encoding",
    "SampleCodec",
    "ShardReader",
    "compress",
    "decompress",
    "decompress_file",
    "encoding_size",
    "extension",
    "file_hexdigest",
    "file_hexdigests",
    "get_encoding",
    "hexdigest",
    "index_bytes",
    "is_known_encoding",
    "is_supported_hash",
    "merge_index",
    "parse_compression",
    "parse_index",
    "read_index",
    "validate_file",
    "write_index",
]
