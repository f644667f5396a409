"""`streaming validate PATH_OR_URL`: every shard's size, digests and samples are checked.

Local files are read in place (compressed shards are decompressed into a scratch folder, never
into the dataset); remote shards are downloaded into the scratch folder one by one.
"""

from __future__ import annotations

import argparse
import filecmp
import json
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from streaming.cli._common import (
    CommandFailed,
    UserError,
    add_command,
    dataset_root,
    is_remote,
    open_index,
    scratch_dir,
)
from streaming.cli._progress import CommandBar
from streaming.cli.parquet_location import add_parquet_options, check_row_groups
from streaming.errors import ShardCorruptError, StreamingError, UnsafeTypeError
from streaming.format.compression import decompress_file
from streaming.format.index import DatasetIndex
from streaming.format.rows import RowCodec
from streaming.format.sample import SampleCodec
from streaming.format.shard import validate_file
from streaming.format.text_shard import meta_path, open_shard
from streaming.util.confine import confine

EXAMPLES = """
  streaming validate data/corpus
  streaming validate s3://bucket/datasets/corpus --workers 8
  streaming validate data/corpus --json > report.json
  streaming validate s3://bucket/lake/corpus --format parquet
"""


def register(sub) -> None:
    p = add_command(sub, "validate",
                    "Check every shard's size, hashes and that every sample decodes.", EXAMPLES)
    p.add_argument("location", metavar="PATH_OR_URL", help="dataset folder, index.json or URL")
    p.add_argument("--workers", type=int, default=min(4, os.cpu_count() or 1),
                   help="shards checked at once (default: up to 4)")
    p.add_argument("--allow-unsafe-types", action="store_true",
                   help="also decode pickle (pkl) columns")
    p.add_argument("--json", action="store_true", help="print a JSON report")
    add_parquet_options(p)
    p.add_argument("--no-progress", action="store_true",
                   help="no progress bar (there is none either when stderr is not a terminal)")
    p.set_defaults(run=run)


class ShardChecker:
    """Checks one shard at a time; safe to use from several threads."""

    def __init__(self, index: DatasetIndex, root: str, scratch: Path,
                 codec: SampleCodec | RowCodec) -> None:
        self.index, self.root, self.scratch, self.codec = index, root, scratch, codec
        self.remote = is_remote(root)

    def _local(self, basename: str, entry: dict) -> Path:
        """The file for `basename` on this machine (downloaded into scratch when remote)."""
        if not self.remote:
            return Path(self.root) / basename
        from streaming.storage import fetch, join

        dest = confine(self.scratch, self.scratch / basename)
        dest.parent.mkdir(parents=True, exist_ok=True)
        return fetch(join(self.root, basename), dest, expected_size=entry["bytes"])

    def _place_meta(self, shard: dict, raw: Path, algos: list[str], cleanup: list[Path]
                    ) -> None:
        """Put a text-format shard's meta file beside `raw` (checked like the data file)."""
        entry, packed_entry = shard["raw_meta"], shard.get("zip_meta")
        target = meta_path(raw)
        if not target.is_file():
            if packed_entry:
                packed = self._local(packed_entry["basename"], packed_entry)
                if self.remote:
                    cleanup.append(packed)
                validate_file(packed, packed_entry["bytes"], packed_entry.get("hashes") or {},
                              algos)
                decompress_file(packed, target, shard["compression"],
                                expected_size=entry["bytes"], durable=False)
            else:
                source = self._local(entry["basename"], entry)
                if source != target:
                    target.write_bytes(source.read_bytes())
            cleanup.append(target)
        validate_file(target, entry["bytes"], entry.get("hashes") or {}, algos)

    def _check_raw(self, raw: Path, shard: dict, algos: list[str], cleanup: list[Path], *,
                   name: str | None = None, decode: bool = True) -> None:
        """Size and digests of a raw shard file (and of a text-format shard's meta file), and
        (with `decode`) every sample decodes."""
        entry = shard["raw_data"]
        try:
            validate_file(raw, entry["bytes"], entry.get("hashes") or {}, algos)
            if self.index.row_codec is not None:
                self._place_meta(shard, raw, algos, cleanup)
            if decode:
                with open_shard(raw, self.codec, expected_samples=int(shard["samples"]),
                                expected_bytes=int(entry["bytes"])) as reader:
                    for row in range(len(reader)):
                        reader.get(row)
        except StreamingError as exc:
            if name is None:
                raise
            raise _named(exc, f"{name} (decompressed)") from exc

    def check(self, i: int) -> str | None:
        """None when shard `i` is sound, else what is wrong with it."""
        shard = self.index.shards[i]
        raw_entry, zip_entry = shard["raw_data"], shard.get("zip_data")
        algos = list(shard.get("hashes") or [])
        cleanup: list[Path] = []
        try:
            raw = None if self.remote else Path(self.root) / raw_entry["basename"]
            if raw is not None and not raw.is_file():
                raw = None
            unpacked = None
            if zip_entry and (self.remote or (Path(self.root) / zip_entry["basename"]).is_file()):
                packed = self._local(zip_entry["basename"], zip_entry)
                if self.remote:
                    cleanup.append(packed)
                validate_file(packed, zip_entry["bytes"], zip_entry.get("hashes") or {}, algos)
                # Every file the index names is checked: the compressed one is decompressed
                # even when a raw copy sits beside it (which is checked too, below).
                unpacked = self.scratch / f"{i:08d}.mds"
                cleanup.append(unpacked)
                try:
                    decompress_file(packed, unpacked, shard["compression"],
                                    expected_size=raw_entry["bytes"], durable=False)
                except StreamingError as exc:
                    raise _named(exc, zip_entry["basename"]) from exc
                self._check_raw(unpacked, shard, algos, cleanup, name=zip_entry["basename"])
            if raw is None and unpacked is None:
                if not self.remote:
                    raise ShardCorruptError(f"{raw_entry['basename']}: file is missing")
                raw = self._local(raw_entry["basename"], raw_entry)
                cleanup.append(raw)
            if raw is not None:
                if unpacked is not None and not filecmp.cmp(raw, unpacked, shallow=False):
                    raise ShardCorruptError(
                        f"{raw_entry['basename']} and {zip_entry['basename']} (decompressed) "
                        "differ")
                self._check_raw(raw, shard, algos, cleanup, decode=unpacked is None)
            return None
        except (StreamingError, OSError, ValueError) as exc:
            return f"{type(exc).__name__}: {exc}"
        finally:
            for path in cleanup:
                path.unlink(missing_ok=True)


