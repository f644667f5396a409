"""Fuzz the readers for as long as asked: random mutations of index.json and shard bytes must
end in a typed error (StreamingError) or in correct data (exact when hashes are validated), and
one mutant in five names a file with a hostile name (absolute, climbing out, our own names...):
no file beside the mutants and their caches may change.

Then every hostile remote of tests/support/hostile_remotes.py is read once, each by a child
process for a whole epoch (zstd bombs sized and unsized through a folder, file:// and HTTP,
bodies and index.json floods far past what the index declares, servers trickling one byte
every half second, a re-encoded shard, percent-encoded and linked names, a climbing split,
links planted under lock names), with a wall-clock limit, a 1 GiB file-size limit and every
file outside the cache snapshotted before and after.

    python benchmarks/fuzz_readers.py --seconds 600 [--seed 0] [--reader local+hash]
        [--no-hostile]

Prints the outcome counts per reader, mutants per second, every bad outcome with the seed
that reproduces it (`run_mutant(seed, ..., hostile=seed % 5 == 4)` in
tests/support/mutants.py), every hostile remote's outcome, and one summary line: reads
tried, typed errors, untyped, hangs, files outside the cache touched. Exit status 1 when
any read went bad (untyped, wrong data, a hang, or a file outside the cache touched).
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support.hostile_remotes import Result, run_all
from tests.support.mutants import READERS, Tally, prepare_bases, run_mutant, scratch_dir


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60.0, help="how long to fuzz")
    parser.add_argument("--seed", type=int, default=0, help="first seed")
    parser.add_argument("--reader", choices=sorted(READERS), action="append",
                        help="reader(s) to fuzz (default: all, in turn)")
    parser.add_argument("--no-hostile", action="store_true",
                        help="skip the hostile remotes (bombs, floods, trickles, links)")
    args = parser.parse_args(argv)
    readers = args.reader or sorted(READERS)
    scratch = scratch_dir(Path(tempfile.mkdtemp(prefix="mds-fuzz-")))
    try:
        bases, expected = prepare_bases(scratch)
        tallies = {reader: Tally() for reader in readers}
        started = time.monotonic()
        seed = args.seed
        while time.monotonic() - started < args.seconds:
            reader = readers[seed % len(readers)]
            hostile = seed % 5 == 4  # one mutant in five gives a file a hostile name
            outcome = run_mutant(seed, bases, expected, scratch, reader, hostile=hostile)
            tallies[reader].add(outcome)
            if outcome.result == "bad":
                print(f"BAD {outcome}", flush=True)
            seed += 1
        elapsed = time.monotonic() - started
        hostile = [] if args.no_hostile else _hostile()
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    total = sum(t.total for t in tallies.values())
    for reader, tally in tallies.items():
        counts = ", ".join(f"{k} {v}" for k, v in sorted(tally.counts.items()))
        print(f"{reader:11s} {tally.total:7d} mutants: {counts}")
    print(f"{total} mutants in {elapsed:.0f} s ({total / max(elapsed, 1e-9):.0f}/s), "
          f"seeds {args.seed}..{seed - 1}")
    for result in hostile:
        where = f"; TOUCHED {result.touched}" if result.touched else ""
        print(f"hostile  {result.result:7s} {result.name}: {result.detail[:160]}{where}")
    bad = summary(tallies, hostile)
    return 1 if bad else 0


def _hostile() -> list[Result]:
    """Every hostile remote once, in a folder on disk (bombs must not fill memory)."""
    folder = Path(tempfile.mkdtemp(prefix="mds-hostile-"))
    try:
        return run_all(folder)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def summary(tallies: dict[str, Tally], hostile: list[Result]) -> int:
    """Print the one summary line; return the reads that went bad."""
    details = [o.detail for t in tallies.values() for o in t.bad]
    hangs = sum("no answer within" in d for d in details)
    touched = sum("outside the dataset" in d for d in details)
    untyped = len(details) - hangs - touched
    typed = sum(t.counts.get("typed", 0) for t in tallies.values())
    tried = sum(t.total for t in tallies.values()) + len(hostile)
    for result in hostile:
        typed += result.result == "typed"
        untyped += result.result in ("untyped", "wrong")
        hangs += result.result == "hang"
        touched += bool(result.touched)
    print(f"reads tried {tried}, typed errors {typed}, untyped or wrong data {untyped}, "
          f"hangs {hangs}, "
          f"files outside the cache touched {touched}")
    return untyped + hangs + touched


if __name__ == "__main__":
    sys.exit(main())
