"""Generates concat-then-split packing fixtures with Grain itself (ConcatThenSplitIterDataset).

Run (in a venv outside the repository: ``python3 -m venv /tmp/tokvenv &&
/tmp/tokvenv/bin/pip install grain==0.2.18``): ``/tmp/tokvenv/bin/python
testdata/pack/make_cts_fixture.py``. Writes testdata/pack/grain_cts.json: for each case the element
lengths, the row lengths, the meta features and every row Grain emits (its defaults:
``split_full_length_features=True``, no BOS handling), feature by feature: values,
``_segment_ids`` and ``_positions``. Element ``x`` is ``{"inputs": [x * 100 + k for k <
len_inputs[x]], "targets": [x * 100 + 50 + k for k < len_targets[x]]}``; a case packs the
features it names. Also, for the resume test, every state Grain reports after each row.
"""

import json
import os

import numpy as np
from grain import python as gp
from grain.experimental import ConcatThenSplitIterDataset

INPUTS = [3, 1, 5, 0, 2, 6, 1, 1, 4, 17, 2, 5, 1, 8, 7, 0, 0, 2, 3, 9]
TARGETS = [1, 4, 2, 2, 3, 1, 5, 1, 2, 2, 6, 1, 3, 2, 1, 4, 2, 1, 1, 3]
CASES = [
    {"lengths": {"inputs": 8}, "meta": []},
    {"lengths": {"inputs": 5}, "meta": []},
    {"lengths": {"inputs": 1}, "meta": []},
    {"lengths": {"inputs": 6}, "meta": []},
    # One cut feature and a meta feature (never cut; a part of a cut element carries all of it).
    {"lengths": {"inputs": 8, "targets": 7}, "meta": ["targets"]},
]


def elements(features):
    out = []
    for x, (a, b) in enumerate(zip(INPUTS, TARGETS)):
        e = {"inputs": np.arange(a, dtype=np.int32) + 100 * x, "targets": np.arange(b, dtype=np.int32) + 100 * x + 50}
        out.append({k: e[k] for k in features})
    return out


def run(case):
    src = gp.MapDataset.source(elements(case["lengths"])).to_iter_dataset()
    ds = ConcatThenSplitIterDataset(src, length_struct=case["lengths"], meta_features=case["meta"])
    return [{k: np.asarray(v).tolist() for k, v in row.items()} for row in ds]


def main():
    cases = [{**case, "inputs": INPUTS, "targets": TARGETS, "rows": run(case)} for case in CASES]
    import grain

    out = {"grain": getattr(grain, "__version__", "0.2.18"), "cases": cases}
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "grain_cts.json")
    with open(path, "w") as f:
        json.dump(out, f, indent=0)
    print(f"wrote {len(cases)} cases to {path}")


if __name__ == "__main__":
    main()
