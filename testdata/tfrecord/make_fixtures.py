"""Makes the TFRecord fixtures with TensorFlow itself, and checks files that stokehold wrote.

    /work/venv-bench/bin/python testdata/tfrecord/make_fixtures.py          # (re)write fixtures
    /work/venv-bench/bin/python testdata/tfrecord/make_fixtures.py --check DIR

Fixtures (all from the same 24 examples, see `examples()`):
  plain.tfrecord, gzip.tfrecord.gz, zlib.tfrecord.zz   tf.io.TFRecordWriter, NONE / GZIP / ZLIB
  raw.tfrecord                                         raw records (not Examples), lengths 0..4096
  expected.json                                        every value, for the Rust tests to compare
Floats are stored in expected.json as their float32 bit patterns, so the comparison is exact.

--check DIR reads DIR/{plain.tfrecord, gzip.tfrecord.gz, zlib.tfrecord.zz} (written by the
stokehold test `tfrecord_interop::write_for_tf_check`) and DIR/raw.tfrecord with tf.data and
compares every value with examples() / raw_records().
"""
import json
import os
import random
import struct
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
N = 24


def examples():
    rng = random.Random(20261202)
    out = []
    for i in range(N):
        out.append({
            "label": [i * 1000 - 7 if i % 5 else -(2 ** 62) + i],
            "floats": [np.float32(rng.uniform(-1e3, 1e3)) for _ in range(4)],
            "data": [bytes(rng.randrange(256) for _ in range(rng.randrange(0, 300)))],
            "ids": [rng.randrange(-10**12, 10**12) for _ in range(rng.randrange(0, 6))],
            "tags": [("t%d" % rng.randrange(100)).encode() * rng.randrange(1, 4)
                     for _ in range(rng.randrange(0, 4))],
        })
    return out


def raw_records():
    rng = random.Random(7)
    lengths = [0, 1, 2, 11, 12, 16, 255, 256, 1000, 4096]
    return [bytes(rng.randrange(256) for _ in range(n)) for n in lengths]


def to_tf(ex):
    f = tf.train.Feature
    return tf.train.Example(features=tf.train.Features(feature={
        "label": f(int64_list=tf.train.Int64List(value=ex["label"])),
        "floats": f(float_list=tf.train.FloatList(value=ex["floats"])),
        "data": f(bytes_list=tf.train.BytesList(value=ex["data"])),
        "ids": f(int64_list=tf.train.Int64List(value=ex["ids"])),
        "tags": f(bytes_list=tf.train.BytesList(value=ex["tags"])),
    }))


FILES = [("plain.tfrecord", ""), ("gzip.tfrecord.gz", "GZIP"), ("zlib.tfrecord.zz", "ZLIB")]


def bits(x):
    return struct.unpack("<I", struct.pack("<f", float(x)))[0]


def write():
    exs = examples()
    for name, comp in FILES:
        with tf.io.TFRecordWriter(os.path.join(HERE, name), options=comp) as w:
            for ex in exs:
                w.write(to_tf(ex).SerializeToString())
    with tf.io.TFRecordWriter(os.path.join(HERE, "raw.tfrecord")) as w:
        for r in raw_records():
            w.write(r)
    expected = {
        "examples": [{
            "label": ex["label"],
            "floats_bits": [bits(x) for x in ex["floats"]],
            "data": [d.hex() for d in ex["data"]],
            "ids": ex["ids"],
            "tags": [t.hex() for t in ex["tags"]],
        } for ex in exs],
        "raw": [r.hex() for r in raw_records()],
    }
    with open(os.path.join(HERE, "expected.json"), "w") as f:
        json.dump(expected, f, indent=0)
    print("wrote fixtures to", HERE)


SPEC = {
    "label": tf.io.FixedLenFeature([], tf.int64),
    "floats": tf.io.FixedLenFeature([4], tf.float32),
    "data": tf.io.FixedLenFeature([], tf.string),
    "ids": tf.io.VarLenFeature(tf.int64),
    "tags": tf.io.VarLenFeature(tf.string),
}


def check(d):
    exs = examples()
    failures = 0
    for name, comp in FILES:
        path = os.path.join(d, name)
        ds = tf.data.TFRecordDataset([path], compression_type=comp)
        got = [tf.io.parse_single_example(r, SPEC) for r in ds]
        ok = len(got) == len(exs)
        for g, ex in zip(got, exs):
            ok &= int(g["label"]) == ex["label"][0]
            ok &= [bits(x) for x in g["floats"].numpy()] == [bits(x) for x in ex["floats"]]
            ok &= g["data"].numpy() == ex["data"][0]
            ok &= list(tf.sparse.to_dense(g["ids"]).numpy()) == ex["ids"]
            ok &= list(tf.sparse.to_dense(g["tags"]).numpy()) == ex["tags"]
        print(f"{name}: TF read {len(got)} records written by stokehold, values "
              f"{'all equal' if ok else 'DIFFER'}")
        failures += not ok
    raw = [r.numpy() for r in tf.data.TFRecordDataset([os.path.join(d, "raw.tfrecord")])]
    ok = raw == raw_records()
    print(f"raw.tfrecord: TF read {len(raw)} raw records, {'all equal' if ok else 'DIFFER'}")
    failures += not ok
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--check":
        check(sys.argv[2])
    else:
        write()
