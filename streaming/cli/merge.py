"""`streaming merge-index OUT [PARTS...]`: join sub-datasets into one root index.json."""

from __future__ import annotations

import argparse

from streaming.cli._common import add_command

EXAMPLES = """
  streaming merge-index data/corpus                      # every data/corpus/*/index.json
  streaming merge-index data/corpus data/corpus/part0 data/corpus/part1
  streaming merge-index gs://bucket/corpus               # sub-datasets in an object store
"""


def register(sub) -> None:
    p = add_command(sub, "merge-index",
                    "Write OUT/index.json listing the shards of sub-datasets of OUT.", EXAMPLES)
    p.add_argument("out", help="folder or URL holding the sub-datasets")
    p.add_argument("parts", nargs="*",
                   help="sub-dataset folders in order (default: all OUT/*/, natural order)")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from streaming.cli._common import is_remote, open_index
    from streaming.format.index import merge_index, read_index

    if is_remote(args.out):
        from writers.merge_remote import merge_remote_index

        url = merge_remote_index(args.out, args.parts or None)
        index = open_index(url)
        print(f"wrote {url}: {index.num_shards} shards, {index.num_samples} samples")
        return 0
    path = merge_index(args.out, args.parts or None)
    index = read_index(path)
    print(f"wrote {path}: {index.num_shards} shards, {index.num_samples} samples")
    return 0
