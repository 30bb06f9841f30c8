"""TFRecord scan + parse: 32 shards of tf.train.Examples (int64 label, 512-1536 random bytes,
64 float32s) read into parsed numpy batches of 256, stokehold vs tf.data, side by side.

    python bench/tfrecord/bench.py [--quick] --json OUT     (from the repository root)

Data is generated once into a temp folder (Examples encoded here, byte-for-byte what protobuf
writes for one map entry per feature; framed by stokehold's writer; tf.data reads and parses
every record of it, which checks both), then each
system reads it 3 times in its own process (TensorFlow's thread pools stay out of stokehold's
runs); the median is reported. Full: 500k Examples (~650 MB); --quick: 20k in 8 shards.

Systems:
  stokehold                 stokehold.tfrecord.read_tfrecord: read + parse fused, prefetch(2)
  stokehold/batch+parse     TFRecordDataset -> batch(256) -> parse_examples -> prefetch(2)
  stokehold/interleave      tf.data's recipe below in stokehold: paths -> interleave(TFRecordDataset,
                            AUTOTUNE, num_parallel_calls=AUTOTUNE) -> batch(256) -> parse_examples
                            -> prefetch(2) (records one by one through the interleave's readers)
  tf.data                   list of files -> interleave(TFRecordDataset, AUTOTUNE) -> batch(256)
                            -> map(tf.io.parse_example, AUTOTUNE) -> prefetch(AUTOTUNE),
                            as_numpy_iterator()
MB/s counts the bytes of the TFRecord files read.
"""

import glob
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from common import rows  # noqa: E402

W = "tfrecord scan+parse"
BATCH = 256


def varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def ld(field, payload):
    """A length-delimited protobuf field."""
    return varint(field << 3 | 2) + varint(len(payload)) + payload


def entry(name, feature):
    return ld(1, ld(1, name) + ld(2, feature))


def example(label, data, floats_packed):
    feats = (
        entry(b"label", ld(3, ld(1, varint(label))))
        + entry(b"data", ld(1, ld(1, data)))
        + entry(b"floats", ld(2, ld(1, floats_packed)))
    )
    return ld(1, feats)


def generate(folder, n, shards):
    """Encodes the Examples here and frames them with stokehold's writer (TensorFlow's writer
    takes minutes for 500k records from Python; the check below confirms TF reads the files)."""
    import numpy as np

    import stokehold as sh

    rng = random.Random(20261202)
    floats = np.arange(64, dtype=np.float32) * 0.25
    pool = np.random.default_rng(1).integers(0, 256, 1 << 16, dtype=np.uint8).tobytes()
    per = -(-n // shards)
    for s in range(shards):
        recs = []
        for i in range(s * per, min(n, (s + 1) * per)):
            size = rng.randint(512, 1536)
            start = rng.randrange(len(pool) - size)
            recs.append(example(i, pool[start:start + size], (floats + i).tobytes()))
        src = sh.from_arrays({"record": np.array(recs, dtype=object)})
        (path,) = sh.tfrecord.write_tfrecord(src, folder, prefix=f"part{s:05d}", num_shards=1, index=False)
        os.rename(path, os.path.join(folder, f"train-{s:05d}-of-{shards:05d}.tfrecord"))


def spec_stokehold(sh):
    t = sh.tfrecord
    return {"label": t.FixedLen([], "int64"), "data": t.FixedLen([], "bytes"),
            "floats": t.FixedLen([64], "float32")}


def run_child(system, folder, n):
    files = sorted(glob.glob(os.path.join(folder, "*.tfrecord")))
    if system.startswith("stokehold"):
        import stokehold as sh

        spec = spec_stokehold(sh)
        if system == "stokehold":
            make = lambda: sh.tfrecord.read_tfrecord(files, spec, batch_size=BATCH).prefetch(2)  # noqa: E731
        elif system == "stokehold/interleave":
            import numpy as np

            A = sh.AUTOTUNE
            paths = sh.from_arrays({"path": np.array(files, dtype=object)})
            records = paths.interleave(lambda e: sh.tfrecord.TFRecordDataset(e["path"]),
                                       cycle_length=A, num_parallel_calls=A)
            make = lambda: sh.tfrecord.parse_examples(records.batch(BATCH), spec).prefetch(2)  # noqa: E731
        else:
            make = lambda: sh.tfrecord.parse_examples(  # noqa: E731
                sh.tfrecord.TFRecordDataset(files).batch(BATCH), spec).prefetch(2)
    else:
        import tensorflow as tf

        tf.get_logger().setLevel("ERROR")
        spec = {"label": tf.io.FixedLenFeature([], tf.int64),
                "data": tf.io.FixedLenFeature([], tf.string),
                "floats": tf.io.FixedLenFeature([64], tf.float32)}
        A = tf.data.AUTOTUNE

        def make():
            ds = tf.data.Dataset.from_tensor_slices(files)
            ds = ds.interleave(tf.data.TFRecordDataset, cycle_length=A, num_parallel_calls=A)
            ds = ds.batch(BATCH).map(lambda x: tf.io.parse_example(x, spec), num_parallel_calls=A)
            return ds.prefetch(A).as_numpy_iterator()
    secs = []
    for _ in range(3):
        t = time.perf_counter()
        count = 0
        for b in make():
            count += len(b["label"])
            assert b["floats"].shape[1:] == (64,)
        secs.append(time.perf_counter() - t)
        if count != n:
            raise SystemExit(f"{system} read {count} records, expected {n}")
    print(json.dumps(secs))


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        run_child(sys.argv[2], sys.argv[3], int(sys.argv[4]))
        return
    args = rows.workload_args(__doc__.splitlines()[0]).parse_args()
    n, shards = (20_000, 8) if args.quick else (500_000, 32)
    config = f"{shards} shards, {n} Examples, batch {BATCH}"
    folder = tempfile.mkdtemp(prefix="tfrecord-bench-", dir=rows.tmp_root())
    out = []
    try:
        t = time.perf_counter()
        generate(folder, n, shards)
        total = sum(os.path.getsize(f) for f in glob.glob(os.path.join(folder, "*.tfrecord")))
        print(f"generated {n} records, {total / 1e6:.0f} MB in {time.perf_counter() - t:.0f} s",
              file=sys.stderr)
        for system in ["stokehold", "stokehold/batch+parse", "stokehold/interleave", "tf.data"]:
            p = subprocess.run([sys.executable, __file__, "--child", system, folder, str(n)],
                               capture_output=True, text=True)
            if p.returncode != 0:
                why = (p.stderr.strip().splitlines() or ["failed"])[-1][:300]
                out.append(rows.unavailable(W, system, config, why))
                print(f"{system}: {why}", file=sys.stderr)
                continue
            secs = json.loads(p.stdout.strip().splitlines()[-1])
            print(f"{system}: {[round(s, 2) for s in secs]} s", file=sys.stderr)
            out.append(rows.median_row(W, system, config, "throughput", [n / s for s in secs],
                                       "records/s"))
            out.append(rows.median_row(W, system, config, "bandwidth",
                                       [total / s / 1e6 for s in secs], "MB/s"))
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    rows.write_json(args.json, out)
    for r in out:
        print(f"{r['system']:<24} {r['metric']:<10} {r['value'] or 0:>12.0f} {r['unit']}")


if __name__ == "__main__":
    main()