def _named(exc: StreamingError, name: str) -> StreamingError:
    """`exc` with `name` (the file it is about) in front of its message, same type if it can."""
    try:
        return type(exc)(f"{name}: {exc}")
    except TypeError:
        return ShardCorruptError(f"{name}: {exc}")


def run(args: argparse.Namespace) -> int:
    if args.format == "parquet":
        with scratch_dir() as scratch:
            index, bad = check_row_groups(args.location, args.columns, Path(scratch),
                                          args.workers)
        return _report(args, index, bad, "row groups")  # "1 bad row group(s)"
    index = open_index(args.location)
    try:
        codec = index.codec(allow_unsafe_types=args.allow_unsafe_types)
    except UnsafeTypeError as exc:
        raise UserError(f"{exc} (CLI: --allow-unsafe-types)") from exc
    with scratch_dir() as scratch:
        checker = ShardChecker(index, dataset_root(args.location), Path(scratch), codec)
        bar = CommandBar(index.num_shards, f"validate {args.location}", "shard",
                         not args.no_progress)
        try:
            with ThreadPoolExecutor(max(1, args.workers)) as pool:
                problems = []
                for problem in pool.map(checker.check, range(index.num_shards)):
                    problems.append(problem)
                    bar.update()
        finally:
            bar.close()
    bad = {index.basenames[i]: p for i, p in enumerate(problems) if p is not None}
    return _report(args, index, bad, "shards")


def _report(args: argparse.Namespace, index: DatasetIndex, bad: dict[str, str], unit: str
            ) -> int:
    """Print what was checked and what is `bad`; CommandFailed naming the bad ones."""
    if args.json:
        print(json.dumps({"location": args.location, "shards": index.num_shards,
                          "samples": index.num_samples, "bad": bad}, indent=2))
    else:
        for name, problem in bad.items():
            print(f"BAD {name}: {problem}")
        state = "OK" if not bad else f"{len(bad)} bad of {index.num_shards} {unit}"
        print(f"{state}: {index.num_shards} {unit}, {index.num_samples} samples checked")
    if bad:
        raise CommandFailed(f"{len(bad)} bad {unit[:-1]}(s): {', '.join(bad)}")
    return 0
