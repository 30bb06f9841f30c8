"""Generates bucket_by_sequence_length fixtures with TensorFlow itself.

Run: /work/venvs/bench/bin/python testdata/bucket/make_fixtures.py
Writes testdata/bucket/tf_bucket.json: for each case, the arguments and every batch tf.data's
``bucket_by_sequence_length`` yields, in order: the ids in the batch and the padded ``seq``
values (element ``x`` is ``{"id": x, "seq": [x * 100 + k for k < lengths[x]]}``, its length read
from ``seq``). The order of the partial buckets flushed at the end of the input is what
stokehold's op is checked against.
"""

import json
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import tensorflow as tf  # noqa: E402

LENGTHS = [4, 1, 7, 2, 9, 3, 3, 5, 12, 0, 6, 2, 8, 1, 4, 10, 5, 2, 7, 3, 11]
CASES = [
    {"boundaries": [3, 6], "batch_sizes": [2, 3, 2]},
    {"boundaries": [3, 6], "batch_sizes": [2, 3, 2], "drop_remainder": True},
    {"boundaries": [2, 5, 13], "batch_sizes": [3, 2, 4, 1], "pad_to_bucket_boundary": True},
    {"boundaries": [5], "batch_sizes": [4, 3], "padding_values": -1},
    # no_padding batches without padding: one length per bucket, so tf can stack them.
    {"boundaries": list(range(1, 13)), "batch_sizes": [2] * 13, "no_padding": True},
    {"boundaries": [1, 2, 3, 4, 5, 6, 7, 8, 9, 10], "batch_sizes": [2] * 11},
    {"boundaries": [100], "batch_sizes": [50, 50]},
]


def run(lengths, case):
    seqs = [[x * 100 + k for k in range(n)] for x, n in enumerate(lengths)]

    def gen():
        for x, s in enumerate(seqs):
            yield {"id": x, "seq": s}

    sig = {"id": tf.TensorSpec([], tf.int64), "seq": tf.TensorSpec([None], tf.int64)}
    ds = tf.data.Dataset.from_generator(gen, output_signature=sig)
    pv = case.get("padding_values")
    ds = ds.bucket_by_sequence_length(
        lambda e: tf.shape(e["seq"])[0],
        case["boundaries"],
        case["batch_sizes"],
        padding_values=None if pv is None else {"id": tf.constant(0, tf.int64),
                                                 "seq": tf.constant(pv, tf.int64)},
        pad_to_bucket_boundary=case.get("pad_to_bucket_boundary", False),
        no_padding=case.get("no_padding", False),
        drop_remainder=case.get("drop_remainder", False),
    )
    out = []
    for b in ds.as_numpy_iterator():
        seq = b["seq"]
        out.append({"ids": [int(i) for i in b["id"]], "seq": [[int(v) for v in row] for row in seq]})
    return out


def main():
    cases = []
    for case in CASES:
        cases.append({**case, "lengths": LENGTHS, "batches": run(LENGTHS, case)})
    # The empty input and a one-element input.
    cases.append({"boundaries": [3], "batch_sizes": [2, 2], "lengths": [],
                  "batches": run([], {"boundaries": [3], "batch_sizes": [2, 2]})})
    cases.append({"boundaries": [3], "batch_sizes": [2, 2], "lengths": [5],
                  "batches": run([5], {"boundaries": [3], "batch_sizes": [2, 2]})})
    out = {"tensorflow": tf.__version__, "cases": cases}
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tf_bucket.json")
    with open(path, "w") as f:
        json.dump(out, f, indent=0)
    print(f"wrote {len(cases)} cases to {path}")


if __name__ == "__main__":
    main()
