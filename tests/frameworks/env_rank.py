"""One process of a simulated SLURM or MPI job (tests/frameworks): its rank comes only from the
launcher's environment variables; it iterates a StreamingDataset and prints its sample ids and
the World it found as one JSON line."""

from __future__ import annotations

import json
import sys
from dataclasses import asdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


def main() -> int:
    from streaming import StreamingDataset

    ds = StreamingDataset(local=sys.argv[1], shuffle=True, batch_size=2)
    ids = [int(sample["id"]) for sample in ds]
    print(json.dumps({"world": asdict(ds.world), "ids": ids}))
    ds.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
