"""One rank of a two-node job (tests/packing/test_equal_packs.py): its place comes from torchrun's
variables (set by torchrun itself, or by the test), the job store from MASTER_ADDR/MASTER_PORT
(with --init-group the ranks first join a gloo process group, whose rank 0 then hosts the store,
as under Lightning or accelerate). It records which nodes' packs it counted itself, then reads
two epochs of packs through two DataLoader workers and prints one JSON line."""

from __future__ import annotations

import json
import sys
from dataclasses import asdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


def main() -> int:
    import streaming.packing.equal as equal
    from streaming.loader.dataloader import StreamingDataLoader
    from streaming.packing.streaming import PackedStreamingDataset

    counted: list[int] = []
    node_most_packs = equal.node_most_packs

    def recording(count, world, node):
        counted.append(node)
        return node_most_packs(count, world, node)

    equal.node_most_packs = recording
    group = "--init-group" in sys.argv[2:]
    if group:  # as Lightning or accelerate do: rank 0's process hosts the job's store
        import torch.distributed as dist

        dist.init_process_group("gloo", init_method="env://")
    ds = PackedStreamingDataset(local=sys.argv[1], shuffle=True, packing_length=512,
                                packs_per_batch=2, batch_size=4)
    first = ds.pack_count(0)  # in the training process: the node counts epoch 0 here
    loader = StreamingDataLoader(ds, batch_size=None, num_workers=2)
    promised, steps, epochs = [len(loader)], [], []
    for _ in range(2):  # epoch 1's count is found inside the DataLoader workers
        batches = list(loader)
        steps.append(len(batches))
        epochs.append([i for batch in batches for i in batch["sample_ids"].tolist()])
    print(json.dumps({"world": asdict(ds.world), "counted": counted, "packs0": first,
                      "promised": promised, "steps": steps, "epochs": epochs}))
    ds.close()
    if group:
        dist.barrier()  # rank 0's store serves the others until they are done
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
