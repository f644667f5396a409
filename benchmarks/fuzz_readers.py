"""Fuzz the readers for as long as asked: random mutations of index.json and shard bytes must
end in a typed error (StreamingError) or in correct data (exact when hashes are validated), and
one mutant in five names a file with a hostile name (absolute, climbing out, our own names...):
no file beside the mutants and their caches may change.

    python benchmarks/fuzz_readers.py --seconds 600 [--seed 0] [--reader local+hash]

Prints the outcome counts per reader, mutants per second, and every bad outcome with the seed
that reproduces it (`run_mutant(seed, ..., hostile=seed % 5 == 4)` in
tests/support/mutants.py). Exit status 1 when any mutant went bad.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support.mutants import READERS, Tally, prepare_bases, run_mutant, scratch_dir


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60.0, help="how long to fuzz")
    parser.add_argument("--seed", type=int, default=0, help="first seed")
    parser.add_argument("--reader", choices=sorted(READERS), action="append",
                        help="reader(s) to fuzz (default: all, in turn)")
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
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    total = sum(t.total for t in tallies.values())
    for reader, tally in tallies.items():
        counts = ", ".join(f"{k} {v}" for k, v in sorted(tally.counts.items()))
        print(f"{reader:11s} {tally.total:7d} mutants: {counts}")
    print(f"{total} mutants in {elapsed:.0f} s ({total / max(elapsed, 1e-9):.0f}/s), "
          f"seeds {args.seed}..{seed - 1}")
    return 1 if any(t.bad for t in tallies.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
