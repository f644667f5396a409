"""`streaming merge-index OUT [PARTS...]`: join sub-datasets into one root index.json."""

from __future__ import annotations

import argparse

from streaming.cli._common import add_command

EXAMPLES = """
  streaming merge-index data/corpus                      # every data/corpus/*/index.json
  streaming merge-index data/corpus data/corpus/part0 data/corpus/part1
"""


def register(sub) -> None:
    p = add_command(sub, "merge-index",
                    "Write OUT/index.json listing the shards of sub-datasets of OUT.", EXAMPLES)
    p.add_argument("out", help="folder holding the sub-datasets")
    p.add_argument("parts", nargs="*",
                   help="sub-dataset folders in order (default: all OUT/*/, natural order)")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from streaming.format.index import merge_index, read_index

    path = merge_index(args.out, args.parts or None)
    index = read_index(path)
    print(f"wrote {path}: {index.num_shards} shards, {index.num_samples} samples")
    return 0
