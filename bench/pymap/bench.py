"""bench/pymap: a Python map function (np.load of a .npy path) on stokehold vs a plain Python loop.

Run from the repository root:
    /work/venvs/bench/bin/python bench/pymap/bench.py [--quick] --json OUT

Issue 17 item 6: the per-element cost of a Python map on stokehold's threads (GIL hand-offs between
worker and consumer, element conversion) should be no more than a plain Python loop's. The same
function, ``np.load(path)``, over the same N paths, padded into batches of 64:

* stokehold: ``from_arrays({"path": paths}).map(f, num_parallel_calls=P).padded_batch(64)``, P =
  None (sequential, in the consumer's thread), 1, 2 and AUTOTUNE;
* torch: ``DataLoader(ds, batch_size=64, num_workers=0, collate_fn=pad)``: the Python loop (a
  DataLoader with worker processes is bench/udf's subject);
* tf.data: ``from_tensor_slices(paths).map(numpy_function(np.load), AUTOTUNE).padded_batch(64)``.

A second workload isolates the cost per element of calling Python: the function returns a
constant 100-float array (no work of its own), so the figures are elements/s of pure overhead
(conversion, GIL hand-offs, batching), stokehold's map against torch's ``num_workers=0`` loop,
beside its two parts each alone (the function in a plain loop; torch's collate).

Each figure is the median of 3 timed epochs after one warm-up epoch (page cache warm for all).
"""

import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from common import rows  # noqa: E402

WL = "Python map (np.load) -> padded_batch(64)"
WL_OVERHEAD = "Python map (constant result) -> padded_batch(64)"
OVERHEAD_N = 50_000


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def make_files(root, n):
    import tempfile

    import numpy as np
    d = Path(tempfile.mkdtemp(prefix="pymap-npy-", dir=root))
    rng = np.random.default_rng(0)
    paths = []
    for i in range(n):
        a = rng.standard_normal(int(rng.integers(2000, 20001)), dtype=np.float32)
        p = d / f"f{i:05d}.npy"
        np.save(p, a)
        paths.append(str(p))
    return paths


def timed(make_iter, epochs, count):
    figs = []
    for e in range(epochs + 1):
        t = time.perf_counter()
        n = sum(count(b) for b in make_iter())
        if e > 0:
            figs.append(n / (time.perf_counter() - t))
    return figs


def stokehold_run(paths, par, epochs, overhead=False):
    import numpy as np

    import stokehold as sh

    const = np.zeros(100, np.float32)

    def load(e):
        if overhead:
            return {"x": const}
        return {"x": np.load(e["path"].item().decode())}

    ds = sh.from_arrays({"path": np.array([p.encode() for p in paths], dtype=object)})
    ds = ds.map(load, num_parallel_calls=par).padded_batch(64)
    return timed(lambda: iter(ds), epochs, lambda b: len(b["x"]))


def pad(items):
    import numpy as np
    n = max(len(a) for a in items)
    out = np.zeros((len(items), n), dtype=items[0].dtype)
    for i, a in enumerate(items):
        out[i, :len(a)] = a
    return out


def torch_run(paths, epochs, overhead=False):
    import numpy as np
    import torch.utils.data as tud

    const = np.zeros(100, np.float32)

    class Files(tud.Dataset):
        def __len__(self):
            return len(paths)

        def __getitem__(self, i):
            return const if overhead else np.load(paths[i])

    dl = tud.DataLoader(Files(), batch_size=64, num_workers=0, collate_fn=pad)
    return timed(lambda: iter(dl), epochs, len)


def tf_run(paths, epochs):
    import numpy as np
    import tensorflow as tf
    ds = tf.data.Dataset.from_tensor_slices(paths)
    ds = ds.map(lambda p: tf.numpy_function(lambda s: np.load(s.decode()), [p], tf.float32),
                num_parallel_calls=tf.data.AUTOTUNE)
    ds = ds.padded_batch(64, padded_shapes=[None]).prefetch(tf.data.AUTOTUNE)
    return timed(lambda: iter(ds), epochs, lambda b: int(b.shape[0]))


def floors(epochs):
    """The constant workload's two parts, each alone: the function called in a plain loop on a
    dict like the one a map gets (what any loader must spend per element), and torch's collate
    (the pad above, in Python) over lists of 64 results, per element: torch's figure is the sum
    of the two and its sampler loop, stokehold's is the call, the element's conversion both ways
    and a native batch."""
    import numpy as np

    const = np.zeros(100, np.float32)

    def load(e):
        return {"x": const}

    e = {"path": np.array(b"/none/0", dtype=object)}
    items = [const] * 64
    call, collate = [], []
    for k in range(epochs + 1):
        t = time.perf_counter()
        for _ in range(OVERHEAD_N):
            load(e)
        mid = time.perf_counter()
        for _ in range(OVERHEAD_N // 64):
            pad(items)
        end = time.perf_counter()
        if k > 0:
            call.append(OVERHEAD_N / (mid - t))
            collate.append(OVERHEAD_N // 64 * 64 / (end - mid))
    c = f"{OVERHEAD_N} elements"
    return [rows.median_row(WL_OVERHEAD, "floor/function alone", c, "throughput", call,
                            "elements/s", note="the function alone in a plain loop: the floor"),
            rows.median_row(WL_OVERHEAD, "floor/torch collate", c, "throughput", collate,
                            "elements/s", note="torch's collate (pad) alone, per element")]


def main():
    args = rows.workload_args(__doc__.splitlines()[0]).parse_args()
    n = 800 if args.quick else 4000
    epochs = 3
    paths = make_files(rows.tmp_root(), n)
    cfg = f"{n} .npy files, 2k-20k float32"
    out = []
    names = [f"/none/{i}" for i in range(OVERHEAD_N)]
    for wl, files, c, unit, overhead in [
        (WL, paths, cfg, "files/s", False),
        (WL_OVERHEAD, names, f"{OVERHEAD_N} elements", "elements/s", True),
    ]:
        figs = torch_run(files, epochs, overhead)
        log(f"{wl}: torch num_workers=0: {figs}")
        out.append(rows.median_row(wl, "torch/num_workers=0", c, "throughput", figs, unit,
                                   params={"parallelism": 1}, note="the plain Python loop"))
        for label, par in [("sequential", None), ("1", 1), ("2", 2), ("autotune", -1)]:
            figs = stokehold_run(files, par, epochs, overhead)
            log(f"{wl}: stokehold P={label}: {figs}")
            system = "stokehold" if label == "autotune" else f"stokehold/P={label}"
            p = {"parallelism": 1 if label == "sequential" else
                 (int(label) if label.isdigit() else "autotune")}
            out.append(rows.median_row(wl, system, c, "throughput", figs, unit, params=p))
    out += floors(epochs)
    try:
        figs = tf_run(paths, epochs)
        log(f"tf.data: {figs}")
        out.append(rows.median_row(WL, "tf.data", cfg, "throughput", figs, "files/s",
                                   params={"parallelism": "autotune"}))
    except ImportError as e:
        out.append(rows.unavailable(WL, "tf.data", cfg, str(e)))
    rows.write_json(args.json, out)
    print(f"machine: {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f} (shared, noisy)")
    for r in out:
        print(f"{r['workload'][:28]:28} {r['system']:24} {r['value'] or 0:10.0f} {r['unit']}")


if __name__ == "__main__":
    main()
