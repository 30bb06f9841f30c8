"""bench/handoff: what the training loop pays per batch: taking a ready batch, and letting go of a big one.

Run from the repository root with the bench venv's python:
    PYTHONPATH=$PWD/python /work/venvs/bench/bin/python bench/handoff/bench.py [--quick] --json OUT

Issue 17 item 3. Two measurements, each system in the same process (tf.data last, so that its
import cannot change stokehold's allocator state):

* hand-off: ``next()`` on an iterator whose next batch is already in the prefetch buffer, with a
  busy consumer: between two ``next()`` calls the loop spins (holding the GIL, like Python-side
  training code) for 2 ms or 20 ms, time enough for the producer to refill the buffer. Batches of
  256 parsed tf.train.Examples (an int64 label, 64 float32, 16 int64 ids) from TFRecord files:
  stokehold ``read_tfrecord(files, spec, 256).prefetch(8)``; tf.data ``TFRecordDataset ->
  batch(256) -> map(parse_example) -> prefetch(8)``, its tensors converted with ``.numpy()`` (what
  a numpy / torch consumer does; the row without the conversion too). The **numpy floor** is the
  least any loader can cost: the same batch's three arrays made by ``np.frombuffer`` from bytes
  already in memory, into a dict, with the same pause between batches (a floor timed in a tight
  loop, 2 µs, is not one a paused consumer can reach: after 20 ms of other work the floor itself
  costs tens of µs). Figure: the median of every ``next()`` of 3 epochs, in µs.
* release: ``del batch`` of a batch of 32 x 10x512x512 float16 (168 MB): stokehold
  ``from_arrays(x).batch(32)``, tf.data ``from_tensor_slices(x).batch(32)``, and numpy's own
  ``del`` of an array of that size (filled first). stokehold's ``del`` hands a batch numpy owned
  alone to its reuse pool (``core/src/alloc.rs``). A loader whose buffers are 4 KiB pages pays a
  page unmap per 4 KiB here, on the consumer's thread, every batch. Figure: the median of every
  ``del`` of 3 epochs, in ms.
"""

import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from common import rows  # noqa: E402

WL_HAND = "hand-off of a ready batch (TFRecord, batch 256)"
WL_REL = "release of a large batch (32 x 10x512x512 float16)"
BATCH = 256
EPOCHS = 3


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def spin(seconds):
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def write_records(root, n):
    import numpy as np

    import stokehold as sh
    rng = np.random.default_rng(0)
    ds = sh.from_arrays({
        "label": rng.integers(0, 1000, n),
        "x": rng.standard_normal((n, 64), dtype=np.float32),
        "ids": rng.integers(0, 1 << 40, (n, 16)),
    })
    return sh.tfrecord.write_tfrecord(ds, Path(root) / "tf", num_shards=4)


def time_next(make_iter, pause, convert=None):
    """Every next() of EPOCHS epochs, µs; the consumer spins `pause` s between calls."""
    out = []
    for _ in range(EPOCHS):
        it = make_iter()
        spin(0.05)  # let the prefetch buffer fill before the first call
        while True:
            t0 = time.perf_counter()
            try:
                b = next(it)
            except StopIteration:
                break
            if convert is not None:
                b = convert(b)
            out.append((time.perf_counter() - t0) * 1e6)
            del b
            spin(pause)
    return out


def numpy_floor(n_batches, pause):
    """np.frombuffer of one batch's three features, into a dict, per batch: µs; the consumer
    spins ``pause`` s between batches, as in ``time_next`` (after a long pause the interpreter's
    and numpy's code and data are colder: the floor rises with the pause, measured the same way
    for both)."""
    import numpy as np
    raw = [(np.arange(BATCH, dtype=np.int64).tobytes(), np.zeros((BATCH, 64), np.float32).tobytes(),
            np.zeros((BATCH, 16), np.int64).tobytes()) for _ in range(n_batches)]
    out = []
    for _ in range(EPOCHS):
        for lab, x, ids in raw:
            t0 = time.perf_counter()
            b = {"label": np.frombuffer(lab, np.int64),
                 "x": np.frombuffer(x, np.float32).reshape(BATCH, 64),
                 "ids": np.frombuffer(ids, np.int64).reshape(BATCH, 16)}
            out.append((time.perf_counter() - t0) * 1e6)
            del b
            spin(pause)
    return out


def time_del(make_iter):
    """Every `del batch` of EPOCHS epochs, ms (after a pause, so no producer work overlaps)."""
    out = []
    for _ in range(EPOCHS):
        for b in make_iter():
            time.sleep(0.05)
            t0 = time.perf_counter()
            del b
            out.append((time.perf_counter() - t0) * 1e3)
    return out


