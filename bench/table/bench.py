"""Feature-table gather: captions look their image's feature row up in a table, batch 256.

Full size (the issue's case): a 160,000 x 4096 float32 table (2.6 GB, one .npy file generated
into a temporary folder outside the repository and deleted afterwards) and 800,000 caption rows
(five per image) referencing it, shuffled. Each system gathers the rows of the same number of
batches; three timed runs cover consecutive thirds of one epoch, interleaved across systems
(run 1 of every system, then run 2, ...) so that machine noise hits all alike; figures are
medians.

Systems:
  stokehold          stokehold.open_table + from_arrays(captions).shuffle().batch(256).gather()
                     (stokehold/prefetch(2): the same with .prefetch(2): with no training step
                     to overlap, a prefetch thread only adds a hand-off on 2 busy cores)
  stokehold/take     table.take(ids) per batch (the direct API, like numpy fancy indexing)
  numpy              np.load(path, mmap_mode='r')[ids] per batch
  memcpy             np.copyto of contiguous 256-row blocks of the same mapping: the same
                     bytes copied with no gather (this machine's limit)
  tf.data            from_tensor_slices(table) is tried and its outcome recorded; the
                     throughput is that of the usual workaround, tf.numpy_function over the
                     numpy memmap inside a map (AUTOTUNE parallel calls and prefetch)

Every system first reads the whole table once so that the file is in the page cache and its
own mapping is faulted in: the figures are steady-state gather speed, not disk speed.
"""

import gc
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402
import peers  # noqa: E402  (Grain, SPDL, dataloader-rs: bench/peers/)
from common import rows  # noqa: E402

W = "table gather"
BATCH = 256
SEED = 7


def sizes(quick):
    # (images, row width, captions); five captions per image as in the example.
    return (20_000, 4096, 100_000) if quick else (160_000, 4096, 800_000)


def make_table(folder, n, width):
    """A .npy table where row i holds i + j / width (checked by the gather checks below)."""
    path = os.path.join(folder, "features.npy")
    a = np.lib.format.open_memmap(path, mode="w+", dtype=np.float32, shape=(n, width))
    col = np.arange(width, dtype=np.float32) / width
    step = 2048
    for s in range(0, n, step):
        e = min(n, s + step)
        a[s:e] = np.arange(s, e, dtype=np.float32)[:, None] + col
    a.flush()
    del a
    return path


