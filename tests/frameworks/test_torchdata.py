"""torchdata's StatefulDataLoader over a StreamingDataset: a state saved at any step (mid-epoch,
after an epoch's last batch, after the epoch ended, in a later epoch) resumes in a new process
with exactly the batches the uninterrupted run went on with, for 0, 2 and 3 workers, with
persistent workers on and off, and over packed batches. One new process resumes the states of
every configuration (each by a fresh loader and dataset)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from streaming.errors import StateMismatchError
from tests.frameworks.helpers import batch_ids, make_loader
from tests.support.datasets import write_ids

pytest.importorskip("torchdata.stateful_dataloader")

REPO = Path(__file__).resolve().parents[2]
SAMPLES, BATCH, LOOPS = 120, 4, 2
PACKED_SAMPLES = 150  # ~24 batches of 2 packs of 256 tokens
TIMEOUT = 240  # seconds for the resuming process (every configuration)


def _uninterrupted(options: dict) -> tuple[list[list[list[int]]], dict[str, dict]]:
    """Every loop's batches, and the loader's state at the points the tests resume from."""
    loader = make_loader(**options)
    loops: list[list[list[int]]] = []
    states: dict[str, dict] = {}
    for loop in range(LOOPS):
        batches = []
        for batch in loader:
            batches.append(batch_ids(batch))
            state = loader.state_dict()
            if loop == 0 and len(batches) == 11:
                states["mid"] = state
            if loop == 1 and len(batches) == 5:
                states["later"] = state
        if loop == 0:
            states["last"] = state  # after the last batch, before the loop saw the end
            states["end"] = loader.state_dict()  # after the loop ended
        loops.append(batches)
    return loops, states


PLAIN = [(0, False), (2, False), (2, True), (3, False)]  # (workers, persistent)
PACKED = [(0, False), (2, True), (3, False)]


def _expected(loops: list[list[list[int]]]) -> dict[str, list]:
    """What a loader resumed from each saved state yields, loop by loop."""
    return {"mid": [loops[0][11:], loops[1]], "last": [[], loops[1]], "end": [loops[1]],
            "later": [loops[1][5:]]}


@pytest.fixture(scope="module")
def resumed_runs(tmp_path_factory) -> dict[tuple, tuple[int, list, dict, list]]:
    """Every configuration's uninterrupted loops (in this process) and what loaders resumed
    from its states yield, all resumed by one new process: {(kind, workers, persistent):
    (samples, loops, expected, resumed)}."""
    from tests.support.datasets import write_tokens

    root = tmp_path_factory.mktemp("torchdata")
    plain = write_ids(root / "plain", SAMPLES)
    write_tokens(root / "packed", PACKED_SAMPLES, max_len=100)
    configs = {("plain", w, p): ({"data": str(plain), "workers": w, "persistent": p,
                                  "batch_size": BATCH}, SAMPLES) for w, p in PLAIN}
    configs.update({("packed", w, p): ({"data": str(root / "packed"), "workers": w,
                                        "persistent": p, "batch_size": 1, "packing": True},
                                       PACKED_SAMPLES) for w, p in PACKED})
    runs, spec = {}, []
    for key, (options, samples) in configs.items():
        loops, states = _uninterrupted(options)
        expected = _expected(loops)
        runs[key] = (samples, loops, expected)
        spec.append({"options": options,
                     "cases": [{"state": states[n], "loops": len(expected[n])}
                               for n in expected]})
    resumed = _resume(spec, root)
    return {key: (*runs[key], got) for key, got in zip(configs, resumed)}


def _resume(runs: list[dict], folder: Path) -> list:
    spec, out = folder / "runs.json", folder / "out.json"
    spec.write_text(json.dumps(runs))
    proc = subprocess.run(
        [sys.executable, str(Path(__file__).with_name("torchdata_resume.py")),
         "--runs", str(spec), "--out", str(out)],
        cwd=REPO, capture_output=True, text=True, timeout=TIMEOUT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(out.read_text())


@pytest.mark.slow
@pytest.mark.parametrize(("workers", "persistent"), PLAIN)
def test_resume_in_new_process_continues_exactly(resumed_runs, workers, persistent) -> None:
    _assert_resumes(*resumed_runs[("plain", workers, persistent)])


@pytest.mark.slow
@pytest.mark.parametrize(("workers", "persistent"), PACKED)
def test_packed_batches_resume_exactly(resumed_runs, workers, persistent) -> None:
    _assert_resumes(*resumed_runs[("packed", workers, persistent)])


def _assert_resumes(samples: int, loops: list, expected: dict, resumed: list) -> None:
    assert all(sorted(i for b in loop for i in b) == list(range(samples)) for loop in loops)
    assert loops[0] != loops[1]
    for name, got in zip(expected, resumed):
        assert got == expected[name], f"resumed from {name!r}"


def test_a_worker_state_is_refused_outside_its_worker(tmp_path) -> None:
    data = write_ids(tmp_path / "src", 40)
    loader = make_loader(str(data), workers=2, persistent=False, batch_size=BATCH)
    it = iter(loader)
    next(it)
    worker_state = loader.state_dict()["_snapshot"]["_worker_snapshots"]["worker_0"]
    state = worker_state["dataset_state"]
    assert state["worker"] == {"worker": 0, "num_workers": 2, "samples": BATCH, "ended": False,
                               "num_nodes": 1, "ranks_per_node": 1}
    del it, loader
    fresh = make_loader(str(data), workers=0, persistent=False, batch_size=BATCH)
    with pytest.raises(StateMismatchError, match="worker 0 of 2"):
        fresh.dataset.load_state_dict(state)


def test_a_worker_state_is_refused_on_another_topology(tmp_path) -> None:
    from torchdata.stateful_dataloader import StatefulDataLoader

    from streaming import StreamingDataset
    from streaming.plan import World

    data = write_ids(tmp_path / "src", 40)
    loader = make_loader(str(data), workers=2, persistent=False, batch_size=BATCH)
    it = iter(loader)
    next(it)
    state = loader.state_dict()
    del it, loader
    two_ranks = World(ranks_per_node=2)
    ds = StreamingDataset(local=str(data), shuffle=True, batch_size=BATCH, world=two_ranks)
    resumed = StatefulDataLoader(ds, batch_size=BATCH, num_workers=2)
    resumed.load_state_dict(state)
    with pytest.raises(StateMismatchError, match="same shape only"):
        next(iter(resumed))
