"""Resume torchdata StatefulDataLoaders from saved states, each with a fresh StreamingDataset in
this (new) process, and write the ids of every batch they yield (tests/frameworks).

`--runs` holds a list of {options, cases: [{state, loops}]}; `--out` gets, per run, per case,
the batches of each loop."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--runs", required=True, help="JSON: list of {options, cases}")
    p.add_argument("--out", required=True)
    args = p.parse_args()

    from tests.frameworks.helpers import batch_ids, make_loader

    results = []
    for run in json.loads(Path(args.runs).read_text()):
        resumed = []
        for case in run["cases"]:
            loader = make_loader(**run["options"])
            loader.load_state_dict(case["state"])
            resumed.append([[batch_ids(b) for b in loader] for _ in range(case["loops"])])
            del loader
        results.append(resumed)
    Path(args.out).write_text(json.dumps(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
