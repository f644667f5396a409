"""One rank of a 2-process StreamingTrainer run (started by torch.distributed.run): train 8
steps saving at 4, then resume from step 4 in a second trainer; write what the model saw."""

from __future__ import annotations

import faulthandler
import json
import os
import sys
from pathlib import Path

from tests.integrations.hf_run import dataset, record_forward, tiny_gpt2


def run(data: Path, out: Path, resume: str | None) -> tuple[list, object]:
    from transformers import TrainingArguments

    from streaming.integrations.hf import StreamingTrainer

    model = tiny_gpt2()
    calls = record_forward(model)
    args = TrainingArguments(output_dir=str(out), max_steps=8, save_steps=4, report_to=[],
                             disable_tqdm=True, use_cpu=True, learning_rate=1e-3,
                             ddp_find_unused_parameters=False)
    trainer = StreamingTrainer(model=model, args=args, train_dataset=dataset(data))
    trainer.train(resume_from_checkpoint=resume)
    return [c["input_ids"].tolist() for c in calls], trainer


STACKS_AFTER = 180  # seconds: a rank still running then prints every thread's stack and exits


def main(data: str, out: str, record: str) -> None:
    faulthandler.dump_traceback_later(STACKS_AFTER, exit=True)  # a hang shows where it waits
    full, trainer = run(Path(data), Path(out), None)
    state = trainer.train_batches.state_dict()
    resumed, _ = run(Path(data), Path(out) / "resumed", str(Path(out) / "checkpoint-4"))
    rank = int(os.environ["RANK"])
    Path(f"{record}.{rank}").write_text(json.dumps({
        "full": full, "resumed": resumed, "packs_in_epoch": state["packs_in_epoch"],
        "ranks": trainer.train_dataset.data_parallel_ranks}))
    # Leave the process group before the interpreter exits: a group still alive at exit can
    # abort the process in torch's C++ teardown ("terminate called without an active
    # exception") after all the work is done.
    import torch.distributed as dist

    if dist.is_initialized():
        dist.barrier()
        dist.destroy_process_group()


if __name__ == "__main__":
    main(*sys.argv[1:4])
