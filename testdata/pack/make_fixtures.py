"""Generates packing fixtures with Grain itself (FirstFitPackIterDataset, BestFitPackIterDataset).

Run: /work/venvs/bench/bin/python testdata/pack/make_fixtures.py
Writes testdata/pack/grain_pack.json: for each case, the element lengths, the row lengths, the
number of bins, the mode and every row Grain emits (``shuffle_bins=False``), feature by feature:
values, ``_segment_ids`` and ``_positions``. Element ``x`` is ``{"inputs": [x * 100 + k for k <
len_inputs[x]], "targets": [x * 100 + 50 + k for k < len_targets[x]]}``.
"""

import json
import os

import numpy as np
from grain import python as gp
from grain.experimental import BestFitPackIterDataset, FirstFitPackIterDataset

INPUTS = [3, 1, 5, 2, 2, 6, 1, 1, 4, 3, 2, 5, 1, 8, 7, 2, 3]
TARGETS = [1, 4, 2, 2, 3, 1, 5, 1, 2, 2, 6, 1, 3, 2, 1, 4, 2]
CASES = [
    {"lengths": {"inputs": 8}, "bins": 3},
    {"lengths": {"inputs": 8}, "bins": 1},
    {"lengths": {"inputs": 10, "targets": 7}, "bins": 2},
    {"lengths": {"inputs": 9, "targets": 6}, "bins": 4},
]


def elements(features):
    out = []
    for x, (a, b) in enumerate(zip(INPUTS, TARGETS)):
        e = {"inputs": np.arange(a, dtype=np.int32) + 100 * x,
             "targets": np.arange(b, dtype=np.int32) + 100 * x + 50}
        out.append({k: e[k] for k in features})
    return out


def run(case, mode):
    cls = FirstFitPackIterDataset if mode == "first_fit" else BestFitPackIterDataset
    src = gp.MapDataset.source(elements(case["lengths"])).to_iter_dataset()
    ds = cls(src, length_struct=case["lengths"], num_packing_bins=case["bins"], shuffle_bins=False)
    return [{k: np.asarray(v).tolist() for k, v in row.items()} for row in ds]


def main():
    cases = []
    for case in CASES:
        for mode in ("first_fit", "best_fit"):
            cases.append({**case, "mode": mode, "inputs": INPUTS, "targets": TARGETS,
                          "rows": run(case, mode)})
    import grain
    out = {"grain": getattr(grain, "__version__", "?"), "cases": cases}
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "grain_pack.json")
    with open(path, "w") as f:
        json.dump(out, f, indent=0)
    print(f"wrote {len(cases)} cases to {path}")


if __name__ == "__main__":
    main()
