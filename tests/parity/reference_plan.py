"""Runs inside the reference implementation's venv (mosaicml-streaming): reads scenarios as JSON
on stdin and prints, for each, every rank's samples per epoch in DataLoader order.

Never imported by our tests (the reference's import name `streaming` collides with ours): they
start it with the reference venv's Python and read its JSON.
"""

import json
import logging
import os
import sys
import sysconfig
import types
import warnings

import numpy as np

# Load the reference's `streaming.base` without its top-level package file, which also imports
# its vision/text extras (torchvision, whose wheel may not match a CPU-only torch).
_package = types.ModuleType("streaming")
_package.__path__ = [os.path.join(sysconfig.get_paths()["purelib"], "streaming")]
sys.modules["streaming"] = _package

from streaming.base.batching import generate_work  # noqa: E402
from streaming.base.world import World  # noqa: E402

from streaming.base import Stream, StreamingDataset  # noqa: E402

logging.disable(logging.WARNING)
warnings.simplefilter("ignore")


def rank_sequences(work: np.ndarray) -> list:
    """work[node, rank, worker, batch, slot] -> each rank's ids as its DataLoader yields them."""
    nodes, ranks, workers, batches, _ = work.shape
    out = []
    for n in range(nodes):
        for r in range(ranks):
            parts = [work[n, r, k % workers, k // workers] for k in range(batches * workers)]
            seq = np.concatenate(parts) if parts else np.empty(0, np.int64)
            out.append(seq[seq >= 0].tolist())
    return out


def run(scenario: dict) -> dict:
    streams = [Stream(local=s["local"], **s.get("weights", {})) for s in scenario["streams"]]
    ds = StreamingDataset(streams=streams, **scenario["dataset"])
    nodes, ranks, workers = scenario["world"]
    world = World(nodes, ranks, workers, 0)
    if ds.num_canonical_nodes is None:
        scale = 64 if ds.shuffle_algo in ("py1s", "py2s") else 1
        ds.num_canonical_nodes = scale * nodes
    ds._set_shuffle_block_size(world)
    epochs = []
    for epoch in range(scenario.get("epochs", 1)):
        work = generate_work(ds.batching_method, ds, world, epoch, scenario.get("start", 0))
        epochs.append(rank_sequences(work))
    return {"epoch_size": int(ds.epoch_size), "length": len(ds),
            "choose": [int(s.choose) for s in ds.streams], "epochs": epochs}


if __name__ == "__main__":
    print(json.dumps([run(s) for s in json.load(sys.stdin)]))
