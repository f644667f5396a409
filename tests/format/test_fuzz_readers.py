"""Reader fuzz: thousands of random mutations of index.json and shard bytes (raw and zstd)
end in one of the project's typed errors or in correct data (exact data when hashes are
validated), never another exception type or a hang. benchmarks/fuzz_readers.py runs longer."""

from __future__ import annotations

import shutil

import pytest

from tests.support.mutants import Tally, prepare_bases, run_mutant, scratch_dir

MUTANTS_PER_READER = 800


@pytest.fixture(scope="module")
def bases(tmp_path_factory):
    scratch = scratch_dir(tmp_path_factory.mktemp("fuzz"))
    try:
        yield scratch, *prepare_bases(scratch)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


@pytest.mark.parametrize("reader", ["local", "local+hash", "streaming", "streaming+hash"])
def test_mutants_end_in_typed_errors_or_correct_data(bases, reader):
    scratch, datasets, expected = bases
    tally = Tally()
    offset = {"local": 0, "local+hash": 10**6, "streaming": 2 * 10**6,
              "streaming+hash": 3 * 10**6}[reader]
    for seed in range(offset, offset + MUTANTS_PER_READER):
        tally.add(run_mutant(seed, datasets, expected, scratch, reader))
    assert not tally.bad, "\n".join(map(str, tally.bad[:10]))
    assert tally.counts.get("typed", 0) > MUTANTS_PER_READER // 2
    assert tally.counts.get("data", 0) > 0


# Mutants a longer run of benchmarks/fuzz_readers.py found: two shards naming one raw file (a
# later decompression replaced the file under an open reader), and a compressed shard whose
# index entry claims 0 samples (never opened, so never checked).
@pytest.mark.parametrize("seed,reader", [(129827, "streaming"), (100999, "local+hash"),
                                         (132898, "local+hash"), (140926, "local+hash")])
def test_mutants_found_by_longer_runs(bases, seed, reader):
    scratch, datasets, expected = bases
    outcome = run_mutant(seed, datasets, expected, scratch, reader)
    assert outcome.result != "bad", outcome


def test_a_remote_read_into_a_cache_returns_exact_data_or_a_typed_error(bases):
    """The index's xxh64 digests, checked on every download by default, and the zstd frames'
    checksums leave no mutant that reads back wrong (a short run: each start-up copies files)."""
    scratch, datasets, expected = bases
    tally = Tally()
    for seed in range(4 * 10**6, 4 * 10**6 + 40):
        tally.add(run_mutant(seed, datasets, expected, scratch, "remote+cache"))
    assert not tally.bad, "\n".join(map(str, tally.bad[:10]))
    assert tally.counts.get("typed", 0) > 20


@pytest.mark.parametrize("reader", ["remote+cache", "streaming", "local"])
def test_hostile_names_end_in_typed_errors_and_touch_nothing_beside(bases, reader):
    """Indexes whose file names are absolute, climb out, take our own file names, hold NUL
    bytes or backslashes, are too long or name another entry's file: a typed error every
    time, and the canary folder beside the mutants and their caches never changes."""
    scratch, datasets, expected = bases
    tally = Tally()
    for seed in range(5 * 10**6, 5 * 10**6 + 30):
        tally.add(run_mutant(seed, datasets, expected, scratch, reader, hostile=True))
    assert not tally.bad, "\n".join(map(str, tally.bad[:10]))
    assert tally.counts == {"typed": 30}