def caption_ids(n_captions, n_images):
    ids = (np.arange(n_captions) * n_images // n_captions).astype(np.int64)
    return ids, np.random.default_rng(SEED).permutation(ids)


def warm(take, n):
    """Reads every row once through `take` (page cache + this system's mapping)."""
    for s in range(0, n, 1024):
        take(np.arange(s, min(n, s + 1024)))


def checker(n_images, width):
    def check(batch_ids_and_rows):
        ids, feats = batch_ids_and_rows
        want = ids.astype(np.float32)[:, None] + np.arange(width, dtype=np.float32) / width
        assert feats.shape == (len(ids), width) and np.array_equal(feats, want), "wrong rows"
    return check


class Batches:
    """Adapts a generator of (ids, rows) to the timer: len() is the row count."""

    def __init__(self, gen):
        self.gen = gen

    def __iter__(self):
        return self

    def __next__(self):
        ids, feats = next(self.gen)
        return _Sized((ids, feats))


class _Sized(tuple):
    def __len__(self):
        return len(self[0])


def numpy_systems(path, shuffled, check):
    """{name: (batch iterator, check)} for numpy fancy indexing and the memcpy limit."""
    mm = np.load(path, mmap_mode="r")
    warm(lambda i: mm[i], mm.shape[0])
    out = np.empty((BATCH, mm.shape[1]), dtype=mm.dtype)
    n = mm.shape[0] // BATCH

    def gather():
        for s in range(0, len(shuffled), BATCH):
            ids = shuffled[s:s + BATCH]
            yield ids, mm[ids]

    def memcpy():
        k = 0
        while True:
            s = (k % n) * BATCH
            np.copyto(out, mm[s:s + BATCH])
            k += 1
            yield shuffled[:BATCH], out
    return {"numpy": (Batches(gather()), check), "memcpy": (Batches(memcpy()), None)}


def stokehold_systems(path, ids, check):
    """{name: (batch iterator, check)} for the pipeline (with and without prefetch) and take."""
    import stokehold
    table = stokehold.open_table(path)
    warm(table.take, len(table))
    pipe = (stokehold.from_arrays({"image_id": ids}).shuffle(seed=SEED).batch(BATCH)
            .gather(table, index_feature="image_id", out="features"))

    def run(ds):
        for b in ds:
            yield b["image_id"], b["features"]
    shuffled = np.random.default_rng(SEED).permutation(ids)

    def take():
        for s in range(0, len(shuffled), BATCH):
            i = shuffled[s:s + BATCH]
            yield i, table.take(i)
    return {"stokehold": (Batches(run(pipe)), check),
            "stokehold/prefetch(2)": (Batches(run(pipe.prefetch(2))), check),
            "stokehold/take": (Batches(take()), check)}


def interleaved(systems, per_run, runs):
    """Runs r of every system back to back, then runs r+1: machine noise hits all alike."""
    out = {name: [] for name in systems}
    for r in range(runs):
        for name, (it, check) in systems.items():
            n = 0
            t = time.perf_counter()
            for _ in range(per_run):
                b = next(it)
                n += len(b)
            out[name].append(n / (time.perf_counter() - t))
            if check:
                check(tuple(b))
        print(f"run {r + 1}/{runs} done", file=sys.stderr)
    return out


def tf_worker(path, n_captions, n_images, per_run, runs, out):
    """Runs in its own process (TensorFlow's import and threads stay out of the others)."""
    import tensorflow as tf
    mm = np.load(path, mmap_mode="r")
    res, ds = {}, None
    t = time.perf_counter()
    try:
        ds = tf.data.Dataset.from_tensor_slices(mm)
        next(iter(ds))
        res["slices"] = f"succeeded in {time.perf_counter() - t:.1f} s (copies the table into memory)"
    except Exception as e:  # noqa: BLE001 - the message is the result
        res["slices"] = f"{type(e).__name__}: {str(e).strip().splitlines()[0][:300]}"
    del ds
    gc.collect()
    _, shuffled = caption_ids(n_captions, n_images)
    warm(lambda i: mm[i], mm.shape[0])
    width = mm.shape[1]
    ds = (tf.data.Dataset.from_tensor_slices(shuffled).batch(BATCH)
          .map(lambda i: (i, tf.numpy_function(lambda x: mm[x], [i], tf.float32)),
               num_parallel_calls=tf.data.AUTOTUNE)
          .prefetch(tf.data.AUTOTUNE))

    def gen():
        for i, f in ds:
            yield i.numpy(), f.numpy().reshape(len(i), width)
    runs_ = interleaved({"tf": (Batches(gen()), checker(n_images, width))}, per_run, runs)
    res["runs"] = runs_["tf"]
    with open(out, "w") as f:
        json.dump(res, f)


def main():
    p = rows.workload_args(__doc__)
    p.add_argument("--tf-worker", nargs=6, help=argparse_hidden())
    args = p.parse_args()
    if args.tf_worker:
        path, nc, ni, per_run, runs, out = args.tf_worker
        return tf_worker(path, int(nc), int(ni), int(per_run), int(runs), out)
    n_images, width, n_captions = sizes(args.quick)
    runs = 3
    per_run = n_captions // BATCH // runs
    folder = tempfile.mkdtemp(dir=rows.tmp_root(), prefix="table-")
    try:
        print(f"generating {n_images} x {width} float32 in {folder}", file=sys.stderr)
        path = make_table(folder, n_images, width)
        ids, shuffled = caption_ids(n_captions, n_images)
        check = checker(n_images, width)
        row_bytes = width * 4
        cfg = f"{n_images} x {width} float32 ({n_images * row_bytes / 1e9:.1f} GB), {n_captions} captions, batch {BATCH}"
        results, systems = {}, {}
        try:
            systems.update(stokehold_systems(path, ids, check))
        except ImportError as e:
            results["stokehold"] = f"stokehold not importable: {e}"
        systems.update(numpy_systems(path, shuffled, check))
        results.update(interleaved(systems, per_run, runs))
        del systems
        gc.collect()
        tf_note = None
        tf_out = os.path.join(folder, "tf.json")
        cmd = [sys.executable, __file__, "--json", tf_out, "--tf-worker", path, str(n_captions),
               str(n_images), str(per_run), str(runs), tf_out]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode == 0:
            tf = json.load(open(tf_out))
            results["tf.data/numpy_function"] = tf["runs"]
            tf_note = f"from_tensor_slices(table): {tf['slices']}"
        else:
            results["tf.data/numpy_function"] = f"worker failed: {proc.stderr.strip()[-300:]}"
        print("tf.data done", file=sys.stderr)
        results.update(peers.gather_runs(path, n_captions, n_images, per_run, runs, BATCH, SEED))
        out = []
        for system, r in results.items():
            if isinstance(r, str):
                out.append(rows.unavailable(W, system, cfg, r))
                continue
            note = tf_note if system.startswith("tf.data") else None
            note = peers.NOTES.get(system, note)
            if system == "memcpy":
                note = "np.copyto of contiguous 256-row blocks of the mapped table: no gather"
            out.append(rows.median_row(W, system, cfg, "throughput", r, "rows/s", note=note))
            out.append(rows.median_row(W, system, cfg, "bandwidth", [x * row_bytes / 1e9 for x in r], "GB/s"))
        if tf_note:
            out.append(rows.row(W, "tf.data", cfg, "from_tensor_slices(table)", None, "", note=tf_note))
        rows.write_json(args.json, out)
        for r in out:
            print(f"{r['system']:24} {r['metric']:12} {r['value'] if r['value'] is None else round(r['value'], 2)!s:>12} {r['unit']} {r.get('note', '')}")
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def argparse_hidden():
    import argparse
    return argparse.SUPPRESS


if __name__ == "__main__":
    main()
