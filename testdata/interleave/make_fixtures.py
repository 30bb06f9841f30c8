"""Generates interleave order fixtures with TensorFlow itself.

Run: /work/venv-bench/bin/python testdata/interleave/make_fixtures.py
Writes testdata/interleave/tf_interleave.json: for each case, the inner lengths and the order in
which tf.data's interleave (sequential and parallel with deterministic=True) yields elements.
Input element x opens an inner dataset of lengths[x] elements, valued x * 1000 + k.
"""

import json
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import tensorflow as tf  # noqa: E402

LENGTHS = [3, 0, 5, 1, 7, 2, 0, 4, 6, 1, 3, 8]
PAIRS = [(1, 1), (2, 1), (3, 2), (4, 3), (2, 5), (5, 1), (3, 4), (16, 2)]


def run(lengths, cycle, block, parallel):
    lens = tf.constant(lengths, dtype=tf.int64)

    def inner(x):
        return tf.data.Dataset.range(lens[x]).map(lambda k: x * 1000 + k)

    ds = tf.data.Dataset.range(len(lengths))
    if parallel:
        ds = ds.interleave(inner, cycle_length=cycle, block_length=block,
                           num_parallel_calls=min(2, cycle), deterministic=True)
    else:
        ds = ds.interleave(inner, cycle_length=cycle, block_length=block)
    return [int(v) for v in ds.as_numpy_iterator()]


def main():
    cases = []
    for lengths in (LENGTHS, [2, 2, 2], [0, 0, 4], []):
        for cycle, block in PAIRS:
            seq = run(lengths, cycle, block, parallel=False)
            par = run(lengths, cycle, block, parallel=True)
            assert seq == par, (lengths, cycle, block)
            cases.append({"lengths": lengths, "cycle_length": cycle, "block_length": block,
                          "output": seq})
    flat = []
    for lengths in (LENGTHS, [0, 2, 0, 3]):
        ds = tf.data.Dataset.range(len(lengths)).flat_map(
            lambda x: tf.data.Dataset.range(tf.constant(lengths, tf.int64)[x]).map(lambda k: x * 1000 + k))
        flat.append({"lengths": lengths, "output": [int(v) for v in ds.as_numpy_iterator()]})
    out = {"tensorflow": tf.__version__, "interleave": cases, "flat_map": flat}
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tf_interleave.json")
    with open(path, "w") as f:
        json.dump(out, f, indent=0)
    print(f"wrote {len(cases)} interleave cases to {path}")


if __name__ == "__main__":
    main()
