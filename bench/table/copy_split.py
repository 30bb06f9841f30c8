"""A/B of the gather copy split across threads: ``table.take`` vs numpy fancy indexing over
400 random batches of 256 rows of a 160,000 x 4096 float32 table (2.6 GB, generated under
$BENCH_TMPDIR or a temporary folder, deleted afterwards), in processes that alternate
``STOKEHOLD_COPY_HELPERS=0`` (the caller copies alone) and the default (one helper per other
core). Not a workload of ``bench/run.py``: a probe for the effect of one setting, printed as
medians of 3 passes per process.

    PYTHONPATH=python /path/to/bench/python bench/table/copy_split.py [--pairs 3]
"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

N, W = 160_000, 4096


def child(path):
    import stokehold as sh
    t, mm = sh.open_table(path), np.load(path, mmap_mode="r")
    for s in range(0, N, 1024):  # page cache and both mappings warm
        t.take(np.arange(s, min(N, s + 1024)))
        mm[s:s + 1024].sum()
    ids = np.random.default_rng(7).integers(0, N, size=(400, 256))

    def run(f):
        t0 = time.perf_counter()
        for b in ids:
            f(b)
        return ids.size * W * 4 / (time.perf_counter() - t0) / 1e9
    take, numpy = [], []
    for _ in range(3):
        take.append(run(t.take))
        numpy.append(run(lambda b: mm[b]))
    take, numpy = float(np.median(take)), float(np.median(numpy))
    print(f"helpers={os.environ.get('STOKEHOLD_COPY_HELPERS', 'default'):8} take {take:6.2f} GB/s"
          f"  numpy {numpy:6.2f} GB/s  take/numpy {take / numpy:.2f}", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--child")
    a = ap.parse_args()
    if a.child:
        return child(a.child)
    folder = tempfile.mkdtemp(dir=os.environ.get("BENCH_TMPDIR"), prefix="copy-split-")
    try:
        path = os.path.join(folder, "feat.npy")
        arr = np.lib.format.open_memmap(path, mode="w+", dtype=np.float32, shape=(N, W))
        for s in range(0, N, 4096):
            arr[s:s + 4096] = np.arange(s, min(N, s + 4096), dtype=np.float32)[:, None]
        arr.flush()
        del arr
        for _ in range(a.pairs):
            for helpers in ("0", None):
                env = dict(os.environ)
                env.pop("STOKEHOLD_COPY_HELPERS", None)
                if helpers is not None:
                    env["STOKEHOLD_COPY_HELPERS"] = helpers
                subprocess.run([sys.executable, __file__, "--child", path], env=env, check=True)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
