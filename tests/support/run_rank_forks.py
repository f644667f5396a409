"""Start the ranks of a simulated job as forks of one interpreter that imported torch and
streaming once (launched by tests/support/jobs.py's ForkedJob).

Importing torch costs seconds of CPU per process; a job of 16 ranks on 2 cores would spend most
of its time there. Each fork is still its own process with its own environment (RANK,
LOCAL_RANK, ...), its own DataLoader workers and its own exit, as torchrun's ranks are.

Usage: run_rank_forks.py PLAN.json, where PLAN is a list of {"env", "script", "argv", "stderr",
"rc"}: the variables to set, the rank's script (run_rank.py or another) and its arguments, and
the files for the rank's stderr and exit code.
"""

from __future__ import annotations

import json
import os
import runpy
import sys
import traceback
from pathlib import Path

import torch  # noqa: F401  (imported once, before forking)

from streaming import Stream, StreamingDataLoader, StreamingDataset  # noqa: F401  (as torch)


def _rank(spec: dict) -> int:
    """Child side: become the rank `spec` describes and run it."""
    fd = os.open(spec["stderr"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(fd, 2)
    os.close(fd)
    os.environ.update(spec["env"])
    sys.argv = [spec["script"], *spec["argv"]]
    sys.path.insert(0, str(Path(spec["script"]).parent))
    try:
        runpy.run_path(spec["script"], run_name="__main__")
        return 0
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else int(exc.code is not None)
    except BaseException:
        traceback.print_exc()
        return 1


def main() -> int:
    plan = json.loads(Path(sys.argv[1]).read_text())
    children = {}
    for spec in plan:
        pid = os.fork()
        if pid == 0:
            # sys.exit, not os._exit: the rank's exit handlers must run as in a real process.
            sys.exit(_rank(spec))
        children[pid] = spec["rc"]
    while children:
        pid, status = os.wait()
        Path(children.pop(pid)).write_text(str(os.waitstatus_to_exitcode(status)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