def main():
    args = rows.workload_args(__doc__.splitlines()[0]).parse_args()
    import numpy as np

    import stokehold as sh
    root = tempfile.mkdtemp(prefix="handoff-", dir=os.environ.get("BENCH_TMPDIR"))
    n = 8192 if args.quick else 32768
    files = write_records(root, n)
    spec = {"label": sh.tfrecord.FixedLen([], "int64"), "x": sh.tfrecord.FixedLen([64], "float32"),
            "ids": sh.tfrecord.FixedLen([16], "int64")}
    config = f"{n} Examples in 4 files, batch {BATCH}, prefetch 8"
    out = []
    ds = sh.tfrecord.read_tfrecord(files, spec, BATCH).prefetch(8)
    pauses = (0.002, 0.02)
    stoke = {p: time_next(lambda: iter(ds), p) for p in pauses}
    floors = {p: numpy_floor(n // BATCH, p) for p in pauses}

    frames, shape = (96, (10, 512, 512)) if not args.quick else (64, (10, 512, 512))
    x = np.ones((frames, *shape), dtype=np.float16)
    rel_config = f"{frames} x {'x'.join(map(str, shape))} float16, batch 32 ({32 * x[0].nbytes / 1e6:.0f} MB)"
    big = sh.from_arrays({"x": x}).batch(32)
    stoke_del = time_del(lambda: iter(big))
    np_del = []
    for _ in range(EPOCHS * (frames // 32)):
        a = np.empty((32, *shape), np.float16)
        a.fill(1)
        t0 = time.perf_counter()
        del a
        np_del.append((time.perf_counter() - t0) * 1e3)

    tf_rows = {}
    try:
        import tensorflow as tf
        feats = {"label": tf.io.FixedLenFeature([], tf.int64),
                 "x": tf.io.FixedLenFeature([64], tf.float32),
                 "ids": tf.io.FixedLenFeature([16], tf.int64)}
        tds = (tf.data.TFRecordDataset(files).batch(BATCH)
               .map(lambda r: tf.io.parse_example(r, feats)).prefetch(8))
        for p in pauses:
            tf_rows[p] = (time_next(lambda: iter(tds), p),
                          time_next(lambda: iter(tds), p, lambda b: {k: v.numpy() for k, v in b.items()}))
        tbig = tf.data.Dataset.from_tensor_slices(x).batch(32)
        tf_del = time_del(lambda: iter(tbig))
    except ImportError as e:
        tf_del, why = None, f"tensorflow not importable here: {e}"

    for p in pauses:
        cfg = f"{config}, consumer busy {p * 1e3:g} ms per step"
        f = rows.median_row(WL_HAND, "numpy floor", cfg, "per batch", floors[p], "µs",
                            better="lower", note="np.frombuffer x3 into a dict, the same pause")
        s = rows.median_row(WL_HAND, "stokehold", cfg, "per batch", stoke[p], "µs", better="lower")
        s["note"] = f"{s['value'] - f['value']:+.0f} µs over the numpy floor (goal <= +20)"
        out += [s, f]
        if p in tf_rows:
            raw, conv = tf_rows[p]
            out.append(rows.median_row(WL_HAND, "tf.data+numpy", cfg, "per batch", conv, "µs",
                                       better="lower", note="next() and .numpy() of each tensor"))
            out.append(rows.median_row(WL_HAND, "tf.data", cfg, "per batch", raw, "µs",
                                       better="lower", note="next() only: TF tensors"))
        else:
            out.append(rows.unavailable(WL_HAND, "tf.data", cfg, why))
    out.append(rows.median_row(WL_REL, "stokehold", rel_config, "del batch", stoke_del, "ms",
                               better="lower"))
    out.append(rows.median_row(WL_REL, "numpy", rel_config, "del batch", np_del, "ms",
                               better="lower", note="np.empty + fill, then del: numpy's own floor"))
    if tf_del is not None:
        out.append(rows.median_row(WL_REL, "tf.data", rel_config, "del batch", tf_del, "ms",
                                   better="lower"))
    else:
        out.append(rows.unavailable(WL_REL, "tf.data", rel_config, why))
    rows.write_json(args.json, out)
    for r in out:
        v = r["value"]
        log(f"{r['workload'][:28]:28} {r['system']:14} {r['config'][-28:]:28} "
            f"{'-' if v is None else f'{v:10.1f}'} {r['unit']}  {r.get('note', '')}")


if __name__ == "__main__":
    main()
