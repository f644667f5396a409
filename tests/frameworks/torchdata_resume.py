"""Resume torchdata StatefulDataLoaders from saved states, each with a fresh StreamingDataset in
this (new) process, and write the ids of every batch they yield (tests/frameworks)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--cases", required=True, help="JSON: list of {state, loops}")
    p.add_argument("--out", required=True)
    args = p.parse_args()

    from tests.frameworks.torchdata_common import batch_ids, make_loader

    cases = json.loads(Path(args.cases).read_text())
    options = cases["options"]
    results = []
    for case in cases["cases"]:
        loader = make_loader(**options)
        loader.load_state_dict(case["state"])
        batches = [[batch_ids(b) for b in loader] for _ in range(case["loops"])]
        results.append(batches)
        del loader
    Path(args.out).write_text(json.dumps(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
